//! The static check a toolchain developer runs on every object of a
//! distribution: an ELF file's own `.sframe` evaluated against its DWARF
//! CFI (`.eh_frame`, else `.debug_frame`) at every PC of every function,
//! with no execution.
//!
//! The CFI side is the generator's translation of each CFI row
//! ([`generate`](crate::write::generate::generate)), so both sides are SFrame
//! rules and compare field by field; a function the generator cannot
//! express is reported with the generator's reason (gas would skip it the
//! same way). Rules are constant between row starts, so each function is
//! evaluated once per stretch between the row and FDE boundaries of either
//! side — the same verdict as every PC, at a fraction of the cost.
//!
//! [`ObjectCode`] is the part shared with explanations of live walks: where
//! a file's FDEs and executable sections are, and its own `.sframe`.
//! [`Report`] is what `unwindlab sframe compare` prints; reports of disjoint
//! sets of files ([`shard`]) merge into the report of their union.

use std::path::{Path, PathBuf};

use goblin::elf::Elf;
use serde::{Deserialize, Serialize};

use crate::read::fde::{Fde, PcType};
use crate::read::rule::{Recovery, RowRule};
use crate::read::{Lookup, Section};
use crate::write::generate::{self, Cfi};
use crate::{Abi, Version};

/// An executable section of a file, at link-time addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextSection {
    /// Its name (`.text`, `.plt`).
    pub name: String,
    /// Its address.
    pub address: u64,
    /// Its size.
    pub size: u64,
}

/// What an ELF file says about its code: its SFrame ABI, executable
/// sections, FDE ranges, its CFI and its own `.sframe`, all at link-time
/// addresses.
#[derive(Debug)]
pub struct ObjectCode {
    /// The SFrame ABI of its machine.
    pub abi: Abi,
    /// Executable sections, by address.
    pub text: Vec<TextSection>,
    /// (start, size) of every FDE of its CFI, by start.
    pub fdes: Vec<(u64, u64)>,
    /// Its CFI section: which, the bytes and their address (`None`: no CFI).
    pub cfi: Option<(generate::CfiKind, Vec<u8>, u64)>,
    /// Its own `.sframe` section: the bytes and their address.
    pub sframe: Option<(Vec<u8>, u64)>,
    /// The CFI translated into SFrame once, on first use by [`Self::cfi_row`]:
    /// the encoded table and the FDE starts the generator skipped, with why.
    translated: std::sync::OnceLock<Option<Translated>>,
    /// Facts about `text` and `fdes` asked for once per failed stack by
    /// `validate`'s explanations, computed once, on first use.
    facts: std::sync::OnceLock<Facts>,
}

/// [`ObjectCode`]'s FDE coverage, and for each FDE the greatest end of it
/// and the FDEs before it (the start of the gap after them, where no FDE
/// nests in another): what [`ObjectCode::fde_coverage`] and
/// [`ObjectCode::gap_at`] would otherwise scan every FDE for.
#[derive(Debug)]
struct Facts {
    coverage: (u64, u64),
    max_end: Vec<u64>,
}

/// [`ObjectCode`]'s CFI as SFrame: the encoded section, and the functions
/// the generator could not express (start, reason).
#[derive(Debug)]
struct Translated {
    table: Table,
    skipped: Vec<(u64, String)>,
}

/// A stretch of code no FDE covers: between two FDEs, or a section's edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// The executable section holding it.
    pub section: String,
    /// First address without an FDE.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

