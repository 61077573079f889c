//! The Linux system-call layer, shared by all three architectures.
//!
//! `TABLE` has one row per system call, keyed by its name, with that call's
//! number on x86-64, AArch64 (the generic table) and s390x, its handler, and
//! its result and argument types from the kernel's `SYSCALL_DEFINE`
//! prototype (see `args`). `dispatch` narrows the argument registers to
//! those types as the kernel does (an `int` is the low 32 bits,
//! sign-extended) before calling the handler, so handlers see six `u64`s that
//! are already what the kernel would see. Handlers read or write guest
//! memory in the guest's byte order through the emulator, so none of them
//! is per-architecture. Unknown numbers get `-ENOSYS` and an
//! [`Event::UnknownSyscall`].

pub(crate) mod fs;
mod io;
mod life;
mod mem;
mod names;
mod poll;
mod signals;
mod task;
mod time;

use crate::error::Error;
use crate::linux::abi::args::Ret::{Addr, NoReturn, Num, Restored};
use crate::linux::abi::args::*;
use crate::linux::abi::outcome::{self, fail, Outcome, SysError, SysResult};
use crate::linux::emulator::{Emulator, Event, Exit};
use crate::machine::arch::Arch;
use crate::machine::memory::{AccessKind, MemFault};
use kmodel::memory::Access;

pub use crate::linux::abi::errno;
pub use crate::linux::abi::record::SyscallRecord;

type Handler = fn(&mut Emulator, [u64; 6]) -> SysResult;

/// A row of the syscall table.
pub(crate) struct Def {
    name: &'static str,
    /// Numbers on x86-64, AArch64, s390x ([`NO`] where the call does not exist).
    nr: [u16; 3],
    handler: Handler,
    /// The result type.
    ret: Ret,
    /// The argument types, as in the kernel's `SYSCALL_DEFINE`.
    args: &'static [Arg],
}

use names::NO;

const fn def(name: &'static str, nr: [u16; 3], handler: Handler, ret: Ret, args: &'static [Arg]) -> Def {
    Def { name, nr, handler, ret, args }
}

