//! Exhaustive interleavings: every placement of one injected action (an NMI
//! that requests for some tracer, a cancel, the registration of a new
//! tracer that requests as soon as its init returns, or a change of the
//! mm's `.sframe` table: a section registered or one unregistered, as
//! another thread of the process would with the prctl), and of pairs of them
//! (a table change paired with an NMI only),
//! at every interleaving point the deferred-unwind code reaches, on 1–2 CPUs
//! with 2–3 tracers, with and without exit, and with two threads sharing
//! one mm (an NMI on either CPU at every point; one thread exits between
//! its request and its unwind while the other carries on, then exits last
//! and frees the mm). The points include those between two frames'
//! lookups of a walk. Every invariant is checked after every step; the
//! count of interleavings explored is printed.
//!
//! The kernels here register perf late (no perf session: no perf work), so
//! the tracers are exactly the test's own.

mod support;

use std::cell::RefCell;
use std::rc::Rc;

use kmodel::arch::{Arch, UserRegs};
use kmodel::event::{EntryReason, EventKind};
use kmodel::interleave::Point;
use kmodel::kernel::Kernel;
use kmodel::memory::PagedMemory;
use kmodel::types::{ExitPath, KernelOptions, KernelVersion, Tid, WorkId, INIT_WAITING};
use kmodel::unwind::Method;
use sframe::write::{RawFunction, RawRow};
use sframe::{Abi, Version};
use support::sections::{place, table};
use support::stack::{expected_trace, fp_stack};
use support::{task, without_perf, ANY_VMA};

#[derive(Debug, Clone, Copy)]
enum Action {
    /// An NMI on the CPU that reached the point, requesting for tracer i.
    Nmi(usize),
    /// An NMI on the other CPU (of two) at that moment: with two threads,
    /// the sibling's CPU.
    NmiOther(usize),
    Cancel(usize),
    /// Register a new tracer; once its init has returned (at once, or when
    /// the cancel holding `callback_mutex` returns) it requests from an NMI
    /// at the next point reached.
    Init,
    /// `PR_ADD_SFRAME` of the callers' section (text 0x401100..0x401500).
    Register,
    /// `PR_REMOVE_SFRAME` of the innermost function's section, registered
    /// before the run.
    Unregister,
}

/// The innermost function's section (registered before the run) and the
/// callers' (registered by [`Action::Register`]): FP-based rows (CFA = FP +
/// 16, FP saved at CFA − 16, RA at CFA − 8), so an SFrame step and an FP
/// step agree on [`fp_stack`] and the table may change under a walk
/// without changing what it finds.
const INNER: (u64, u64) = (0x40_1000, 0x40_10ff);
const CALLERS_TEXT: (u64, u64) = (0x40_1100, 0x40_14ff);
const INNER_SFRAME: u64 = 0x5000_0000;
const CALLERS_SFRAME: u64 = 0x5000_1000;

/// Places both sections in `mem`; returns their ends.
fn place_sections(mem: &mut PagedMemory) -> (u64, u64) {
    let section = |text: (u64, u64)| {
        let rows = vec![RawRow::new(0, false, &[16, -16])];
        table(Version::V3, Abi::Amd64, vec![RawFunction::new(text.0, (text.1 - text.0 + 1) as u32, rows)])
    };
    (place(mem, &section(INNER), INNER_SFRAME), place(mem, &section(CALLERS_TEXT), CALLERS_SFRAME))
}

/// What one run did.
struct Outcome {
    /// Interleaving points reached.
    points: usize,
    /// Invariant violations.
    violations: Vec<String>,
    /// Actions injected.
    injected: usize,
    /// Inits placed while a cancel was in its grace period.
    inits_in_grace: usize,
    /// Inits that returned `INIT_WAITING`.
    inits_waited: usize,
    /// A new tracer registered after a cancel that had already returned:
    /// the cancelled tracer's bit may still be in flight (in a request that
    /// read it before the cancel, or in a handler's snapshot) and the new
    /// tracer gets that bit. Upstream's own hazard (reference §4, derived).
    reregistered_after_cancel: bool,
    /// Table changes placed between two lookups of a walk.
    table_changes_mid_walk: usize,
    /// The points at which the actions were injected, with the actions.
    injected_at: Vec<(Point, Action)>,
}

