//! x86-64's signal frame (`arch/x86/kernel/signal_64.c`): `struct
//! rt_sigframe` with the legacy `fxsave` area for the FPU state.

use super::frame::{put_uc_stack, restore_long, save_long, Delivery, Frames, SIGINFO_SIZE};
use crate::error::Error;
use crate::linux::abi::outcome::SysError;
use crate::linux::emulator::Emulator;
use crate::machine::bytes::{Endian, GuestStruct};
use unicorn_engine::RegisterX86 as R;

/// The x86-64 signal frame.
pub(super) struct X86_64;

/// `struct rt_sigframe`: `pretcode`, `struct ucontext` (304 bytes), `siginfo`.
const FRAME_SIZE: usize = 8 + 304 + SIGINFO_SIZE;
/// `uc_mcontext` (`struct sigcontext`) within the frame.
const MCONTEXT: usize = 8 + 40;
/// `uc_sigmask` within the frame.
const SIGMASK: usize = 8 + 296;
/// `siginfo` within the frame.
const SIGINFO: usize = 8 + 304;
/// Size of the legacy `fxsave` area Linux uses when the CPU has no XSAVE
/// (Unicorn's qemu64 has none).
const FXSAVE_SIZE: usize = 512;
/// `uc_flags`: `UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS`.
const UC_FLAGS: u64 = 0x6;
/// `struct sigcontext` general registers, in order from offset 0.
const SIGCONTEXT_GPRS: [R; 17] = [
    R::R8,
    R::R9,
    R::R10,
    R::R11,
    R::R12,
    R::R13,
    R::R14,
    R::R15,
    R::RDI,
    R::RSI,
    R::RBP,
    R::RBX,
    R::RDX,
    R::RAX,
    R::RCX,
    R::RSP,
    R::RIP,
];
/// Flags a signal handler may change (Linux's `FIX_EFLAGS`): AC, OF, DF, TF,
/// SF, ZF, AF, PF, CF, RF.
const FIX_EFLAGS: u64 = 0x40000 | 0x800 | 0x400 | 0x100 | 0x80 | 0x40 | 0x10 | 0x4 | 0x1 | 0x10000;

fn xmm(i: usize) -> i32 {
    R::XMM0 as i32 + i as i32
}

fn st(i: usize) -> i32 {
    R::ST0 as i32 + i as i32
}

/// The `fxsave` image of the x87/SSE state.
fn save_fxsave(emu: &Emulator) -> Result<GuestStruct, Error> {
    let mut fx = GuestStruct::new(Endian::Little, FXSAVE_SIZE);
    let tags = emu.reg(R::FPTAG as i32)?;
    // fxsave keeps one "valid" bit per physical register instead of two tag bits.
    let abridged = (0..8).filter(|i| (tags >> (2 * i)) & 3 != 3).fold(0, |acc, i| acc | 1 << i);
    fx.set(0, 2, emu.reg(R::FPCW as i32)?).set(2, 2, emu.reg(R::FPSW as i32)?).set(4, 1, abridged);
    fx.set(24, 4, emu.reg(R::MXCSR as i32)?).set(28, 4, 0xffff);
    save_long(emu, (0..8).map(st), &mut fx, 32, 16)?;
    save_long(emu, (0..16).map(xmm), &mut fx, 160, 16)?;
    Ok(fx)
}

fn restore_fxsave(emu: &mut Emulator, fx: &GuestStruct) -> Result<(), Error> {
    emu.set_reg(R::FPCW as i32, fx.get(0, 2))?;
    // The status word sets the stack top, which ST(i) below is relative to.
    emu.set_reg(R::FPSW as i32, fx.get(2, 2))?;
    let abridged = fx.get(4, 1);
    let tags = (0..8).filter(|i| abridged & (1 << i) == 0).fold(0, |acc, i| acc | 3 << (2 * i));
    restore_long(emu, (0..8).map(st), fx, 32, 16, 10)?;
    emu.set_reg(R::FPTAG as i32, tags)?;
    emu.set_reg(R::MXCSR as i32, fx.get(24, 4))?;
    restore_long(emu, (0..16).map(xmm), fx, 160, 16, 16)
}