/// Every system call the emulator implements: name, numbers (x86-64,
/// AArch64, s390x), handler, and the types of the result and of the
/// arguments from the kernel's prototype (`SYSCALL_DEFINE3(read, unsigned
/// int, fd, char __user *, buf, size_t, count)` is `&[FD, PTR, SIZE]`; see
/// [`args`] for the types).
#[rustfmt::skip]
static TABLE: &[Def] = &[
    def("read",              [0, 63, 3],      io::read,                   Num,      &[FD, PTR, SIZE]),
    def("write",             [1, 64, 4],      io::write,                  Num,      &[FD, PTR, SIZE]),
    def("open",              [2, NO, 5],      fs::open,                   Num,      &[PATH, OPEN_FLAGS, MODE]),
    def("close",             [3, 57, 6],      io::close,                  Num,      &[FD]),
    def("stat",              [4, NO, 106],    fs::stat,                   Num,      &[PATH, PTR]),
    def("fstat",             [5, 80, 108],    fs::fstat,                  Num,      &[FD, PTR]),
    def("lstat",             [6, NO, 107],    fs::lstat,                  Num,      &[PATH, PTR]),
    def("poll",              [7, NO, 168],    poll::poll,                 Num,      &[PTR, UINT, INT]),
    def("lseek",             [8, 62, 19],     io::lseek,                  Num,      &[FD, OFF, WHENCE]),
    // s390x passes a pointer to the six (see `dispatch`).
    def("mmap",              [9, 222, 90],    mem::mmap,                  Addr,     &[PTR, SIZE, PROT, MAP_FLAGS, FD, OFF]),
    def("mprotect",          [10, 226, 125],  mem::mprotect,              Num,      &[PTR, SIZE, PROT]),
    def("munmap",            [11, 215, 91],   mem::munmap,                Num,      &[PTR, SIZE]),
    def("brk",               [12, 214, 45],   mem::brk,                   Addr,     &[PTR]),
    def("rt_sigaction",      [13, 134, 174],  signals::rt_sigaction,      Num,      &[SIG, PTR, PTR, SIZE]),
    def("rt_sigprocmask",    [14, 135, 175],  signals::rt_sigprocmask,    Num,      &[SIG_HOW, PTR, PTR, SIZE]),
    def("rt_sigreturn",      [15, 139, 173],  signals::rt_sigreturn,      Restored, &[]),
    def("ioctl",             [16, 29, 54],    io::ioctl,                  Num,      &[FD, IOCTL_CMD, PTR]),
    def("pread64",           [17, 67, 180],   io::pread64,                Num,      &[FD, PTR, SIZE, OFF]),
    def("pwrite64",          [18, 68, 181],   io::pwrite64,               Num,      &[FD, PTR, SIZE, OFF]),
    def("readv",             [19, 65, 145],   io::readv,                  Num,      &[FD, PTR, ULONG]),
    def("writev",            [20, 66, 146],   io::writev,                 Num,      &[FD, PTR, ULONG]),
    def("pipe",              [22, NO, 42],    io::pipe,                   Num,      &[PTR]),
    def("select",            [23, NO, 142],   poll::select,               Num,      &[INT, PTR, PTR, PTR, PTR]),
    def("access",            [21, NO, 33],    fs::access,                 Num,      &[PATH, INT]),
    def("sched_yield",       [24, 124, 158],  task::sched_yield,          Num,      &[]),
    def("mremap",            [25, 216, 163],  mem::mremap,                Addr,     &[PTR, ULONG, ULONG, MREMAP_FLAGS, PTR]),
    def("madvise",           [28, 233, 219],  mem::madvise,               Num,      &[PTR, SIZE, ADVICE]),
    def("dup",               [32, 23, 41],    io::dup,                    Num,      &[FD]),
    def("dup2",              [33, NO, 63],    io::dup2,                   Num,      &[FD, FD]),
    def("pause",             [34, NO, 29],    signals::pause,             Num,      &[]),
    def("nanosleep",         [35, 101, 162],  time::nanosleep,            Num,      &[PTR, PTR]),
    def("getpid",            [39, 172, 20],   task::getpid,               Num,      &[]),
    def("clone",             [56, 220, 120],  life::clone,                Num,      &[ULONG, ULONG, PTR, PTR, ULONG]),
    def("fork",              [57, NO, 2],     life::fork,                 Num,      &[]),
    def("vfork",             [58, NO, 190],   life::vfork,                Num,      &[]),
    def("execve",            [59, 221, 11],   life::execve,               Num,      &[PATH, PTR, PTR]),
    def("exit",              [60, 93, 1],     task::exit_thread,          NoReturn, &[INT]),
    def("wait4",             [61, 260, 114],  life::wait4,                Num,      &[PID_T, PTR, WAIT_OPTIONS, PTR]),
    def("kill",              [62, 129, 37],   signals::kill,              Num,      &[PID_T, SIG]),
    def("uname",             [63, 160, 122],  task::uname,                Num,      &[PTR]),
    def("fcntl",             [72, 25, 55],    io::fcntl,                  Num,      &[FD, FCNTL_CMD, ULONG]),
    def("truncate",          [76, 45, 92],    fs::truncate,               Num,      &[PATH, LONG]),
    def("ftruncate",         [77, 46, 93],    fs::ftruncate,              Num,      &[FD, OFF]),
    def("getcwd",            [79, 17, 183],   fs::getcwd,                 Num,      &[PTR, ULONG]),
    def("chdir",             [80, 49, 12],    fs::chdir,                  Num,      &[PATH]),
    def("fchdir",            [81, 50, 133],   fs::fchdir,                 Num,      &[FD]),
    def("rename",            [82, NO, 38],    fs::rename,                 Num,      &[PATH, PATH]),
    def("mkdir",             [83, NO, 39],    fs::mkdir,                  Num,      &[PATH, MODE]),
    def("rmdir",             [84, NO, 40],    fs::rmdir,                  Num,      &[PATH]),
    def("creat",             [85, NO, 8],     fs::creat,                  Num,      &[PATH, MODE]),
    def("unlink",            [87, NO, 10],    fs::unlink,                 Num,      &[PATH]),
    def("symlink",           [88, NO, 83],    fs::symlink,                Num,      &[PATH, PATH]),
    def("readlink",          [89, NO, 85],    fs::readlink,               Num,      &[PATH, PTR, INT]),
    def("umask",             [95, 166, 60],   fs::umask,                  Num,      &[INT]),
    def("gettimeofday",      [96, 169, 78],   time::gettimeofday,         Num,      &[PTR, PTR]),
    def("time",              [201, NO, NO],   time::time,                 Num,      &[PTR]),
    def("getrlimit",         [97, 163, 191],  task::getrlimit,            Num,      &[RESOURCE, PTR]),
    def("sysinfo",           [99, 179, 116],  task::sysinfo,              Num,      &[PTR]),
    def("getuid",            [102, 174, 199], task::getuid,               Num,      &[]),
    def("getgid",            [104, 176, 200], task::getgid,               Num,      &[]),
    def("geteuid",           [107, 175, 201], task::getuid,               Num,      &[]),
    def("getegid",           [108, 177, 202], task::getgid,               Num,      &[]),
    def("setpgid",           [109, 154, 57],  task::setpgid,              Num,      &[PID_T, PID_T]),
    def("getppid",           [110, 173, 64],  task::getppid,              Num,      &[]),
    def("getpgrp",           [111, NO, 65],   task::getpgrp,              Num,      &[]),
    def("setsid",            [112, 157, 66],  task::setsid,               Num,      &[]),
    def("getpgid",           [121, 155, 132], task::getpgid,              Num,      &[PID_T]),
    def("getsid",            [124, 156, 147], task::getsid,              Num,      &[PID_T]),
    def("rt_sigsuspend",     [130, 133, 179], signals::rt_sigsuspend,     Num,      &[PTR, SIZE]),
    def("sigaltstack",       [131, 132, 186], signals::sigaltstack,       Num,      &[PTR, PTR]),
    def("arch_prctl",        [158, NO, NO],   task::arch_prctl,           Num,      &[ARCH_PRCTL_CODE, PTR]),
    def("prctl",             [157, 167, 172], task::prctl,                Num,      &[PRCTL_OPTION, ULONG, ULONG, ULONG, ULONG]),
    def("gettid",            [186, 178, 236], task::gettid,               Num,      &[]),
    def("tkill",             [200, 130, 237], signals::tkill,             Num,      &[PID_T, SIG]),
    def("futex",             [202, 98, 238],  task::futex,                Num,      &[PTR, FUTEX_OP, UINT, PTR, PTR, UINT]),
    def("sched_getaffinity", [204, 123, 240], task::sched_getaffinity,    Num,      &[PID_T, UINT, PTR]),
    def("getdents64",        [217, 61, 220],  fs::getdents64,             Num,      &[FD, PTR, UINT]),
    def("set_tid_address",   [218, 96, 252],  task::set_tid_address,      Num,      &[PTR]),
    def("clock_gettime",     [228, 113, 260], time::clock_gettime,        Num,      &[CLOCK, PTR]),
    def("clock_getres",      [229, 114, 261], time::clock_getres,         Num,      &[CLOCK, PTR]),
    def("clock_nanosleep",   [230, 115, 262], time::clock_nanosleep,      Num,      &[CLOCK, TIMER_FLAGS, PTR, PTR]),
    def("exit_group",        [231, 94, 248],  task::exit,                 NoReturn, &[INT]),
    def("tgkill",            [234, 131, 241], signals::tgkill,            Num,      &[PID_T, PID_T, SIG]),
    def("waitid",            [247, 95, 281],  life::waitid,               Num,      &[IDTYPE, PID_T, PTR, WAIT_OPTIONS, PTR]),
    def("openat",            [257, 56, 288],  fs::openat,                 Num,      &[DIRFD, PATH, OPEN_FLAGS, MODE]),
    def("mkdirat",           [258, 34, 289],  fs::mkdirat,                Num,      &[DIRFD, PATH, MODE]),
    def("newfstatat",        [262, 79, 293],  fs::newfstatat,             Num,      &[DIRFD, PATH, PTR, AT_FLAGS]),
    def("unlinkat",          [263, 35, 294],  fs::unlinkat,               Num,      &[DIRFD, PATH, AT_FLAGS]),
    def("renameat",          [264, 38, 295],  fs::renameat,               Num,      &[DIRFD, PATH, DIRFD, PATH]),
    def("symlinkat",         [266, 36, 297],  fs::symlinkat,              Num,      &[PATH, DIRFD, PATH]),
    def("readlinkat",        [267, 78, 298],  fs::readlinkat,             Num,      &[DIRFD, PATH, PTR, INT]),
    def("faccessat",         [269, 48, 300],  fs::faccessat,              Num,      &[DIRFD, PATH, INT]),
    def("pselect6",          [270, 72, 301],  poll::pselect6,             Num,      &[INT, PTR, PTR, PTR, PTR, PTR]),
    def("ppoll",             [271, 73, 302],  poll::ppoll,                Num,      &[PTR, UINT, PTR, PTR, SIZE]),
    def("set_robust_list",   [273, 99, 304],  task::set_robust_list,      Num,      &[PTR, SIZE]),
    def("pipe2",             [293, 59, 325],  io::pipe2,                  Num,      &[PTR, OPEN_FLAGS]),
    def("dup3",              [292, 24, 326],  io::dup3,                   Num,      &[FD, FD, INT]),
    // The high half of the offset (for 32-bit callers) is ignored on 64-bit.
    def("preadv",            [295, 69, 328],  io::preadv,                 Num,      &[FD, PTR, ULONG, OFF, ULONG]),
    def("pwritev",           [296, 70, 329],  io::pwritev,                Num,      &[FD, PTR, ULONG, OFF, ULONG]),
    def("prlimit64",         [302, 261, 334], task::prlimit64,            Num,      &[PID_T, RESOURCE, PTR, PTR]),
    def("renameat2",         [316, 276, 347], fs::renameat2,              Num,      &[DIRFD, PATH, DIRFD, PATH, UINT]),
    def("getrandom",         [318, 278, 349], task::getrandom,            Num,      &[PTR, SIZE, GRND_FLAGS]),
    def("statx",             [332, 291, 379], fs::statx,                  Num,      &[DIRFD, PATH, AT_FLAGS, U32_HEX, PTR]),
    def("rseq",              [334, 293, 383], task::rseq,                 Num,      &[PTR, UINT, INT, U32_HEX]),
    def("execveat",          [322, 281, 354], life::execveat,             Num,      &[DIRFD, PATH, PTR, PTR, AT_FLAGS]),
    def("utimensat",         [280, 88, 315],  fs::utimensat,              Num,      &[DIRFD, PATH, PTR, AT_FLAGS]),
    def("clone3",            [435, 435, 435], life::clone3,               Num,      &[PTR, SIZE]),
    def("faccessat2",        [439, 439, 439], fs::faccessat2,             Num,      &[DIRFD, PATH, INT, AT_FLAGS]),
    def("sigreturn",         [NO, NO, 119],   signals::sigreturn,         Restored, &[]),
];

