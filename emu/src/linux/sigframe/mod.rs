//! Signal delivery on a real Linux signal frame, and `rt_sigreturn`.
//!
//! This file is the generic part: it decides where the frame goes
//! (alternate stack, red zone), what `siginfo` says, where the handler
//! returns to, and how the blocked mask changes. Each architecture lays out
//! its own frame exactly as Linux does (`arch/*/kernel/signal*.c`), because
//! unwinders (libgcc's, the kernel model's) read interrupted registers out
//! of it: `x86_64.rs`, `aarch64.rs` and `s390x.rs` here, each a `Frames`
//! (the trait and the helpers they share are in `frame.rs`).

mod aarch64;
mod frame;
mod s390x;
mod x86_64;

use crate::error::Error;
use crate::linux::abi::outcome::{Outcome, SysError, SysResult};
use crate::linux::emulator::Emulator;
use crate::linux::proc_state::{sig_bit, SigAction, SIG_DFL, UID, UNBLOCKABLE};
use crate::linux::signal;
use crate::machine::arch::Arch;
use crate::machine::bytes::GuestStruct;
use crate::machine::memory::{Area, AreaKind, Perms, PAGE_SIZE};
use frame::{Delivery, Frames};
pub use frame::{SA_SIGINFO, SIGINFO_SIZE};

/// `SA_NOCLDWAIT` (on SIGCHLD): ended children are not kept as zombies.
pub const SA_NOCLDWAIT: u64 = 2;
/// `SA_RESTART`: a system call the handler's signal interrupted starts again.
pub const SA_RESTART: u64 = 0x1000_0000;
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

fn frames(arch: Arch) -> &'static dyn Frames {
    match arch {
        Arch::X86_64 => &x86_64::X86_64,
        Arch::Aarch64 => &aarch64::Aarch64,
        Arch::S390x => &s390x::S390x,
    }
}

/// `AT_MINSIGSTKSZ` for `arch`: what its largest signal frame needs.
pub(crate) fn min_stack(arch: Arch) -> Option<u64> {
    frames(arch).min_stack()
}

/// Maps the page holding the sigreturn trampolines (Linux puts them in the
/// vDSO; glibc on AArch64 and s390x relies on that). Returns its address.
pub(crate) fn map_trampoline(emu: &mut Emulator) -> Result<u64, Error> {
    let info = emu.info();
    let base = emu
        .pages()
        .find_free(PAGE_SIZE, crate::linux::layout::MMAP_FLOOR, crate::linux::layout::MMAP_TOP)
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
            info.set(16, 4, u64::from(emu.pid));
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
        saved_mask: emu.signals.suspend_restore.take().unwrap_or(emu.signals.blocked),
        stack_top,
        uc_stack,
        restorer,
        fault_addr,
    };
    let resume_pc = emu.reg(info.pc)?;
    match frames(emu.arch()).push(emu, &delivery) {
        Ok(()) => {}
        Err(SysError::Errno(_) | SysError::Block(_)) => return emu.terminate(signal::SIGSEGV),
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