#[derive(Debug, Clone, Copy)]
struct Config {
    cpus: usize,
    tracers: usize,
    second_request: bool,
    migrate: bool,
    exit: bool,
    /// Two threads in one mm, one per CPU (see [`run_threads`]).
    threads: bool,
    version: KernelVersion,
}

fn kernel(cpus: usize, version: KernelVersion) -> Kernel {
    support::kernel(KernelOptions { cpus, version, exit_path: ExitPath::Upstream, ..without_perf() })
}

/// Runs the scenario with `actions` injected at the given point hits.
fn run(cfg: Config, actions: &[(usize, Action)]) -> Outcome {
    let (mut mem, regs) = fp_stack(Arch::X86_64, 3);
    let (inner_end, callers_end) = place_sections(&mut mem);
    let mem = Rc::new(mem);
    let mut k = kernel(cfg.cpus, cfg.version);
    let works: Vec<WorkId> = (0..cfg.tracers).map(|i| k.unwind_deferred_init(&format!("t{i}")).0).collect();
    let t = task(&mut k, 0);
    let mm = k.task(t).mm.expect("a user task");
    k.add_sframe(mm, &*mem, ANY_VMA, (INNER_SFRAME, inner_end), INNER).expect("the innermost section registers");
    let hits = Rc::new(RefCell::new(0usize));
    let injected = Rc::new(RefCell::new(0usize));
    // (inits in a grace period, inits that waited, re-registered after a cancel)
    let inits = Rc::new(RefCell::new((0usize, 0usize, false)));
    let mid_walk = Rc::new(RefCell::new(0usize));
    let injected_at: Rc<RefCell<Vec<(Point, Action)>>> = Rc::default();
    {
        let injected_at = injected_at.clone();
        let (hits, injected, mem, works) = (hits.clone(), injected.clone(), mem.clone(), works.clone());
        let (inits, mid_walk) = (inits.clone(), mid_walk.clone());
        let actions = actions.to_vec();
        let mut cancelled = false;
        // New tracers whose first request is still to come.
        let mut fresh: Vec<WorkId> = Vec::new();
        k.set_interleaver(Some(Box::new(move |k: &mut Kernel, cpu: usize, p: Point| {
            let n = *hits.borrow();
            *hits.borrow_mut() += 1;
            // A new tracer requests once its init has returned.
            for work in std::mem::take(&mut fresh) {
                if k.init_waiting(work) {
                    fresh.push(work);
                } else {
                    // Its request is where the placement takes effect.
                    injected_at.borrow_mut().push((p, Action::Init));
                    k.nmi_request(cpu, work, None, &*mem);
                }
            }
            for &(at, action) in &actions {
                if at == n {
                    *injected.borrow_mut() += 1;
                    injected_at.borrow_mut().push((p, action));
                    let table_change = matches!(action, Action::Register | Action::Unregister);
                    *mid_walk.borrow_mut() += usize::from(table_change && p == Point::UnwindBetweenLookups);
                    match action {
                        Action::Nmi(i) => {
                            k.nmi_request(cpu, works[i], None, &*mem);
                        }
                        Action::NmiOther(i) => {
                            k.nmi_request(1 - cpu, works[i], None, &*mem);
                        }
                        Action::Cancel(i) => {
                            k.unwind_deferred_cancel(works[i]);
                            cancelled = true;
                        }
                        Action::Init => {
                            let in_grace = !k.cancels_waiting().is_empty();
                            let (work, ret) = k.unwind_deferred_init("new");
                            let mut inits = inits.borrow_mut();
                            inits.0 += usize::from(in_grace);
                            inits.1 += usize::from(ret == INIT_WAITING);
                            inits.2 |= cancelled && !in_grace;
                            fresh.push(work);
                        }
                        // Another thread of the process changes the table;
                        // once the mm is gone there is no one to do it.
                        Action::Register if !k.mm(mm).freed => {
                            let sframe = (CALLERS_SFRAME, callers_end);
                            let _ = k.add_sframe(mm, &*mem, ANY_VMA, sframe, CALLERS_TEXT);
                        }
                        Action::Unregister if !k.mm(mm).freed => {
                            let _ = k.remove_sframe(mm, INNER_SFRAME, "prctl(PR_REMOVE_SFRAME)");
                        }
                        Action::Register | Action::Unregister => {}
                    }
                }
            }
        })));
    }
    let m: &PagedMemory = &mem;
    if cfg.threads {
        run_threads(&mut k, cfg, t, &works, m, &regs);
    } else {
        run_one(&mut k, cfg, t, &works, m, &regs);
    }
    k.set_interleaver(None);
    let violations = k.take_violations().into_iter().map(|v| v.to_string()).collect();
    let (points, injected) = (*hits.borrow(), *injected.borrow());
    let (inits_in_grace, inits_waited, reregistered_after_cancel) = *inits.borrow();
    let table_changes_mid_walk = *mid_walk.borrow();
    let injected_at = injected_at.borrow().clone();
    Outcome {
        injected_at,
        points,
        violations,
        injected,
        inits_in_grace,
        inits_waited,
        reregistered_after_cancel,
        table_changes_mid_walk,
    }
}

