//! Signal numbers (identical on x86-64, AArch64 and s390x), their names,
//! and what Linux does with each by default. The per-process signal state
//! (dispositions, the blocked mask, pending signals) is in `proc_state.rs`.

use crate::machine::arch::Interrupt;

/// Illegal instruction.
pub const SIGILL: u32 = 4;
/// Trace/breakpoint trap.
pub const SIGTRAP: u32 = 5;
/// Abort.
pub const SIGABRT: u32 = 6;
/// Bus error.
pub const SIGBUS: u32 = 7;
/// Arithmetic exception.
pub const SIGFPE: u32 = 8;
/// Kill (cannot be caught).
pub const SIGKILL: u32 = 9;
/// Invalid memory reference.
pub const SIGSEGV: u32 = 11;
/// Write to a pipe nobody reads.
pub const SIGPIPE: u32 = 13;
/// Child stopped or exited.
pub const SIGCHLD: u32 = 17;
/// Continue.
pub const SIGCONT: u32 = 18;
/// Stop (cannot be caught).
pub const SIGSTOP: u32 = 19;
/// Highest signal number.
pub const NSIG: u32 = 64;

/// The name of a signal, for messages.
pub fn name(sig: u32) -> &'static str {
    const NAMES: [&str; 32] = [
        "0",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    NAMES.get(sig as usize).copied().unwrap_or("a real-time signal")
}

/// What Linux does with a signal whose disposition is `SIG_DFL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultAction {
    /// Terminate the process (possibly with a core dump).
    Terminate,
    /// Discard the signal.
    Ignore,
    /// Stop or continue the process; a single-process emulator ignores both.
    StopOrContinue,
}

/// The default action for `sig`.
pub fn default_action(sig: u32) -> DefaultAction {
    match sig {
        SIGCHLD | 23 /* SIGURG */ | 28 /* SIGWINCH */ => DefaultAction::Ignore,
        SIGCONT | SIGSTOP | 20..=22 => DefaultAction::StopOrContinue,
        _ => DefaultAction::Terminate,
    }
}

/// The signal Linux sends for a CPU interrupt other than a system call
/// (the architectures' trap handlers: `do_trap`, `do_mem_abort`, …).
pub fn for_interrupt(interrupt: Interrupt) -> u32 {
    match interrupt {
        Interrupt::Arithmetic => SIGFPE,
        Interrupt::Breakpoint => SIGTRAP,
        Interrupt::Illegal => SIGILL,
        Interrupt::MemoryFault => SIGSEGV,
    }
}
