//! The committed guest binaries: the recipe reproduces them byte for byte
//! (when the cross toolchains are installed), and every workload of every
//! variant on every architecture prints under `unwindlab exec` exactly what
//! it prints under Debian's qemu-user, with the same exit status (the
//! dynamic guest on Debian's libraries: the cross sysroots). The threaded
//! guest's workloads print nothing that depends on the architecture or the
//! interleaving, so the one that execs itself (which qemu-user cannot do for
//! a foreign architecture) is compared with the x86-64 build run natively;
//! on x86-64 the threaded guests' reference is the native run throughout.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const MODES: [&str; 6] = ["recurse", "compute", "sleep", "exit", "sigexit", "signal"];
/// The dynamic guest's modes: all of the above, lazy binding and the plugin.
const DYNAMIC_MODES: [&str; 8] = ["recurse", "compute", "sleep", "exit", "sigexit", "signal", "lazy", "plugin"];
/// The threaded guest's modes (threads-v3, threads-dyn) under qemu-user,
/// arguments split at spaces.
const THREAD_MODES: [&str; 6] = ["workers", "workers 1", "workers 7", "thread-exit", "exit-pending", "two-cpus"];
/// Its modes that exec (a non-leader thread execs the program itself):
/// compared with the x86-64 build of the same variant run natively.
const THREAD_EXEC_MODES: [&str; 1] = ["exec-from-thread"];

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

fn run(program: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    use std::io::Write as _;
    // A program that never reads may be gone already (a native run is quick).
    let _ = child.stdin.take().unwrap().write_all(b"input line\n");
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
    assert_eq!(
        all.len(),
        41,
        "3 arches × (o2, fp, v3, fpv3) + gsframe on x86-64 and AArch64 \
         + (procs-v3, lab-dyn, the plugin, threads-v3, threads-dyn, sframereg-v3, comm-o2, stale-dyn, plugin2) × 3"
    );
    for (arch, path) in all {
        let rebuilt = out.join(&arch).join(path.file_name().unwrap());
        assert!(
            std::fs::read(&rebuilt).unwrap() == std::fs::read(&path).unwrap(),
            "{} differs from what guests/Makefile builds",
            path.display()
        );
    }
    // The lab roots (next to OUT): every file, and nothing more.
    let roots = out.parent().unwrap().join("root");
    let files = |dir: &Path| {
        let mut found = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    todo.push(path);
                } else {
                    found.push(path.strip_prefix(dir).unwrap().to_path_buf());
                }
            }
        }
        found.sort();
        found
    };
    let committed_roots = files(&guests().join("root"));
    assert_eq!(committed_roots, files(&roots), "guests/root holds other files than the recipe builds");
    assert_eq!(
        committed_roots.len(),
        3 * 9,
        "per architecture: ld.so.cache, lab-dyn, threads-dyn, stale-dyn, ld.so, libc.so.6, libgcc_s.so.1, \
         the two plugins"
    );
    for arch in ["x86_64", "aarch64", "s390x"] {
        for program in ["lab-dyn", "threads-dyn", "stale-dyn"] {
            let file = PathBuf::from(arch).join("guests").join(program);
            assert!(committed_roots.contains(&file), "guests/root/{} is missing", file.display());
        }
    }
    for file in committed_roots {
        assert!(
            std::fs::read(roots.join(&file)).unwrap() == std::fs::read(guests().join("root").join(&file)).unwrap(),
            "guests/root/{} differs from what guests/Makefile builds",
            file.display()
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
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // The multi-process guest: its fork mode (qemu-user cannot exec a
        // foreign program, so exec and pipeline are tested elsewhere). The
        // dynamic one: every mode, and those only it has, on the Debian
        // libraries (the cross sysroot, as `unwindlab exec` defaults to)
        // with the plugin found through LD_LIBRARY_PATH.
        // The threaded guests: their modes under qemu-user (qemu-x86_64
        // too), and the one that execs (from a non-leader thread) against
        // the x86-64 build of the same variant run natively (qemu-user
        // cannot exec a foreign program; the output is the same everywhere).
        let modes: &[&str] = match name.as_str() {
            "libunwindlab-plugin.so" | "libunwindlab-plugin2.so" => continue,
            "procs-v3" => &["fork"],
            // Without the kernel series: EINVAL and ENOSYS everywhere.
            "sframereg-v3" => &["default"],
            // Thread names (qemu-user passes them to the host's threads and
            // processes, which inherit them as Linux's do).
            "comm-o2" => &["names"],
            // The stale-entry guest: the two plugins, one after the other.
            "stale-dyn" => &["6"],
            "lab-dyn" => &DYNAMIC_MODES,
            "threads-v3" | "threads-dyn" => &THREAD_MODES,
            _ => &MODES,
        };
        let dir = path.parent().unwrap();
        let env = [("LD_LIBRARY_PATH", dir)];
        let sysroot = PathBuf::from(format!("/usr/{arch}-linux-gnu"));
        for &mode in modes {
            let mode: Vec<&str> = mode.split(' ').collect();
            let ours = run(exe, &[&["exec", p][..], &mode].concat(), &env);
            let theirs = if arch == "x86_64" {
                run(&qemu, &[&[p][..], &mode].concat(), &env)
            } else {
                run(&qemu, &[&["-L", sysroot.to_str().unwrap(), p][..], &mode].concat(), &env)
            };
            assert_eq!(ours.status.code(), theirs.status.code(), "{p} {mode:?}");
            assert_eq!(String::from_utf8_lossy(&ours.stdout), String::from_utf8_lossy(&theirs.stdout), "{p} {mode:?}");
            compared += 1;
        }
        // The exec modes against the x86-64 build run natively (qemu-user
        // cannot exec a foreign program; the output is the same everywhere).
        let exec_modes: &[&str] = match name.as_str() {
            "threads-v3" | "threads-dyn" => &THREAD_EXEC_MODES,
            "comm-o2" => &["exec"],
            _ => &[],
        };
        if !exec_modes.is_empty() {
            let native = guests().join("bin/x86_64").join(&name);
            for &mode in exec_modes {
                let ours = run(exe, &["exec", p, mode], &env);
                let theirs = run(native.to_str().unwrap(), &[mode], &[]);
                assert_eq!(ours.status.code(), theirs.status.code(), "{p} {mode} (native x86-64)");
                assert_eq!(
                    String::from_utf8_lossy(&ours.stdout),
                    String::from_utf8_lossy(&theirs.stdout),
                    "{p} {mode} (native x86-64)"
                );
                let exec_done = if name == "comm-o2" { "after exec: exe" } else { "after-exec" };
                assert!(String::from_utf8_lossy(&ours.stdout).contains(exec_done), "{p} {mode}: no exec");
                compared += 1;
            }
        }
    }
    assert_eq!(
        compared,
        84 + 3 + 3 + 3 + 3 * DYNAMIC_MODES.len() + 3 * 2 * (THREAD_MODES.len() + THREAD_EXEC_MODES.len()) + 3 * 2
    );
}

