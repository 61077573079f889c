//! AArch64's signal frame (`arch/arm64/kernel/signal.c`): `struct
//! rt_sigframe` below a frame record, with the FP/SIMD state as an
//! extension record.

use super::frame::{put_uc_stack, restore_long, save_long, Delivery, Frames};
use crate::linux::abi::outcome::SysError;
use crate::linux::emulator::Emulator;
use crate::machine::arch::aarch64::INFO;
use crate::machine::bytes::{Endian, GuestStruct};
use unicorn_engine::RegisterARM64 as R;

/// The AArch64 signal frame.
pub(super) struct Aarch64;

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
    fn min_stack(&self) -> Option<u64> {
        Some((FRAME_SIZE + 16) as u64)
    }

    fn push(&self, emu: &mut Emulator, d: &Delivery) -> Result<(), SysError> {
        // As Linux: a frame record (fp, lr) at the top, so frame-pointer walks
        // continue into the interrupted code, then the frame below it.
        let record = d.stack_top.wrapping_sub(16) & !15;
        let frame = record.wrapping_sub(FRAME_SIZE as u64);
        let mut f = GuestStruct::new(Endian::Little, FRAME_SIZE);
        f.set_bytes(0, &d.info);
        put_uc_stack(&mut f, UC + 16, d.uc_stack);
        f.set(SIGMASK, 8, d.saved_mask).set(MCONTEXT, 8, d.fault_addr);
        for i in 0..31 {
            f.set(MCONTEXT + 8 + 8 * i, 8, emu.reg(INFO.gprs[i])?);
        }
        f.set(MCONTEXT + 256, 8, emu.reg(R::SP as i32)?).set(MCONTEXT + 264, 8, emu.reg(R::PC as i32)?);
        f.set(MCONTEXT + 272, 8, emu.reg(R::NZCV as i32)? & NZCV_MASK);
        f.set(RESERVED, 4, FPSIMD_MAGIC).set(RESERVED + 4, 4, FPSIMD_SIZE as u64);
        f.set(RESERVED + 8, 4, emu.reg(R::FPSR as i32)?).set(RESERVED + 12, 4, emu.reg(R::FPCR as i32)?);
        save_long(emu, (0..32).map(q), &mut f, RESERVED + 16, 16)?;
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
            return Err(SysError::Errno(crate::linux::abi::errno::EFAULT));
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
                restore_long(emu, (0..32).map(q), &f, at + 16, 16, 16)?;
            }
            at += size;
        }
        Ok(f.get(SIGMASK, 8))
    }
}
