//! The SFrame method: the per-mm registry of `.sframe` sections and the
//! lookup of the kernel's `sframe.c` (v13 series).
//!
//! Sections stay in user memory and are read through [`UserBytes`] on every
//! lookup, so a lookup faults exactly where the kernel's would. Only the
//! 28-byte header is copied at registration, as `sframe_read_header()` keeps
//! the parsed values in `struct sframe_section`; later changes to it in user
//! memory go unnoticed, by the kernel and by the model alike.
//!
//! The lookup reuses the lab reader's decoding but follows the kernel's
//! algorithm and its classification of failures: "no data" (`-EINVAL`: no
//! section, PC before the first function or in a gap, a function outside
//! the registered text, a first row after the PC, a flex CFA that is not
//! register-based) lets the walk fall back, while corruption and faults
//! (`-EFAULT`: unsorted FDEs seen by the binary search, rows not
//! increasing or starting beyond their function, bad sizes, data running
//! out of the row sub-section, data words the rule does not consume) drop
//! the section. The kernel decodes a row's FRE type and FDE type only when
//! it reads a row; the reader decodes them with the FDE, so such an FDE is
//! corrupt here even if it has no rows.

use std::collections::BTreeMap;

use crate::arch::Arch;
use crate::memory::{Access, MemError, UserBytes, UserMemory};
use sframe::read::header::HEADER_SIZE;
use sframe::read::{
    rule, Base, ByteSource, Error, Fault, Fde, FdeKind, FrameRule, Fre, PcType, Recovery, RowRule, Section, Version,
    V1_AMD64_PLT_ENTRY_SIZE,
};

use super::{CfaBase, Found, Frame, Method, Recorder, Rule, SframeMode, Stop};

/// One registered section: `struct sframe_section`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SframeEntry {
    /// Address of the section's first byte.
    pub sframe_start: u64,
    /// Address just past the section.
    pub sframe_end: u64,
    /// Start of the text the section describes.
    pub text_start: u64,
    /// End of that text. The kernel inserts `[text_start, text_end]` into
    /// its maple tree, so `text_end` itself counts as covered (see
    /// [`SframeRegistry::find`]).
    pub text_end: u64,
    /// The section's format version.
    pub version: Version,
    /// The header as copied at registration.
    header: [u8; HEADER_SIZE as usize],
}

/// Why a section could not be registered or removed; [`RegError::errno`]
/// gives the value the prctl would return.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegError {
    /// An address of 0, or an empty or reversed range (`-EINVAL`).
    #[error("bad range: {0}")]
    BadRange(&'static str),
    /// The header could not be copied from user memory (`-EFAULT`).
    #[error("reading the .sframe header failed at {:#x}", .0.addr())]
    Fault(MemError),
    /// The header does not decode (bad magic, version, flags, ABI, or
    /// sub-sections that do not fit) (`-EINVAL`).
    #[error("bad .sframe header: {0}")]
    BadHeader(Error),
    /// The header decodes but is refused (`-EINVAL`).
    #[error("refused: {0}")]
    Refused(&'static str),
    /// The text range overlaps one already registered (the maple tree's
    /// `-EEXIST`).
    #[error("text {text_start:#x}..={text_end:#x} overlaps the section registered for text at {existing:#x}")]
    Overlap {
        /// Start of the new text range.
        text_start: u64,
        /// End of the new text range.
        text_end: u64,
        /// Text start of the registered section it overlaps.
        existing: u64,
    },
    /// No registered section starts there (`-EINVAL`).
    #[error("no .sframe section registered at {0:#x}")]
    NotRegistered(u64),
}

impl RegError {
    /// The negative errno the kernel returns for this failure.
    pub fn errno(&self) -> i32 {
        const EFAULT: i32 = 14;
        const EEXIST: i32 = 17;
        const EINVAL: i32 = 22;
        match self {
            RegError::Fault(_) => -EFAULT,
            RegError::Overlap { .. } => -EEXIST,
            RegError::BadRange(_) | RegError::BadHeader(_) | RegError::Refused(_) | RegError::NotRegistered(_) => {
                -EINVAL
            }
        }
    }
}

/// The `.sframe` sections of one mm (`mm->sframe_mt`), keyed by text start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SframeRegistry {
    arch: Arch,
    by_text: BTreeMap<u64, SframeEntry>,
}

