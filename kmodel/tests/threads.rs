//! Threads: several tasks in one mm, as upstream runs them. Each thread
//! has its own deferred state (`copy_process()` → `unwind_task_init()`)
//! and shares the mm and its SFrame table (`copy_mm()` with `CLONE_VM`
//! takes a reference, `mmget()`). Each thread exits through its own
//! `do_exit()` (`kernel/exit.c`): `unwind_deferred_task_exit()` right
//! before `exit_mm()`, whose `mmput()` drops only that thread's reference;
//! `__mmdrop()` → `sframe_free_mm()` runs when the last one goes. Threads
//! killed by `exit_group()` or by an exec's `de_thread()` die in
//! `get_signal()` (`kernel/signal.c`), which runs their queued task_work
//! before it looks at the signal.

mod support;

use kmodel::arch::{Arch, UserRegs};
use kmodel::event::{EntryReason, EventKind};
use kmodel::kernel::{Kernel, TaskState};
use kmodel::memory::{Access, PagedMemory};
use kmodel::types::{ExitPath, KernelOptions, MmId, Tid, WorkId, UNWIND_PENDING};
use kmodel::unwind::unwind_user_dry_run;
use support::sections::{register_frameless_section, MM_SECTION, SFRAME_RA};
use support::stack::fp_stack;
use support::{callbacks, cookie, kernel, without_perf};

/// The SFrame walk of `regs` in `mm` as the table stands now.
fn sframe_walk(k: &Kernel, mm: MmId, mem: &PagedMemory, regs: &UserRegs) -> Vec<u64> {
    let cfg = k.options().unwind.clone();
    unwind_user_dry_run(regs, mem, &k.mm(mm).sframe, Access::NoFault, &cfg).entries
}

/// A kernel with tracer "a", a process (leader on CPU 0) whose mm holds
/// one section, and its stack and registers.
fn process(opts: KernelOptions) -> (Kernel, WorkId, Tid, MmId, PagedMemory, UserRegs) {
    let (mut mem, regs) = fp_stack(Arch::X86_64, 3);
    let mut k = kernel(opts);
    let (a, _) = k.unwind_deferred_init("a");
    let mm = k.new_mm(Arch::X86_64);
    register_frameless_section(&mut k, mm, &mut mem, &regs);
    let leader = k.spawn("proc", mm, 0);
    (k, a, leader, mm, mem, regs)
}

/// The "mm freed" removals logged so far, with the task that freed it.
fn freed(k: &Kernel) -> Vec<(Option<Tid>, u64)> {
    k.events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SframeRemove { sframe, why } if why.contains("sframe_free_mm") => Some((e.tid, *sframe)),
            _ => None,
        })
        .collect()
}

/// Sequence number of the first event matching `f`.
fn seq_of(k: &Kernel, f: impl Fn(&EventKind) -> bool) -> u64 {
    k.events().iter().find(|e| f(&e.kind)).map(|e| e.seq).expect("event logged")
}

fn assert_clean(k: &mut Kernel) {
    let violations = k.take_violations();
    assert!(violations.is_empty(), "{}", violations.iter().map(|v| v.to_string()).collect::<String>());
}

/// A thread shares its parent's mm (one more `mm_users`) and table, joins
/// its group, and starts with empty deferred state even when the parent
/// has a request pending.
#[test]
fn clone_thread_shares_the_mm_and_starts_empty() {
    let (mut k, a, leader, mm, mem, regs) = process(without_perf());
    k.enter(leader, EntryReason::Syscall, regs.clone(), &mem);
    assert_eq!(k.unwind_deferred_request(0, a).0, 0);
    let t = k.clone_thread(leader, 1);
    let th = k.task(t);
    assert_eq!((th.mm, th.tgid, th.pid), (Some(mm), leader, t));
    assert_eq!((th.info.mask, th.info.id.is_none(), th.info.cache.is_none(), th.work_queued), (0, true, true, false));
    assert_eq!(k.mm(mm).users, 2);
    assert_eq!(k.threads_of(leader), vec![t]);
    let new = k.events().iter().find(|e| e.tid == Some(t)).unwrap();
    assert_eq!(new.kind, EventKind::TaskNew { parent: Some(leader), thread: true });
    // The thread's walk uses the shared table.
    assert_eq!(sframe_walk(&k, mm, &mem, &regs)[1], SFRAME_RA);
    k.return_to_user(leader, &mem);
    assert_eq!(callbacks(&k).len(), 1, "the parent's request, the parent's callback");
    assert_clean(&mut k);
}

