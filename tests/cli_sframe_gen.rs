//! `unwindlab sframe gen --inject` on programs built here: the lab unwinds
//! the rewritten binary with its new section where the program was loaded
//! (a static PIE is moved: the text range handed to the model must be moved
//! once). The generator and the injection themselves are tested in the
//! sframe crate (`sframe/tests/generate.rs`).

mod common;

use std::process::Command;

fn injected_unwinds_in_the_lab(gcc: &str, name: &str, flags: &[&str]) {
    if !common::tools_or_skip(&[gcc]) {
        return;
    }
    let original = common::build_prog(gcc, "cli-sframe-gen", name, flags);
    let injected = original.with_extension("sframe-v3");
    let out = Command::new(env!("CARGO_BIN_EXE_unwindlab"))
        .args(["sframe", "gen"])
        .arg(&original)
        .arg("--inject")
        .arg("-o")
        .arg(&injected)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let results = lab::validate::validate(
        &injected,
        &["one".into(), "two".into()],
        997,
        &[lab::scenario::UnwinderName::Sframe],
        &mut |_| {},
    )
    .unwrap();
    let sframe = &results["sframe"];
    assert!(sframe.samples >= 10, "{name}: {sframe:?}");
    assert!(sframe.exact * 20 >= sframe.samples * 17, "{name}: {sframe:?}");
    assert_eq!(sframe.wrong, 0, "{name}: {sframe:?}");
}

#[test]
fn injected_x86_64_binary_unwinds_in_the_lab() {
    injected_unwinds_in_the_lab("gcc", "inj-x86", &["-O2", "-static"]);
}

#[test]
fn injected_x86_64_static_pie_unwinds_in_the_lab() {
    injected_unwinds_in_the_lab("gcc", "inj-x86-pie", &["-O2", "-static-pie"]);
}

#[test]
fn injected_aarch64_binary_unwinds_in_the_lab() {
    injected_unwinds_in_the_lab("aarch64-linux-gnu-gcc", "inj-a64", &["-O2", "-static"]);
}

#[test]
fn injected_s390x_binary_unwinds_in_the_lab() {
    injected_unwinds_in_the_lab("s390x-linux-gnu-gcc", "inj-s390x", &["-O2", "-static"]);
}
