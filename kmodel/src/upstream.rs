//! The model's side of a [`DeferredBackend`]: with one installed
//! ([`Kernel::with_backend`]), every call of a function of `deferred.c`
//! (`unwind_deferred_init()`, `_request()`, `_cancel()`,
//! `_task_exit()`, the task_work `unwind_deferred_task_work()`,
//! `unwind_reset_info()`, `unwind_task_init()`) goes to the backend — the
//! kernel's own code — instead of the model's Rust; the rest of the model
//! answers the code's calls out ([`Host`]: task_work, user memory, the
//! tracers' callbacks, the walk when a proposal's unwinder stands in for
//! `user.c`) and mirrors its state (`unwind_info` of every task, the
//! works and their list) after each call, so that the event log, the
//! invariant checks and every report read the backend's state as they
//! read the model's.

use std::sync::Arc;

use crate::arch::{Arch, UserRegs};
use crate::backend::{BackendEvent, DeferredBackend, Host, Site, TaskView};
use crate::entry::Notify;
use crate::event::EventKind;
use crate::interleave::Point;
use crate::kernel::Kernel;
use crate::memory::{Access, UserMemory};
use crate::types::{
    Cookie, ExitPath, KernelOptions, KernelVersion, Tid, UnwindCache, WorkId, EINVAL, INIT_WAITING, RESERVED_BITS,
    UNWIND_PENDING,
};
use crate::unwind::{Method, Miss, Stop, Trace};

/// Why the lab cannot run `opts` on the kernel's own code: the lab
/// variants that change `deferred.c` itself exist only in the model.
pub fn backend_refuses(opts: &KernelOptions) -> Option<String> {
    if opts.version != KernelVersion::V6_19 {
        return Some(format!(
            "kernel version {}: the kernel's own code is the tree's deferred.c, which behaves as v6.19 \
             (TWA_NMI_CURRENT from NMI); the {} variant exists only in the model",
            opts.version, opts.version
        ));
    }
    match opts.exit_path {
        ExitPath::CopyOnExit | ExitPath::UnwindAtSyscallEntry => {
            return Some(format!(
                "exit path {}: a lab variant of unwind_user_faultable(), which exists only in the model",
                opts.exit_path
            ))
        }
        ExitPath::Upstream | ExitPath::V6_17 | ExitPath::None => {}
    }
    if opts.bits_per_long != 64 {
        return Some(format!(
            "BITS_PER_LONG {}: the kernel's code is built for the host's 64-bit long",
            opts.bits_per_long
        ));
    }
    None
}

impl Kernel {
    /// A kernel whose `deferred.c` and `user.c` are `backend`'s (the
    /// kernel's own code) instead of the model's, booted; or why the
    /// options cannot run there ([`backend_refuses`]).
    pub fn with_backend(opts: KernelOptions, backend: Arc<dyn DeferredBackend>) -> Result<Self, String> {
        if let Some(why) = backend_refuses(&opts) {
            return Err(why);
        }
        Ok(Kernel::boot(opts, Some(backend)))
    }

    /// The backend's description, if one runs `deferred.c`.
    pub fn backend(&self) -> Option<String> {
        self.backend.as_ref().map(|b| b.describe())
    }

    /// The backend's code faulted: what and where (the run is void from
    /// there on; the lab stops with this error).
    pub fn backend_failure(&self) -> Option<String> {
        self.backend.as_ref().and_then(|b| b.failure())
    }

    /// Whether `user.c` itself walks a task of `arch`: upstream has a user
    /// unwinder only for frame pointers on x86-64 (`HAVE_UNWIND_USER_FP`);
    /// any other configuration walks with the lab's unwinder (a proposal).
    fn user_c_walks(&self, arch: Arch) -> bool {
        arch == Arch::X86_64 && self.opts.unwind.order == [Method::Fp]
    }

    /// Runs `f` on the backend with the model answering its calls, then
    /// mirrors the backend's state.
    fn on_backend<R>(
        &mut self,
        cpu: usize,
        tid: Option<Tid>,
        mem: Option<&dyn UserMemory>,
        f: impl FnOnce(&dyn DeferredBackend, &mut dyn Host) -> R,
    ) -> R {
        self.on_backend_handling(cpu, tid, mem, None, f)
    }

