//! The FP method: frame-pointer chains on x86-64 and AArch64, the s390x
//! back chain, the kernel's checks against hostile stacks, fault modes and
//! the entry limit.

mod support;

use kmodel::arch::{Arch, UserRegs};
use kmodel::memory::{Access, PagedMemory};
use kmodel::unwind::{unwind_user, Method, SframeRegistry, Stop, Trace, UnwindConfig, UNWIND_MAX_ENTRIES};
use support::sections::{frame_record, word, STACK};

const PC: u64 = 0x40_1234;

fn walk(arch: Arch, mem: &PagedMemory, regs: &UserRegs, access: Access, cfg: &UnwindConfig) -> Trace {
    unwind_user(regs, mem, &mut SframeRegistry::new(arch), access, cfg)
}

fn default_walk(arch: Arch, mem: &PagedMemory, regs: &UserRegs) -> Trace {
    walk(arch, mem, regs, Access::Faultable, &UnwindConfig::default())
}

fn fp_arches() -> [Arch; 2] {
    [Arch::X86_64, Arch::Aarch64]
}

/// Three frame records ending in FP 0; SP below the first.
fn chain(arch: Arch) -> (PagedMemory, UserRegs) {
    let mut mem = PagedMemory::new();
    let sp = STACK + 0xf00;
    let (f0, f1, f2) = (STACK + 0xf40, STACK + 0xf80, STACK + 0xfc0);
    frame_record(&mut mem, arch, f0, f1, 0x40_1100);
    frame_record(&mut mem, arch, f1, f2, 0x40_1200);
    frame_record(&mut mem, arch, f2, 0, 0x40_1300);
    (mem, UserRegs::new(arch, PC, sp, f0, 0))
}

#[test]
fn fp_chain_is_walked_to_the_zero_frame_pointer() {
    for arch in fp_arches() {
        let (mem, regs) = chain(arch);
        let trace = default_walk(arch, &mem, &regs);
        assert_eq!(trace.entries, [PC, 0x40_1100, 0x40_1200, 0x40_1300], "{arch:?}");
        assert_eq!(trace.methods, [Method::Fp; 3]);
        // FP 0 is below SP: the usual end of the chain, not an error.
        match &trace.stop {
            Stop::NoMethod { .. } => assert!(trace.stop.to_string().contains("FP is below SP"), "{}", trace.stop),
            other => panic!("{arch:?}: {other:?}"),
        }
        assert!(!trace.would_fault && trace.removed_sections.is_empty());
    }
}

#[test]
fn a_frame_pointer_below_the_stack_pointer_ends_the_walk_at_once() {
    for arch in fp_arches() {
        let (mem, mut regs) = chain(arch);
        regs = UserRegs::new(arch, regs.pc, STACK + 0xf50, STACK + 0xf40, 0);
        let trace = default_walk(arch, &mem, &regs);
        assert_eq!(trace.entries, [PC]);
        assert!(matches!(trace.stop, Stop::NoMethod { .. }));
    }
}

#[test]
fn frames_that_do_not_grow_toward_the_caller_are_rejected() {
    for arch in fp_arches() {
        // A frame pointing at itself, and a two-frame cycle: both end after
        // one step because the next CFA would not be above the new SP.
        for target in [STACK + 0xf40, STACK + 0xf00] {
            let mut mem = PagedMemory::new();
            frame_record(&mut mem, arch, STACK + 0xf40, target, 0x40_1100);
            frame_record(&mut mem, arch, STACK + 0xf00, STACK + 0xf40, 0x40_1200);
            let regs = UserRegs::new(arch, PC, STACK + 0xe00, STACK + 0xf40, 0);
            let trace = default_walk(arch, &mem, &regs);
            assert_eq!(trace.entries, [PC, 0x40_1100], "{arch:?} -> {target:#x}");
            assert!(matches!(trace.stop, Stop::NoMethod { .. }));
        }
    }
}

