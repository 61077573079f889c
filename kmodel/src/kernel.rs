//! The kernel world the deferred-unwind code lives in: its state (CPUs with
//! their cookie counters, tasks, address spaces, the registered works and
//! their callback list, the tracers, the event log), construction and boot,
//! the interleaving hook, and the read API hosts use. It is a pure state
//! machine: the host (the emulator, a scenario, a test) calls one method
//! per thing that happens, and the model logs events and checks
//! invariants. The methods live next to the kernel code they model (see
//! the crate documentation for the map).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::Serialize;

use crate::arch::{Arch, UserRegs};
use crate::backend::DeferredBackend;
use crate::event::{Event, EventKind};
use crate::interleave::Point;
use crate::invariants::{Ledger, Violation};
use crate::tracer::{PerfRecord, Tracers};
use crate::types::{KernelOptions, MmId, PerfRegistration, Tid, UnwindTaskInfo, WorkId, RESERVED_BITS};
use crate::unwind::{ExtraWalk, ExtraWalks, SframeRegistry};

pub use crate::types::TaskState;

/// A task.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its id.
    pub tid: Tid,
    /// Its name.
    pub name: String,
    /// The thread id user space and tracers see (`task_pid_nr()`): the
    /// model's [`Tid`] until a non-leader thread execs, when `de_thread()`
    /// (`exchange_tids()`) gives it the old leader's.
    pub pid: Tid,
    /// Its thread group (`task_tgid_nr()`): the leader's `pid`. Tasks that
    /// share it were made by [`Kernel::clone_thread`].
    pub tgid: Tid,
    /// A fatal signal is pending (`SIGNAL_GROUP_EXIT` or a `de_thread()` in
    /// progress made `zap_other_threads()` send SIGKILL), with the exit code
    /// `do_group_exit()` will use: the task dies on its way back to user
    /// mode (`get_signal()`), after running its queued task_work.
    pub killed: Option<i32>,
    /// Its address space (`None` for kernel threads and after `exit_mm()`).
    pub mm: Option<MmId>,
    /// `PF_KTHREAD`.
    pub kthread: bool,
    /// `PF_EXITING`.
    pub exiting: bool,
    /// Where it is.
    pub state: TaskState,
    /// The CPU it runs on (or last ran on).
    pub cpu: usize,
    /// User registers saved at the current kernel entry (`task_pt_regs`).
    pub regs: Option<UserRegs>,
    /// Deferred-unwind state.
    pub info: UnwindTaskInfo,
    /// `info->work` is on the task_work list.
    pub work_queued: bool,
    /// `TIF_NOTIFY_RESUME`.
    pub notify_resume: bool,
    /// Past `exit_task_work()`: task_work_add fails.
    pub works_closed: bool,
    /// Kernel entries so far (the current one while in the kernel).
    pub entries: u64,
    /// Copy-on-exit: the registers and stack bytes copied before exit_mm.
    pub stack_copy: Option<StackCopy>,
    /// The deferred handler is running for this task.
    pub in_handler: bool,
}

/// A copy of the top of a user stack (copy-on-exit variant).
#[derive(Debug, Clone)]
pub struct StackCopy {
    /// The address space the stack belonged to (its SFrame sections).
    pub mm: MmId,
    /// Registers at the copy.
    pub regs: UserRegs,
    /// Address of the first byte (the user SP).
    pub base: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// An address space: its architecture, its registered SFrame sections and
/// its life (`mm_users`, and whether `__mmdrop()` has freed it).
#[derive(Debug, Clone)]
pub struct Mm {
    /// Its architecture.
    pub arch: Arch,
    /// SFrame sections (exec, prctl).
    pub sframe: SframeRegistry,
    /// `mm_users`: the tasks that have it as their mm (`mmget()` by
    /// spawn, fork's `dup_mm()`, `clone(CLONE_VM)` and exec; `mmput()` by
    /// `exit_mm()` and exec). It starts at 0: the host creates an mm and
    /// then gives it to a task.
    pub users: u32,
    /// The last `mmput()` dropped it and `__mmdrop()` freed its SFrame
    /// table (`sframe_free_mm()`): no walk may read it any more.
    pub freed: bool,
}

/// One CPU.
#[derive(Debug, Clone, Default)]
pub struct Cpu {
    /// `unwind_ctx_ctr`: last counter handed out on this CPU.
    pub ctr: u32,
    /// The task running here.
    pub current: Option<Tid>,
    /// In NMI context.
    pub in_nmi: bool,
    /// The NMI being handled interrupted user mode (`user_mode(regs)` of
    /// its registers): perf's sample then has no kernel callchain and the
    /// user PC as its IP.
    pub nmi_from_user: bool,
    /// A hard irq_work is queued (the `TWA_NMI_CURRENT` self-IPI).
    pub irq_work: bool,
}

/// A registered tracer (`struct unwind_work`).
#[derive(Debug, Clone)]
pub struct UnwindWork {
    /// Name for logs.
    pub name: String,
    /// Allocated bit, or −1 after cancel (0 after a failed init, and while
    /// its init waits for `callback_mutex`).
    pub bit: i32,
    /// On the callbacks list.
    pub listed: bool,
}

/// A call blocked on `callback_mutex` (held by a cancel across its grace
/// period), in arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutexWaiter {
    /// `unwind_deferred_init()` of this work.
    Init(WorkId),
    /// `unwind_deferred_cancel()` of this work.
    Cancel(WorkId),
}

