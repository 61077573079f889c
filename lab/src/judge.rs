//! Judging a run: every perf sample's delivered user stack against the
//! ground truth captured at its NMI ([`Verdict`]), with the reason a stack
//! was lost, tallied into the [`Summary`]; and the scenario's expectations
//! against the finished [`Report`].

use std::collections::BTreeMap;

use kmodel::kernel::Kernel;
use kmodel::tracer::{stitch, PerfRecord, StitchedSample};

use crate::guest::GuestRun;
use crate::report::{Report, SampleResult, Summary, Walk};
use crate::verdict::Verdict;
use kmodel::event::{Event, EventKind};
use kmodel::types::{Cookie, Tid};
use kmodel::unwind::{ExtraWalks, Method, Stop, Trace};

/// The entries of the truth a run made for verdicts alone keeps: a walk
/// delivers at most `UNWIND_MAX_ENTRIES`, and the verdict and its
/// explanation read at most two entries past the last delivered (the first
/// missing one, and the return address after it), so a deeper truth's
/// other entries would be held by every sample for nothing.
pub(crate) const TRUTH_KEPT: usize = kmodel::unwind::UNWIND_MAX_ENTRIES + 2;

/// What the lab saw at a sampling NMI.
pub(crate) struct SampleInfo {
    /// Index of the guest.
    pub(crate) guest: usize,
    /// CPU of the NMI.
    pub(crate) cpu: usize,
    /// Guest instructions at the NMI.
    pub(crate) icount: u64,
    /// Ground truth: PC, then return addresses; in runs made for verdicts
    /// alone, only the innermost [`TRUTH_KEPT`] of them.
    pub(crate) truth: Vec<u64>,
    /// How deep the truth is: its entries, kept or not.
    pub(crate) depth: usize,
    /// For each return address of `truth` (`truth[i + 1]`), the stack
    /// pointer just after its call, where the emulator's ground truth
    /// knows it (`None` for a signal frame's interrupted PC).
    pub(crate) call_sps: Vec<Option<u64>>,
    /// The process it hit and the objects it had mapped then.
    pub(crate) moment: crate::symbolise::Moment,
    /// The `seq` of its NMI's first event (`nmi_enter`).
    pub(crate) nmi: u64,
}

/// Why a sample's stack never arrived (`delivered_empty`: an empty stack
/// was delivered), given how the guests ended and which tracers were
/// cancelled.
fn lost_reason(guest: &GuestRun, cancelled: &[String], delivered_empty: bool) -> String {
    if delivered_empty {
        return if guest.done.is_some() {
            "task exited before the unwind: empty stack delivered".into()
        } else {
            "the unwind found no frame: empty stack delivered".into()
        };
    }
    if guest.asleep_at_end {
        "task asleep in the kernel when profiling ended".into()
    } else if !cancelled.is_empty() {
        format!("tracer cancelled ({})", cancelled.join(", "))
    } else if guest.done.is_none() {
        "profiling ended before the return to user".into()
    } else {
        "no deferred record".into()
    }
}

/// A faultable walk of the kernel model, as its `unwind` event logged it:
/// what found each entry, why it ended, the event's `seq` and its number of
/// entries.
#[derive(Clone, Copy)]
struct OwnWalk<'k> {
    /// The method that found each entry after the PC.
    methods: &'k [Method],
    /// Why it ended.
    stop: &'k Stop,
    /// The event's `seq`.
    seq: u64,
    /// Its number of entries.
    nr: usize,
}

impl OwnWalk<'_> {
    /// The walk as a report holds it.
    fn walk(&self) -> Walk {
        Walk { methods: self.methods.to_vec(), stop: self.stop.clone() }
    }
}