/// One task: a system call with requests, maybe a migration, then exit
/// or the return to user and one more system call.
fn run_one(k: &mut Kernel, cfg: Config, t: Tid, works: &[WorkId], m: &PagedMemory, regs: &UserRegs) {
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
}

/// Two threads of one process, `t` on CPU 0 and its sibling on CPU 1,
/// both in a system call with a request pending (the second tracer, if
/// asked, on the sibling); `t` exits before its unwind (its exit hook
/// serves it, and its `exit_mm()` drops one reference) while the sibling
/// returns to user with its own request served, makes one more system
/// call, and exits last, freeing the mm. The M invariants watch the mm.
fn run_threads(k: &mut Kernel, cfg: Config, t: Tid, works: &[WorkId], m: &PagedMemory, regs: &UserRegs) {
    let mm = k.task(t).mm.expect("a user task");
    let sibling = k.clone_thread(t, 1);
    k.enter(t, EntryReason::Syscall, regs.clone(), m);
    let mut theirs = regs.clone();
    theirs.pc += 0x40;
    k.enter(sibling, EntryReason::Syscall, theirs.clone(), m);
    k.unwind_deferred_request(0, works[0]);
    k.unwind_deferred_request(1, works[0]);
    if cfg.second_request {
        k.unwind_deferred_request(1, works[1]);
    }
    k.exit(t, 0, m);
    k.return_to_user(sibling, m);
    theirs.pc += 0x100;
    k.enter(sibling, EntryReason::Syscall, theirs, m);
    k.exit(sibling, 0, m);
    assert!(k.mm(mm).freed && k.mm(mm).users == 0, "the last thread freed the mm");
}

fn configs(version: KernelVersion) -> Vec<Config> {
    let mut out = Vec::new();
    for cpus in [1, 2] {
        for tracers in [2, 3] {
            for second_request in [false, true] {
                for exit in [false, true] {
                    let migrate = cpus == 2;
                    out.push(Config { cpus, tracers, second_request, migrate, exit, threads: false, version });
                }
            }
        }
    }
    for second_request in [false, true] {
        out.push(Config { cpus: 2, tracers: 2, second_request, migrate: false, exit: true, threads: true, version });
    }
    out
}

fn actions(cfg: &Config) -> Vec<Action> {
    let nmis = (0..cfg.tracers).map(Action::Nmi);
    let others = (0..cfg.tracers).filter(|_| cfg.threads).map(Action::NmiOther);
    let table = [Action::Register, Action::Unregister];
    nmis.chain(others).chain((0..cfg.tracers).map(Action::Cancel)).chain([Action::Init]).chain(table).collect()
}

