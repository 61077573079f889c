//! Signal delivery on a real Linux signal frame, and `rt_sigreturn`.
//!
//! This file is the generic part: it decides where the frame goes
//! (alternate stack, red zone), what `siginfo` says, where the handler
//! returns to, and how the blocked mask changes. Each architecture lays out
//! its own frame exactly as Linux does (`arch/*/kernel/signal*.c`), because
//! unwinders (libgcc's, the kernel model's) read interrupted registers out
//! of it: `x86_64.rs`, `aarch64.rs` and `s390x.rs` here, each a `Frames`.

mod aarch64;
mod s390x;
mod x86_64;

use crate::arch::Arch;
use crate::bytes::GuestStruct;
use crate::emulator::Emulator;
use crate::error::Error;
use crate::memory::{Area, AreaKind, Perms, PAGE_SIZE};
use crate::process::{sig_bit, SigAction, PID, SIG_DFL, UID, UNBLOCKABLE};
use crate::signal;
use crate::syscall::outcome::{Outcome, SysError, SysResult};

/// `SA_SIGINFO`: the handler takes `(sig, info, ucontext)`.
pub const SA_SIGINFO: u64 = 0x4;
/// `SA_RESTORER`: `sa_restorer` is the return trampoline.
pub const SA_RESTORER: u64 = 0x0400_0000;
/// `SA_ONSTACK`: run the handler on the alternate stack.
pub const SA_ONSTACK: u64 = 0x0800_0000;
/// `SA_NODEFER`: do not block the signal during its handler.
pub const SA_NODEFER: u64 = 0x4000_0000;
/// `SA_RESETHAND`: reset to `SIG_DFL` on delivery.
pub const SA_RESETHAND: u64 = 0x8000_0000;
/// `ss_flags`: the alternate stack is in use.
pub const SS_ONSTACK: u64 = 1;
/// `ss_flags`: there is no alternate stack.
pub const SS_DISABLE: u64 = 2;
/// Size of `siginfo_t`.
pub const SIGINFO_SIZE: usize = 128;
/// Offset of the old-style (non-rt) sigreturn code in the trampoline page.
pub const OLD_SIGRETURN_OFFSET: u64 = 16;

/// `si_code` values.
#[allow(missing_docs)]
pub mod si_code {
    pub const SI_USER: i32 = 0;
    pub const SI_TKILL: i32 = -6;
    pub const SEGV_MAPERR: i32 = 1;
    pub const SEGV_ACCERR: i32 = 2;
    pub const ILL_ILLOPC: i32 = 1;
    pub const TRAP_BRKPT: i32 = 1;
    pub const FPE_INTDIV: i32 = 1;
}

/// Why a signal is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Sent by `kill` (`SI_USER`) or `tkill`/`tgkill` (`SI_TKILL`).
    Sent(i32),
    /// Raised by the instruction at the PC, with `si_code` and fault address.
    Fault(i32, u64),
}

/// Everything an architecture needs to build its frame.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    pub(crate) sig: u32,
    pub(crate) action: SigAction,
    /// The encoded `siginfo_t`.
    pub(crate) info: Vec<u8>,
    /// Blocked mask to restore on return (`uc_sigmask`).
    pub(crate) saved_mask: u64,
    /// The frame goes below this address (red zone and alternate stack applied).
    pub(crate) stack_top: u64,
    /// `uc_stack`: `ss_sp`, `ss_flags`, `ss_size`.
    pub(crate) uc_stack: (u64, u64, u64),
    /// Where the handler returns to.
    pub(crate) restorer: u64,
    /// Fault address for synchronous signals (0 otherwise).
    pub(crate) fault_addr: u64,
}

/// An architecture's signal frame.
pub(crate) trait Frames: Sync {
    /// Writes the frame and points the CPU at the handler.
    fn push(&self, emu: &mut Emulator, delivery: &Delivery) -> Result<(), SysError>;

    /// Restores what [`Frames::push`] saved (`rt` false: s390x's old `sigreturn`);
    /// returns the blocked mask saved in the frame.
    fn pop(&self, emu: &mut Emulator, rt: bool) -> Result<u64, SysError>;
}

fn frames(arch: Arch) -> &'static dyn Frames {
    match arch {
        Arch::X86_64 => &x86_64::X86_64,
        Arch::Aarch64 => &aarch64::Aarch64,
        Arch::S390x => &s390x::S390x,
    }
}

/// Maps the page holding the sigreturn trampolines (Linux puts them in the
/// vDSO; glibc on AArch64 and s390x relies on that). Returns its address.
pub(crate) fn map_trampoline(emu: &mut Emulator) -> Result<u64, Error> {
    let info = emu.info();
    let base = emu
        .pages()
        .find_free(PAGE_SIZE, crate::layout::MMAP_FLOOR, crate::layout::MMAP_TOP)
        .ok_or_else(|| Error::Setup { file: emu.image.file.clone(), problem: "no room for the vDSO page".into() })?;
    emu.map(Area { start: base, end: base + PAGE_SIZE, perms: Perms::READ | Perms::EXEC, kind: AreaKind::Vdso })?;
    let mut page = vec![0u8; PAGE_SIZE as usize];
    page[..info.sigreturn_code.len()].copy_from_slice(info.sigreturn_code);
    let old = OLD_SIGRETURN_OFFSET as usize;
    page[old..old + info.old_sigreturn_code.len()].copy_from_slice(info.old_sigreturn_code);
    emu.uc.mem_write(base, &page).map_err(emu.engine_error("write the vDSO page"))?;
    Ok(base)
}

