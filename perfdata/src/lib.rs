//! Writing `perf.data` files: the format `perf record` writes and `perf
//! script`, `perf report`, hotspot and the Firefox Profiler (through `perf
//! script`) read. Made for the lab's runs, so it writes what a Linux 7.x
//! kernel and `perf record --call-graph fp,defer` would have: one sampling
//! event with deferred user callchains (`defer_callchain`, `defer_output`),
//! samples whose callchain ends in `PERF_CONTEXT_USER_DEFERRED` and a
//! cookie, `PERF_RECORD_CALLCHAIN_DEFERRED`, the task and mapping records
//! perf needs to name frames, and the header features that let perf read
//! another architecture's data (arch, CPUs, build-ids, command line).
//!
//! Why our own writer: the maintained crate that writes perf.data
//! (`tracepoint_perf`) writes caller-encoded event bytes around its own
//! tracepoint metadata, so every record here would still be encoded by
//! hand, and it does not know the deferred-callchain attributes; the
//! readers (`linux-perf-data`) do not write. The format is small: a header,
//! the attributes with their IDs, the records, the feature sections. The
//! tests read every file back with `linux-perf-data`, an independent
//! reader, and the lab's conformance tests with perf 7.x itself.
//!
//! * `abi.rs`: the numbers and the byte-order-aware buffer;
//! * `attr.rs`: `struct perf_event_attr`;
//! * `record.rs`: the records;
//! * `file.rs`: the file (header, attributes, data, features).

mod abi;
mod attr;
mod file;
mod record;

pub use abi::{
    feature, Endian, CONTEXT_KERNEL, CONTEXT_USER, CONTEXT_USER_DEFERRED, COUNT_HW_INSTRUCTIONS, MISC_COMM_EXEC,
    MISC_KERNEL, MISC_MMAP_BUILD_ID, MISC_USER, RECORD_CALLCHAIN_DEFERRED, RECORD_COMM, RECORD_EXIT,
    RECORD_FINISHED_INIT, RECORD_FINISHED_ROUND, RECORD_FORK, RECORD_LOST, RECORD_MMAP, RECORD_MMAP2, RECORD_SAMPLE,
    SAMPLE_CALLCHAIN, SAMPLE_CPU, SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_PERIOD, SAMPLE_TID, SAMPLE_TIME, TYPE_HARDWARE,
    TYPE_UPROBE_PMU,
};
pub use attr::{flag, Attr};
pub use file::{BuildId, Error, Event, Features, PerfData};
pub use record::{deferred_bytes, dwarf_sample_bytes, sample_bytes, FileIdentity, Record, SampleId};

/// The sample type of every event this crate writes: `perf record
/// --call-graph fp,defer -a`'s (`IDENTIFIER` as with several events).
pub const SAMPLE_TYPE: u64 =
    SAMPLE_IDENTIFIER | SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_PERIOD | SAMPLE_CALLCHAIN;
