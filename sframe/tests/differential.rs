//! Differential test against the independent `simple-frame-rs` crate: the
//! rule at every PC of every function of every vector, plus the PCs just
//! outside each function. Every disagreement must be one of the
//! simple-frame-rs bugs demonstrated at the bottom of this file.

mod common;

use fallible_iterator::FallibleIterator;
use sframe::{Base, FdeKind, PcType, Recovery, RowRule, Section};
use simple_frame_rs::{SFrameFRE, SFrameSection};

/// A rule in a form both implementations can be mapped to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    /// No FDE or no FRE covers the PC.
    Nothing,
    /// RA undefined.
    Outermost,
    /// Default FDE: CFA base is SP?, CFA offset, RA and FP offsets from the CFA.
    Default { sp: bool, cfa: i32, ra: Option<i32>, fp: Option<i32> },
    /// Flex FDE: (control, offset) for CFA, RA, FP; `None` = no words.
    Flex { cfa: (u32, i32), ra: Option<(u32, i32)>, fp: Option<(u32, i32)> },
}

fn ours(section: &Section<&[u8]>, pc: u64) -> Answer {
    let Some(found) = section.lookup(pc).unwrap() else { return Answer::Nothing };
    let frame = match found.rule {
        RowRule::Outermost => return Answer::Outermost,
        RowRule::Frame(frame) => frame,
    };
    if found.fde.kind == FdeKind::Default {
        let offset = |r: Recovery| match r {
            Recovery::Cfa { offset, deref: true } => Some(offset),
            Recovery::Untracked => None,
            other => panic!("unexpected default recovery {other:?}"),
        };
        return Answer::Default {
            sp: frame.cfa.base == Base::Sp,
            cfa: frame.cfa.offset,
            ra: offset(frame.ra),
            fp: offset(frame.fp),
        };
    }
    let RowRule::Frame(encoded) = found.encoded else { unreachable!() };
    let Base::Reg(reg) = encoded.cfa.base else { panic!("flex CFA without register") };
    let pair = |r: Recovery| match r {
        Recovery::Fixed(_) | Recovery::Untracked => None,
        Recovery::Padding => Some((0, 0)),
        Recovery::Cfa { offset, deref } => Some((u32::from(deref) << 1, offset)),
        Recovery::Reg { reg, offset, deref } => Some((reg << 3 | u32::from(deref) << 1 | 1, offset)),
        Recovery::InRegister(_) => panic!("register-encoded word in a flex FDE"),
    };
    Answer::Flex {
        cfa: (reg << 3 | u32::from(encoded.cfa.deref) << 1 | 1, encoded.cfa.offset),
        ra: pair(encoded.ra),
        fp: pair(encoded.fp),
    }
}

fn theirs(section: &SFrameSection<'_>, pc: u64) -> Answer {
    let Some(fde) = section.find_fde(pc).unwrap() else { return Answer::Nothing };
    let Some(fre) = fde.find_fre(section, pc).unwrap() else { return Answer::Nothing };
    if let (SFrameFRE::V3(v3), simple_frame_rs::SFrameFDE::V3(fde3)) = (&fre, &fde) {
        if matches!(fde3.get_fde_type().unwrap(), simple_frame_rs::v3::SFrameFDEType::Flex) {
            let Some(rules) = v3.get_flex_recovery_rules() else { return Answer::Outermost };
            let pair = |r: &simple_frame_rs::v3::SFrameFlexRecoveryRule| {
                let ctl = (r.control.regnum() as u32) << 3
                    | u32::from(r.control.deref_p()) << 1
                    | u32::from(r.control.reg_p());
                (ctl, r.offset)
            };
            return Answer::Flex {
                cfa: pair(&rules.cfa),
                ra: rules.ra.as_ref().map(pair),
                fp: rules.fp.as_ref().map(pair),
            };
        }
    }
    match fre.get_cfa_offset(section).unwrap() {
        None => Answer::Outermost,
        Some(cfa) => Answer::Default {
            sp: fre.get_cfa_base_reg_id() == 1,
            cfa,
            ra: fre.get_ra_offset(section).unwrap(),
            fp: fre.get_fp_offset(section).unwrap(),
        },
    }
}

#[test]
fn agrees_with_simple_frame_rs_at_every_pc() {
    let mut compared = 0u64;
    let mut known_mask_differences = 0u64;
    let mut unexplained = Vec::new();
    for v in common::all_with_data() {
        let section = Section::parse(v.bytes.as_slice(), v.base).unwrap();
        let other = SFrameSection::from(&v.bytes, v.base).unwrap();
        let fdes: Vec<_> = section.fdes().map(Result::unwrap).collect();
        for fde in &fdes {
            let from = fde.start.saturating_sub(2);
            let to = fde.start + u64::from(fde.size) + 2;
            for pc in from..to {
                compared += 1;
                let (a, b) = (ours(&section, pc), theirs(&other, pc));
                if a == b {
                    continue;
                }
                // simple-frame-rs's MASK lookup is wrong (see the tests below);
                // ours is checked against ld's PLT layout there.
                let in_mask = section.find_fde(pc).unwrap().is_some_and(|f| f.pc_type == PcType::Mask);
                if in_mask {
                    known_mask_differences += 1;
                } else {
                    unexplained.push(format!("{} pc {pc:#x}: ours {a:?}, simple-frame-rs {b:?}", v.name));
                }
            }
        }
    }
    println!("compared {compared} PCs; {known_mask_differences} differ only in PC-type MASK FDEs");
    assert!(compared > 10_000, "too few PCs compared: {compared}");
    assert!(unexplained.is_empty(), "{} unexplained differences:\n{}", unexplained.len(), unexplained.join("\n"));
}

