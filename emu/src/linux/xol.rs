//! The uprobes XOL area (`[uprobes]`): the page where the kernel copies a
//! probed instruction to single-step it out of line (`xol_add_vma()` in
//! `kernel/events/uprobes.c`). The emulator runs probed instructions in
//! place, so nothing executes from it; the page exists so that a PC the
//! kernel left in it (a deferred unwind walks from there) lies in a named
//! mapping, as it does on Linux, and `/proc/self/maps` shows it.

use crate::error::Error;
use crate::linux::emulator::Emulator;
use crate::linux::layout::{MMAP_FLOOR, MMAP_TOP};
use crate::machine::memory::{Area, AreaKind, Perms};

/// The XOL area's size: one page.
const XOL_SIZE: u64 = 0x1000;

impl Emulator {
    /// The running process's XOL area, mapped at its first use: upstream
    /// asks `get_unmapped_area()` for the page just below `TASK_SIZE`,
    /// which the stack holds, so the page comes from the top-down search,
    /// the highest free page below the mmap base. A forked child keeps the
    /// parent's copy here (Linux does not copy it, `VM_DONTCOPY`, and maps
    /// the child's own at the same free address at its first use).
    pub fn xol_area(&mut self) -> Result<u64, Error> {
        if let Some(area) = self.pages().areas().find(|a| a.kind == AreaKind::Uprobes) {
            return Ok(area.start);
        }
        let base = self.pages().find_free(XOL_SIZE, MMAP_FLOOR, MMAP_TOP).ok_or_else(|| Error::Setup {
            file: self.image.file.clone(),
            problem: "no room for the uprobes XOL page".into(),
        })?;
        self.map(Area {
            start: base,
            end: base + XOL_SIZE,
            perms: Perms::READ | Perms::EXEC,
            kind: AreaKind::Uprobes,
        })?;
        Ok(base)
    }
}
