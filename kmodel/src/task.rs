//! A task's life short of its exit: creation (`copy_process()` with
//! `unwind_task_init()` and `dup_mm()`, `kernel/fork.c`), `execve()`
//! (`exec_mmap()` and `start_thread()`, `fs/exec.c` and
//! `fs/binfmt_elf.c`), and the scheduler's part (context switch,
//! migration, sleep and wake-up).

use crate::arch::UserRegs;
use crate::event::EventKind;
use crate::kernel::{Kernel, Task, TaskState};
use crate::types::{MmId, Tid, UnwindTaskInfo, UNWIND_PENDING};

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
    /// pointers until it execs or registers sections itself. A parent
    /// without an mm (a kernel thread) gets a kernel-thread child.
    pub fn fork(&mut self, parent: Tid, cpu: usize) -> Tid {
        let (name, parent_mm, kthread) = {
            let p = self.task(parent);
            (format!("{}-child", p.name), p.mm, p.kthread)
        };
        let child_mm = parent_mm.map(|mm| {
            let arch = self.mms[mm.0].arch;
            self.new_mm(arch)
        });
        let tid = self.alloc_task(&name, child_mm, kthread, cpu);
        if kthread {
            self.task_mut(tid).state = TaskState::Kernel;
        }
        self.log(cpu, Some(tid), EventKind::TaskNew { parent: Some(parent) });
        self.check_structure();
        tid
    }

    /// `execve()` succeeding for `tid`, which is in the kernel in that
    /// system call: the task switches to `new_mm` (`exec_mmap()`), the
    /// binary loader's `start_thread()` rewrites the saved user registers
    /// to `regs` (the new image's entry PC and initial stack), and the old
    /// mm is released (its SFrame sections are freed with it unless
    /// another task still uses it, `__mmdrop()` → `sframe_free_mm()`).
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
        let pending = self.task(tid).info.mask & UNWIND_PENDING != 0;
        {
            let t = self.task_mut(tid);
            t.mm = Some(new_mm);
            t.regs = Some(regs);
        }
        self.log(cpu, Some(tid), EventKind::Exec { mm: new_mm, pc, pending });
        // The trace for this entry's cookie will now start at the new
        // image's PC (B6 is about the registers as they are on return).
        self.ledger_exec(tid, pc);
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