impl ObjectCode {
    /// Reads the ELF file `data`; `Err` says why it is not one SFrame can
    /// describe (not ELF, a machine without an SFrame ABI, a `.sframe`
    /// outside the file). A file without CFI or `.sframe` is fine.
    pub fn parse(data: &[u8]) -> Result<ObjectCode, String> {
        let elf = Elf::parse(data).map_err(|e| format!("not a valid ELF file: {e}"))?;
        let abi = super::cfi::sframe_abi(&elf)?;
        let mut text: Vec<TextSection> = elf
            .section_headers
            .iter()
            .filter(|sh| sh.sh_flags & u64::from(goblin::elf::section_header::SHF_EXECINSTR) != 0)
            .filter(|sh| sh.sh_addr != 0 && sh.sh_size != 0)
            .map(|sh| TextSection {
                name: elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("?").to_string(),
                address: sh.sh_addr,
                size: sh.sh_size,
            })
            .collect();
        text.sort_by_key(|t| t.address);
        let cfi = super::cfi::cfi_section(&elf, data).ok();
        let mut fdes = match &cfi {
            Some(cfi) => generate::fde_ranges(cfi, abi).map_err(|e| e.to_string())?,
            None => Vec::new(),
        };
        fdes.retain(|&(start, size)| start != 0 && size != 0);
        fdes.sort_unstable();
        fdes.dedup();
        let sframe = super::file::sframe_section(&elf, data)?.map(|(bytes, address)| (bytes.to_vec(), address));
        let cfi = cfi.map(|c| (c.kind, c.data.to_vec(), c.address));
        Ok(ObjectCode {
            abi,
            text,
            fdes,
            cfi,
            sframe,
            translated: std::sync::OnceLock::new(),
            facts: std::sync::OnceLock::new(),
        })
    }

    /// The FDE covering `pc`, as (start, size).
    pub fn fde_at(&self, pc: u64) -> Option<(u64, u64)> {
        let i = self.fdes.partition_point(|f| f.0 <= pc).checked_sub(1)?;
        let (start, size) = self.fdes[i];
        (pc - start < size).then_some((start, size))
    }

    /// The executable section holding `pc`.
    pub fn section_at(&self, pc: u64) -> Option<&TextSection> {
        self.text.iter().find(|t| pc.wrapping_sub(t.address) < t.size)
    }

    /// The stretch of code without an FDE around `pc`, if `pc` is in an
    /// executable section and no FDE covers it.
    pub fn gap_at(&self, pc: u64) -> Option<Gap> {
        if self.fde_at(pc).is_some() {
            return None;
        }
        let section = self.section_at(pc)?;
        let end_of = |f: &(u64, u64)| f.0.saturating_add(f.1);
        // The FDEs are sorted by start: those before `i` start at or before
        // `pc`, the one at `i` is the next to start.
        let i = self.fdes.partition_point(|f| f.0 <= pc);
        let start = match i.checked_sub(1).map(|j| self.facts().max_end[j]) {
            Some(end) if end <= pc => end,
            // An FDE nested in another ends past `pc`: look at each.
            Some(_) => self.fdes[..i].iter().map(end_of).filter(|&e| e <= pc).max().unwrap_or(0),
            None => 0,
        }
        .max(section.address);
        let section_end = section.address.saturating_add(section.size);
        let end = self.fdes.get(i).map_or(u64::MAX, |f| f.0).min(section_end);
        Some(Gap { section: section.name.clone(), start, end })
    }

    /// Bytes of executable sections, and how many of them an FDE covers.
    pub fn fde_coverage(&self) -> (u64, u64) {
        self.facts().coverage
    }

    /// [`Facts`], computed on first use.
    fn facts(&self) -> &Facts {
        self.facts.get_or_init(|| {
            let total = self.text.iter().map(|t| t.size).fold(0, u64::saturating_add);
            let covered = self
                .text
                .iter()
                .map(|t| {
                    let end = t.address.saturating_add(t.size);
                    self.fdes
                        .iter()
                        .map(|&(s, n)| s.saturating_add(n).min(end).saturating_sub(s.max(t.address)))
                        .fold(0, u64::saturating_add)
                })
                .fold(0, u64::saturating_add);
            let max_end = self
                .fdes
                .iter()
                .scan(0u64, |max, &(s, n)| {
                    *max = (*max).max(s.saturating_add(n));
                    Some(*max)
                })
                .collect();
            Facts { coverage: (total, covered.min(total)), max_end }
        })
    }

    /// The SFrame version of the file's own section, if it has one.
    pub fn sframe_version(&self) -> Option<Version> {
        let (bytes, address) = self.sframe.as_ref()?;
        Section::parse(bytes.as_slice(), *address).ok().map(|s| s.header().version)
    }

