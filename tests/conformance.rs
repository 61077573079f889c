//! Conformance against Debian's own programs: every command line of a
//! table runs on amd64, arm64 and s390x under `unwindlab exec` and under the
//! reference, and stdout, stderr and the exit status must be identical. Four
//! tables, four tests, one runner:
//!
//! * [`LINES`] (issue 12), `debian_programs_behave_as_under_the_reference`:
//!   Debian's statically linked busybox and bash;
//! * [`DYNAMIC_LINES`] (issue 13), `debian_dynamic_programs_behave_as_under_the_reference`:
//!   Debian's dynamically linked coreutils, sed, grep, gzip, bzip2, xz, tar,
//!   mawk, dash and pigz with Debian's own `ld.so` and libraries (see
//!   [`DYNAMIC`]); threaded lines (issue 14): xz -T, pigz, sort --parallel;
//! * [`DEVFD_LINES`] (issue 27), `debian_shells_open_dev_fd_as_under_the_reference`:
//!   what scripts do with `/dev/fd`, `/dev/std*` and `/proc/self/fd`
//!   (process substitution, here-strings and here-documents read through
//!   `/dev/stdin`, `exec 3<file` and `read -u 3`, `tee /dev/stderr`) with
//!   Debian's static bash and busybox;
//! * [`DEVFD_DYNAMIC_LINES`] (issue 27),
//!   `debian_dynamic_programs_open_dev_fd_as_under_the_reference`: the same
//!   with dash and GNU coreutils.
//!
//! The programs are Debian's builds of busybox-static and bash-static for
//! each architecture, fetched by `scripts/fetch-debian-programs.sh` (`make
//! deps`) into a cache; `tests/conformance/PACKAGES.md` names them and their
//! licences. The reference is qemu-user for arm64 and s390x (`qemu-aarch64
//! -L ROOT`, `qemu-s390x -L ROOT`) and the program itself for amd64 — except
//! for lines that exec another program: qemu-user cannot start a
//! foreign-architecture child here (there is no binfmt_misc), so for those
//! the reference is the same package's amd64 build run natively. Each line
//! says which reference it uses and why.
//!
//! Every run (each reference twice, to prove it deterministic, and the
//! emulator once) gets a fresh empty directory as its cwd, a fixed
//! environment and its stdin from a file; the lines read the host files of
//! `tests/conformance/tree` through `$FIX` and write only below cwd.
//!
//! Lines that fail today are listed in `tests/conformance/expected-failures.txt`
//! (`expected-failures-dynamic.txt` for the dynamic table, `-devfd.txt` and
//! `-devfd-dynamic.txt` for the other two): they are reported, not failed,
//! and a listed line that passes fails the test until it is struck from the
//! list. Knobs, all environment variables:
//!
//! * `UNWINDLAB_CONFORMANCE_LINE=a,b`  only lines whose names contain `a` or `b`
//!   (a table none of whose lines match is skipped)
//! * `UNWINDLAB_CONFORMANCE_ARCH=arm64,s390x`  only those architectures
//! * `UNWINDLAB_CONFORMANCE_STRICT=1`  ignore the expected-failures list (every diff shown)
//! * `UNWINDLAB_CONFORMANCE_TIMEOUT=SECONDS`  per run (default 20)
//! * `UNWINDLAB_CONFORMANCE_BUDGET=SECONDS`  for each table (default 240 static, 120 dynamic, 120 and 60
//!   for the `/dev/fd` tables), in CPU seconds per parallel run (what its runs used, divided by the
//!   parallel runs; wall-clock time on a machine whose CPUs are stolen would cut healthy runs): past
//!   it, each run gets at most a second, so hung lines cannot eat CI's time
//! * `UNWINDLAB_CONFORMANCE_JOBS=N`  parallel runs (default: the number of CPUs)
//! * `UNWINDLAB_CONFORMANCE_AUDIT=1`  also check each foreign line's choice of reference
//! * `UNWINDLAB_DEBIAN_CACHE=DIR`  the cache (default `${XDG_CACHE_HOME:-~/.cache}/unwindlab/debian`)
//!
//! The whole report is also written to `target/tmp/conformance/report.txt`
//! (`target/tmp/conformance-dynamic/report.txt`, …: the table's scratch
//! directory).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The three architectures, by their Debian names.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Arch {
    Amd64,
    Arm64,
    S390x,
}

impl Arch {
    const ALL: [Arch; 3] = [Arch::Amd64, Arch::Arm64, Arch::S390x];

    fn debian(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
            Arch::S390x => "s390x",
        }
    }

    /// The qemu-user program for a foreign architecture (amd64 runs natively).
    fn qemu(self) -> Option<&'static str> {
        match self {
            Arch::Amd64 => None,
            Arch::Arm64 => Some("qemu-aarch64"),
            Arch::S390x => Some("qemu-s390x"),
        }
    }
}

/// What a line's output is compared with on arm64 and s390x (on amd64 both
/// mean the amd64 build run natively).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reference {
    /// The same build under qemu-user: the line runs builtins, busybox
    /// NOFORK/NOEXEC applets (which fork but do not exec) and forks only.
    Qemu,
    /// The amd64 build natively: the line execs another program, which
    /// qemu-user cannot start for a foreign architecture here.
    Amd64,
}

