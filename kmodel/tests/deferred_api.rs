//! `kernel/unwind/deferred.c` behaviours, one test per rule of the
//! reference (§2, §4, §5), on a synthetic frame-pointer stack.

mod support;

use kmodel::arch::{Arch, UserRegs};
use kmodel::event::{EntryReason, EventKind};
use kmodel::kernel::Kernel;
use kmodel::memory::{Access, PagedMemory, UserMemory};
use kmodel::tracer::{stitch, PerfRecord, PerfScope, UserChain, UserStackMode, KERNEL_IPS_IN_KERNEL};
use kmodel::types::{CancelledRequest, ExitPath, KernelOptions, KernelVersion, MmId, Tid, WorkId, EBUSY, EINVAL};
use kmodel::unwind::{unwind_user_dry_run, UnwindConfig};
use support::stack::{expected_trace, fp_stack};
use support::{callbacks, kernel, task, without_perf};

#[test]
fn init_allocates_bits_lowest_first_and_runs_out_with_ebusy() {
    let mut k = kernel(without_perf());
    let mut works = Vec::new();
    for i in 0..62 {
        let (w, ret) = k.unwind_deferred_init(&format!("t{i}"));
        assert_eq!(ret, 0);
        assert_eq!(k.work(w).bit, i + 2, "bits 0 and 1 are PENDING and USED");
        works.push(w);
    }
    let (_, ret) = k.unwind_deferred_init("one too many");
    assert_eq!(ret, EBUSY);
    // A cancelled tracer's bit is reused, lowest first.
    k.unwind_deferred_cancel(works[5]);
    k.unwind_deferred_cancel(works[3]);
    let (w, ret) = k.unwind_deferred_init("late");
    assert_eq!((ret, k.work(w).bit), (0, 5));
    // Newest registration first on the list.
    assert_eq!(k.callbacks()[0], w);
    assert!(k.take_violations().is_empty());
}

#[test]
fn one_cookie_one_unwind_per_entry_and_each_tracer_called_once() {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mut k = kernel(KernelOptions::default());
    let (a, _) = k.unwind_deferred_init("a");
    let (b, _) = k.unwind_deferred_init("b");
    let (c, _) = k.unwind_deferred_init("c");
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs.clone(), &mem);
    let (r1, c1) = k.unwind_deferred_request(0, a);
    let (r2, c2) = k.unwind_deferred_request(0, a);
    let (r3, c3) = k.nmi_request(0, b, None, &mem);
    assert_eq!((r1, r2, r3), (0, 1, 0), "first request queues, a repeat returns 1, another tracer joins");
    assert_eq!((c1, c2), (c1, c3));
    // Cookie: CPU 0 + 1 in the low half, counter 3 (first odd value) above.
    assert_eq!(c1.id(), (3 << 32) | 1);
    k.return_to_user(t, &mem);
    let calls = callbacks(&k);
    // Newest first: b before a; c did not ask.
    assert_eq!(calls, vec![(b.0, c1.id(), 4), (a.0, c1.id(), 4)]);
    assert!(!calls.iter().any(|(w, ..)| *w == c.0));
    assert_eq!(k.stats().unwinds, 1);
    let trace = match &k.tracers().perf.first() {
        Some(_) => unreachable!(),
        None => k.task(t).info.cache.as_ref().map(|c| c.entries.clone()).unwrap_or_default(),
    };
    assert_eq!(trace, expected_trace(3));
    // Reset on return: the next entry gets the next counter value.
    assert_eq!(k.task(t).info.mask, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    let (_, c4) = k.unwind_deferred_request(0, c);
    assert_eq!(c4.id(), (5 << 32) | 1);
    k.return_to_user(t, &mem);
    assert!(k.take_violations().is_empty(), "{:?}", k.take_violations());
}