/// Calls proposed upstream that have no number yet: the SFrame
/// registration calls of the 2026 RFC (`sframe_register(struct
/// sframe_setup *, size_t)`, `sframe_unregister(...)`). They are calls of
/// this process only at the numbers its host gives them
/// ([`Config::named_syscalls`]); the emulator has no kernel side for them and
/// answers `-ENOSYS` (a host with one, the lab's kernel model, answers at
/// the call's stop), but traces them by name instead of as unknown calls.
///
/// [`Config::named_syscalls`]: crate::Config::named_syscalls
#[rustfmt::skip]
static UNNUMBERED: &[Def] = &[
    def("sframe_register",   [NO, NO, NO],    not_here,                   Num,      &[PTR, SIZE]),
    def("sframe_unregister", [NO, NO, NO],    not_here,                   Num,      &[PTR, SIZE]),
];

/// A call the emulator names but does not implement: `-ENOSYS`.
fn not_here(_: &mut Emulator, _: [u64; 6]) -> SysResult {
    fail(errno::ENOSYS)
}

/// The numbers `named` gives calls of [`UNNUMBERED`], as (number, row)
/// pairs; a name that is not one of them, or a number `arch` already uses
/// for an implemented call (which keeps it), is left out.
pub(crate) fn unnumbered_map(arch: Arch, named: &[(&str, u64)]) -> Vec<(u64, u16)> {
    named
        .iter()
        .filter(|&&(_, nr)| name(arch, nr).is_none())
        .filter_map(|&(wanted, nr)| {
            let row = UNNUMBERED.iter().position(|def| def.name == wanted)?;
            Some((nr, (TABLE.len() + row) as u16))
        })
        .collect()
}

