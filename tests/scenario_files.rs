//! Scenario files, working directory and host root: a guest that reads
//! files (`tests/guests/readfiles.c`, built here for every architecture
//! whose compiler is installed; the committed lab guest reads none) sees
//! the files its scenario gives it and the host files under its root; the
//! log records every one with its digest; a replay after a host file
//! changed or vanished names it; bad `files`, `cwd` and `root` fields are
//! refused with the file and the field named.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use lab::replay::{replay, Replay};
use lab::Scenario;

/// The architectures, their compilers and the scenario's `arch` value.
const ARCHES: [(&str, &str); 3] =
    [("x86_64", "gcc"), ("aarch64", "aarch64-linux-gnu-gcc"), ("s390x", "s390x-linux-gnu-gcc")];

/// Builds `tests/guests/readfiles.c` static with `gcc` into `dir`.
fn build_readfiles(gcc: &str, dir: &Path) -> PathBuf {
    let out = dir.join("readfiles");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guests/readfiles.c");
    let status = Command::new(gcc).args(["-O2", "-static", "-o"]).arg(&out).arg(&src).status().unwrap();
    assert!(status.success(), "{gcc} failed on {}", src.display());
    out
}

/// A fresh directory for test `name` (architecture `arch`) holding the
/// readfiles guest, a host root with `data/host.txt`, and a scenario
/// `files.json` whose guest is given `/etc/motd` and `in.txt` (in its
/// working directory `/work`), sees `root/` as `/` and reads all three.
/// `None` if the compiler is missing (and `CI` is unset).
fn set_up(name: &str, arch: &str, gcc: &str) -> Option<PathBuf> {
    if !common::tools_or_skip(&[gcc]) {
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scenario-files").join(name).join(arch);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("root/data")).unwrap();
    std::fs::write(dir.join("root/data/host.txt"), "from the host\n").unwrap();
    build_readfiles(gcc, &dir);
    let scenario = format!(
        r#"{{"name": "files-{arch}", "machine": {{"arch": "{arch}"}}, "kernel": {{"profile": "sframe-v13"}},
            "guests": [{{"name": "reader", "path": "readfiles", "args": ["in.txt", "/data/host.txt", "/etc/motd"],
                         "files": {{"in.txt": "given inline\n", "/etc/motd": "hello\n"}},
                         "cwd": "/work", "root": "root"}}],
            "tracers": [{{"kind": "perf", "name": "perf", "period": 997}}],
            "expect": {{"exit": {{"reader": 0}}}}}}"#
    );
    std::fs::write(dir.join("files.json"), scenario).unwrap();
    Some(dir)
}

