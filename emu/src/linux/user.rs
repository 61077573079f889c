//! The guest as the kernel model sees it: its user memory
//! ([`kmodel::memory::UserMemory`]) and its registers
//! ([`kmodel::arch::UserRegs`]).

use crate::linux::emulator::{Emulator, Regs};
use crate::machine::memory::MemFault;
use crate::machine::page::{page_down, PAGE_SIZE};
use kmodel::arch::Arch;
use kmodel::memory::{Access, MemError, UserMemory};
use std::cell::{Cell, RefCell};

/// The emulator's memory as a task's user address space.
///
/// [`UserMemory::read`] takes `&self`, but a faultable read changes the page
/// table (a non-resident page becomes resident and is counted), so the view
/// holds the emulator in a `RefCell`.
///
/// The kernel model reads `.sframe` and stacks a few bytes at a time, most
/// of them from pages it has just read (a binary search over the FDE table
/// touches a few pages, then a stack page over and over): the view
/// remembers pages that reads found mapped, readable and resident, with
/// their host bytes (eight, by page number), and serves reads
/// inside one with one copy and no page-table lookup. That is exact in
/// every mode: a resident page neither faults nor leaves a trace.
pub struct UserView<'e> {
    emu: RefCell<&'e mut Emulator>,
    /// Pages found readable and resident, and where their bytes are.
    pages: [Cell<Option<(u64, *const u8)>>; REMEMBERED],
}

/// How many pages a [`UserView`] remembers (a power of two).
const REMEMBERED: usize = 8;

/// The slot of [`UserView::pages`] for the page of `addr`.
fn slot(addr: u64) -> usize {
    (addr / PAGE_SIZE) as usize % REMEMBERED
}

impl<'e> UserView<'e> {
    /// A view of `emu`'s memory.
    pub fn new(emu: &'e mut Emulator) -> Self {
        UserView { emu: RefCell::new(emu), pages: Default::default() }
    }

    /// The bytes at `addr..addr + len` if they lie in a remembered page.
    fn remembered(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let (page, host) = self.pages[slot(addr)].get()?;
        let offset = addr.wrapping_sub(page);
        if offset.checked_add(len as u64)? > PAGE_SIZE {
            return None;
        }
        // SAFETY: `host` is the page's host memory as `resident_page` lent
        // it. The view holds the only reference to the emulator for its
        // whole life and only reads through it; no read unmaps memory or
        // makes a page unreadable or non-resident, so the page stays where
        // it was, with its bytes, as long as the view lives.
        Some(unsafe { std::slice::from_raw_parts(host.add(offset as usize), len) })
    }

    /// Reads `buf.len()` bytes at `addr` from a remembered page, or else
    /// with `read`, then remembers the page if it is now resident.
    fn read_with(
        &self,
        addr: u64,
        buf: &mut [u8],
        read: impl FnOnce(&mut Emulator, &mut [u8]) -> Result<(), MemFault>,
    ) -> Result<(), MemError> {
        if let Some(bytes) = self.remembered(addr, buf.len()) {
            buf.copy_from_slice(bytes);
            return Ok(());
        }
        let mut emu = self.emu.borrow_mut();
        read(&mut emu, buf).map_err(mem_error)?;
        self.remember(&emu, addr);
        Ok(())
    }

    /// Remembers the page of `addr` if it is readable and resident.
    fn remember(&self, emu: &Emulator, addr: u64) {
        if let Ok(bytes) = emu.resident_page(addr) {
            self.pages[slot(addr)].set(Some((page_down(addr), bytes.as_ptr())));
        }
    }
}

impl std::fmt::Debug for UserView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserView").finish_non_exhaustive()
    }
}

impl UserMemory for UserView<'_> {
    /// Faultable reads bring non-resident pages in and count them
    /// ([`PageStats::kernel_faults`](crate::PageStats::kernel_faults));
    /// non-faultable reads of a non-resident page fail with
    /// [`MemError::WouldFault`] and change nothing. Unmapped or unreadable
    /// memory is [`MemError::Unmapped`] (`-EFAULT`) in either mode.
    fn read(&self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemError> {
        self.read_with(addr, buf, |emu, buf| emu.read(addr, buf, access))
    }

    /// The bytes a faultable read would give, with no page brought in
    /// and no fault counted.
    fn read_untracked(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.read_with(addr, buf, |emu, buf| emu.read_untracked(addr, buf))
    }

    /// Pages brought in by faultable reads (and the emulator's own kernel-side
    /// accesses) since the program was loaded.
    fn fault_count(&self) -> u64 {
        self.emu.borrow().page_stats().kernel_faults
    }

    /// The engine's memory epoch: it moves with every map, unmap,
    /// protection change and eviction (`Emulator::flush_tlb`).
    fn generation(&self) -> Option<u64> {
        Some(self.emu.borrow().memory_epoch())
    }

    /// Mapped readable, resident, and not writable by the guest or the
    /// emulated kernel (shared writable mappings are refused, and a fork
    /// copies its memory): its bytes change only with the epoch.
    fn stable_page(&self, addr: u64) -> bool {
        self.emu.borrow().stable_page(addr)
    }
}

