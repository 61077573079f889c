//! `kernel/unwind/deferred.c`: tracer registration, requests and cookies,
//! the task-work handler, the return-to-user reset, cancel with its SRCU
//! grace period, and the exit hook — step by step, with the interleaving
//! points where an NMI on the same task can strike.

use crate::arch::UserRegs;
use crate::entry::Notify;
use crate::event::EventKind;
use crate::interleave::Point;
use crate::kernel::{Kernel, MutexWaiter, StackCopy, UnwindWork};
use crate::memory::{Access, CopiedStack, Untracked, UserMemory};
use crate::types::{
    CancelledRequest, Cookie, ExitPath, KernelVersion, MmId, Tid, UnwindCache, WorkId, EBUSY, EINVAL, INIT_WAITING,
    RESERVED_BITS, UNWIND_PENDING, UNWIND_USED,
};
use crate::unwind::{unwind_user, unwind_user_dry_run, unwind_user_interleaved, SframeRegistry, Trace, UnwindConfig};

impl Kernel {
    fn all_bits(&self) -> u64 {
        if self.opts.bits_per_long >= 64 {
            u64::MAX
        } else {
            (1u64 << self.opts.bits_per_long) - 1
        }
    }

    /// `unwind_deferred_init()`: registers a tracer. Returns its work and 0,
    /// or −EBUSY when every bit is taken (the work then stays unlisted with
    /// bit 0, a reserved bit). While a cancel holds `callback_mutex` across
    /// its grace period the call waits: it returns [`INIT_WAITING`] and
    /// completes, with its `init` event, when that cancel returns, so the
    /// new tracer never sees the cancelled one's bits in any task.
    pub fn unwind_deferred_init(&mut self, name: &str) -> (WorkId, i32) {
        let id = WorkId(self.works.len());
        self.works.push(UnwindWork { name: name.to_string(), bit: 0, listed: false });
        if self.backend.is_some() {
            return (id, self.upstream_init(id));
        }
        if self.callback_mutex_held() {
            self.mutex_waiters.push_back(MutexWaiter::Init(id));
            self.log(0, None, EventKind::MutexWait { work: id, call: "unwind_deferred_init" });
            return (id, INIT_WAITING);
        }
        (id, self.init_locked(id))
    }

    /// `callback_mutex` is taken by a cancel until its grace period ends and
    /// it has cleared its bit in every task.
    fn callback_mutex_held(&self) -> bool {
        !self.cancels_waiting.is_empty()
    }

    /// The part of `unwind_deferred_init()` under `callback_mutex`.
    fn init_locked(&mut self, id: WorkId) -> i32 {
        let (ret, bit) = if self.global_mask == self.all_bits() {
            (EBUSY, None)
        } else {
            let bit = (!self.global_mask).trailing_zeros();
            self.global_mask |= 1 << bit;
            self.works[id.0].bit = bit as i32;
            self.works[id.0].listed = true;
            self.callbacks.insert(0, id);
            (0, Some(bit))
        };
        let name = self.works[id.0].name.clone();
        self.log(0, None, EventKind::Init { work: id, name, ret, bit });
        ret
    }

    /// `get_cookie()`: the entry's cookie, assigning one on first use.
    fn get_cookie(&mut self, cpu: usize, tid: Tid) -> Cookie {
        let id = self.task(tid).info.id;
        if id.cpu != 0 {
            return id;
        }
        let cnt = self.cpus[cpu].ctr.wrapping_add(2) | 1;
        self.point(cpu, Point::CookieBeforeCmpxchg);
        let nmi_safe = self.opts.nmi_safe_cmpxchg;
        let big_endian = self.opts.big_endian;
        let info = &mut self.task_mut(tid).info;
        // try_assign_cnt(): whoever wins the cmpxchg advances the counter;
        // a loser (interrupted by an NMI that assigned) adopts its value.
        let won = if nmi_safe {
            if info.id.cnt == 0 {
                info.id.cnt = cnt;
                true
            } else {
                false
            }
        } else {
            info.id.cnt = cnt;
            true
        };
        // Between the cmpxchg and the store to `id.cpu` the cookie is half
        // made: the invariants let this task's be (I5).
        let outer = self.cookie_in_progress.replace(tid);
        self.point(cpu, Point::CookieAfterCmpxchg);
        self.cookie_in_progress = outer;
        if won {
            self.cpus[cpu].ctr = cnt;
        }
        let info = &mut self.task_mut(tid).info;
        info.id.cpu = cpu as u32 + 1;
        info.id.big_endian = big_endian;
        info.id
    }

