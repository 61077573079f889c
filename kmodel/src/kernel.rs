//! The kernel world the deferred-unwind code lives in: CPUs with their
//! cookie counters, tasks and their state, entry and return to user mode,
//! NMIs, task_work, migration, fork/exec/exit. It is a pure state machine:
//! the host (the emulator, a scenario, a test) calls one method per thing
//! that happens, and the model logs events and checks invariants.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::arch::{Arch, UserRegs};
use crate::event::{EntryReason, Event, EventKind};
use crate::interleave::{Interleaver, Point};
use crate::memory::{Access, UserMemory};
use crate::tracer::Tracers;
use crate::unwind::{SframeMode, SframeRegistry, UnwindConfig};

/// A task id.
pub type Tid = u32;

/// `-EINVAL`.
pub const EINVAL: i32 = -22;
/// `-EBUSY`.
pub const EBUSY: i32 = -16;
/// `-ESRCH` (task_work_add on a task past exit_task_work).
pub const ESRCH: i32 = -3;
/// `-ENOMEM`.
pub const ENOMEM: i32 = -12;
/// Not a kernel value: what [`Kernel::unwind_deferred_init`] returns while
/// the call waits for `callback_mutex`, which a cancel holds across its SRCU
/// grace period. The init completes (and logs its real result, 0 or −EBUSY)
/// when that cancel returns.
pub const INIT_WAITING: i32 = 1;

/// The errno name of a negative kernel return value (`-EBUSY`), or the
/// number itself for one the model does not name.
pub fn errno_name(ret: i32) -> String {
    match ret {
        EINVAL => "-EINVAL".into(),
        EBUSY => "-EBUSY".into(),
        ESRCH => "-ESRCH".into(),
        ENOMEM => "-ENOMEM".into(),
        other => other.to_string(),
    }
}

/// A registered tracer's `struct unwind_work`, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct WorkId(pub usize);

/// An address space, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct MmId(pub usize);

/// The deferred-unwind cookie: CPU of the first request + 1, and that
/// CPU's counter value (odd). `0` means "none in this entry".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cookie {
    /// `smp_processor_id() + 1` of the first request.
    pub cpu: u32,
    /// Per-CPU counter value (odd).
    pub cnt: u32,
    /// The halves' numeric order follows the kernel's byte order.
    pub big_endian: bool,
}

impl Cookie {
    /// The 64-bit value tracers see (`union unwind_task_id.id`).
    pub fn id(&self) -> u64 {
        if self.big_endian {
            (u64::from(self.cpu) << 32) | u64::from(self.cnt)
        } else {
            (u64::from(self.cnt) << 32) | u64::from(self.cpu)
        }
    }

    /// True if no cookie is assigned.
    pub fn is_none(&self) -> bool {
        self.cpu == 0 && self.cnt == 0
    }
}

impl Serialize for Cookie {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:#x}", self.id()))
    }
}

/// Which kernel's deferred-unwind code to model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
pub enum KernelVersion {
    /// v6.17: requests from NMI use `TWA_RESUME` (no self-IPI).
    #[serde(rename = "v6.17")]
    V6_17,
    /// v6.19 (Peter Zijlstra's series): `TWA_NMI_CURRENT` from NMI.
    #[default]
    #[serde(rename = "v6.19")]
    V6_19,
}

/// What happens to pending deferred unwinds when a task exits (§5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExitPath {
    /// v6.19: `unwind_deferred_task_exit()` right before `exit_mm()`, after
    /// `perf_event_exit_task()`.
    #[default]
    Upstream,
    /// v6.17: the same hook earlier, before `perf_event_exit_task()`.
    #[serde(rename = "v6.17")]
    V6_17,
    /// No hook: the task_work runs in `exit_task_work()`, after `exit_mm()`,
    /// and finds no mm: every callback gets an empty stack.
    None,
    /// Copy the user stack (and registers) the classic way before
    /// `exit_mm()` and unwind from the copy afterwards: deep stacks truncate.
    CopyOnExit,
    /// Unwind eagerly at every system-call entry while a tracer is
    /// registered; the cache then survives `exit_mm()`.
    UnwindAtSyscallEntry,
}

