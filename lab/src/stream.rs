//! Judging as the run goes, for `validate`: every chunk of samples the
//! run stops to read what the kernel wrote since (perf records, the
//! events behind each deferred stack, the extra unwinders' walks), stitches
//! it as the perf tool would, judges the samples whose stacks came, folds
//! their verdicts into per-unwinder counts and groups
//! ([`crate::explain::Groups`]) and forgets them. What the run holds is
//! then bounded by the chunk and the groups, not by the samples.
//!
//! The verdicts are those of judging after the run (`judge::judge_run`
//! over the whole run, which this calls per chunk): a chunk is a prefix of
//! the records in the perf tool's read order (one CPU: one buffer, written
//! in time order), and a deferred stack's record, its walk's event and its
//! extra walks are made in one kernel entry, so in one chunk. A sample
//! with no stack is judged at the end, when how its task ended is known.

use std::collections::BTreeMap;

use kmodel::tracer::{read_order, PerfRecord, StitchedSample, Stitcher};
use kmodel::unwind::{ExtraWalks, Method};

use crate::explain::Groups;
use crate::explanation::Failure;
use crate::judge::{Session, Stitched};
use crate::report::{Report, Summary};
use crate::schedule::Run;
use crate::symbolise::GuestSymbols;

/// Samples taken between two reads of what the kernel wrote, unless told
/// otherwise: enough that the symbols rebuilt per read (the emulator's
/// object events replayed; each file is parsed once) cost little, few
/// enough that a chunk's truths and records stay a few megabytes even at
/// the deepest stacks (a sample 1,000 frames deep holds about 25 KiB until
/// it is judged: its truth, its records, the walks behind it). Measured on
/// Debian's bash (BENCHMARKS.md, GROWTH): 4,096 left 100 MiB more than
/// `exec` at that depth, 512 about 50, for the same time.
pub(crate) const CHUNK: usize = 512;

/// One unwinder's verdicts so far.
#[derive(Default)]
struct Tally {
    /// Its verdict counts.
    summary: Summary,
    /// Its non-exact stacks by function and cause.
    groups: Groups,
}

/// What a run judged as it went ends with, per unwinder: its verdict
/// counts and groups, worst first; or why its stacks could not stand for
/// a run of its own.
pub(crate) type Verdicts = Result<(Summary, Vec<Failure>), String>;

/// The judge of a run judged as it goes: `runner::run_judged_as_it_goes`
/// calls [`Judge::after_step`] after every step of the run.
pub(crate) struct Judge {
    /// Per unwinder (the model's own first, then each extra order), the
    /// unwinders its explanations name.
    orders: Vec<Option<Vec<Method>>>,
    /// Samples taken between two reads.
    chunk: u64,
    /// How many samples the run will have taken at the next read.
    next_read: u64,
    /// The perf tool's stitcher, over the run's one perf session.
    stitcher: Stitcher,
    /// The last kernel event read (the kernel keeps a few read ones).
    seen: Option<u64>,
    /// Stitched samples without a stack, judged at the end.
    lost: Vec<StitchedSample>,
    /// Deferred records under another thread ID than a waiting or lost
    /// sample with their cookie, or of its thread with cookie 0: what
    /// `judge::renamed` and `judge::zero_cookie` look for.
    renames: Vec<PerfRecord>,
    /// Per unwinder (the model's own first), its verdicts so far, or why
    /// they cannot stand.
    tallies: Vec<Result<Tally, String>>,
    /// The report each chunk is judged in (its samples and symbols change).
    scratch: Report,
    /// The guests' files, each parsed once for all chunks.
    files: crate::symbolise::SymbolCache,
}

impl Judge {
    /// A judge for `run` (one CPU, at most one perf session) and `extra`
    /// extra unwinder configurations, or why the run must be judged after
    /// it ends.
    pub(crate) fn new(run: &Run<'_>, extra: &[Vec<Method>], chunk: usize) -> Result<Judge, String> {
        if run.scenario.machine.cpus != 1 || run.k.tracers().perf.len() > 1 {
            return Err(format!(
                "scenario {}: only a run on one CPU with at most one perf session is judged as it goes",
                run.scenario.name
            ));
        }
        let scratch = Report::empty(run.scenario);
        let own = run.scenario.kernel.unwinders.clone();
        Ok(Judge {
            orders: std::iter::once(own).chain(extra.iter().cloned().map(Some)).collect(),
            chunk: chunk.max(1) as u64,
            next_read: chunk.max(1) as u64,
            stitcher: Stitcher::default(),
            seen: None,
            lost: Vec::new(),
            renames: Vec::new(),
            tallies: (0..=extra.len()).map(|_| Ok(Tally::default())).collect(),
            scratch,
            files: Default::default(),
        })
    }

    /// After a step of the run: a read ([`Judge::drain`]) once a chunk of
    /// samples has been taken since the last. Counted in samples taken,
    /// not in samples held: the samples still waiting stay in the run, and
    /// a count of those would read after every step once enough waited.
    pub(crate) fn after_step(&mut self, run: &mut Run<'_>) {
        let taken = run.k.tracers().samples;
        if taken >= self.next_read {
            self.drain(run);
            self.next_read = taken + self.chunk;
        }
    }

