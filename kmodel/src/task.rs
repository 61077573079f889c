//! A task's life short of its exit: creation (`copy_process()` with
//! `unwind_task_init()` and `copy_mm()`: `dup_mm()` for a fork, `mmget()`
//! of the parent's mm for `clone(CLONE_VM | CLONE_THREAD)`,
//! `kernel/fork.c`), `execve()` (`de_thread()`, `exec_mmap()` and
//! `start_thread()`, `fs/exec.c` and `fs/binfmt_elf.c`), and the
//! scheduler's part (context switch, migration, sleep and wake-up,
//! `signal_wake_up()` of a killed thread).

use crate::arch::UserRegs;
use crate::event::{EntryReason, EventKind};
use crate::kernel::{Kernel, Task, TaskState};
use crate::memory::UserMemory;
use crate::types::{ForkTable, MmId, Tid, UnwindTaskInfo, UNWIND_PENDING};
use std::collections::BTreeMap;

/// The exit code of a task killed by SIGKILL (`de_thread()`'s
/// `zap_other_threads()`): the signal number, as `do_group_exit()` gets it.
pub const SIGKILL_EXIT: i32 = 9;

impl Kernel {
    /// A new user task in `mm`, running user code on `cpu` (as after exec).
    pub fn spawn(&mut self, name: &str, mm: MmId, cpu: usize) -> Tid {
        let tid = self.alloc_task(name, Some(mm), false, cpu, None);
        self.log(cpu, Some(tid), EventKind::TaskNew { parent: None, thread: false });
        tid
    }

    /// A kernel thread (requests from it fail).
    pub fn spawn_kthread(&mut self, name: &str, cpu: usize) -> Tid {
        let tid = self.alloc_task(name, None, true, cpu, None);
        self.task_mut(tid).state = TaskState::Kernel;
        self.log(cpu, Some(tid), EventKind::TaskNew { parent: None, thread: false });
        tid
    }

    /// A new task in `mm` (which it takes a reference to, `mmget()`), in
    /// thread group `tgid` (its own when `None`).
    fn alloc_task(&mut self, name: &str, mm: Option<MmId>, kthread: bool, cpu: usize, tgid: Option<Tid>) -> Tid {
        let tid = self.next_tid;
        self.next_tid += 1;
        if let Some(mm) = mm {
            self.mmget(mm);
        }
        // unwind_task_init(): a task starts with empty deferred state.
        self.tasks.insert(
            tid,
            Task {
                tid,
                name: name.to_string(),
                pid: tid,
                tgid: tgid.unwrap_or(tid),
                killed: None,
                mm,
                kthread,
                exiting: false,
                state: TaskState::User,
                cpu,
                regs: None,
                info: UnwindTaskInfo::default(),
                work_queued: false,
                notify_resume: false,
                works_closed: false,
                entries: 0,
                stack_copy: None,
                in_handler: false,
            },
        );
        if let Some(backend) = &self.backend {
            backend.task_new(tid);
        }
        tid
    }

    /// `fork()` by `parent` (in its fork system call): `copy_process()`
    /// with the child placed on `cpu`, returned in user mode.
    ///
    /// The child's deferred state starts empty whatever the parent's
    /// (`unwind_task_init()` zeroes `unwind_info`: mask, cookie, no cache;
    /// `copy_process()` also sets `task_works = NULL`, so a work the parent
    /// has queued is not the child's). Its address space is new and its
    /// SFrame table empty: `dup_mm()` copies the `mm_struct` and then calls
    /// `mm_init()`, whose `mm_init_sframe()` re-initialises the maple tree;
    /// nothing copies the parent's sections (there is no `sframe_dup_mm()`
    /// in the trees that carry the series), so the child unwinds by frame
    /// pointers until it execs or registers sections itself. The lab's
    /// [`ForkTable::Copy`] variant gives the child a copy of the parent's
    /// table instead (logged as one `SframeAdd` per section). A parent
    /// without an mm (a kernel thread) gets a kernel-thread child.
    /// `perf_event_init_task()` gives the child events of its own in every
    /// perf session that inherits from the parent.
    pub fn fork(&mut self, parent: Tid, cpu: usize) -> Tid {
        let (name, parent_mm, kthread) = {
            let p = self.task(parent);
            (format!("{}-child", p.name), p.mm, p.kthread)
        };
        let child_mm = parent_mm.map(|mm| {
            let arch = self.mms[mm.0].arch;
            self.new_mm(arch)
        });
        let tid = self.alloc_task(&name, child_mm, kthread, cpu, None);
        self.tracers.perf_init_task(parent, tid);
        self.log(cpu, Some(tid), EventKind::TaskNew { parent: Some(parent), thread: false });
        if let (Some(from), Some(to)) = (parent_mm, child_mm) {
            if self.opts.sframe_table.fork == ForkTable::Copy {
                let table = self.mms[from.0].sframe.clone();
                for e in table.entries() {
                    self.log(
                        cpu,
                        Some(tid),
                        EventKind::SframeAdd { sframe: e.sframe_start, text: e.text_start, error: None },
                    );
                }
                self.mms[to.0].sframe = table;
            }
        }
        if kthread {
            self.task_mut(tid).state = TaskState::Kernel;
        }
        self.check_structure();
        tid
    }

