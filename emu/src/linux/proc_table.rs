//! The process table's types: process and thread IDs, what happens to
//! processes and threads, the limits, and what the kernel keeps per
//! process and per thread while they are off the CPU. What is done with
//! them (switching, scheduling, ending) is `sched.rs`; this file knows
//! nothing of the emulator, so that the emulator's own file can hold them.
//!
//! A process is a thread group: one engine (address space), descriptors,
//! signal dispositions, working directory; each of its threads has its own
//! registers, thread ID, signal mask and pending set, alternate signal
//! stack, sleeping call, `clear_child_tid`, robust list and ground truth.

use crate::linux::abi::outcome::Blocked;
use crate::linux::elf::Image;
use crate::linux::fs::FdTable;
use crate::linux::proc_state::Signals;
use crate::machine::engine::Engine;
use crate::machine::memory::MemFault;
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

/// A process ID (a thread group's ID: its first thread's ID).
pub type Pid = u32;

/// A thread ID. Thread and process IDs come from one counter, as in Linux:
/// a process's first thread has the process's ID.
pub type Tid = u32;

/// The first process's ID (later ones count up from here).
pub const FIRST_PID: Pid = 1000;

/// What happened to the processes of the machine, reported by
/// [`Emulator::run`](crate::Emulator::run) as [`Stop::Process`](crate::Stop::Process) when the
/// [`RunLimit`](crate::RunLimit) asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEvent {
    /// Thread `by` of process `pid` created thread `tid` in the same
    /// process (`clone` or `clone3` with `CLONE_THREAD`); the CPU still runs `by`.
    Thread {
        /// The process.
        pid: Pid,
        /// The new thread.
        tid: Tid,
        /// The thread that called.
        by: Tid,
    },
    /// Thread `tid` of process `pid` has ended while the process goes on:
    /// it called `exit` with siblings alive (it is still on the CPU, as in
    /// `do_exit`), or a sibling's `exit_group`, fatal signal or `execve`
    /// killed it (`exit` is then SIGKILL; it was off the CPU). The last
    /// thread's end is the process's [`ProcessEvent::Exit`].
    ThreadExit {
        /// The process.
        pid: Pid,
        /// The thread.
        tid: Tid,
        /// How it ended.
        exit: Exit,
        /// A killed thread's user registers as it was last switched out
        /// (where it was preempted, or its system call); `None` for a
        /// thread that ended on the CPU, whose registers are the engine's.
        regs: Option<Box<crate::machine::regs::Regs>>,
    },
    /// `parent` created `child` with `fork`, `vfork` or `clone`; the CPU still runs the parent.
    Fork {
        /// The process that called.
        parent: Pid,
        /// The new process.
        child: Pid,
    },
    /// `pid` replaced its program (`execve`); it is on the CPU at the new
    /// entry point. Its other threads have ended first (each a
    /// [`ProcessEvent::ThreadExit`]); the caller is now thread `pid`.
    Exec {
        /// The process.
        pid: Pid,
        /// The thread that called (its ID before it took the process's).
        tid: Tid,
        /// The program, as the guest named it.
        path: Vec<u8>,
    },
    /// Thread `tid` of `pid` sleeps in the kernel in system call `syscall`
    /// (a pipe, `wait4`, a sleep, a futex).
    Block {
        /// The process.
        pid: Pid,
        /// The thread.
        tid: Tid,
        /// The call it sleeps in.
        syscall: &'static str,
    },
    /// The CPU switched from thread `from_tid` of process `from` to thread
    /// `to_tid` of process `to` (the same process when two of its threads take turns).
    Switch {
        /// The process that was on the CPU.
        from: Pid,
        /// The process now on the CPU.
        to: Pid,
        /// The thread that was on the CPU (it may have just ended).
        from_tid: Tid,
        /// The thread now on the CPU.
        to_tid: Tid,
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
    /// Tasks (threads, a process counting as its threads) alive at once;
    /// one more `fork` or `pthread_create` stops the run
    /// ([`Error::Limit`](crate::Error::Limit)).
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
    pub(crate) task: Task,
}

/// A thread's identity and the addresses the kernel keeps for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Task {
    /// Its thread ID.
    pub(crate) tid: Tid,
    /// `set_tid_address`/`CLONE_CHILD_CLEARTID`: written 0 and woken when it exits.
    pub(crate) clear_child_tid: u64,
    /// `set_robust_list`: the head and its length (recorded only: robust
    /// mutexes of a dead owner are not marked).
    pub(crate) robust_list: (u64, u64),
    /// Its name (`comm`, `TASK_COMM_LEN` bytes with the NUL): the loaded
    /// program's file name, what `execve` names, or what `PR_SET_NAME`
    /// set; a new thread or process gets its creator's.
    pub(crate) comm: [u8; COMM],
}

