//! Probes (breakpoints for uprobes): [`Emulator::set_probes`] and
//! [`RunLimit::and_probes`] stop a run before the instruction at a probe
//! address ([`Stop::Probe`]); the thread's next run executes it once and
//! goes on. On the committed guests (`guests/bin/<arch>/`), on every
//! architecture:
//!
//! * a probe stops exactly at every execution of its instruction: the hits
//!   are the stops, one instruction at a time, where the PC is the
//!   address; the registers and ground truth there are those of that stop;
//!   and stepping over every hit changes nothing (output, status, count);
//! * the hits' counts increase, and at a function's entry the ground
//!   truth's innermost return address is the caller's (the one the call
//!   left on the stack or in the link register);
//! * a probe inside a block stops there, also with an instruction-count
//!   limit before, at or after it in the same block (both stops, in order);
//! * a signal handler entered at a probe stop runs first, and the probe
//!   stops again when it returns;
//! * in the threaded guest, probes stop in every worker thread, exactly as
//!   often as the program calls the function;
//! * a run without [`RunLimit::and_probes`] ignores the probes, and a run
//!   with them needs instruction tracking.

mod common;

use emu::{Arch, Config, Emulator, Exit, NmiPoint, RunLimit, Stdin, Stop, Tracking};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One test per architecture of `check(arch)`, `module::x86_64` and so on,
/// so that each runs in parallel with the others and fails on its own.
macro_rules! per_arch {
    ($module:ident: $check:ident) => {
        mod $module {
            #[test]
            fn x86_64() {
                super::$check(super::Arch::X86_64);
            }

            #[test]
            fn aarch64() {
                super::$check(super::Arch::Aarch64);
            }

            #[test]
            fn s390x() {
                super::$check(super::Arch::S390x);
            }
        }
    };
}

/// A committed guest binary.
fn guest(arch: Arch, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name()).join(name)
}

fn load(exe: &Path, args: &[&str], tracking: Tracking) -> Emulator {
    let mut argv = vec![exe.to_string_lossy().into_owned().into_bytes()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    let config = Config { args: argv, stdin: Stdin::Bytes(Vec::new()), tracking, ..Config::default() };
    Emulator::load(exe, config).expect("load the guest")
}

/// How a run ended: status, output and instruction count.
fn ending(emu: &Emulator, exit: Exit) -> (Exit, Vec<u8>, u64) {
    (exit, emu.stdout().to_vec(), emu.icount())
}

/// The guest's run without probes.
fn plain_run(exe: &Path, args: &[&str]) -> (Exit, Vec<u8>, u64) {
    let mut emu = load(exe, args, Tracking::Blocks);
    let exit = emu.run_to_exit().expect("run");
    ending(&emu, exit)
}

/// A probe hit: the address and the state there (from
/// [`Emulator::nmi_point`]), with the reference count and ground truth
/// when the run has them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hit {
    addr: u64,
    point: NmiPoint,
    reference: Option<(u64, Vec<u64>)>,
}

/// Runs to the end, stepping over every probe hit with `limit` (which
/// must ask for probes); returns the hits and how the run ended.
fn run_with_probes(emu: &mut Emulator, limit: RunLimit) -> (Vec<Hit>, (Exit, Vec<u8>, u64)) {
    let mut hits = Vec::new();
    loop {
        match emu.run(limit).expect("run") {
            Stop::Probe(addr) => {
                let point = emu.nmi_point().expect("the state at the probe");
                assert_eq!(point.pc, addr, "a probe stop at another PC");
                let reference = emu.reference_icount().zip(emu.reference_ground_truth());
                hits.push(Hit { addr, point, reference });
            }
            Stop::Exit(exit) => return (hits, ending(emu, exit)),
            Stop::Limit | Stop::Syscall(_) | Stop::Process(_) => {}
        }
    }
}