    /// The row of the file's own `.sframe` at `pc`, in words, if one applies.
    pub fn sframe_row(&self, pc: u64) -> Option<String> {
        let (bytes, address) = self.sframe.as_ref()?;
        let section = Section::parse(bytes.as_slice(), *address).ok()?;
        let found = section.lookup(pc).ok()??;
        Some(found.describe(section.header().abi))
    }

    /// The file's own `.sframe` row at `pc` and the CFI's, in words, if
    /// both apply and they unwind differently (the static check of
    /// [`compare_file`] at one PC).
    pub fn row_disagreement(&self, pc: u64) -> Option<(String, String)> {
        let (bytes, address) = self.sframe.as_ref()?;
        let own = Section::parse(bytes.as_slice(), *address).ok()?;
        let ours = own.lookup(pc).ok()??;
        self.fde_at(pc)?;
        let translated = self.translated()?;
        let theirs = translated.table.section.lookup(pc).ok()??;
        (!same_rule(&ours, &theirs, self.abi)).then(|| (ours.describe(self.abi), theirs.describe_rule(self.abi)))
    }

    /// The CFI's row at `pc` as an SFrame rule, in words (`CFA = rsp+16;
    /// RA = [CFA-8]; FP = unchanged`), or why it has none.
    pub fn cfi_row(&self, pc: u64) -> Option<String> {
        let (start, _) = self.fde_at(pc)?;
        let translated = self.translated()?;
        if let Some((_, reason)) = translated.skipped.iter().find(|s| s.0 == start) {
            return Some(format!("not expressible in SFrame: {reason}"));
        }
        let found = translated.table.section.lookup(pc).ok()??;
        Some(found.describe_rule(self.abi))
    }

    /// The CFI translated to SFrame V3 (once, on first use), if it can be.
    fn translated(&self) -> Option<&Translated> {
        self.translated
            .get_or_init(|| {
                let (kind, data, address) = self.cfi.as_ref()?;
                let cfi = Cfi { kind: *kind, data, address: *address };
                let generated = generate::generate(&cfi, self.abi, Version::V3).ok()?;
                let last = self.fdes.last().map_or(0, |f| f.0.saturating_add(f.1));
                let table = Table::encode(&generated.table, *address, last).ok()?;
                Some(Translated {
                    table,
                    skipped: generated.skipped.into_iter().map(|s| (s.start, s.reason)).collect(),
                })
            })
            .as_ref()
    }
}

/// One side of the comparison: a parsed section and its FDEs by start.
#[derive(Debug)]
struct Table {
    section: Section<Vec<u8>>,
    fdes: Vec<Fde>,
}

impl Table {
    fn parse(bytes: Vec<u8>, address: u64) -> Result<Table, String> {
        let section = Section::parse(bytes, address).map_err(|e| e.to_string())?;
        let mut fdes = section.fdes().collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
        fdes.sort_by_key(|f| f.start);
        Ok(Table { section, fdes })
    }

    /// The generated table encoded at `address`, or past `after` when the
    /// encoding cannot reach (any address will do: it is never loaded).
    fn encode(table: &crate::write::RawSection, address: u64, after: u64) -> Result<Table, String> {
        let (bytes, at) = match crate::write::encode(table, address) {
            Ok(bytes) => (bytes, address),
            Err(_) => (crate::write::encode(table, after).map_err(|e| e.to_string())?, after),
        };
        Table::parse(bytes, at)
    }

    fn fde_at(&self, pc: u64) -> Option<&Fde> {
        let i = self.fdes.partition_point(|f| f.start <= pc).checked_sub(1)?;
        let fde = &self.fdes[i];
        fde.contains(pc).then_some(fde)
    }

    /// Adds to `cuts` every PC in `start..end` where this side's rule may
    /// change: FDE edges and row starts; `false` if a MASK FDE (whose rows
    /// repeat) overlaps, so every PC must be looked at.
    fn cuts(&self, start: u64, end: u64, cuts: &mut Vec<u64>) -> bool {
        let first = self.fdes.partition_point(|f| f.start.saturating_add(u64::from(f.size)) <= start);
        for fde in self.fdes[first..].iter().take_while(|f| f.start < end) {
            if fde.pc_type == PcType::Mask {
                return false;
            }
            cuts.push(fde.start);
            cuts.push(fde.start.saturating_add(u64::from(fde.size)));
            for fre in self.section.fres(fde).flatten() {
                cuts.push(fde.start.saturating_add(u64::from(fre.start)));
            }
        }
        true
    }
}

