//! Shared by the integration tests: building the C guests in
//! `tests/guests/` with the host and cross compilers, and running them under
//! the emulator and under qemu-user.
//!
//! A missing toolchain skips the test with a message, unless the environment
//! variable `CI` is set, in which case it fails.

#![allow(dead_code)]

use emu::{Arch, Config, Emulator, Exit, Stdin};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The compiler and the qemu-user binary for an architecture.
pub fn toolchain(arch: Arch) -> (&'static str, &'static str) {
    match arch {
        Arch::X86_64 => ("gcc", "qemu-x86_64"),
        Arch::Aarch64 => ("aarch64-linux-gnu-gcc", "qemu-aarch64"),
        Arch::S390x => ("s390x-linux-gnu-gcc", "qemu-s390x"),
    }
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Whether `tool` can be used; if not, skips (or fails under CI) with a message.
pub fn require(tool: &str) -> bool {
    if have(tool) {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{tool} is not installed (CI is set, so this is an error)");
    }
    eprintln!("skipping: {tool} is not installed");
    false
}

static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());

/// Builds `tests/guests/{name}.c` for `arch` with `flags` (plus `-static`
/// unless they ask for `-static-pie`),
/// once per test process; `None` if the compiler is missing (and CI is unset).
pub fn build(name: &str, arch: Arch, flags: &[&str]) -> Option<PathBuf> {
    let (cc, _) = toolchain(arch);
    if !require(cc) {
        return None;
    }
    let key = format!("{name}-{arch}{}", flags.join(""));
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(&key) {
        return Some(path.clone());
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guests");
    std::fs::create_dir_all(&dir).expect("create the guest build directory");
    let out = dir.join(key.replace(['/', ' ', '='], "_"));
    // Build under a unique name and rename, so parallel test binaries never
    // see a half-written file.
    let tmp = dir.join(format!("{}.{}.tmp", out.file_name().unwrap().to_string_lossy(), std::process::id()));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guests").join(format!("{name}.c"));
    // `-static-pie` replaces `-static`.
    let link = if flags.contains(&"-static-pie") { None } else { Some("-static") };
    let output = Command::new(cc)
        .args(link)
        .args(["-O2", "-g", "-o"])
        .arg(&tmp)
        .arg(&src)
        .args(flags)
        .output()
        .expect("run the compiler");
    assert!(output.status.success(), "{cc} failed on {}:\n{}", src.display(), String::from_utf8_lossy(&output.stderr));
    std::fs::rename(&tmp, &out).expect("move the built guest into place");
    built.insert(key, out.clone());
    Some(out)
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// The exit status as a shell sees it (128 + signal when killed).
    pub status: i32,
}

/// Runs `exe` under qemu-user with `args` (after argv[0]) and `stdin`; `None`
/// if qemu is missing (and CI is unset).
pub fn run_qemu(arch: Arch, exe: &Path, args: &[&str], stdin: &[u8]) -> Option<Outcome> {
    let (_, qemu) = toolchain(arch);
    if !require(qemu) {
        return None;
    }
    // Standard input from a file, so reads return whole blocks as they do in
    // the emulator (a pipe could deliver the bytes in arbitrary pieces).
    let input = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "stdin.{}.{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&input, stdin).expect("write the stdin file");
    let output = Command::new(qemu)
        .arg(exe)
        .args(args)
        .stdin(std::fs::File::open(&input).expect("open the stdin file"))
        .output()
        .expect("run qemu");
    let _ = std::fs::remove_file(&input);
    use std::os::unix::process::ExitStatusExt as _;
    let status = output.status.code().unwrap_or_else(|| 128 + output.status.signal().unwrap_or(0));
    Some(Outcome { stdout: output.stdout, status })
}

/// Runs `exe` natively (x86-64 programs on an x86-64 host).
///
/// qemu-x86_64 7.2 (Debian bookworm) misaligns the x86-64 signal frame, so a
/// handler that uses SSE (printf of a double) crashes under it; for programs
/// with signal handlers the host CPU is the reference instead.
pub fn run_native(exe: &Path, args: &[&str], stdin: &[u8]) -> Outcome {
    let input = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "stdin.native.{}.{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&input, stdin).expect("write the stdin file");
    let output = Command::new(exe)
        .args(args)
        .stdin(std::fs::File::open(&input).expect("open the stdin file"))
        .output()
        .expect("run the guest natively");
    let _ = std::fs::remove_file(&input);
    use std::os::unix::process::ExitStatusExt as _;
    let status = output.status.code().unwrap_or_else(|| 128 + output.status.signal().unwrap_or(0));
    Outcome { stdout: output.stdout, status }
}

/// The configuration the tests use: argv[0] is the path, as under qemu.
pub fn config(exe: &Path, args: &[&str], stdin: &[u8]) -> Config {
    let mut argv = vec![exe.to_string_lossy().into_owned().into_bytes()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    Config { args: argv, stdin: Stdin::Bytes(stdin.to_vec()), ..Config::default() }
}

/// Runs `exe` under the emulator.
pub fn run_emu(exe: &Path, args: &[&str], stdin: &[u8]) -> (Outcome, Emulator) {
    let mut emu = Emulator::load(exe, config(exe, args, stdin)).expect("load the guest");
    let exit = emu.run_to_exit().expect("run the guest");
    let status = exit.shell_status();
    if let Exit::Signal { signal, fault, pc } = exit {
        eprintln!("guest killed by signal {signal} at pc {pc:#x}, fault {fault:?}");
    }
    (Outcome { stdout: emu.stdout().to_vec(), status }, emu)
}

/// A function's address range, from the guest's symbol table.
pub fn function(exe: &Path, name: &str) -> std::ops::Range<u64> {
    let bytes = std::fs::read(exe).expect("read the guest");
    let elf = goblin::elf::Elf::parse(&bytes).expect("parse the guest");
    let sym = elf
        .syms
        .iter()
        .find(|sym| sym.is_function() && elf.strtab.get_at(sym.st_name) == Some(name))
        .unwrap_or_else(|| panic!("{}: no function {name}", exe.display()));
    sym.st_value..sym.st_value + sym.st_size
}