/// The walk behind each deferred callback, by task and cookie: the latest
/// `unwind` event of the task before the callback in the same kernel entry
/// (a cached trace serves every callback of one entry; `unwind_reset_info()`
/// ends it). A sorted array: built once and searched once per sample,
/// cheaper than a tree.
fn walks(events: &[Event]) -> Vec<((Tid, Cookie), OwnWalk<'_>)> {
    let mut last: BTreeMap<Tid, OwnWalk<'_>> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        let Some(tid) = e.tid else { continue };
        match &e.kind {
            EventKind::Unwind { methods, stop, faultable: true, nr, .. } => {
                last.insert(tid, OwnWalk { methods, stop, seq: e.seq, nr: *nr });
            }
            EventKind::Reset { .. } => {
                last.remove(&tid);
            }
            EventKind::Callback { cookie, .. } => {
                if let Some(&walk) = last.get(&tid) {
                    out.push(((tid, *cookie), walk));
                }
            }
            _ => {}
        }
    }
    // The first callback of a task and cookie says which walk it was (a
    // stable sort keeps them in event order).
    out.sort_by_key(|w| w.0);
    out.dedup_by_key(|w| w.0);
    out
}

/// The thread ID of a deferred record with `s`'s cookie written for
/// another thread ID than `s`'s: the perf tool joins by thread, so a
/// thread whose ID changed between the sample and the record (it exec'd
/// as a non-leader and took the leader's) never gets its stack.
fn renamed(buffers: &[Vec<PerfRecord>], s: &StitchedSample) -> Option<kmodel::types::Tid> {
    let cookie = s.cookie?;
    buffers.iter().flatten().find_map(|r| match r {
        PerfRecord::Deferred { tid, cookie: c, .. } if *c == cookie && *tid != s.tid => Some(*tid),
        _ => None,
    })
}

/// Whether a deferred record of `s`'s task came with cookie 0: what
/// `unwind_reset_info()`'s window leaves (an NMI between its cmpxchg and
/// its clearing of `id` got the old cookie; the callback then gets 0).
fn zero_cookie(buffers: &[Vec<PerfRecord>], s: &StitchedSample) -> bool {
    s.cookie.is_some()
        && buffers
            .iter()
            .flatten()
            .any(|r| matches!(r, PerfRecord::Deferred { tid, cookie, .. } if *tid == s.tid && cookie.is_none()))
}

/// Why a deferred sample of `s` got no stack although its task went on:
/// its record went to another thread ID, or came with cookie 0.
pub(crate) const RESET_WINDOW: &str = "its task's deferred record came with cookie 0 (the window in \
     unwind_reset_info() between its cmpxchg and its clearing of the cookie: the request got the old cookie)";

/// What judging needs of a finished run (or of a stretch of it) that no
/// unwinder changes, made once however many unwinders are judged: each
/// perf session's records stitched into samples, and the walk behind each
/// deferred callback.
pub(crate) struct Stitched<'k> {
    /// Per perf session (as `k.tracers().perf`), its stitched samples.
    sessions: Vec<Vec<StitchedSample>>,
    /// [`walks`] of the run, borrowed from its events.
    walks: Vec<((Tid, Cookie), OwnWalk<'k>)>,
}

impl<'k> Stitched<'k> {
    /// Stitches the perf sessions of `k`.
    pub(crate) fn new(k: &Kernel) -> Stitched<'_> {
        Stitched::of(k.tracers().perf.iter().map(|p| stitch(&p.buffers)).collect(), k.events())
    }

    /// Samples already stitched, per session, with the kernel `events`
    /// that made their stacks.
    pub(crate) fn of(sessions: Vec<Vec<StitchedSample>>, events: &'k [Event]) -> Stitched<'k> {
        Stitched { sessions, walks: walks(events) }
    }
}

/// A perf session's records as judging reads them: its name, and its
/// per-CPU buffers (where a lost sample's deferred record may have gone
/// under another thread ID).
#[derive(Clone, Copy)]
pub(crate) struct Session<'k> {
    /// Its name.
    pub(crate) name: &'k str,
    /// Its per-CPU buffers.
    pub(crate) buffers: &'k [Vec<PerfRecord>],
}

impl Session<'_> {
    /// The perf sessions of `k`, as recorded.
    pub(crate) fn of(k: &Kernel) -> Vec<Session<'_>> {
        k.tracers().perf.iter().map(|p| Session { name: &p.name, buffers: &p.buffers }).collect()
    }
}

