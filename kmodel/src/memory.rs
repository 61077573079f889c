//! User memory as the kernel sees it: any read may fault, and whether a
//! fault may be served depends on the context (NMI: no; task work: yes).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use sframe::{ByteSource, Fault};

/// Whether a read may take a page fault: how the kernel reads user memory
/// in the model, and how the emulator's kernel side reads guest memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Task context, like `copy_from_user()`: a non-resident page is brought
    /// in (and counted).
    Faultable,
    /// NMI or IRQ context: a non-resident page makes the read fail, with no
    /// side effect.
    NoFault,
}

/// A failed user-memory read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum MemError {
    /// The page is not resident and the access may not fault.
    WouldFault {
        /// First address that could not be read.
        addr: u64,
    },
    /// Nothing is mapped there (a real `-EFAULT` even in task context).
    Unmapped {
        /// First address that could not be read.
        addr: u64,
    },
}

impl MemError {
    /// The address the read failed at.
    pub fn addr(&self) -> u64 {
        match *self {
            MemError::WouldFault { addr } | MemError::Unmapped { addr } => addr,
        }
    }
}

/// A task's user address space, as far as the unwinders need it.
pub trait UserMemory {
    /// Reads `buf.len()` bytes at `addr` with the given access mode.
    fn read(&self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemError>;

    /// Page faults served so far, if the memory counts them.
    fn fault_count(&self) -> u64 {
        0
    }

    /// A faultable read that leaves no trace: a non-resident page's bytes
    /// are read as a fault would read them, but the page stays
    /// non-resident and no fault is counted. Not something the kernel can
    /// do: a lab instrument's reads ([`Untracked`]) must not change what
    /// the model's own walks see or count. The default is an
    /// [`Access::Faultable`] read: right for memories whose reads have no
    /// side effect; the others override it.
    fn read_untracked(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.read(addr, buf, Access::Faultable)
    }

    /// A number that changes whenever this memory's mappings, protections
    /// or page residency may have changed, or `None` if the memory cannot
    /// say (the default: then nothing read from it is remembered). With
    /// [`UserMemory::stable_page`], what lets the model remember a
    /// lookup's result instead of reading the same bytes again.
    fn generation(&self) -> Option<u64> {
        None
    }

    /// True if the page holding `addr` is mapped, readable, resident and
    /// not writable: its bytes cannot change, and reading it cannot fault,
    /// until [`UserMemory::generation`] moves. The default: false.
    fn stable_page(&self, addr: u64) -> bool {
        let _ = addr;
        false
    }
}

/// User memory whose faultable reads leave no trace
/// ([`UserMemory::read_untracked`]): for walks that measure, beside the
/// model's own, without changing residency or fault counts.
pub struct Untracked<'m>(pub &'m dyn UserMemory);

/// User memory of which nothing can be read: what an NMI that strikes
/// the kernel's own code sees of a task's user memory in the lab (its
/// handlers run without the emulator's memory at hand; a deferred tracer
/// reads none in the NMI).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoUserMemory;

impl UserMemory for NoUserMemory {
    fn read(&self, addr: u64, _buf: &mut [u8], _access: Access) -> Result<(), MemError> {
        Err(MemError::WouldFault { addr })
    }
}

impl UserMemory for Untracked<'_> {
    fn read(&self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemError> {
        match access {
            Access::Faultable => self.0.read_untracked(addr, buf),
            // A read that may not fault changes nothing already.
            Access::NoFault => self.0.read(addr, buf, access),
        }
    }

    fn generation(&self) -> Option<u64> {
        self.0.generation()
    }

    fn stable_page(&self, addr: u64) -> bool {
        self.0.stable_page(addr)
    }
}

/// A byte source over part of user memory: how the kernel reads `.sframe`
/// straight out of the process, in the mode its context allows.
pub struct UserBytes<'m, M: ?Sized> {
    /// The memory.
    pub mem: &'m M,
    /// Address of the first byte.
    pub addr: u64,
    /// Length.
    pub len: u64,
    /// Fault mode.
    pub access: Access,
}

impl<M: UserMemory + ?Sized> ByteSource for UserBytes<'_, M> {
    fn size(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.mem
            .read(self.addr.wrapping_add(offset), buf, self.access)
            .map_err(|e| Fault { offset: e.addr().wrapping_sub(self.addr) })
    }
}

/// Bytes read by [`BlockedBytes`] at a time: a power of two that divides
/// every page size, so a block never spans two pages.
const BLOCK: u64 = 256;

