//! The consumers of deferred unwinding: a perf-like tracer (per-CPU ring
//! buffers, samples with a deferred user callchain marker and cookie,
//! `PERF_RECORD_CALLCHAIN_DEFERRED` written where the callback runs), an
//! ftrace-like instance, a BPF-like program, the two classic baselines
//! (in-NMI frame-pointer walk, copying N bytes of user stack per sample),
//! and the user-space stitcher that joins deferred callchains to samples.
//!
//! * `types.rs`: the tracers and what they hold ([`Tracers`], records,
//!   buffers);
//! * `perf.rs`: perf's registration, sessions, NMI handler and callback;
//! * `ftrace_bpf.rs`: the ftrace instance and the BPF program;
//! * `stitch.rs`: [`stitch()`] and [`Stitcher`], the perf tool's side.

mod ftrace_bpf;
mod perf;
mod stitch;
mod types;

pub use self::stitch::{read_order, stitch, unmerged, StitchedSample, Stitcher, Unmerged};
pub use self::types::{
    BpfProgram, FtraceEntry, FtraceInstance, PerfEvent, PerfRecord, PerfScope, PerfSession, Tracers, UserChain,
    UserStackMode, KERNEL_IPS_IN_KERNEL, PERF_CONTEXT_USER_DEFERRED, PERF_RECORD_CALLCHAIN_DEFERRED,
};