/// One judged stack of a run's samples, as an unwinder configuration
/// delivered it: what [`SampleResult`] holds that differs between
/// unwinders (the rest, such as the truth, does not).
pub(crate) struct Judged {
    /// What the tracer got.
    pub(crate) delivered: Option<Vec<u64>>,
    /// The walk that made it.
    pub(crate) walk: Option<Walk>,
    /// The verdict.
    pub(crate) verdict: Verdict,
}

impl Judged {
    /// `s` with this stack in place of its own.
    pub(crate) fn put(self, s: &mut SampleResult) {
        s.delivered = self.delivered;
        s.walk = self.walk;
        s.verdict = self.verdict;
    }
}

/// One extra unwinder configuration's stacks of a run, per sample of the
/// report in its order, and their verdict counts; or why they cannot stand
/// for a run with that configuration alone ([`judge_run`]).
pub(crate) type Extra = Result<(Vec<Judged>, Summary), String>;

/// Judges every sample the perf sessions of `k` recorded (`stitched`: of
/// `k`, `taken`: what the lab saw at each NMI), in one pass for the model's
/// own stacks and those of its first `extra` extra unwinder configurations
/// (`KernelOptions::extra_unwinders`; `walks`: the kernel's, taken from it
/// with `Kernel::take_extra_walks`): the report's samples with the summary's
/// verdict counts, and per extra configuration its stacks in their place,
/// each deferred stack that configuration's walk at the same point, so its
/// verdicts are those a run with it alone gives. An extra configuration
/// fails, saying why, where its walks stopped standing for its own run
/// (`walks.diverged`) or a stack came from no faultable walk of the model
/// (an in-NMI walk: no extra walk stands beside it).
///
/// What has one reader is moved rather than copied: each sample's call SPs
/// (copied only for all but the last perf session that recorded the
/// sample), its stitched stacks, and each extra walk's trace (copied only
/// while another sample of the same kernel entry will read it). The truth
/// is copied even so: the copies lie together, in sample order, as
/// validate's passes over the samples read them, while the vectors the lab
/// made at each NMI lie scattered among the run's allocations, and reading
/// those cost those passes more than the copies cost here.
pub(crate) fn judge_run(
    perf: &[Session<'_>],
    stitched: Stitched<'_>,
    taken: BTreeMap<u64, SampleInfo>,
    guests: &[GuestRun],
    cancelled: &[String],
    walks: &mut ExtraWalks,
    extra: usize,
) -> (Vec<SampleResult>, Summary, Vec<Extra>) {
    let Stitched { sessions, walks: own_walks } = stitched;
    // Per stitched sample, in order: its record in `taken`, the model's own
    // walk behind it and the extra walks beside that; and how many
    // stitched samples read each record and each extra walk (the last
    // reader moves what it reads).
    let mut taken: Vec<(u64, SampleInfo)> = taken.into_iter().collect();
    let mut readers = vec![0u32; taken.len()];
    let mut uses = vec![0u32; walks.walks.len()];
    let found: Vec<Option<Found<'_>>> = sessions
        .iter()
        .flatten()
        .map(|s| {
            let at = taken.binary_search_by_key(&s.sample, |t| t.0).ok()?;
            readers[at] += 1;
            let own = s.cookie.and_then(|cookie| {
                let at = own_walks.binary_search_by_key(&(s.tid, cookie), |w| w.0).ok()?;
                Some(own_walks[at].1)
            });
            let beside = own.and_then(|own| walks.index_of(own.seq));
            if let Some(w) = beside {
                uses[w] += 1;
            }
            Some(Found { at, own, beside })
        })
        .collect();
    let mut found = found.into_iter();
    let mut samples = Vec::with_capacity(taken.len());
    let mut summary = Summary::default();
    let mut extras: Vec<Extra> = (0..extra)
        .map(|n| match walks.diverged.get(n).cloned().flatten() {
            Some(why) => Err(why),
            None => Ok((Vec::with_capacity(taken.len()), Summary::default())),
        })
        .collect();
    for (session, stitched) in perf.iter().zip(sessions) {
        for s in stitched {
            let Some(Found { at, own, beside }) = found.next().flatten() else { continue };
            let (info, guest) = (&taken[at].1, &guests[taken[at].1.guest]);
            let verdict = |user: &Option<Vec<u64>>| verdict(user, info, session.buffers, &s, guest, cancelled);
            let last = beside.is_some_and(|w| {
                uses[w] -= 1;
                uses[w] == 0
            });
            for (n, out) in extras.iter_mut().enumerate() {
                let Ok((stacks, counts)) = out else { continue };
                let trace = beside.and_then(|w| walks.walks[w].traces.get_mut(n));
                match extra_stack(&s, own.as_ref(), trace, last) {
                    Ok((delivered, walk)) => {
                        let verdict = verdict(&delivered);
                        tally(counts, &verdict);
                        stacks.push(Judged { delivered, walk, verdict });
                    }
                    Err(why) => *out = Err(why),
                }
            }
            let verdict = verdict(&s.user);
            tally(&mut summary, &verdict);
            // Its record never came, or came with another cookie: perf's
            // tool prints the sample with the cookie as its last frame.
            summary.unstitched += u64::from(s.user.is_none() && s.cookie.is_some());
            readers[at] -= 1;
            let info = &mut taken[at].1;
            let call_sps = match readers[at] {
                0 => std::mem::take(&mut info.call_sps),
                _ => info.call_sps.clone(),
            };
            let delivered_none = s.user.is_none();
            samples.push(SampleResult {
                sample: s.sample,
                tracer: session.name.to_string(),
                guest: guest.name.clone(),
                cpu: info.cpu,
                icount: info.icount,
                truth: info.truth.clone(),
                call_sps,
                kernel: s.kernel,
                delivered: s.user,
                deferred_cpu: s.deferred_cpu,
                walk: own.as_ref().map(OwnWalk::walk),
                verdict,
                never_stitched: (delivered_none && s.cookie.is_some())
                    .then(|| format!("{:#x}", s.cookie.map_or(0, |c| c.id()))),
                at: crate::report::SampleAt {
                    nmi: info.nmi,
                    tid: s.tid,
                    cookie: s.cookie.map(|c| c.id()),
                    unwind: own.map(|w| w.seq),
                },
            });
        }
    }
    (samples, summary, extras)
}

/// What judging one stitched sample reads, found before ([`judge_run`]).
#[derive(Clone, Copy)]
struct Found<'k> {
    /// Its record in the lab's samples (an index into them).
    at: usize,
    /// The model's own walk behind it, if a deferred callback delivered it.
    own: Option<OwnWalk<'k>>,
    /// The extra walks beside that one (an index into `ExtraWalks::walks`).
    beside: Option<usize>,
}