    /// [`Kernel::on_backend`] for a call that runs the deferred handler:
    /// its `handler_start` event (`handler`: the task and the context) is
    /// logged where the code's `fetch_andnot` has taken the bits, with the
    /// state as it is there.
    fn on_backend_handling<R>(
        &mut self,
        cpu: usize,
        tid: Option<Tid>,
        mem: Option<&dyn UserMemory>,
        handler: Option<(Tid, &'static str)>,
        f: impl FnOnce(&dyn DeferredBackend, &mut dyn Host) -> R,
    ) -> R {
        let backend = self.backend.clone().expect("called with a backend");
        if let Some(tid) = tid {
            backend.set_task(tid, &self.task_view(tid));
        }
        // Only with PENDING set does the handler take the bits (upstream
        // WARNs and returns otherwise).
        let handler = handler.filter(|&(t, _)| self.task(t).info.mask & UNWIND_PENDING != 0);
        let (result, handler) = {
            let mut host = Call { k: self, mem, cpu, walk: None, handler };
            let result = f(&*backend, &mut host);
            (result, host.handler)
        };
        // The code never took the bits: the event as the call began.
        if let Some((tid, context)) = handler {
            self.log_handler_start(tid, context);
        }
        self.mirror_backend();
        result
    }

    /// What the backend's code reads of `tid` besides `unwind_info`.
    fn task_view(&self, tid: Tid) -> TaskView {
        let t = self.task(tid);
        let regs = t.regs.as_ref();
        TaskView {
            kthread: t.kthread,
            exiting: t.exiting,
            has_mm: t.mm.is_some(),
            user_mode: !t.kthread && regs.is_some(),
            compat: regs.is_some_and(|r| r.mode == crate::arch::RegsMode::Compat),
            vm86: regs.is_some_and(|r| r.mode == crate::arch::RegsMode::Vm86),
            uprobe_at_entry: regs.is_some_and(UserRegs::at_function_start),
            ip: regs.map_or(0, |r| r.pc),
            sp: regs.map_or(0, |r| r.sp()),
            fp: regs.map_or(0, |r| r.fp()),
        }
    }

    /// The backend's cookie value as the model's (its halves in the
    /// modelled kernel's byte order).
    fn host_cookie(&self, id: u64) -> Cookie {
        Cookie { big_endian: self.opts.big_endian, ..Cookie::from_id(id, false) }
    }

    /// Copies the backend's state into the model's mirrors and turns what
    /// it reported into events.
    pub(crate) fn mirror_backend(&mut self) {
        let Some(backend) = self.backend.clone() else { return };
        self.mirror_state(backend.as_ref());
        for event in backend.take_events() {
            match event {
                BackendEvent::Warn { site, what, cpu, tid } => {
                    let who = if tid == 0 { String::new() } else { format!(" as task {tid}") };
                    let detail = format!("{what}: {site} on CPU {cpu}{who}");
                    let undefined = site.op == "undefined behaviour" || what.contains("outside the word");
                    self.log(cpu, (tid != 0).then_some(tid), EventKind::Warn { site, what });
                    if self.check {
                        // Undefined behaviour the harness caught (a shift or
                        // a bit number past the word) is what the model
                        // names `UB`; the rest are the code's own WARNs.
                        self.violation(if undefined { "UB" } else { "WARN" }, detail);
                    }
                }
                BackendEvent::InitReturned { work, ret } => self.log_init(work, ret),
                BackendEvent::CancelReturned { work } => {
                    self.cancels_waiting.retain(|&w| w != work);
                    self.log(0, None, EventKind::CancelReturn { work });
                }
            }
        }
    }

    /// Copies the backend's state into the model's mirrors: after each
    /// call, and in the middle of one where the host logs an event, so the
    /// event shows the code's state at that moment as the model's own code
    /// would.
    fn mirror_state(&mut self, backend: &dyn DeferredBackend) {
        let tids: Vec<Tid> = self.tasks.keys().copied().collect();
        for tid in tids {
            let view = backend.info(tid);
            let cookie = self.host_cookie(view.id);
            let info = &mut self.task_mut(tid).info;
            info.mask = view.mask;
            info.id = cookie;
            info.cache =
                view.cache.map(|(completed, entries)| UnwindCache { completed, nr_entries: entries.len(), entries });
        }
        let works = backend.works(self.works.len(), self.cpus.len());
        for (w, &(bit, listed)) in self.works.iter_mut().zip(&works.works) {
            w.bit = bit;
            w.listed = listed;
        }
        self.global_mask = works.global_mask;
        self.callbacks = works.callbacks;
        for (cpu, ctr) in self.cpus.iter_mut().zip(works.ctx_ctr) {
            cpu.ctr = ctr;
        }
        self.srcu_readers = works.srcu_readers;
    }

    /// [`Kernel::mirror_state`] of the backend, if one runs.
    fn mirror_state_now(&mut self) {
        if let Some(backend) = self.backend.clone() {
            self.mirror_state(backend.as_ref());
        }
    }

    /// The `init` event of `work`, which returned `ret`.
    fn log_init(&mut self, work: WorkId, ret: i32) {
        let w = &self.works[work.0];
        let bit = (ret == 0 && w.bit >= 0).then_some(w.bit as u32);
        let name = w.name.clone();
        self.log(0, None, EventKind::Init { work, name, ret, bit });
    }

    /// `unwind_deferred_init()` on the backend.
    pub(crate) fn upstream_init(&mut self, work: WorkId) -> i32 {
        let ret = self.on_backend(0, None, None, |b, host| b.init(host, work, 0));
        if ret == INIT_WAITING {
            self.log(0, None, EventKind::MutexWait { work, call: "unwind_deferred_init" });
        } else {
            self.log_init(work, ret);
        }
        ret
    }

    /// `unwind_deferred_request()` on the backend, as `cpu`'s current task.
    pub(crate) fn upstream_request(&mut self, cpu: usize, work: WorkId) -> (i32, Cookie) {
        // Without a task on the CPU, `current` is the idle task: a kernel
        // thread, refused.
        let Some(tid) = self.current(cpu) else { return (EINVAL, Cookie::default()) };
        let in_nmi = self.cpus[cpu].in_nmi;
        let (ret, id) = self.on_backend(cpu, Some(tid), None, |b, host| b.request(host, tid, cpu, in_nmi, work));
        (ret, self.host_cookie(id))
    }

    /// The task_work `unwind_deferred_task_work()` on the backend.
    pub(crate) fn upstream_task_work(&mut self, tid: Tid, mem: &dyn UserMemory, context: &'static str) {
        let cpu = self.task(tid).cpu;
        self.on_backend_handling(cpu, Some(tid), Some(mem), Some((tid, context)), |b, host| {
            b.task_work(host, tid, cpu)
        });
        self.task_mut(tid).in_handler = false;
    }

    /// The handler's `handler_start` event, once it has taken the bits
    /// (`fetch_andnot` cleared PENDING): the tracer bits it took.
    fn log_handler_start(&mut self, tid: Tid, context: &'static str) {
        let cpu = self.task(tid).cpu;
        self.task_mut(tid).in_handler = true;
        let bits = self.task(tid).info.mask;
        self.log(cpu, Some(tid), EventKind::HandlerStart { bits: bits & !RESERVED_BITS, context });
    }

    /// `unwind_reset_info()` on the backend.
    pub(crate) fn upstream_reset_info(&mut self, tid: Tid) {
        // The mask and cookie before, not the whole info (its cache's
        // entries): this runs on every return to user with a request.
        let (mask, cookie) = (self.task(tid).info.mask, self.task(tid).info.id);
        if mask == 0 {
            return;
        }
        let cpu = self.task(tid).cpu;
        self.on_backend(cpu, Some(tid), None, |b, host| b.reset_info(host, tid, cpu));
        let after = &self.task(tid).info;
        // The code cleared the cookie: it reset, even if an NMI in its
        // window (after the cmpxchg, before the store to `id`) has set the
        // mask again.
        if after.id.is_none() && (after.mask == 0 || !cookie.is_none()) {
            self.log(cpu, Some(tid), EventKind::Reset { cookie });
            self.ledger_close(tid, cookie, "return to user");
        } else if after.mask & UNWIND_PENDING != 0 {
            self.log(cpu, Some(tid), EventKind::ResetSkipped);
        }
    }

    /// `unwind_deferred_cancel()` on the backend (on another CPU): it may
    /// wait for `callback_mutex` or the SRCU grace period, and then
    /// returns when what it waits for is released.
    pub(crate) fn upstream_cancel(&mut self, work: WorkId) {
        self.log(0, None, EventKind::CancelBegin { work });
        self.ledger_cancel(work);
        self.cancels_waiting.push(work);
        let returned = self.on_backend(0, None, None, |b, host| b.cancel(host, work, 0));
        if returned {
            self.cancels_waiting.retain(|&w| w != work);
            self.log(0, None, EventKind::CancelReturn { work });
        }
    }

    /// `unwind_deferred_task_exit()` on the backend.
    pub(crate) fn upstream_task_exit(&mut self, tid: Tid, mem: &dyn UserMemory, variant: &'static str) {
        let cpu = self.task(tid).cpu;
        if self.task(tid).info.mask & UNWIND_PENDING != 0 {
            self.log(cpu, Some(tid), EventKind::ExitHook { variant });
        }
        self.on_backend_handling(cpu, Some(tid), Some(mem), Some((tid, "exit")), |b, host| b.task_exit(host, tid, cpu));
        self.task_mut(tid).in_handler = false;
    }
}

/// The model answering one backend call: on `cpu`, reading user memory
/// through `mem` (calls that read none have none).
struct Call<'k, 'm> {
    k: &'k mut Kernel,
    mem: Option<&'m dyn UserMemory>,
    cpu: usize,
    /// A `user.c` walk in progress: faults before it, the extra walks made
    /// for it, and its last failed read.
    walk: Option<UserCWalk>,
    /// The deferred handler this call runs, whose `handler_start` event
    /// is still to be logged: its task and context.
    handler: Option<(Tid, &'static str)>,
}

/// What the model keeps of a walk `user.c` makes, for its `unwind` event.
struct UserCWalk {
    faults_before: u64,
    extra: Vec<Trace>,
    last_fault: Option<u64>,
}

impl Host for Call<'_, '_> {
    fn point(&mut self, site: Site) {
        if site.op == "after atomic_long_fetch_andnot" {
            if let Some((tid, context)) = self.handler.take() {
                self.k.mirror_state_now();
                self.k.log_handler_start(tid, context);
            }
        }
        self.k.point(self.cpu, Point::Upstream(site));
    }

