//! Guest virtual memory: areas with permissions, and page residency.
//!
//! Every guest page belongs to at most one [`Area`] and is either *resident*
//! or not. A page becomes resident when the guest first touches it (the
//! engine's TLB-fill hook calls `PageTable::guest_touch`), when the kernel
//! side reads it in faultable mode, or when the loader writes it (the initial
//! stack). [`PageTable::evict`] makes pages non-resident again; their
//! contents stay as they were, as with a clean file page dropped from the
//! page cache or an anonymous page swapped out.
//!
//! Contents live in the engine's identity-mapped physical memory, host
//! memory the emulator owns (`ram.rs`); this table only says what the guest
//! may see.

use std::collections::{BTreeMap, BTreeSet};

use kmodel::memory::Access;

pub use crate::machine::page::{page_down, page_up, PAGE_SIZE};

/// Page permissions, with the bit values of `PROT_READ`, `PROT_WRITE`, `PROT_EXEC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct Perms(u8);

impl Perms {
    /// No access.
    pub const NONE: Perms = Perms(0);
    /// Readable.
    pub const READ: Perms = Perms(1);
    /// Writable.
    pub const WRITE: Perms = Perms(2);
    /// Executable.
    pub const EXEC: Perms = Perms(4);
    /// Readable and writable.
    pub const RW: Perms = Perms(3);

    /// Permissions from `mmap`/`mprotect` `PROT_*` bits (others ignored).
    pub fn from_prot(prot: u64) -> Perms {
        Perms((prot & 7) as u8)
    }

    /// The `PROT_*` bits.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// Whether every permission in `other` is granted.
    pub fn contains(self, other: Perms) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `access` is allowed.
    pub fn allows(self, access: AccessKind) -> bool {
        self.contains(access.needs())
    }
}

impl std::ops::BitOr for Perms {
    type Output = Perms;
    fn bitor(self, other: Perms) -> Perms {
        Perms(self.0 | other.0)
    }
}

impl std::fmt::Display for Perms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flag = |p: Perms, c: char| if self.contains(p) { c } else { '-' };
        write!(f, "{}{}{}", flag(Perms::READ, 'r'), flag(Perms::WRITE, 'w'), flag(Perms::EXEC, 'x'))
    }
}

/// A kind of memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessKind {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An instruction fetch.
    Execute,
}

impl std::fmt::Display for AccessKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::Execute => "execute",
        })
    }
}

impl AccessKind {
    fn needs(self) -> Perms {
        match self {
            AccessKind::Read => Perms::READ,
            AccessKind::Write => Perms::WRITE,
            AccessKind::Execute => Perms::EXEC,
        }
    }
}

/// What an area of memory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AreaKind {
    /// Pages of a file: a `PT_LOAD` segment's file part (program,
    /// interpreter, library) or any other file `mmap`ped.
    File(crate::machine::objects::Backing),
    /// Zero-filled pages of a `PT_LOAD` segment beyond its file part (`.bss`).
    Bss,
    /// The `brk` heap.
    Heap,
    /// The main thread's stack.
    Stack,
    /// Anonymous `mmap` memory.
    Anonymous,
    /// The page with the signal-return trampolines (Linux's vDSO).
    Vdso,
    /// The uprobes XOL page (`[uprobes]`).
    Uprobes,
}

/// A contiguous, page-aligned range of guest memory with one set of permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Area {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Permissions.
    pub perms: Perms,
    /// What the area holds.
    pub kind: AreaKind,
}

impl Area {
    /// What memory from `addr` on holds, for an area split there or grown
    /// or moved from there: the file further on, or the same kind.
    pub fn kind_at(&self, addr: u64) -> AreaKind {
        match &self.kind {
            AreaKind::File(backing) => AreaKind::File(backing.advanced(addr - self.start)),
            other => other.clone(),
        }
    }
}

