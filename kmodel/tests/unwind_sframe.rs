//! The SFrame method on all three architectures: rules from SP, FP and
//! other registers, the outermost row, fallback to FP, corrupt sections,
//! and the non-faulting context reading a non-resident `.sframe` page.

mod support;

use kmodel::arch::{Arch, UserRegs};
use kmodel::memory::{Access, PagedMemory};
use kmodel::unwind::{
    unwind_user, Method, Miss, SframeMode, SframeRegistry, Stop, Trace, UnwindConfig, UNWIND_MAX_ENTRIES,
};
use sframe::write::{RawFunction, RawRow, Word};
use sframe::{Abi, Version};
use support::sections::{ctl, flex_row, frame_record, registered, table, word, SFRAME, STACK, TEXT};

fn run(regs: &UserRegs, mem: &PagedMemory, registry: &mut SframeRegistry, access: Access) -> Trace {
    unwind_user(regs, mem, registry, access, &UnwindConfig::default())
}

fn row(start: u32, sp: bool, words: &[i32]) -> RawRow {
    RawRow::new(start, sp, words)
}

/// gas's x86-64 prologue rows: entry, after `push %rbp`, after `mov %rsp,%rbp`.
fn x86_function(start: u64, size: u32) -> RawFunction {
    RawFunction::new(start, size, vec![row(0, true, &[8]), row(1, true, &[16, -16]), row(4, false, &[16, -16])])
}

/// main, foo (framed), leaf (no frame), and _start whose row at +4 is the
/// outermost frame (`.cfi_undefined rip`).
fn x86_functions() -> Vec<RawFunction> {
    vec![
        x86_function(0x40_1000, 0x100),
        x86_function(0x40_1100, 0x100),
        RawFunction::new(0x40_1200, 0x40, vec![row(0, true, &[8])]),
        RawFunction::new(0x40_1300, 0x40, vec![row(0, true, &[8]), row(4, true, &[])]),
    ]
}

const SP: u64 = STACK + 0xe00;
const F1: u64 = STACK + 0xe40;
const F2: u64 = STACK + 0xe80;
const F3: u64 = STACK + 0xec0;

/// An x86-64 stack: leaf (RA at SP) called from foo, called from main,
/// called from `main_ra`; main's caller's FP is `f3`.
fn x86_stack(main_ra: u64, f3: u64) -> (PagedMemory, UserRegs) {
    let arch = Arch::X86_64;
    let mut mem = PagedMemory::new();
    word(&mut mem, arch, SP, 0x40_1150);
    frame_record(&mut mem, arch, F1, F2, 0x40_1080);
    frame_record(&mut mem, arch, F2, f3, main_ra);
    (mem, UserRegs::new(arch, 0x40_1210, SP, F1, 0))
}

#[test]
fn x86_64_walk_follows_sp_and_fp_rules_to_the_outermost_frame() {
    let (mut mem, regs) = x86_stack(0x40_1320, F3);
    let mut registry = registered(&mut mem, Arch::X86_64, &table(Version::V3, Abi::Amd64, x86_functions()));
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_1210, 0x40_1150, 0x40_1080, 0x40_1320]);
    assert_eq!(trace.methods, [Method::Sframe; 3]);
    assert_eq!(trace.stop, Stop::Outermost);
    assert!(!trace.would_fault && trace.removed_sections.is_empty());
}

#[test]
fn every_version_walks_in_lab_mode() {
    for version in [Version::V1, Version::V2, Version::V3] {
        // V1 cannot mark an outermost row: end with an FP step instead.
        let (mut mem, regs) = x86_stack(0x40_5000, 0);
        let functions = x86_functions().into_iter().take(3).collect();
        let mut registry = registered(&mut mem, Arch::X86_64, &table(version, Abi::Amd64, functions));
        let trace = run(&regs, &mem, &mut registry, Access::Faultable);
        assert_eq!(trace.entries, [0x40_1210, 0x40_1150, 0x40_1080, 0x40_5000], "{version:?}");
        assert_eq!(trace.methods, [Method::Sframe; 3]);
        assert!(matches!(trace.stop, Stop::NoMethod { .. }), "{:?}", trace.stop);
    }
}

