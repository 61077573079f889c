//! The consumers of deferred unwinding: a perf-like tracer (per-CPU ring
//! buffers, samples with a deferred user callchain marker and cookie,
//! `PERF_RECORD_CALLCHAIN_DEFERRED` written where the callback runs), an
//! ftrace-like instance, a BPF-like program, the two classic baselines
//! (in-NMI frame-pointer walk, copying N bytes of user stack per sample),
//! and the user-space stitcher that joins deferred callchains to samples.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::event::EventKind;
use crate::kernel::{Cookie, Kernel, TaskState, Tid, WorkId};
use crate::memory::{copy_user, Access, CopiedStack, MemError, UserMemory};
use crate::unwind::unwind_user;

/// `PERF_CONTEXT_USER_DEFERRED`.
pub const PERF_CONTEXT_USER_DEFERRED: u64 = (-640i64) as u64;
/// `PERF_RECORD_CALLCHAIN_DEFERRED`.
pub const PERF_RECORD_CALLCHAIN_DEFERRED: u32 = 22;
/// The synthetic kernel callchain of a sample taken in the kernel.
pub const KERNEL_IPS_IN_KERNEL: [u64; 2] = [0xffff_ffff_8100_1000, 0xffff_ffff_8100_2000];
/// The synthetic kernel callchain of a sample taken in user mode.
pub const KERNEL_IPS_IN_USER: [u64; 1] = [0xffff_ffff_8100_1000];

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
    /// Task-bound events; they are torn down by `perf_event_exit_task()`.
    Task(Tid),
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
        /// Bytes copied.
        bytes: u64,
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
        /// Task.
        tid: Tid,
        /// Sequence number of the sample (for verdicts).
        sample: u64,
        /// Kernel part of the callchain.
        kernel: Vec<u64>,
        /// User part.
        user: UserChain,
    },
    /// `PERF_RECORD_CALLCHAIN_DEFERRED`.
    Deferred {
        /// Time.
        time: u64,
        /// CPU where the callback ran.
        cpu: usize,
        /// Task.
        tid: Tid,
        /// Cookie.
        cookie: Cookie,
        /// The user IPs.
        ips: Vec<u64>,
    },
}

impl PerfRecord {
    /// Bytes the record takes in the ring buffer (perf's layout: 8-byte
    /// header, u64 fields, callchain entries, `sample_id` trailer of 24).
    pub fn bytes(&self) -> u64 {
        match self {
            PerfRecord::Sample { kernel, user, .. } => {
                let user_words = match user {
                    UserChain::Deferred { .. } => 2,
                    UserChain::Ips(ips) => 1 + ips.len() as u64,
                    UserChain::Copied { bytes, .. } => 1 + 8 + 1 + bytes.div_ceil(8),
                    UserChain::None => 0,
                };
                8 + 8 * (4 + 1 + 1 + kernel.len() as u64 + user_words)
            }
            PerfRecord::Deferred { ips, .. } => 8 + 8 * (2 + ips.len() as u64) + 24,
        }
    }
}

/// A perf session.
#[derive(Debug, Clone, Serialize)]
pub struct PerfSession {
    /// Name.
    pub name: String,
    /// Scope of its events.
    pub scope: PerfScope,
    /// How it gets user stacks.
    pub mode: UserStackMode,
    /// One ring buffer per CPU.
    pub buffers: Vec<Vec<PerfRecord>>,
    /// Its task-bound events still exist.
    pub alive: bool,
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
    /// its first deferred session (see [`crate::kernel::PerfRegistration`]).
    pub perf_work: Option<WorkId>,
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
    /// In-NMI reads that would have faulted (baselines, fallbacks).
    pub nmi_would_fault: u64,
}

impl Tracers {
    /// `perf_event_exit_task()`: the task's own events go away.
    pub fn perf_exit_task(&mut self, tid: Tid) {
        for s in &mut self.perf {
            if s.scope == PerfScope::Task(tid) {
                s.alive = false;
            }
        }
    }

