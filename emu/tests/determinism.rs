//! Runs are deterministic: stopping every N instructions gives the same
//! (PC, SP, instruction count) sequence in two runs, stopping does not change
//! what the program does or how many instructions it executes, and the
//! virtual clock and random bytes depend on nothing outside the emulator;
//! counting alone (`Tracking::Count`, what `unwindlab exec` runs with)
//! stops, counts and behaves exactly as the ground-truth mode does.

mod common;

use emu::{Arch, Emulator, RunLimit, Stop, Tracking};
use std::path::Path;

/// What a run did: its stop points (PC, SP, instruction count), the final
/// instruction count, the exit status and stdout.
#[derive(Debug, PartialEq, Eq)]
struct Trace {
    points: Vec<(u64, u64, u64)>,
    icount: u64,
    status: i32,
    stdout: Vec<u8>,
}

/// Runs to the end, stopping every `period` instructions.
fn trace(exe: &Path, period: Option<u64>) -> Trace {
    trace_with(exe, period, Tracking::Blocks)
}

/// [`trace`] with `tracking`.
fn trace_with(exe: &Path, period: Option<u64>, tracking: Tracking) -> Trace {
    let config = emu::Config { tracking, ..common::config(exe, &["a"], b"") };
    let mut emu = Emulator::load(exe, config).expect("load");
    let mut points = Vec::new();
    loop {
        let limit = match period {
            Some(n) => RunLimit::icount(emu.icount() + n),
            None => RunLimit::to_exit(),
        };
        match emu.run(limit).expect("run") {
            Stop::Limit => {
                let regs = emu.regs().expect("registers");
                assert_eq!(emu.icount() % period.unwrap(), 0, "stopped off the period");
                points.push((regs.pc, regs.sp, emu.icount()));
            }
            Stop::Exit(exit) => {
                return Trace {
                    points,
                    icount: emu.icount(),
                    status: exit.shell_status(),
                    stdout: emu.stdout().to_vec(),
                }
            }
            Stop::Syscall(_) | Stop::Process(_) | Stop::Probe(_) => {
                unreachable!("syscall, process and probe stops were not asked for")
            }
        }
    }
}

#[test]
fn stop_points_repeat_exactly() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("recursion", arch, &[]) else { continue };
        let free = trace(&exe, None);
        assert!(free.points.is_empty());
        for period in [10_007, 997] {
            let first = trace(&exe, Some(period));
            let second = trace(&exe, Some(period));
            assert_eq!(first, second, "{arch}: two runs stopping every {period} instructions differ");
            assert_eq!(first.icount, free.icount, "{arch}: stopping every {period} changed the instruction count");
            assert_eq!(
                (first.status, &first.stdout),
                (free.status, &free.stdout),
                "{arch}: stopping changed the outcome"
            );
            assert_eq!(first.points.len() as u64, free.icount / period, "{arch}: wrong number of stops");
        }
    }
}

#[test]
fn stopping_at_syscalls_changes_nothing() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("sleep", arch, &[]) else { continue };
        let Trace { icount: total, status, stdout, .. } = trace(&exe, None);
        let mut emu = Emulator::load(&exe, common::config(&exe, &["a"], b"")).expect("load");
        let mut calls = Vec::new();
        let exit = loop {
            match emu.run(RunLimit::to_exit().and_syscalls()).expect("run") {
                Stop::Syscall(record) => calls.push(record),
                Stop::Exit(exit) => break exit,
                Stop::Limit | Stop::Process(_) | Stop::Probe(_) => unreachable!(),
            }
        };
        assert_eq!((emu.icount(), exit.shell_status(), emu.stdout()), (total, status, &stdout[..]), "{arch}");
        assert!(calls.iter().any(|c| c.name == "clock_nanosleep" || c.name == "nanosleep"), "{arch}: {calls:?}");
        assert!(calls.windows(2).all(|w| w[0].icount < w[1].icount), "{arch}: syscall counts not increasing");
        assert_eq!(calls.last().map(|c| c.name), Some("exit_group"), "{arch}");
    }
}

#[test]
fn virtual_time_follows_instructions_and_sleeps() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("sleep", arch, &[]) else { continue };
        let mut emu = Emulator::load(&exe, common::config(&exe, &[], b"")).expect("load");
        emu.run_to_exit().expect("run");
        // 20 ms + 5 ms + 1 s of relative sleeps, a sleep until 3 ms after a
        // clock reading, and 1 ns per instruction.
        let slept = 1_028_000_000;
        assert!(emu.virtual_time_ns() >= slept, "{arch}: {}", emu.virtual_time_ns());
        assert!(emu.virtual_time_ns() < slept + emu.icount() + 1_000_000, "{arch}: {}", emu.virtual_time_ns());
    }
}

#[test]
fn counting_alone_runs_as_the_ground_truth_mode_does() {
    for arch in Arch::ALL {
        for program in ["recursion", "procs"] {
            let Some(exe) = common::build(program, arch, &[]) else { continue };
            // Every stop's PC, SP and count, the final count and the outcome.
            let truth = trace_with(&exe, Some(10_007), Tracking::Blocks);
            let count = trace_with(&exe, Some(10_007), Tracking::Count);
            assert_eq!(count, truth, "{arch} {program}, stopping every 10,007 instructions: counting alone differs");
            let mut emu =
                Emulator::load(&exe, emu::Config { tracking: Tracking::Count, ..common::config(&exe, &["a"], b"") })
                    .expect("load");
            emu.run_to_exit().expect("run");
            assert!(emu.shadow_stack().is_none(), "{arch} {program}: no ground truth is kept when counting alone");
        }
    }
}
