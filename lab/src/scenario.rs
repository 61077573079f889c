//! The scenario format: one JSON file describing a machine, guests, tracers,
//! kernel options, timed events and expectations. Unknown fields are errors;
//! every error names the file, the JSON path and what was expected.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kmodel::arch::Arch;
use kmodel::tracer::UserStackMode;
use kmodel::types::{
    CancelledRequest, ExitPath, ForkTable, KernelVersion, MunmapSframe, PerfRegistration, PrctlNumbers, SyscallNumbers,
};
use kmodel::unwind::{Method, SframeMode};
use serde::{Deserialize, Serialize};

pub use crate::profile::{Parts, Profile};

/// A whole scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name (used in logs and snapshots).
    pub name: String,
    /// What the scenario shows.
    #[serde(default)]
    pub description: String,
    /// The machine.
    pub machine: Machine,
    /// Seed for everything random in the guests (AT_RANDOM, getrandom).
    #[serde(default)]
    pub seed: u64,
    /// Programs to run (at least one).
    pub guests: Vec<Guest>,
    /// Tracers, registered in this order before the guests start.
    #[serde(default)]
    pub tracers: Vec<Tracer>,
    /// Kernel options.
    #[serde(default)]
    pub kernel: KernelConfig,
    /// Timed events.
    #[serde(default)]
    pub events: Vec<TimedEvent>,
    /// Stop profiling after this many instructions in total (tasks still in
    /// the kernel then keep their pending requests: "asleep at end").
    #[serde(default)]
    pub stop_after: Option<u64>,
    /// Expectations checked after the run.
    #[serde(default)]
    pub expect: Option<Expect>,
}

/// The machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// Architecture of every guest.
    pub arch: Arch,
    /// CPUs.
    #[serde(default = "default_cpus")]
    pub cpus: usize,
}

fn default_cpus() -> usize {
    1
}

/// One guest program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guest {
    /// Name other parts of the scenario use.
    pub name: String,
    /// Path of the static ELF file, relative to the scenario file.
    pub path: PathBuf,
    /// Arguments after `argv[0]`.
    #[serde(default)]
    pub args: Vec<String>,
    /// Bytes on standard input.
    #[serde(default)]
    pub stdin: String,
    /// CPU it starts on.
    #[serde(default)]
    pub cpu: usize,
    /// Bytes to overwrite in its `.sframe` before the kernel registers it
    /// (offset from the section start, new byte): a corrupted section.
    #[serde(default)]
    pub sframe_patch: Vec<(u64, u8)>,
    /// Files added to its file system, by guest path (a relative one is
    /// taken from `cwd`), with their contents as text. They live in the
    /// guest's in-memory overlay: the host is never read for them, and the
    /// log's header holds them whole. (Skipped when empty, like `cwd` and
    /// `root`, so that the logs of scenarios without them stay as they
    /// were.)
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "unique_files")]
    pub files: BTreeMap<String, String>,
    /// Its working directory: an absolute guest path (default `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// A host directory it sees as `/`, read-only (relative to the scenario
    /// file; default none: the guest sees only its own files). The log
    /// records a digest of every host file it reads, so that a replay can
    /// say which one changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
}

impl Guest {
    /// The absolute guest path of `files` entry `path`: the one the log
    /// names (the checks in [`Scenario::validate`] make it unique and
    /// already normalised).
    pub fn file_path(&self, path: &str) -> String {
        match self.cwd.as_deref() {
            _ if path.starts_with('/') => path.to_string(),
            None | Some("/") => format!("/{path}"),
            Some(cwd) => format!("{cwd}/{path}"),
        }
    }
}

