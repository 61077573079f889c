//! The record of one serviced system call, and its strace-like trace line.

use super::args::{mode_counts, write_arg, write_ret, Arg, Captured, Ret};
use crate::machine::arch::Arch;

/// One serviced system call; `Display` gives its trace line, strace-like:
/// `openat(AT_FDCWD, "in.txt", O_RDONLY) = -ENOENT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallRecord {
    /// Instruction count at the call.
    pub icount: u64,
    /// The architecture (which numbers the call and some flags).
    pub arch: Arch,
    /// The architecture's number for it.
    pub nr: u64,
    /// Its name (`"?"` when unknown).
    pub name: &'static str,
    /// The arguments as the handler saw them: narrowed to their declared C
    /// types (an `int` sign-extended), 0 past the declared ones; the raw
    /// registers for an unknown call.
    pub args: [u64; 6],
    /// The result: a value, or `-errno`.
    pub ret: i64,
    /// The declared argument types.
    pub(crate) types: &'static [Arg],
    /// The declared result type.
    pub(crate) returns: Ret,
    /// What path arguments pointed to at the call, by argument index (only
    /// when syscalls are recorded).
    pub(crate) strings: Vec<(usize, Captured)>,
}

impl SyscallRecord {
    /// The record of call `nr` (`name`) that a signal ended while it slept,
    /// with result `ret` (`-EINTR`, or the restart code).
    pub(crate) fn interrupted(icount: u64, arch: Arch, nr: u64, name: &'static str, ret: i64) -> SyscallRecord {
        SyscallRecord { icount, arch, nr, name, args: [0; 6], ret, types: &[], returns: Ret::Num, strings: Vec::new() }
    }
}

impl std::fmt::Display for SyscallRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name == "?" {
            write!(f, "syscall_{}(", self.nr)?;
        } else {
            write!(f, "{}(", self.name)?;
        }
        let mode_counts = mode_counts(self.types, &self.args);
        let shown = self.types.iter().enumerate().filter(|&(_, &arg)| arg != Arg::Mode || mode_counts);
        for (n, (i, &arg)) in shown.enumerate() {
            if n > 0 {
                f.write_str(", ")?;
            }
            let string = self.strings.iter().find(|(at, _)| *at == i).map(|(_, s)| s);
            write_arg(f, arg, self.args[i], self.arch, string)?;
        }
        f.write_str(") = ")?;
        write_ret(f, self.returns, self.ret)
    }
}
