//! `unwindlab exec`: run a program (static, or dynamic with its libraries) under the emulator.

use clap::Args;
use emu::{Event, Exit};
use std::ffi::OsString;

use super::common::EXIT_USAGE;

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// Print one line per system call (and every emulator warning) to stderr.
    #[arg(long)]
    trace_syscalls: bool,
    /// The host directory the program sees as `/` (read-only; its writes
    /// stay in memory).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: std::path::PathBuf,
    /// Searched before the root, like qemu-user's `-L` (default: Debian's
    /// cross sysroot for AArch64 and s390x programs whose interpreter the
    /// root lacks, none for x86-64 and none when the root has it: a root
    /// that is a whole system keeps its own ld.so and libc together).
    #[arg(long, value_name = "DIR")]
    prefix: Option<std::path::PathBuf>,
    /// The program's working directory, an absolute path as the program
    /// sees it (inside the root). Default: the host's working directory as
    /// seen inside the root, or / when it lies outside the root.
    #[arg(long, value_name = "DIR")]
    cwd: Option<OsString>,
    /// An ELF executable for x86-64, AArch64 or s390x: static, static-PIE, or
    /// dynamically linked (its interpreter and libraries come from the
    /// prefix, then the root).
    elf: OsString,
    /// Arguments for the program; everything after ELF is passed on, options included.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

/// Runs the guest with the host's environment and standard streams, like
/// qemu-user does, and returns its exit status (128 + signal if killed).
pub(crate) fn run(args: ExecArgs) -> i32 {
    let name = std::path::Path::new(&args.elf).display().to_string();
    let mut print = |event: &Event| report(&name, event);
    let trace = args.trace_syscalls.then_some(&mut print as &mut dyn FnMut(&Event));
    let mut config = emu::host::config(&args.elf, &args.args, trace.is_some());
    // Like the kernel in a chroot: /proc/self/exe names the program as the
    // guest sees it, inside the root (else `execve("/proc/self/exe")`, as
    // a program that re-executes itself does, finds nothing).
    if let Some(inside) = config.exe_path.as_deref().and_then(|exe| inside_root(exe, &args.root)) {
        config.exe_path = Some(inside);
    }
    match working_directory(&args) {
        Ok((cwd, note)) => {
            if let Some(note) = note {
                eprintln!("unwindlab: note: {note}");
            }
            config.cwd = Some(cwd);
        }
        Err(e) => {
            eprintln!("unwindlab: {e}");
            return EXIT_USAGE;
        }
    }
    // Benchmarks only (scripts/bench-exec.py): the ground truth kept as a
    // scenario's run keeps it, to measure what counting alone saves.
    if std::env::var_os("UNWINDLAB_EXEC_GROUND_TRUTH").is_some() {
        config.tracking = emu::Tracking::Blocks;
    }
    config.root = Some(args.root);
    config.prefix = args.prefix;
    // The proposed registration calls at the lab's numbers: a trace names
    // them (no kernel here implements them: -ENOSYS, as on a kernel without).
    config.named_syscalls = kmodel::types::SyscallNumbers::default().named();
    match emu::host::run_config(&args.elf, config, trace) {
        Ok(Exit::Code(code)) => code,
        Ok(exit @ Exit::Signal { signal, fault, pc }) => {
            // A fault is worth a line (qemu-user prints one too); a signal
            // sent by a process is the guest's business, as under qemu-user.
            if fault.is_some() || SYNCHRONOUS.contains(&signal) {
                let cause = fault.map(|f| format!(" ({f})")).unwrap_or_default();
                eprintln!("unwindlab: {name}: killed by {} at pc {pc:#x}{cause}", emu::signal::name(signal));
            }
            emu::host::die_by(signal);
            exit.shell_status()
        }
        Err(e) => {
            eprintln!("unwindlab: {e}");
            EXIT_USAGE
        }
    }
}

/// The guest's working directory, and a note for stderr when the rule
/// chose `/` because the host's working directory is outside the root:
/// `--cwd` (which must be an absolute path naming a directory of the root
/// or the prefix); else the host's working directory inside the root, as
/// `chroot ROOT` leaves a process that was in it (with the default root
/// `/`, the host's path unchanged); else `/`. The note matters because
/// relative arguments then name other files than the user sees beside them.
fn working_directory(args: &ExecArgs) -> Result<(Vec<u8>, Option<String>), String> {
    use std::os::unix::ffi::OsStrExt as _;
    if !args.root.is_dir() {
        return Err(format!("--root {}: no such directory", args.root.display()));
    }
    if let Some(dir) = &args.cwd {
        let shown = std::path::Path::new(dir).display();
        let Ok(rel) = std::path::Path::new(dir).strip_prefix("/") else {
            return Err(format!("--cwd {shown}: give an absolute path, as the program sees it (inside the root)"));
        };
        if !std::iter::once(&args.root).chain(&args.prefix).any(|base| base.join(rel).is_dir()) {
            return Err(format!("--cwd {shown}: no such directory in the root ({})", args.root.display()));
        }
        return Ok((dir.as_bytes().to_vec(), None));
    }
    let host = std::env::current_dir().ok();
    if let Some(inside) = host.as_ref().and_then(|d| inside_root(d.as_os_str().as_bytes(), &args.root)) {
        return Ok((inside, None));
    }
    let host = host.map_or_else(|| "unknown".to_string(), |d| d.display().to_string());
    Ok((
        b"/".to_vec(),
        Some(format!(
            "the working directory {host} is outside the root {}: the program starts in / (--cwd DIR chooses another)",
            args.root.display()
        )),
    ))
}

/// `exe`, a canonical host path, as the guest sees it when `root` is its
/// `/`: `None` if it lies outside the root.
fn inside_root(exe: &[u8], root: &std::path::Path) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt as _;
    let root = std::fs::canonicalize(root).ok()?;
    let inside = std::path::Path::new(std::ffi::OsStr::from_bytes(exe)).strip_prefix(&root).ok()?;
    Some([b"/", inside.as_os_str().as_bytes()].concat())
}

/// Signals an instruction raises (faults and traps).
const SYNCHRONOUS: [u32; 5] = [4, 5, 7, 8, 11];

fn report(name: &str, event: &Event) {
    match event {
        Event::UnknownSyscall { nr, name: call, icount, pc } => {
            let call = call.map(|c| format!("{c} ({nr})")).unwrap_or_else(|| nr.to_string());
            eprintln!(
                "unwindlab: {name}: [{icount}] unknown system call {call} at pc {pc:#x}, answered -ENOSYS (reported once)"
            );
        }
        Event::Warning { icount, message } => eprintln!("unwindlab: {name}: [{icount}] {message}"),
        Event::ObjectMapped { pid, icount, object } => eprintln!("[{icount}] process {pid} mapped {object}"),
        Event::ObjectUnmapped { pid, icount, object } => eprintln!("[{icount}] process {pid} unmapped {object}"),
        // strace-like: `[icount] openat(AT_FDCWD, "in.txt", O_RDONLY) = -ENOENT`.
        Event::Syscall(record) => eprintln!("[{}] {record}", record.icount),
    }
}
