//! The ground-truth return-address stack and the NMI source, on every
//! committed guest binary (`guests/bin/<arch>/lab-<variant>`) and workload:
//!
//! * the fast (per-block) ground truth and instruction count equal the
//!   per-instruction reference at every NMI point and at exit;
//! * the ground truth is right where it can be checked against the symbol
//!   table: deep in `recurse`, and in a signal handler called from a deep stack;
//! * two runs give identical NMI-point sequences, with and without the
//!   per-instruction reference, and stopping does not change what the guest does.

mod common;

use emu::{Arch, Config, Emulator, Exit, NmiPoint, NmiSource, Stdin, Tracking};
use std::path::{Path, PathBuf};

/// The workloads of `guests/src/lab.c` (argv[1], argv[2]), kept small: the
/// per-instruction reference is slow in a debug build.
const WORKLOADS: [&[&str]; 6] = [&["recurse"], &["compute", "1"], &["sleep"], &["exit"], &["sigexit"], &["signal"]];

/// What the `sleep` workload reads from standard input.
const STDIN: &[u8] = b"hello\n";

/// The committed static guest binaries for `arch` (the dynamic `lab-dyn`
/// has its own tests, on Debian's libraries: `dynamic.rs`).
fn guests(arch: Arch) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name());
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("read the guest directory").path())
        .filter(|path| path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("lab-")))
        .filter(|path| !path.ends_with("lab-dyn"))
        .collect();
    paths.sort();
    paths
}

