//! The kernel's own `deferred.c` and `user.c` driven through the model
//! ([`Kernel::with_backend`]): the rules of the reference hold on the real
//! code, observed the way the model's tests observe the model.
//!
//! The tree is the one `make deps` extracted (Debian's linux-source-7.x).

#[path = "../../kmodel/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use kmodel::arch::Arch;
use kmodel::event::{EntryReason, EventKind};
use kmodel::kernel::Kernel;
use kmodel::types::{KernelOptions, EINVAL};
use kmodel::unwind::{Method, UnwindConfig};
use support::stack::{expected_trace, fp_stack};
use support::{callbacks, cookie, task, without_perf};

/// Upstream's own configuration: frame pointers only.
fn fp_only(opts: KernelOptions) -> KernelOptions {
    KernelOptions { unwind: UnwindConfig { order: vec![Method::Fp], ..UnwindConfig::default() }, ..opts }
}

fn c_kernel(opts: KernelOptions) -> Kernel {
    let backend = kupstream::load(None, opts.nmi_safe_cmpxchg).unwrap_or_else(|e| panic!("{e}"));
    let mut k =
        Kernel::with_backend(opts, backend as Arc<dyn kmodel::backend::DeferredBackend>).expect("upstream options");
    k.set_checks(true);
    k
}

#[test]
fn one_cookie_one_unwind_per_entry_and_each_tracer_called_once() {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mut k = c_kernel(fp_only(KernelOptions::default()));
    assert!(k.backend().expect("a backend").contains("kernel/unwind/ of "), "{:?}", k.backend());
    let (a, _) = k.unwind_deferred_init("a");
    let (b, _) = k.unwind_deferred_init("b");
    let (c, _) = k.unwind_deferred_init("c");
    // perf registered at boot holds bit 2.
    assert_eq!((k.work(a).bit, k.work(b).bit, k.work(c).bit), (3, 4, 5));
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs.clone(), &mem);
    let (r1, c1) = k.unwind_deferred_request(0, a);
    let (r2, c2) = k.unwind_deferred_request(0, a);
    let (r3, c3) = k.nmi_request(0, b, None, &mem);
    assert_eq!((r1, r2, r3), (0, 1, 0));
    assert_eq!((c1, c2), (c1, c3));
    assert_eq!(c1.id(), cookie(3, 0));
    k.return_to_user(t, &mem);
    let calls = callbacks(&k);
    assert_eq!(calls, vec![(b.0, c1.id(), 4), (a.0, c1.id(), 4)]);
    assert_eq!(k.stats().unwinds, 1);
    let unwinds: Vec<_> = k.events().iter().filter(|e| matches!(e.kind, EventKind::Unwind { .. })).collect();
    assert_eq!(unwinds.len(), 1);
    assert_eq!(k.task(t).info.mask, 0, "reset on the way out");
    k.enter(t, EntryReason::Syscall, regs, &mem);
    let (_, c4) = k.unwind_deferred_request(0, c);
    assert_eq!(c4.id(), cookie(5, 0));
    k.return_to_user(t, &mem);
    assert!(k.take_violations().is_empty(), "{:?}", k.take_violations());
    // The trace user.c found is the FP chain.
    let _ = expected_trace(3);
}

#[test]
fn exit_with_a_request_pending_calls_back_before_exit_mm() {
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let mut k = c_kernel(fp_only(without_perf()));
    let (a, _) = k.unwind_deferred_init("a");
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    let (r, c) = k.unwind_deferred_request(0, a);
    assert_eq!(r, 0);
    k.exit(t, 0, &mem);
    assert_eq!(callbacks(&k), vec![(a.0, c.id(), 3)]);
    assert!(!k.task(t).work_queued, "the exit hook cancelled the task_work");
    assert!(k.take_violations().is_empty(), "{:?}", k.take_violations());
}

#[test]
fn a_kernel_thread_is_refused() {
    let mut k = c_kernel(fp_only(without_perf()));
    let (a, _) = k.unwind_deferred_init("a");
    let kt = k.spawn_kthread("kworker", 0);
    k.schedule(kt);
    assert_eq!(k.unwind_deferred_request(0, a).0, EINVAL);
}

#[test]
fn cancel_then_request_is_what_upstream_does() {
    // 7.x: `unsigned long bit`, so WARN_ON_ONCE(bit < 0) never fires; the
    // request after cancel computes BIT(-1).
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let mut k = c_kernel(fp_only(without_perf()));
    let (a, _) = k.unwind_deferred_init("a");
    k.unwind_deferred_cancel(a);
    assert_eq!(k.work(a).bit, -1);
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    let (r, _) = k.unwind_deferred_request(0, a);
    let warns: Vec<String> = k
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Warn { site, what } => Some(format!("{what} {site}")),
            _ => None,
        })
        .collect();
    eprintln!("request after cancel returned {r}; warnings {warns:?}");
    assert!(warns.iter().any(|w| w.contains("shift")), "{warns:?}");
}

/// x86's `user.c` on the states the lab's guests do not reach: a task
/// stopped by a uprobe on a function's first instruction (the entry
/// frame), a compat task (4-byte words) and VM86 mode (no walk). perf's
/// deferred record carries what `user.c` walked; the model walks the same.
#[test]
fn entry_frames_compat_words_and_vm86_walk_as_user_c_walks() {
    use kmodel::tracer::{PerfRecord, PerfScope, UserStackMode};
    for case in support::x86_modes::cases() {
        let traces: Vec<Vec<u64>> = [false, true]
            .into_iter()
            .map(|c| {
                let opts = fp_only(KernelOptions::default());
                let mut k = if c { c_kernel(opts) } else { support::kernel(opts) };
                k.add_perf("perf", PerfScope::CpuWide, UserStackMode::Deferred);
                let work = k.tracers().perf_work.expect("perf registered at boot");
                let t = task(&mut k, 0);
                // The uprobe's breakpoint: an exception, its handler (perf's
                // uprobe event) asks in task context.
                k.enter(t, EntryReason::Exception, case.regs.clone(), &case.mem);
                assert_eq!(k.unwind_deferred_request(0, work).0, 0, "{}", case.name);
                k.return_to_user(t, &case.mem);
                assert!(k.take_violations().is_empty(), "{}", case.name);
                let records: Vec<Vec<u64>> = k.tracers().perf[0]
                    .buffers
                    .iter()
                    .flatten()
                    .filter_map(|r| match r {
                        PerfRecord::Deferred { ips, .. } => Some(ips.clone()),
                        PerfRecord::Sample { .. } => None,
                    })
                    .collect();
                assert_eq!(records.len(), 1, "{}", case.name);
                records[0].clone()
            })
            .collect();
        assert_eq!(traces[0], case.trace, "{}: the model", case.name);
        assert_eq!(traces[1], case.trace, "{}: the kernel's user.c", case.name);
    }
}
