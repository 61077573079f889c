//! Threads on every architecture: `threads.c` runs glibc's pthreads
//! (workers with a mutex and a condition variable, a thread exiting while
//! another runs, joins, `pthread_kill`/`tgkill` to one thread, a
//! process-directed signal only the main thread takes, `__thread`
//! variables, fork from a thread, execve from a non-leader thread, exit()
//! with threads blocked).
//!
//! * Its output and status equal qemu-user's (which cannot exec for a
//!   foreign architecture: the "noexec" mode) and, with the exec, a native
//!   run's; statically and dynamically linked.
//! * The fast ground truth equals the per-instruction reference at every
//!   NMI point, and every frame of it lies on the stack of the thread on
//!   the CPU: each thread has its own.
//! * Two runs give the same events, switches between threads included.
//! * A thread bomb stops at the task limit.

mod common;

use emu::{Arch, Config, Emulator, Exit, Limits, NmiSource, ProcessEvent, RunLimit, Stdin, Stop, Tracking};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn build(arch: Arch) -> Option<PathBuf> {
    common::build("threads", arch, &["-pthread"])
}

fn load(exe: &Path, args: &[&str], tracking: Tracking) -> Emulator {
    let mut config = common::config(exe, args, b"");
    config.tracking = tracking;
    Emulator::load(exe, config).expect("load the guest")
}

/// Runs under the emulator: stdout, status, and the emulator.
fn run(exe: &Path, args: &[&str]) -> (String, i32, Emulator) {
    let mut emu = load(exe, args, Tracking::Blocks);
    let exit = emu.run_to_exit().expect("run the guest");
    (String::from_utf8_lossy(emu.stdout()).into_owned(), exit.shell_status(), emu)
}

#[test]
fn threads_behave_as_under_qemu_and_natively() {
    let Some(native) = build(Arch::X86_64) else { return };
    let full = common::run_native(&native, &[], b"");
    assert_eq!(full.status, 5, "{}", String::from_utf8_lossy(&full.stdout));
    let full = String::from_utf8_lossy(&full.stdout).into_owned();
    assert!(full.contains("execed: same pid 1, tid is pid 1"), "{full}");
    for arch in Arch::ALL {
        let Some(exe) = build(arch) else { continue };
        let (stdout, status, emu) = run(&exe, &[]);
        assert_eq!((stdout.as_str(), status), (full.as_str(), 5), "{arch}: with exec, against the native run");
        assert!(emu.pids().is_empty() && emu.tasks().is_empty(), "{arch}: tasks left");
        let warnings: Vec<_> = emu.events().iter().filter(|e| matches!(e, emu::Event::Warning { .. })).collect();
        assert!(warnings.is_empty(), "{arch}: {warnings:?}");
        let Some(qemu) = common::run_qemu(arch, &exe, &["noexec"], b"") else { continue };
        let (stdout, status, _) = run(&exe, &["noexec"]);
        assert_eq!((stdout, status), (String::from_utf8_lossy(&qemu.stdout).into_owned(), qemu.status), "{arch}");
    }
}

/// The mapped area holding `addr`, as `(start, end)`.
fn area(emu: &Emulator, addr: u64) -> Option<(u64, u64)> {
    emu.pages().area(addr).map(|a| (a.start, a.end))
}

#[test]
fn each_thread_has_its_own_ground_truth() {
    for arch in Arch::ALL {
        let Some(exe) = build(arch) else { continue };
        let mut emu = load(&exe, &[], Tracking::Instructions);
        let source = NmiSource::every(997).unwrap();
        let mut tids = BTreeSet::new();
        let mut points = 0;
        while let Some(point) = source.next(&mut emu).expect("run to the next NMI") {
            let what = format!("{arch}: thread {} of {} at {}", emu.tid(), emu.pid(), point.icount);
            assert_eq!(Some(point.ground_truth.clone()), emu.reference_ground_truth(), "{what}");
            // Every call in progress was made on this thread's stack.
            let stack = area(&emu, point.sp);
            for frame in emu.shadow_stack().unwrap().frames() {
                assert_eq!(area(&emu, frame.sp), stack, "{what}: frame {frame:?} on another stack");
            }
            tids.insert((emu.pid(), emu.tid()));
            points += 1;
        }
        assert_eq!(emu.exit_status(), Some(Exit::Code(5)), "{arch}");
        assert_eq!(emu.ground_truth(), emu.reference_ground_truth().unwrap(), "{arch}: at exit");
        // The main thread, the workers and the others, the fork child, the exec'd image's threads.
        let threads = tids.iter().filter(|(pid, tid)| pid != tid).count();
        assert!(threads >= 6 && points > 1000, "{arch}: {points} points on {tids:?}");
    }
}

/// Every process event of a run, with the stdout and instruction count.
fn events(exe: &Path) -> (Vec<ProcessEvent>, Vec<u8>, u64) {
    let mut emu = load(exe, &[], Tracking::Blocks);
    let mut events = Vec::new();
    loop {
        match emu.run(RunLimit::to_exit().and_processes()).expect("run") {
            Stop::Process(event) => events.push(event),
            Stop::Exit(_) => break,
            stop => panic!("unexpected stop {stop:?}"),
        }
    }
    (events, emu.stdout().to_vec(), emu.icount())
}