impl SframeRegistry {
    /// An empty registry for an mm of `arch` (`mm_init_sframe()`).
    pub fn new(arch: Arch) -> Self {
        SframeRegistry { arch, by_text: BTreeMap::new() }
    }

    /// The architecture of the mm.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Registers the section at `sframe` = (start, end) describing `text` =
    /// (start, end): `sframe_add_section()`, used by exec for
    /// `PT_GNU_SFRAME` and by `prctl(PR_ADD_SFRAME)`.
    ///
    /// Checks, in the kernel's spirit: no zero address and non-empty ranges
    /// (the kernel gets the latter from its VMA, header-size and maple-tree
    /// checks; VMAs themselves are not modelled); the header is copied from
    /// user memory (a fault is `-EFAULT`); magic in the task's byte order,
    /// version per `mode`, `SFRAME_F_FDE_SORTED`, PC-relative starts for V2
    /// and V3, no auxiliary header, FDEs and FREs present, sub-sections
    /// inside the range; then the text range must not overlap a registered
    /// one. Two stricter points than the kernel, both from the lab reader:
    /// undefined flag bits are refused, and so is another architecture's
    /// ABI (the reader decodes by the ABI byte, the kernel by the running
    /// architecture, so the two would read such a section differently).
    /// The optional `CONFIG_SFRAME_VALIDATION` pass is not run.
    pub fn add(
        &mut self,
        mem: &dyn UserMemory,
        access: Access,
        sframe: (u64, u64),
        text: (u64, u64),
        mode: SframeMode,
    ) -> Result<(), RegError> {
        let ((sframe_start, sframe_end), (text_start, text_end)) = (sframe, text);
        if sframe_start == 0 || sframe_end == 0 || text_start == 0 || text_end == 0 {
            return Err(RegError::BadRange("zero address"));
        }
        if sframe_end <= sframe_start {
            return Err(RegError::BadRange("empty .sframe range"));
        }
        if text_end <= text_start {
            return Err(RegError::BadRange("empty text range"));
        }
        let mut header = [0u8; HEADER_SIZE as usize];
        mem.read(sframe_start, &mut header, access).map_err(RegError::Fault)?;
        let src = HeaderCopy {
            header: &header,
            rest: UserBytes { mem, addr: sframe_start, len: sframe_end - sframe_start, access },
        };
        let section = Section::parse(&src, sframe_start).map_err(RegError::BadHeader)?;
        let h = *section.header();
        if h.endian != self.arch.sframe_abi().endian() {
            return Err(RegError::Refused("magic is not 0xdee2 in the task's byte order"));
        }
        let refusals = [
            (mode == SframeMode::KernelStrict && h.version != Version::V3, "only SFrame version 3 is accepted"),
            (!h.is_sorted(), "SFRAME_F_FDE_SORTED is not set"),
            (h.version != Version::V1 && !h.is_pcrel(), "SFRAME_F_FDE_FUNC_START_PCREL is not set"),
            (h.auxhdr_len != 0, "auxiliary header is not empty"),
            (h.num_fdes == 0 || h.num_fres == 0, "no FDE/FRE entries"),
            (h.header_end() >= sframe_end - sframe_start, "header does not fit in the section"),
            (Arch::from_sframe_abi(h.abi) != Some(self.arch), "section is for another architecture"),
        ];
        if let Some(&(_, why)) = refusals.iter().find(|(refused, _)| *refused) {
            return Err(RegError::Refused(why));
        }
        // Ranges are inclusive of `text_end`, as in the kernel's maple tree;
        // entries never overlap, so only the last one starting at or before
        // the new end can.
        if let Some(existing) = self.by_text.range(..=text_end).next_back().map(|(_, e)| e) {
            if existing.text_end >= text_start {
                return Err(RegError::Overlap { text_start, text_end, existing: existing.text_start });
            }
        }
        let entry = SframeEntry { sframe_start, sframe_end, text_start, text_end, version: h.version, header };
        self.by_text.insert(text_start, entry);
        Ok(())
    }

