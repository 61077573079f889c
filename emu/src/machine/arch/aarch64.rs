//! AArch64 (little-endian).

use super::facts::{ArchInfo, StatField as F, StatLayout, SyscallConv, SyscallEntry};
use super::machine::{Cpu, Interrupt, Machine};
use crate::machine::bytes::Endian;
use kmodel::arch::Arch;
use unicorn_engine::{uc_error, Mode, RegisterARM64 as R};

/// The AArch64 machine.
pub(crate) struct Aarch64;

/// asm-generic's `struct stat`.
static STAT: StatLayout = StatLayout {
    size: 128,
    fields: &[
        (F::Dev, 0, 8),
        (F::Ino, 8, 8),
        (F::Mode, 16, 4),
        (F::Nlink, 20, 4),
        (F::Uid, 24, 4),
        (F::Gid, 28, 4),
        (F::Rdev, 32, 8),
        (F::Size, 48, 8),
        (F::Blksize, 56, 4),
        (F::Blocks, 64, 8),
        (F::Time, 72, 8),
        (F::Time, 88, 8),
        (F::Time, 104, 8),
    ],
};

/// Unicorn's `svc` exception (QEMU's `EXCP_SWI`).
const EXCP_SWI: u32 = 2;
/// `brk` (QEMU's `EXCP_BKPT`).
const EXCP_BKPT: u32 = 7;

/// The AArch64 facts (also read by its signal frame).
pub(crate) static INFO: ArchInfo = ArchInfo {
    arch: Arch::Aarch64,
    uc_arch: unicorn_engine::Arch::ARM64,
    uc_mode: Mode::ARM,
    endian: Endian::Little,
    elf_machine: goblin::elf::header::EM_AARCH64,
    pc: R::PC as i32,
    sp: R::SP as i32,
    fp: R::X29 as i32,
    ra: Some(R::X30 as i32),
    extra_dwarf: &[],
    gprs: &[
        R::X0 as i32,
        R::X1 as i32,
        R::X2 as i32,
        R::X3 as i32,
        R::X4 as i32,
        R::X5 as i32,
        R::X6 as i32,
        R::X7 as i32,
        R::X8 as i32,
        R::X9 as i32,
        R::X10 as i32,
        R::X11 as i32,
        R::X12 as i32,
        R::X13 as i32,
        R::X14 as i32,
        R::X15 as i32,
        R::X16 as i32,
        R::X17 as i32,
        R::X18 as i32,
        R::X19 as i32,
        R::X20 as i32,
        R::X21 as i32,
        R::X22 as i32,
        R::X23 as i32,
        R::X24 as i32,
        R::X25 as i32,
        R::X26 as i32,
        R::X27 as i32,
        R::X28 as i32,
        R::X29 as i32,
        R::X30 as i32,
        R::SP as i32,
    ],
    gpr_names: &[
        "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16",
        "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28", "x29", "x30", "sp",
    ],
    syscall: SyscallConv {
        nr: R::X8 as i32,
        args: [R::X0 as i32, R::X1 as i32, R::X2 as i32, R::X3 as i32, R::X4 as i32, R::X5 as i32],
        ret: R::X0 as i32,
    },
    syscall_len: 4,
    clone_args: [0, 1, 2, 4, 3],
    entry: SyscallEntry::Interrupt(EXCP_SWI),
    // FP, ASIMD, AES, PMULL, SHA1, SHA2, CRC32: Unicorn's default Cortex-A72.
    // HWCAP_CPUID is left out so glibc does not read MIDR_EL1.
    hwcap: 0xfb,
    platform: "aarch64",
    pie_base: 0x55_5555_5000,
    stat: &STAT,
    mmap_args_in_memory: false,
    red_zone: 0,
    // The vDSO's __kernel_rt_sigreturn: mov x8, #139; svc #0. libgcc's
    // unwinder recognises a signal frame by exactly these two words.
    sigreturn_code: &[0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4],
    old_sigreturn_code: &[],
};

impl Machine for Aarch64 {
    fn info(&self) -> &'static ArchInfo {
        &INFO
    }

    fn tls(&self, read: &dyn Fn(i32) -> Result<u64, uc_error>) -> Result<u64, uc_error> {
        read(R::TPIDR_EL0.into())
    }

    fn set_tls(&self, uc: &mut dyn Cpu, value: u64) -> Result<(), uc_error> {
        uc.write_reg(R::TPIDR_EL0 as i32, value)
    }

    fn interrupt(&self, intno: u32) -> Interrupt {
        match intno {
            EXCP_BKPT => Interrupt::Breakpoint,
            3 | 4 => Interrupt::MemoryFault,
            _ => Interrupt::Illegal,
        }
    }
}
