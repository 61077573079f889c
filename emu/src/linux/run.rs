//! The deterministic run loop: runs the engine to the next stop, services
//! the system call or turns the fault or trap that stopped it into a
//! signal, and delivers pending signals.

use crate::error::Error;
use crate::linux::emulator::{Emulator, Exit};
use crate::linux::proc_table::ProcessEvent;
use crate::linux::sched::Progress;
use crate::linux::sigframe::{self, si_code, Cause};
use crate::linux::signal;
use crate::linux::syscall::{self, SyscallRecord};
use crate::machine::engine::{Stepper, Trap};
use crate::machine::memory::MemFault;
use crate::machine::step::{self, Ended};
use crate::machine::track::{self, Cut, Tracking};
use unicorn_engine::uc_error;

/// Where [`Emulator::run`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunLimit {
    /// Stop before executing instruction number `n`, i.e. when [`Emulator::icount`] is `n`.
    pub until_icount: Option<u64>,
    /// Stop after each serviced system call.
    pub after_syscall: bool,
    /// Stop at each [`ProcessEvent`] (fork, exec, thread creation and end, block, switch, exit).
    pub process_events: bool,
    /// Stop before each instruction at a probe address
    /// ([`Emulator::set_probes`], [`Stop::Probe`]); without it probes are
    /// not looked at.
    pub probes: bool,
}

impl RunLimit {
    /// Run until the process ends.
    pub fn to_exit() -> Self {
        RunLimit::default()
    }

    /// Run until the instruction count reaches `icount`.
    pub fn icount(icount: u64) -> Self {
        RunLimit { until_icount: Some(icount), ..RunLimit::default() }
    }

    /// Also stop after each system call.
    pub fn and_syscalls(self) -> Self {
        RunLimit { after_syscall: true, ..self }
    }

    /// Also stop at each [`ProcessEvent`].
    pub fn and_processes(self) -> Self {
        RunLimit { process_events: true, ..self }
    }

    /// Also stop at probes ([`Stop::Probe`]).
    pub fn and_probes(self) -> Self {
        RunLimit { probes: true, ..self }
    }
}

/// Why [`Emulator::run`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The instruction count reached the limit.
    Limit,
    /// A system call was serviced (only with [`RunLimit::after_syscall`]).
    Syscall(SyscallRecord),
    /// Something happened to a process (only with [`RunLimit::process_events`]).
    Process(ProcessEvent),
    /// The thread on the CPU is about to execute the instruction at this
    /// probe address (only with [`RunLimit::probes`]): it has not run, the
    /// registers, instruction count and ground truth are those before it.
    /// The thread's next run executes it without stopping there.
    Probe(u64),
    /// The machine has ended: every process has; this is the first one's status.
    Exit(Exit),
}

impl Emulator {
    // ---- running -------------------------------------------------------------

    /// Replaces the probe addresses (none if empty): breakpoints for
    /// uprobes. A run with [`RunLimit::and_probes`] stops with
    /// [`Stop::Probe`] whenever a thread (of any process) is about to
    /// execute the instruction at one; the thread's next run, with any
    /// limit, executes that instruction once without stopping at it
    /// (unless a signal handler is entered first: then it stops there again
    /// when the handler has returned) and goes on. An address where no
    /// instruction starts never stops. Needs [`Tracking::Count`] or more.
    pub fn set_probes(&mut self, addrs: impl IntoIterator<Item = u64>) {
        self.probes = std::rc::Rc::new(addrs.into_iter().collect());
    }

    /// The probe addresses ([`Emulator::set_probes`]).
    pub fn probes(&self) -> &std::collections::BTreeSet<u64> {
        &self.probes
    }

