//! Throughput of the pure model (no emulator): deferred requests processed
//! per second through the whole path (NMI, request, task_work, unwind,
//! callbacks, reset), and the stitcher joining deferred callchains.
//! `make bench-kmodel` runs it; figures are in BENCHMARKS.md.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kmodel::arch::{Arch, UserRegs};
use kmodel::event::EntryReason;
use kmodel::kernel::Kernel;
use kmodel::memory::PagedMemory;
use kmodel::tracer::{stitch, PerfScope, UserStackMode};
use kmodel::types::KernelOptions;

const STACK_TOP: u64 = 0x7fff_f000_0000;

fn stack(depth: u64) -> (PagedMemory, UserRegs) {
    let mut mem = PagedMemory::new();
    mem.map(STACK_TOP - 0x10_0000, 0x10_0000);
    let mut fp = STACK_TOP - 0x8000;
    let first = fp;
    for i in 0..depth {
        let caller = if i + 1 == depth { 0 } else { fp + 0x80 };
        mem.write_word(fp, caller, false);
        mem.write_word(fp + 8, 0x40_1000 + i * 0x10, false);
        fp = caller;
    }
    (mem, UserRegs::new(Arch::X86_64, 0x40_0f00, first - 0x40, first, 0))
}

/// `entries` system calls, each sampled by `nmis` NMIs of a perf session
/// getting user stacks the given way.
fn run(entries: u64, nmis: u64, mem: &PagedMemory, regs: &UserRegs, mode: UserStackMode, checks: bool) -> Kernel {
    let mut k = Kernel::new(KernelOptions::default());
    k.set_checks(checks);
    k.add_perf("perf", PerfScope::CpuWide, mode);
    let mm = k.new_mm(Arch::X86_64);
    let t = k.spawn("task", mm, 0);
    for _ in 0..entries {
        k.enter(t, EntryReason::Syscall, regs.clone(), mem);
        for _ in 0..nmis {
            k.advance(100);
            k.nmi(0, None, mem);
        }
        k.return_to_user(t, mem);
    }
    k
}

fn bench(c: &mut Criterion) {
    let (mem, regs) = stack(16);
    let mut group = c.benchmark_group("kmodel");
    let (entries, nmis) = (200u64, 10u64);
    group.throughput(Throughput::Elements(entries * nmis));
    // Same samples, three ways of getting the user stack: the ratios
    // compare the deferred path with the classic baselines in one run.
    // Invariant checking off, as the throughput target is stated; then the
    // deferred path once more with it on, for its cost.
    for (name, mode, checks) in [
        ("deferred_requests", UserStackMode::Deferred, false),
        ("deferred_requests_checked", UserStackMode::Deferred, true),
        ("baseline_fp_in_nmi", UserStackMode::FpInNmi, false),
        ("baseline_copy_8k", UserStackMode::CopyStack { bytes: 8192 }, false),
    ] {
        group.bench_function(name, |b| b.iter(|| run(black_box(entries), nmis, &mem, &regs, mode, checks)));
    }
    let k = run(2000, 5, &mem, &regs, UserStackMode::Deferred, false);
    let buffers = k.tracers().perf[0].buffers.clone();
    let records: usize = buffers.iter().map(Vec::len).sum();
    group.throughput(Throughput::Elements(records as u64));
    group.bench_function("stitch", |b| b.iter(|| stitch(black_box(&buffers))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
