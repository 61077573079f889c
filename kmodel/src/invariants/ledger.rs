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
#[derive(Debug, Clone, Default)]
pub struct LedgerEntry {
    /// Requests with a non-negative return, per tracer.
    pub requested: BTreeMap<WorkId, u32>,
    /// Callbacks, per tracer.
    pub called: BTreeMap<WorkId, u32>,
    /// User PC when the cookie was handed out (the trace must start there).
    pub pc: u64,
    /// The kernel entry the cookie belongs to.
    pub entry: u64,
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
}