/// Counters the summaries report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    /// Faultable unwinds run (cache misses).
    pub unwinds: u64,
    /// Pages faulted in by unwinds in task context.
    pub task_faults: u64,
    /// Callbacks made.
    pub callbacks: u64,
    /// Requests that returned 0 (a callback will come).
    pub requests_queued: u64,
    /// Requests that returned 1 (already pending or done this entry).
    pub requests_joined: u64,
    /// Requests refused (negative).
    pub requests_refused: u64,
    /// Bytes of user stack copied on exit.
    pub copied_bytes: u64,
    /// NMIs at which a synchronous walk of the user stack would have needed
    /// a page fault (counted only with [`KernelOptions::probe_nmi_walk`]).
    pub nmi_walk_would_fault: u64,
}

/// Called at every [`Point`] on the CPU where it is reached; tests inject
/// NMIs, cancels and registrations there ([`Kernel::set_interleaver`]).
pub trait Interleaver {
    /// Something may happen here; `kernel` is the whole model.
    fn at(&mut self, kernel: &mut Kernel, cpu: usize, point: Point);
}

impl<F: FnMut(&mut Kernel, usize, Point)> Interleaver for F {
    fn at(&mut self, kernel: &mut Kernel, cpu: usize, point: Point) {
        self(kernel, cpu, point)
    }
}

/// The modelled kernel. Hosts drive it with the methods of the files that
/// model each piece of kernel code and read it with the methods below;
/// its state is the crate's own.
pub struct Kernel {
    pub(crate) opts: KernelOptions,
    pub(crate) cpus: Vec<Cpu>,
    pub(crate) tasks: BTreeMap<Tid, Task>,
    pub(crate) mms: Vec<Mm>,
    /// Tracers' works by id.
    pub(crate) works: Vec<UnwindWork>,
    /// Global bit allocation (`unwind_mask`), PENDING|USED reserved.
    pub(crate) global_mask: u64,
    /// The callbacks list, head first (newest registration first).
    pub(crate) callbacks: Vec<WorkId>,
    /// Active SRCU read sections (handlers walking the list).
    pub(crate) srcu_readers: u32,
    /// Cancels waiting for the grace period (each holds `callback_mutex`
    /// until it returns).
    pub(crate) cancels_waiting: Vec<WorkId>,
    /// The bit each waiting cancel clears in every task when it returns,
    /// and the SRCU readers it waits for: those begun before it (ids below
    /// this one), not later ones (`synchronize_srcu()`'s rule).
    pub(crate) cancel_bits: Vec<(WorkId, u32, u64)>,
    /// The task whose `get_cookie()` is between its cmpxchg and its store
    /// of `id.cpu` (the half-made cookie the invariants allow).
    pub(crate) cookie_in_progress: Option<Tid>,
    /// The SRCU read sections in progress, by id (the model's own
    /// handlers), and the id the next one gets.
    pub(crate) srcu_active: Vec<u64>,
    pub(crate) srcu_next: u64,
    /// Inits and cancels waiting for `callback_mutex`, first come first.
    pub(crate) mutex_waiters: VecDeque<MutexWaiter>,
    pub(crate) tracers: Tracers,
    pub(crate) stats: Stats,
    /// Virtual time (ns).
    pub(crate) time: u64,
    pub(crate) events: Vec<Event>,
    /// The `seq` of the next event (events the log does not keep count
    /// too: [`crate::types::EventLog`]).
    pub(crate) next_seq: u64,
    pub(crate) interleaver: Option<Box<dyn Interleaver>>,
    interleaver_generation: u64,
    pub(crate) next_tid: Tid,
    /// Check invariants as the model runs (on in tests and debug builds).
    pub(crate) check: bool,
    /// Behavioural bookkeeping for the invariants.
    pub(crate) ledger: Ledger,
    /// Invariant violations found (see [`Kernel::take_violations`]).
    pub(crate) violations: Vec<Violation>,
    /// The walks of [`KernelOptions::extra_unwinders`], a lab instrument.
    pub(crate) extra: ExtraWalks,
    /// The kernel's own `deferred.c` and `user.c`, when they run instead
    /// of the model's (`upstream.rs`).
    pub(crate) backend: Option<Arc<dyn DeferredBackend>>,
    /// The cells each logged event changed, when a host records them
    /// ([`Kernel::record_states`]).
    pub(crate) states: Option<crate::state::Recorder>,
}