    /// `unwind_deferred_request()` by `work` in the current context of
    /// `cpu` (task or NMI). Returns the kernel's value and the cookie:
    /// 0 = a callback will come, 1 (or the race value) = already requested
    /// in this entry, negative = refused (cookie 0).
    pub fn unwind_deferred_request(&mut self, cpu: usize, work: WorkId) -> (i32, Cookie) {
        let (ret, cookie) = self.request_inner(cpu, work);
        let in_nmi = self.cpus[cpu].in_nmi;
        match ret {
            0 => self.stats.requests_queued += 1,
            r if r > 0 => self.stats.requests_joined += 1,
            _ => self.stats.requests_refused += 1,
        }
        let tid = self.current(cpu);
        self.log(cpu, tid, EventKind::Request { work, ret, cookie, in_nmi });
        if let Some(tid) = tid {
            self.ledger_request(tid, work, ret, cookie);
        }
        self.check_structure();
        (ret, cookie)
    }

    fn request_inner(&mut self, cpu: usize, work: WorkId) -> (i32, Cookie) {
        if self.backend.is_some() {
            return self.upstream_request(cpu, work);
        }
        let none = Cookie::default();
        let Some(tid) = self.current(cpu) else { return (EINVAL, none) };
        {
            let t = self.task(tid);
            // Kernel threads, exiting tasks, and contexts without user
            // registers cannot be unwound: upstream's `(PF_KTHREAD |
            // PF_EXITING) || !user_mode(regs)`, and nothing more (a task
            // without an mm is a kernel thread, or exiting: `do_exit()`
            // sets PF_EXITING before `exit_mm()`, as `exit.rs` does).
            if t.kthread || t.exiting || t.regs.is_none() {
                return (EINVAL, none);
            }
        }
        let in_nmi = self.cpus[cpu].in_nmi;
        if in_nmi && !self.opts.nmi_safe_cmpxchg {
            return (EINVAL, none);
        }
        let notify =
            if in_nmi && self.opts.version == KernelVersion::V6_19 { Notify::NmiCurrent } else { Notify::Resume };
        self.point(cpu, Point::RequestBeforeBitRead);
        let bit = self.works[work.0].bit;
        // 0 or 1: the work's init failed (it zeroes the work) or has not
        // returned. No correct tracer requests then; upstream would take
        // BIT(0), PENDING, or BIT(1), USED, as the work's bit, and so does
        // the model, reporting the precondition broken (P2).
        if (0..2).contains(&bit) && self.check {
            let name = self.works[work.0].name.clone();
            let init = if self.init_waiting(work) { "has not returned" } else { "failed" };
            let taken = if bit == 0 { "PENDING" } else { "USED" };
            self.violation(
                "P2",
                format!("unwind_deferred_request() of {work} ({name}), whose init {init}: BIT({bit}) is {taken}"),
            );
        }
        let bit = if bit < 0 {
            // Cancelled: work->bit is -1.
            match self.opts.cancelled_request {
                CancelledRequest::Refuse => return (EINVAL, none),
                CancelledRequest::Upstream => {
                    if self.check {
                        let name = self.works[work.0].name.clone();
                        self.violation(
                            "UB",
                            format!(
                                "unwind_deferred_request() of {work} ({name}) after its cancel: `unsigned long bit` \
                                 is ULONG_MAX, so WARN_ON_ONCE(bit < 0) cannot fire and BIT(bit) shifts past the \
                                 word (undefined; the machine takes bit 63)"
                            ),
                        );
                    }
                    1u64 << 63
                }
            }
        } else {
            1u64 << bit
        };
        self.point(cpu, Point::RequestStart);
        let cookie = self.get_cookie(cpu, tid);
        self.point(cpu, Point::RequestAfterCookie);
        if self.task(tid).info.mask & bit != 0 {
            return (1, cookie);
        }
        self.point(cpu, Point::RequestBeforeFetchOr);
        let old = {
            let info = &mut self.task_mut(tid).info;
            let old = info.mask;
            info.mask |= UNWIND_PENDING | bit;
            old
        };
        if old & (UNWIND_PENDING | bit) != 0 {
            // Joined a pending work (0), or a nested NMI set our bit in
            // between: the kernel returns `old & BIT(n)` truncated to int.
            return ((old & bit) as i32, cookie);
        }
        self.point(cpu, Point::RequestBeforeTaskWorkAdd);
        let ret = self.task_work_add(tid, cpu, notify);
        if ret != 0 {
            self.task_mut(tid).info.mask = 0;
            return (ret, cookie);
        }
        (0, cookie)
    }

