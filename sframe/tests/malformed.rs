//! Hostile bytes: every truncation, every single-bit flip and absurd counts
//! must give errors (values), never a panic, a hang or a huge allocation.

mod common;

use sframe::read::dump;
use sframe::read::validate::{self, Options, Profile};
use sframe::{ByteSource, Error, Fault, Section};

/// Runs every entry point over `bytes`; returns whether the section parsed.
fn exercise(bytes: &[u8], base: u64) -> bool {
    for profile in [Profile::Lab, Profile::Kernel] {
        let report = validate::check(bytes, base, &Options { profile, text: Some((base, base + 0x100000)) });
        // A report is bounded whatever the input.
        assert!(report.problems.len() <= validate::MAX_PROBLEMS);
        for problem in &report.problems {
            assert!(!problem.to_string().is_empty());
        }
    }
    let Ok(section) = Section::parse(bytes, base) else { return false };
    if let Ok(listing) = dump::listing(&section) {
        let _ = dump::objdump_text(&listing, dump::ObjdumpStyle::for_header(section.header()));
    }
    let starts: Vec<u64> = section
        .fdes()
        .take(32)
        .flatten()
        .flat_map(|f| [f.start, f.start.wrapping_add(5), f.start.wrapping_add(u64::from(f.size)).wrapping_sub(1)])
        .collect();
    // Three ways to look up must give the same answer or the same error:
    // the plain lookup over the slice (rows scanned straight from memory),
    // over a source that does not expose its slice (every field read
    // checked), and the indexed lookup.
    let opaque = Section::parse(Opaque(bytes), base).expect("parses as the slice did");
    let indexed = section.clone().indexed().expect("a slice never faults");
    for pc in starts.into_iter().chain([base, 0, u64::MAX]) {
        let plain = section.lookup(pc);
        assert_eq!(opaque.lookup(pc), plain, "pc {pc:#x}: checked reads differ from the slice scan");
        assert_eq!(indexed.lookup(pc), plain, "pc {pc:#x}: the indexed lookup differs");
        assert_eq!(indexed.find_fde(pc), section.find_fde(pc), "pc {pc:#x}: the indexed FDE differs");
    }
    true
}

/// Section bytes behind a source that does not offer them as a slice, so
/// the reader takes its checked, field-by-field path.
struct Opaque<'a>(&'a [u8]);

impl ByteSource for Opaque<'_> {
    fn size(&self) -> u64 {
        self.0.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.0.read_at(offset, buf)
    }
}

#[test]
fn every_truncation_is_an_error() {
    let mut runs = 0;
    for v in common::all_with_data() {
        let full = Section::parse(v.bytes.as_slice(), v.base).unwrap();
        let data_end = full.layout().fres_end as usize;
        for len in 0..v.bytes.len() {
            runs += 1;
            let parsed = exercise(&v.bytes[..len], v.base);
            assert_eq!(parsed, len >= data_end, "{}: truncated to {len} of {} bytes", v.name, v.bytes.len());
        }
    }
    assert!(runs > 5_000);
}

#[test]
fn every_bit_flip_is_survived_and_header_flips_are_caught() {
    let mut flips = 0u64;
    let mut rejected = 0u64;
    for v in common::all_with_data() {
        let mut bytes = v.bytes.clone();
        for i in 0..bytes.len() {
            for bit in 0..8 {
                bytes[i] ^= 1 << bit;
                flips += 1;
                let report = validate::check(bytes.as_slice(), v.base, &Options::default());
                if !report.is_valid() {
                    rejected += 1;
                }
                // Magic, version and flag flips never pass validation.
                if i < 3 || (i == 3 && bit >= 3) {
                    assert!(!report.is_valid(), "{}: flip of byte {i} bit {bit} accepted", v.name);
                }
                exercise(&bytes, v.base);
                bytes[i] ^= 1 << bit;
            }
        }
    }
    println!("{flips} flips, {rejected} rejected by check");
    assert!(flips > 50_000);
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    let le = bytes[0] == 0xe2;
    let b = if le { value.to_le_bytes() } else { value.to_be_bytes() };
    bytes[at..at + 4].copy_from_slice(&b);
}