#[test]
fn requests_are_refused_where_the_kernel_refuses_them() {
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let mut k = kernel(KernelOptions { nmi_safe_cmpxchg: false, ..KernelOptions::default() });
    let (a, _) = k.unwind_deferred_init("a");
    let kt = k.spawn_kthread("kworker", 1);
    k.schedule(kt);
    assert_eq!(k.unwind_deferred_request(1, a).0, EINVAL, "kernel thread");
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    assert_eq!(k.nmi_request(0, a, None, &mem).0, EINVAL, "NMI without NMI-safe cmpxchg");
    let (ret, cookie) = k.unwind_deferred_request(0, a);
    assert_eq!(ret, 0);
    assert!(!cookie.is_none());
    k.unwind_deferred_cancel(a);
    // Upstream 7.x: `unsigned long bit` is ULONG_MAX after the cancel, the
    // `bit < 0` check cannot fire, and BIT(ULONG_MAX) is undefined (bit 63
    // on the machine): the request joins the pending work and returns 0.
    let (ret, cookie) = k.unwind_deferred_request(0, a);
    assert_eq!((ret, cookie.is_none()), (0, false), "cancelled work, as upstream's code does");
    let violations: Vec<String> = k.take_violations().iter().map(|v| v.to_string()).collect();
    assert!(violations.len() == 1 && violations[0].contains("invariant UB"), "{violations:?}");
    k.return_to_user(t, &mem);
    assert!(callbacks(&k).is_empty(), "a cancelled tracer is never called back");
    assert!(k.take_violations().is_empty());
}

/// The model's guard, named: with `CancelledRequest::Refuse` a cancelled
/// work's request is refused, as a signed `bit` would make upstream do.
#[test]
fn a_cancelled_work_is_refused_with_the_refuse_option() {
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let mut k = kernel(KernelOptions { cancelled_request: CancelledRequest::Refuse, ..without_perf() });
    let (a, _) = k.unwind_deferred_init("a");
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    k.unwind_deferred_cancel(a);
    let (ret, cookie) = k.unwind_deferred_request(0, a);
    assert_eq!((ret, cookie.is_none()), (EINVAL, true), "cancelled work");
    k.return_to_user(t, &mem);
    assert!(callbacks(&k).is_empty());
    assert!(k.take_violations().is_empty());
}

/// Upstream registers `perf_unwind_work` in `perf_event_init()` at boot:
/// perf has bit 2 and, the list being newest first, the last place, however
/// many tracers register after it; the 62nd one of them gets -EBUSY.
#[test]
fn perf_registered_at_boot_keeps_bit_2_and_the_last_place_when_70_ftrace_instances_follow() {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mut k = kernel(KernelOptions::default());
    let perf = k.tracers().perf_work.expect("registered at boot");
    assert_eq!((perf, k.work(perf).bit, k.callbacks().to_vec()), (WorkId(0), 2, vec![perf]));
    let session = k.add_perf("perf", PerfScope::CpuWide, UserStackMode::Deferred);
    assert_eq!(k.works().len(), 1, "a session does not register perf again");
    let instances: Vec<Option<usize>> = (0..70).map(|i| k.add_ftrace(&format!("ft{i}"))).collect();
    assert!(instances[..61].iter().all(Option::is_some) && instances[61..].iter().all(Option::is_none));
    let ftrace_bits: Vec<i32> = k.tracers().ftrace.iter().map(|f| k.work(f.work).bit).collect();
    assert_eq!(ftrace_bits, (3..64).collect::<Vec<_>>());
    assert_eq!((k.tracers().perf_work, k.work(perf).bit), (Some(perf), 2));
    assert_eq!(k.callbacks().len(), 62);
    assert_eq!(k.callbacks().last(), Some(&perf));
    // A system call (every ftrace instance requests) sampled by perf: the
    // callbacks run newest first, perf last, all with the one stack.
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    k.nmi(0, None, &mem);
    k.return_to_user(t, &mem);
    let calls = callbacks(&k);
    let newest_first: Vec<usize> = k.tracers().ftrace.iter().rev().map(|f| f.work.0).chain([perf.0]).collect();
    assert_eq!(calls.iter().map(|c| c.0).collect::<Vec<_>>(), newest_first);
    assert!(calls.iter().all(|c| c.2 == 4));
    let stitched = stitch(&k.tracers().perf[session].buffers);
    assert_eq!(stitched.len(), 1);
    assert_eq!(stitched[0].user.as_deref(), Some(&expected_trace(3)[..]));
    assert!(k.take_violations().is_empty());
}

