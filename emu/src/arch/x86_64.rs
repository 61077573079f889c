//! x86-64.

use super::{Arch, ArchInfo, Machine, StatField as F, StatLayout, SyscallConv, SyscallEntry};
use crate::bytes::{Endian, GuestStruct};
use crate::emulator::Emulator;
use crate::engine::Shared;
use crate::error::Error;
use crate::sigframe::{self, Delivery, Frames};
use crate::signal;
use crate::syscall::SysError;
use unicorn_engine::{uc_error, Mode, RegisterX86 as R, Unicorn};

/// The x86-64 machine.
pub(crate) struct X86_64;

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
        (F::Blksize, 56, 8),
        (F::Blocks, 64, 8),
        (F::Time, 72, 8),
        (F::Time, 88, 8),
        (F::Time, 104, 8),
    ],
};

static INFO: ArchInfo = ArchInfo {
    arch: Arch::X86_64,
    uc_arch: unicorn_engine::Arch::X86,
    uc_mode: Mode::MODE_64,
    endian: Endian::Little,
    elf_machine: goblin::elf::header::EM_X86_64,
    pc: R::RIP as i32,
    sp: R::RSP as i32,
    fp: R::RBP as i32,
    ra: None,
    extra_dwarf: &[],
    gprs: &[
        R::RAX as i32,
        R::RDX as i32,
        R::RCX as i32,
        R::RBX as i32,
        R::RSI as i32,
        R::RDI as i32,
        R::RBP as i32,
        R::RSP as i32,
        R::R8 as i32,
        R::R9 as i32,
        R::R10 as i32,
        R::R11 as i32,
        R::R12 as i32,
        R::R13 as i32,
        R::R14 as i32,
        R::R15 as i32,
    ],
    gpr_names: &[
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
    ],
    syscall: SyscallConv {
        nr: R::RAX as i32,
        args: [R::RDI as i32, R::RSI as i32, R::RDX as i32, R::R10 as i32, R::R8 as i32, R::R9 as i32],
        ret: R::RAX as i32,
    },
    entry: SyscallEntry::Instruction,
    // CPUID.1:EDX of Unicorn's qemu64 CPU, which is what Linux puts here.
    hwcap: 0x078b_fbfd,
    platform: "x86_64",
    pie_base: 0x5555_5555_4000,
    stat: &STAT,
    mmap_args_in_memory: false,
    red_zone: 128,
    // mov $15, %eax (rt_sigreturn); syscall
    sigreturn_code: &[0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05],
    old_sigreturn_code: &[],
};

impl Machine for X86_64 {
    fn info(&self) -> &'static ArchInfo {
        &INFO
    }

    fn tls(&self, uc: &Unicorn<'_, Shared>) -> Result<u64, uc_error> {
        uc.reg_read(R::FS_BASE)
    }

    fn set_tls(&self, uc: &mut Unicorn<'_, Shared>, value: u64) -> Result<(), uc_error> {
        uc.reg_write(R::FS_BASE, value)
    }

    fn interrupt_signal(&self, intno: u32) -> u32 {
        match intno {
            0 | 16 | 19 => signal::SIGFPE,
            1 | 3 => signal::SIGTRAP,
            6 => signal::SIGILL,
            _ => signal::SIGSEGV,
        }
    }
}

/// `struct rt_sigframe`: `pretcode`, `struct ucontext` (304 bytes), `siginfo`.
const FRAME_SIZE: usize = 8 + 304 + crate::sigframe::SIGINFO_SIZE;
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
    sigframe::save_long(emu, (0..8).map(st), &mut fx, 32, 16)?;
    sigframe::save_long(emu, (0..16).map(xmm), &mut fx, 160, 16)?;
    Ok(fx)
}

fn restore_fxsave(emu: &mut Emulator, fx: &GuestStruct) -> Result<(), Error> {
    emu.set_reg(R::FPCW as i32, fx.get(0, 2))?;
    // The status word sets the stack top, which ST(i) below is relative to.
    emu.set_reg(R::FPSW as i32, fx.get(2, 2))?;
    let abridged = fx.get(4, 1);
    let tags = (0..8).filter(|i| abridged & (1 << i) == 0).fold(0, |acc, i| acc | 3 << (2 * i));
    sigframe::restore_long(emu, (0..8).map(st), fx, 32, 16, 10)?;
    emu.set_reg(R::FPTAG as i32, tags)?;
    emu.set_reg(R::MXCSR as i32, fx.get(24, 4))?;
    sigframe::restore_long(emu, (0..16).map(xmm), fx, 160, 16, 16)
}

impl Frames for X86_64 {
    fn push(&self, emu: &mut Emulator, d: &Delivery) -> Result<(), SysError> {
        // As Linux: the FPU state 64-byte aligned below the stack top, then the
        // frame 16-byte aligned minus 8, as if `pretcode` had been pushed by a call.
        let fpstate = d.stack_top.wrapping_sub(FXSAVE_SIZE as u64) & !63;
        let frame = (fpstate.wrapping_sub(FRAME_SIZE as u64) & !15).wrapping_sub(8);
        let mut f = GuestStruct::new(Endian::Little, FRAME_SIZE);
        f.set(0, 8, d.restorer).set(8, 8, UC_FLAGS);
        sigframe::put_uc_stack(&mut f, 24, d.uc_stack);
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
