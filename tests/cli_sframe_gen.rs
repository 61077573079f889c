//! `unwindlab sframe gen --inject` on programs built here: the lab unwinds
//! the rewritten binary with its new section where the program was loaded
//! (a static PIE is moved: the text range handed to the model must be moved
//! once). The generator and the injection themselves are tested in the
//! sframe crate (`sframe/tests/generate.rs`).

mod common;

use std::process::Command;

/// (compiler, name, flags) of each program; a static PIE is moved at load.
const PROGRAMS: [(&str, &str, &[&str]); 4] = [
    ("gcc", "inj-x86", &["-O2", "-static"]),
    ("gcc", "inj-x86-pie", &["-O2", "-static-pie"]),
    ("aarch64-linux-gnu-gcc", "inj-a64", &["-O2", "-static"]),
    ("s390x-linux-gnu-gcc", "inj-s390x", &["-O2", "-static"]),
];

#[test]
fn injected_binaries_unwind_in_the_lab() {
    for (gcc, name, flags) in PROGRAMS {
        if common::tools_or_skip(&[gcc]) {
            injected_unwinds_in_the_lab(gcc, name, flags);
        }
    }
}

fn injected_unwinds_in_the_lab(gcc: &str, name: &str, flags: &[&str]) {
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
        None,
        &["one".into(), "two".into()],
        997,
        &[kmodel::unwind::Method::Sframe],
        &mut |_| {},
    )
    .unwrap();
    let sframe = &results["sframe"];
    assert!(sframe.samples >= 10, "{name}: {sframe:?}");
    assert!(sframe.exact * 20 >= sframe.samples * 17, "{name}: {sframe:?}");
    assert_eq!(sframe.wrong, 0, "{name}: {sframe:?}");
}
