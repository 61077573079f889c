//! The runner: guests execute in the emulator under a deterministic
//! scheduler (always the guest with the fewest instructions next, ties by
//! order); the kernel model sees every system call, every sampling NMI and
//! every exit; samples are judged against the ground truth.

use std::collections::BTreeMap;

use emu::{Config, Emulator, Exit, RunLimit, Stop};
use kmodel::arch::UserRegs;
use kmodel::event::EntryReason;
use kmodel::kernel::{Kernel, KernelOptions, Tid, WorkId};
use kmodel::memory::Access;
use kmodel::tracer::{stitch, PerfRecord, PerfScope, UserChain, UserStackMode};
use kmodel::unwind::{unwind_user, Method, SframeMode, UnwindConfig};
use serde::Serialize;

use crate::scenario::{Action, EvictWhat, Scenario, SframeStrictness, Tracer, UnwinderName};
use crate::symbols::Symbols;
use crate::verdict::Verdict;

/// Why a scenario could not be run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A guest could not be loaded or emulated.
    #[error("guest {guest}: {message}")]
    Guest {
        /// Guest name.
        guest: String,
        /// What went wrong.
        message: String,
    },
    /// The scenario asks for something impossible at run time.
    #[error("{0}")]
    Scenario(String),
}

/// One judged sample.
#[derive(Debug, Clone, Serialize)]
pub struct SampleResult {
    /// Sample number.
    pub sample: u64,
    /// perf session.
    pub tracer: String,
    /// Guest.
    pub guest: String,
    /// CPU of the NMI.
    pub cpu: usize,
    /// Guest instructions at the NMI.
    pub icount: u64,
    /// Ground truth: PC, then return addresses.
    pub truth: Vec<u64>,
    /// The kernel part of the sample's callchain (empty if it hit user mode).
    pub kernel: Vec<u64>,
    /// What the tracer got.
    pub delivered: Option<Vec<u64>>,
    /// CPU whose buffer held the deferred record.
    pub deferred_cpu: Option<usize>,
    /// The verdict.
    pub verdict: Verdict,
}

/// How a guest ended.
#[derive(Debug, Clone, Serialize)]
pub struct GuestResult {
    /// Name.
    pub name: String,
    /// Shell-style exit status (`None`: still running or asleep at the end).
    pub exit: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Instructions it executed.
    pub instructions: u64,
}

/// The numbers of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Samples taken (NMIs with a sampling tracer).
    pub samples: u64,
    /// Samples judged (one per perf session per NMI).
    pub judged: u64,
    /// Stacks delivered (non-empty).
    pub delivered: u64,
    /// Exact stacks.
    pub exact: u64,
    /// Truncated stacks.
    pub truncated: u64,
    /// Wrong stacks.
    pub wrong: u64,
    /// Lost stacks.
    pub lost: u64,
    /// Lost stacks by reason.
    pub lost_reasons: BTreeMap<String, u64>,
    /// Bytes written to perf buffers.
    pub bytes_written: u64,
    /// Bytes copying 8 KiB of stack per sample would have written.
    pub bytes_copy_baseline: u64,
    /// Unwinds run in task context (cache misses).
    pub unwinds: u64,
    /// Page faults taken by those unwinds.
    pub task_faults: u64,
    /// Samples whose in-NMI walk would have needed a fault.
    pub nmi_would_fault: u64,
    /// Callbacks per tracer.
    pub callbacks: BTreeMap<String, u64>,
    /// Requests: queued, joined, refused.
    pub requests: [u64; 3],
    /// Invariant violations.
    pub violations: u64,
    /// Guest instructions executed.
    pub instructions: u64,
    /// perf's late `unwind_deferred_init()` failed with this error.
    pub perf_init_error: Option<i32>,
    /// Samples of deferred perf sessions taken with the in-NMI walk instead,
    /// perf having no work.
    pub perf_unregistered_samples: u64,
}

