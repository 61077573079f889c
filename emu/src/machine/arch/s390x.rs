//! s390x (z/Architecture, big-endian).
//!
//! Unicorn starts an s390x CPU as a machine would after reset, not as Linux
//! leaves a user process: 24-bit addressing and no additional floating-point
//! registers. [`S390x::init_cpu`] fixes both. Syscalls arrive with the PC
//! still on the `svc`, and the number is usually the `svc` immediate.

use super::facts::{ArchInfo, StatField as F, StatLayout, SyscallConv, SyscallEntry};
use super::machine::{Cpu, Interrupt, Machine};
use crate::machine::bytes::Endian;
use kmodel::arch::Arch;
use unicorn_engine::{uc_error, Mode, RegisterS390X as R};

/// The s390x machine.
pub(crate) struct S390x;

/// s390x's own `struct stat` (times before `st_blksize`).
static STAT: StatLayout = StatLayout {
    size: 144,
    fields: &[
        (F::Dev, 0, 8),
        (F::Ino, 8, 8),
        (F::Nlink, 16, 8),
        (F::Mode, 24, 4),
        (F::Uid, 28, 4),
        (F::Gid, 32, 4),
        (F::Rdev, 40, 8),
        (F::Size, 48, 8),
        (F::Time, 56, 8),
        (F::Time, 72, 8),
        (F::Time, 88, 8),
        (F::Blksize, 104, 8),
        (F::Blocks, 112, 8),
    ],
};

/// Unicorn's `svc` interrupt (QEMU's `EXCP_SVC`).
const EXCP_SVC: u32 = 2;
/// PSW mask bits 31 and 32: extended and basic addressing, i.e. 64-bit mode.
const PSW_MASK_64BIT: u64 = 0x1_8000_0000;
/// CR0 bit 45: additional floating-point registers (f1–f7, f8–f15 beyond the classic four).
const CR0_AFP: u64 = 0x4_0000;
/// CR0 bit 46: vector facility enable.
const CR0_VECTOR: u64 = 0x2_0000;
/// `svc` is `0x0a`, then the 8-bit syscall number.
const SVC_OPCODE: u8 = 0x0a;
/// Length of the `svc` instruction.
const SVC_LEN: u64 = 2;

/// The s390x facts (also read by its signal frame).
pub(crate) static INFO: ArchInfo = ArchInfo {
    arch: Arch::S390x,
    uc_arch: unicorn_engine::Arch::S390X,
    uc_mode: Mode::BIG_ENDIAN,
    endian: Endian::Big,
    elf_machine: goblin::elf::header::EM_S390,
    pc: R::PC as i32,
    sp: R::R15 as i32,
    fp: R::R11 as i32,
    ra: Some(R::R14 as i32),
    extra_dwarf: &[
        R::F0 as i32,
        R::F2 as i32,
        R::F4 as i32,
        R::F6 as i32,
        R::F1 as i32,
        R::F3 as i32,
        R::F5 as i32,
        R::F7 as i32,
        R::F8 as i32,
        R::F10 as i32,
        R::F12 as i32,
        R::F14 as i32,
        R::F9 as i32,
        R::F11 as i32,
        R::F13 as i32,
        R::F15 as i32,
    ],
    gprs: &[
        R::R0 as i32,
        R::R1 as i32,
        R::R2 as i32,
        R::R3 as i32,
        R::R4 as i32,
        R::R5 as i32,
        R::R6 as i32,
        R::R7 as i32,
        R::R8 as i32,
        R::R9 as i32,
        R::R10 as i32,
        R::R11 as i32,
        R::R12 as i32,
        R::R13 as i32,
        R::R14 as i32,
        R::R15 as i32,
    ],
    gpr_names: &["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"],
    syscall: SyscallConv {
        nr: R::R1 as i32,
        args: [R::R2 as i32, R::R3 as i32, R::R4 as i32, R::R5 as i32, R::R6 as i32, R::R7 as i32],
        ret: R::R2 as i32,
    },
    syscall_len: 2,
    clone_args: [1, 0, 2, 3, 4],
    entry: SyscallEntry::Interrupt(EXCP_SVC),
    // ESAN3, ZARCH, STFLE, LDISP, EIMM, HIGH_GPRS. No VXRS: glibc then keeps to
    // its z196 baseline routines, which Unicorn's CPU model fully implements.
    hwcap: 0x237,
    platform: "z900",
    pie_base: 0x2aa_0000_0000,
    stat: &STAT,
    mmap_args_in_memory: true,
    red_zone: 0,
    // The vDSO's __kernel_rt_sigreturn and __kernel_sigreturn: svc 173, svc 119.
    sigreturn_code: &[0x0a, 0xad],
    old_sigreturn_code: &[0x0a, 0x77],
};

impl Machine for S390x {
    fn info(&self) -> &'static ArchInfo {
        &INFO
    }

    fn init_cpu(&self, uc: &mut dyn Cpu, entry: u64, sp: u64) -> Result<(), uc_error> {
        for &reg in INFO.gprs {
            uc.write_reg(reg, 0)?;
        }
        let mask = uc.read_reg(R::PSWM as i32)?;
        uc.write_reg(R::PSWM as i32, mask | PSW_MASK_64BIT)?;
        let cr0 = uc.read_reg(R::CR0 as i32)?;
        uc.write_reg(R::CR0 as i32, cr0 | CR0_AFP | CR0_VECTOR)?;
        uc.write_reg(INFO.sp, sp)?;
        uc.write_reg(INFO.pc, entry)
    }

    fn tls(&self, read: &dyn Fn(i32) -> Result<u64, uc_error>) -> Result<u64, uc_error> {
        // glibc keeps the high half of the thread pointer in a0, the low half in a1.
        let high = read(R::A0.into())? & 0xffff_ffff;
        let low = read(R::A1.into())? & 0xffff_ffff;
        Ok(high << 32 | low)
    }

    fn set_tls(&self, uc: &mut dyn Cpu, value: u64) -> Result<(), uc_error> {
        uc.write_reg(R::A0 as i32, value >> 32)?;
        uc.write_reg(R::A1 as i32, value & 0xffff_ffff)
    }

    fn take_syscall(&self, uc: &mut dyn Cpu) -> Result<u64, uc_error> {
        let pc = uc.read_reg(R::PC as i32)?;
        let mut insn = [0u8; 2];
        uc.read_mem(pc, &mut insn)?;
        // glibc uses `svc N` for numbers below 256 and `svc 0` with r1 above.
        let nr = match insn {
            [SVC_OPCODE, n] if n != 0 => u64::from(n),
            _ => uc.read_reg(R::R1 as i32)?,
        };
        uc.write_reg(R::PC as i32, pc + SVC_LEN)?;
        Ok(nr)
    }

    fn interrupt(&self, _intno: u32) -> Interrupt {
        // A program check (interrupt 3) without its code: illegal instructions
        // (including gcc's __builtin_trap) are by far the common cause, since
        // bad addresses are caught by the page table before the CPU sees them.
        Interrupt::Illegal
    }
}
