//! perf as a consumer of deferred unwinding (`kernel/events/core.c`,
//! `kernel/events/callchain.c`): `perf_event_init()` registering
//! `perf_unwind_work`, sessions and their ring buffers, the sampling NMI
//! (`perf_callchain()`: a deferred user callchain marker and cookie, or the
//! classic in-NMI walk or stack copy), and the deferred callback writing
//! `PERF_RECORD_CALLCHAIN_DEFERRED` on the CPU where it runs.

use super::types::{PerfEvent, PerfRecord, PerfScope, PerfSession, UserChain, UserStackMode, KERNEL_IPS_IN_KERNEL};
use crate::event::EventKind;
use crate::kernel::Kernel;
use crate::memory::{copy_user, Access, CopiedStack, MemError, UserMemory};
use crate::types::{Cookie, Tid, WorkId, EINVAL};
use crate::unwind::{unwind_user, unwind_user_dry_run, Method};

impl Kernel {
    /// `perf_event_init()`'s `unwind_deferred_init(&perf_unwind_work, …)`,
    /// at boot or (as a lab option) with perf's first deferred session. A
    /// failure (−EBUSY, only possible late) leaves perf without a work.
    pub fn perf_event_init(&mut self) {
        if self.tracers.perf_work.is_some() || self.tracers.perf_init_error.is_some() {
            return;
        }
        let (work, ret) = self.unwind_deferred_init("perf");
        if ret < 0 {
            self.tracers.perf_init_error = Some(ret);
        } else {
            self.tracers.perf_work = Some(work);
        }
    }

    /// Adds a perf session. With late registration the first deferred
    /// session registers perf's work (upstream did so at boot).
    pub fn add_perf(&mut self, name: &str, scope: PerfScope, mode: UserStackMode) -> usize {
        self.add_perf_on(name, scope, PerfEvent::Instructions, mode)
    }

    /// [`Kernel::add_perf`] of a session sampling on `event`.
    pub fn add_perf_on(&mut self, name: &str, scope: PerfScope, event: PerfEvent, mode: UserStackMode) -> usize {
        if mode == UserStackMode::Deferred {
            self.perf_event_init();
        }
        let buffers = vec![Vec::new(); self.cpus.len()];
        let tasks = match scope {
            PerfScope::CpuWide => Default::default(),
            PerfScope::Task(tid) | PerfScope::Inherit(tid) => [tid].into(),
        };
        self.tracers.perf.push(PerfSession { name: name.into(), scope, event, mode, buffers, tasks, hits: 0 });
        self.tracers.perf.len() - 1
    }

    /// Writes `record`, about task `tid` (the model's id; the record
    /// carries the pid user space sees), to `session`'s buffer for `cpu`.
    fn write_perf(&mut self, session: usize, cpu: usize, tid: Tid, mut record: PerfRecord) {
        match &mut record {
            PerfRecord::Sample { written, .. } | PerfRecord::Deferred { written, .. } => {
                *written = self.tracers.records_written;
            }
        }
        self.tracers.records_written += 1;
        let bytes = record.bytes();
        let kind = match &record {
            PerfRecord::Sample { .. } => "sample",
            PerfRecord::Deferred { .. } => "callchain_deferred",
        };
        let name = self.tracers.perf[session].name.clone();
        self.tracers.perf[session].buffers[cpu].push(record);
        self.log(cpu, Some(tid), EventKind::Record { tracer: name, record: kind, bytes });
    }

    /// The sampling event's NMI handler (called by [`Kernel::nmi`]): a
    /// sample in every perf session that sees it, then the BPF programs.
    pub(crate) fn tracers_on_nmi(&mut self, cpu: usize, mem: &dyn UserMemory) {
        // The NMI's entry has already marked a user task as in the kernel:
        // where it was interrupted is the NMI's to say.
        let in_kernel = !self.cpus[cpu].nmi_from_user;
        self.perf_samples(cpu, in_kernel, mem, |_, session| session.event == PerfEvent::Instructions);
        // The BPF programs attached to the event run in its overflow handler.
        self.bpf_on_nmi(cpu);
    }

    /// The uprobe's consumers in `handler_chain()` (`trace_uprobe.c`'s
    /// `uprobe_perf_func()` → `perf_tp_event()`): a sample, with the user
    /// registers at the probe, in every perf session probing `pc` whose
    /// period has come (`perf_swevent_event()`: every `period`-th hit).
    /// Returns whether any session sampled.
    pub(crate) fn tracers_on_uprobe(&mut self, cpu: usize, tid: Tid, pc: u64, mem: &dyn UserMemory) -> bool {
        let mut due = Vec::new();
        for (s, session) in self.tracers.perf.iter_mut().enumerate() {
            let PerfEvent::Uprobe { addr, period, .. } = session.event else { continue };
            if addr == pc && session.sees(tid) {
                session.hits += 1;
                if session.hits.is_multiple_of(period.max(1)) {
                    due.push(s);
                }
            }
        }
        if !due.is_empty() {
            self.perf_samples(cpu, false, mem, |s, _| due.contains(&s));
        }
        !due.is_empty()
    }

