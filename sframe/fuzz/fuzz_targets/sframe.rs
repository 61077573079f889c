//! Arbitrary bytes as an `.sframe` section: decode, validate, dump and look
//! up must return values (never panic, hang or over-allocate), and the
//! indexed lookup must answer exactly as the plain one.
#![no_main]

use sframe::read::{dump, validate};
use sframe::Section;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first 8 bytes choose the load address, so PC-relative arithmetic
    // wraps in every way; the rest is the section.
    let (base, bytes) = match data.split_first_chunk::<8>() {
        Some((base, rest)) => (u64::from_le_bytes(*base), rest),
        None => (0, data),
    };
    for profile in [validate::Profile::Lab, validate::Profile::Kernel] {
        let _ = validate::check(bytes, base, &validate::Options { profile, text: Some((base, base.wrapping_add(0x10000))) });
    }
    let Ok(section) = Section::parse(bytes, base) else { return };
    if let Ok(listing) = dump::listing(&section) {
        let _ = dump::objdump_text(&listing, dump::ObjdumpStyle::for_header(section.header()));
    }
    // PCs around every function start and end, and a spread of others.
    let mut pcs = vec![base, base.wrapping_sub(1), u64::MAX, 0];
    for fde in section.fdes().take(64).flatten() {
        for delta in [0u64, 1, 7, 11, 16, 17] {
            pcs.push(fde.start.wrapping_add(delta));
            pcs.push(fde.start.wrapping_add(u64::from(fde.size)).wrapping_sub(delta));
        }
    }
    let indexed = section.clone().indexed().expect("a slice never faults");
    for pc in pcs {
        assert_eq!(indexed.lookup(pc), section.lookup(pc), "pc {pc:#x}");
    }
});
