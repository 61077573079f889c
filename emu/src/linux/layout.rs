//! The guest address-space layout, the same on every architecture and in
//! every run (there is no address-space randomisation).

use crate::machine::memory::PAGE_SIZE;

/// One past the highest user address (47 bits, valid on all three architectures).
pub const USER_TOP: u64 = 0x8000_0000_0000;
/// One past the top of the main stack (Linux x86-64's `STACK_TOP` without randomisation).
pub const STACK_TOP: u64 = USER_TOP - PAGE_SIZE;
/// Size of the main stack: the default `RLIMIT_STACK`, as under qemu-user.
pub const STACK_SIZE: u64 = 8 << 20;
/// Lowest stack address.
pub const STACK_BOTTOM: u64 = STACK_TOP - STACK_SIZE;
/// `mmap` areas are placed top-down from here (Linux's `mmap_base`: a 128 MiB gap below the stack top).
pub const MMAP_TOP: u64 = STACK_TOP - (128 << 20);
/// No mapping below this address (Linux's default `mmap_min_addr`).
pub const MMAP_FLOOR: u64 = 0x1_0000;
