//! SFrame from DWARF CFI: every FDE of `.eh_frame` or `.debug_frame` is
//! evaluated row by row (gimli) and each row translated into an SFrame
//! rule; functions whose rows SFrame cannot express are skipped and
//! reported, the way gas warns.

use gimli::{
    BaseAddresses, CfaRule as DwarfCfa, CieOrFde, DebugFrame, EhFrame, Register, RegisterRule, RunTimeEndian,
    UnwindContext, UnwindSection, Vendor,
};

use super::{Encoding, RawFunction, RawRow, RawSection};
use crate::read::header::{Abi, Version, F_FDE_FUNC_START_PCREL, F_FDE_SORTED};
use crate::read::rule::{Base, CfaRule, FrameRule, Recovery, RowRule};
use crate::read::source::Endian;

/// Which DWARF CFI section the bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum CfiKind {
    /// `.eh_frame` (GNU, pointer encodings relative to the section).
    EhFrame,
    /// `.debug_frame` (DWARF, absolute addresses).
    DebugFrame,
}

impl std::fmt::Display for CfiKind {
    /// The section's name: `.eh_frame` or `.debug_frame`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CfiKind::EhFrame => ".eh_frame",
            CfiKind::DebugFrame => ".debug_frame",
        })
    }
}

/// CFI bytes and where they are loaded.
#[derive(Debug, Clone, Copy)]
pub struct Cfi<'a> {
    /// Which section.
    pub kind: CfiKind,
    /// Its bytes.
    pub data: &'a [u8],
    /// Its address (for PC-relative pointer encodings).
    pub address: u64,
}

/// A function the generated section describes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Covered {
    /// Function start address.
    pub start: u64,
    /// Size in bytes.
    pub size: u32,
    /// Rows after merging identical neighbours.
    pub rows: usize,
    /// Encoded as a V3 flex FDE.
    pub flex: bool,
    /// PC type MASK (a PLT's repeating entries).
    pub mask: bool,
}

/// A function the generated section leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// Function (FDE) start address.
    pub start: u64,
    /// Size in bytes.
    pub size: u64,
    /// The first PC whose rule could not be expressed (or the start).
    pub at: u64,
    /// Why.
    pub reason: String,
}

/// The result: a table ready for [`encode`](super::encode) and the report.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The section to write (FDEs sorted by address).
    pub table: RawSection,
    /// Functions covered, in address order.
    pub covered: Vec<Covered>,
    /// Functions skipped, in CFI order.
    pub skipped: Vec<Skipped>,
    /// FDEs seen in the CFI.
    pub fdes: usize,
}

/// Why no section could be generated at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    /// The CFI itself is malformed.
    #[error("malformed {kind} at offset {offset:#x}: {reason}")]
    BadCfi {
        /// Which section.
        kind: CfiKind,
        /// Offset of the entry being parsed.
        offset: u64,
        /// gimli's error.
        reason: String,
    },
}

/// Generates an SFrame table for `abi` in `version` (2 or 3) from `cfi`.
///
/// ```
/// use sframe::write::encode;
/// use sframe::write::generate::{generate, Cfi, CfiKind};
/// use sframe::{Abi, Base, Recovery, RowRule, Section, Version};
///
/// // A little-endian .debug_frame with one CIE and one FDE.
/// #[rustfmt::skip]
/// let cfi: Vec<u8> = [
///     // CIE: length 20, CIE id, version 1, no augmentation, code alignment 1,
///     // data alignment -8, RA column 16; CFA = rsp+8, RA at CFA-8; padding.
///     &[20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16][..],
///     &[0x0c, 7, 8, 0x90, 1, 0, 0, 0, 0, 0, 0][..],
///     // FDE: length 28, its CIE at offset 0, function 0x401000 of 32 bytes;
///     // from byte 1 on (after `push %rbp`): CFA = rsp+16, rbp at CFA-16.
///     &[28, 0, 0, 0, 0, 0, 0, 0][..],
///     &0x401000u64.to_le_bytes(),
///     &32u64.to_le_bytes(),
///     &[0x41, 0x0e, 16, 0x86, 2, 0, 0, 0][..],
/// ].concat();
///
/// let cfi = Cfi { kind: CfiKind::DebugFrame, data: &cfi, address: 0 };
/// let generated = generate(&cfi, Abi::Amd64, Version::V3)?;
/// assert_eq!((generated.fdes, generated.covered.len(), generated.skipped.len()), (1, 1, 0));
///
/// let bytes = encode(&generated.table, 0x402000)?;
/// let section = Section::parse(bytes.as_slice(), 0x402000)?;
/// let RowRule::Frame(frame) = section.lookup(0x401004)?.unwrap().rule else { unreachable!() };
/// assert_eq!((frame.cfa.base, frame.cfa.offset), (Base::Sp, 16));
/// assert_eq!(frame.fp, Recovery::Cfa { offset: -16, deref: true });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn generate(cfi: &Cfi<'_>, abi: Abi, version: Version) -> Result<Generated, GenError> {
    let encoding = Encoding::gas(version, abi);
    let mut out = Output {
        encoding,
        ctx: Box::new(UnwindContext::new()),
        functions: Vec::new(),
        covered: Vec::new(),
        skipped: Vec::new(),
        fdes: 0,
    };
    walk_fdes(cfi, abi, &mut out)?;
    out.functions.sort_by_key(|f| f.start);
    out.covered.sort_by_key(|c| c.start);
    Ok(Generated {
        table: RawSection {
            version,
            abi,
            flags: F_FDE_SORTED | F_FDE_FUNC_START_PCREL,
            cfa_fixed_fp_offset: encoding.cfa_fixed_fp_offset,
            cfa_fixed_ra_offset: encoding.cfa_fixed_ra_offset,
            functions: out.functions,
        },
        covered: out.covered,
        skipped: out.skipped,
        fdes: out.fdes,
    })
}

