//! The model's vocabulary, shared by every other file and importing none of
//! them but the unwinder's configuration: ids, the per-task deferred state
//! of `include/linux/unwind_deferred_types.h` (`union unwind_task_id`,
//! `struct unwind_cache`, `struct unwind_task_info`) with its reserved mask
//! bits, the errnos the model returns, and the options a [`Kernel`] is built
//! with.
//!
//! [`Kernel`]: crate::kernel::Kernel

use serde::Serialize;

use crate::arch::Arch;
use crate::unwind::{SframeMode, UnwindConfig};

/// A task id.
pub type Tid = u32;

/// A registered tracer's `struct unwind_work`, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct WorkId(pub usize);

impl std::fmt::Display for WorkId {
    /// `work 1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "work {}", self.0)
    }
}

/// An address space, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct MmId(pub usize);

/// `-EINVAL`.
pub const EINVAL: i32 = -22;
/// `-EFAULT`.
pub const EFAULT: i32 = -14;
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
///
/// [`Kernel::unwind_deferred_init`]: crate::kernel::Kernel::unwind_deferred_init
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

/// `UNWIND_PENDING`.
pub const UNWIND_PENDING: u64 = 1 << 0;
/// `UNWIND_USED`.
pub const UNWIND_USED: u64 = 1 << 1;
/// Bits no tracer can get.
pub const RESERVED_BITS: u64 = UNWIND_PENDING | UNWIND_USED;

/// The deferred-unwind cookie (`union unwind_task_id`): CPU of the first
/// request + 1, and that CPU's counter value (odd). `0` means "none in this
/// entry".
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
    /// The cookie whose 64-bit value is `id` on a kernel of this byte order
    /// (the inverse of [`Cookie::id`]).
    pub fn from_id(id: u64, big_endian: bool) -> Self {
        let (high, low) = ((id >> 32) as u32, id as u32);
        if big_endian {
            Cookie { cpu: high, cnt: low, big_endian }
        } else {
            Cookie { cpu: low, cnt: high, big_endian }
        }
    }

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

impl std::fmt::Display for KernelVersion {
    /// `v6.17` or `v6.19`, as scenario files spell it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KernelVersion::V6_17 => "v6.17",
            KernelVersion::V6_19 => "v6.19",
        })
    }
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

impl std::fmt::Display for ExitPath {
    /// `upstream`, `v6.17`, `none`, `copy-on-exit` or
    /// `unwind-at-syscall-entry`, as scenario files spell it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExitPath::Upstream => "upstream",
            ExitPath::V6_17 => "v6.17",
            ExitPath::None => "none",
            ExitPath::CopyOnExit => "copy-on-exit",
            ExitPath::UnwindAtSyscallEntry => "unwind-at-syscall-entry",
        })
    }
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

/// What `unwind_deferred_request()` does for a work that was cancelled
/// (`work->bit` is -1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CancelledRequest {
    /// Upstream 7.x (`kernel/unwind/deferred.c`): `bit` is an `unsigned
    /// long`, so `WARN_ON_ONCE(bit < 0)` never fires; `BIT(bit)` shifts by
    /// `ULONG_MAX`, undefined in C, which x86-64, AArch64 and s390x execute
    /// as bit 63: the request claims bit 63 and PENDING, queues the
    /// task_work and returns 0; no callback follows (the work is off the
    /// list). The model does that and reports the undefined shift as a
    /// violation (`UB`).
    #[default]
    Upstream,
    /// What the check intends (a signed `bit`): WARN and refuse with
    /// `-EINVAL`, the model's behaviour before it was measured against the
    /// kernel's code.
    Refuse,
}

/// What a fork does to the child's `.sframe` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForkTable {
    /// Upstream (the trees carrying the v13 series): `dup_mm()` →
    /// `mm_init()` → `mm_init_sframe()` gives the child an empty table, and
    /// no `sframe_dup_mm()` copies the parent's; the child unwinds by frame
    /// pointers until it execs or registers sections itself.
    #[default]
    Empty,
    /// A lab variant: the child starts with a copy of the parent's table
    /// (its memory is a copy of the parent's, so the sections are there).
    Copy,
}

/// What `munmap()` does to registered sections it unmaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MunmapSframe {
    /// Upstream: nothing. An entry outlives its mapping until it is
    /// unregistered, a walk finds it corrupt, or the mm dies.
    #[default]
    Keep,
    /// A lab variant: sections whose text or `.sframe` range intersects the
    /// unmapped range are removed with it.
    Remove,
}

/// The `prctl()` options for registration (`PR_ADD_SFRAME`,
/// `PR_REMOVE_SFRAME`). They changed between revisions (71/72, 74/75,
/// 78/79, 79/80); the default is the last pair seen in the series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrctlNumbers {
    /// `PR_ADD_SFRAME`.
    pub add: u64,
    /// `PR_REMOVE_SFRAME`.
    pub remove: u64,
}

