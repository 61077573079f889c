//! Processes and the deterministic scheduler.
//!
//! Every process has its own engine (its address space and registers), its
//! own descriptor table, signal state, working directory and ground truth;
//! the file system, the pipes, the clock, the random stream and the
//! standard streams are the machine's and shared. The emulator's
//! per-process fields always describe the process *on the CPU*, the way a
//! CPU's registers describe the running task: a context switch saves them
//! into that process's [`Parked`] record and loads the next one's (a
//! handful of moves; nothing is copied). So every system call, the signal
//! code and every accessor (`regs`, `ground_truth`, `user_memory`) work on
//! "the current process" without knowing that there are others.
//!
//! Scheduling is deterministic: the current process runs until it blocks
//! (a pipe, `wait4`, a sleep, `poll`), exits, or has run its quantum of
//! instructions; then the next process in pid order that can run does. A
//! blocked process is retried by running its system call again (the calls
//! that block have no side effects until they complete); when no process
//! can run, the virtual clock jumps to the earliest timeout, and if there is
//! none the run ends in a deadlock error naming what each process waits for.
//!
//! The instruction count the emulator reports ([`Emulator::icount`]) is the
//! machine's: every process's instructions, in the order they ran. Each
//! engine keeps its own count; `Sched` converts.

use crate::emulator::Emulator;
use crate::error::Error;
use crate::fs::FdTable;
use crate::process::{sig_bit, Signals, SIG_DFL, SIG_IGN};
use crate::procs::{Exit, Life, Parked, Pid, Proc, ProcessEvent, FIRST_PID};
use crate::sigframe::{SA_NOCLDWAIT, SA_RESTART};
use crate::signal;
use crate::syscall::outcome::Blocked;

impl Emulator {
    /// The process on the CPU: the one [`Emulator::regs`],
    /// [`Emulator::ground_truth`] and the memory accessors describe.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Process events not yet reported by [`Emulator::run`]: what the last
    /// system call did to processes (a fork, an exec) is reported after
    /// its [`Stop::Syscall`](crate::Stop::Syscall), and a host that models
    /// the kernel needs it before the call returns.
    pub fn queued_process_events(&self) -> impl Iterator<Item = &ProcessEvent> {
        self.sched.events.iter()
    }

    /// The live processes (not zombies), in pid order.
    pub fn pids(&self) -> Vec<Pid> {
        self.procs.iter().filter(|(_, p)| p.life == Life::Alive).map(|(&pid, _)| pid).collect()
    }

    /// The parent of `pid`, if it is known and still has one.
    pub fn parent(&self, pid: Pid) -> Option<Pid> {
        self.procs.get(&pid).map(|p| p.ppid).filter(|&p| p != 0)
    }

    /// The current process's own instruction count (its engine's).
    pub(crate) fn own_icount(&self) -> u64 {
        self.tracker().icount
    }

    pub(crate) fn cur(&self) -> &Proc {
        &self.procs[&self.pid]
    }

    pub(crate) fn cur_mut(&mut self) -> &mut Proc {
        self.procs.get_mut(&self.pid).expect("the current process is in the table")
    }

    /// Moves the current process's state out of the emulator.
    fn park(&mut self, replacement: Parked) -> Parked {
        use std::mem::replace;
        Parked {
            uc: replace(&mut self.uc, replacement.uc),
            image: replace(&mut self.image, replacement.image),
            exit: replace(&mut self.exit, replacement.exit),
            brk_start: replace(&mut self.brk_start, replacement.brk_start),
            brk: replace(&mut self.brk, replacement.brk),
            signals: replace(&mut self.signals, replacement.signals),
            fds: replace(&mut self.fds, replacement.fds),
            altstack: replace(&mut self.altstack, replacement.altstack),
            trampoline: replace(&mut self.trampoline, replacement.trampoline),
            blocked: replace(&mut self.blocked, replacement.blocked),
            cwd: replace(&mut self.fs.cwd, replacement.cwd),
            umask: replace(&mut self.fs.umask, replacement.umask),
            exe: replace(&mut self.fs.exe, replacement.exe),
        }
    }

