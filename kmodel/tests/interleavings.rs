//! Exhaustive interleavings: every placement of one injected action (an NMI
//! that requests for some tracer, or a cancel), and of pairs of them, at
//! every interleaving point the deferred-unwind code reaches, on 1–2 CPUs
//! with 2–3 tracers, with and without exit. Every invariant is checked
//! after every step; the count of interleavings explored is printed.

mod support;

use std::cell::RefCell;
use std::rc::Rc;

use kmodel::arch::Arch;
use kmodel::event::EntryReason;
use kmodel::interleave::Point;
use kmodel::kernel::{ExitPath, Kernel, KernelOptions, KernelVersion, WorkId};
use kmodel::memory::PagedMemory;
use support::fp_stack;

#[derive(Debug, Clone, Copy)]
enum Action {
    Nmi(usize),
    Cancel(usize),
}

#[derive(Debug, Clone, Copy)]
struct Config {
    cpus: usize,
    tracers: usize,
    second_request: bool,
    migrate: bool,
    exit: bool,
    version: KernelVersion,
}

/// Runs the scenario with `actions` injected at the given point hits;
/// returns (points reached, violations, actions actually injected).
fn run(cfg: Config, actions: &[(usize, Action)]) -> (usize, Vec<String>, usize) {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mem = Rc::new(mem);
    let mut k = Kernel::new(KernelOptions {
        cpus: cfg.cpus,
        version: cfg.version,
        exit_path: ExitPath::Upstream,
        ..KernelOptions::default()
    });
    k.check = true;
    let works: Vec<WorkId> = (0..cfg.tracers).map(|i| k.unwind_deferred_init(&format!("t{i}")).0).collect();
    let mm = k.new_mm(Arch::X86_64);
    let t = k.spawn("task", mm, 0);
    let hits = Rc::new(RefCell::new(0usize));
    let injected = Rc::new(RefCell::new(0usize));
    {
        let (hits, injected, mem, works) = (hits.clone(), injected.clone(), mem.clone(), works.clone());
        let actions = actions.to_vec();
        k.set_interleaver(Some(Box::new(move |k: &mut Kernel, cpu: usize, _p: Point| {
            let n = *hits.borrow();
            *hits.borrow_mut() += 1;
            for &(at, action) in &actions {
                if at == n {
                    *injected.borrow_mut() += 1;
                    match action {
                        Action::Nmi(i) => {
                            k.nmi_request(cpu, works[i], None, &*mem);
                        }
                        Action::Cancel(i) => k.unwind_deferred_cancel(works[i]),
                    }
                }
            }
        })));
    }
    let m: &PagedMemory = &mem;
    k.enter(t, EntryReason::Syscall, regs.clone(), m);
    k.unwind_deferred_request(0, works[0]);
    if cfg.second_request {
        k.unwind_deferred_request(0, works[1]);
    }
    if cfg.migrate {
        k.sleep(t);
        k.migrate(t, cfg.cpus - 1);
        k.wake(t);
    }
    if cfg.exit {
        k.exit(t, 0, m);
    } else {
        k.return_to_user(t, m);
        // One more system call, from a later user state, flushes anything an
        // NMI left behind (and shows which stack it then delivers).
        let mut later = regs.clone();
        later.pc += 0x100;
        k.enter(t, EntryReason::Syscall, later, m);
        k.return_to_user(t, m);
    }
    k.set_interleaver(None);
    let hits = *hits.borrow();
    let injected = *injected.borrow();
    let violations = k.take_violations().into_iter().map(|v| v.to_string()).collect();
    (hits, violations, injected)
}

fn configs(version: KernelVersion) -> Vec<Config> {
    let mut out = Vec::new();
    for cpus in [1, 2] {
        for tracers in [2, 3] {
            for second_request in [false, true] {
                for exit in [false, true] {
                    let migrate = cpus == 2;
                    out.push(Config { cpus, tracers, second_request, migrate, exit, version });
                }
            }
        }
    }
    out
}

fn actions(cfg: &Config) -> Vec<Action> {
    (0..cfg.tracers).map(Action::Nmi).chain((0..cfg.tracers).map(Action::Cancel)).collect()
}

#[test]
fn every_single_and_paired_placement_keeps_every_invariant() {
    let mut explored = 0usize;
    for cfg in configs(KernelVersion::V6_19) {
        let (points, violations, _) = run(cfg, &[]);
        assert!(violations.is_empty(), "{cfg:?}: {violations:?}");
        let acts = actions(&cfg);
        for at in 0..points + 1 {
            for &a in &acts {
                let (_, violations, _) = run(cfg, &[(at, a)]);
                explored += 1;
                assert!(violations.is_empty(), "{cfg:?} {a:?} at hit {at}:\n{}", violations.join("\n"));
            }
        }
        // Pairs: a second action at a later hit (its own NMI's points count).
        for at1 in 0..points {
            for at2 in at1 + 1..points + 4 {
                for &a1 in &acts {
                    for &a2 in &acts {
                        let (_, violations, _) = run(cfg, &[(at1, a1), (at2, a2)]);
                        explored += 1;
                        assert!(violations.is_empty(), "{cfg:?} {a1:?}@{at1} {a2:?}@{at2}:\n{}", violations.join("\n"));
                    }
                }
            }
        }
    }
    println!("explored {explored} interleavings");
    assert!(explored > 10_000, "explored only {explored}");
}

/// v6.17 requested from NMI with TWA_RESUME: an NMI after the reset but
/// before the return to user leaves its work for a later entry, whose stack
/// is then delivered under the earlier cookie (§3 case 5). The model finds
/// exactly that, and only that.
#[test]
fn v6_17_nmi_after_reset_is_the_only_unsafe_placement() {
    let mut unsafe_points = std::collections::BTreeSet::new();
    for cfg in configs(KernelVersion::V6_17).into_iter().filter(|c| !c.exit) {
        let (points, _, _) = run(cfg, &[]);
        for at in 0..points + 1 {
            for i in 0..cfg.tracers {
                let (_, violations, injected) = run(cfg, &[(at, Action::Nmi(i))]);
                if !violations.is_empty() {
                    assert_eq!(injected, 1);
                    unsafe_points.insert(at);
                    assert!(violations.iter().all(|v| v.contains("B6") || v.contains("B4")), "{violations:?}");
                }
            }
        }
    }
    assert!(!unsafe_points.is_empty(), "the v6.17 race was not found");
}

/// The stale-snapshot hazard (§4, derived): a tracer cancelled and another
/// registered, taking its bit, while the handler unwinds: the new tracer is
/// called although it never asked. The checker reports it as B2.
#[test]
fn cancel_and_reregister_during_the_unwind_is_caught_as_b2() {
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let mem = Rc::new(mem);
    let mut k = Kernel::new(KernelOptions::default());
    k.check = true;
    let (a, _) = k.unwind_deferred_init("a");
    let mm = k.new_mm(Arch::X86_64);
    let t = k.spawn("task", mm, 0);
    k.set_interleaver(Some(Box::new(move |k: &mut Kernel, _cpu: usize, p: Point| {
        if p == Point::HandlerAfterUnwind {
            k.unwind_deferred_cancel(a);
            let (b, _) = k.unwind_deferred_init("b");
            assert_eq!(k.works[b.0].bit, 2, "b reuses a's bit");
            k.set_interleaver(None);
        }
    })));
    k.enter(t, EntryReason::Syscall, regs, &*mem);
    k.unwind_deferred_request(0, a);
    k.return_to_user(t, &*mem);
    let violations = k.take_violations();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].invariant, "B2");
    assert!(violations[0].detail.contains("stale"));
}
