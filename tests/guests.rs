//! The committed guest binaries: the recipe reproduces them byte for byte
//! (when the cross toolchains are installed), and every workload of every
//! variant on every architecture prints under `unwindlab exec` exactly what
//! it prints under Debian's qemu-user, with the same exit status.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const MODES: [&str; 6] = ["recurse", "compute", "sleep", "exit", "sigexit", "signal"];

fn guests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("guests")
}

fn committed() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for arch in ["x86_64", "aarch64", "s390x"] {
        let dir = guests().join("bin").join(arch);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        out.extend(files.into_iter().map(|f| (arch.to_string(), f)));
    }
    out
}

fn run(program: &str, args: &[&str]) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(b"input line\n").unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn committed_guests_are_what_the_recipe_builds() {
    if !common::tools_or_skip(&["gcc", "aarch64-linux-gnu-gcc", "s390x-linux-gnu-gcc", "make"]) {
        return;
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guests-rebuild");
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(guests())
        .arg(format!("OUT={}", out.display()))
        .arg(format!("UNWINDLAB={}", env!("CARGO_BIN_EXE_unwindlab")))
        .status()
        .unwrap();
    assert!(status.success());
    let all = committed();
    assert_eq!(all.len(), 17, "3 arches × (o2, fp, v3, fpv3) + gsframe on x86-64 and AArch64 + procs-v3 × 3");
    for (arch, path) in all {
        let rebuilt = out.join(&arch).join(path.file_name().unwrap());
        assert!(
            std::fs::read(&rebuilt).unwrap() == std::fs::read(&path).unwrap(),
            "{} differs from what guests/Makefile builds",
            path.display()
        );
    }
}

#[test]
fn every_guest_runs_under_exec_as_under_qemu() {
    if !common::tools_or_skip(&["qemu-x86_64", "qemu-aarch64", "qemu-s390x"]) {
        return;
    }
    let exe = env!("CARGO_BIN_EXE_unwindlab");
    let mut compared = 0;
    for (arch, path) in committed() {
        let qemu = format!("qemu-{arch}");
        let p = path.to_str().unwrap();
        // The multi-process guest: its fork mode (qemu-user cannot exec a
        // foreign program, so exec and pipeline are tested elsewhere).
        let procs = path.file_name().unwrap().to_string_lossy().starts_with("procs");
        let modes: &[&str] = if procs { &["fork"] } else { &MODES };
        for &mode in modes {
            let ours = run(exe, &["exec", p, mode]);
            let theirs = run(&qemu, &[p, mode]);
            assert_eq!(ours.status.code(), theirs.status.code(), "{p} {mode}");
            assert_eq!(String::from_utf8_lossy(&ours.stdout), String::from_utf8_lossy(&theirs.stdout), "{p} {mode}");
            compared += 1;
        }
    }
    assert_eq!(compared, 84 + 3);
}
