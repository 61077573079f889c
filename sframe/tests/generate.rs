//! The generator against gas: for programs built here with `-Wa,--gsframe`,
//! the rule that the V3 section generated from `.eh_frame` gives at every
//! PC equals the rule of gas's own V1 section, for every function gas
//! covered. Then injection: the rewritten binaries still run the same under
//! qemu-user, their section passes the kernel profile's validation, and
//! simple-frame-rs parses them. (That the lab unwinds them is checked by the
//! workspace root's `tests/cli_sframe_gen.rs`.)

mod common;

use std::path::Path;
use std::process::Command;

use sframe::elf::{self, inject};
use sframe::read::validate;
use sframe::write::generate::{self, Cfi};
use sframe::{write, Section, Version};

struct Generated {
    input: elf::CfiInput,
    section: Vec<u8>,
    address: u64,
}

fn generate_v3(path: &Path) -> Generated {
    let input = elf::load_cfi(path.to_str().unwrap()).unwrap();
    let cfi = Cfi { kind: input.kind, data: &input.cfi, address: input.cfi_address };
    let generated = generate::generate(&cfi, input.abi, Version::V3).unwrap();
    let address = inject::placement(&input.data).unwrap().address;
    let section = write::encode(&generated.table, address).unwrap();
    Generated { input, section, address }
}

/// Compares at every PC of every function gas covered; returns the number
/// of PCs compared.
fn compare_with_gas(path: &Path) -> usize {
    let gas = elf::load(path.to_str().unwrap(), 0).unwrap();
    assert!(gas.found, "{path:?} has no gas .sframe");
    let gas = Section::parse(gas.bytes.as_slice(), gas.base).unwrap();
    let ours = generate_v3(path);
    let ours_section = Section::parse(ours.section.as_slice(), ours.address).unwrap();
    let abi = ours.input.abi;
    let mut compared = 0;
    let mut differences = Vec::new();
    for fde in gas.fdes().map(Result::unwrap) {
        for pc in fde.start..fde.start + u64::from(fde.size) {
            let theirs = gas.lookup(pc).unwrap().map(|l| l.rule.canonical(abi));
            let mine = ours_section.lookup(pc).unwrap().map(|l| l.rule.canonical(abi));
            compared += 1;
            if theirs != mine {
                differences.push(format!(
                    "{} {pc:#x}: gas {theirs:?}, generated {mine:?}",
                    ours.input.function_name(pc).unwrap_or("?")
                ));
            }
        }
    }
    assert!(differences.is_empty(), "{path:?}: {} differences:\n{}", differences.len(), differences.join("\n"));
    compared
}

