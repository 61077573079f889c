//! Running a program the way `qemu-user` does (`unwindlab exec`): with the
//! host's environment and standard streams, the host's files (read-only,
//! writes kept in memory) from its working directory, and `/proc/self/exe`
//! naming the file itself.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;

use crate::{Config, Emulator, Error, Event, Exit, RunLimit, Stdin, Stop};

/// The configuration for `elf` run with `args` after `argv[0]` (`elf` as
/// given) on the host's environment and streams; `record_syscalls` records
/// every call with what its path arguments pointed to.
pub fn config(elf: &OsStr, args: &[OsString], record_syscalls: bool) -> Config {
    let mut argv = vec![elf.as_bytes().to_vec()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    Config {
        args: argv,
        env: std::env::vars_os().map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat()).collect(),
        stdin: Stdin::Host,
        capture_output: false,
        passthrough: true,
        // Like the kernel, /proc/self/exe names the file itself, not the path used.
        exe_path: std::fs::canonicalize(elf).map(|p| p.as_os_str().as_bytes().to_vec()).ok(),
        record_syscalls,
        root: Some(std::path::PathBuf::from("/")),
        cwd: std::env::current_dir().ok().map(|d| d.as_os_str().as_bytes().to_vec()),
        // Exact counts for the clock and the quanta; no ground truth, which
        // nothing here reads.
        tracking: crate::machine::track::Tracking::Count,
        ..Config::default()
    }
}

/// Loads `elf` and runs it to its exit with `config` (from [`config`],
/// changed as the caller wants: another root or library prefix). With
/// `trace`, system calls are recorded and every event (calls and warnings)
/// is passed to it as it happens: the run stops after each call, so its
/// line comes before anything the guest writes next.
pub fn run_config(elf: &OsStr, config: Config, mut trace: Option<&mut dyn FnMut(&Event)>) -> Result<Exit, Error> {
    let mut emu = Emulator::load(elf, config)?;
    let limit = if trace.is_some() { RunLimit::to_exit().and_syscalls() } else { RunLimit::to_exit() };
    loop {
        let stop = emu.run(limit);
        if let Some(trace) = trace.as_deref_mut() {
            for event in emu.take_events() {
                trace(&event);
            }
        }
        match stop? {
            Stop::Exit(exit) => return Ok(exit),
            Stop::Syscall(_) | Stop::Limit | Stop::Process(_) | Stop::Probe(_) => {}
        }
    }
}

/// Ends this process by `signal`, as the guest ended, so that its parent
/// (a shell, a test) sees what it would see under qemu-user, without a core
/// dump (it would describe the emulator, not the guest). Returns only if
/// the signal does not kill; the caller then exits with 128 + `signal`.
pub fn die_by(signal: u32) {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let Ok(sig) = i32::try_from(signal) else { return };
    let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls on values owned here, in a process that is
    // about to end; no other thread relies on the signal's handler.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}