/// `files` read as a map that refuses a path given twice (serde's maps keep
/// the last value silently, and a scenario whose file is not what its
/// author read is worse than an error).
fn unique_files<'de, D: serde::Deserializer<'de>>(de: D) -> Result<BTreeMap<String, String>, D::Error> {
    struct Files;
    impl<'de> serde::de::Visitor<'de> for Files {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map from guest paths to file contents (strings)")
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
            let mut files = BTreeMap::new();
            while let Some((path, contents)) = map.next_entry::<String, String>()? {
                if files.contains_key(&path) {
                    return Err(serde::de::Error::custom(format!("file {path:?} given twice")));
                }
                files.insert(path, contents);
            }
            Ok(files)
        }
    }
    de.deserialize_map(Files)
}

/// Most files one guest may be given.
pub const MAX_FILES: usize = 64;
/// Most bytes of one file given in a scenario.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Most bytes of all one guest's files together (the log's header embeds
/// them, and every replay re-reads that header).
pub const MAX_FILES_BYTES: usize = 4 << 20;
/// Longest guest path: Linux's `PATH_MAX` less its NUL.
const MAX_PATH: usize = 4095;
/// Longest name in a guest path: Linux's `NAME_MAX`.
const MAX_NAME: usize = 255;

/// Why `path` is not a usable guest path, if it is not: it must be
/// non-empty, without NUL, within Linux's limits, and normalised (no empty,
/// `.` or `..` component, no trailing `/` except for `/` itself), so that
/// the name in the scenario is the name the guest sees and the log records.
fn guest_path_problem(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("expected a path, got an empty string".into());
    }
    if path.contains('\0') {
        return Some(format!("path {path:?} contains a NUL byte"));
    }
    if path.len() > MAX_PATH {
        return Some(format!("path is {} bytes long, more than Linux's {MAX_PATH}", path.len()));
    }
    if path == "/" {
        return None;
    }
    let rest = path.strip_prefix('/').unwrap_or(path);
    for name in rest.split('/') {
        if name.is_empty() || name == "." || name == ".." {
            return Some(format!(
                "path {path:?} is not normalised (an empty, \".\" or \"..\" component, or a trailing \"/\")"
            ));
        }
        if name.len() > MAX_NAME {
            return Some(format!("path {path:?} has a name longer than Linux's {MAX_NAME} bytes"));
        }
    }
    None
}

/// A tracer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Tracer {
    /// perf: samples every `period` instructions of the running task.
    Perf {
        /// Name.
        name: String,
        /// Sampling period in guest instructions.
        period: u64,
        /// How it gets user stacks.
        #[serde(default = "deferred")]
        user_stack: UserStackMode,
        /// CPU-wide (default) or bound to the named guest.
        #[serde(default)]
        task: Option<String>,
    },
    /// ftrace with `userstacktrace_delay`: requests at every system-call entry.
    Ftrace {
        /// Name (with `instances` > 1: the prefix of `name0`, `name1`, …).
        name: String,
        /// How many instances to create (each wants a tracer bit).
        #[serde(default = "one")]
        instances: u32,
    },
    /// A BPF program on the sampling NMI.
    Bpf {
        /// Name.
        name: String,
    },
}

fn one() -> u32 {
    1
}

fn deferred() -> UserStackMode {
    UserStackMode::Deferred
}

impl Tracer {
    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            Tracer::Perf { name, .. } | Tracer::Ftrace { name, .. } | Tracer::Bpf { name } => name,
        }
    }
}

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

/// An event at a point of the run. (Unknown fields are still refused: the
/// flattened [`Action`] denies them; serde cannot deny on both levels.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimedEvent {
    /// Total guest instructions executed when it happens.
    pub at: u64,
    /// What happens.
    #[serde(flatten)]
    pub action: Action,
}