    /// Runs until `limit`, the end of the process, or (if asked) a syscall.
    ///
    /// Runs are deterministic: the same program, configuration and sequence of
    /// limits give the same stops, registers and instruction counts.
    ///
    /// Instruction-count limits and probes need [`Tracking::Count`] or
    /// more. A probe and a count limit at the same instruction stop as the
    /// limit ([`Stop::Limit`]) and then, in the next run, as the probe.
    pub fn run(&mut self, limit: RunLimit) -> Result<Stop, Error> {
        // The old image an execve replaced is gone once the run goes on.
        self.pre_exec = None;
        let probing = limit.probes && !self.probes.is_empty();
        if (limit.until_icount.is_some() || probing) && self.tracking() == Tracking::Off {
            let what = if probing { "probes" } else { "instruction-count limits" };
            return Err(Error::Setup {
                file: self.image.file.clone(),
                problem: format!("{what} need instruction tracking"),
            });
        }
        let stop_at = limit.until_icount.unwrap_or(u64::MAX);
        loop {
            // Once the machine has ended, every later run says so again.
            if let Some(exit) = self.machine_exit() {
                return Ok(Stop::Exit(exit));
            }
            if let Some(exit) = self.exit {
                if !self.cur().exit_reported {
                    self.cur_mut().exit_reported = true;
                    // Its other threads end first (each a `ThreadExit`), then
                    // the process, while the caller is still on the CPU.
                    self.kill_other_threads();
                    self.sched.events.push_back(ProcessEvent::Exit { pid: self.pid, exit });
                }
                if let Some(event) = self.sched.events.pop_front() {
                    if limit.process_events {
                        return Ok(Stop::Process(event));
                    }
                    continue;
                }
                self.end_current(exit);
                if let Some(exit) = self.schedule(Progress::Ended)? {
                    return Ok(Stop::Exit(exit));
                }
                continue;
            }
            if let Some(event) = self.sched.events.pop_front() {
                if limit.process_events {
                    return Ok(Stop::Process(event));
                }
                continue;
            }
            if self.sched.thread_exited {
                // Its `ThreadExit` has been reported while it was on the CPU.
                self.sched.thread_exited = false;
                self.end_current_thread();
                if let Some(exit) = self.schedule(Progress::Ended)? {
                    return Ok(Stop::Exit(exit));
                }
                continue;
            }
            if self.icount() >= stop_at {
                return Ok(Stop::Limit);
            }
            self.check_instruction_limit()?;
            if self.in_vfork(self.task.tid) {
                self.schedule(Progress::Waiting)?;
                continue;
            }
            if let Some(blocked) = self.blocked {
                match self.retry_blocked(blocked)? {
                    None => {
                        self.schedule(Progress::Waiting)?;
                        continue;
                    }
                    Some(record) => {
                        self.sched.idle = 0;
                        if limit.after_syscall {
                            if let Some(record) = record {
                                return Ok(Stop::Syscall(record));
                            }
                        }
                        continue;
                    }
                }
            }
            let yielded = std::mem::take(&mut self.sched.yielded) && self.others_alive();
            if yielded || self.quantum_over() {
                self.schedule(Progress::Preempted)?;
                continue;
            }
            if self.deliver_pending_signals()? {
                continue;
            }
            // Run no further than the stop asked for and the end of the quantum.
            let local_stop = self.local_stop(stop_at);
            let shared = self.uc.get_data_mut();
            shared.tracker.stop_at = local_stop;
            shared.tracker.use_probes(probing.then_some(&self.probes));
            shared.trap = None;
            // A stop inside a block: its instructions before the stop run
            // in the stepper (see `track` and `step`).
            let cut = shared.tracker.cut.take();
            let (trap, result, hit) = match cut {
                Some(cut) => {
                    let (trap, result) = self.step_to(cut)?;
                    (trap, result, None)
                }
                None => {
                    let pc = self.reg(self.info().pc)?;
                    self.uc.get_data_mut().tracker.resume_at(pc);
                    // Unicorn always has an exit address; 0 is never code.
                    let result = self.uc.emu_start(pc, 0, 0, 0);
                    track::finish_run(&mut self.uc);
                    self.report_undecodable();
                    let shared = self.uc.get_data_mut();
                    (shared.trap.take(), result, shared.tracker.hit.take())
                }
            };
            if let Some(err) = self.uc.get_data_mut().hook_error.take() {
                return Err(self.engine_error("handle a trap")(err));
            }
            self.sched.idle = 0;
            if let (Some(cut), None, Ok(())) = (cut, trap, result) {
                if self.own_icount() != cut.icount {
                    return Err(Error::Setup {
                        file: self.image.file.clone(),
                        problem: format!(
                            "the engine did not stop at instruction {} (at {:#x}) but after {}",
                            cut.icount,
                            cut.at,
                            self.own_icount()
                        ),
                    });
                }
                if cut.probe {
                    return Ok(self.probe_hit(cut.at));
                }
                continue;
            }
            // Stopped before a block that starts at a probe (one the run
            // cannot have reached if something else stopped it).
            if let (None, Ok(()), Some(addr)) = (trap, result, hit) {
                return Ok(self.probe_hit(addr));
            }
            match (trap, result) {
                (Some(Trap::Syscall(nr)), _) => {
                    let record = syscall::dispatch(self, nr)?;
                    if let Some(blocked) = self.blocked {
                        let event = ProcessEvent::Block { pid: self.pid, tid: self.task.tid, syscall: blocked.name };
                        self.sched.events.push_back(event);
                    } else if limit.after_syscall {
                        return Ok(Stop::Syscall(record));
                    }
                }
                (Some(Trap::Interrupt(intno)), _) => {
                    let sig = signal::for_interrupt(self.machine.interrupt(intno));
                    let code = match sig {
                        signal::SIGTRAP => si_code::TRAP_BRKPT,
                        signal::SIGFPE => si_code::FPE_INTDIV,
                        signal::SIGSEGV => si_code::SEGV_MAPERR,
                        _ => si_code::ILL_ILLOPC,
                    };
                    let pc = self.reg(self.info().pc)?;
                    self.raise_synchronous(sig, Cause::Fault(code, pc))?;
                }
                (None, Ok(())) => {
                    let cut_pending = self.tracker().cut.is_some();
                    if self.own_icount() < local_stop && !cut_pending {
                        // The engine stopped without a reason: the guest jumped to
                        // address 0, which Unicorn treats as the end of the run.
                        let pc = self.reg(self.info().pc)?;
                        self.pages_mut().record_fault(Some(MemFault::Unmapped { addr: pc }));
                        self.raise_synchronous(signal::SIGSEGV, Cause::Fault(si_code::SEGV_MAPERR, pc))?;
                    }
                }
                (None, Err(uc_error::INSN_INVALID)) => {
                    let pc = self.reg(self.info().pc)?;
                    self.raise_synchronous(signal::SIGILL, Cause::Fault(si_code::ILL_ILLOPC, pc))?;
                }
                (
                    None,
                    Err(
                        uc_error::EXCEPTION
                        | uc_error::READ_UNMAPPED
                        | uc_error::WRITE_UNMAPPED
                        | uc_error::FETCH_UNMAPPED
                        | uc_error::READ_PROT
                        | uc_error::WRITE_PROT
                        | uc_error::FETCH_PROT
                        | uc_error::READ_UNALIGNED
                        | uc_error::WRITE_UNALIGNED
                        | uc_error::FETCH_UNALIGNED,
                    ),
                ) => {
                    let cause = match self.pages().last_fault() {
                        Some(MemFault::Protection { addr, .. }) => Cause::Fault(si_code::SEGV_ACCERR, addr),
                        Some(fault) => Cause::Fault(si_code::SEGV_MAPERR, fault.addr()),
                        None => Cause::Fault(si_code::SEGV_MAPERR, 0),
                    };
                    self.raise_synchronous(signal::SIGSEGV, cause)?;
                }
                (None, Err(err)) => return Err(self.engine_error("run the guest")(err)),
            }
        }
    }

