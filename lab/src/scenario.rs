//! The scenario format: one JSON file describing a machine, guests, tracers,
//! kernel options (`scenario_kernel.rs`), timed events and expectations.
//! Unknown fields are errors; every error names the file, the JSON path and
//! what was expected. What the types cannot check (references, ranges,
//! limits, ordering) is `Scenario::validate`, in `scenario_check.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kmodel::arch::Arch;
use kmodel::tracer::UserStackMode;
use serde::{Deserialize, Serialize};

pub use crate::profile::{Parts, Profile};
pub use crate::scenario_kernel::{KernelChoice, KernelConfig, KernelImpl};

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
/// A tracer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Tracer {
    /// perf: samples every `period` instructions of the running task, or
    /// every `period`-th hit of a uprobe.
    Perf {
        /// Name.
        name: String,
        /// Sampling period: guest instructions, or hits of the uprobe.
        period: u64,
        /// How it gets user stacks.
        #[serde(default = "deferred")]
        user_stack: UserStackMode,
        /// CPU-wide (default) or bound to the named guest (`perf record
        /// -t`, or of a command).
        #[serde(default)]
        task: Option<String>,
        /// With `task`: whether the tasks the guest creates afterwards,
        /// processes and threads, inherit the session's events (`perf
        /// record`'s default; `false` is `--no-inherit`).
        #[serde(default = "yes")]
        inherit: bool,
        /// What makes it sample.
        #[serde(default)]
        event: SampleOn,
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

fn yes() -> bool {
    true
}

/// What a perf tracer samples on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SampleOn {
    /// The instruction counter's overflow NMI (`"instructions"`, the default).
    #[default]
    Instructions,
    /// A uprobe on the first instruction of the function of this name in
    /// the program of the session's guest (CPU-wide: of every guest whose
    /// program has it): `{"uprobe": "FUNCTION"}`, `perf probe -x PROGRAM
    /// FUNCTION` and `perf record -e probe_PROGRAM:FUNCTION`.
    Uprobe(String),
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
    /// From this time on, the first time the task's CPU reaches `point` of
    /// the deferred-unwind code while it runs the task, `strike` happens
    /// there: the windows of upstream's code that only an exact placement
    /// reaches (`unwind_reset_info()` between its cmpxchg and its clearing
    /// of the cookie; a cancel just before a request reads `work->bit`).
    /// Once.
    AtPoint {
        /// Guest.
        task: String,
        /// The point: a name of `kmodel::interleave::Point`
        /// (`reset_after_cmpxchg`, `request_before_bit_read`, …). On the
        /// kernel's own code (`kernel.impl` `kernel-c`) only the points it
        /// has a primitive at are reached (`Point::upstream_site`).
        point: String,
        /// What happens there.
        strike: Strike,
    },
}

/// What happens at a point of the kernel's code ([`Action::AtPoint`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strike {
    /// perf's sampling NMI (every sampling tracer's handler), from kernel
    /// mode: the sample is judged against the task's user stack there.
    Nmi,
    /// `unwind_deferred_cancel()` of this tracer's work, as if run on
    /// another CPU at that moment (the grace period as usual).
    Cancel(String),
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
    /// No invariant violations (default true when `expect` is given and
    /// `violations` is not).
    pub no_violations: Option<bool>,
    /// The invariants the run breaks, by name (`B2`, `UB`, …): exactly
    /// these and no other, each at least once. For scenarios that show a
    /// window of upstream's own code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<String>>,
}

/// Most ftrace instances one tracer entry may ask for: far more than the
/// tracer bits there are (`BITS_PER_LONG` − 2), few enough that registering
/// them all stays instant.
pub const MAX_FTRACE_INSTANCES: u32 = 1024;

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
}