    /// `unwind_user_faultable()` for `tid`: the cached trace of this entry,
    /// or a fresh faultable walk (cached if non-empty).
    pub fn unwind_user_faultable(&mut self, tid: Tid, mem: &dyn UserMemory) -> Result<Vec<u64>, i32> {
        let (mm, copy) = {
            let t = self.task(tid);
            (t.mm, t.stack_copy.clone())
        };
        // The unwind-at-syscall-entry design serves the entry's cache even
        // after exit_mm(); upstream checks the mm first.
        if self.opts.exit_path == ExitPath::UnwindAtSyscallEntry {
            if let Some(cache) = self.task(tid).info.cache.as_ref().filter(|c| c.nr_entries > 0) {
                return Ok(cache.entries[..cache.nr_entries].to_vec());
            }
        }
        let mm = match (mm, &copy) {
            (Some(mm), _) => mm,
            (None, Some(copy)) => copy.mm,
            (None, None) => return Err(EINVAL),
        };
        self.check_walk_mm(tid, mm, "unwind_user_faultable()");
        let cache = self.task_mut(tid).info.cache.get_or_insert_with(UnwindCache::default);
        if cache.nr_entries > 0 {
            return Ok(cache.entries[..cache.nr_entries].to_vec());
        }
        let entries = self.walk_logged(tid, mm, copy.as_ref(), mem)?;
        let t = self.task_mut(tid);
        let cache = t.info.cache.as_mut().expect("allocated above");
        // The cache keeps its buffer from entry to entry.
        cache.entries.clear();
        cache.entries.extend_from_slice(&entries);
        cache.nr_entries = entries.len();
        t.info.mask |= UNWIND_USED;
        Ok(entries)
    }

