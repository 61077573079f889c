//! Interleavings on the kernel's own code: every primitive of the kernel's
//! `deferred.c` (each atomic, bit operation, task_work call, SRCU, mutex
//! and RCU operation, list step and user read: the shim's sites) is a
//! preemption point. At every point a run reaches, one action is placed: an
//! NMI on that CPU requesting for a tracer, or another CPU's
//! `unwind_deferred_cancel()` of a tracer (on a thread of its own, so it
//! blocks in `synchronize_srcu()` exactly where the kernel would) or
//! `unwind_deferred_init()` of a new one, which then requests. Every run
//! is checked with the model's invariants (on the code's mirrored state)
//! and its observable outcome — the requests' values and cookies, the
//! callbacks with their cookies and stack depths — is compared with the
//! outcomes the model produces with the same action at each of its points.
//! The counts of placements explored, per kernel function, are printed.

#[path = "../../kmodel/tests/support/mod.rs"]
mod support;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use kmodel::arch::Arch;
use kmodel::event::{EntryReason, EventKind};
use kmodel::interleave::Point;
use kmodel::kernel::Kernel;
use kmodel::memory::PagedMemory;
use kmodel::types::{ExitPath, KernelOptions, WorkId};
use kmodel::unwind::{Method, UnwindConfig};
use support::stack::fp_stack;
use support::{task, without_perf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    Nmi(usize),
    Cancel(usize),
    Init,
}

#[derive(Debug, Clone, Copy)]
struct Config {
    cpus: usize,
    tracers: usize,
    second_request: bool,
    exit: bool,
}

fn options(cfg: Config) -> KernelOptions {
    KernelOptions {
        cpus: cfg.cpus,
        exit_path: ExitPath::Upstream,
        unwind: UnwindConfig { order: vec![Method::Fp], ..UnwindConfig::default() },
        ..without_perf()
    }
}

fn new_kernel(cfg: Config, c: bool) -> Kernel {
    let mut k = if c {
        let backend = kupstream::load(None, true).unwrap_or_else(|e| panic!("{e}"));
        Kernel::with_backend(options(cfg), backend as Arc<dyn kmodel::backend::DeferredBackend>).expect("options")
    } else {
        Kernel::new(options(cfg))
    };
    k.set_checks(true);
    k
}

/// What one run shows from outside: requests (tracer, value, cookie) and
/// callbacks (tracer, cookie, entries).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Observed {
    requests: Vec<(usize, i32, u64)>,
    callbacks: Vec<(usize, u64, usize)>,
}

/// One run with `action` placed at the `at`-th point reached; the points
/// reached (each named by its kernel function), and what was observed.
fn run(cfg: Config, c: bool, placed: Option<(usize, Action)>) -> (Vec<String>, Observed, BTreeSet<String>) {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mem = Rc::new(mem);
    let mut k = new_kernel(cfg, c);
    let works: Vec<WorkId> = (0..cfg.tracers).map(|i| k.unwind_deferred_init(&format!("t{i}")).0).collect();
    let t = task(&mut k, 0);
    let points: Rc<RefCell<Vec<String>>> = Rc::default();
    {
        let (points, mem, works) = (points.clone(), mem.clone(), works.clone());
        let mut fresh: Vec<WorkId> = Vec::new();
        k.set_interleaver(Some(Box::new(move |k: &mut Kernel, cpu: usize, p: Point| {
            let n = points.borrow().len();
            points.borrow_mut().push(match p {
                Point::Upstream(site) => site.func.to_string(),
                other => format!("{}: {other:?}", other.operation()),
            });
            for work in std::mem::take(&mut fresh) {
                if k.init_waiting(work) {
                    fresh.push(work);
                } else {
                    k.nmi_request(cpu, work, None, &*mem);
                }
            }
            match placed {
                // NMIs strike task context only (an NMI does not nest).
                Some((at, Action::Nmi(i))) if at == n && !k.in_nmi(cpu) => {
                    k.nmi_request(cpu, works[i], None, &*mem);
                }
                Some((at, Action::Cancel(i))) if at == n => k.unwind_deferred_cancel(works[i]),
                Some((at, Action::Init)) if at == n => fresh.push(k.unwind_deferred_init("new").0),
                _ => {}
            }
        })));
    }
    let m: &PagedMemory = &mem;
    k.enter(t, EntryReason::Syscall, regs.clone(), m);
    k.unwind_deferred_request(0, works[0]);
    if cfg.second_request {
        k.nmi_request(0, works[1], None, m);
    }
    if cfg.cpus == 2 {
        k.sleep(t);
        k.migrate(t, 1);
        k.wake(t);
    }
    if cfg.exit {
        k.exit(t, 0, m);
    } else {
        k.return_to_user(t, m);
        let mut later = regs.clone();
        later.pc += 0x100;
        k.enter(t, EntryReason::Syscall, later, m);
        k.return_to_user(t, m);
    }
    k.set_interleaver(None);
    if let Some(failure) = k.backend_failure() {
        panic!("{failure}");
    }
    let mut observed = Observed { requests: Vec::new(), callbacks: Vec::new() };
    for e in k.events() {
        match &e.kind {
            EventKind::Request { work, ret, cookie, .. } => observed.requests.push((work.0, *ret, cookie.id())),
            EventKind::Callback { work, cookie, nr } => observed.callbacks.push((work.0, cookie.id(), *nr)),
            _ => {}
        }
    }
    let violations = k.take_violations().into_iter().map(|v| v.invariant.to_string()).collect();
    let points = points.borrow().clone();
    (points, observed, violations)
}

