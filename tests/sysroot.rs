//! `unwindlab sysroot` on a dynamically linked program built here for each
//! architecture (its own shared library found through `$ORIGIN`, libm,
//! libc, ld.so, and libgcc_s, which glibc's `backtrace` dlopens): the root
//! runs the program under `qemu-ARCH -L ROOT` exactly as the original runs,
//! every object mapped comes from the root, `ld.so` sees a
//! `PT_GNU_SFRAME` in every object's program headers, and every file in the
//! root holds a V3 section the kernel's rules accept, covering its FDEs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The program: modes print its results, its mapped files, or what
/// `dl_iterate_phdr` (ld.so's view of each object's program headers) says.
const MAIN_C: &str = r#"
#define _GNU_SOURCE
#include <link.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
int demo_sorted_sum(int n);
int demo_depth(void);
static int show(struct dl_phdr_info *info, size_t size, void *data) {
    int sframe = 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == 0x6474e554)
            sframe = 1;
    printf("object %s sframe=%d\n", info->dlpi_name[0] ? info->dlpi_name : "(main)", sframe);
    return 0;
}
int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "run";
    int depth = demo_depth();
    if (!strcmp(mode, "maps")) {
        FILE *f = fopen("/proc/self/maps", "r");
        char line[4096];
        while (f && fgets(line, sizeof line, f)) {
            char *path = strchr(line, '/');
            if (path)
                fputs(path, stdout);
        }
        return 0;
    }
    if (!strcmp(mode, "phdrs")) {
        dl_iterate_phdr(show, 0);
        return 0;
    }
    printf("sum %d sqrt %.4f depth %d\n", demo_sorted_sum(1000), sqrt(argc + 1.0), depth);
    return 3;
}
"#;

/// The program's own library: qsort calls back into it, and the callback
/// unwinds through libc with `backtrace` (libgcc_s, dlopened by glibc).
const DEMO_C: &str = r#"
#include <execinfo.h>
#include <stdlib.h>
static int depth;
static int cmp(const void *a, const void *b) {
    if (!depth) {
        void *frames[64];
        depth = backtrace(frames, 64);
    }
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}
int demo_sorted_sum(int n) {
    int *v = malloc(n * sizeof *v), sum = 0;
    for (int i = 0; i < n; i++)
        v[i] = (i * 7919) % n;
    qsort(v, n, sizeof *v, cmp);
    for (int i = 0; i < n; i++)
        sum += v[i] * (i % 7);
    free(v);
    return sum;
}
int demo_depth(void) {
    demo_sorted_sum(10);
    return depth;
}
"#;

struct Target {
    name: &'static str,
    gcc: &'static str,
    qemu: &'static str,
    /// What the original runs with under qemu-user (Debian's cross sysroot).
    prefix: Option<&'static str>,
}

const X86_64: Target = Target { name: "x86_64", gcc: "gcc", qemu: "qemu-x86_64", prefix: None };
const AARCH64: Target = Target {
    name: "aarch64",
    gcc: "aarch64-linux-gnu-gcc",
    qemu: "qemu-aarch64",
    prefix: Some("/usr/aarch64-linux-gnu"),
};
const S390X: Target =
    Target { name: "s390x", gcc: "s390x-linux-gnu-gcc", qemu: "qemu-s390x", prefix: Some("/usr/s390x-linux-gnu") };

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn unwindlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_unwindlab"))
}

/// Builds the program for `t` in a fresh directory: `prog` and `lib/libdemo.so`.
fn build(t: &Target) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sysroot-{}", t.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("build/lib")).unwrap();
    let build = dir.join("build");
    std::fs::write(build.join("main.c"), MAIN_C).unwrap();
    std::fs::write(build.join("demo.c"), DEMO_C).unwrap();
    ok(Command::new(t.gcc).current_dir(&build).args(["-O2", "-shared", "-fPIC", "-o", "lib/libdemo.so", "demo.c"]));
    ok(Command::new(t.gcc).current_dir(&build).args([
        "-O2",
        "-o",
        "prog",
        "main.c",
        "-Llib",
        "-ldemo",
        "-lm",
        "-Wl,-rpath,$ORIGIN/lib",
    ]));
    dir
}

fn qemu(t: &Target, prefix: Option<&Path>, program: &Path, mode: Option<&str>) -> Output {
    let mut cmd = Command::new(t.qemu);
    if let Some(p) = prefix {
        cmd.arg("-L").arg(p);
    }
    cmd.arg(program).args(mode);
    run(&mut cmd)
}

/// The root's copy of a host path.
fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap())
}