/// Everything a run produced.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The scenario run.
    pub scenario: Scenario,
    /// The numbers.
    pub summary: Summary,
    /// Every judged sample.
    pub samples: Vec<SampleResult>,
    /// The guests.
    pub guests: Vec<GuestResult>,
    /// Invariant violations, with their histories.
    pub violations: Vec<String>,
    /// Expectations that failed.
    pub expectation_failures: Vec<String>,
    /// The event log, one JSON object per line.
    #[serde(skip)]
    pub log: Vec<String>,
    /// The kernel model's events (the structured form of most of the log).
    #[serde(skip)]
    pub kernel_events: Vec<kmodel::event::Event>,
    /// Each guest's function symbols, at its load address.
    #[serde(skip)]
    pub symbols: BTreeMap<String, Symbols>,
}

struct GuestRun {
    name: String,
    emu: Emulator,
    tid: Tid,
    cpu: usize,
    done: Option<i32>,
    asleep_at_end: bool,
    slow: u32,
    slow_only: Option<String>,
    migrate_to: Option<usize>,
}

struct SampleInfo {
    guest: usize,
    cpu: usize,
    icount: u64,
    truth: Vec<u64>,
}

struct Run<'s> {
    scenario: &'s Scenario,
    k: Kernel,
    guests: Vec<GuestRun>,
    period: Option<u64>,
    samples: BTreeMap<u64, SampleInfo>,
    extra: Vec<(usize, String)>,
    tracer_works: BTreeMap<String, WorkId>,
    cancelled: Vec<String>,
    nmi_would_fault: u64,
    /// Virtual time spent in slow system calls (added to instructions).
    in_kernel: u64,
    /// Index of the next timed event.
    next_event: usize,
    symbols: BTreeMap<String, Symbols>,
}

impl Report {
    /// A readable account of a run.
    pub fn account(&self) -> String {
        let r = self;
        let s = &r.summary;
        let mut out = format!("scenario {}: {}\n", r.scenario.name, r.scenario.description);
        out += &format!(
            "  machine: {:?}, {} CPU(s); kernel {:?}, exit path {:?}\n",
            r.scenario.machine.arch, r.scenario.machine.cpus, r.scenario.kernel.version, r.scenario.kernel.exit_path
        );
        for g in &r.guests {
            out += &format!(
                "  guest {}: {} instructions, {}\n",
                g.name,
                g.instructions,
                match g.exit {
                    Some(code) => format!("exited with {code}"),
                    None => "still in the kernel at the end".into(),
                }
            );
        }
        out += &format!(
            "  samples: {} taken, {} judged: {} exact, {} truncated, {} wrong, {} lost\n",
            s.samples, s.judged, s.exact, s.truncated, s.wrong, s.lost
        );
        for (why, n) in &s.lost_reasons {
            out += &format!("    lost {n}: {why}\n");
        }
        out += &format!(
            "  kernel: {} requests queued, {} joined a pending unwind, {} refused; {} unwinds in task context ({} page faults)\n",
            s.requests[0], s.requests[1], s.requests[2], s.unwinds, s.task_faults
        );
        out += &format!("  in-NMI walks that would have needed a page fault: {}\n", s.nmi_would_fault);
        out += &format!(
            "  perf buffers: {} bytes written (copying 8 KiB of stack per sample: {} bytes)\n",
            s.bytes_written, s.bytes_copy_baseline
        );
        if let Some(err) = s.perf_init_error {
            out += &format!(
                "  perf registered late: unwind_deferred_init() returned {}; {} samples of its deferred sessions fell back to the in-NMI walk\n",
                kmodel::kernel::errno_name(err),
                s.perf_unregistered_samples
            );
        }
        for (tracer, n) in &s.callbacks {
            out += &format!("  callbacks to {tracer}: {n}\n");
        }
        if s.violations > 0 {
            out += &format!("  INVARIANT VIOLATIONS: {}\n", s.violations);
            for v in &r.violations {
                out += &format!("{v}\n");
            }
        }
        for f in &r.expectation_failures {
            out += &format!("  EXPECTATION FAILED: {f}\n");
        }
        out
    }
}