/// Every stop of a run that stops before each instruction (no probes)
/// where the PC is in `addrs`.
fn stepped_visits(exe: &Path, args: &[&str], addrs: &BTreeSet<u64>) -> (Vec<NmiPoint>, (Exit, Vec<u8>, u64)) {
    let mut emu = load(exe, args, Tracking::Blocks);
    let mut visits = Vec::new();
    loop {
        if addrs.contains(&emu.regs().expect("registers").pc) {
            visits.push(emu.nmi_point().expect("the state"));
        }
        match emu.run(RunLimit::icount(emu.icount() + 1)).expect("run") {
            Stop::Exit(exit) => return (visits, ending(&emu, exit)),
            Stop::Limit => {}
            other => panic!("unexpected stop {other:?}"),
        }
    }
}

/// The return address a call has just left for the function it entered
/// (on the stack on x86-64, in the link register elsewhere).
fn return_address(emu: &mut Emulator) -> u64 {
    let regs = emu.regs().expect("registers");
    match regs.ra {
        Some(ra) => ra,
        None => {
            let mut word = [0u8; 8];
            emu.read(regs.sp, &mut word, kmodel::memory::Access::NoFault).expect("read the stack");
            u64::from_le_bytes(word)
        }
    }
}

/// Probes at the entries of `recurse` (21 calls for `lab recurse 20`) and
/// of `leaf` (called from the tail-call chain): the hits are exactly the
/// one-instruction stops at those addresses, with the same state; the
/// counts increase; the innermost return address is the caller's; the run
/// ends as without probes, also with the per-instruction reference, which
/// agrees at every hit.
fn hits_are_the_executions(arch: Arch) {
    let exe = guest(arch, "lab-o2");
    let args = ["recurse", "20"];
    let (recurse, leaf, main) =
        (common::function(&exe, "recurse"), common::function(&exe, "leaf"), common::function(&exe, "main"));
    let probes = BTreeSet::from([recurse.start, leaf.start]);
    let plain = plain_run(&exe, &args);

    let mut emu = load(&exe, &args, Tracking::Blocks);
    emu.set_probes(probes.iter().copied());
    assert_eq!(emu.probes(), &probes);
    let mut hits = Vec::new();
    let ended = loop {
        match emu.run(RunLimit::to_exit().and_probes()).expect("run") {
            Stop::Probe(addr) => {
                let point = emu.nmi_point().expect("the state at the probe");
                assert_eq!(point.pc, addr, "{arch}");
                assert!(probes.contains(&addr), "{arch}: {addr:#x}");
                // The caller's return address, innermost.
                assert_eq!(point.ground_truth.first(), Some(&return_address(&mut emu)), "{arch}: at {}", point.icount);
                hits.push(Hit { addr, point, reference: None });
            }
            Stop::Exit(exit) => break ending(&emu, exit),
            other => panic!("{arch}: unexpected stop {other:?}"),
        }
    };
    assert_eq!(ended, plain, "{arch}: probes changed the run");
    let count = |addr: u64| hits.iter().filter(|h| h.addr == addr).count();
    assert_eq!(count(recurse.start), 21, "{arch}: calls of recurse");
    assert!(count(leaf.start) >= 5, "{arch}: {} calls of leaf", count(leaf.start));
    assert!(hits.windows(2).all(|w| w[0].point.icount < w[1].point.icount), "{arch}: counts do not increase");
    // recurse(20) is main's call, the 20 others recurse's own.
    let callers: Vec<bool> =
        hits.iter().filter(|h| h.addr == recurse.start).map(|h| main.contains(&h.point.ground_truth[0])).collect();
    assert_eq!(callers.iter().filter(|&&from_main| from_main).count(), 1, "{arch}");
    assert!(callers[0], "{arch}: the first call is main's");

    // The same stops, one instruction at a time, without probes.
    let (visits, stepped_end) = stepped_visits(&exe, &args, &probes);
    assert_eq!(stepped_end, plain, "{arch}: stepping changed the run");
    let points: Vec<&NmiPoint> = hits.iter().map(|h| &h.point).collect();
    assert_eq!(points, visits.iter().collect::<Vec<_>>(), "{arch}: hits differ from the executions");

    // With the per-instruction reference: the same hits, and the
    // reference agrees at each.
    let mut reference = load(&exe, &args, Tracking::Instructions);
    reference.set_probes(probes.iter().copied());
    let (reference_hits, reference_end) = run_with_probes(&mut reference, RunLimit::to_exit().and_probes());
    assert_eq!(reference_end, plain, "{arch}: with the reference");
    for (hit, fast) in reference_hits.iter().zip(&hits) {
        assert_eq!((hit.addr, &hit.point), (fast.addr, &fast.point), "{arch}: with the reference");
        let (icount, truth) = hit.reference.clone().expect("the reference");
        assert_eq!((icount, &truth), (hit.point.icount, &hit.point.ground_truth), "{arch}: reference at a hit");
    }
    assert_eq!(reference_hits.len(), hits.len(), "{arch}: with the reference");

    // Without `and_probes` the probes are not looked at.
    let mut ignored = load(&exe, &args, Tracking::Blocks);
    ignored.set_probes(probes.iter().copied());
    let exit = ignored.run_to_exit().expect("run");
    assert_eq!(ending(&ignored, exit), plain, "{arch}: a run without probes");
}

