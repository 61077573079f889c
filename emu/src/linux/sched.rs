//! Processes, threads and the deterministic scheduler.
//!
//! Every process has its own engine (its address space), its own
//! descriptor table, signal dispositions and working directory; each of its
//! threads has its own registers, signal mask and pending set, alternate
//! stack and ground truth (see `proc_table.rs`);
//! the file system, the pipes, the clock, the random stream and the
//! standard streams are the machine's and shared. The emulator's
//! per-process fields always describe the process *on the CPU*, the way a
//! CPU's registers describe the running task: a context switch saves them
//! into that process's [`Parked`] record and loads the next one's (a
//! handful of moves; nothing is copied). So every system call, the signal
//! code and every accessor (`regs`, `ground_truth`, `user_memory`) work on
//! "the current process" without knowing that there are others.
//!
//! Threads switch the same way one level down: a switch between two
//! threads of one process saves the registers into a Unicorn context and
//! restores the other's (one `memcpy` of the CPU state each way, into a
//! context kept for reuse), and swaps the per-thread fields and the
//! tracker's ground-truth stacks and probe skip (moves). A switch to a
//! thread of another process first switches process, then thread if that
//! process's loaded thread is not the one wanted.
//!
//! Scheduling is deterministic: the current thread runs until it blocks
//! (a pipe, `wait4`, a sleep, `poll`, a futex), exits, yields, or has run
//! its quantum of instructions; then the next thread in tid order (all
//! processes' threads together) that can run does. A
//! blocked thread is retried by running its system call again (the calls
//! that block have no side effects until they complete); when no process
//! can run, the virtual clock jumps to the earliest timeout, and if there is
//! none the run ends in a deadlock error naming what each process waits for.
//!
//! The instruction count the emulator reports ([`Emulator::icount`]) is the
//! machine's: every process's instructions, in the order they ran. Each
//! engine keeps its own count; `Sched` converts.

use crate::error::Error;
use crate::linux::abi::outcome::Blocked;
use crate::linux::emulator::Emulator;
use crate::linux::fs::FdTable;
use crate::linux::proc_state::{sig_bit, Signals, SIG_DFL, SIG_IGN};
use crate::linux::proc_table::{
    Exit, Life, Parked, ParkedThread, Pid, Proc, ProcessEvent, SpareContext, Task, Tid, FIRST_PID,
};
use crate::linux::sigframe::{SA_NOCLDWAIT, SA_RESTART};
use crate::linux::signal;

impl Emulator {
    /// The process on the CPU: the one [`Emulator::regs`],
    /// [`Emulator::ground_truth`] and the memory accessors describe.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The thread on the CPU (its process is [`Emulator::pid`]): the one
    /// whose registers, signal mask and ground truth the accessors describe.
    pub fn tid(&self) -> Tid {
        self.task.tid
    }

    /// Every live thread as `(pid, tid)`, in tid order: what the scheduler
    /// takes turns between.
    pub fn tasks(&self) -> Vec<(Pid, Tid)> {
        let mut tasks: Vec<(Pid, Tid)> =
            self.procs.iter().flat_map(|(&pid, p)| p.threads.keys().map(move |&tid| (pid, tid))).collect();
        tasks.sort_unstable_by_key(|&(_, tid)| tid);
        tasks
    }

