//! Typed system-call arguments: what each row of the syscall table declares
//! about its arguments and result, after the kernel's `SYSCALL_DEFINE`
//! prototypes.
//!
//! A type says two things. How the kernel narrows the 64-bit register: its
//! syscall wrappers cast every argument from `long` to the declared C type,
//! so an `int` is the low 32 bits sign-extended and an `unsigned int` the
//! low 32 bits, whatever the upper half holds (glibc passes `AT_FDCWD` in an
//! `int`, leaving the upper half to chance). And how a trace spells it, the
//! way strace does: `openat(AT_FDCWD, "in.txt", O_RDONLY|O_CLOEXEC)`.
//!
//! Adding a system call means writing its prototype with the constants at
//! the end of this file (`&[DIRFD, PATH, OPEN_FLAGS, MODE]`); a new kind of
//! argument is a new constant, usually a [`Arg::Value`] or [`Arg::Flags`]
//! over a table from [`crate::linux::abi`].

use crate::linux::abi;
use crate::machine::arch::Arch;
use std::fmt::{self, Write as _};

/// The C type of an argument, which fixes how the kernel narrows the register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    /// `int`, `pid_t`, `clockid_t`: the low 32 bits, sign-extended.
    Int,
    /// `unsigned int`, `u32`: the low 32 bits.
    Uint,
    /// `umode_t` (`unsigned short`): the low 16 bits.
    Ushort,
    /// `long`, `off_t`, `loff_t`: the whole register, signed.
    Long,
    /// `unsigned long`, `size_t`, pointers: the whole register.
    Ulong,
}

impl Ty {
    /// The register as the handler receives it: cast to this type as the
    /// kernel's wrapper does, kept in 64 bits (signed types sign-extended, so
    /// `AT_FDCWD` is `-100` as a `u64` however it was passed).
    pub(crate) fn narrow(self, reg: u64) -> u64 {
        match self {
            Ty::Int => reg as i32 as i64 as u64,
            Ty::Uint => u64::from(reg as u32),
            Ty::Ushort => u64::from(reg as u16),
            Ty::Long | Ty::Ulong => reg,
        }
    }

    fn signed(self) -> bool {
        matches!(self, Ty::Int | Ty::Long)
    }
}

/// Bits and at most one multi-bit field, as in open flags (the access mode)
/// or mmap flags (the mapping type).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Flags {
    /// Mask of the field (0: none).
    field: u64,
    /// Names of the field's values.
    field_names: &'static [(u64, &'static str)],
    /// Names of the bits; a 0 entry names the empty set (`PROT_NONE`).
    bits: &'static [(u64, &'static str)],
}

/// What a table row declares about one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    /// A number, in decimal.
    Num(Ty),
    /// A number, in hex (a magic value, a bit set).
    Hex(Ty),
    /// A `__user` pointer: `NULL` or hex.
    Ptr,
    /// `const char __user *` naming a file: the string (when captured).
    Path,
    /// `unsigned int fd`. (readv's, writev's and mmap's `unsigned long fd`
    /// reach `fdget(unsigned int)`, which narrows them the same way.)
    Fd,
    /// `int dfd` of the `*at` calls: `AT_FDCWD` or a descriptor.
    Dirfd,
    /// `int flags` of `open`: access mode and `O_*` bits, which AArch64 numbers differently.
    OpenFlags,
    /// `umode_t mode`, in octal. After open flags it is shown only with
    /// `O_CREAT` or `O_TMPFILE`, the only time the kernel reads it.
    Mode,
    /// `int sig`: a signal number.
    Signal,
    /// One of these named values, else the number.
    Value(Ty, &'static [(u64, &'static str)]),
    /// A combination of named bits.
    Flags(Ty, &'static Flags),
    /// An argument of a call the emulator does not know: the whole register.
    Raw,
}

impl Arg {
    /// The C type, which says how the register is narrowed.
    pub(crate) fn ty(self) -> Ty {
        match self {
            Arg::Num(ty) | Arg::Hex(ty) | Arg::Value(ty, _) | Arg::Flags(ty, _) => ty,
            Arg::Ptr | Arg::Path | Arg::Raw => Ty::Ulong,
            Arg::Fd => Ty::Uint,
            Arg::Dirfd | Arg::OpenFlags | Arg::Signal => Ty::Int,
            Arg::Mode => Ty::Ushort,
        }
    }
}

