//! The kernel's state read as [`crate::state`] cells, and the recording
//! of the cells each logged event changes ([`Kernel::record_states`]).

use std::collections::BTreeMap;

use crate::kernel::Kernel;
use crate::state::{Cell, Recorder, Section, StateChange, Value};
use crate::types::{MmId, TaskState, WorkId, RESERVED_BITS, UNWIND_PENDING, UNWIND_USED};

/// `mask` in words: the reserved bits by name, every other bit with the
/// tracer that holds it (`names`: work name by bit). In the global
/// allocation (`allocation`) the reserved bits only say they are taken.
fn mask_text(mask: u64, names: &BTreeMap<u32, &str>, allocation: bool) -> String {
    if mask == 0 {
        return "0".into();
    }
    let mut parts = Vec::new();
    if allocation && mask & RESERVED_BITS == RESERVED_BITS {
        parts.push("reserved (PENDING, USED)".to_string());
    } else {
        if mask & UNWIND_PENDING != 0 {
            parts.push("PENDING".to_string());
        }
        if mask & UNWIND_USED != 0 {
            parts.push("USED".to_string());
        }
    }
    for bit in 0..64u32 {
        if mask & !RESERVED_BITS & (1 << bit) != 0 {
            parts.push(names.get(&bit).map_or(format!("bit {bit}"), |n| format!("{n} (bit {bit})")));
        }
    }
    format!("{mask:#x} = {}", parts.join(" | "))
}

impl Kernel {
    /// The state as cells, in the order a panel lists them.
    pub fn cells(&self) -> Vec<Cell> {
        let mut out = Vec::new();
        let mut cell = |section, field, value| out.push(Cell { section, field, value });
        let names: BTreeMap<u32, &str> = self
            .works
            .iter()
            .filter_map(|w| u32::try_from(w.bit).ok().filter(|&b| b >= 2).map(|b| (b, w.name.as_str())))
            .collect();
        let work_name = |w: &WorkId| self.works.get(w.0).map_or("?", |w| w.name.as_str()).to_string();
        let u = Section::Unwind;
        cell(u, "unwind_mask", Value::Text(mask_text(self.global_mask, &names, true)));
        let list: Vec<String> = self.callbacks.iter().map(work_name).collect();
        cell(u, "callbacks", Value::Text(if list.is_empty() { "empty".into() } else { list.join(" → ") }));
        cell(u, "SRCU readers", Value::Text(self.srcu_readers.to_string()));
        let holder: Vec<String> = self.cancels_waiting.iter().map(|w| format!("cancel of {}", work_name(w))).collect();
        cell(u, "callback_mutex", Value::Text(if holder.is_empty() { "free".into() } else { holder.join(", ") }));
        if !self.mutex_waiters.is_empty() {
            let waiting: Vec<String> = self
                .mutex_waiters
                .iter()
                .map(|w| match w {
                    crate::kernel::MutexWaiter::Init(w) => format!("init of {}", work_name(w)),
                    crate::kernel::MutexWaiter::Cancel(w) => format!("cancel of {}", work_name(w)),
                })
                .collect();
            cell(u, "waiting for callback_mutex", Value::Text(waiting.join(", ")));
        }
        for (n, c) in self.cpus.iter().enumerate() {
            let s = Section::Cpu(n);
            cell(s, "current", Value::Task(c.current));
            cell(s, "NMI", Value::Flag(c.in_nmi));
            cell(s, "unwind_ctx_ctr", Value::Text(c.ctr.to_string()));
            cell(s, "irq_work (self-IPI)", Value::Flag(c.irq_work));
        }
        for (n, w) in self.works.iter().enumerate() {
            let s = Section::Work(WorkId(n));
            cell(s, "name", Value::Text(w.name.clone()));
            let bit = match w.bit {
                -1 => "-1 (cancelled)".to_string(),
                b if b < 2 => format!("{b} (none)"),
                b => b.to_string(),
            };
            cell(s, "bit", Value::Text(bit));
            cell(s, "on the callback list", Value::Flag(w.listed));
        }
        for (tid, t) in &self.tasks {
            let s = Section::Task(*tid);
            cell(s, "comm", Value::Text(t.name.clone()));
            cell(s, "state", Value::State(t.state));
            cell(s, "cpu", Value::Text(t.cpu.to_string()));
            if t.state == TaskState::Dead {
                continue;
            }
            cell(s, "mm", Value::Mm(t.mm));
            let mut flags = Vec::new();
            for (on, name) in [
                (t.kthread, "PF_KTHREAD"),
                (t.exiting, "PF_EXITING"),
                (t.killed.is_some(), "SIGKILL pending"),
                (t.in_handler, "in unwind_deferred_task_work()"),
                (t.works_closed, "task_work closed"),
            ] {
                if on {
                    flags.push(name);
                }
            }
            cell(s, "flags", Value::Text(if flags.is_empty() { "none".into() } else { flags.join(", ") }));
            cell(s, "unwind_mask", Value::Text(mask_text(t.info.mask, &names, false)));
            let id = &t.info.id;
            let cookie = if id.is_none() {
                "0 (none this entry)".to_string()
            } else {
                format!("{:#x} (CPU {} + 1, count {})", id.id(), id.cpu.saturating_sub(1), id.cnt)
            };
            cell(s, "id (cookie)", Value::Text(cookie));
            match &t.info.cache {
                None => cell(s, "cache", Value::Text("not allocated".into())),
                Some(c) => {
                    cell(s, "cache: completed", Value::Text(mask_text(c.completed, &names, false)));
                    let nr = c.nr_entries.min(c.entries.len());
                    cell(s, "cache: entries", Value::Code(c.entries[..nr].to_vec()));
                }
            }
            let mut work = Vec::new();
            if t.work_queued {
                work.push("unwind_deferred_task_work");
            }
            if t.notify_resume {
                work.push("TIF_NOTIFY_RESUME set");
            }
            cell(s, "task_work", Value::Text(if work.is_empty() { "empty".into() } else { work.join("; ") }));
        }
        for (n, m) in self.mms.iter().enumerate() {
            let s = Section::Mm(MmId(n));
            cell(s, "mm_users", Value::Text(if m.freed { "0 (freed)".into() } else { m.users.to_string() }));
            if m.freed {
                continue;
            }
            let texts = m.sframe.entries().map(|e| (e.text_start, e.text_end)).collect();
            cell(s, "sframe sections (text)", Value::Texts(texts));
        }
        out
    }

