//! Fork, exec and exit against the deferred-unwind state and the per-mm
//! SFrame table, as the trees carrying the SFrame series do it:
//! `copy_process()` → `unwind_task_init()` zeroes the child's state, and
//! `dup_mm()` → `mm_init()` → `mm_init_sframe()` gives the child an empty
//! table; `execve()` leaves `unwind_info` alone, so a pending request is
//! served on the return into the new image (reference §5.3, §5.4), and
//! the old mm's sections die with it (`__mmdrop()` → `sframe_free_mm()`).

mod support;

use kmodel::arch::{Arch, UserRegs};
use kmodel::event::{EntryReason, EventKind};
use kmodel::kernel::{Kernel, TaskState};
use kmodel::memory::{Access, PagedMemory};
use kmodel::types::{Tid, WorkId, UNWIND_PENDING};
use kmodel::unwind::unwind_user_dry_run;
use sframe::write::{RawFunction, RawRow};
use sframe::{Abi, Version};
use support::sections::{place, register_frameless_section, table, MM_SECTION, SFRAME_RA};
use support::stack::{expected_trace, fp_stack};
use support::{callbacks, cookie, kernel, task, without_perf};

/// The new image after exec: one mapped stack page and the registers
/// `start_thread()` sets, entry PC 0x50_1000, SP inside that page and no
/// frame pointer, so the walk yields the entry PC alone.
fn new_image() -> (PagedMemory, UserRegs) {
    let top = 0x7ffe_0000_0000u64;
    let mut mem = PagedMemory::new();
    mem.map(top - 0x1000, 0x1000);
    (mem, UserRegs::new(Arch::X86_64, 0x50_1000, top - 0x100, 0, 0))
}

/// The trace the kernel's cache holds for `tid` (its valid entries).
fn cached(k: &Kernel, tid: Tid) -> Vec<u64> {
    k.task(tid).info.cache.as_ref().map(|c| c.entries[..c.nr_entries].to_vec()).unwrap_or_default()
}

/// A kernel without perf, one tracer "a", and a user task on CPU 0.
fn one_tracer_and_a_task() -> (Kernel, WorkId, Tid) {
    let mut k = kernel(without_perf());
    let (a, _) = k.unwind_deferred_init("a");
    let t = task(&mut k, 0);
    (k, a, t)
}

fn assert_clean(k: &mut Kernel) {
    let violations = k.take_violations();
    assert!(violations.is_empty(), "{}", violations.iter().map(|v| v.to_string()).collect::<String>());
}

/// A fork while the parent has a request pending: the child starts with
/// nothing (no PENDING, no tracer bits, no cookie, no cache, no queued
/// work) and an empty SFrame table in its own mm; the parent's request is
/// served on the parent's return; the child's first request gets a cookie
/// of its own, and its stack is walked by frame pointers.
#[test]
fn fork_while_pending_leaves_the_child_empty_and_serves_the_parent() {
    let (mut mem, regs) = fp_stack(Arch::X86_64, 3);
    let (mut k, a, parent) = one_tracer_and_a_task();
    let parent_mm = k.task(parent).mm.unwrap();
    register_frameless_section(&mut k, parent_mm, &mut mem, &regs);
    let cfg = k.options().unwind.clone();
    let parent_trace = unwind_user_dry_run(&regs, &mem, &k.mm(parent_mm).sframe, Access::NoFault, &cfg);
    assert_eq!(parent_trace.entries[..2], [0x40_1000, SFRAME_RA], "the parent's table changes its walk");

    // An earlier entry leaves the parent with an allocated (reset) cache.
    k.enter(parent, EntryReason::Syscall, regs.clone(), &mem);
    assert_eq!(k.unwind_deferred_request(0, a), (0, k.task(parent).info.id));
    k.return_to_user(parent, &mem);
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 0), parent_trace.entries.len())]);

    // fork(): a request is pending in the parent when the child is made.
    k.enter(parent, EntryReason::Syscall, regs.clone(), &mem);
    let (ret, parent_cookie) = k.unwind_deferred_request(0, a);
    assert_eq!((ret, parent_cookie.id()), (0, cookie(5, 0)));
    let child = k.fork(parent, 0);
    let p = k.task(parent);
    assert_eq!((p.info.mask & UNWIND_PENDING, p.work_queued, p.info.cache.is_some()), (UNWIND_PENDING, true, true));
    let c = k.task(child);
    assert_eq!(c.info.mask, 0, "no PENDING, no tracer bit");
    assert!(c.info.id.is_none(), "no cookie");
    assert!(c.info.cache.is_none(), "no cache (unwind_task_init zeroes the pointer)");
    assert_eq!((c.work_queued, c.notify_resume, c.state), (false, false, TaskState::User));
    let child_mm = c.mm.unwrap();
    assert_ne!(child_mm, parent_mm, "dup_mm makes a new mm");
    assert!(k.mm(child_mm).sframe.is_empty(), "mm_init_sframe: the child's table starts empty");
    assert_eq!(k.mm(parent_mm).sframe.len(), 1, "the parent keeps its section");
    assert!(k
        .events()
        .iter()
        .any(|e| e.tid == Some(child) && e.kind == EventKind::TaskNew { parent: Some(parent), thread: false }));

    // The parent's request is served on its return, with its cookie.
    k.return_to_user(parent, &mem);
    assert_eq!(callbacks(&k)[1..], [(a.0, cookie(5, 0), parent_trace.entries.len())]);

    // The child's first return to user and a request-free entry: nothing.
    k.enter(child, EntryReason::Irq, regs.clone(), &mem);
    k.return_to_user(child, &mem);
    assert_eq!(callbacks(&k).len(), 2, "no callback for the child: it never requested");

    // The child's first request: a fresh cookie (CPU 0's next counter),
    // and the child's stack walked by frame pointers (its table is empty).
    k.enter(child, EntryReason::Syscall, regs.clone(), &mem);
    let (ret, child_cookie) = k.unwind_deferred_request(0, a);
    assert_eq!((ret, child_cookie.id()), (0, cookie(7, 0)));
    k.return_to_user(child, &mem);
    assert_eq!(callbacks(&k)[2..], [(a.0, cookie(7, 0), 4)]);
    assert_eq!(cached(&k, child), Vec::<u64>::new(), "reset on return");
    assert_eq!(k.task(child).info.cache.as_ref().unwrap().entries[..4], expected_trace(3)[..]);
    assert_clean(&mut k);
}

