//! `objdump --sframe` text, exactly as the binutils release that produced a
//! section prints it, plus a structured form for `--json`.

use std::fmt::Write as _;

use super::error::Error;
use super::fde::{Fde, FdeKind, PcType};
use super::header::{Abi, Header, Layout, Version, F_FDE_FUNC_START_PCREL, F_FDE_SORTED, F_FRAME_POINTER};
use super::rule::{self, Base, CfaRule, Recovery, RowRule};
use super::section::Section;
use super::source::ByteSource;

/// Which objdump's output to reproduce; they differ in small ways (§11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum ObjdumpStyle {
    /// binutils 2.40: one-line flags, no fixed-offset lines, x86-64 RA `u`.
    Binutils240,
    /// binutils 2.41–2.44: fixed-offset lines, x86-64 RA `f`.
    Binutils241,
    /// binutils 2.45: one flag per line.
    Binutils245,
    /// binutils 2.46: SFrame V3 (attributes, flex rows).
    Binutils246,
}

impl ObjdumpStyle {
    /// The objdump of the binutils release that writes sections like this
    /// one: V1 → 2.40, V2 → 2.41 (2.45 once the PCREL flag appears), V3 → 2.46.
    pub fn for_header(header: &Header) -> Self {
        match header.version {
            Version::V1 => ObjdumpStyle::Binutils240,
            Version::V2 if header.is_pcrel() => ObjdumpStyle::Binutils245,
            Version::V2 => ObjdumpStyle::Binutils241,
            Version::V3 => ObjdumpStyle::Binutils246,
        }
    }

    /// Parses "2.40", "2.41" … "2.46" (releases in between map to the style
    /// that covers them).
    pub fn from_release(release: &str) -> Option<Self> {
        let minor: u32 = release.strip_prefix("2.")?.parse().ok()?;
        Some(match minor {
            40 => ObjdumpStyle::Binutils240,
            41..=44 => ObjdumpStyle::Binutils241,
            45 => ObjdumpStyle::Binutils245,
            46.. => ObjdumpStyle::Binutils246,
            _ => return None,
        })
    }
}

/// The leading lines objdump prints for any file.
pub fn file_banner(file_name: &str, bfd_target: &str) -> String {
    format!("\n{file_name}:     file format {bfd_target}\n\n")
}

/// Everything in a section, decoded: what `dump` prints as text or JSON.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listing {
    /// Address of the section's first byte.
    pub base: u64,
    /// The header.
    pub header: Header,
    /// Where the sub-sections lie.
    pub layout: Layout,
    /// Every FDE with its rows, in array order.
    pub functions: Vec<FunctionListing>,
}

/// One FDE and its rows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FunctionListing {
    /// The descriptor.
    pub fde: Fde,
    /// Its rows, in encoded order.
    pub rows: Vec<RowListing>,
}

/// One FRE, raw and interpreted.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RowListing {
    /// Start offset within the function (or repeating block).
    pub start: u32,
    /// First PC of the row (INC FDEs; `None` for MASK FDEs, whose rows repeat).
    pub pc: Option<u64>,
    /// Raw info byte.
    pub info: u8,
    /// Raw data words (unsigned bits of their size).
    pub words: Vec<u32>,
    /// The row's rule as encoded.
    pub rule: RowRule,
}

/// Decodes every FDE and FRE. The total number of rows decoded is bounded by
/// the FRE sub-section's size even if FDEs share (or overstate) FRE blocks.
pub fn listing<S: ByteSource>(section: &Section<S>) -> Result<Listing, Error> {
    let h = *section.header();
    let layout = *section.layout();
    let budget = layout.fres_end - layout.fres_start;
    let mut used = 0u64;
    let mut functions = Vec::new();
    for fde in section.fdes() {
        let fde = fde?;
        let mut rows = Vec::new();
        for fre in section.fres(&fde) {
            let fre = fre?;
            used += fre.byte_len(&fde);
            if used > budget {
                return Err(Error::FreAccounting(format!(
                    "FDEs claim more than the {budget} bytes of the FRE sub-section"
                )));
            }
            let rule = rule::interpret(&h, &fde, &fre)?.rule;
            rows.push(RowListing {
                start: fre.start,
                pc: (fde.pc_type == PcType::Inc).then(|| fde.start.wrapping_add(u64::from(fre.start))),
                info: fre.info,
                words: (0..fre.word_count()).filter_map(|i| fre.word_unsigned(i)).collect(),
                rule,
            });
        }
        functions.push(FunctionListing { fde, rows });
    }
    Ok(Listing { base: section.base(), header: h, layout, functions })
}

