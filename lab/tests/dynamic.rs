//! A dynamically linked guest, built here with `gcc -O2` and run with the
//! host's own `ld.so` and `libc.so.6` (root `/`): every output names frames
//! by object — the program's own as before (`main`), the libraries' as
//! `libc.so.6!…` — and no frame of a known object is a bare address, in
//! its forked child (which inherits the objects, no event saying so) too.

use std::path::{Path, PathBuf};
use std::process::Command;

use lab::scenario::{Guest, KernelConfig, Machine, Profile, Scenario, Tracer};
use lab::Report;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static int cmp(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) long work(int n) {
    char buf[64];
    long total = 0;
    for (int i = 0; i < n; i++)
        total += snprintf(buf, sizeof buf, "%d %x %s", i, i * 7, "dyn");
    static int a[2000];
    for (int i = 0; i < 2000; i++)
        a[i] = (i * 7919) % 2000;
    qsort(a, 2000, sizeof a[0], cmp);
    return total + a[1999];
}

__attribute__((noinline)) long in_child(int n) {
    return work(n) + 1;
}

int main(int argc, char **argv) {
    pid_t child = fork();
    if (child == 0) {
        printf("child %ld\n", in_child(argc * 200));
        fflush(stdout);
        _exit(0);
    }
    waitpid(child, NULL, 0);
    printf("%ld\n", work(argc * 300));
    return 0;
}
"#;

/// An architecture the test runs a dynamic guest on.
struct Target {
    arch: kmodel::arch::Arch,
    /// Its C compiler.
    gcc: &'static str,
    /// Where Debian keeps its `ld.so` and `libc.so.6` (`None`: the host's,
    /// with root `/`).
    sysroot: Option<&'static str>,
    /// The interpreter's file name.
    interp: &'static str,
}

const X86_64: Target =
    Target { arch: kmodel::arch::Arch::X86_64, gcc: "gcc", sysroot: None, interp: "ld-linux-x86-64.so.2" };
const AARCH64: Target = Target {
    arch: kmodel::arch::Arch::Aarch64,
    gcc: "aarch64-linux-gnu-gcc",
    sysroot: Some("/usr/aarch64-linux-gnu/lib"),
    interp: "ld-linux-aarch64.so.1",
};
const S390X: Target = Target {
    arch: kmodel::arch::Arch::S390x,
    gcc: "s390x-linux-gnu-gcc",
    sysroot: Some("/usr/s390x-linux-gnu/lib"),
    interp: "ld64.so.1",
};

