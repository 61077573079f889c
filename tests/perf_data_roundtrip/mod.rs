//! The perf.data of random runs, read back by a second, independent reader
//! (`linux-perf-data` 0.13 with `linux-perf-event-reader` 0.10): seeded
//! random scenarios from the scenario fuzzer's generator (`lab::fuzz`) on
//! each architecture, run; every perf session in `deferred` or `fp_in_nmi`
//! mode written with `lab::perf_data::file` and read back. The file must
//! read back as written, field by field (the events and attributes, the
//! header features, every record); and its samples and deferred records
//! must be the tracer's records (`report.perf.sessions[i].records`)
//! exactly: pid = tgid, tid, time, CPU, IP, period, the callchain layout
//! (`PERF_CONTEXT_KERNEL` and the kernel part if any, then
//! `PERF_CONTEXT_USER_DEFERRED` and the cookie or `PERF_CONTEXT_USER` and the
//! IPs), the cookie and IPs of each deferred record, their count, and the
//! byte order of the architecture (s390x big-endian). A `copy_stack`
//! session is refused (`PerfDataError::Session`), a run without perf has
//! no file (`PerfDataError::NoPerf`). (A module of `tests/scenario_fuzz.rs`,
//! whose generator it shares.)
//!
//! Where the reader stops (it does not know record type 22, keeps only the
//! attribute flags it names, and does not undo a big-endian file's bitfield
//! order), the test reads the bytes it hands over; see
//! `perfdata/tests/read_back.rs`; the reading half is shared with it
//! (`perfdata/tests/support/reader.rs`).
//! The reader sorts records by time within rounds: a little-endian file's
//! samples and deferred records must come back in the session's order; in
//! a big-endian file the reader finds no time in non-sample records (it
//! reads no `sample_id_all`), so there they are compared as a multiset.

use std::collections::BTreeMap;
use std::path::Path;

use kmodel::arch::Arch;
use kmodel::tracer::{PerfRecord, UserChain, UserStackMode};
use lab::fuzz::{confine, input, Input, FILE};
use lab::perf_data::{file, write, PerfDataError};
use lab::report::Report;
use lab::scenario::{Action, Scenario, Tracer};
include!("../../perfdata/tests/support/reader.rs");

/// `sample_id_all`, `defer_callchain`, `defer_output`.
const SAMPLE_ID_ALL: u64 = 1 << 18;
const DEFER_CALLCHAIN: u64 = 1 << 38;
const DEFER_OUTPUT: u64 = 1 << 39;

// ---------------------------------------------------------------------------
// Random runs.

/// Runs kept per architecture (each with a session written).
const RUNS_PER_ARCH: usize = 16;
/// Seeds tried per architecture at most.
const SEEDS: u64 = 3_000;
/// The command line the files record (`HEADER_CMDLINE`).
const CMDLINE: [&str; 5] = ["unwindlab", "run", FILE, "--perf-data", "perf.data"];

/// `len` deterministic pseudo-random bytes for `seed` (SplitMix64, as
/// tests/scenario_fuzz.rs), the first choosing a generated scenario (not
/// raw text, a mutation or an ELF file: `lab::fuzz::input`).
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut out = super::salted_bytes(seed, 0x9e4f_da7a, len);
    out[0] = (out[0] & !7) | 4 | (out[0] & 3);
    out
}

/// The scenario of `seed`, confined as the fuzz harness runs it; `None`
/// if the generator made one the parser or the harness refuses.
fn scenario(seed: u64) -> Option<Scenario> {
    let data = bytes(seed, 256 + (seed as usize * 37) % 1024);
    let Some(Input::Scenario(text)) = input(&data) else { return None };
    let mut scenario = Scenario::parse(&text, FILE).ok()?;
    confine(&mut scenario).ok()?;
    Some(scenario)
}

/// The perf tracers of `s`, from the start or registered later.
fn perf_tracers(s: &Scenario) -> impl Iterator<Item = &Tracer> {
    let registered = s.events.iter().filter_map(|e| match &e.action {
        Action::Register { tracer } => Some(tracer),
        _ => None,
    });
    s.tracers.iter().chain(registered).filter(|t| matches!(t, Tracer::Perf { .. }))
}