/// Why a guest memory access failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemFault {
    /// No area covers the address.
    #[error("address {addr:#x} is not mapped")]
    Unmapped {
        /// First failing address.
        addr: u64,
    },
    /// The area does not allow the access.
    #[error("address {addr:#x} does not allow {access} access")]
    Protection {
        /// First failing address.
        addr: u64,
        /// The access attempted.
        access: AccessKind,
    },
    /// The page is not resident and the read may not fault.
    #[error("page at {addr:#x} is not resident")]
    NotResident {
        /// First failing address.
        addr: u64,
    },
}

impl MemFault {
    /// The first address that could not be accessed.
    pub fn addr(&self) -> u64 {
        match *self {
            MemFault::Unmapped { addr } | MemFault::Protection { addr, .. } | MemFault::NotResident { addr } => addr,
        }
    }
}

/// Page-fault and eviction counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStats {
    /// Pages brought in because the guest touched them.
    pub guest_faults: u64,
    /// Pages brought in by faultable kernel-side reads and writes.
    pub kernel_faults: u64,
    /// Pages made non-resident by [`PageTable::evict`].
    pub evictions: u64,
}

/// The guest's memory map and page residency.
#[derive(Debug, Default, Clone)]
pub struct PageTable {
    /// Areas by start address; they never overlap.
    areas: BTreeMap<u64, Area>,
    /// Addresses of resident pages.
    resident: BTreeSet<u64>,
    stats: PageStats,
    /// The last access the guest was refused (the cause of a SIGSEGV).
    last_fault: Option<MemFault>,
}

impl PageTable {
    /// The area containing `addr`.
    pub fn area(&self, addr: u64) -> Option<&Area> {
        self.areas.range(..=addr).next_back().map(|(_, area)| area).filter(|area| addr < area.end)
    }

    /// Bytes mapped, all areas together.
    pub fn mapped(&self) -> u64 {
        self.areas.values().map(|a| a.end - a.start).sum()
    }

    /// All areas, in address order.
    pub fn areas(&self) -> impl Iterator<Item = &Area> {
        self.areas.values()
    }

    /// Whether the page containing `addr` is resident.
    pub fn is_resident(&self, addr: u64) -> bool {
        self.resident.contains(&page_down(addr))
    }

    /// Number of resident pages.
    pub fn resident_pages(&self) -> usize {
        self.resident.len()
    }

    /// Fault and eviction counters.
    pub fn stats(&self) -> PageStats {
        self.stats
    }

    /// The last guest access that was refused.
    pub fn last_fault(&self) -> Option<MemFault> {
        self.last_fault
    }

    /// Records the cause of a fault found outside the TLB-fill hook.
    pub(crate) fn record_fault(&mut self, fault: Option<MemFault>) {
        self.last_fault = fault;
    }

    /// The guest touched `addr` with `access` (TLB fill): the page's
    /// permissions, or `None` if the access is not allowed. A non-resident
    /// page becomes resident.
    pub(crate) fn guest_touch(&mut self, addr: u64, access: AccessKind) -> Option<Perms> {
        // Unicorn's own page may be smaller (1 KiB on AArch64); residency is per 4 KiB page.
        let page = page_down(addr);
        let perms = match self.area(page) {
            None => {
                self.last_fault = Some(MemFault::Unmapped { addr: page });
                return None;
            }
            Some(area) if !area.perms.allows(access) => {
                self.last_fault = Some(MemFault::Protection { addr: page, access });
                return None;
            }
            Some(area) => area.perms,
        };
        if self.resident.insert(page) {
            self.stats.guest_faults += 1;
        }
        Some(perms)
    }

