//! The model's event log: one record per observable step, in order, with
//! virtual time. It is both the output (JSON Lines) and the evidence an
//! invariant violation carries.

use serde::Serialize;

use crate::types::{Cookie, EventLog, MmId, Tid, WorkId};

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Sequence number (0, 1, …).
    pub seq: u64,
    /// Virtual time in nanoseconds (advanced by the host).
    pub time: u64,
    /// CPU the event happened on.
    pub cpu: usize,
    /// Task concerned, if any.
    pub tid: Option<Tid>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Why a task entered the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryReason {
    /// A system call.
    Syscall,
    /// An interrupt (timer, the irq_work self-IPI, …).
    Irq,
    /// An exception such as a page fault.
    Exception,
    /// An NMI that hit user mode.
    Nmi,
    /// A uprobe's breakpoint (`int3`, `BRK`, s390x's 0x0002).
    Uprobe,
}

impl std::fmt::Display for EntryReason {
    /// `syscall`, `irq`, `exception` or `nmi`, as the log spells it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryReason::Syscall => "syscall",
            EntryReason::Irq => "irq",
            EntryReason::Exception => "exception",
            EntryReason::Nmi => "nmi",
            EntryReason::Uprobe => "uprobe",
        })
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// A tracer registered (`unwind_deferred_init`).
    Init {
        /// Its work.
        work: WorkId,
        /// Its name.
        name: String,
        /// Return value (0 or -EBUSY; logged when the init completes, after
        /// any wait for `callback_mutex`).
        ret: i32,
        /// Bit allocated (if any).
        bit: Option<u32>,
    },
    /// A task was created.
    TaskNew {
        /// Parent, for a fork or a thread.
        parent: Option<Tid>,
        /// A thread (`clone(CLONE_VM | CLONE_THREAD)`): it shares its
        /// parent's mm. Not serialised when false, so the logs of
        /// single-threaded runs are as they were.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        thread: bool,
    },
    /// A task entered the kernel from user mode.
    Entry {
        /// Why.
        reason: EntryReason,
        /// User PC at entry.
        pc: u64,
    },
    /// `exit_to_user_mode()` finished: the task is in user mode again.
    ReturnToUser,
    /// An NMI began on this CPU.
    NmiEnter {
        /// True if it interrupted user mode.
        from_user: bool,
    },
    /// The NMI ended.
    NmiExit,
    /// `unwind_deferred_request()` returned.
    Request {
        /// The tracer.
        work: WorkId,
        /// Return value.
        ret: i32,
        /// Cookie handed out (0 on error).
        cookie: Cookie,
        /// In NMI context.
        in_nmi: bool,
    },
    /// The per-task work was queued with `task_work_add()`.
    TaskWorkQueued {
        /// Notification mode.
        mode: &'static str,
        /// Return value of task_work_add.
        ret: i32,
    },
    /// The deferred-unwind task-work handler started.
    HandlerStart {
        /// Tracer bits snapshot taken by the fetch_andnot.
        bits: u64,
        /// Where it runs.
        context: &'static str,
    },
    /// The user stack was walked (a cache miss).
    Unwind {
        /// Entries found.
        nr: usize,
        /// The method that found each entry after the first (the PC).
        methods: Vec<crate::unwind::Method>,
        /// Why the walk ended.
        stop: crate::unwind::Stop,
        /// Access mode of the walk.
        faultable: bool,
        /// Pages faulted in by this walk.
        faults: u64,
    },
    /// A tracer callback ran.
    Callback {
        /// The tracer.
        work: WorkId,
        /// Cookie delivered.
        cookie: Cookie,
        /// Entries delivered.
        nr: usize,
    },
    /// `unwind_reset_info()` cleared the per-entry state.
    Reset {
        /// The cookie that was cleared (0 if none).
        cookie: Cookie,
    },
    /// Reset found PENDING set and left everything in place.
    ResetSkipped,
    /// The kernel's own code (the upstream backend) hit a `WARN*()` or did
    /// something undefined.
    Warn {
        /// Where.
        site: crate::backend::Site,
        /// What.
        what: String,
    },
    /// `unwind_deferred_cancel()` began (list removal, bit revoked).
    CancelBegin {
        /// The tracer.
        work: WorkId,
    },
    /// The SRCU grace period ended; cancel returns.
    CancelReturn {
        /// The tracer.
        work: WorkId,
    },
    /// A call waits for `callback_mutex`, which a cancel holds across its
    /// grace period; it proceeds when that cancel returns.
    MutexWait {
        /// The tracer the call is for.
        work: WorkId,
        /// `unwind_deferred_init` or `unwind_deferred_cancel`.
        call: &'static str,
    },
    /// A task moved to another CPU.
    Migrate {
        /// From.
        from: usize,
        /// To.
        to: usize,
    },
    /// The task began sleeping in the kernel.
    Sleep,
    /// The task was woken.
    Wake,
    /// `do_exit()` set PF_EXITING.
    Exiting {
        /// Exit code.
        code: i32,
    },
    /// The exit path ran the deferred handler synchronously.
    ExitHook {
        /// Variant that ran it.
        variant: &'static str,
    },
    /// The user stack was copied on exit (copy-on-exit variant).
    StackCopied {
        /// Bytes copied.
        bytes: u64,
    },
    /// `exit_mm()`: the task has no user memory any more.
    ExitMm,
    /// The task is dead.
    Dead,
    /// `execve()` replaced the task's mm and its user registers.
    Exec {
        /// The new address space.
        mm: MmId,
        /// The new image's entry PC (where its first trace starts).
        pc: u64,
        /// A deferred unwind was pending across the exec: it is served on
        /// the return into the new image, with the cookie from before.
        pending: bool,
    },
    /// `zap_other_threads()`: SIGKILL sent to every other live thread of
    /// the caller's group, by `exit_group()` (`do_group_exit()`) or by an
    /// exec (`de_thread()`).
    ZapOtherThreads {
        /// Who asked: `exit_group` or `de_thread`.
        why: &'static str,
        /// The threads killed (model ids).
        killed: Vec<Tid>,
    },
    /// `get_signal()` found the group's fatal signal: the queued task_work
    /// has just run (it runs first in `get_signal()`), `do_group_exit()`
    /// follows.
    FatalSignal {
        /// The exit code `do_exit()` gets.
        code: i32,
    },
    /// `de_thread()`: a non-leader thread execs; the other threads are dead
    /// and it takes the old leader's pid (`exchange_tids()`).
    DeThread {
        /// The old leader (model id).
        leader: Tid,
        /// The pid the exec'ing task has from now on.
        pid: Tid,
    },
    /// An SFrame section was registered or refused.
    SframeAdd {
        /// Section start.
        sframe: u64,
        /// Text start.
        text: u64,
        /// Error, if refused.
        error: Option<String>,
    },
    /// SFrame sections were dropped (corrupt, removed, unmapped).
    SframeRemove {
        /// Section start.
        sframe: u64,
        /// Why.
        why: String,
    },
    /// A tracer wrote a record to a ring buffer.
    Record {
        /// Tracer name (shared with the session: no copy per record).
        tracer: std::sync::Arc<str>,
        /// Record type.
        record: &'static str,
        /// Bytes written.
        bytes: u64,
    },
    /// An invariant failed.
    Violation {
        /// Which.
        invariant: String,
        /// Details.
        detail: String,
    },
}

impl EventKind {
    /// Whether an event log of kind `log` keeps this event
    /// ([`EventLog::Judging`] drops the events of every kernel entry and NMI).
    pub fn kept_by(&self, log: EventLog) -> bool {
        use EventKind as K;
        match log {
            EventLog::All => true,
            EventLog::Judging => !matches!(
                self,
                K::Entry { .. }
                    | K::ReturnToUser
                    | K::NmiEnter { .. }
                    | K::NmiExit
                    | K::Request { .. }
                    | K::TaskWorkQueued { .. }
                    | K::HandlerStart { .. }
                    | K::Record { .. }
                    | K::ResetSkipped
                    | K::MutexWait { .. }
                    | K::Migrate { .. }
                    | K::Sleep
                    | K::Wake
            ),
        }
    }
}