/// The row `row` of [`TABLE`] followed by [`UNNUMBERED`].
fn row_def(row: u16) -> &'static Def {
    let row = usize::from(row);
    TABLE.get(row).unwrap_or_else(|| &UNNUMBERED[row - TABLE.len()])
}

/// Syscall number → table row, for `arch`.
pub(crate) fn number_map(arch: Arch) -> Vec<Option<u16>> {
    let len = TABLE.iter().filter_map(|def| names::on(def.nr, arch)).max().map_or(0, |max| max as usize + 1);
    let mut map = vec![None; len];
    for (row, def) in TABLE.iter().enumerate() {
        if let Some(nr) = names::on(def.nr, arch) {
            map[nr as usize] = Some(row as u16);
        }
    }
    map
}

/// The name of syscall `nr` on `arch`, if the emulator knows it.
pub fn name(arch: Arch, nr: u64) -> Option<&'static str> {
    TABLE.iter().find(|def| names::on(def.nr, arch) == Some(nr)).map(|def| def.name)
}

/// The number of the syscall called `name` on `arch`, if the emulator implements it there.
pub fn number(arch: crate::machine::arch::Arch, name: &str) -> Option<u64> {
    TABLE.iter().find(|def| def.name == name).and_then(|def| names::on(def.nr, arch))
}