/// The lab option: perf registers with its first deferred session. Then it
/// is the newest tracer (first on the list); past the last free bit its
/// init fails and its samples are taken with the in-NMI walk.
#[test]
fn perf_registered_late_takes_the_next_bit_or_falls_back_to_the_in_nmi_walk() {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mut k = kernel(without_perf());
    assert_eq!(k.tracers().perf_work, None);
    k.add_ftrace("ft").unwrap();
    k.add_perf("perf", PerfScope::CpuWide, UserStackMode::Deferred);
    let perf = k.tracers().perf_work.expect("registered late");
    assert_eq!((k.work(perf).bit, k.callbacks()[0]), (3, perf));

    let mut k = kernel(without_perf());
    for i in 0..62 {
        k.add_ftrace(&format!("ft{i}")).unwrap();
    }
    let session = k.add_perf("perf", PerfScope::CpuWide, UserStackMode::Deferred);
    assert_eq!((k.tracers().perf_work, k.tracers().perf_init_error), (None, Some(EBUSY)));
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    k.nmi(0, None, &mem);
    k.return_to_user(t, &mem);
    assert_eq!(k.tracers().perf_unregistered_samples, 1);
    match &k.tracers().perf[session].buffers[0][..] {
        [PerfRecord::Sample { user: UserChain::Ips(ips), .. }] => assert_eq!(ips, &expected_trace(3)),
        other => panic!("expected one sample with the in-NMI walk: {other:?}"),
    }
    assert!(k.take_violations().is_empty());
}

/// perf_callchain(): no user callchain for a kernel thread, nor for a task
/// without user registers, but the sample is still written, with its
/// kernel callchain, and nothing is requested.
#[test]
fn a_task_without_user_registers_gets_a_kernel_only_sample() {
    let (mem, _) = fp_stack(Arch::X86_64, 3);
    let mut k = kernel(KernelOptions::default());
    let deferred = k.add_perf("deferred", PerfScope::CpuWide, UserStackMode::Deferred);
    let fp = k.add_perf("fp", PerfScope::CpuWide, UserStackMode::FpInNmi);
    let kt = k.spawn_kthread("kworker", 0);
    k.schedule(kt);
    k.nmi(0, None, &mem);
    // A user task hit by an NMI that saw no user registers.
    let t = task(&mut k, 1);
    k.schedule(t);
    k.nmi(1, None, &mem);
    for session in [deferred, fp] {
        let buffers = &k.tracers().perf[session].buffers;
        match (&buffers[0][..], &buffers[1][..]) {
            (
                [PerfRecord::Sample { tid: a, kernel, user: UserChain::None, .. }],
                [PerfRecord::Sample { tid: b, user: UserChain::None, .. }],
            ) => {
                assert_eq!((*a, *b), (kt, t));
                assert_eq!(kernel, &KERNEL_IPS_IN_KERNEL.to_vec(), "the NMI hit the kernel thread in the kernel");
            }
            other => panic!("expected one kernel-only sample per CPU: {other:?}"),
        }
        assert!(stitch(buffers).iter().all(|s| s.user.is_none()));
    }
    let s = k.stats();
    assert_eq!((s.requests_queued, s.requests_joined, s.requests_refused), (0, 0, 0), "nothing to defer");
    assert!(k.take_violations().is_empty());
}

