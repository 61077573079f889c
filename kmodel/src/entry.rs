//! Entering and leaving the kernel (`kernel/entry/common.c`): entry from
//! user mode, `exit_to_user_mode()` with its task_work loop and
//! `unwind_reset_info()`, and the NMI path, which returns to user mode
//! without running task_work (with `TWA_NMI_CURRENT` the self-IPI then
//! enters the kernel again at once). Also `task_work_add()` and
//! `task_work_run()` (`kernel/task_work.c`), where only the deferred-unwind
//! work exists.

use crate::arch::UserRegs;
use crate::event::{EntryReason, EventKind};
use crate::interleave::Point;
use crate::kernel::{Kernel, TaskState};
use crate::memory::{Access, UserMemory};
use crate::types::{Cookie, ExitPath, Tid, WorkId, EINVAL, ESRCH};
use crate::unwind::unwind_user_dry_run;

/// How a task_work is queued (`enum task_work_notify_mode`, the two modes
/// the deferred unwinder uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notify {
    /// `TWA_RESUME`: set TIF_NOTIFY_RESUME.
    Resume,
    /// `TWA_NMI_CURRENT`: set the flag on current and raise a self-IPI.
    NmiCurrent,
}

impl Kernel {
    /// The task enters the kernel from user mode with these registers.
    pub fn enter(&mut self, tid: Tid, reason: EntryReason, regs: UserRegs, mem: &dyn UserMemory) {
        self.enter_inner(tid, reason, regs, mem, true);
    }

    /// `new_entry` is false for the self-IPI that follows an NMI at once:
    /// no user instruction ran in between, so it continues the same
    /// logical entry (same stack, same cookie).
    fn enter_inner(&mut self, tid: Tid, reason: EntryReason, regs: UserRegs, mem: &dyn UserMemory, new_entry: bool) {
        let cpu = self.task(tid).cpu;
        self.cpus[cpu].current = Some(tid);
        let t = self.task_mut(tid);
        debug_assert_eq!(t.state, TaskState::User, "enter from user mode only");
        t.state = TaskState::Kernel;
        if new_entry {
            t.entries += 1;
        }
        let pc = regs.pc;
        t.regs = Some(regs);
        self.log(cpu, Some(tid), EventKind::Entry { reason, pc });
        if reason == EntryReason::Syscall {
            self.tracers_on_syscall(cpu);
        }
        if reason == EntryReason::Syscall
            && self.opts.exit_path == ExitPath::UnwindAtSyscallEntry
            && !self.callbacks.is_empty()
        {
            // The alternative design: unwind while faulting is allowed, so
            // the stack is cached before anything can take the mm away.
            let _ = self.unwind_user_faultable(tid, mem);
        }
    }

    /// `exit_to_user_mode()`: run task_work while TIF_NOTIFY_RESUME is set,
    /// then `unwind_reset_info()`, then user mode. An NMI in the window
    /// after the reset (§3 case 5) is handled as the version does.
    pub fn return_to_user(&mut self, tid: Tid, mem: &dyn UserMemory) {
        let cpu = self.task(tid).cpu;
        loop {
            // exit_to_user_mode_loop() handles signals (TIF_SIGPENDING)
            // before TIF_NOTIFY_RESUME: a killed thread dies here, in
            // get_signal(), and never reaches user mode.
            if self.task(tid).killed.is_some() {
                self.get_signal_fatal(tid, mem);
                return;
            }
            while self.task(tid).notify_resume {
                self.task_mut(tid).notify_resume = false;
                self.task_work_run(tid, mem);
            }
            self.unwind_reset_info(tid);
            self.point(cpu, Point::AfterResetBeforeUser);
            // A SIGKILL sent meanwhile is seen by the loop's last look at
            // the work flags, with interrupts off, before user mode.
            if self.task(tid).killed.is_some() {
                continue;
            }
            // v6.19: an NMI that queued work here also queued the self-IPI,
            // which fires as soon as user mode enables interrupts: the task
            // is back in the kernel at once, with the same user registers.
            if self.cpus[cpu].irq_work && self.task(tid).notify_resume {
                self.cpus[cpu].irq_work = false;
                let regs = self.task(tid).regs.clone();
                let pc = regs.as_ref().map_or(0, |r| r.pc);
                self.log(cpu, Some(tid), EventKind::ReturnToUser);
                self.log(cpu, Some(tid), EventKind::Entry { reason: EntryReason::Irq, pc });
                continue;
            }
            break;
        }
        self.cpus[cpu].irq_work = false;
        let t = self.task_mut(tid);
        t.state = TaskState::User;
        self.log(cpu, Some(tid), EventKind::ReturnToUser);
        self.check_structure();
    }

    /// `task_work_add()` of the task's deferred-unwind work.
    pub(crate) fn task_work_add(&mut self, tid: Tid, cpu: usize, notify: Notify) -> i32 {
        let ret = if self.task(tid).works_closed {
            ESRCH
        } else {
            self.task_mut(tid).work_queued = true;
            self.point(cpu, Point::TaskWorkAddBeforeNotify);
            self.task_mut(tid).notify_resume = true;
            if notify == Notify::NmiCurrent {
                self.cpus[cpu].irq_work = true;
            }
            0
        };
        let mode = match notify {
            Notify::Resume => "TWA_RESUME",
            Notify::NmiCurrent => "TWA_NMI_CURRENT",
        };
        self.log(cpu, Some(tid), EventKind::TaskWorkQueued { mode, ret });
        ret
    }

