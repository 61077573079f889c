//! The deterministic scheduler: guests execute in the emulator, always the
//! guest with the fewest instructions next (ties by order); the kernel
//! model sees every system call, every sampling NMI and every exit, and the
//! scenario's timed events strike at their virtual time. What happens at a
//! system call is `schedule_syscall.rs`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use emu::{Exit, ProcessEvent, RunLimit, Stop};
use kmodel::arch::UserRegs;
use kmodel::event::EntryReason;
use kmodel::interleave::Point;
use kmodel::kernel::Kernel;
use kmodel::tracer::{PerfEvent, PerfScope, UserStackMode};
use kmodel::types::WorkId;

use crate::guest::GuestRun;
use crate::judge::SampleInfo;
use crate::report::{Progress, RunError};
use crate::scenario::{Action, EvictWhat, SampleOn, Scenario, Strike, Tracer};
use crate::symbolise::{GuestSymbols, SymbolCache};

/// What an [`Action::AtPoint`] did when the task reached its point.
#[derive(Debug)]
enum Struck {
    /// The sampling NMI struck: the sample number it took (if a tracer
    /// sampled), where the log was, its CPU and the guest.
    Nmi {
        /// The sample's number, before the NMI.
        seq: u64,
        /// The number of kernel events logged before it.
        at: usize,
        /// Its CPU.
        cpu: usize,
        /// The guest.
        g: usize,
        /// The task it struck.
        task: kmodel::types::Tid,
        /// The `seq` of its first event.
        nmi: u64,
    },
    /// The tracer's cancel ran.
    Cancel(String),
}

/// The uprobes placed in one guest.
#[derive(Debug, Clone)]
pub(crate) struct Probed {
    /// The program they are in (the emulator's image file): after an exec
    /// of another program, hits at those addresses are not theirs.
    pub(crate) file: String,
    /// Their addresses.
    pub(crate) addrs: std::collections::BTreeSet<u64>,
    /// The XOL pages (`[uprobes]`) the guest's processes got.
    pub(crate) xol: std::collections::BTreeSet<u64>,
}

/// A scenario being run.
pub(crate) struct Run<'s> {
    /// The scenario.
    pub(crate) scenario: &'s Scenario,
    /// The kernel model.
    pub(crate) k: Kernel,
    /// The guests, in scenario order.
    pub(crate) guests: Vec<GuestRun>,
    /// The shortest sampling period of the perf sessions, if any.
    period: Option<u64>,
    /// Every sample taken, by number.
    pub(crate) samples: BTreeMap<u64, SampleInfo>,
    /// The lab's own log lines, each before the kernel event of its index.
    pub(crate) extra: Vec<(usize, String)>,
    /// Whether to write [`Run::extra`] (no log wanted: not formatted).
    pub(crate) keep_log: bool,
    /// Each registered tracer's work.
    tracer_works: BTreeMap<String, WorkId>,
    /// Tracers cancelled so far, in order.
    pub(crate) cancelled: Vec<String>,
    /// Works cancelled so far, with the tracer whose cancel did it: every
    /// deferred perf session shares perf's one work, so cancelling a second
    /// session must not cancel that work again.
    cancelled_works: BTreeMap<WorkId, String>,
    /// Virtual time spent in slow system calls (added to instructions).
    in_kernel: u64,
    /// Index of the next timed event.
    next_event: usize,
    /// What the armed [`Action::AtPoint`] did, written from inside the
    /// kernel (its interleaver), read by the run before the guest runs on.
    struck: Rc<RefCell<Vec<Struck>>>,
    /// Per guest, the program its uprobes are in and their addresses.
    pub(crate) probes: BTreeMap<usize, Probed>,
}

impl<'s> Run<'s> {
    /// A run of `scenario` with the guests set up in `k`; the tracers are
    /// registered in order.
    pub(crate) fn new(scenario: &'s Scenario, k: Kernel, guests: Vec<GuestRun>) -> Result<Self, RunError> {
        let mut run = Run {
            scenario,
            k,
            guests,
            period: None,
            samples: BTreeMap::new(),
            extra: Vec::new(),
            keep_log: true,
            tracer_works: BTreeMap::new(),
            cancelled: Vec::new(),
            cancelled_works: BTreeMap::new(),
            in_kernel: 0,
            next_event: 0,
            struck: Rc::default(),
            probes: BTreeMap::new(),
        };
        for t in &scenario.tracers {
            run.register(t)?;
        }
        Ok(run)
    }