/// Two rules that unwind alike: an RA or FP "untracked" is the link
/// register (RA) or unchanged (FP), whichever way it is spelt; fixed
/// offsets and padding are resolved already.
fn same_rule(a: &Lookup, b: &Lookup, abi: Abi) -> bool {
    let normal = |l: &Lookup| {
        let rule = l.rule.canonical(abi);
        let RowRule::Frame(mut f) = rule else { return (rule, l.fde.signal) };
        let (_, fp) = abi.sp_fp_dwarf();
        let keep = |r: Recovery, reg: u32| match r {
            Recovery::Untracked | Recovery::Padding => Recovery::Reg { reg, offset: 0, deref: false },
            other => other,
        };
        f.ra = keep(f.ra, abi.ra_dwarf());
        f.fp = keep(f.fp, fp);
        (RowRule::Frame(f), l.fde.signal)
    };
    normal(a) == normal(b)
}

/// A PC range where the `.sframe` row and the CFI's row differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disagreement {
    /// The function (symbol, else `fde@0x…`).
    pub function: String,
    /// First PC.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// The `.sframe` row there, in words (`none`: no row covers it).
    pub sframe: String,
    /// The CFI row there, as an SFrame rule in words.
    pub cfi: String,
}

/// A function with CFI but no SFrame, or one whose CFI SFrame cannot
/// express (then its `.sframe` rows are not checked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uncovered {
    /// The function (symbol, else `fde@0x…`).
    pub function: String,
    /// FDE start.
    pub start: u64,
    /// FDE size.
    pub size: u64,
    /// Why it has no SFrame, or why it was not checked.
    pub reason: String,
}

/// The comparison of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileReport {
    /// The path, as given or found under a directory given.
    pub file: String,
    /// Why the file could not be compared at all (malformed ELF or
    /// `.sframe`, no SFrame ABI); the counts are then zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its own `.sframe`: `SFrame V3`, or `none`.
    pub sframe: String,
    /// Its CFI section (`.eh_frame`, `.debug_frame`, or `none`).
    pub cfi: String,
    /// Bytes of executable sections.
    pub text_bytes: u64,
    /// FDEs in the CFI.
    pub fdes: u64,
    /// Bytes of code whose `.sframe` row was checked against the CFI.
    pub checked_bytes: u64,
    /// Of those, bytes where the two disagree.
    pub disagreeing_bytes: u64,
    /// Bytes of code with CFI but no SFrame.
    pub uncovered_bytes: u64,
    /// Each disagreeing PC range, by address.
    pub disagreements: Vec<Disagreement>,
    /// Functions with CFI and no SFrame, or not checkable, by address.
    /// Left empty for a file without `.sframe` (every FDE would be listed).
    pub uncovered: Vec<Uncovered>,
}

impl FileReport {
    fn failed(file: &str, error: String) -> FileReport {
        FileReport {
            file: file.to_string(),
            error: Some(error),
            sframe: "none".into(),
            cfi: "none".into(),
            text_bytes: 0,
            fdes: 0,
            checked_bytes: 0,
            disagreeing_bytes: 0,
            uncovered_bytes: 0,
            disagreements: Vec::new(),
            uncovered: Vec::new(),
        }
    }
}

/// Reads and compares the file `path`; every problem is in the report.
pub fn compare_file(path: &Path) -> FileReport {
    let name = path.display().to_string();
    match std::fs::read(path) {
        Ok(data) => compare_bytes(&name, &data),
        Err(e) => FileReport::failed(&name, format!("cannot read: {e}")),
    }
}