    /// `clone(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
    /// CLONE_THREAD | …)` by `parent` (what glibc's `pthread_create()`
    /// does): `copy_process()` with the new thread placed on `cpu`,
    /// returned in user mode.
    ///
    /// `copy_mm()` with `CLONE_VM` takes a reference to the parent's mm
    /// (`mmget()`) instead of `dup_mm()`: the thread shares the mm and so
    /// its SFrame table, which lives until the last thread drops it. Its
    /// deferred state is its own and starts empty, as for a fork
    /// (`unwind_task_init()`; `task_works = NULL`): a request pending in
    /// the parent is the parent's alone. It joins the parent's thread
    /// group (same `tgid`), and gets events of its own in every perf
    /// session that inherits from the parent (`perf_event_init_task()`).
    pub fn clone_thread(&mut self, parent: Tid, cpu: usize) -> Tid {
        let (name, mm, kthread, tgid) = {
            let p = self.task(parent);
            (p.name.clone(), p.mm, p.kthread, p.tgid)
        };
        let tid = self.alloc_task(&name, mm, kthread, cpu, Some(tgid));
        self.tracers.perf_init_task(parent, tid);
        if kthread {
            self.task_mut(tid).state = TaskState::Kernel;
        }
        self.log(cpu, Some(tid), EventKind::TaskNew { parent: Some(parent), thread: true });
        self.check_structure();
        tid
    }

    /// The live tasks of `tid`'s thread group other than `tid`, in id order.
    pub fn threads_of(&self, tid: Tid) -> Vec<Tid> {
        let tgid = self.task(tid).tgid;
        self.tasks
            .values()
            .filter(|t| t.tgid == tgid && t.tid != tid && t.state != TaskState::Dead)
            .map(|t| t.tid)
            .collect()
    }

    /// `de_thread()` at the start of an `execve()` by `tid` (in the kernel
    /// in that system call), before [`Kernel::exec`]: makes it the only
    /// thread of its group.
    ///
    /// `zap_other_threads()` sends SIGKILL to every other thread, and the
    /// exec waits until they are all dead (`sig->notify_count`, which each
    /// one decrements in `exit_notify()`, at the very end of `do_exit()`).
    /// Each goes through its own exit path while the old mm still exists
    /// (the exec'ing task holds it until `exec_mmap()`): a thread with a
    /// request pending runs its task_work in `get_signal()`, which runs
    /// queued task_work before looking at signals, so the callback gets
    /// its real stack; then `do_exit()`. The model takes each killed
    /// thread through that now, in id order ([`Kernel::signal_wake_up`]; a
    /// thread in user mode enters with its registers from `user_regs`, as
    /// the host's scheduler switched it out, or else those of its last
    /// kernel entry). A non-leader then takes the old leader's pid
    /// (`exchange_tids()`), which tracers see from now on: a deferred
    /// record for a request it made before the exec carries the new pid.
    /// Nothing here touches `unwind_info`: the exec'ing task's own pending
    /// request is served on its return into the new image, as for a
    /// single-threaded exec. Returns the threads killed.
    pub fn de_thread(&mut self, tid: Tid, user_regs: &BTreeMap<Tid, UserRegs>, mem: &dyn UserMemory) -> Vec<Tid> {
        let killed = self.zap_other_threads(tid, SIGKILL_EXIT, "de_thread");
        for &t in &killed {
            self.signal_wake_up(t, user_regs.get(&t).cloned(), mem);
        }
        let (pid, tgid, cpu) = {
            let t = self.task(tid);
            (t.pid, t.tgid, t.cpu)
        };
        if pid != tgid {
            // The old leader is a zombie by now (it went through do_exit()
            // above, or exited earlier): swap pids and release it.
            let leader = self.tasks.values().find(|t| t.pid == tgid && t.tid != tid).map(|t| t.tid);
            if let Some(leader) = leader {
                self.task_mut(leader).pid = pid;
                self.task_mut(tid).pid = tgid;
                self.log(cpu, Some(tid), EventKind::DeThread { leader, pid: tgid });
            }
        }
        self.check_structure();
        killed
    }