/// A request made between `unwind_reset_info()`'s cmpxchg and its last
/// store (see `check`).
fn in_reset_window(p: Point, a: Action) -> bool {
    matches!(p, Point::ResetAfterCmpxchg | Point::ResetBeforeCacheClear)
        && matches!(a, Action::Nmi(_) | Action::NmiOther(_) | Action::Init)
}

/// An init placed in a cancel's grace period waits for it. Violations are
/// allowed only for upstream's own hazard: a new tracer registered after a
/// cancel returned, given the cancelled tracer's bit while that bit was
/// still in flight, is called although it never asked (B2, "stale"; its
/// bit then sits in `completed` but no longer in the mask, I6), or finds
/// its bit already set, gets 1 and is never called (B1). A tracer
/// cancelled twice is reported as P1, and only that.
fn check(cfg: &Config, what: &str, o: &Outcome, double_cancel: bool) {
    let all = || o.violations.join("\n");
    assert_eq!(o.inits_waited, o.inits_in_grace, "{cfg:?} {what}: an init in a grace period did not wait");
    if double_cancel {
        // P1 once; the requests of the cancelled work that follow compute
        // BIT(-1) (UB), as upstream's code does.
        let p1 = o.violations.iter().filter(|v| v.starts_with("invariant P1 ")).count();
        let rest_ub = o.violations.iter().all(|v| v.starts_with("invariant P1 ") || v.starts_with("invariant UB "));
        assert!(p1 == 1 && rest_ub, "{cfg:?} {what}:\n{}", all());
        return;
    }
    if o.violations.is_empty() {
        return;
    }
    // Upstream's own windows, which the model shows as upstream has them:
    // an NMI between unwind_reset_info()'s cmpxchg and its clearing of `id`
    // gets the old cookie and its callback cookie 0 (B2: called under a
    // cookie it never got; B1: never called under the one it got); one after `id`
    // but before the cache is cleared sees the old entry's `completed`
    // beside its new bit for a moment (I6, harmless); a request for a
    // cancelled work computes BIT(-1) (UB), as may the handler's loop when
    // a cancel runs beside it.
    let reset_window = o.injected_at.iter().any(|&(p, a)| in_reset_window(p, a));
    let cancelled = o.injected_at.iter().any(|&(_, a)| matches!(a, Action::Cancel(_)));
    // The works registered by Init come after the configuration's tracers.
    let new_tracer = |v: &str| (cfg.tracers..cfg.tracers + 2).any(|w| v.contains(&format!("work {w} ")));
    let is = |head: &str, names: &[&str]| names.iter().any(|i| head.starts_with(&format!("invariant {i} ")));
    let unexplained: Vec<&String> = o
        .violations
        .iter()
        .filter(|v| {
            let head = v.lines().next().unwrap_or("");
            let window = reset_window && is(head, &["B1", "B2", "I6"]);
            let undefined = cancelled && is(head, &["UB"]);
            let reused =
                o.reregistered_after_cancel && (is(head, &["B1", "B2"]) && new_tracer(head) || is(head, &["I6"]));
            !(window || undefined || reused)
        })
        .collect();
    assert!(unexplained.is_empty(), "{cfg:?} {what} (placed at {:?}):\n{}", o.injected_at, all());
}

/// What [`explore`] found over the placements of one configuration.
#[derive(Default)]
struct Tally {
    explored: usize,
    waited: usize,
    hazards: usize,
    threaded: usize,
    mid_walk: usize,
    /// Placements per operation of the point where each action struck.
    per_op: std::collections::BTreeMap<&'static str, usize>,
}

impl Tally {
    fn add(&mut self, cfg: &Config, o: &Outcome, double_cancel: bool) {
        self.explored += 1;
        self.mid_walk += usize::from(o.table_changes_mid_walk > 0);
        self.threaded += usize::from(cfg.threads);
        self.waited += usize::from(o.inits_waited > 0);
        self.hazards += usize::from(!o.violations.is_empty() && !double_cancel);
        for (p, _) in &o.injected_at {
            *self.per_op.entry(p.operation()).or_insert(0) += 1;
        }
    }

