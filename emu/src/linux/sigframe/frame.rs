//! What the per-architecture frame files share: the [`Frames`] trait they
//! implement, the [`Delivery`] they are given, the constants they need and
//! helpers to save and restore registers. It lives apart from `mod.rs` so
//! that those files, which `mod.rs` dispatches to, need not import it back.

use crate::error::Error;
use crate::linux::abi::outcome::SysError;
use crate::linux::emulator::Emulator;
use crate::linux::proc_state::SigAction;
use crate::machine::bytes::GuestStruct;

/// `SA_SIGINFO`: the handler takes `(sig, info, ucontext)`.
pub const SA_SIGINFO: u64 = 0x4;
/// Size of `siginfo_t`.
pub const SIGINFO_SIZE: usize = 128;

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

    /// `AT_MINSIGSTKSZ`: the stack the largest frame [`Frames::push`] writes
    /// needs, alignment included (`None` where Linux does not report it: s390x).
    fn min_stack(&self) -> Option<u64>;
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
