//! `/proc/self/{maps,fd}` and `/dev/urandom` are the emulator's own: maps
//! lists its memory areas, fd/ its descriptors, urandom is seeded.

mod common;

use emu::{Arch, Emulator};

fn run(exe: &std::path::Path, seed: u64) -> (String, Emulator) {
    let mut config = common::config(exe, &[], b"");
    config.seed = seed;
    let mut emu = Emulator::load(exe, config).expect("load procself");
    let status = emu.run_to_exit().expect("run procself").shell_status();
    assert_eq!(status, 0, "{:?}", emu.events());
    (String::from_utf8_lossy(emu.stdout()).into_owned(), emu)
}

#[test]
fn proc_self_and_urandom() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("procself", arch, &[]) else { continue };
        let (out, emu) = run(&exe, 7);
        let maps: Vec<&str> = out.lines().skip(1).take_while(|l| !l.starts_with("fds:")).collect();
        // Every line is one of the areas (the guest may map more after reading).
        let areas: Vec<(u64, u64)> = emu.pages().areas().map(|a| (a.start, a.end)).collect();
        for line in &maps {
            let range = line.split(' ').next().unwrap();
            let (start, end) = range.split_once('-').unwrap();
            let range = (u64::from_str_radix(start, 16).unwrap(), u64::from_str_radix(end, 16).unwrap());
            assert!(areas.contains(&range), "{arch}: {line} is no area of {areas:x?}");
        }
        assert!(maps.iter().any(|l| l.ends_with("[stack]")), "{arch}: {out}");
        assert!(maps.iter().any(|l| l.contains(&*exe.to_string_lossy()) && l.contains("r-xp")), "{arch}: {out}");
        assert!(out.contains("fds: . .. 0 1 2 3 4\n"), "{arch}: {out}");
        assert!(out.contains("fd 3 -> /proc/1000/maps\n"), "{arch}: {out}");
        // Seeded: the same seed gives the same bytes, another seed others.
        let urandom = |out: &str| out.lines().last().unwrap().to_string();
        assert_eq!(urandom(&run(&exe, 7).0), urandom(&out), "{arch}");
        assert_ne!(urandom(&run(&exe, 8).0), urandom(&out), "{arch}");
    }
}

/// A fresh empty directory for one run of `devfd`.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

#[test]
fn dev_fd_opens_the_open_file_as_linux_does() {
    use std::os::unix::ffi::OsStrExt as _;
    for arch in Arch::ALL {
        let Some(exe) = common::build("devfd", arch, &[]) else { continue };
        let (_, qemu) = common::toolchain(arch);
        if !common::require(qemu) {
            continue;
        }
        // Standard input from a file under qemu (the kernel opens it again
        // at offset 0), a stream in the emulator: nothing is read before
        // /dev/stdin is, so both read it whole.
        let stdin = b"typed\n";
        let dir = scratch(&format!("devfd-{arch}-qemu"));
        let input = dir.with_extension("stdin");
        std::fs::write(&input, stdin).expect("write the stdin file");
        let output = std::process::Command::new(qemu)
            .arg(&exe)
            .arg(&dir)
            .stdin(std::fs::File::open(&input).expect("open the stdin file"))
            .output()
            .expect("run qemu");
        let expected = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(expected.contains("/dev/stdin -> /proc/self/fd/0"), "{arch}: qemu printed {expected}");

        let dir = scratch(&format!("devfd-{arch}-emu"));
        let mut config = common::config(&exe, &[], stdin);
        config.args.push(dir.as_os_str().as_bytes().to_vec());
        config.root = Some(std::path::PathBuf::from("/"));
        let mut emu = Emulator::load(&exe, config).expect("load devfd");
        let status = emu.run_to_exit().expect("run devfd").shell_status();
        assert_eq!(String::from_utf8_lossy(emu.stdout()), expected, "{arch}: stdout differs from qemu's");
        assert_eq!(Some(status), output.status.code(), "{arch}: exit status");
        assert_eq!(std::fs::read_dir(&dir).map(Iterator::count).ok(), Some(0), "{arch}: the host was written");
    }
}