/// What a timed event does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Migrate the task (takes effect while it is in the kernel next, or at once if it is).
    Migrate {
        /// Guest.
        task: String,
        /// Destination CPU.
        cpu: usize,
        /// Only this thread of the guest, by creation order (0: its first
        /// thread, n: the n-th `pthread_create`): it moves in its next
        /// system call. None: whichever thread enters the kernel first.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<usize>,
    },
    /// Evict pages of the task.
    Evict {
        /// Guest.
        task: String,
        /// Which pages.
        what: EvictWhat,
    },
    /// Cancel a tracer.
    Cancel {
        /// Tracer name.
        tracer: String,
    },
    /// Register another tracer.
    Register {
        /// The tracer.
        tracer: Tracer,
    },
    /// Send a signal to the task (delivered when it next runs user code).
    Signal {
        /// Guest.
        task: String,
        /// Signal number.
        signal: u32,
    },
    /// Make the task's next system call (of that name, if given) slow: it
    /// stays in the kernel for this many sampling periods, each one an NMI
    /// that hits it there.
    SlowSyscall {
        /// Guest.
        task: String,
        /// NMIs taken while it is in the kernel.
        nmis: u32,
        /// Only a system call of this name (e.g. "exit_group").
        #[serde(default)]
        syscall: Option<String>,
        /// The NMIs hit the task before it goes to sleep in the call (if
        /// it sleeps: a futex, a join, a sleep), so its requests stay
        /// pending while it sleeps; otherwise they hit it once the call
        /// completes, before the return to user.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        before_sleep: bool,
    },
}

/// Pages to evict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictWhat {
    /// The `.sframe` section(s).
    Sframe,
    /// The user stack.
    Stack,
    /// An address range.
    Range(u64, u64),
}

/// Expectations (all optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Expect {
    /// Samples taken, at least.
    pub min_samples: Option<u64>,
    /// Stacks delivered exact, at least this share (0–1).
    pub min_exact_share: Option<f64>,
    /// Stacks lost, exactly.
    pub lost: Option<u64>,
    /// Guest exit statuses by name.
    pub exit: Option<std::collections::BTreeMap<String, i32>>,
    /// No invariant violations (default true when `expect` is given).
    pub no_violations: Option<bool>,
}

/// Most ftrace instances one tracer entry may ask for: far more than the
/// tracer bits there are (`BITS_PER_LONG` − 2), few enough that registering
/// them all stays instant.
pub const MAX_FTRACE_INSTANCES: u32 = 1024;

/// The rules every tracer follows, whether registered before the guests
/// start or by an event: `at` is its JSON path, `names` the tracer names
/// seen so far (this one is added). Errors are (JSON path, message).
fn check_tracer<'s>(
    t: &'s Tracer,
    at: &str,
    names: &mut Vec<&'s str>,
    guest: &dyn Fn(&str) -> bool,
) -> Result<(), (String, String)> {
    if names.contains(&t.name()) {
        return Err((format!("{at}.name"), format!("duplicate tracer name {:?}", t.name())));
    }
    names.push(t.name());
    match t {
        Tracer::Perf { period: 0, .. } => {
            Err((format!("{at}.period"), "expected a period of at least 1 instruction".into()))
        }
        Tracer::Perf { task: Some(task), .. } if !guest(task) => {
            Err((format!("{at}.task"), format!("no guest named {task:?}")))
        }
        Tracer::Ftrace { instances, .. } if *instances > MAX_FTRACE_INSTANCES => Err((
            format!("{at}.instances"),
            format!("expected at most {MAX_FTRACE_INSTANCES} instances, got {instances}"),
        )),
        _ => Ok(()),
    }
}