/// Compares the ELF file `data`, called `file` in the report.
pub fn compare_bytes(file: &str, data: &[u8]) -> FileReport {
    let mut code = match ObjectCode::parse(data) {
        Ok(code) => code,
        Err(e) => return FileReport::failed(file, e),
    };
    let symbols = super::symbols::Symbols::parse(data, 0);
    let function = |pc: u64| symbols.function(pc);
    let mut report = FileReport::failed(file, String::new());
    report.error = None;
    report.text_bytes = code.fde_coverage().0;
    report.fdes = code.fdes.len() as u64;
    let Some((kind, cfi_bytes, cfi_address)) = &code.cfi else {
        if code.sframe.is_some() {
            report.sframe =
                code.sframe_version().map_or("SFrame (unreadable)".into(), |v| format!("SFrame V{}", v.number()));
        }
        return report;
    };
    report.cfi = kind.to_string();
    let cfi = Cfi { kind: *kind, data: cfi_bytes, address: *cfi_address };
    let generated = match generate::generate(&cfi, code.abi, Version::V3) {
        Ok(g) => g,
        Err(e) => return FileReport { error: Some(e.to_string()), ..report },
    };
    // The bytes move out: nothing below asks the code for its own section.
    let Some((own_bytes, own_address)) = code.sframe.take() else {
        report.uncovered_bytes = code.fde_coverage().1;
        return report;
    };
    let own = match Table::parse(own_bytes, own_address) {
        Ok(t) => t,
        Err(e) => return FileReport { error: Some(format!("its .sframe is malformed: {e}")), ..report },
    };
    report.sframe = format!("SFrame V{}", own.section.header().version.number());
    let last = code.fdes.last().map_or(0, |f| f.0.saturating_add(f.1));
    let gen = match Table::encode(&generated.table, *cfi_address, last) {
        Ok(t) => t,
        Err(e) => return FileReport { error: Some(format!("the CFI's rows cannot be encoded: {e}")), ..report },
    };
    for s in &generated.skipped {
        let (reason, checked) = match own.fde_at(s.start) {
            Some(_) => (format!("not checked: its CFI is not expressible in SFrame ({})", s.reason), true),
            None => (format!("no SFrame, as the generator and gas would skip it: {}", s.reason), false),
        };
        if !checked {
            report.uncovered_bytes = report.uncovered_bytes.saturating_add(s.size);
        }
        report.uncovered.push(Uncovered { function: function(s.start), start: s.start, size: s.size, reason });
    }
    for c in &generated.covered {
        let (start, end) = (c.start, c.start.saturating_add(u64::from(c.size)));
        let mut cuts = vec![start];
        let stepped = own.cuts(start, end, &mut cuts) && gen.cuts(start, end, &mut cuts);
        if !stepped {
            cuts = (start..end).collect();
        }
        cuts.retain(|&pc| (start..end).contains(&pc));
        cuts.sort_unstable();
        cuts.dedup();
        let mut missing = 0u64;
        for (i, &pc) in cuts.iter().enumerate() {
            let next = cuts.get(i + 1).copied().unwrap_or(end);
            let (Ok(Some(theirs)), Ok(ours)) = (gen.section.lookup(pc), own.section.lookup(pc)) else { continue };
            let words_cfi = || theirs.describe_rule(code.abi);
            let disagreement = match ours {
                None if own.fde_at(pc).is_none() => {
                    missing += next - pc;
                    None
                }
                None => Some("none (the FDE has no row here)".to_string()),
                Some(ours) if !same_rule(&ours, &theirs, code.abi) => Some(ours.describe(code.abi)),
                Some(_) => None,
            };
            report.checked_bytes += next - pc;
            let Some(sframe) = disagreement else { continue };
            report.disagreeing_bytes += next - pc;
            match report.disagreements.last_mut() {
                Some(d) if d.end == pc && d.sframe == sframe && d.cfi == words_cfi() => d.end = next,
                _ => report.disagreements.push(Disagreement {
                    function: function(pc),
                    start: pc,
                    end: next,
                    sframe,
                    cfi: words_cfi(),
                }),
            }
        }
        if missing > 0 {
            report.checked_bytes -= missing;
            report.uncovered_bytes += missing;
            let reason = if missing == end - start {
                "no SFrame FDE covers it, though its CFI is expressible in SFrame".to_string()
            } else {
                format!("{missing} of its {} bytes have no SFrame FDE, though its CFI is expressible", end - start)
            };
            report.uncovered.push(Uncovered { function: function(start), start, size: end - start, reason });
        }
    }
    report.uncovered.sort_by_key(|u| u.start);
    report
}