/// The log's input lines.
fn input_lines(log: &[String]) -> Vec<&str> {
    log.iter().filter(|l| l.contains(r#""event":"input""#)).map(String::as_str).collect()
}

#[test]
fn guests_read_given_and_host_files_and_the_log_records_their_digests() {
    for (arch, gcc) in ARCHES {
        let Some(dir) = set_up("read", arch, gcc) else { continue };
        let scenario = Scenario::load(&dir.join("files.json")).unwrap_or_else(|e| panic!("{e}"));
        let report = lab::run(&scenario).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(report.expectation_failures.is_empty(), "{arch}: {:?}", report.expectation_failures);
        assert_eq!(
            report.guests[0].stdout,
            "cwd /work\nin.txt: given inline\n\n/data/host.txt: from the host\n\n/etc/motd: hello\n\n",
            "{arch}"
        );
        let digest = |text: &str| format!("{:#018x}", emu::fs::fnv1a(text.as_bytes()));
        let expected = [
            ("scenario", "/etc/motd", digest("hello\n")),
            ("scenario", "/work/in.txt", digest("given inline\n")),
            ("host", "/data/host.txt", digest("from the host\n")),
        ]
        .map(|(source, path, digest)| {
            format!(r#"{{"digest":"{digest}","event":"input","guest":"reader","path":"{path}","source":"{source}"}}"#)
        });
        // Right after the header, in this order: given (by path), then read.
        assert_eq!(report.log[1..4], expected, "{arch}");
        assert_eq!(input_lines(&report.log).len(), 3, "{arch}: no other input: {:?}", input_lines(&report.log));
        let again = lab::run(&scenario).unwrap();
        assert!(again.log == report.log, "{arch}: two runs gave different logs");
        let log = report.log.join("\n") + "\n";
        assert_eq!(replay(&log, "log").unwrap(), Replay::Identical { lines: report.log.len() }, "{arch}");
    }
}

#[test]
fn replay_names_the_host_file_that_changed_or_vanished() {
    let Some(dir) = set_up("replay", "x86_64", "gcc") else { return };
    let log = dir.join("run.jsonl");
    let out = common::unwindlab(&["run", dir.join("files.json").to_str().unwrap(), "--log", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let replay_cli = || {
        let out = common::unwindlab(&["replay", log.to_str().unwrap()]);
        (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.code())
    };
    let (stdout, status) = replay_cli();
    assert_eq!(status, Some(0), "{stdout}");
    assert!(stdout.contains("lines identical"), "{stdout}");

    // Longer contents: the guest runs longer, so the run differs too.
    let host = dir.join("root/data/host.txt");
    std::fs::write(&host, "from the host, edited\n").unwrap();
    let (then, now) = (emu::fs::fnv1a(b"from the host\n"), emu::fs::fnv1a(b"from the host, edited\n"));
    match lab::replay::replay_file(log.to_str().unwrap()).unwrap() {
        Replay::InputsChanged { changes, diverged } => {
            assert_eq!(changes.len(), 1, "{changes:?}");
            assert_eq!((changes[0].source.as_str(), changes[0].path.as_str()), ("host", "/data/host.txt"));
            assert!(diverged.is_some(), "a longer file makes a longer run");
        }
        other => panic!("changed host file not reported: {other:?}"),
    }
    let (stdout, status) = replay_cli();
    assert_eq!(status, Some(1), "{stdout}");
    let first = stdout.lines().next().unwrap_or_default();
    let expected = format!(
        "{}: host file /data/host.txt (guest reader) changed since the log was written \
         (digest {then:#018x} then, {now:#018x} now); the run differs from line ",
        log.display()
    );
    assert!(first.starts_with(&expected), "{stdout}");

    // The same length: only the input differs.
    std::fs::write(&host, "from the HOST\n").unwrap();
    let (stdout, status) = replay_cli();
    assert_eq!(status, Some(1), "{stdout}");
    assert!(stdout.contains("changed since the log was written"), "{stdout}");

    std::fs::remove_file(&host).unwrap();
    let (stdout, status) = replay_cli();
    assert_eq!(status, Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "host file /data/host.txt (guest reader) is missing now (digest {then:#018x} then); the run differs from line"
        )),
        "{stdout}"
    );

    // Back as it was: identical again.
    std::fs::write(&host, "from the host\n").unwrap();
    let (stdout, status) = replay_cli();
    assert_eq!(status, Some(0), "{stdout}");
}

#[test]
fn bad_files_cwd_and_root_fail_with_a_clear_message_and_status_2() {
    let guest = common::lab_guest();
    let base = |fields: &str| {
        format!(
            r#"{{"name":"bad","machine":{{"arch":"x86_64"}},"guests":[{{"name":"g","path":{:?}{fields}}}]}}"#,
            guest.display().to_string()
        )
    };
    let many: Vec<String> = (0..65).map(|i| format!(r#""f{i}":"""#)).collect();
    let big = "x".repeat((1 << 20) + 1);
    let cases = [
        ("relative-cwd", base(r#","cwd":"work""#), "guests[0].cwd", "expected an absolute guest path"),
        ("dotted-cwd", base(r#","cwd":"/a/../b""#), "guests[0].cwd", "not normalised"),
        ("nul-path", base(r#","files":{"a\u0000b":"x"}"#), "guests[0].files", "NUL"),
        ("duplicate-file", base(r#","files":{"a":"x","a":"y"}"#), "guests[0].files", "\"a\" given twice"),
        ("same-file", base(r#","cwd":"/w","files":{"a":"x","/w/a":"y"}"#), "guests[0].files[\"a\"]", "same file"),
        ("file-in-file", base(r#","files":{"/a":"x","/a/b":"y"}"#), "guests[0].files[\"/a\"]", "is a file"),
        ("cwd-in-file", base(r#","cwd":"/a/b","files":{"/a":"x"}"#), "guests[0].files[\"/a\"]", "is a file"),
        ("root-file", base(r#","files":{"/":"x"}"#), "guests[0].files[\"/\"]", "is a directory"),
        ("trailing-slash", base(r#","files":{"/a/":"x"}"#), "guests[0].files[\"/a/\"]", "not normalised"),
        ("empty-path", base(r#","files":{"":"x"}"#), "guests[0].files[\"\"]", "empty"),
        ("too-many-files", base(&format!(r#","files":{{{}}}"#, many.join(","))), "guests[0].files", "at most 64"),
        ("too-big-file", base(&format!(r#","files":{{"a":"{big}"}}"#)), "guests[0].files[\"a\"]", "1048576"),
        ("bytes-not-text", base(r#","files":{"a":[1,2]}"#), "guests[0].files", "invalid type"),
        ("lone-surrogate", base(r#","files":{"a":"\ud800"}"#), "guests[0].files", "surrogate"),
        ("missing-root", base(r#","root":"no/such/dir""#), "guests[0].root", "no such host directory"),
        ("empty-root", base(r#","root":"""#), "guests[0].root", "expected a host directory"),
    ];
    let cases: Vec<_> =
        cases.into_iter().map(|(name, text, path, problem)| (name, text, vec![path, problem])).collect();
    common::assert_refused("bad-scenario-files", &cases);
    // A scenario file that is not UTF-8 at all.
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad-scenario-files/not-utf8.json");
    let text = base(r#","files":{"a":"X"}"#).replace("\"X\"", "\"\u{1}\"").into_bytes();
    let text: Vec<u8> = text.into_iter().map(|b| if b == 1 { 0xff } else { b }).collect();
    std::fs::write(&file, text).unwrap();
    let out = common::unwindlab(&["run", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not-utf8.json") && !stderr.contains("panicked"), "{stderr}");
}
