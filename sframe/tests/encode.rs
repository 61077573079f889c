//! The encoder against real sections (re-encoding every vector keeps every
//! FDE and row byte-identical in meaning and size choice) and the decoder on
//! what no vector covers: s390x and big-endian AArch64 in V2 and V3.

mod common;

use sframe::read::dump::{self, ObjdumpStyle};
use sframe::write::{encode, RawFunction, RawRow, RawSection, Word};
use sframe::{Abi, Section, Version};

#[test]
fn re_encoding_every_vector_preserves_every_row_and_gas_size_choices() {
    for v in common::all_with_data() {
        let original = Section::parse(v.bytes.as_slice(), v.base).unwrap();
        let table = RawSection::decode(&original).unwrap();
        let bytes = encode(&table, v.base).unwrap();
        let again = Section::parse(bytes.as_slice(), v.base).unwrap();
        let (a, b) = (dump::listing(&original).unwrap(), dump::listing(&again).unwrap());
        assert_eq!(a.header.num_fres, b.header.num_fres, "{}", v.name);
        for (fa, fb) in a.functions.iter().zip(&b.functions) {
            assert_eq!(
                (fa.fde.start, fa.fde.size, fa.fde.info, fa.fde.info2),
                (fb.fde.start, fb.fde.size, fb.fde.info, fb.fde.info2),
                "{}",
                v.name
            );
            for (ra, rb) in fa.rows.iter().zip(&fb.rows) {
                // Same info byte = same word count, same (smallest) word size.
                assert_eq!(
                    (ra.start, ra.info, &ra.words),
                    (rb.start, rb.info, &rb.words),
                    "{} FDE {}",
                    v.name,
                    fa.fde.index
                );
            }
        }
        let style = ObjdumpStyle::for_header(original.header());
        assert_eq!(dump::objdump_text(&a, style), dump::objdump_text(&b, style), "{}", v.name);
    }
}

fn row(start: u32, sp: bool, words: &[i32]) -> RawRow {
    RawRow { start, cfa_base_sp: sp, ra_mangled: false, words: words.iter().map(|&w| Word::Signed(w)).collect() }
}

fn function(start: u64, size: u32, flex: bool, rows: Vec<RawRow>) -> RawFunction {
    RawFunction { start, size, mask: false, rep_size: 0, pauth_key_b: false, signal: false, flex, rows }
}

