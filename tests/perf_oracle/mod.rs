//! perf 7.x as the oracle of the lab's stitching: a run's perf.data (`unwindlab
//! run --perf-data`) read by Debian's perf (`scripts/perf`, fetched by `make
//! deps`) must give, sample by sample, the task, CPU, time and kernel+user
//! stack the lab's stitcher (`kmodel::tracer::stitch`, perf's side in the
//! model) gives; `--no-merge-callchains` must show what the model of that
//! mode (`kmodel::tracer::unmerged`) delivers: each sample with its cookie,
//! each deferred record on its own.
//!
//! perf prints a sample whose user part was stitched with the user IPs
//! after the kernel ones (the `PERF_CONTEXT_*` markers are not frames), and
//! one whose record never came, or came with another cookie, with the
//! cookie as its last frame (`(cookie)`, or `[unknown]`): the lab's
//! unstitched sample (no user stack, a cookie) stands for the same.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kmodel::tracer::{stitch, PerfRecord, Unmerged, UserStackMode};

/// One sample or deferred record as `perf script -F tid,cpu,time,ip` prints it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Printed {
    /// Time (ns), CPU, thread.
    pub key: (u64, usize, u32),
    /// `Some(cookie)` for a `DEFERRED CALLCHAIN` record (unmerged output).
    pub deferred: Option<u64>,
    /// Its frames, in order.
    pub frames: Vec<u64>,
}

/// What one scenario's comparison covered.
#[derive(Debug, Default, Clone, Copy)]
pub struct Compared {
    /// Samples compared (merged output).
    pub samples: usize,
    /// Of which perf printed with the cookie: never stitched.
    pub unstitched: usize,
    /// Deferred records compared (`--no-merge-callchains`).
    pub deferred: usize,
}

/// `scripts/perf`, Debian's perf 7.x through its own loader.
fn perf() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/perf")
}

/// Runs `perf script` on `file` with `extra` options; its output.
fn perf_script(file: &Path, extra: &[&str]) -> String {
    let out = Command::new(perf())
        .args(["script", "-i"])
        .arg(file)
        // Addresses only, the model's kernel not named with the host's
        // /proc/kallsyms, every frame of the deepest stack.
        .args(["-F", "tid,cpu,time,ip", "--ns", "--kallsyms", "/dev/null", "--max-stack", "1024"])
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", perf().display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "perf script {} {extra:?} failed: {stderr}", file.display());
    // perf reads our files without a word on stderr.
    assert!(stderr.trim().is_empty(), "perf script {} {extra:?} warned:\n{stderr}", file.display());
    String::from_utf8(out.stdout).expect("perf script prints text")
}

/// Parses `perf script -F tid,cpu,time,ip --ns` output.
pub fn parse(text: &str) -> Vec<Printed> {
    let mut out: Vec<Printed> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(frame) = line.strip_prefix('\t') {
            let ip = u64::from_str_radix(frame.trim(), 16).unwrap_or_else(|_| panic!("frame line {line:?}"));
            out.last_mut().expect("a frame after a header").frames.push(ip);
            continue;
        }
        // "    TID [CPU]     S.NNNNNNNNN: [DEFERRED CALLCHAIN [cookie: X]]"
        let (head, rest) = line.split_once(": ").map_or((line.trim_end_matches(':'), ""), |(h, r)| (h, r));
        let mut words = head.split_whitespace();
        let tid: u32 = words.next().and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("header {line:?}"));
        let cpu: usize = words
            .next()
            .and_then(|w| w.trim_matches(['[', ']']).parse().ok())
            .unwrap_or_else(|| panic!("cpu in {line:?}"));
        let time = words.next().and_then(|w| w.split_once('.')).unwrap_or_else(|| panic!("time in {line:?}"));
        let time = time.0.parse::<u64>().unwrap() * 1_000_000_000 + time.1.parse::<u64>().unwrap();
        let deferred = rest
            .trim()
            .strip_prefix("DEFERRED CALLCHAIN [cookie: ")
            .map(|c| u64::from_str_radix(c.trim_end_matches(']'), 16).unwrap_or_else(|_| panic!("cookie in {line:?}")));
        out.push(Printed { key: (time, cpu, tid), deferred, frames: Vec::new() });
    }
    out
}

