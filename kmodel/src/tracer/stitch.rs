//! The user-space half of deferred callchains: `perf report`'s stitching
//! of `PERF_RECORD_CALLCHAIN_DEFERRED` records to the samples that carry
//! their cookie.

use serde::Serialize;

use super::types::{PerfRecord, UserChain};
use crate::types::{Cookie, Tid};

/// A sample with its user callchain joined in, as `perf script` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StitchedSample {
    /// Sample sequence number.
    pub sample: u64,
    /// Task.
    pub tid: Tid,
    /// CPU of the sample.
    pub cpu: usize,
    /// Time of the sample.
    pub time: u64,
    /// Kernel part.
    pub kernel: Vec<u64>,
    /// User part: `None` when a deferred chain never arrived or its cookie
    /// did not match.
    pub user: Option<Vec<u64>>,
    /// The cookie, for deferred samples.
    pub cookie: Option<Cookie>,
    /// CPU where the deferred record was found.
    pub deferred_cpu: Option<usize>,
}

/// Every record of `buffers` (per CPU) with the CPU whose buffer held it,
/// in the order the perf tool reads them back: by time, and records of
/// one time in the order they were written ([`PerfRecord::written`]),
/// which is the order a real clock would have given them (the lab's
/// clock gives an NMI's sample and its callback's record one timestamp;
/// ordering those by CPU put a record before its sample after a
/// migration to a lower-numbered CPU). The perf.data files are written
/// in this order, and the tool's ordered events keep file order for
/// equal times.
pub fn read_order(buffers: &[Vec<PerfRecord>]) -> Vec<(usize, &PerfRecord)> {
    let mut all: Vec<(u64, u64, usize, &PerfRecord)> = Vec::new();
    for (cpu, buffer) in buffers.iter().enumerate() {
        all.extend(buffer.iter().map(|r| (r.time(), r.written(), cpu, r)));
    }
    all.sort_by_key(|&(time, written, ..)| (time, written));
    all.into_iter().map(|(.., cpu, r)| (cpu, r)).collect()
}

/// Joins deferred callchains to their samples across all per-CPU buffers,
/// as the perf tool does: records in time order; deferred samples queue;
/// a deferred record delivers every queued sample of the same task, merged
/// if the cookie matches; what is still queued at the end is delivered
/// without a user stack.
pub fn stitch(buffers: &[Vec<PerfRecord>]) -> Vec<StitchedSample> {
    let mut stitcher = Stitcher::default();
    let mut out = Vec::new();
    for (buffer_cpu, record) in read_order(buffers) {
        stitcher.feed(buffer_cpu, record, &mut out);
    }
    out.extend(stitcher.finish());
    out.sort_by_key(|s| s.sample);
    out
}

/// What perf's tool hands its `perf script` / `perf report` code for one
/// record with `--no-merge-callchains` (`tool->merge_deferred_callchains`
/// false): every sample at once, a deferred one with its cookie in place
/// of its user stack, and every `PERF_RECORD_CALLCHAIN_DEFERRED` on its
/// own (`tool->callchain_deferred()`), nothing joined
/// (`evlist__deliver_deferred_callchain()`, `util/session.c`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Unmerged {
    /// A sample as written (`user` empty and `cookie` set for a deferred one).
    Sample(StitchedSample),
    /// A deferred callchain record.
    Callchain {
        /// Time.
        time: u64,
        /// CPU whose buffer held it.
        cpu: usize,
        /// Thread.
        tid: Tid,
        /// Its cookie.
        cookie: Cookie,
        /// The user IPs.
        ips: Vec<u64>,
    },
}

/// Sample `record` as the tool reads it, before any deferred record: a
/// deferred one with its cookie and no user stack, any other with the IPs
/// it carries (`None` for a deferred callchain record).
fn as_read(record: &PerfRecord) -> Option<StitchedSample> {
    let PerfRecord::Sample { time, cpu, tid, sample, kernel, user, .. } = record else { return None };
    let (user, cookie) = match user {
        UserChain::Deferred { cookie } => (None, Some(*cookie)),
        UserChain::Ips(ips) | UserChain::Copied { ips, .. } => (Some(ips.clone()), None),
        UserChain::None => (None, None),
    };
    Some(StitchedSample {
        sample: *sample,
        tid: *tid,
        cpu: *cpu,
        time: *time,
        kernel: kernel.to_vec(),
        user,
        cookie,
        deferred_cpu: None,
    })
}

