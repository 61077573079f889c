//! What the invariant checks keep: the per-(task, cookie) ledger of
//! requests and callbacks, and the violations found with their history.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::event::Event;
use crate::types::{Tid, WorkId};

/// Events kept as history with a violation.
pub const HISTORY: usize = 40;

/// A broken invariant and how the model got there.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    /// Which (e.g. "B1", "I4", "P1").
    pub invariant: &'static str,
    /// What exactly.
    pub detail: String,
    /// The last events before it.
    pub history: Vec<Event>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "invariant {} violated: {}", self.invariant, self.detail)?;
        for e in &self.history {
            writeln!(f, "  {}", serde_json::to_string(e).unwrap_or_default())?;
        }
        Ok(())
    }
}

/// What happened to one (task, cookie): who asked, who was called.
/// Counts are per tracer, in small vectors rather than maps: an entry
/// exists for every cookie of a run and sees one or a few tracers.
#[derive(Debug, Clone, Default)]
pub struct LedgerEntry {
    /// Requests with a non-negative return, per tracer.
    pub requested: Counts,
    /// Callbacks, per tracer.
    pub called: Counts,
    /// User PC when the cookie was handed out (the trace must start there).
    pub pc: u64,
    /// The kernel entry the cookie belongs to.
    pub entry: u64,
}

/// How many times each tracer did something, in first-seen order.
#[derive(Debug, Clone, Default)]
pub struct Counts(Vec<(WorkId, u32)>);

impl Counts {
    /// Counts one more for `work`; returns its new count.
    pub fn add(&mut self, work: WorkId) -> u32 {
        match self.0.iter_mut().find(|(w, _)| *w == work) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                self.0.push((work, 1));
                1
            }
        }
    }

    /// The count of `work` (0 if none).
    pub fn get(&self, work: WorkId) -> u32 {
        self.0.iter().find(|(w, _)| *w == work).map_or(0, |&(_, n)| n)
    }

    /// True if nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The tracers counted.
    pub fn works(&self) -> impl Iterator<Item = WorkId> + '_ {
        self.0.iter().map(|&(w, _)| w)
    }
}

/// The behavioural bookkeeping.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Per (task, cookie id).
    pub entries: BTreeMap<(Tid, u64), LedgerEntry>,
    /// Cookie id → (task, entry) that first got it.
    pub owners: BTreeMap<u64, (Tid, u64)>,
    /// Tracers whose cancel began, with the event sequence number.
    pub cancelled: BTreeMap<WorkId, u64>,
    /// Scratch space of the structural checks, kept between calls so that
    /// they allocate nothing: live tasks per mm, and live cookies with
    /// their tasks.
    pub(crate) scratch: (Vec<u32>, Vec<(u64, Tid)>),
}