/// The first difference between two sorted lists, for a message.
fn first_difference(ours: &[Printed], perfs: &[Printed]) -> String {
    for (i, (a, b)) in ours.iter().zip(perfs).enumerate() {
        if a != b {
            return format!("entry {i}: the lab {a:x?}\n perf {b:x?}");
        }
    }
    format!("the lab has {} entries, perf {}", ours.len(), perfs.len())
}

/// Writes `report`'s perf.data under `dir` and compares perf's reading of
/// each session with the lab's.
pub fn check(report: &lab::Report, dir: &Path) -> Compared {
    let mut compared = Compared::default();
    let name = &report.scenario.name;
    let path = dir.join(format!("{name}.data"));
    let written = lab::perf_data::write(report, &path, &["unwindlab".into(), "test".into()])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    for (session, file) in report.perf.sessions.iter().zip(&written) {
        if matches!(session.mode, UserStackMode::CopyStack { .. }) {
            continue;
        }
        // The lab's side: the session's buffers, stitched as the model's
        // perf tool does.
        let cpus = report.scenario.machine.cpus;
        let mut buffers: Vec<Vec<PerfRecord>> = vec![Vec::new(); cpus];
        for (cpu, r) in &session.records {
            buffers[*cpu].push(r.clone());
        }
        let stitched = stitch(&buffers);
        let mut ours: Vec<Printed> = stitched
            .iter()
            .map(|s| {
                let mut frames = s.kernel.clone();
                match (&s.user, s.cookie) {
                    (Some(user), _) => frames.extend(user),
                    (None, Some(cookie)) => frames.push(cookie.id()),
                    (None, None) => {}
                }
                Printed { key: (s.time, s.cpu, s.tid), deferred: None, frames }
            })
            .collect();
        // Both readings at once (perf starts in ~50 ms; the suite reads
        // 124 files).
        let (merged, unmerged) = std::thread::scope(|scope| {
            let unmerged = scope.spawn(|| perf_script(file, &["--no-merge-callchains"]));
            (perf_script(file, &[]), unmerged.join().expect("perf script --no-merge-callchains"))
        });
        let mut perfs = parse(&merged);
        ours.sort();
        perfs.sort();
        assert!(
            ours == perfs,
            "{name}: perf script disagrees with the lab's stitching: {}",
            first_difference(&ours, &perfs)
        );
        compared.samples += ours.len();
        let unstitched = stitched.iter().filter(|s| s.user.is_none() && s.cookie.is_some()).count();
        compared.unstitched += unstitched;
        // The report counts the samples perf prints with their cookie.
        if report.perf.sessions.len() == 1 {
            assert_eq!(report.summary.unstitched, unstitched as u64, "{name}: the report's never-stitched samples");
        }
        // Unmerged: the model of perf's tool without merging.
        let mut raw: Vec<Printed> = kmodel::tracer::unmerged(&buffers)
            .into_iter()
            .map(|u| match u {
                Unmerged::Sample(s) => {
                    let mut frames = s.kernel;
                    frames.extend(s.user.unwrap_or_default());
                    frames.extend(s.cookie.map(|c| c.id()));
                    Printed { key: (s.time, s.cpu, s.tid), deferred: None, frames }
                }
                Unmerged::Callchain { time, cpu, tid, cookie, ips } => {
                    Printed { key: (time, cpu, tid), deferred: Some(cookie.id()), frames: ips }
                }
            })
            .collect();
        let mut perf_raw = parse(&unmerged);
        raw.sort();
        perf_raw.sort();
        assert!(
            raw == perf_raw,
            "{name}: perf script --no-merge-callchains disagrees with the lab's unmerged delivery: {}",
            first_difference(&raw, &perf_raw)
        );
        compared.deferred += raw.iter().filter(|p| p.deferred.is_some()).count();
        // The report judged what the stitcher delivered.
        let by_number: BTreeMap<u64, _> = stitched.iter().map(|s| (s.sample, s)).collect();
        for s in report.samples.iter().filter(|s| s.tracer == session.name) {
            if let Some(st) = by_number.get(&s.sample) {
                assert_eq!(
                    s.delivered, st.user,
                    "{name}: sample {}: the report's stack is not the stitched one",
                    s.sample
                );
            }
        }
    }
    compared
}