/// Every record of `buffers` as `--no-merge-callchains` delivers it, in
/// the order the tool reads them ([`read_order`]).
pub fn unmerged(buffers: &[Vec<PerfRecord>]) -> Vec<Unmerged> {
    read_order(buffers)
        .into_iter()
        .filter_map(|(buffer_cpu, record)| {
            as_read(record).map(Unmerged::Sample).or_else(|| match record {
                PerfRecord::Deferred { time, tid, cookie, ips, .. } => Some(Unmerged::Callchain {
                    time: *time,
                    cpu: buffer_cpu,
                    tid: *tid,
                    cookie: *cookie,
                    ips: ips.clone(),
                }),
                PerfRecord::Sample { .. } => None,
            })
        })
        .collect()
}

/// [`stitch()`] a record at a time, for a reader that takes the records
/// as they are written (in [`read_order`]) and keeps only what is still
/// waiting: the deferred samples whose task has had no deferred record
/// since.
#[derive(Debug, Default)]
pub struct Stitcher {
    /// Deferred samples waiting for their task's next deferred record.
    queue: Vec<StitchedSample>,
}

impl Stitcher {
    /// Reads `record` (from `buffer_cpu`'s buffer), adding to `out` every
    /// sample it completes: itself if it needs no deferred record, else
    /// the queued samples of its task if it is one.
    pub fn feed(&mut self, buffer_cpu: usize, record: &PerfRecord, out: &mut Vec<StitchedSample>) {
        match record {
            PerfRecord::Sample { .. } => match as_read(record) {
                Some(s) if s.cookie.is_some() => self.queue.push(s),
                Some(s) => out.push(s),
                None => {}
            },
            PerfRecord::Deferred { tid, cookie, ips, .. } => {
                let mut kept = Vec::new();
                for mut s in self.queue.drain(..) {
                    if s.tid != *tid {
                        kept.push(s);
                        continue;
                    }
                    if s.cookie == Some(*cookie) {
                        s.user = Some(ips.clone());
                        s.deferred_cpu = Some(buffer_cpu);
                    }
                    out.push(s);
                }
                self.queue = kept;
            }
        }
    }

    /// The samples still waiting, in the order they came.
    pub fn queued(&self) -> &[StitchedSample] {
        &self.queue
    }

    /// The end of the records: every sample still waiting, without a user
    /// stack.
    pub fn finish(self) -> Vec<StitchedSample> {
        self.queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample on CPU 1 and, written after it with the same timestamp,
    /// its deferred record on CPU 0 (the task migrated down before its
    /// return to user, no time passing): read sample first, stitched.
    #[test]
    fn a_record_of_the_samples_timestamp_on_a_lower_cpu_is_read_after_it() {
        let cookie = Cookie { cpu: 2, cnt: 3, big_endian: false };
        let sample = PerfRecord::Sample {
            time: 7,
            cpu: 1,
            tid: 5,
            tgid: 5,
            ip: 0x1000,
            sample: 0,
            kernel: &[],
            user: UserChain::Deferred { cookie },
            written: 0,
        };
        let deferred = PerfRecord::Deferred { time: 7, cpu: 0, tid: 5, tgid: 5, cookie, ips: vec![0x1000], written: 1 };
        let buffers = vec![vec![deferred], vec![sample]];
        let order: Vec<u64> = read_order(&buffers).iter().map(|(_, r)| r.written()).collect();
        assert_eq!(order, [0, 1]);
        let stitched = stitch(&buffers);
        assert_eq!(stitched[0].user.as_deref(), Some(&[0x1000][..]));
        assert_eq!(stitched[0].deferred_cpu, Some(0));
    }
}