    /// Bytes written to all perf buffers.
    pub fn perf_bytes(&self) -> u64 {
        self.perf.iter().flat_map(|s| s.buffers.iter().flatten()).map(PerfRecord::bytes).sum()
    }
}

impl Kernel {
    /// Adds a perf session. With late registration the first deferred
    /// session registers perf's work (upstream did so at boot).
    pub fn add_perf(&mut self, name: &str, scope: PerfScope, mode: UserStackMode) -> usize {
        if mode == UserStackMode::Deferred {
            self.perf_event_init();
        }
        let buffers = vec![Vec::new(); self.cpus.len()];
        self.tracers.perf.push(PerfSession { name: name.to_string(), scope, mode, buffers, alive: true });
        self.tracers.perf.len() - 1
    }

    /// Adds an ftrace instance; `None` if no bit was free (-EBUSY). An
    /// instance whose init waits for a cancel is added: its requests are
    /// refused until the init completes.
    pub fn add_ftrace(&mut self, name: &str) -> Option<usize> {
        let (work, ret) = self.unwind_deferred_init(name);
        if ret < 0 {
            return None;
        }
        let buffers = vec![Vec::new(); self.cpus.len()];
        self.tracers.ftrace.push(FtraceInstance { name: name.to_string(), work, buffers });
        Some(self.tracers.ftrace.len() - 1)
    }

    /// Adds a BPF program; `None` if no bit was free (-EBUSY). As for
    /// ftrace, a program whose init waits is added.
    pub fn add_bpf(&mut self, name: &str) -> Option<usize> {
        let (work, ret) = self.unwind_deferred_init(name);
        if ret < 0 {
            return None;
        }
        self.tracers.bpf.push(BpfProgram { name: name.to_string(), work, stacks: BTreeMap::new(), requests: 0 });
        Some(self.tracers.bpf.len() - 1)
    }

    fn write_perf(&mut self, session: usize, cpu: usize, record: PerfRecord) {
        let bytes = record.bytes();
        let kind = match &record {
            PerfRecord::Sample { .. } => "sample",
            PerfRecord::Deferred { .. } => "callchain_deferred",
        };
        let tid = match &record {
            PerfRecord::Sample { tid, .. } | PerfRecord::Deferred { tid, .. } => *tid,
        };
        let name = self.tracers.perf[session].name.clone();
        self.tracers.perf[session].buffers[cpu].push(record);
        self.log(cpu, Some(tid), EventKind::Record { tracer: name, record: kind.into(), bytes });
    }

    /// Every sampling tracer's NMI handler (called by [`Kernel::nmi`]).
    pub(crate) fn tracers_on_nmi(&mut self, cpu: usize, mem: &dyn UserMemory) {
        let Some(tid) = self.current(cpu) else { return };
        let sample = self.tracers.samples;
        self.tracers.samples += 1;
        let t = self.task(tid);
        // perf_callchain(): a user callchain only for a user task
        // (is_user_task(): an mm, not PF_KTHREAD) with user registers to
        // start from; otherwise the sample keeps its kernel callchain alone.
        let user = t.mm.is_some() && !t.kthread && t.regs.is_some();
        let kernel: Vec<u64> = if t.kthread || (t.entries > 0 && t.state != TaskState::User) {
            KERNEL_IPS_IN_KERNEL.to_vec()
        } else {
            KERNEL_IPS_IN_USER.to_vec()
        };
        for s in 0..self.tracers.perf.len() {
            let session = &self.tracers.perf[s];
            let samples_here =
                session.alive && (session.scope == PerfScope::CpuWide || session.scope == PerfScope::Task(tid));
            if !samples_here {
                continue;
            }
            let user = match session.mode {
                _ if !user => UserChain::None,
                UserStackMode::Deferred => match self.tracers.perf_work {
                    Some(work) => {
                        let (ret, cookie) = self.unwind_deferred_request(cpu, work);
                        if ret >= 0 {
                            UserChain::Deferred { cookie }
                        } else {
                            // perf falls back to the classic in-NMI walk.
                            self.nmi_user_walk(cpu, tid, mem)
                        }
                    }
                    // Registered late and refused (-EBUSY): no deferral.
                    None => {
                        self.tracers.perf_unregistered_samples += 1;
                        self.nmi_user_walk(cpu, tid, mem)
                    }
                },
                UserStackMode::FpInNmi => self.nmi_user_walk(cpu, tid, mem),
                UserStackMode::CopyStack { bytes } => self.nmi_stack_copy(tid, bytes, mem),
            };
            let time = self.time;
            self.write_perf(s, cpu, PerfRecord::Sample { time, cpu, tid, sample, kernel: kernel.clone(), user });
        }
        for b in 0..self.tracers.bpf.len() {
            let work = self.tracers.bpf[b].work;
            self.tracers.bpf[b].requests += 1;
            let _ = self.unwind_deferred_request(cpu, work);
        }
    }