/// [`UserBytes`] read a block at a time: a lookup reads a section field by
/// field (an FDE's start, then row after row of its FREs, 1 to 4 bytes
/// each), and each read of user memory has a fixed cost that dwarfs the
/// bytes. What the kernel reads and what it sees are the same: a block lies
/// in the page of the bytes asked for, and a page is readable, resident or
/// faulted in as a whole, so a block read fails where the read it serves
/// would, and then that read is made alone (its own error, its own fault
/// accounting); nothing writes user memory during a lookup. One lookup
/// or one registration owns a cache: the next starts empty.
pub struct BlockedBytes<'m, M: ?Sized> {
    /// The bytes.
    pub bytes: UserBytes<'m, M>,
    /// The last block read: its offset in the section, its length, its bytes.
    block: std::cell::RefCell<(u64, usize, [u8; BLOCK as usize])>,
}

impl<'m, M: UserMemory + ?Sized> BlockedBytes<'m, M> {
    /// `bytes`, cached.
    pub fn new(bytes: UserBytes<'m, M>) -> Self {
        BlockedBytes { bytes, block: std::cell::RefCell::new((0, 0, [0; BLOCK as usize])) }
    }
}

impl<M: UserMemory + ?Sized> ByteSource for BlockedBytes<'_, M> {
    fn size(&self) -> u64 {
        self.bytes.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let len = buf.len() as u64;
        let mut guard = self.block.borrow_mut();
        let (start, have, data) = &mut *guard;
        if offset >= *start && offset + len <= *start + *have as u64 {
            copy_field(buf, &data[(offset - *start) as usize..]);
            return Ok(());
        }
        // The block of the first byte asked for, within the section.
        let base = self.bytes.addr;
        let addr = base.wrapping_add(offset);
        let first = (addr & !(BLOCK - 1)).max(base);
        let end = (addr | (BLOCK - 1)).saturating_add(1).min(base.saturating_add(self.bytes.len));
        let fits = first <= addr && addr.checked_add(len).is_some_and(|e| e <= end);
        // Emptied while it is refilled: a failed read leaves it so.
        *have = 0;
        if fits && self.bytes.mem.read(first, &mut data[..(end - first) as usize], self.bytes.access).is_ok() {
            (*start, *have) = (first - base, (end - first) as usize);
            copy_field(buf, &data[(addr - first) as usize..]);
            return Ok(());
        }
        drop(guard);
        self.bytes.read_at(offset, buf)
    }
}

/// Copies the first `dst.len()` bytes of `src`: a field of 1, 2, 4 or 8
/// bytes as a fixed-size move (a copy of unknown length is a call).
#[inline]
fn copy_field(dst: &mut [u8], src: &[u8]) {
    match dst.len() {
        1 => dst[0] = src[0],
        2 => dst.copy_from_slice(&src[..2]),
        4 => dst.copy_from_slice(&src[..4]),
        8 => dst.copy_from_slice(&src[..8]),
        n => dst.copy_from_slice(&src[..n]),
    }
}

/// Page size of [`PagedMemory`].
pub const PAGE_SIZE: u64 = 4096;

/// A simple user memory for tests and the pure model: mapped pages with a
/// residency bit, fault counting, big- or little-endian word helpers.
#[derive(Default)]
pub struct PagedMemory {
    pages: BTreeMap<u64, Rc<Page>>,
    faults: Cell<u64>,
    /// The page the last read touched: a walk reads one stack page over
    /// and over, so most reads skip the map lookup. Cleared by `unmap`.
    last: Cell<Option<(u64, Rc<Page>)>>,
}

impl std::fmt::Debug for PagedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagedMemory").field("pages", &self.pages.len()).field("faults", &self.faults).finish()
    }
}

#[derive(Debug)]
struct Page {
    bytes: Box<[u8; PAGE_SIZE as usize]>,
    resident: Cell<bool>,
}

impl PagedMemory {
    /// An empty address space.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps zeroed, resident pages covering `addr..addr+len`.
    pub fn map(&mut self, addr: u64, len: u64) {
        let first = addr / PAGE_SIZE;
        let last = (addr + len.max(1) - 1) / PAGE_SIZE;
        for page in first..=last {
            self.pages.entry(page).or_insert_with(|| {
                Rc::new(Page { bytes: Box::new([0; PAGE_SIZE as usize]), resident: Cell::new(true) })
            });
        }
    }