/// A thread exits with a request pending while its sibling, on another
/// CPU, has one of its own: the exiting thread's exit hook
/// (`unwind_deferred_task_exit()`, before `exit_mm()`) serves its request
/// with its real stack; `exit_mm()` → `mmput()` drops one reference, so
/// the mm and its table live on; the sibling's request is served on its
/// own return to user with its own cookie, walked with the table.
#[test]
fn thread_exits_with_a_request_pending_while_its_sibling_runs() {
    let (mut k, a, leader, mm, mem, regs) = process(without_perf());
    let t = k.clone_thread(leader, 1);
    let walk = sframe_walk(&k, mm, &mem, &regs);
    assert_eq!(walk[1], SFRAME_RA);
    k.enter(leader, EntryReason::Syscall, regs.clone(), &mem);
    k.enter(t, EntryReason::Syscall, regs.clone(), &mem);
    let (_, c_leader) = k.nmi_request(0, a, None, &mem);
    let (_, c_thread) = k.nmi_request(1, a, None, &mem);
    assert_eq!((c_leader.id(), c_thread.id()), (cookie(3, 0), cookie(3, 1)), "each thread its own cookie");

    // The thread calls exit() (pthread_exit → SYS_exit).
    k.exit(t, 0, &mem);
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 1), walk.len())]);
    let hook = k.events().iter().filter(|e| e.tid == Some(t) && matches!(e.kind, EventKind::ExitHook { .. })).count();
    assert_eq!(hook, 1, "served by unwind_deferred_task_exit()");
    assert_eq!(k.task(t).state, TaskState::Dead);
    assert_eq!((k.mm(mm).users, k.mm(mm).freed, k.mm(mm).sframe.len()), (1, false, 1), "the leader keeps the mm");
    assert!(freed(&k).is_empty());

    // The leader's request: its own cookie, its stack through the table.
    let l = k.task(leader);
    assert_eq!((l.info.id, l.info.mask & UNWIND_PENDING, l.work_queued), (c_leader, UNWIND_PENDING, true));
    k.return_to_user(leader, &mem);
    assert_eq!(callbacks(&k)[1..], [(a.0, cookie(3, 0), walk.len())]);
    assert_eq!(k.task(leader).info.cache.as_ref().unwrap().entries, walk);
    assert_clean(&mut k);
}