fn guest_err(guest: &str, e: impl std::fmt::Display) -> RunError {
    RunError::Guest { guest: guest.to_string(), message: e.to_string() }
}

fn unwind_config(s: &Scenario) -> UnwindConfig {
    UnwindConfig {
        order: s
            .kernel
            .unwinders
            .iter()
            .map(|u| match u {
                UnwinderName::Sframe => Method::Sframe,
                UnwinderName::Fp => Method::Fp,
            })
            .collect(),
        sframe_mode: match s.kernel.sframe {
            SframeStrictness::Kernel => SframeMode::KernelStrict,
            SframeStrictness::Lab => SframeMode::Lab,
        },
        caller_ip_adjust: s.kernel.caller_ip_adjust,
        ..UnwindConfig::default()
    }
}

/// Runs a scenario to the end and judges every sample.
pub fn run(scenario: &Scenario) -> Result<Report, RunError> {
    run_with_progress(scenario, &mut |_| {})
}

/// How far a run is, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Guest instructions executed so far.
    pub instructions: u64,
    /// Samples taken so far.
    pub samples: u64,
}

/// [`run`], reporting progress after every step of the scheduler.
pub fn run_with_progress(scenario: &Scenario, progress: &mut dyn FnMut(Progress)) -> Result<Report, RunError> {
    // Scenarios built in code (validate, demo) get the parser's checks too:
    // everything below relies on them.
    scenario.validate(&format!("scenario {}", scenario.name)).map_err(|e| RunError::Scenario(e.to_string()))?;
    let arch = scenario.machine.arch;
    let opts = KernelOptions {
        cpus: scenario.machine.cpus,
        version: scenario.kernel.version,
        exit_path: scenario.kernel.exit_path,
        nmi_safe_cmpxchg: scenario.kernel.nmi_safe_cmpxchg,
        big_endian: arch.big_endian(),
        unwind: unwind_config(scenario),
        copy_on_exit_bytes: scenario.kernel.copy_on_exit_bytes,
        bits_per_long: 64,
        perf_registration: scenario.kernel.perf_registration,
    };
    let mut k = Kernel::new(opts);
    k.check = true;
    let mut guests = Vec::new();
    let mut symbols = BTreeMap::new();
    for g in &scenario.guests {
        // argv[0] and /proc/self/exe must not depend on where the checkout
        // is: their lengths change the guest's instruction counts.
        let file_name = g.path.file_name().map_or_else(|| g.name.clone(), |n| n.to_string_lossy().into_owned());
        let mut args = vec![file_name.clone().into_bytes()];
        args.extend(g.args.iter().map(|a| a.clone().into_bytes()));
        let config = Config {
            args,
            stdin: emu::Stdin::Bytes(g.stdin.clone().into_bytes()),
            capture_output: true,
            passthrough: false,
            seed: scenario.seed,
            exe_path: Some(format!("/guests/{file_name}").into_bytes()),
            ..Config::default()
        };
        let (mut emu, guest_symbols) = load_guest(g, config)?;
        symbols.insert(g.name.clone(), guest_symbols);
        if kmodel::arch::Arch::from(emu.arch()) != arch {
            return Err(guest_err(&g.name, format!("is not a {arch:?} program")));
        }
        let mm = k.new_mm(arch);
        if let Some(sframe) = emu.sframe() {
            if let Some(text) = emu.image().text_range() {
                let mem = emu.user_memory();
                // A refused section is logged by the model; FP remains.
                let _ = k.add_sframe(mm, &mem, (sframe.addr, sframe.addr.saturating_add(sframe.size)), text);
            }
        }
        let tid = k.spawn(&g.name, mm, g.cpu);
        guests.push(GuestRun {
            name: g.name.clone(),
            emu,
            tid,
            cpu: g.cpu,
            done: None,
            asleep_at_end: false,
            slow: 0,
            slow_only: None,
            migrate_to: None,
        });
    }
    let mut run = Run {
        scenario,
        k,
        guests,
        period: None,
        samples: BTreeMap::new(),
        extra: Vec::new(),
        tracer_works: BTreeMap::new(),
        cancelled: Vec::new(),
        nmi_would_fault: 0,
        in_kernel: 0,
        next_event: 0,
        symbols,
    };
    for t in &scenario.tracers {
        run.register(t);
    }
    run.main_loop(progress)?;
    Ok(run.report())
}