    /// Checks that `len` bytes at `addr` may be accessed with `access` without
    /// changing anything; with [`Access::NoFault`] (a kernel read that may not
    /// fault) every page must also be resident.
    pub fn check(&self, addr: u64, len: u64, access: AccessKind, mode: Access) -> Result<(), MemFault> {
        if len == 0 {
            return Ok(());
        }
        let last = addr.checked_add(len - 1).ok_or(MemFault::Unmapped { addr: u64::MAX })?;
        let mut page = page_down(addr);
        loop {
            let at = page.max(addr);
            let area = self.area(page).ok_or(MemFault::Unmapped { addr: at })?;
            if !area.perms.allows(access) {
                return Err(MemFault::Protection { addr: at, access });
            }
            if mode == Access::NoFault && !self.resident.contains(&page) {
                return Err(MemFault::NotResident { addr: at });
            }
            if page >= page_down(last) {
                return Ok(());
            }
            page += PAGE_SIZE;
        }
    }

    /// Makes the pages of `addr..addr + len` resident, counting each one
    /// brought in as a kernel fault. The range must be mapped.
    pub(crate) fn fault_in(&mut self, addr: u64, len: u64) {
        for page in pages(addr, len) {
            if self.resident.insert(page) {
                self.stats.kernel_faults += 1;
            }
        }
    }

    /// Makes pages resident without counting a fault (the loader's writes).
    pub(crate) fn mark_resident(&mut self, addr: u64, len: u64) {
        self.resident.extend(pages(addr, len));
    }

    /// Makes the pages of `start..end` non-resident; returns how many were resident.
    pub fn evict(&mut self, start: u64, end: u64) -> u64 {
        let evicted = self.resident.range(page_down(start)..end).count() as u64;
        self.forget(start, end);
        self.stats.evictions += evicted;
        evicted
    }

    /// Makes the pages of `start..end` non-resident without counting an
    /// eviction (their contents were discarded, as by `MADV_DONTNEED`).
    pub(crate) fn forget(&mut self, start: u64, end: u64) {
        let pages: Vec<u64> = self.resident.range(page_down(start)..end).copied().collect();
        for page in pages {
            self.resident.remove(&page);
        }
    }

    /// Whether no area intersects `start..end`.
    pub fn is_free(&self, start: u64, end: u64) -> bool {
        self.areas.range(..end).next_back().is_none_or(|(_, area)| area.end <= start)
    }

    /// The highest page-aligned `len`-byte gap between `floor` and `ceiling`.
    pub(crate) fn find_free(&self, len: u64, floor: u64, ceiling: u64) -> Option<u64> {
        let mut top = ceiling;
        for area in self.areas.range(..ceiling).rev().map(|(_, area)| area) {
            if area.end <= top {
                if let Some(start) = top.checked_sub(len).filter(|&start| start >= area.end && start >= floor) {
                    return Some(start);
                }
            }
            top = top.min(area.start);
        }
        top.checked_sub(len).filter(|&start| start >= floor)
    }

    /// Adds an area; the range must be free.
    pub(crate) fn insert(&mut self, area: Area) {
        debug_assert!(self.is_free(area.start, area.end), "overlapping area {area:?}");
        self.areas.insert(area.start, area);
    }

    /// Removes `start..end` from every area (splitting areas at the ends) and
    /// forgets the residency of its pages. Returns the ranges that were mapped.
    pub(crate) fn remove(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        self.split_at(start);
        self.split_at(end);
        let starts: Vec<u64> = self.areas.range(start..end).map(|(&s, _)| s).collect();
        let mut removed = Vec::with_capacity(starts.len());
        for s in starts {
            if let Some(area) = self.areas.remove(&s) {
                removed.push((area.start, area.end));
            }
        }
        self.forget(start, end);
        removed
    }

    /// Sets the permissions of `start..end`, which must be fully mapped
    /// (otherwise nothing changes and `false` is returned).
    pub(crate) fn protect(&mut self, start: u64, end: u64, perms: Perms) -> bool {
        if !self.is_covered(start, end) {
            return false;
        }
        self.split_at(start);
        self.split_at(end);
        for (_, area) in self.areas.range_mut(start..end) {
            area.perms = perms;
        }
        true
    }

    /// Whether every byte of `start..end` lies in some area.
    pub fn is_covered(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        while at < end {
            match self.area(at) {
                Some(area) => at = area.end,
                None => return false,
            }
        }
        true
    }

