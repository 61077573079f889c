//! The numbers of the perf ABI this writer uses (`include/uapi/linux/perf_event.h`
//! of Linux 7.x, and perf's own record types and header features from
//! `tools/perf/util/{event.h,header.h}`), and the byte buffer records are
//! encoded into, in either byte order.

/// `PERF_RECORD_MMAP`.
pub const RECORD_MMAP: u32 = 1;
/// `PERF_RECORD_LOST`.
pub const RECORD_LOST: u32 = 2;
/// `PERF_RECORD_COMM`.
pub const RECORD_COMM: u32 = 3;
/// `PERF_RECORD_EXIT`.
pub const RECORD_EXIT: u32 = 4;
/// `PERF_RECORD_FORK`.
pub const RECORD_FORK: u32 = 7;
/// `PERF_RECORD_SAMPLE`.
pub const RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_MMAP2`.
pub const RECORD_MMAP2: u32 = 10;
/// `PERF_RECORD_CALLCHAIN_DEFERRED` (Linux 6.19).
pub const RECORD_CALLCHAIN_DEFERRED: u32 = 22;
/// `PERF_RECORD_FINISHED_ROUND` (perf's own: everything before it may be
/// sorted and delivered).
pub const RECORD_FINISHED_ROUND: u32 = 68;
/// `PERF_RECORD_FINISHED_INIT` (perf's own: the synthesized records of
/// what existed before recording began end here).
pub const RECORD_FINISHED_INIT: u32 = 82;

/// `PERF_RECORD_MISC_KERNEL`.
pub const MISC_KERNEL: u16 = 1;
/// `PERF_RECORD_MISC_USER`.
pub const MISC_USER: u16 = 2;
/// `PERF_RECORD_MISC_COMM_EXEC`: a COMM record written by an exec.
pub const MISC_COMM_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an MMAP2 record carrying a build-id.
pub const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: a build-id feature entry with its size.
pub const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// `PERF_SAMPLE_IP`.
pub const SAMPLE_IP: u64 = 1 << 0;
/// `PERF_SAMPLE_TID`.
pub const SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_TIME`.
pub const SAMPLE_TIME: u64 = 1 << 2;
/// `PERF_SAMPLE_CALLCHAIN`.
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// `PERF_SAMPLE_CPU`.
pub const SAMPLE_CPU: u64 = 1 << 7;
/// `PERF_SAMPLE_PERIOD`.
pub const SAMPLE_PERIOD: u64 = 1 << 8;
/// `PERF_SAMPLE_IDENTIFIER`.
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;

/// `PERF_TYPE_HARDWARE`.
pub const TYPE_HARDWARE: u32 = 0;
/// `PERF_COUNT_HW_INSTRUCTIONS`: the lab samples every N instructions.
pub const COUNT_HW_INSTRUCTIONS: u64 = 1;
/// The uprobe PMU's type (`/sys/bus/event_source/devices/uprobe/type`):
/// the kernel numbers the PMUs it registers from `PERF_TYPE_MAX` up, and
/// the uprobe PMU is commonly 8. The perf tool reads a type it does not
/// know as "other" (samples, callchains and the event's name from
/// `HEADER_EVENT_DESC`), with no tracing data needed, which `perf
/// probe`'s tracepoint would need.
pub const TYPE_UPROBE_PMU: u32 = 8;

/// `PERF_CONTEXT_KERNEL`: kernel entries follow in a callchain.
pub const CONTEXT_KERNEL: u64 = (-128i64) as u64;
/// `PERF_CONTEXT_USER`: user entries follow.
pub const CONTEXT_USER: u64 = (-512i64) as u64;
/// `PERF_CONTEXT_USER_DEFERRED`: the next entry is the cookie of a
/// `PERF_RECORD_CALLCHAIN_DEFERRED` to come.
pub const CONTEXT_USER_DEFERRED: u64 = (-640i64) as u64;

/// `sizeof(struct perf_event_attr)` in Linux 7.x (`PERF_ATTR_SIZE_VER9`,
/// with `config4`), what perf 7.x writes.
pub const ATTR_SIZE: usize = 144;
/// `sizeof(struct perf_file_header)`.
pub const FILE_HEADER_SIZE: usize = 104;
/// `NAME_ALIGN` of perf's header strings.
pub const NAME_ALIGN: usize = 64;

/// Header feature bits (`HEADER_*` of `tools/perf/util/header.h`).
pub mod feature {
    /// `HEADER_BUILD_ID`.
    pub const BUILD_ID: u32 = 2;
    /// `HEADER_HOSTNAME`.
    pub const HOSTNAME: u32 = 3;
    /// `HEADER_OSRELEASE`.
    pub const OSRELEASE: u32 = 4;
    /// `HEADER_VERSION`.
    pub const VERSION: u32 = 5;
    /// `HEADER_ARCH`.
    pub const ARCH: u32 = 6;
    /// `HEADER_NRCPUS`.
    pub const NRCPUS: u32 = 7;
    /// `HEADER_CPUDESC`.
    pub const CPUDESC: u32 = 8;
    /// `HEADER_TOTAL_MEM`.
    pub const TOTAL_MEM: u32 = 10;
    /// `HEADER_CMDLINE`.
    pub const CMDLINE: u32 = 11;
    /// `HEADER_EVENT_DESC`.
    pub const EVENT_DESC: u32 = 12;
    /// `HEADER_SAMPLE_TIME`.
    pub const SAMPLE_TIME: u32 = 21;
}

/// Byte order of a file: a perf.data file is in the byte order of the
/// machine that recorded it (perf swaps on reading another's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// x86-64, AArch64 (as Linux runs it).
    Little,
    /// s390x.
    Big,
}

/// A growing byte buffer in one byte order.
#[derive(Debug, Clone)]
pub(crate) struct Out {
    pub(crate) bytes: Vec<u8>,
    endian: Endian,
}

impl Out {
    pub(crate) fn new(endian: Endian) -> Out {
        Out { bytes: Vec::new(), endian }
    }

    pub(crate) fn u16(&mut self, v: u16) {
        let b = if self.endian == Endian::Big { v.to_be_bytes() } else { v.to_le_bytes() };
        self.bytes.extend_from_slice(&b);
    }

    pub(crate) fn u32(&mut self, v: u32) {
        let b = if self.endian == Endian::Big { v.to_be_bytes() } else { v.to_le_bytes() };
        self.bytes.extend_from_slice(&b);
    }

    pub(crate) fn u64(&mut self, v: u64) {
        let b = if self.endian == Endian::Big { v.to_be_bytes() } else { v.to_le_bytes() };
        self.bytes.extend_from_slice(&b);
    }

    pub(crate) fn raw(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
    }

    /// A NUL-terminated string padded with zeros to a multiple of `align`.
    pub(crate) fn c_string(&mut self, s: &[u8], align: usize) {
        let start = self.bytes.len();
        self.raw(s);
        self.bytes.push(0);
        let len = start + (self.bytes.len() - start).next_multiple_of(align);
        self.bytes.resize(len, 0);
    }

    /// Overwrites the u16 at `at`.
    pub(crate) fn set_u16(&mut self, at: usize, v: u16) {
        let b = if self.endian == Endian::Big { v.to_be_bytes() } else { v.to_le_bytes() };
        self.bytes[at..at + 2].copy_from_slice(&b);
    }

    /// Overwrites the u64 at `at`.
    pub(crate) fn set_u64(&mut self, at: usize, v: u64) {
        let b = if self.endian == Endian::Big { v.to_be_bytes() } else { v.to_le_bytes() };
        self.bytes[at..at + 8].copy_from_slice(&b);
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }
}
