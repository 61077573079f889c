//! The process table's types: process IDs, what happens to processes,
//! the limits, and what the kernel keeps per process while it is off the
//! CPU. What is done with them (switching, scheduling, ending) is
//! `sched.rs`; this file knows nothing of the emulator, so that the
//! emulator's own file can hold them.

use crate::elf::Image;
use crate::engine::Engine;
use crate::fs::FdTable;
use crate::memory::MemFault;
use crate::process::Signals;
use crate::syscall::outcome::Blocked;
use std::collections::{BTreeMap, VecDeque};

/// How a guest process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `exit`/`exit_group` with this status (the low 8 bits, as a parent sees it).
    Code(i32),
    /// Killed by a signal.
    Signal {
        /// The signal number.
        signal: u32,
        /// The refused memory access behind a SIGSEGV, if that was the cause.
        fault: Option<MemFault>,
        /// PC when the signal was raised.
        pc: u64,
    },
}

impl Exit {
    /// The status a shell reports: the exit code, or 128 + the signal number.
    pub fn shell_status(&self) -> i32 {
        match *self {
            Exit::Code(code) => code,
            Exit::Signal { signal, .. } => 128 + signal as i32,
        }
    }
}

/// A process ID.
pub type Pid = u32;

/// The first process's ID (later ones count up from here).
pub const FIRST_PID: Pid = 1000;

/// What happened to the processes of the machine, reported by
/// [`Emulator::run`](crate::Emulator::run) as [`Stop::Process`](crate::Stop::Process) when the
/// [`RunLimit`](crate::RunLimit) asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEvent {
    /// `parent` created `child` with `fork`, `vfork` or `clone`; the CPU still runs the parent.
    Fork {
        /// The process that called.
        parent: Pid,
        /// The new process.
        child: Pid,
    },
    /// `pid` replaced its program (`execve`); it is on the CPU at the new entry point.
    Exec {
        /// The process.
        pid: Pid,
        /// The program, as the guest named it.
        path: Vec<u8>,
    },
    /// `pid` sleeps in the kernel in system call `syscall` (a pipe, `wait4`, a sleep).
    Block {
        /// The process.
        pid: Pid,
        /// The call it sleeps in.
        syscall: &'static str,
    },
    /// The CPU switched from process `from` to process `to`.
    Switch {
        /// The process that was on the CPU.
        from: Pid,
        /// The process now on the CPU.
        to: Pid,
    },
    /// `pid` has ended (it is still on the CPU, its memory still there, as
    /// in the kernel's `do_exit` before `exit_mm`).
    Exit {
        /// The process.
        pid: Pid,
        /// How it ended.
        exit: Exit,
    },
}

/// Bounds on what a guest may take of the host, so that a fork bomb, a
/// runaway allocation or a program that never ends stops with an error
/// instead of exhausting the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Processes alive at once; one more `fork` stops the run ([`Error::Limit`](crate::Error::Limit)).
    pub processes: u32,
    /// Bytes of guest memory mapped, all processes together: a mapping past
    /// it fails with `ENOMEM`, as under a kernel's `RLIMIT_AS`, with a warning.
    pub memory: u64,
    /// Instructions, all processes together (`None`: no limit); reaching it stops the run.
    pub instructions: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { processes: 64, memory: 4 << 30, instructions: None }
    }
}

/// The per-process state of a process that is not on the CPU: what the
/// emulator's per-process fields hold for the one that is.
pub(crate) struct Parked {
    pub(crate) uc: Engine,
    pub(crate) image: Image,
    pub(crate) exit: Option<Exit>,
    pub(crate) brk_start: u64,
    pub(crate) brk: u64,
    pub(crate) signals: Signals,
    pub(crate) fds: FdTable,
    pub(crate) altstack: Option<(u64, u64)>,
    pub(crate) trampoline: u64,
    pub(crate) blocked: Option<Blocked>,
    pub(crate) cwd: Vec<u8>,
    pub(crate) umask: u32,
    pub(crate) exe: Vec<u8>,
}

/// Where a process is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Life {
    /// Running or ready to run (perhaps retrying a blocked call).
    Alive,
    /// Ended, waiting for its parent to reap it.
    Zombie(Exit),
}

/// A process as the process table knows it, on the CPU or not.
pub(crate) struct Proc {
    /// Its parent (0 once orphaned: reaped by nobody, as by init).
    pub(crate) ppid: Pid,
    /// Its process group.
    pub(crate) pgid: Pid,
    /// Its session.
    pub(crate) sid: Pid,
    /// Alive or a zombie.
    pub(crate) life: Life,
    /// Its state while it is not on the CPU (`None` for the current one and for zombies).
    pub(crate) parked: Option<Box<Parked>>,
    /// It ran `execve` (a parent's `setpgid` on it then fails with `EACCES`).
    pub(crate) execed: bool,
    /// The signal its parent gets when it ends (`SIGCHLD` for `fork`; 0: none).
    pub(crate) exit_signal: u32,
    /// A `vfork` parent waits until this child execs or ends.
    pub(crate) vfork_parent: Option<Pid>,
    /// Its exit has been reported as a [`ProcessEvent::Exit`].
    pub(crate) exit_reported: bool,
}

/// The scheduler's bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct Sched {
    /// Machine instructions when the current process went on the CPU.
    pub(crate) base: u64,
    /// The current engine's own count then.
    pub(crate) start: u64,
    /// Instructions a process runs before the next one gets the CPU.
    pub(crate) quantum: u64,
    /// The next pid to hand out.
    pub(crate) next_pid: Pid,
    /// Events not yet reported.
    pub(crate) events: VecDeque<ProcessEvent>,
    /// Whether the first process has ended, and how: the machine's status.
    pub(crate) first_exit: Option<Exit>,
    /// Processes that tried to go on and could not, since one last did.
    pub(crate) idle: usize,
    /// Pipes created so far (their inode numbers count from this).
    pub(crate) pipes: u64,
}

/// The process table at the start: the first process, alone.
pub(crate) fn first_process() -> BTreeMap<Pid, Proc> {
    let first = Proc {
        ppid: 0,
        pgid: FIRST_PID,
        sid: FIRST_PID,
        life: Life::Alive,
        parked: None,
        execed: false,
        exit_signal: 0,
        vfork_parent: None,
        exit_reported: false,
    };
    BTreeMap::from([(FIRST_PID, first)])
}
