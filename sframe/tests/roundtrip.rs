//! Property tests of the writer: decode(encode(t)) == t for arbitrary valid
//! tables (every version, ABI and byte order, INC and MASK, default and flex
//! rows, 1/2/4-byte offsets and words), and rule encoding that decodes to
//! the rule it came from. Seeded, so every run explores the same cases.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use sframe::read::rule::{self, Base, CfaRule, FrameRule, Recovery, RowRule};
use sframe::write::{encode, Encoding, RawFunction, RawRow, RawSection, Word};
use sframe::{Abi, Section, Version};

fn abi() -> impl Strategy<Value = Abi> {
    prop_oneof![Just(Abi::Amd64), Just(Abi::Aarch64Little), Just(Abi::Aarch64Big), Just(Abi::S390x)]
}

fn version() -> impl Strategy<Value = Version> {
    prop_oneof![Just(Version::V1), Just(Version::V2), Just(Version::V3)]
}

/// Values spread over the three word sizes.
fn signed() -> impl Strategy<Value = i32> {
    prop_oneof![-128i32..128, -32768i32..32768, any::<i32>()]
}

fn default_words(version: Version) -> impl Strategy<Value = Vec<Word>> {
    let min = if version == Version::V1 { 1 } else { 0 };
    prop::collection::vec(signed().prop_map(Word::Signed), min..=3)
}

/// Flex rows: CFA pair; then RA pair, or RA padding + FP pair, or both pairs.
fn flex_words() -> impl Strategy<Value = Vec<Word>> {
    let pair =
        || ((1u32..0x1000).prop_map(Word::Unsigned), signed().prop_map(Word::Signed)).prop_map(|(c, o)| vec![c, o]);
    (0usize..4, pair(), pair(), pair()).prop_map(|(shape, mut cfa, ra, fp)| {
        // The CFA is always register-based (reg_p = 1).
        if let Word::Unsigned(c) = cfa[0] {
            cfa[0] = Word::Unsigned(c | 1);
        }
        match shape {
            0 => vec![],
            1 => cfa,
            2 => [cfa, ra].concat(),
            _ => [cfa, vec![Word::Unsigned(0)], fp].concat(),
        }
    })
}