/// Encodes a `siginfo_t`.
fn siginfo(emu: &Emulator, sig: u32, cause: Cause) -> Vec<u8> {
    let mut info = GuestStruct::new(emu.endian(), SIGINFO_SIZE);
    info.set(0, 4, u64::from(sig));
    match cause {
        Cause::Sent(code) => {
            info.set(8, 4, code as u32 as u64);
            info.set(16, 4, PID);
            info.set(20, 4, UID);
        }
        Cause::Fault(code, addr) => {
            info.set(8, 4, code as u32 as u64);
            info.set(16, 8, addr);
        }
    }
    info.into_bytes()
}

/// Whether `sp` is on the alternate signal stack.
fn on_altstack(emu: &Emulator, sp: u64) -> bool {
    emu.altstack.is_some_and(|(base, size)| sp > base && sp - base <= size)
}

/// Runs `sig`'s handler, which must exist: builds the frame, blocks signals,
/// and leaves the CPU at the handler. A frame that cannot be written kills
/// the process with SIGSEGV, as in Linux.
pub(crate) fn deliver(emu: &mut Emulator, sig: u32, cause: Cause) -> Result<(), Error> {
    let info = emu.info();
    let action = emu.signals.actions[sig as usize];
    let sp = emu.reg(info.sp)?;
    let uc_stack = match emu.altstack {
        None => (0, SS_DISABLE, 0),
        Some((base, size)) => (base, if on_altstack(emu, sp) { SS_ONSTACK } else { 0 }, size),
    };
    let mut stack_top = sp.wrapping_sub(info.red_zone);
    if action.flags & SA_ONSTACK != 0 && !on_altstack(emu, stack_top) {
        if let Some((base, size)) = emu.altstack {
            stack_top = base + size;
        }
    }
    let restorer = if action.flags & SA_RESTORER != 0 {
        action.restorer
    } else if action.flags & SA_SIGINFO == 0 && !info.old_sigreturn_code.is_empty() {
        emu.trampoline + OLD_SIGRETURN_OFFSET
    } else {
        emu.trampoline
    };
    let fault_addr = match cause {
        Cause::Fault(_, addr) => addr,
        Cause::Sent(_) => 0,
    };
    let delivery = Delivery {
        sig,
        action,
        info: siginfo(emu, sig, cause),
        saved_mask: emu.signals.blocked,
        stack_top,
        uc_stack,
        restorer,
        fault_addr,
    };
    let resume_pc = emu.reg(info.pc)?;
    match frames(emu.arch()).push(emu, &delivery) {
        Ok(()) => {}
        Err(SysError::Errno(_)) => return emu.terminate(signal::SIGSEGV),
        Err(SysError::Host(err)) => return Err(err),
    }
    // The handler runs as if called from the interrupted code with the
    // trampoline as its return address.
    let handler_sp = emu.reg(info.sp)?;
    emu.uc.get_data_mut().tracker.signal_delivered(restorer, handler_sp, resume_pc);
    let mut block = action.mask;
    if action.flags & SA_NODEFER == 0 {
        block |= sig_bit(sig);
    }
    emu.signals.blocked = (emu.signals.blocked | block) & !UNBLOCKABLE;
    if action.flags & SA_RESETHAND != 0 {
        emu.signals.actions[sig as usize] = SigAction { handler: SIG_DFL, ..SigAction::default() };
    }
    Ok(())
}

/// `rt_sigreturn` (and s390x's `sigreturn`): back to the interrupted code.
pub(crate) fn sigreturn(emu: &mut Emulator, rt: bool) -> SysResult {
    match frames(emu.arch()).pop(emu, rt) {
        Ok(mask) => {
            emu.signals.blocked = mask & !UNBLOCKABLE;
            emu.uc.get_data_mut().tracker.sigreturn();
            Ok(Outcome::Resume)
        }
        // A frame that cannot be read is fatal, as in Linux.
        Err(SysError::Errno(_)) => {
            emu.terminate(signal::SIGSEGV)?;
            Ok(Outcome::Resume)
        }
        Err(err) => Err(err),
    }
}

/// Reads the 128-bit or narrower registers `regs` into `out` at `offset`,
/// `stride` bytes apart, as raw little-endian register bytes.
pub(crate) fn save_long(
    emu: &Emulator,
    regs: impl Iterator<Item = i32>,
    out: &mut GuestStruct,
    offset: usize,
    stride: usize,
) -> Result<(), Error> {
    for (i, reg) in regs.enumerate() {
        let value = emu.uc.reg_read_long(reg).map_err(emu.engine_error("read a vector register"))?;
        out.set_bytes(offset + i * stride, &value);
    }
    Ok(())
}

/// The inverse of [`save_long`], for registers of `width` bytes.
pub(crate) fn restore_long(
    emu: &mut Emulator,
    regs: impl Iterator<Item = i32>,
    from: &GuestStruct,
    offset: usize,
    stride: usize,
    width: usize,
) -> Result<(), Error> {
    for (i, reg) in regs.enumerate() {
        let bytes = from.get_bytes(offset + i * stride, width).to_vec();
        emu.uc.reg_write_long(reg, &bytes).map_err(emu.engine_error("write a vector register"))?;
    }
    Ok(())
}

/// Writes the three `stack_t` words of `uc_stack` at `offset` (`ss_sp`, `ss_flags`, `ss_size`).
pub(crate) fn put_uc_stack(out: &mut GuestStruct, offset: usize, (sp, flags, size): (u64, u64, u64)) {
    out.set(offset, 8, sp).set(offset + 8, 4, flags).set(offset + 16, 8, size);
}
