//! Encoding: a word-level table of functions and rows → section bytes, in
//! any version, byte order and ABI. Choices follow gas: the narrowest FRE
//! start-address type for the function and the narrowest word size per row.

use crate::read::dump;
use crate::read::fde::{FdeKind, PcType};
use crate::read::header::{Abi, Version, F_FDE_FUNC_START_PCREL, HEADER_SIZE, MAGIC};
use crate::read::rule::{Base, Recovery, RowRule, S390X_CFA_OFFSET_ADJUSTMENT, S390X_CFA_OFFSET_ALIGNMENT_FACTOR};
use crate::read::source::{ByteSource, Endian};
use crate::read::{Error, Section};

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

impl RawSection {
    /// Reads a section back into a table: the inverse of [`encode`] (FDEs in
    /// array order, words with the signedness their position gives them).
    pub fn decode<S: ByteSource>(section: &Section<S>) -> Result<Self, Error> {
        let h = section.header();
        let listing = dump::listing(section)?;
        let functions = listing
            .functions
            .into_iter()
            .map(|f| {
                let fde = f.fde;
                let rows = f
                    .rows
                    .into_iter()
                    .map(|row| {
                        let size = 1u8 << ((row.info >> 5) & 3);
                        // Flex control words: CFA's, RA's, and FP's (one earlier when RA is padding).
                        let fp_control = if row.words.get(2) == Some(&0) { 3 } else { 4 };
                        let words = row
                            .words
                            .iter()
                            .enumerate()
                            .map(|(i, &raw)| {
                                if fde.kind == FdeKind::Flex && (i == 0 || i == 2 || i == fp_control) {
                                    Word::Unsigned(raw)
                                } else {
                                    let shift = 32 - 8 * u32::from(size);
                                    Word::Signed(((raw << shift) as i32) >> shift)
                                }
                            })
                            .collect();
                        RawRow {
                            start: row.start,
                            cfa_base_sp: row.info & 1 != 0,
                            ra_mangled: row.info & 0x80 != 0,
                            words,
                        }
                    })
                    .collect();
                RawFunction {
                    start: fde.start,
                    size: fde.size,
                    mask: fde.pc_type == PcType::Mask,
                    rep_size: fde.rep_size,
                    pauth_key_b: fde.pauth_key_b,
                    signal: fde.signal,
                    flex: fde.kind == FdeKind::Flex,
                    rows,
                }
            })
            .collect();
        Ok(RawSection {
            version: h.version,
            abi: h.abi,
            flags: h.flags,
            cfa_fixed_fp_offset: h.cfa_fixed_fp_offset,
            cfa_fixed_ra_offset: h.cfa_fixed_ra_offset,
            functions,
        })
    }
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

/// Encodes `table` as a section whose first byte will be at address `base`
/// (PC-relative and section-relative start fields depend on it).
///
/// ```
/// use sframe::read::header::F_FDE_SORTED;
/// use sframe::write::{encode, RawFunction, RawRow, RawSection};
/// use sframe::{Abi, Section, Version};
///
/// // s390x: big-endian, CFA offsets stored scaled; RA and FP saved on the stack.
/// let table = RawSection {
///     version: Version::V2,
///     abi: Abi::S390x,
///     flags: F_FDE_SORTED,
///     cfa_fixed_fp_offset: 0,
///     cfa_fixed_ra_offset: 0,
///     functions: vec![RawFunction::new(
///         0x1000,
///         0x40,
///         vec![RawRow::new(0, true, &[0]), RawRow::new(6, true, &[20, -48, -72])],
///     )],
/// };
/// let bytes = encode(&table, 0x10_0000)?;
/// assert_eq!(&bytes[..2], &[0xde, 0xe2]); // the magic, big-endian
///
/// // Reading it back gives the same table.
/// let section = Section::parse(bytes.as_slice(), 0x10_0000)?;
/// assert_eq!(RawSection::decode(&section)?, table);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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

/// The header facts that decide how a rule becomes data words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoding {
    /// Target version (flex rows need V3; register words on s390x need V2).
    pub version: Version,
    /// Target ABI.
    pub abi: Abi,
    /// Fixed FP offset of the header (0 = none).
    pub cfa_fixed_fp_offset: i8,
    /// Fixed RA offset of the header (0 = none).
    pub cfa_fixed_ra_offset: i8,
}