fn function(version: Version, start: u64) -> impl Strategy<Value = RawFunction> {
    let flex_ok = version == Version::V3;
    (
        prop_oneof![1u32..200, 200u32..70_000, 70_000u32..200_000],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(move |(size, mask, flex, signal, pauth)| {
            let flex = flex && flex_ok;
            let mask = mask && size >= 16;
            let rep_size: u8 = if mask && version != Version::V1 { 16 } else { 0 };
            let limit = if mask { 16 } else { size };
            let words: BoxedStrategy<Vec<Word>> =
                if flex { flex_words().boxed() } else { default_words(version).boxed() };
            let row = (0..limit, any::<bool>(), any::<bool>(), words);
            prop::collection::vec(row, 0..6).prop_map(move |rows| {
                let mut rows: Vec<RawRow> = rows
                    .into_iter()
                    .map(|(s, sp, mangled, words)| RawRow { start: s, cfa_base_sp: sp, ra_mangled: mangled, words })
                    .collect();
                rows.sort_by_key(|r| r.start);
                rows.dedup_by_key(|r| r.start);
                RawFunction { start, size, mask, rep_size, pauth_key_b: pauth, signal: signal && flex_ok, flex, rows }
            })
        })
}

fn table() -> impl Strategy<Value = (RawSection, u64)> {
    (version(), abi(), prop::collection::vec(0u64..5000, 0..12), 0u64..0x1000_0000).prop_flat_map(
        |(version, abi, gaps, base_gap)| {
            // Functions in address order, each after the previous one's end.
            let mut start = 0x40_0000u64;
            let functions: Vec<_> = gaps
                .iter()
                .map(|gap| {
                    start += gap + 200_000;
                    function(version, start)
                })
                .collect();
            let fixed_ra = if abi == Abi::Amd64 { -8 } else { 0 };
            (functions, Just(version), Just(abi), Just(fixed_ra), Just(base_gap)).prop_map(
                move |(functions, version, abi, fixed_ra, base_gap)| {
                    let flags = if version == Version::V1 { 0x1 } else { 0x5 };
                    let table = RawSection {
                        version,
                        abi,
                        flags,
                        cfa_fixed_fp_offset: 0,
                        cfa_fixed_ra_offset: fixed_ra,
                        functions,
                    };
                    (table, 0x40_0000 + base_gap)
                },
            )
        },
    )
}

fn runner(cases: u32) -> TestRunner {
    let seed = *b"unwindlab-sframe-roundtrip-seed!";
    TestRunner::new_with_rng(Config { cases, ..Config::default() }, TestRng::from_seed(RngAlgorithm::ChaCha, &seed))
}

#[test]
fn decode_of_encode_is_identity() {
    runner(512)
        .run(&table(), |(table, base)| {
            let bytes = encode(&table, base).expect("valid table encodes");
            let section = Section::parse(bytes.as_slice(), base).expect("encoded section parses");
            let report = sframe::read::validate::check(bytes.as_slice(), base, &Default::default());
            // Flex rows with arbitrary register numbers are structurally valid.
            let in_bounds = report.problems.iter().all(|p| !matches!(p, sframe::Error::OutOfBounds { .. }));
            prop_assert!(in_bounds);
            prop_assert_eq!(RawSection::decode(&section).unwrap(), table);
            Ok(())
        })
        .unwrap();
}

fn recovery() -> impl Strategy<Value = Recovery> {
    prop_oneof![
        Just(Recovery::Untracked),
        (-64i32..64).prop_map(|o| Recovery::Cfa { offset: o * 8, deref: true }),
        (-64i32..64, any::<bool>()).prop_map(|(o, d)| Recovery::Cfa { offset: o * 8 + 8, deref: d }),
        (0u32..40, -64i32..64, any::<bool>()).prop_map(|(reg, offset, deref)| Recovery::Reg { reg, offset, deref }),
        (0u32..40).prop_map(Recovery::InRegister),
    ]
}

fn frame_rule() -> impl Strategy<Value = RowRule> {
    let base = prop_oneof![Just(Base::Sp), Just(Base::Fp), (0u32..40).prop_map(Base::Reg)];
    prop_oneof![
        1 => Just(RowRule::Outermost),
        9 => (base, -100i32..400, any::<bool>(), recovery(), recovery(), any::<bool>()).prop_map(
            |(base, offset, deref, ra, fp, ra_mangled)| RowRule::Frame(FrameRule {
                cfa: CfaRule { base, offset: offset * 8, deref },
                ra,
                fp,
                ra_mangled,
            })
        ),
    ]
}

#[test]
fn encoded_rules_decode_to_themselves() {
    let encoded = std::cell::Cell::new(0u32);
    runner(4096)
        .run(&(version(), abi(), frame_rule(), any::<bool>()), |(version, abi, rule, flex)| {
            let enc = Encoding::gas(version, abi);
            let row = if flex { enc.flex_row(0, &rule) } else { enc.default_row(0, &rule) };
            let Ok(row) = row else { return Ok(()) }; // not expressible: the generator skips it
            let function = RawFunction { flex, ..RawFunction::new(0x1000, 16, vec![row]) };
            let table = RawSection {
                version,
                abi,
                flags: if version == Version::V1 { 0x1 } else { 0x5 },
                cfa_fixed_fp_offset: enc.cfa_fixed_fp_offset,
                cfa_fixed_ra_offset: enc.cfa_fixed_ra_offset,
                functions: vec![function],
            };
            let bytes = encode(&table, 0x2000).unwrap();
            let section = Section::parse(bytes.as_slice(), 0x2000).unwrap();
            let fde = section.fde(0).unwrap();
            let fre = section.fres(&fde).next().unwrap().unwrap();
            let decoded = match rule::interpret(section.header(), &fde, &fre).unwrap().rule {
                RowRule::Frame(f) => RowRule::Frame(f.resolved(section.header())),
                other => other,
            };
            let expected = match rule {
                RowRule::Frame(f) => RowRule::Frame(f.resolved(section.header())),
                other => other,
            };
            prop_assert_eq!(decoded.canonical(abi), expected.canonical(abi));
            encoded.set(encoded.get() + 1);
            Ok(())
        })
        .unwrap();
    assert!(encoded.get() > 500, "only {} rules were expressible", encoded.get());
}