#[test]
fn a_misaligned_frame_is_rejected() {
    for arch in fp_arches() {
        let mut mem = PagedMemory::new();
        frame_record(&mut mem, arch, STACK + 0xf40, STACK + 0xf84, 0x40_1100);
        frame_record(&mut mem, arch, STACK + 0xf84, 0, 0x40_1200);
        let regs = UserRegs::new(arch, PC, STACK + 0xf00, STACK + 0xf40, 0);
        let trace = default_walk(arch, &mem, &regs);
        assert_eq!(trace.entries, [PC, 0x40_1100]);
        match &trace.stop {
            Stop::NoMethod { .. } => assert!(trace.stop.to_string().contains("aligned"), "{}", trace.stop),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn hostile_frame_pointers_end_in_a_check_or_a_fault() {
    let arch = Arch::X86_64;
    // Wrap-around: FP + 16 overflows to a small CFA.
    let mut mem = PagedMemory::new();
    frame_record(&mut mem, arch, STACK + 0xf40, u64::MAX - 7, 0x40_1100);
    let regs = UserRegs::new(arch, PC, STACK + 0xf00, STACK + 0xf40, 0);
    let trace = default_walk(arch, &mem, &regs);
    assert_eq!(trace.entries, [PC, 0x40_1100]);
    assert!(matches!(trace.stop, Stop::NoMethod { .. }), "{:?}", trace.stop);

    // A frame pointer into unmapped memory: the RA load faults.
    let mut mem = PagedMemory::new();
    frame_record(&mut mem, arch, STACK + 0xf40, 0x7100_0000, 0x40_1100);
    let trace = default_walk(arch, &mem, &regs);
    assert_eq!(trace.entries, [PC, 0x40_1100]);
    assert_eq!(trace.stop, Stop::Fault { addr: 0x7100_0008, method: Method::Fp });
    assert!(!trace.would_fault);
}

#[test]
fn a_long_chain_stops_at_max_entries() {
    for arch in fp_arches() {
        let mut mem = PagedMemory::new();
        let frames = 600u64;
        for i in 0..frames {
            let fp = STACK + 0x100 + 16 * i;
            frame_record(&mut mem, arch, fp, fp + 16, 0x40_0000 + i);
        }
        let regs = UserRegs::new(arch, PC, STACK, STACK + 0x100, 0);
        let trace = default_walk(arch, &mem, &regs);
        assert_eq!(trace.entries.len(), UNWIND_MAX_ENTRIES);
        assert_eq!(trace.methods.len(), UNWIND_MAX_ENTRIES - 1);
        assert_eq!(trace.stop, Stop::MaxEntries);
        assert_eq!(trace.entries[1..5], [0x40_0000, 0x40_0001, 0x40_0002, 0x40_0003]);

        for (max, expect) in [(0usize, 0usize), (1, 1), (3, 3)] {
            let cfg = UnwindConfig { max_entries: max, ..UnwindConfig::default() };
            let trace = walk(arch, &mem, &regs, Access::Faultable, &cfg);
            assert_eq!(trace.entries.len(), expect);
            assert_eq!(trace.stop, Stop::MaxEntries);
        }
    }
}

#[test]
fn without_methods_only_the_pc_is_recorded() {
    let (mem, regs) = chain(Arch::X86_64);
    let cfg = UnwindConfig { order: vec![], ..UnwindConfig::default() };
    let trace = walk(Arch::X86_64, &mem, &regs, Access::Faultable, &cfg);
    assert_eq!(trace.entries, [PC]);
    assert_eq!(trace.stop, Stop::NoMethod { misses: Vec::new() });
    assert_eq!(trace.stop.to_string(), "no method could step: no unwind method available");
}

#[test]
fn a_non_resident_stack_page_fails_without_faults_and_is_faulted_in_otherwise() {
    for arch in fp_arches() {
        let (mem, regs) = chain(arch);
        mem.evict(STACK, 0x1000);
        let trace = walk(arch, &mem, &regs, Access::NoFault, &UnwindConfig::default());
        assert_eq!(trace.entries, [PC]);
        assert_eq!(trace.stop, Stop::Fault { addr: STACK + 0xf48, method: Method::Fp });
        assert!(trace.would_fault);
        assert_eq!(mem.faults(), 0);

        let trace = walk(arch, &mem, &regs, Access::Faultable, &UnwindConfig::default());
        assert_eq!(trace.entries.len(), 4);
        assert!(!trace.would_fault);
        assert_eq!(mem.faults(), 1);
    }
}

/// s390x frames: the back chain word at each SP, the caller's r14 at the
/// caller's SP + 112.
fn back_chain(frames: &[(u64, u64, u64)]) -> PagedMemory {
    let mut mem = PagedMemory::new();
    for &(sp, caller_sp, ra_slot_value) in frames {
        word(&mut mem, Arch::S390x, sp, caller_sp);
        if caller_sp != 0 {
            word(&mut mem, Arch::S390x, caller_sp + 112, ra_slot_value);
        }
    }
    mem
}

#[test]
fn s390x_back_chain_is_walked_to_the_outermost_frame() {
    let arch = Arch::S390x;
    let (s0, s1, s2) = (STACK + 0xc00, STACK + 0xca0, STACK + 0xd40);
    let mem = back_chain(&[(s0, s1, 0x100_1000), (s1, s2, 0x100_2000), (s2, 0, 0)]);
    let regs = UserRegs::new(arch, 0x100_0040, s0, 0x1234, 0x9999);
    let trace = default_walk(arch, &mem, &regs);
    assert_eq!(trace.entries, [0x100_0040, 0x100_1000, 0x100_2000]);
    assert_eq!(trace.methods, [Method::Fp; 2]);
    // Back chain 0 is the ABI's end marker: a successful end.
    assert_eq!(trace.stop, Stop::Outermost);
}

#[test]
fn s390x_back_chain_must_grow_and_stay_aligned() {
    let arch = Arch::S390x;
    let s0 = STACK + 0xc00;
    // Pointing at itself: the topmost frame may keep its SP (one step),
    // the next one may not.
    let mem = back_chain(&[(s0, s0, 0x100_1000)]);
    let regs = UserRegs::new(arch, 0x100_0040, s0, 0, 0);
    let trace = default_walk(arch, &mem, &regs);
    assert_eq!(trace.entries, [0x100_0040, 0x100_1000]);
    assert!(matches!(trace.stop, Stop::NoMethod { .. }), "{:?}", trace.stop);

    // Pointing down the stack, or misaligned: no step at all.
    for caller in [s0 - 0x100, s0 + 0xa4] {
        let mem = back_chain(&[(s0, caller, 0x100_1000)]);
        let trace = default_walk(arch, &mem, &regs);
        assert_eq!(trace.entries, [0x100_0040], "caller SP {caller:#x}");
        assert!(matches!(trace.stop, Stop::NoMethod { .. }));
    }

    // A two-frame cycle ends after the first step.
    let s1 = s0 + 0xa0;
    let mem = back_chain(&[(s0, s1, 0x100_1000), (s1, s0, 0x100_2000)]);
    let trace = default_walk(arch, &mem, &regs);
    assert_eq!(trace.entries, [0x100_0040, 0x100_1000]);
}

/// x86's `user.c`: at a function's first instruction under a uprobe the
/// topmost frame is the entry frame (CFA = SP + 1 word, RA at SP), a
/// compat task's words are 4 bytes, and VM86 mode gives no trace.
#[test]
fn uprobe_entry_frames_compat_words_and_vm86() {
    for case in support::x86_modes::cases() {
        let trace = default_walk(Arch::X86_64, &case.mem, &case.regs);
        assert_eq!(trace.entries, case.trace, "{}", case.name);
        assert!(trace.methods.iter().all(|&m| m == Method::Fp), "{}", case.name);
    }
    // AArch64 has no entry rule: a probe there changes nothing.
    let (mem, regs) = chain(Arch::Aarch64);
    let probed = UserRegs { probe: Some([0x55, 0, 0, 0]), ..regs.clone() };
    assert_eq!(default_walk(Arch::Aarch64, &mem, &probed).entries, default_walk(Arch::Aarch64, &mem, &regs).entries);
}
