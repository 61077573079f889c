//! `do_exit()` (`kernel/exit.c`) in the order that matters here: PF_EXITING,
//! `perf_event_exit_task()`, `unwind_deferred_task_exit()` (upstream: right
//! before `exit_mm()`; v6.17: before perf's exit), `exit_mm()` (with its
//! `mmput()`, which frees the mm's SFrame sections if it was the last
//! user), then
//! `exit_task_work()`, with the lab's alternative exit paths
//! ([`ExitPath`]). Also the group side (`kernel/exit.c`,
//! `kernel/signal.c`): `do_group_exit()` with `zap_other_threads()`, and a
//! killed thread's way out through `get_signal()`.
//!
//! Every thread goes through its own `do_exit()`: one thread's exit runs
//! its own exit hook and drops its own reference to the mm (`exit_mm()` →
//! `mmput()`); the mm and its SFrame table die with the last one.

use crate::event::EventKind;
use crate::interleave::Point;
use crate::kernel::{Kernel, StackCopy, TaskState};
use crate::memory::{copy_user, Access, UserMemory};
use crate::types::{ExitPath, Tid, UNWIND_PENDING};

impl Kernel {
    /// `do_exit()` for a task in the kernel (an exit system call), with the
    /// configured exit-path variant.
    pub fn exit(&mut self, tid: Tid, code: i32, mem: &dyn UserMemory) {
        let cpu = self.task(tid).cpu;
        self.task_mut(tid).exiting = true;
        self.log(cpu, Some(tid), EventKind::Exiting { code });
        let variant = self.opts.exit_path;
        if variant == ExitPath::V6_17 {
            self.unwind_deferred_task_exit(tid, mem, "v6.17");
        }
        self.point(cpu, Point::ExitBeforePerfExit);
        self.tracers.perf_exit_task(tid);
        match variant {
            ExitPath::Upstream => self.unwind_deferred_task_exit(tid, mem, "upstream"),
            ExitPath::CopyOnExit => self.copy_stack_on_exit(tid, mem),
            _ => {}
        }
        self.point(cpu, Point::ExitBeforeExitMm);
        let mm = self.task_mut(tid).mm.take();
        self.log(cpu, Some(tid), EventKind::ExitMm);
        if let Some(mm) = mm {
            self.mmput(mm, cpu, tid);
        }
        // exit_task_work(): queued work runs now (without an mm), and no
        // more can be added.
        self.task_work_run(tid, mem);
        self.task_mut(tid).works_closed = true;
        self.task_mut(tid).state = TaskState::Dead;
        if self.cpus[cpu].current == Some(tid) {
            self.cpus[cpu].current = None;
        }
        self.log(cpu, Some(tid), EventKind::Dead);
        self.check_after_exit(tid);
    }

    /// `exit_group(code)` by `tid` (in the kernel, in that system call):
    /// `do_group_exit()` marks the group exiting and `zap_other_threads()`
    /// sends SIGKILL to every other live thread, then the caller runs its
    /// own `do_exit()` ([`Kernel::exit`], with its exit hook). The other
    /// threads die on their own CPUs when they next head for user mode
    /// (the host drives each with [`Kernel::signal_wake_up`], or its
    /// [`Kernel::return_to_user`] if it is in the kernel): `get_signal()`
    /// first runs their queued task_work — a pending deferred unwind is
    /// served there, from task_work, with the mm alive (the caller's
    /// `exit_mm()` dropped only its own reference) — then `do_exit()`.
    /// Whichever thread is last frees the mm. Returns the killed threads.
    pub fn exit_group(&mut self, tid: Tid, code: i32, mem: &dyn UserMemory) -> Vec<Tid> {
        // `do_group_exit()` hands one `group_exit_code` to every thread: the
        // siblings die with the caller's status, in the host's convention.
        let killed = self.zap_other_threads(tid, code, "exit_group");
        self.exit(tid, code, mem);
        killed
    }

    /// `zap_other_threads()`: SIGKILL to every other live thread of `tid`'s
    /// group that is not already exiting, with the status their
    /// `do_group_exit()` will pass to `do_exit()`.
    pub(crate) fn zap_other_threads(&mut self, tid: Tid, status: i32, why: &'static str) -> Vec<Tid> {
        let killed: Vec<Tid> = self
            .threads_of(tid)
            .into_iter()
            .filter(|&t| !self.task(t).exiting && self.task(t).killed.is_none())
            .collect();
        for &t in &killed {
            self.task_mut(t).killed = Some(status);
        }
        let cpu = self.task(tid).cpu;
        self.log(cpu, Some(tid), EventKind::ZapOtherThreads { why, killed: killed.clone() });
        killed
    }

    /// A killed thread on its way to user mode: `get_signal()` runs the
    /// queued task_work first (`task_work_run()`, before it even looks at
    /// the signal), then takes the group's SIGKILL: `do_group_exit()` →
    /// `do_exit()`. The deferred handler thus runs as task_work with the
    /// mm present; the exit hook then finds nothing pending.
    pub(crate) fn get_signal_fatal(&mut self, tid: Tid, mem: &dyn UserMemory) {
        let Some(code) = self.task(tid).killed else { return };
        self.task_work_run(tid, mem);
        let cpu = self.task(tid).cpu;
        self.log(cpu, Some(tid), EventKind::FatalSignal { code });
        self.exit(tid, code, mem);
    }

    /// [`ExitPath::CopyOnExit`]: with an unwind pending, copy the top of the
    /// user stack and the registers while the mm still exists.
    fn copy_stack_on_exit(&mut self, tid: Tid, mem: &dyn UserMemory) {
        if self.task(tid).info.mask & UNWIND_PENDING == 0 {
            return;
        }
        let Some(regs) = self.task(tid).regs.clone() else { return };
        let sp = regs.sp();
        // An unreadable page just ends the copy early.
        let (bytes, _) = copy_user(mem, sp, self.opts.copy_on_exit_bytes, Access::Faultable);
        let copied = bytes.len() as u64;
        self.stats.copied_bytes += copied;
        let Some(mm) = self.task(tid).mm else { return };
        self.task_mut(tid).stack_copy = Some(StackCopy { mm, regs, base: sp, bytes });
        let cpu = self.task(tid).cpu;
        self.log(cpu, Some(tid), EventKind::StackCopied { bytes: copied });
    }
}
