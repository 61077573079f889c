//! AArch64 (little-endian).

use super::{Arch, ArchInfo, Machine, StatField as F, StatLayout, SyscallConv, SyscallEntry};
use crate::bytes::{Endian, GuestStruct};
use crate::emulator::Emulator;
use crate::engine::Shared;
use crate::sigframe::{self, Delivery, Frames};
use crate::signal;
use crate::syscall::SysError;
use unicorn_engine::{uc_error, Mode, RegisterARM64 as R, Unicorn};

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

static INFO: ArchInfo = ArchInfo {
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

    fn tls(&self, uc: &Unicorn<'_, Shared>) -> Result<u64, uc_error> {
        uc.reg_read(R::TPIDR_EL0)
    }

    fn set_tls(&self, uc: &mut Unicorn<'_, Shared>, value: u64) -> Result<(), uc_error> {
        uc.reg_write(R::TPIDR_EL0, value)
    }

    fn interrupt_signal(&self, intno: u32) -> u32 {
        match intno {
            EXCP_BKPT => signal::SIGTRAP,
            3 | 4 => signal::SIGSEGV,
            _ => signal::SIGILL,
        }
    }
}

/// `struct rt_sigframe`: `siginfo` (128), then `struct ucontext` (176 bytes
/// before `uc_mcontext`, whose `sigcontext` is 288 bytes plus 4096 reserved).
const FRAME_SIZE: usize = 128 + 176 + 288 + 4096;
/// `struct ucontext` within the frame.
const UC: usize = 128;
/// `uc_sigmask` within the frame.
const SIGMASK: usize = UC + 40;
/// `uc_mcontext` within the frame.
const MCONTEXT: usize = UC + 176;
/// `__reserved` (the extension records) within the frame.
const RESERVED: usize = MCONTEXT + 288;
/// `fpsimd_context` magic and size.
const FPSIMD_MAGIC: u64 = 0x4650_8001;
const FPSIMD_SIZE: usize = 528;
/// PSTATE's condition flags, the only bits a handler can change.
const NZCV_MASK: u64 = 0xf000_0000;

fn q(i: usize) -> i32 {
    R::Q0 as i32 + i as i32
}

impl Frames for Aarch64 {
    fn push(&self, emu: &mut Emulator, d: &Delivery) -> Result<(), SysError> {
        // As Linux: a frame record (fp, lr) at the top, so frame-pointer walks
        // continue into the interrupted code, then the frame below it.
        let record = d.stack_top.wrapping_sub(16) & !15;
        let frame = record.wrapping_sub(FRAME_SIZE as u64);
        let mut f = GuestStruct::new(Endian::Little, FRAME_SIZE);
        f.set_bytes(0, &d.info);
        sigframe::put_uc_stack(&mut f, UC + 16, d.uc_stack);
        f.set(SIGMASK, 8, d.saved_mask).set(MCONTEXT, 8, d.fault_addr);
        for i in 0..31 {
            f.set(MCONTEXT + 8 + 8 * i, 8, emu.reg(INFO.gprs[i])?);
        }
        f.set(MCONTEXT + 256, 8, emu.reg(R::SP as i32)?).set(MCONTEXT + 264, 8, emu.reg(R::PC as i32)?);
        f.set(MCONTEXT + 272, 8, emu.reg(R::NZCV as i32)? & NZCV_MASK);
        f.set(RESERVED, 4, FPSIMD_MAGIC).set(RESERVED + 4, 4, FPSIMD_SIZE as u64);
        f.set(RESERVED + 8, 4, emu.reg(R::FPSR as i32)?).set(RESERVED + 12, 4, emu.reg(R::FPCR as i32)?);
        sigframe::save_long(emu, (0..32).map(q), &mut f, RESERVED + 16, 16)?;
        // The terminating null record follows (already zero).
        let mut rec = GuestStruct::new(Endian::Little, 16);
        rec.set(0, 8, emu.reg(R::X29 as i32)?).set(8, 8, emu.reg(R::X30 as i32)?);
        emu.write(record, &rec.into_bytes())?;
        emu.write(frame, &f.into_bytes())?;

        emu.set_reg(R::X0 as i32, u64::from(d.sig))?;
        emu.set_reg(R::X1 as i32, frame)?;
        emu.set_reg(R::X2 as i32, frame + UC as u64)?;
        emu.set_reg(R::SP as i32, frame)?;
        emu.set_reg(R::X29 as i32, record)?;
        emu.set_reg(R::X30 as i32, d.restorer)?;
        emu.set_reg(R::PC as i32, d.action.handler)?;
        Ok(())
    }

    fn pop(&self, emu: &mut Emulator, _rt: bool) -> Result<u64, SysError> {
        let frame = emu.reg(R::SP as i32)?;
        if frame % 16 != 0 {
            return Err(SysError::Errno(crate::syscall::errno::EFAULT));
        }
        let f = GuestStruct::from_bytes(Endian::Little, emu.read_vec(frame, FRAME_SIZE as u64)?);
        for i in 0..31 {
            emu.set_reg(INFO.gprs[i], f.get(MCONTEXT + 8 + 8 * i, 8))?;
        }
        emu.set_reg(R::SP as i32, f.get(MCONTEXT + 256, 8))?;
        emu.set_reg(R::PC as i32, f.get(MCONTEXT + 264, 8))?;
        emu.set_reg(R::NZCV as i32, f.get(MCONTEXT + 272, 8) & NZCV_MASK)?;
        // Walk the extension records for the FP/SIMD state, as the kernel does.
        let mut at = RESERVED;
        while at + 8 <= FRAME_SIZE {
            let (magic, size) = (f.get(at, 4), f.get(at + 4, 4) as usize);
            if magic == 0 || size < 8 || at + size > FRAME_SIZE {
                break;
            }
            if magic == FPSIMD_MAGIC && size == FPSIMD_SIZE {
                emu.set_reg(R::FPSR as i32, f.get(at + 8, 4))?;
                emu.set_reg(R::FPCR as i32, f.get(at + 12, 4))?;
                sigframe::restore_long(emu, (0..32).map(q), &f, at + 16, 16, 16)?;
            }
            at += size;
        }
        Ok(f.get(SIGMASK, 8))
    }
}