/// The delivered stack of stitched sample `s` and its walk as an extra
/// configuration made them, given the model's own walk behind it (`own`)
/// and that configuration's `trace` beside it, moved out if this is its
/// `last` reader, else copied.
fn extra_stack(
    s: &StitchedSample,
    own: Option<&OwnWalk<'_>>,
    trace: Option<&mut Trace>,
    last: bool,
) -> Result<(Option<Vec<u64>>, Option<Walk>), String> {
    let (entries, walk) = match trace {
        Some(t) if last => (
            Some(std::mem::take(&mut t.entries)),
            Some(Walk {
                methods: std::mem::take(&mut t.methods),
                stop: std::mem::replace(&mut t.stop, Stop::Outermost),
            }),
        ),
        Some(t) => (Some(t.entries.clone()), Some(Walk { methods: t.methods.clone(), stop: t.stop.clone() })),
        None => (None, None),
    };
    // No stack, or an empty one: lost alike for every unwinder.
    let Some(ips) = s.user.as_ref().filter(|ips| !ips.is_empty()) else {
        return Ok((s.user.clone(), walk));
    };
    // The stack the model's own walk delivered: that walk's length.
    match entries.filter(|_| own.is_some_and(|own| own.nr == ips.len())) {
        Some(entries) => Ok((Some(entries), walk)),
        None => Err(format!(
            "sample {}'s user stack came from no faultable walk of the kernel model, so no other unwinder \
             walked beside it",
            s.sample
        )),
    }
}

