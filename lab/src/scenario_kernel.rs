//! A scenario's kernel options (its `kernel` object): the profile, the
//! deferred-unwind version and exit path, the unwinders, the registration
//! interfaces and lifetimes, and whose code runs `kernel/unwind/`; and a
//! command's choice of that code ([`KernelChoice`]).

use kmodel::types::{
    CancelledRequest, ExitPath, ForkTable, KernelVersion, MunmapSframe, PerfRegistration, PrctlNumbers, SyscallNumbers,
};
use kmodel::unwind::{Method, SframeMode};
use serde::{Deserialize, Serialize};

use crate::profile::Profile;

/// Kernel options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelConfig {
    /// Which kernel: `upstream` (Linux 7.3 as measured, the default) or
    /// `sframe-v13` (with the proposals); see [`Profile`].
    pub profile: Profile,
    /// Deferred-unwind code version.
    pub version: KernelVersion,
    /// Exit-path variant.
    pub exit_path: ExitPath,
    /// Unwinders in order of preference (`sframe`, `fp`); none given: the
    /// profile's ([`KernelConfig::unwinders`]). Kept unresolved so that a
    /// scenario read back from a log is the scenario written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unwinders: Option<Vec<Method>>,
    /// Which SFrame versions registration accepts: `kernel` (V3 only, as
    /// the kernel patches) or `lab` (V1, V2 and V3).
    pub sframe: SframeMode,
    /// NMI-safe cmpxchg available.
    pub nmi_safe_cmpxchg: bool,
    /// Bytes copied by the copy-on-exit variant.
    pub copy_on_exit_bytes: u64,
    /// SFrame lookups of caller frames use `ip − 1` (not what the kernel
    /// series does; shows what it would fix).
    pub caller_ip_adjust: bool,
    /// When perf registers its work: at boot (upstream) or late, with its
    /// first deferred session.
    pub perf_registration: PerfRegistration,
    /// Which interfaces register SFrame sections (profile `sframe-v13`):
    /// `exec` (series v13: the program and its interpreter), `loader-prctl`
    /// (alias `loader`: exec, plus a simulated dynamic loader registering
    /// every object it maps through the prctl) or `loader-syscall` (the
    /// same through `sframe_register()`).
    pub registration: crate::loader::Registration,
    /// `PR_ADD_SFRAME` and `PR_REMOVE_SFRAME` (`{"add": 79, "remove": 80}`
    /// by default).
    pub sframe_prctl: PrctlNumbers,
    /// The `sframe_register` / `sframe_unregister` system-call numbers
    /// (`{"register": 1000, "unregister": 1001}` by default).
    pub sframe_syscalls: SyscallNumbers,
    /// A forked child's table: `empty` (series v13) or `copy`.
    pub fork_table: ForkTable,
    /// What munmap does to registered sections: `keep` (series v13) or `remove`.
    pub munmap_sframe: MunmapSframe,
    /// `CONFIG_SFRAME_VALIDATION`: validate each section fully at add time.
    pub sframe_validation: bool,
    /// The simulated loader unregisters an object before unmapping it
    /// (true); false models a loader that forgets, leaving stale entries.
    pub loader_unregisters: bool,
    /// A request for a cancelled work: `upstream` (the kernel's code: it
    /// shifts by `ULONG_MAX` and queues) or `refuse` (a signed `bit`: WARN
    /// and `-EINVAL`).
    #[serde(skip_serializing_if = "is_upstream_request")]
    pub cancelled_request: CancelledRequest,
    /// Whose code runs `kernel/unwind/`: `model` (the lab's Rust model, the
    /// default) or `kernel-c` (the kernel's own `deferred.c` and `user.c`,
    /// built against the lab's shim).
    #[serde(rename = "impl", skip_serializing_if = "KernelImpl::is_model")]
    pub implementation: KernelImpl,
    /// The kernel tree whose code `kernel-c` runs (a developer's patched
    /// tree); by default the Debian `linux-source-7.x` that `make deps`
    /// fetched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_tree: Option<std::path::PathBuf>,
}

fn is_upstream_request(r: &CancelledRequest) -> bool {
    *r == CancelledRequest::Upstream
}

/// A command's choice of whose code runs `kernel/unwind/` (`--kernel-impl`,
/// `--kernel-tree`), applied to the scenarios it builds or loads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelChoice {
    /// The implementation, if chosen (else the scenario's).
    pub implementation: Option<KernelImpl>,
    /// The kernel tree (implies [`KernelImpl::KernelC`]).
    pub tree: Option<std::path::PathBuf>,
}

impl KernelChoice {
    /// Puts the choice into a scenario's kernel configuration.
    pub fn apply(&self, kernel: &mut KernelConfig) {
        if let Some(tree) = &self.tree {
            kernel.kernel_tree = Some(tree.clone());
            kernel.implementation = KernelImpl::KernelC;
        }
        if let Some(implementation) = self.implementation {
            kernel.implementation = implementation;
        }
    }
}

/// Whose code runs `kernel/unwind/` in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelImpl {
    /// The lab's executable model (`kmodel`).
    #[default]
    Model,
    /// The kernel's own C code (`kupstream`): the tree's `deferred.c`
    /// and, where upstream has a user unwinder (frame pointers on
    /// x86-64), its `user.c`; elsewhere the lab's unwinder walks (a
    /// proposal's).
    KernelC,
}

impl KernelImpl {
    /// True for the default, [`KernelImpl::Model`].
    pub fn is_model(&self) -> bool {
        *self == KernelImpl::Model
    }
}

impl std::fmt::Display for KernelImpl {
    /// `model` or `kernel-c`, as scenario files spell it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KernelImpl::Model => "model",
            KernelImpl::KernelC => "kernel-c",
        })
    }
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            profile: Profile::Upstream,
            version: KernelVersion::V6_19,
            exit_path: ExitPath::Upstream,
            unwinders: None,
            sframe: SframeMode::KernelStrict,
            nmi_safe_cmpxchg: true,
            copy_on_exit_bytes: 8192,
            caller_ip_adjust: false,
            perf_registration: PerfRegistration::Boot,
            registration: crate::loader::Registration::Exec,
            sframe_prctl: PrctlNumbers::default(),
            sframe_syscalls: SyscallNumbers::default(),
            fork_table: ForkTable::Empty,
            munmap_sframe: MunmapSframe::Keep,
            sframe_validation: false,
            loader_unregisters: true,
            cancelled_request: CancelledRequest::Upstream,
            implementation: KernelImpl::Model,
            kernel_tree: None,
        }
    }
}

impl KernelConfig {
    /// The unwinders in order of preference: those given, else the
    /// profile's default.
    pub fn unwinders(&self) -> &[Method] {
        self.unwinders.as_deref().unwrap_or(self.profile.default_unwinders())
    }
}