    /// Writes bytes (mapping pages as needed; they become resident).
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        self.map(addr, data.len() as u64);
        // The read cache shares a page; drop it so the page can be changed.
        *self.last.get_mut() = None;
        for (i, &b) in data.iter().enumerate() {
            let a = addr + i as u64;
            let page = self.pages.get_mut(&(a / PAGE_SIZE)).expect("just mapped");
            let page = Rc::get_mut(page).expect("only the map holds a page");
            page.bytes[(a % PAGE_SIZE) as usize] = b;
            page.resident.set(true);
        }
    }

    /// Writes a 64-bit word in the given byte order.
    pub fn write_word(&mut self, addr: u64, value: u64, big_endian: bool) {
        let bytes = if big_endian { value.to_be_bytes() } else { value.to_le_bytes() };
        self.write(addr, &bytes);
    }

    /// Marks the pages covering `addr..addr+len` not resident (contents kept,
    /// as if swapped out or never touched).
    pub fn evict(&self, addr: u64, len: u64) {
        let first = addr / PAGE_SIZE;
        let last = (addr + len.max(1) - 1) / PAGE_SIZE;
        for (_, page) in self.pages.range(first..=last) {
            page.resident.set(false);
        }
    }

    /// Unmaps the pages covering `addr..addr+len` (contents lost): later
    /// reads there fail with [`MemError::Unmapped`], as after `munmap()`.
    pub fn unmap(&mut self, addr: u64, len: u64) {
        let first = addr / PAGE_SIZE;
        let last = (addr + len.max(1) - 1) / PAGE_SIZE;
        self.pages.retain(|&page, _| page < first || page > last);
        self.last.set(None);
    }

    /// True if the page holding `addr` is mapped and resident.
    pub fn is_resident(&self, addr: u64) -> bool {
        self.pages.get(&(addr / PAGE_SIZE)).is_some_and(|p| p.resident.get())
    }

    /// Faults served so far (faultable reads of non-resident pages).
    pub fn faults(&self) -> u64 {
        self.faults.get()
    }
}

impl UserMemory for PagedMemory {
    fn fault_count(&self) -> u64 {
        self.faults()
    }

    fn read_untracked(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        // Residency aside, the same read: the bytes are there either way.
        let len = buf.len() as u64;
        if len == 0 {
            return Ok(());
        }
        let Some(end) = addr.checked_add(len - 1) else { return Err(MemError::Unmapped { addr }) };
        self.check_pages(addr, addr / PAGE_SIZE, end / PAGE_SIZE, Access::Faultable)?;
        for (page, done, n) in page_spans(addr, buf.len()) {
            let off = ((addr + done as u64) % PAGE_SIZE) as usize;
            buf[done..done + n].copy_from_slice(&self.pages[&page].bytes[off..off + n]);
        }
        Ok(())
    }

    fn read(&self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemError> {
        let len = buf.len() as u64;
        if len == 0 {
            return Ok(());
        }
        let Some(end) = addr.checked_add(len - 1) else { return Err(MemError::Unmapped { addr }) };
        let (first, last) = (addr / PAGE_SIZE, end / PAGE_SIZE);
        // Check every page first: a failed read has no side effect. Most
        // reads (a word, a row) touch one page: one lookup serves both passes.
        if first == last {
            let page = match self.last.take() {
                Some((number, page)) if number == first => page,
                _ => Rc::clone(self.pages.get(&first).ok_or(MemError::Unmapped { addr })?),
            };
            let result = self.copy_out(&page, addr, buf, access);
            self.last.set(Some((first, page)));
            return result;
        }
        self.check_pages(addr, first, last, access)?;
        for (page, done, n) in page_spans(addr, buf.len()) {
            self.copy_out(&self.pages[&page], addr + done as u64, &mut buf[done..done + n], access)?;
        }
        Ok(())
    }
}

/// The pieces of a read of `len` bytes at `addr`, one per page touched:
/// (page number, offset in the buffer, length).
fn page_spans(addr: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize)> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        (done < len).then(|| {
            let at = addr + done as u64;
            let n = ((PAGE_SIZE - at % PAGE_SIZE) as usize).min(len - done);
            let span = (at / PAGE_SIZE, done, n);
            done += n;
            span
        })
    })
}