/// Bytes of a thread's name (`TASK_COMM_LEN`), the terminating NUL included.
pub(crate) const COMM: usize = 16;

/// `name` as a thread's name: cut to `COMM - 1` bytes, NUL-padded.
pub(crate) fn comm(name: &[u8]) -> [u8; COMM] {
    let mut comm = [0u8; COMM];
    let len = name.len().min(COMM - 1);
    comm[..len].copy_from_slice(&name[..len]);
    comm
}

impl Task {
    /// A thread named `comm`, with nothing else recorded.
    pub(crate) fn new(tid: Tid, comm: [u8; COMM]) -> Task {
        Task { tid, clear_child_tid: 0, robust_list: (0, 0), comm }
    }
}

/// A thread that is not on the CPU while its process is (or while another
/// thread of its process is the one its process's [`Parked`] state holds):
/// what the emulator's per-thread fields hold for the running thread.
pub(crate) struct ParkedThread {
    /// Every register (the thread pointer included: FS base, `TPIDR_EL0`,
    /// s390x access registers are in Unicorn's CPU context).
    pub(crate) context: unicorn_engine::Context,
    /// Its mask and pending set (its `actions` are stale: the process's
    /// dispositions are those of the thread its process has loaded).
    pub(crate) signals: Signals,
    pub(crate) altstack: Option<(u64, u64)>,
    pub(crate) blocked: Option<Blocked>,
    pub(crate) task: Task,
    /// Its ground truth: the fast and the reference stacks, and a stop
    /// inside a block not yet run.
    pub(crate) stack: crate::machine::shadow::ShadowStack,
    pub(crate) reference: Option<crate::machine::shadow::ShadowStack>,
    pub(crate) cut: Option<crate::machine::track::Cut>,
    /// The probe it stopped at and has not run yet (the tracker's `skip`).
    pub(crate) skip: Option<u64>,
}

/// Signals sent to a process as a whole (`kill`), not yet taken by one of
/// its threads: the first thread that does not block one takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SharedPending {
    pub(crate) pending: u64,
    /// `si_code` of each pending signal.
    pub(crate) code: [i32; crate::linux::signal::NSIG as usize + 1],
}

impl Default for SharedPending {
    fn default() -> Self {
        SharedPending { pending: 0, code: [0; crate::linux::signal::NSIG as usize + 1] }
    }
}

/// A thread sleeping in `FUTEX_WAIT`, in the order they began to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FutexWaiter {
    /// The process whose memory holds the futex word (private and shared
    /// futexes alike: processes share no memory here).
    pub(crate) pid: Pid,
    pub(crate) tid: Tid,
    pub(crate) addr: u64,
    pub(crate) bitset: u32,
    /// A wake chose it; it returns 0 when it runs again.
    pub(crate) woken: bool,
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
    /// Its live threads by ID: parked ones with their state, `None` for the
    /// one its process state holds (on the CPU, or in `parked`). Empty for a zombie.
    pub(crate) threads: BTreeMap<Tid, Option<Box<ParkedThread>>>,
    /// Signals sent to the process as a whole.
    pub(crate) shared: SharedPending,
}

impl Proc {
    /// A new process whose only thread has its ID.
    pub(crate) fn new(pid: Pid, ppid: Pid, pgid: Pid, sid: Pid, parked: Option<Box<Parked>>, exit_signal: u32) -> Proc {
        Proc {
            ppid,
            pgid,
            sid,
            life: Life::Alive,
            parked,
            execed: false,
            exit_signal,
            vfork_parent: None,
            exit_reported: false,
            threads: BTreeMap::from([(pid, None)]),
            shared: SharedPending::default(),
        }
    }
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
    /// Threads sleeping on futexes, in the order they began.
    pub(crate) futexes: Vec<FutexWaiter>,
    /// The current thread called `sched_yield`: it gives up the rest of its quantum.
    pub(crate) yielded: bool,
    /// The current thread has called `exit` with siblings alive: it leaves
    /// the CPU for good once its events are reported.
    pub(crate) thread_exited: bool,
    /// A Unicorn context to save the outgoing thread's registers in, so a
    /// thread switch allocates nothing (`None` until the first switch).
    pub(crate) spare: Option<SpareContext>,
}

/// A Unicorn context kept for reuse (a newtype: `Context` has no `Debug`).
pub(crate) struct SpareContext(pub(crate) unicorn_engine::Context);

impl std::fmt::Debug for SpareContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpareContext")
    }
}

/// The process table at the start: the first process, alone.
pub(crate) fn first_process() -> BTreeMap<Pid, Proc> {
    BTreeMap::from([(FIRST_PID, Proc::new(FIRST_PID, 0, FIRST_PID, FIRST_PID, None, 0))])
}