/// A second `unwind_deferred_cancel()` of one work: upstream has no guard
/// (`BIT(-1)`, a second `list_del_rcu()`); the model reports P1 and changes
/// nothing.
#[test]
fn cancelling_a_work_twice_is_reported_as_p1() {
    let mut k = kernel(KernelOptions::default());
    let (a, _) = k.unwind_deferred_init("a");
    let (b, _) = k.unwind_deferred_init("b");
    k.unwind_deferred_cancel(a);
    assert!(k.take_violations().is_empty(), "one cancel is fine");
    let (mask, list, events) = (k.global_mask(), k.callbacks().to_vec(), k.events().len());
    k.unwind_deferred_cancel(a);
    let violations = k.take_violations();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].invariant, "P1");
    assert!(violations[0].detail.contains("(a) cancelled twice"), "{}", violations[0].detail);
    assert_eq!((k.global_mask(), k.callbacks()), (mask, &list[..]), "nothing else changed");
    assert!(k.events()[events..].iter().all(|e| matches!(e.kind, EventKind::Violation { .. })));
    assert_eq!(k.work(b).bit, 4, "b keeps its bit");
}

fn exit_with_pending(path: ExitPath, depth: usize) -> (Vec<(usize, u64, usize)>, Kernel) {
    let (mem, regs) = fp_stack(Arch::X86_64, depth);
    let mut k = kernel(KernelOptions { exit_path: path, copy_on_exit_bytes: 0x300, ..KernelOptions::default() });
    let (a, _) = k.unwind_deferred_init("a");
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    assert_eq!(k.nmi_request(0, a, None, &mem).0, 0);
    k.exit(t, 0, &mem);
    assert_eq!(k.unwind_deferred_request(0, a).0, EINVAL, "no request after PF_EXITING");
    (callbacks(&k), k)
}

#[test]
fn exit_paths_differ_in_what_they_deliver() {
    let (up, mut k) = exit_with_pending(ExitPath::Upstream, 3);
    assert_eq!(up.len(), 1);
    assert_eq!(up[0].2, 4, "upstream: the whole stack, before exit_mm");
    assert!(k.take_violations().is_empty());
    let (old, _) = exit_with_pending(ExitPath::V6_17, 3);
    assert_eq!(old[0].2, 4);
    let (none, mut k) = exit_with_pending(ExitPath::None, 3);
    assert_eq!(none, vec![(none[0].0, none[0].1, 0)], "none: called, with an empty stack (lost)");
    assert!(k.take_violations().is_empty(), "an empty trace still satisfies exactly-once");
    let (eager, _) = exit_with_pending(ExitPath::UnwindAtSyscallEntry, 3);
    assert_eq!(eager[0].2, 4, "cached at syscall entry, delivered after exit_mm");
    // Copy-on-exit copies 0x300 bytes: frames are 0x100 apart above SP+0x40.
    let (copy, k) = exit_with_pending(ExitPath::CopyOnExit, 6);
    assert!(copy[0].2 > 1 && copy[0].2 < 7, "truncated to the copied bytes: {copy:?}");
    assert!(k.stats().copied_bytes == 0x300);
}

#[test]
fn migrated_task_record_lands_on_the_other_cpu_and_is_stitched() {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mut k = kernel(KernelOptions::default());
    let session = k.add_perf("perf", PerfScope::CpuWide, UserStackMode::Deferred);
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem);
    k.nmi(0, None, &mem);
    k.advance(1000);
    k.sleep(t);
    k.migrate(t, 1);
    k.wake(t);
    k.return_to_user(t, &mem);
    let buffers = &k.tracers().perf[session].buffers;
    assert_eq!(buffers[0].len(), 1, "the sample on CPU 0");
    assert_eq!(buffers[1].len(), 1, "the deferred callchain on CPU 1");
    let stitched = stitch(buffers);
    assert_eq!(stitched.len(), 1);
    assert_eq!(stitched[0].user.as_deref(), Some(&expected_trace(3)[..]));
    assert_eq!(stitched[0].deferred_cpu, Some(1));
    assert!(matches!(&k.tracers().perf[session].buffers[0][0],
        kmodel::tracer::PerfRecord::Sample { user: UserChain::Deferred { cookie }, .. } if cookie.cpu == 1));
    assert!(k.take_violations().is_empty());
}