impl PagedMemory {
    /// Pages `first..=last` of a read at `addr` are all mapped, and with
    /// [`Access::NoFault`] resident: checked before anything is copied, so
    /// a failed read has no side effect.
    fn check_pages(&self, addr: u64, first: u64, last: u64, access: Access) -> Result<(), MemError> {
        for page in first..=last {
            let at = (page * PAGE_SIZE).max(addr);
            match self.pages.get(&page) {
                None => return Err(MemError::Unmapped { addr: at }),
                Some(p) if !p.resident.get() && access == Access::NoFault => {
                    return Err(MemError::WouldFault { addr: at })
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Reads `buf` from one page (the range must not cross it), faulting
    /// it in if `access` allows.
    fn copy_out(&self, page: &Page, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemError> {
        if !page.resident.get() {
            if access == Access::NoFault {
                return Err(MemError::WouldFault { addr });
            }
            page.resident.set(true);
            self.faults.set(self.faults.get() + 1);
        }
        let at = (addr % PAGE_SIZE) as usize;
        buf.copy_from_slice(&page.bytes[at..at + buf.len()]);
        Ok(())
    }
}

/// Copies up to `len` bytes from `addr`, page by page, and stops at the
/// first page that cannot be read: what a stack copy (perf's
/// `--call-graph dwarf`, the copy-on-exit variant) keeps. Returns the bytes
/// and the error that ended the copy early, if one did.
pub fn copy_user(mem: &dyn UserMemory, addr: u64, len: u64, access: Access) -> (Vec<u8>, Option<MemError>) {
    let mut bytes = Vec::new();
    let mut at = addr;
    while (bytes.len() as u64) < len {
        let chunk = (PAGE_SIZE - at % PAGE_SIZE).min(len - bytes.len() as u64);
        let mut buf = vec![0u8; chunk as usize];
        if let Err(e) = mem.read(at, &mut buf, access) {
            return (bytes, Some(e));
        }
        bytes.extend_from_slice(&buf);
        at += chunk;
    }
    (bytes, None)
}

/// User memory seen through a copy of the top of the stack: reads at or
/// above `base` come from `bytes` (and fail beyond them: the copy is all
/// there is), reads below it (text, `.sframe`) from `rest` — the binary,
/// as a user-space unwinder of a stack copy sees it.
pub struct CopiedStack<'a> {
    /// Address of the first copied byte (the user SP).
    pub base: u64,
    /// The copy.
    pub bytes: &'a [u8],
    /// Everything else.
    pub rest: &'a dyn UserMemory,
}

impl UserMemory for CopiedStack<'_> {
    fn read(&self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemError> {
        if addr < self.base {
            return self.rest.read(addr, buf, access);
        }
        let start = usize::try_from(addr - self.base).map_err(|_| MemError::Unmapped { addr })?;
        match start.checked_add(buf.len()).and_then(|end| self.bytes.get(start..end)) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            None => Err(MemError::Unmapped { addr }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Access, BlockedBytes, MemError, PagedMemory, Untracked, UserBytes, UserMemory};
    use sframe::{ByteSource, Fault};

    /// Blocked reads give what plain reads give, field by field, and fail,
    /// fault and count where plain reads do: a block never reaches into a
    /// page the field does not lie in.
    #[test]
    fn blocked_reads_are_plain_reads() {
        let data: Vec<u8> = (0..0x300u32).map(|i| (i * 7) as u8).collect();
        // Two pages; fields of every size, in the order a scan reads them,
        // the last running into the second page.
        let (start, len) = (0x1e80u64, data.len() as u64);
        let fields: Vec<(u64, usize)> = (0..len - 8).step_by(3).map(|o| (o, [1, 2, 4, 8][o as usize % 4])).collect();
        for access in [Access::NoFault, Access::Faultable] {
            for evicted in [false, true] {
                let reads = |blocked: bool| {
                    let mut mem = PagedMemory::new();
                    mem.write(start, &data);
                    if evicted {
                        mem.evict(0x2000, 0x1000);
                    }
                    let plain = UserBytes { mem: &mem, addr: start, len, access };
                    let cached = BlockedBytes::new(UserBytes { mem: &mem, addr: start, len, access });
                    let got: Vec<Result<Vec<u8>, Fault>> = fields
                        .iter()
                        .map(|&(offset, size)| {
                            let mut buf = vec![0; size];
                            let read = if blocked {
                                cached.read_at(offset, &mut buf)
                            } else {
                                plain.read_at(offset, &mut buf)
                            };
                            read.map(|()| buf)
                        })
                        .collect();
                    (got, mem.faults())
                };
                assert_eq!(reads(true), reads(false), "{access:?}, second page evicted: {evicted}");
            }
        }
    }

    /// An untracked read gives what a faultable read gives, and leaves the
    /// page as it was: not resident, no fault counted.
    #[test]
    fn untracked_reads_leave_no_trace() {
        let mut mem = PagedMemory::new();
        mem.write(0x1ff8, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
        mem.evict(0x1000, 0x2000);
        let untracked = Untracked(&mem);
        let mut quiet = [0u8; 16];
        untracked.read(0x1ff8, &mut quiet, Access::Faultable).expect("mapped");
        assert!(!mem.is_resident(0x1ff8) && !mem.is_resident(0x2000));
        assert_eq!(mem.faults(), 0);
        assert_eq!(untracked.read(0x1ff8, &mut [0u8; 8], Access::NoFault), Err(MemError::WouldFault { addr: 0x1ff8 }));
        assert_eq!(untracked.read(0x2ff8, &mut [0u8; 16], Access::Faultable), Err(MemError::Unmapped { addr: 0x3000 }));
        let mut loud = [0u8; 16];
        mem.read(0x1ff8, &mut loud, Access::Faultable).expect("mapped");
        assert_eq!((quiet, mem.faults()), (loud, 2));
    }
}