impl Default for PrctlNumbers {
    fn default() -> Self {
        PrctlNumbers { add: 79, remove: 80 }
    }
}

/// The system-call numbers of `sframe_register()` and
/// `sframe_unregister()` (RFC 2026: none is assigned, so the lab picks two
/// far above every architecture's table, the same on all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallNumbers {
    /// `sframe_register`.
    pub register: u64,
    /// `sframe_unregister`.
    pub unregister: u64,
}

impl Default for SyscallNumbers {
    fn default() -> Self {
        SyscallNumbers { register: 1000, unregister: 1001 }
    }
}

impl SyscallNumbers {
    /// The two calls with their names, as a system-call trace names them.
    pub fn named(self) -> Vec<(&'static str, u64)> {
        vec![("sframe_register", self.register), ("sframe_unregister", self.unregister)]
    }
}

/// How the per-mm `.sframe` table behaves and is reached: the interfaces'
/// numbers, the optional validation, and the lab's variants, each
/// defaulting to upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct SframeTableOptions {
    /// Fork: an empty table (upstream) or a copy of the parent's.
    pub fork: ForkTable,
    /// munmap: keep the entries (upstream) or remove them.
    pub munmap: MunmapSframe,
    /// `CONFIG_SFRAME_VALIDATION`: validate every FDE and row at add time.
    pub full_validation: bool,
    /// The prctl options.
    pub prctl: PrctlNumbers,
    /// The system-call numbers.
    pub syscalls: SyscallNumbers,
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
    /// A request for a cancelled work: as upstream's code (default) or
    /// refused.
    pub cancelled_request: CancelledRequest,
    /// A measurement, not a kernel setting: at every [`Kernel::nmi`] also
    /// walk the user stack as a synchronous in-NMI unwinder would (the
    /// configured methods, no faults) and count the walks that would have
    /// needed a page fault in [`Stats::nmi_walk_would_fault`]. The walk
    /// changes nothing (a section it finds corrupt stays registered), but it
    /// costs one walk per NMI, so it is off unless asked for.
    ///
    /// [`Kernel::nmi`]: crate::kernel::Kernel::nmi
    /// [`Stats::nmi_walk_would_fault`]: crate::kernel::Stats::nmi_walk_would_fault
    pub probe_nmi_walk: bool,
    /// The `.sframe` table's interfaces and variants.
    pub sframe_table: SframeTableOptions,
    /// A lab instrument, not kernel behaviour (empty by default: none).
    /// Every fresh walk of `unwind_user_faultable()` — the task_work's or
    /// the exit hook's, the one whose trace the entry's callbacks get — is
    /// accompanied by one more walk per configuration here: the same task,
    /// registers and user memory, faultable, at the same point. Their
    /// traces are kept aside ([`Kernel::extra_walks`]) and never delivered;
    /// they read memory without bringing pages in
    /// ([`UserMemory::read_untracked`]) and leave the SFrame registry as it
    /// is, so the model's own walks, log and state are exactly those of a
    /// run without them. `validate` judges several unwinders from one
    /// emulated run this way.
    ///
    /// [`Kernel::extra_walks`]: crate::kernel::Kernel::extra_walks
    /// [`UserMemory::read_untracked`]: crate::memory::UserMemory::read_untracked
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_unwinders: Vec<UnwindConfig>,
    /// A lab setting, not kernel behaviour: which events the model keeps
    /// in its log ([`EventLog`]; all of them by default).
    #[serde(skip_serializing_if = "EventLog::is_all")]
    pub event_log: EventLog,
}

/// Which events [`Kernel::events`] keeps. Every event still takes its
/// sequence number, so an event's `seq` is the same whichever is chosen.
///
/// [`Kernel::events`]: crate::kernel::Kernel::events
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventLog {
    /// Every event: the log of a scenario run, its exports and its checks.
    #[default]
    All,
    /// Only what judging a run's samples reads (unwinds, callbacks,
    /// resets) and the rare events (tasks, the `.sframe` table, cancels,
    /// violations); not the events of every kernel entry and NMI (entries,
    /// returns to user, NMIs, requests, queued task_work, handlers, perf
    /// records, sleeps, wakes, migrations), which are most of a long
    /// run's log: `validate` keeps ~106,000 events of ~575,000 on a
    /// 35,000-sample run.
    Judging,
}

impl EventLog {
    /// True for [`EventLog::All`].
    pub fn is_all(&self) -> bool {
        *self == EventLog::All
    }
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
            cancelled_request: CancelledRequest::Upstream,
            probe_nmi_walk: false,
            sframe_table: SframeTableOptions::default(),
            extra_unwinders: Vec::new(),
            event_log: EventLog::All,
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
