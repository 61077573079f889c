//! s390x's signal frames (`arch/s390/kernel/signal.c`): the rt frame for
//! `SA_SIGINFO` handlers and the old one for the others, both with the
//! interrupted registers as `_sigregs`.

use super::frame::{put_uc_stack, Delivery, Frames, SA_SIGINFO, SIGINFO_SIZE};
use crate::linux::abi::outcome::SysError;
use crate::linux::emulator::Emulator;
use crate::machine::arch::s390x::INFO;
use crate::machine::bytes::{Endian, GuestStruct};
use unicorn_engine::RegisterS390X as R;

/// The s390x signal frames.
pub(super) struct S390x;

/// The register save area the ABI gives every frame (`__SIGNAL_FRAMESIZE`).
const CALLEE_AREA: usize = 160;
/// `siginfo` in the rt frame (after the save area and the 2-byte `svc_insn`, 8-aligned).
const RT_INFO: usize = 168;
/// `struct ucontext_extended` in the rt frame.
const RT_UC: usize = RT_INFO + SIGINFO_SIZE;
/// `uc_mcontext` (`_sigregs`) and `uc_sigmask` in the rt frame.
const RT_SIGREGS: usize = RT_UC + 40;
const RT_SIGMASK: usize = RT_SIGREGS + SIGREGS_SIZE;
/// The rt frame without `_sigregs_ext`, which Linux adds only with the
/// vector facility (not advertised here).
const RT_FRAME_SIZE: usize = RT_UC + 512;
/// Old-style frame: `struct sigcontext` (oldmask, `_sigregs *`), `_sigregs`, `signo`.
const OLD_SC: usize = CALLEE_AREA;
const OLD_SIGREGS: usize = OLD_SC + 16;
const OLD_SIGNO: usize = OLD_SIGREGS + SIGREGS_SIZE;
const OLD_FRAME_SIZE: usize = 536;
/// `_sigregs`: PSW (16), 16 GPRs, 16 access registers (4 bytes), FPC + pad, 16 FPRs.
const SIGREGS_SIZE: usize = 16 + 128 + 64 + 8 + 128;
/// PSW bits user code may change through a signal frame: condition code and program mask.
const PSW_MASK_USER: u64 = 0x0000_3f00_0000_0000;

fn ar(i: usize) -> i32 {
    R::A0 as i32 + i as i32
}

fn fpr(i: usize) -> i32 {
    R::F0 as i32 + i as i32
}

/// Stores the interrupted state as `_sigregs` at `at` (`save_sigregs`).
fn save_sigregs(emu: &Emulator, f: &mut GuestStruct, at: usize) -> Result<(), SysError> {
    f.set(at, 8, emu.reg(R::PSWM as i32)?).set(at + 8, 8, emu.reg(R::PC as i32)?);
    for i in 0..16 {
        f.set(at + 16 + 8 * i, 8, emu.reg(INFO.gprs[i])?);
        f.set(at + 144 + 4 * i, 4, emu.reg(ar(i))? & 0xffff_ffff);
        f.set(at + 216 + 8 * i, 8, emu.reg(fpr(i))?);
    }
    f.set(at + 208, 4, emu.reg(R::FPC as i32)? & 0xffff_ffff);
    Ok(())
}

/// Loads `_sigregs` from `at` (`restore_sigregs`).
fn restore_sigregs(emu: &mut Emulator, f: &GuestStruct, at: usize) -> Result<(), SysError> {
    let mask = emu.reg(R::PSWM as i32)?;
    emu.set_reg(R::PSWM as i32, (mask & !PSW_MASK_USER) | (f.get(at, 8) & PSW_MASK_USER))?;
    emu.set_reg(R::PC as i32, f.get(at + 8, 8))?;
    for i in 0..16 {
        emu.set_reg(INFO.gprs[i], f.get(at + 16 + 8 * i, 8))?;
        emu.set_reg(ar(i), f.get(at + 144 + 4 * i, 4))?;
        emu.set_reg(fpr(i), f.get(at + 216 + 8 * i, 8))?;
    }
    emu.set_reg(R::FPC as i32, f.get(at + 208, 4))?;
    Ok(())
}

impl Frames for S390x {
    fn min_stack(&self) -> Option<u64> {
        None
    }

    fn push(&self, emu: &mut Emulator, d: &Delivery) -> Result<(), SysError> {
        // Without SA_SIGINFO Linux builds the old frame, with a different layout
        // and return path (sigreturn, not rt_sigreturn).
        let rt = d.action.flags & SA_SIGINFO != 0;
        let size = if rt { RT_FRAME_SIZE } else { OLD_FRAME_SIZE };
        let frame = d.stack_top.wrapping_sub(size as u64) & !7;
        let old_sp = emu.reg(R::R15 as i32)?;
        let mut f = GuestStruct::new(Endian::Big, size);
        // The back chain links the frame to the interrupted one.
        f.set(0, 8, old_sp);
        if rt {
            f.set_bytes(RT_INFO, &d.info);
            put_uc_stack(&mut f, RT_UC + 16, d.uc_stack);
            save_sigregs(emu, &mut f, RT_SIGREGS)?;
            f.set(RT_SIGMASK, 8, d.saved_mask);
        } else {
            f.set(OLD_SC, 8, d.saved_mask).set(OLD_SC + 8, 8, frame + OLD_SIGREGS as u64);
            save_sigregs(emu, &mut f, OLD_SIGREGS)?;
            f.set(OLD_SIGNO, 4, u64::from(d.sig));
        }
        emu.write(frame, &f.into_bytes())?;

        emu.set_reg(R::R2 as i32, u64::from(d.sig))?;
        if rt {
            emu.set_reg(R::R3 as i32, frame + RT_INFO as u64)?;
            emu.set_reg(R::R4 as i32, frame + RT_UC as u64)?;
            emu.set_reg(R::R5 as i32, 0)?;
        } else {
            emu.set_reg(R::R3 as i32, frame + OLD_SC as u64)?;
            if d.fault_addr != 0 {
                // Synchronous signals also get the interruption code and address.
                emu.set_reg(R::R4 as i32, 0)?;
                emu.set_reg(R::R5 as i32, d.fault_addr)?;
                emu.set_reg(R::R6 as i32, 0)?;
            }
        }
        emu.set_reg(R::R14 as i32, d.restorer)?;
        emu.set_reg(R::R15 as i32, frame)?;
        emu.set_reg(R::PC as i32, d.action.handler)?;
        Ok(())
    }

    fn pop(&self, emu: &mut Emulator, rt: bool) -> Result<u64, SysError> {
        let frame = emu.reg(R::R15 as i32)?;
        let size = if rt { RT_FRAME_SIZE } else { OLD_FRAME_SIZE };
        let f = GuestStruct::from_bytes(Endian::Big, emu.read_vec(frame, size as u64)?);
        if rt {
            restore_sigregs(emu, &f, RT_SIGREGS)?;
            Ok(f.get(RT_SIGMASK, 8))
        } else {
            restore_sigregs(emu, &f, OLD_SIGREGS)?;
            Ok(f.get(OLD_SC, 8))
        }
    }
}