/// The code range of every FDE of `cfi` as `abi` reads it: (start, size)
/// in CFI order, at the addresses the CFI gives (link-time addresses for a
/// file's `.eh_frame` at its section address). FDEs that cannot be parsed
/// are left out; empty ones are kept.
///
/// ```
/// use sframe::write::generate::{fde_ranges, Cfi, CfiKind};
/// use sframe::Abi;
///
/// // A little-endian .debug_frame: one CIE, one FDE for 0x401000 (32 bytes).
/// #[rustfmt::skip]
/// let cfi: Vec<u8> = [
///     &[20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16][..],
///     &[0x0c, 7, 8, 0x90, 1, 0, 0, 0, 0, 0, 0][..],
///     &[28, 0, 0, 0, 0, 0, 0, 0][..],
///     &0x401000u64.to_le_bytes(),
///     &32u64.to_le_bytes(),
///     &[0x41, 0x0e, 16, 0x86, 2, 0, 0, 0][..],
/// ].concat();
/// let cfi = Cfi { kind: CfiKind::DebugFrame, data: &cfi, address: 0 };
/// assert_eq!(fde_ranges(&cfi, Abi::Amd64)?, vec![(0x401000, 32)]);
/// # Ok::<(), sframe::write::generate::GenError>(())
/// ```
pub fn fde_ranges(cfi: &Cfi<'_>, abi: Abi) -> Result<Vec<(u64, u64)>, GenError> {
    struct Ranges(Vec<(u64, u64)>);
    impl FdeVisitor for Ranges {
        fn fde<'a, S: UnwindSection<Slice<'a>>>(&mut self, _: &Walk<'_, 'a, S>, fde: ParsedFde<'a>) {
            if let Ok(fde) = fde {
                self.0.push((fde.initial_address(), fde.len()));
            }
        }
    }
    let mut ranges = Ranges(Vec::new());
    walk_fdes(cfi, abi, &mut ranges)?;
    Ok(ranges.0)
}

type Slice<'a> = gimli::EndianSlice<'a, RunTimeEndian>;

/// An FDE as gimli parsed it (with its CIE), or why it could not.
type ParsedFde<'a> = gimli::Result<gimli::FrameDescriptionEntry<Slice<'a>>>;

/// The CFI section an FDE is walked in, for evaluating its rows.
struct Walk<'w, 'a, S> {
    section: &'w S,
    bases: &'w BaseAddresses,
    /// The section's bytes (with AArch64's 'B' masked).
    data: &'a [u8],
    /// Per CIE that had 'B': its offset and whether it also had a real 'S'.
    b_key_cies: &'w [(usize, bool)],
}

