//! `unwindlab exec --trace-syscalls`: a static program that opens a missing
//! relative path sees ENOENT (glibc passes `AT_FDCWD` in a 32-bit `int`, which
//! the emulator narrows as the kernel does, rather than EBADF), and the trace
//! spells the call as strace would, on every architecture.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAM: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
int main(void)
{
	int fd = open("missing-relative-path", O_RDONLY);
	printf("open: %d %s\n", fd, errno == ENOENT ? "ENOENT" : errno == EBADF ? "EBADF" : "other");
	return fd < 0 && errno == ENOENT ? 0 : 1;
}
"#;

/// Builds the program statically for `arch` with compiler `cc`.
fn build(arch: &str, cc: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("exec-trace");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("open_missing.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join(format!("open_missing-{arch}"));
    let out = Command::new(cc).args(["-static", "-O2", "-o"]).arg(&exe).arg(&src).output().unwrap();
    assert!(out.status.success(), "{cc}: {}", String::from_utf8_lossy(&out.stderr));
    exe
}

#[test]
fn opening_a_missing_relative_path_traces_enoent() {
    for (arch, cc) in [("x86_64", "gcc"), ("aarch64", "aarch64-linux-gnu-gcc"), ("s390x", "s390x-linux-gnu-gcc")] {
        if !common::tools_or_skip(&[cc]) {
            continue;
        }
        let exe = build(arch, cc);
        let out = Command::new(env!("CARGO_BIN_EXE_unwindlab"))
            .args(["exec", "--trace-syscalls"])
            .arg(&exe)
            .current_dir(exe.parent().unwrap())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stdout, "open: -1 ENOENT\n", "{arch}: stderr:\n{stderr}");
        assert_eq!(out.status.code(), Some(0), "{arch}");
        // `[icount] call = result`, one line per call.
        let calls: Vec<&str> = stderr
            .lines()
            .map(|line| {
                let (icount, call) =
                    line.split_once("] ").unwrap_or_else(|| panic!("{arch}: not a trace line: {line}"));
                assert!(icount.strip_prefix('[').is_some_and(|n| n.parse::<u64>().is_ok()), "{arch}: {line}");
                call
            })
            .collect();
        let want = r#"openat(AT_FDCWD, "missing-relative-path", O_RDONLY) = -ENOENT"#;
        assert!(calls.contains(&want), "{arch}: no `{want}` in\n{stderr}");
        assert_eq!(calls.last(), Some(&"exit_group(0) = ?"), "{arch}");
    }
}
