//! `unwindlab exec --root ROOT` on a Debian root of another architecture,
//! as `bench-exec` runs it: the program's interpreter and libraries come
//! from that root alone, as under `qemu-ARCH -L ROOT`. Debian's cross
//! sysroot (the default prefix, searched first) once supplied `ld.so` from
//! another glibc build than the root's `libc.so.6`; their private layouts
//! differ (`_rtld_global`), and `xz -T2` reading stdin spun forever in
//! `pthread_create()` on AArch64 and s390x while x86-64 and `--prefix ROOT`
//! worked. Each architecture's output must be qemu-user's, byte for byte.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The Debian programs cache `make deps` fills.
fn cache() -> PathBuf {
    std::env::var_os("UNWINDLAB_DEBIAN_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
        base.join("unwindlab/debian")
    })
}

/// `cmd` run with `stdin` on its standard input: stdout and exit status;
/// killed (and the test failed, naming `what`) if it runs past two minutes,
/// since a hang is what this test guards against.
fn output(mut cmd: Command, stdin: &[u8], what: &str) -> (Vec<u8>, Option<i32>) {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
    let mut input = child.stdin.take().expect("stdin");
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || input.write_all(&stdin));
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut out).map(|_| out)
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: did not finish in two minutes");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = writer.join();
    (reader.join().expect("reader").expect("read stdout"), status.code())
}

#[test]
fn a_foreign_root_brings_its_own_interpreter_and_threads_work() {
    let text: Vec<u8> = (0..3000).flat_map(|i| format!("line {i} of a poem\n").into_bytes()).collect();
    for (debian, qemu) in [("arm64", "qemu-aarch64"), ("s390x", "qemu-s390x"), ("amd64", "qemu-x86_64")] {
        let root = cache().join(format!("root-{debian}"));
        let xz = root.join("usr/bin/xz");
        if !xz.exists() {
            assert!(std::env::var_os("CI").is_none(), "{}: not fetched (make deps)", root.display());
            eprintln!("skipping: {} not fetched (make deps)", root.display());
            return;
        }
        let mut reference = Command::new(qemu);
        reference.arg("-L").arg(&root).arg(&xz).args(["-T2", "-c"]);
        let want = output(reference, &text, &format!("{qemu} -L {} xz -T2", root.display()));
        assert_eq!(want.1, Some(0), "{qemu} -L {} xz -T2", root.display());
        let mut exec = Command::new(env!("CARGO_BIN_EXE_unwindlab"));
        exec.arg("exec").arg("--root").arg(&root).arg(&xz).args(["-T2", "-c"]).current_dir(&root);
        let got = output(exec, &text, &format!("{debian}: unwindlab exec --root {} xz -T2", root.display()));
        assert_eq!(got.1, Some(0), "{debian}: exit status");
        assert!(
            got.0 == want.0,
            "{debian}: xz -T2's output differs from {qemu}'s ({} vs {} bytes)",
            got.0.len(),
            want.0.len()
        );
    }
}