fn load(exe: &Path, args: &[&str], tracking: Tracking) -> Emulator {
    let mut argv = vec![exe.to_string_lossy().into_owned().into_bytes()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    let config = Config { args: argv, stdin: Stdin::Bytes(STDIN.to_vec()), tracking, ..Config::default() };
    Emulator::load(exe, config).expect("load the guest")
}

/// Every NMI point of a run, then how it ended.
fn nmi_points(emu: &mut Emulator, period: u64, mut each: impl FnMut(&Emulator, &NmiPoint)) -> (Vec<NmiPoint>, Exit) {
    let source = NmiSource::every(period).expect("non-zero period");
    let mut points = Vec::new();
    while let Some(point) = source.next(emu).expect("run to the next NMI") {
        assert_eq!(point.icount % period, 0, "stopped off the period at {}", point.icount);
        each(emu, &point);
        points.push(point);
    }
    (points, emu.exit_status().expect("the guest has ended"))
}

/// Fast and per-instruction ground truth (and instruction counts) agree at
/// every NMI point of every workload of every guest of `arch`.
fn fast_equals_reference(arch: Arch) {
    let mut checked = 0;
    for exe in guests(arch) {
        for args in WORKLOADS {
            // Dense stops where the run is short, to cut many blocks; the
            // compute workload runs 1.5 M instructions.
            let period = if args[0] == "compute" { 997 } else { 31 };
            let mut emu = load(&exe, args, Tracking::Instructions);
            let what = format!("{} {}", exe.display(), args.join(" "));
            let mut deepest = 0;
            let (points, exit) = nmi_points(&mut emu, period, |emu, point| {
                let reference = emu.reference_ground_truth().expect("reference tracking");
                assert_eq!(point.ground_truth, reference, "{what}: ground truths differ at {}", point.icount);
                assert_eq!(emu.reference_icount(), Some(point.icount), "{what}: counts differ at {}", point.icount);
                deepest = deepest.max(point.ground_truth.len());
            });
            assert_eq!(emu.ground_truth(), emu.reference_ground_truth().unwrap(), "{what}: at exit");
            assert_eq!(Some(emu.icount()), emu.reference_icount(), "{what}: at exit");
            assert!(emu.shadow_stack().unwrap().overflowed() == 0, "{what}");
            assert!(
                emu.events().iter().all(|e| !matches!(e, emu::Event::Warning { .. })),
                "{what}: {:?}",
                emu.events()
            );
            let expected = match args[0] {
                "exit" => Exit::Code(42),
                "sigexit" => Exit::Code(7),
                _ => Exit::Code(0),
            };
            assert_eq!(exit, expected, "{what}");
            // No NMI at the count the process ended at: there is no instruction left to interrupt.
            assert_eq!(points.len() as u64, (emu.icount() - 1) / period, "{what}");
            // Every workload runs through a call chain dozens of frames deep.
            assert!(deepest >= 40, "{what}: deepest ground truth only {deepest}");
            checked += points.len();
        }
    }
    assert!(checked > 1000, "{arch}: only {checked} NMI points");
}

#[test]
fn fast_ground_truth_equals_per_instruction_reference_x86_64() {
    fast_equals_reference(Arch::X86_64);
}

#[test]
fn fast_ground_truth_equals_per_instruction_reference_aarch64() {
    fast_equals_reference(Arch::Aarch64);
}

#[test]
fn fast_ground_truth_equals_per_instruction_reference_s390x() {
    fast_equals_reference(Arch::S390x);
}

/// The same on C test programs built here with the (cross) compilers: a
/// write fault inside a block, caught by a handler that unwinds with libgcc
/// (`segv`, 1–2.4 M instructions); nested, blocked and alternate-stack
/// signals (`signals`); a static-PIE program (not on s390x, whose Debian
/// toolchain has no `rcrt1.o`).
#[test]
fn fast_ground_truth_equals_reference_on_test_programs() {
    for arch in Arch::ALL {
        let programs: &[(&str, &[&str], u64)] =
            &[("segv", &[], 997), ("signals", &[], 13), ("hello", &["-static-pie"], 13)];
        for &(name, flags, period) in programs {
            if arch == Arch::S390x && flags.contains(&"-static-pie") {
                continue;
            }
            let Some(exe) = common::build(name, arch, flags) else { continue };
            let mut emu = load(&exe, &[], Tracking::Instructions);
            let what = format!("{name} {flags:?} on {arch}");
            let (points, _) = nmi_points(&mut emu, period, |emu, point| {
                assert_eq!(Some(point.ground_truth.clone()), emu.reference_ground_truth(), "{what}: {}", point.icount);
                assert_eq!(Some(point.icount), emu.reference_icount(), "{what}");
            });
            assert_eq!(Some(emu.ground_truth()), emu.reference_ground_truth(), "{what}: at exit");
            assert_eq!(Some(emu.icount()), emu.reference_icount(), "{what}: at exit");
            assert!(points.len() > 1000, "{what}: only {} NMIs", points.len());
        }
    }
}

/// `longjmp` out of a 30-deep recursion (x86-64 `jmp *%rdx`, AArch64
/// `br x30`, s390x `br %r4`) leaves only `main`'s callers; a tail call
/// through a function pointer (an indirect jump) leaves no frame for the
/// function that made it. Stops at every instruction, with the reference.
#[test]
fn longjmp_and_indirect_tail_calls() {
    for arch in Arch::ALL {
        let Some(exe) = common::build("flow", arch, &[]) else { continue };
        let [main, dive, after_longjmp, tail_target] =
            ["main", "dive", "after_longjmp", "tail_target"].map(|name| common::function(&exe, name));
        let mut emu = load(&exe, &[], Tracking::Instructions);
        let (mut in_dive, mut after, mut tail) = (0, None, None);
        nmi_points(&mut emu, 1, |emu, point| {
            assert_eq!(Some(point.ground_truth.clone()), emu.reference_ground_truth(), "{arch}: {}", point.icount);
            if dive.contains(&point.pc) {
                in_dive = in_dive.max(count_in(&point.ground_truth, &dive));
            } else if point.pc == after_longjmp.start {
                after = Some(point.ground_truth.clone());
            } else if point.pc == tail_target.start {
                tail = Some(point.ground_truth.clone());
            }
        });
        assert_eq!(emu.stdout(), b"43\n", "{arch}");
        assert!(in_dive >= 30, "{arch}: {in_dive} frames of dive");
        for (what, truth) in [("after longjmp", after), ("in the tail-called function", tail)] {
            let truth = truth.unwrap_or_else(|| panic!("{arch}: never {what}"));
            // Called from main, nothing of dive or of the tail-calling function left.
            assert!(main.contains(&truth[0]), "{arch} {what}: {truth:x?}");
            assert_eq!(count_in(&truth, &main), 1, "{arch} {what}: {truth:x?}");
            assert_eq!(count_in(&truth, &dive), 0, "{arch} {what}: {truth:x?}");
        }
    }
}

fn count_in(addrs: &[u64], range: &std::ops::Range<u64>) -> usize {
    addrs.iter().filter(|a| range.contains(a)).count()
}

/// Deep in `recurse` (depth 200), the ground truth holds a return address
/// into `recurse` per level, innermost first, then one into `main`.
#[test]
fn recursion_is_deep_and_returns_into_recurse_then_main() {
    for arch in Arch::ALL {
        for exe in guests(arch) {
            let recurse = common::function(&exe, "recurse");
            let main = common::function(&exe, "main");
            let mut emu = load(&exe, &["recurse"], Tracking::Blocks);
            let mut deepest: Vec<u64> = Vec::new();
            nmi_points(&mut emu, 7, |_, point| {
                if recurse.contains(&point.pc) && point.ground_truth.len() > deepest.len() {
                    deepest = point.ground_truth.clone();
                }
            });
            let what = exe.display();
            let in_recurse = count_in(&deepest, &recurse);
            // The outermost call of recurse comes from main; the 200 below it from recurse.
            assert!(in_recurse >= 200, "{what}: {in_recurse} return addresses into recurse");
            assert!(deepest[..in_recurse].iter().all(|a| recurse.contains(a)), "{what}: {deepest:x?}");
            assert!(main.contains(&deepest[in_recurse]), "{what}: recurse's caller {:#x}", deepest[in_recurse]);
            assert_eq!(count_in(&deepest, &main), 1, "{what}");
        }
    }
}

/// In the handler of `lab signal` (which calls `recurse(5)`), the ground
/// truth goes through the signal frame: return addresses into `recurse`, one
/// into the handler, the sigreturn trampoline, the interrupted PC, then the
/// 40 levels of `deep` and `main` under the interrupted `raise`.
#[test]
fn signal_handlers_sit_on_the_interrupted_stack() {
    for arch in Arch::ALL {
        for exe in guests(arch) {
            let (recurse, handler, deep, main) = (
                common::function(&exe, "recurse"),
                common::function(&exe, "handler_return"),
                common::function(&exe, "deep"),
                common::function(&exe, "main"),
            );
            let mut emu = load(&exe, &["signal"], Tracking::Blocks);
            let mut seen = None;
            nmi_points(&mut emu, 3, |emu, point| {
                let Some(stack) = emu.shadow_stack() else { return };
                let in_handler = stack.frames().iter().any(|f| matches!(f.kind, emu::FrameKind::Signal { .. }));
                if seen.is_none() && in_handler && recurse.contains(&point.pc) && point.ground_truth.len() > 50 {
                    seen = Some(point.ground_truth.clone());
                }
            });
            let what = exe.display();
            let truth = seen.unwrap_or_else(|| panic!("{what}: no NMI inside recurse in the handler"));
            let at_handler = truth.iter().position(|a| handler.contains(a)).expect("a return into the handler");
            assert!(truth[..at_handler].iter().all(|a| recurse.contains(a)), "{what}: {truth:x?}");
            // The trampoline and the interrupted PC (in libc's raise) follow the handler.
            let below = &truth[at_handler + 3..];
            assert!(count_in(below, &deep) >= 40, "{what}: {truth:x?}");
            assert_eq!(count_in(below, &main), 1, "{what}: {truth:x?}");
            assert_eq!(count_in(&truth[..at_handler + 3], &deep), 0, "{what}: {truth:x?}");
        }
    }
}

/// Two runs give the same NMI points (PC, SP, instruction count, registers,
/// ground truth); so does a run with the per-instruction reference, and the
/// guest's output and instruction count are those of a run without stops.
#[test]
fn nmi_points_repeat_exactly() {
    for arch in Arch::ALL {
        for (args, period) in [(&["signal"][..], 997), (&["compute", "1"], 10_007)] {
            let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name()).join("lab-o2");
            let run = |tracking| {
                let mut emu = load(&exe, args, tracking);
                let (points, exit) = nmi_points(&mut emu, period, |_, _| {});
                (points, exit, emu.icount(), emu.stdout().to_vec())
            };
            let first = run(Tracking::Blocks);
            let second = run(Tracking::Blocks);
            let what = format!("{arch} {}", args.join(" "));
            assert!(first.0.len() > 2, "{what}: only {} NMIs", first.0.len());
            assert_eq!(first, second, "{what}: two runs differ");
            assert_eq!(first, run(Tracking::Instructions), "{what}: the reference hook changed the run");

            let mut free = load(&exe, args, Tracking::Blocks);
            let exit = free.run_to_exit().expect("run");
            assert_eq!((exit, free.icount(), free.stdout()), (first.1, first.2, &first.3[..]), "{what}");
        }
    }
}

/// Without tracking the guest runs the same, but there is no instruction
/// count, so instruction limits are refused and the ground truth is empty.
#[test]
fn untracked_runs_refuse_instruction_limits() {
    for arch in Arch::ALL {
        let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name()).join("lab-o2");
        let mut tracked = load(&exe, &["recurse"], Tracking::Blocks);
        let tracked_exit = tracked.run_to_exit().expect("run");
        let mut emu = load(&exe, &["recurse"], Tracking::Off);
        assert!(NmiSource::every(1000).unwrap().next(&mut emu).is_err(), "{arch}");
        assert_eq!(emu.run_to_exit().expect("run"), tracked_exit, "{arch}");
        assert_eq!(emu.stdout(), tracked.stdout(), "{arch}");
        assert_eq!(emu.icount(), 0, "{arch}");
        assert!(emu.ground_truth().is_empty() && emu.shadow_stack().is_none(), "{arch}");
    }
}