#[test]
fn generated_v3_matches_gas_v1_at_every_pc_x86_64() {
    if !common::tools_or_skip(&["gcc"]) {
        return;
    }
    let mut compared = 0;
    for (name, flags) in [
        ("x86-o2", &["-O2", "-static", "-Wa,--gsframe"][..]),
        ("x86-fp", &["-O2", "-static", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-Wa,--gsframe"][..]),
        ("x86-o0", &["-O0", "-static", "-Wa,--gsframe"][..]),
        // Dynamic: ld adds PLT FDEs (INC PLT0 + MASK pltN) to both sides.
        ("x86-pie", &["-O2", "-Wa,--gsframe"][..]),
        ("x86-nopie", &["-O2", "-no-pie", "-Wa,--gsframe"][..]),
    ] {
        compared += compare_with_gas(&common::build_prog("gcc", "sframe-generate", name, flags));
    }
    assert!(compared > 1000);
}

#[test]
fn generated_v3_matches_gas_v1_at_every_pc_aarch64() {
    if !common::tools_or_skip(&["aarch64-linux-gnu-gcc"]) {
        return;
    }
    let mut compared = 0;
    for (name, flags) in [
        ("a64-o2", &["-O2", "-static", "-Wa,--gsframe"][..]),
        ("a64-fp", &["-O2", "-static", "-fno-omit-frame-pointer", "-Wa,--gsframe"][..]),
        ("a64-pac", &["-O2", "-static", "-mbranch-protection=pac-ret+leaf", "-Wa,--gsframe"][..]),
        ("a64-pacb", &["-O2", "-static", "-mbranch-protection=pac-ret+b-key", "-Wa,--gsframe"][..]),
    ] {
        compared += compare_with_gas(&common::build_prog("aarch64-linux-gnu-gcc", "sframe-generate", name, flags));
    }
    assert!(compared > 1000);
}

fn injected_runs_the_same(gcc: &str, qemu: &str, name: &str, flags: &[&str]) {
    if !common::tools_or_skip(&[gcc, qemu]) {
        return;
    }
    let original = common::build_prog(gcc, "sframe-generate", name, flags);
    let ours = generate_v3(&original);
    let injected_bytes = inject::inject(&ours.input.data, &ours.section).unwrap();
    let injected = original.with_extension("sframe-v3");
    std::fs::write(&injected, &injected_bytes).unwrap();
    let exec = std::fs::metadata(&original).unwrap().permissions();
    std::fs::set_permissions(&injected, exec).unwrap();
    let run = |exe: &Path| Command::new(qemu).arg(exe).args(["one", "two"]).output().unwrap();
    let (a, b) = (run(&original), run(&injected));
    assert_eq!(a.status.code(), b.status.code(), "{name}");
    assert_eq!(a.stdout, b.stdout, "{name}");
    assert!(!a.stdout.is_empty());
    // The section as the file now carries it: valid for the kernel too.
    let loaded = elf::load(injected.to_str().unwrap(), 0).unwrap();
    assert_eq!((loaded.base, loaded.bytes.as_slice()), (ours.address, ours.section.as_slice()));
    let options = validate::Options { profile: validate::Profile::Kernel, text: loaded.text };
    let report = validate::check(loaded.bytes.as_slice(), loaded.base, &options);
    assert!(report.is_valid(), "{name}: {:?}", report.problems);
    let other = simple_frame_rs::SFrameSection::from(&loaded.bytes, loaded.base).unwrap();
    // simple-frame-rs finds an FDE for every function the section covers.
    let section = Section::parse(loaded.bytes.as_slice(), loaded.base).unwrap();
    for fde in section.fdes().map(Result::unwrap) {
        assert!(other.find_fde(fde.start).unwrap().is_some(), "{name}: simple-frame-rs misses {:#x}", fde.start);
    }
}

#[test]
fn injected_x86_64_binary_runs_the_same() {
    injected_runs_the_same("gcc", "qemu-x86_64", "inj-x86", &["-O2", "-static"]);
}

#[test]
fn injected_x86_64_static_pie_runs_the_same() {
    injected_runs_the_same("gcc", "qemu-x86_64", "inj-x86-pie", &["-O2", "-static-pie"]);
}

#[test]
fn injected_aarch64_binary_runs_the_same() {
    injected_runs_the_same("aarch64-linux-gnu-gcc", "qemu-aarch64", "inj-a64", &["-O2", "-static"]);
}

#[test]
fn injected_s390x_binary_runs_the_same() {
    injected_runs_the_same("s390x-linux-gnu-gcc", "qemu-s390x", "inj-s390x", &["-O2", "-static"]);
}

/// The program headers of an injected shared object, checked the way the
/// kernel and `ld.so` use them: every original header but `PT_PHDR` is
/// unchanged, `PT_LOAD`s are sorted, disjoint and congruent modulo their
/// alignment, the new one starts after the highest segment, `e_phoff` lies
/// in it at the same address − offset delta as the first segment (so
/// base + `e_phoff` is the table in memory), `PT_PHDR` covers the new
/// table, and the file's table is the one in memory.
fn shared_object_layout(path: &Path) {
    use goblin::elf::program_header::{PT_LOAD, PT_PHDR};
    let name = path.display();
    let ours = generate_v3(path);
    let injected = inject::inject(&ours.input.data, &ours.section).unwrap();
    let before = goblin::elf::Elf::parse(&ours.input.data).unwrap();
    let after = goblin::elf::Elf::parse(&injected).unwrap();
    assert_eq!(after.header.e_type, before.header.e_type, "{name}");
    let old: Vec<_> = before.program_headers.iter().filter(|p| p.p_type != PT_PHDR).collect();
    let kept: Vec<_> = after
        .program_headers
        .iter()
        .filter(|p| p.p_type != PT_PHDR && p.p_type != elf::PT_GNU_SFRAME)
        .filter(|p| p.p_type != PT_LOAD || p.p_offset < ours.input.data.len() as u64)
        .collect();
    assert_eq!(old, kept, "{name}: headers changed");
    let loads: Vec<_> = after.program_headers.iter().filter(|p| p.p_type == PT_LOAD).collect();
    for pair in loads.windows(2) {
        assert!(pair[0].p_vaddr + pair[0].p_memsz <= pair[1].p_vaddr, "{name}: PT_LOADs unsorted or overlapping");
    }
    for l in &loads {
        assert_eq!((l.p_vaddr.wrapping_sub(l.p_offset)) % l.p_align.max(1), 0, "{name}: {l:?}");
    }
    let new = loads.last().unwrap();
    let first = loads[0];
    let highest = before.program_headers.iter().map(|p| p.p_vaddr + p.p_memsz).max().unwrap();
    assert!(new.p_vaddr >= highest, "{name}: new segment below the highest end {highest:#x}");
    let phoff = after.header.e_phoff;
    let table = u64::from(after.header.e_phnum) * 56;
    assert!(new.p_offset <= phoff && phoff + table <= new.p_offset + new.p_filesz, "{name}: e_phoff outside");
    let table_vaddr = new.p_vaddr + (phoff - new.p_offset);
    assert_eq!(table_vaddr, first.p_vaddr - first.p_offset + phoff, "{name}: base + e_phoff is not the table");
    if let Some(phdr) = after.program_headers.iter().find(|p| p.p_type == PT_PHDR) {
        assert_eq!((phdr.p_offset, phdr.p_vaddr, phdr.p_filesz), (phoff, table_vaddr, table), "{name}: PT_PHDR");
    }
    let sframe = after.program_headers.iter().find(|p| p.p_type == elf::PT_GNU_SFRAME).unwrap();
    assert_eq!(sframe.p_vaddr, ours.address, "{name}");
    assert!(sframe.p_vaddr + sframe.p_memsz <= new.p_vaddr + new.p_memsz, "{name}: section outside its segment");
}

#[test]
fn injected_shared_objects_keep_their_layout() {
    // libc.so.6 has PT_PHDR, PT_INTERP, PT_TLS, PT_GNU_RELRO; ld.so has no
    // PT_PHDR and finds its own headers at base + e_phoff.
    let objects = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
        "/usr/aarch64-linux-gnu/lib/libc.so.6",
        "/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1",
        "/usr/s390x-linux-gnu/lib/libc.so.6",
        "/usr/s390x-linux-gnu/lib/ld64.so.1",
    ];
    let mut checked = 0;
    for path in objects.iter().map(Path::new).filter(|p| p.exists()) {
        shared_object_layout(path);
        checked += 1;
    }
    assert!(checked >= 2, "no shared objects to check");
}

/// glibc's AArch64 lazy-binding trampoline (`_dl_runtime_resolve`, at
/// 0x106dc in Debian's 2.36 `ld.so`) describes its CFA as the stack pointer
/// at entry, 16 bytes below its caller's (the PLT stub pushed x16 and x30),
/// and saves the return address at CFA+8: the generator skips it, saying
/// why, rather than emit rows that send every walk through it astray. Other
/// CFAs that are not stack pointers (`__longjmp`'s jmp_buf) may have
/// registers above them and are kept.
#[test]
fn a_return_address_above_a_stack_cfa_is_skipped() {
    let ld_so = Path::new("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1");
    let cfi_of = |path: &Path| {
        let input = elf::load_cfi(path.to_str().unwrap()).unwrap();
        let cfi = Cfi { kind: input.kind, data: &input.cfi, address: input.cfi_address };
        generate::generate(&cfi, input.abi, Version::V3).unwrap()
    };
    let generated = cfi_of(ld_so);
    let above: Vec<_> = generated.skipped.iter().filter(|s| s.reason.contains("above the CFA")).collect();
    assert_eq!(above.len(), 1, "{:?}", generated.skipped);
    assert_eq!(above[0].start, 0x106dc);
    assert_eq!(generated.skipped.len(), 1, "{:?}", generated.skipped);
    // Static glibc's __longjmp (CFA = x0, the jmp_buf) is still covered.
    let static_program = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin/aarch64/lab-o2");
    let generated = cfi_of(&static_program);
    assert!(generated.skipped.iter().all(|s| s.start != 0x431640), "{:?}", generated.skipped);
    assert!(generated.covered.iter().any(|c| c.start == 0x431640));
}

/// A library that calls nothing outside itself has a PLT of PLT0 alone,
/// whose CFI switches to ld's PLT expression at the PLT's very end: there
/// are no entries for a MASK FDE to cover, and none is made (an empty one
/// would start where the next function does, which the kernel refuses as
/// unsorted). The lab's second plugin is such a library.
#[test]
fn a_plt_without_entries_gets_no_mask_fde() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin/x86_64/libunwindlab-plugin2.so");
    let ours = generate_v3(&path);
    let section = Section::parse(ours.section.as_slice(), ours.address).unwrap();
    let fdes: Vec<_> = section.fdes().map(Result::unwrap).collect();
    assert!(fdes.iter().all(|f| f.size > 0), "{fdes:?}");
    let options = validate::Options { profile: validate::Profile::Kernel, text: None };
    let report = validate::check(ours.section.as_slice(), ours.address, &options);
    assert!(report.is_valid(), "{:?}", report.problems);
}