/// What a walk over the FDEs of a CFI section does with each of them.
trait FdeVisitor {
    /// Called once per FDE, in section order.
    fn fde<'a, S: UnwindSection<Slice<'a>>>(&mut self, walk: &Walk<'_, 'a, S>, fde: ParsedFde<'a>);
}

/// Parses every FDE of `cfi` as `abi` reads it (its byte order, AArch64's
/// augmentations) and hands each to `visitor`.
fn walk_fdes<V: FdeVisitor>(cfi: &Cfi<'_>, abi: Abi, visitor: &mut V) -> Result<(), GenError> {
    let endian = match abi.endian() {
        Endian::Little => RunTimeEndian::Little,
        Endian::Big => RunTimeEndian::Big,
    };
    // gimli does not know AArch64's 'B' augmentation (PAC with the B key):
    // note which CIEs carry it and let gimli see a harmless letter instead.
    let (data, b_key_cies) = mask_b_key_augmentation(cfi, abi);
    let bases = match cfi.kind {
        CfiKind::EhFrame => BaseAddresses::default().set_eh_frame(cfi.address),
        CfiKind::DebugFrame => BaseAddresses::default(),
    };
    match cfi.kind {
        CfiKind::EhFrame => {
            let mut section = EhFrame::new(&data, endian);
            section.set_address_size(8);
            if abi.is_aarch64() {
                section.set_vendor(Vendor::AArch64);
            }
            walk(&section, &bases, &data, cfi.kind, &b_key_cies, visitor)
        }
        CfiKind::DebugFrame => {
            let mut section = DebugFrame::new(&data, endian);
            section.set_address_size(8);
            if abi.is_aarch64() {
                section.set_vendor(Vendor::AArch64);
            }
            walk(&section, &bases, &data, cfi.kind, &b_key_cies, visitor)
        }
    }
}

fn walk<'a, S: UnwindSection<Slice<'a>>, V: FdeVisitor>(
    section: &S,
    bases: &BaseAddresses,
    data: &'a [u8],
    kind: CfiKind,
    b_key_cies: &[(usize, bool)],
    visitor: &mut V,
) -> Result<(), GenError> {
    let walk = Walk { section, bases, data, b_key_cies };
    let mut entries = section.entries(bases);
    loop {
        let entry = match entries.next() {
            Ok(Some(entry)) => entry,
            Ok(None) => return Ok(()),
            Err(e) => return Err(GenError::BadCfi { kind, offset: 0, reason: e.to_string() }),
        };
        let CieOrFde::Fde(partial) = entry else { continue };
        visitor.fde(&walk, partial.parse(|s, b, o| s.cie_from_offset(b, o)));
    }
}

struct Output {
    encoding: Encoding,
    ctx: Box<UnwindContext<usize>>,
    functions: Vec<RawFunction>,
    covered: Vec<Covered>,
    skipped: Vec<Skipped>,
    fdes: usize,
}

impl FdeVisitor for Output {
    /// Evaluates the FDE's rows and translates them, or notes why not.
    fn fde<'a, S: UnwindSection<Slice<'a>>>(&mut self, walk: &Walk<'_, 'a, S>, fde: ParsedFde<'a>) {
        let out = self;
        out.fdes += 1;
        let fde = match fde {
            Ok(fde) => fde,
            Err(e) => {
                out.skipped.push(Skipped { start: 0, size: 0, at: 0, reason: format!("unparsable FDE: {e}") });
                return;
            }
        };
        let start = fde.initial_address();
        let size = fde.len();
        let skip = |at: u64, reason: String| Skipped { start, size, at, reason };
        let Ok(size32) = u32::try_from(size) else {
            out.skipped.push(skip(start, "function larger than 4 GiB".into()));
            return;
        };
        if size == 0 {
            out.skipped.push(skip(start, "empty function".into()));
            return;
        }
        let cie_offset = fde.cie().offset();
        let masked = walk.b_key_cies.iter().find(|(at, _)| *at == cie_offset);
        let pauth_key_b = masked.is_some();
        let signal = fde.is_signal_trampoline() && masked.is_none_or(|(_, had_s)| *had_s);
        if signal && out.encoding.version < Version::V3 {
            out.skipped.push(skip(start, "signal frame (needs SFrame V3)".into()));
            return;
        }
        let mut rows: Vec<(u64, Translated)> = Vec::new();
        let mut failure = None;
        match fde.rows(walk.section, walk.bases, &mut out.ctx) {
            Err(e) => failure = Some((start, format!("CFI evaluation failed: {e}"))),
            Ok(mut table) => loop {
                match table.next_row() {
                    Ok(Some(row)) => match translate(out.encoding.abi, walk.data, row) {
                        Ok(t) => rows.push((row.start_address(), t)),
                        Err(reason) => {
                            failure = Some((row.start_address(), reason.to_string()));
                            break;
                        }
                    },
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some((start, format!("CFI evaluation failed: {e}")));
                        break;
                    }
                }
            },
        }
        if let Some((at, reason)) = failure {
            out.skipped.push(skip(at, reason));
            return;
        }
        match build_functions(&out.encoding, start, size32, pauth_key_b, signal, &rows) {
            Ok(functions) => {
                for f in functions {
                    out.covered.push(Covered {
                        start: f.start,
                        size: f.size,
                        rows: f.rows.len(),
                        flex: f.flex,
                        mask: f.mask,
                    });
                    out.functions.push(f);
                }
            }
            Err((at, reason)) => out.skipped.push(skip(at, reason.into())),
        }
    }
}

