//! The three guest architectures behind one small trait.
//!
//! The architecture itself is the kernel model's [`Arch`]; what the
//! emulator needs to know about each one is kept here, as data in an
//! [`ArchInfo`] table ([`info`]; the types are in `facts.rs`) where possible
//! and as [`Machine`] trait methods ([`machine`]) where code is needed (CPU
//! set-up, the TLS register, how a syscall is entered). Each architecture's
//! file holds its table and its `Machine`; its signal frame is in
//! [`sigframe`](crate::sigframe). Everything else in the crate is written
//! once against these.

pub(crate) mod aarch64;
pub(crate) mod facts;
pub(crate) mod s390x;
pub(crate) mod x86_64;

use crate::engine::Shared;
use unicorn_engine::{uc_error, Unicorn};

pub use facts::{ArchInfo, StatField, StatLayout, SyscallConv, SyscallEntry};
pub use kmodel::arch::Arch;

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

/// What the emulator needs to know to run code of one architecture.
pub trait Machine: Sync {
    /// Constant facts.
    fn info(&self) -> &'static ArchInfo;

    /// Sets the CPU up as Linux leaves it at a program's entry: PC at `entry`,
    /// SP at `sp`, every other general register zero.
    fn init_cpu(&self, uc: &mut Unicorn<'_, Shared>, entry: u64, sp: u64) -> Result<(), uc_error> {
        let info = self.info();
        for &reg in info.gprs {
            uc.reg_write(reg, 0)?;
        }
        uc.reg_write(info.sp, sp)?;
        uc.reg_write(info.pc, entry)
    }

    /// The thread pointer (x86-64 FS base, TPIDR_EL0, s390x a0:a1).
    fn tls(&self, uc: &Unicorn<'_, Shared>) -> Result<u64, uc_error>;

    /// Sets the thread pointer.
    fn set_tls(&self, uc: &mut Unicorn<'_, Shared>, value: u64) -> Result<(), uc_error>;

    /// Called from the syscall hook, while the CPU is inside the trap: returns
    /// the syscall number and leaves the PC after the trapping instruction.
    fn take_syscall(&self, uc: &mut Unicorn<'_, Shared>) -> Result<u64, uc_error> {
        uc.reg_read(self.info().syscall.nr)
    }

    /// The signal Linux sends for interrupt `intno` other than a syscall.
    fn interrupt_signal(&self, intno: u32) -> u32;
}