/// What a table row declares about the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ret {
    /// A number (count, descriptor, 0), or `-errno`.
    Num,
    /// An address (`mmap`, `brk`), or `-errno`.
    Addr,
    /// The call does not return (`exit`): shown as `?`.
    NoReturn,
    /// Registers were restored (`rt_sigreturn`): the result register's new value.
    Restored,
}

// ---- the argument types of the kernel's prototypes ------------------------------

/// `int`.
pub(crate) const INT: Arg = Arg::Num(Ty::Int);
/// `unsigned int`, `u32`.
pub(crate) const UINT: Arg = Arg::Num(Ty::Uint);
/// `long`.
pub(crate) const LONG: Arg = Arg::Num(Ty::Long);
/// `unsigned long`.
pub(crate) const ULONG: Arg = Arg::Num(Ty::Ulong);
/// `size_t`.
pub(crate) const SIZE: Arg = ULONG;
/// `off_t`, `loff_t`.
pub(crate) const OFF: Arg = LONG;
/// `u32` holding a magic value.
pub(crate) const U32_HEX: Arg = Arg::Hex(Ty::Uint);
/// `pid_t`.
pub(crate) const PID_T: Arg = INT;
/// Any `__user` pointer other than a path.
pub(crate) const PTR: Arg = Arg::Ptr;
/// `const char __user *` naming a file.
pub(crate) const PATH: Arg = Arg::Path;
/// `unsigned int fd`.
pub(crate) const FD: Arg = Arg::Fd;
/// `int dfd`.
pub(crate) const DIRFD: Arg = Arg::Dirfd;
/// `int flags` of `open`/`openat`.
pub(crate) const OPEN_FLAGS: Arg = Arg::OpenFlags;
/// `umode_t mode`.
pub(crate) const MODE: Arg = Arg::Mode;
/// `int sig`.
pub(crate) const SIG: Arg = Arg::Signal;
/// `int how` of `rt_sigprocmask`.
pub(crate) const SIG_HOW: Arg = Arg::Value(Ty::Int, abi::SIG_HOW_NAMES);
/// `int flag` of the `*at` calls.
pub(crate) const AT_FLAGS: Arg = Arg::Flags(Ty::Int, &Flags::bits(abi::AT_NAMES));
/// `unsigned int whence` of `lseek`.
pub(crate) const WHENCE: Arg = Arg::Value(Ty::Uint, abi::SEEK_NAMES);
/// `unsigned int cmd` of `fcntl`.
pub(crate) const FCNTL_CMD: Arg = Arg::Value(Ty::Uint, abi::FCNTL_NAMES);
/// `unsigned int cmd` of `ioctl`.
pub(crate) const IOCTL_CMD: Arg = Arg::Value(Ty::Uint, abi::IOCTL_NAMES);
/// `clockid_t`.
pub(crate) const CLOCK: Arg = Arg::Value(Ty::Int, abi::CLOCK_NAMES);
/// `int flags` of `clock_nanosleep`.
pub(crate) const TIMER_FLAGS: Arg = Arg::Flags(Ty::Int, &Flags::bits(abi::TIMER_NAMES));
/// `unsigned long prot`.
pub(crate) const PROT: Arg = Arg::Flags(Ty::Ulong, &Flags::bits(abi::PROT_NAMES));
/// `unsigned long flags` of `mmap`.
pub(crate) const MAP_FLAGS: Arg =
    Arg::Flags(Ty::Ulong, &Flags { field: abi::MAP_TYPE, field_names: abi::MAP_TYPE_NAMES, bits: abi::MAP_NAMES });