/// The largest stack copy `perf_event_open()` accepts: `sample_stack_user`
/// must be below `USHRT_MAX` and 8-byte aligned (`perf_copy_attr()`).
const MAX_STACK_COPY: u64 = 65_528;

/// Whether `s` copies more stack per sample than the kernel allows. Such
/// runs overflow the model's byte count (`Tracers::perf_bytes()`, a panic
/// in a debug build: seed 137 gives one of 6,221,642,290,684,882,035 bytes
/// on s390x); they are not this test's subject, and are left out.
fn copies_too_much(s: &Scenario) -> bool {
    perf_tracers(s).any(
        |t| matches!(t, Tracer::Perf { user_stack: UserStackMode::CopyStack { bytes }, .. } if *bytes > MAX_STACK_COPY),
    )
}

/// The samples and deferred records perf.data must hold for session `s`:
/// the tracer's records, each with the ID of its CPU's event (`perf record
/// -a` opens one per CPU, `ids[cpu]`).
fn session_records(report: &Report, s: usize, ids: &[u64]) -> Vec<Record> {
    let session = &report.perf.sessions[s];
    let id = |cpu: usize| *ids.get(cpu).unwrap_or_else(|| panic!("no event ID for CPU {cpu} in {ids:?}"));
    session
        .records
        .iter()
        .map(|(cpu, r)| match r {
            PerfRecord::Sample { time, cpu: own, tid, tgid, ip, kernel, user, .. } => {
                assert_eq!(own, cpu, "a sample in the buffer of another CPU");
                let mut callchain = Vec::new();
                if !kernel.is_empty() {
                    callchain.push(CONTEXT_KERNEL);
                    callchain.extend_from_slice(kernel);
                }
                match user {
                    UserChain::Deferred { cookie } => callchain.extend([CONTEXT_USER_DEFERRED, cookie.id()]),
                    UserChain::Ips(ips) => {
                        callchain.push(CONTEXT_USER);
                        callchain.extend_from_slice(ips);
                    }
                    UserChain::Copied { .. } => panic!("a stack copy in a {:?} session", session.mode),
                    UserChain::None => {}
                }
                Record::Sample {
                    id: SampleId { pid: *tgid, tid: *tid, time: *time, cpu: *cpu as u32, id: id(*cpu) },
                    ip: *ip,
                    kernel: !kernel.is_empty(),
                    period: session.period,
                    callchain,
                }
            }
            PerfRecord::Deferred { time, cpu: own, tid, tgid, cookie, ips, .. } => {
                assert_eq!(own, cpu, "a deferred record in the buffer of another CPU");
                Record::CallchainDeferred {
                    id: SampleId { pid: *tgid, tid: *tid, time: *time, cpu: *cpu as u32, id: id(*cpu) },
                    cookie: cookie.id(),
                    ips: ips.clone(),
                }
            }
        })
        .collect()
}

/// What the runs of one architecture covered.
#[derive(Debug, Default, Clone)]
struct Tally {
    seeds: u64,
    runs: usize,
    /// Sessions written and read back, by mode.
    sessions: BTreeMap<&'static str, usize>,
    /// Samples and deferred records compared with the tracer's.
    session_records: usize,
    /// Of them, deferred records, and deferred records with no IPs.
    deferred: usize,
    empty_deferred: usize,
    /// Samples with a deferred and with a frame-pointer user part.
    deferred_samples: usize,
    fp_samples: usize,
    /// All records read back and compared.
    records: usize,
    /// `copy_stack` sessions refused.
    refused: usize,
    /// Runs without perf given `NoPerf`.
    no_perf: usize,
    /// Files written by `lab::perf_data::write` and compared.
    written: usize,
}