/// The threaded guest in its lab root (`guests/root/<arch>`, as the
/// scenarios run it), under `unwindlab exec --root`: every mode prints what
/// the x86-64 build prints natively, the exec from a thread included
/// (`/proc/self/exe` names the program inside the root, as in a chroot).
#[test]
fn the_threaded_guest_runs_in_its_lab_root() {
    let exe = env!("CARGO_BIN_EXE_unwindlab");
    let native = guests().join("bin/x86_64/threads-dyn");
    let mut compared = 0;
    for arch in ["x86_64", "aarch64", "s390x"] {
        let root = guests().join("root").join(arch);
        let program = root.join("guests/threads-dyn");
        let (r, p) = (root.to_str().unwrap(), program.to_str().unwrap());
        for &mode in THREAD_MODES.iter().chain(&THREAD_EXEC_MODES) {
            let mode: Vec<&str> = mode.split(' ').collect();
            let ours = run(exe, &[&["exec", "--root", r, "--prefix", r, p][..], &mode].concat(), &[]);
            let theirs = run(native.to_str().unwrap(), &mode, &[]);
            assert_eq!(
                ours.status.code(),
                theirs.status.code(),
                "{p} {mode:?}: {}",
                String::from_utf8_lossy(&ours.stderr)
            );
            assert_eq!(String::from_utf8_lossy(&ours.stdout), String::from_utf8_lossy(&theirs.stdout), "{p} {mode:?}");
            compared += 1;
        }
    }
    assert_eq!(compared, 3 * (THREAD_MODES.len() + THREAD_EXEC_MODES.len()));
}
