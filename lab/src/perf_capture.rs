//! What a run's perf.data files are made of ([`PerfCapture`]), kept in
//! its report: each perf session's records and the side-band records every
//! file has. [`crate::perf_data`] gathers it when a run ends and lays it
//! out.

use std::collections::BTreeMap;

use kmodel::tracer::{PerfRecord, UserStackMode};
use perfdata::FileIdentity;

/// A side-band record: not a session's, every session's file has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sideband {
    /// `PERF_RECORD_FORK`.
    Fork { ppid: u32, ptid: u32 },
    /// `PERF_RECORD_COMM` (`exec`: by an exec, else synthesized at start).
    Comm { comm: Vec<u8>, exec: bool },
    /// `PERF_RECORD_MMAP2` of an executable segment.
    Mmap { addr: u64, len: u64, pgoff: u64, file: FileIdentity, path: Vec<u8> },
    /// `PERF_RECORD_EXIT`.
    Exit { ppid: u32, ptid: u32 },
}

impl Sideband {
    /// Order among records of the same time: a task is forked, named and
    /// mapped before its samples; its exit comes after its last deferred
    /// record (`do_exit()` runs the unwind before `perf_event_exit_task()`).
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Sideband::Fork { .. } => 0,
            Sideband::Comm { .. } => 1,
            Sideband::Mmap { .. } => 2,
            Sideband::Exit { .. } => 4,
        }
    }
}

/// One perf session's part of a run.
#[derive(Debug, Clone)]
pub struct CapturedSession {
    /// The tracer's name.
    pub name: String,
    /// How it gets user stacks.
    pub mode: UserStackMode,
    /// Which tasks its events are bound to.
    pub scope: kmodel::tracer::PerfScope,
    /// What it samples on.
    pub event: kmodel::tracer::PerfEvent,
    /// Its sampling period (instructions, or uprobe hits).
    pub period: u64,
    /// Its records with the CPU whose buffer had them, in the order perf
    /// reads them back: by time, then CPU, then buffer order.
    pub records: Vec<(usize, PerfRecord)>,
}

/// What a run's perf.data files are made of ([`capture`]).
#[derive(Debug, Clone, Default)]
pub struct PerfCapture {
    /// The perf sessions.
    pub sessions: Vec<CapturedSession>,
    /// Side-band records: (time, CPU, pid, tid, record), by time.
    pub(crate) sideband: Vec<(u64, usize, u32, u32, Sideband)>,
    /// Build-ids of the objects mapped: (path, build-id), by path.
    pub(crate) build_ids: BTreeMap<Vec<u8>, Vec<u8>>,
}
