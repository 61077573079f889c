//! Static C programs print the same and exit with the same status under the
//! emulator as under qemu-user, on every architecture.

mod common;

use emu::{Arch, Event};

/// Which run the emulator is judged against.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reference {
    /// qemu-user for every architecture.
    Qemu,
    /// The host CPU for x86-64 (see `common::run_native`), qemu-user for the others.
    NativeX86,
}

fn compare(guest: &str, args: &[&str], stdin: &[u8]) {
    compare_with(guest, args, stdin, Reference::Qemu);
}

fn compare_with(guest: &str, args: &[&str], stdin: &[u8], reference: Reference) {
    for arch in Arch::ALL {
        let Some(exe) = common::build(guest, arch, &[]) else { continue };
        let expected = if reference == Reference::NativeX86 && arch == Arch::X86_64 && cfg!(target_arch = "x86_64") {
            common::run_native(&exe, args, stdin)
        } else {
            let Some(expected) = common::run_qemu(arch, &exe, args, stdin) else { continue };
            expected
        };
        assert!(!expected.stdout.is_empty(), "{guest} on {arch}: the reference printed nothing");
        let (got, emu) = common::run_emu(&exe, args, stdin);
        let unknown: Vec<_> = emu.events().iter().filter(|e| matches!(e, Event::UnknownSyscall { .. })).collect();
        assert_eq!(
            String::from_utf8_lossy(&got.stdout),
            String::from_utf8_lossy(&expected.stdout),
            "{guest} on {arch}: stdout differs (events: {:?})",
            emu.events()
        );
        assert_eq!(got.status, expected.status, "{guest} on {arch}: exit status differs");
        assert!(unknown.is_empty(), "{guest} on {arch}: unknown syscalls {unknown:?}");
    }
}

#[test]
fn hello() {
    compare("hello", &["one", "two words", ""], b"");
}

#[test]
fn malloc() {
    compare("malloc", &[], b"");
}

#[test]
fn recursion() {
    compare("recursion", &[], b"");
}

#[test]
fn sleep() {
    compare("sleep", &[], b"");
}

#[test]
fn stdin() {
    let mut input = b"the first line\n".to_vec();
    for i in 0..500 {
        input.extend(format!("line {i}: some words and more words\n").bytes());
    }
    compare("stdin", &[], &input);
}

#[test]
fn signal_handlers() {
    compare_with("signals", &[], b"", Reference::NativeX86);
}

#[test]
fn segv_handler_backtrace_and_exit() {
    compare_with("segv", &[], b"", Reference::NativeX86);
}

#[test]
fn unknown_syscalls_get_enosys_and_a_warning() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("nosys", arch, &[]) else { continue };
        let Some(expected) = common::run_qemu(arch, &exe, &[], b"") else { continue };
        let (got, emu) = common::run_emu(&exe, &[], b"");
        assert_eq!(got, expected, "{arch}");
        let unknown: Vec<_> = emu
            .events()
            .iter()
            .filter_map(|e| match e {
                Event::UnknownSyscall { nr, .. } => Some(*nr),
                _ => None,
            })
            .collect();
        assert_eq!(unknown, [987654], "{arch}");
    }
}

#[test]
fn static_pie() {
    // Debian's s390x cross libc has no rcrt1.o, so no static-PIE there.
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let Some(exe) = common::build("hello", arch, &["-static-pie"]) else { continue };
        let Some(expected) = common::run_qemu(arch, &exe, &["pie"], b"") else { continue };
        let (got, emu) = common::run_emu(&exe, &["pie"], b"");
        assert_eq!(emu.image().kind, emu::elf::ElfKind::StaticPie, "{arch}");
        assert_eq!(emu.image().bias, emu::arch::info(arch).pie_base, "{arch}: linked at 0, loaded at the PIE base");
        assert_eq!(got, expected, "{arch}");
    }
}

#[test]
fn provided_files_and_error_paths() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("provided-input.txt");
    let mut text = String::new();
    for i in 0..300 {
        text.push_str(&format!("line {i} of the provided file\n"));
    }
    std::fs::write(&path, &text).expect("write the input file");
    let name = path.to_str().expect("a UTF-8 path");
    for arch in Arch::ALL {
        let Some(exe) = common::build("files", arch, &[]) else { continue };
        let Some(expected) = common::run_qemu(arch, &exe, &[name], b"") else { continue };
        let mut config = common::config(&exe, &[name], b"");
        config.files.insert(name.as_bytes().to_vec(), text.as_bytes().to_vec());
        let mut emu = emu::Emulator::load(&exe, config).expect("load");
        let status = emu.run_to_exit().expect("run").shell_status();
        assert_eq!(String::from_utf8_lossy(emu.stdout()), String::from_utf8_lossy(&expected.stdout), "{arch}");
        assert_eq!(status, expected.status, "{arch}");
    }
}