#[test]
fn runs_with_threads_are_deterministic() {
    for arch in Arch::ALL {
        let Some(exe) = build(arch) else { continue };
        let a = events(&exe);
        let b = events(&exe);
        assert!(a == b, "{arch}: two runs differ");
        let (events, _, _) = a;
        let created = events.iter().filter(|e| matches!(e, ProcessEvent::Thread { .. })).count();
        let ended = events.iter().filter(|e| matches!(e, ProcessEvent::ThreadExit { .. })).count();
        let killed = events
            .iter()
            .filter(|e| matches!(e, ProcessEvent::ThreadExit { exit: Exit::Signal { signal: 9, .. }, .. }))
            .count();
        let between_threads =
            events.iter().filter(|e| matches!(e, ProcessEvent::Switch { from, to, .. } if from == to)).count();
        // 4 workers, 2, 1 target, 1 forker, 1 execer, 2 sleepers; the
        // main thread dies in de_thread, the two sleepers at exit().
        assert_eq!((created, killed), (11, 3), "{arch}: {events:?}");
        assert_eq!(ended, 11, "{arch}");
        assert!(between_threads > 10, "{arch}: {between_threads} switches between threads");
        let exec = events.iter().find_map(|e| match e {
            ProcessEvent::Exec { pid, tid, .. } => Some((*pid, *tid)),
            _ => None,
        });
        let (pid, tid) = exec.expect("an exec");
        assert_ne!(pid, tid, "{arch}: the exec came from a non-leader thread");
    }
}

#[test]
fn a_thread_bomb_stops_at_the_task_limit() {
    for arch in Arch::ALL {
        let Some(exe) = build(arch) else { continue };
        let mut config = common::config(&exe, &["bomb"], b"");
        config.limits = Limits { processes: 12, ..Limits::default() };
        let mut emu = Emulator::load(&exe, config).expect("load");
        let err = emu.run_to_exit().expect_err("the bomb must be stopped").to_string();
        assert!(err.contains("limit of 12") && err.contains("thread bomb"), "{arch}: {err}");
        assert_eq!(emu.tasks().len(), 12, "{arch}");
    }
}

/// `threads.c` linked dynamically (`gcc -O2 -pthread`), in `CARGO_TARGET_TMPDIR`.
fn build_dynamic(arch: Arch) -> Option<PathBuf> {
    let (cc, _) = common::toolchain(arch);
    if !common::require(cc) {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guests/threads.c");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("threads-dyn-{arch}"));
    let status = Command::new(cc).args(["-O2", "-pthread", "-o"]).arg(&out).arg(&src).status().expect("run cc");
    assert!(status.success(), "{cc} failed");
    Some(out)
}

#[test]
fn dynamic_threads_behave_as_under_qemu() {
    for arch in Arch::ALL {
        let Some(exe) = build_dynamic(arch) else { continue };
        let (_, qemu) = common::toolchain(arch);
        let reference = match arch {
            Arch::X86_64 => Command::new(&exe).arg("noexec").output().expect("run natively"),
            _ => {
                if !common::require(qemu) {
                    continue;
                }
                let sysroot = format!("/usr/{}-linux-gnu", arch.name());
                Command::new(qemu).arg("-L").arg(sysroot).arg(&exe).arg("noexec").output().expect("run qemu")
            }
        };
        let argv = vec![exe.to_string_lossy().into_owned().into_bytes(), b"noexec".to_vec()];
        let config = Config { args: argv, stdin: Stdin::Empty, root: Some("/".into()), ..Config::default() };
        let mut emu = Emulator::load(&exe, config).expect("load the dynamic guest");
        let exit = emu.run_to_exit().expect("run the dynamic guest");
        assert_eq!(
            (String::from_utf8_lossy(emu.stdout()), exit.shell_status()),
            (String::from_utf8_lossy(&reference.stdout), reference.status.code().unwrap_or(-1)),
            "{arch}"
        );
    }
}

#[test]
fn a_deadlock_names_what_each_thread_waits_for() {
    for arch in Arch::ALL {
        let Some(exe) = build(arch) else { continue };
        let mut emu = load(&exe, &["deadlock"], Tracking::Blocks);
        let err = emu.run_to_exit().expect_err("the threads deadlock").to_string();
        assert!(err.contains("1000/1000 in futex, 1000/1001 in futex, 1000/1002 in futex"), "{arch}: {err}");
    }
}

/// A thread killed while it was off the CPU is reported with the registers
/// it was switched out with (what it enters the kernel with when a model
/// kills it): at the exec from a non-leader in the committed threaded
/// guest, the computing sibling's are where it was preempted in its loop,
/// the leader's are in its `pthread_join` futex call.
#[test]
fn killed_threads_carry_the_registers_they_were_switched_out_with() {
    for arch in Arch::ALL {
        let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name()).join("threads-v3");
        // The host's files: the thread execs /proc/self/exe.
        let config = Config { root: Some("/".into()), ..common::config(&exe, &["exec-from-thread"], b"") };
        let mut emu = Emulator::load(&exe, config).expect("load the guest");
        let mut switched_out = std::collections::BTreeMap::new();
        let mut killed = Vec::new();
        loop {
            match emu.run(RunLimit::to_exit().and_processes()).expect("run") {
                Stop::Process(ProcessEvent::Switch { from, to, from_tid, .. }) if from == to => {
                    if let Some(regs) = emu.thread_regs(from_tid) {
                        switched_out.insert(from_tid, regs.expect("a parked thread's registers"));
                    }
                }
                Stop::Process(ProcessEvent::ThreadExit { tid, regs: Some(regs), .. }) => killed.push((tid, regs)),
                Stop::Process(ProcessEvent::Exec { .. }) => break,
                Stop::Exit(exit) => panic!("{arch}: ended without an exec: {exit:?}"),
                _ => {}
            }
        }
        assert_eq!(killed.len(), 2, "{arch}: the leader and the computing sibling");
        for (tid, regs) in &killed {
            assert_eq!(Some(&**regs), switched_out.get(tid), "{arch}: thread {tid}");
        }
        assert_ne!(killed[0].1.pc, killed[1].1.pc, "{arch}");
    }
}