    /// The faultable walk of `unwind_user_faultable()` (the model's
    /// unwinders, through the stack `copy` once `exit_mm()` has run), with
    /// its lab extra walks, counters and `unwind` event: the entries.
    pub(crate) fn walk_logged(
        &mut self,
        tid: Tid,
        mm: MmId,
        copy: Option<&StackCopy>,
        mem: &dyn UserMemory,
    ) -> Result<Vec<u64>, i32> {
        let before = mem.fault_count();
        let extra = self.extra_walks_of(tid, mm, copy, mem);
        let copied = copied_view(copy, self.task(tid).mm.is_none(), mem);
        let walk_mem: &dyn UserMemory = match &copied {
            Some(view) => view,
            None => mem,
        };
        let trace: Trace = if self.interleaver.is_some() {
            // A test's interleaved walk: owned copies, as the hook needs the
            // whole kernel between lookups.
            let task_regs = self.task(tid).regs.clone();
            let Some(regs) = copy.map(|c| c.regs.clone()).or(task_regs) else {
                return Err(EINVAL);
            };
            let cfg = self.opts.unwind.clone();
            self.walk_interleaved(tid, mm, &regs, walk_mem, &cfg)
        } else {
            // Split borrows: the registers, the configuration and the
            // registry are read in place, not copied per unwind.
            let Kernel { tasks, mms, opts, .. } = self;
            let task_regs = tasks.get(&tid).and_then(|t| t.regs.as_ref());
            let Some(regs) = copy.map(|c| &c.regs).or(task_regs) else {
                return Err(EINVAL);
            };
            unwind_user(regs, walk_mem, &mut mms[mm.0].sframe, Access::Faultable, &opts.unwind)
        };
        let faults = mem.fault_count() - before;
        self.stats.unwinds += 1;
        self.stats.task_faults += faults;
        let cpu = self.task(tid).cpu;
        let Trace { entries, methods, stop, removed_sections, .. } = trace;
        for &sframe in &removed_sections {
            self.log(cpu, Some(tid), EventKind::SframeRemove { sframe, why: "corrupt or faulting".into() });
        }
        if !self.opts.extra_unwinders.is_empty() {
            let event = self.next_seq;
            self.extra.record(event, extra, &removed_sections, &self.opts.extra_unwinders);
        }
        self.log(cpu, Some(tid), EventKind::Unwind { nr: entries.len(), methods, stop, faultable: true, faults });
        Ok(entries)
    }

    /// The lab's extra walks of `tid`'s stack ([`KernelOptions::extra_unwinders`];
    /// through `copy` once `exit_mm()` has run), one per configuration:
    /// before the model's own walk, so that they find the table as it
    /// does, dry runs that drop no section, and untracked, so that they
    /// bring in no page it would find resident.
    ///
    /// [`KernelOptions::extra_unwinders`]: crate::types::KernelOptions::extra_unwinders
    pub(crate) fn extra_walks_of(
        &self,
        tid: Tid,
        mm: MmId,
        copy: Option<&StackCopy>,
        mem: &dyn UserMemory,
    ) -> Vec<Trace> {
        let configs = &self.opts.extra_unwinders;
        let task = self.task(tid);
        let Some(regs) = copy.map(|c| &c.regs).or(task.regs.as_ref()).filter(|_| !configs.is_empty()) else {
            return Vec::new();
        };
        let registry = &self.mms[mm.0].sframe;
        let untracked = Untracked(mem);
        let copied = copied_view(copy, task.mm.is_none(), &untracked);
        let walk_mem: &dyn UserMemory = match &copied {
            Some(view) => view,
            None => &untracked,
        };
        configs.iter().map(|cfg| unwind_user_dry_run(regs, walk_mem, registry, Access::Faultable, cfg)).collect()
    }