/// `exit_group()` with requests pending on two threads, a third in user
/// mode with none. The caller's request is served by its exit hook
/// (`unwind_deferred_task_exit()` in `do_exit()`); the sibling asleep in
/// the kernel is woken by the SIGKILL and, on its way out, `get_signal()`
/// runs its task_work first: its request is served from task_work, with
/// the mm alive, before its own `do_exit()` (whose hook then finds nothing
/// pending). Every callback carries a stack; the table is freed once, by
/// the last thread to leave, after every callback.
#[test]
fn exit_group_with_requests_pending_on_two_threads() {
    let (mut k, a, leader, mm, mem, regs) = process(without_perf());
    let sleeper = k.clone_thread(leader, 1);
    let runner = k.clone_thread(leader, 1);
    let walk = sframe_walk(&k, mm, &mem, &regs);
    // The sleeper: a system call that sleeps, sampled there.
    k.enter(sleeper, EntryReason::Syscall, regs.clone(), &mem);
    assert_eq!(k.nmi_request(1, a, None, &mem).1.id(), cookie(3, 1));
    k.sleep(sleeper);
    // The runner is in user mode on CPU 1 (the sleeper is off it).
    k.schedule(runner);
    // The leader samples itself in exit_group().
    k.enter(leader, EntryReason::Syscall, regs.clone(), &mem);
    assert_eq!(k.nmi_request(0, a, None, &mem).1.id(), cookie(3, 0));
    let killed = k.exit_group(leader, 3, &mem);
    assert_eq!(killed, vec![sleeper, runner]);
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 0), walk.len())], "the caller's hook");
    assert_eq!(k.task(sleeper).killed, Some(3), "the caller's own status");
    assert_eq!((k.mm(mm).users, k.mm(mm).freed), (2, false));

    // The sleeper wakes to its SIGKILL.
    k.signal_wake_up(sleeper, None, &mem);
    assert_eq!(callbacks(&k)[1..], [(a.0, cookie(3, 1), walk.len())], "served by get_signal()'s task_work_run()");
    let contexts: Vec<(Option<Tid>, &str)> = k
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::HandlerStart { context, .. } => Some((e.tid, *context)),
            _ => None,
        })
        .collect();
    assert_eq!(contexts, vec![(Some(leader), "exit"), (Some(sleeper), "task_work")]);
    let handler = seq_of(&k, |e| matches!(e, EventKind::HandlerStart { context: "task_work", .. }));
    let fatal = seq_of(&k, |e| matches!(e, EventKind::FatalSignal { .. }));
    let hooks = k.events().iter().filter(|e| matches!(e.kind, EventKind::ExitHook { .. })).count();
    assert!(handler < fatal && hooks == 1, "task_work first, then do_group_exit(); the hook found nothing");
    assert_eq!(k.task(sleeper).state, TaskState::Dead);
    assert!(freed(&k).is_empty(), "the runner still has the mm");

    // The runner is interrupted in user mode and dies on the way back.
    let mut later = regs.clone();
    later.pc += 0x10;
    k.signal_wake_up(runner, Some(later), &mem);
    assert_eq!(k.task(runner).state, TaskState::Dead);
    assert_eq!(callbacks(&k).len(), 2, "the runner requested nothing");
    assert_eq!(freed(&k), vec![(Some(runner), MM_SECTION)], "freed once, by the last thread");
    assert!(k.mm(mm).freed && k.mm(mm).users == 0);
    let last_callback =
        k.events().iter().filter(|e| matches!(e.kind, EventKind::Callback { .. })).map(|e| e.seq).max().unwrap();
    assert!(last_callback < seq_of(&k, |e| matches!(e, EventKind::SframeRemove { .. })));
    assert_clean(&mut k);
}

/// Without the exit hook (the lab's `ExitPath::None`, before v6.17) the
/// caller of `exit_group()` gets an empty stack (its task_work runs in
/// `exit_task_work()`, after `exit_mm()`), but a killed sibling still gets
/// its real one: `get_signal()` runs its task_work before `do_exit()`.
#[test]
fn without_the_exit_hook_only_the_caller_loses_its_stack() {
    let (mut k, a, leader, mm, mem, regs) = process(KernelOptions { exit_path: ExitPath::None, ..without_perf() });
    let t = k.clone_thread(leader, 1);
    let walk = sframe_walk(&k, mm, &mem, &regs);
    k.enter(t, EntryReason::Syscall, regs.clone(), &mem);
    k.nmi_request(1, a, None, &mem);
    k.enter(leader, EntryReason::Syscall, regs.clone(), &mem);
    k.nmi_request(0, a, None, &mem);
    k.exit_group(leader, 0, &mem);
    k.signal_wake_up(t, None, &mem);
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 0), 0), (a.0, cookie(3, 1), walk.len())]);
    assert_eq!(freed(&k), vec![(Some(t), MM_SECTION)]);
    assert_clean(&mut k);
}