/// objdump's text for a listing, from "Contents of the SFrame section" on.
///
/// ```
/// use sframe::read::dump::{file_banner, listing, objdump_text, ObjdumpStyle};
/// use sframe::read::header::{F_FDE_FUNC_START_PCREL, F_FDE_SORTED};
/// use sframe::write::{encode, RawFunction, RawRow, RawSection};
/// use sframe::{Abi, Section, Version};
///
/// let table = RawSection {
///     version: Version::V3,
///     abi: Abi::Amd64,
///     flags: F_FDE_SORTED | F_FDE_FUNC_START_PCREL,
///     cfa_fixed_fp_offset: 0,
///     cfa_fixed_ra_offset: -8,
///     functions: vec![RawFunction::new(
///         0x401000,
///         32,
///         vec![RawRow::new(0, true, &[8]), RawRow::new(1, true, &[16, -16])],
///     )],
/// };
/// let bytes = encode(&table, 0x402000)?;
/// let section = Section::parse(bytes.as_slice(), 0x402000)?;
/// let text = objdump_text(&listing(&section)?, ObjdumpStyle::for_header(section.header()));
/// print!("{}{text}", file_banner("prog", "elf64-x86-64")); // what `objdump --sframe prog` prints
///
/// // objdump pads its columns with trailing blanks.
/// let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
/// assert!(lines.contains(&"    Version: SFRAME_VERSION_3"));
/// assert!(lines.contains(&"    func idx [0]: pc = 0x401000, size = 32 bytes"));
/// assert!(lines.contains(&"    0000000000401001  sp+16     c-16      f"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn objdump_text(listing: &Listing, style: ObjdumpStyle) -> String {
    let h = &listing.header;
    let mut out = String::new();
    out.push_str("Contents of the SFrame section .sframe:\n  Header :\n\n");
    let _ = writeln!(out, "    Version: SFRAME_VERSION_{}", h.version.number());
    out.push_str(&flags_text(h.flags, style));
    if style >= ObjdumpStyle::Binutils241 {
        if h.cfa_fixed_fp_offset != 0 {
            let _ = writeln!(out, "    CFA fixed FP offset: {}", h.cfa_fixed_fp_offset);
        }
        if h.cfa_fixed_ra_offset != 0 {
            let _ = writeln!(out, "    CFA fixed RA offset: {}", h.cfa_fixed_ra_offset);
        }
    }
    let _ = writeln!(out, "    Num FDEs: {}", h.num_fdes as i32);
    let _ = writeln!(out, "    Num FREs: {}", h.num_fres as i32);
    out.push_str("\n  Function Index :\n\n");
    for function in &listing.functions {
        function_text(h, function, style, &mut out);
    }
    out
}

fn flags_text(flags: u8, style: ObjdumpStyle) -> String {
    if flags == 0 {
        return "    Flags: NONE\n".to_string();
    }
    if style < ObjdumpStyle::Binutils245 {
        // Up to 2.44 the second name overwrote the first (a strcpy slip),
        // and the decoder refused any other bit before the dump ran.
        let name = if flags & F_FRAME_POINTER != 0 {
            "SFRAME_F_FRAME_POINTER"
        } else if flags & F_FDE_SORTED != 0 {
            "SFRAME_F_FDE_SORTED"
        } else {
            ""
        };
        return format!("    Flags: {name}\n");
    }
    const NAMES: [(u8, &str); 3] = [
        (F_FDE_SORTED, "SFRAME_F_FDE_SORTED"),
        (F_FRAME_POINTER, "SFRAME_F_FRAME_POINTER"),
        (F_FDE_FUNC_START_PCREL, "SFRAME_F_FDE_FUNC_START_PCREL"),
    ];
    let mut parts: Vec<String> =
        NAMES.iter().filter(|(bit, _)| flags & bit != 0).map(|(_, name)| name.to_string()).collect();
    let unknown = flags & !(F_FDE_SORTED | F_FRAME_POINTER | F_FDE_FUNC_START_PCREL);
    if unknown != 0 {
        parts.push(unknown.to_string());
    }
    format!("    Flags: {}\n", parts.join(",\n           "))
}