/// The rules for a guest's `files`, `cwd` and `root` (`at` is its JSON
/// path). Errors are (JSON path, message).
fn check_files(g: &Guest, at: &str) -> Result<(), (String, String)> {
    if let Some(cwd) = &g.cwd {
        let problem = guest_path_problem(cwd)
            .or_else(|| (!cwd.starts_with('/')).then(|| format!("expected an absolute guest path, got {cwd:?}")));
        if let Some(message) = problem {
            return Err((format!("{at}.cwd"), message));
        }
    }
    if let Some(root) = &g.root {
        if root.as_os_str().is_empty() {
            return Err((format!("{at}.root"), "expected a host directory, got an empty string".into()));
        }
        if root.as_os_str().as_encoded_bytes().contains(&0) {
            return Err((format!("{at}.root"), format!("path {:?} contains a NUL byte", root.display())));
        }
    }
    if g.files.len() > MAX_FILES {
        return Err((format!("{at}.files"), format!("expected at most {MAX_FILES} files, got {}", g.files.len())));
    }
    let mut total = 0;
    // Absolute path → the name the scenario gave it.
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (path, contents) in &g.files {
        let here = format!("{at}.files[{path:?}]");
        if let Some(message) = guest_path_problem(path) {
            return Err((here, message));
        }
        if path == "/" {
            return Err((here, "\"/\" is a directory, not a file".into()));
        }
        if contents.len() > MAX_FILE_BYTES {
            return Err((here, format!("{} bytes, more than the {MAX_FILE_BYTES} a file may have", contents.len())));
        }
        total += contents.len();
        if total > MAX_FILES_BYTES {
            return Err((here, format!("the files come to more than the {MAX_FILES_BYTES} bytes one guest may have")));
        }
        let abs = g.file_path(path);
        if abs.len() > MAX_PATH {
            return Err((here, format!("its absolute path is {} bytes long, more than Linux's {MAX_PATH}", abs.len())));
        }
        if let Some(other) = seen.get(&abs) {
            return Err((here, format!("the same file as {other:?} ({abs})")));
        }
        if g.cwd.as_deref() == Some(abs.as_str()) {
            return Err((here, format!("{abs} is the working directory, not a file")));
        }
        seen.insert(abs, path);
    }
    // A file that is also the directory of another: the emulator would
    // silently make it a directory. In sorted order the first path at or
    // after "{abs}/" is inside it if any is ("/a/b" sorts after "/a/",
    // whereas "/a.txt" sorts before it).
    for (abs, path) in &seen {
        let dir = format!("{abs}/");
        if let Some((inner, _)) = seen.range(dir.clone()..).next().filter(|(p, _)| p.starts_with(&dir)) {
            return Err((format!("{at}.files[{path:?}]"), format!("{abs} is a file, but {inner} is given inside it")));
        }
        if let Some(cwd) = g.cwd.as_deref().filter(|c| c.starts_with(&dir)) {
            return Err((
                format!("{at}.files[{path:?}]"),
                format!("{abs} is a file, but the working directory {cwd} is inside it"),
            ));
        }
    }
    Ok(())
}