per_arch!(hits_are_the_executions_on: hits_are_the_executions);

/// Runs `emu` with `limit` and probes, expecting `stop` at instruction
/// count `icount` with the PC at `pc`.
#[track_caller]
fn expect(emu: &mut Emulator, limit: u64, stop: Stop, icount: u64, pc: u64) {
    let got = emu.run(RunLimit::icount(limit).and_probes()).expect("run");
    let at = (emu.icount(), emu.regs().expect("registers").pc);
    assert_eq!((got, at), (stop, (icount, pc)));
}

/// Probes inside a block (the first block of `recurse`, straight-line
/// code on every architecture), alone and with a count limit before, at
/// and after them in the same block: each stop is exact and reported in
/// order, and the state at a probe is that of the one-instruction stop
/// there. With the reference too, whose count and ground truth agree.
fn probes_inside_a_block(arch: Arch, tracking: Tracking) {
    let exe = guest(arch, "lab-o2");
    let args = ["recurse", "3"];
    let recurse = common::function(&exe, "recurse").start;
    // The count at recurse's first entry, and its first instructions.
    let mut emu = load(&exe, &args, tracking);
    emu.set_probes([recurse]);
    assert_eq!(emu.run(RunLimit::to_exit().and_probes()).expect("run"), Stop::Probe(recurse), "{arch}");
    let entry = emu.icount();
    let mut pcs = vec![recurse];
    let mut points = vec![emu.nmi_point().expect("state")];
    for n in 1..5 {
        assert_eq!(emu.run(RunLimit::icount(entry + n).and_probes()).expect("run"), Stop::Limit, "{arch}");
        points.push(emu.nmi_point().expect("state"));
        pcs.push(points[n as usize].pc);
    }
    assert!(pcs.windows(2).all(|w| w[0] < w[1] && w[1] - w[0] <= 16), "{arch}: not straight-line: {pcs:x?}");
    let fresh = |probes: &[u64]| {
        let mut emu = load(&exe, &args, tracking);
        emu.set_probes(probes.iter().copied());
        emu
    };

    // A probe alone, in the block: the same state as the count stop there.
    let mut emu = fresh(&[pcs[2]]);
    assert_eq!(emu.run(RunLimit::to_exit().and_probes()).expect("run"), Stop::Probe(pcs[2]), "{arch}");
    assert_eq!(emu.nmi_point().expect("state"), points[2], "{arch}: at a probe inside a block");
    if tracking == Tracking::Instructions {
        assert_eq!(emu.reference_icount(), Some(entry + 2), "{arch}");
        assert_eq!(emu.reference_ground_truth(), Some(points[2].ground_truth.clone()), "{arch}");
    }
    // Stepping over it: just that instruction.
    expect(&mut emu, entry + 3, Stop::Limit, entry + 3, pcs[3]);

    // A limit before the probe in the block, then the probe, then a limit after it.
    let mut emu = fresh(&[pcs[3]]);
    expect(&mut emu, entry + 1, Stop::Limit, entry + 1, pcs[1]);
    expect(&mut emu, entry + 100, Stop::Probe(pcs[3]), entry + 3, pcs[3]);
    expect(&mut emu, entry + 4, Stop::Limit, entry + 4, pcs[4]);
    assert_eq!(emu.nmi_point().expect("state"), points[4], "{arch}");

    // A limit at the probe: the limit first, then the probe, at the same place.
    let mut emu = fresh(&[pcs[2]]);
    expect(&mut emu, entry + 2, Stop::Limit, entry + 2, pcs[2]);
    expect(&mut emu, entry + 100, Stop::Probe(pcs[2]), entry + 2, pcs[2]);
    // A run that ends where it starts stops at once; the skip waits.
    expect(&mut emu, entry + 2, Stop::Limit, entry + 2, pcs[2]);
    expect(&mut emu, entry + 3, Stop::Limit, entry + 3, pcs[3]);

    // Two probes in one block, and one at its start: each stops once per pass.
    let mut emu = fresh(&[recurse, pcs[1], pcs[3]]);
    let (hits, end) = run_with_probes(&mut emu, RunLimit::to_exit().and_probes());
    let order: Vec<u64> = hits.iter().take(3).map(|h| h.addr).collect();
    assert_eq!(order, [recurse, pcs[1], pcs[3]], "{arch}");
    assert_eq!(hits.len(), 3 * 4, "{arch}: recurse(3) is 4 calls");
    assert_eq!(end, plain_run(&exe, &args), "{arch}");
    for hit in &hits {
        if let Some((icount, truth)) = &hit.reference {
            assert_eq!((icount, truth), (&hit.point.icount, &hit.point.ground_truth), "{arch}");
        }
    }
}