    /// The ftrace instances' system-call-entry event (task context).
    pub fn tracers_on_syscall(&mut self, cpu: usize) {
        let Some(tid) = self.current(cpu) else { return };
        for f in 0..self.tracers.ftrace.len() {
            let work = self.tracers.ftrace[f].work;
            let (ret, cookie) = self.unwind_deferred_request(cpu, work);
            if ret >= 0 {
                let time = self.time;
                self.tracers.ftrace[f].buffers[cpu].push(FtraceEntry::Cookie { time, tid, cookie });
            }
        }
    }

    fn nmi_user_walk(&mut self, cpu: usize, tid: Tid, mem: &dyn UserMemory) -> UserChain {
        let (Some(regs), Some(mm)) = (self.task(tid).regs.clone(), self.task(tid).mm) else {
            return UserChain::None;
        };
        let mut cfg = self.opts.unwind.clone();
        cfg.order = vec![crate::unwind::Method::Fp];
        let trace = unwind_user(&regs, mem, &mut self.mms[mm.0].sframe, Access::NoFault, &cfg);
        if trace.would_fault {
            self.tracers.nmi_would_fault += 1;
        }
        self.log(
            cpu,
            Some(tid),
            EventKind::Unwind {
                nr: trace.entries.len(),
                stop: format!("{:?}", trace.stop),
                faultable: false,
                faults: 0,
            },
        );
        UserChain::Ips(trace.entries)
    }

    fn nmi_stack_copy(&mut self, tid: Tid, bytes: u64, mem: &dyn UserMemory) -> UserChain {
        let (Some(regs), Some(mm)) = (self.task(tid).regs.clone(), self.task(tid).mm) else {
            return UserChain::None;
        };
        // Copy what is readable without faulting, like perf's NMI copy.
        let sp = regs.sp();
        let (copy, stopped) = copy_user(mem, sp, bytes, Access::NoFault);
        if matches!(stopped, Some(MemError::WouldFault { .. })) {
            self.tracers.nmi_would_fault += 1;
        }
        // User space later unwinds the copy with the binary's unwind info.
        let view = CopiedStack { base: sp, bytes: &copy, rest: mem };
        let cfg = self.opts.unwind.clone();
        let trace = unwind_user(&regs, &view, &mut self.mms[mm.0].sframe, Access::Faultable, &cfg);
        UserChain::Copied { bytes: copy.len() as u64, ips: trace.entries }
    }