/// One CFI row in SFrame terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Translated {
    Rule(RowRule),
    /// A PLT's computed CFA: `sp + base` before the entry's `push`, `+8`
    /// after byte `push_at` of every `rep`-byte entry.
    Plt {
        base: i32,
        push_at: u32,
        rep: u8,
    },
}

fn translate(abi: Abi, data: &[u8], row: &gimli::UnwindTableRow<usize>) -> Result<Translated, &'static str> {
    let cfa = match row.cfa() {
        DwarfCfa::RegisterAndOffset { register, offset } => CfaRule {
            base: base_of(abi, register.0.into()),
            offset: i32::try_from(*offset).map_err(|_| "CFA offset out of range")?,
            deref: false,
        },
        DwarfCfa::Expression(expr) => {
            let bytes = expr_bytes(data, expr)?;
            if let Some(plt) = plt_pattern(abi, bytes) {
                return Ok(plt);
            }
            let (reg, offset, deref) =
                breg_expression(bytes).ok_or("CFA is a DWARF expression SFrame cannot express")?;
            CfaRule { base: base_of(abi, reg), offset, deref }
        }
    };
    let ra_reg = Register(abi.ra_dwarf() as u16);
    let ra = match row.register(ra_reg) {
        Some(RegisterRule::Undefined) => return Ok(Translated::Rule(RowRule::Outermost)),
        // No rule: RA is still where the call put it (the link register).
        None | Some(RegisterRule::SameValue) if abi != Abi::Amd64 => Recovery::Untracked,
        None | Some(RegisterRule::SameValue) => return Err("return address has no rule"),
        Some(rule) => recovery(data, rule).ok_or("return address rule SFrame cannot express")?,
    };
    let (_, fp_dwarf) = abi.sp_fp_dwarf();
    let fp = match row.register(Register(fp_dwarf as u16)) {
        None | Some(RegisterRule::SameValue) => Recovery::Untracked,
        Some(RegisterRule::Undefined) => return Err("frame pointer is undefined"),
        Some(rule) => recovery(data, rule).ok_or("frame pointer rule SFrame cannot express")?,
    };
    // When the CFA is the caller's stack pointer at the call (computed from
    // SP or FP), registers are saved below it: one saved at or above it means
    // the CFI puts that stack pointer too low (glibc's AArch64
    // `_dl_runtime_resolve` leaves out the 16 bytes its PLT stub pushed).
    // Translated, every walk through the function would go wrong at its
    // caller; skipped, it stops there and is reported. (A CFA in another
    // register, as `__longjmp`'s jmp_buf or `setcontext`'s ucontext, may
    // have registers above it.)
    let stack_cfa = !cfa.deref && matches!(cfa.base, Base::Sp | Base::Fp);
    for (what, rule) in [("return address", ra), ("frame pointer", fp)] {
        if stack_cfa && matches!(rule, Recovery::Cfa { offset, deref: true } if offset >= 0) {
            return Err(if what == "return address" {
                "return address saved at or above the CFA: the CFI puts the caller's stack pointer too low"
            } else {
                "frame pointer saved at or above the CFA: the CFI puts the caller's stack pointer too low"
            });
        }
    }
    let ra_mangled = abi.is_aarch64()
        && matches!(row.register(gimli::AArch64::RA_SIGN_STATE), Some(RegisterRule::Constant(v)) if v & 1 != 0);
    Ok(Translated::Rule(RowRule::Frame(FrameRule { cfa, ra, fp, ra_mangled })))
}

fn base_of(abi: Abi, reg: u32) -> Base {
    Base::Reg(reg).named(abi)
}