/// Totals over every file of a [`Report`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Files compared (those with errors included).
    pub files: u64,
    /// Files that could not be compared.
    pub errors: u64,
    /// Files with their own `.sframe`.
    pub with_sframe: u64,
    /// Files with a `.sframe` that disagrees with their CFI somewhere.
    pub disagreeing_files: u64,
    /// Bytes of executable sections.
    pub text_bytes: u64,
    /// Bytes checked.
    pub checked_bytes: u64,
    /// Bytes where `.sframe` and CFI disagree.
    pub disagreeing_bytes: u64,
    /// Bytes with CFI but no SFrame.
    pub uncovered_bytes: u64,
}

/// The comparison of a set of files: each file's report, sorted by path,
/// and their totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Totals.
    pub totals: Totals,
    /// Per file, by path.
    pub files: Vec<FileReport>,
}

impl Report {
    /// The report of `files` (in any order): the same whether they were
    /// compared in one run or in shards whose reports are merged.
    pub fn new(mut files: Vec<FileReport>) -> Report {
        files.sort_by(|a, b| a.file.cmp(&b.file));
        let mut t = Totals::default();
        for f in &files {
            t.files += 1;
            t.errors += u64::from(f.error.is_some());
            t.with_sframe += u64::from(f.sframe != "none");
            t.disagreeing_files += u64::from(!f.disagreements.is_empty());
            t.text_bytes += f.text_bytes;
            t.checked_bytes += f.checked_bytes;
            t.disagreeing_bytes += f.disagreeing_bytes;
            t.uncovered_bytes += f.uncovered_bytes;
        }
        Report { totals: t, files }
    }

    /// Merges the reports of disjoint sets of files (shards) into the
    /// report of their union; a file in two of them is an error.
    pub fn merge(reports: Vec<Report>) -> Result<Report, String> {
        let mut files: Vec<FileReport> = reports.into_iter().flat_map(|r| r.files).collect();
        files.sort_by(|a, b| a.file.cmp(&b.file));
        if let Some(w) = files.windows(2).find(|w| w[0].file == w[1].file) {
            return Err(format!("{} is in more than one report: shards must be disjoint", w[0].file));
        }
        Ok(Report::new(files))
    }
}

/// Disagreements and uncovered functions listed per file in the text.
const LISTED: usize = 10;

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for r in &self.files {
            if let Some(e) = &r.error {
                writeln!(f, "{}: error: {e}", r.file)?;
                continue;
            }
            if r.sframe == "none" {
                writeln!(
                    f,
                    "{}: no .sframe section (the toolchain emitted none): {} of {} executable bytes have CFI ({}) \
                     and no SFrame",
                    r.file, r.uncovered_bytes, r.text_bytes, r.cfi
                )?;
                continue;
            }
            writeln!(
                f,
                "{}: {} vs {}: {} of {} bytes checked agree, {} disagree in {} ranges; {} bytes with CFI and no SFrame",
                r.file,
                r.sframe,
                r.cfi,
                r.checked_bytes - r.disagreeing_bytes,
                r.checked_bytes,
                r.disagreeing_bytes,
                r.disagreements.len(),
                r.uncovered_bytes
            )?;
            for d in r.disagreements.iter().take(LISTED) {
                writeln!(f, "    {:#x}..{:#x} in {}: .sframe {}", d.start, d.end, d.function, d.sframe)?;
                writeln!(f, "      CFI says {}", d.cfi)?;
            }
            if r.disagreements.len() > LISTED {
                writeln!(f, "    … {} more ranges (--json lists all)", r.disagreements.len() - LISTED)?;
            }
            for u in r.uncovered.iter().take(LISTED) {
                writeln!(f, "    {} ({:#x}+{:#x}): {}", u.function, u.start, u.size, u.reason)?;
            }
            if r.uncovered.len() > LISTED {
                writeln!(f, "    … {} more functions (--json lists all)", r.uncovered.len() - LISTED)?;
            }
        }
        let t = &self.totals;
        writeln!(
            f,
            "{} files ({} with .sframe, {} with errors): {} of {} checked bytes disagree, in {} files; \
             {} bytes with CFI and no SFrame; {} executable bytes",
            t.files,
            t.with_sframe,
            t.errors,
            t.disagreeing_bytes,
            t.checked_bytes,
            t.disagreeing_files,
            t.uncovered_bytes,
            t.text_bytes
        )
    }
}