/// simple-frame-rs bug 1 (V2/V3 MASK FDEs): it returns the *first* FRE whose
/// start is <= `pc % rep_size`, so every PC of a PLT entry gets the entry's
/// first row. No vector has a multi-row MASK FDE, so this builds ld's pltN
/// shape: rows `sp+8` at 0 and `sp+16` from 11 (after the `push`), two
/// 16-byte entries. PC entry+11 must give sp+16.
#[test]
fn simple_frame_rs_mask_lookup_picks_the_first_row() {
    use sframe::write::{encode, RawFunction, RawRow, RawSection, Word};
    use sframe::{Abi, Version};
    let row = |start, cfa| RawRow { start, cfa_base_sp: true, ra_mangled: false, words: vec![Word::Signed(cfa)] };
    let base = 0x3000;
    for version in [Version::V2, Version::V3] {
        let table = RawSection {
            version,
            abi: Abi::Amd64,
            flags: 0x5,
            cfa_fixed_fp_offset: 0,
            cfa_fixed_ra_offset: -8,
            functions: vec![RawFunction {
                start: 0x1030,
                size: 32,
                mask: true,
                rep_size: 16,
                pauth_key_b: false,
                signal: false,
                flex: false,
                rows: vec![row(0, 8), row(11, 16)],
            }],
        };
        let bytes = encode(&table, base).unwrap();
        let section = Section::parse(bytes.as_slice(), base).unwrap();
        let other = SFrameSection::from(&bytes, base).unwrap();
        let sp16 = Answer::Default { sp: true, cfa: 16, ra: Some(-8), fp: None };
        let sp8 = Answer::Default { sp: true, cfa: 8, ra: Some(-8), fp: None };
        for entry in [0x1030, 0x1040] {
            assert_eq!(ours(&section, entry + 10), sp8);
            assert_eq!(ours(&section, entry + 11), sp16);
            assert_eq!(ours(&section, entry + 15), sp16);
        }
        assert_eq!(theirs(&other, 0x1030 + 11), sp8, "simple-frame-rs fixed its MASK lookup: update this test");
    }
}

/// simple-frame-rs bug 2 (V1 MASK FDEs): it applies the spec's unworkable
/// `pc % start >= start` rule, which never matches the row at offset 0 and
/// matches the row at 0xb only by accident. For ld 2.40's 8-entry pltN FDE,
/// PC entry+3 is after the `jmp *GOT` slot but before `push`: CFA is sp+8.
#[test]
fn simple_frame_rs_v1_mask_lookup_is_not_plt_shaped() {
    let v = common::v1_samples().into_iter().find(|v| v.name == "v1-x86_64-p-exe").unwrap();
    let section = Section::parse(v.bytes.as_slice(), v.base).unwrap();
    let plt = section.fde(1).unwrap();
    assert_eq!(plt.pc_type, PcType::Mask);
    let sp8 = Answer::Default { sp: true, cfa: 8, ra: Some(-8), fp: None };
    let sp16 = Answer::Default { sp: true, cfa: 16, ra: Some(-8), fp: None };
    for entry in 0..8u64 {
        assert_eq!(ours(&section, plt.start + 16 * entry + 3), sp8);
        assert_eq!(ours(&section, plt.start + 16 * entry + 12), sp16);
    }
    let other = SFrameSection::from(&v.bytes, v.base).unwrap();
    assert_ne!(theirs(&other, plt.start + 3), sp8, "simple-frame-rs fixed its V1 MASK lookup");
}

/// Sanity of the vectors' FRE iteration in simple-frame-rs itself: both
/// readers see the same number of rows per function.
#[test]
fn same_rows_per_function() {
    for v in common::all_with_data() {
        let section = Section::parse(v.bytes.as_slice(), v.base).unwrap();
        let other = SFrameSection::from(&v.bytes, v.base).unwrap();
        for fde in section.fdes().map(Result::unwrap) {
            let theirs = other.find_fde(fde.start).unwrap();
            let Some(theirs) = theirs else { continue };
            let count = match (&theirs, &other) {
                (simple_frame_rs::SFrameFDE::V1(f), SFrameSection::V1(s)) => f.iter_fre(s).count().unwrap(),
                (simple_frame_rs::SFrameFDE::V2(f), SFrameSection::V2(s)) => f.iter_fre(s).count().unwrap(),
                (simple_frame_rs::SFrameFDE::V3(f), SFrameSection::V3(s)) => f.iter_fre(s).count().unwrap(),
                _ => unreachable!(),
            };
            let ours = section.fres(&section.find_fde(fde.start).unwrap().unwrap()).count();
            assert_eq!(ours, count, "{} FDE at {:#x}", v.name, fde.start);
        }
    }
}