/// Checks session `s` of the run of `seed`: written, read back, compared.
fn check_session(report: &Report, s: usize, seed: u64, tally: &mut Tally) {
    let seed_name = format!("seed {seed}");
    let cmdline: Vec<String> = CMDLINE.iter().map(|s| s.to_string()).collect();
    let data = file(report, s, &cmdline).unwrap_or_else(|e| panic!("{seed_name}: {e}"));
    let back = std::panic::catch_unwind(|| round_trip(&data))
        .unwrap_or_else(|_| panic!("{seed_name}: session {s}: the file read back differs from what was written"));
    let arch = report.scenario.machine.arch;
    // The machine, independently of the lab's file().
    let endian = if arch == Arch::S390x { Endian::Big } else { Endian::Little };
    assert_eq!(back.contents.endian, endian, "{arch}: byte order");
    assert_eq!(back.contents.features.arch, arch.name());
    let cpus = report.scenario.machine.cpus as u32;
    assert_eq!(back.contents.features.nr_cpus, (cpus, cpus));
    assert_eq!(back.contents.features.cmdline, cmdline);
    let event = &back.contents.events[0];
    assert_eq!(back.contents.events.len(), 1);
    let session = &report.perf.sessions[s];
    assert_eq!(event.attr.sample_period, session.period);
    let deferred = session.mode == UserStackMode::Deferred;
    assert_eq!(event.attr.sample_type, SAMPLE_TYPE);
    assert_eq!(event.attr.flags & DEFER_CALLCHAIN != 0, deferred, "defer_callchain (bit 38)");
    assert_eq!(event.attr.flags & DEFER_OUTPUT != 0, deferred, "defer_output (bit 39)");
    assert_eq!(event.attr.flags & SAMPLE_ID_ALL, SAMPLE_ID_ALL, "sample_id_all");
    // The tracer's records.
    let want = session_records(report, s, &event.ids);
    let got: Vec<Record> = back
        .in_order
        .iter()
        .filter(|r| matches!(r, Record::Sample { .. } | Record::CallchainDeferred { .. }))
        .cloned()
        .collect();
    assert_eq!(got.len(), want.len(), "{seed_name}: session {}: records", session.name);
    if endian == Endian::Little {
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{seed_name}: session {}: record {i}", session.name);
        }
    } else {
        let sorted = |v: &[Record]| {
            let mut v = v.to_vec();
            v.sort_by_cached_key(|r| format!("{r:?}"));
            v
        };
        assert_eq!(sorted(&got), sorted(&want), "{seed_name}: session {}: records", session.name);
    }
    let mode = match session.mode {
        UserStackMode::Deferred => "deferred",
        UserStackMode::FpInNmi => "fp_in_nmi",
        UserStackMode::CopyStack { .. } => unreachable!(),
    };
    *tally.sessions.entry(mode).or_default() += 1;
    tally.session_records += want.len();
    tally.records += back.in_order.len();
    for r in &want {
        match r {
            Record::CallchainDeferred { ips, .. } => {
                tally.deferred += 1;
                tally.empty_deferred += usize::from(ips.is_empty());
            }
            Record::Sample { callchain, .. } => {
                tally.deferred_samples += usize::from(callchain.contains(&CONTEXT_USER_DEFERRED));
                tally.fp_samples += usize::from(callchain.contains(&CONTEXT_USER));
            }
            _ => {}
        }
    }
}

