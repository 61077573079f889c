//! Guest instructions per second under three kinds of tracking, per
//! architecture, as ratios measured side by side in one run:
//!
//! * **no hooks**: [`Tracking::Off`], the engine with only its memory (TLB-fill) hook;
//! * **shadow stack**: [`Tracking::Blocks`], the block hook that counts
//!   instructions and keeps the ground-truth return-address stack;
//! * **+ NMI**: the same, stopped every 10,007 instructions by an
//!   [`NmiSource`], taking the registers and the ground truth at each stop;
//! * **per-instruction reference**, for scale: [`Tracking::Instructions`]
//!   (the block hook plus a hook on every instruction that decodes it and
//!   keeps the reference stack), no stops.
//!
//! The workload is the committed `lab-o2` guest's `compute` (an LZ77
//! compressor and an expression interpreter: a wide, call-dense tree). Its
//! instruction count comes from the tracked runs (execution is the same in
//! all three). Configurations are interleaved round by round and each
//! figure is the median of the rounds, so a slow moment of the machine hits
//! all three alike. Each run is timed in the CPU time of the thread that
//! runs it (the engine runs on the caller's thread), so other work on a
//! shared machine disturbs the figures less than it would wall-clock time.
//! Loading the program is not timed.
//!
//! `cargo bench -p emu --bench throughput` (or `scripts/emu-throughput.sh`)
//! prints the table for BENCHMARKS.md. Without `--bench` (as under
//! `cargo test --all-targets`) it makes one short pass to check it still works.

mod common;

use common::{median, thread_cpu_time};
use emu::{Arch, Config, Emulator, Exit, NmiSource, Tracking};
use std::path::PathBuf;
use std::time::Duration;

/// The NMI period the issue asks for.
const PERIOD: u64 = 10_007;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    NoHooks,
    ShadowStack,
    ShadowStackNmi,
    Reference,
}

const KINDS: [Kind; 4] = [Kind::NoHooks, Kind::ShadowStack, Kind::ShadowStackNmi, Kind::Reference];

fn guest(arch: Arch) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name()).join("lab-o2")
}

/// Runs the workload once; returns the time of the run and its instruction
/// count (0 without tracking) and NMI count.
fn run(arch: Arch, kind: Kind, rounds: &str) -> (Duration, u64, u64) {
    let exe = guest(arch);
    let tracking = match kind {
        Kind::NoHooks => Tracking::Off,
        Kind::ShadowStack | Kind::ShadowStackNmi => Tracking::Blocks,
        Kind::Reference => Tracking::Instructions,
    };
    let args = ["lab", "compute", rounds].iter().map(|a| a.as_bytes().to_vec()).collect();
    let mut emu = Emulator::load(&exe, Config { args, tracking, ..Config::default() }).expect("load the guest");
    let start = thread_cpu_time();
    let mut nmis = 0;
    if kind == Kind::ShadowStackNmi {
        let source = NmiSource::every(PERIOD).expect("non-zero period");
        while let Some(point) = source.next(&mut emu).expect("run") {
            std::hint::black_box(&point);
            nmis += 1;
        }
    }
    let exit = emu.run_to_exit().expect("run");
    let elapsed = thread_cpu_time() - start;
    assert_eq!(exit, Exit::Code(0), "{arch}: the guest failed");
    (elapsed, emu.icount(), nmis)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, compute) = if full { (5, "48") } else { (1, "1") };
    println!("guest: lab-o2 compute {compute}; median of {rounds} interleaved rounds; NMI period {PERIOD}");
    println!(
        "| architecture | guest instructions | no hooks | shadow stack | shadow stack + NMI every {PERIOD} | \
         per-instruction reference |"
    );
    println!("|---|---|---|---|---|---|");
    for arch in Arch::ALL {
        let mut times = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        let mut icount = 0;
        let mut nmis = 0;
        for _ in 0..rounds {
            for (i, kind) in KINDS.into_iter().enumerate() {
                let (time, count, points) = run(arch, kind, compute);
                times[i].push(time);
                if kind != Kind::NoHooks {
                    assert!(icount == 0 || icount == count, "{arch}: instruction counts differ between runs");
                    icount = count;
                }
                nmis = nmis.max(points);
            }
        }
        assert_eq!(nmis, icount / PERIOD, "{arch}: wrong number of NMIs");
        let medians = times.map(median);
        let rate = |d: Duration| icount as f64 / d.as_secs_f64() / 1e6;
        let base = rate(medians[0]);
        let cell = |d: Duration| format!("{:.1} M/s ({:.0} %)", rate(d), 100.0 * rate(d) / base);
        let cells: Vec<String> = medians[1..].iter().map(|&d| cell(d)).collect();
        println!("| {arch} | {icount} | {base:.1} M/s (100 %) | {} |", cells.join(" | "));
    }
}