/// [`probes_inside_a_block`] under each tracking that supports probes.
fn probes_inside_a_block_tracked(arch: Arch) {
    for tracking in [Tracking::Blocks, Tracking::Instructions, Tracking::Count] {
        probes_inside_a_block(arch, tracking);
    }
}

per_arch!(probes_inside_a_block_on: probes_inside_a_block_tracked);

/// A signal sent while a thread is stopped at a probe in `deep` (in `lab
/// signal`, whose SIGUSR1 handler calls `recurse(5)`): the handler runs
/// before the probed instruction (its six `recurse` hits come next), and
/// the probe stops again, with the same registers, once it has returned.
#[test]
fn a_signal_handler_runs_before_the_probed_instruction() {
    for arch in Arch::ALL {
        let exe = guest(arch, "lab-o2");
        let (deep, recurse) = (common::function(&exe, "deep").start, common::function(&exe, "recurse").start);
        let mut emu = load(&exe, &["signal"], Tracking::Blocks);
        emu.set_probes([deep, recurse]);
        // Into the chain of 41 calls of deep.
        for _ in 0..10 {
            assert_eq!(emu.run(RunLimit::to_exit().and_probes()).expect("run"), Stop::Probe(deep), "{arch}");
        }
        let before = emu.nmi_point().expect("state");
        emu.send_signal(10).expect("SIGUSR1");
        for _ in 0..6 {
            assert_eq!(emu.run(RunLimit::to_exit().and_probes()).expect("run"), Stop::Probe(recurse), "{arch}");
        }
        assert_eq!(emu.run(RunLimit::to_exit().and_probes()).expect("run"), Stop::Probe(deep), "{arch}");
        let again = emu.nmi_point().expect("state");
        assert!(again.icount > before.icount, "{arch}");
        assert_eq!((again.regs, again.ground_truth), (before.regs, before.ground_truth), "{arch}");
        // 31 more calls of deep, and the handler raised by the program.
        let (hits, (exit, _, _)) = run_with_probes(&mut emu, RunLimit::to_exit().and_probes());
        assert_eq!(exit, Exit::Code(0), "{arch}");
        let count = |addr: u64| hits.iter().filter(|h| h.addr == addr).count();
        assert_eq!((count(deep), count(recurse)), (31, 6), "{arch}");
    }
}