    /// Removes every section starting at `sframe_start`
    /// (`sframe_remove_section()`, `prctl(PR_REMOVE_SFRAME)`; also what a
    /// lookup does to a corrupt section).
    pub fn remove(&mut self, sframe_start: u64) -> Result<(), RegError> {
        let before = self.by_text.len();
        self.by_text.retain(|_, e| e.sframe_start != sframe_start);
        if self.by_text.len() == before {
            return Err(RegError::NotRegistered(sframe_start));
        }
        Ok(())
    }

    /// Drops the sections whose text or `.sframe` range intersects the
    /// unmapped range `[start, end)`, returning how many. This is the lab's
    /// choice: the kernel series has no munmap hook, so there a stale
    /// section lives on until `PR_REMOVE_SFRAME`, a lookup finds it
    /// corrupt, or the mm dies. Hosts that want the kernel's behaviour do
    /// not call this.
    pub fn unmap(&mut self, start: u64, end: u64) -> usize {
        let hits = |lo: u64, hi: u64| lo < end && start < hi;
        let before = self.by_text.len();
        self.by_text.retain(|_, e| !hits(e.text_start, e.text_end) && !hits(e.sframe_start, e.sframe_end));
        before - self.by_text.len()
    }

    /// The section covering `ip` (`mtree_load()`). Covered means
    /// `text_start <= ip <= text_end`: the kernel inserts the range with
    /// `text_end` as its inclusive last index.
    pub fn find(&self, ip: u64) -> Option<&SframeEntry> {
        self.by_text.range(..=ip).next_back().map(|(_, e)| e).filter(|e| ip <= e.text_end)
    }

    /// All sections, by text start.
    pub fn entries(&self) -> impl Iterator<Item = &SframeEntry> {
        self.by_text.values()
    }

    /// Number of sections.
    pub fn len(&self) -> usize {
        self.by_text.len()
    }

    /// True when no section is registered (`!current_has_sframe()`).
    pub fn is_empty(&self) -> bool {
        self.by_text.is_empty()
    }

    /// `sframe_find()`: the rule for `ip`, or why there is none.
    pub(super) fn lookup(&self, mem: &Recorder<'_>, access: Access, arch: Arch, ip: u64) -> Result<Found, Miss> {
        let entry = self.find(ip).ok_or(Miss::NoData("no .sframe section covers the IP"))?;
        let src = HeaderCopy {
            header: &entry.header,
            rest: UserBytes { mem, addr: entry.sframe_start, len: entry.sframe_end - entry.sframe_start, access },
        };
        let start = entry.sframe_start;
        let fail = |error: Error| match error {
            Error::Fault { offset } => Miss::Fault {
                sframe_start: start,
                // The recorder saw the failed read; its kind decides the walk's fate.
                error: mem.last_error.get().unwrap_or(MemError::Unmapped { addr: start.wrapping_add(offset) }),
            },
            other => Miss::Corrupt { sframe_start: start, reason: other.to_string() },
        };
        let corrupt = |reason: &str| Miss::Corrupt { sframe_start: start, reason: reason.to_string() };
        // Served from the copied header: no user-memory read.
        let section = Section::parse(&src, start).map_err(fail)?;
        let fde = find_fde(&section, entry, ip, &fail, &corrupt)?;
        let fre = find_fre(&section, &fde, ip, &fail, &corrupt)?;
        let header = section.header();
        if !kernel_consumes_all_words(header.cfa_fixed_ra_offset, header.cfa_fixed_fp_offset, &fde, &fre) {
            return Err(corrupt("data words do not match the rule (the kernel reads every word)"));
        }
        if fde.kind == FdeKind::Flex && fre.word_count() > 0 && fre.word_unsigned(0).unwrap_or(0) & 1 == 0 {
            return Err(Miss::NoData("flex CFA rule is not register-based"));
        }
        match rule::interpret(header, &fde, &fre).map_err(fail)?.rule {
            RowRule::Outermost => Ok(Found::Outermost),
            RowRule::Frame(frame) => Ok(Found::Frame(frame_of(&frame.resolved(header), fde.kind, arch))),
        }
    }
}

/// Why the SFrame method has no rule for an IP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Miss {
    /// Nothing describes the IP (`-EINVAL`): fall back.
    NoData(&'static str),
    /// The section is corrupt (`-EFAULT`): drop it, fall back.
    Corrupt { sframe_start: u64, reason: String },
    /// Reading the section failed.
    Fault { sframe_start: u64, error: MemError },
}

