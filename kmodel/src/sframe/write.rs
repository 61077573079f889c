//! Encoding: a word-level table of functions and rows → section bytes, in
//! any version, byte order and ABI. Choices follow gas: the narrowest FRE
//! start-address type for the function and the narrowest word size per row.

use super::header::{Abi, Version, F_FDE_FUNC_START_PCREL, HEADER_SIZE, MAGIC};
use super::source::Endian;

/// One data word, with the signedness its position gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// An offset (signed).
    Signed(i32),
    /// A flex control word (unsigned).
    Unsigned(u32),
}

impl Word {
    fn fits(self, size: u8) -> bool {
        let bits = 8 * u32::from(size);
        match self {
            Word::Signed(v) => {
                bits == 32 || (i64::from(v) >= -(1i64 << (bits - 1)) && i64::from(v) < (1i64 << (bits - 1)))
            }
            Word::Unsigned(v) => bits == 32 || u64::from(v) < (1u64 << bits),
        }
    }

    fn bits(self) -> u32 {
        match self {
            Word::Signed(v) => v as u32,
            Word::Unsigned(v) => v,
        }
    }
}

/// A row to encode: its start offset, the info bits other than the word
/// count and size (CFA base in bit 0, mangled RA in bit 7), and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRow {
    /// Start offset within the function (or repeating block).
    pub start: u32,
    /// CFA base is SP (info bit 0).
    pub cfa_base_sp: bool,
    /// RA is PAC-signed (info bit 7).
    pub ra_mangled: bool,
    /// Data words (at most 15).
    pub words: Vec<Word>,
}

impl RawRow {
    /// A row of signed words (the default-FDE form), RA not mangled.
    pub fn new(start: u32, cfa_base_sp: bool, words: &[i32]) -> Self {
        RawRow { start, cfa_base_sp, ra_mangled: false, words: words.iter().map(|&w| Word::Signed(w)).collect() }
    }
}

/// A function to encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFunction {
    /// Absolute start address.
    pub start: u64,
    /// Size in bytes.
    pub size: u32,
    /// PC type MASK (repeating block of `rep_size` bytes).
    pub mask: bool,
    /// Repetition size (V2/V3).
    pub rep_size: u8,
    /// AArch64 B key.
    pub pauth_key_b: bool,
    /// V3 signal frame.
    pub signal: bool,
    /// V3 flex FDE.
    pub flex: bool,
    /// Rows, in increasing start order.
    pub rows: Vec<RawRow>,
}

impl RawFunction {
    /// A plain function: PC type INC, default FDE, no PAC key, no signal frame.
    pub fn new(start: u64, size: u32, rows: Vec<RawRow>) -> Self {
        RawFunction { start, size, mask: false, rep_size: 0, pauth_key_b: false, signal: false, flex: false, rows }
    }
}

/// A whole section to encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSection {
    /// Format version.
    pub version: Version,
    /// ABI; it also decides the byte order.
    pub abi: Abi,
    /// Header flags, written as given.
    pub flags: u8,
    /// Fixed FP offset (0 = none).
    pub cfa_fixed_fp_offset: i8,
    /// Fixed RA offset (0 = none; AMD64 uses −8).
    pub cfa_fixed_ra_offset: i8,
    /// Functions, written in this order.
    pub functions: Vec<RawFunction>,
}

/// Why a table cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// A value does not fit its field in the chosen version.
    #[error("function {function}: {what} does not fit")]
    DoesNotFit {
        /// Index of the function.
        function: usize,
        /// The field.
        what: &'static str,
    },
}

struct Out {
    bytes: Vec<u8>,
    endian: Endian,
}

impl Out {
    fn put(&mut self, value: u64, width: u8) {
        let all = match self.endian {
            Endian::Little => value.to_le_bytes(),
            Endian::Big => value.to_be_bytes(),
        };
        let w = usize::from(width);
        match self.endian {
            Endian::Little => self.bytes.extend_from_slice(&all[..w]),
            Endian::Big => self.bytes.extend_from_slice(&all[8 - w..]),
        }
    }
}

/// The FRE start-address width gas picks for a function of `size` bytes.
pub fn fre_type_for(size: u64) -> u8 {
    if size < 0x100 {
        0
    } else if size < 0x1_0000 {
        1
    } else {
        2
    }
}