    /// A deferred callback for `work` (called by the task-work handler).
    pub(crate) fn tracers_callback(&mut self, work: WorkId, tid: Tid, cpu: usize, cookie: Cookie, trace: &[u64]) {
        if self.tracers.perf_work == Some(work) {
            for s in 0..self.tracers.perf.len() {
                let session = &self.tracers.perf[s];
                // Every defer_output event that is CPU-wide (this CPU) or
                // bound to the current task gets the record.
                let receives = session.alive
                    && session.mode == UserStackMode::Deferred
                    && (session.scope == PerfScope::CpuWide || session.scope == PerfScope::Task(tid));
                if receives {
                    let time = self.time;
                    self.write_perf(s, cpu, PerfRecord::Deferred { time, cpu, tid, cookie, ips: trace.to_vec() });
                }
            }
        }
        for f in &mut self.tracers.ftrace {
            if f.work == work {
                f.buffers[cpu].push(FtraceEntry::Stack { time: self.time, tid, cookie, ips: trace.to_vec() });
            }
        }
        for b in &mut self.tracers.bpf {
            if b.work == work {
                b.stacks.insert((tid, cookie.id()), trace.to_vec());
            }
        }
    }
}

/// A sample with its user callchain joined in, as `perf script` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StitchedSample {
    /// Sample sequence number.
    pub sample: u64,
    /// Task.
    pub tid: Tid,
    /// CPU of the sample.
    pub cpu: usize,
    /// Time of the sample.
    pub time: u64,
    /// Kernel part.
    pub kernel: Vec<u64>,
    /// User part: `None` when a deferred chain never arrived or its cookie
    /// did not match.
    pub user: Option<Vec<u64>>,
    /// The cookie, for deferred samples.
    pub cookie: Option<Cookie>,
    /// CPU where the deferred record was found.
    pub deferred_cpu: Option<usize>,
}

/// Joins deferred callchains to their samples across all per-CPU buffers,
/// as the perf tool does: records in time order; deferred samples queue;
/// a deferred record delivers every queued sample of the same task, merged
/// if the cookie matches; what is still queued at the end is delivered
/// without a user stack.
pub fn stitch(buffers: &[Vec<PerfRecord>]) -> Vec<StitchedSample> {
    let mut all: Vec<(u64, usize, usize, &PerfRecord)> = Vec::new();
    for (cpu, buffer) in buffers.iter().enumerate() {
        for (i, r) in buffer.iter().enumerate() {
            let time = match r {
                PerfRecord::Sample { time, .. } | PerfRecord::Deferred { time, .. } => *time,
            };
            all.push((time, cpu, i, r));
        }
    }
    // Time order; within a CPU, buffer order (records with equal times).
    all.sort_by_key(|&(time, cpu, i, _)| (time, cpu, i));
    let mut out = Vec::new();
    let mut queue: Vec<StitchedSample> = Vec::new();
    for (_, buffer_cpu, _, record) in all {
        match record {
            PerfRecord::Sample { time, cpu, tid, sample, kernel, user } => {
                let mut s = StitchedSample {
                    sample: *sample,
                    tid: *tid,
                    cpu: *cpu,
                    time: *time,
                    kernel: kernel.clone(),
                    user: None,
                    cookie: None,
                    deferred_cpu: None,
                };
                match user {
                    UserChain::Deferred { cookie } => {
                        s.cookie = Some(*cookie);
                        queue.push(s);
                    }
                    UserChain::Ips(ips) | UserChain::Copied { ips, .. } => {
                        s.user = Some(ips.clone());
                        out.push(s);
                    }
                    UserChain::None => out.push(s),
                }
            }
            PerfRecord::Deferred { tid, cookie, ips, .. } => {
                let mut kept = Vec::new();
                for mut s in queue.drain(..) {
                    if s.tid != *tid {
                        kept.push(s);
                        continue;
                    }
                    if s.cookie == Some(*cookie) {
                        s.user = Some(ips.clone());
                        s.deferred_cpu = Some(buffer_cpu);
                    }
                    out.push(s);
                }
                queue = kept;
            }
        }
    }
    out.extend(queue);
    out.sort_by_key(|s| s.sample);
    out
}