/// A failed read as the kernel model names it.
fn mem_error(fault: MemFault) -> MemError {
    match fault {
        MemFault::NotResident { addr } => MemError::WouldFault { addr },
        MemFault::Unmapped { addr } | MemFault::Protection { addr, .. } => MemError::Unmapped { addr },
    }
}

impl Emulator {
    /// The guest's memory as the kernel model reads it.
    pub fn user_memory(&mut self) -> UserView<'_> {
        UserView::new(self)
    }

    /// Runs `f` on the user memory of the image an `execve` just replaced,
    /// while the run is stopped at that call (`None` otherwise). Upstream's
    /// `de_thread()` takes the other threads through their exits before
    /// `exec_mmap()` replaces the mm, so their pending unwinds read the old
    /// image: the kernel model needs this view there.
    pub fn pre_exec_memory<R>(&mut self, f: impl FnOnce(&mut UserView<'_>) -> R) -> Option<R> {
        let old = self.pre_exec.take()?;
        let new = std::mem::replace(&mut self.uc, old);
        let result = f(&mut self.user_memory());
        self.pre_exec = Some(std::mem::replace(&mut self.uc, new));
        Some(result)
    }
}

impl From<&Regs> for kmodel::arch::UserRegs {
    /// The registers by DWARF number, as the model keeps them: x86-64 0–15
    /// (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8–r15) and 16 = rip;
    /// AArch64 x0–x30 and 31 = sp; s390x r0–r15 and the FPRs as 16–31. [`Regs::gprs`] is already
    /// in DWARF order; x86-64 adds the PC, which DWARF numbers as a register.
    fn from(regs: &Regs) -> Self {
        let arch = regs.arch;
        let mut gprs = regs.gprs.clone();
        gprs.extend_from_slice(&regs.extra);
        gprs.resize(kmodel::arch::UserRegs::gpr_count(arch), 0);
        if arch == Arch::X86_64 {
            gprs[16] = regs.pc;
        }
        kmodel::arch::UserRegs { arch, pc: regs.pc, gprs, mode: kmodel::arch::RegsMode::Native, probe: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_keep_dwarf_numbers() {
        let x86 = Regs {
            arch: Arch::X86_64,
            pc: 0x401000,
            sp: 0x7ff0,
            fp: 0x7ff8,
            ra: None,
            tls: 0,
            gprs: (0..16).map(|i| 100 + i).collect(),
            extra: Vec::new(),
        };
        let user = kmodel::arch::UserRegs::from(&x86);
        assert_eq!(user.arch, Arch::X86_64);
        assert_eq!(user.gprs.len(), 17);
        assert_eq!(user.dwarf(0), Some(100)); // rax
        assert_eq!(user.dwarf(7), Some(107)); // rsp
        assert_eq!(user.dwarf(16), Some(0x401000)); // rip
        assert_eq!(user.pc, 0x401000);

        let a64 = Regs { arch: Arch::Aarch64, gprs: (0..32).collect(), ra: Some(30), ..x86.clone() };
        let user = kmodel::arch::UserRegs::from(&a64);
        assert_eq!((user.gprs.len(), user.sp(), user.fp(), user.lr()), (32, 31, 29, Some(30)));

        let s390 =
            Regs { arch: Arch::S390x, gprs: (0..16).collect(), ra: Some(14), extra: (100..116).collect(), ..x86 };
        let user = kmodel::arch::UserRegs::from(&s390);
        assert_eq!((user.gprs.len(), user.sp(), user.fp(), user.lr()), (32, 15, 11, Some(14)));
        // The FPRs follow in DWARF order: 16 = f0, 17 = f2, …
        assert_eq!((user.dwarf(16), user.dwarf(31)), (Some(100), Some(115)));
    }
}