fn recovery(data: &[u8], rule: RegisterRule<usize>) -> Option<Recovery> {
    Some(match rule {
        RegisterRule::Offset(off) => Recovery::Cfa { offset: i32::try_from(off).ok()?, deref: true },
        RegisterRule::ValOffset(off) => Recovery::Cfa { offset: i32::try_from(off).ok()?, deref: false },
        RegisterRule::Register(r) => Recovery::InRegister(r.0.into()),
        RegisterRule::Expression(e) => {
            let (reg, offset, deref) = breg_expression(expr_bytes(data, &e).ok()?)?;
            // DW_CFA_expression: the value is saved at the computed address.
            (!deref).then_some(Recovery::Reg { reg, offset, deref: true })?
        }
        RegisterRule::ValExpression(e) => {
            let (reg, offset, deref) = breg_expression(expr_bytes(data, &e).ok()?)?;
            Recovery::Reg { reg, offset, deref }
        }
        _ => return None,
    })
}

/// The bytes of a CFI expression (gimli validated the range while parsing).
fn expr_bytes<'d>(data: &'d [u8], expr: &gimli::UnwindExpression<usize>) -> Result<&'d [u8], &'static str> {
    expr.offset.checked_add(expr.length).and_then(|end| data.get(expr.offset..end)).ok_or("CFI expression out of range")
}

/// `DW_OP_breg<n> off [DW_OP_deref]` or `DW_OP_bregx n off [DW_OP_deref]`.
fn breg_expression(bytes: &[u8]) -> Option<(u32, i32, bool)> {
    let (&op, mut rest) = bytes.split_first()?;
    let reg = match op {
        0x70..=0x8f => u32::from(op - 0x70),
        0x92 => u32::try_from(uleb(&mut rest)?).ok()?,
        _ => return None,
    };
    let offset = i32::try_from(sleb(&mut rest)?).ok()?;
    match rest {
        [] => Some((reg, offset, false)),
        [0x06] => Some((reg, offset, true)),
        _ => None,
    }
}

/// ld's x86-64 PLT CFA: `breg7 A; breg16 0; lit(R-1); and; litK; ge; lit3;
/// shl; plus` = rsp + A, plus 8 once the entry's `push` (at K) has run.
fn plt_pattern(abi: Abi, bytes: &[u8]) -> Option<Translated> {
    if abi != Abi::Amd64 {
        return None;
    }
    let (&op, mut rest) = bytes.split_first()?;
    if op != 0x77 {
        return None;
    }
    let base = i32::try_from(sleb(&mut rest)?).ok()?;
    match rest {
        [0x80, 0x00, mask @ 0x30..=0x4f, 0x1a, k @ 0x30..=0x4f, 0x2a, 0x33, 0x24, 0x22] => {
            let rep = u8::try_from(u32::from(*mask - 0x30) + 1).ok().filter(|r| r.is_power_of_two())?;
            Some(Translated::Plt { base, push_at: u32::from(k - 0x30), rep })
        }
        _ => None,
    }
}

fn uleb(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn sleb(bytes: &mut &[u8]) -> Option<i64> {
    let mut value = 0i64;
    let mut shift = 0;
    loop {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= i64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            if shift < 64 && b & 0x40 != 0 {
                value |= -1i64 << shift;
            }
            return Some(value);
        }
        if shift >= 64 {
            return None;
        }
    }
}