    fn read_user(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        let ok = self.mem.is_some_and(|m| m.read(addr, buf, Access::Faultable).is_ok());
        if !ok {
            if let Some(walk) = self.walk.as_mut() {
                walk.last_fault = Some(addr);
            }
        }
        ok
    }

    fn task_work_add(&mut self, tid: Tid, nmi_current: bool) -> i32 {
        self.k.mirror_state_now();
        let notify = if nmi_current { Notify::NmiCurrent } else { Notify::Resume };
        self.k.task_work_add(tid, self.cpu, notify)
    }

    fn task_work_cancel(&mut self, tid: Tid) -> bool {
        std::mem::replace(&mut self.k.task_mut(tid).work_queued, false)
    }

    fn callback(&mut self, work: WorkId, tid: Tid, cookie: u64, trace: &[u64]) {
        // The state the callback sees is the code's as it is now.
        self.k.mirror_backend();
        let cookie = self.k.host_cookie(cookie);
        self.k.deliver(work, tid, self.cpu, cookie, trace);
    }

    fn walk(&mut self, tid: Tid, max: usize) -> Option<Vec<u64>> {
        let mem = self.mem?;
        // The walk's event shows the code's state (its cache allocated).
        self.k.mirror_state_now();
        let mm = self.k.task(tid).mm?;
        if self.k.user_c_walks(self.k.mms[mm.0].arch) {
            let extra = self.k.extra_walks_of(tid, mm, None, mem);
            self.walk = Some(UserCWalk { faults_before: mem.fault_count(), extra, last_fault: None });
            return None;
        }
        let mut entries = self.k.walk_logged(tid, mm, None, mem).unwrap_or_default();
        entries.truncate(max);
        Some(entries)
    }