    /// `process_unwind_deferred()`: the task-work handler (also run by the
    /// exit hook). Calls every tracer that requested in this entry and was
    /// not called yet, with the entry's cookie and one shared trace.
    pub(crate) fn process_unwind_deferred(&mut self, tid: Tid, mem: &dyn UserMemory, context: &'static str) {
        if self.backend.is_some() {
            return self.upstream_task_work(tid, mem, context);
        }
        let cpu = self.task(tid).cpu;
        if self.task(tid).info.mask & UNWIND_PENDING == 0 {
            return;
        }
        self.task_mut(tid).in_handler = true;
        self.point(cpu, Point::HandlerBeforeFetchAndnot);
        let mut bits = {
            let info = &mut self.task_mut(tid).info;
            let old = info.mask;
            info.mask &= !UNWIND_PENDING;
            old
        };
        self.log(cpu, Some(tid), EventKind::HandlerStart { bits: bits & !RESERVED_BITS, context });
        self.point(cpu, Point::HandlerAfterFetchAndnot);
        // From here on every selected tracer is called, even with nothing.
        let trace = self.unwind_user_faultable(tid, mem).unwrap_or_default();
        self.point(cpu, Point::HandlerAfterUnwind);
        if let Some(cache) = &self.task(tid).info.cache {
            bits &= !cache.completed;
        }
        let cookie = self.task(tid).info.id;
        let reader = self.srcu_read_lock();
        // The SRCU-protected list walk: each step finds the next work still
        // on the list (one removed before the walk reaches it is skipped,
        // as `list_del_rcu()` unlinks it); a cancel that strikes after the
        // step finds the walk holding its work.
        let snapshot = self.callbacks.clone();
        for work in snapshot {
            if !self.works[work.0].listed {
                continue;
            }
            self.point(cpu, Point::HandlerBeforeCallback);
            let w = &self.works[work.0];
            // `test_bit(work->bit, &bits)`: a work cancelled since the step
            // has bit -1, a bit number before the word: undefined (read as
            // clear, as the kernel's code under the lab's harness does).
            if w.bit < 0 {
                self.undefined_bit(work, "test_bit(work->bit, &bits)");
                continue;
            }
            if bits & (1u64 << w.bit) == 0 {
                continue;
            }
            self.deliver(work, tid, cpu, cookie, &trace);
            // `BIT(work->bit)` is read again after the callback: a cancel
            // that began meanwhile has made it -1, and the shift by
            // ULONG_MAX is undefined (the machine takes bit 63).
            let bit = match self.works[work.0].bit {
                b if b < 0 => {
                    self.undefined_bit(work, "unwind_completed |= BIT(work->bit)");
                    1u64 << 63
                }
                b => 1u64 << b,
            };
            if let Some(cache) = self.task_mut(tid).info.cache.as_mut() {
                cache.completed |= bit;
            }
        }
        // Still inside the read section: a cancel begun during the walk is
        // in its grace period here.
        self.point(cpu, Point::HandlerBeforeSrcuUnlock);
        self.srcu_read_unlock(reader);
        self.task_mut(tid).in_handler = false;
    }

    /// `srcu_read_lock(&unwind_srcu)`: a read section begins; its id.
    fn srcu_read_lock(&mut self) -> u64 {
        let id = self.srcu_next;
        self.srcu_next += 1;
        self.srcu_active.push(id);
        self.srcu_readers += 1;
        id
    }

    /// `srcu_read_unlock()`: the read section `id` ends; a cancel whose
    /// grace period waited only for it (and earlier ones) returns.
    fn srcu_read_unlock(&mut self, id: u64) {
        self.srcu_active.retain(|&r| r != id);
        self.srcu_readers -= 1;
        self.finish_cancels();
    }

    /// `what` used the bit of `work` after its cancel made it -1: undefined
    /// in C, reported as a violation (`UB`).
    fn undefined_bit(&mut self, work: WorkId, what: &str) {
        if self.check {
            let name = self.works[work.0].name.clone();
            self.violation("UB", format!("{what} of {work} ({name}), cancelled meanwhile: bit -1 is past the word"));
        }
    }

    pub(crate) fn deliver(&mut self, work: WorkId, tid: Tid, cpu: usize, cookie: Cookie, trace: &[u64]) {
        self.stats.callbacks += 1;
        self.log(cpu, Some(tid), EventKind::Callback { work, cookie, nr: trace.len() });
        self.ledger_callback(tid, work, cookie, trace);
        // `work->func()`: the callback of whichever tracer owns the work.
        self.perf_callback(work, tid, cpu, cookie, trace);
        self.ftrace_bpf_callback(work, tid, cpu, cookie, trace);
    }

