//! Guest physical memory that the emulator owns: host buffers handed to
//! the engine with `uc_mem_map_ptr`.
//!
//! Unicorn keeps the memory of `uc_mem_map` to itself; memory mapped from
//! a host pointer can be mapped into a second engine too, which is what
//! exact stops need (`step.rs`: a second engine runs the last instructions
//! before a stop on the same memory, so the main engine's translations stay
//! valid), and it lets the emulator read a guest page in place
//! ([`Ram::page`]).
//!
//! Physical memory mirrors the mapped areas one to one (identity mapped), as
//! regions: each is part of one anonymous host mapping (zero-filled on first
//! touch, reserved lazily), and every region here is exactly one region of
//! the engine. Unmapping part of a region re-maps what is left of it from
//! the same host memory, because Unicorn's own split of a region copies it
//! into memory of its own. A host mapping is released when its last region
//! goes.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::rc::Rc;
use unicorn_engine::{uc_error, Prot, Unicorn};

/// Engine data that holds the engine's [`Ram`] (the engine's `Shared`; a
/// bound rather than that type, so that this file does not depend on the
/// engine, which holds the memory).
pub(crate) trait HasRam {
    /// The guest memory.
    fn ram(&self) -> &Ram;
    /// The guest memory, to change it.
    fn ram_mut(&mut self) -> &mut Ram;
}

/// One anonymous, private host mapping; unmapped when dropped.
#[derive(Debug)]
struct HostMap {
    ptr: NonNull<u8>,
    len: usize,
}

impl HostMap {
    /// `len` bytes of zero-filled host memory, reserved lazily (like
    /// `uc_mem_map`, so a large guest mapping costs nothing until touched).
    fn new(len: u64) -> Result<HostMap, uc_error> {
        let len = usize::try_from(len).map_err(|_| uc_error::NOMEM)?;
        // SAFETY: an anonymous mapping at an address of the kernel's choosing
        // touches no existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(uc_error::NOMEM);
        }
        let ptr = NonNull::new(ptr.cast()).ok_or(uc_error::NOMEM)?;
        Ok(HostMap { ptr, len })
    }
}

impl Drop for HostMap {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no region (hence no engine) uses it
        // any more: the engine data holding the regions is dropped after the
        // engine is closed.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A region of guest physical memory and the host memory behind it.
#[derive(Debug, Clone)]
struct Region {
    end: u64,
    map: Rc<HostMap>,
    /// Offset of the region's first byte in `map`.
    offset: usize,
}

impl Region {
    fn host(&self) -> *mut u8 {
        // SAFETY: regions stay within their host mapping.
        unsafe { self.map.ptr.as_ptr().add(self.offset) }
    }
}

/// A region as a second engine maps it: guest start, length, host address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) host: *mut u8,
}

/// Guest physical memory: the engine's regions and their host memory.
#[derive(Debug, Default)]
pub(crate) struct Ram {
    regions: BTreeMap<u64, Region>,
    /// Changes with every region mapped or unmapped here, and whenever
    /// permissions or residency rules change (`Emulator::flush_tlb`), so
    /// that a second engine knows to drop what it cached and never runs on
    /// host memory that has gone.
    pub(crate) epoch: u64,
}

impl Ram {
    /// The regions, in address order, as a second engine maps them.
    pub(crate) fn pieces(&self) -> impl Iterator<Item = Piece> + '_ {
        self.regions.iter().map(|(&start, r)| Piece { start, len: r.end - start, host: r.host() })
    }

    /// The 4 KiB page at `addr` (page-aligned down) as host bytes, if mapped.
    ///
    /// The bytes are the guest's own; the engine writes them only while it
    /// runs, which needs the emulator mutably, so they cannot change under
    /// the borrow.
    pub(crate) fn page(&self, addr: u64) -> Option<&[u8]> {
        let page = crate::machine::page::page_down(addr);
        let (start, region) = self.region_at(page)?;
        let len = crate::machine::page::PAGE_SIZE as usize;
        // SAFETY: the page lies inside the region, whose host memory stays
        // mapped while `self` is borrowed; see above for writes.
        Some(unsafe { std::slice::from_raw_parts(region.host().add((page - start) as usize), len) })
    }

    /// The region holding `addr`, with its start, if one does.
    fn region_at(&self, addr: u64) -> Option<(u64, &Region)> {
        let (&start, region) = self.regions.range(..=addr).next_back()?;
        (addr < region.end).then_some((start, region))
    }

    /// Copies guest memory at `addr` into `buf` straight from the host
    /// memory behind it (no engine call), across regions; `false` if any
    /// byte is not mapped. The caller checks permissions and residency.
    pub(crate) fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let mut done = 0;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let Some((start, region)) = self.region_at(at) else { return false };
            let n = ((region.end - at) as usize).min(buf.len() - done);
            // SAFETY: `at..at + n` lies inside the region, whose host memory
            // stays mapped while `self` is borrowed; the engine writes it only
            // while it runs, which needs the emulator mutably.
            let src = unsafe { std::slice::from_raw_parts(region.host().add((at - start) as usize), n) };
            buf[done..done + n].copy_from_slice(src);
            done += n;
        }
        true
    }
}

/// Maps `start..end` (free in the engine) to fresh zero-filled memory.
pub(crate) fn map<D: HasRam>(uc: &mut Unicorn<'_, D>, start: u64, end: u64) -> Result<(), uc_error> {
    let map = Rc::new(HostMap::new(end - start)?);
    add(uc, start, Region { end, map, offset: 0 })
}

