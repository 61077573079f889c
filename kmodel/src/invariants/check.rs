//! The checks: structural invariants after every host call, behavioural
//! ones as requests, callbacks, resets and exits happen.

use super::ledger::{Violation, HISTORY};
use crate::event::EventKind;
use crate::kernel::{Kernel, TaskState};
use crate::types::{Cookie, KernelVersion, Tid, WorkId, RESERVED_BITS, UNWIND_PENDING};

impl Kernel {
    pub(crate) fn violation(&mut self, invariant: &'static str, detail: String) {
        let from = self.events.len().saturating_sub(HISTORY);
        let history = self.events[from..].to_vec();
        self.log(0, None, EventKind::Violation { invariant: invariant.into(), detail: detail.clone() });
        self.violations.push(Violation { invariant, detail, history });
    }

    /// Violations found so far (and forgets them).
    pub fn take_violations(&mut self) -> Vec<Violation> {
        std::mem::take(&mut self.violations)
    }

    /// Records a request that returned `ret` with `cookie` (B4 bookkeeping).
    pub(crate) fn ledger_request(&mut self, tid: Tid, work: WorkId, ret: i32, cookie: Cookie) {
        if ret < 0 || !self.check {
            return;
        }
        let (entry, pc) = {
            let t = self.task(tid);
            (t.entries, t.regs.as_ref().map_or(0, |r| r.pc))
        };
        let id = cookie.id();
        let owner = *self.ledger.owners.entry(id).or_insert((tid, entry));
        if owner != (tid, entry) {
            self.violation(
                "B4",
                format!(
                    "cookie {id:#x} of task {} entry {} handed out again to task {tid} entry {entry}",
                    owner.0, owner.1
                ),
            );
        }
        let e = self.ledger.entries.entry((tid, id)).or_default();
        if e.requested.is_empty() {
            e.pc = pc;
            e.entry = entry;
        }
        e.requested.add(work);
    }

    /// Records a callback (B1 duplicates, B2, B6).
    pub(crate) fn ledger_callback(&mut self, tid: Tid, work: WorkId, cookie: Cookie, trace: &[u64]) {
        if !self.check {
            return;
        }
        let id = cookie.id();
        let e = self.ledger.entries.entry((tid, id)).or_default();
        let called = e.called.add(work);
        let (requested, pc) = (e.requested.get(work) > 0, e.pc);
        if !requested {
            let stale = self.ledger.cancelled.keys().any(|w| self.works[w.0].name != self.works[work.0].name);
            let why = if stale { " (stale bit snapshot across cancel + re-register)" } else { "" };
            self.violation("B2", format!("{work} called for task {tid} cookie {id:#x} without a request{why}"));
        }
        if called > 1 {
            self.violation("B1", format!("{work} called {called} times for task {tid} cookie {id:#x}"));
        }
        if let Some(&first) = trace.first() {
            if first != pc && requested {
                self.violation(
                    "B6",
                    format!("trace for cookie {id:#x} starts at {first:#x}, the request saw user PC {pc:#x}"),
                );
            }
        }
    }

    /// The kernel rewrote the task's user registers (`execve()`, or a
    /// uprobe's emulated or out-of-line instruction): the trace for the
    /// cookie still open in this entry must now start at `pc` (B6 compares
    /// with the registers as they are on the return to user; upstream
    /// serves a request made before the exec there, §5.4).
    pub(crate) fn ledger_user_pc(&mut self, tid: Tid, pc: u64) {
        if !self.check {
            return;
        }
        let id = self.task(tid).info.id;
        if let Some(e) = self.ledger.entries.get_mut(&(tid, id.id())) {
            e.pc = pc;
        }
    }

    /// Records the start of a cancel (callbacks before it returns are fine;
    /// missing ones are excused).
    pub(crate) fn ledger_cancel(&mut self, work: WorkId) {
        let seq = self.next_seq;
        self.ledger.cancelled.insert(work, seq);
    }

    /// Closes the task's cookie after reset or exit: every requester that
    /// was not cancelled must have been called exactly once (B1, B8).
    pub(crate) fn ledger_close(&mut self, tid: Tid, cookie: Cookie, why: &'static str) {
        if !self.check || cookie.is_none() {
            return;
        }
        let Some(e) = self.ledger.entries.remove(&(tid, cookie.id())) else { return };
        for work in e.requested.works() {
            let called = e.called.get(work);
            if called == 0 && !self.ledger.cancelled.contains_key(&work) {
                self.violation(
                    if why == "exit" { "B8" } else { "B1" },
                    format!("{work} requested for task {tid} cookie {:#x} but never called ({why})", cookie.id()),
                );
            }
        }
    }