    /// `unwind_reset_info()` on the way back to user mode.
    pub(crate) fn unwind_reset_info(&mut self, tid: Tid) {
        if self.backend.is_some() {
            return self.upstream_reset_info(tid);
        }
        let cpu = self.task(tid).cpu;
        if self.task(tid).info.mask == 0 {
            return;
        }
        loop {
            let seen = self.task(tid).info.mask;
            if seen & UNWIND_PENDING != 0 {
                // A task_work is (again) queued; it runs before user mode.
                self.log(cpu, Some(tid), EventKind::ResetSkipped);
                return;
            }
            self.point(cpu, Point::ResetBeforeCmpxchg);
            let info = &mut self.task_mut(tid).info;
            if info.mask == seen {
                info.mask = 0;
                break;
            }
        }
        // Upstream's window (include/linux/unwind_deferred.h): the mask is
        // zero but `id` still holds the cookie. An NMI here gets that
        // cookie, sets PENDING and queues its work; the reset then clears
        // `id`, so the callbacks that follow get cookie 0 while perf's
        // sample carries the old one: a sample never stitched.
        self.point(cpu, Point::ResetAfterCmpxchg);
        let info = &mut self.task_mut(tid).info;
        let cookie = info.id;
        info.id = Cookie::default();
        self.point(cpu, Point::ResetBeforeCacheClear);
        let info = &mut self.task_mut(tid).info;
        if let Some(cache) = info.cache.as_mut() {
            cache.nr_entries = 0;
            cache.completed = 0;
        }
        self.log(cpu, Some(tid), EventKind::Reset { cookie });
        self.ledger_close(tid, cookie, "return to user");
    }

    /// `unwind_deferred_cancel()`: after it returns no callback of `work`
    /// runs. It holds `callback_mutex` from the list removal until the SRCU
    /// grace period has ended (in the model: no handler is inside its
    /// callback walk) and the bit is cleared in every task; inits and
    /// cancels issued meanwhile wait for it. Cancelling a work twice is
    /// invariant P1's violation (upstream computes `BIT(-1)` and deletes a
    /// list entry a second time); the model then leaves everything as it is.
    pub fn unwind_deferred_cancel(&mut self, work: WorkId) {
        if !self.tracers.torn_down.contains(&work) {
            self.tracers.torn_down.push(work);
        }
        if self.backend.is_some() {
            // Upstream's code has no guard against a second cancel; what it
            // does then is the backend's to show.
            return self.upstream_cancel(work);
        }
        let bit = self.works[work.0].bit;
        let queued = self.mutex_waiters.contains(&MutexWaiter::Cancel(work));
        if bit < 0 || queued {
            if self.check {
                let name = self.works[work.0].name.clone();
                let when = if queued { "while its first cancel waits for callback_mutex" } else { "after its first" };
                self.violation(
                    "P1",
                    format!(
                        "{work} ({name}) cancelled twice, {when}: upstream computes BIT(-1) and list_del_rcu()s an \
                         entry already off the list"
                    ),
                );
            }
            return;
        }
        if RESERVED_BITS & (1u64 << bit) != 0 {
            return; // never initialised, failed init, or its init waits: WARN
        }
        if self.callback_mutex_held() {
            self.mutex_waiters.push_back(MutexWaiter::Cancel(work));
            self.log(0, None, EventKind::MutexWait { work, call: "unwind_deferred_cancel" });
            return;
        }
        self.cancel_begin(work);
        self.finish_cancels();
    }

    /// The first half of a cancel, under `callback_mutex`: off the list, no
    /// more requests, the bit free again in the global mask.
    fn cancel_begin(&mut self, work: WorkId) {
        let bit = self.works[work.0].bit;
        self.callbacks.retain(|&w| w != work);
        let w = &mut self.works[work.0];
        w.listed = false;
        w.bit = -1;
        self.global_mask &= !(1u64 << bit);
        self.log(0, None, EventKind::CancelBegin { work });
        self.ledger_cancel(work);
        self.cancels_waiting.push(work);
        // synchronize_srcu() waits for the read sections begun before it.
        self.cancel_bits.push((work, bit as u32, self.srcu_next));
    }

