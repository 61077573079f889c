//! Guest memory as a [`ByteSource`], so the SFrame reader can decode
//! `.sframe` straight out of the emulated process, faulting or not.

use crate::linux::emulator::Emulator;
use kmodel::memory::Access;
use sframe::{ByteSource, Fault};
use std::cell::RefCell;

/// `len` bytes of guest memory at `base`, read in one [`Access`].
///
/// [`ByteSource::read_at`] takes `&self`, but a faultable read changes the
/// page table (pages become resident, faults are counted), so the view holds
/// the emulator in a `RefCell`.
pub struct GuestView<'e> {
    emu: RefCell<&'e mut Emulator>,
    base: u64,
    len: u64,
    mode: Access,
}

impl<'e> GuestView<'e> {
    /// A view of `base..base + len`.
    pub fn new(emu: &'e mut Emulator, base: u64, len: u64, mode: Access) -> Self {
        GuestView { emu: RefCell::new(emu), base, len, mode }
    }

    /// The guest address of the first byte.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The read mode.
    pub fn mode(&self) -> Access {
        self.mode
    }
}

impl Emulator {
    /// A [`sframe::ByteSource`] over `len` bytes of guest memory at `base`.
    pub fn view(&mut self, base: u64, len: u64, mode: Access) -> GuestView<'_> {
        GuestView::new(self, base, len, mode)
    }
}

impl std::fmt::Debug for GuestView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestView").field("base", &self.base).field("len", &self.len).field("mode", &self.mode).finish()
    }
}

impl ByteSource for GuestView<'_> {
    fn size(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let addr = self.base.checked_add(offset).ok_or(Fault { offset })?;
        self.emu
            .borrow_mut()
            .read(addr, buf, self.mode)
            .map_err(|fault| Fault { offset: fault.addr().saturating_sub(self.base).max(offset) })
    }
}
