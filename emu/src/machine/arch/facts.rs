//! What an architecture is, as data: registers, the system-call
//! convention, the kernel's `struct stat`, signal trampolines. One static
//! [`ArchInfo`] per architecture; [`info`](super::info) finds it.

use crate::machine::bytes::Endian;
use kmodel::arch::Arch;

/// Which registers carry a system call's number, arguments and result.
#[derive(Debug)]
pub struct SyscallConv {
    /// Register holding the number (s390x: only when the `svc` immediate is 0).
    pub nr: i32,
    /// Registers holding arguments 1 to 6.
    pub args: [i32; 6],
    /// Register receiving the result.
    pub ret: i32,
}

/// How a system call reaches the emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallEntry {
    /// x86-64 `syscall`: only an instruction hook sees it; Unicorn moves the
    /// PC past the instruction itself.
    Instruction,
    /// An interrupt with this number (`svc` on AArch64 and s390x).
    Interrupt(u32),
}

/// Offsets and widths of the fields of the kernel's `struct stat`.
#[derive(Debug)]
pub struct StatLayout {
    /// Size of the whole structure.
    pub size: usize,
    /// `(field, offset, width)` for every field the emulator fills.
    pub fields: &'static [(StatField, usize, usize)],
}

/// A field of `struct stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatField {
    /// `st_dev`.
    Dev,
    /// `st_ino`.
    Ino,
    /// `st_nlink`.
    Nlink,
    /// `st_mode`.
    Mode,
    /// `st_uid`.
    Uid,
    /// `st_gid`.
    Gid,
    /// `st_rdev`.
    Rdev,
    /// `st_size`.
    Size,
    /// `st_blksize`.
    Blksize,
    /// `st_blocks`.
    Blocks,
    /// `st_atime`, `st_mtime` and `st_ctime` seconds (all three get the same value).
    Time,
}

/// Constant facts about an architecture.
#[derive(Debug)]
pub struct ArchInfo {
    /// Which architecture this describes.
    pub arch: Arch,
    /// Unicorn's architecture.
    pub uc_arch: unicorn_engine::Arch,
    /// Unicorn's mode.
    pub uc_mode: unicorn_engine::Mode,
    /// Byte order of data shared with the kernel.
    pub endian: Endian,
    /// ELF `e_machine`.
    pub elf_machine: u16,
    /// Program counter register.
    pub pc: i32,
    /// Stack pointer register.
    pub sp: i32,
    /// Frame pointer register (rbp, x29, r11).
    pub fp: i32,
    /// Link register holding a return address, if the architecture has one.
    pub ra: Option<i32>,
    /// General registers in DWARF register-number order.
    pub gprs: &'static [i32],
    /// Names of [`ArchInfo::gprs`].
    pub gpr_names: &'static [&'static str],
    /// The system call convention.
    pub syscall: SyscallConv,
    /// Bytes of the system-call instruction (`syscall`, `svc`): a call
    /// restarted after a signal handler runs it again from there.
    pub syscall_len: u64,
    /// Where `clone` takes flags, new SP, parent TID pointer, child TID
    /// pointer and TLS, as argument indices (the order differs: x86-64's,
    /// the generic `CLONE_BACKWARDS`, s390x's `CLONE_BACKWARDS2`).
    pub clone_args: [usize; 5],
    /// How system calls are entered.
    pub entry: SyscallEntry,
    /// `AT_HWCAP`: features glibc may rely on, limited to what Unicorn's CPU has.
    pub hwcap: u64,
    /// `AT_PLATFORM`.
    pub platform: &'static str,
    /// Load address of a static-PIE program (Linux's `ELF_ET_DYN_BASE` idea,
    /// fixed because there is no address-space randomisation here).
    pub pie_base: u64,
    /// The kernel's `struct stat`.
    pub stat: &'static StatLayout,
    /// `mmap` takes a pointer to its six arguments (s390x's old mmap).
    pub mmap_args_in_memory: bool,
    /// Bytes below the stack pointer a signal frame must not touch.
    pub red_zone: u64,
    /// Code that calls `rt_sigreturn` (the vDSO trampoline).
    pub sigreturn_code: &'static [u8],
    /// Code that calls the old `sigreturn`, where there is one (s390x).
    pub old_sigreturn_code: &'static [u8],
    /// Unicorn ids of the registers DWARF numbers right after the GPRs
    /// (s390x: f0, f2, f4, f6, f1, f3, f5, f7, f8, f10, f12, f14, f9, f11,
    /// f13, f15 = DWARF 16–31); empty elsewhere.
    pub extra_dwarf: &'static [i32],
}