/// Maps `region` at `start` into the engine and records it.
fn add<D: HasRam>(uc: &mut Unicorn<'_, D>, start: u64, region: Region) -> Result<(), uc_error> {
    // SAFETY: the host memory stays mapped as long as the region is
    // recorded in the engine's data, which outlives the engine.
    unsafe { uc.mem_map_ptr(start, region.end - start, Prot::ALL, region.host().cast())? };
    let ram = uc.get_data_mut().ram_mut();
    ram.regions.insert(start, region);
    ram.epoch += 1;
    Ok(())
}

/// Unmaps `start..end` (holes allowed): regions inside go, regions across
/// its ends keep their outer parts, in the same host memory.
pub(crate) fn unmap<D: HasRam>(uc: &mut Unicorn<'_, D>, start: u64, end: u64) -> Result<(), uc_error> {
    let hit: Vec<u64> = {
        let regions = &uc.get_data().ram().regions;
        let first = regions.range(..start).next_back().filter(|(_, r)| r.end > start).map(|(&s, _)| s);
        first.into_iter().chain(regions.range(start..end).map(|(&s, _)| s)).collect()
    };
    for s in hit {
        let Some(region) = uc.get_data().ram().regions.get(&s).cloned() else { continue };
        // Forgotten (and its memory possibly released) only once the engine
        // no longer maps it.
        uc.mem_unmap(s, region.end - s)?;
        let ram = uc.get_data_mut().ram_mut();
        ram.regions.remove(&s);
        ram.epoch += 1;
        let (cut_start, cut_end) = (start.max(s), end.min(region.end));
        release(&region, (cut_start - s) as usize, (cut_end - cut_start) as usize);
        if s < cut_start {
            add(uc, s, Region { end: cut_start, ..region.clone() })?;
        }
        if cut_end < region.end {
            let offset = region.offset + (cut_end - s) as usize;
            add(uc, cut_end, Region { end: region.end, map: region.map.clone(), offset })?;
        }
    }
    Ok(())
}

/// Gives the host pages of `len` bytes at `offset` in `region` back to the
/// host system (they read as zeros if mapped again; no region uses them).
fn release(region: &Region, offset: usize, len: usize) {
    // SAFETY: `sysconf` has no preconditions.
    let host_page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(0);
    if host_page == 0 {
        return;
    }
    let base = region.map.ptr.as_ptr() as usize + region.offset + offset;
    let first = base.next_multiple_of(host_page);
    let last = (base + len) / host_page * host_page;
    if first < last {
        // SAFETY: whole host pages inside the removed part of a mapping we
        // own, which no region uses any more; only their contents go.
        unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_DONTNEED) };
    }
}

/// Gives the `fork` child engine `child` a copy of the regions of `parent`
/// (pages that are all zeros are left to the fresh mapping's zero fill).
pub(crate) fn copy<D: HasRam>(parent: &Ram, child: &mut Unicorn<'_, D>) -> Result<(), uc_error> {
    for piece in parent.pieces() {
        map(child, piece.start, piece.start + piece.len)?;
        let to = child.get_data().ram().regions[&piece.start].host();
        let page = crate::machine::page::PAGE_SIZE as usize;
        for at in (0..piece.len as usize).step_by(page) {
            // SAFETY: both regions are `piece.len` bytes of mapped host memory,
            // distinct mappings; no engine runs during the copy.
            let from = unsafe { std::slice::from_raw_parts(piece.host.add(at), page) };
            if from.iter().any(|&b| b != 0) {
                unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), to.add(at), page) };
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicorn_engine::{Arch, Mode};

    #[derive(Default)]
    struct Data(Ram);

    impl HasRam for Data {
        fn ram(&self) -> &Ram {
            &self.0
        }

        fn ram_mut(&mut self) -> &mut Ram {
            &mut self.0
        }
    }

    fn engine() -> Unicorn<'static, Data> {
        Unicorn::new_with_data(Arch::X86, Mode::MODE_64, Data::default()).expect("an engine")
    }

    #[test]
    fn partial_unmap_keeps_the_rest_in_place_and_fork_copies_it() {
        let mut uc = engine();
        map(&mut uc, 0x1000, 0x6000).unwrap();
        uc.mem_write(0x1ff8, b"left").unwrap();
        uc.mem_write(0x2000, b"gone").unwrap();
        uc.mem_write(0x4000, b"right").unwrap();
        unmap(&mut uc, 0x2000, 0x4000).unwrap();
        let pieces: Vec<(u64, u64)> = uc.get_data().ram().pieces().map(|p| (p.start, p.len)).collect();
        assert_eq!(pieces, [(0x1000, 0x1000), (0x4000, 0x2000)]);
        // The engine and the host view agree on what is left.
        let mut buf = [0u8; 5];
        uc.mem_read(0x4000, &mut buf).unwrap();
        assert_eq!(&buf, b"right");
        assert_eq!(&uc.get_data().ram().page(0x1abc).unwrap()[0xff8..], b"left\0\0\0\0");
        assert!(uc.mem_read(0x2000, &mut buf).is_err());
        assert!(uc.get_data().ram().page(0x3fff).is_none());
        // Mapped again, the hole reads as zeros.
        map(&mut uc, 0x2000, 0x4000).unwrap();
        uc.mem_read(0x2000, &mut buf[..4]).unwrap();
        assert_eq!(&buf[..4], [0; 4]);

        let mut child = engine();
        copy(uc.get_data().ram(), &mut child).unwrap();
        uc.mem_write(0x4000, b"after").unwrap();
        child.mem_read(0x4000, &mut buf).unwrap();
        assert_eq!(&buf, b"right", "the child has a copy, not the parent's memory");
        assert_eq!(child.get_data().ram().pieces().count(), 3);
    }
}
