//! A task's life short of its exit: creation (`copy_process()` with
//! `unwind_task_init()`, `kernel/fork.c`), `execve()` (`fs/exec.c`), and
//! the scheduler's part (context switch, migration, sleep and wake-up).

use crate::event::EventKind;
use crate::kernel::{Kernel, Task, TaskState};
use crate::types::{MmId, Tid, UnwindTaskInfo};

impl Kernel {
    /// A new user task in `mm`, running user code on `cpu` (as after exec).
    pub fn spawn(&mut self, name: &str, mm: MmId, cpu: usize) -> Tid {
        let tid = self.alloc_task(name, Some(mm), false, cpu);
        self.log(cpu, Some(tid), EventKind::TaskNew { parent: None });
        tid
    }

    /// A kernel thread (requests from it fail).
    pub fn spawn_kthread(&mut self, name: &str, cpu: usize) -> Tid {
        let tid = self.alloc_task(name, None, true, cpu);
        self.task_mut(tid).state = TaskState::Kernel;
        self.log(cpu, Some(tid), EventKind::TaskNew { parent: None });
        tid
    }

    fn alloc_task(&mut self, name: &str, mm: Option<MmId>, kthread: bool, cpu: usize) -> Tid {
        let tid = self.next_tid;
        self.next_tid += 1;
        // unwind_task_init(): a task starts with empty deferred state.
        self.tasks.insert(
            tid,
            Task {
                tid,
                name: name.to_string(),
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
        tid
    }

    /// `fork()`: the child shares nothing of the parent's deferred state
    /// (B9) and gets a copy of its SFrame registry in a new mm.
    pub fn fork(&mut self, parent: Tid, cpu: usize) -> Tid {
        let (name, mm) = {
            let p = self.task(parent);
            (format!("{}-child", p.name), p.mm)
        };
        let child_mm = mm.map(|mm| {
            let copy = self.mms[mm.0].clone();
            self.mms.push(copy);
            MmId(self.mms.len() - 1)
        });
        let tid = self.alloc_task(&name, child_mm, false, cpu);
        self.log(cpu, Some(tid), EventKind::TaskNew { parent: Some(parent) });
        tid
    }

    /// `execve()` completing: the task gets `new_mm` (the old one's SFrame
    /// sections die with it). Pending requests stay and are served on the
    /// return into the new image (§5.4).
    pub fn exec(&mut self, tid: Tid, new_mm: MmId) {
        self.task_mut(tid).mm = Some(new_mm);
        let cpu = self.task(tid).cpu;
        self.log(cpu, Some(tid), EventKind::Exec);
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