/// When perf registers its single `perf_unwind_work`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerfRegistration {
    /// Upstream: `perf_event_init()` registers it at boot, before any other
    /// tracer can, and never cancels it. perf holds the first tracer bit and
    /// sits last on the newest-first callback list whatever registers later.
    #[default]
    Boot,
    /// A lab experiment: perf registers when its first deferred session is
    /// added, like any other tracer. Past the last free bit that init fails
    /// (−EBUSY) and perf's deferred sessions fall back to the in-NMI walk. A
    /// kernel without a deferred perf session then has no perf work at all.
    Late,
}

/// How the modelled kernel is configured.
#[derive(Debug, Clone, Serialize)]
pub struct KernelOptions {
    /// Number of CPUs.
    pub cpus: usize,
    /// Which deferred-unwind code.
    pub version: KernelVersion,
    /// Exit-path variant.
    pub exit_path: ExitPath,
    /// `CONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG` (requests from NMI need it).
    pub nmi_safe_cmpxchg: bool,
    /// Byte order of the kernel (the cookie halves follow it).
    pub big_endian: bool,
    /// User unwinder configuration (methods, SFrame strictness, max entries).
    pub unwind: UnwindConfig,
    /// Bytes of user stack copied by the copy-on-exit variant.
    pub copy_on_exit_bytes: u64,
    /// `BITS_PER_LONG`.
    pub bits_per_long: u32,
    /// When perf's work is registered.
    pub perf_registration: PerfRegistration,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            cpus: 2,
            version: KernelVersion::V6_19,
            exit_path: ExitPath::Upstream,
            nmi_safe_cmpxchg: true,
            big_endian: false,
            unwind: UnwindConfig::default(),
            copy_on_exit_bytes: 8192,
            bits_per_long: 64,
            perf_registration: PerfRegistration::Boot,
        }
    }
}

impl KernelOptions {
    /// Options for a machine of `arch` (byte order) with `cpus` CPUs.
    pub fn for_arch(arch: Arch, cpus: usize) -> Self {
        KernelOptions { cpus, big_endian: arch.big_endian(), ..Self::default() }
    }

    /// The SFrame acceptance mode.
    pub fn sframe_mode(&self) -> SframeMode {
        self.unwind.sframe_mode
    }
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Running user code.
    User,
    /// In the kernel (system call, interrupt, exception).
    Kernel,
    /// Asleep in the kernel.
    Sleeping,
    /// Gone.
    Dead,
}

/// Per-task cache of one entry's unwind (`struct unwind_cache`).
#[derive(Debug, Clone, Default)]
pub struct UnwindCache {
    /// Tracers already called back in this entry.
    pub completed: u64,
    /// Valid entries (0 = nothing cached).
    pub nr_entries: usize,
    /// The trace.
    pub entries: Vec<u64>,
}

/// `struct unwind_task_info`.
#[derive(Debug, Clone, Default)]
pub struct UnwindTaskInfo {
    /// PENDING, USED and one bit per requesting tracer.
    pub mask: u64,
    /// Allocated on first unwind.
    pub cache: Option<UnwindCache>,
    /// This entry's cookie.
    pub id: Cookie,
}

/// A task.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its id.
    pub tid: Tid,
    /// Its name.
    pub name: String,
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

/// An address space: its architecture and its registered SFrame sections.
#[derive(Debug, Clone)]
pub struct Mm {
    /// Its architecture.
    pub arch: Arch,
    /// SFrame sections (exec, prctl).
    pub sframe: SframeRegistry,
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
    /// Its `unwind_deferred_init()` waits for `callback_mutex`.
    pub waiting: bool,
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
}

