//! What a run produces: the [`Report`] with its judged samples, guests and
//! numbers, progress along the way, and why a run may fail. The text
//! account of a report is in `account.rs`, its other views in
//! [`export`](crate::export) and [`html`](crate::html).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::scenario::Scenario;
use crate::symbolise::{GuestSymbols, Names};
use crate::verdict::Verdict;

/// Why a scenario could not be run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A guest could not be loaded or emulated.
    #[error("guest {guest}: {message}")]
    Guest {
        /// Guest name.
        guest: String,
        /// What went wrong.
        message: String,
    },
    /// The scenario asks for something impossible at run time.
    #[error("{0}")]
    Scenario(String),
}

impl RunError {
    /// A [`RunError::Guest`].
    pub(crate) fn guest(guest: &str, e: impl std::fmt::Display) -> RunError {
        RunError::Guest { guest: guest.to_string(), message: e.to_string() }
    }
}

/// How far a run is, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Guest instructions executed so far.
    pub instructions: u64,
    /// Samples taken so far.
    pub samples: u64,
}

/// One judged sample.
#[derive(Debug, Clone, Serialize)]
pub struct SampleResult {
    /// Sample number.
    pub sample: u64,
    /// perf session.
    pub tracer: String,
    /// Guest.
    pub guest: String,
    /// CPU of the NMI.
    pub cpu: usize,
    /// Guest instructions at the NMI.
    pub icount: u64,
    /// Ground truth: PC, then return addresses.
    pub truth: Vec<u64>,
    /// For each return address of `truth` (`truth[i + 1]`), the stack
    /// pointer just after its call (the ground truth's; `None` for a
    /// signal frame's interrupted PC): where the true CFA and, on x86-64,
    /// the return address's slot are. Not in the JSON: a wrong row's
    /// explanation prints what it needs of it.
    #[serde(skip)]
    pub call_sps: Vec<Option<u64>>,
    /// The kernel part of the sample's callchain (empty if it hit user mode).
    pub kernel: Vec<u64>,
    /// What the tracer got.
    pub delivered: Option<Vec<u64>>,
    /// CPU whose buffer held the deferred record.
    pub deferred_cpu: Option<usize>,
    /// The deferred walk that produced `delivered`, as the kernel model
    /// ran it (`None` for in-NMI and lost stacks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub walk: Option<Walk>,
    /// The verdict.
    pub verdict: Verdict,
    /// Where the sample sits in the kernel's event log, for explorers:
    /// not in the JSON, which has the sample's own fields.
    #[serde(skip)]
    pub at: SampleAt,
    /// A deferred sample never stitched: its cookie, which is what perf's
    /// tool shows as its user stack (`perf script`: one frame, the cookie
    /// as an address, `700000001 [unknown]`); [`SampleResult::cookie_frame`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub never_stitched: Option<String>,
}

impl SampleResult {
    /// The user frame perf's tool shows for a deferred sample never
    /// stitched (its cookie), as every view of a report shows it in place
    /// of the stack that never came: `[cookie:0x700000001]` (one word, as
    /// folded stacks need).
    pub fn cookie_frame(&self) -> Option<String> {
        self.never_stitched.as_ref().map(|c| format!("[cookie:{c}]"))
    }
}

/// Where a sample sits in the kernel's event log: its NMI, its task, its
/// cookie and the walk that produced its deferred stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleAt {
    /// The `seq` of its NMI's first event (`nmi_enter`).
    pub nmi: u64,
    /// The sampled task (the model's tid).
    pub tid: u32,
    /// The cookie of a deferred sample.
    pub cookie: Option<u64>,
    /// The `seq` of the `unwind` event whose trace was delivered, if any.
    pub unwind: Option<u64>,
}

/// How the kernel's walk went: what found each frame, and why it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Walk {
    /// The method that found each entry after the PC (`sframe`, `fp`).
    pub methods: Vec<kmodel::unwind::Method>,
    /// Why the walk ended.
    pub stop: kmodel::unwind::Stop,
}

/// How a guest ended.
#[derive(Debug, Clone, Serialize)]
pub struct GuestResult {
    /// Name.
    pub name: String,
    /// Shell-style exit status (`None`: still running or asleep at the end).
    pub exit: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Instructions it executed.
    pub instructions: u64,
}