#[test]
fn a_pc_without_fde_falls_back_to_the_frame_pointer() {
    // main returns into a gap of the text; the FP chain continues from there.
    let (mut mem, regs) = x86_stack(0x40_2000, F3);
    frame_record(&mut mem, Arch::X86_64, F3, 0, 0x40_5000);
    let mut registry = registered(&mut mem, Arch::X86_64, &table(Version::V3, Abi::Amd64, x86_functions()));
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_1210, 0x40_1150, 0x40_1080, 0x40_2000, 0x40_5000]);
    assert_eq!(trace.methods, [Method::Sframe, Method::Sframe, Method::Sframe, Method::Fp]);
    match &trace.stop {
        Stop::NoMethod { .. } => {
            let reason = trace.stop.to_string();
            assert!(
                reason.starts_with("no method could step: sframe: no .sframe section covers the IP; fp: "),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(registry.len(), 1, "missing data is not corruption");
}

#[test]
fn missing_data_cases_fall_back_and_keep_the_section() {
    let arch = Arch::X86_64;
    // The topmost FP chain the fallback walks: one frame, then FP 0.
    let stack = |pc: u64| {
        let mut mem = PagedMemory::new();
        frame_record(&mut mem, arch, F1, 0, 0x40_5000);
        (mem, UserRegs::new(arch, pc, SP, F1, 0))
    };
    let sframe_only = UnwindConfig { order: vec![Method::Sframe], ..UnwindConfig::default() };
    let flex_no_reg = RawFunction { flex: true, ..RawFunction::new(0x40_1000, 0x100, vec![flex_row(0, &[(2, 8)])]) };
    let outside_text = vec![x86_function(TEXT.0 - 0x100, 0x200)];
    let cases: Vec<(Vec<RawFunction>, u64, &str)> = vec![
        (x86_functions(), 0x40_0800, "the IP precedes every function"),
        (x86_functions(), 0x40_2000, "the IP is in a gap between functions"),
        (vec![RawFunction::new(0x40_1000, 0x100, vec![row(8, true, &[8])])], 0x40_1004, "no row covers the IP"),
        (vec![flex_no_reg], 0x40_1010, "flex CFA rule is not register-based"),
        (outside_text, TEXT.0 + 0x10, "the function starts outside the registered text"),
    ];
    for (functions, pc, why) in cases {
        let (mut mem, regs) = stack(pc);
        let mut registry = registered(&mut mem, arch, &table(Version::V3, Abi::Amd64, functions));
        let trace = run(&regs, &mem, &mut registry, Access::Faultable);
        assert_eq!(trace.entries, [pc, 0x40_5000], "{why}");
        assert_eq!(trace.methods, [Method::Fp], "{why}");
        assert!(trace.removed_sections.is_empty(), "{why}");
        assert_eq!(registry.len(), 1, "{why}");

        // Without FP, the miss is why the walk ends.
        let trace = unwind_user(&regs, &mem, &mut registry, Access::Faultable, &sframe_only);
        assert_eq!(trace.entries, [pc]);
        assert_eq!(trace.stop, Stop::NoMethod { misses: vec![Miss { method: Method::Sframe, why }] });
    }
}

#[test]
fn a_corrupt_section_is_removed_and_the_frame_pointer_still_tried() {
    const LEFTOVER: &str = "data words do not match the rule (the kernel reads every word)";
    let arch = Arch::X86_64;
    let lone_padding = RawRow {
        start: 0,
        cfa_base_sp: false,
        ra_mangled: false,
        words: vec![Word::Unsigned(ctl(Some(7), false)), Word::Signed(8), Word::Unsigned(0)],
    };
    let unsorted = [0x40_1000, 0x40_1100, 0x40_1200, 0x40_1050, 0x40_1300]
        .into_iter()
        .map(|start| RawFunction::new(start, 0x10, vec![row(0, true, &[8])]))
        .collect();
    let cases: Vec<(&str, Vec<RawFunction>, u64, &str)> = vec![
        (
            "rows not increasing",
            vec![RawFunction::new(
                0x40_1000,
                0x100,
                vec![row(0, true, &[8]), row(4, true, &[16]), row(2, true, &[16])],
            )],
            0x40_1010,
            "row start offsets are not increasing",
        ),
        (
            "row beyond its function",
            vec![RawFunction::new(0x40_1000, 0x10, vec![row(0, true, &[8]), row(0x20, true, &[16])])],
            0x40_1008,
            "a row starts beyond its function",
        ),
        ("unsorted FDEs", unsorted, 0x40_1250, "FDEs are not sorted"),
        (
            "leftover data word",
            vec![RawFunction::new(0x40_1000, 0x100, vec![row(0, true, &[8, -16, 4])])],
            0x40_1010,
            LEFTOVER,
        ),
        (
            "lone trailing padding word",
            vec![RawFunction { flex: true, ..RawFunction::new(0x40_1000, 0x100, vec![lone_padding]) }],
            0x40_1010,
            LEFTOVER,
        ),
    ];
    for (what, functions, pc, expect) in cases {
        let mut mem = PagedMemory::new();
        frame_record(&mut mem, arch, F1, 0, 0x40_5000);
        let t = table(Version::V3, Abi::Amd64, functions);
        let mut registry = registered(&mut mem, arch, &t);
        let regs = UserRegs::new(arch, pc, SP, F1, 0);
        let trace = run(&regs, &mem, &mut registry, Access::Faultable);
        assert_eq!(trace.removed_sections, [SFRAME], "{what}");
        assert!(registry.is_empty(), "{what}");
        // The kernel maps every sframe_find() failure to "try the next method".
        assert_eq!(trace.entries, [pc, 0x40_5000], "{what}");
        assert_eq!(trace.methods, [Method::Fp], "{what}");

        // With no FP chain either, the corruption is why the walk ended.
        let mut mem = PagedMemory::new();
        let mut registry = registered(&mut mem, arch, &t);
        let regs = UserRegs::new(arch, pc, SP, 0, 0);
        let trace = run(&regs, &mem, &mut registry, Access::Faultable);
        assert_eq!(trace.entries, [pc], "{what}");
        let corrupt = Stop::Corrupt { sframe_start: SFRAME, reason: expect.into() };
        assert_eq!(trace.stop, corrupt, "{what}");
    }
}

#[test]
fn an_unmapped_sframe_page_is_a_real_fault_and_drops_the_section() {
    let (mut mem, regs) = x86_stack(0x40_1320, F3);
    let mut registry = registered(&mut mem, Arch::X86_64, &table(Version::V3, Abi::Amd64, x86_functions()));
    mem.unmap(SFRAME, 0x1000);
    frame_record(&mut mem, Arch::X86_64, F3, 0, 0x40_5000);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.removed_sections, [SFRAME]);
    assert!(!trace.would_fault);
    // The topmost frame is a leaf, so the FP fallback skips foo.
    assert_eq!(trace.entries, [0x40_1210, 0x40_1080, 0x40_1320, 0x40_5000]);
    assert_eq!(trace.methods, [Method::Fp; 3]);
}

#[test]
fn a_non_resident_sframe_page_stops_a_non_faulting_walk_and_is_faulted_in_otherwise() {
    let (mut mem, regs) = x86_stack(0x40_1320, F3);
    let mut registry = registered(&mut mem, Arch::X86_64, &table(Version::V3, Abi::Amd64, x86_functions()));
    let section = registry.entries().next().unwrap().clone();
    assert!(section.sframe_end - SFRAME < 0x1000, "one page");
    mem.evict(SFRAME, 0x1000);

    let trace = run(&regs, &mem, &mut registry, Access::NoFault);
    assert_eq!(trace.entries, [0x40_1210]);
    assert!(
        matches!(trace.stop, Stop::Fault { method: Method::Sframe, addr } if addr > SFRAME && addr < section.sframe_end)
    );
    assert!(trace.would_fault);
    assert!(trace.removed_sections.is_empty());
    assert_eq!(registry.len(), 1, "a fault the context forbids is not corruption");
    assert_eq!(mem.faults(), 0);

    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_1210, 0x40_1150, 0x40_1080, 0x40_1320]);
    assert_eq!(trace.stop, Stop::Outermost);
    assert!(!trace.would_fault);
    assert_eq!(mem.faults(), 1, "the .sframe page was faulted in once");
}