    /// The cancels whose grace period has ended (no read section begun
    /// before them is left) clear their bit in every task and return,
    /// releasing `callback_mutex`; the calls waiting for it then run in
    /// order (a cancel among them begins its own grace period, which may
    /// end at once).
    fn finish_cancels(&mut self) {
        loop {
            let active = &self.srcu_active;
            let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.cancel_bits)
                .into_iter()
                .partition(|&(.., before)| !active.iter().any(|&r| r < before));
            self.cancel_bits = waiting;
            if done.is_empty() {
                break;
            }
            self.cancels_waiting.retain(|w| !done.iter().any(|(d, ..)| d == w));
            for (work, bit, _) in done {
                let clear = !(1u64 << bit);
                let tids: Vec<Tid> = self.tasks.keys().copied().collect();
                for tid in tids {
                    // The cancel runs on another CPU; the lab calls it 0.
                    self.point(0, Point::CancelBeforeClearTask);
                    let t = self.task_mut(tid);
                    t.info.mask &= clear;
                    if let Some(cache) = t.info.cache.as_mut() {
                        cache.completed &= clear;
                    }
                }
                self.log(0, None, EventKind::CancelReturn { work });
            }
            // `callback_mutex` is free again: the waiting calls run until
            // one is a cancel, which holds it across its own grace period.
            while self.cancels_waiting.is_empty() {
                match self.mutex_waiters.pop_front() {
                    None => break,
                    Some(MutexWaiter::Init(work)) => {
                        self.init_locked(work);
                    }
                    Some(MutexWaiter::Cancel(work)) => self.cancel_begin(work),
                }
            }
        }
    }

    /// `unwind_deferred_task_exit()`: finish pending unwinds while the mm
    /// still exists, and take the queued work off the list.
    pub(crate) fn unwind_deferred_task_exit(&mut self, tid: Tid, mem: &dyn UserMemory, variant: &'static str) {
        if self.backend.is_some() {
            return self.upstream_task_exit(tid, mem, variant);
        }
        if self.task(tid).info.mask & UNWIND_PENDING == 0 {
            return;
        }
        let cpu = self.task(tid).cpu;
        self.log(cpu, Some(tid), EventKind::ExitHook { variant });
        self.process_unwind_deferred(tid, mem, "exit");
        self.task_mut(tid).work_queued = false;
    }
}

impl Kernel {
    /// `unwind_user()` of `tid`'s stack in `mm`, faultable, with an
    /// interleaver installed: [`Point::UnwindBetweenLookups`] is reached
    /// between one frame's `sframe_find()` and the next; the table is put
    /// back in the mm for the hook (which may register or remove sections)
    /// and taken out again for the next lookup.
    fn walk_interleaved(
        &mut self,
        tid: Tid,
        mm: MmId,
        regs: &UserRegs,
        mem: &dyn UserMemory,
        cfg: &UnwindConfig,
    ) -> Trace {
        let cpu = self.task(tid).cpu;
        let arch = self.mms[mm.0].arch;
        let mut table = std::mem::replace(&mut self.mms[mm.0].sframe, SframeRegistry::new(arch));
        let trace = unwind_user_interleaved(regs, mem, &mut table, Access::Faultable, cfg, &mut |table| {
            std::mem::swap(&mut self.mms[mm.0].sframe, table);
            self.point(cpu, Point::UnwindBetweenLookups);
            self.check_walk_mm(tid, mm, "a lookup of unwind_user()");
            std::mem::swap(&mut self.mms[mm.0].sframe, table);
        });
        self.mms[mm.0].sframe = table;
        trace
    }
}

/// What a walk reads after `exit_mm()` (`exited`) in the copy-on-exit
/// variant: the stack copied on exit, in front of `rest`; `None` before
/// (or without a copy), when it reads `rest` alone.
fn copied_view<'a>(copy: Option<&'a StackCopy>, exited: bool, rest: &'a dyn UserMemory) -> Option<CopiedStack<'a>> {
    copy.filter(|_| exited).map(|copy| CopiedStack { base: copy.base, bytes: &copy.bytes, rest })
}