/// The numbers of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Samples taken (NMIs with a sampling tracer).
    pub samples: u64,
    /// Samples judged (one per perf session per NMI).
    pub judged: u64,
    /// Stacks delivered (non-empty).
    pub delivered: u64,
    /// Exact stacks.
    pub exact: u64,
    /// Truncated stacks.
    pub truncated: u64,
    /// Wrong stacks.
    pub wrong: u64,
    /// Lost stacks.
    pub lost: u64,
    /// Lost stacks by reason.
    pub lost_reasons: BTreeMap<String, u64>,
    /// Deferred samples never stitched (their record never came, or came
    /// with another cookie): `perf script` prints each with its cookie as
    /// the last frame.
    pub unstitched: u64,
    /// Bytes written to perf buffers.
    pub bytes_written: u64,
    /// Bytes copying 8 KiB of stack per sample would have written.
    pub bytes_copy_baseline: u64,
    /// Unwinds run in task context (cache misses).
    pub unwinds: u64,
    /// Page faults taken by those unwinds.
    pub task_faults: u64,
    /// Samples whose in-NMI walk would have needed a fault.
    pub nmi_would_fault: u64,
    /// Callbacks per tracer.
    pub callbacks: BTreeMap<String, u64>,
    /// Requests: queued, joined, refused.
    pub requests: [u64; 3],
    /// Invariant violations.
    pub violations: u64,
    /// Guest instructions executed.
    pub instructions: u64,
    /// perf's late `unwind_deferred_init()` failed with this error.
    pub perf_init_error: Option<i32>,
    /// Samples of deferred perf sessions taken with the in-NMI walk instead,
    /// perf having no work.
    pub perf_unregistered_samples: u64,
}

impl Summary {
    /// Adds the verdict counts of `other` (judged, delivered, exact,
    /// truncated, wrong, lost and why, unstitched) to these: the counts of
    /// two stretches of one run's samples.
    pub(crate) fn add_verdicts(&mut self, other: &Summary) {
        self.judged += other.judged;
        self.delivered += other.delivered;
        self.exact += other.exact;
        self.truncated += other.truncated;
        self.wrong += other.wrong;
        self.lost += other.lost;
        for (why, n) in &other.lost_reasons {
            *self.lost_reasons.entry(why.clone()).or_insert(0) += n;
        }
        self.unstitched += other.unstitched;
    }
}

/// Everything a run produced.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The scenario run.
    pub scenario: Scenario,
    /// Its kernel profile (`scenario.kernel.profile`, repeated here for
    /// readers of the JSON).
    pub profile: crate::profile::Profile,
    /// Which parts of the run are upstream Linux 7.3 and which proposals.
    pub parts: crate::profile::Parts,
    /// The numbers.
    pub summary: Summary,
    /// Every judged sample.
    pub samples: Vec<SampleResult>,
    /// Every non-exact stack, in groups by function and cause, worst
    /// first, each with its first stack explained ([`crate::explain`], as
    /// `validate` lists them); empty in runs made for verdicts alone.
    pub failures: Vec<crate::explanation::Failure>,
    /// The guests.
    pub guests: Vec<GuestResult>,
    /// Invariant violations, with their histories.
    pub violations: Vec<String>,
    /// Expectations that failed.
    pub expectation_failures: Vec<String>,
    /// The event log, one JSON object per line.
    #[serde(skip)]
    pub log: Vec<String>,
    /// The kernel model's events (the structured form of most of the log).
    #[serde(skip)]
    pub kernel_events: Vec<kmodel::event::Event>,
    /// Each guest's symboliser: the objects its processes had mapped over
    /// the run, with their functions.
    #[serde(skip)]
    pub symbols: BTreeMap<String, GuestSymbols>,
    /// What the run's perf.data files are made of
    /// ([`crate::perf_capture`]); empty for runs made for verdicts alone
    /// (`runner::run_for_verdicts`).
    #[serde(skip)]
    pub perf: crate::perf_capture::PerfCapture,
}

impl Report {
    /// A report of a run of `scenario` with nothing in it yet: no samples,
    /// no symbols (what validate's judge fills chunk by chunk).
    pub(crate) fn empty(scenario: &Scenario) -> Report {
        Report {
            scenario: scenario.clone(),
            profile: scenario.kernel.profile,
            parts: scenario.kernel.profile.parts(scenario),
            summary: Summary::default(),
            samples: Vec::new(),
            failures: Vec::new(),
            guests: Vec::new(),
            violations: Vec::new(),
            expectation_failures: Vec::new(),
            log: Vec::new(),
            kernel_events: Vec::new(),
            symbols: BTreeMap::new(),
            perf: Default::default(),
        }
    }

    /// The names of code addresses as sample `s` saw them: `main+0x5` in
    /// its guest's program, `libc.so.6!puts+0x1c` in another object, hex in
    /// none. Every view of a report names frames this way.
    pub fn names(&self, s: &SampleResult) -> Names<'_> {
        self.symbols.get(&s.guest).map_or_else(Names::none, |g| g.at(s.sample))
    }

    /// The event log as a JSON Lines file's text.
    pub fn log_text(&self) -> String {
        let mut text = self.log.join("\n");
        text.push('\n');
        text
    }
}
