//! `struct perf_event_attr`: the sampling event's configuration, as perf
//! stores it in a file's attribute section and `HEADER_EVENT_DESC`.

use crate::abi::{Endian, Out, ATTR_SIZE};

/// Bits of the attribute's flags word (their position in the C bitfield).
pub mod flag {
    /// `disabled`.
    pub const DISABLED: u64 = 1 << 0;
    /// `inherit`.
    pub const INHERIT: u64 = 1 << 1;
    /// `mmap`.
    pub const MMAP: u64 = 1 << 8;
    /// `comm`.
    pub const COMM: u64 = 1 << 9;
    /// `freq`.
    pub const FREQ: u64 = 1 << 10;
    /// `task`: FORK and EXIT records.
    pub const TASK: u64 = 1 << 13;
    /// `sample_id_all`: every record ends with the sample's identity.
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    /// `exclude_guest`.
    pub const EXCLUDE_GUEST: u64 = 1 << 20;
    /// `mmap2`.
    pub const MMAP2: u64 = 1 << 23;
    /// `comm_exec`.
    pub const COMM_EXEC: u64 = 1 << 24;
    /// `build_id`: MMAP2 records carry the build-id.
    pub const BUILD_ID: u64 = 1 << 34;
    /// `defer_callchain` (Linux 6.19): user callchains come later, in
    /// `PERF_RECORD_CALLCHAIN_DEFERRED`.
    pub const DEFER_CALLCHAIN: u64 = 1 << 38;
    /// `defer_output` (Linux 6.19): this event writes those records.
    pub const DEFER_OUTPUT: u64 = 1 << 39;
}

/// The fields of `struct perf_event_attr` this writer sets; the rest are 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// `type` (`PERF_TYPE_*`).
    pub kind: u32,
    /// `config`.
    pub config: u64,
    /// `sample_period`.
    pub sample_period: u64,
    /// `sample_type` (`PERF_SAMPLE_*`).
    pub sample_type: u64,
    /// The flags word ([`flag`]).
    pub flags: u64,
    /// `wakeup_events`.
    pub wakeup_events: u32,
    /// `sample_max_stack`.
    pub sample_max_stack: u16,
}

impl Attr {
    /// Encodes the attribute (`ATTR_SIZE` bytes). The flags are a C
    /// bitfield: on a big-endian machine its first field is the word's
    /// most significant bit (perf's reader swaps the bits of each byte).
    pub(crate) fn encode(&self, out: &mut Out, endian: Endian) {
        let start = out.len();
        out.u32(self.kind);
        out.u32(ATTR_SIZE as u32);
        out.u64(self.config);
        out.u64(self.sample_period);
        out.u64(self.sample_type);
        out.u64(0); // read_format
        out.u64(if endian == Endian::Big { self.flags.reverse_bits() } else { self.flags });
        out.u32(self.wakeup_events);
        out.u32(0); // bp_type
        out.u64(0); // config1
        out.u64(0); // config2
        out.u64(0); // branch_sample_type
        out.u64(0); // sample_regs_user
        out.u32(0); // sample_stack_user
        out.u32(0); // clockid
        out.u64(0); // sample_regs_intr
        out.u32(0); // aux_watermark
        out.u16(self.sample_max_stack);
        out.u16(0); // __reserved_2
        out.u32(0); // aux_sample_size
        out.u32(0); // aux_action
        out.u64(0); // sig_data
        out.u64(0); // config3
        out.u64(0); // config4
        debug_assert_eq!(out.len() - start, ATTR_SIZE);
    }
}