    fn merge(mut self, other: Tally) -> Tally {
        self.explored += other.explored;
        self.waited += other.waited;
        self.hazards += other.hazards;
        self.threaded += other.threaded;
        self.mid_walk += other.mid_walk;
        for (op, n) in other.per_op {
            *self.per_op.entry(op).or_insert(0) += n;
        }
        self
    }
}

/// Every single and paired placement of configuration `cfg`, each checked.
fn explore(cfg: Config) -> Tally {
    let mut tally = Tally::default();
    let base = run(cfg, &[]);
    assert!(base.violations.is_empty(), "{cfg:?}: {:?}", base.violations);
    let points = base.points;
    let acts = actions(&cfg);
    for at in 0..points + 1 {
        for &a in &acts {
            let o = run(cfg, &[(at, a)]);
            check(&cfg, &format!("{a:?} at hit {at}"), &o, false);
            tally.add(&cfg, &o, false);
        }
    }
    // Pairs: a second action at a later hit (its own NMI's points count).
    for at1 in 0..points {
        for at2 in at1 + 1..points + 4 {
            for &a1 in &acts {
                for &a2 in &acts {
                    // A table change is paired with an NMI (a request
                    // in flight when the table changes, or a change
                    // under a request's unwind), not with a cancel, an
                    // init or another change: those touch no state the
                    // table shares, and the pairs would double the run.
                    let table = |a: Action| matches!(a, Action::Register | Action::Unregister);
                    let nmi = |a: Action| matches!(a, Action::Nmi(_) | Action::NmiOther(_));
                    if (table(a1) && !nmi(a2)) || (table(a2) && !nmi(a1)) {
                        continue;
                    }
                    let o = run(cfg, &[(at1, a1), (at2, a2)]);
                    let twice = matches!((a1, a2), (Action::Cancel(i), Action::Cancel(j)) if i == j);
                    // The second action may fall past the last point.
                    let twice = twice && o.injected == 2;
                    check(&cfg, &format!("{a1:?}@{at1} {a2:?}@{at2}"), &o, twice);
                    tally.add(&cfg, &o, twice);
                }
            }
        }
    }
    tally
}

#[test]
fn every_single_and_paired_placement_keeps_every_invariant() {
    // The configurations are independent: one worker per CPU.
    let cfgs = configs(KernelVersion::V6_19);
    let tally = support::par::par_map(&cfgs, |&cfg| explore(cfg)).into_iter().fold(Tally::default(), Tally::merge);
    let Tally { explored, waited, hazards, threaded, mid_walk, per_op } = tally;
    println!(
        "explored {explored} interleavings ({threaded} with two threads in one mm); in {waited} an init waited \
         for a cancel's grace period; {hazards} showed upstream's hazard of a bit reused while in flight; \
         in {mid_walk} the .sframe table changed between two lookups of a walk; actions placed per operation: \
         {per_op:?}"
    );
    // Every operation of deferred.c (and get_cookie(), task_work_add(),
    // cancel's clearing loop) has placements.
    for op in ["request", "get_cookie", "task_work_add", "handler", "reset", "exit", "cancel"] {
        assert!(per_op.get(op).is_some_and(|&n| n > 0), "no action placed in {op}: {per_op:?}");
    }
    assert!(mid_walk > 0, "no table change was placed between two lookups");
    assert!(threaded > 1_000, "explored only {threaded} with two threads");
    assert!(explored > 10_000, "explored only {explored}");
    assert!(waited > 0, "no init was placed in a cancel's grace period");
}

