//! The Linux system-call layer, shared by all three architectures.
//!
//! `TABLE` has one row per system call, keyed by its name, with that call's
//! number on x86-64, AArch64 (the generic table) and s390x, and one handler.
//! Handlers see arguments as six `u64`s and read or write guest memory in the
//! guest's byte order through the emulator, so none of them is per-architecture.
//! Unknown numbers get `-ENOSYS` and an [`Event::UnknownSyscall`].

mod io;
mod mem;
mod process;
mod signals;
mod time;

use crate::emulator::{Emulator, Event, Exit};
use crate::error::Error;
use crate::memory::MemFault;

pub(crate) use io::Fd;

/// The user ID the guest runs as.
pub(crate) const UID: u64 = 1000;
/// The group ID the guest runs as.
pub(crate) const GID: u64 = 1000;
/// The guest's process (and only thread) ID.
pub(crate) const PID: u64 = 1000;
/// Signals that can be neither caught nor blocked (SIGKILL, SIGSTOP).
pub(crate) const UNBLOCKABLE: u64 = (1 << (crate::signal::SIGKILL - 1)) | (1 << (crate::signal::SIGSTOP - 1));

/// Error numbers (asm-generic; the same on all three architectures).
#[allow(missing_docs)]
pub mod errno {
    pub const EPERM: i64 = 1;
    pub const ENOENT: i64 = 2;
    pub const ESRCH: i64 = 3;
    pub const EBADF: i64 = 9;
    pub const EAGAIN: i64 = 11;
    pub const ENOMEM: i64 = 12;
    pub const EACCES: i64 = 13;
    pub const EFAULT: i64 = 14;
    pub const EEXIST: i64 = 17;
    pub const EINVAL: i64 = 22;
    pub const ENOTTY: i64 = 25;
    pub const ESPIPE: i64 = 29;
    pub const ERANGE: i64 = 34;
    pub const ENAMETOOLONG: i64 = 36;
    pub const ENOSYS: i64 = 38;
}

/// One serviced system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallRecord {
    /// Instruction count at the call.
    pub icount: u64,
    /// The architecture's number for it.
    pub nr: u64,
    /// Its name (`"?"` when unknown).
    pub name: &'static str,
    /// The six argument registers.
    pub args: [u64; 6],
    /// How many of them the call uses.
    pub nargs: usize,
    /// The result: a value, or `-errno`.
    pub ret: i64,
}

impl std::fmt::Display for SyscallRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name == "?" {
            write!(f, "syscall_{}(", self.nr)?;
        } else {
            write!(f, "{}(", self.name)?;
        }
        for (i, arg) in self.args[..self.nargs].iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            if *arg < 0x1_0000 {
                write!(f, "{sep}{arg}")?;
            } else {
                write!(f, "{sep}{arg:#x}")?;
            }
        }
        if (-4095..0).contains(&self.ret) {
            write!(f, ") = -{}", -self.ret)
        } else if self.ret > 0xffff {
            write!(f, ") = {:#x}", self.ret)
        } else {
            write!(f, ") = {}", self.ret)
        }
    }
}

/// What a handler did.
pub(crate) enum Outcome {
    /// Put this in the result register.
    Return(u64),
    /// The process exits with this status.
    Exit(i32),
    /// Registers were replaced wholesale (`rt_sigreturn`); leave them.
    Resume,
}

