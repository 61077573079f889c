//! The records of a file's data section: what the kernel writes to the ring
//! buffers (samples, deferred callchains, task and mapping events, lost
//! counts) and perf's own `FINISHED_ROUND`/`FINISHED_INIT`, each encoded as
//! `struct perf_event_header` + body + (with `sample_id_all`) the trailer
//! naming the task, time, CPU and event that wrote it.

use crate::abi::*;

/// Which task, when, on which CPU and for which event a record was written
/// (`struct sample_id`, and the matching fields of a sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleId {
    /// Process (thread group) ID.
    pub pid: u32,
    /// Thread ID.
    pub tid: u32,
    /// Time (the clock perf's samples use; nanoseconds).
    pub time: u64,
    /// CPU.
    pub cpu: u32,
    /// The event's ID (one of its attribute's IDs).
    pub id: u64,
}

/// Where a mapped file is: its build-id, or its device and inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileIdentity {
    /// The GNU build-id (at most 20 bytes), with `attr.build_id` set.
    BuildId(Vec<u8>),
    /// Device and inode.
    Inode {
        /// Major device number.
        maj: u32,
        /// Minor device number.
        min: u32,
        /// Inode number.
        ino: u64,
    },
}

/// One record of the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// `PERF_RECORD_SAMPLE` with `IDENTIFIER | IP | TID | TIME | CPU |
    /// PERIOD | CALLCHAIN`.
    Sample {
        /// Who, when, where, which event.
        id: SampleId,
        /// The interrupted IP.
        ip: u64,
        /// It interrupted kernel code (`PERF_RECORD_MISC_KERNEL`), else user.
        kernel: bool,
        /// The period.
        period: u64,
        /// The callchain, with its context markers.
        callchain: Vec<u64>,
    },
    /// `PERF_RECORD_CALLCHAIN_DEFERRED`: the user stack for every sample of
    /// this task that carried `cookie`.
    CallchainDeferred {
        /// Who, when, where, which event.
        id: SampleId,
        /// The cookie.
        cookie: u64,
        /// The user IPs (no context marker).
        ips: Vec<u64>,
    },
    /// `PERF_RECORD_COMM`.
    Comm {
        /// Who, when, where, which event.
        id: SampleId,
        /// The new name (at most 15 bytes are kept by the kernel).
        comm: Vec<u8>,
        /// Written by an exec.
        exec: bool,
    },
    /// `PERF_RECORD_FORK` (a new thread or process).
    Fork {
        /// The new task (pid, tid) with its time, CPU and event.
        id: SampleId,
        /// Parent process.
        ppid: u32,
        /// Parent thread.
        ptid: u32,
    },
    /// `PERF_RECORD_EXIT`.
    Exit {
        /// The task (pid, tid) with its time, CPU and event.
        id: SampleId,
        /// Parent process.
        ppid: u32,
        /// Parent thread.
        ptid: u32,
    },
    /// `PERF_RECORD_MMAP2`: a file mapped into a process.
    Mmap2 {
        /// Who, when, where, which event.
        id: SampleId,
        /// Start address.
        addr: u64,
        /// Length.
        len: u64,
        /// Offset in the file.
        pgoff: u64,
        /// Build-id or inode.
        file: FileIdentity,
        /// `PROT_*`.
        prot: u32,
        /// `MAP_*`.
        flags: u32,
        /// The file's path.
        filename: Vec<u8>,
    },
    /// `PERF_RECORD_MMAP` of the kernel's text (pid -1), what perf record
    /// synthesizes as `[kernel.kallsyms]_text`.
    KernelMmap {
        /// When, which event.
        id: SampleId,
        /// Start address.
        addr: u64,
        /// Length.
        len: u64,
        /// Offset (the address of the reference symbol).
        pgoff: u64,
        /// `[kernel.kallsyms]_text`.
        filename: Vec<u8>,
    },
    /// `PERF_RECORD_LOST`: records a full ring buffer dropped.
    Lost {
        /// Where, when, which event.
        id: SampleId,
        /// How many.
        lost: u64,
    },
    /// `PERF_RECORD_FINISHED_ROUND`.
    FinishedRound,
    /// `PERF_RECORD_FINISHED_INIT`.
    FinishedInit,
}

/// Bytes of a `PERF_RECORD_SAMPLE` ([`Record::Sample`]) with `chain`
/// callchain entries: the header, six fields, the count and the entries.
pub const fn sample_bytes(chain: usize) -> usize {
    8 + 6 * 8 + 8 + 8 * chain
}

/// Bytes of a `PERF_RECORD_CALLCHAIN_DEFERRED` of `nr` entries, with its
/// `sample_id` trailer.
pub const fn deferred_bytes(nr: usize) -> usize {
    8 + 16 + 8 * nr + SAMPLE_ID_BYTES
}

/// Bytes of the sample `perf record --call-graph dwarf` would have had
/// instead: the same fields and kernel callchain, then `PERF_SAMPLE_REGS_USER`
/// (the ABI word and `regs` registers) and `PERF_SAMPLE_STACK_USER` (its
/// size, `stack` bytes, the size copied), the 8 KiB stack copy by default.
/// Saturates rather than overflow for a size no kernel accepts
/// (`sample_stack_user` must be below 64 KiB).
pub const fn dwarf_sample_bytes(chain: usize, regs: u32, stack: u64) -> usize {
    let fixed = sample_bytes(chain) + 8 + 8 * regs as usize + 8 + 8;
    let stack = if stack > usize::MAX as u64 { usize::MAX } else { stack as usize };
    fixed.saturating_add(stack)
}