/// Loads a guest, with its `.sframe` patched first if the scenario says so
/// (in the file's bytes: the section is read-only once loaded).
fn load_guest(g: &crate::scenario::Guest, config: Config) -> Result<(Emulator, Symbols), RunError> {
    let mut bytes = std::fs::read(&g.path).map_err(|e| guest_err(&g.name, format!("{}: {e}", g.path.display())))?;
    if !g.sframe_patch.is_empty() {
        let (offset, size) = goblin::elf::Elf::parse(&bytes)
            .ok()
            .and_then(|elf| {
                elf.program_headers
                    .iter()
                    .find(|p| p.p_type == sframe::elf::PT_GNU_SFRAME)
                    .map(|p| (p.p_offset, p.p_filesz))
            })
            .ok_or_else(|| guest_err(&g.name, "sframe_patch given but the program has no PT_GNU_SFRAME"))?;
        for &(at, byte) in &g.sframe_patch {
            let pos = offset.checked_add(at).filter(|_| at < size).and_then(|p| usize::try_from(p).ok());
            match pos.and_then(|p| bytes.get_mut(p)) {
                Some(b) => *b = byte,
                None => return Err(guest_err(&g.name, format!("sframe_patch offset {at} is past the section"))),
            }
        }
    }
    let emu = Emulator::new(&g.path.display().to_string(), &bytes, config).map_err(|e| guest_err(&g.name, e))?;
    let symbols = Symbols::parse(&bytes, emu.image().bias);
    Ok((emu, symbols))
}