impl Miss {
    /// The section the kernel would drop for this miss: any `-EFAULT`, but
    /// not a [`MemError::WouldFault`] (see the module docs of `unwind`).
    pub(super) fn drops_section(&self) -> Option<u64> {
        match self {
            Miss::Corrupt { sframe_start, .. } => Some(*sframe_start),
            Miss::Fault { sframe_start, error: MemError::Unmapped { .. } } => Some(*sframe_start),
            Miss::NoData(_) | Miss::Fault { error: MemError::WouldFault { .. }, .. } => None,
        }
    }

    /// True for a read refused because the context may not fault.
    pub(super) fn is_would_fault(&self) -> bool {
        matches!(self, Miss::Fault { error: MemError::WouldFault { .. }, .. })
    }

    /// How the walk reports this miss if no later method steps.
    pub(super) fn stop(&self) -> Stop {
        match self {
            Miss::NoData(why) => Stop::NoMethod { reason: format!("sframe: {why}") },
            Miss::Corrupt { sframe_start, reason } => {
                Stop::Corrupt { sframe_start: *sframe_start, reason: reason.clone() }
            }
            Miss::Fault { error, .. } => Stop::Fault { addr: error.addr(), method: Method::Sframe },
        }
    }
}

/// A section's bytes: the header from the registration-time copy, the rest
/// from user memory.
struct HeaderCopy<'a, M: ?Sized> {
    header: &'a [u8; HEADER_SIZE as usize],
    rest: UserBytes<'a, M>,
}

impl<M: UserMemory + ?Sized> ByteSource for HeaderCopy<'_, M> {
    fn size(&self) -> u64 {
        self.rest.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let in_header = HEADER_SIZE.saturating_sub(offset).min(buf.len() as u64) as usize;
        let (head, tail) = buf.split_at_mut(in_header);
        if in_header > 0 {
            let at = offset as usize;
            head.copy_from_slice(&self.header[at..at + in_header]);
        }
        if tail.is_empty() {
            return Ok(());
        }
        self.rest.read_at(offset + in_header as u64, tail)
    }
}

/// `__find_fde()`: binary search for the last function starting at or
/// before `ip`, noticing unsorted starts on the way; then the text-range and
/// gap checks.
fn find_fde<S: ByteSource>(
    section: &Section<S>,
    entry: &SframeEntry,
    ip: u64,
    fail: &impl Fn(Error) -> Miss,
    corrupt: &impl Fn(&str) -> Miss,
) -> Result<Fde, Miss> {
    let (mut low, mut high) = (0i64, i64::from(section.header().num_fdes) - 1);
    // Every start left of a probe must be <= it, every start right >= it.
    let (mut floor, mut ceiling) = (0u64, u64::MAX);
    let mut found: Option<(u32, u64)> = None;
    while low <= high {
        let mid = low + (high - low) / 2;
        let index = mid as u32;
        let start = section.fde_start(index).map_err(fail)?;
        if ip >= start {
            if start < floor {
                return Err(corrupt("FDEs are not sorted"));
            }
            floor = start;
            found = Some((index, start));
            low = mid + 1;
        } else {
            if start > ceiling {
                return Err(corrupt("FDEs are not sorted"));
            }
            ceiling = start;
            high = mid - 1;
        }
    }
    let (index, start) = found.ok_or(Miss::NoData("the IP precedes every function"))?;
    // Checked before the rest of the FDE is read, as in `__read_fde()`.
    if start < entry.text_start || start >= entry.text_end {
        return Err(Miss::NoData("the function starts outside the registered text"));
    }
    let fde = section.fde(index).map_err(|error| match error {
        Error::FreOutside { .. } => Miss::NoData("the FDE's row block lies outside the FRE sub-section"),
        other => fail(other),
    })?;
    if !fde.contains(ip) {
        return Err(Miss::NoData("the IP is in a gap between functions"));
    }
    Ok(fde)
}