    /// One sample (one sequence number) in every session (by index) that
    /// `wants` it and sees the CPU's current task, taken `in_kernel` or at
    /// the task's user registers.
    fn perf_samples(
        &mut self,
        cpu: usize,
        in_kernel: bool,
        mem: &dyn UserMemory,
        wants: impl Fn(usize, &PerfSession) -> bool,
    ) {
        let Some(tid) = self.current(cpu) else { return };
        // A task-bound session's counter does not count other tasks: no
        // session sees this one, no sample.
        let sessions: Vec<usize> = (0..self.tracers.perf.len())
            .filter(|&s| wants(s, &self.tracers.perf[s]) && self.tracers.perf[s].sees(tid))
            .collect();
        if sessions.is_empty() {
            return;
        }
        let sample = self.tracers.samples;
        self.tracers.samples += 1;
        let t = self.task(tid);
        // perf_callchain(): a user callchain only for a user task
        // (is_user_task(): an mm, not PF_KTHREAD) with user registers to
        // start from; otherwise the sample keeps its kernel callchain alone.
        let user = t.mm.is_some() && !t.kthread && t.regs.is_some();
        let kernel: &'static [u64] = if in_kernel { &KERNEL_IPS_IN_KERNEL } else { &[] };
        // The interrupted instruction: the kernel's, or the user PC.
        let ip = match &t.regs {
            Some(regs) if !in_kernel => regs.pc,
            _ => KERNEL_IPS_IN_KERNEL[0],
        };
        for s in sessions {
            let user = match self.tracers.perf[s].mode {
                _ if !user => UserChain::None,
                UserStackMode::Deferred => match self.tracers.perf_work {
                    Some(work) => {
                        let (ret, cookie) = self.tracer_request(cpu, work);
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
            // perf_event_tid(): the pid as it is now (a non-leader's exec
            // changes it, de_thread()).
            let (pid, tgid) = (self.task(tid).pid, self.task(tid).tgid);
            let record = PerfRecord::Sample { time, cpu, tid: pid, tgid, ip, sample, kernel, user, written: 0 };
            self.write_perf(s, cpu, tid, record);
        }
    }

    /// A tracer's `unwind_deferred_request()`: none once the tracer has
    /// cancelled its work, nor while its init waits for `callback_mutex`
    /// (the tracer is not running yet), with what the request would have
    /// been refused with if `work->bit` were signed, `-EINVAL`, and no
    /// event: nothing reached the kernel.
    pub(crate) fn tracer_request(&mut self, cpu: usize, work: WorkId) -> (i32, Cookie) {
        if self.tracers.torn_down.contains(&work) || self.init_waiting(work) {
            return (EINVAL, Cookie::default());
        }
        self.unwind_deferred_request(cpu, work)
    }

    fn nmi_user_walk(&mut self, cpu: usize, tid: Tid, mem: &dyn UserMemory) -> UserChain {
        let (Some(regs), Some(mm)) = (self.task(tid).regs.clone(), self.task(tid).mm) else {
            return UserChain::None;
        };
        self.check_walk_mm(tid, mm, "perf's NMI walk");
        let mut cfg = self.opts.unwind.clone();
        cfg.order = vec![Method::Fp];
        // Frame pointers alone never touch the SFrame registry.
        let trace = unwind_user_dry_run(&regs, mem, &self.mms[mm.0].sframe, Access::NoFault, &cfg);
        if trace.would_fault {
            self.tracers.nmi_would_fault += 1;
        }
        self.log(
            cpu,
            Some(tid),
            EventKind::Unwind {
                nr: trace.entries.len(),
                methods: trace.methods.clone(),
                stop: trace.stop.clone(),
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
        self.check_walk_mm(tid, mm, "perf's NMI stack copy");
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
        UserChain::Copied { bytes, regs: regs.arch.perf_dwarf_regs(), ips: trace.entries }
    }

    /// perf's deferred callback, if `work` is perf's: the user callchain,
    /// once per session that takes deferred callchains.
    pub(crate) fn perf_callback(&mut self, work: WorkId, tid: Tid, cpu: usize, cookie: Cookie, trace: &[u64]) {
        if self.tracers.perf_work != Some(work) {
            return;
        }
        for s in 0..self.tracers.perf.len() {
            let session = &self.tracers.perf[s];
            // Every defer_output event that is CPU-wide (this CPU) or
            // bound to the current task gets the record.
            let receives = session.mode == UserStackMode::Deferred && session.sees(tid);
            if receives {
                let time = self.time;
                let (pid, tgid) = (self.task(tid).pid, self.task(tid).tgid);
                let record =
                    PerfRecord::Deferred { time, cpu, tid: pid, tgid, cookie, ips: trace.to_vec(), written: 0 };
                self.write_perf(s, cpu, tid, record);
            }
        }
    }
}
