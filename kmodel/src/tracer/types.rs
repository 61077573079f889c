//! What the tracers are and hold: perf sessions with their per-CPU ring
//! buffers and records, ftrace instances, BPF programs, and [`Tracers`],
//! all of them together as the kernel keeps them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::types::{Cookie, Tid, WorkId};

/// `PERF_CONTEXT_USER_DEFERRED`.
pub const PERF_CONTEXT_USER_DEFERRED: u64 = (-640i64) as u64;
/// `PERF_RECORD_CALLCHAIN_DEFERRED`.
pub const PERF_RECORD_CALLCHAIN_DEFERRED: u32 = 22;
/// The synthetic kernel callchain of a sample taken in the kernel. A
/// sample taken in user mode has none (`get_perf_callchain()` walks the
/// kernel stack only `if (kernel && !user_mode(regs))`).
pub const KERNEL_IPS_IN_KERNEL: [u64; 2] = [0xffff_ffff_8100_1000, 0xffff_ffff_8100_2000];

/// How a tracer gets the user stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum UserStackMode {
    /// Deferred unwinding (the subject of the lab).
    Deferred,
    /// Baseline: walk frame pointers in the NMI (no faults allowed).
    FpInNmi,
    /// Baseline: copy this many bytes of user stack per sample
    /// (`perf --call-graph dwarf`), unwound later in user space.
    CopyStack {
        /// Bytes per sample.
        bytes: u64,
    },
}

/// Which events a perf session's buffers receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerfScope {
    /// `perf record -a`: CPU-wide events; records land in the buffer of the
    /// CPU where they are written.
    CpuWide,
    /// `perf record --no-inherit -t TID`: events bound to one task, torn
    /// down by its `perf_event_exit_task()`.
    Task(Tid),
    /// `perf record -t TID` (or of a command): events bound to the task
    /// with `attr.inherit`, so that `perf_event_init_task()` gives every
    /// task it (or an heir) creates afterwards, process or thread, events
    /// of its own, whose output goes to the session's buffers
    /// (`perf_output_begin()` writes a child event's records to its
    /// parent's). Each task's events go at its own exit.
    Inherit(Tid),
}

/// What makes a perf session sample.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerfEvent {
    /// A hardware counter's overflow NMI (the lab's: every `period`
    /// instructions).
    #[default]
    Instructions,
    /// A uprobe on a function's first instruction (`perf probe -x OBJ
    /// FUNC`, then `perf record -e probe_OBJ:FUNC`): the sample is taken in
    /// the breakpoint's trap, in task context, with the user registers at
    /// the probe (`handle_swbp()` → `handler_chain()`).
    Uprobe {
        /// The function.
        function: String,
        /// Its address in the probed task's image.
        addr: u64,
        /// Sample every `period`-th hit (`attr.sample_period`; 1: each).
        period: u64,
    },
}

/// The user part of a sample's callchain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UserChain {
    /// `PERF_CONTEXT_USER_DEFERRED` + cookie: the IPs come later.
    Deferred {
        /// The cookie.
        cookie: Cookie,
    },
    /// IPs taken in the NMI (fallback or baseline).
    Ips(Vec<u64>),
    /// A raw stack copy (baseline); the IPs are what unwinding the copy gives.
    Copied {
        /// Bytes of stack the record carries (the session's size: the
        /// kernel writes them all, `dyn_size` saying how many are valid).
        bytes: u64,
        /// User registers the record carries (`perf record --call-graph
        /// dwarf`'s `sample_regs_user` for the architecture).
        regs: u32,
        /// IPs from the copy.
        ips: Vec<u64>,
    },
    /// No user callchain (kernel thread, or the in-NMI walk failed at once).
    None,
}