    /// The structural invariants I1–I6 over the whole model.
    pub fn check_structure(&mut self) {
        if !self.check {
            return;
        }
        let mut problems: Vec<(&'static str, String)> = Vec::new();
        if self.global_mask & RESERVED_BITS != RESERVED_BITS {
            problems.push(("I1", format!("global mask {:#x} lost a reserved bit", self.global_mask)));
        }
        let mut seen = 0u64;
        for (i, w) in self.works.iter().enumerate() {
            if !w.listed {
                continue;
            }
            let bit = 1u64 << w.bit.clamp(0, 63);
            if w.bit < 2 || seen & bit != 0 || self.global_mask & bit == 0 {
                problems.push(("I1", format!("work {i} ({}) holds bit {} illegally", w.name, w.bit)));
            }
            seen |= bit;
        }
        for t in self.tasks.values() {
            let m = t.info.mask;
            // The exit hook runs the handler while the work is still queued
            // (it is cancelled afterwards): PENDING is legitimately clear then.
            if t.work_queued && m & UNWIND_PENDING == 0 && !t.in_handler {
                problems.push(("I2", format!("task {} has its work queued without PENDING", t.tid)));
            }
            if t.state == TaskState::User {
                if m & UNWIND_PENDING != 0 {
                    // Possible only in v6.17, where an NMI from user mode
                    // queues with TWA_RESUME and nothing forces a re-entry.
                    if self.opts.version != KernelVersion::V6_17 {
                        problems.push(("I3", format!("task {} in user mode with PENDING set", t.tid)));
                    }
                } else {
                    let cache_clear = t.info.cache.as_ref().is_none_or(|c| c.nr_entries == 0 && c.completed == 0);
                    if m != 0 || !t.info.id.is_none() || !cache_clear {
                        problems.push((
                            "I4",
                            format!("task {} in user mode with mask {m:#x} / cookie / cache left", t.tid),
                        ));
                    }
                }
            }
            let id = t.info.id;
            let half_made = self.cookie_in_progress == Some(t.tid) && id.cpu == 0;
            if !id.is_none() && !half_made && (id.cpu == 0 || id.cnt % 2 == 0) {
                problems.push(("I5", format!("task {} has malformed cookie {:#x}", t.tid, id.id())));
            }
            if let Some(cache) = &t.info.cache {
                if self.cancels_waiting.is_empty()
                    && cache.completed & !(m & !RESERVED_BITS) != 0
                    && t.state != TaskState::User
                {
                    problems
                        .push(("I6", format!("task {} completed {:#x} outside mask {m:#x}", t.tid, cache.completed)));
                }
            }
        }
        self.check_mms_and_threads(&mut problems);
        for (inv, detail) in problems {
            self.violation(inv, detail);
        }
    }

    /// With several tasks per mm: every live mm's `mm_users` is the number
    /// of live tasks that have it (M4); no live task has a freed mm (M1);
    /// and each task's deferred state is its own: no two tasks hold the
    /// same cookie at once (B4), no two share one cache (by construction in
    /// the model: `unwind_task_init()` gives each its own, checked by B5/B6
    /// per task).
    fn check_mms_and_threads(&mut self, problems: &mut Vec<(&'static str, String)>) {
        let (mut users, mut cookies) = std::mem::take(&mut self.ledger.scratch);
        users.clear();
        users.resize(self.mms.len(), 0);
        cookies.clear();
        for t in self.tasks.values().filter(|t| t.state != TaskState::Dead) {
            if let Some(mm) = t.mm {
                users[mm.0] += 1;
                if self.mms[mm.0].freed {
                    problems.push(("M1", format!("task {} has mm {}, which __mmdrop() has freed", t.tid, mm.0)));
                }
            }
            if !t.info.id.is_none() {
                cookies.push((t.info.id.id(), t.tid));
            }
        }
        // Sorted by cookie, then task: a cookie held twice is two neighbours,
        // reported with the lower task first.
        cookies.sort_unstable();
        for pair in cookies.windows(2) {
            let ((id, other), (same, tid)) = (pair[0], pair[1]);
            if id == same {
                problems.push(("B4", format!("tasks {other} and {tid} hold the same cookie {id:#x}")));
            }
        }
        for (i, (m, &live)) in self.mms.iter().zip(&users).enumerate() {
            if !m.freed && m.users != live {
                problems.push(("M4", format!("mm {i} has mm_users {} but {live} live tasks use it", m.users)));
            }
        }
        self.ledger.scratch = (users, cookies);
    }

    pub(crate) fn check_after_exit(&mut self, tid: Tid) {
        let open: Vec<u64> = self.ledger.entries.keys().filter(|(t, _)| *t == tid).map(|(_, c)| *c).collect();
        for id in open {
            let cookie = Cookie::from_id(id, self.opts.big_endian);
            self.ledger_close(tid, cookie, "exit");
        }
        self.check_structure();
    }
}