/// Why a handler failed.
pub(crate) enum SysError {
    /// The guest gets `-errno`.
    Errno(i64),
    /// The emulator itself failed.
    Host(Error),
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
type Handler = fn(&mut Emulator, [u64; 6]) -> SysResult;

/// Shorthand for a failing handler.
pub(crate) fn fail(errno: i64) -> SysResult {
    Err(SysError::Errno(errno))
}

/// Shorthand for a successful handler.
pub(crate) fn ok(value: u64) -> SysResult {
    Ok(Outcome::Return(value))
}

/// A row of the syscall table.
pub(crate) struct Def {
    name: &'static str,
    /// Numbers on x86-64, AArch64, s390x ([`NO`] where the call does not exist).
    nr: [u16; 3],
    nargs: u8,
    handler: Handler,
}

/// "No such call on this architecture."
const NO: u16 = u16::MAX;

const fn def(name: &'static str, nr: [u16; 3], nargs: u8, handler: Handler) -> Def {
    Def { name, nr, nargs, handler }
}

/// Every system call the emulator implements: name, numbers (x86-64,
/// AArch64, s390x), argument count, handler.
#[rustfmt::skip]
static TABLE: &[Def] = &[
    def("read",              [0, 63, 3],       3, io::read),
    def("write",             [1, 64, 4],       3, io::write),
    def("open",              [2, NO, 5],       3, io::open),
    def("close",             [3, 57, 6],       1, io::close),
    def("fstat",             [5, 80, 108],     2, io::fstat),
    def("lseek",             [8, 62, 19],      3, io::lseek),
    def("mmap",              [9, 222, 90],     6, mem::mmap),
    def("mprotect",          [10, 226, 125],   3, mem::mprotect),
    def("munmap",            [11, 215, 91],    2, mem::munmap),
    def("brk",               [12, 214, 45],    1, mem::brk),
    def("rt_sigaction",      [13, 134, 174],   4, signals::rt_sigaction),
    def("rt_sigprocmask",    [14, 135, 175],   4, signals::rt_sigprocmask),
    def("rt_sigreturn",      [15, 139, 173],   0, signals::rt_sigreturn),
    def("ioctl",             [16, 29, 54],     3, io::ioctl),
    def("pread64",           [17, 67, 180],    4, io::pread64),
    def("readv",             [19, 65, 145],    3, io::readv),
    def("writev",            [20, 66, 146],    3, io::writev),
    def("sched_yield",       [24, 124, 158],   0, process::sched_yield),
    def("mremap",            [25, 216, 163],   5, mem::mremap),
    def("madvise",           [28, 233, 219],   3, mem::madvise),
    def("nanosleep",         [35, 101, 162],   2, time::nanosleep),
    def("getpid",            [39, 172, 20],    0, process::getpid),
    def("exit",              [60, 93, 1],      1, process::exit),
    def("kill",              [62, 129, 37],    2, signals::kill),
    def("uname",             [63, 160, 122],   1, process::uname),
    def("fcntl",             [72, 25, 55],     3, io::fcntl),
    def("getcwd",            [79, 17, 183],    2, io::getcwd),
    def("sigreturn",         [NO, NO, 119],    0, signals::sigreturn),
    def("readlink",          [89, NO, 85],     3, io::readlink),
    def("gettimeofday",      [96, 169, 78],    2, time::gettimeofday),
    def("getrlimit",         [97, 163, 191],   2, process::getrlimit),
    def("getuid",            [102, 174, 199],  0, process::getuid),
    def("getgid",            [104, 176, 200],  0, process::getgid),
    def("geteuid",           [107, 175, 201],  0, process::getuid),
    def("getegid",           [108, 177, 202],  0, process::getgid),
    def("getppid",           [110, 173, 64],   0, process::getppid),
    def("sigaltstack",       [131, 132, 186],  2, signals::sigaltstack),
    def("arch_prctl",        [158, NO, NO],    2, process::arch_prctl),
    def("gettid",            [186, 178, 236],  0, process::getpid),
    def("tkill",             [200, 130, 237],  2, signals::tkill),
    def("futex",             [202, 98, 238],   6, process::futex),
    def("sched_getaffinity", [204, 123, 240],  3, process::sched_getaffinity),
    def("set_tid_address",   [218, 96, 252],   1, process::set_tid_address),
    def("clock_gettime",     [228, 113, 260],  2, time::clock_gettime),
    def("clock_getres",      [229, 114, 261],  2, time::clock_getres),
    def("clock_nanosleep",   [230, 115, 262],  4, time::clock_nanosleep),
    def("exit_group",        [231, 94, 248],   1, process::exit),
    def("tgkill",            [234, 131, 241],  3, signals::tgkill),
    def("openat",            [257, 56, 288],   4, io::openat),
    def("newfstatat",        [262, 79, 293],   4, io::newfstatat),
    def("readlinkat",        [267, 78, 298],   4, io::readlinkat),
    def("set_robust_list",   [273, 99, 304],   2, process::set_robust_list),
    def("prlimit64",         [302, 261, 334],  4, process::prlimit64),
    def("getrandom",         [318, 278, 349],  3, process::getrandom),
    def("rseq",              [334, 293, 383],  4, process::rseq),
];

/// Syscall number → table row, for `arch`.
pub(crate) fn number_map(arch: crate::arch::Arch) -> Vec<Option<u16>> {
    let column = arch.index();
    let numbers = || TABLE.iter().map(|def| def.nr[column]).filter(|&nr| nr != NO);
    let len = numbers().max().map_or(0, |max| usize::from(max) + 1);
    let mut map = vec![None; len];
    for (row, def) in TABLE.iter().enumerate() {
        if let Some(slot) = map.get_mut(usize::from(def.nr[column])) {
            *slot = Some(row as u16);
        }
    }
    map
}

/// The name of syscall `nr` on `arch`, if the emulator knows it.
pub fn name(arch: crate::arch::Arch, nr: u64) -> Option<&'static str> {
    TABLE.iter().find(|def| u64::from(def.nr[arch.index()]) == nr && def.nr[arch.index()] != NO).map(|def| def.name)
}

