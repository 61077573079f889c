//! The kernel's state as a person stepping through a run reads it: named
//! cells (per CPU its cookie counter and context, per tracer its work and
//! bit, per task its `unwind_info` — mask, cookie, cache — and task_work,
//! the SRCU readers, per mm its life and registered `.sframe` sections),
//! and, when a host asks for it ([`Kernel::record_states`]), the cells
//! each logged event changed. The cells are read from the model's own
//! fields, which the upstream backend's state is mirrored into
//! (`upstream.rs`), so both backends are read alike.
//!
//! Not kernel code: an instrument for explorers (the lab's HTML explorer).
//! Here the cells' types; `cells.rs` reads them from the kernel.

use std::collections::BTreeMap;

use crate::types::{MmId, TaskState, Tid, WorkId};

/// What a cell belongs to, in the order a state panel lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// Global state of `deferred.c`: `unwind_mask`, the callback list,
    /// SRCU, `callback_mutex`.
    Unwind,
    /// A tracer's `struct unwind_work`.
    Work(WorkId),
    /// A task.
    Task(Tid),
    /// A CPU.
    Cpu(usize),
    /// An address space.
    Mm(MmId),
}

/// A cell's value: text, or something a reader may name better than the
/// kernel can (a task, an address space, code addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Words.
    Text(String),
    /// Whether something holds.
    Flag(bool),
    /// A task (none: no task).
    Task(Option<Tid>),
    /// Where a task is.
    State(TaskState),
    /// An address space (none: the task has none).
    Mm(Option<MmId>),
    /// Code addresses (a cached trace): a reader names them.
    Code(Vec<u64>),
    /// Ranges of text, each `[start, end]` (registered `.sframe` sections'
    /// text): a reader names the objects.
    Texts(Vec<(u64, u64)>),
}

/// One cell: its place and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// What it belongs to.
    pub section: Section,
    /// Its field, as the kernel names it where it has a name.
    pub field: &'static str,
    /// The value.
    pub value: Value,
}

/// The cells one logged event changed: set to a value, or gone (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateChange {
    /// The event's sequence number.
    pub seq: u64,
    /// The cells that changed, in [`Kernel::cells`] order, then those gone.
    pub cells: Vec<((Section, &'static str), Option<Value>)>,
}

/// The state last recorded and the changes since the host last took them.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    /// Every cell as the last change left it.
    pub(crate) last: BTreeMap<(Section, &'static str), Value>,
    /// The changes not taken yet.
    pub(crate) changes: Vec<StateChange>,
}
