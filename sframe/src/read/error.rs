//! Errors of the SFrame reader: values, never panics.

use thiserror::Error;

/// Everything that can go wrong while decoding, validating or looking up an
/// SFrame section. Offsets are section offsets unless said otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The byte source could not deliver the bytes (e.g. a non-resident page
    /// read where faulting is not allowed).
    #[error("memory fault reading section offset {offset:#x}")]
    Fault {
        /// Section offset of the failed read.
        offset: u64,
    },
    /// A field lies (partly) beyond the end of the section.
    #[error("{what} at offset {offset:#x} ({len} bytes) runs past the end of the {size}-byte section")]
    OutOfBounds {
        /// The field being read.
        what: &'static str,
        /// Its offset.
        offset: u64,
        /// Its length.
        len: u64,
        /// The section size.
        size: u64,
    },
    /// The first two bytes are not 0xdee2 in either byte order.
    #[error("bad magic {0:#06x} (expected 0xdee2 in either byte order)")]
    BadMagic(u16),
    /// A version this reader does not know (or that the profile refuses).
    #[error("unsupported SFrame version {0}")]
    UnsupportedVersion(u8),
    /// Flag bits that are undefined for this version.
    #[error("flags {flags:#04x} have bits undefined for version {version} (allowed {allowed:#04x})")]
    BadFlags {
        /// The header's version.
        version: u8,
        /// The header's flags.
        flags: u8,
        /// The allowed set for that version.
        allowed: u8,
    },
    /// An ABI/arch id outside 1..=4.
    #[error("unknown ABI/arch id {0}")]
    UnknownAbi(u8),
    /// The ABI id implies one byte order, the magic another.
    #[error("ABI {abi} is {abi_endian:?}-endian but the magic says {magic_endian:?}-endian")]
    AbiEndianMismatch {
        /// The ABI id.
        abi: u8,
        /// Byte order the ABI implies.
        abi_endian: super::source::Endian,
        /// Byte order the magic number shows.
        magic_endian: super::source::Endian,
    },
    /// Header offsets and lengths that do not describe a valid layout.
    #[error("bad layout: {0}")]
    BadLayout(String),
    /// An FDE index at or beyond the header's FDE count.
    #[error("FDE index {index} out of range (section has {count})")]
    NoSuchFde {
        /// The index asked for.
        index: u32,
        /// Number of FDEs.
        count: u32,
    },
    /// An FDE whose FRE start-address type is not ADDR1/2/4.
    #[error("FDE {fde}: invalid FRE type {value}")]
    BadFreType {
        /// FDE index.
        fde: u32,
        /// The 4-bit value.
        value: u8,
    },
    /// A V3 FDE type other than default or flex.
    #[error("FDE {fde}: unsupported FDE type {value}")]
    BadFdeType {
        /// FDE index.
        fde: u32,
        /// The 5-bit value.
        value: u8,
    },
    /// A PC-type MASK FDE with a repetition size of 0.
    #[error("FDE {fde}: PC type MASK with repetition size 0")]
    MaskWithoutRepSize {
        /// FDE index.
        fde: u32,
    },
    /// Bits set in an FDE info byte that must be zero.
    #[error("FDE {fde}: reserved bits set in info byte {info:#04x}")]
    BadFdeInfo {
        /// FDE index.
        fde: u32,
        /// The info byte.
        info: u8,
    },
    /// FDE start addresses not strictly increasing in a section marked sorted.
    #[error("FDE {fde} starts at {start:#x}, not after FDE {prev} at {prev_start:#x}, although the section is marked sorted")]
    Unsorted {
        /// Index of the offending FDE.
        fde: u32,
        /// Its start.
        start: u64,
        /// Index of the previous FDE.
        prev: u32,
        /// The previous start.
        prev_start: u64,
    },
    /// A function's address range overlaps the previous function's.
    #[error("FDE {fde} at {start:#x} overlaps FDE {prev} ending at {prev_end:#x}")]
    Overlap {
        /// Index of the offending FDE.
        fde: u32,
        /// Its start.
        start: u64,
        /// The previous FDE.
        prev: u32,
        /// End of the previous function.
        prev_end: u64,
    },
    /// A function start outside the text range the section is said to describe.
    #[error("FDE {fde}: function {start:#x}+{size:#x} is outside the text range {text_start:#x}..{text_end:#x}")]
    OutsideText {
        /// FDE index.
        fde: u32,
        /// Function start.
        start: u64,
        /// Function size.
        size: u32,
        /// Text range start.
        text_start: u64,
        /// Text range end.
        text_end: u64,
    },
    /// An FRE (or V3 attribute record) that does not lie inside the FRE sub-section.
    #[error("FDE {fde}: {what} at offset {offset:#x} lies outside the FRE sub-section {start:#x}..{end:#x}")]
    FreOutside {
        /// FDE index.
        fde: u32,
        /// What was being read.
        what: &'static str,
        /// Its section offset.
        offset: u64,
        /// Start of the FRE sub-section.
        start: u64,
        /// End of the FRE sub-section.
        end: u64,
    },
    /// A data-word size code of 3.
    #[error("FDE {fde} FRE {fre}: invalid data-word size code 3 (info {info:#04x})")]
    BadWordSize {
        /// FDE index.
        fde: u32,
        /// FRE index within the FDE.
        fre: u32,
        /// The FRE info byte.
        info: u8,
    },
    /// FRE starts not strictly increasing within one FDE.
    #[error("FDE {fde} FRE {fre}: start offset {start:#x} does not follow {prev:#x}")]
    FreNotIncreasing {
        /// FDE index.
        fde: u32,
        /// FRE index.
        fre: u32,
        /// Its start offset.
        start: u32,
        /// The previous FRE's start offset.
        prev: u32,
    },
    /// An FRE starting beyond the end of its (PC type INC) function.
    #[error("FDE {fde} FRE {fre}: start offset {start:#x} beyond function size {size:#x}")]
    FreBeyondFunction {
        /// FDE index.
        fde: u32,
        /// FRE index.
        fre: u32,
        /// Its start offset.
        start: u32,
        /// Function size.
        size: u32,
    },
    /// An FRE whose data words cannot be interpreted (count, padding, order).
    #[error("FDE {fde} FRE {fre}: {reason}")]
    BadFreData {
        /// FDE index.
        fde: u32,
        /// FRE index.
        fre: u32,
        /// What is wrong.
        reason: String,
    },
    /// Per-FDE FRE counts do not add up to the header's count, or FRE bytes
    /// are unaccounted for.
    #[error("FRE accounting: {0}")]
    FreAccounting(String),
    /// Bytes after the end of the FRE sub-section that are not zero.
    #[error("{count} non-zero trailing byte(s) after offset {offset:#x}")]
    TrailingGarbage {
        /// First trailing offset.
        offset: u64,
        /// How many non-zero bytes.
        count: u64,
    },
    /// A requirement of the kernel's loader (`sframe_read_header` and the
    /// validation pass) that a lab reader would accept.
    #[error("kernel would reject: {0}")]
    KernelRejects(&'static str),
}

impl Error {
    /// True when the failure is a memory fault rather than bad data; the
    /// kernel retries a fault from a faultable context but drops a section
    /// whose data is corrupt.
    pub fn is_fault(&self) -> bool {
        matches!(self, Error::Fault { .. })
    }
}