/// The program compiled for `t` (with frame pointers, so that the FP walk
/// gets from its own code into libc's start-up), and the root it runs
/// with: `/` for the host's libraries, else a directory whose `/lib` holds
/// copies of the cross sysroot's `ld.so` and `libc.so.6`. `None` (the test
/// passes, saying so) without the compiler or the libraries outside CI.
fn program(t: &Target) -> Option<(PathBuf, PathBuf)> {
    if t.sysroot.is_none() && !cfg!(target_arch = "x86_64") {
        eprintln!("skipping: the host's libraries are not x86-64 ones");
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lab-dynamic").join(t.arch.name());
    std::fs::create_dir_all(&dir).unwrap();
    let skip = |why: String| {
        assert!(std::env::var_os("CI").is_none(), "CI must have it: {why}");
        eprintln!("skipping: {why}");
    };
    let root = match t.sysroot {
        None => PathBuf::from("/"),
        Some(sysroot) => {
            let root = dir.join("root");
            std::fs::create_dir_all(root.join("lib")).unwrap();
            for file in [t.interp, "libc.so.6"] {
                if let Err(e) = std::fs::copy(Path::new(sysroot).join(file), root.join("lib").join(file)) {
                    skip(format!("{sysroot}/{file}: {e}"));
                    return None;
                }
            }
            root
        }
    };
    let source = dir.join("dyn.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let out = dir.join("dyn");
    match Command::new(t.gcc).args(["-O2", "-fno-omit-frame-pointer", "-o"]).arg(&out).arg(&source).status() {
        Ok(status) => assert!(status.success(), "{} failed", t.gcc),
        Err(e) => {
            skip(format!("no {} ({e})", t.gcc));
            return None;
        }
    }
    Some((out, root))
}

fn scenario(t: &Target, path: PathBuf, root: PathBuf) -> Scenario {
    Scenario {
        name: format!("dynamic-symbols-{}", t.arch.name()),
        description: "a dynamically linked program on Debian's libraries".into(),
        machine: Machine { arch: t.arch, cpus: 1 },
        seed: 0,
        guests: vec![Guest {
            name: "dyn".into(),
            path,
            args: Vec::new(),
            stdin: String::new(),
            cpu: 0,
            sframe_patch: Vec::new(),
            files: Default::default(),
            cwd: None,
            root: Some(root),
        }],
        tracers: vec![Tracer::Perf {
            name: "perf".into(),
            period: 3001,
            user_stack: kmodel::tracer::UserStackMode::Deferred,
            task: None,
            inherit: true,
            event: lab::scenario::SampleOn::Instructions,
        }],
        // Another architecture than x86-64 needs the proposals' unwinders.
        kernel: KernelConfig { profile: Profile::SframeV13, ..KernelConfig::default() },
        events: Vec::new(),
        stop_after: None,
        expect: None,
    }
}

/// Every ground-truth frame of every sample, named as its views name it.
fn named_truth(report: &Report) -> Vec<String> {
    let mut truth = Vec::new();
    for s in &report.samples {
        let names = report.names(s);
        for &pc in &s.truth {
            let name = names.name(pc);
            assert!(!name.starts_with("0x"), "sample {}: {pc:#x} in no object ({name})", s.sample);
            truth.push(name);
        }
    }
    truth
}

/// Runs the guest on `t` and checks the names every view gives its frames.
fn names_frames_by_object(t: &Target) {
    let Some((path, root)) = program(t) else { return };
    let report = lab::run(&scenario(t, path, root)).unwrap();
    assert_eq!(report.guests[0].exit, Some(0), "{:?}", report.guests[0]);
    assert!(report.samples.len() > 20, "{} samples", report.samples.len());
    // Ground truth, named: the start-up in ld.so, the program's own
    // functions unprefixed (in the forked child too), libc's under its file
    // name; nothing bare.
    let truth = named_truth(&report);
    let has = |what: &dyn Fn(&str) -> bool| truth.iter().any(|n| what(n));
    assert!(has(&|n| n.starts_with("main+0x")), "no main frame");
    assert!(has(&|n| n.starts_with("work+0x")), "no work frame");
    assert!(has(&|n| n.starts_with("in_child+0x")), "no frame of the child");
    assert!(has(&|n| n.starts_with("libc.so.6!") && n.contains("+0x")), "no libc frame");
    assert!(has(&|n| n.starts_with(&format!("{}!", t.interp))), "no ld.so frame");
    // Debian's libc has no .symtab: its local functions (the caller of
    // main among them) are named by their FDEs, its exports by .dynsym.
    assert!(has(&|n| n.starts_with("libc.so.6!fde@0x")), "no libc FDE name");
    assert!(has(&|n| n.starts_with("libc.so.6!qsort") || n.contains("printf")), "no libc export");

    // The views: folded stacks (functions), Firefox Profiler (name+offset),
    // the HTML report.
    let folded = lab::export::folded(&report);
    assert!(folded.contains(";libc.so.6!"), "{folded}");
    // With frame records in libc's start-up (the FP walk on s390x needs a
    // back chain nothing here has), stacks reach from libc through main.
    if t.arch != kmodel::arch::Arch::S390x {
        assert!(folded.lines().any(|l| l.contains(";libc.so.6!fde@0x") && l.contains(";main;work;")), "{folded}");
    }
    let firefox = serde_json::to_string(&lab::export::firefox(&report)).unwrap();
    assert!(firefox.contains("libc.so.6!") && firefox.contains("+0x"), "firefox profile");
    let html = lab::html::report(&report);
    assert!(html.contains("libc.so.6!"), "html report");
}

#[test]
fn a_dynamic_guest_names_its_frames_by_object_x86_64() {
    names_frames_by_object(&X86_64);
}

#[test]
fn a_dynamic_guest_names_its_frames_by_object_aarch64() {
    names_frames_by_object(&AARCH64);
}

#[test]
fn a_dynamic_guest_names_its_frames_by_object_s390x() {
    names_frames_by_object(&S390X);
}