/// A record in a perf ring buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PerfRecord {
    /// `PERF_RECORD_SAMPLE` with a callchain.
    Sample {
        /// Time.
        time: u64,
        /// CPU of the sample.
        cpu: usize,
        /// Thread (`task_pid_nr()`).
        tid: Tid,
        /// Its thread group (`task_tgid_nr()`).
        tgid: Tid,
        /// The interrupted instruction: the user PC, or the kernel's.
        ip: u64,
        /// Sequence number of the sample (for verdicts).
        sample: u64,
        /// Kernel part of the callchain (the model's fixed chain when the
        /// NMI hit the kernel; empty when it hit user mode).
        kernel: &'static [u64],
        /// User part.
        user: UserChain,
        /// Records every session wrote before it ([`PerfRecord::written`]).
        #[serde(skip)]
        written: u64,
    },
    /// `PERF_RECORD_CALLCHAIN_DEFERRED`.
    Deferred {
        /// Time.
        time: u64,
        /// CPU where the callback ran.
        cpu: usize,
        /// Thread (`task_pid_nr()`).
        tid: Tid,
        /// Its thread group (`task_tgid_nr()`).
        tgid: Tid,
        /// Cookie.
        cookie: Cookie,
        /// The user IPs.
        ips: Vec<u64>,
        /// Records every session wrote before it ([`PerfRecord::written`]).
        #[serde(skip)]
        written: u64,
    },
}

impl PerfRecord {
    /// When it was written.
    pub fn time(&self) -> u64 {
        match self {
            PerfRecord::Sample { time, .. } | PerfRecord::Deferred { time, .. } => *time,
        }
    }

    /// Its place among all records written: what orders records of one
    /// timestamp. The lab's clock is the guest's instruction count, so an
    /// NMI's sample and the callback its self-IPI brings share a timestamp
    /// where a real perf clock has moved on between them.
    pub fn written(&self) -> u64 {
        match self {
            PerfRecord::Sample { written, .. } | PerfRecord::Deferred { written, .. } => *written,
        }
    }

    /// The record's callchain entries (context markers included) and, for
    /// a stack copy, its registers and stack bytes.
    fn callchain_len(kernel: &[u64], user: &UserChain) -> usize {
        let kernel = if kernel.is_empty() { 0 } else { 1 + kernel.len() };
        kernel
            + match user {
                UserChain::Deferred { .. } => 2,
                UserChain::Ips(ips) => 1 + ips.len(),
                // --call-graph dwarf: exclude_callchain_user.
                UserChain::Copied { .. } | UserChain::None => 0,
            }
    }

    /// Bytes the record takes in the ring buffer, and in perf.data: the
    /// layout of `perf record --call-graph fp,defer -a` (`perfdata`), or of
    /// `--call-graph dwarf` for a stack copy.
    pub fn bytes(&self) -> u64 {
        let bytes = match self {
            PerfRecord::Sample { kernel, user, .. } => {
                let chain = Self::callchain_len(kernel, user);
                match user {
                    UserChain::Copied { bytes, regs, .. } => perfdata::dwarf_sample_bytes(chain, *regs, *bytes),
                    _ => perfdata::sample_bytes(chain),
                }
            }
            PerfRecord::Deferred { ips, .. } => perfdata::deferred_bytes(ips.len()),
        };
        bytes as u64
    }

    /// Bytes a sample would have taken with `perf record --call-graph
    /// dwarf` copying `stack` bytes and `regs` registers (its kernel
    /// callchain as it is); 0 for a deferred record, which that mode has not.
    pub fn dwarf_bytes(&self, regs: u32, stack: u64) -> u64 {
        match self {
            PerfRecord::Sample { kernel, .. } => {
                let chain = Self::callchain_len(kernel, &UserChain::None);
                perfdata::dwarf_sample_bytes(chain, regs, stack) as u64
            }
            PerfRecord::Deferred { .. } => 0,
        }
    }
}

/// A perf session.
#[derive(Debug, Clone, Serialize)]
pub struct PerfSession {
    /// Name (shared with every log event about its records).
    pub name: std::sync::Arc<str>,
    /// Scope of its events.
    pub scope: PerfScope,
    /// What makes it sample.
    pub event: PerfEvent,
    /// How it gets user stacks.
    pub mode: UserStackMode,
    /// One ring buffer per CPU.
    pub buffers: Vec<Vec<PerfRecord>>,
    /// For a task-bound session, the tasks whose events still exist (the
    /// task and, with [`PerfScope::Inherit`], its heirs, until each exits).
    pub tasks: std::collections::BTreeSet<Tid>,
    /// Hits of its uprobe by the tasks it sees (its event's count).
    pub hits: u64,
}

