//! The guest page size and page arithmetic, beneath both the memory map
//! (`memory.rs`) and the files mapped into it (`objects.rs`).

/// Size of a guest page on all three architectures.
pub const PAGE_SIZE: u64 = 4096;

/// Rounds `addr` down to its page.
pub fn page_down(addr: u64) -> u64 {
    addr & !(PAGE_SIZE - 1)
}

/// Rounds `addr` up to a page boundary (`None` past the top of the address space).
pub fn page_up(addr: u64) -> Option<u64> {
    addr.checked_add(PAGE_SIZE - 1).map(page_down)
}
