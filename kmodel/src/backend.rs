//! A second implementation of `kernel/unwind/` for the model to drive: the
//! kernel's own `deferred.c` and `user.c`, compiled in user space against
//! a shim and loaded into the lab (the `kupstream` crate). The model keeps
//! everything around those two files — entry and exit, task_work, tasks
//! and their mm, the tracers, the event log, the invariant checks — and
//! hands each call of the files' functions to the backend
//! ([`Kernel::with_backend`]); the backend calls back through [`Host`] for
//! what the files ask of the rest of the kernel.
//!
//! This file only names the two sides; `upstream.rs` holds the model's.
//!
//! [`Kernel::with_backend`]: crate::kernel::Kernel::with_backend

use crate::types::{Tid, WorkId};

/// One call site of a primitive in the kernel's code (an atomic, a bit
/// operation, a lock, a list step, a user read), where another context may
/// act: the backend's interleaving point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Site {
    /// The file, relative to the kernel tree (`kernel/unwind/deferred.c`).
    pub file: &'static str,
    /// The line.
    pub line: u32,
    /// The function (`unwind_deferred_request`).
    pub func: &'static str,
    /// The primitive (`atomic_long_fetch_or`).
    pub op: &'static str,
}

impl std::fmt::Display for Site {
    /// `atomic_long_fetch_or at kernel/unwind/deferred.c:279 (unwind_deferred_request)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}:{}", self.op, self.file, self.line)?;
        if !self.func.is_empty() {
            write!(f, " ({})", self.func)?;
        }
        Ok(())
    }
}

/// What the backend's code reads of a task besides its `unwind_info`: set
/// before every call that runs as that task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskView {
    /// `PF_KTHREAD`.
    pub kthread: bool,
    /// `PF_EXITING`.
    pub exiting: bool,
    /// `current->mm` is set.
    pub has_mm: bool,
    /// `user_mode(task_pt_regs(current))`: the task entered the kernel from
    /// user mode and its user registers are saved.
    pub user_mode: bool,
    /// A 32-bit (compat) task: 4-byte stack words.
    pub compat: bool,
    /// Its registers were saved in VM86 mode (`X86_VM_MASK`).
    pub vm86: bool,
    /// It is stopped by a uprobe on a function's first instruction
    /// (`is_uprobe_at_func_entry()`).
    pub uprobe_at_entry: bool,
    /// The user IP, SP and frame pointer saved at kernel entry.
    pub ip: u64,
    /// See `ip`.
    pub sp: u64,
    /// See `ip`.
    pub fp: u64,
}

/// A task's `struct unwind_task_info` as the backend holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InfoView {
    /// `unwind_mask`.
    pub mask: u64,
    /// `id.id` as the host's `union unwind_task_id` reads it.
    pub id: u64,
    /// The cache, if allocated: `unwind_completed`, and the cached entries.
    pub cache: Option<(u64, Vec<u64>)>,
}

/// The registered works as the backend holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorksView {
    /// Per work the lab created, in order: its `bit` and whether it is on
    /// the callbacks list.
    pub works: Vec<(i32, bool)>,
    /// `unwind_mask`, the global bit allocation.
    pub global_mask: u64,
    /// The callbacks list, head first.
    pub callbacks: Vec<WorkId>,
    /// `unwind_ctx_ctr` of each CPU asked for.
    pub ctx_ctr: Vec<u32>,
    /// SRCU read sections of `unwind_srcu` now (handlers walking the list).
    pub srcu_readers: u32,
}

/// Something the backend's code did that the model learns after a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendEvent {
    /// A `WARN*()` fired, or the code did something undefined (a shift
    /// past the word, a list entry deleted twice).
    Warn {
        /// Where.
        site: Site,
        /// What (`bit < 0`, or the harness's words).
        what: String,
        /// On which CPU.
        cpu: usize,
        /// As which task (0: none).
        tid: Tid,
    },
    /// An `unwind_deferred_init()` that had to wait returned.
    InitReturned {
        /// The work.
        work: WorkId,
        /// Its value.
        ret: i32,
    },
    /// An `unwind_deferred_cancel()` that had to wait returned.
    CancelReturned {
        /// The work.
        work: WorkId,
    },
}

