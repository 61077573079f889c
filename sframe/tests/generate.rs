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