    /// Grows the area ending at `old_end` to end at `new_end` (the heap).
    pub(crate) fn extend(&mut self, old_end: u64, new_end: u64) -> bool {
        let Some(start) = self.area(old_end - 1).map(|area| area.start) else { return false };
        if !self.is_free(old_end, new_end) {
            return false;
        }
        if let Some(area) = self.areas.get_mut(&start) {
            area.end = new_end;
        }
        true
    }

    /// Splits the area containing `addr` so that an area starts at `addr`.
    fn split_at(&mut self, addr: u64) {
        let Some(area) = self.area(addr).filter(|area| area.start < addr).cloned() else { return };
        if let Some(low) = self.areas.get_mut(&area.start) {
            low.end = addr;
        }
        let kind = area.kind_at(addr);
        self.areas.insert(addr, Area { start: addr, kind, ..area });
    }
}

/// The page addresses covering `addr..addr + len`.
fn pages(addr: u64, len: u64) -> impl Iterator<Item = u64> {
    let first = page_down(addr);
    let count = if len == 0 { 0 } else { (page_down(addr.saturating_add(len - 1)) - first) / PAGE_SIZE + 1 };
    (0..count).map(move |i| first + i * PAGE_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PageTable {
        let mut t = PageTable::default();
        t.insert(Area { start: 0x1000, end: 0x5000, perms: Perms::READ, kind: AreaKind::Bss });
        t.insert(Area { start: 0x8000, end: 0x9000, perms: Perms::RW, kind: AreaKind::Anonymous });
        t
    }

    #[test]
    fn non_faultable_check_has_no_side_effects() {
        let mut t = table();
        assert_eq!(
            t.check(0x1ff0, 0x20, AccessKind::Read, Access::NoFault),
            Err(MemFault::NotResident { addr: 0x1ff0 })
        );
        assert_eq!(t.stats(), PageStats::default());
        assert!(t.check(0x1ff0, 0x20, AccessKind::Read, Access::Faultable).is_ok());
        t.fault_in(0x1ff0, 0x20);
        assert_eq!(t.stats().kernel_faults, 2);
        assert!(t.check(0x1ff0, 0x20, AccessKind::Read, Access::NoFault).is_ok());
        assert_eq!(
            t.check(0x4ff0, 0x20, AccessKind::Read, Access::Faultable),
            Err(MemFault::Unmapped { addr: 0x5000 })
        );
        assert_eq!(
            t.check(0x1000, 1, AccessKind::Write, Access::Faultable),
            Err(MemFault::Protection { addr: 0x1000, access: AccessKind::Write })
        );
    }

    #[test]
    fn split_protect_remove_and_find() {
        let mut t = table();
        assert!(t.protect(0x2000, 0x3000, Perms::RW));
        let perms: Vec<_> = t.areas().map(|a| (a.start, a.end, a.perms)).collect();
        assert_eq!(
            perms,
            [
                (0x1000, 0x2000, Perms::READ),
                (0x2000, 0x3000, Perms::RW),
                (0x3000, 0x5000, Perms::READ),
                (0x8000, 0x9000, Perms::RW)
            ]
        );
        assert!(!t.protect(0x4000, 0x6000, Perms::NONE));
        assert_eq!(t.guest_touch(0x3000, AccessKind::Read), Some(Perms::READ));
        assert_eq!(t.guest_touch(0x3000, AccessKind::Write), None);
        assert_eq!(t.remove(0x2800, 0x8800), [(0x2800, 0x3000), (0x3000, 0x5000), (0x8000, 0x8800)]);
        assert!(!t.is_resident(0x3000));
        assert_eq!(t.find_free(0x1000, 0x1000, 0x9000), Some(0x7800));
        assert_eq!(t.find_free(0x6000, 0x1000, 0x9000), Some(0x2800));
        assert_eq!(t.find_free(0x5000, 0x1000, 0x9000), Some(0x3800));
        assert_eq!(t.find_free(0x7000, 0x1000, 0x9000), None);
    }
}