/// What the kernel's code asks of the rest of the kernel, answered by the
/// model during a backend call.
pub trait Host {
    /// A preemption point of the backend's code.
    fn point(&mut self, site: Site);
    /// `get_user()`: false if the read faults.
    fn read_user(&mut self, addr: u64, buf: &mut [u8]) -> bool;
    /// `task_work_add()` of `tid`'s unwind work; `nmi_current` for
    /// `TWA_NMI_CURRENT`, else `TWA_RESUME`.
    fn task_work_add(&mut self, tid: Tid, nmi_current: bool) -> i32;
    /// `task_work_cancel()`: whether the work was queued.
    fn task_work_cancel(&mut self, tid: Tid) -> bool;
    /// A tracer's `work->func()`.
    fn callback(&mut self, work: WorkId, tid: Tid, cookie: u64, trace: &[u64]);
    /// The walk of `tid`'s stack when the lab's unwinder stands in for
    /// `user.c` (the proposals: SFrame, AArch64, s390x); `None` lets
    /// `user.c` walk.
    fn walk(&mut self, tid: Tid, max: usize) -> Option<Vec<u64>>;
    /// `user.c` walked `tid`'s stack and found `trace`.
    fn walked(&mut self, tid: Tid, trace: &[u64]);
}

/// The kernel's `deferred.c` and `user.c` as a backend: one call per
/// function of theirs the rest of the kernel calls.
pub trait DeferredBackend: Send + Sync {
    /// What runs, for reports (`kernel/unwind/ of Linux 7.3.4 (Debian
    /// linux-source-7.3 7.3.4-1~bpo13+1), compiled against the lab's shim`).
    fn describe(&self) -> String;
    /// `unwind_task_init()` of a new task.
    fn task_new(&self, tid: Tid);
    /// The fields the code reads of `tid` besides `unwind_info`.
    fn set_task(&self, tid: Tid, view: &TaskView);
    /// `unwind_deferred_init()` of `work` (on another CPU): its value, or
    /// [`crate::types::INIT_WAITING`] when it waits for `callback_mutex`.
    fn init(&self, host: &mut dyn Host, work: WorkId, cpu: usize) -> i32;
    /// `unwind_deferred_cancel()` of `work` (on another CPU): true if it
    /// returned, false if it waits (for `callback_mutex` or the SRCU grace
    /// period).
    fn cancel(&self, host: &mut dyn Host, work: WorkId, cpu: usize) -> bool;
    /// `unwind_deferred_request()` as `tid` on `cpu`: its value and cookie.
    fn request(&self, host: &mut dyn Host, tid: Tid, cpu: usize, in_nmi: bool, work: WorkId) -> (i32, u64);
    /// `task_work_run()` of `tid`'s queued unwind work.
    fn task_work(&self, host: &mut dyn Host, tid: Tid, cpu: usize);
    /// `unwind_reset_info()` as `tid`.
    fn reset_info(&self, host: &mut dyn Host, tid: Tid, cpu: usize);
    /// `unwind_deferred_task_exit()` as `tid`.
    fn task_exit(&self, host: &mut dyn Host, tid: Tid, cpu: usize);
    /// `tid`'s `unwind_info` now.
    fn info(&self, tid: Tid) -> InfoView;
    /// The works, global mask and callbacks list now (`works` works), the
    /// cookie counters of the first `cpus` CPUs and the SRCU readers.
    fn works(&self, works: usize, cpus: usize) -> WorksView;
    /// What happened since the last call (warnings, late returns).
    fn take_events(&self) -> Vec<BackendEvent>;
    /// The code faulted (and the backend refuses every call since): what
    /// and where.
    fn failure(&self) -> Option<String>;
}