/// Bytes of the `struct sample_id` trailer (the kernel's `id_header_size`
/// for `TID | TIME | CPU | IDENTIFIER`): `{u32 pid, tid}`, `{u64 time}`,
/// `{u32 cpu, res}`, `{u64 id}`.
const SAMPLE_ID_BYTES: usize = 32;

impl Record {
    /// Appends the record to `out`. `trailer`: the event has `sample_id_all`
    /// (and `sample_type` is [`crate::SAMPLE_TYPE`]).
    pub(crate) fn encode(&self, out: &mut Out, trailer: bool) {
        let start = out.len();
        let header = |out: &mut Out, kind: u32, misc: u16| {
            out.u32(kind);
            out.u16(misc);
            out.u16(0); // the size, set below
        };
        let mut id_trailer = None;
        match self {
            Record::Sample { id, ip, kernel, period, callchain } => {
                header(out, RECORD_SAMPLE, if *kernel { MISC_KERNEL } else { MISC_USER });
                // The fields in the order of sample_type's bits.
                out.u64(id.id);
                out.u64(*ip);
                out.u32(id.pid);
                out.u32(id.tid);
                out.u64(id.time);
                out.u32(id.cpu);
                out.u32(0);
                out.u64(*period);
                out.u64(callchain.len() as u64);
                for &ip in callchain {
                    out.u64(ip);
                }
            }
            Record::CallchainDeferred { id, cookie, ips } => {
                header(out, RECORD_CALLCHAIN_DEFERRED, MISC_USER);
                out.u64(*cookie);
                out.u64(ips.len() as u64);
                for &ip in ips {
                    out.u64(ip);
                }
                id_trailer = Some(id);
            }
            Record::Comm { id, comm, exec } => {
                header(out, RECORD_COMM, if *exec { MISC_COMM_EXEC } else { 0 });
                out.u32(id.pid);
                out.u32(id.tid);
                out.c_string(&comm[..comm.len().min(15)], 8);
                id_trailer = Some(id);
            }
            Record::Fork { id, ppid, ptid } | Record::Exit { id, ppid, ptid } => {
                let kind = if matches!(self, Record::Fork { .. }) { RECORD_FORK } else { RECORD_EXIT };
                header(out, kind, 0);
                out.u32(id.pid);
                out.u32(*ppid);
                out.u32(id.tid);
                out.u32(*ptid);
                out.u64(id.time);
                id_trailer = Some(id);
            }
            Record::Mmap2 { id, addr, len, pgoff, file, prot, flags, filename } => {
                let misc = MISC_USER | if matches!(file, FileIdentity::BuildId(_)) { MISC_MMAP_BUILD_ID } else { 0 };
                header(out, RECORD_MMAP2, misc);
                out.u32(id.pid);
                out.u32(id.tid);
                out.u64(*addr);
                out.u64(*len);
                out.u64(*pgoff);
                match file {
                    FileIdentity::BuildId(b) => {
                        let b = &b[..b.len().min(20)];
                        out.raw(&[b.len() as u8, 0, 0, 0]);
                        out.raw(b);
                        out.raw(&[0; 20][b.len()..]);
                    }
                    FileIdentity::Inode { maj, min, ino } => {
                        out.u32(*maj);
                        out.u32(*min);
                        out.u64(*ino);
                        out.u64(0); // ino_generation
                    }
                }
                out.u32(*prot);
                out.u32(*flags);
                out.c_string(filename, 8);
                id_trailer = Some(id);
            }
            Record::KernelMmap { id, addr, len, pgoff, filename } => {
                header(out, RECORD_MMAP, MISC_KERNEL);
                out.u32(u32::MAX);
                out.u32(0);
                out.u64(*addr);
                out.u64(*len);
                out.u64(*pgoff);
                out.c_string(filename, 8);
                id_trailer = Some(id);
            }
            Record::Lost { id, lost } => {
                header(out, RECORD_LOST, 0);
                out.u64(id.id);
                out.u64(*lost);
                id_trailer = Some(id);
            }
            Record::FinishedRound => header(out, RECORD_FINISHED_ROUND, 0),
            Record::FinishedInit => header(out, RECORD_FINISHED_INIT, 0),
        }
        if let Some(id) = id_trailer.filter(|_| trailer) {
            // struct sample_id for TID | TIME | CPU | IDENTIFIER
            // (SAMPLE_ID_BYTES).
            out.u32(id.pid);
            out.u32(id.tid);
            out.u64(id.time);
            out.u32(id.cpu);
            out.u32(0);
            out.u64(id.id);
        }
        let size = out.len() - start;
        debug_assert!(size.is_multiple_of(8));
        out.set_u16(start + 6, size as u16);
    }

    /// The record's size in bytes when encoded (`sample_id_all` set).
    pub fn size(&self) -> usize {
        let mut out = Out::new(Endian::Little);
        self.encode(&mut out, true);
        out.len()
    }

    /// Its time, for records that carry one.
    pub fn time(&self) -> Option<u64> {
        match self {
            Record::Sample { id, .. }
            | Record::CallchainDeferred { id, .. }
            | Record::Comm { id, .. }
            | Record::Fork { id, .. }
            | Record::Exit { id, .. }
            | Record::Mmap2 { id, .. }
            | Record::KernelMmap { id, .. }
            | Record::Lost { id, .. } => Some(id.time),
            Record::FinishedRound | Record::FinishedInit => None,
        }
    }
}
