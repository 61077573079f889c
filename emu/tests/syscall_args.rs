//! System-call arguments are narrowed to their C types as the kernel does,
//! on all three architectures: an `int` or `unsigned int` argument is the low
//! 32 bits of its register, whatever the upper half holds. glibc passes
//! `AT_FDCWD` in an `int`; `tests/guests/int_args.c` also puts junk above
//! dirfds, descriptors, signal numbers, pids, `how`, `whence`, commands,
//! clock IDs and flags. The program prints the same under the emulator as
//! under the real kernel (x86-64 on an x86-64 host) or qemu-user, which
//! narrows the same way; and the trace spells the narrowed values by name.

mod common;

use emu::{Arch, Config, Emulator, Event, Exit};
use std::path::Path;

/// What `int_args` prints; see the program for what each line checks.
const EXPECTED: &str = "\
open missing: -1 ENOENT
openat junk AT_FDCWD missing: -1 ENOENT
openat junk AT_FDCWD: ok
openat junk stdin dirfd: -1 ENOTDIR
openat junk closed dirfd: -1 EBADF
read junk fd: 9
read: [package]
lseek junk whence: ok
fcntl junk cmd: 0
fcntl dupfd junk: 1
close junk fd: 0
close again: -1 EBADF
newfstatat junk: 0
regular: 1
close junk fd: 0
raw write
write junk fd: 10
rt_sigaction junk sig: 0
handler kept: 1
kill junk: 0
usr1: 1
tgkill junk: 0
usr2: 1
kill signal 0 with junk: 0
kill signal 65: -1 EINVAL
rt_sigprocmask junk how: 0
usr1 blocked: 1
rt_sigprocmask junk unblock: 0
clock_gettime junk clock: 0
prlimit64 junk: 0
futex junk op: 0
";

/// The program opens "Cargo.toml" relative to its working directory: the
/// references run in the package directory (cargo's working directory for
/// tests), the emulator is given the same file under that name.
fn config(exe: &Path) -> Config {
    let manifest = std::fs::read("Cargo.toml").expect("tests run in the package directory, beside Cargo.toml");
    let mut config = common::config(exe, &[], b"");
    config.files.insert(b"Cargo.toml".to_vec(), manifest);
    config.record_syscalls = true;
    config
}

fn run(exe: &Path) -> Emulator {
    let mut emu = Emulator::load(exe, config(exe)).expect("load int_args");
    let exit = emu.run_to_exit().expect("run int_args");
    assert_eq!(exit, Exit::Code(5), "{}: {:?}", exe.display(), emu.events());
    emu
}

#[test]
fn int_arguments_use_the_low_32_bits_on_every_architecture() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("int_args", arch, &[]) else { continue };
        let emu = run(&exe);
        assert_eq!(String::from_utf8_lossy(emu.stdout()), EXPECTED, "{arch}: the emulator");
        // The expectation itself, checked against Linux (or qemu-user).
        let reference = if arch == Arch::X86_64 && cfg!(target_arch = "x86_64") {
            Some(common::run_native(&exe, &[], b""))
        } else {
            common::run_qemu(arch, &exe, &[], b"")
        };
        if let Some(reference) = reference {
            assert_eq!(String::from_utf8_lossy(&reference.stdout), EXPECTED, "{arch}: the reference");
            assert_eq!(reference.status, 5, "{arch}: the reference's exit status");
        }
    }
}

/// Trace lines with addresses (which differ per architecture) as `0x_`.
fn trace(emu: &Emulator) -> Vec<String> {
    let mut lines = Vec::new();
    for event in emu.events() {
        let Event::Syscall(record) = event else { continue };
        let line = record.to_string();
        let mut out = String::new();
        let mut rest = line.as_str();
        while let Some(at) = rest.find("0x") {
            out.push_str(&rest[..at + 2]);
            rest = rest[at + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
            out.push('_');
        }
        out.push_str(rest);
        lines.push(out);
    }
    lines
}

#[test]
fn traces_show_narrowed_arguments_by_name() {
    // In the order the program makes them; junk is gone from every int.
    let expected = [
        r#"openat(AT_FDCWD, "missing-relative-path", O_RDONLY) = -ENOENT"#,
        r#"openat(AT_FDCWD, "missing-relative-path", O_RDONLY) = -ENOENT"#,
        r#"openat(AT_FDCWD, "Cargo.toml", O_RDONLY) = 3"#,
        r#"openat(0, "Cargo.toml", O_RDONLY) = -ENOTDIR"#,
        r#"openat(1000000, "Cargo.toml", O_RDONLY) = -EBADF"#,
        "read(3, 0x_, 9) = 9",
        "close(500) = 0",
        "close(500) = -EBADF",
        r#"newfstatat(AT_FDCWD, "Cargo.toml", 0x_, 0) = 0"#,
        "close(3) = 0",
        "write(1, 0x_, 10) = 10",
        "rt_sigaction(SIGUSR1, NULL, 0x_, 8) = 0",
        "kill(1000, SIGUSR1) = 0",
        "tgkill(1000, 1000, SIGUSR2) = 0",
        "kill(1000, 0) = 0",
        "kill(1000, 65) = -EINVAL",
        "rt_sigprocmask(SIG_BLOCK, 0x_, NULL, 8) = 0",
        "rt_sigprocmask(SIG_UNBLOCK, 0x_, NULL, 8) = 0",
        "clock_gettime(CLOCK_MONOTONIC, 0x_) = 0",
        "prlimit64(0, RLIMIT_NOFILE, NULL, 0x_) = 0",
        "futex(0x_, FUTEX_WAKE, 1, NULL, NULL, 0) = 0",
        "exit_group(5) = ?",
    ];
    for arch in Arch::ALL {
        let Some(exe) = common::build("int_args", arch, &[]) else { continue };
        let emu = run(&exe);
        let lines = trace(&emu);
        // Each expected line, in order (other calls in between).
        let mut at = lines.iter();
        for want in expected {
            assert!(at.any(|line| line == want), "{arch}: no `{want}` in order in the trace:\n{}", lines.join("\n"));
        }
        // fcntl's third argument is an unsigned long, which keeps its junk
        // (F_DUPFD narrows it to an int itself); F_GETFD leaves it to chance.
        let size = std::fs::metadata("Cargo.toml").expect("Cargo.toml").len();
        assert!(lines.contains(&format!("lseek(3, 0, SEEK_END) = {size}")), "{arch}: lseek");
        assert!(lines.iter().any(|l| l.starts_with("fcntl(3, F_GETFD, ") && l.ends_with(") = 0")), "{arch}: F_GETFD");
        let dup = format!("fcntl(3, F_DUPFD, {}) = 500", 0xdead_beef_0000_0000u64 | 500);
        assert!(lines.contains(&dup), "{arch}: no `{dup}`");
        // What the handler saw: AT_FDCWD is -100, however it was passed.
        let junk_openat = emu
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::Syscall(r) if r.name == "openat" => Some(r),
                _ => None,
            })
            .nth(1)
            .expect("a second openat");
        assert_eq!(junk_openat.args[0], -100i64 as u64, "{arch}");
        assert_eq!(junk_openat.args[2], 0, "{arch}: O_RDONLY with junk above");
    }
}