fn elf_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            elf_files(&path, out);
        } else if std::fs::read(&path).unwrap().starts_with(b"\x7fELF") {
            out.push(path);
        }
    }
}

fn sysroot_works(t: &Target) {
    let dir = build(t);
    let prog = dir.join("build/prog");
    let root = dir.join("root");
    let out = ok(unwindlab().arg("sysroot").arg(&prog).arg("-o").arg(&root).args(["--with", "libgcc_s.so.1"]));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    for name in ["prog", "libdemo.so", "libm.so.6", "libc.so.6", "libgcc_s.so.1", "ld"] {
        assert!(
            table.lines().any(|l| l.contains(name) && l.contains('+')),
            "{}: {name} not injected:\n{table}",
            t.name
        );
    }
    assert!(!table.contains("unchanged"), "{}: {table}", t.name);

    // The same run through the root as through the original files.
    let copy = inside(&root, &prog);
    let original = match t.name {
        "x86_64" => run(&mut Command::new(&prog)),
        _ => qemu(t, t.prefix.map(Path::new), &prog, None),
    };
    assert_eq!(original.status.code(), Some(3), "{}: {}", t.name, String::from_utf8_lossy(&original.stderr));
    let through_root = qemu(t, Some(&root), &copy, None);
    assert_eq!(
        (
            String::from_utf8_lossy(&through_root.stdout),
            String::from_utf8_lossy(&through_root.stderr),
            through_root.status.code()
        ),
        (String::from_utf8_lossy(&original.stdout), String::from_utf8_lossy(&original.stderr), original.status.code()),
        "{}",
        t.name
    );
    assert!(String::from_utf8_lossy(&original.stdout).contains("depth "), "{}", t.name);
    if t.name == "x86_64" {
        // Natively too: the kernel loads the injected ld.so, which loads the
        // injected libraries.
        let native = run(Command::new(root.join("lib64/ld-linux-x86-64.so.2"))
            .arg("--inhibit-cache")
            .arg("--library-path")
            .arg(root.join("lib/x86_64-linux-gnu"))
            .arg(&copy));
        assert_eq!(native.stdout, original.stdout, "native: {}", String::from_utf8_lossy(&native.stderr));
        assert_eq!(native.status.code(), Some(3));
    }

    // Every object mapped is the root's copy (libgcc_s included: dlopened).
    let maps = String::from_utf8_lossy(&qemu(t, Some(&root), &copy, Some("maps")).stdout).to_string();
    let mapped: Vec<&str> = maps.lines().map(str::trim).filter(|l| l.contains(".so") || l.ends_with("prog")).collect();
    for name in ["libc.so.6", "libm.so.6", "libdemo.so", "libgcc_s.so.1", "prog"] {
        assert!(mapped.iter().any(|m| m.contains(name)), "{}: {name} not mapped:\n{maps}", t.name);
    }
    for m in &mapped {
        assert!(m.starts_with(root.to_str().unwrap()), "{}: {m} is not the root's:\n{maps}", t.name);
    }

    // ld.so sees the new program headers of every object.
    let phdrs = String::from_utf8_lossy(&qemu(t, Some(&root), &copy, Some("phdrs")).stdout).to_string();
    let objects: Vec<&str> = phdrs.lines().filter(|l| !l.contains("linux-vdso") && !l.contains("linux-gate")).collect();
    assert!(objects.len() >= 6, "{}: {phdrs}", t.name);
    for o in &objects {
        assert!(o.ends_with("sframe=1"), "{}: {o}\n{phdrs}", t.name);
    }

    // Every file: a V3 section the kernel accepts, as many FDEs as covered.
    let json =
        ok(unwindlab().arg("sysroot").arg(&prog).arg("-o").arg(&root).args(["--with", "libgcc_s.so.1", "--json"]));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let mut files = Vec::new();
    elf_files(&root, &mut files);
    assert_eq!(files.len(), report["objects"].as_array().unwrap().len(), "{}: {files:?}", t.name);
    for built in report["objects"].as_array().unwrap() {
        let path = built["path"].as_str().unwrap();
        let injected = &built["outcome"]["injected"];
        let check = ok(unwindlab().args(["sframe", "check", "--kernel", path]));
        assert!(String::from_utf8_lossy(&check.stdout).contains("valid"), "{path}");
        let dump = ok(unwindlab().args(["sframe", "dump", "--json", path]));
        let dump: serde_json::Value = serde_json::from_slice(&dump.stdout).unwrap();
        assert_eq!(dump["header"]["version"], "V3", "{path}");
        assert_eq!(dump["header"]["num_fdes"], injected["fdes"], "{path}");
        assert_eq!(dump["header"]["num_fres"], injected["fres"], "{path}");
        let covered = injected["covered"].as_u64().unwrap();
        // Every FDE is covered but those whose CFI is inconsistent (glibc's
        // AArch64 lazy-binding trampoline saves the return address above its CFA).
        let skipped = injected["skipped"].as_array().unwrap();
        assert!(skipped.iter().all(|s| s["reason"].as_str().unwrap().contains("above the CFA")), "{path}: {skipped:?}");
        assert_eq!(
            covered + skipped.len() as u64,
            injected["cfi_fdes"].as_u64().unwrap(),
            "{path}: not every FDE covered or skipped"
        );
        assert!(dump["header"]["num_fdes"].as_u64().unwrap() >= covered, "{path}");
    }
}