/// The ELF files named by `paths`: each file given, and every regular file
/// under each directory given (recursively, symbolic links not followed,
/// so a library's aliases count once) that starts with the ELF magic;
/// sorted by path. Unreadable directories are errors naming them.
pub fn elf_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                walk(&entry.path(), out)?;
            } else if kind.is_file() && is_elf(&entry.path()) {
                out.push(entry.path());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            walk(path, &mut out)?;
        } else if path.exists() {
            // A file named explicitly is compared even when it is not ELF:
            // its report says why not.
            out.push(path.clone());
        } else {
            return Err(format!("{}: no such file or directory", path.display()));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok()
        && &magic == super::constants::ELF_MAGIC
}

/// Shard `k` of `n` (0 ≤ k < n) of `files` sorted by path: every `n`th
/// file from the `k`th, so shards are disjoint, cover everything and mix
/// large and small files the same way on every machine.
pub fn shard<T>(files: Vec<T>, k: usize, n: usize) -> Vec<T> {
    files.into_iter().enumerate().filter(|(i, _)| n != 0 && i % n == k).map(|(_, f)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_disjoint_and_cover_everything() {
        let files: Vec<u32> = (0..10).collect();
        let mut all: Vec<u32> = (0..3).flat_map(|k| shard(files.clone(), k, 3)).collect();
        assert_eq!(shard(files.clone(), 1, 3), [1, 4, 7]);
        all.sort_unstable();
        assert_eq!(all, files);
    }

    /// `gap_at` and `fde_coverage` answer from facts computed once as a
    /// scan of every FDE would, nested and overlapping FDEs included.
    #[test]
    fn gaps_and_coverage_are_those_of_a_scan_of_every_fde() {
        let fdes = vec![(0x1000, 0x10), (0x1020, 0x40), (0x1030, 0x8), (0x1070, 0x4), (0x1078, 0x20), (0x1080, 0x4)];
        let code = ObjectCode {
            abi: Abi::Amd64,
            text: vec![
                TextSection { name: ".init".into(), address: 0xf00, size: 0x20 },
                TextSection { name: ".text".into(), address: 0x1000, size: 0x100 },
            ],
            fdes: fdes.clone(),
            cfi: None,
            sframe: None,
            translated: std::sync::OnceLock::new(),
            facts: std::sync::OnceLock::new(),
        };
        let scan = |pc: u64| {
            let section = code.section_at(pc)?;
            if code.fde_at(pc).is_some() {
                return None;
            }
            let end_of = |f: &(u64, u64)| f.0 + f.1;
            let start = fdes.iter().map(end_of).filter(|&e| e <= pc).max().unwrap_or(0).max(section.address);
            let end = fdes.iter().map(|f| f.0).filter(|&s| s > pc).min().unwrap_or(u64::MAX);
            Some(Gap { section: section.name.clone(), start, end: end.min(section.address + section.size) })
        };
        for pc in 0xe00..0x1200 {
            assert_eq!(code.gap_at(pc), scan(pc), "{pc:#x}");
        }
        assert_eq!(code.gap_at(0x1068), Some(Gap { section: ".text".into(), start: 0x1060, end: 0x1070 }));
        // .init has none; .text has 0x10 + 0x40 + 0x4 + 0x20 bytes (and 0x8, 0x4 nested).
        assert_eq!(code.fde_coverage(), (0x120, 0x10 + 0x40 + 0x8 + 0x4 + 0x20 + 0x4));
    }

    #[test]
    fn bad_input_is_a_report_not_a_panic() {
        let report = compare_bytes("junk", b"\x7fELF not really");
        assert!(report.error.as_deref().is_some_and(|e| e.contains("not a valid ELF")), "{report:?}");
        let merged = Report::merge(vec![Report::new(vec![report.clone()]), Report::new(vec![report])]);
        assert!(merged.unwrap_err().contains("junk is in more than one report"));
    }
}