#[test]
fn a_stack_fault_while_applying_a_row_stops_without_fallback() {
    let (mut mem, regs) = x86_stack(0x40_1320, F3);
    let mut registry = registered(&mut mem, Arch::X86_64, &table(Version::V3, Abi::Amd64, x86_functions()));
    mem.evict(STACK, 0x1000);
    let trace = run(&regs, &mem, &mut registry, Access::NoFault);
    assert_eq!(trace.entries, [0x40_1210]);
    assert_eq!(trace.stop, Stop::Fault { addr: SP, method: Method::Sframe });
    assert!(trace.would_fault && trace.removed_sections.is_empty());
}

#[test]
fn the_header_is_read_once_at_registration() {
    let (mut mem, regs) = x86_stack(0x40_1320, F3);
    let mut registry = registered(&mut mem, Arch::X86_64, &table(Version::V3, Abi::Amd64, x86_functions()));
    // Like the kernel, the model keeps the parsed header: scribbling over
    // it in user memory changes nothing.
    mem.write(SFRAME, &[0; 28]);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.stop, Stop::Outermost);
    assert_eq!(trace.entries.len(), 4);
}

#[test]
fn x86_64_has_no_link_register_for_an_untracked_ra() {
    // A (hostile) header without the fixed RA offset: the row leaves RA untracked.
    let mut t = table(Version::V3, Abi::Amd64, vec![RawFunction::new(0x40_1000, 0x100, vec![row(0, true, &[8])])]);
    t.cfa_fixed_ra_offset = 0;
    let mut mem = PagedMemory::new();
    frame_record(&mut mem, Arch::X86_64, F1, 0, 0x40_5000);
    let mut registry = registered(&mut mem, Arch::X86_64, &t);
    let regs = UserRegs::new(Arch::X86_64, 0x40_1010, SP, F1, 0);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_1010], "a found row that fails is not retried with FP");
    assert!(matches!(&trace.stop, Stop::BadRule { reason } if reason.contains("link register")), "{:?}", trace.stop);
}

