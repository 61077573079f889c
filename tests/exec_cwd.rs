//! `unwindlab exec`'s working directory (issue 27): `--cwd DIR` if given;
//! else the host's working directory as seen inside `--root`, as `chroot
//! ROOT` after `cd` would leave it; else, outside the root, `/` with a note
//! on stderr. Checked with `tests/guests/readfiles.c` (it prints its
//! working directory and reads the files named), on every architecture
//! whose compiler is installed, run from inside the root, from outside it,
//! through a link to it, and with the default root.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The architectures and their compilers.
const ARCHES: [(&str, &str); 3] =
    [("x86_64", "gcc"), ("aarch64", "aarch64-linux-gnu-gcc"), ("s390x", "s390x-linux-gnu-gcc")];

/// A fresh directory holding `root/bin/readfiles` built by `cc`, an
/// `in.txt` at the root's top (`top`), one in `root/a/b` (`deep`), one in
/// `outside` (`outside`), and `link`, a symbolic link to `root`.
fn set_up(arch: &str, cc: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("exec-cwd").join(arch);
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["root/bin", "root/a/b", "outside"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    for (file, text) in [("root/in.txt", "top"), ("root/a/b/in.txt", "deep"), ("outside/in.txt", "outside")] {
        std::fs::write(dir.join(file), text).unwrap();
    }
    std::os::unix::fs::symlink("root", dir.join("link")).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guests/readfiles.c");
    let out = Command::new(cc).args(["-O2", "-static", "-o"]).arg(dir.join("root/bin/readfiles")).arg(&src).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{cc}: {}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// `unwindlab exec ARGS` run in host directory `cwd`: stdout, stderr, status.
fn exec(cwd: &Path, args: &[&str]) -> (String, String, Option<i32>) {
    let out = Command::new(env!("CARGO_BIN_EXE_unwindlab")).arg("exec").args(args).current_dir(cwd).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn the_guest_starts_where_the_host_is_inside_the_root_else_at_its_top() {
    for (arch, cc) in ARCHES {
        if !common::tools_or_skip(&[cc]) {
            continue;
        }
        let dir = set_up(arch, cc);
        let ok = |stdout: &str| (stdout.to_string(), String::new(), Some(0));

        // Inside the root: the matching guest directory, whose in.txt is read.
        let deep = dir.join("root/a/b");
        let got = exec(&deep, &["--root", "../..", "../../bin/readfiles", "in.txt"]);
        assert_eq!(got, ok("cwd /a/b\nin.txt: deep\n"), "{arch}: from root/a/b");
        // The case: `cd ROOT && unwindlab exec --root ROOT …`.
        let got = exec(&dir.join("root"), &["--root", &dir.join("root").to_string_lossy(), "bin/readfiles", "in.txt"]);
        assert_eq!(got, ok("cwd /\nin.txt: top\n"), "{arch}: from the root");
        // A root named through a link is the same directory.
        let got = exec(&deep, &["--root", &dir.join("link").to_string_lossy(), "../../bin/readfiles", "in.txt"]);
        assert_eq!(got, ok("cwd /a/b\nin.txt: deep\n"), "{arch}: root through a link");

        // Outside the root: `/`, so in.txt is the root's, not the one beside
        // the user; stderr says so.
        let (stdout, stderr, status) =
            exec(&dir.join("outside"), &["--root", "../root", "../root/bin/readfiles", "in.txt"]);
        assert_eq!((stdout.as_str(), status), ("cwd /\nin.txt: top\n", Some(0)), "{arch}: from outside");
        let outside = std::fs::canonicalize(dir.join("outside")).unwrap();
        assert_eq!(
            stderr,
            format!(
                "unwindlab: note: the working directory {} is outside the root ../root: the program starts in / \
                 (--cwd DIR chooses another)\n",
                outside.display()
            ),
            "{arch}"
        );
        // `--cwd` chooses, from anywhere, without a note.
        let got =
            exec(&dir.join("outside"), &["--root", "../root", "--cwd", "/a/b", "../root/bin/readfiles", "in.txt"]);
        assert_eq!(got, ok("cwd /a/b\nin.txt: deep\n"), "{arch}: --cwd");

        // The default root, `/`: the host's own path.
        let got = exec(&deep, &["../../bin/readfiles", "in.txt"]);
        let host = std::fs::canonicalize(&deep).unwrap();
        assert_eq!(got, ok(&format!("cwd {}\nin.txt: deep\n", host.display())), "{arch}: default root");

        // A relative or missing --cwd is refused before anything runs.
        for (cwd, says) in [("a/b", "give an absolute path"), ("/nope", "no such directory in the root")] {
            let (stdout, stderr, status) = exec(&deep, &["--root", "../..", "--cwd", cwd, "../../bin/readfiles"]);
            assert_eq!((stdout.as_str(), status), ("", Some(2)), "{arch}: --cwd {cwd}");
            assert!(stderr.starts_with(&format!("unwindlab: --cwd {cwd}: {says}")), "{arch}: {stderr}");
        }
    }
}