/// A scenario file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Unreadable.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not the format.
    #[error("{file}: at {path}: {message}")]
    Format {
        /// The file.
        file: String,
        /// JSON path of the offending value.
        path: String,
        /// What was expected.
        message: String,
    },
    /// Well-formed but impossible.
    #[error("{file}: at {path}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// JSON path.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl Scenario {
    /// Parses scenario text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, ScenarioError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let scenario: Scenario = serde_path_to_error::deserialize(de).map_err(|e| ScenarioError::Format {
            file: file.to_string(),
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
        scenario.validate(file)?;
        Ok(scenario)
    }

    /// [`Scenario::parse`], with relative guest paths and roots taken
    /// relative to `dir`.
    pub fn parse_in(text: &str, file: &str, dir: &Path) -> Result<Self, ScenarioError> {
        let mut s = Self::parse(text, file)?;
        for g in &mut s.guests {
            if g.path.is_relative() {
                g.path = dir.join(&g.path);
            }
            if let Some(root) = g.root.as_mut().filter(|r| r.is_relative()) {
                *root = dir.join(&*root);
            }
        }
        Ok(s)
    }

    /// Reads and parses a scenario file; guest paths become relative to it.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io { file: file.clone(), source })?;
        let s = Self::parse_in(&text, &file, path.parent().unwrap_or(Path::new(".")))?;
        for (i, g) in s.guests.iter().enumerate() {
            if !g.path.is_file() {
                return Err(ScenarioError::Invalid {
                    file,
                    path: format!("guests[{i}].path"),
                    message: format!("no such guest program: {}", g.path.display()),
                });
            }
            if let Some(root) = g.root.as_ref().filter(|r| !r.is_dir()) {
                return Err(ScenarioError::Invalid {
                    file,
                    path: format!("guests[{i}].root"),
                    message: format!("no such host directory: {}", root.display()),
                });
            }
        }
        Ok(s)
    }

    /// Checks what the types cannot: references, ranges, ordering.
    pub fn validate(&self, file: &str) -> Result<(), ScenarioError> {
        let bad = |path: String, message: String| Err(ScenarioError::Invalid { file: file.to_string(), path, message });
        if self.machine.cpus == 0 || self.machine.cpus > 64 {
            return bad("machine.cpus".into(), format!("expected 1 to 64 CPUs, got {}", self.machine.cpus));
        }
        if self.guests.is_empty() {
            return bad("guests".into(), "expected at least one guest".into());
        }
        let guest = |name: &str| self.guests.iter().any(|g| g.name == name);
        for (i, g) in self.guests.iter().enumerate() {
            if g.cpu >= self.machine.cpus {
                return bad(
                    format!("guests[{i}].cpu"),
                    format!("CPU {} does not exist ({} CPUs)", g.cpu, self.machine.cpus),
                );
            }
            if self.guests[..i].iter().any(|o| o.name == g.name) {
                return bad(format!("guests[{i}].name"), format!("duplicate guest name {:?}", g.name));
            }
            if let Err((path, message)) = check_files(g, &format!("guests[{i}]")) {
                return bad(path, message);
            }
        }
        let mut tracers: Vec<&str> = Vec::new();
        for (i, t) in self.tracers.iter().enumerate() {
            if let Err((path, message)) = check_tracer(t, &format!("tracers[{i}]"), &mut tracers, &guest) {
                return bad(path, message);
            }
        }
        if self.kernel.unwinders().is_empty() {
            return bad("kernel.unwinders".into(), "expected at least one unwinder".into());
        }
        let mut last = 0;
        for (i, e) in self.events.iter().enumerate() {
            if e.at < last {
                return bad(format!("events[{i}].at"), format!("events must be in time order ({} < {last})", e.at));
            }
            last = e.at;
            let task = match &e.action {
                Action::Migrate { task, cpu, .. } => {
                    if *cpu >= self.machine.cpus {
                        return bad(format!("events[{i}].cpu"), format!("CPU {cpu} does not exist"));
                    }
                    Some(task)
                }
                Action::Evict { task, .. } | Action::SlowSyscall { task, .. } | Action::Signal { task, .. } => {
                    Some(task)
                }
                Action::Cancel { tracer } => {
                    if !tracers.contains(&tracer.as_str()) {
                        return bad(format!("events[{i}].tracer"), format!("no tracer named {tracer:?}"));
                    }
                    None
                }
                Action::Register { tracer } => {
                    if let Err((path, message)) =
                        check_tracer(tracer, &format!("events[{i}].tracer"), &mut tracers, &guest)
                    {
                        return bad(path, message);
                    }
                    None
                }
            };
            if let Some(task) = task.filter(|t| !guest(t)) {
                return bad(format!("events[{i}].task"), format!("no guest named {task:?}"));
            }
            if let Action::Signal { signal, .. } = e.action {
                if !(1..=64).contains(&signal) {
                    return bad(format!("events[{i}].signal"), format!("expected a signal from 1 to 64, got {signal}"));
                }
            }
        }
        // Last: a scenario that makes sense, asking for what its profile lacks.
        if let Some((path, message)) = self.upstream_problem() {
            return bad(path, message);
        }
        Ok(())
    }
}
