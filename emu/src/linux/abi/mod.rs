//! The Linux user ABI the system calls speak, below the calls themselves
//! (so files, signal frames and the emulator's state use it without
//! importing the system-call layer): error numbers ([`errno`]), what a call
//! returns or how it sleeps ([`outcome`]), its arguments by type ([`args`])
//! and the record of one call ([`record`]).
//!
//! This file: the constants the handlers act on and traces spell out, each
//! defined once: as a `u64` to compare narrowed arguments with, and by name
//! in a `(value, name)` table for [`args`].
//!
//! Values are the asm-generic ones, shared by x86-64, AArch64 and s390x,
//! except the few open flags in [`OPEN_BITS`] that AArch64 moves.

pub(crate) mod args;
pub mod errno;
pub(crate) mod outcome;
pub(crate) mod record;

/// Defines constants as `u64`s, and a table of their names.
macro_rules! named {
    ($(#[$meta:meta])* $table:ident { $($name:ident = $value:expr,)* }) => {
        $(
            #[doc = concat!("`", stringify!($name), "`.")]
            pub(crate) const $name: u64 = $value;
        )*
        $(#[$meta])*
        pub(crate) static $table: &[(u64, &str)] = &[$(($name, stringify!($name)),)*];
    };
}

/// `AT_FDCWD` as a narrowed `int` argument holds it: sign-extended.
pub(crate) const AT_FDCWD: u64 = -100i64 as u64;
/// The access-mode field of open flags.
pub(crate) const O_ACCMODE: u64 = 3;
/// Open flags that make the `mode` argument count.
pub(crate) const O_CREAT: u64 = 0o100;
/// `O_EXCL`.
pub(crate) const O_EXCL: u64 = 0o200;
/// `O_NOCTTY`.
pub(crate) const O_NOCTTY: u64 = 0o400;
/// `O_TRUNC`.
pub(crate) const O_TRUNC: u64 = 0o1000;
/// `O_APPEND`.
pub(crate) const O_APPEND: u64 = 0o2000;
/// `O_CLOEXEC`.
pub(crate) const O_CLOEXEC: u64 = 0o2_000_000;
/// `O_PATH`.
pub(crate) const O_PATH: u64 = 0o10_000_000;
/// `__O_TMPFILE` (the kernel's bit; `O_TMPFILE` adds `O_DIRECTORY`).
pub(crate) const O_TMPFILE: u64 = 0o20_000_000;
/// The mapping-type field of mmap flags.
pub(crate) const MAP_TYPE: u64 = 0xf;
/// The command field of a futex operation.
pub(crate) const FUTEX_CMD_MASK: u64 = 0x7f;

named! {
    /// Open access modes (the [`O_ACCMODE`] field).
    OPEN_ACCESS_NAMES { O_RDONLY = 0, O_WRONLY = 1, O_RDWR = 2, }
}

/// Open flag bits: name, value on x86-64, AArch64, s390x.
#[rustfmt::skip]
pub(crate) static OPEN_BITS: &[(&str, [u64; 3])] = &[
    ("O_CREAT",     [O_CREAT; 3]),
    ("O_EXCL",      [O_EXCL; 3]),
    ("O_NOCTTY",    [O_NOCTTY; 3]),
    ("O_TRUNC",     [O_TRUNC; 3]),
    ("O_APPEND",    [O_APPEND; 3]),
    ("O_NONBLOCK",  [0o4000; 3]),
    ("O_DSYNC",     [0o10_000; 3]),
    ("O_ASYNC",     [0o20_000; 3]),
    ("O_DIRECT",    [0o40_000, 0o200_000, 0o40_000]),
    ("O_LARGEFILE", [0o100_000, 0o400_000, 0o100_000]),
    ("O_DIRECTORY", [0o200_000, 0o40_000, 0o200_000]),
    ("O_NOFOLLOW",  [0o400_000, 0o100_000, 0o400_000]),
    ("O_NOATIME",   [0o1_000_000; 3]),
    ("O_CLOEXEC",   [O_CLOEXEC; 3]),
    ("__O_SYNC",    [0o4_000_000; 3]),
    ("O_PATH",      [O_PATH; 3]),
    ("__O_TMPFILE", [O_TMPFILE; 3]),
];

/// The value of open flag `name` on `arch` (0 if there is no such flag).
pub(crate) fn open_flag(arch: kmodel::arch::Arch, name: &str) -> u64 {
    let column = crate::machine::arch::index(arch);
    OPEN_BITS.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| v[column])
}

named! {
    /// `AT_*` flags of the `*at` calls.
    AT_NAMES {
        AT_SYMLINK_NOFOLLOW = 0x100,
        AT_REMOVEDIR = 0x200,
        AT_SYMLINK_FOLLOW = 0x400,
        AT_NO_AUTOMOUNT = 0x800,
        AT_EMPTY_PATH = 0x1000,
    }
}

named! {
    /// `lseek` whence values.
    SEEK_NAMES { SEEK_SET = 0, SEEK_CUR = 1, SEEK_END = 2, SEEK_DATA = 3, SEEK_HOLE = 4, }
}

named! {
    /// `fcntl` commands.
    FCNTL_NAMES {
        F_DUPFD = 0,
        F_GETFD = 1,
        F_SETFD = 2,
        F_GETFL = 3,
        F_SETFL = 4,
        F_GETLK = 5,
        F_SETLK = 6,
        F_SETLKW = 7,
        F_SETOWN = 8,
        F_GETOWN = 9,
        F_SETSIG = 10,
        F_GETSIG = 11,
        F_OFD_GETLK = 36,
        F_OFD_SETLK = 37,
        F_OFD_SETLKW = 38,
        F_DUPFD_CLOEXEC = 1030,
        F_SETPIPE_SZ = 1031,
        F_GETPIPE_SZ = 1032,
        F_ADD_SEALS = 1033,
        F_GET_SEALS = 1034,
    }
}

named! {
    /// The terminal `ioctl` requests a C library makes (asm-generic numbers).
    IOCTL_NAMES {
        TCGETS = 0x5401,
        TCSETS = 0x5402,
        TIOCGPGRP = 0x540f,
        TIOCSPGRP = 0x5410,
        TIOCGWINSZ = 0x5413,
        TIOCSWINSZ = 0x5414,
        FIONREAD = 0x541b,
    }
}

named! {
    /// `rt_sigprocmask` how.
    SIG_HOW_NAMES { SIG_BLOCK = 0, SIG_UNBLOCK = 1, SIG_SETMASK = 2, }
}

named! {
    /// Clock IDs.
    CLOCK_NAMES {
        CLOCK_REALTIME = 0,
        CLOCK_MONOTONIC = 1,
        CLOCK_PROCESS_CPUTIME_ID = 2,
        CLOCK_THREAD_CPUTIME_ID = 3,
        CLOCK_MONOTONIC_RAW = 4,
        CLOCK_REALTIME_COARSE = 5,
        CLOCK_MONOTONIC_COARSE = 6,
        CLOCK_BOOTTIME = 7,
        CLOCK_REALTIME_ALARM = 8,
        CLOCK_BOOTTIME_ALARM = 9,
        CLOCK_TAI = 11,
    }
}

named! {
    /// `clock_nanosleep` flags.
    TIMER_NAMES { TIMER_ABSTIME = 1, }
}

named! {
    /// Memory protection bits.
    PROT_NAMES {
        PROT_NONE = 0,
        PROT_READ = 1,
        PROT_WRITE = 2,
        PROT_EXEC = 4,
        PROT_SEM = 8,
        PROT_GROWSDOWN = 0x0100_0000,
        PROT_GROWSUP = 0x0200_0000,
    }
}

named! {
    /// Mapping types (the [`MAP_TYPE`] field).
    MAP_TYPE_NAMES { MAP_SHARED = 1, MAP_PRIVATE = 2, MAP_SHARED_VALIDATE = 3, }
}

named! {
    /// mmap flag bits.
    MAP_NAMES {
        MAP_FIXED = 0x10,
        MAP_ANONYMOUS = 0x20,
        MAP_GROWSDOWN = 0x100,
        MAP_DENYWRITE = 0x800,
        MAP_EXECUTABLE = 0x1000,
        MAP_LOCKED = 0x2000,
        MAP_NORESERVE = 0x4000,
        MAP_POPULATE = 0x8000,
        MAP_NONBLOCK = 0x1_0000,
        MAP_STACK = 0x2_0000,
        MAP_HUGETLB = 0x4_0000,
        MAP_SYNC = 0x8_0000,
        MAP_FIXED_NOREPLACE = 0x10_0000,
    }
}

named! {
    /// mremap flags.
    MREMAP_NAMES { MREMAP_MAYMOVE = 1, MREMAP_FIXED = 2, MREMAP_DONTUNMAP = 4, }
}

named! {
    /// madvise advice.
    MADV_NAMES {
        MADV_NORMAL = 0,
        MADV_RANDOM = 1,
        MADV_SEQUENTIAL = 2,
        MADV_WILLNEED = 3,
        MADV_DONTNEED = 4,
        MADV_FREE = 8,
        MADV_REMOVE = 9,
        MADV_DONTFORK = 10,
        MADV_DOFORK = 11,
        MADV_MERGEABLE = 12,
        MADV_UNMERGEABLE = 13,
        MADV_HUGEPAGE = 14,
        MADV_NOHUGEPAGE = 15,
        MADV_DONTDUMP = 16,
        MADV_DODUMP = 17,
        MADV_WIPEONFORK = 18,
        MADV_KEEPONFORK = 19,
        MADV_COLD = 20,
        MADV_PAGEOUT = 21,
        MADV_POPULATE_READ = 22,
        MADV_POPULATE_WRITE = 23,
        MADV_DONTNEED_LOCKED = 24,
        MADV_COLLAPSE = 25,
    }
}

named! {
    /// Futex commands (the [`FUTEX_CMD_MASK`] field).
    FUTEX_CMD_NAMES {
        FUTEX_WAIT = 0,
        FUTEX_WAKE = 1,
        FUTEX_FD = 2,
        FUTEX_REQUEUE = 3,
        FUTEX_CMP_REQUEUE = 4,
        FUTEX_WAKE_OP = 5,
        FUTEX_LOCK_PI = 6,
        FUTEX_UNLOCK_PI = 7,
        FUTEX_TRYLOCK_PI = 8,
        FUTEX_WAIT_BITSET = 9,
        FUTEX_WAKE_BITSET = 10,
        FUTEX_WAIT_REQUEUE_PI = 11,
        FUTEX_CMP_REQUEUE_PI = 12,
        FUTEX_LOCK_PI2 = 13,
    }
}

named! {
    /// Futex operation flags.
    FUTEX_FLAG_NAMES { FUTEX_PRIVATE_FLAG = 128, FUTEX_CLOCK_REALTIME = 256, }
}

named! {
    /// Resource limits.
    RLIMIT_NAMES {
        RLIMIT_CPU = 0,
        RLIMIT_FSIZE = 1,
        RLIMIT_DATA = 2,
        RLIMIT_STACK = 3,
        RLIMIT_CORE = 4,
        RLIMIT_RSS = 5,
        RLIMIT_NPROC = 6,
        RLIMIT_NOFILE = 7,
        RLIMIT_MEMLOCK = 8,
        RLIMIT_AS = 9,
        RLIMIT_LOCKS = 10,
        RLIMIT_SIGPENDING = 11,
        RLIMIT_MSGQUEUE = 12,
        RLIMIT_NICE = 13,
        RLIMIT_RTPRIO = 14,
        RLIMIT_RTTIME = 15,
    }
}

named! {
    /// `arch_prctl` codes (x86-64).
    ARCH_PRCTL_NAMES {
        ARCH_SET_GS = 0x1001,
        ARCH_SET_FS = 0x1002,
        ARCH_GET_FS = 0x1003,
        ARCH_GET_GS = 0x1004,
        ARCH_GET_CPUID = 0x1011,
        ARCH_SET_CPUID = 0x1012,
        ARCH_SHSTK_ENABLE = 0x5001,
        ARCH_SHSTK_DISABLE = 0x5002,
        ARCH_SHSTK_LOCK = 0x5003,
        ARCH_SHSTK_UNLOCK = 0x5004,
        ARCH_SHSTK_STATUS = 0x5005,
    }
}

named! {
    /// `prctl` options the emulator implements (the rest are refused with
    /// `EINVAL`, as by a kernel that does not know them).
    PRCTL_NAMES { PR_SET_NAME = 15, PR_GET_NAME = 16, }
}

named! {
    /// `getrandom` flags.
    GRND_NAMES { GRND_NONBLOCK = 1, GRND_RANDOM = 2, GRND_INSECURE = 4, }
}

named! {
    /// `clone` flags (the low byte, [`CSIGNAL`], is the exit signal).
    CLONE_NAMES {
        CLONE_VM = 0x100,
        CLONE_FS = 0x200,
        CLONE_FILES = 0x400,
        CLONE_SIGHAND = 0x800,
        CLONE_PIDFD = 0x1000,
        CLONE_PTRACE = 0x2000,
        CLONE_VFORK = 0x4000,
        CLONE_PARENT = 0x8000,
        CLONE_THREAD = 0x1_0000,
        CLONE_NEWNS = 0x2_0000,
        CLONE_SYSVSEM = 0x4_0000,
        CLONE_SETTLS = 0x8_0000,
        CLONE_PARENT_SETTID = 0x10_0000,
        CLONE_CHILD_CLEARTID = 0x20_0000,
        CLONE_DETACHED = 0x40_0000,
        CLONE_UNTRACED = 0x80_0000,
        CLONE_CHILD_SETTID = 0x100_0000,
    }
}

/// The exit-signal field of `clone` flags.
pub(crate) const CSIGNAL: u64 = 0xff;

named! {
    /// `wait4` and `waitid` options.
    WAIT_NAMES {
        WNOHANG = 1,
        WUNTRACED = 2,
        WEXITED = 4,
        WCONTINUED = 8,
        WNOWAIT = 0x0100_0000,
        __WNOTHREAD = 0x2000_0000,
        __WALL = 0x4000_0000,
        __WCLONE = 0x8000_0000,
    }
}

named! {
    /// `waitid` ID types.
    IDTYPE_NAMES { P_ALL = 0, P_PID = 1, P_PGID = 2, P_PIDFD = 3, }
}

/// `poll` events (in memory, so no name table: traces show the array's address).
pub(crate) const POLLIN: u64 = 0x1;
/// `POLLPRI`.
pub(crate) const POLLPRI: u64 = 0x2;
/// `POLLOUT`.
pub(crate) const POLLOUT: u64 = 0x4;
/// `POLLERR`.
pub(crate) const POLLERR: u64 = 0x8;
/// `POLLHUP`.
pub(crate) const POLLHUP: u64 = 0x10;
/// `POLLNVAL`.
pub(crate) const POLLNVAL: u64 = 0x20;
/// `POLLRDNORM`.
pub(crate) const POLLRDNORM: u64 = 0x40;
/// `POLLRDBAND`.
pub(crate) const POLLRDBAND: u64 = 0x80;
/// `POLLWRNORM`.
pub(crate) const POLLWRNORM: u64 = 0x100;

/// `UTIME_NOW` in a `struct timespec`'s nanoseconds: the current time.
pub(crate) const UTIME_NOW: u64 = (1 << 30) - 1;
/// `UTIME_OMIT`: leave this time alone.
pub(crate) const UTIME_OMIT: u64 = (1 << 30) - 2;