    /// Puts process `to` on the CPU (it must be parked), parking the current one.
    pub(crate) fn switch_to(&mut self, to: Pid) {
        let from = self.pid;
        if from == to {
            return;
        }
        self.sched.base = self.icount();
        let incoming = *self.procs.get_mut(&to).and_then(|p| p.parked.take()).expect("a parked process");
        let outgoing = self.park(incoming);
        if let Some(p) = self.procs.get_mut(&from) {
            if p.life == Life::Alive {
                p.parked = Some(Box::new(outgoing));
            }
        }
        self.pid = to;
        self.fs.pid = u64::from(to);
        self.sched.start = self.own_icount();
        self.sched.events.push_back(ProcessEvent::Switch { from, to });
    }

    /// Process `pid` as a system call names it, if it is in the table
    /// (a zombie too, until it is reaped).
    pub(crate) fn known_pid(&self, pid: u64) -> Option<Pid> {
        Pid::try_from(pid).ok().filter(|p| self.procs.contains_key(p))
    }

    /// Stops the run if one more process would pass [`crate::Limits::processes`]
    /// (checked before the copy a new process costs).
    pub(crate) fn check_process_limit(&self) -> Result<(), Error> {
        if (self.pids().len() as u32) < self.limits.processes {
            return Ok(());
        }
        Err(Error::Limit {
            file: self.image.file.clone(),
            problem: format!(
                "process {} tried to create a process beyond the limit of {} alive at once (a fork bomb?)",
                self.pid, self.limits.processes
            ),
        })
    }

    /// Adds a process to the table, parked with `state`; returns its pid.
    pub(crate) fn add_process(&mut self, state: Parked, exit_signal: u32) -> Pid {
        let pid = self.sched.next_pid;
        self.sched.next_pid += 1;
        let parent = self.cur();
        let proc = Proc {
            ppid: self.pid,
            pgid: parent.pgid,
            sid: parent.sid,
            life: Life::Alive,
            parked: Some(Box::new(state)),
            execed: false,
            exit_signal,
            vfork_parent: None,
            exit_reported: false,
        };
        self.procs.insert(pid, proc);
        self.sched.events.push_back(ProcessEvent::Fork { parent: self.pid, child: pid });
        pid
    }

    /// The current process has ended: it becomes a zombie (or disappears if
    /// nobody will reap it), its descriptors close, its memory goes, its
    /// children are orphaned and its parent is told.
    pub(crate) fn end_current(&mut self, exit: Exit) {
        let pid = self.pid;
        if pid == FIRST_PID {
            self.sched.first_exit = Some(exit);
        }
        // Closing the descriptors now wakes readers of its pipes.
        self.fds = FdTable::default();
        for p in self.procs.values_mut() {
            if p.ppid == pid {
                p.ppid = 0;
            }
        }
        // Orphaned zombies are reaped at once, as init would.
        self.procs.retain(|_, p| !(p.ppid == 0 && matches!(p.life, Life::Zombie(_))));
        let me = self.cur_mut();
        let (ppid, exit_signal) = (me.ppid, me.exit_signal);
        me.life = Life::Zombie(exit);
        // A vfork parent runs again.
        me.vfork_parent = None;
        // A parent that ignores SIGCHLD (or set SA_NOCLDWAIT) never reaps:
        // the child is gone at once, as if reaped (ppid 0: see above).
        let reaps = self.signals_of(ppid).is_some_and(|s| {
            let action = s.actions[signal::SIGCHLD as usize];
            action.handler != SIG_IGN && action.flags & SA_NOCLDWAIT == 0
        });
        if !reaps {
            self.cur_mut().ppid = 0;
        } else if exit_signal != 0 {
            self.post_signal(ppid, exit_signal, crate::sigframe::si_code::SI_USER);
        }
    }

    /// The signal state of live process `pid`, on the CPU or parked.
    fn signals_of(&self, pid: Pid) -> Option<&Signals> {
        let p = self.procs.get(&pid).filter(|p| p.life == Life::Alive)?;
        if pid == self.pid {
            return Some(&self.signals);
        }
        p.parked.as_deref().map(|parked| &parked.signals)
    }

