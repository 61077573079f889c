//! The [`Machine`] trait: what each architecture's file implements where
//! code, not data, is needed. It lives apart from `mod.rs` so that the
//! architecture files, which `mod.rs` dispatches to, need not import it back.

use super::facts::ArchInfo;
use unicorn_engine::{uc_error, Unicorn};

/// The CPU as an architecture's code needs it: registers by Unicorn number
/// and memory to read an instruction. Any engine is one, whatever data it
/// carries, so the architectures need not know the engine's
/// (`engine.rs`, which is built on them).
pub trait Cpu {
    /// Reads register `reg`.
    fn read_reg(&self, reg: i32) -> Result<u64, uc_error>;
    /// Writes register `reg`.
    fn write_reg(&mut self, reg: i32, value: u64) -> Result<(), uc_error>;
    /// Reads guest memory at `addr`.
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<(), uc_error>;
}

impl<D> Cpu for Unicorn<'_, D> {
    fn read_reg(&self, reg: i32) -> Result<u64, uc_error> {
        self.reg_read(reg)
    }
    fn write_reg(&mut self, reg: i32, value: u64) -> Result<(), uc_error> {
        self.reg_write(reg, value)
    }
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<(), uc_error> {
        self.mem_read(addr, buf)
    }
}

/// What the emulator needs to know to run code of one architecture.
pub trait Machine: Sync {
    /// Constant facts.
    fn info(&self) -> &'static ArchInfo;

    /// Sets the CPU up as Linux leaves it at a program's entry: PC at `entry`,
    /// SP at `sp`, every other general register zero.
    fn init_cpu(&self, uc: &mut dyn Cpu, entry: u64, sp: u64) -> Result<(), uc_error> {
        let info = self.info();
        for &reg in info.gprs {
            uc.write_reg(reg, 0)?;
        }
        uc.write_reg(info.sp, sp)?;
        uc.write_reg(info.pc, entry)
    }

    /// The thread pointer (x86-64 FS base, TPIDR_EL0, s390x a0:a1).
    /// The thread pointer, from registers read with `read` (the engine's,
    /// or a parked thread's saved context).
    fn tls(&self, read: &dyn Fn(i32) -> Result<u64, uc_error>) -> Result<u64, uc_error>;

    /// Sets the thread pointer.
    fn set_tls(&self, uc: &mut dyn Cpu, value: u64) -> Result<(), uc_error>;

    /// Called from the syscall hook, while the CPU is inside the trap: returns
    /// the syscall number and leaves the PC after the trapping instruction.
    fn take_syscall(&self, uc: &mut dyn Cpu) -> Result<u64, uc_error> {
        uc.read_reg(self.info().syscall.nr)
    }

    /// What the CPU's interrupt `intno` (other than a system call) is; the
    /// Linux half decides the signal (`linux::signal::for_interrupt`).
    fn interrupt(&self, intno: u32) -> Interrupt;
}

/// The kinds of CPU interrupt (exception) a guest can raise besides a system
/// call, in terms every architecture shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// A divide error or other arithmetic exception.
    Arithmetic,
    /// A breakpoint or debug trap.
    Breakpoint,
    /// An illegal or privileged instruction (and s390x's program checks).
    Illegal,
    /// An access the MMU refused that the page table did not catch first.
    MemoryFault,
}
