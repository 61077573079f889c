//! Several processes on every architecture: `procs.c` forks, waits, talks
//! through pipes, gets SIGPIPE and SIGCHLD, kills a child, sleeps in a
//! child, and execs itself by posix_spawn, fork+exec and vfork+exec. It
//! execs, which qemu-user cannot do for a foreign architecture, so the
//! reference is the x86-64 build run natively. The limits stop a fork bomb,
//! refuse a runaway allocation, and stop a program that never ends and a
//! deadlock, with clear messages.

mod common;

use emu::{Arch, Config, Emulator, Error, Event, Exit, Limits};
use std::process::Command;

fn run(arch: Arch, args: &[&str], limits: Limits) -> Option<(Result<Exit, Error>, Emulator)> {
    let exe = common::build("procs", arch, &[])?;
    let mut config = common::config(&exe, args, b"");
    config.limits = limits;
    let mut emu = Emulator::load(&exe, Config { ..config }).expect("load");
    let result = emu.run_to_exit();
    Some((result, emu))
}

#[test]
fn processes_behave_as_on_linux() {
    let Some(native) = common::build("procs", Arch::X86_64, &[]) else { return };
    let reference = Command::new(&native).output().expect("run natively");
    assert!(reference.status.success());
    for arch in Arch::ALL {
        let Some((result, emu)) = run(arch, &[], Limits::default()) else { continue };
        assert_eq!(result.expect("runs"), Exit::Code(0), "{arch}");
        assert_eq!(String::from_utf8_lossy(emu.stdout()), String::from_utf8_lossy(&reference.stdout), "{arch}");
        assert!(emu.pids().is_empty(), "{arch}: processes left");
    }
}

#[test]
fn runs_with_processes_are_deterministic() {
    for arch in Arch::ALL {
        let Some((_, a)) = run(arch, &["noexec"], Limits::default()) else { continue };
        let (_, b) = run(arch, &["noexec"], Limits::default()).unwrap();
        assert_eq!((a.icount(), a.stdout()), (b.icount(), b.stdout()), "{arch}");
        assert!(a.icount() > 0);
    }
}

#[test]
fn a_fork_bomb_stops_at_the_process_limit() {
    for arch in Arch::ALL {
        let limits = Limits { processes: 16, ..Limits::default() };
        let Some((result, _)) = run(arch, &["bomb"], limits) else { continue };
        let err = result.expect_err("the bomb must be stopped").to_string();
        assert!(err.contains("limit of 16") && err.contains("fork bomb"), "{arch}: {err}");
    }
}

#[test]
fn a_runaway_allocation_is_refused_at_the_memory_limit() {
    for arch in Arch::ALL {
        let limits = Limits { memory: 64 << 20, ..Limits::default() };
        let Some((result, emu)) = run(arch, &["hog"], limits) else { continue };
        assert_eq!(result.expect("the guest sees ENOMEM and ends"), Exit::Code(0), "{arch}");
        // The program and its stack take some of the 64 MiB: at most three 16 MiB chunks fit.
        let out = String::from_utf8_lossy(emu.stdout()).into_owned();
        let chunks: u32 = out.trim().strip_suffix(" chunks").and_then(|n| n.parse().ok()).expect("a count");
        assert!((1..4).contains(&chunks), "{arch}: {out}");
        let warned = emu
            .events()
            .iter()
            .any(|e| matches!(e, Event::Warning { message, .. } if message.contains("limit of 67108864 bytes")));
        assert!(warned, "{arch}: no warning in {:?}", emu.events());
    }
}

#[test]
fn a_program_that_never_ends_stops_at_the_instruction_limit() {
    for arch in Arch::ALL {
        let limits = Limits { instructions: Some(2_000_000), ..Limits::default() };
        let Some((result, emu)) = run(arch, &["spin"], limits) else { continue };
        let err = result.expect_err("must be stopped").to_string();
        assert!(err.contains("ran 2000000 instructions, its limit"), "{arch}: {err}");
        assert_eq!(emu.icount(), 2_000_000, "{arch}");
    }
}

#[test]
fn a_deadlock_is_reported_with_what_each_process_waits_for() {
    for arch in Arch::ALL {
        let Some((result, _)) = run(arch, &["deadlock"], Limits::default()) else { continue };
        let err = result.expect_err("must be reported").to_string();
        assert!(err.contains("deadlock: every process waits (1000 in read)"), "{arch}: {err}");
    }
}

/// Stopped right after an `execve`, the old image can still be read (as
/// the kernel's `de_thread()` still has the old mm): the path argument the
/// call was given lives only in the old image's memory. Once the run goes
/// on, the old image is gone.
#[test]
fn the_old_image_is_readable_at_the_execve_stop() {
    use emu::{RunLimit, Stop};
    use kmodel::memory::{Access, UserMemory};
    for arch in Arch::ALL {
        let Some(exe) = common::build("procs", arch, &[]) else { continue };
        let mut emu = Emulator::load(&exe, common::config(&exe, &[], b"")).expect("load");
        let record = loop {
            match emu.run(RunLimit::to_exit().and_syscalls()).expect("run") {
                Stop::Syscall(record) if record.name == "execve" && record.ret == 0 => break record,
                Stop::Exit(exit) => panic!("{arch}: ended ({exit:?}) without an execve"),
                _ => {}
            }
        };
        let path = b"/proc/self/exe\0";
        let old = emu
            .pre_exec_memory(|mem| {
                let mut buf = vec![0u8; path.len()];
                mem.read(record.args[0], &mut buf, Access::Faultable).map(|()| buf)
            })
            .expect("at the execve stop");
        assert_eq!(old.as_deref().ok(), Some(&path[..]), "{arch}");
        emu.run(RunLimit::icount(emu.icount() + 1)).expect("run on");
        assert!(emu.pre_exec_memory(|_| ()).is_none(), "{arch}: the old image outlived the stop");
    }
}