impl Kernel {
    /// A kernel with `opts.cpus` idle CPUs and no tasks, booted: with
    /// [`PerfRegistration::Boot`] perf's work is registered first.
    pub fn new(opts: KernelOptions) -> Self {
        Kernel::boot(opts, None)
    }

    /// [`Kernel::new`] with `deferred.c` run by `backend` if given.
    pub(crate) fn boot(opts: KernelOptions, backend: Option<Arc<dyn DeferredBackend>>) -> Self {
        let cpus = vec![Cpu::default(); opts.cpus.max(1)];
        let boot_perf = opts.perf_registration == PerfRegistration::Boot;
        let mut k = Kernel {
            opts,
            cpus,
            tasks: BTreeMap::new(),
            mms: Vec::new(),
            works: Vec::new(),
            global_mask: RESERVED_BITS,
            callbacks: Vec::new(),
            srcu_readers: 0,
            cancels_waiting: Vec::new(),
            cancel_bits: Vec::new(),
            cookie_in_progress: None,
            srcu_active: Vec::new(),
            srcu_next: 0,
            mutex_waiters: VecDeque::new(),
            tracers: Tracers::default(),
            stats: Stats::default(),
            time: 0,
            events: Vec::new(),
            next_seq: 0,
            interleaver: None,
            interleaver_generation: 0,
            next_tid: 1,
            check: cfg!(debug_assertions),
            ledger: Ledger::default(),
            violations: Vec::new(),
            extra: ExtraWalks::default(),
            backend,
            states: None,
        };
        if boot_perf {
            k.perf_event_init();
        }
        k
    }

    /// Turns invariant checking on or off (it starts on in debug builds).
    pub fn set_checks(&mut self, on: bool) {
        self.check = on;
    }

    /// Installs the hook called at every interleaving point (tests inject
    /// NMIs and cancels there).
    pub fn set_interleaver(&mut self, hook: Option<Box<dyn Interleaver>>) {
        self.interleaver = hook;
        self.interleaver_generation += 1;
    }

    /// Calls the interleaving hook, if any (not re-entrantly: an NMI taken
    /// at a point does not itself get interrupted).
    pub(crate) fn point(&mut self, cpu: usize, point: Point) {
        if let Some(mut hook) = self.interleaver.take() {
            let generation = self.interleaver_generation;
            hook.at(self, cpu, point);
            // Put the hook back unless it replaced or removed itself.
            if self.interleaver_generation == generation {
                self.interleaver = Some(hook);
            }
        }
    }

    pub(crate) fn log(&mut self, cpu: usize, tid: Option<Tid>, kind: EventKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if kind.kept_by(self.opts.event_log) {
            self.events.push(Event { seq, time: self.time, cpu, tid, kind });
            self.record_state(seq);
        }
    }

    /// Advances virtual time.
    pub fn advance(&mut self, ns: u64) {
        self.time += ns;
    }

    /// Sets virtual time (the host's clock: the emulator's instruction
    /// count).
    pub fn set_time(&mut self, ns: u64) {
        self.time = ns;
    }

    pub(crate) fn task_mut(&mut self, tid: Tid) -> &mut Task {
        self.tasks.get_mut(&tid).expect("task exists")
    }

    // The read API: what hosts and tests may look at.

    /// The configuration the kernel was built with.
    pub fn options(&self) -> &KernelOptions {
        &self.opts
    }