    /// `task_work_run()`: runs the task's queued task_work (only the
    /// deferred-unwind work exists in the model).
    pub(crate) fn task_work_run(&mut self, tid: Tid, mem: &dyn UserMemory) {
        if self.task(tid).work_queued {
            self.task_mut(tid).work_queued = false;
            self.process_unwind_deferred(tid, mem, "task_work");
        }
    }

    /// An NMI on `cpu`. If it interrupted user mode, `user_regs` are the
    /// registers it saw. Every sampling tracer's NMI handler runs.
    pub fn nmi(&mut self, cpu: usize, user_regs: Option<UserRegs>, mem: &dyn UserMemory) {
        if self.opts.probe_nmi_walk {
            self.probe_nmi_walk(cpu, user_regs.as_ref(), mem);
        }
        self.nmi_with(cpu, user_regs, mem, |k| k.tracers_on_nmi(cpu, mem));
    }

    /// An NMI on `cpu` whose handler only requests a deferred unwind for
    /// `work` (what tests inject at interleaving points). Returns the
    /// request's result.
    pub fn nmi_request(
        &mut self,
        cpu: usize,
        work: WorkId,
        user_regs: Option<UserRegs>,
        mem: &dyn UserMemory,
    ) -> (i32, Cookie) {
        let mut result = (EINVAL, Cookie::default());
        self.nmi_with(cpu, user_regs, mem, |k| result = k.unwind_deferred_request(cpu, work));
        result
    }

    /// [`KernelOptions::probe_nmi_walk`]: would a synchronous walk of the
    /// interrupted task's user stack, here, before any handler has touched
    /// memory, have needed a page fault? The walk leaves the registry as it
    /// is.
    ///
    /// [`KernelOptions::probe_nmi_walk`]: crate::types::KernelOptions::probe_nmi_walk
    fn probe_nmi_walk(&mut self, cpu: usize, user_regs: Option<&UserRegs>, mem: &dyn UserMemory) {
        let Some(tid) = self.current(cpu) else { return };
        let Some(mm) = self.task(tid).mm else { return };
        // The check first, so that the registers can be borrowed, not cloned, per NMI.
        self.check_walk_mm(tid, mm, "probe_nmi_walk");
        let Some(regs) = user_regs.or(self.task(tid).regs.as_ref()) else { return };
        let trace = unwind_user_dry_run(regs, mem, &self.mms[mm.0].sframe, Access::NoFault, &self.opts.unwind);
        if trace.would_fault {
            self.stats.nmi_walk_would_fault += 1;
        }
    }

    /// An NMI on `cpu` that strikes the kernel's code at an interleaving
    /// point (a host injects it from its [`Interleaver`]): the task there
    /// is in the kernel, so the handlers get no user registers, and they
    /// read no user memory ([`NoUserMemory`]: right for a deferred tracer,
    /// which reads none in the NMI; an in-NMI walker would get nothing).
    /// No in-NMI walk is probed.
    ///
    /// [`Interleaver`]: crate::kernel::Interleaver
    /// [`NoUserMemory`]: crate::memory::NoUserMemory
    pub fn nmi_at_point(&mut self, cpu: usize) {
        let mem = crate::memory::NoUserMemory;
        self.nmi_with(cpu, None, &mem, |k| k.tracers_on_nmi(cpu, &mem));
    }

    fn nmi_with(
        &mut self,
        cpu: usize,
        user_regs: Option<UserRegs>,
        mem: &dyn UserMemory,
        handler: impl FnOnce(&mut Kernel),
    ) {
        let tid = self.current(cpu);
        let from_user = tid.is_some_and(|t| self.task(t).state == TaskState::User);
        if from_user {
            let tid = tid.expect("checked");
            let t = self.task_mut(tid);
            t.state = TaskState::Kernel;
            t.entries += 1;
            // Without new registers the saved ones stay (moved, not copied).
            if let Some(regs) = user_regs {
                t.regs = Some(regs);
            }
        }
        let nested = (self.cpus[cpu].in_nmi, self.cpus[cpu].nmi_from_user);
        self.cpus[cpu].in_nmi = true;
        self.cpus[cpu].nmi_from_user = from_user;
        self.log(cpu, tid, EventKind::NmiEnter { from_user });
        handler(self);
        (self.cpus[cpu].in_nmi, self.cpus[cpu].nmi_from_user) = nested;
        self.log(cpu, tid, EventKind::NmiExit);
        if from_user {
            let tid = tid.expect("checked");
            // The NMI returns straight to user mode without processing work;
            // with TWA_NMI_CURRENT the self-IPI then enters the kernel again.
            self.task_mut(tid).state = TaskState::User;
            self.log(cpu, Some(tid), EventKind::ReturnToUser);
            if self.cpus[cpu].irq_work && self.task(tid).notify_resume {
                self.cpus[cpu].irq_work = false;
                let regs = self.task(tid).regs.clone().expect("saved at NMI");
                self.enter_inner(tid, EntryReason::Irq, regs, mem, false);
                self.return_to_user(tid, mem);
            }
        }
        self.check_structure();
    }
}