#[test]
fn a_recursion_stops_at_max_entries() {
    let arch = Arch::X86_64;
    let mut mem = PagedMemory::new();
    for i in 0..600u64 {
        let fp = STACK + 0x100 + 16 * i;
        frame_record(&mut mem, arch, fp, fp + 16, 0x40_1050);
    }
    let mut registry =
        registered(&mut mem, arch, &table(Version::V3, Abi::Amd64, vec![x86_function(0x40_1000, 0x100)]));
    let regs = UserRegs::new(arch, 0x40_1050, STACK, STACK + 0x100, 0);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries.len(), UNWIND_MAX_ENTRIES);
    assert!(trace.methods.iter().all(|&m| m == Method::Sframe));
    assert_eq!(trace.stop, Stop::MaxEntries);
}

/// AArch64: a leaf with RA in LR, main with a signed RA in its frame record
/// (FP-based rows), `_start` ending the walk.
fn aarch64_functions() -> Vec<RawFunction> {
    let mut framed = row(8, false, &[32, -24, -32]);
    framed.ra_mangled = true;
    vec![
        RawFunction::new(0x40_1000, 0x100, vec![row(0, true, &[0]), row(4, true, &[32, -24, -32]), framed]),
        RawFunction::new(0x40_1200, 0x40, vec![row(0, true, &[0])]),
        RawFunction::new(0x40_1300, 0x40, vec![row(0, true, &[0]), row(4, true, &[])]),
        // A function whose RA stays in LR although it has a frame.
        RawFunction::new(0x40_1400, 0x40, vec![row(0, true, &[16])]),
    ]
}

#[test]
fn aarch64_walk_uses_the_link_register_and_strips_pac() {
    let arch = Arch::Aarch64;
    let mut mem = PagedMemory::new();
    let fp = SP + 0x20;
    frame_record(&mut mem, arch, fp, 0, 0x002a_0000_0040_1320);
    let mut registry = registered(&mut mem, arch, &table(Version::V3, Abi::Aarch64Little, aarch64_functions()));
    let regs = UserRegs::new(arch, 0x40_1210, SP, fp, 0x40_1090);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_1210, 0x40_1090, 0x40_1320]);
    assert_eq!(trace.methods, [Method::Sframe; 2]);
    assert_eq!(trace.stop, Stop::Outermost);

    // Returning into a function that keeps RA in LR: fine only topmost.
    frame_record(&mut mem, arch, fp, 0, 0x40_1410);
    let regs = UserRegs::new(arch, 0x40_1090, SP, fp, 0);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_1090, 0x40_1410]);
    assert!(
        matches!(&trace.stop, Stop::BadRule { reason } if reason.contains("outside the topmost")),
        "{:?}",
        trace.stop
    );
}

/// s390x CFA words are stored as (offset − 160) / 8.
fn s390x_cfa(offset: i32) -> i32 {
    (offset - 160) / 8
}