#[test]
fn sysroot_x86_64() {
    sysroot_works(&X86_64);
}

#[test]
fn sysroot_aarch64() {
    sysroot_works(&AARCH64);
}

#[test]
fn sysroot_s390x() {
    sysroot_works(&S390X);
}

/// Errors name the file and the problem; nothing panics.
#[test]
fn sysroot_errors() {
    let dir = build(&Target { name: "errors", ..X86_64 });
    let build = dir.join("build");
    // Without its RUNPATH, libdemo.so is nowhere ld.so looks.
    ok(Command::new("gcc").current_dir(&build).args(["-O2", "-o", "norpath", "main.c", "-Llib", "-ldemo", "-lm"]));
    let truncated = build.join("truncated");
    let bytes = std::fs::read(build.join("prog")).unwrap();
    std::fs::write(&truncated, &bytes[..200]).unwrap();
    let static_prog = build.join("static");
    ok(Command::new("gcc").current_dir(&build).args(["-O2", "-static", "-o", "static", "main.c", "demo.c", "-lm"]));
    let cases: [(PathBuf, &[&str]); 4] = [
        (build.join("norpath"), &["libdemo.so", "needed by", "norpath", "not found", "/lib/x86_64-linux-gnu"]),
        (truncated.clone(), &["truncated", "malformed ELF"]),
        (build.join("main.c"), &["main.c", "not an ELF file"]),
        (static_prog, &["static", "no PT_INTERP"]),
    ];
    for (file, needles) in cases {
        let out = run(unwindlab().arg("sysroot").arg(&file).arg("-o").arg(dir.join("root")));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        for n in needles {
            assert!(stderr.contains(n), "{file:?}: {n:?} not in {stderr}");
        }
    }
    // The output directory must not be where the objects come from.
    let prefix = dir.join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    let out =
        run(unwindlab().arg("sysroot").arg(build.join("prog")).arg("--prefix").arg(&prefix).arg("-o").arg(&prefix));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is where the objects come from"));
    assert_eq!(std::fs::read_dir(&prefix).unwrap().count(), 0, "nothing written");
}

/// Corrupt programs (bytes flipped in the headers, the dynamic section and
/// the CFI, or the file cut short) are refused or handled, never a panic:
/// the resolver, then generation and injection for the program alone.
#[test]
fn sysroot_malformed_programs_do_not_panic() {
    use lab::sysroot::{self, Resolution};
    let dir = build(&Target { name: "malformed", ..X86_64 });
    let original = std::fs::read(dir.join("build/prog")).unwrap();
    let file = dir.join("build/mutant");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut resolved, mut built) = (0, 0);
    for round in 0..300 {
        let mut bytes = original.clone();
        if round % 5 == 0 {
            bytes.truncate(next() as usize % original.len());
        } else {
            for _ in 0..1 + next() % 4 {
                let at = next() as usize % bytes.len().min(if round % 2 == 0 { 0x1000 } else { usize::MAX });
                bytes[at] ^= 1 << (next() % 8);
            }
        }
        std::fs::write(&file, &bytes).unwrap();
        let resolution = std::panic::catch_unwind(|| sysroot::resolve(&file, &[], Some(Path::new(""))))
            .unwrap_or_else(|_| panic!("round {round}: resolve panicked"));
        let Ok(resolution) = resolution else { continue };
        resolved += 1;
        let alone = Resolution { objects: resolution.objects[..1].to_vec(), ..resolution };
        let out = dir.join("mutant-root");
        std::panic::catch_unwind(|| sysroot::build(&alone, &out).map(|_| ()))
            .unwrap_or_else(|_| panic!("round {round}: build panicked"))
            .unwrap();
        built += 1;
    }
    assert!(resolved > 10 && built == resolved, "{resolved} resolved, {built} built");
}