/// `unsigned long flags` of `mremap`.
pub(crate) const MREMAP_FLAGS: Arg = Arg::Flags(Ty::Ulong, &Flags::bits(abi::MREMAP_NAMES));
/// `int behavior` of `madvise`.
pub(crate) const ADVICE: Arg = Arg::Value(Ty::Int, abi::MADV_NAMES);
/// `int op` of `futex`.
pub(crate) const FUTEX_OP: Arg = Arg::Flags(
    Ty::Int,
    &Flags { field: abi::FUTEX_CMD_MASK, field_names: abi::FUTEX_CMD_NAMES, bits: abi::FUTEX_FLAG_NAMES },
);
/// `unsigned int resource` of the rlimit calls.
pub(crate) const RESOURCE: Arg = Arg::Value(Ty::Uint, abi::RLIMIT_NAMES);
/// `int option` of `arch_prctl`.
pub(crate) const ARCH_PRCTL_CODE: Arg = Arg::Value(Ty::Int, abi::ARCH_PRCTL_NAMES);
/// `int option` of `prctl`.
pub(crate) const PRCTL_OPTION: Arg = Arg::Value(Ty::Int, abi::PRCTL_NAMES);
/// `int options` of `wait4` and `waitid`.
pub(crate) const WAIT_OPTIONS: Arg = Arg::Flags(Ty::Int, &Flags::bits(abi::WAIT_NAMES));
/// `int which` of `waitid`.
pub(crate) const IDTYPE: Arg = Arg::Value(Ty::Int, abi::IDTYPE_NAMES);
/// `unsigned long flags` of `clone` (not in its table row: the argument's
/// position differs per architecture; spelled in warnings with [`spell`]).
pub(crate) const CLONE_FLAGS: Arg = Arg::Flags(Ty::Ulong, &Flags::bits(abi::CLONE_NAMES));
/// `unsigned int flags` of `getrandom`.
pub(crate) const GRND_FLAGS: Arg = Arg::Flags(Ty::Uint, &Flags::bits(abi::GRND_NAMES));

impl Flags {
    const fn bits(bits: &'static [(u64, &'static str)]) -> Flags {
        Flags { field: 0, field_names: &[], bits }
    }
}

// ---- narrowing and capture ------------------------------------------------------

/// The registers narrowed to the declared types; undeclared ones are 0, so
/// no handler can use an argument its row does not declare.
pub(crate) fn narrow(types: &[Arg], regs: [u64; 6]) -> [u64; 6] {
    let mut args = [0; 6];
    for ((arg, ty), reg) in args.iter_mut().zip(types).zip(regs) {
        *arg = ty.ty().narrow(reg);
    }
    args
}

/// A string argument as it was in guest memory at the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Captured {
    /// The bytes before the NUL (or the first [`CAPTURE_MAX`]).
    pub(crate) bytes: Vec<u8>,
    /// No NUL within [`CAPTURE_MAX`] bytes.
    pub(crate) cut: bool,
}

/// Most bytes of a string argument a trace shows (`PATH_MAX`).
pub(crate) const CAPTURE_MAX: usize = 4096;

// ---- spelling ----------------------------------------------------------------------

/// Writes argument `arg` with value `value` (already narrowed) as a trace
/// shows it. `arch` numbers the open flags; `string` is what a path pointed
/// to at the call.
pub(crate) fn write_arg(
    f: &mut fmt::Formatter<'_>,
    arg: Arg,
    value: u64,
    arch: Arch,
    string: Option<&Captured>,
) -> fmt::Result {
    match arg {
        Arg::Num(ty) => write_num(f, ty, value),
        Arg::Hex(_) => write!(f, "{value:#x}"),
        Arg::Ptr => write_ptr(f, value),
        Arg::Path => match string {
            Some(s) => write_string(f, s),
            None => write_ptr(f, value),
        },
        // Printed as the C library's int, so -1 stays -1.
        Arg::Fd => write!(f, "{}", value as u32 as i32),
        Arg::Dirfd if value == abi::AT_FDCWD => f.write_str("AT_FDCWD"),
        Arg::Dirfd => write_num(f, Ty::Int, value),
        Arg::OpenFlags => write_open_flags(f, value, arch),
        Arg::Mode if value == 0 => f.write_str("0"),
        Arg::Mode => write!(f, "0{value:o}"),
        Arg::Signal => write_signal(f, value),
        Arg::Value(ty, names) => match names.iter().find(|&&(v, _)| v == value) {
            Some((_, name)) => f.write_str(name),
            None => write_num(f, ty, value),
        },
        Arg::Flags(_, flags) => write_flags(f, value, flags.field, flags.field_names, flags.bits.iter().copied()),
        Arg::Raw => write_raw(f, value),
    }
}