/// s390x: a framed function, a leaf with RA in r14, `_start`.
fn s390x_functions() -> Vec<RawFunction> {
    vec![
        // After stmg/aghi: CFA = SP + 320, r14 at CFA − 48, r11 at CFA − 72.
        RawFunction::new(
            0x40_1000,
            0x100,
            vec![row(0, true, &[s390x_cfa(160)]), row(6, true, &[s390x_cfa(320), -48, -72])],
        ),
        // A leaf: CFA = SP + 160, RA still in r14.
        RawFunction::new(0x40_1200, 0x40, vec![row(0, true, &[s390x_cfa(160)])]),
        RawFunction::new(0x40_1300, 0x40, vec![row(0, true, &[s390x_cfa(160)]), row(4, true, &[])]),
    ]
}

#[test]
fn s390x_walk_decodes_cfa_offsets_and_takes_the_caller_sp_160_below_the_cfa() {
    let arch = Arch::S390x;
    let functions = s390x_functions();
    let mut mem = PagedMemory::new();
    word(&mut mem, arch, SP + 320 - 48, 0x40_1320);
    word(&mut mem, arch, SP + 320 - 72, 0x7777);
    let mut registry = registered(&mut mem, arch, &table(Version::V3, Abi::S390x, functions));
    let regs = UserRegs::new(arch, 0x40_1210, SP, 0x1111, 0x40_1050);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    // The leaf keeps SP (CFA − 160 = SP), allowed in the topmost frame only.
    assert_eq!(trace.entries, [0x40_1210, 0x40_1050, 0x40_1320]);
    assert_eq!(trace.methods, [Method::Sframe; 2]);
    assert_eq!(trace.stop, Stop::Outermost);
}

#[test]
fn s390x_register_rules_hold_in_the_topmost_frame_only() {
    let arch = Arch::S390x;
    let flex = |start: u64, words: &[(u32, i32)]| RawFunction {
        flex: true,
        ..RawFunction::new(start, 0x40, vec![flex_row(0, words)])
    };
    let functions = vec![
        RawFunction::new(0x40_1300, 0x40, vec![row(0, true, &[s390x_cfa(160)]), row(4, true, &[])]),
        // CFA = r15 + 168, RA in r5.
        flex(0x40_1400, &[(ctl(Some(15), false), s390x_cfa(168)), (ctl(Some(5), false), 0)]),
        // CFA = r10 + 320, RA saved at CFA − 48.
        flex(0x40_1500, &[(ctl(Some(10), false), s390x_cfa(320)), (ctl(None, true), -48)]),
    ];
    let mut mem = PagedMemory::new();
    let mut registry = registered(&mut mem, arch, &table(Version::V3, Abi::S390x, functions));

    let mut regs = UserRegs::new(arch, 0x40_1410, SP, 0, 0);
    regs.gprs[5] = 0x40_1320;
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_1410, 0x40_1320]);
    assert_eq!(trace.stop, Stop::Outermost);

    // r10-based CFA in the topmost frame, then the r5 rule one frame up.
    let mut regs = UserRegs::new(arch, 0x40_1510, SP, 0, 0);
    regs.gprs[10] = SP + 0x40;
    word(&mut mem, arch, SP + 0x40 + 320 - 48, 0x40_1410);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_1510, 0x40_1410]);
    assert!(
        matches!(&trace.stop, Stop::BadRule { reason } if reason.contains("outside the topmost")),
        "{:?}",
        trace.stop
    );
}

#[test]
fn s390x_back_chain_leaves_fp_unknown_for_a_later_fp_based_row() {
    let arch = Arch::S390x;
    // Back chain from the topmost frame (no SFrame data at its PC) into a
    // function whose row is FP-based: FP is 0 after a back-chain step.
    let functions = vec![RawFunction::new(0x40_1000, 0x100, vec![row(0, false, &[s390x_cfa(160)])])];
    let mut mem = PagedMemory::new();
    let caller = SP + 0xa0;
    word(&mut mem, arch, SP, caller);
    word(&mut mem, arch, caller + 112, 0x40_1050);
    let mut registry = registered(&mut mem, arch, &table(Version::V3, Abi::S390x, functions));
    let regs = UserRegs::new(arch, 0x40_2000, SP, caller, 0);
    let trace = run(&regs, &mem, &mut registry, Access::Faultable);
    assert_eq!(trace.entries, [0x40_2000, 0x40_1050]);
    assert_eq!(trace.methods, [Method::Fp]);
    assert!(matches!(&trace.stop, Stop::BadRule { reason } if reason.contains("FP is below SP")), "{:?}", trace.stop);
}