    /// Makes `sig` pending in process `pid` (current or parked), unless ignored.
    pub(crate) fn post_signal(&mut self, pid: Pid, sig: u32, code: i32) {
        if self.signals_of(pid).is_none() {
            return;
        }
        let signals = if pid == self.pid {
            &mut self.signals
        } else {
            match self.procs.get_mut(&pid).and_then(|p| p.parked.as_deref_mut()) {
                Some(parked) => &mut parked.signals,
                None => return,
            }
        };
        let action = signals.actions[sig as usize];
        let ignored = action.handler == SIG_IGN
            || (action.handler == SIG_DFL && signal::default_action(sig) != signal::DefaultAction::Terminate);
        // An ignored signal is dropped at once, unless blocked (it may be
        // unignored before it is unblocked).
        if ignored && signals.blocked & sig_bit(sig) == 0 {
            return;
        }
        signals.pending |= sig_bit(sig);
        signals.sent_code[sig as usize] = code;
    }

    /// Picks the process to run after the current one, in pid order
    /// starting after it; the current one last. `None` if no process is alive.
    pub(crate) fn next_candidates(&self) -> Vec<Pid> {
        let alive: Vec<Pid> = self.pids();
        let after = alive.iter().copied().filter(|&p| p > self.pid);
        let before = alive.iter().copied().filter(|&p| p <= self.pid);
        after.chain(before).collect()
    }

    /// Whether process `pid` waits for a `vfork` child.
    pub(crate) fn in_vfork(&self, pid: Pid) -> bool {
        self.procs.values().any(|p| p.vfork_parent == Some(pid) && p.life == Life::Alive)
    }

    /// The machine's status once it has ended: the first process's.
    pub(crate) fn machine_exit(&self) -> Option<Exit> {
        self.sched.first_exit.filter(|_| self.pids().is_empty())
    }

    /// The processes in the table with what each waits for, for a deadlock report.
    pub(crate) fn waiting_list(&self) -> String {
        let mut parts = Vec::new();
        for (&pid, p) in &self.procs {
            if p.life != Life::Alive {
                continue;
            }
            let blocked = if pid == self.pid { self.blocked } else { p.parked.as_ref().and_then(|s| s.blocked) };
            let what = match (blocked, self.in_vfork(pid)) {
                (_, true) => "its vfork child".to_string(),
                (Some(b), _) => b.name.to_string(),
                (None, _) => "nothing".to_string(),
            };
            parts.push(format!("{pid} in {what}"));
        }
        parts.join(", ")
    }

    /// Processes of group `pgid` (alive).
    pub(crate) fn group(&self, pgid: Pid) -> Vec<Pid> {
        self.procs.iter().filter(|(_, p)| p.life == Life::Alive && p.pgid == pgid).map(|(&pid, _)| pid).collect()
    }
}

/// Why the scheduler is asked for the next process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// The current process has ended.
    Ended,
    /// The current process cannot go on (it sleeps, or waits for a vfork child).
    Waiting,
    /// The current process has used its quantum.
    Preempted,
}

/// The kernel's "restart after the handler" code (never seen by the guest).
const ERESTARTSYS: i64 = 512;