    /// `signal_wake_up()` of a thread with a fatal signal pending
    /// ([`Task::killed`]), and what follows on its CPU: a thread in user
    /// mode is interrupted (the IPI: it enters the kernel with `regs`, or
    /// its last saved registers), a sleeping one wakes; either way it then
    /// heads back to user mode and dies there in `get_signal()`
    /// ([`Kernel::return_to_user`]). A thread already in the kernel just
    /// takes that way out. Does nothing for a task that is not killed or
    /// already dead.
    ///
    /// [`Task::killed`]: crate::kernel::Task::killed
    pub fn signal_wake_up(&mut self, tid: Tid, regs: Option<UserRegs>, mem: &dyn UserMemory) {
        let t = self.task(tid);
        if t.killed.is_none() || t.state == TaskState::Dead || t.exiting {
            return;
        }
        match t.state {
            TaskState::User => {
                let Some(regs) = regs.or_else(|| t.regs.clone()) else { return };
                self.enter(tid, EntryReason::Irq, regs, mem);
            }
            TaskState::Sleeping => self.wake(tid),
            TaskState::Kernel | TaskState::Dead => {}
        }
        self.return_to_user(tid, mem);
    }

    /// `execve()` succeeding for `tid`, which is in the kernel in that
    /// system call: the task switches to `new_mm` (`exec_mmap()`), the
    /// binary loader's `start_thread()` rewrites the saved user registers
    /// to `regs` (the new image's entry PC and initial stack), and the old
    /// mm is released (its SFrame sections are freed with it unless
    /// another task still uses it, `__mmdrop()` → `sframe_free_mm()`).
    ///
    /// A thread exec'ing calls [`Kernel::de_thread`] first: by now it is
    /// the only live task of its group (the old mm may still be shared
    /// with another process's task made by [`Kernel::spawn`]; it then
    /// lives on).
    ///
    /// Nothing in `fs/exec.c` touches `unwind_info`: a request made before
    /// the exec stays pending with its cookie, and its task_work runs on
    /// the return into the new image, walking the new registers in the new
    /// mm (reference §5.4). The cache is left as it is too; upstream it is
    /// empty here, as only the task_work and the exit hook fill it and
    /// `unwind_reset_info()` emptied it on the previous return to user.
    /// The host registers the new image's `.sframe` sections
    /// (`elf_add_sframe()`, [`Kernel::add_sframe`]) in `new_mm` after this
    /// call and before [`Kernel::return_to_user`], as `load_elf_binary()`
    /// does after `begin_new_exec()`.
    pub fn exec(&mut self, tid: Tid, new_mm: MmId, regs: UserRegs) {
        let (cpu, old_mm) = {
            let t = self.task(tid);
            debug_assert_ne!(t.state, TaskState::User, "execve() runs in the kernel");
            (t.cpu, t.mm)
        };
        let pc = regs.pc;
        debug_assert!(self.threads_of(tid).is_empty(), "de_thread() before exec_mmap()");
        let pending = self.task(tid).info.mask & UNWIND_PENDING != 0;
        if old_mm != Some(new_mm) {
            self.mmget(new_mm);
        }
        {
            let t = self.task_mut(tid);
            t.mm = Some(new_mm);
            t.regs = Some(regs);
        }
        self.log(cpu, Some(tid), EventKind::Exec { mm: new_mm, pc, pending });
        // The trace for this entry's cookie will now start at the new
        // image's PC (B6 is about the registers as they are on return).
        self.ledger_user_pc(tid, pc);
        if let Some(old) = old_mm.filter(|&old| old != new_mm) {
            self.mmput(old, cpu, tid);
        }
        self.check_structure();
    }

    /// Makes `tid` the task running on its CPU (a context switch).
    pub fn schedule(&mut self, tid: Tid) {
        let cpu = self.task(tid).cpu;
        self.cpus[cpu].current = Some(tid);
    }

    /// Moves `tid` to `cpu` (it must not be running in user mode there: the
    /// host migrates sleeping or preempted tasks).
    pub fn migrate(&mut self, tid: Tid, to: usize) {
        let from = self.task(tid).cpu;
        if self.cpus[from].current == Some(tid) {
            self.cpus[from].current = None;
        }
        self.task_mut(tid).cpu = to;
        self.cpus[to].current = Some(tid);
        self.log(to, Some(tid), EventKind::Migrate { from, to });
    }

    /// The task sleeps in the kernel.
    pub fn sleep(&mut self, tid: Tid) {
        self.task_mut(tid).state = TaskState::Sleeping;
        let cpu = self.task(tid).cpu;
        self.log(cpu, Some(tid), EventKind::Sleep);
    }

    /// The task wakes (still in the kernel).
    pub fn wake(&mut self, tid: Tid) {
        self.task_mut(tid).state = TaskState::Kernel;
        let cpu = self.task(tid).cpu;
        self.log(cpu, Some(tid), EventKind::Wake);
    }
}