impl Frames for X86_64 {
    fn min_stack(&self) -> Option<u64> {
        Some((FXSAVE_SIZE + 64 + FRAME_SIZE + 16 + 8) as u64)
    }

    fn push(&self, emu: &mut Emulator, d: &Delivery) -> Result<(), SysError> {
        // As Linux: the FPU state 64-byte aligned below the stack top, then the
        // frame 16-byte aligned minus 8, as if `pretcode` had been pushed by a call.
        let fpstate = d.stack_top.wrapping_sub(FXSAVE_SIZE as u64) & !63;
        let frame = (fpstate.wrapping_sub(FRAME_SIZE as u64) & !15).wrapping_sub(8);
        let mut f = GuestStruct::new(Endian::Little, FRAME_SIZE);
        f.set(0, 8, d.restorer).set(8, 8, UC_FLAGS);
        put_uc_stack(&mut f, 24, d.uc_stack);
        for (i, reg) in SIGCONTEXT_GPRS.iter().enumerate() {
            f.set(MCONTEXT + 8 * i, 8, emu.reg(*reg as i32)?);
        }
        let eflags = emu.reg(R::EFLAGS as i32)?;
        f.set(MCONTEXT + 136, 8, eflags).set(MCONTEXT + 144, 2, 0x33).set(MCONTEXT + 150, 2, 0x2b);
        f.set(MCONTEXT + 168, 8, d.saved_mask).set(MCONTEXT + 176, 8, d.fault_addr).set(MCONTEXT + 184, 8, fpstate);
        f.set(SIGMASK, 8, d.saved_mask).set_bytes(SIGINFO, &d.info);
        let fx = save_fxsave(emu)?;
        emu.write(fpstate, &fx.into_bytes())?;
        emu.write(frame, &f.into_bytes())?;

        emu.set_reg(R::RSP as i32, frame)?;
        emu.set_reg(R::RDI as i32, u64::from(d.sig))?;
        emu.set_reg(R::RSI as i32, frame + SIGINFO as u64)?;
        emu.set_reg(R::RDX as i32, frame + 8)?;
        emu.set_reg(R::RAX as i32, 0)?;
        // The handler starts with DF and TF clear, as after a call.
        emu.set_reg(R::EFLAGS as i32, eflags & !(0x400 | 0x100 | 0x10000))?;
        emu.set_reg(R::RIP as i32, d.action.handler)?;
        Ok(())
    }

    fn pop(&self, emu: &mut Emulator, _rt: bool) -> Result<u64, SysError> {
        // `ret` in the handler has popped `pretcode`.
        let frame = emu.reg(R::RSP as i32)?.wrapping_sub(8);
        let f = GuestStruct::from_bytes(Endian::Little, emu.read_vec(frame, FRAME_SIZE as u64)?);
        let fpstate = f.get(MCONTEXT + 184, 8);
        let fx = if fpstate != 0 {
            Some(GuestStruct::from_bytes(Endian::Little, emu.read_vec(fpstate, FXSAVE_SIZE as u64)?))
        } else {
            None
        };
        for (i, reg) in SIGCONTEXT_GPRS.iter().enumerate() {
            emu.set_reg(*reg as i32, f.get(MCONTEXT + 8 * i, 8))?;
        }
        let eflags = emu.reg(R::EFLAGS as i32)?;
        emu.set_reg(R::EFLAGS as i32, (eflags & !FIX_EFLAGS) | (f.get(MCONTEXT + 136, 8) & FIX_EFLAGS))?;
        if let Some(fx) = fx {
            restore_fxsave(emu, &fx)?;
        }
        Ok(f.get(SIGMASK, 8))
    }
}