impl Run<'_> {
    fn register(&mut self, t: &Tracer) {
        match t {
            Tracer::Perf { name, period, user_stack, task } => {
                let scope = match task {
                    Some(task) => PerfScope::Task(self.guests.iter().find(|g| &g.name == task).map_or(0, |g| g.tid)),
                    None => PerfScope::CpuWide,
                };
                self.k.add_perf(name, scope, *user_stack);
                if let Some(work) = self.k.tracers.perf_work.filter(|_| *user_stack == UserStackMode::Deferred) {
                    self.tracer_works.insert(name.clone(), work);
                }
                self.period = Some(self.period.map_or(*period, |p| p.min(*period)));
            }
            Tracer::Ftrace { name, instances } => {
                for n in 0..*instances {
                    let instance = if *instances == 1 { name.clone() } else { format!("{name}{n}") };
                    // Past the last free bit registration fails (-EBUSY, logged).
                    if let Some(i) = self.k.add_ftrace(&instance) {
                        self.tracer_works.insert(instance, self.k.tracers.ftrace[i].work);
                    }
                }
            }
            Tracer::Bpf { name } => {
                if let Some(i) = self.k.add_bpf(name) {
                    self.tracer_works.insert(name.clone(), self.k.tracers.bpf[i].work);
                }
            }
        }
    }

    /// Guest instructions executed so far, all guests together.
    fn global(&self) -> u64 {
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
                Action::Migrate { task, cpu } => {
                    let g = find(task)?;
                    self.guests[g].migrate_to = Some(*cpu);
                }
                Action::SlowSyscall { task, nmis, syscall } => {
                    let g = find(task)?;
                    self.guests[g].slow = *nmis;
                    self.guests[g].slow_only = syscall.clone();
                }
                Action::Evict { task, what } => {
                    let g = find(task)?;
                    let guest = &mut self.guests[g];
                    let range = match what {
                        EvictWhat::Sframe => guest.emu.sframe().map(|s| (s.addr, s.addr.saturating_add(s.size))),
                        EvictWhat::Stack => {
                            let sp = guest.emu.regs().map_err(|e| guest_err(&guest.name, e))?.sp;
                            Some((sp & !0xfff, emu::layout::STACK_TOP))
                        }
                        EvictWhat::Range(a, b) => Some((*a, *b)),
                    };
                    if let Some((a, b)) = range {
                        guest.emu.evict(a, b.saturating_sub(a)).map_err(|e| guest_err(&guest.name, e))?;
                    }
                }
                Action::Cancel { tracer } => {
                    if let Some(&work) = self.tracer_works.get(tracer) {
                        // A second cancel is the model's P1 violation, reported.
                        self.k.unwind_deferred_cancel(work);
                        if !self.cancelled.contains(tracer) {
                            self.cancelled.push(tracer.clone());
                        }
                    }
                }
                Action::Register { tracer } => self.register(tracer),
                Action::Signal { task, signal } => {
                    let g = find(task)?;
                    let guest = &mut self.guests[g];
                    guest.emu.send_signal(*signal).map_err(|e| guest_err(&guest.name, e))?;
                }
            }
        }
        Ok(())
    }

    fn main_loop(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<(), RunError> {
        let stop_after = self.scenario.stop_after.unwrap_or(u64::MAX);
        loop {
            progress(Progress { instructions: self.global(), samples: self.k.tracers.samples });
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
            self.k.time = global;
            self.k.schedule(self.guests[g].tid);
            let guest = &mut self.guests[g];
            let stop = guest.emu.run(RunLimit::icount(until).and_syscalls()).map_err(|e| guest_err(&guest.name, e))?;
            match stop {
                Stop::Limit => {
                    if self.period.is_some_and(|p| self.guests[g].emu.icount() % p == 0) {
                        self.sample(g, true)?;
                    }
                }
                // The exit system calls end in Stop::Exit on the next run.
                Stop::Syscall(record) if record.name.starts_with("exit") => {}
                Stop::Syscall(record) => self.syscall(g, record.name, stop_after)?,
                Stop::Exit(exit) => self.exit(g, exit, stop_after)?,
            }
        }
        Ok(())
    }

    fn user_regs(&self, g: usize) -> Result<UserRegs, RunError> {
        let guest = &self.guests[g];
        guest.emu.regs().map(|r| UserRegs::from(&r)).map_err(|e| guest_err(&guest.name, e))
    }

    /// An NMI on the guest's CPU: ground truth first, then the model.
    fn sample(&mut self, g: usize, in_user: bool) -> Result<(), RunError> {
        let regs = self.user_regs(g)?;
        let guest = &mut self.guests[g];
        let mut truth = vec![regs.pc];
        truth.extend(guest.emu.ground_truth());
        let seq = self.k.tracers.samples;
        let cpu = guest.cpu;
        let icount = guest.emu.icount();
        // Would a synchronous walk in the NMI have needed a fault?
        let mm = self.k.task(guest.tid).mm.ok_or_else(|| guest_err(&guest.name, "sampled after its exit_mm()"))?;
        let mut registry = self.k.mms[mm.0].sframe.clone();
        let cfg = self.k.opts.unwind.clone();
        let mem = guest.emu.user_memory();
        if unwind_user(&regs, &mem, &mut registry, Access::NoFault, &cfg).would_fault {
            self.nmi_would_fault += 1;
        }
        self.extra.push((
            self.k.events.len(),
            serde_json::json!({"event": "sample", "sample": seq, "guest": guest.name, "cpu": cpu,
                "icount": icount, "truth": truth.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>()})
            .to_string(),
        ));
        self.samples.insert(seq, SampleInfo { guest: g, cpu, icount, truth });
        self.k.nmi(cpu, in_user.then_some(regs), &mem);
        Ok(())
    }

    fn syscall(&mut self, g: usize, name: &str, stop_after: u64) -> Result<(), RunError> {
        let regs = self.user_regs(g)?;
        let tid = self.guests[g].tid;
        {
            let mem = self.guests[g].emu.user_memory();
            self.k.enter(tid, EntryReason::Syscall, regs, &mem);
        }
        // A slow system call: the task stays in the kernel for this many
        // sampling periods and every period's NMI hits it there.
        let matches = self.guests[g].slow_only.as_deref().is_none_or(|only| only == name);
        let slow = if matches { std::mem::take(&mut self.guests[g].slow) } else { 0 };
        self.slow_nmis(g, slow, stop_after)?;
        if self.guests[g].asleep_at_end {
            return Ok(());
        }
        // A migration waiting for a slow call happens in that call, between
        // its NMIs and the return to user.
        let waits_for_slow = self.guests[g].slow > 0;
        if let Some(to) = self.guests[g].migrate_to.filter(|_| !waits_for_slow) {
            self.guests[g].migrate_to = None;
            self.k.sleep(tid);
            self.k.migrate(tid, to);
            self.guests[g].cpu = to;
            self.k.wake(tid);
        }
        if matches!(name, "nanosleep" | "clock_nanosleep") {
            self.k.sleep(tid);
            self.k.wake(tid);
        }
        let mem = self.guests[g].emu.user_memory();
        self.k.return_to_user(tid, &mem);
        Ok(())
    }

    /// NMIs hitting the task while it is in the kernel; past the end of
    /// profiling it is left asleep there.
    fn slow_nmis(&mut self, g: usize, nmis: u32, stop_after: u64) -> Result<(), RunError> {
        let tid = self.guests[g].tid;
        for _ in 0..nmis {
            let period = self.period.unwrap_or(1);
            self.in_kernel = self.in_kernel.saturating_add(period);
            self.k.time = self.now();
            if self.k.time >= stop_after {
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

    fn exit(&mut self, g: usize, exit: Exit, stop_after: u64) -> Result<(), RunError> {
        let regs = self.user_regs(g)?;
        let tid = self.guests[g].tid;
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
        let mem = self.guests[g].emu.user_memory();
        self.k.exit(tid, status, &mem);
        self.guests[g].done = Some(status);
        Ok(())
    }

    fn lost_reason(&self, info: &SampleInfo, delivered_empty: bool) -> String {
        let guest = &self.guests[info.guest];
        if delivered_empty {
            return if guest.done.is_some() {
                "task exited before the unwind: empty stack delivered".into()
            } else {
                "the unwind found no frame: empty stack delivered".into()
            };
        }
        if guest.asleep_at_end {
            "task asleep in the kernel when profiling ended".into()
        } else if !self.cancelled.is_empty() {
            format!("tracer cancelled ({})", self.cancelled.join(", "))
        } else if guest.done.is_none() {
            "profiling ended before the return to user".into()
        } else {
            "no deferred record".into()
        }
    }

    fn report(mut self) -> Report {
        let mut samples = Vec::new();
        let mut summary = Summary { samples: self.k.tracers.samples, ..Summary::default() };
        for session in &self.k.tracers.perf {
            for s in stitch(&session.buffers) {
                let Some(info) = self.samples.get(&s.sample) else { continue };
                let verdict = match &s.user {
                    Some(ips) if !ips.is_empty() => Verdict::judge(ips, &info.truth),
                    Some(_) => Verdict::Lost { why: self.lost_reason(info, true) },
                    None => Verdict::Lost { why: self.lost_reason(info, false) },
                };
                summary.judged += 1;
                match &verdict {
                    Verdict::Exact => summary.exact += 1,
                    Verdict::Truncated { .. } => summary.truncated += 1,
                    Verdict::Wrong { .. } => summary.wrong += 1,
                    Verdict::Lost { why } => {
                        summary.lost += 1;
                        *summary.lost_reasons.entry(why.clone()).or_insert(0) += 1;
                    }
                }
                if !matches!(verdict, Verdict::Lost { .. }) {
                    summary.delivered += 1;
                }
                samples.push(SampleResult {
                    sample: s.sample,
                    tracer: session.name.clone(),
                    guest: self.guests[info.guest].name.clone(),
                    cpu: info.cpu,
                    icount: info.icount,
                    truth: info.truth.clone(),
                    kernel: s.kernel.clone(),
                    delivered: s.user.clone(),
                    deferred_cpu: s.deferred_cpu,
                    verdict,
                });
            }
        }
        summary.bytes_written = self.k.tracers.perf_bytes();
        let copy_sample = PerfRecord::Sample {
            time: 0,
            cpu: 0,
            tid: 0,
            sample: 0,
            kernel: kmodel::tracer::KERNEL_IPS_IN_USER.to_vec(),
            user: UserChain::Copied { bytes: 8192, ips: Vec::new() },
        };
        summary.bytes_copy_baseline = summary.samples * copy_sample.bytes();
        summary.unwinds = self.k.stats.unwinds;
        summary.task_faults = self.k.stats.task_faults;
        summary.nmi_would_fault = self.nmi_would_fault;
        summary.perf_init_error = self.k.tracers.perf_init_error;
        summary.perf_unregistered_samples = self.k.tracers.perf_unregistered_samples;
        summary.requests = [self.k.stats.requests_queued, self.k.stats.requests_joined, self.k.stats.requests_refused];
        for e in &self.k.events {
            if let kmodel::event::EventKind::Callback { work, .. } = e.kind {
                *summary.callbacks.entry(self.k.works[work.0].name.clone()).or_insert(0) += 1;
            }
        }
        let violations: Vec<String> = self.k.take_violations().iter().map(|v| v.to_string()).collect();
        summary.violations = violations.len() as u64;
        summary.instructions = self.global();
        let guests: Vec<GuestResult> = self
            .guests
            .iter()
            .map(|g| GuestResult {
                name: g.name.clone(),
                exit: g.done,
                stdout: String::from_utf8_lossy(g.emu.stdout()).into_owned(),
                instructions: g.emu.icount(),
            })
            .collect();
        let log = self.log_lines(&summary);
        let mut report = Report {
            scenario: self.scenario.clone(),
            summary,
            samples,
            guests,
            violations,
            expectation_failures: Vec::new(),
            log,
            kernel_events: std::mem::take(&mut self.k.events),
            symbols: std::mem::take(&mut self.symbols),
        };
        report.expectation_failures = check_expectations(&report);
        report
    }

    fn log_lines(&self, summary: &Summary) -> Vec<String> {
        let mut lines = vec![serde_json::json!({"unwindlab_log": 1, "scenario": self.scenario}).to_string()];
        let mut extra = self.extra.iter().peekable();
        for (i, e) in self.k.events.iter().enumerate() {
            while let Some((_, line)) = extra.next_if(|(at, _)| *at == i) {
                lines.push(line.clone());
            }
            lines.push(serde_json::to_string(e).unwrap_or_default());
        }
        lines.extend(extra.map(|(_, l)| l.clone()));
        lines.push(serde_json::json!({"summary": summary}).to_string());
        lines
    }
}

fn check_expectations(r: &Report) -> Vec<String> {
    let Some(x) = &r.scenario.expect else { return Vec::new() };
    let s = &r.summary;
    let mut failures = Vec::new();
    if let Some(min) = x.min_samples.filter(|&m| s.samples < m) {
        failures.push(format!("expected at least {min} samples, got {}", s.samples));
    }
    if let Some(share) = x.min_exact_share {
        let got = if s.judged == 0 { 0.0 } else { s.exact as f64 / s.judged as f64 };
        if got < share {
            failures.push(format!("expected at least {:.1} % exact stacks, got {:.1} %", share * 100.0, got * 100.0));
        }
    }
    if let Some(lost) = x.lost.filter(|&l| l != s.lost) {
        failures.push(format!("expected {lost} lost stacks, got {}", s.lost));
    }
    if let Some(exits) = &x.exit {
        for (name, want) in exits {
            let got = r.guests.iter().find(|g| &g.name == name).and_then(|g| g.exit);
            if got != Some(*want) {
                failures.push(format!("expected guest {name} to exit with {want}, got {got:?}"));
            }
        }
    }
    if x.no_violations.unwrap_or(true) && s.violations > 0 {
        failures.push(format!("{} invariant violation(s)", s.violations));
    }
    failures
}