/// How an unknown call's arguments are shown: all six registers.
static UNKNOWN: [Arg; 6] = [Arg::Raw; 6];

/// How a call whose arguments could not be read from memory is shown: the pointer to them.
static FETCH_FAILED: [Arg; 1] = [PTR];

/// Services syscall `nr`, whose trap has just been taken.
pub(crate) fn dispatch(emu: &mut Emulator, nr: u64) -> Result<SyscallRecord, Error> {
    let conv = &emu.info().syscall;
    let mut regs = [0u64; 6];
    for (value, &reg) in regs.iter_mut().zip(&conv.args) {
        *value = emu.reg(reg)?;
    }
    let icount = emu.icount();
    // A call retried after sleeping keeps its deadline (`Emulator::deadline`).
    emu.retry = emu.blocked.take();
    let row = usize::try_from(nr)
        .ok()
        .and_then(|nr| emu.syscalls.get(nr).copied().flatten())
        .or_else(|| emu.unnumbered.iter().find(|&&(n, _)| n == nr).map(|&(_, row)| row));
    let mut strings = Vec::new();
    let (name, types, returns, args, outcome) = match row.map(row_def) {
        None => {
            // Once per number: a program retrying a call should not flood the log.
            if emu.unknown_reported.insert(nr) {
                let pc = emu.reg(emu.info().pc)?;
                let name = names::unimplemented(emu.arch(), nr);
                emu.events.push(Event::UnknownSyscall { nr, name, icount, pc });
            }
            ("?", &UNKNOWN[..], Num, regs, fail(errno::ENOSYS))
        }
        Some(def) => match fetch(emu, def, regs) {
            Err(_) => (def.name, &FETCH_FAILED[..], def.ret, [regs[0], 0, 0, 0, 0, 0], fail(errno::EFAULT)),
            Ok(regs) => {
                let args = narrow(def.args, regs);
                if emu.record_syscalls {
                    // At the call: the handler, or the guest later, may change the memory.
                    for (i, _) in def.args.iter().enumerate().filter(|&(_, &arg)| arg == PATH) {
                        strings.extend(peek_string(emu, args[i]).map(|s| (i, s)));
                    }
                }
                (def.name, def.args, def.ret, args, (def.handler)(emu, args))
            }
        },
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
        Ok(Outcome::ThreadExit) => 0,
        Err(SysError::Block(deadline)) => {
            // Nothing is written: the call runs again when it may complete.
            emu.blocked = Some(outcome::Blocked { nr, name, deadline });
            return Ok(SyscallRecord { icount, arch: emu.arch(), nr, name, args, ret: 0, types, returns, strings });
        }
        Err(SysError::Errno(e)) => {
            emu.set_reg(conv.ret, (-e) as u64)?;
            -e
        }
        Err(SysError::Host(err)) => return Err(err),
    };
    let arch = emu.arch();
    let record = SyscallRecord { icount, arch, nr, name, args, ret, types, returns, strings };
    if emu.record_syscalls {
        emu.events.push(Event::Syscall(record.clone()));
    }
    Ok(record)
}