/// v6.17 requested from NMI with TWA_RESUME: an NMI after the reset but
/// before the return to user leaves its work for a later entry, whose stack
/// is then delivered under the earlier cookie (§3 case 5). The model finds
/// exactly that, and only that.
#[test]
fn v6_17_nmi_after_reset_is_the_only_unsafe_placement() {
    let mut unsafe_points = std::collections::BTreeSet::new();
    // With two threads the same race is found on the sibling, by an NMI on
    // its CPU after its reset; the exiting thread's own request is served
    // by its exit hook and is never at risk.
    let mut threaded = std::collections::BTreeSet::new();
    for cfg in configs(KernelVersion::V6_17).into_iter().filter(|c| !c.exit || c.threads) {
        let points = run(cfg, &[]).points;
        for at in 0..points + 1 {
            for a in actions(&cfg).into_iter().filter(|a| matches!(a, Action::Nmi(_) | Action::NmiOther(_))) {
                let o = run(cfg, &[(at, a)]);
                if !o.violations.is_empty() {
                    assert_eq!(o.injected, 1);
                    unsafe_points.insert(at);
                    if cfg.threads {
                        threaded.insert(format!("{a:?}@{at}"));
                    }
                    // B6/B4: the v6.17 race; B2 and I6 in the reset
                    // window both versions share (see `check`).
                    let window = o.injected_at.iter().any(|&(p, a)| in_reset_window(p, a));
                    let shared = |v: &String| window && ["B1", "B2", "I6"].iter().any(|i| v.contains(i));
                    assert!(
                        o.violations.iter().all(|v| v.contains("B6") || v.contains("B4") || shared(v)),
                        "{:?}",
                        o.violations
                    );
                }
            }
        }
    }
    assert!(!unsafe_points.is_empty(), "the v6.17 race was not found");
    println!("v6.17: unsafe NMI placements with two threads: {threaded:?}");
    assert!(!threaded.is_empty(), "the v6.17 race was not found with two threads");
}