    fn register(&mut self, t: &Tracer) -> Result<(), RunError> {
        match t {
            Tracer::Perf { name, period, user_stack, task, inherit, event } => {
                let bound =
                    task.as_ref().map(|task| self.guests.iter().find(|g| &g.name == task).map_or(0, |g| g.tid()));
                let scope = match bound {
                    Some(tid) if *inherit => PerfScope::Inherit(tid),
                    Some(tid) => PerfScope::Task(tid),
                    None => PerfScope::CpuWide,
                };
                let event = match event {
                    SampleOn::Instructions => {
                        self.period = Some(self.period.map_or(*period, |p| p.min(*period)));
                        PerfEvent::Instructions
                    }
                    SampleOn::Uprobe(function) => self.place_uprobe(name, task.as_deref(), function, *period)?,
                };
                self.k.add_perf_on(name, scope, event, *user_stack);
                if let Some(work) = self.k.tracers().perf_work.filter(|_| *user_stack == UserStackMode::Deferred) {
                    self.tracer_works.insert(name.clone(), work);
                }
            }
            Tracer::Ftrace { name, instances } => {
                for n in 0..*instances {
                    let instance = if *instances == 1 { name.clone() } else { format!("{name}{n}") };
                    // Past the last free bit registration fails (-EBUSY, logged).
                    if let Some(i) = self.k.add_ftrace(&instance) {
                        self.tracer_works.insert(instance, self.k.tracers().ftrace[i].work);
                    }
                }
            }
            Tracer::Bpf { name } => {
                if let Some(i) = self.k.add_bpf(name) {
                    self.tracer_works.insert(name.clone(), self.k.tracers().bpf[i].work);
                }
            }
        }
        Ok(())
    }

    /// Guest instructions executed so far, all guests together.
    pub(crate) fn global(&self) -> u64 {
        self.guests.iter().map(|g| g.emu.icount()).sum()
    }

    /// Virtual time: instructions plus time spent in slow system calls
    /// (saturating: a huge sampling period makes a slow call last "forever").
    fn now(&self) -> u64 {
        self.global().saturating_add(self.in_kernel)
    }

    fn apply_events(&mut self) -> Result<(), RunError> {
        while let Some(e) = self.scenario.events.get(self.next_event).filter(|e| e.at <= self.now()) {
            self.next_event += 1;
            let find = |name: &str| {
                self.guests
                    .iter()
                    .position(|g| g.name == name)
                    .ok_or_else(|| RunError::Scenario(format!("no guest named {name:?}")))
            };
            match &e.action {
                Action::Migrate { task, cpu, thread } => {
                    let g = find(task)?;
                    self.guests[g].migrate_to = Some(*cpu);
                    self.guests[g].migrate_thread = *thread;
                }
                Action::SlowSyscall { task, nmis, syscall, before_sleep } => {
                    let g = find(task)?;
                    self.guests[g].slow = *nmis;
                    self.guests[g].slow_only = syscall.clone();
                    self.guests[g].slow_before_sleep = *before_sleep;
                }
                Action::Evict { task, what } => {
                    let g = find(task)?;
                    let guest = &mut self.guests[g];
                    let range = match what {
                        EvictWhat::Sframe => guest.emu.sframe().map(|s| (s.addr, s.addr.saturating_add(s.size))),
                        EvictWhat::Stack => {
                            let sp = guest.emu.regs().map_err(|e| RunError::guest(&guest.name, e))?.sp;
                            Some((sp & !0xfff, emu::layout::STACK_TOP))
                        }
                        EvictWhat::Range(a, b) => Some((*a, *b)),
                    };
                    if let Some((a, b)) = range {
                        guest.emu.evict(a, b.saturating_sub(a)).map_err(|e| RunError::guest(&guest.name, e))?;
                    }
                }
                Action::Cancel { tracer } => {
                    if let Some(&work) = self.tracer_works.get(tracer) {
                        // The same tracer cancelled again cancels its work
                        // again: the model's P1 violation, reported. Another
                        // perf session on perf's shared work does not.
                        let by = self.cancelled_works.entry(work).or_insert_with(|| tracer.clone());
                        if by == tracer {
                            self.k.unwind_deferred_cancel(work);
                        }
                        if !self.cancelled.contains(tracer) {
                            self.cancelled.push(tracer.clone());
                        }
                    }
                }
                Action::Register { tracer } => self.register(tracer)?,
                Action::AtPoint { task, point, strike } => {
                    let g = find(task)?;
                    self.arm(g, point, strike)?;
                }
                Action::Signal { task, signal } => {
                    let g = find(task)?;
                    let guest = &mut self.guests[g];
                    guest.emu.send_signal(*signal).map_err(|e| RunError::guest(&guest.name, e))?;
                }
            }
        }
        Ok(())
    }

