//! Support shared by the integration tests of the `unwindlab` package: the
//! sframe crate's test support (its vectors and samples under
//! `sframe/tests/data`, toolchain checks), compiled here from its own file,
//! kmodel's parallel map for long tests ([`par`]), and the scenario files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[path = "../../sframe/tests/common/mod.rs"]
mod sframe_support;

pub use sframe_support::*;

#[path = "../../kmodel/tests/support/par.rs"]
pub mod par;

/// The scenario files of the suite, sorted.
pub fn scenario_files() -> Vec<PathBuf> {
    json_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
}

/// Runs the `unwindlab` binary with `args`.
pub fn unwindlab(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_unwindlab")).args(args).output().unwrap()
}

/// The x86-64 lab guest, for scenarios the tests write.
pub fn lab_guest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin/x86_64/lab-v3")
}

/// Writes each case's scenario text to `NAME.json` in a fresh folder
/// `dir` and checks that `unwindlab run` refuses it: status 2, an error
/// that names the file and says each of the case's `needles`, no panic.
pub fn assert_refused(dir: &str, cases: &[(&str, String, Vec<&str>)]) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text, needles) in cases {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, text).unwrap();
        let out = unwindlab(&["run", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&format!("{name}.json")), "{name}: error must name the file: {stderr}");
        for needle in needles {
            assert!(stderr.contains(needle), "{name}: error must say {needle:?}: {stderr}");
        }
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
}

/// The three architectures, by the names scenario files use.
pub const ARCHES: [&str; 3] = ["x86_64", "aarch64", "s390x"];

/// Runs `scenarios/{name}.json`, checks that its log replays byte for byte
/// and that it broke no invariant and met its expectations, and returns
/// the report with the log's lines as JSON: the kernel events (lines with
/// a `seq`), and with `samples` the lab's sample lines too.
pub fn scenario_events(name: &str, samples: bool) -> (lab::Report, Vec<serde_json::Value>) {
    use lab::replay::{replay, Replay};
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.json"));
    let report = lab::run(&lab::scenario::Scenario::load(&file).unwrap()).unwrap();
    let log = report.log.join("\n") + "\n";
    assert_eq!(replay(&log, name).unwrap(), Replay::Identical { lines: report.log.len() }, "{name}");
    assert!(report.violations.is_empty(), "{name}: {:?}", report.violations);
    assert!(report.expectation_failures.is_empty(), "{name}: {:?}", report.expectation_failures);
    let events = report
        .log
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["seq"].is_u64() || (samples && e["event"] == "sample"))
        .collect();
    (report, events)
}

/// Whether log line `e` is an event of `kind`.
pub fn is(e: &serde_json::Value, kind: &str) -> bool {
    e["event"] == kind
}