/// The stale-snapshot hazard (§4, derived): a tracer cancelled and another
/// registered, taking its bit, while the handler unwinds: the new tracer is
/// called although it never asked. The checker reports it as B2.
#[test]
fn cancel_and_reregister_during_the_unwind_is_caught_as_b2() {
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let mem = Rc::new(mem);
    let mut k = kernel(2, KernelVersion::V6_19);
    let (a, _) = k.unwind_deferred_init("a");
    let t = task(&mut k, 0);
    k.set_interleaver(Some(Box::new(move |k: &mut Kernel, _cpu: usize, p: Point| {
        if p == Point::HandlerAfterUnwind {
            k.unwind_deferred_cancel(a);
            let (b, _) = k.unwind_deferred_init("b");
            assert_eq!(k.work(b).bit, 2, "b reuses a's bit");
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

/// `callback_mutex` is held by a cancel across its grace period: an init
/// and another cancel issued meanwhile wait and run, in order, when it
/// returns; the new tracer then gets the cancelled tracer's bit with no
/// trace of it left in any task. Cancelling the queued tracer again is P1.
#[test]
fn init_and_cancel_wait_for_a_cancel_in_its_grace_period() {
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let mem = Rc::new(mem);
    let mut k = kernel(1, KernelVersion::V6_19);
    let (a, _) = k.unwind_deferred_init("a");
    let (b, _) = k.unwind_deferred_init("b");
    let t = task(&mut k, 0);
    let c = Rc::new(RefCell::new(None));
    {
        let (c, mem) = (c.clone(), mem.clone());
        k.set_interleaver(Some(Box::new(move |k: &mut Kernel, cpu: usize, p: Point| {
            if p != Point::HandlerBeforeCallback {
                return;
            }
            // Inside the callback walk: a's cancel cannot finish yet.
            k.unwind_deferred_cancel(a);
            assert_eq!(k.cancels_waiting(), [a]);
            assert_ne!(k.task(t).info.mask & (1 << 2), 0, "a's bit is still set in the task");
            let (new, ret) = k.unwind_deferred_init("c");
            assert_eq!((ret, k.work(new).bit, k.init_waiting(new)), (INIT_WAITING, 0, true));
            // Its init has not returned: a request then (no correct tracer
            // makes one) takes BIT(0), PENDING, as upstream's code does.
            assert_eq!(k.nmi_request(cpu, new, None, &*mem).0, 0, "BIT(0) taken");
            k.unwind_deferred_cancel(b);
            assert!(k.work(b).bit > 0 && k.callbacks().contains(&b), "b's cancel waits: b is still registered");
            k.unwind_deferred_cancel(b);
            *c.borrow_mut() = Some(new);
            k.set_interleaver(None);
        })));
    }
    k.enter(t, EntryReason::Syscall, regs.clone(), &*mem);
    k.unwind_deferred_request(0, a);
    k.return_to_user(t, &*mem);
    let c = c.borrow().expect("the hook ran");
    // In order: a's cancel returns, c's init completes with a's bit, then
    // b's cancel runs (at once: no handler is in its walk any more).
    let story: Vec<String> = k
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::CancelBegin { work } => Some(format!("cancel {}", work.0)),
            EventKind::CancelReturn { work } => Some(format!("return {}", work.0)),
            EventKind::MutexWait { work, call } => Some(format!("wait {} {call}", work.0)),
            EventKind::Init { work, ret, bit, .. } if *work == c => Some(format!("init {} {ret} {bit:?}", work.0)),
            _ => None,
        })
        .collect();
    let want = [
        "cancel 0",
        "wait 2 unwind_deferred_init",
        "wait 1 unwind_deferred_cancel",
        "return 0",
        "init 2 0 Some(2)",
        "cancel 1",
        "return 1",
    ];
    assert_eq!(story, want);
    assert_eq!(k.callbacks(), [c]);
    // c starts clean: its first request queues (0), it is called once.
    k.enter(t, EntryReason::Syscall, regs, &*mem);
    assert_eq!(k.unwind_deferred_request(0, c).0, 0);
    k.return_to_user(t, &*mem);
    let violations = k.take_violations();
    let names: Vec<&str> = violations.iter().map(|v| v.invariant).collect();
    // P2: c requested before its init returned; B1: that request returned
    // 0 and no callback came (its bit was PENDING's); P1: b cancelled twice.
    assert_eq!(names, ["P2", "P1", "B1"], "{violations:?}");
    assert!(violations[1].detail.contains("while its first cancel waits"), "{}", violations[1].detail);
}

/// A section removed between two lookups of a walk (each `sframe_find()`
/// holds `sframe_srcu` for itself alone): the frame already found stays,
/// the next lookup finds no section and falls back to frame pointers, and
/// the stack delivered is the same. A section registered there is used by
/// the next lookup.
#[test]
fn the_table_may_change_between_two_lookups_of_a_walk() {
    for (action, want) in [
        (Action::Unregister, [Method::Sframe, Method::Fp, Method::Fp]),
        (Action::Register, [Method::Sframe, Method::Sframe, Method::Sframe]),
    ] {
        let (mut mem, regs) = fp_stack(Arch::X86_64, 3);
        let (inner_end, callers_end) = place_sections(&mut mem);
        let mem = Rc::new(mem);
        let mut k = kernel(1, KernelVersion::V6_19);
        let (a, _) = k.unwind_deferred_init("a");
        let t = task(&mut k, 0);
        let mm = k.task(t).mm.unwrap();
        k.add_sframe(mm, &*mem, ANY_VMA, (INNER_SFRAME, inner_end), INNER).unwrap();
        {
            let mem = mem.clone();
            k.set_interleaver(Some(Box::new(move |k: &mut Kernel, _cpu: usize, p: Point| {
                if p != Point::UnwindBetweenLookups {
                    return;
                }
                match action {
                    Action::Unregister => k.remove_sframe(mm, INNER_SFRAME, "prctl(PR_REMOVE_SFRAME)").unwrap(),
                    _ => k.add_sframe(mm, &*mem, ANY_VMA, (CALLERS_SFRAME, callers_end), CALLERS_TEXT).unwrap(),
                }
                k.set_interleaver(None);
            })));
        }
        k.enter(t, EntryReason::Syscall, regs, &*mem);
        k.unwind_deferred_request(0, a);
        k.return_to_user(t, &*mem);
        let methods: Vec<Vec<Method>> = k
            .events()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Unwind { methods, .. } => Some(methods.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(methods, [want.to_vec()], "{action:?}");
        assert_eq!(support::callbacks(&k).iter().map(|c| c.2).collect::<Vec<_>>(), [expected_trace(3).len()]);
        assert!(k.take_violations().is_empty());
    }
}