/// Every single-bit flip of every section byte after the (cached) header,
/// over pseudo-random stack contents: the walk ends, within its bounds,
/// without panicking, whatever the data says.
#[test]
fn hostile_sections_and_stacks_never_panic() {
    let scenarios: Vec<(Arch, Abi, Vec<RawFunction>)> =
        vec![(Arch::X86_64, Abi::Amd64, x86_functions()), (Arch::Aarch64, Abi::Aarch64Little, aarch64_functions())];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let cfg = UnwindConfig { max_entries: 64, ..UnwindConfig::default() };
    let mut walks = 0;
    for (arch, abi, functions) in scenarios {
        let mut mem = PagedMemory::new();
        // Stack words: mostly pointers into the stack and the text, some junk.
        for i in 0..64u64 {
            let value = match next() % 4 {
                0 => STACK + 0xe00 + ((next() % 0x200) & !7),
                1 => TEXT.0 + 0x1000 + next() % 0x600,
                2 => 0,
                _ => next(),
            };
            word(&mut mem, arch, SP + 8 * i, value);
        }
        let t = table(Version::V3, abi, functions);
        let bytes = sframe::write::encode(&t, SFRAME).unwrap();
        let registry = registered(&mut mem, arch, &t);
        for byte in 28..bytes.len() {
            for bit in 0..8 {
                let mut flipped = bytes.clone();
                flipped[byte] ^= 1 << bit;
                mem.write(SFRAME, &flipped);
                let mut registry = registry.clone();
                let pc = [0x40_1210, 0x40_1090, 0x40_1010][(byte + bit) % 3];
                let regs = UserRegs::new(arch, pc, SP, SP + 0x40, 0x40_1090);
                let trace = unwind_user(&regs, &mem, &mut registry, Access::Faultable, &cfg);
                assert!(!trace.entries.is_empty() && trace.entries.len() <= cfg.max_entries);
                assert_eq!(trace.methods.len(), trace.entries.len() - 1);
                assert!(trace.removed_sections.iter().all(|&s| s == SFRAME));
                assert_eq!(registry.is_empty(), !trace.removed_sections.is_empty());
                walks += 1;
            }
        }
    }
    assert!(walks > 1000);
}

/// Memory whose pages never change: its generation never moves and every
/// page is stable, so the model remembers every lookup made in it.
struct Frozen(PagedMemory);

impl kmodel::memory::UserMemory for Frozen {
    fn read(&self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), kmodel::memory::MemError> {
        self.0.read(addr, buf, access)
    }

    fn generation(&self) -> Option<u64> {
        Some(0)
    }

    fn stable_page(&self, _: u64) -> bool {
        true
    }
}

/// A remembered lookup is what a new lookup finds: walks again in the same
/// memory give the walk a memory that remembers nothing gives, also after
/// the section is registered again, at the same place, for other text
/// (which changes no memory).
#[test]
fn remembered_lookups_are_what_new_lookups_find() {
    let (mut mem, regs) = x86_stack(0x40_1320, F3);
    let t = table(Version::V3, Abi::Amd64, x86_functions());
    let mut registry = registered(&mut mem, Arch::X86_64, &t);
    let sframe = registry.entries().next().map(|e| (e.sframe_start, e.sframe_end)).unwrap();
    let fresh = run(&regs, &mem, &mut registry.clone(), Access::Faultable);
    let frozen = Frozen(mem);
    let cfg = UnwindConfig::default();
    for _ in 0..2 {
        assert_eq!(unwind_user(&regs, &frozen, &mut registry, Access::Faultable, &cfg), fresh);
    }
    // Now main (0x40_1000) starts before the registered text, which its
    // return address 0x40_1080 lies in: the lookup finds the section, then
    // refuses the function.
    registry.remove(SFRAME).unwrap();
    let text = (0x40_1050, 0x40_4000);
    registry.add(&frozen.0, support::ANY_VMA, Access::Faultable, sframe, text, SframeMode::Lab, false).unwrap();
    let mut other = SframeRegistry::new(Arch::X86_64);
    other.add(&frozen.0, support::ANY_VMA, Access::Faultable, sframe, text, SframeMode::Lab, false).unwrap();
    let fresh = run(&regs, &frozen.0, &mut other, Access::Faultable);
    assert_ne!(fresh.methods, [Method::Sframe; 3], "main's frame is no longer SFrame's");
    assert_eq!(unwind_user(&regs, &frozen, &mut registry, Access::Faultable, &cfg), fresh);
}
