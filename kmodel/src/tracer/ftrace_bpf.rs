//! The other two consumers: an ftrace-like instance with
//! `userstacktrace_delay` (a cookie event when a traced event fires, here
//! system-call entry, and the stack at callback time) and a BPF-like
//! program on the sampling event that requests deferred stacks and keeps
//! them in a map.

use std::collections::BTreeMap;

use super::types::{BpfProgram, FtraceEntry, FtraceInstance};
use crate::kernel::Kernel;
use crate::types::{Cookie, Tid, WorkId};

impl Kernel {
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

    /// The ftrace instances' system-call-entry event (task context).
    pub fn tracers_on_syscall(&mut self, cpu: usize) {
        let Some(tid) = self.current(cpu) else { return };
        for f in 0..self.tracers.ftrace.len() {
            let work = self.tracers.ftrace[f].work;
            let (ret, cookie) = self.tracer_request(cpu, work);
            if ret >= 0 {
                let time = self.time;
                self.tracers.ftrace[f].buffers[cpu].push(FtraceEntry::Cookie { time, tid, cookie });
            }
        }
    }

    /// The BPF programs on the sampling event: each requests a deferred
    /// unwind (called from perf's NMI handler).
    pub(crate) fn bpf_on_nmi(&mut self, cpu: usize) {
        for b in 0..self.tracers.bpf.len() {
            let work = self.tracers.bpf[b].work;
            self.tracers.bpf[b].requests += 1;
            let _ = self.tracer_request(cpu, work);
        }
    }

    /// The ftrace instances' and BPF programs' deferred callbacks, for
    /// whichever owns `work`.
    pub(crate) fn ftrace_bpf_callback(&mut self, work: WorkId, tid: Tid, cpu: usize, cookie: Cookie, trace: &[u64]) {
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