#[test]
fn nmi_from_user_mode_v6_19_reenters_at_once_v6_17_unwinds_a_later_stack() {
    for version in [KernelVersion::V6_19, KernelVersion::V6_17] {
        let (mut mem, regs) = fp_stack(Arch::X86_64, 3);
        let mut k = kernel(KernelOptions { version, ..KernelOptions::default() });
        let (a, _) = k.unwind_deferred_init("a");
        let t = task(&mut k, 0);
        k.schedule(t);
        let (ret, cookie) = k.nmi_request(0, a, Some(regs.clone()), &mem);
        assert_eq!(ret, 0);
        // The task runs on in user mode and makes a system call elsewhere.
        let mut later = regs.clone();
        later.pc = 0x40_2000;
        mem.write_word(0, 0, false);
        k.enter(t, EntryReason::Syscall, later, &mem);
        k.return_to_user(t, &mem);
        let calls = callbacks(&k);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].1, cookie.id());
        let violations = k.take_violations();
        match version {
            KernelVersion::V6_19 => assert!(violations.is_empty(), "{violations:?}"),
            // The v6.17 bug: the work waits for the next exit and delivers
            // the stack of that later entry under the earlier cookie.
            KernelVersion::V6_17 => assert!(violations.iter().any(|v| v.invariant == "B6"), "{violations:?}"),
        }
    }
}

/// A task whose one frame-less SFrame row per function describes its
/// stack (main at 0x401000 called by start at 0x402000, both CFA = SP + 8),
/// with the `.sframe` page registered and then evicted, and the registers
/// of a kernel entry in main.
fn task_with_evicted_sframe(opts: KernelOptions) -> (PagedMemory, Kernel, MmId, Tid, UserRegs) {
    use sframe::write::{RawFunction, RawRow};
    use sframe::{Abi, Version};
    use support::sections::{place, table};

    let (mut mem, _) = fp_stack(Arch::X86_64, 1);
    let sp = support::stack::STACK_TOP - 0x2000;
    mem.write_word(sp, 0x40_2010, false); // return address into start
    let functions = vec![
        RawFunction::new(0x40_1000, 0x100, vec![RawRow::new(0, true, &[8])]),
        RawFunction::new(0x40_2000, 0x100, vec![RawRow::new(0, true, &[])]), // outermost
    ];
    let section = 0x60_0000;
    let end = place(&mut mem, &table(Version::V3, Abi::Amd64, functions), section);
    let mut k = kernel(opts);
    let mm = k.new_mm(Arch::X86_64);
    k.add_sframe(mm, &mem, support::ANY_VMA, (section, end), (0x40_0000, 0x41_0000)).unwrap();
    let t = k.spawn("task", mm, 0);
    mem.evict(section, end - section);
    assert!(!mem.is_resident(section));
    (mem, k, mm, t, UserRegs::new(Arch::X86_64, 0x40_1010, sp, 0, 0))
}

/// The point of deferring: `.sframe` pages that are not resident at NMI
/// time are faulted in by the task-work unwind; an in-NMI SFrame walk
/// (no faults allowed) fails on them.
#[test]
fn sframe_pages_not_resident_at_nmi_time_are_faulted_in_by_the_deferred_unwind() {
    let (mem, mut k, mm, t, regs) = task_with_evicted_sframe(KernelOptions::default());
    let (a, _) = k.unwind_deferred_init("a");
    // In NMI context the SFrame walk cannot fault the section in.
    let cfg = UnwindConfig::default();
    let nmi = unwind_user_dry_run(&regs, &mem, &k.mm(mm).sframe, Access::NoFault, &cfg);
    assert!(nmi.would_fault, "{nmi:?}");
    assert_eq!(nmi.entries, vec![0x40_1010]);
    assert_eq!(mem.fault_count(), 0, "a failed no-fault read has no side effect");
    // Deferred: the NMI only requests; the task-work unwind may fault.
    k.enter(t, EntryReason::Irq, regs, &mem);
    assert_eq!(k.nmi_request(0, a, None, &mem).0, 0);
    k.return_to_user(t, &mem);
    assert_eq!(callbacks(&k), vec![(a.0, (3 << 32) | 1, 2)]);
    assert!(mem.fault_count() >= 1, "the fault was taken in task context and counted");
    assert_eq!(k.stats().task_faults, mem.fault_count());
    assert!(k.take_violations().is_empty());
}