/// `value` as a trace shows an argument of type `arg` (for warnings).
pub(crate) fn spell(arg: Arg, value: u64, arch: Arch) -> String {
    struct Spelled(Arg, u64, Arch);
    impl fmt::Display for Spelled {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_arg(f, self.0, self.1, self.2, None)
        }
    }
    Spelled(arg, value, arch).to_string()
}

/// Whether the call's open flags (if it has any) make a `mode` argument count.
pub(crate) fn mode_counts(types: &[Arg], args: &[u64; 6]) -> bool {
    match types.iter().position(|&t| t == Arg::OpenFlags) {
        Some(i) => args[i] & (abi::O_CREAT | abi::O_TMPFILE) != 0,
        None => true,
    }
}

/// Writes a result of kind `ret`: `-ENOENT` for an error where the kind has errors.
pub(crate) fn write_ret(f: &mut fmt::Formatter<'_>, ret: Ret, value: i64) -> fmt::Result {
    if ret == Ret::NoReturn {
        return f.write_str("?");
    }
    if (-4095..0).contains(&value) && ret != Ret::Restored {
        return match super::errno::name(-value) {
            Some(name) => write!(f, "-{name}"),
            None => write!(f, "{value}"),
        };
    }
    match ret {
        Ret::Addr => write!(f, "{value:#x}"),
        Ret::Restored => write_raw(f, value as u64),
        _ => write!(f, "{value}"),
    }
}

fn write_num(f: &mut fmt::Formatter<'_>, ty: Ty, value: u64) -> fmt::Result {
    if ty.signed() {
        write!(f, "{}", value as i64)
    } else {
        write!(f, "{value}")
    }
}

/// A value of unknown meaning: small ones in decimal, others in hex.
fn write_raw(f: &mut fmt::Formatter<'_>, value: u64) -> fmt::Result {
    if value < 0x1_0000 {
        write!(f, "{value}")
    } else {
        write!(f, "{value:#x}")
    }
}

fn write_ptr(f: &mut fmt::Formatter<'_>, value: u64) -> fmt::Result {
    if value == 0 {
        f.write_str("NULL")
    } else {
        write!(f, "{value:#x}")
    }
}

/// A C string in double quotes, with C escapes for what is not printable ASCII.
fn write_string(f: &mut fmt::Formatter<'_>, s: &Captured) -> fmt::Result {
    f.write_char('"')?;
    for &b in &s.bytes {
        match b {
            b'"' => f.write_str("\\\"")?,
            b'\\' => f.write_str("\\\\")?,
            b'\n' => f.write_str("\\n")?,
            b'\t' => f.write_str("\\t")?,
            0x20..=0x7e => f.write_char(char::from(b))?,
            _ => write!(f, "\\x{b:02x}")?,
        }
    }
    f.write_char('"')?;
    if s.cut {
        f.write_str("...")?;
    }
    Ok(())
}

fn write_signal(f: &mut fmt::Formatter<'_>, value: u64) -> fmt::Result {
    match value as i64 {
        sig @ 1..=31 => f.write_str(crate::linux::signal::name(sig as u32)),
        32 => f.write_str("SIGRTMIN"),
        sig @ 33..=64 => write!(f, "SIGRT_{}", sig - 32),
        sig => write!(f, "{sig}"),
    }
}

fn write_open_flags(f: &mut fmt::Formatter<'_>, value: u64, arch: Arch) -> fmt::Result {
    let bits = abi::OPEN_BITS.iter().map(|&(name, values)| (values[crate::machine::arch::index(arch)], name));
    write_flags(f, value, abi::O_ACCMODE, abi::OPEN_ACCESS_NAMES, bits)
}

