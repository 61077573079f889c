//! What a system-call handler returns: a value, an exit, restored
//! registers, or an errno, and the shorthands handlers use.

use super::errno;
use crate::error::Error;
use crate::machine::memory::MemFault;

/// What a handler did.
pub(crate) enum Outcome {
    /// Put this in the result register.
    Return(u64),
    /// The process exits with this status.
    Exit(i32),
    /// The calling thread has ended alone (its siblings go on); nothing is
    /// written to its registers.
    ThreadExit,
    /// Registers were replaced wholesale (`rt_sigreturn`, `execve`); leave them.
    Resume,
}

/// Why a handler failed.
pub(crate) enum SysError {
    /// The guest gets `-errno`.
    Errno(i64),
    /// The emulator itself failed.
    Host(Error),
    /// The call cannot complete yet: the process sleeps until it may, or
    /// until this virtual time (ns since the start), and the call runs
    /// again. An error so that `?` carries it out of helpers; nothing has
    /// been done, so there is nothing to undo.
    Block(Option<u64>),
}

impl From<MemFault> for SysError {
    fn from(_: MemFault) -> Self {
        SysError::Errno(errno::EFAULT)
    }
}

impl From<Error> for SysError {
    fn from(err: Error) -> Self {
        SysError::Host(err)
    }
}

pub(crate) type SysResult = Result<Outcome, SysError>;

/// Shorthand for a failing handler.
pub(crate) fn fail(errno: i64) -> SysResult {
    Err(SysError::Errno(errno))
}

/// Shorthand for a handler that must wait (see [`SysError::Block`]).
pub(crate) fn block(deadline: Option<u64>) -> SysResult {
    Err(SysError::Block(deadline))
}

/// Shorthand for a successful handler.
pub(crate) fn ok(value: u64) -> SysResult {
    Ok(Outcome::Return(value))
}

/// A system call a process sleeps in, retried when it may complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Blocked {
    /// Its number.
    pub(crate) nr: u64,
    /// Its name.
    pub(crate) name: &'static str,
    /// When it gives up (virtual nanoseconds since the start), if it has a timeout.
    pub(crate) deadline: Option<u64>,
}