/// `probe_nmi_walk`: at every NMI the model also asks whether a synchronous
/// walk there would have needed a fault and counts it, and nothing else it
/// does changes (same events, no page brought in, no section dropped).
#[test]
fn the_nmi_walk_probe_counts_walks_that_would_fault_and_changes_nothing() {
    let run = |probe_nmi_walk: bool| {
        let opts = KernelOptions { probe_nmi_walk, ..KernelOptions::default() };
        let (mem, mut k, mm, t, regs) = task_with_evicted_sframe(opts);
        k.add_perf("perf", PerfScope::CpuWide, UserStackMode::Deferred);
        k.enter(t, EntryReason::Syscall, regs, &mem);
        k.nmi(0, None, &mem);
        let faults_in_nmi = mem.fault_count();
        k.return_to_user(t, &mem);
        assert_eq!(k.mm(mm).sframe.len(), 1);
        assert!(k.take_violations().is_empty());
        (faults_in_nmi, k.stats().nmi_walk_would_fault, k.take_events())
    };
    let (faults, counted, events) = run(true);
    assert_eq!((faults, counted), (0, 1));
    assert_eq!(run(false), (0, 0, events));
}

/// `EventLog::Judging` keeps, with their sequence numbers, exactly the
/// events of the full log it says it keeps, and the model does the same.
#[test]
fn a_judging_event_log_is_the_full_log_filtered() {
    use kmodel::types::EventLog;
    let run = |event_log: EventLog| {
        let opts = KernelOptions { event_log, ..KernelOptions::default() };
        let (mem, mut k, _, t, regs) = task_with_evicted_sframe(opts);
        k.add_perf("perf", PerfScope::CpuWide, UserStackMode::Deferred);
        for _ in 0..3 {
            k.enter(t, EntryReason::Syscall, regs.clone(), &mem);
            k.nmi(0, None, &mem);
            k.return_to_user(t, &mem);
        }
        assert!(k.take_violations().is_empty());
        (callbacks(&k), k.take_events())
    };
    let (calls, all) = run(EventLog::All);
    let (judged_calls, judged) = run(EventLog::Judging);
    assert_eq!(judged_calls, calls);
    let kept: Vec<_> = all.iter().filter(|e| e.kind.kept_by(EventLog::Judging)).cloned().collect();
    assert!(kept.len() < all.len() && kept.iter().any(|e| matches!(e.kind, EventKind::Unwind { .. })));
    assert_eq!(judged, kept);
}

