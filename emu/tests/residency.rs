//! Page residency: pages of the program file start non-resident; a
//! non-faultable read of one fails and changes nothing, a faultable one
//! succeeds and is counted; the guest's own touches and evictions behave as
//! demand paging does; and `.sframe` can be read straight out of guest memory.

mod common;

use emu::{Arch, Emulator, MemFault, RunLimit, Stop, PAGE_SIZE};
use kmodel::memory::Access;
use sframe::Section;

#[test]
fn non_faultable_read_fails_without_side_effects_and_faultable_read_is_counted() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("hello", arch, &[]) else { continue };
        let file = std::fs::read(&exe).expect("read the guest");
        let mut emu = Emulator::load(&exe, common::config(&exe, &[], b"")).expect("load");
        let entry = emu.image().entry;
        let segment = emu.image().segments.iter().find(|s| (s.vaddr..s.vaddr + s.memsz).contains(&entry)).unwrap();
        let expected = &file[(segment.offset + entry - segment.vaddr) as usize..][..16];
        assert!(!emu.pages().is_resident(entry), "{arch}: the entry page starts resident");

        let before = emu.page_stats();
        let resident_before = emu.pages().resident_pages();
        let mut buf = [0u8; 16];
        assert_eq!(emu.read(entry, &mut buf, Access::NoFault), Err(MemFault::NotResident { addr: entry }));
        assert_eq!(emu.read_nofault(entry, &mut buf), Err(MemFault::NotResident { addr: entry }));
        assert_eq!(buf, [0; 16], "{arch}: a failed read filled the buffer");
        assert_eq!(emu.page_stats(), before, "{arch}: a failed read counted something");
        assert_eq!(emu.pages().resident_pages(), resident_before, "{arch}: a failed read made a page resident");

        emu.read(entry, &mut buf, Access::Faultable).expect("faultable read");
        assert_eq!(&buf[..], expected, "{arch}: wrong bytes at the entry point");
        assert_eq!(emu.page_stats().kernel_faults, before.kernel_faults + 1, "{arch}");
        assert!(emu.pages().is_resident(entry));
        // Now resident: both modes succeed and nothing more is counted.
        emu.read(entry, &mut buf, Access::NoFault).expect("non-faultable read of a resident page");
        emu.read(entry, &mut buf, Access::Faultable).expect("faultable read of a resident page");
        assert_eq!(emu.page_stats().kernel_faults, before.kernel_faults + 1, "{arch}");

        // Unmapped memory fails in both modes, also without side effects.
        let stats = emu.page_stats();
        assert_eq!(emu.read(8, &mut buf, Access::Faultable), Err(MemFault::Unmapped { addr: 8 }));
        assert_eq!(emu.page_stats(), stats);
    }
}

#[test]
fn guest_touches_fault_pages_in_and_evicted_pages_fault_again() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("recursion", arch, &[]) else { continue };
        let (reference, _) = common::run_emu(&exe, &[], b"");
        let mut emu = Emulator::load(&exe, common::config(&exe, &[], b"")).expect("load");
        assert_eq!(emu.page_stats().guest_faults, 0);
        assert_eq!(emu.run(RunLimit::icount(200_000)).expect("run"), Stop::Limit);
        let touched = emu.page_stats().guest_faults;
        assert!(touched > 10, "{arch}: only {touched} guest faults");
        assert!(emu.pages().is_resident(emu.image().entry), "{arch}: executed code is not resident");

        // The lowest stack page the guest has touched so far (on s390x a fresh
        // frame's lowest bytes are written only by the next call).
        let sp = emu.regs().expect("registers").sp;
        let page = (0..)
            .map(|i| (sp & !(PAGE_SIZE - 1)) + i * PAGE_SIZE)
            .find(|&page| emu.pages().is_resident(page))
            .expect("a resident stack page");
        assert_eq!(emu.evict(page, PAGE_SIZE).expect("evict"), 1);
        let mut word = [0u8; 8];
        assert_eq!(emu.read(page, &mut word, Access::NoFault), Err(MemFault::NotResident { addr: page }));
        let exit = emu.run_to_exit().expect("run");
        assert!(emu.page_stats().guest_faults > touched, "{arch}: no fault after eviction");
        assert_eq!(emu.page_stats().evictions, 1);
        assert_eq!((exit.shell_status(), emu.stdout()), (reference.status, &reference.stdout[..]), "{arch}");
    }
}

#[test]
fn sframe_is_read_from_guest_memory() {
    // binutils 2.40 cannot emit SFrame for s390x.
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let Some(exe) = common::build("recursion", arch, &["-Wa,--gsframe"]) else { continue };
        let file = std::fs::read(&exe).expect("read the guest");
        let elf = goblin::elf::Elf::parse(&file).expect("parse the guest");
        let main =
            elf.syms.iter().find(|sym| elf.strtab.get_at(sym.st_name) == Some("main")).expect("main symbol").st_value;

        let mut emu = Emulator::load(&exe, common::config(&exe, &[], b"")).expect("load");
        let sframe = emu.sframe().expect("a PT_GNU_SFRAME segment");
        emu.run_to_exit().expect("run");
        // Whatever the guest touched, evict the section as memory pressure would.
        emu.evict(sframe.addr, sframe.size).expect("evict");

        let before = emu.page_stats();
        let err = Section::parse(emu.view(sframe.addr, sframe.size, Access::NoFault), sframe.addr)
            .expect_err("non-faultable parse of an evicted section");
        assert!(err.is_fault(), "{arch}: {err}");
        assert_eq!(emu.page_stats(), before, "{arch}: the failed parse had side effects");

        {
            let view = emu.view(sframe.addr, sframe.size, Access::Faultable);
            let section = Section::parse(view, sframe.addr).expect("faultable parse");
            let lookup = section.lookup(main).expect("lookup").expect("main is covered");
            assert_eq!(lookup.fre_start, 0, "{arch}: {lookup:?}");
        }
        assert!(emu.page_stats().kernel_faults > before.kernel_faults, "{arch}: no fault counted");
    }
}