    /// The thread stopped before the probe at `addr`: its next run executes
    /// that instruction without stopping there.
    fn probe_hit(&mut self, addr: u64) -> Stop {
        self.uc.get_data_mut().tracker.skip = Some(addr);
        Stop::Probe(addr)
    }

    /// Runs the machine to its end (every process).
    pub fn run_to_exit(&mut self) -> Result<Exit, Error> {
        loop {
            if let Stop::Exit(exit) = self.run(RunLimit::to_exit())? {
                return Ok(exit);
            }
        }
    }

    /// A fault or trap raised `sig` for the current instruction: its handler
    /// runs if it has one and it is not blocked; otherwise the process dies
    /// (Linux's `force_sig`).
    fn raise_synchronous(&mut self, sig: u32, cause: Cause) -> Result<(), Error> {
        let handler = self.signals.actions[sig as usize].handler;
        let blocked = self.signals.blocked & crate::linux::proc_state::sig_bit(sig) != 0;
        if handler == crate::linux::proc_state::SIG_DFL || handler == crate::linux::proc_state::SIG_IGN || blocked {
            return self.terminate(sig);
        }
        sigframe::deliver(self, sig, cause)
    }

    /// Makes signal `sig` pending in the process on the CPU, as `kill()`
    /// from another process would; it is delivered when one of its threads
    /// next runs (one that does not block it; an ignored one is dropped, as by the kernel).
    pub fn send_signal(&mut self, sig: u32) -> Result<(), Error> {
        if !(1..=64).contains(&sig) {
            return Err(Error::Setup { file: self.image.file.clone(), problem: format!("no signal {sig}") });
        }
        self.post_signal(self.pid, sig, crate::linux::sigframe::si_code::SI_USER);
        Ok(())
    }