/// The verdict on stitched sample `s` (of the perf session whose per-CPU
/// buffers are `buffers`) had it been delivered `user`, against the
/// truth the lab saw at its NMI (`info`; its `guest` and the `cancelled`
/// tracers say why a stack was lost).
fn verdict(
    user: &Option<Vec<u64>>,
    info: &SampleInfo,
    buffers: &[Vec<PerfRecord>],
    s: &StitchedSample,
    guest: &GuestRun,
    cancelled: &[String],
) -> Verdict {
    match user {
        Some(ips) if !ips.is_empty() => Verdict::judge_prefix(ips, &info.truth, info.depth),
        Some(_) => Verdict::Lost { why: lost_reason(guest, cancelled, true) },
        None => match renamed(buffers, s) {
            Some(tid) => Verdict::Lost {
                why: format!(
                    "the deferred record names tid {tid}, the sample {} (an exec by a non-leader thread: exchange_tids())",
                    s.tid
                ),
            },
            None if zero_cookie(buffers, s) => Verdict::Lost { why: RESET_WINDOW.into() },
            None => Verdict::Lost { why: lost_reason(guest, cancelled, false) },
        },
    }
}

/// Counts `verdict` in `summary`.
fn tally(summary: &mut Summary, verdict: &Verdict) {
    summary.judged += 1;
    match verdict {
        Verdict::Exact => summary.exact += 1,
        Verdict::Truncated { .. } => summary.truncated += 1,
        Verdict::Wrong { .. } => summary.wrong += 1,
        Verdict::Lost { why } => {
            summary.lost += 1;
            *summary.lost_reasons.entry(why.clone()).or_insert(0) += 1;
        }
    }
    if !matches!(verdict, Verdict::Lost { .. }) {
        summary.delivered += 1;
    }
}

/// The scenario's expectations that `r` does not meet.
pub(crate) fn expectations(r: &Report) -> Vec<String> {
    let Some(x) = &r.scenario.expect else { return Vec::new() };
    let s = &r.summary;
    let mut failures = Vec::new();
    if let Some(min) = x.min_samples.filter(|&m| s.samples < m) {
        failures.push(format!("expected at least {min} samples, got {}", s.samples));
    }
    if let Some(share) = x.min_exact_share {
        let got = if s.judged == 0 { 0.0 } else { s.exact as f64 / s.judged as f64 };
        if got < share {
            failures.push(format!("expected at least {:.1} % exact stacks, got {:.1} %", share * 100.0, got * 100.0));
        }
    }
    if let Some(lost) = x.lost.filter(|&l| l != s.lost) {
        failures.push(format!("expected {lost} lost stacks, got {}", s.lost));
    }
    if let Some(exits) = &x.exit {
        for (name, want) in exits {
            let got = r.guests.iter().find(|g| &g.name == name).and_then(|g| g.exit);
            if got != Some(*want) {
                let got = got.map_or_else(|| "no exit".to_string(), |code| code.to_string());
                failures.push(format!("expected guest {name} to exit with {want}, got {got}"));
            }
        }
    }
    match &x.violations {
        Some(want) => {
            // "invariant NAME violated: …"
            let got: std::collections::BTreeSet<&str> =
                r.violations.iter().filter_map(|v| v.strip_prefix("invariant ")?.split(' ').next()).collect();
            let want: std::collections::BTreeSet<&str> = want.iter().map(String::as_str).collect();
            if got != want {
                failures.push(format!("expected the invariants {want:?} violated, got {got:?}"));
            }
        }
        None if x.no_violations.unwrap_or(true) && s.violations > 0 => {
            failures.push(format!("{} invariant violation(s)", s.violations));
        }
        None => {}
    }
    failures
}
