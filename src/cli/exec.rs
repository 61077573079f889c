//! `unwindlab exec`: run a static program under the emulator.

use clap::Args;
use emu::{Config, Emulator, Event, Exit, RunLimit, Stdin, Stop};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;

use super::EXIT_USAGE;

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// Print one line per system call (and every emulator warning) to stderr.
    #[arg(long)]
    trace_syscalls: bool,
    /// A static (or static-PIE) ELF executable for x86-64, AArch64 or s390x.
    elf: OsString,
    /// Arguments for the program; everything after ELF is passed on, options included.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

/// Runs the guest with the host's environment and standard streams, like
/// qemu-user does, and returns its exit status (128 + signal if killed).
pub(crate) fn run(args: ExecArgs) -> i32 {
    let file = std::path::Path::new(&args.elf);
    let name = file.display().to_string();
    let mut argv = vec![args.elf.as_bytes().to_vec()];
    argv.extend(args.args.iter().map(|a| a.as_bytes().to_vec()));
    // Like the kernel, /proc/self/exe names the file itself, not the path used.
    let exe_path = std::fs::canonicalize(file).map(|p| p.as_os_str().as_bytes().to_vec()).ok();
    let config = Config {
        args: argv,
        env: std::env::vars_os().map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat()).collect(),
        stdin: Stdin::Host,
        capture_output: false,
        passthrough: true,
        exe_path,
        // Recorded calls carry what their path arguments pointed to.
        record_syscalls: args.trace_syscalls,
        ..Config::default()
    };
    let mut emu = match Emulator::load(file, config) {
        Ok(emu) => emu,
        Err(e) => {
            eprintln!("unwindlab: {e}");
            return EXIT_USAGE;
        }
    };
    // Stopping after each call prints its line before the guest writes more.
    let limit = if args.trace_syscalls { RunLimit::to_exit().and_syscalls() } else { RunLimit::to_exit() };
    let exit = loop {
        let stop = emu.run(limit);
        if args.trace_syscalls {
            for event in emu.take_events() {
                report(&name, &event);
            }
        }
        match stop {
            Ok(Stop::Exit(exit)) => break exit,
            Ok(Stop::Syscall(_) | Stop::Limit) => {}
            Err(e) => {
                eprintln!("unwindlab: {e}");
                return EXIT_USAGE;
            }
        }
    };
    match exit {
        Exit::Code(code) => code,
        Exit::Signal { signal, fault, pc } => {
            let cause = fault.map(|f| format!(" ({f})")).unwrap_or_default();
            eprintln!("unwindlab: {name}: killed by {} at pc {pc:#x}{cause}", emu::signal::name(signal));
            exit.shell_status()
        }
    }
}

fn report(name: &str, event: &Event) {
    match event {
        Event::UnknownSyscall { nr, icount, pc } => {
            eprintln!("unwindlab: {name}: [{icount}] unknown system call {nr} at pc {pc:#x}, answered -ENOSYS");
        }
        Event::Warning { icount, message } => eprintln!("unwindlab: {name}: [{icount}] {message}"),
        // strace-like: `[icount] openat(AT_FDCWD, "in.txt", O_RDONLY) = -ENOENT`.
        Event::Syscall(record) => eprintln!("[{}] {record}", record.icount),
    }
}