/// The modelled kernel.
pub struct Kernel {
    /// Configuration.
    pub opts: KernelOptions,
    /// CPUs.
    pub cpus: Vec<Cpu>,
    /// Tasks by id.
    pub tasks: BTreeMap<Tid, Task>,
    /// Address spaces.
    pub mms: Vec<Mm>,
    /// Tracers' works by id.
    pub works: Vec<UnwindWork>,
    /// Global bit allocation (`unwind_mask`), PENDING|USED reserved.
    pub global_mask: u64,
    /// The callbacks list, head first (newest registration first).
    pub callbacks: Vec<WorkId>,
    /// Active SRCU read sections (handlers walking the list).
    pub srcu_readers: u32,
    /// Cancels waiting for the grace period (each holds `callback_mutex`
    /// until it returns).
    pub cancels_waiting: Vec<WorkId>,
    pub(crate) cancel_bits: Vec<(WorkId, u32)>,
    /// Inits and cancels waiting for `callback_mutex`, first come first.
    pub mutex_waiters: std::collections::VecDeque<MutexWaiter>,
    /// The tracers (perf, ftrace, BPF) and their buffers.
    pub tracers: Tracers,
    /// Counters.
    pub stats: Stats,
    /// Virtual time (ns).
    pub time: u64,
    /// The event log.
    pub events: Vec<Event>,
    pub(crate) interleaver: Option<Box<dyn Interleaver>>,
    interleaver_generation: u64,
    next_tid: Tid,
    /// Check invariants as the model runs (on in tests and debug builds).
    pub check: bool,
    /// Behavioural bookkeeping for the invariants.
    pub ledger: crate::invariants::Ledger,
    /// Invariant violations found (see [`Kernel::take_violations`]).
    pub violations: Vec<crate::invariants::Violation>,
}

/// `UNWIND_PENDING`.
pub const UNWIND_PENDING: u64 = 1 << 0;
/// `UNWIND_USED`.
pub const UNWIND_USED: u64 = 1 << 1;
/// Bits no tracer can get.
pub const RESERVED_BITS: u64 = UNWIND_PENDING | UNWIND_USED;