    /// Delivers the lowest pending, unblocked signal; `true` if the guest's
    /// state changed (a handler was entered or the process ended).
    fn deliver_pending_signals(&mut self) -> Result<bool, Error> {
        let Some((sig, own)) = self.next_signal() else { return Ok(false) };
        let code = self.take_signal(sig, own);
        match self.signals.actions[sig as usize].handler {
            crate::linux::proc_state::SIG_IGN => Ok(false),
            crate::linux::proc_state::SIG_DFL => match signal::default_action(sig) {
                signal::DefaultAction::Terminate => {
                    self.terminate(sig)?;
                    Ok(true)
                }
                signal::DefaultAction::Ignore | signal::DefaultAction::StopOrContinue => Ok(false),
            },
            _ => {
                sigframe::deliver(self, sig, Cause::Sent(code))?;
                Ok(true)
            }
        }
    }

    /// Turns blocks the decoder could not read into warnings (their
    /// instruction count may be off).
    fn report_undecodable(&mut self) {
        let tracker = &mut self.uc.get_data_mut().tracker;
        if tracker.undecodable.is_empty() {
            return;
        }
        for addr in std::mem::take(&mut tracker.undecodable) {
            self.warn(format!("cannot decode all the code at {addr:#x}; it counts as one instruction"));
        }
    }
}

impl Emulator {
    /// Runs the instructions of the block `cut` is in up to the stop, in the
    /// stepper (`machine/step.rs`), and counts them; the main engine has
    /// stopped before the block. Returns what ended the run, as for a run of
    /// the main engine.
    fn step_to(&mut self, cut: Cut) -> Result<Ended, Error> {
        let mut stepper = match self.uc.get_data_mut().stepper.take() {
            Some(stepper) => stepper,
            None => Box::new(Stepper::new(self.machine, self.tracking(), &self.image.file)?),
        };
        let ended = step::step(&mut self.uc, &mut stepper, cut);
        self.uc.get_data_mut().stepper = Some(stepper);
        let ended = ended.map_err(|e| self.engine_error("run to a stop")(e))?;
        let pc = self.reg(self.info().pc)?;
        self.uc.get_data_mut().tracker.stepped(cut, pc);
        Ok(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::load::Config;
    use crate::machine::arch::Arch;

    /// The entry of function `name` in the ELF file `bytes`.
    fn function(bytes: &[u8], name: &str) -> u64 {
        let elf = goblin::elf::Elf::parse(bytes).expect("parse the guest");
        let sym = elf.syms.iter().find(|sym| sym.is_function() && elf.strtab.get_at(sym.st_name) == Some(name));
        sym.unwrap_or_else(|| panic!("no function {name}")).st_value
    }

    /// A thread switched out while stopped at a probe (which the run loop
    /// never does itself: a probe stops a thread before its quantum ends)
    /// keeps its skip: the thread switched in stops at the probe, and the
    /// first runs the probed instruction without stopping again when it
    /// is back. So each of the 96 items of `threads workers 4` stops its
    /// worker once in `item_bottom`, as without the switches.
    #[test]
    fn a_thread_switched_out_at_a_probe_keeps_its_skip() {
        for arch in Arch::ALL {
            let exe = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../guests/bin")
                .join(arch.name())
                .join("threads-v3");
            let bytes = std::fs::read(&exe).expect("read the guest");
            let file = exe.display().to_string();
            let args = vec![file.clone().into_bytes(), b"workers".to_vec(), b"4".to_vec()];
            let config = Config { args, quantum: 5_000, ..Config::default() };
            let mut plain = Emulator::new(&file, &bytes, config.clone()).expect("load");
            assert_eq!(plain.run_to_exit().expect("run"), Exit::Code(0), "{arch}");

            let mut emu = Emulator::new(&file, &bytes, config).expect("load");
            let probe = function(&bytes, "item_bottom");
            emu.set_probes([probe]);
            let (mut hits, mut switches) = (0, 0);
            loop {
                match emu.run(RunLimit::to_exit().and_probes()).expect("run") {
                    Stop::Probe(addr) => {
                        assert_eq!(addr, probe, "{arch}");
                        hits += 1;
                        let (pid, me) = (emu.pid(), emu.tid());
                        let other = emu.tasks().into_iter().find(|&(p, tid)| p == pid && tid != me);
                        if let Some((_, other)) = other {
                            emu.switch_to(other).expect("switch threads");
                            switches += 1;
                        }
                    }
                    Stop::Exit(exit) => {
                        assert_eq!(exit, Exit::Code(0), "{arch}");
                        break;
                    }
                    _ => {}
                }
            }
            assert_eq!(hits, 96, "{arch}");
            assert!(switches > 10, "{arch}: {switches} switches");
            assert_eq!(emu.stdout(), plain.stdout(), "{arch}");
        }
    }
}