fn rows_text(bytes: &[u8], base: u64) -> Vec<String> {
    let section = Section::parse(bytes, base).unwrap();
    let text = dump::objdump_text(&dump::listing(&section).unwrap(), ObjdumpStyle::for_header(section.header()));
    text.lines()
        .filter(|l| l.starts_with("    0"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// binutils' `cfi-sframe-s390x-fpra-offset-1.d` (V2): CFA words are stored
/// as (offset - 160) / 8, so a stored 0 reads sp+160; RA and FP slots.
#[test]
fn s390x_v2_stack_slots_and_scaled_cfa() {
    let table = RawSection {
        version: Version::V2,
        abi: Abi::S390x,
        flags: 0x4,
        cfa_fixed_fp_offset: 0,
        cfa_fixed_ra_offset: 0,
        functions: vec![function(
            0,
            34,
            false,
            vec![
                row(0, true, &[0]),
                row(6, true, &[0, -48]),
                row(0xc, true, &[0, -48, -72]),
                row(0x1a, true, &[0, -48]),
                row(0x20, true, &[0]),
            ],
        )],
    };
    let bytes = encode(&table, 0).unwrap();
    assert_eq!(&bytes[..5], &[0xde, 0xe2, 2, 4, 4], "big-endian magic, V2, PCREL, ABI 4");
    assert_eq!(
        rows_text(&bytes, 0),
        [
            "0000000000000000 sp+160 u u",
            "0000000000000006 sp+160 u c-48",
            "000000000000000c sp+160 c-72 c-48",
            "000000000000001a sp+160 u c-48",
            "0000000000000020 sp+160 u u",
        ]
    );
    let section = Section::parse(bytes.as_slice(), 0).unwrap();
    let found = section.lookup(0xd).unwrap().unwrap();
    let sframe::RowRule::Frame(frame) = found.rule else { panic!() };
    assert_eq!(frame.cfa.offset, 160);
}

/// V2 s390x: odd RA/FP words name registers (`(reg << 1) | 1`), an RA word
/// of 0 is padding ("FP saved, RA not"); V3 expresses registers with flex
/// FDEs (`cfi-sframe-s390x-fpra-register-1.d`: r16+0 / r17+0).
#[test]
fn s390x_registers_in_v2_words_and_v3_flex() {
    let v2 = RawSection {
        version: Version::V2,
        abi: Abi::S390x,
        flags: 0x5,
        cfa_fixed_fp_offset: 0,
        cfa_fixed_ra_offset: 0,
        functions: vec![function(
            0x1000,
            26,
            false,
            vec![row(0, true, &[0]), row(4, true, &[0, 33]), row(8, true, &[0, 33, 35]), row(0x10, true, &[2, 0, -72])],
        )],
    };
    let bytes = encode(&v2, 0x2000).unwrap();
    assert_eq!(
        rows_text(&bytes, 0x2000),
        [
            "0000000000001000 sp+160 u u",
            "0000000000001004 sp+160 u r16",
            "0000000000001008 sp+160 r17 r16",
            "0000000000001010 sp+176 c-72 U",
        ]
    );
    let flex_pair = |reg: u32| [Word::Unsigned(reg << 3 | 1), Word::Signed(0)];
    let cfa = [Word::Unsigned(15 << 3 | 1), Word::Signed(0)];
    let v3 = RawSection {
        version: Version::V3,
        functions: vec![RawFunction {
            rows: vec![
                RawRow { start: 4, cfa_base_sp: false, ra_mangled: false, words: [cfa, flex_pair(16)].concat() },
                RawRow {
                    start: 8,
                    cfa_base_sp: false,
                    ra_mangled: false,
                    words: [cfa, flex_pair(16), flex_pair(17)].concat(),
                },
            ],
            flex: true,
            ..v2.functions[0].clone()
        }],
        ..v2
    };
    let bytes = encode(&v3, 0x2000).unwrap();
    assert_eq!(rows_text(&bytes, 0x2000), ["0000000000001004 sp+160 u r16+0", "0000000000001008 sp+160 r17+0 r16+0"]);
}

/// Big-endian AArch64 in every version, PAC-signed RAs and the B key.
#[test]
fn aarch64_big_endian_all_versions() {
    for version in [Version::V1, Version::V2, Version::V3] {
        let mut frame = row(8, true, &[32, -24, -32]);
        frame.ra_mangled = true;
        let table = RawSection {
            version,
            abi: Abi::Aarch64Big,
            flags: if version == Version::V1 { 0x1 } else { 0x5 },
            cfa_fixed_fp_offset: 0,
            cfa_fixed_ra_offset: 0,
            functions: vec![RawFunction {
                pauth_key_b: true,
                ..function(0x400000, 28, false, vec![row(0, true, &[0]), frame, row(0xc, false, &[32, -24, -32])])
            }],
        };
        let bytes = encode(&table, 0x410000).unwrap();
        assert_eq!(&bytes[..2], &[0xde, 0xe2]);
        let section = Section::parse(bytes.as_slice(), 0x410000).unwrap();
        let text = dump::objdump_text(&dump::listing(&section).unwrap(), ObjdumpStyle::for_header(section.header()));
        assert!(text.contains("pc = 0x400000, size = 28 bytes, pauth = B key"), "{text}");
        assert_eq!(
            rows_text(&bytes, 0x410000),
            ["0000000000400000 sp+0 u u", "0000000000400008 sp+32 c-32 c-24[s]", "000000000040000c fp+32 c-32 c-24",],
            "{version:?}"
        );
    }
}