impl Kernel {
    /// A kernel with `opts.cpus` idle CPUs and no tasks, booted: with
    /// [`PerfRegistration::Boot`] perf's work is registered first.
    pub fn new(opts: KernelOptions) -> Self {
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
            mutex_waiters: Default::default(),
            tracers: Tracers::default(),
            stats: Stats::default(),
            time: 0,
            events: Vec::new(),
            interleaver: None,
            interleaver_generation: 0,
            next_tid: 1,
            check: cfg!(debug_assertions),
            ledger: Default::default(),
            violations: Vec::new(),
        };
        if boot_perf {
            k.perf_event_init();
        }
        k
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
        let seq = self.events.len() as u64;
        self.events.push(Event { seq, time: self.time, cpu, tid, kind });
    }

    /// Advances virtual time.
    pub fn advance(&mut self, ns: u64) {
        self.time += ns;
    }

    /// The task, which the caller knows exists.
    pub fn task(&self, tid: Tid) -> &Task {
        &self.tasks[&tid]
    }

    pub(crate) fn task_mut(&mut self, tid: Tid) -> &mut Task {
        self.tasks.get_mut(&tid).expect("task exists")
    }

    /// The task running on `cpu`.
    pub fn current(&self, cpu: usize) -> Option<Tid> {
        self.cpus.get(cpu).and_then(|c| c.current)
    }

    /// A new address space for `arch`.
    pub fn new_mm(&mut self, arch: Arch) -> MmId {
        self.mms.push(Mm { arch, sframe: SframeRegistry::new(arch) });
        MmId(self.mms.len() - 1)
    }

    /// Registers an SFrame section in `mm` (exec's `PT_GNU_SFRAME`, or the
    /// prctl for dlopen/JIT code); refusals are logged, not fatal.
    pub fn add_sframe(
        &mut self,
        mm: MmId,
        mem: &dyn UserMemory,
        sframe: (u64, u64),
        text: (u64, u64),
    ) -> Result<(), String> {
        let mode = self.opts.sframe_mode();
        let result = self.mms[mm.0].sframe.add(mem, Access::Faultable, sframe, text, mode).map_err(|e| e.to_string());
        self.log(0, None, EventKind::SframeAdd { sframe: sframe.0, text: text.0, error: result.clone().err() });
        result
    }

    /// Removes SFrame sections starting at `sframe_start` (the prctl).
    pub fn remove_sframe(&mut self, mm: MmId, sframe_start: u64) -> Result<(), String> {
        let result = self.mms[mm.0].sframe.remove(sframe_start).map_err(|e| e.to_string());
        if result.is_ok() {
            self.log(0, None, EventKind::SframeRemove { sframe: sframe_start, why: "prctl".into() });
        }
        result
    }

    /// `munmap()` of `start..end` in `mm`: sections covering it go away.
    pub fn unmap(&mut self, mm: MmId, start: u64, end: u64) -> usize {
        let removed = self.mms[mm.0].sframe.unmap(start, end);
        if removed > 0 {
            self.log(0, None, EventKind::SframeRemove { sframe: start, why: format!("munmap removed {removed}") });
        }
        removed
    }

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

    /// `exit_to_user_mode()`: run task_work while TIF_NOTIFY_RESUME is set,
    /// then `unwind_reset_info()`, then user mode. An NMI in the window
    /// after the reset (§3 case 5) is handled as the version does.
    pub fn return_to_user(&mut self, tid: Tid, mem: &dyn UserMemory) {
        let cpu = self.task(tid).cpu;
        loop {
            while self.task(tid).notify_resume {
                self.task_mut(tid).notify_resume = false;
                self.task_work_run(tid, mem);
            }
            self.unwind_reset_info(tid);
            self.point(cpu, Point::AfterResetBeforeUser);
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

    /// Runs the task's queued task_work (only the deferred-unwind work
    /// exists in the model).
    pub(crate) fn task_work_run(&mut self, tid: Tid, mem: &dyn UserMemory) {
        if self.task(tid).work_queued {
            self.task_mut(tid).work_queued = false;
            self.process_unwind_deferred(tid, mem, "task_work");
        }
    }

    /// An NMI on `cpu`. If it interrupted user mode, `user_regs` are the
    /// registers it saw. Every sampling tracer's NMI handler runs.
    pub fn nmi(&mut self, cpu: usize, user_regs: Option<UserRegs>, mem: &dyn UserMemory) {
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
            t.regs = user_regs.or_else(|| t.regs.clone());
        }
        let nested = self.cpus[cpu].in_nmi;
        self.cpus[cpu].in_nmi = true;
        self.log(cpu, tid, EventKind::NmiEnter { from_user });
        handler(self);
        self.cpus[cpu].in_nmi = nested;
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
        self.task_mut(tid).mm = None;
        self.log(cpu, Some(tid), EventKind::ExitMm);
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

    fn copy_stack_on_exit(&mut self, tid: Tid, mem: &dyn UserMemory) {
        if self.task(tid).info.mask & UNWIND_PENDING == 0 {
            return;
        }
        let Some(regs) = self.task(tid).regs.clone() else { return };
        let sp = regs.sp();
        // An unreadable page just ends the copy early.
        let (bytes, _) = crate::memory::copy_user(mem, sp, self.opts.copy_on_exit_bytes, Access::Faultable);
        let copied = bytes.len() as u64;
        self.stats.copied_bytes += copied;
        let Some(mm) = self.task(tid).mm else { return };
        self.task_mut(tid).stack_copy = Some(StackCopy { mm, regs, base: sp, bytes });
        let cpu = self.task(tid).cpu;
        self.log(cpu, Some(tid), EventKind::StackCopied { bytes: copied });
    }
}
