//! The general registers of a thread as the rest of the crate and its
//! users see them (kept apart from `emulator.rs` so that the process table,
//! which reports a killed thread's registers, need not import the machine).

use crate::machine::arch::Arch;

/// A snapshot of the general registers in an architecture-neutral form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regs {
    /// Architecture, which gives the meaning of [`Regs::gprs`].
    pub arch: Arch,
    /// Program counter.
    pub pc: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer (rbp, x29, r11).
    pub fp: u64,
    /// Link register (x30, r14); `None` on x86-64, where the return address is on the stack.
    pub ra: Option<u64>,
    /// Thread pointer.
    pub tls: u64,
    /// General registers by DWARF register number (names in [`ArchInfo::gpr_names`](crate::machine::arch::ArchInfo::gpr_names)).
    pub gprs: Vec<u64>,
    /// Registers after the GPRs in DWARF numbering that unwind rules may
    /// name: s390x f0–f15 as DWARF 16–31 (leaf functions park %r11 and %r14
    /// in them); empty elsewhere.
    pub extra: Vec<u64>,
}