/// A directory for the files `lab::perf_data::write` writes.
fn out_dir() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// Runs kept for `arch`: seeds tried in order, scenarios of other
/// architectures skipped before running.
fn runs_of(arch: Arch) -> Tally {
    let mut tally = Tally::default();
    let nowhere = out_dir().join("no such directory").join("perf.data");
    for seed in 0..SEEDS {
        if tally.runs == RUNS_PER_ARCH {
            break;
        }
        tally.seeds = seed + 1;
        let Some(scenario) = scenario(seed) else { continue };
        let has_perf = perf_tracers(&scenario).next().is_some();
        if scenario.machine.arch != arch || (!has_perf && tally.no_perf > 0) || copies_too_much(&scenario) {
            continue;
        }
        let Ok(report) = lab::run(&scenario) else { continue };
        let sessions = &report.perf.sessions;
        if sessions.is_empty() {
            // Nothing is written (the path's directory does not exist: a
            // write would fail otherwise).
            let err = write(&report, &nowhere, &[]).expect_err("a run without perf has no perf.data");
            assert!(matches!(err, PerfDataError::NoPerf { .. }), "seed {seed}: {err}");
            tally.no_perf += 1;
            continue;
        }
        let mut written = 0;
        for (s, session) in sessions.iter().enumerate() {
            if let UserStackMode::CopyStack { .. } = session.mode {
                match file(&report, s, &[]) {
                    Err(PerfDataError::Session { tracer, .. }) => assert_eq!(tracer, session.name),
                    other => panic!("seed {seed}: a copy_stack session gave {other:?}"),
                }
                tally.refused += 1;
            } else {
                check_session(&report, s, seed, &mut tally);
                written += 1;
            }
        }
        if written < sessions.len() {
            // A session refused: write() writes no file at all.
            let err = write(&report, &nowhere, &[]).expect_err("a copy_stack session is refused");
            assert!(matches!(err, PerfDataError::Session { .. }), "seed {seed}: {err}");
        } else if tally.written == 0 {
            // write(): the files file() makes, one per session.
            let path = out_dir().join(format!("roundtrip-{}-{seed}.data", arch.name()));
            let cmdline: Vec<String> = CMDLINE.iter().map(|s| s.to_string()).collect();
            let paths = write(&report, &path, &cmdline).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(paths.len(), sessions.len());
            for (s, p) in paths.iter().enumerate() {
                let on_disk = std::fs::read(p).unwrap();
                assert_eq!(on_disk, file(&report, s, &cmdline).unwrap().to_bytes().unwrap(), "{}", p.display());
                std::fs::remove_file(p).unwrap();
            }
            tally.written += paths.len();
        }
        if written > 0 {
            tally.runs += 1;
        }
    }
    tally
}

#[test]
fn random_runs_read_back_as_the_tracers_wrote_them() {
    let start = std::time::Instant::now();
    let tallies: Vec<(Arch, Tally)> = std::thread::scope(|scope| {
        let threads: Vec<_> = Arch::ALL.map(|arch| (arch, scope.spawn(move || runs_of(arch)))).into();
        threads.into_iter().map(|(arch, t)| (arch, t.join().unwrap())).collect()
    });
    let mut total = Tally::default();
    for (arch, t) in &tallies {
        eprintln!("{arch}: {t:?}");
        assert_eq!(t.runs, RUNS_PER_ARCH, "{arch}: too few runs with a perf session written in {SEEDS} seeds");
        total.runs += t.runs;
        total.session_records += t.session_records;
        total.records += t.records;
        total.deferred += t.deferred;
        total.empty_deferred += t.empty_deferred;
        total.deferred_samples += t.deferred_samples;
        total.fp_samples += t.fp_samples;
        total.refused += t.refused;
        total.no_perf += t.no_perf;
        total.written += t.written;
        for (mode, n) in &t.sessions {
            *total.sessions.entry(mode).or_default() += n;
        }
        // Each architecture has deferred sessions with records.
        assert!(t.sessions.get("deferred").copied().unwrap_or(0) > 0 && t.deferred > 0, "{arch}: {t:?}");
    }
    let sessions: usize = total.sessions.values().sum();
    eprintln!(
        "{} runs, {sessions} sessions {:?} read back: {} samples and deferred records compared with the tracers' \
         ({} deferred records, {} of them empty; {} samples with a deferred user part, {} with a frame-pointer \
         one), {} records in all; {} copy_stack sessions refused, {} runs without perf, {} files written; {:.1} s",
        total.runs,
        total.sessions,
        total.session_records,
        total.deferred,
        total.empty_deferred,
        total.deferred_samples,
        total.fp_samples,
        total.records,
        total.refused,
        total.no_perf,
        total.written,
        start.elapsed().as_secs_f64()
    );
    assert!(total.sessions.get("fp_in_nmi").copied().unwrap_or(0) > 0, "no fp_in_nmi session: {total:?}");
    assert!(total.fp_samples > 0 && total.deferred_samples > 0, "{total:?}");
    assert!(total.refused > 0, "no copy_stack session: {total:?}");
    assert!(total.no_perf > 0, "no run without perf: {total:?}");
}
