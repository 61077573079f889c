//! `unwindlab run --perf-data`: perf 7.x (`scripts/perf`, Debian's, fetched
//! by `make deps`) reads the file of a dynamically linked guest on each
//! architecture without a warning, names the guest's functions from the
//! files its MMAP2 records point to, and shows the machine it came from;
//! bad requests get one line and status 2, and leave no file behind.
//! (A module of `tests/exports.rs`: perf.data is one of a run's exports.)

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::unwindlab;

fn scenario(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(name).display().to_string()
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-data");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs `scripts/perf` with `args`: (stdout, stderr), asserting success.
fn perf(args: &[&str]) -> (String, String) {
    let perf = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/perf");
    let out = Command::new(&perf).args(args).output().unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "perf {args:?}: {stderr}");
    (stdout, stderr)
}

#[test]
fn perf_reports_a_dynamic_guest_by_function_on_three_architectures() {
    for (arch, uname) in [("x86_64", "x86_64"), ("aarch64", "aarch64"), ("s390x", "s390x")] {
        let file = tmp(&format!("dynamic-{arch}.data"));
        let out = unwindlab(&[
            "run",
            &scenario(&format!("dynamic-basic-{arch}.json")),
            "--perf-data",
            file.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{arch}: {}", String::from_utf8_lossy(&out.stderr));
        let f = file.to_str().unwrap();
        // The model's kernel addresses are not the host's: no host kallsyms.
        let (report, warnings) = perf(&["report", "-i", f, "--stdio", "--kallsyms", "/dev/null"]);
        assert!(warnings.trim().is_empty(), "{arch}: perf report warned:\n{warnings}");
        assert!(report.contains("of event 'instructions'"), "{arch}: {report}");
        let (script, warnings) = perf(&["script", "-i", f, "-F", "comm,tid,ip,sym,dso", "--kallsyms", "/dev/null"]);
        assert!(warnings.trim().is_empty(), "{arch}: perf script warned:\n{warnings}");
        for function in [" recurse (", " main ("] {
            assert!(script.contains(function), "{arch}: perf names no{function}…):\n{script}");
        }
        assert!(script.contains("libc.so.6)"), "{arch}: frames in libc.so.6 are in that file");
        let (header, _) = perf(&["report", "-i", f, "--header-only"]);
        assert!(header.contains(&format!("# arch : {uname}")), "{arch}: {header}");
        assert!(header.contains("# nrcpus online : 1"), "{arch}: {header}");
        assert!(header.contains("--perf-data"), "{arch}: the command line is in the header: {header}");
    }
}

#[test]
fn bad_perf_data_requests_get_one_line_and_status_2() {
    let basic = scenario("basic-x86_64.json");
    let cases: [(&str, String, &str); 3] = [
        ("no such directory", "/nonexistent-dir/x.data".into(), "no such directory"),
        ("a directory", tmp("").display().to_string(), "not a file name"),
        ("unwritable", "/proc/unwindlab.data".into(), "/proc/unwindlab.data"),
    ];
    for (what, path, needle) in cases {
        let out = unwindlab(&["run", &basic, "--perf-data", &path]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(stderr.contains(needle) && stderr.lines().count() == 1, "{what}: {stderr}");
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    }
    // Nothing half-written is left where the file would have been.
    assert!(!Path::new("/proc/.unwindlab.data.tmp").exists());
    // A run without perf has no perf.data.
    let none = tmp("none.json");
    let text = std::fs::read_to_string(scenario("basic-x86_64.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["tracers"] = serde_json::json!([{ "kind": "ftrace", "name": "ftrace" }]);
    for guest in json["guests"].as_array_mut().unwrap() {
        let path = guest["path"].as_str().unwrap();
        guest["path"] = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(path).display().to_string().into();
    }
    json["expect"] = serde_json::Value::Null;
    std::fs::write(&none, json.to_string()).unwrap();
    let data = tmp("none.data");
    let out = unwindlab(&["run", none.to_str().unwrap(), "--perf-data", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no perf tracer") && stderr.lines().count() == 1, "{stderr}");
    assert!(!data.exists(), "no file for a run without perf");
}

#[test]
fn perf_that_cannot_start_is_one_line() {
    let perf = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/perf");
    let out = Command::new(&perf).arg("--version").env("UNWINDLAB_PERF_CACHE", "/nonexistent").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("make deps"), "{stderr}");
}