#[test]
fn absurd_header_counts_are_layout_errors() {
    let v = common::simple_frame_vectors().into_iter().find(|v| v.name == "test-x86_64-2.46.json").unwrap();
    for (field, at) in [("num_fdes", 8), ("fre_len", 16), ("fdeoff", 20), ("freoff", 24)] {
        for value in [u32::MAX, u32::MAX / 2, 0x10000] {
            let mut bytes = v.bytes.clone();
            put_u32(&mut bytes, at, value);
            let err = Section::parse(bytes.as_slice(), v.base).unwrap_err();
            assert!(matches!(err, Error::BadLayout(_)), "{field} = {value:#x}: {err}");
        }
    }
    // An absurd total FRE count is an accounting problem, found by check.
    let mut bytes = v.bytes.clone();
    put_u32(&mut bytes, 12, u32::MAX);
    let report = validate::check(bytes.as_slice(), v.base, &Options::default());
    assert!(report.problems.iter().any(|p| matches!(p, Error::FreAccounting(_))), "{:?}", report.problems);
}

#[test]
fn absurd_fde_counts_stop_at_the_end_of_the_fre_subsection() {
    for v in common::all_with_data() {
        let section = Section::parse(v.bytes.as_slice(), v.base).unwrap();
        let h = *section.header();
        let fde_size = h.version.fde_size() as usize;
        let fdes = section.layout().fdes_start as usize;
        for index in 0..h.num_fdes as usize {
            let mut bytes = v.bytes.clone();
            match h.version {
                // V1/V2: FRE count field at +12; V3: u16 in the attribute record.
                sframe::Version::V3 => {
                    let fde = section.fde(index as u32).unwrap();
                    let attr = (fde.fres_at - 5) as usize;
                    bytes[attr] = 0xff;
                    bytes[attr + 1] = 0xff;
                }
                _ => put_u32(&mut bytes, fdes + index * fde_size + 12, u32::MAX),
            }
            let broken = Section::parse(bytes.as_slice(), v.base).unwrap();
            assert!(dump::listing(&broken).is_err(), "{} FDE {index}", v.name);
            let report = validate::check(bytes.as_slice(), v.base, &Options::default());
            assert!(!report.is_valid());
            // Row decoding is bounded by the sub-section: each row is >= 2 bytes.
            assert!(report.fres <= u64::from(h.fre_len) / 2 + u64::from(h.num_fdes));
            exercise(&bytes, v.base);
        }
    }
}

/// FDEs that all claim one shared FRE block must not make work quadratic:
/// 20,000 FDEs × 1,000 rows would be 20 million row decodes.
#[test]
fn shared_fre_blocks_do_not_multiply_work() {
    use sframe::write::{encode, RawFunction, RawRow, RawSection};
    use sframe::{Abi, Version};
    let rows: Vec<RawRow> = (0..1000).map(|i| RawRow::new(i, true, &[8])).collect();
    let mut table = RawSection {
        version: Version::V2,
        abi: Abi::Amd64,
        flags: 0x1,
        cfa_fixed_fp_offset: 0,
        cfa_fixed_ra_offset: -8,
        functions: vec![RawFunction::new(0x1000, 2000, rows)],
    };
    let one = encode(&table, 0).unwrap();
    // Duplicate the single FDE 20,000 times in front of the same FRE block.
    let fde = one[28..48].to_vec();
    let fres = one[48..].to_vec();
    let n = 20_000u32;
    let mut bytes = one[..28].to_vec();
    put_u32(&mut bytes, 8, n);
    put_u32(&mut bytes, 24, n * 20);
    for i in 0..n {
        let mut f = fde.clone();
        f[0..4].copy_from_slice(&(0x1000 + i * 2000).to_le_bytes());
        bytes.extend_from_slice(&f);
    }
    bytes.extend_from_slice(&fres);
    let report = validate::check(bytes.as_slice(), 0, &Options::default());
    assert!(!report.is_valid());
    assert!(report.fres <= 2 * 1000, "decoded {} rows", report.fres);
    let section = Section::parse(bytes.as_slice(), 0).unwrap();
    assert!(matches!(dump::listing(&section), Err(Error::FreAccounting(_))));
    table.functions.clear();
}