impl PerfSession {
    /// Whether its events see `tid`: a CPU-wide session every task, a
    /// task-bound one the tasks that have its events.
    pub fn sees(&self, tid: Tid) -> bool {
        self.scope == PerfScope::CpuWide || self.tasks.contains(&tid)
    }
}

/// An ftrace-like instance with `userstacktrace_delay`: a cookie event when
/// a traced event fires (system-call entry), the stack at callback time.
#[derive(Debug, Clone, Serialize)]
pub struct FtraceInstance {
    /// Name.
    pub name: String,
    /// Its work.
    pub work: WorkId,
    /// Per-CPU ring buffers.
    pub buffers: Vec<Vec<FtraceEntry>>,
}

/// An ftrace ring-buffer entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FtraceEntry {
    /// `user_unwind_cookie`.
    Cookie {
        /// Time.
        time: u64,
        /// Task.
        tid: Tid,
        /// Cookie.
        cookie: Cookie,
    },
    /// `user_unwind_stack`.
    Stack {
        /// Time.
        time: u64,
        /// Task.
        tid: Tid,
        /// Cookie.
        cookie: Cookie,
        /// IPs.
        ips: Vec<u64>,
    },
}

/// A BPF-like program on the sampling NMI: requests deferred stacks and
/// counts them per stack in a map.
#[derive(Debug, Clone, Serialize)]
pub struct BpfProgram {
    /// Name.
    pub name: String,
    /// Its work.
    pub work: WorkId,
    /// (tid, cookie) → stack delivered.
    pub stacks: BTreeMap<(Tid, u64), Vec<u64>>,
    /// Requests made.
    pub requests: u64,
}

/// All tracers of the model.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tracers {
    /// perf's single global `perf_unwind_work`: registered at boot, or with
    /// its first deferred session (see [`crate::types::PerfRegistration`]).
    pub perf_work: Option<WorkId>,
    /// Works their tracer has cancelled (`unwind_deferred_cancel()` is
    /// the tracer's teardown): a correct tracer requests no more with them.
    /// (A request that had read the bit before the cancel is another
    /// matter: the interleaving tests place those.)
    #[serde(skip)]
    pub torn_down: Vec<WorkId>,
    /// The error of perf's `unwind_deferred_init()` (−EBUSY, only possible
    /// when it registers late): perf then has no work.
    pub perf_init_error: Option<i32>,
    /// Samples of deferred perf sessions taken with the in-NMI walk because
    /// perf has no work (its late init failed).
    pub perf_unregistered_samples: u64,
    /// perf sessions.
    pub perf: Vec<PerfSession>,
    /// ftrace instances.
    pub ftrace: Vec<FtraceInstance>,
    /// BPF programs.
    pub bpf: Vec<BpfProgram>,
    /// Samples taken so far.
    pub samples: u64,
    /// Records written so far, by every perf session ([`PerfRecord::written`]).
    #[serde(skip)]
    pub records_written: u64,
    /// In-NMI reads of the baselines and fallbacks that would have faulted
    /// (the probe of every NMI counts in [`Stats::nmi_walk_would_fault`]).
    ///
    /// [`Stats::nmi_walk_would_fault`]: crate::kernel::Stats::nmi_walk_would_fault
    pub nmi_would_fault: u64,
}

impl Tracers {
    /// `perf_event_exit_task()`: the task's own events go away.
    pub fn perf_exit_task(&mut self, tid: Tid) {
        for s in &mut self.perf {
            s.tasks.remove(&tid);
        }
    }

    /// `perf_event_init_task()` in `copy_process()`: `child`, created by
    /// `parent`, gets events of its own in every inheriting session whose
    /// events `parent` has.
    pub fn perf_init_task(&mut self, parent: Tid, child: Tid) {
        for s in &mut self.perf {
            if matches!(s.scope, PerfScope::Inherit(_)) && s.tasks.contains(&parent) {
                s.tasks.insert(child);
            }
        }
    }

    /// Bytes written to all perf buffers.
    pub fn perf_bytes(&self) -> u64 {
        // Saturating: a stack-copy size no kernel accepts must not panic.
        self.perf.iter().flat_map(|s| s.buffers.iter().flatten()).map(PerfRecord::bytes).fold(0, u64::saturating_add)
    }
}