    /// Reads, stitches and judges what the kernel wrote since the last
    /// call; the samples judged leave `run`.
    fn drain(&mut self, run: &mut Run<'_>) {
        let events = run.k.drain_events();
        let new = events.partition_point(|e| self.seen.is_some_and(|seen| e.seq <= seen));
        self.seen = events.last().map(|e| e.seq).or(self.seen);
        let walks = run.k.drain_extra_walks();
        let buffers = run.k.drain_perf_records(0);
        let mut done = Vec::new();
        for (cpu, record) in read_order(&buffers) {
            if let PerfRecord::Deferred { tid, cookie, .. } = record {
                // Records of another thread ID, or with cookie 0 (the
                // reset window), that a waiting sample's verdict reads.
                let mut waiting = self.stitcher.queued().iter().chain(&self.lost);
                let reads = |s: &kmodel::tracer::StitchedSample| {
                    s.cookie.is_some()
                        && ((s.cookie == Some(*cookie) && s.tid != *tid) || (s.tid == *tid && cookie.is_none()))
                };
                if waiting.any(reads) {
                    self.renames.push(record.clone());
                }
            }
            self.stitcher.feed(cpu, record, &mut done);
        }
        let (mut stacks, lost): (Vec<_>, Vec<_>) =
            done.into_iter().partition(|s| s.user.as_ref().is_some_and(|ips| !ips.is_empty()));
        // A sample without a stack is judged lost, reading none of its
        // truth: only its moment (for the symbols) need stay.
        for s in &lost {
            if let Some(info) = run.samples.get_mut(&s.sample) {
                (info.truth, info.call_sps) = (Vec::new(), Vec::new());
            }
        }
        self.lost.extend(lost);
        stacks.sort_by_key(|s| s.sample);
        self.judge(run, stacks, &events[new..], walks, &[]);
        // What no stitched sample will read again: a sample whose record
        // was read and needs no more (each NMI writes its record at once).
        let mut keep: Vec<u64> = self.stitcher.queued().iter().chain(&self.lost).map(|s| s.sample).collect();
        keep.sort_unstable();
        run.samples.retain(|n, _| keep.binary_search(n).is_ok());
    }

    /// Judges `stitched` (in sample order) with the kernel `events` and
    /// extra `walks` behind their stacks, and the deferred records
    /// `renames` a lost one may have gone to.
    fn judge(
        &mut self,
        run: &mut Run<'_>,
        stitched: Vec<StitchedSample>,
        events: &[kmodel::event::Event],
        walks: Vec<kmodel::unwind::ExtraWalk>,
        renames: &[Vec<PerfRecord>],
    ) {
        if stitched.is_empty() {
            return;
        }
        let symbols = run.symbols(&mut self.files);
        let taken: BTreeMap<_, _> = stitched.iter().filter_map(|s| run.samples.remove_entry(&s.sample)).collect();
        let name = run.k.tracers().perf.first().map_or_else(Default::default, |p| p.name.clone());
        let perf = [Session { name: &name, buffers: renames }];
        let mut walks = ExtraWalks { walks, diverged: Vec::new() };
        let (samples, summary, extras) = crate::judge::judge_run(
            &perf,
            Stitched::of(vec![stitched], events),
            taken,
            &run.guests,
            &run.cancelled,
            &mut walks,
            self.orders.len() - 1,
        );
        self.scratch.samples = samples;
        self.scratch.symbols = symbols;
        let unstitched = summary.unstitched;
        self.fold(0, Ok((Vec::new(), summary)));
        for (n, extra) in extras.into_iter().enumerate() {
            // Stitching is the records', the same for every unwinder.
            self.fold(n + 1, extra.map(|(stacks, summary)| (stacks, Summary { unstitched, ..summary })));
        }
        self.scratch.samples = Vec::new();
    }

    /// Folds the chunk's samples, with `stacks` in place of their own
    /// where given, into unwinder `n`'s verdicts (`summary`: their
    /// counts), or says why that unwinder's verdicts cannot stand.
    fn fold(&mut self, n: usize, judged: crate::judge::Extra) {
        let Ok(tally) = &mut self.tallies[n] else { return };
        let (stacks, summary) = match judged {
            Ok(judged) => judged,
            Err(why) => {
                self.tallies[n] = Err(why);
                return;
            }
        };
        for (s, judged) in self.scratch.samples.iter_mut().zip(stacks) {
            judged.put(s);
        }
        // Explained as a run with these unwinders alone.
        self.scratch.scenario.kernel.unwinders.clone_from(&self.orders[n]);
        tally.summary.add_verdicts(&summary);
        for s in &self.scratch.samples {
            tally.groups.add(&self.scratch, s, s.sample);
        }
    }

    /// The end of the run: what is left read and judged, then the samples
    /// without a stack; per unwinder its verdicts, where the run's extra
    /// walks still stand for its own run, and each guest's objects over
    /// the run.
    pub(crate) fn finish(mut self, run: &mut Run<'_>) -> (Vec<Verdicts>, BTreeMap<String, GuestSymbols>) {
        self.drain(run);
        let mut lost = std::mem::take(&mut self.lost);
        lost.extend(std::mem::take(&mut self.stitcher).finish());
        lost.sort_by_key(|s| s.sample);
        let renames = [std::mem::take(&mut self.renames)];
        self.judge(run, lost, &[], Vec::new(), &renames);
        let diverged = run.k.take_extra_walks().diverged;
        let objects = run.symbols(&mut self.files);
        let verdicts = self
            .tallies
            .into_iter()
            .enumerate()
            .map(|(n, tally)| {
                let tally = tally?;
                match n.checked_sub(1).and_then(|n| diverged.get(n).cloned().flatten()) {
                    Some(why) => Err(why),
                    None => Ok((tally.summary, tally.groups.worst_first())),
                }
            })
            .collect();
        (verdicts, objects)
    }
}