fn configs() -> Vec<Config> {
    let mut out = Vec::new();
    for cpus in [1, 2] {
        for tracers in [2, 3] {
            for second_request in [false, true] {
                for exit in [false, true] {
                    out.push(Config { cpus, tracers, second_request, exit });
                }
            }
        }
    }
    out
}

fn actions(cfg: Config) -> Vec<Action> {
    (0..cfg.tracers).map(Action::Nmi).chain((0..cfg.tracers).map(Action::Cancel)).chain([Action::Init]).collect()
}

/// Every outcome of every placement, per (config, action), with the
/// functions the placements were in.
type Outcomes = BTreeMap<(usize, Action), BTreeMap<Observed, BTreeSet<String>>>;

/// What an exploration found.
struct Explored {
    outcomes: Outcomes,
    /// Placements per kernel function (the model: per named point).
    per_function: BTreeMap<String, usize>,
    placements: usize,
    /// Invariants broken, with the placements that broke them.
    violations: BTreeMap<String, usize>,
}

fn explore(c: bool) -> Explored {
    let mut e = Explored {
        outcomes: BTreeMap::new(),
        per_function: BTreeMap::new(),
        placements: 0,
        violations: BTreeMap::new(),
    };
    for (ci, cfg) in configs().into_iter().enumerate() {
        let (points, _, base) = run(cfg, c, None);
        assert!(base.is_empty(), "{cfg:?} ({}) without any action: {base:?}", if c { "kernel C" } else { "model" });
        for action in actions(cfg) {
            for (at, function) in points.iter().enumerate() {
                let (_, observed, violations) = run(cfg, c, Some((at, action)));
                e.placements += 1;
                *e.per_function.entry(function.clone()).or_default() += 1;
                for v in violations {
                    *e.violations.entry(v).or_default() += 1;
                }
                e.outcomes.entry((ci, action)).or_default().entry(observed).or_default().insert(function.clone());
            }
        }
    }
    e
}

#[test]
fn every_placement_on_the_kernel_code_against_the_model() {
    let c = explore(true);
    let model = explore(false);
    let distinct = |e: &Explored| e.outcomes.values().map(BTreeMap::len).sum::<usize>();
    eprintln!(
        "kernel C: {} placements explored, {} distinct outcomes; per function of the kernel's code:",
        c.placements,
        distinct(&c)
    );
    for (function, n) in &c.per_function {
        eprintln!("  {n:6} in {function}");
    }
    eprintln!("model: {} placements explored, {} distinct outcomes; per point:", model.placements, distinct(&model));
    let mut per_operation: BTreeMap<&str, usize> = BTreeMap::new();
    for (point, n) in &model.per_function {
        eprintln!("  {n:6} at {point}");
        *per_operation.entry(point.split(':').next().unwrap_or(point)).or_default() += n;
    }
    eprintln!("model: placements per operation: {per_operation:?}");
    eprintln!("invariants broken on the kernel C: {:?}; on the model: {:?}", c.violations, model.violations);
    // Only upstream's own windows break invariants on either side: the
    // reset window (B1, B2, I6) and requests or handler loops that meet a
    // cancelled work's bit -1 (UB). Anything else is a bug of the model or
    // of the kernel's code.
    for (side, e) in [("kernel C", &c), ("model", &model)] {
        let unexplained: Vec<&String> =
            e.violations.keys().filter(|v| !["B1", "B2", "I6", "UB"].contains(&v.as_str())).collect();
        assert!(unexplained.is_empty(), "{side}: {unexplained:?}");
    }
    assert!(c.violations.contains_key("B2"), "the reset window was not reached on the kernel's code");
    assert!(c.violations.contains_key("UB"), "no cancel race was reached on the kernel's code");
    // Every outcome the model reaches, the kernel's code reaches with the
    // same action in the same configuration; the code reaches more only
    // through its finer points: a cancel placed among the primitives of
    // the request and of `get_cookie()` the model does not split, or
    // between `test_bit()`'s read of `work->bit` and the handler's
    // `BIT(work->bit)` after the callback.
    let mut c_only = Vec::new();
    let mut model_only = Vec::new();
    for (key, outs) in &c.outcomes {
        let theirs = model.outcomes.get(key).cloned().unwrap_or_default();
        for (o, places) in outs {
            if !theirs.contains_key(o) {
                let finer = matches!(key.1, Action::Cancel(_))
                    && places.iter().all(|f| {
                        ["unwind_deferred_request", "get_cookie", "try_assign_cnt", "process_unwind_deferred"]
                            .contains(&f.as_str())
                    });
                c_only.push((finer, format!("{:?} {:?}: {o:?} (placed in {places:?})", configs()[key.0], key.1)));
            }
        }
        for (o, places) in &theirs {
            if !outs.contains_key(o) {
                model_only.push(format!("{:?} {:?}: {o:?} (at {places:?})", configs()[key.0], key.1));
            }
        }
    }
    eprintln!("outcomes only the kernel C reaches: {} (all through its finer placements of a cancel)", c_only.len());
    assert!(model_only.is_empty(), "outcomes only the model reaches:\n{}", model_only.join("\n"));
    let unexplained: Vec<&String> = c_only.iter().filter(|(finer, _)| !finer).map(|(_, o)| o).collect();
    assert!(
        unexplained.is_empty(),
        "outcomes only the kernel C reaches:\n{}",
        unexplained.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}
