//! The three guest architectures behind one small trait.
//!
//! The architecture itself is the kernel model's [`Arch`]; what the
//! emulator needs to know about each one is kept here, as data in an
//! [`ArchInfo`] table ([`info`]; the types are in `facts.rs`) where possible
//! and as [`Machine`] trait methods ([`machine`]) where code is needed (CPU
//! set-up, the TLS register, how a syscall is entered; the trait is in
//! `machine.rs`). Each architecture's
//! file holds its table and its `Machine`; its signal frame is in
//! [`sigframe`](crate::linux::sigframe). Everything else in the crate is written
//! once against these.

pub(crate) mod aarch64;
pub(crate) mod facts;
mod machine;
pub(crate) mod s390x;
pub(crate) mod x86_64;

pub use facts::{ArchInfo, StatField, StatLayout, SyscallConv, SyscallEntry};
pub use kmodel::arch::Arch;
pub use machine::{Cpu, Interrupt, Machine};

/// The architecture's machine description.
pub fn machine(arch: Arch) -> &'static dyn Machine {
    match arch {
        Arch::X86_64 => &x86_64::X86_64,
        Arch::Aarch64 => &aarch64::Aarch64,
        Arch::S390x => &s390x::S390x,
    }
}

/// The architecture's constant facts.
pub fn info(arch: Arch) -> &'static ArchInfo {
    machine(arch).info()
}

/// The architecture whose ELF `e_machine` this is.
pub fn from_elf_machine(e_machine: u16) -> Option<Arch> {
    Arch::ALL.into_iter().find(|&arch| info(arch).elf_machine == e_machine)
}

/// Position of `arch` in per-architecture columns (syscall numbers).
pub(crate) fn index(arch: Arch) -> usize {
    match arch {
        Arch::X86_64 => 0,
        Arch::Aarch64 => 1,
        Arch::S390x => 2,
    }
}
