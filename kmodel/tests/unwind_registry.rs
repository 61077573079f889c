//! The per-mm SFrame registry: what registration accepts in kernel-strict
//! and lab modes, overlap, removal and unmapping.

mod support;

use kmodel::arch::Arch;
use kmodel::memory::{Access, PagedMemory};
use kmodel::unwind::{RegError, SframeMode, SframeRegistry};
use sframe::write::{RawFunction, RawRow};
use sframe::{Abi, Version};
use support::sections::{place, table, SFRAME, TEXT};

fn functions() -> Vec<RawFunction> {
    vec![RawFunction::new(TEXT.0 + 0x1000, 0x100, vec![RawRow::new(0, true, &[8])])]
}

/// Section bytes for `t` placed at [`SFRAME`]; returns the memory and the range.
fn placed(t: &sframe::write::RawSection) -> (PagedMemory, (u64, u64)) {
    let mut mem = PagedMemory::new();
    let end = place(&mut mem, t, SFRAME);
    (mem, (SFRAME, end))
}

fn add(
    registry: &mut SframeRegistry,
    mem: &PagedMemory,
    sframe: (u64, u64),
    text: (u64, u64),
    mode: SframeMode,
) -> Result<(), RegError> {
    registry.add(mem, support::ANY_VMA, Access::Faultable, sframe, text, mode, false)
}

#[test]
fn kernel_strict_accepts_only_v3_and_lab_accepts_every_version() {
    for version in [Version::V1, Version::V2, Version::V3] {
        let (mem, range) = placed(&table(version, Abi::Amd64, functions()));
        let mut strict = SframeRegistry::new(Arch::X86_64);
        let result = add(&mut strict, &mem, range, TEXT, SframeMode::KernelStrict);
        if version == Version::V3 {
            result.unwrap();
        } else {
            // sframe_read_header()'s preamble check: "bad/unsupported sframe header".
            let why = format!("version {}, and only SFrame version 3 is accepted", version.number());
            assert_eq!(result, Err(RegError::Unsupported(why)));
            assert_eq!(result.unwrap_err().errno(), -22);
            assert!(strict.is_empty());
        }
        let mut lab = SframeRegistry::new(Arch::X86_64);
        add(&mut lab, &mem, range, TEXT, SframeMode::Lab).unwrap();
        let entry = lab.entries().next().unwrap();
        assert_eq!(
            (entry.sframe_start, entry.sframe_end, entry.text_start, entry.text_end),
            (range.0, range.1, TEXT.0, TEXT.1)
        );
        assert_eq!(entry.version, version);
    }
}

#[test]
fn headers_the_kernel_refuses_are_refused() {
    let base = table(Version::V3, Abi::Amd64, functions());
    let with_flags = |flags: u8| sframe::write::RawSection { flags, ..base.clone() };
    let unsupported = |why: &str| RegError::Unsupported(why.to_string());
    let cases = [
        (with_flags(0x4), unsupported("SFRAME_F_FDE_SORTED is not set")),
        (with_flags(0x1), unsupported("SFRAME_F_FDE_FUNC_START_PCREL is not set")),
        (sframe::write::RawSection { functions: vec![], ..base.clone() }, RegError::Refused("no FDE/FRE entries")),
        (table(Version::V2, Abi::Aarch64Little, vec![]), RegError::Refused("no FDE/FRE entries")),
    ];
    for (t, refusal) in cases {
        let (mem, range) = placed(&t);
        let result = add(&mut SframeRegistry::new(Arch::X86_64), &mem, range, TEXT, SframeMode::Lab);
        assert_eq!(result, Err(refusal));
    }

    // Another architecture's section (same byte order), and the other byte order.
    let (mem, range) = placed(&table(Version::V3, Abi::Aarch64Little, functions()));
    let result = add(&mut SframeRegistry::new(Arch::X86_64), &mem, range, TEXT, SframeMode::Lab);
    assert_eq!(result, Err(RegError::Refused("section is for another architecture")));
    let (mem, range) = placed(&table(Version::V3, Abi::S390x, functions()));
    let result = add(&mut SframeRegistry::new(Arch::X86_64), &mem, range, TEXT, SframeMode::Lab);
    assert_eq!(result, Err(unsupported("magic 0xe2de, not 0xdee2 in the task's byte order")));

    // A non-empty auxiliary header, bad magic, a range too short for the tables.
    // (The range grows by the 4 bytes so that the tables still fit.)
    let (mut mem, range) = placed(&base);
    mem.write(SFRAME + 7, &[4]);
    let result = add(&mut SframeRegistry::new(Arch::X86_64), &mem, (range.0, range.1 + 4), TEXT, SframeMode::Lab);
    assert_eq!(result, Err(unsupported("the auxiliary header is not empty")));
    let (mut mem, range) = placed(&base);
    mem.write(SFRAME, &[0x12, 0x34]);
    let result = add(&mut SframeRegistry::new(Arch::X86_64), &mem, range, TEXT, SframeMode::Lab);
    assert_eq!(result, Err(unsupported("magic 0x3412, not 0xdee2 in the task's byte order")));
    assert_eq!(result.unwrap_err().errno(), -22);
    let (mem, range) = placed(&base);
    let result = add(&mut SframeRegistry::new(Arch::X86_64), &mem, (range.0, range.1 - 1), TEXT, SframeMode::Lab);
    assert!(matches!(&result, Err(RegError::BadHeader(_))), "{result:?}");
    assert_eq!(result.unwrap_err().errno(), -22);
}