    /// The `seq` the next logged event gets: a host that is about to call
    /// the kernel names that call's first event by it.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Virtual time (ns).
    pub fn time(&self) -> u64 {
        self.time
    }

    /// The task, which the caller knows exists.
    pub fn task(&self, tid: Tid) -> &Task {
        &self.tasks[&tid]
    }

    /// Whether `cpu` is in NMI context.
    pub fn in_nmi(&self, cpu: usize) -> bool {
        self.cpus.get(cpu).is_some_and(|c| c.in_nmi)
    }

    /// The task running on `cpu`.
    pub fn current(&self, cpu: usize) -> Option<Tid> {
        self.cpus.get(cpu).and_then(|c| c.current)
    }

    /// The address space, which the caller knows exists.
    pub fn mm(&self, mm: MmId) -> &Mm {
        &self.mms[mm.0]
    }

    /// Every `struct unwind_work` ever initialised, by [`WorkId`].
    pub fn works(&self) -> &[UnwindWork] {
        &self.works
    }

    /// The work, which the caller knows exists.
    pub fn work(&self, work: WorkId) -> &UnwindWork {
        &self.works[work.0]
    }

    /// Whether `work`'s `unwind_deferred_init()` still waits for
    /// `callback_mutex` (a cancel is in its grace period).
    pub fn init_waiting(&self, work: WorkId) -> bool {
        self.mutex_waiters.contains(&MutexWaiter::Init(work))
    }

    /// The callbacks list, head first (newest registration first).
    pub fn callbacks(&self) -> &[WorkId] {
        &self.callbacks
    }

    /// The global bit allocation (`unwind_mask`).
    pub fn global_mask(&self) -> u64 {
        self.global_mask
    }

    /// Cancels in their SRCU grace period, each holding `callback_mutex`.
    pub fn cancels_waiting(&self) -> &[WorkId] {
        &self.cancels_waiting
    }

    /// The tracers, their sessions and buffers.
    pub fn tracers(&self) -> &Tracers {
        &self.tracers
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The walks of [`KernelOptions::extra_unwinders`] so far (none
    /// without them): a lab instrument beside the model, not its state.
    pub fn extra_walks(&self) -> &ExtraWalks {
        &self.extra
    }

    /// [`Kernel::extra_walks`], leaving none: for a host that is done with
    /// the kernel and keeps the traces (moved, not copied).
    pub fn take_extra_walks(&mut self) -> ExtraWalks {
        std::mem::take(&mut self.extra)
    }

    /// The extra walks made since the last call, for a host that reads
    /// them as the run goes; what the kernel knows of each configuration's
    /// divergence ([`ExtraWalks::diverged`]) stays, for
    /// [`Kernel::take_extra_walks`] at the end.
    pub fn drain_extra_walks(&mut self) -> Vec<ExtraWalk> {
        std::mem::take(&mut self.extra.walks)
    }

    /// The event log so far (what [`KernelOptions::event_log`] keeps).
    ///
    /// [`KernelOptions::event_log`]: crate::types::KernelOptions::event_log
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The event log, leaving it empty: for a host that is done with the
    /// kernel and keeps the log.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// The event log so far, for a host that reads it as the run goes and
    /// keeps nothing of it: the kernel keeps only the last
    /// [`HISTORY`](crate::invariants::HISTORY) events, which a violation
    /// found later quotes (and which the next call returns again: a reader
    /// skips the sequence numbers it has seen).
    pub fn drain_events(&mut self) -> Vec<Event> {
        let keep = self.events.len().saturating_sub(crate::invariants::HISTORY);
        let tail = self.events[keep..].to_vec();
        std::mem::replace(&mut self.events, tail)
    }

    /// The records perf session `session` has written since the last call,
    /// per CPU, leaving its buffers empty: what `perf record` does as it
    /// reads the ring buffers. Nothing in the kernel reads the records
    /// back, so the run goes on as before; [`Tracers::perf_bytes`] then
    /// counts only what is still in the buffers.
    ///
    /// [`Tracers::perf_bytes`]: crate::tracer::Tracers::perf_bytes
    pub fn drain_perf_records(&mut self, session: usize) -> Vec<Vec<PerfRecord>> {
        self.tracers.perf.get_mut(session).map_or_else(Vec::new, |s| {
            let cpus = s.buffers.len();
            std::mem::replace(&mut s.buffers, vec![Vec::new(); cpus])
        })
    }
}