/// How a line starts its program.
#[derive(Clone, Copy, Debug)]
enum Invocation {
    /// `bash-static -c SCRIPT bash` (so bash's messages say `bash:`).
    Bash(&'static str),
    /// `busybox sh -c SCRIPT sh`: busybox's ash.
    Sh(&'static str),
    /// `bin/APPLET ARGS…` through the cache's link to busybox; `{FIX}` in an
    /// argument stands for the fixture directory.
    Applet(&'static str, &'static [&'static str]),
    /// `usr/bin/PROGRAM ARGS…` of the dynamic root; `{FIX}` as for `Applet`.
    Program(&'static str, &'static [&'static str]),
    /// `usr/bin/dash -c SCRIPT dash` of the dynamic root.
    Dash(&'static str),
}

/// One command line of the suite.
#[derive(Clone, Copy, Debug)]
struct Line {
    name: &'static str,
    run: Invocation,
    /// The text, or `{LINES N}`: N generated lines (see [`stdin_text`]).
    stdin: &'static str,
    reference: Reference,
    /// Why that reference: what the line execs, or why qemu-user can run it.
    why: &'static str,
}

const fn bash(name: &'static str, script: &'static str, reference: Reference, why: &'static str) -> Line {
    Line { name, run: Invocation::Bash(script), stdin: "", reference, why }
}

const fn sh(name: &'static str, script: &'static str, reference: Reference, why: &'static str) -> Line {
    Line { name, run: Invocation::Sh(script), stdin: "", reference, why }
}

const fn applet(name: &'static str, applet: &'static str, args: &'static [&'static str], why: &'static str) -> Line {
    Line { name, run: Invocation::Applet(applet, args), stdin: "", reference: Reference::Qemu, why }
}

const fn program(name: &'static str, program: &'static str, args: &'static [&'static str], why: &'static str) -> Line {
    Line { name, run: Invocation::Program(program, args), stdin: "", reference: Reference::Qemu, why }
}

const fn dash(name: &'static str, script: &'static str, reference: Reference, why: &'static str) -> Line {
    Line { name, run: Invocation::Dash(script), stdin: "", reference, why }
}

const fn with_stdin(line: Line, stdin: &'static str) -> Line {
    Line { stdin, ..line }
}

/// What a line reads on stdin: its text, except `{LINES N}`, which stands for
/// N generated lines, the i-th (from 0) `i·7919 mod 1009` in four digits:
/// 1009 distinct keys in no order, input big enough for GNU sort to sort
/// with threads (it starts them from 128 Ki lines in one buffer). Every run
/// finds it also as the file `../stdin` (relative to its cwd).
fn stdin_text(line: &Line) -> Cow<'static, str> {
    match line.stdin.strip_prefix("{LINES ").and_then(|rest| rest.strip_suffix('}')) {
        Some(n) => {
            let n: usize = n.parse().unwrap_or_else(|_| panic!("{}: bad stdin {}", line.name, line.stdin));
            let mut text = String::with_capacity(n * 5);
            for i in 0..n {
                let _ = writeln!(text, "{:04}", i * 7919 % 1009);
            }
            Cow::Owned(text)
        }
        None => Cow::Borrowed(line.stdin),
    }
}

use Reference::{Amd64, Qemu};

const BUILTINS: &str = "bash builtins and forks only";
const ASH_BUILTINS: &str = "ash builtins, NOFORK/NOEXEC applets and forks only";
const ONE_APPLET: &str = "one busybox applet, no child";

/// The command lines: at least 40, covering pipelines, command substitution,
/// redirection, here-documents, subshells, background jobs and `wait`,
/// `kill`, `exec`, host files and directories, and files written then read.
const LINES: &[Line] = &[
    // Pipelines.
    bash(
        "bash-pipe-builtins",
        r#"printf '%s\n' one two three | while read -r w; do echo "${#w} $w"; done"#,
        Qemu,
        BUILTINS,
    ),
    bash("bash-pipe-external", "printf '%s\\n' pear apple fig | sort | tr a-z A-Z", Amd64, "execs sort and tr"),
    bash(
        "bash-pipefail",
        r#"set -o pipefail; { echo x; exit 3; } | { read -r l; echo "read $l"; }; echo "pipeline $?""#,
        Qemu,
        BUILTINS,
    ),
    sh("sh-pipe-exec", r#"echo c b a | tr ' ' '\n' | sort -r"#, Amd64, "ash execs /proc/self/exe for tr"),
    sh("sh-pipe-noexec", "seq 1 5 | head -n 3", Qemu, "seq and head are NOEXEC applets: forked, not exec'd"),
    with_stdin(bash("bash-pipe-stdin", "sort -r | head -n 2", Amd64, "execs sort and head"), "b\nd\na\nc\n"),
    // Command substitution.
    bash(
        "bash-cmdsubst",
        r#"x=$(echo inner; echo two); y=$(printf '%s\n' "$x" | while read -r l; do printf '[%s]' "$l"; done); echo "$y""#,
        Qemu,
        BUILTINS,
    ),
    bash("bash-cmdsubst-exec", r#"n=$(ls "$FIX" | wc -l); echo "entries: $n""#, Amd64, "execs ls and wc"),
    sh(
        "sh-cmdsubst",
        r#"a=$(basename /x/y/file.txt .txt); b=$(dirname /x/y/file.txt); echo "$b $a""#,
        Qemu,
        "basename and dirname are NOFORK applets",
    ),
    // Redirection to and from files.
    bash(
        "bash-redirect",
        r#"echo first > f.txt; echo second >> f.txt; while read -r l; do echo "<$l>"; done < f.txt"#,
        Qemu,
        BUILTINS,
    ),
    bash(
        "bash-redirect-stderr",
        r#"{ echo out; echo err >&2; } 2> e.txt; echo "captured: $(< e.txt)"; echo to-stderr >&2"#,
        Qemu,
        BUILTINS,
    ),
    bash(
        "bash-noclobber",
        r#"set -C; echo a > g.txt; echo b > g.txt; echo "status $?"; echo c >| g.txt; read -r v < g.txt; echo "$v""#,
        Qemu,
        BUILTINS,
    ),
    bash("bash-missing-file", r#"read -r l < nosuch.txt; echo "status $?""#, Qemu, BUILTINS),
    sh("sh-redirect-exec", "echo hello > h.txt; cat h.txt h.txt > i.txt; wc -l < i.txt", Amd64, "ash execs cat and wc"),
    // Here-documents and here-strings.
    bash(
        "bash-heredoc",
        "while read -r a b; do echo \"$b $a\"; done <<EOF\none 1\ntwo 2\n$((6 * 7)) x\nEOF",
        Qemu,
        BUILTINS,
    ),
    bash("bash-heredoc-exec", "sort <<'EOF'\nzeta\nalpha $HOME\nmid\nEOF", Amd64, "execs sort"),
    bash("bash-herestring", r#"read -r a b <<< "left right"; echo "$b $a""#, Qemu, BUILTINS),
    sh("sh-heredoc", "while read -r l; do echo \"> $l\"; done <<EOF\nfirst\n$((2 + 3))\nEOF", Qemu, ASH_BUILTINS),
    sh("sh-heredoc-exec", "cat <<EOF\nhome is $HOME\nEOF", Amd64, "ash execs cat"),
    // Subshells.
    bash("bash-subshell", r#"x=1; (x=2; echo "inner $x"; exit 4); echo "status $? outer $x""#, Qemu, BUILTINS),
    bash(
        "bash-subshell-cd",
        r#"(cd "$FIX/sub" && for f in *; do echo "$f"; done); for f in *; do echo "cwd has $f"; done"#,
        Qemu,
        BUILTINS,
    ),
    sh("sh-subshell", r#"(exit 3); echo "$?"; (echo sub) > s.txt; read -r v < s.txt; echo "$v""#, Qemu, ASH_BUILTINS),
    // Background jobs and wait.
    bash(
        "bash-bg-wait",
        r#"{ echo a > a.out; } & { echo b > b.out; } & wait; read -r x < a.out; read -r y < b.out; echo "$x$y""#,
        Qemu,
        BUILTINS,
    ),
    bash("bash-bg-status", r#"(exit 5) & p=$!; wait $p; echo "status $?""#, Qemu, BUILTINS),
    bash("bash-bg-exec", "sleep 0.1 & echo started; wait; echo done", Amd64, "execs sleep"),
    sh(
        "sh-bg-wait",
        r#"(echo x > x.out) & (echo y > y.out) & wait; read -r a < x.out; read -r b < y.out; echo "$a$b""#,
        Qemu,
        ASH_BUILTINS,
    ),
    // kill.
    bash("bash-kill-loop", r#"( while :; do :; done ) & p=$!; kill $p; wait $p; echo "status $?""#, Qemu, BUILTINS),
    bash(
        "bash-kill-exec",
        r#"sleep 100 & p=$!; kill -TERM $p; wait $p; echo "status $?""#,
        Amd64,
        "execs sleep (under qemu-user the kill mostly wins the race with the failing exec: right by luck)",
    ),
    sh(
        "sh-kill-loop",
        r#"(while :; do :; done) & kill $!; wait $! 2> /dev/null; echo "status $?""#,
        Qemu,
        ASH_BUILTINS,
    ),
    bash(
        "bash-kill-running",
        r#"( echo up > ready; while :; do :; done ) & until [ -s ready ]; do :; done; kill $!; wait $!; echo "status $?""#,
        Qemu,
        "bash builtins and forks only (the parent spins until the child has run)",
    ),
    bash("bash-kill-self", "kill -USR1 $$; echo not reached", Qemu, BUILTINS),
    bash("bash-trap", "trap 'echo got USR1' USR1; kill -USR1 $$; echo after", Qemu, BUILTINS),
    // exec.
    bash(
        "bash-exec-fd",
        r#"exec 3> fd3.txt; echo via3 >&3; exec 3>&-; read -r l < fd3.txt; echo "$l""#,
        Qemu,
        BUILTINS,
    ),
    bash("bash-exec-replace", "exec echo replaced; echo not reached", Amd64, "execs busybox's echo"),
    bash(
        "bash-exec-missing",
        "exec nosuchprog; echo not reached",
        Qemu,
        "nosuchprog is not on PATH: nothing is exec'd",
    ),
    sh("sh-exec", r#"cd "$FIX" && exec cat poem.txt"#, Amd64, "ash execs cat"),
    sh(
        "sh-exec-noexec",
        r#"cd "$FIX" && exec ls"#,
        Qemu,
        "ash runs a NOEXEC applet that it is told to exec in-process",
    ),
    // Host files and directory listings.
    applet("cat-host", "cat", &["{FIX}/poem.txt"], ONE_APPLET),
    applet("ls-host", "ls", &["-1", "{FIX}"], ONE_APPLET),
    sh("sh-ls-recursive", r#"cd "$FIX" && ls -R"#, Qemu, "ls is a NOEXEC applet"),
    sh("sh-find-sort", r#"cd "$FIX" && find . -type f | sort"#, Qemu, "find and sort are NOEXEC applets"),
    sh("sh-wc", r#"cd "$FIX" && wc -l poem.txt numbers.txt"#, Amd64, "ash execs wc"),
    sh("sh-sha256", r#"cd "$FIX" && sha256sum poem.txt sub/a.txt"#, Qemu, "sha256sum is a NOEXEC applet"),
    applet("awk-host", "awk", &["-F,", "{ s += $2 } END { print NR, s }", "{FIX}/data.csv"], ONE_APPLET),
    applet("sed-host", "sed", &["-n", "2,3p", "{FIX}/poem.txt"], ONE_APPLET),
    applet("sort-host", "sort", &["-n", "{FIX}/numbers.txt"], ONE_APPLET),
    applet("od-host", "od", &["-An", "-c", "{FIX}/sub/a.txt"], ONE_APPLET),
    bash(
        "bash-glob",
        r#"cd "$FIX" && for f in * sub/*; do if [ -d "$f" ]; then echo "dir $f"; else echo "file $f"; fi; done"#,
        Qemu,
        BUILTINS,
    ),
    bash("bash-read-host", r#"while IFS=, read -r k v; do echo "$v=$k"; done < "$FIX/data.csv""#, Qemu, BUILTINS),
    sh("sh-cmp", r#"cd "$FIX/sub" && cmp a.txt b.txt; echo "status $?""#, Amd64, "ash execs cmp"),
    // Files written, then read.
    sh(
        "sh-files",
        "echo hi > x; cp x y; mv y z; ls; cat z; rm x z; ls; echo end",
        Amd64,
        "ash execs cat (cp, mv, rm and ls are NOEXEC)",
    ),
    sh(
        "sh-mkdir-find",
        "mkdir -p a/b/c && touch a/b/c/f && echo data > a/top && find a | sort && rm -r a && ls && echo empty",
        Qemu,
        "mkdir, touch, find, sort, rm and ls are NOEXEC applets",
    ),
    sh(
        "sh-symlink",
        "echo t > target; ln -s target link; readlink link; read -r v < link; echo \"$v\"",
        Qemu,
        ASH_BUILTINS,
    ),
    bash(
        "bash-write-large",
        r#"for ((i = 0; i < 1000; i++)); do echo "line $i"; done > big.txt; n=0; while read -r l; do n=$((n + 1)); done < big.txt; echo "$n $l""#,
        Qemu,
        BUILTINS,
    ),
    sh(
        "sh-gzip-roundtrip",
        r#"gzip -c "$FIX/poem.txt" > p.gz && gunzip -c p.gz > p.txt && md5sum p.txt"#,
        Amd64,
        "ash execs gzip and gunzip",
    ),
    sh(
        "sh-tar-roundtrip",
        "mkdir d && echo one > d/1 && tar -cf t.tar d && rm -r d && tar -xf t.tar && cat d/1",
        Amd64,
        "ash execs tar and cat",
    ),
    // Exit statuses, stdin, the environment.
    applet("false", "false", &[], ONE_APPLET),
    bash("bash-exit", "echo bye; exit 200", Qemu, BUILTINS),
    applet("expr", "expr", &["6", "*", "7"], ONE_APPLET),
    // Not `env`: qemu-user hands the guest its environment in reverse order.
    applet(
        "awk-environ",
        "awk",
        &[
            r#"BEGIN { print ENVIRON["HOME"], ENVIRON["LANG"], ENVIRON["TZ"], ENVIRON["TERM"], "[" ENVIRON["NOSUCH"] "]" }"#,
        ],
        ONE_APPLET,
    ),
    bash("bash-not-found", r#"nosuchcmd arg; echo "status $?""#, Qemu, "nosuchcmd is not on PATH: nothing is exec'd"),
    with_stdin(
        bash("bash-stdin", r#"while read -r l; do echo "${#l}:$l"; done"#, Qemu, BUILTINS),
        "alpha\nbe ta\n\nlast",
    ),
    with_stdin(applet("sort-stdin", "sort", &["-r"], ONE_APPLET), "b\nd\na\nc\n"),
    with_stdin(
        Line {
            name: "sh-script-stdin",
            run: Invocation::Applet("sh", &["-s"]),
            stdin: "",
            reference: Qemu,
            why: ASH_BUILTINS,
        },
        "echo from stdin\nx=3\necho $((x * x))\nexit 9\n",
    ),
    applet("date-epoch", "date", &["-u", "-d", "@86400", "+%F %T %Z"], ONE_APPLET),
];

/// Which programs a table runs, and how its test is set up.
struct Table {
    /// The `#[test]` that runs it (for the rerun hint).
    test: &'static str,
    lines: &'static [Line],
    /// Debian's dynamically linked programs, from `$CACHE/root-ARCH/`.
    dynamic: bool,
    /// The expected failures, relative to the package.
    xfail: &'static str,
    /// Under `CARGO_TARGET_TMPDIR`.
    scratch: &'static str,
    /// Seconds, unless `UNWINDLAB_CONFORMANCE_BUDGET` says otherwise.
    budget: u64,
    /// What the issue asks for.
    min_lines: usize,
}

/// Debian's busybox-static and bash-static (issue 12): `$CACHE/ARCH/`,
/// amd64 natively, arm64 and s390x under `qemu-ARCH -L ROOT`.
const STATIC: Table = Table {
    test: "debian_programs_behave_as_under_the_reference",
    lines: LINES,
    dynamic: false,
    xfail: "tests/conformance/expected-failures.txt",
    scratch: "conformance",
    budget: 240,
    min_lines: 40,
};

/// Debian's dynamically linked programs (issue 13), from one complete root
/// per architecture, `$CACHE/root-ARCH/`: the packages of
/// `tests/conformance/packages-dynamic.txt` and the libraries they need,
/// usr-merged, every absolute symlink made relative and an empty
/// `etc/ld.so.cache` (`scripts/fetch-debian-programs.sh`), so that ld.so
/// finds only the root's libraries. Each line runs `ROOT/usr/bin/PROGRAM`
/// with `PATH=ROOT/usr/bin`:
///
/// * the emulator as `unwindlab exec --prefix ROOT` on every architecture,
///   amd64 included (the guest sees the host's `/` with ROOT searched first);
/// * the [`Reference::Qemu`] reference as `qemu-ARCH -L ROOT` on every
///   architecture, amd64 too (`qemu-x86_64`), which is the same view of the
///   files: PT_INTERP, the libraries and `/etc/ld.so.cache` come from ROOT;
/// * the [`Reference::Amd64`] reference, for lines that exec other programs
///   (qemu-user cannot start a child of a foreign architecture, and its
///   children run outside it anyway), as the root's amd64 programs run
///   natively: the kernel loads them with the host's `ld.so` and libraries,
///   not the root's. The host is Debian bookworm like the root, and the
///   report says whether the host's `libc.so.6` is the root's, byte for byte.
const DYNAMIC: Table = Table {
    test: "debian_dynamic_programs_behave_as_under_the_reference",
    lines: DYNAMIC_LINES,
    dynamic: true,
    xfail: "tests/conformance/expected-failures-dynamic.txt",
    scratch: "conformance-dynamic",
    budget: 120,
    min_lines: 35,
};

const ONE_PROGRAM: &str = "one program, no child";
const DASH_BUILTINS: &str = "dash builtins and forks only";

/// The command lines of Debian's dynamically linked programs: at least 35,
/// most of them one program run directly (so that qemu-user is the
/// reference); text tools, three compressors, an archiver, two interpreters.
const DYNAMIC_LINES: &[Line] = &[
    // coreutils: text tools on the fixtures and on stdin.
    program("sort-numeric", "sort", &["-n", "{FIX}/numbers.txt"], ONE_PROGRAM),
    program("sort-key", "sort", &["-t,", "-k2,2nr", "{FIX}/data.csv"], ONE_PROGRAM),
    with_stdin(program("uniq-count", "uniq", &["-c"], ONE_PROGRAM), "a\na\nb\nc\nc\nc\na\n"),
    program("wc-files", "wc", &["{FIX}/poem.txt", "{FIX}/numbers.txt"], ONE_PROGRAM),
    program("cut-fields", "cut", &["-d,", "-f2,1", "--output-delimiter=:", "{FIX}/data.csv"], ONE_PROGRAM),
    with_stdin(program("tr-upper", "tr", &["a-z", "A-Z"], ONE_PROGRAM), "Hello, world\nsecond line\n"),
    with_stdin(program("tr-delete-squeeze", "tr", &["-d", "-s", "aeiou", " "], ONE_PROGRAM), "so   many    spaces\n"),
    program("head-lines", "head", &["-n", "2", "{FIX}/poem.txt"], ONE_PROGRAM),
    program("tail-bytes", "tail", &["-c", "20", "{FIX}/poem.txt"], ONE_PROGRAM),
    program("seq-step", "seq", &["-w", "-s", ",", "1", "7", "50"], ONE_PROGRAM),
    program("od-hex", "od", &["-An", "-tx1", "{FIX}/sub/a.txt"], ONE_PROGRAM),
    program("base64-encode", "base64", &["{FIX}/poem.txt"], ONE_PROGRAM),
    with_stdin(program("base64-decode", "base64", &["-d"], ONE_PROGRAM), "aGVsbG8sIHdvcmxkCg==\n"),
    program("md5sum-files", "md5sum", &["{FIX}/poem.txt", "{FIX}/sub/a.txt"], ONE_PROGRAM),
    program("sha256sum-file", "sha256sum", &["{FIX}/data.csv"], ONE_PROGRAM),
    program("sha512sum-file", "sha512sum", &["{FIX}/numbers.txt"], ONE_PROGRAM),
    program("expr-arith", "expr", &["6", "*", "7", "+", "1"], ONE_PROGRAM),
    program("expr-false", "expr", &["length", "abc", "=", "4"], "one program, no child (status 1)"),
    program(
        "printf-formats",
        "printf",
        &["%5.2f|%-4s|%x|%o|%c|%s\\n", "3.14159", "ab", "255", "8", "xyz", "end"],
        ONE_PROGRAM,
    ),
    program("fold-width", "fold", &["-w", "8", "{FIX}/poem.txt"], ONE_PROGRAM),
    program("nl-number", "nl", &["-ba", "{FIX}/poem.txt"], ONE_PROGRAM),
    program("paste-files", "paste", &["-d|", "{FIX}/data.csv", "{FIX}/numbers.txt"], ONE_PROGRAM),
    program("join-files", "join", &["-a1", "-a2", "{FIX}/sub/a.txt", "{FIX}/sub/b.txt"], ONE_PROGRAM),
    program("comm-files", "comm", &["{FIX}/sub/a.txt", "{FIX}/sub/b.txt"], ONE_PROGRAM),
    program("tac-file", "tac", &["{FIX}/poem.txt"], ONE_PROGRAM),
    with_stdin(program("cat-show-all", "cat", &["-A"], ONE_PROGRAM), "tab\there\u{1}ctl\r\nutf8 \u{e9}\n"),
    program(
        "env-empty",
        "env",
        &["-i", "B=2", "A=1"],
        "one program, no child (env -i prints the environment it built)",
    ),
    program("date-utc", "date", &["-u", "-d", "@1000000000", "+%F %T %A %j"], ONE_PROGRAM),
    program(
        "factor-gmp",
        "factor",
        &["600851475143", "1000000007", "18446744073709551617", "1000000000000000000000000000000000000000021"],
        "one program, no child (the last number is past 128 bits: libgmp)",
    ),
    program("shuf-seeded", "shuf", &["-i", "1-12", "--random-source={FIX}/poem.txt"], ONE_PROGRAM),
    program("stat-format", "stat", &["-c", "%n %s %F %a", "{FIX}/poem.txt", "{FIX}/sub/deeper/c.txt"], ONE_PROGRAM),
    program("ls-recursive", "ls", &["-R", "{FIX}"], ONE_PROGRAM),
    program(
        "cat-missing",
        "cat",
        &["{FIX}/poem.txt", "{FIX}/nosuch.txt"],
        "one program, no child (an error message and status 1)",
    ),
    program("sort-bad-option", "sort", &["--no-such-option"], "one program, no child (a usage error, status 2)"),
    // sed and grep.
    program("sed-range", "sed", &["-n", "2,3p", "{FIX}/poem.txt"], ONE_PROGRAM),
    program("sed-regex", "sed", &["-E", "s/(o+)([a-z])/[\\1]\\2/g; 1!G; h; $!d", "{FIX}/poem.txt"], ONE_PROGRAM),
    with_stdin(program("sed-translate", "sed", &["y/abc/xyz/; =", "-"], ONE_PROGRAM), "aabbcc\ncab\n"),
    program("grep-extended", "grep", &["-En", "o{2}|fox|^A", "{FIX}/poem.txt"], ONE_PROGRAM),
    program("grep-count", "grep", &["-c", "-i", "the", "{FIX}/poem.txt", "{FIX}/sub/a.txt"], ONE_PROGRAM),
    program("grep-no-match", "grep", &["-v", "-e", "a", "{FIX}/sub/a.txt"], "one program, no child (status 1)"),
    program(
        "grep-perl",
        "grep",
        &["-oP", "\\b\\w+(?=o)", "{FIX}/poem.txt"],
        "one program, no child (PCRE2, with its JIT)",
    ),
    program(
        "grep-recursive",
        "grep",
        &["-rn", "deep", "{FIX}/sub"],
        "one program, no child (one match: no directory order)",
    ),
    // Compressors and the archiver.
    program("gzip-stdout", "gzip", &["-9cn", "{FIX}/poem.txt"], ONE_PROGRAM),
    program(
        "gzip-name-mtime",
        "gzip",
        &["-c", "{FIX}/data.csv"],
        "one program, no child (the header holds the name and mtime)",
    ),
    program("bzip2-stdout", "bzip2", &["-c", "{FIX}/poem.txt"], ONE_PROGRAM),
    program("xz-stdout", "xz", &["-T1", "-c", "{FIX}/poem.txt"], ONE_PROGRAM),
    // Threads (issue 14): programs that start threads (clone3 with
    // CLONE_THREAD, futexes), their output independent of the interleaving.
    program(
        "xz-threads-2",
        "xz",
        &["-T2", "--block-size=16", "-c", "{FIX}/poem.txt"],
        "one program, no child (2 threads: 16-byte blocks compressed in parallel)",
    ),
    program(
        "xz-threads-4",
        "xz",
        &["-T4", "--block-size=8", "-9e", "-c", "{FIX}/data.csv"],
        "one program, no child (4 blocks, 3 threads started)",
    ),
    program(
        "pigz-threads",
        "pigz",
        &["-p", "2", "-c", "{FIX}/poem.txt"],
        "one program, no child (a compressing and a writing thread)",
    ),
    with_stdin(
        program(
            "pigz-blocks",
            "pigz",
            &["-p", "4", "-b", "32", "-9", "-n", "-c", "../stdin"],
            "one program, no child (four 32 KiB blocks on four threads, and the writer)",
        ),
        "{LINES 20000}",
    ),
    // sort reads its stdin file by name (`../stdin`, beside the cwd): a
    // regular file, whose size lets sort take it into one buffer and sort it
    // with a second thread; stdin itself the emulator gives as a stream (and
    // from a pipe sort reads in small buffers, never threaded).
    with_stdin(
        program(
            "sort-parallel",
            "sort",
            &["--parallel=2", "-u", "../stdin"],
            "one program, no child (a second thread sorts half of 140000 lines)",
        ),
        "{LINES 140000}",
    ),
    program(
        "tar-create",
        "tar",
        &["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0", "-cf", "-", "-C", "{FIX}", "."],
        ONE_PROGRAM,
    ),
    // mawk.
    program(
        "mawk-sum",
        "mawk",
        &["-F,", "{ s += $2; n[NR] = $1 } END { print NR, s, n[1] n[NR] }", "{FIX}/data.csv"],
        ONE_PROGRAM,
    ),
    program(
        "mawk-strings",
        "mawk",
        &[
            "{ gsub(/o/, \"0\"); printf \"%-3d%s|%s\\n\", length($0), toupper(substr($0, 1, 5)), $NF }",
            "{FIX}/poem.txt",
        ],
        ONE_PROGRAM,
    ),
    program(
        "mawk-math",
        "mawk",
        &["BEGIN { printf \"%.6f %.6f %d %s\\n\", sin(1) + exp(2), log(10) * sqrt(2), int(-3.7), 2^40 }"],
        "one program, no child (libm)",
    ),
    program(
        "mawk-seeded",
        "mawk",
        &["BEGIN { srand(7); for (i = 0; i < 5; i++) printf \"%d \", int(rand() * 1000); print \"\" }"],
        ONE_PROGRAM,
    ),
    with_stdin(
        program(
            "mawk-stdin",
            "mawk",
            &["-v", "sep=:", "{ a[$1]++ } END { for (k in a) n++; print n sep NR }"],
            ONE_PROGRAM,
        ),
        "x\ny\nx\nz\n",
    ),
    // dash: builtins only.
    dash(
        "dash-loop",
        r#"i=0; while [ $i -lt 5 ]; do i=$((i + 1)); printf '%s ' "$i"; done; echo; echo "${HOME:-unset} ${#PATH}""#,
        Qemu,
        DASH_BUILTINS,
    ),
    dash(
        "dash-functions",
        r#"f() { local x; x=$1; shift; echo "$x:$#:$*"; return 3; }; f a b c; echo "status $?"; set -- p q; echo "$2$1""#,
        Qemu,
        DASH_BUILTINS,
    ),
    dash(
        "dash-case-params",
        r#"for w in apple fig.txt 42 ''; do case $w in *.txt) echo "txt ${w%.txt}";; [0-9]*) echo "num $w";; '') echo empty;; *) echo "other ${w#ap}";; esac; done"#,
        Qemu,
        DASH_BUILTINS,
    ),
    dash(
        "dash-redirect-read",
        r#"echo one > f; echo two >> f; while read -r l; do echo "<$l>"; done < f; read -r x < nosuch; echo "status $?""#,
        Qemu,
        DASH_BUILTINS,
    ),
    dash(
        "dash-heredoc",
        "while read -r a b; do echo \"$b $a\"; done <<EOF\none 1\n$((6 * 7)) x\nEOF",
        Qemu,
        DASH_BUILTINS,
    ),
    dash(
        "dash-glob-cd",
        r#"cd "$FIX/sub" && echo * && cd deeper && echo "${PWD##*/}" && cd .. && echo */*"#,
        Qemu,
        DASH_BUILTINS,
    ),
    dash(
        "dash-subshell-trap",
        r#"(exit 4); echo "sub $?"; trap 'echo bye' EXIT; kill -0 $$ && echo alive; exit 3"#,
        Qemu,
        DASH_BUILTINS,
    ),
    dash("dash-syntax-error", "echo before; if then fi", Qemu, "dash builtins only (a syntax error, status 2)"),
    dash("dash-not-found", r#"nosuchcmd; echo "status $?""#, Qemu, "nosuchcmd is not on PATH: nothing is exec'd"),
    with_stdin(
        Line {
            name: "dash-script-stdin",
            run: Invocation::Program("dash", &["-s"]),
            stdin: "",
            reference: Qemu,
            why: DASH_BUILTINS,
        },
        "echo from stdin\nx=3\necho $((x * x))\nexit 9\n",
    ),
    // dash: pipelines and programs it execs.
    dash(
        "dash-pipe-sort-uniq",
        r#"sort "$FIX/numbers.txt" "$FIX/numbers.txt" | uniq -c | sort -k1,1n -k2,2"#,
        Amd64,
        "execs sort and uniq",
    ),
    dash(
        "dash-pipe-text",
        r#"cat "$FIX/poem.txt" | tr a-z A-Z | sed 's/ /_/g' | head -n 3"#,
        Amd64,
        "execs cat, tr, sed and head",
    ),
    dash(
        "dash-cmdsubst",
        r#"n=$(wc -l < "$FIX/poem.txt"); s=$(seq 1 10 | paste -sd+); echo "$n lines, $s = $(expr 55)""#,
        Amd64,
        "execs wc, seq, paste and expr",
    ),
    dash(
        "dash-gzip-roundtrip",
        r#"gzip -c "$FIX/poem.txt" | gzip -dc | md5sum; gzip -n < "$FIX/data.csv" > d.gz && gzip -l d.gz"#,
        Amd64,
        "execs gzip and md5sum",
    ),
    dash(
        "dash-bzip2-xz",
        r#"bzip2 -c "$FIX/poem.txt" | bzip2 -dc | xz -T1 | xz -dc | sha256sum"#,
        Amd64,
        "execs bzip2, xz and sha256sum",
    ),
    dash(
        "dash-tar-roundtrip",
        r#"tar --sort=name -cf t.tar -C "$FIX" . && tar -tf t.tar && mkdir x && tar -xf t.tar -C x && cat x/sub/deeper/c.txt && ls -R x | wc -l"#,
        Amd64,
        "execs tar, mkdir, cat, ls and wc",
    ),
    dash(
        "dash-mawk-pipe",
        r#"seq 1 100 | mawk '{ s += $1 } END { print s }' | sed 's/^/sum=/'"#,
        Amd64,
        "execs seq, mawk and sed",
    ),
    dash(
        "dash-grep-status",
        r#"grep -q fox "$FIX/poem.txt" && echo found; grep -q cat "$FIX/poem.txt" || echo "absent $?""#,
        Amd64,
        "execs grep",
    ),
];

/// Debian's bash and busybox opening `/dev/fd`, `/dev/std*` and
/// `/proc/self/fd` (issue 27): the static programs of [`STATIC`].
const DEVFD: Table = Table {
    test: "debian_shells_open_dev_fd_as_under_the_reference",
    lines: DEVFD_LINES,
    dynamic: false,
    xfail: "tests/conformance/expected-failures-devfd.txt",
    scratch: "conformance-devfd",
    budget: 120,
    min_lines: 15,
};

/// dash and GNU coreutils opening `/dev/fd`, `/dev/std*` and
/// `/proc/self/fd` (issue 27): the dynamic roots of [`DYNAMIC`].
const DEVFD_DYNAMIC: Table = Table {
    test: "debian_dynamic_programs_open_dev_fd_as_under_the_reference",
    lines: DEVFD_DYNAMIC_LINES,
    dynamic: true,
    xfail: "tests/conformance/expected-failures-devfd-dynamic.txt",
    scratch: "conformance-devfd-dynamic",
    budget: 60,
    min_lines: 8,
};

/// Every table, for the filters and the checks of names.
const TABLES: [&Table; 4] = [&STATIC, &DYNAMIC, &DEVFD, &DEVFD_DYNAMIC];

/// Every line of every table.
fn all_lines() -> impl Iterator<Item = &'static Line> + Clone {
    TABLES.into_iter().flat_map(|t| t.lines)
}

/// The command lines of `/dev/fd` with bash (and a line of ash): at least
/// 15. The host's standard streams differ on the two sides: the reference
/// gets files (opened again, a file restarts at offset 0, and `O_TRUNC`
/// empties it), the emulator streams (`README.md`); so the lines open them
/// only where both agree: stdin before anything read it, stderr before
/// anything was written to it. Everything else goes through pipes and
/// files the lines make themselves.
const DEVFD_LINES: &[Line] = &[
    // Process substitution: bash opens /dev/fd/63, the read end of a pipe.
    bash("bash-procsubst-while", r#"while read -r l; do echo "got $l"; done < <(echo one; echo two)"#, Qemu, BUILTINS),
    bash(
        "bash-procsubst-mapfile",
        r#"mapfile -t a < <(printf '%s\n' x y z); echo "${#a[@]} ${a[1]}""#,
        Qemu,
        BUILTINS,
    ),
    bash(
        "bash-procsubst-exec-fd",
        r#"exec 3< <(echo from3; echo more); read -r -u 3 a; read -r -u 3 b; exec 3<&-; echo "$a/$b""#,
        Qemu,
        BUILTINS,
    ),
    bash(
        "bash-procsubst-output",
        r#"echo data > >(read -r l; echo "sub $l" > o.txt); wait $!; read -r v < o.txt; echo "$v""#,
        Qemu,
        "bash builtins and forks only (the write end of a pipe, /dev/fd/63, opened to write)",
    ),
    bash("bash-procsubst-cat", "cat <(echo hi) <(echo there)", Amd64, "execs cat"),
    bash(
        "bash-procsubst-diff",
        r#"diff <(printf '%s\n' a b c) <(printf '%s\n' a x c); echo "status $?""#,
        Amd64,
        "execs diff",
    ),
    // exec N< and read -u N.
    bash(
        "bash-exec-read-u",
        r#"printf '%s\n' one two > f; exec 3< f; read -r -u 3 x; read -r -u 3 y; exec 3<&-; echo "$y $x""#,
        Qemu,
        BUILTINS,
    ),
    // /dev/stdin on a here-string (a pipe) and on a long here-document
    // (past a pipe's capacity: an unlinked temporary file).
    bash("bash-herestring-devstdin", r#"read -r v < /dev/stdin <<< "here string"; echo "[$v]""#, Qemu, BUILTINS),
    bash(
        "bash-pipe-reopened",
        r#"{ read -r a; read -r b < /dev/stdin; echo "$a|$b"; } <<< $'one\ntwo'"#,
        Qemu,
        "bash builtins only (a pipe opened again goes on where it was)",
    ),
    bash(
        "bash-heredoc-file-reopened",
        "{ read -r a; read -r b < /dev/stdin; echo \"${#a} ${#b}\"; } <<EOF\n$(printf '%070000d' 0)\nsecond\nEOF",
        Qemu,
        "bash builtins only (an unlinked file opened again starts at 0)",
    ),
    bash("bash-cat-herestring", r#"cat /dev/stdin <<< x; cat /dev/stdin <<< "two words""#, Amd64, "execs cat"),
    bash(
        "bash-cat-heredoc-file",
        "cat /dev/stdin <<EOF | wc -c\n$(printf '%070000d' 0)\nEOF",
        Amd64,
        "execs cat and wc (cat opens the shell's unlinked temporary file)",
    ),
    bash(
        "bash-wc-devstdin",
        "printf 'abc\\ndef\\n' | wc -c < /dev/stdin; wc -l < /dev/stdin <<EOF\n1\n2\n3\nEOF",
        Amd64,
        "execs wc and printf's pipe reader",
    ),
    // Files opened again: a new description at offset 0, O_TRUNC, O_APPEND.
    bash(
        "bash-devfd-trunc-offset",
        r#"exec 4> out.txt; echo first >&4; echo second > /dev/fd/4; echo third >&4; exec 4>&-; while IFS= read -r l; do echo "[$l]"; done < out.txt"#,
        Qemu,
        "bash builtins only (fd 4 writes on at its own offset into the truncated file)",
    ),
    bash(
        "bash-devfd-append",
        r#"echo one > g.txt; exec 5< g.txt; echo two >> /dev/fd/5; exec 5<&-; while read -r l; do echo "<$l>"; done < g.txt"#,
        Qemu,
        "bash builtins only (a file open to read, opened again to append)",
    ),
    // /dev/stdout and /dev/stderr on pipes.
    bash(
        "bash-devstd-pipe",
        r#"{ echo out > /dev/stdout; echo err > /dev/stderr; echo x > /dev/stderr 2>&1; } 2>&1 | while read -r l; do echo "<$l>"; done"#,
        Qemu,
        BUILTINS,
    ),
    bash(
        "bash-tee-devstderr",
        r#"{ echo teed | tee /dev/stderr | sed 's/^/out: /'; } 2>&1 | sort"#,
        Amd64,
        "execs tee, sed and sort",
    ),
    // The host's streams, where both sides agree.
    with_stdin(
        bash("bash-devstdin-host", r#"read -r a < /dev/stdin; echo "[$a]"; echo to-stderr > /dev/stderr"#, Qemu, BUILTINS),
        "alpha\nbeta\n",
    ),
    // Names: readlink, stat, listings.
    bash(
        "bash-readlink-pipe",
        r#"echo | readlink /proc/self/fd/0 | sed 's/[0-9][0-9]*/N/'; for f in /dev/stdin /dev/stdout /dev/stderr /dev/fd; do readlink "$f"; done"#,
        Amd64,
        "execs readlink and sed",
    ),
    bash(
        "bash-readlink-file-fd",
        r#"exec 3> w.txt; readlink /proc/self/fd/3 | sed "s|^$PWD/||"; readlink /dev/fd/3 < /dev/null | sed "s|^$PWD/||""#,
        Amd64,
        "execs readlink and sed",
    ),
    bash(
        "bash-stat-devstdin",
        r#"echo | stat -L -c %F /dev/stdin; stat -c '%F %s' /dev/stdin; echo x > f; stat -L -c '%F %s' /dev/stdin < f"#,
        Amd64,
        "execs stat",
    ),
    bash(
        "bash-ls-devfd",
        r#"ls /dev/fd/ 3< /dev/null 5> /dev/null | while read -r f; do if [ "$f" -le 5 ]; then echo "$f"; fi; done"#,
        Amd64,
        "execs ls (4 is its directory; descriptors past 5 that the test's parents leak to the reference are left out)",
    ),
    bash(
        "bash-devfd-missing",
        r#"read -r l < /dev/fd/9; echo "status $?"; echo x > /dev/fd/9; echo "status $?""#,
        Qemu,
        BUILTINS,
    ),
    sh(
        "sh-devfd",
        "exec 3> f3; echo via > /dev/fd/3; exec 3>&-; read -r v < f3; echo \"$v\"; read -r w < /dev/stdin <<EOF\nhere\nEOF\necho \"$w\"",
        Qemu,
        ASH_BUILTINS,
    ),
];

/// The command lines of `/dev/fd` with dash and GNU coreutils: at least 8
/// (the host's streams as in [`DEVFD_LINES`]).
const DEVFD_DYNAMIC_LINES: &[Line] = &[
    dash(
        "dash-devfd-trunc-offset",
        r#"exec 3> f; echo one >&3; echo second > /dev/fd/3; echo three >&3; exec 3>&-; while read -r l; do echo "[$l]"; done < f"#,
        Qemu,
        DASH_BUILTINS,
    ),
    dash(
        "dash-devstdin-heredoc",
        "read -r a < /dev/stdin <<EOF\nhere\nEOF\necho \"[$a]\"",
        Qemu,
        "dash builtins and forks only (dash writes a here-document into a pipe)",
    ),
    dash(
        "dash-devstd-pipe",
        r#"{ echo out > /dev/stdout; echo err > /dev/stderr; } 2>&1 | while read -r l; do echo "<$l>"; done"#,
        Qemu,
        DASH_BUILTINS,
    ),
    with_stdin(program("cat-devstdin", "cat", &["/dev/stdin"], ONE_PROGRAM), "from stdin\nsecond line\n"),
    with_stdin(program("tee-devstderr", "tee", &["/dev/stderr"], ONE_PROGRAM), "teed\n"),
    with_stdin(program("wc-devstdin", "wc", &["-c", "/dev/stdin"], ONE_PROGRAM), "12345\n"),
    dash(
        "dash-readlink-devfd",
        r#"echo | readlink /dev/fd/0 | sed 's/[0-9][0-9]*/N/'; readlink -f /dev/stdin < /dev/null; readlink /dev/stdout"#,
        Amd64,
        "execs readlink and sed",
    ),
    dash("dash-cat-devfd", "printf 'one\\n' | cat /dev/fd/0 -; echo two | cat - /dev/stdin", Amd64, "execs cat"),
    dash(
        "dash-stat-devstd",
        r#"echo x | stat -L -c %F /dev/stdin; stat -c '%F %N' /dev/stdout; stat -L -c %F /dev/fd/3 3< "$FIX/poem.txt""#,
        Amd64,
        "execs stat",
    ),
    dash(
        "dash-tee-devfd",
        r#"echo both | tee /dev/fd/2 2>&1 > /dev/null | sed 's/^/err: /'"#,
        Amd64,
        "execs tee and sed",
    ),
];

/// Where the fetched programs live: one root per architecture.
struct Cache {
    dir: PathBuf,
    /// The dynamic roots, `root-ARCH`, rather than the static ones.
    dynamic: bool,
}

impl Cache {
    /// The cache of `scripts/fetch-debian-programs.sh`, or one line saying to
    /// run the set-up.
    fn open(dynamic: bool) -> Result<Cache, String> {
        let dir = match std::env::var_os("UNWINDLAB_DEBIAN_CACHE") {
            Some(dir) => PathBuf::from(dir),
            None => {
                let base = match std::env::var_os("XDG_CACHE_HOME") {
                    Some(x) if !x.is_empty() => PathBuf::from(x),
                    _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"),
                };
                base.join("unwindlab").join("debian")
            }
        };
        let (manifest, which, programs): (_, _, &[&str]) = if dynamic {
            (
                "manifest-dynamic.txt",
                "dynamically linked",
                &["usr/bin/dash", "usr/bin/sort", "usr/bin/mawk", "usr/bin/tar", "usr/bin/pigz"],
            )
        } else {
            ("manifest.txt", "static", &["bin/busybox", "bin/bash-static", "bin/sort"])
        };
        let manifest = dir.join(manifest);
        let text = std::fs::read_to_string(&manifest).map_err(|_| {
            format!(
                "conformance: Debian's {which} programs are not fetched (no {}): run `make deps` or scripts/fetch-debian-programs.sh",
                manifest.display()
            )
        })?;
        let cache = Cache { dir, dynamic };
        for arch in Arch::ALL {
            for program in programs {
                let path = cache.root(arch).join(program);
                if !path.exists() || !text.lines().any(|l| l.starts_with(&format!("{} ", arch.debian()))) {
                    return Err(format!(
                        "conformance: the Debian program cache is incomplete (no {}): run `make deps` or scripts/fetch-debian-programs.sh",
                        path.display()
                    ));
                }
            }
        }
        Ok(cache)
    }

    fn root(&self, arch: Arch) -> PathBuf {
        match self.dynamic {
            true => self.dir.join(format!("root-{}", arch.debian())),
            false => self.dir.join(arch.debian()),
        }
    }
}

/// How a run ended.
#[derive(Clone, PartialEq, Eq, Debug)]
enum Status {
    Exit(i32),
    Signal(i32),
    TimedOut(u64),
    NotStarted(String),
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Exit(code) => write!(f, "exit {code}"),
            Status::Signal(sig) => write!(f, "killed by signal {sig}"),
            Status::TimedOut(secs) => write!(f, "still running after {secs} s (killed)"),
            Status::NotStarted(why) => write!(f, "did not start: {why}"),
        }
    }
}

/// What a run printed and how it ended.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Outcome {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    status: Status,
}

/// Everything fixed for the whole suite.
struct Suite {
    table: &'static Table,
    cache: Cache,
    fixtures: PathBuf,
    scratch: PathBuf,
    emulator: PathBuf,
    /// qemu-user for each architecture the [`Reference::Qemu`] reference
    /// runs under it (amd64 only for the dynamic table).
    qemu: BTreeMap<Arch, PathBuf>,
    timeout: Duration,
    /// The table's time: past it, later runs get a second at most.
    budget: Budget,
}

/// A table's budget in CPU time, not wall-clock time: the processor time
/// its runs have used (this process's reaped children; the tables run one
/// at a time), divided by the parallel runs. A virtual machine whose host
/// steals its CPUs stretches every run's wall-clock time, and a budget in
/// wall-clock time then cut runs that were not hung.
struct Budget {
    /// The table's allowance, in seconds of all its parallel runs' time.
    allowance: Duration,
    /// The children's CPU time when the table started.
    start: Duration,
    /// Parallel runs.
    jobs: u32,
}

impl Budget {
    /// The CPU time of this process's reaped children (user + system:
    /// `cutime` and `cstime` of `/proc/self/stat`, in clock ticks of
    /// 1/100 s, as Linux reports them to user space).
    fn children_cpu() -> Duration {
        let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
        // Fields after the command's closing parenthesis, from field 3.
        let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
        let ticks = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        Duration::from_millis((ticks(16) + ticks(17)) * 10)
    }

    /// The time used so far, per parallel run.
    fn used(&self) -> Duration {
        Budget::children_cpu().saturating_sub(self.start) / self.jobs
    }

    /// What is left of the allowance.
    fn left(&self) -> Duration {
        self.allowance.saturating_sub(self.used())
    }
}

impl Suite {
    /// The fixed environment of every run, for programs of `root`: nothing
    /// from the host, so that both sides see the same.
    fn env(&self, root: &Path) -> Vec<(&'static str, OsString)> {
        let path = if self.table.dynamic { root.join("usr/bin") } else { root.join("bin") };
        vec![
            ("PATH", path.into_os_string()),
            ("HOME", "/".into()),
            ("LANG", "C".into()),
            ("LC_ALL", "C".into()),
            ("TZ", "UTC".into()),
            ("TERM", "dumb".into()),
            ("FIX", self.fixtures.clone().into_os_string()),
        ]
    }

    /// The program and its arguments for `line`, from `root`.
    fn argv(&self, line: &Line, root: &Path) -> Vec<OsString> {
        let bin = root.join("bin");
        let mut argv: Vec<OsString> = Vec::new();
        match line.run {
            Invocation::Bash(script) => {
                argv.push(bin.join("bash-static").into());
                argv.extend(["-c", script, "bash"].map(OsString::from));
            }
            Invocation::Sh(script) => {
                argv.push(bin.join("busybox").into());
                argv.extend(["sh", "-c", script, "sh"].map(OsString::from));
            }
            Invocation::Applet(name, args) => {
                argv.push(bin.join(name).into());
                let fix = self.fixtures.to_string_lossy();
                argv.extend(args.iter().map(|a| OsString::from(a.replace("{FIX}", &fix))));
            }
            Invocation::Program(name, args) => {
                argv.push(root.join("usr/bin").join(name).into());
                let fix = self.fixtures.to_string_lossy();
                argv.extend(args.iter().map(|a| OsString::from(a.replace("{FIX}", &fix))));
            }
            Invocation::Dash(script) => {
                argv.push(root.join("usr/bin/dash").into());
                argv.extend(["-c", script, "dash"].map(OsString::from));
            }
        }
        argv
    }

    /// The reference's command: natively for an amd64 reference, else under
    /// qemu-user with `-L ROOT` (natively for amd64 in the static table).
    fn reference_command(&self, line: &Line, arch: Arch, reference: Reference) -> (Vec<OsString>, PathBuf) {
        let arch = if reference == Reference::Amd64 { Arch::Amd64 } else { arch };
        let root = self.cache.root(arch);
        let mut cmd = Vec::new();
        let qemu = if reference == Reference::Amd64 { None } else { self.qemu.get(&arch) };
        if let Some(qemu) = qemu {
            cmd.push(qemu.clone().into_os_string());
            cmd.push("-L".into());
            cmd.push(root.clone().into_os_string());
        }
        cmd.extend(self.argv(line, &root));
        (cmd, root)
    }

    /// The emulator's command: `unwindlab exec`, with `--prefix ROOT` where
    /// the reference has qemu-user's `-L ROOT` (always for the dynamic table).
    fn emulator_command(&self, line: &Line, arch: Arch) -> (Vec<OsString>, PathBuf) {
        let root = self.cache.root(arch);
        let mut cmd = vec![self.emulator.clone().into_os_string(), "exec".into()];
        if arch != Arch::Amd64 || self.table.dynamic {
            cmd.push("--prefix".into());
            cmd.push(root.clone().into_os_string());
        }
        cmd.extend(self.argv(line, &root));
        (cmd, root)
    }

    /// Runs `cmd` in a fresh empty cwd under `scratch/<tag>`, with the fixed
    /// environment for `root` and the line's stdin from a file; output goes
    /// to files beside that cwd, so nothing waits on a pipe that a stray
    /// grandchild holds open.
    fn run(&self, tag: &str, cmd: &[OsString], root: &Path, stdin: &str) -> Outcome {
        let not_started =
            |why: String| Outcome { stdout: Vec::new(), stderr: Vec::new(), status: Status::NotStarted(why) };
        let base = self.scratch.join(tag);
        let _ = std::fs::remove_dir_all(&base);
        let cwd = base.join("cwd");
        if let Err(e) = std::fs::create_dir_all(&cwd) {
            return not_started(format!("{}: {e}", cwd.display()));
        }
        let files = (|| -> std::io::Result<(File, File, File)> {
            std::fs::write(base.join("stdin"), stdin)?;
            Ok((
                File::open(base.join("stdin"))?,
                File::create(base.join("stdout"))?,
                File::create(base.join("stderr"))?,
            ))
        })();
        let (input, out, err) = match files {
            Ok(files) => files,
            Err(e) => return not_started(format!("{}: {e}", base.display())),
        };
        let spawned = Command::new(&cmd[0])
            .args(&cmd[1..])
            .env_clear()
            .envs(self.env(root))
            .current_dir(&cwd)
            .stdin(input)
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => return not_started(format!("{}: {e}", Path::new(&cmd[0]).display())),
        };
        let start = Instant::now();
        let limit = self.timeout.min(self.budget.left().max(Duration::from_secs(1)));
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => match (status.code(), status.signal()) {
                    (Some(code), _) => break Status::Exit(code),
                    (None, Some(sig)) => break Status::Signal(sig),
                    (None, None) => break Status::NotStarted(format!("unknown status {status:?}")),
                },
                Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(2)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Status::TimedOut(limit.as_secs());
                }
                Err(e) => break Status::NotStarted(format!("wait: {e}")),
            }
        };
        // Whatever the run left behind in its process group (a background
        // job of a shell that exited, or the children of a timed-out run).
        let _ = Command::new("sh")
            .args(["-c", "kill -s KILL -- -$0 2>/dev/null", &child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        Outcome {
            stdout: std::fs::read(base.join("stdout")).unwrap_or_default(),
            stderr: std::fs::read(base.join("stderr")).unwrap_or_default(),
            status,
        }
    }
}

/// The result of one line on one architecture.
struct Result1 {
    line: Line,
    arch: Arch,
    /// The reference's two runs differed: the line is no test.
    unstable: Option<(Outcome, Outcome)>,
    expected: Outcome,
    got: Outcome,
    /// With `UNWINDLAB_CONFORMANCE_AUDIT`: a doubt about the line's reference.
    audit: Option<String>,
}

impl Result1 {
    fn passed(&self) -> bool {
        self.unstable.is_none() && self.expected == self.got
    }
}

fn run_one(suite: &Suite, line: &Line, arch: Arch, audit: bool) -> Result1 {
    let tag = format!("{}/{}", arch.debian(), line.name);
    let (ref_cmd, ref_root) = suite.reference_command(line, arch, line.reference);
    let stdin = stdin_text(line);
    let first = suite.run(&format!("{tag}/reference-1"), &ref_cmd, &ref_root, &stdin);
    let second = suite.run(&format!("{tag}/reference-2"), &ref_cmd, &ref_root, &stdin);
    let (emu_cmd, emu_root) = suite.emulator_command(line, arch);
    let got = suite.run(&format!("{tag}/emulator"), &emu_cmd, &emu_root, &stdin);
    let audit = (audit && arch != Arch::Amd64).then(|| {
        // The other reference: a qemu line should print what the amd64
        // build prints (the lines are meant to be architecture-neutral), and
        // an amd64 line should be one that qemu-user cannot run.
        let other = match line.reference {
            Reference::Qemu => Reference::Amd64,
            Reference::Amd64 => Reference::Qemu,
        };
        let (cmd, root) = suite.reference_command(line, arch, other);
        let alt = suite.run(&format!("{tag}/audit"), &cmd, &root, &stdin);
        match (line.reference, alt == first) {
            (Reference::Qemu, false) => Some(format!(
                "qemu-user and the amd64 build disagree (arch-dependent output, or qemu cannot run it): {} vs {}",
                brief(&first),
                brief(&alt)
            )),
            (Reference::Amd64, true) => Some("qemu-user prints the same: could use it as reference".to_string()),
            _ => None,
        }
    });
    let unstable = (first != second).then(|| (first.clone(), second));
    Result1 { line: *line, arch, unstable, expected: first, got, audit: audit.flatten() }
}

/// An outcome in one line, for the audit.
fn brief(o: &Outcome) -> String {
    format!(
        "{}, stdout {:?}, stderr {:?}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `cmd` as a shell would take it (for a person to paste).
fn shell_words(cmd: &[OsString]) -> String {
    cmd.iter()
        .map(|w| {
            let w = w.to_string_lossy();
            if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c)) {
                w.into_owned()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A line of output as a person reads it: printable text as is, the rest escaped.
fn show(line: &[u8]) -> String {
    match std::str::from_utf8(line) {
        // Blank or space-ended lines are quoted too, or the difference hides.
        Ok(s) if !s.chars().any(|c| c.is_control() && c != '\t') && !s.ends_with([' ', '\t']) && !s.is_empty() => {
            s.to_string()
        }
        _ => format!("{:?}", String::from_utf8_lossy(line)),
    }
}

/// The differing middle of two outputs, line by line, with one line of
/// context either side: `-` expected, `+` got.
fn diff(out: &mut String, what: &str, expected: &[u8], got: &[u8]) {
    if expected == got {
        return;
    }
    let split = |b: &[u8]| -> Vec<Vec<u8>> {
        let mut lines: Vec<Vec<u8>> = b.split_inclusive(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
        if let Some(last) = lines.last_mut() {
            if last.last() != Some(&b'\n') {
                last.extend_from_slice(b" [no newline at end]");
            } else {
                last.pop();
            }
        }
        for l in lines.iter_mut() {
            if l.last() == Some(&b'\n') {
                l.pop();
            }
        }
        lines
    };
    let (e, g) = (split(expected), split(got));
    let prefix = e.iter().zip(&g).take_while(|(a, b)| a == b).count();
    let suffix = e[prefix..].iter().rev().zip(g[prefix..].iter().rev()).take_while(|(a, b)| a == b).count();
    let _ = writeln!(out, "  {what} (- expected, + got):");
    const MAX: usize = 25;
    if prefix > 0 {
        let _ = writeln!(out, "      {}", show(&e[prefix - 1]));
    }
    for (sign, lines) in [("-", &e[prefix..e.len() - suffix]), ("+", &g[prefix..g.len() - suffix])] {
        for l in lines.iter().take(MAX) {
            let _ = writeln!(out, "    {sign} {}", show(l));
        }
        if lines.len() > MAX {
            let _ = writeln!(out, "    {sign} … {} more lines", lines.len() - MAX);
        }
    }
    if suffix > 0 {
        let _ = writeln!(out, "      {}", show(&e[e.len() - suffix]));
    }
}

fn describe_reference(table: &Table, line: &Line, arch: Arch) -> String {
    match (arch, line.reference) {
        (Arch::Amd64, Reference::Qemu) if table.dynamic => format!("qemu-x86_64 -L ROOT ({})", line.why),
        (Arch::Amd64, Reference::Amd64) if table.dynamic => {
            format!("amd64 build natively, with the host's ld.so and libraries ({})", line.why)
        }
        (Arch::Amd64, _) => format!("amd64 build natively; on foreign arches {}: {}", kind(line.reference), line.why),
        (_, Reference::Qemu) => format!("{} -L ROOT ({})", arch.qemu().unwrap_or("qemu"), line.why),
        (_, Reference::Amd64) => format!("amd64 build natively ({})", line.why),
    }
}

fn kind(reference: Reference) -> &'static str {
    match reference {
        Reference::Qemu => "qemu-user",
        Reference::Amd64 => "amd64 native",
    }
}

/// The report of one result that did not pass.
fn mismatch(suite: &Suite, r: &Result1) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}  (reference: {})",
        r.arch.debian(),
        r.line.name,
        describe_reference(suite.table, &r.line, r.arch)
    );
    let (emu, _) = suite.emulator_command(&r.line, r.arch);
    let _ = writeln!(out, "  command: {}", shell_words(&emu));
    if !r.line.stdin.is_empty() {
        let _ = writeln!(out, "  stdin:   {:?}", r.line.stdin);
    }
    let _ = writeln!(
        out,
        "  rerun:   UNWINDLAB_CONFORMANCE_ARCH={} UNWINDLAB_CONFORMANCE_LINE={} UNWINDLAB_CONFORMANCE_STRICT=1 cargo test --test conformance {}",
        r.arch.debian(),
        r.line.name,
        suite.table.test
    );
    if let Some((a, b)) = &r.unstable {
        let _ = writeln!(out, "  THE REFERENCE IS NOT DETERMINISTIC: its two runs differ");
        if a.status != b.status {
            let _ = writeln!(out, "  status: first {}, second {}", a.status, b.status);
        }
        diff(&mut out, "stdout, first vs second run", &a.stdout, &b.stdout);
        diff(&mut out, "stderr, first vs second run", &a.stderr, &b.stderr);
        return out;
    }
    if r.expected.status != r.got.status {
        let _ = writeln!(out, "  status: expected {}, got {}", r.expected.status, r.got.status);
    }
    diff(&mut out, "stdout", &r.expected.stdout, &r.got.stdout);
    diff(&mut out, "stderr", &r.expected.stderr, &r.got.stderr);
    out
}

/// `tests/conformance/expected-failures.txt`: `ARCH NAME` a line, `#` comments.
fn expected_failures(path: &Path) -> BTreeSet<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut words = l.split('#').next().unwrap_or("").split_whitespace();
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

/// A line filter's item selects the line of that name, or, when no line
/// (of any table) has that name, every line whose name contains it.
fn name_matches(name: &str, item: &str) -> bool {
    name == item || (!all_lines().any(|l| l.name == item) && name.contains(item))
}

fn env_list(name: &str) -> Option<Vec<String>> {
    let v = std::env::var(name).ok().filter(|v| !v.trim().is_empty())?;
    Some(v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The absolute path of `program` on the test's own PATH.
fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

#[test]
fn table_is_well_formed() {
    for table in TABLES {
        let n = table.lines.len();
        assert!(
            n >= table.min_lines,
            "{}: the issue asks for at least {} lines, the table has {n}",
            table.test,
            table.min_lines
        );
        for line in table.lines {
            assert!(!line.why.is_empty(), "{}: say why this reference", line.name);
            assert!(line.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'), "{}: name", line.name);
            let dynamic = matches!(line.run, Invocation::Program(..) | Invocation::Dash(_));
            assert_eq!(dynamic, table.dynamic, "{}: a program of the other kind of table", line.name);
        }
    }
    // Unique across the tables, so a name means one line to the filters.
    let names: BTreeSet<&str> = all_lines().map(|l| l.name).collect();
    assert_eq!(names.len(), all_lines().count(), "two lines share a name");
}

#[test]
fn debian_programs_behave_as_under_the_reference() {
    run_table(&STATIC);
}

#[test]
fn debian_dynamic_programs_behave_as_under_the_reference() {
    run_table(&DYNAMIC);
}

#[test]
fn debian_shells_open_dev_fd_as_under_the_reference() {
    run_table(&DEVFD);
}

#[test]
fn debian_dynamic_programs_open_dev_fd_as_under_the_reference() {
    run_table(&DEVFD_DYNAMIC);
}

/// The tables' tests share the machine's CPUs: one runs at a time.
static ONE_TABLE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether the host's `libc.so.6` is the dynamic amd64 root's, for the
/// report: the amd64-native reference runs with the host's libraries.
fn host_libc_note(root: &Path) -> String {
    let lib = "lib/x86_64-linux-gnu/libc.so.6";
    let host = std::fs::read(Path::new("/").join(lib)).ok();
    let ours = std::fs::read(root.join("usr").join(lib)).ok();
    match (host, ours) {
        (Some(h), Some(o)) if h == o => "the host's /usr/lib/x86_64-linux-gnu/libc.so.6 is the root's".to_string(),
        _ => "THE HOST'S libc.so.6 DIFFERS FROM THE ROOT'S: amd64-native references use the host's".to_string(),
    }
}

fn run_table(table: &'static Table) {
    let line_filter = env_list("UNWINDLAB_CONFORMANCE_LINE");
    let arch_filter = env_list("UNWINDLAB_CONFORMANCE_ARCH");
    if let Some(f) = &line_filter {
        assert!(
            all_lines().any(|l| f.iter().any(|x| name_matches(l.name, x))),
            "UNWINDLAB_CONFORMANCE_LINE matches no line of any table"
        );
        if !table.lines.iter().any(|l| f.iter().any(|x| name_matches(l.name, x))) {
            println!("conformance: UNWINDLAB_CONFORMANCE_LINE matches no line of this table ({}): skipped", table.test);
            return;
        }
    }
    let _serial = ONE_TABLE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cache = Cache::open(table.dynamic).unwrap_or_else(|e| panic!("{e}"));
    let mut qemu = BTreeMap::new();
    for arch in Arch::ALL {
        let name = match (arch.qemu(), table.dynamic) {
            (Some(name), _) => name,
            (None, true) => "qemu-x86_64",
            (None, false) => continue,
        };
        let path = which(name)
            .unwrap_or_else(|| panic!("conformance: {name} not found: run `make deps` (Debian package qemu-user)"));
        qemu.insert(arch, path);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join(table.scratch);
    let secs = |var: &str, default: u64| std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let budget = Duration::from_secs(secs("UNWINDLAB_CONFORMANCE_BUDGET", table.budget));
    let jobs = std::env::var("UNWINDLAB_CONFORMANCE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let suite = Suite {
        table,
        cache,
        fixtures: manifest.join("tests/conformance/tree"),
        scratch: scratch.clone(),
        emulator: PathBuf::from(env!("CARGO_BIN_EXE_unwindlab")),
        qemu,
        timeout: Duration::from_secs(secs("UNWINDLAB_CONFORMANCE_TIMEOUT", 20)),
        budget: Budget {
            allowance: budget,
            start: Budget::children_cpu(),
            jobs: u32::try_from(jobs).unwrap_or(u32::MAX),
        },
    };

    let strict = env_flag("UNWINDLAB_CONFORMANCE_STRICT");
    let audit = env_flag("UNWINDLAB_CONFORMANCE_AUDIT");
    let arches: Vec<Arch> = Arch::ALL
        .into_iter()
        .filter(|a| arch_filter.as_ref().is_none_or(|f| f.iter().any(|x| x == a.debian())))
        .collect();
    let lines: Vec<&Line> = table
        .lines
        .iter()
        .filter(|l| line_filter.as_ref().is_none_or(|f| f.iter().any(|x| name_matches(l.name, x))))
        .collect();
    assert!(!arches.is_empty(), "UNWINDLAB_CONFORMANCE_ARCH matches none of amd64, arm64, s390x");
    assert!(!lines.is_empty(), "UNWINDLAB_CONFORMANCE_LINE matches no line of the table");

    // Work items, the slow emulated architectures first so they overlap.
    let mut items: Vec<(&Line, Arch)> = Vec::new();
    for arch in arches.iter().rev() {
        items.extend(lines.iter().map(|l| (*l, *arch)));
    }
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((line, arch)) = items.get(i) else { break };
                let r = run_one(&suite, line, *arch, audit);
                results.lock().unwrap_or_else(|e| e.into_inner()).push(r);
            });
        }
    });
    let elapsed = start.elapsed();
    let over_budget = suite.budget.left().is_zero();
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|r| (r.arch, table.lines.iter().position(|l| l.name == r.line.name)));

    let xfail_path = manifest.join(table.xfail);
    let listed = if strict { BTreeSet::new() } else { expected_failures(&xfail_path) };
    let mut failures = Vec::new(); // (text) mismatches not listed, unstable references
    let mut fixed = Vec::new(); // listed but passing
    let mut known = Vec::new(); // listed and failing
    let mut outcome: BTreeMap<(&str, Arch), &str> = BTreeMap::new();
    for r in &results {
        let key = (r.arch.debian().to_string(), r.line.name.to_string());
        let word = if r.unstable.is_some() {
            failures.push(mismatch(&suite, r));
            "UNSTABLE"
        } else if r.passed() {
            if listed.contains(&key) {
                fixed.push(format!("{} {}", key.0, key.1));
                "pass*"
            } else {
                "pass"
            }
        } else if listed.contains(&key) {
            known.push(format!("{} {}", key.0, key.1));
            "xfail"
        } else {
            failures.push(mismatch(&suite, r));
            "FAIL"
        };
        outcome.insert((r.line.name, r.arch), word);
    }
    // A listed line that no longer exists hides nothing, but misleads.
    let stale: Vec<String> = listed
        .iter()
        .filter(|(a, n)| !table.lines.iter().any(|l| l.name == n) || !Arch::ALL.iter().any(|x| x.debian() == a))
        .map(|(a, n)| format!("{a} {n}"))
        .collect();

    let mut report = String::new();
    let _ = writeln!(
        report,
        "conformance ({}): {} lines × {} ({}) in {:.1} s ({:.1} s of CPU per run in parallel), {} parallel runs; \
         reference run twice, emulator once",
        if table.dynamic { "dynamically linked programs" } else { "static programs" },
        lines.len(),
        arches.len(),
        arches.iter().map(|a| a.debian()).collect::<Vec<_>>().join(", "),
        elapsed.as_secs_f64(),
        suite.budget.used().as_secs_f64(),
        jobs
    );
    if table.dynamic {
        let _ = writeln!(report, "{}", host_libc_note(&suite.cache.root(Arch::Amd64)));
    }
    let _ =
        writeln!(report, "\n{:<22} {:<8}{:<8}{:<8} reference on arm64/s390x: why", "line", "amd64", "arm64", "s390x");
    for line in &lines {
        let cell = |a: Arch| outcome.get(&(line.name, a)).copied().unwrap_or("-");
        let _ = writeln!(
            report,
            "{:<22} {:<8}{:<8}{:<8} {}: {}",
            line.name,
            cell(Arch::Amd64),
            cell(Arch::Arm64),
            cell(Arch::S390x),
            kind(line.reference),
            line.why
        );
    }
    let _ = writeln!(report);
    for arch in &arches {
        let mine: Vec<&Result1> = results.iter().filter(|r| r.arch == *arch).collect();
        let pass = mine.iter().filter(|r| r.passed()).count();
        let _ = writeln!(report, "{}: {} passed, {} failed", arch.debian(), pass, mine.len() - pass);
    }
    let audits: Vec<String> = results
        .iter()
        .filter_map(|r| r.audit.as_ref().map(|a| format!("  {} {}: {a}", r.arch.debian(), r.line.name)))
        .collect();
    if over_budget {
        let _ = writeln!(
            report,
            "\nTHE SUITE RAN OVER ITS BUDGET of {} s of CPU per parallel run (UNWINDLAB_CONFORMANCE_BUDGET): later runs \
             were cut to a second",
            budget.as_secs()
        );
    }
    if audit {
        let _ = writeln!(report, "\naudit of the references ({} doubts):", audits.len());
        for a in &audits {
            let _ = writeln!(report, "{a}");
        }
    }
    if !known.is_empty() {
        let _ = writeln!(
            report,
            "\n{} expected failures (xfail above; {}; UNWINDLAB_CONFORMANCE_STRICT=1 shows their diffs)",
            known.len(),
            table.xfail
        );
    }
    if !fixed.is_empty() {
        let _ = writeln!(report, "\nNOW PASSING, strike from {} ({}): {}", table.xfail, fixed.len(), fixed.join(", "));
    }
    if !stale.is_empty() {
        let _ = writeln!(report, "\n{} names lines the table lacks: {}", table.xfail, stale.join(", "));
    }
    if !failures.is_empty() {
        let _ = writeln!(report, "\n{} MISMATCHES:\n", failures.len());
        for f in &failures {
            let _ = writeln!(report, "{f}");
        }
    }
    let _ = std::fs::write(scratch.join("report.txt"), &report);
    let filtered = line_filter.is_some() || arch_filter.is_some();
    let ok = failures.is_empty() && fixed.is_empty() && (stale.is_empty() || filtered);
    println!("{report}");
    assert!(ok, "{report}\n(also in {})", scratch.join("report.txt").display());
}