/// The child's cookies come from the counter of the CPU it runs on, like
/// anyone's: on another CPU its first cookie is that CPU's first.
#[test]
fn a_child_on_another_cpu_takes_that_cpus_counter() {
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let (mut k, a, parent) = one_tracer_and_a_task();
    k.enter(parent, EntryReason::Syscall, regs.clone(), &mem);
    assert_eq!(k.unwind_deferred_request(0, a).1.id(), cookie(3, 0));
    let child = k.fork(parent, 1);
    k.return_to_user(parent, &mem);
    k.enter(child, EntryReason::Syscall, regs, &mem);
    assert_eq!(k.unwind_deferred_request(1, a).1.id(), cookie(3, 1));
    k.return_to_user(child, &mem);
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 0), 3), (a.0, cookie(3, 1), 3)]);
    assert_clean(&mut k);
}

/// A request pending across execve() is served once, on the return into
/// the new image, with the cookie handed out before the exec, from the
/// new image's registers and memory; a tracer that asks after the mm
/// switch joins the same cookie. The old mm's sections are freed.
#[test]
fn exec_while_pending_serves_the_old_cookie_with_the_new_images_stack() {
    let (mut old_mem, old_regs) = fp_stack(Arch::X86_64, 3);
    let (new_mem, new_regs) = new_image();
    let mut k = kernel(without_perf());
    let (a, _) = k.unwind_deferred_init("a");
    let (b, _) = k.unwind_deferred_init("b");
    let t = task(&mut k, 0);
    let old_mm = k.task(t).mm.unwrap();
    register_frameless_section(&mut k, old_mm, &mut old_mem, &old_regs);

    // execve() entered from the old image; a sample in it requests.
    k.enter(t, EntryReason::Syscall, old_regs.clone(), &old_mem);
    let (ret, before) = k.nmi_request(0, a, None, &old_mem);
    assert_eq!((ret, before.id()), (0, cookie(3, 0)));
    let new_mm = k.new_mm(Arch::X86_64);
    k.exec(t, new_mm, new_regs.clone());

    let task_after = k.task(t);
    assert_eq!(task_after.mm, Some(new_mm));
    assert_eq!(task_after.regs.as_ref(), Some(&new_regs), "start_thread() rewrote the saved registers");
    assert_eq!(task_after.info.id, before, "exec keeps the cookie");
    assert_eq!(task_after.info.mask & UNWIND_PENDING, UNWIND_PENDING, "exec keeps the request pending");
    assert!(task_after.work_queued && task_after.notify_resume, "and its task_work queued");
    assert!(task_after.info.cache.is_none(), "nothing has been walked in this entry");
    let exec = k.events().iter().find(|e| matches!(e.kind, EventKind::Exec { .. })).unwrap();
    assert_eq!((exec.tid, &exec.kind), (Some(t), &EventKind::Exec { mm: new_mm, pc: 0x50_1000, pending: true }));
    assert!(k.mm(old_mm).sframe.is_empty(), "the old mm died with its sections (sframe_free_mm)");
    let freed: Vec<(u64, String)> = k
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SframeRemove { sframe, why } => Some((*sframe, why.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(freed, vec![(MM_SECTION, "mm freed (sframe_free_mm)".to_string())]);
    assert!(k.mm(new_mm).sframe.is_empty(), "the new image registers its own (none here)");

    // After the mm switch, another tracer asks: same entry, same cookie.
    let (ret, after) = k.unwind_deferred_request(0, b);
    assert_eq!((ret, after), (0, before));

    // The return into the new image: one unwind, of the new stack, both
    // tracers called once with the old cookie.
    k.return_to_user(t, &new_mem);
    assert_eq!(callbacks(&k), vec![(b.0, before.id(), 1), (a.0, before.id(), 1)]);
    assert_eq!(k.task(t).info.cache.as_ref().unwrap().entries, vec![0x50_1000], "the new image's entry PC");
    assert_eq!(k.stats().unwinds, 1);
    assert_eq!((k.task(t).info.mask, k.task(t).info.id.is_none()), (0, true), "reset on the way out");

    // The next entry in the new image gets the next cookie.
    k.enter(t, EntryReason::Syscall, new_regs, &new_mem);
    assert_eq!(k.unwind_deferred_request(0, a), (0, k.task(t).info.id));
    assert_eq!(k.task(t).info.id.id(), cookie(5, 0));
    k.return_to_user(t, &new_mem);
    assert_eq!(callbacks(&k)[2..], [(a.0, cookie(5, 0), 1)]);
    assert_clean(&mut k);
}

/// The cache is untouched by exec, as upstream: a walk done earlier in
/// the same entry (here the lab's unwind-at-syscall-entry design, which
/// walks at the execve() entry) is what the deferred callback receives,
/// the old image's stack; B6 reports it, since the registers on return
/// are the new image's.
#[test]
fn exec_leaves_a_filled_cache_in_place_and_b6_reports_the_old_stack() {
    use kmodel::types::{ExitPath, KernelOptions};
    let (old_mem, old_regs) = fp_stack(Arch::X86_64, 2);
    let (new_mem, new_regs) = new_image();
    let mut k = kernel(KernelOptions { exit_path: ExitPath::UnwindAtSyscallEntry, ..without_perf() });
    let (a, _) = k.unwind_deferred_init("a");
    let t = task(&mut k, 0);
    k.enter(t, EntryReason::Syscall, old_regs, &old_mem);
    assert_eq!(cached(&k, t), expected_trace(2), "walked at syscall entry");
    let (_, before) = k.unwind_deferred_request(0, a);
    let new_mm = k.new_mm(Arch::X86_64);
    k.exec(t, new_mm, new_regs);
    assert_eq!(cached(&k, t), expected_trace(2), "exec does not touch the cache");
    k.return_to_user(t, &new_mem);
    assert_eq!(callbacks(&k), vec![(a.0, before.id(), 3)]);
    let violations = k.take_violations();
    assert_eq!(violations.iter().map(|v| v.invariant).collect::<Vec<_>>(), vec!["B6"]);
    assert!(violations[0].detail.contains("starts at 0x401000, the request saw user PC 0x501000"), "{}", violations[0]);
}

/// fork, then the child execs with a request pending, is served in its
/// new image, then exits with another request pending: the exit hook
/// serves that one from the new image's stack before exit_mm(), and the
/// child's mm dies with its sections. The parent is untouched throughout.
#[test]
fn fork_then_child_exec_then_exit() {
    let (mem, regs) = fp_stack(Arch::X86_64, 3);
    let (mut new_mem, new_regs) = new_image();
    let (mut k, a, parent) = one_tracer_and_a_task();
    let parent_mm = k.task(parent).mm.unwrap();
    k.enter(parent, EntryReason::Syscall, regs.clone(), &mem);
    let child = k.fork(parent, 1);
    k.return_to_user(parent, &mem);

    // The child execs; its new image registers a section.
    k.enter(child, EntryReason::Syscall, regs, &mem);
    let (_, exec_cookie) = k.unwind_deferred_request(1, a);
    assert_eq!(exec_cookie.id(), cookie(3, 1));
    let forked_mm = k.task(child).mm.unwrap();
    let new_mm = k.new_mm(Arch::X86_64);
    k.exec(child, new_mm, new_regs.clone());
    let functions = vec![RawFunction::new(0x50_1000, 0x100, vec![RawRow::new(0, true, &[8])])];
    let end = place(&mut new_mem, &table(Version::V3, Abi::Amd64, functions), 0x70_0000);
    k.add_sframe(new_mm, &new_mem, support::ANY_VMA, (0x70_0000, end), (0x50_0000, 0x51_0000)).unwrap();
    k.return_to_user(child, &new_mem);
    // SFrame on the new image: the entry PC, then the (zero) word at SP.
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 1), 2)]);
    assert_eq!(cached(&k, child), Vec::<u64>::new());
    assert_eq!(k.task(child).info.cache.as_ref().unwrap().entries, vec![0x50_1000, 0]);

    // exit_group() with a request pending: served by the exit hook.
    k.enter(child, EntryReason::Syscall, new_regs, &new_mem);
    let (_, exit_cookie) = k.unwind_deferred_request(1, a);
    assert_eq!(exit_cookie.id(), cookie(5, 1));
    k.exit(child, 0, &new_mem);
    assert_eq!(callbacks(&k)[1..], [(a.0, cookie(5, 1), 2)]);
    let c = k.task(child);
    assert_eq!((c.state, c.mm, c.work_queued), (TaskState::Dead, None, false));
    assert!(k.mm(new_mm).sframe.is_empty(), "the child's last mm died with its section");
    assert!(k.mm(forked_mm).sframe.is_empty());
    let p = k.task(parent);
    assert_eq!((p.mm, p.info.mask, p.state), (Some(parent_mm), 0, TaskState::User));
    assert_clean(&mut k);
}