/// `FIELD|BIT|BIT|0x...`: the field's value by name, then each named bit,
/// then what is left in hex.
fn write_flags(
    f: &mut fmt::Formatter<'_>,
    value: u64,
    field: u64,
    field_names: &[(u64, &str)],
    bits: impl Iterator<Item = (u64, &'static str)> + Clone,
) -> fmt::Result {
    let mut rest = value;
    let mut parts = Vec::new();
    if field != 0 {
        let v = value & field;
        match field_names.iter().find(|&&(n, _)| n == v) {
            Some((_, name)) => parts.push((*name).to_string()),
            None => parts.push(format!("{v:#x}")),
        }
        rest &= !field;
    }
    if value == 0 && field == 0 {
        // The name of the empty set, if it has one (PROT_NONE).
        let zero = bits.clone().find(|&(n, _)| n == 0).map_or("0", |(_, name)| name);
        return f.write_str(zero);
    }
    for (bit, name) in bits {
        if bit != 0 && rest & bit == bit {
            parts.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    f.write_str(&parts.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_follows_the_c_type() {
        let junk = 0xdead_beef_0000_0000;
        assert_eq!(Ty::Int.narrow(junk | 0xffff_ff9c), abi::AT_FDCWD);
        assert_eq!(Ty::Int.narrow(0xffff_ff9c), abi::AT_FDCWD);
        assert_eq!(Ty::Int.narrow(junk | 10), 10);
        assert_eq!(Ty::Uint.narrow(junk | 0xffff_ffff), 0xffff_ffff);
        assert_eq!(Ty::Ushort.narrow(junk | 0x1_01a4), 0o644);
        assert_eq!(Ty::Long.narrow(junk | 5), junk | 5);
        let args = narrow(&[DIRFD, PATH, OPEN_FLAGS], [junk | 0xffff_ff9c, junk | 8, junk, 7, 7, 7]);
        assert_eq!(args, [abi::AT_FDCWD, junk | 8, 0, 0, 0, 0]);
    }

    /// Spells `arg` with `value` (unnarrowed).
    fn show(arg: Arg, value: u64, arch: Arch) -> String {
        struct Shown(Arg, u64, Arch);
        impl fmt::Display for Shown {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write_arg(f, self.0, self.0.ty().narrow(self.1), self.2, None)
            }
        }
        Shown(arg, value, arch).to_string()
    }

    #[test]
    fn spelling() {
        let x86 = Arch::X86_64;
        assert_eq!(show(DIRFD, 0xffff_ff9c, x86), "AT_FDCWD");
        assert_eq!(show(DIRFD, 3, x86), "3");
        assert_eq!(show(FD, u64::MAX, x86), "-1");
        assert_eq!(show(OPEN_FLAGS, 0, x86), "O_RDONLY");
        assert_eq!(show(OPEN_FLAGS, 0o2_000_000 | 0o100 | 1, x86), "O_WRONLY|O_CREAT|O_CLOEXEC");
        // O_DIRECTORY is 0o200000 on x86-64 and s390x, 0o40000 on AArch64.
        assert_eq!(show(OPEN_FLAGS, 0o200_000, x86), "O_RDONLY|O_DIRECTORY");
        assert_eq!(show(OPEN_FLAGS, 0o200_000, Arch::Aarch64), "O_RDONLY|O_DIRECT");
        assert_eq!(show(OPEN_FLAGS, 0o40_000, Arch::Aarch64), "O_RDONLY|O_DIRECTORY");
        assert_eq!(show(SIG, 0xdead_beef_0000_000a, x86), "SIGUSR1");
        assert_eq!(show(SIG, 34, x86), "SIGRT_2");
        assert_eq!(show(SIG, 0, x86), "0");
        assert_eq!(show(PROT, 0, x86), "PROT_NONE");
        assert_eq!(show(PROT, 3, x86), "PROT_READ|PROT_WRITE");
        assert_eq!(show(MAP_FLAGS, 0x22, x86), "MAP_PRIVATE|MAP_ANONYMOUS");
        assert_eq!(show(MAP_FLAGS, 0x4_0000_0022, x86), "MAP_PRIVATE|MAP_ANONYMOUS|0x400000000");
        assert_eq!(show(FUTEX_OP, 0x81, x86), "FUTEX_WAKE|FUTEX_PRIVATE_FLAG");
        assert_eq!(show(CLOCK, 1, x86), "CLOCK_MONOTONIC");
        assert_eq!(show(CLOCK, u64::MAX - 5, x86), "-6");
        assert_eq!(show(AT_FLAGS, 0, x86), "0");
        assert_eq!(show(AT_FLAGS, 0x1000, x86), "AT_EMPTY_PATH");
        assert_eq!(show(SIG_HOW, 7, x86), "7");
        assert_eq!(show(PTR, 0, x86), "NULL");
        assert_eq!(show(PATH, 0x1000, x86), "0x1000");
        assert_eq!(show(MODE, 0o644, x86), "0644");
    }
}