/// Turns translated rows into one function (or two when a PLT's INC part
/// precedes its MASK part), default FDE if possible, else flex.
fn build_functions(
    enc: &Encoding,
    start: u64,
    size: u32,
    pauth_key_b: bool,
    signal: bool,
    rows: &[(u64, Translated)],
) -> Result<Vec<RawFunction>, (u64, &'static str)> {
    let plt_at = rows.iter().position(|(_, t)| matches!(t, Translated::Plt { .. }));
    let (inc_rows, plt) = match plt_at {
        Some(i) => (&rows[..i], Some(rows[i])),
        None => (rows, None),
    };
    let mut functions = Vec::new();
    let inc_end = plt.map_or(start + u64::from(size), |(at, _)| at);
    if !inc_rows.is_empty() && inc_end > start {
        let rules: Vec<(u32, RowRule)> = inc_rows
            .iter()
            .filter(|(at, _)| *at < inc_end)
            .map(|(at, t)| match t {
                Translated::Rule(rule) => ((at - start) as u32, *rule),
                Translated::Plt { .. } => unreachable!("PLT rows come after INC rows"),
            })
            .collect();
        let mut f = encode_rows(enc, start, (inc_end - start) as u32, &rules)?;
        f.pauth_key_b = pauth_key_b;
        f.signal = signal;
        functions.push(f);
    }
    // A PLT with no entries (PLT0 alone: a library that calls nothing
    // outside itself) switches to the PLT expression at its very end: there
    // is nothing for a MASK FDE to cover, and an empty one would start
    // where the next function does (unsorted for the kernel).
    let plt = plt.filter(|(at, _)| *at < start + u64::from(size));
    if let Some((at, Translated::Plt { base, push_at, rep })) = plt {
        if rows.iter().skip(plt_at.unwrap_or(0) + 1).any(|(_, t)| !matches!(t, Translated::Plt { .. })) {
            return Err((at, "PLT rows mixed with ordinary rows"));
        }
        if at % u64::from(rep) != 0 {
            return Err((at, "PLT entries not aligned to their size"));
        }
        let sp = |offset| {
            RowRule::Frame(FrameRule {
                cfa: CfaRule { base: Base::Sp, offset, deref: false },
                ra: Recovery::Fixed(-8),
                fp: Recovery::Untracked,
                ra_mangled: false,
            })
        };
        let end = start + u64::from(size);
        let mut f = encode_rows(enc, at, (end - at) as u32, &[(0, sp(base)), (push_at, sp(base + 8))])?;
        f.mask = true;
        f.rep_size = rep;
        functions.push(f);
    }
    Ok(functions)
}

fn encode_rows(
    enc: &Encoding,
    start: u64,
    size: u32,
    rules: &[(u32, RowRule)],
) -> Result<RawFunction, (u64, &'static str)> {
    let mut merged: Vec<(u32, RowRule)> = Vec::new();
    for &(off, rule) in rules {
        if merged.last().is_some_and(|(_, last)| *last == rule) {
            continue;
        }
        merged.push((off, rule));
    }
    let attempt = |flex: bool| -> Result<Vec<RawRow>, (u64, &'static str)> {
        merged
            .iter()
            .map(|(off, rule)| {
                let row = if flex { enc.flex_row(*off, rule) } else { enc.default_row(*off, rule) };
                row.map_err(|why| (start + u64::from(*off), why))
            })
            .collect()
    };
    let (rows, flex) = match attempt(false) {
        Ok(rows) => (rows, false),
        Err(first) if enc.version == Version::V3 => (attempt(true).map_err(|_| first)?, true),
        Err(first) => return Err(first),
    };
    Ok(RawFunction { flex, ..RawFunction::new(start, size, rows) })
}

/// Copies the CFI, replacing the 'B' of AArch64 CIE augmentation strings
/// (which gimli rejects). Returns the copy and, per CIE that had 'B', its
/// offset and whether it also had a real 'S'.
fn mask_b_key_augmentation(cfi: &Cfi<'_>, abi: Abi) -> (Vec<u8>, Vec<(usize, bool)>) {
    let mut data = cfi.data.to_vec();
    let mut cies = Vec::new();
    if !abi.is_aarch64() {
        return (data, cies);
    }
    let read_u32 = |d: &[u8], at: usize| -> Option<u32> {
        let b: [u8; 4] = d.get(at..at + 4)?.try_into().ok()?;
        Some(if abi.endian() == Endian::Big { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    };
    let cie_id = if cfi.kind == CfiKind::EhFrame { 0 } else { u32::MAX };
    let mut at = 0usize;
    while let Some(len) = read_u32(&data, at) {
        if len == 0 || len == u32::MAX {
            break; // terminator, or 64-bit DWARF (not produced for these targets)
        }
        let Some(next) = at.checked_add(4 + len as usize).filter(|&n| n <= data.len()) else { break };
        if read_u32(&data, at + 4) == Some(cie_id) {
            // version byte, then the NUL-terminated augmentation string.
            let aug = at + 9;
            if let Some(end) = data[aug.min(next)..next].iter().position(|&b| b == 0) {
                let had_s = data[aug..aug + end].contains(&b'S');
                if let Some(b) = data[aug..aug + end].iter().position(|&c| c == b'B') {
                    // 'B' has no augmentation data, so any data-less letter
                    // gimli accepts keeps the layout; none exists but 'S',
                    // which marks signal frames: remember the real meaning.
                    data[aug + b] = b'S';
                    cies.push((at, had_s));
                }
            }
        }
        at = next;
    }
    (data, cies)
}
