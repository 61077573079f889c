//! `do_exit()` (`kernel/exit.c`) in the order that matters here: PF_EXITING,
//! `perf_event_exit_task()`, `unwind_deferred_task_exit()` (upstream: right
//! before `exit_mm()`; v6.17: before perf's exit), `exit_mm()` (with its
//! `mmput()`, which frees the mm's SFrame sections if it was the last
//! user), then
//! `exit_task_work()`, with the lab's alternative exit paths
//! ([`ExitPath`]).

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