    fn walked(&mut self, tid: Tid, trace: &[u64]) {
        let Some(walk) = self.walk.take() else { return };
        self.k.mirror_state_now();
        let faults = self.mem.map_or(0, |m| m.fault_count()) - walk.faults_before;
        let k = &mut *self.k;
        k.stats.unwinds += 1;
        k.stats.task_faults += faults;
        let nr = trace.len();
        let stop = if nr >= k.opts.unwind.max_entries {
            Stop::MaxEntries
        } else if let Some(addr) = walk.last_fault {
            Stop::Fault { addr, method: Method::Fp }
        } else {
            Stop::NoMethod { misses: vec![Miss { method: Method::Fp, why: USER_C_CHECKS }] }
        };
        if !k.opts.extra_unwinders.is_empty() {
            let event = k.next_seq;
            k.extra.record(event, walk.extra, &[], &k.opts.extra_unwinders);
        }
        let methods = vec![Method::Fp; nr.saturating_sub(1)];
        let cpu = k.task(tid).cpu;
        k.log(cpu, Some(tid), EventKind::Unwind { nr, methods, stop, faultable: true, faults });
    }
}

/// Why a `user.c` walk that read everything it asked for ended: one of
/// `unwind_user_next_common()`'s checks failed (FP below SP, a CFA not
/// above SP or not word-aligned).
const USER_C_CHECKS: &str = "user.c's frame checks ended the frame-pointer chain";