/// A child that exits with a request pending gets it served by the exit
/// hook from its own stack; the parent's state is not involved.
#[test]
fn exit_of_a_child_with_a_request_pending() {
    let (mem, regs) = fp_stack(Arch::X86_64, 2);
    let (mut k, a, parent) = one_tracer_and_a_task();
    let child = k.fork(parent, 1);
    k.enter(child, EntryReason::Syscall, regs, &mem);
    assert_eq!(k.nmi_request(1, a, None, &mem).1.id(), cookie(3, 1));
    k.exit(child, 0, &mem);
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 1), 3)]);
    let hook = k.events().iter().filter(|e| matches!(e.kind, EventKind::ExitHook { .. })).count();
    assert_eq!(hook, 1);
    assert_eq!((k.task(child).work_queued, k.task(child).state), (false, TaskState::Dead));
    assert_eq!((k.task(parent).info.mask, k.task(parent).info.cache.is_none()), (0, true));
    assert_clean(&mut k);
}

/// The parent exits while its child has a request pending: the child's
/// request is served on the child's own return, unaffected, and the
/// parent's mm dies with its section while the child's mm lives on.
#[test]
fn parent_exit_while_the_child_has_a_request_pending() {
    let (mut mem, regs) = fp_stack(Arch::X86_64, 3);
    let (mut k, a, parent) = one_tracer_and_a_task();
    let parent_mm = k.task(parent).mm.unwrap();
    register_frameless_section(&mut k, parent_mm, &mut mem, &regs);
    k.enter(parent, EntryReason::Syscall, regs.clone(), &mem);
    let child = k.fork(parent, 1);
    let child_mm = k.task(child).mm.unwrap();
    k.enter(child, EntryReason::Syscall, regs.clone(), &mem);
    assert_eq!(k.unwind_deferred_request(1, a).1.id(), cookie(3, 1));
    k.exit(parent, 0, &mem);
    assert!(callbacks(&k).is_empty(), "the parent requested nothing");
    assert!(k.mm(parent_mm).sframe.is_empty(), "the parent's mm died with its section");
    let c = k.task(child);
    assert_eq!((c.mm, c.info.mask & UNWIND_PENDING, c.work_queued), (Some(child_mm), UNWIND_PENDING, true));
    k.return_to_user(child, &mem);
    assert_eq!(callbacks(&k), vec![(a.0, cookie(3, 1), 4)], "frame pointers: the child's table is empty");
    assert_eq!(k.task(child).info.cache.as_ref().unwrap().entries, expected_trace(3));
    assert_clean(&mut k);
}

/// An mm shared by two tasks (threads, in the model two tasks spawned in
/// one mm) outlives the exec of one of them; its sections are freed when
/// the last user leaves (here by exit).
#[test]
fn a_shared_mm_keeps_its_sections_until_its_last_user_leaves() {
    let (mut mem, regs) = fp_stack(Arch::X86_64, 1);
    let mut k = kernel(without_perf());
    let mm = k.new_mm(Arch::X86_64);
    register_frameless_section(&mut k, mm, &mut mem, &regs);
    let t1 = k.spawn("t1", mm, 0);
    let t2 = k.spawn("t2", mm, 1);
    k.enter(t1, EntryReason::Syscall, regs.clone(), &mem);
    let (_, new_regs) = new_image();
    let new_mm = k.new_mm(Arch::X86_64);
    k.exec(t1, new_mm, new_regs);
    assert_eq!(k.mm(mm).sframe.len(), 1, "t2 still uses it");
    k.enter(t2, EntryReason::Syscall, regs, &mem);
    k.exit(t2, 0, &mem);
    assert!(k.mm(mm).sframe.is_empty(), "its last user left");
    assert_eq!(k.task(t1).mm, Some(new_mm));
    assert_clean(&mut k);
}