/// `execve()` by a non-leader thread with requests pending on it and on
/// the leader. `de_thread()` kills the leader first; the leader's request
/// is served on its way out (`get_signal()`'s task_work) with the old
/// image's stack, through the old table, which the exec'ing thread still
/// holds. The exec'ing thread then takes the leader's pid
/// (`exchange_tids()`); `exec_mmap()` switches it to the new mm and the
/// old mm's last reference goes, freeing the table once. Its own request
/// stays pending across the exec, as for a single-threaded exec, and is
/// served on the return into the new image with its old cookie.
#[test]
fn de_thread_at_exec_with_requests_pending() {
    let (mut k, a, leader, mm, mem, regs) = process(without_perf());
    let t = k.clone_thread(leader, 1);
    let walk = sframe_walk(&k, mm, &mem, &regs);
    k.enter(leader, EntryReason::Syscall, regs.clone(), &mem);
    assert_eq!(k.nmi_request(0, a, None, &mem).1.id(), cookie(3, 0));
    k.sleep(leader);
    k.enter(t, EntryReason::Syscall, regs.clone(), &mem);
    let (_, before) = k.nmi_request(1, a, None, &mem);
    assert_eq!(before.id(), cookie(3, 1));

    let killed = k.de_thread(t, &std::collections::BTreeMap::new(), &mem);
    assert_eq!(killed, vec![leader]);
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 0), walk.len())], "the leader's, with the old stack");
    assert_eq!(k.task(leader).state, TaskState::Dead);
    assert_eq!((k.mm(mm).users, k.mm(mm).sframe.len()), (1, 1), "the exec'ing thread holds the old mm");
    assert_eq!((k.task(t).pid, k.task(leader).pid), (leader, t), "exchange_tids()");
    assert!(k.events().iter().any(|e| e.kind == EventKind::DeThread { leader, pid: leader }));

    let top = 0x7ffe_0000_0000u64;
    let mut new_mem = PagedMemory::new();
    new_mem.map(top - 0x1000, 0x1000);
    let new_regs = UserRegs::new(Arch::X86_64, 0x50_1000, top - 0x100, 0, 0);
    let new_mm = k.new_mm(Arch::X86_64);
    k.exec(t, new_mm, new_regs);
    assert_eq!(freed(&k), vec![(Some(t), MM_SECTION)], "the old table, freed once at exec_mmap()");
    assert_eq!((k.mm(new_mm).users, k.task(t).info.id), (1, before));
    k.return_to_user(t, &new_mem);
    assert_eq!(callbacks(&k)[1..], [(a.0, before.id(), 1)], "the pending request, the new image's stack");
    assert_clean(&mut k);
}

/// The mm of three threads: each exit drops one `mm_users`; the table is
/// freed once, at the last thread's exit, whichever thread that is.
#[test]
fn the_table_is_freed_once_at_the_last_threads_exit() {
    let (mut k, a, leader, mm, mem, regs) = process(without_perf());
    let t1 = k.clone_thread(leader, 1);
    let t2 = k.clone_thread(t1, 0);
    assert_eq!((k.mm(mm).users, k.task(t2).tgid), (3, leader));
    let mut users = vec![];
    for t in [leader, t2, t1] {
        k.enter(t, EntryReason::Syscall, regs.clone(), &mem);
        let cpu = k.task(t).cpu;
        k.schedule(t);
        k.unwind_deferred_request(cpu, a);
        k.exit(t, 0, &mem);
        users.push((k.mm(mm).users, k.mm(mm).freed, freed(&k).len()));
    }
    assert_eq!(users, vec![(2, false, 0), (1, false, 0), (0, true, 1)]);
    assert_eq!(freed(&k), vec![(Some(t1), MM_SECTION)]);
    let n = callbacks(&k).iter().filter(|c| c.2 > 1).count();
    assert_eq!(n, 3, "every exit hook walked with the table");
    assert_clean(&mut k);
}
