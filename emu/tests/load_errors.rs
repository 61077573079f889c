//! Bad input gives a clear error naming the file and the problem, never a
//! panic: missing files, non-ELF data, dynamic executables, foreign
//! machines, and every truncation and many corruptions of a real program.

mod common;

use emu::{Arch, Config, Emulator, Error};

fn load_error(file: &str, bytes: &[u8]) -> String {
    match Emulator::new(file, bytes, Config::default()) {
        Ok(_) => panic!("{file}: loaded"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn missing_file() {
    let err = Emulator::load("/nonexistent/prog", Config::default()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }));
    assert!(err.to_string().starts_with("/nonexistent/prog: "), "{err}");
}

#[test]
fn not_elf() {
    let msg = load_error("notes.txt", b"just some text, not a program");
    assert!(msg.starts_with("notes.txt: not a readable ELF file"), "{msg}");
    assert!(load_error("empty", b"").starts_with("empty: "));
}

/// A dynamic program needs a file system to load its interpreter from;
/// without one (no root, no files) it is refused, and the message says why.
#[test]
fn dynamic_executable_without_a_file_system() {
    if !common::require("gcc") {
        return;
    }
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dynamic-hello");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guests/hello.c");
    let status = std::process::Command::new("gcc").arg("-o").arg(&out).arg(&src).status().expect("run gcc");
    assert!(status.success());
    let msg = load_error("dyn", &std::fs::read(&out).unwrap());
    assert!(msg.contains("dynamically linked") && msg.contains("interpreter"), "{msg}");
}

#[test]
fn foreign_machine() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("hello", arch, &[]) else { continue };
        let mut bytes = std::fs::read(&exe).unwrap();
        // e_machine = EM_RISCV (243), in the file's byte order.
        let machine: [u8; 2] = if arch == Arch::S390x { [0, 243] } else { [243, 0] };
        bytes[18..20].copy_from_slice(&machine);
        let msg = load_error("riscv", &bytes);
        assert!(msg.starts_with("riscv: unsupported machine"), "{msg}");
    }
}

#[test]
fn truncations_and_corruptions_never_panic() {
    // The architectures are independent: one thread each (every load is
    // single-threaded, and there are thousands).
    std::thread::scope(|s| {
        for arch in Arch::ALL {
            s.spawn(move || truncate_and_corrupt(arch));
        }
    });
}

/// Every cut inside the headers of `arch`'s hello, cuts across the whole
/// file, and every byte of its ELF and program headers set to a few
/// hostile values: an error naming the file, or a load, never a panic.
fn truncate_and_corrupt(arch: Arch) {
    let Some(exe) = common::build("hello", arch, &[]) else { return };
    let bytes = std::fs::read(&exe).unwrap();
    let cuts = (0..1024).chain((1024..bytes.len()).step_by(4099));
    for len in cuts {
        if let Err(err) = Emulator::new("cut", &bytes[..len], Config::default()) {
            assert!(err.to_string().starts_with("cut: "), "{err}");
        }
    }
    for at in 0..(64 + 56 * 10) {
        for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] = value;
            if let Err(err) = Emulator::new("bad", &bad, Config::default()) {
                assert!(err.to_string().starts_with("bad: "), "{err}");
            }
        }
    }
}

/// The file offset of the first program header of type `p_type` in `bytes`.
fn phdr_offset(bytes: &[u8], p_type: u32) -> usize {
    let elf = goblin::elf::Elf::parse(bytes).expect("an ELF file");
    let i = elf.program_headers.iter().position(|ph| ph.p_type == p_type).expect("no such header");
    elf.header.e_phoff as usize + i * usize::from(elf.header.e_phentsize)
}

#[test]
fn an_sframe_segment_past_the_address_space_is_refused() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin/x86_64/lab-v3");
    let mut bytes = std::fs::read(path).unwrap();
    let at = phdr_offset(&bytes, sframe::elf::PT_GNU_SFRAME);
    bytes[at + 40..at + 48].copy_from_slice(&u64::MAX.to_le_bytes()); // p_memsz
    let err = load_error("big-sframe", &bytes);
    assert!(err.starts_with("big-sframe: PT_GNU_SFRAME"), "{err}");
}