/// The argument registers of a call, from memory where the architecture
/// passes them there: s390x's `mmap` is the old one, whose only register
/// points at the six (`struct s390_mmap_arg_struct`, six `unsigned long`s).
fn fetch(emu: &mut Emulator, def: &Def, regs: [u64; 6]) -> Result<[u64; 6], MemFault> {
    if !emu.info().mmap_args_in_memory || def.name != "mmap" {
        return Ok(regs);
    }
    let mut block = [0u64; 6];
    for (i, value) in block.iter_mut().enumerate() {
        *value = emu.read_uint(regs[0].wrapping_add(8 * i as u64), 8)?;
    }
    Ok(block)
}

/// The string at `addr` for a trace, read like a debugger would: whatever
/// is mapped readable, resident or not, without faulting anything in, so
/// tracing never changes what the kernel model sees. `None` if unreadable.
fn peek_string(emu: &Emulator, addr: u64) -> Option<Captured> {
    let peek = |at: u64, len: u64| {
        emu.pages().check(at, len, AccessKind::Read, Access::Faultable).ok()?;
        let mut chunk = vec![0u8; len as usize];
        emu.uc.mem_read(at, &mut chunk).ok()?;
        Some(chunk)
    };
    let (bytes, found) =
        crate::linux::emulator::scan_cstr(addr, CAPTURE_MAX, |at, len| peek(at, len).ok_or(())).ok()?;
    Some(Captured { bytes, cut: !found })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_implemented_call_is_listed_as_unimplemented() {
        for arch in Arch::ALL {
            for &(unimplemented, nrs) in names::UNIMPLEMENTED {
                if let Some(nr) = names::on(nrs, arch) {
                    assert_eq!(name(arch, nr), None, "{arch}: {unimplemented} is implemented");
                }
            }
        }
    }

    #[test]
    fn proposed_calls_are_named_only_at_free_numbers_given_to_them() {
        let named = [("sframe_register", 1000), ("sframe_unregister", 1), ("stacktrace_setup", 1002)];
        let map = unnumbered_map(Arch::X86_64, &named);
        // 1 stays x86-64's write; stacktrace_setup is not one of them.
        assert_eq!(map.len(), 1, "{map:?}");
        assert_eq!((map[0].0, row_def(map[0].1).name), (1000, "sframe_register"));
        let map = unnumbered_map(Arch::Aarch64, &named);
        let names: Vec<_> = map.iter().map(|&(nr, row)| (nr, row_def(row).name)).collect();
        assert_eq!(names, [(1000, "sframe_register"), (1, "sframe_unregister")]);
    }

    #[test]
    fn numbers_are_unique_per_architecture() {
        for arch in Arch::ALL {
            let mut seen = std::collections::BTreeMap::new();
            for def in TABLE {
                if let Some(nr) = names::on(def.nr, arch) {
                    assert!(seen.insert(nr, def.name).is_none(), "{arch}: {nr} used twice ({})", def.name);
                }
            }
            let map = number_map(arch);
            assert_eq!(name(arch, 1), [Some("write"), None, Some("exit")][crate::machine::arch::index(arch)]);
            assert_eq!(map.iter().flatten().count(), seen.len());
        }
        let mut names: Vec<_> = TABLE.iter().map(|def| def.name).collect();
        names.sort_unstable();
        names.dedup();
        // Handlers may be shared, names not.
        assert_eq!(names.len(), TABLE.len());
        assert!(TABLE.iter().all(|def| def.args.len() <= 6));
    }
}