fn function_text(h: &Header, function: &FunctionListing, style: ObjdumpStyle, out: &mut String) {
    let fde = &function.fde;
    // objdump prints the unsigned size with %d.
    let _ = write!(out, "    func idx [{}]: pc = {:#x}, size = {} bytes", fde.index, fde.start, fde.size as i32);
    let signal = fde.info & 0x80 != 0;
    let attr = match (signal && style >= ObjdumpStyle::Binutils246, fde.kind == FdeKind::Flex) {
        (true, true) => ", attr = \"SF\"",
        (true, false) => ", attr = \"S\"",
        (false, true) => ", attr = \"F\"",
        (false, false) => "",
    };
    out.push_str(attr);
    if fde.pauth_key_b && h.abi.is_aarch64() {
        out.push_str(", pauth = B key");
    }
    out.push('\n');
    let marker = if fde.pc_type == PcType::Mask { "[m]" } else { "   " };
    let _ = writeln!(out, "    {:<7}{:<8} {:<10}{:<10}{:<13}", "STARTPC", marker, "CFA", "FP", "RA");
    for row in &function.rows {
        let shown = row.pc.unwrap_or(u64::from(row.start));
        let frame = match row.rule {
            RowRule::Outermost if style >= ObjdumpStyle::Binutils246 => {
                let _ = writeln!(out, "    {shown:016x}  RA undefined");
                continue;
            }
            RowRule::Outermost => {
                // Older libsframe getters failed on a row without words and
                // objdump printed their -1 error value as the offset.
                let base = if row.info & 1 != 0 { "sp" } else { "fp" };
                let ra = if h.cfa_fixed_ra_offset != 0 && style > ObjdumpStyle::Binutils240 { "f" } else { "u" };
                let mangled = if row.info & 0x80 != 0 { "[s]" } else { "   " };
                let _ = writeln!(
                    out,
                    "    {shown:016x}  {:<10}{:<10}{:<13}",
                    format!("{base}+-1"),
                    "u",
                    format!("{ra}{mangled}")
                );
                continue;
            }
            RowRule::Frame(frame) => frame,
        };
        let cfa = cfa_text(h.abi, &frame.cfa);
        let fp = recovery_text(h.abi, frame.fp, style, false);
        let mut ra = recovery_text(h.abi, frame.ra, style, true);
        ra.push_str(if frame.ra_mangled { "[s]" } else { "   " });
        let _ = writeln!(out, "    {shown:016x}  {cfa:<10}{fp:<10}{ra:<13}");
    }
    out.push('\n');
}

/// objdump's register names: SP and FP by name, others by DWARF number.
fn reg_name(abi: Abi, reg: u32) -> String {
    let (sp, fp) = abi.sp_fp_dwarf();
    match reg {
        r if r == sp => "sp".into(),
        r if r == fp => "fp".into(),
        r => format!("r{r}"),
    }
}

fn based(name: &str, offset: i32, deref: bool) -> String {
    if deref {
        format!("({name}{offset:+})")
    } else {
        format!("{name}{offset:+}")
    }
}

fn cfa_text(abi: Abi, cfa: &CfaRule) -> String {
    match cfa.base {
        Base::Sp => format!("sp+{}", cfa.offset),
        Base::Fp => format!("fp+{}", cfa.offset),
        Base::Reg(reg) => based(&reg_name(abi, reg), cfa.offset, cfa.deref),
    }
}

fn recovery_text(abi: Abi, rec: Recovery, style: ObjdumpStyle, is_ra: bool) -> String {
    match rec {
        Recovery::Untracked => "u".into(),
        // 2.40's libsframe getters failed on fixed offsets (§5.1).
        Recovery::Fixed(_) if style == ObjdumpStyle::Binutils240 => "u".into(),
        Recovery::Fixed(_) if is_ra => "f".into(),
        Recovery::Fixed(offset) => format!("c{offset:+}"),
        Recovery::Padding => "U".into(),
        Recovery::Cfa { offset, .. } => format!("c{offset:+}"),
        Recovery::Reg { reg, offset, deref } => based(&reg_name(abi, reg), offset, deref),
        Recovery::InRegister(reg) => format!("r{reg}"),
    }
}