impl Encoding {
    /// What gas writes for `abi`: AMD64 has RA fixed at CFA−8, others none.
    pub fn gas(version: Version, abi: Abi) -> Self {
        let ra = if abi == Abi::Amd64 { -8 } else { 0 };
        Encoding { version, abi, cfa_fixed_fp_offset: 0, cfa_fixed_ra_offset: ra }
    }

    fn cfa_word(&self, offset: i32) -> Result<i32, &'static str> {
        if self.abi != Abi::S390x {
            return Ok(offset);
        }
        let rel = offset.checked_sub(-S390X_CFA_OFFSET_ADJUSTMENT).ok_or("CFA offset out of range")?;
        if rel % S390X_CFA_OFFSET_ALIGNMENT_FACTOR != 0 {
            return Err("s390x CFA offset is not 160 plus a multiple of 8");
        }
        Ok(rel / S390X_CFA_OFFSET_ALIGNMENT_FACTOR)
    }

    /// A saved register as the header's fixed offset names it, if it does.
    fn is_fixed(rec: Recovery, fixed: i8) -> bool {
        fixed != 0
            && (rec == Recovery::Padding
                || matches!(rec, Recovery::Fixed(o) | Recovery::Cfa { offset: o, deref: true } if o == i32::from(fixed)))
    }

    /// Encodes `rule` as a row of a default FDE (§5.1), or says why the
    /// default interpretation cannot express it.
    ///
    /// ```
    /// use sframe::write::{Encoding, RawRow};
    /// use sframe::{Abi, Base, CfaRule, FrameRule, Recovery, RowRule, Version};
    ///
    /// let gas = Encoding::gas(Version::V3, Abi::Amd64);
    /// let after_push = |base| {
    ///     RowRule::Frame(FrameRule {
    ///         cfa: CfaRule { base, offset: 16, deref: false },
    ///         ra: Recovery::Fixed(-8),
    ///         fp: Recovery::Cfa { offset: -16, deref: true },
    ///         ra_mangled: false,
    ///     })
    /// };
    /// // CFA offset and FP offset; the RA needs no word (fixed at CFA-8).
    /// assert_eq!(gas.default_row(1, &after_push(Base::Sp)), Ok(RawRow::new(1, true, &[16, -16])));
    /// // A CFA based on another register takes a flex row.
    /// assert!(gas.default_row(1, &after_push(Base::Reg(10))).is_err());
    /// assert!(gas.flex_row(1, &after_push(Base::Reg(10))).is_ok());
    /// ```
    pub fn default_row(&self, start: u32, rule: &RowRule) -> Result<RawRow, &'static str> {
        let frame = match rule {
            RowRule::Outermost if self.version == Version::V1 => return Err("V1 cannot mark an outermost frame"),
            RowRule::Outermost => return Ok(RawRow::new(start, true, &[])),
            RowRule::Frame(frame) => frame,
        };
        let cfa_base_sp = match frame.cfa.base.named(self.abi) {
            _ if frame.cfa.deref => return Err("CFA is loaded from memory"),
            Base::Sp => true,
            Base::Fp => false,
            Base::Reg(_) => return Err("CFA is based on a register other than SP or FP"),
        };
        let mut words = vec![self.cfa_word(frame.cfa.offset)?];
        let s390x_v2 = self.abi == Abi::S390x && self.version == Version::V2;
        let slot = |rec: Recovery, what: &'static str| -> Result<Option<i32>, &'static str> {
            match rec {
                Recovery::Untracked | Recovery::Padding => Ok(None),
                Recovery::Cfa { offset, deref: true } | Recovery::Fixed(offset) => {
                    if self.abi == Abi::S390x && offset & 1 != 0 {
                        return Err("odd save slot on s390x");
                    }
                    Ok(Some(offset))
                }
                Recovery::InRegister(r) | Recovery::Reg { reg: r, offset: 0, deref: false } if s390x_v2 => {
                    i32::try_from(r).ok().and_then(|r| r.checked_mul(2)).map(|w| Some(w | 1)).ok_or(what)
                }
                _ => Err(what),
            }
        };
        let ra = if self.cfa_fixed_ra_offset != 0 {
            if !Self::is_fixed(frame.ra, self.cfa_fixed_ra_offset) {
                return Err("RA is not at the ABI's fixed offset from the CFA");
            }
            None
        } else {
            match slot(frame.ra, "RA is neither saved on the stack nor in the link register")? {
                Some(0) => return Err("RA saved at CFA+0 collides with the padding word"),
                other => other,
            }
        };
        let fp = if self.cfa_fixed_fp_offset != 0 {
            if !Self::is_fixed(frame.fp, self.cfa_fixed_fp_offset) {
                return Err("FP is not at the header's fixed offset from the CFA");
            }
            None
        } else {
            slot(frame.fp, "FP is neither saved on the stack nor unchanged")?
        };
        match (ra, fp) {
            (ra, None) => words.extend(ra),
            (Some(ra), Some(fp)) => words.extend([ra, fp]),
            (None, Some(fp)) if self.cfa_fixed_ra_offset != 0 => words.push(fp),
            // s390x: RA word 0 is padding, "RA not saved".
            (None, Some(fp)) if self.abi == Abi::S390x => words.extend([0, fp]),
            (None, Some(_)) => return Err("FP saved while RA stays in the link register"),
        }
        let mut row = RawRow::new(start, cfa_base_sp, &words);
        row.ra_mangled = frame.ra_mangled;
        Ok(row)
    }

    /// Encodes `rule` as a row of a V3 flex FDE (§5.2): (control, offset)
    /// pairs for CFA, RA, FP, a padding word where RA has no rule but FP has.
    pub fn flex_row(&self, start: u32, rule: &RowRule) -> Result<RawRow, &'static str> {
        if self.version != Version::V3 {
            return Err("flex FDEs need SFrame V3");
        }
        let frame = match rule {
            RowRule::Outermost => return Ok(RawRow::new(start, false, &[])),
            RowRule::Frame(frame) => frame,
        };
        let control = |reg: Option<u32>, deref: bool| -> Result<u32, &'static str> {
            let bits = u32::from(deref) << 1;
            match reg {
                Some(r) if r <= (u32::MAX >> 3) => Ok(r << 3 | bits | 1),
                Some(_) => Err("register number too large"),
                None => Ok(bits),
            }
        };
        let pair = |rec: Recovery, fixed: i8| -> Result<Option<[Word; 2]>, &'static str> {
            if Self::is_fixed(rec, fixed) {
                return Ok(None);
            }
            let (reg, offset, deref) = match rec {
                Recovery::Untracked | Recovery::Padding if fixed == 0 => return Ok(None),
                Recovery::Untracked | Recovery::Padding => return Err("no rule where the ABI fixes one"),
                Recovery::Fixed(offset) => (None, offset, true),
                Recovery::Cfa { offset, deref } => (None, offset, deref),
                Recovery::Reg { reg, offset, deref } => (Some(reg), offset, deref),
                Recovery::InRegister(reg) => (Some(reg), 0, false),
            };
            let ctl = control(reg, deref)?;
            if ctl == 0 {
                return Err("CFA+0 without a load is the padding word");
            }
            Ok(Some([Word::Unsigned(ctl), Word::Signed(offset)]))
        };
        let cfa_ctl = control(Some(frame.cfa.base.dwarf(self.abi)), frame.cfa.deref)?;
        let mut words = vec![Word::Unsigned(cfa_ctl), Word::Signed(self.cfa_word(frame.cfa.offset)?)];
        let ra = pair(frame.ra, self.cfa_fixed_ra_offset)?;
        let fp = pair(frame.fp, self.cfa_fixed_fp_offset)?;
        match (ra, fp) {
            (Some(ra), fp) => {
                words.extend(ra);
                words.extend(fp.into_iter().flatten());
            }
            (None, Some(fp)) => {
                words.push(Word::Unsigned(0));
                words.extend(fp);
            }
            (None, None) => {}
        }
        Ok(RawRow { start, cfa_base_sp: false, ra_mangled: frame.ra_mangled, words })
    }
}