    /// Starts (or stops) recording which cells each logged event changes,
    /// for [`Kernel::take_state_changes`]; the first change recorded holds
    /// every cell (the state now, as the change of the last event logged,
    /// if there is one).
    pub fn record_states(&mut self, on: bool) {
        self.states = on.then(Recorder::default);
        // What happened before (perf's boot-time registration) is in the
        // state the last event so far leaves.
        if let Some(last) = self.events.last().map(|e| e.seq) {
            self.record_state(last);
        }
    }

    /// The changes recorded since the last call (none unless
    /// [`Kernel::record_states`] is on).
    pub fn take_state_changes(&mut self) -> Vec<StateChange> {
        self.states.as_mut().map_or_else(Vec::new, |r| std::mem::take(&mut r.changes))
    }

    /// Records what event `seq`, just logged, changed.
    pub(crate) fn record_state(&mut self, seq: u64) {
        let Some(mut rec) = self.states.take() else { return };
        let now = self.cells();
        let mut cells: Vec<((Section, &'static str), Option<Value>)> = Vec::new();
        for c in &now {
            if rec.last.get(&(c.section, c.field)) != Some(&c.value) {
                cells.push(((c.section, c.field), Some(c.value.clone())));
            }
        }
        let now: BTreeMap<(Section, &'static str), Value> =
            now.into_iter().map(|c| ((c.section, c.field), c.value)).collect();
        for key in rec.last.keys() {
            if !now.contains_key(key) {
                cells.push((*key, None));
            }
        }
        rec.last = now;
        rec.changes.push(StateChange { seq, cells });
        self.states = Some(rec);
    }
}