/// perf + ftrace + BPF on one task: each tracer is called once per cookie
/// with the same stack; ftrace logs the cookie at its event and the stack
/// at the callback; BPF keeps the stack in its map; the classic baselines
/// write the stack (or a copy of it) into every sample, and cost bytes.
#[test]
fn perf_ftrace_and_bpf_share_one_unwind_and_baselines_cost_bytes() {
    use kmodel::tracer::{FtraceEntry, PerfRecord};
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mut k = kernel(KernelOptions::default());
    let deferred = k.add_perf("deferred", PerfScope::CpuWide, UserStackMode::Deferred);
    let fp = k.add_perf("fp", PerfScope::CpuWide, UserStackMode::FpInNmi);
    let copy = k.add_perf("copy", PerfScope::CpuWide, UserStackMode::CopyStack { bytes: 1024 });
    let ftrace = k.add_ftrace("ftrace").unwrap();
    let bpf = k.add_bpf("bpf").unwrap();
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, regs, &mem); // ftrace's event: system-call entry
    for _ in 0..10 {
        k.advance(10);
        k.nmi(0, None, &mem);
    }
    k.return_to_user(t, &mem);
    assert_eq!(k.stats().unwinds, 1, "one unwind served every tracer");
    let calls = callbacks(&k);
    assert_eq!(calls.len(), 3, "perf, ftrace and BPF once each: {calls:?}");
    assert!(calls.iter().all(|&(_, cookie, nr)| cookie == calls[0].1 && nr == 4));
    let f = &k.tracers().ftrace[ftrace].buffers[0];
    assert!(matches!(f[0], FtraceEntry::Cookie { .. }) && matches!(f[1], FtraceEntry::Stack { .. }));
    assert_eq!(k.tracers().bpf[bpf].stacks.values().next().unwrap(), &expected_trace(3));
    let stitched = stitch(&k.tracers().perf[deferred].buffers);
    assert_eq!(stitched.len(), 10);
    assert!(stitched.iter().all(|s| s.user.as_deref() == Some(&expected_trace(3)[..])));
    for session in [fp, copy] {
        let s = stitch(&k.tracers().perf[session].buffers);
        assert!(s.iter().all(|s| s.user.as_deref() == Some(&expected_trace(3)[..])), "{s:?}");
    }
    let bytes = |i: usize| k.tracers().perf[i].buffers.iter().flatten().map(PerfRecord::bytes).sum::<u64>();
    assert!(bytes(deferred) < bytes(fp), "ten short samples + one stack < ten stacks");
    assert!(bytes(copy) > 10 * 1024, "the copy baseline writes the stack bytes every time");
    assert!(k.take_violations().is_empty());
}

/// `perf_event_init_task()`: a session bound to a task with `inherit`
/// gives the tasks it then creates, by fork or as threads, events of
/// their own, whose samples and deferred records reach the session;
/// without `inherit` (`--no-inherit`) only the task is sampled, and an
/// NMI on another task takes no sample at all (the counter does not count
/// it). Each task's events go at its own exit.
#[test]
fn an_inheriting_session_samples_the_tasks_heirs_and_a_plain_one_does_not() {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let mut k = kernel(KernelOptions::default());
    let parent = task(&mut k, 0);
    let inherit = k.add_perf("perf", PerfScope::Inherit(parent), UserStackMode::Deferred);
    let plain = k.add_perf("perf-no-inherit", PerfScope::Task(parent), UserStackMode::Deferred);
    k.enter(parent, EntryReason::Syscall, regs.clone(), &mem);
    let child = k.fork(parent, 1);
    let thread = k.clone_thread(parent, 1);
    k.return_to_user(parent, &mem);
    let other = task(&mut k, 1);
    assert_eq!(k.tracers().perf[inherit].tasks.iter().copied().collect::<Vec<_>>(), [parent, child, thread]);
    assert_eq!(k.tracers().perf[plain].tasks.iter().copied().collect::<Vec<_>>(), [parent]);
    let mut sampled = Vec::new();
    for t in [child, thread, other, parent] {
        k.schedule(t);
        let before = k.tracers().samples;
        k.enter(t, EntryReason::Syscall, regs.clone(), &mem);
        let cpu = k.task(t).cpu;
        k.nmi(cpu, None, &mem);
        k.return_to_user(t, &mem);
        sampled.push(k.tracers().samples - before);
    }
    assert_eq!(sampled, [1, 1, 0, 1], "child, thread, an unrelated task, the parent");
    let tids = |s: usize| -> Vec<Tid> { stitch(&k.tracers().perf[s].buffers).iter().map(|s| s.tid).collect() };
    let pid = |t: Tid| k.task(t).pid;
    assert_eq!(tids(inherit), [pid(child), pid(thread), pid(parent)]);
    assert_eq!(tids(plain), [pid(parent)]);
    assert!(stitch(&k.tracers().perf[inherit].buffers)
        .iter()
        .all(|s| s.user.as_deref() == Some(&expected_trace(3)[..])));
    k.schedule(child);
    k.enter(child, EntryReason::Syscall, regs, &mem);
    k.exit(child, 0, &mem);
    assert!(!k.tracers().perf[inherit].sees(child), "its events went at its exit");
    assert!(k.take_violations().is_empty());
}
