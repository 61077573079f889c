//! The emulator as the kernel model sees it: user memory through
//! `kmodel::memory::UserMemory` (a non-faultable read of a non-resident page
//! fails without side effects; a faultable one succeeds and is counted, also
//! when the SFrame reader pulls `.sframe` out of the process), and the
//! registers at an NMI as `kmodel::arch::UserRegs`.

use emu::{Arch, Config, Emulator, NmiSource, PAGE_SIZE};
use kmodel::memory::{Access, MemError, UserBytes, UserMemory};
use sframe::Section;
use std::path::PathBuf;

fn lab_v3(arch: Arch) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name()).join("lab-v3")
}

fn load(arch: Arch) -> Emulator {
    let exe = lab_v3(arch);
    let args = vec![exe.to_string_lossy().into_owned().into_bytes(), b"recurse".to_vec()];
    Emulator::load(&exe, Config { args, ..Config::default() }).expect("load the guest")
}

#[test]
fn user_memory_faults_only_when_allowed() {
    for arch in Arch::ALL {
        let mut emu = load(arch);
        let sframe = emu.sframe().expect("lab-v3 has PT_GNU_SFRAME");
        NmiSource::every(997).unwrap().next(&mut emu).expect("run").expect("an NMI");
        // The guest does not read .sframe, but its first page may hold
        // something it does; evict it as memory pressure would.
        emu.evict(sframe.addr, sframe.size).expect("evict");
        assert!(!emu.pages().is_resident(sframe.addr), "{arch}");
        let resident = emu.pages().resident_pages();
        let before = emu.page_stats();

        let mut buf = [0u8; 4];
        let faults = {
            let mem = emu.user_memory();
            let faults = mem.fault_count();
            let err = mem.read(sframe.addr, &mut buf, Access::NoFault);
            assert_eq!(err, Err(MemError::WouldFault { addr: sframe.addr }), "{arch}");
            assert_eq!(buf, [0; 4], "{arch}: a failed read filled the buffer");
            assert_eq!(mem.fault_count(), faults, "{arch}: a failed read was counted");
            let source = UserBytes { mem: &mem, addr: sframe.addr, len: sframe.size, access: Access::NoFault };
            let parsed = Section::parse(source, sframe.addr);
            assert!(parsed.is_err_and(|e| e.is_fault()), "{arch}: non-faultable parse of a non-resident section");
            assert_eq!(mem.fault_count(), faults, "{arch}");
            assert_eq!(mem.read(8, &mut buf, Access::Faultable), Err(MemError::Unmapped { addr: 8 }), "{arch}");
            faults
        };
        assert_eq!((emu.page_stats(), emu.pages().resident_pages()), (before, resident), "{arch}: side effects");

        {
            let mem = emu.user_memory();
            mem.read(sframe.addr, &mut buf, Access::Faultable).expect("faultable read");
            // The SFrame preamble: magic 0xdee2 in the guest's byte order, version 3.
            let magic = if arch == Arch::S390x { [0xde, 0xe2] } else { [0xe2, 0xde] };
            assert_eq!((buf[..2].to_vec(), buf[2]), (magic.to_vec(), 3), "{arch}");
            assert_eq!(mem.fault_count(), faults + 1, "{arch}: one page brought in");
            let source = UserBytes { mem: &mem, addr: sframe.addr, len: sframe.size, access: Access::Faultable };
            let section = Section::parse(source, sframe.addr).expect("faultable parse");
            let recurse = symbol(arch, "recurse");
            assert!(section.lookup(recurse).expect("lookup").is_some(), "{arch}: recurse not covered");
            let pages = sframe.size.div_ceil(PAGE_SIZE);
            assert!(mem.fault_count() <= faults + pages + 1, "{arch}: more faults than pages");
        }
        assert!(emu.pages().is_resident(sframe.addr), "{arch}");
        // Now resident: a non-faultable read succeeds.
        emu.user_memory().read(sframe.addr, &mut buf, Access::NoFault).expect("read a resident page");
    }
}

/// A view serves reads inside pages it has found resident from their host
/// bytes: the same bytes as a fresh read of each, in every mode, also for
/// reads that cross a page boundary, and no fault counted.
#[test]
fn remembered_pages_read_as_fresh_ones() {
    for arch in Arch::ALL {
        let mut emu = load(arch);
        let sframe = emu.sframe().expect("lab-v3 has PT_GNU_SFRAME");
        NmiSource::every(997).unwrap().next(&mut emu).expect("run").expect("an NMI");
        let (start, end) = (sframe.addr, sframe.addr + sframe.size);
        let mut expected = vec![0u8; sframe.size as usize];
        emu.user_memory().read(start, &mut expected, Access::Faultable).expect("bring the section in");
        let faults = emu.page_stats().kernel_faults;
        let mem = emu.user_memory();
        // Odd sizes and strides, so that reads straddle pages.
        for (size, stride) in [(1usize, 7u64), (4, 5), (8, 3), (24, 11)] {
            let mut at = start;
            while at + size as u64 <= end {
                let mut buf = vec![0u8; size];
                let offset = (at - start) as usize;
                for access in [Access::Faultable, Access::NoFault] {
                    mem.read(at, &mut buf, access).expect("read");
                    assert_eq!(buf, expected[offset..offset + size], "{arch}: {at:#x} ({size} bytes, {access:?})");
                }
                mem.read_untracked(at, &mut buf).expect("read");
                assert_eq!(buf, expected[offset..offset + size], "{arch}: {at:#x} ({size} bytes, untracked)");
                at += stride;
            }
        }
        assert_eq!(mem.read(8, &mut [0u8; 4], Access::Faultable), Err(MemError::Unmapped { addr: 8 }), "{arch}");
        assert_eq!(mem.fault_count(), faults, "{arch}: a resident section faulted");
    }
}

fn symbol(arch: Arch, name: &str) -> u64 {
    let bytes = std::fs::read(lab_v3(arch)).expect("read the guest");
    let elf = goblin::elf::Elf::parse(&bytes).expect("parse the guest");
    elf.syms.iter().find(|sym| elf.strtab.get_at(sym.st_name) == Some(name)).expect("the symbol").st_value
}

#[test]
fn registers_convert_to_the_models_dwarf_numbering() {
    for arch in Arch::ALL {
        let mut emu = load(arch);
        let point = NmiSource::every(1009).unwrap().next(&mut emu).expect("run").expect("an NMI");
        let user = kmodel::arch::UserRegs::from(&point.regs);
        assert_eq!(user.arch, arch);
        assert_eq!(user.pc, point.pc, "{arch}");
        assert_eq!(user.sp(), point.sp, "{arch}");
        assert_eq!(user.fp(), point.regs.fp, "{arch}");
        assert_eq!(user.lr(), point.regs.ra, "{arch}");
        assert_eq!(user.gprs.len(), kmodel::arch::UserRegs::gpr_count(user.arch), "{arch}");
        assert_eq!(user.gprs[..point.regs.gprs.len()], point.regs.gprs[..], "{arch}");
    }
}