/// Services syscall `nr`, whose trap has just been taken.
pub(crate) fn dispatch(emu: &mut Emulator, nr: u64) -> Result<SyscallRecord, Error> {
    let conv = &emu.info().syscall;
    let mut args = [0u64; 6];
    for (arg, &reg) in args.iter_mut().zip(&conv.args) {
        *arg = emu.reg(reg)?;
    }
    let icount = emu.icount();
    let row = usize::try_from(nr).ok().and_then(|nr| emu.syscalls.get(nr).copied().flatten());
    let (name, nargs, outcome) = match row.map(|row| &TABLE[usize::from(row)]) {
        Some(def) => (def.name, usize::from(def.nargs), (def.handler)(emu, args)),
        None => {
            let pc = emu.reg(emu.info().pc)?;
            emu.events.push(Event::UnknownSyscall { nr, icount, pc });
            ("?", 6, fail(errno::ENOSYS))
        }
    };
    let ret = match outcome {
        Ok(Outcome::Return(value)) => {
            emu.set_reg(conv.ret, value)?;
            value as i64
        }
        Ok(Outcome::Exit(code)) => {
            emu.exit = Some(Exit::Code(code));
            i64::from(code)
        }
        Ok(Outcome::Resume) => emu.reg(conv.ret)? as i64,
        Err(SysError::Errno(e)) => {
            emu.set_reg(conv.ret, (-e) as u64)?;
            -e
        }
        Err(SysError::Host(err)) => return Err(err),
    };
    let record = SyscallRecord { icount, nr, name, args, nargs, ret };
    if emu.record_syscalls {
        emu.events.push(Event::Syscall(record.clone()));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;

    #[test]
    fn numbers_are_unique_per_architecture() {
        for arch in Arch::ALL {
            let mut seen = std::collections::BTreeMap::new();
            for def in TABLE {
                let nr = def.nr[arch.index()];
                if nr != NO {
                    assert!(seen.insert(nr, def.name).is_none(), "{arch}: {nr} used twice ({})", def.name);
                }
            }
            let map = number_map(arch);
            assert_eq!(name(arch, 1), [Some("write"), None, Some("exit")][arch.index()]);
            assert_eq!(map.iter().flatten().count(), seen.len());
        }
        let mut names: Vec<_> = TABLE.iter().map(|def| def.name).collect();
        names.sort_unstable();
        names.dedup();
        // exit/exit_group and getpid/gettid share handlers, not names.
        assert_eq!(names.len(), TABLE.len());
    }
}
