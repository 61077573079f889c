//! The guest's file system against qemu-user's (the real one), on every
//! architecture: `fsops.c` reads a host file, lists a host directory,
//! creates, renames and removes files (host ones too), follows symlinks and
//! hits the error paths. Both run in the same scratch directory, prepared
//! the same way; qemu really changes it, the emulator must leave it as it
//! was (its overlay lives in memory).

mod common;

use emu::{Arch, Emulator, Event};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every file under `dir` with its contents (`None` for directories).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read the scratch directory") {
            let path = e.expect("an entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("stat an entry");
            if meta.is_dir() {
                todo.push(path.clone());
                out.insert(path, None);
            } else {
                out.insert(path.clone(), Some(std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    out
}

/// A fresh scratch directory for `arch`, with the files the guest expects.
fn prepare(arch: Arch) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fs-scratch-{arch}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("hostdir")).expect("create the scratch directory");
    std::fs::write(dir.join("existing.txt"), "from the host\n").expect("write existing.txt");
    std::fs::write(dir.join("hostdir/f"), "f\n").expect("write hostdir/f");
    dir
}

#[test]
fn file_system_matches_qemu_and_leaves_the_host_alone() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fs_compare.rs");
    let listed = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guests");
    for arch in Arch::ALL {
        let Some(exe) = common::build("fsops", arch, &[]) else { continue };
        let (_, qemu) = common::toolchain(arch);
        if !common::require(qemu) {
            continue;
        }
        let exe = std::fs::canonicalize(&exe).expect("the built guest");
        let args = [source.as_os_str(), listed.as_os_str(), exe.as_os_str()];

        let dir = prepare(arch);
        let output = Command::new(qemu).arg(&exe).args(args).current_dir(&dir).output().expect("run qemu");
        let expected = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(expected.contains("host file:"), "{arch}: qemu printed {expected}");

        let dir = prepare(arch);
        let before = snapshot(&dir);
        let mut config = common::config(&exe, &[], b"");
        config.args.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        config.root = Some(PathBuf::from("/"));
        config.cwd = Some(dir.as_os_str().as_bytes().to_vec());
        let mut emu = Emulator::load(&exe, config).expect("load fsops");
        let status = emu.run_to_exit().expect("run fsops").shell_status();
        let unknown: Vec<_> = emu.events().iter().filter(|e| matches!(e, Event::UnknownSyscall { .. })).collect();
        assert_eq!(String::from_utf8_lossy(emu.stdout()), expected, "{arch}: stdout differs");
        assert_eq!(Some(status), output.status.code(), "{arch}: exit status differs");
        assert!(unknown.is_empty(), "{arch}: unknown syscalls {unknown:?}");
        assert_eq!(snapshot(&dir), before, "{arch}: the emulator changed the host's files");
        // The host file it read is recorded, with its digest.
        let source_bytes = std::fs::read(&source).expect("read the source");
        let inputs = emu.host_inputs();
        let key = source.as_os_str().as_bytes();
        assert_eq!(
            inputs.iter().find(|(p, _)| p.as_slice() == key).map(|(_, d)| *d),
            Some(emu::fs::fnv1a(&source_bytes)),
            "{arch}: {inputs:?}"
        );
    }
}