/// `__find_fre()`: the last row starting at or before the IP's offset,
/// with the kernel's per-row checks.
fn find_fre<S: ByteSource>(
    section: &Section<S>,
    fde: &Fde,
    ip: u64,
    fail: &impl Fn(Error) -> Miss,
    corrupt: &impl Fn(&str) -> Miss,
) -> Result<Fre, Miss> {
    // `fde.contains(ip)` holds, so the offset fits the u32 function size.
    let mut offset = ip.wrapping_sub(fde.start) as u32;
    if fde.pc_type == PcType::Mask {
        let h = section.header();
        let rep = match h.version {
            // V1 has no repetition size; the reader's PLT heuristic applies.
            Version::V1 if h.abi == sframe::Abi::Amd64 => u32::from(V1_AMD64_PLT_ENTRY_SIZE),
            Version::V1 => 0,
            // The kernel divides by it unchecked; a zero here is its oops.
            _ if fde.rep_size == 0 => return Err(corrupt("PC-type MASK with repetition size 0")),
            _ => u32::from(fde.rep_size),
        };
        if rep != 0 {
            offset %= rep;
        }
    }
    let mut prev: Option<Fre> = None;
    for fre in section.fres(fde) {
        let fre = fre.map_err(fail)?;
        if fde.pc_type == PcType::Inc && fre.start > fde.size {
            return Err(corrupt("a row starts beyond its function"));
        }
        if prev.is_some_and(|p| fre.start <= p.start) {
            return Err(corrupt("row start offsets are not increasing"));
        }
        if fre.start > offset {
            break;
        }
        prev = Some(fre);
    }
    prev.ok_or(Miss::NoData("no row covers the IP"))
}

/// The kernel's data-word accounting (`__read_*_fre_datawords()`): every
/// word must be consumed. Flex rows take a control word for RA and for FP
/// only while two words remain, so a lone trailing word (e.g. a final
/// padding word) is left over, which the lab reader would accept.
fn kernel_consumes_all_words(fixed_ra: i8, fixed_fp: i8, fde: &Fde, fre: &Fre) -> bool {
    let n = fre.word_count();
    if n == 0 {
        return true;
    }
    match fde.kind {
        FdeKind::Default => {
            let mut left = n - 1;
            for fixed in [fixed_ra, fixed_fp] {
                if fixed == 0 && left > 0 {
                    left -= 1;
                }
            }
            left == 0
        }
        FdeKind::Flex => {
            if n < 2 {
                return false;
            }
            let (mut left, mut next) = (n - 2, 2);
            for _ in 0..2 {
                if left >= 2 {
                    let control = fre.word_unsigned(next).unwrap_or(0);
                    let used = if control == 0 { 1 } else { 2 };
                    left -= used;
                    next += used;
                }
            }
            left == 0
        }
    }
}

/// A resolved row rule as the walker's frame description
/// (`sframe_init_cfa_rule_data()`, `sframe_init_rule_data()`).
fn frame_of(rule: &FrameRule, kind: FdeKind, arch: Arch) -> Frame {
    // A flex CFA on SP or FP is an SP/FP rule, valid in every frame.
    let cfa_base = match rule.cfa.base.named(arch.sframe_abi()) {
        Base::Sp => CfaBase::Sp,
        Base::Fp => CfaBase::Fp,
        Base::Reg(r) => CfaBase::Reg(r),
    };
    let recovery = |rec: Recovery| match rec {
        Recovery::Untracked | Recovery::Padding => Rule::Retain,
        // Default FDEs carry bare offsets, and the kernel reads an offset of
        // 0 as "no rule" (`ctl = off ? deref : 0`).
        Recovery::Cfa { offset: 0, deref: true } if kind == FdeKind::Default => Rule::Retain,
        Recovery::Cfa { offset, deref } => Rule::Cfa { offset: i64::from(offset), deref },
        Recovery::Fixed(offset) => Rule::Cfa { offset: i64::from(offset), deref: true },
        Recovery::Reg { reg, offset, deref } => Rule::Reg { reg, offset: i64::from(offset), deref },
        Recovery::InRegister(reg) => Rule::Reg { reg, offset: 0, deref: false },
    };
    Frame {
        cfa_base,
        cfa_offset: i64::from(rule.cfa.offset),
        cfa_deref: rule.cfa.deref,
        sp_off: arch.sp_from_cfa(),
        ra: recovery(rule.ra),
        fp: recovery(rule.fp),
        ra_mangled: rule.ra_mangled,
    }
}