impl Emulator {
    /// Virtual nanoseconds since the start.
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.elapsed_ns(self.icount())
    }

    /// The deadline of a call that sleeps for `ns`: from now, or the one it
    /// had when it first slept, if it is running again.
    pub(crate) fn deadline(&self, ns: u64) -> u64 {
        match self.retry.and_then(|r| r.deadline) {
            Some(deadline) => deadline,
            None => self.now_ns().saturating_add(ns),
        }
    }

    /// Whether another process than the current one is alive.
    pub(crate) fn others_alive(&self) -> bool {
        self.procs.iter().any(|(&pid, p)| pid != self.pid && p.life == Life::Alive)
    }

    /// The current process has run its quantum and another one could take over.
    pub(crate) fn quantum_over(&self) -> bool {
        self.tracking() != crate::track::Tracking::Off
            && self.own_icount() - self.sched.start >= self.sched.quantum
            && self.others_alive()
    }

    /// The current engine's stop for a machine stop at `stop_at`: no later
    /// than the end of the quantum (if another process could run) or the
    /// instruction limit.
    pub(crate) fn local_stop(&self, stop_at: u64) -> u64 {
        let own = self.own_icount();
        let mut global = stop_at;
        if let Some(max) = self.limits.instructions {
            global = global.min(max);
        }
        let mut local = own.saturating_add(global.saturating_sub(self.icount()));
        if self.tracking() != crate::track::Tracking::Off && self.others_alive() {
            local = local.min(self.sched.start.saturating_add(self.sched.quantum));
        }
        local
    }

    /// Stops the run when the machine has executed its instruction limit.
    pub(crate) fn check_instruction_limit(&self) -> Result<(), Error> {
        match self.limits.instructions {
            Some(max) if self.icount() >= max => Err(Error::Limit {
                file: self.image.file.clone(),
                problem: format!(
                    "the guest ran {max} instructions, its limit, without ending (process {} was running)",
                    self.pid
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The earliest timeout of a sleeping process.
    fn earliest_deadline(&self) -> Option<u64> {
        let parked = self.procs.values().filter_map(|p| p.parked.as_ref()?.blocked?.deadline);
        parked.chain(self.blocked.and_then(|b| b.deadline)).min()
    }

    /// Gives the CPU to the next process that may run, in pid order after
    /// the current one. Returns the machine's status when every process has
    /// ended (or the first has and the rest can never run again).
    pub(crate) fn schedule(&mut self, progress: Progress) -> Result<Option<Exit>, Error> {
        match progress {
            Progress::Waiting => self.sched.idle += 1,
            // An end is progress: its parent may be able to reap it now.
            Progress::Ended => self.sched.idle = 0,
            Progress::Preempted => {}
        }
        let alive = self.pids();
        if alive.is_empty() {
            return Ok(Some(self.sched.first_exit.unwrap_or(Exit::Code(0))));
        }
        if self.sched.idle >= alive.len() {
            // Every process has tried and none can go on: time passes.
            match self.earliest_deadline() {
                Some(deadline) => {
                    let now = self.now_ns();
                    self.clock.slept_ns = self.clock.slept_ns.saturating_add(deadline.saturating_sub(now));
                    self.sched.idle = 0;
                }
                // Only orphans are left, and they wait forever: like qemu-user,
                // the machine ends with its first process.
                None if self.sched.first_exit.is_some() => return Ok(self.sched.first_exit),
                None => return Err(Error::Deadlock { file: self.image.file.clone(), waiting: self.waiting_list() }),
            }
        }
        let next = self.next_candidates().into_iter().find(|&p| p != self.pid).or(alive.first().copied());
        if let Some(next) = next {
            self.switch_to(next);
        }
        Ok(None)
    }

    /// Runs the call the current process sleeps in again: `None` if it
    /// still cannot complete; otherwise its record (a signal may have ended
    /// it: `-EINTR`, or `-ERESTARTSYS` when it restarts after the handler).
    pub(crate) fn retry_blocked(
        &mut self,
        blocked: Blocked,
    ) -> Result<Option<Option<crate::syscall::SyscallRecord>>, Error> {
        if let Some(restart) = self.interrupting_signal() {
            self.blocked = None;
            let info = self.info();
            let ret = if restart {
                // As the kernel's -ERESTARTSYS: the call instruction runs again
                // after the handler (its argument registers were never written).
                let pc = self.reg(info.pc)?;
                self.set_reg(info.pc, pc - info.syscall_len)?;
                -ERESTARTSYS
            } else {
                self.set_reg(info.syscall.ret, (-crate::syscall::errno::EINTR) as u64)?;
                -crate::syscall::errno::EINTR
            };
            let record =
                crate::syscall::SyscallRecord::interrupted(self.icount(), self.arch(), blocked.nr, blocked.name, ret);
            return Ok(Some(Some(record)));
        }
        let record = crate::syscall::dispatch(self, blocked.nr)?;
        Ok(if self.blocked.is_some() { None } else { Some(Some(record)) })
    }

    /// A pending signal that ends a sleep: `Some(true)` if its handler asks
    /// for the call to restart, `Some(false)` if the call fails with `EINTR`
    /// (or the signal kills the process).
    fn interrupting_signal(&self) -> Option<bool> {
        let ready = self.signals.pending & !self.signals.blocked;
        (1..=signal::NSIG).filter(|&sig| ready & sig_bit(sig) != 0).find_map(|sig| {
            let action = self.signals.actions[sig as usize];
            match action.handler {
                SIG_IGN => None,
                SIG_DFL => (signal::default_action(sig) == signal::DefaultAction::Terminate).then_some(false),
                _ => Some(action.flags & SA_RESTART != 0),
            }
        })
    }
}