/// The FDE info byte: FRE type from the function size, PC type, PAC key,
/// signal bit.
fn fde_info(f: &RawFunction) -> u8 {
    let max_start = f.rows.iter().map(|r| u64::from(r.start)).max().unwrap_or(0);
    fre_type_for(u64::from(f.size).max(max_start))
        | (u8::from(f.mask) << 4)
        | (u8::from(f.pauth_key_b) << 5)
        | (u8::from(f.signal) << 7)
}

/// Encodes `table` as a section whose first byte will be at address `base`.
pub fn encode(table: &RawSection, base: u64) -> Result<Vec<u8>, WriteError> {
    let endian = table.abi.endian();
    let fde_size = table.version.fde_size();
    let n = table.functions.len() as u64;
    let fdes_start = HEADER_SIZE;

    // FRE sub-section first: FDEs need the offsets.
    let mut fres = Out { bytes: Vec::new(), endian };
    let mut fre_offsets = Vec::with_capacity(table.functions.len());
    let mut num_fres: u64 = 0;
    for (fi, f) in table.functions.iter().enumerate() {
        let too_big = |what| WriteError::DoesNotFit { function: fi, what };
        fre_offsets.push(u32::try_from(fres.bytes.len()).map_err(|_| too_big("FRE offset"))?);
        let info = fde_info(f);
        let fre_type = info & 0xf;
        if table.version == Version::V3 {
            fres.put(u64::try_from(f.rows.len()).ok().filter(|&c| c <= 0xffff).ok_or(too_big("FRE count"))?, 2);
            fres.put(u64::from(info), 1);
            fres.put(u64::from(f.flex), 1);
            fres.put(u64::from(f.rep_size), 1);
        }
        for row in &f.rows {
            if row.words.len() > 15 {
                return Err(too_big("data word count"));
            }
            let size_code = [1u8, 2, 4].iter().position(|&s| row.words.iter().all(|w| w.fits(s))).unwrap_or(2) as u8;
            fres.put(u64::from(row.start), 1 << fre_type);
            let info = u8::from(row.cfa_base_sp)
                | ((row.words.len() as u8) << 1)
                | (size_code << 5)
                | (u8::from(row.ra_mangled) << 7);
            fres.put(u64::from(info), 1);
            for w in &row.words {
                fres.put(u64::from(w.bits()), 1 << size_code);
            }
        }
        num_fres += f.rows.len() as u64;
    }

    let mut out = Out { bytes: Vec::new(), endian };
    out.put(u64::from(MAGIC), 2);
    out.put(u64::from(table.version.number()), 1);
    out.put(u64::from(table.flags), 1);
    out.put(u64::from(table.abi.id()), 1);
    out.put(u64::from(table.cfa_fixed_fp_offset as u8), 1);
    out.put(u64::from(table.cfa_fixed_ra_offset as u8), 1);
    out.put(0, 1);
    let count = |v: u64, what| u32::try_from(v).map_err(|_| WriteError::DoesNotFit { function: 0, what });
    out.put(u64::from(count(n, "FDE count")?), 4);
    out.put(u64::from(count(num_fres, "FRE count")?), 4);
    out.put(u64::from(count(fres.bytes.len() as u64, "FRE length")?), 4);
    out.put(0, 4);
    out.put(u64::from(count(n * fde_size, "FRE offset")?), 4);

    for (fi, f) in table.functions.iter().enumerate() {
        let too_big = |what| WriteError::DoesNotFit { function: fi, what };
        let field = base.wrapping_add(fdes_start + fi as u64 * fde_size);
        let origin = if table.flags & F_FDE_FUNC_START_PCREL != 0 { field } else { base };
        let rel = f.start.wrapping_sub(origin) as i64;
        match table.version {
            Version::V1 | Version::V2 => {
                let rel = i32::try_from(rel).map_err(|_| too_big("start address"))?;
                out.put(u64::from(rel as u32), 4);
                out.put(u64::from(f.size), 4);
                out.put(u64::from(fre_offsets[fi]), 4);
                out.put(f.rows.len() as u64, 4);
                // The signal bit exists only in V3.
                out.put(u64::from(fde_info(f) & 0x7f), 1);
                if table.version == Version::V2 {
                    out.put(u64::from(f.rep_size), 1);
                    out.put(0, 2);
                }
            }
            Version::V3 => {
                out.put(rel as u64, 8);
                out.put(u64::from(f.size), 4);
                out.put(u64::from(fre_offsets[fi]), 4);
            }
        }
    }
    debug_assert_eq!(out.bytes.len() as u64, HEADER_SIZE + n * fde_size);
    out.bytes.extend_from_slice(&fres.bytes);
    Ok(out.bytes)
}
