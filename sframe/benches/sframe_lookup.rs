//! Lookups of random PCs in a large section (5,000 functions), this crate's
//! reader against `simple-frame-rs` on the same bytes, V2 and V3. The
//! reader is timed two ways: `unwindlab` is [`IndexedSection::lookup`] (the
//! FDE array decoded once, as a walker or profiler holds it), and
//! `unwindlab-unindexed` is [`Section::lookup`] (every FDE probe read from the
//! source, as the kernel reads user memory).
//! `make bench-sframe` runs this and writes the ratio to BENCHMARKS.md.
//!
//! Times are the benchmark thread's CPU time, not the wall clock: the
//! machine's two cores are shared with other jobs, and time spent
//! descheduled would otherwise land on whichever reader criterion happened
//! to be timing (the readers are measured one after the other).

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sframe::write::{encode, RawFunction, RawRow, RawSection};
use sframe::{Abi, IndexedSection, Section, Version};
use std::time::Duration;

/// A deterministic generator (no unseeded randomness in benchmarks either).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const BASE: u64 = 0x60_0000;
const FUNCTIONS: usize = 5000;

/// x86-64-shaped functions: push/mov prologue rows, a body, an epilogue.
fn large_section(version: Version) -> (Vec<u8>, Vec<u64>) {
    let mut rng = Lcg(0x5f3a_9e1d);
    let mut start = 0x40_1000u64;
    let mut functions = Vec::with_capacity(FUNCTIONS);
    for _ in 0..FUNCTIONS {
        let size = 16 + rng.below(2000) as u32;
        let mut rows = vec![RawRow::new(0, true, &[8])];
        let extra = rng.below(12) as u32;
        for k in 1..=extra {
            let at = k * size / (extra + 1);
            let cfa = 8 * (1 + rng.below(40) as i32);
            rows.push(RawRow::new(at, rng.below(3) != 0, &[cfa, -16]));
        }
        functions.push(RawFunction::new(start, size, rows));
        start += u64::from(size) + rng.below(16);
    }
    let end = start;
    let table =
        RawSection { version, abi: Abi::Amd64, flags: 0x5, cfa_fixed_fp_offset: 0, cfa_fixed_ra_offset: -8, functions };
    let bytes = encode(&table, BASE).expect("encodable");
    let pcs = (0..4096).map(|_| 0x40_1000 + rng.below(end - 0x40_1000)).collect();
    (bytes, pcs)
}

/// What both readers compute: the sum of the CFA offsets found.
fn ours(lookup: impl Fn(u64) -> Result<Option<sframe::Lookup>, sframe::Error>, pcs: &[u64]) -> i64 {
    let mut acc = 0i64;
    for &pc in pcs {
        if let Ok(Some(found)) = lookup(pc) {
            if let sframe::RowRule::Frame(f) = found.rule {
                acc += i64::from(f.cfa.offset);
            }
        }
    }
    acc
}

fn theirs(section: &simple_frame_rs::SFrameSection<'_>, pcs: &[u64]) -> i64 {
    let mut acc = 0i64;
    for &pc in pcs {
        if let Ok(Some(fde)) = section.find_fde(pc) {
            if let Ok(Some(fre)) = fde.find_fre(section, pc) {
                acc += i64::from(fre.get_cfa_offset(section).ok().flatten().unwrap_or(0));
            }
        }
    }
    acc
}

/// Criterion's measurement as this thread's CPU time.
struct ThreadCpuTime;

impl ThreadCpuTime {
    fn now() -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime only writes the timespec it is given.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
}

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        Self::now()
    }

    fn end(&self, start: Duration) -> Duration {
        Self::now().saturating_sub(start)
    }

    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        // Durations print the same whichever clock measured them.
        static WALL: WallTime = WallTime;
        WALL.formatter()
    }
}

fn cpu_time() -> Criterion<ThreadCpuTime> {
    Criterion::default().with_measurement(ThreadCpuTime)
}

fn bench(c: &mut Criterion<ThreadCpuTime>) {
    for version in [Version::V2, Version::V3] {
        let (bytes, pcs) = large_section(version);
        let section = Section::parse(bytes.as_slice(), BASE).unwrap();
        let indexed: IndexedSection<&[u8]> = section.clone().indexed().unwrap();
        let other = simple_frame_rs::SFrameSection::from(&bytes, BASE).unwrap();
        for &pc in &pcs {
            assert_eq!(indexed.lookup(pc), section.lookup(pc), "indexed and plain lookups differ at {pc:#x}");
        }
        let expected = theirs(&other, &pcs);
        assert_eq!(ours(|pc| section.lookup(pc), &pcs), expected, "both readers must agree before racing");
        assert_eq!(ours(|pc| indexed.lookup(pc), &pcs), expected, "both readers must agree before racing");
        let mut group = c.benchmark_group(format!("sframe_lookup_{version:?}"));
        group.bench_function("unwindlab", |b| b.iter(|| ours(|pc| black_box(&indexed).lookup(pc), black_box(&pcs))));
        group.bench_function("unwindlab-unindexed", |b| {
            b.iter(|| ours(|pc| black_box(&section).lookup(pc), black_box(&pcs)))
        });
        group.bench_function("simple-frame-rs", |b| b.iter(|| theirs(black_box(&other), black_box(&pcs))));
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = cpu_time();
    targets = bench
}
criterion_main!(benches);