#[test]
fn bad_ranges_and_unreadable_headers_are_refused() {
    let (mem, range) = placed(&table(Version::V3, Abi::Amd64, functions()));
    let mut registry = SframeRegistry::new(Arch::X86_64);
    for (sframe, text) in
        [((0, range.1), TEXT), (range, (TEXT.0, 0)), ((range.1, range.0), TEXT), (range, (TEXT.1, TEXT.0))]
    {
        assert!(matches!(add(&mut registry, &mem, sframe, text, SframeMode::Lab), Err(RegError::BadRange(_))));
    }
    // The header is copied from user memory: unmapped is -EFAULT, and a
    // non-resident page in a context that may not fault fails too.
    let result = add(&mut registry, &mem, (0x6000_0000, 0x6000_0100), TEXT, SframeMode::Lab);
    assert!(matches!(result, Err(RegError::Fault(_))));
    assert_eq!(result.unwrap_err().errno(), -14);
    mem.evict(SFRAME, 1);
    assert!(matches!(
        registry.add(&mem, support::ANY_VMA, Access::NoFault, range, TEXT, SframeMode::Lab, false),
        Err(RegError::Fault(_))
    ));
    add(&mut registry, &mem, range, TEXT, SframeMode::Lab).unwrap();
    assert_eq!(mem.faults(), 1);
}

#[test]
fn text_ranges_may_not_overlap_and_include_their_end() {
    let (mem, range) = placed(&table(Version::V3, Abi::Amd64, functions()));
    let mut registry = SframeRegistry::new(Arch::X86_64);
    add(&mut registry, &mem, range, (0x40_0000, 0x40_2000), SframeMode::Lab).unwrap();
    // The kernel's maple tree range is [text_start, text_end]: a range
    // starting exactly at the previous end collides with it.
    for text in [(0x40_2000, 0x40_3000), (0x3f_0000, 0x40_0000), (0x40_1000, 0x40_1800), (0x3f_0000, 0x50_0000)] {
        let result = add(&mut registry, &mem, range, text, SframeMode::Lab);
        assert_eq!(result, Err(RegError::Overlap { text_start: text.0, text_end: text.1, existing: 0x40_0000 }));
        assert_eq!(result.unwrap_err().errno(), -17);
    }
    add(&mut registry, &mem, range, (0x40_2001, 0x40_3000), SframeMode::Lab).unwrap();
    add(&mut registry, &mem, range, (0x3f_0000, 0x3f_ffff), SframeMode::Lab).unwrap();
    assert_eq!(registry.len(), 3);
    assert_eq!(registry.find(0x40_2000).map(|e| e.text_start), Some(0x40_0000));
    assert_eq!(registry.find(0x40_2001).map(|e| e.text_start), Some(0x40_2001));
    assert_eq!(registry.find(0x40_3001), None);
    assert_eq!(registry.find(0x3e_ffff), None);
    let starts: Vec<u64> = registry.entries().map(|e| e.text_start).collect();
    assert_eq!(starts, [0x3f_0000, 0x40_0000, 0x40_2001]);
}

#[test]
fn remove_drops_every_entry_of_a_section_start() {
    let (mut mem, range) = placed(&table(Version::V3, Abi::Amd64, functions()));
    let other = place(&mut mem, &table(Version::V3, Abi::Amd64, functions()), 0x5100_0000);
    let mut registry = SframeRegistry::new(Arch::X86_64);
    add(&mut registry, &mem, range, (0x40_0000, 0x40_1000), SframeMode::Lab).unwrap();
    add(&mut registry, &mem, range, (0x40_2000, 0x40_3000), SframeMode::Lab).unwrap();
    add(&mut registry, &mem, (0x5100_0000, other), (0x40_4000, 0x40_5000), SframeMode::Lab).unwrap();
    registry.remove(SFRAME).unwrap();
    assert_eq!(registry.len(), 1);
    let result = registry.remove(SFRAME);
    assert_eq!(result, Err(RegError::NotRegistered(SFRAME)));
    assert_eq!(result.unwrap_err().errno(), -22);
    registry.remove(0x5100_0000).unwrap();
    assert!(registry.is_empty());
}

#[test]
fn unmapping_text_or_sframe_drops_the_entries_it_touches() {
    let (mut mem, range) = placed(&table(Version::V3, Abi::Amd64, functions()));
    let other = place(&mut mem, &table(Version::V3, Abi::Amd64, functions()), 0x5100_0000);
    let mut registry = SframeRegistry::new(Arch::X86_64);
    add(&mut registry, &mem, range, (0x40_0000, 0x40_1000), SframeMode::Lab).unwrap();
    add(&mut registry, &mem, (0x5100_0000, other), (0x40_4000, 0x40_5000), SframeMode::Lab).unwrap();
    // Next to both, touching neither (ranges are half-open here).
    assert_eq!(registry.unmap(0x40_1000, 0x40_4000), Vec::<u64>::new());
    assert_eq!(registry.unmap(range.1, 0x5100_0000), Vec::<u64>::new());
    // The .sframe mapping of the second, then the text of the first.
    assert_eq!(registry.unmap(0x5100_0000, 0x5100_1000), [0x5100_0000]);
    assert_eq!(registry.unmap(0x40_0fff, 0x40_1000), [SFRAME]);
    assert!(registry.is_empty());
}
