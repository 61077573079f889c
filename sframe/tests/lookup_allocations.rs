//! A lookup allocates nothing: the kernel model calls it from contexts where
//! allocation is not allowed, and it must be cheap enough for every sample.
//! The same holds for [`sframe::IndexedSection`]'s lookups once it is built.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use sframe::write::{encode, RawFunction, RawRow, RawSection};
use sframe::{Abi, Section, Version};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Only this test's thread counts: the harness allocates on its own threads.
    static COUNTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn lookup_does_not_allocate() {
    for version in [Version::V1, Version::V2, Version::V3] {
        let functions = (0..200u64)
            .map(|i| {
                RawFunction::new(
                    0x1000 + i * 64,
                    60,
                    vec![RawRow::new(0, true, &[8]), RawRow::new(4, false, &[16, -16])],
                )
            })
            .collect();
        let table = RawSection {
            version,
            abi: Abi::Amd64,
            flags: 0x1,
            cfa_fixed_fp_offset: 0,
            cfa_fixed_ra_offset: -8,
            functions,
        };
        let bytes = encode(&table, 0).unwrap();
        let section = Section::parse(bytes.as_slice(), 0).unwrap();
        // The index allocates once, when it is built, never per lookup.
        let indexed = section.clone().indexed().unwrap();
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        COUNTING.with(|c| c.set(true));
        let (mut found, mut found_indexed) = (0, 0);
        for pc in 0xf00..0x1000 + 200 * 64 {
            found += usize::from(section.lookup(pc).unwrap().is_some());
            found_indexed += usize::from(indexed.lookup(pc).unwrap().is_some());
        }
        COUNTING.with(|c| c.set(false));
        let after = ALLOCATIONS.load(Ordering::SeqCst);
        assert_eq!(found, 200 * 60);
        assert_eq!(found_indexed, 200 * 60);
        assert_eq!(after - before, 0, "{version:?}: lookups allocated");
    }
}