    /// Runs the guests until they have all exited, are left asleep, or the
    /// scenario's `stop_after` is reached.
    pub(crate) fn main_loop(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<(), RunError> {
        self.main_loop_reading(progress, &mut |_| {})
    }

    /// [`Run::main_loop`], calling `read` after every step: a reader of
    /// what the kernel writes as the run goes (validate's judge,
    /// `stream.rs`) takes it from the run there.
    pub(crate) fn main_loop_reading(
        &mut self,
        progress: &mut dyn FnMut(Progress),
        read: &mut dyn FnMut(&mut Run<'s>),
    ) -> Result<(), RunError> {
        let stop_after = self.scenario.stop_after.unwrap_or(u64::MAX);
        loop {
            progress(Progress { instructions: self.global(), samples: self.k.tracers().samples });
            // The kernel's own code faulted: nothing after is meaningful.
            if let Some(failure) = self.k.backend_failure() {
                return Err(RunError::Scenario(failure));
            }
            self.take_struck()?;
            self.apply_events()?;
            let global = self.now();
            if global >= stop_after {
                break;
            }
            let Some(g) = (0..self.guests.len())
                .filter(|&g| self.guests[g].done.is_none() && !self.guests[g].asleep_at_end)
                .min_by_key(|&g| (self.guests[g].emu.icount(), g))
            else {
                break;
            };
            let icount = self.guests[g].emu.icount();
            let mut until = icount + (stop_after - global);
            if let Some(p) = self.period {
                until = until.min((icount / p + 1).saturating_mul(p));
            }
            if let Some(e) = self.scenario.events.get(self.next_event) {
                until = until.min(icount + e.at.saturating_sub(global).max(1));
            }
            self.k.set_time(global);
            // A thread that has just exited alone is still the emulator's
            // until its switch is reported: the model's CPU stays empty.
            let tid = self.guests[g].tid();
            if self.k.task(tid).state != kmodel::kernel::TaskState::Dead {
                self.k.schedule(tid);
            }
            let guest = &mut self.guests[g];
            let mut limit = RunLimit::icount(until).and_syscalls().and_processes();
            if self.probes.contains_key(&g) {
                limit = limit.and_probes();
            }
            let stop = guest.emu.run(limit).map_err(|e| RunError::guest(&guest.name, e))?;
            match stop {
                Stop::Limit => {
                    if self.period.is_some_and(|p| self.guests[g].emu.icount().is_multiple_of(p)) {
                        self.sample(g, true)?;
                    }
                }
                // The exit system calls end in Stop::Exit on the next run.
                Stop::Syscall(record) if record.name.starts_with("exit") => {}
                Stop::Syscall(record) => self.syscall(g, &record, stop_after)?,
                Stop::Process(event) => self.process(g, event, stop_after)?,
                Stop::Exit(exit) => self.guests[g].done = Some(exit.shell_status()),
                Stop::Probe(addr) => self.uprobe(g, addr)?,
            }
            read(self);
        }
        // A point struck in the last step (an exit's) is read now.
        self.take_struck()
    }

    /// Each guest's symboliser: the objects its processes had mapped, from
    /// its emulator's events and its forks, and where each of the samples
    /// the run still holds was taken; files parsed once in `cache` (a
    /// reader that names a run's samples chunk by chunk keeps one).
    pub(crate) fn symbols(&self, cache: &mut SymbolCache) -> BTreeMap<String, GuestSymbols> {
        let mut out = BTreeMap::new();
        for (i, guest) in self.guests.iter().enumerate() {
            let samples = self.samples.iter().filter(|(_, s)| s.guest == i).map(|(&n, s)| (n, s.moment)).collect();
            let symbols = GuestSymbols::new(guest.emu.events(), &guest.forks, &guest.exe, samples, cache)
                .with_trampoline(guest.emu.trampoline())
                .with_xol(self.probes.get(&i).map_or_else(Vec::new, |p| p.xol.iter().copied().collect()));
            out.insert(guest.name.clone(), symbols);
        }
        out
    }

    pub(crate) fn user_regs(&self, g: usize) -> Result<UserRegs, RunError> {
        let guest = &self.guests[g];
        guest.emu.regs().map(|r| UserRegs::from(&r)).map_err(|e| RunError::guest(&guest.name, e))
    }

    /// An NMI on the CPU of the guest's running thread: the model, then
    /// the ground truth of its sample (that thread's), if a session took one.
    fn sample(&mut self, g: usize, in_user: bool) -> Result<(), RunError> {
        let regs = self.user_regs(g)?;
        let (seq, at, nmi) = (self.k.tracers().samples, self.k.events().len(), self.k.next_seq());
        let task = self.guests[g].tid();
        let cpu = self.guests[g].cpu_of(task);
        {
            let mem = self.guests[g].emu.user_memory();
            self.k.nmi(cpu, in_user.then_some(regs), &mem);
        }
        // The guest has not run since: its truth is the NMI's. No session
        // sampled (all bound to other tasks): nothing to judge.
        if self.k.tracers().samples != seq {
            self.take_truth(g, seq, at, nmi)?;
        }
        Ok(())
    }

    /// Records the ground truth of sample `seq` of guest `g`'s running
    /// thread (its log line before the kernel event of index `at`; its
    /// NMI's first event is `nmi`); the CPU it runs on.
    pub(crate) fn take_truth(&mut self, g: usize, seq: u64, at: usize, nmi: u64) -> Result<usize, RunError> {
        let regs = self.user_regs(g)?;
        let guest = &mut self.guests[g];
        // The truth (PC, then return addresses) and, for each return
        // address, the SP just after its call.
        // A run made for verdicts alone keeps the innermost entries a walk
        // can reach (`judge::TRUTH_KEPT`); the log shows them all.
        let depth = guest.emu.shadow_stack().map_or(0, |s| s.entries().count()) + 1;
        let kept = if self.keep_log { depth } else { depth.min(crate::judge::TRUTH_KEPT) };
        let (mut truth, mut call_sps) = (Vec::with_capacity(kept), Vec::with_capacity(kept));
        truth.push(regs.pc);
        if let Some(stack) = guest.emu.shadow_stack() {
            for (ra, sp) in stack.entries().take(kept - 1) {
                truth.push(ra);
                call_sps.push(sp);
            }
        }
        let task = guest.tid();
        let cpu = guest.cpu_of(task);
        let icount = guest.emu.icount();
        if self.k.task(task).mm.is_none() {
            return Err(RunError::guest(
                &guest.name,
                format!("sampled after its exit_mm() (task {task}, thread {}, icount {icount})", guest.emu.tid()),
            ));
        }
        // The model's NMI samples the CPU's current task: it must be the
        // thread whose ground truth the sample is judged against.
        if self.k.current(cpu) != Some(task) {
            let problem = format!(
                "NMI on CPU {cpu}: the model runs {:?} there, the emulator thread {} (task {task})",
                self.k.current(cpu),
                guest.emu.tid()
            );
            return Err(RunError::guest(&guest.name, problem));
        }
        let moment = crate::symbolise::Moment { pid: guest.emu.pid(), position: guest.emu.events().len() };
        let thread = crate::log::Thread { pid: guest.emu.pid(), tid: guest.emu.tid(), task };
        if self.keep_log {
            self.extra.push((at, crate::log::sample_line(seq, &guest.name, cpu, icount, thread, &truth)));
        }
        self.samples.insert(seq, SampleInfo { guest: g, cpu, icount, truth, depth, call_sps, moment, nmi });
        Ok(cpu)
    }

    /// Arms [`Action::AtPoint`] for guest `g`'s running thread: the kernel
    /// calls its interleaver at every point; the first time the thread's
    /// CPU reaches `point` while running it (for an NMI strike: not in an
    /// NMI already), `strike` happens and the interleaver removes itself. An earlier `at_point`
    /// not reached yet is replaced.
    fn arm(&mut self, g: usize, point: &str, strike: &Strike) -> Result<(), RunError> {
        let named = Point::named(point).ok_or_else(|| RunError::Scenario(format!("no point named {point:?}")))?;
        let tid = self.guests[g].tid();
        let struck = self.struck.clone();
        let cancel = match strike {
            Strike::Nmi => None,
            Strike::Cancel(tracer) => Some((tracer.clone(), self.tracer_works.get(tracer).copied())),
        };
        self.k.set_interleaver(Some(Box::new(move |k: &mut Kernel, cpu: usize, p: Point| {
            // An NMI does not nest in an NMI; a cancel (another CPU's)
            // may strike an NMI's request.
            if !p.is(named) || k.current(cpu) != Some(tid) || (cancel.is_none() && k.in_nmi(cpu)) {
                return;
            }
            match &cancel {
                None => {
                    let (seq, at, nmi) = (k.tracers().samples, k.events().len(), k.next_seq());
                    k.nmi_at_point(cpu);
                    struck.borrow_mut().push(Struck::Nmi { seq, at, cpu, g, task: tid, nmi });
                }
                Some((tracer, work)) => {
                    if let Some(work) = work {
                        k.unwind_deferred_cancel(*work);
                    }
                    struck.borrow_mut().push(Struck::Cancel(tracer.clone()));
                }
            }
            k.set_interleaver(None);
        })));
        Ok(())
    }

    /// What an armed point did since the last call: the NMI's sample gets
    /// its ground truth (the guest has not run since: its thread is still
    /// where the kernel entry left it), the cancel is counted as the
    /// scenario's own cancels are.
    fn take_struck(&mut self) -> Result<(), RunError> {
        let struck = std::mem::take(&mut *self.struck.borrow_mut());
        for s in struck {
            match s {
                Struck::Nmi { seq, at, cpu, g, task, nmi } => {
                    // No tracer sampled: nothing to judge.
                    if self.k.tracers().samples == seq {
                        continue;
                    }
                    let guest = &self.guests[g];
                    if guest.tid() != task || guest.cpu_of(task) != cpu {
                        return Err(RunError::guest(
                            &self.guests[g].name,
                            "at_point: another thread runs where the NMI struck; its truth cannot be read",
                        ));
                    }
                    self.take_truth(g, seq, at, nmi)?;
                }
                Struck::Cancel(tracer) => {
                    if let Some(&work) = self.tracer_works.get(&tracer) {
                        self.cancelled_works.entry(work).or_insert_with(|| tracer.clone());
                    }
                    if !self.cancelled.contains(&tracer) {
                        self.cancelled.push(tracer);
                    }
                }
            }
        }
        Ok(())
    }

    /// Something happened to one of guest `g`'s processes.
    fn process(&mut self, g: usize, event: ProcessEvent, stop_after: u64) -> Result<(), RunError> {
        match event {
            ProcessEvent::Switch { to_tid, .. } => {
                let guest = &self.guests[g];
                let Some(&tid) = guest.tasks.get(&to_tid) else { return Ok(()) };
                // The guest's processes share its CPU (a migration moved the
                // one then running); each thread has its own.
                let cpu = guest.cpu_of(tid);
                if self.k.task(tid).cpu != cpu {
                    self.k.migrate(tid, cpu);
                }
                self.k.schedule(tid);
            }
            ProcessEvent::Block { tid: thread, syscall, .. } => {
                // The call sleeps in the kernel: the task entered it and sleeps there.
                let regs = self.user_regs(g)?;
                let tid = self.guests[g].tid();
                {
                    let mem = self.guests[g].emu.user_memory();
                    self.k.enter(tid, EntryReason::Syscall, regs, &mem);
                }
                // NMIs before it sleeps: its requests stay pending asleep.
                let guest = &mut self.guests[g];
                if guest.slow_before_sleep && guest.slow_only.as_deref().is_none_or(|only| only == syscall) {
                    let slow = std::mem::take(&mut guest.slow);
                    self.slow_nmis(g, slow, stop_after)?;
                    if self.guests[g].asleep_at_end {
                        return Ok(());
                    }
                }
                self.k.sleep(tid);
                self.guests[g].sleeping.insert(thread);
            }
            ProcessEvent::Exit { exit, .. } => self.exit(g, exit, stop_after, true)?,
            // A thread's own exit(), with siblings alive: it is still on the
            // CPU. (A killed thread's end says SIGKILL: after an exec by a
            // non-leader, the killed leader's ID is the caller's.)
            ProcessEvent::ThreadExit { tid, exit: exit @ Exit::Code(_), .. } if tid == self.guests[g].emu.tid() => {
                self.exit(g, exit, stop_after, false)?;
            }
            // A sibling killed by exit_group(), a fatal signal or an exec
            // (reported before the process's Exit or Exec): the model takes
            // it through its exit when it handles that (`exit`, `syscall`),
            // as `zap_other_threads()` kills only after the caller's call,
            // with the registers it was switched out with.
            ProcessEvent::ThreadExit { tid, regs: Some(regs), .. } => {
                let guest = &mut self.guests[g];
                if let Some(&task) = guest.tasks.get(&tid) {
                    guest.killed_regs.insert(task, UserRegs::from(&*regs));
                }
            }
            ProcessEvent::ThreadExit { .. } => {}
            // Handled at the system call's stop (`syscall`), where the model's task is in the kernel.
            ProcessEvent::Fork { .. } | ProcessEvent::Exec { .. } | ProcessEvent::Thread { .. } => {}
        }
        Ok(())
    }

    /// NMIs hitting the task while it is in the kernel; past the end of
    /// profiling it is left asleep there.
    pub(crate) fn slow_nmis(&mut self, g: usize, nmis: u32, stop_after: u64) -> Result<(), RunError> {
        let tid = self.guests[g].tid();
        for _ in 0..nmis {
            let period = self.period.unwrap_or(1);
            self.in_kernel = self.in_kernel.saturating_add(period);
            let now = self.now();
            self.k.set_time(now);
            if now >= stop_after {
                self.k.sleep(tid);
                self.guests[g].asleep_at_end = true;
                return Ok(());
            }
            self.sample(g, false)?;
            // Timed events can strike while the task is in the kernel.
            self.apply_events()?;
        }
        Ok(())
    }

    /// The running thread's exit: its process's (`group`: exit_group or a
    /// fatal signal, which kills its other threads) or its own (`exit`
    /// with siblings alive).
    fn exit(&mut self, g: usize, exit: Exit, stop_after: u64, group: bool) -> Result<(), RunError> {
        let regs = self.user_regs(g)?;
        let tid = self.guests[g].tid();
        let status = exit.shell_status();
        {
            let mem = self.guests[g].emu.user_memory();
            self.k.enter(tid, EntryReason::Syscall, regs, &mem);
        }
        // NMIs during the exit system call, before do_exit(): requests that
        // are still pending when the task exits.
        let matches = self.guests[g].slow_only.as_deref().is_none_or(|only| only.starts_with("exit"));
        let slow = if matches { std::mem::take(&mut self.guests[g].slow) } else { 0 };
        self.slow_nmis(g, slow, stop_after)?;
        if self.guests[g].asleep_at_end {
            return Ok(());
        }
        let guest = &mut self.guests[g];
        let mem = guest.emu.user_memory();
        // The guest is done when its machine is (`Stop::Exit`): other processes may run on.
        if group && !self.k.threads_of(tid).is_empty() {
            // do_group_exit(): the caller's do_exit() first, then each killed
            // sibling dies on its way to user mode (woken if asleep), in the
            // model's order (by task), whatever order the emulator reported
            // their ends in.
            let killed = self.k.exit_group(tid, status, &mem);
            for &t in &killed {
                self.k.signal_wake_up(t, guest.killed_regs.get(&t).cloned(), &mem);
            }
            guest.forget_killed(&killed);
        } else {
            self.k.exit(tid, status, &mem);
        }
        Ok(())
    }
}