/// The worker threads of `threads workers 4` (96 items on a queue, each
/// `deep(8 + i % 13)` and `item_bottom(i)`), with a short quantum so that
/// they take turns often: the probes stop in every worker thread, as
/// often as the program calls the functions, and the run ends as without
/// probes (the instruction counts, hence the schedule, are the same).
fn probes_in_threads(arch: Arch) {
    let exe = guest(arch, "threads-v3");
    let args = ["workers", "4"];
    let (deep, item_bottom) = (common::function(&exe, "deep").start, common::function(&exe, "item_bottom").start);
    let load_quick = || {
        let mut argv = vec![exe.to_string_lossy().into_owned().into_bytes()];
        argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        let config = Config { args: argv, quantum: 5_000, ..Config::default() };
        Emulator::load(&exe, config).expect("load the guest")
    };
    let mut plain = load_quick();
    let exit = plain.run_to_exit().expect("run");
    let plain = ending(&plain, exit);

    let mut emu = load_quick();
    emu.set_probes([deep, item_bottom]);
    let mut by_thread: BTreeMap<(u64, emu::Tid), usize> = BTreeMap::new();
    let mut last = 0;
    let ended = loop {
        match emu.run(RunLimit::to_exit().and_probes()).expect("run") {
            Stop::Probe(addr) => {
                assert_eq!(emu.regs().expect("registers").pc, addr, "{arch}");
                assert!(emu.icount() > last || last == 0, "{arch}");
                last = emu.icount();
                *by_thread.entry((addr, emu.tid())).or_default() += 1;
            }
            Stop::Exit(exit) => break ending(&emu, exit),
            other => panic!("{arch}: unexpected stop {other:?}"),
        }
    };
    assert_eq!(ended, plain, "{arch}: probes changed the run");
    let total = |addr: u64| by_thread.iter().filter(|((a, _), _)| *a == addr).map(|(_, n)| n).sum::<usize>();
    let threads = |addr: u64| by_thread.keys().filter(|(a, _)| *a == addr).count();
    assert_eq!(total(item_bottom), 96, "{arch}: {by_thread:?}");
    // deep(d) is d + 1 calls.
    let calls: usize = (0..96).map(|i| 8 + i % 13 + 1).sum();
    assert_eq!(total(deep), calls, "{arch}");
    assert!(threads(item_bottom) >= 2 && threads(deep) >= 2, "{arch}: hits in one thread only: {by_thread:?}");
    // The main thread only queues and joins.
    assert!(!by_thread.keys().any(|&(_, tid)| tid == emu::FIRST_PID), "{arch}: {by_thread:?}");
}

per_arch!(probes_stop_in_every_thread_on: probes_in_threads);

/// Without instruction tracking there is no block hook to stop at probes:
/// a run that asks for them is refused (one that does not runs).
#[test]
fn untracked_runs_refuse_probes() {
    for arch in Arch::ALL {
        let exe = guest(arch, "lab-o2");
        let mut emu = load(&exe, &["recurse", "3"], Tracking::Off);
        emu.set_probes([common::function(&exe, "recurse").start]);
        let err = emu.run(RunLimit::to_exit().and_probes()).expect_err("refused").to_string();
        assert!(err.contains("probes need instruction tracking"), "{arch}: {err}");
        assert!(matches!(emu.run_to_exit(), Ok(Exit::Code(0))), "{arch}");
    }
}