    /// The process a live thread belongs to.
    pub(crate) fn owner(&self, tid: Tid) -> Option<Pid> {
        self.procs.iter().find(|(_, p)| p.threads.contains_key(&tid)).map(|(&pid, _)| pid)
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
            task: replace(&mut self.task, replacement.task),
        }
    }

    /// Puts thread `to_tid` on the CPU (it must be alive), parking the
    /// current thread (unless it has ended) and, if `to_tid` is another
    /// process's, the current process.
    pub(crate) fn switch_to(&mut self, to_tid: Tid) -> Result<(), Error> {
        let (from, from_tid) = (self.pid, self.task.tid);
        let Some(to) = self.owner(to_tid) else { return Ok(()) };
        if to == from && to_tid == from_tid {
            return Ok(());
        }
        self.sched.base = self.icount();
        if to != from {
            let incoming = *self.procs.get_mut(&to).and_then(|p| p.parked.take()).expect("a parked process");
            let outgoing = self.park(incoming);
            if let Some(p) = self.procs.get_mut(&from) {
                if p.life == Life::Alive {
                    p.parked = Some(Box::new(outgoing));
                }
            }
            self.pid = to;
            self.fs.pid = u64::from(to);
        }
        if self.task.tid != to_tid {
            self.switch_thread(to_tid)?;
        }
        self.sched.start = self.own_icount();
        self.sched.events.push_back(ProcessEvent::Switch { from, to, from_tid, to_tid });
        Ok(())
    }

    /// Puts thread `to` of the current process on the CPU, parking the
    /// current thread (dropping it if it has ended).
    fn switch_thread(&mut self, to: Tid) -> Result<(), Error> {
        use std::mem::replace;
        let incoming = *self.cur_mut().threads.get_mut(&to).and_then(Option::take).expect("a parked thread");
        let err = self.engine_error("switch threads");
        let mut saved = match self.sched.spare.take() {
            Some(spare) => spare.0,
            None => self.uc.context_alloc().map_err(&err)?,
        };
        self.uc.context_save(&mut saved).map_err(&err)?;
        self.uc.context_restore(&incoming.context).map_err(&err)?;
        self.sched.spare = Some(SpareContext(incoming.context));
        // The dispositions are the process's: they stay.
        let actions = self.signals.actions;
        let signals = replace(&mut self.signals, incoming.signals);
        self.signals.actions = actions;
        let tracker = &mut self.uc.get_data_mut().tracker;
        let stack = replace(&mut tracker.stack, incoming.stack);
        let reference = match (&mut tracker.reference, incoming.reference) {
            (Some(mine), Some(theirs)) => Some(replace(&mut mine.stack, theirs)),
            _ => None,
        };
        let cut = replace(&mut tracker.cut, incoming.cut);
        let skip = replace(&mut tracker.skip, incoming.skip);
        let outgoing = ParkedThread {
            context: saved,
            signals,
            altstack: replace(&mut self.altstack, incoming.altstack),
            blocked: replace(&mut self.blocked, incoming.blocked),
            task: replace(&mut self.task, incoming.task),
            stack,
            reference,
            cut,
            skip,
        };
        match self.cur_mut().threads.get_mut(&outgoing.task.tid) {
            Some(slot) => *slot = Some(Box::new(outgoing)),
            // It has ended: its context is the next switch's spare.
            None => self.sched.spare = Some(SpareContext(outgoing.context)),
        }
        Ok(())
    }

    /// A new thread of the current process, parked, that returns 0 from
    /// the current system call on stack `sp` (if not 0) with thread pointer
    /// `tls` (if given), the caller's signal mask, no alternate stack (as
    /// Linux's `copy_process` for `CLONE_VM`) and an empty ground truth: its
    /// stack holds no frame of the caller's.
    pub(crate) fn add_thread(&mut self, sp: u64, tls: Option<u64>, clear_child_tid: u64) -> Result<Tid, Error> {
        let info = self.info();
        let err = self.engine_error("set up a thread");
        let caller = self.uc.context_init().map_err(&err)?;
        if sp != 0 {
            self.uc.reg_write(info.sp, sp).map_err(&err)?;
        }
        self.uc.reg_write(info.syscall.ret, 0).map_err(&err)?;
        if let Some(tls) = tls {
            self.machine.set_tls(&mut self.uc, tls).map_err(&err)?;
        }
        let context = self.uc.context_init().map_err(&err)?;
        self.uc.context_restore(&caller).map_err(&err)?;
        let tid = self.sched.next_pid;
        self.sched.next_pid += 1;
        let signals = crate::linux::proc_state::Signals {
            blocked: self.signals.blocked,
            actions: self.signals.actions,
            ..Default::default()
        };
        let reference = self.tracker().reference.as_ref().map(|_| crate::machine::shadow::ShadowStack::new());
        let thread = ParkedThread {
            context,
            signals,
            altstack: None,
            blocked: None,
            // Named as the thread that created it, as copy_process() does.
            task: Task { clear_child_tid, ..Task::new(tid, self.task.comm) },
            stack: crate::machine::shadow::ShadowStack::new(),
            reference,
            cut: None,
            skip: None,
        };
        self.cur_mut().threads.insert(tid, Some(Box::new(thread)));
        let (pid, by) = (self.pid, self.task.tid);
        self.sched.events.push_back(ProcessEvent::Thread { pid, tid, by });
        Ok(tid)
    }

    /// The current thread has ended alone (`exit` with siblings alive): it
    /// leaves its process's thread list; the next switch drops its state.
    pub(crate) fn end_current_thread(&mut self) {
        let tid = self.task.tid;
        self.cur_mut().threads.remove(&tid);
        self.sched.futexes.retain(|w| w.tid != tid);
    }

    /// Ends every thread of the current process but the current one (an
    /// `exit_group`, a fatal signal, `execve`'s `de_thread`): each is
    /// reported as killed.
    pub(crate) fn kill_other_threads(&mut self) {
        let (pid, me) = (self.pid, self.task.tid);
        let others: Vec<Tid> = self.cur().threads.keys().copied().filter(|&t| t != me).collect();
        let kill = Exit::Signal { signal: signal::SIGKILL, fault: None, pc: 0 };
        for tid in others {
            let regs = self.thread_regs(tid).and_then(Result::ok).map(Box::new);
            self.cur_mut().threads.remove(&tid);
            self.sched.events.push_back(ProcessEvent::ThreadExit { pid, tid, exit: kill, regs });
        }
        self.sched.futexes.retain(|w| w.pid != pid);
    }

    /// Process `pid` as a system call names it, if it is in the table
    /// (a zombie too, until it is reaped).
    pub(crate) fn known_pid(&self, pid: u64) -> Option<Pid> {
        Pid::try_from(pid).ok().filter(|p| self.procs.contains_key(p))
    }

    /// Stops the run if one more process would pass [`crate::Limits::processes`]
    /// (checked before the copy a new process costs).
    pub(crate) fn check_process_limit(&self) -> Result<(), Error> {
        let alive: usize = self.procs.values().map(|p| p.threads.len()).sum();
        if (alive as u32) < self.limits.processes {
            return Ok(());
        }
        Err(Error::Limit {
            file: self.image.file.clone(),
            problem: format!(
                "process {} (thread {}) tried to create a process or thread beyond the limit of {} tasks alive at once (a fork bomb or a thread bomb?)",
                self.pid, self.task.tid, self.limits.processes
            ),
        })
    }

    /// Adds a process to the table, parked with `state` (its one thread
    /// gets the process's ID); returns its pid.
    pub(crate) fn add_process(&mut self, mut state: Parked, exit_signal: u32) -> Pid {
        let pid = self.sched.next_pid;
        self.sched.next_pid += 1;
        state.task.tid = pid;
        let parent = self.cur();
        let proc = Proc::new(pid, self.pid, parent.pgid, parent.sid, Some(Box::new(state)), exit_signal);
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
        // Its other threads die with it (exit_group, a fatal signal).
        // (That also drops the process's futex waiters.)
        self.kill_other_threads();
        let me = self.task.tid;
        self.cur_mut().threads.remove(&me);
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
            self.post_signal(ppid, exit_signal, crate::linux::sigframe::si_code::SI_USER);
        }
    }

    /// The signal state of live process `pid`'s loaded thread, on the CPU
    /// or parked: its `actions` are the process's dispositions.
    fn signals_of(&self, pid: Pid) -> Option<&Signals> {
        let p = self.procs.get(&pid).filter(|p| p.life == Life::Alive)?;
        if pid == self.pid {
            return Some(&self.signals);
        }
        p.parked.as_deref().map(|parked| &parked.signals)
    }

    /// Whether `sig` is dropped at once when sent to process `pid`: ignored
    /// (explicitly, or by default) and not blocked (it may be unignored
    /// before it is unblocked) by `blocked`.
    fn dropped(&self, pid: Pid, sig: u32, blocked: u64) -> bool {
        let Some(signals) = self.signals_of(pid) else { return true };
        let action = signals.actions[sig as usize];
        let ignored = action.handler == SIG_IGN
            || (action.handler == SIG_DFL && signal::default_action(sig) != signal::DefaultAction::Terminate);
        ignored && blocked & sig_bit(sig) == 0
    }

    /// Makes `sig` pending in process `pid` as a whole (`kill`): the first
    /// of its threads that does not block it takes it. Dropped if ignored.
    pub(crate) fn post_signal(&mut self, pid: Pid, sig: u32, code: i32) {
        let blocked = self.signals_of(pid).map_or(0, |s| s.blocked);
        if self.dropped(pid, sig, blocked) {
            return;
        }
        if let Some(p) = self.procs.get_mut(&pid) {
            p.shared.pending |= sig_bit(sig);
            p.shared.code[sig as usize] = code;
        }
    }

    /// The signal state of thread `tid` of process `pid`: the emulator's own
    /// fields for the thread on the CPU, its parked state otherwise.
    fn thread_signals(&mut self, pid: Pid, tid: Tid) -> Option<&mut Signals> {
        if tid == self.task.tid {
            return Some(&mut self.signals);
        }
        let p = self.procs.get_mut(&pid)?;
        match p.threads.get_mut(&tid) {
            Some(Some(thread)) => Some(&mut thread.signals),
            // The thread its parked process has loaded.
            _ => p.parked.as_deref_mut().map(|parked| &mut parked.signals),
        }
    }

    /// Makes `sig` pending in thread `tid` alone (`tgkill`, a fault). Dropped if ignored.
    pub(crate) fn post_thread_signal(&mut self, tid: Tid, sig: u32, code: i32) {
        let Some(pid) = self.owner(tid) else { return };
        let Some(blocked) = self.thread_signals(pid, tid).map(|s| s.blocked) else { return };
        if self.dropped(pid, sig, blocked) {
            return;
        }
        let signals = self.thread_signals(pid, tid).expect("found above");
        signals.pending |= sig_bit(sig);
        signals.sent_code[sig as usize] = code;
    }

    /// The lowest signal the current thread may take now: its own first,
    /// then its process's (as the kernel's `dequeue_signal`), with whether
    /// it is its own.
    pub(crate) fn next_signal(&self) -> Option<(u32, bool)> {
        let own = self.signals.pending & !self.signals.blocked;
        if own != 0 {
            return Some((own.trailing_zeros() + 1, true));
        }
        let shared = self.cur().shared.pending & !self.signals.blocked;
        (shared != 0).then(|| (shared.trailing_zeros() + 1, false))
    }

    /// Takes signal `sig` (see [`Emulator::next_signal`]) off the pending
    /// sets; returns its `si_code`.
    pub(crate) fn take_signal(&mut self, sig: u32, own: bool) -> i32 {
        if own {
            self.signals.pending &= !sig_bit(sig);
            self.signals.sent_code[sig as usize]
        } else {
            let shared = &mut self.cur_mut().shared;
            shared.pending &= !sig_bit(sig);
            shared.code[sig as usize]
        }
    }

    /// Whether thread `tid` waits for a `vfork` child.
    pub(crate) fn in_vfork(&self, tid: Tid) -> bool {
        self.procs.values().any(|p| p.vfork_parent == Some(tid) && p.life == Life::Alive)
    }

    /// The machine's status once it has ended: the first process's.
    pub(crate) fn machine_exit(&self) -> Option<Exit> {
        self.sched.first_exit.filter(|_| self.pids().is_empty())
    }

    /// The threads in the table with what each waits for, for a deadlock
    /// report: `pid in what` for a process with one thread, `pid/tid in
    /// what` for each thread of one with more.
    pub(crate) fn waiting_list(&self) -> String {
        let mut parts = Vec::new();
        for (&pid, p) in &self.procs {
            if p.life != Life::Alive {
                continue;
            }
            for (&tid, thread) in &p.threads {
                let blocked = match thread {
                    Some(thread) => thread.blocked,
                    None if pid == self.pid => self.blocked,
                    None => p.parked.as_ref().and_then(|s| s.blocked),
                };
                let what = match (blocked, self.in_vfork(tid)) {
                    (_, true) => "its vfork child".to_string(),
                    (Some(b), _) => b.name.to_string(),
                    (None, _) => "nothing".to_string(),
                };
                let who = if p.threads.len() == 1 { pid.to_string() } else { format!("{pid}/{tid}") };
                parts.push(format!("{who} in {what}"));
            }
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

    /// Whether another thread than the current one is alive (of any process).
    pub(crate) fn others_alive(&self) -> bool {
        let me = self.task.tid;
        self.procs.values().any(|p| p.threads.keys().any(|&tid| tid != me))
    }

    /// The current process has run its quantum and another one could take over.
    pub(crate) fn quantum_over(&self) -> bool {
        self.tracking() != crate::machine::track::Tracking::Off
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
        if self.tracking() != crate::machine::track::Tracking::Off && self.others_alive() {
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

    /// The earliest timeout of a sleeping thread.
    fn earliest_deadline(&self) -> Option<u64> {
        let parked = self.procs.values().filter_map(|p| p.parked.as_ref()?.blocked?.deadline);
        let threads =
            self.procs.values().flat_map(|p| p.threads.values().flatten()).filter_map(|t| t.blocked?.deadline);
        parked.chain(threads).chain(self.blocked.and_then(|b| b.deadline)).min()
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
        let alive: Vec<Tid> = self.tasks().into_iter().map(|(_, tid)| tid).collect();
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
        // The next thread in tid order after the current one, wrapping
        // round (to the current one itself if it is alone).
        let me = self.task.tid;
        let next = alive.iter().copied().find(|&t| t > me).or(alive.first().copied());
        if let Some(next) = next {
            self.switch_to(next)?;
        }
        Ok(None)
    }

    /// Runs the call the current process sleeps in again: `None` if it
    /// still cannot complete; otherwise its record (a signal may have ended
    /// it: `-EINTR`, or `-ERESTARTSYS` when it restarts after the handler).
    pub(crate) fn retry_blocked(
        &mut self,
        blocked: Blocked,
    ) -> Result<Option<Option<crate::linux::syscall::SyscallRecord>>, Error> {
        let woken = self.futex_woken();
        if let Some(restart) = self.interrupting_signal().filter(|_| !woken) {
            self.blocked = None;
            // It no longer waits on a futex (a wake it missed goes to another).
            let tid = self.task.tid;
            self.sched.futexes.retain(|w| w.tid != tid);
            let info = self.info();
            let ret = if restart {
                // As the kernel's -ERESTARTSYS: the call instruction runs again
                // after the handler (its argument registers were never written).
                let pc = self.reg(info.pc)?;
                self.set_reg(info.pc, pc - info.syscall_len)?;
                -ERESTARTSYS
            } else {
                self.set_reg(info.syscall.ret, (-crate::linux::abi::errno::EINTR) as u64)?;
                -crate::linux::abi::errno::EINTR
            };
            let record = crate::linux::syscall::SyscallRecord::interrupted(
                self.icount(),
                self.arch(),
                blocked.nr,
                blocked.name,
                ret,
            );
            return Ok(Some(Some(record)));
        }
        let record = crate::linux::syscall::dispatch(self, blocked.nr)?;
        Ok(if self.blocked.is_some() { None } else { Some(Some(record)) })
    }

    /// A pending signal that ends a sleep: `Some(true)` if its handler asks
    /// for the call to restart, `Some(false)` if the call fails with `EINTR`
    /// (or the signal kills the process).
    fn interrupting_signal(&self) -> Option<bool> {
        let ready = (self.signals.pending | self.cur().shared.pending) & !self.signals.blocked;
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

impl Emulator {
    /// Whether the current thread sleeps on a futex and a wake has chosen it
    /// (it then returns 0 even if a signal is pending, as in Linux).
    pub(crate) fn futex_woken(&self) -> bool {
        let tid = self.task.tid;
        self.sched.futexes.iter().any(|w| w.tid == tid && w.woken)
    }

    /// Wakes up to `n` threads of the current process sleeping on the futex
    /// at `addr` whose bitset meets `bitset`, oldest first; how many.
    pub(crate) fn futex_wake(&mut self, addr: u64, n: u64, bitset: u32) -> u64 {
        let mut woken = 0;
        for w in self.futex_waiters(addr, n, bitset) {
            w.woken = true;
            woken += 1;
        }
        woken
    }

    /// The first `n` threads of the current process waiting on `addr`, not
    /// yet woken, whose bitset shares a bit with `bitset`, oldest first
    /// (what a wake chooses; `u32::MAX` for every waiter).
    pub(crate) fn futex_waiters(
        &mut self,
        addr: u64,
        n: u64,
        bitset: u32,
    ) -> impl Iterator<Item = &mut crate::linux::proc_table::FutexWaiter> {
        let pid = self.pid;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.sched
            .futexes
            .iter_mut()
            .filter(move |w| w.pid == pid && w.addr == addr && !w.woken && w.bitset & bitset != 0)
            .take(n)
    }
}
