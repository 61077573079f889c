//! `kernel/unwind/sframe.c` (v13 series), the registry half: the per-mm
//! `.sframe` sections (`sframe_add_section()`, `sframe_remove_section()`);
//! `sframe_find()` is in `sframe_find.rs`.
//!
//! Sections stay in user memory and are read through [`UserBytes`] on every
//! lookup, so a lookup faults exactly where the kernel's would. Only the
//! 28-byte header is copied at registration, as `sframe_read_header()` keeps
//! the parsed values in `struct sframe_section`; later changes to it in user
//! memory go unnoticed, by the kernel and by the model alike.
//!
//! # Freeing a removed section: SRCU, and why the model frees at once
//!
//! Upstream, `__sframe_remove_section()` erases the entry from the maple
//! tree (`mtree_erase()`) and frees the `struct sframe_section` only after
//! an SRCU grace period: `call_srcu(&sframe_srcu, &sec->rcu,
//! sframe_free_srcu)`. The readers are the lookups: `sframe_find()`
//! (`sframe_find_user()` in the trees that also look up kernel sections)
//! takes `guard(srcu)(&sframe_srcu)`, then `mtree_load()`, reads the FDE
//! and FRE through `__find_fde()`/`__find_fre()`, copies the result into
//! the caller's `struct unwind_user_frame` (`struct unwind_frame`), and
//! leaves the read section on return; a lookup that finds the section
//! corrupt calls `sframe_remove_section()` from inside it, which is safe
//! for the same reason. The walker holds no section pointer between
//! lookups: `unwind_user_next_sframe()` passes a local frame, and `struct
//! unwind_user_state` keeps only `ip`, `sp`, `fp`, the word size, the
//! `topmost` flag and the unwinder bits that `unwind_user_start()` chose
//! (SFrame when `current_has_sframe()`); no per-walk cache of the last
//! section exists in the series (read in `dylanbhatch/linux`,
//! `kernel/unwind/user.c` and `sframe.c`, 2026-05, and in the v13
//! patches). So every read of a section happens inside one lookup's read
//! section, and the grace period only has to outlast lookups, not walks.
//!
//! The model runs each lookup ([`SframeRegistry::find`] and the reads of
//! `sframe_find.rs`) atomically with respect to registration and removal,
//! so no lookup is ever in progress when a section is removed: freeing at
//! once is what the grace period guarantees, and an invariant checking
//! that no freed section is read could not fail. A walk in progress
//! between two lookups keeps the frames it has; its next lookup no longer
//! finds the section and falls back to the next unwinder, as upstream
//! (the SFrame bit set by `unwind_user_start()` stays, and the miss is
//! `-ENOENT` for `unwind_user_next()`). `sframe_free_mm()` frees without
//! a grace period upstream too: it runs in `__mmdrop()`, when no task can
//! walk the mm (invariant M1).

use std::collections::BTreeMap;

use ::sframe::read::header::{F_FDE_FUNC_START_PCREL, F_FDE_SORTED, HEADER_SIZE, MAGIC};
use ::sframe::read::validate::{self, Profile};
use ::sframe::read::{ByteSource, Endian, Error, Fault, Section, Version};

use super::types::{Found, Method, SframeMode, Stop};
use crate::arch::Arch;
use crate::memory::{Access, BlockedBytes, MemError, UserBytes, UserMemory};

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
    pub(super) header: [u8; HEADER_SIZE as usize],
}

/// One VMA as `sframe_add_section()` sees it through `vma_lookup()`: its
/// range and whether it is executable (`VM_EXEC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vma {
    /// First address.
    pub start: u64,
    /// Address just past it.
    pub end: u64,
    /// `VM_EXEC`.
    pub exec: bool,
}

/// The host's VMAs: the model keeps no memory map of its own, so the host
/// (the emulator's areas, a test's slice) answers `vma_lookup()`.
pub trait Vmas {
    /// The VMA containing `addr` (`vma_lookup()`), if any.
    fn vma_lookup(&self, addr: u64) -> Option<Vma>;
}

/// The VMA of `list` containing `addr`.
fn vma_in(list: &[Vma], addr: u64) -> Option<Vma> {
    list.iter().copied().find(|v| v.start <= addr && addr < v.end)
}

/// A fixed list of VMAs (tests).
impl<const N: usize> Vmas for [Vma; N] {
    fn vma_lookup(&self, addr: u64) -> Option<Vma> {
        vma_in(self, addr)
    }
}

/// A list of VMAs (hosts that collect them).
impl Vmas for Vec<Vma> {
    fn vma_lookup(&self, addr: u64) -> Option<Vma> {
        vma_in(self, addr)
    }
}

/// Why a section could not be registered or removed; [`RegError::errno`]
/// gives the value the prctl would return.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegError {
    /// An address of 0, or an empty or reversed range (`-EINVAL`).
    #[error("bad range: {0}")]
    BadRange(&'static str),
    /// `vma_lookup()` refused a range: the section not inside one VMA, or
    /// the text not inside one executable VMA (`-EINVAL`).
    #[error("{0}")]
    OutsideVma(String),
    /// The optional full validation (`CONFIG_SFRAME_VALIDATION`,
    /// `sframe_validate_section()`) found the section unusable (`-EFAULT`,
    /// as the kernel's validation returns for unreadable or unsorted rows).
    #[error("validation failed: {0}")]
    Invalid(String),
    /// The header could not be copied from user memory (`-EFAULT`).
    #[error("reading the .sframe header failed at {:#x}", .0.addr())]
    Fault(MemError),
    /// The header does not decode (bad magic, version, flags, ABI, or
    /// sub-sections that do not fit) (`-EINVAL`).
    #[error("bad .sframe header: {0}")]
    BadHeader(Error),
    /// The preamble fails `sframe_read_header()`'s first check (magic in
    /// the task's byte order, version, `SFRAME_F_FDE_SORTED`,
    /// `SFRAME_F_FDE_FUNC_START_PCREL`, no auxiliary header), which the
    /// kernel reports as one "bad/unsupported sframe header"; the detail
    /// names the field (`-EINVAL`).
    #[error("bad/unsupported sframe header: {0}")]
    Unsupported(String),
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
            RegError::Fault(_) | RegError::Invalid(_) => -EFAULT,
            RegError::Overlap { .. } => -EEXIST,
            RegError::BadRange(_)
            | RegError::OutsideVma(_)
            | RegError::BadHeader(_)
            | RegError::Unsupported(_)
            | RegError::Refused(_)
            | RegError::NotRegistered(_) => -EINVAL,
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
            Miss::NoData(why) => Stop::NoMethod { misses: vec![super::types::Miss { method: Method::Sframe, why }] },
            Miss::Corrupt { sframe_start, reason } => {
                Stop::Corrupt { sframe_start: *sframe_start, reason: reason.clone() }
            }
            Miss::Fault { error, .. } => Stop::Fault { addr: error.addr(), method: Method::Sframe },
        }
    }
}

/// The `.sframe` sections of one mm (`mm->sframe_mt`), keyed by text start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SframeRegistry {
    arch: Arch,
    by_text: BTreeMap<u64, SframeEntry>,
    /// What lookups found, while it still holds (`SframeRegistry::lookup`).
    pub(super) memo: Memo,
}

/// The results of [`SframeRegistry`] lookups, by IP and section (its
/// start and end, and the text it describes), for
/// as long as the memory they were read from keeps its generation
/// ([`UserMemory::generation`]): a lab shortcut with no kernel
/// counterpart, which the lookup uses only where it gives what a new
/// lookup would. Part of no registry's state: a copy (a fork's) starts
/// empty, and two registries compare equal whatever they remember.
#[derive(Default)]
pub(super) struct Memo {
    /// The generation the results were read at, and the results.
    found: std::cell::RefCell<(u64, Remembered)>,
}

/// What a lookup's result depends on besides the bytes: the IP, the
/// section's start and end, and its text's start and end.
pub(super) type MemoKey = [u64; 5];

/// Lookup results by [`MemoKey`].
type Remembered = BTreeMap<MemoKey, Result<Found, Miss>>;

/// Results a [`Memo`] holds at most: then it starts over.
const MEMO_ENTRIES: usize = 1 << 16;

impl Memo {
    /// The result for `key` read at `generation`, if remembered.
    pub(super) fn get(&self, generation: u64, key: MemoKey) -> Option<Result<Found, Miss>> {
        let found = self.found.borrow();
        (found.0 == generation).then(|| found.1.get(&key).cloned()).flatten()
    }

    /// Remembers `result` for `key`, read at `generation` (forgetting
    /// what was read at another).
    pub(super) fn put(&self, generation: u64, key: MemoKey, result: Result<Found, Miss>) {
        let mut found = self.found.borrow_mut();
        if found.0 != generation || found.1.len() >= MEMO_ENTRIES {
            *found = (generation, BTreeMap::new());
        }
        found.1.insert(key, result);
    }
}

impl Clone for Memo {
    fn clone(&self) -> Self {
        Memo::default()
    }
}

impl PartialEq for Memo {
    fn eq(&self, _: &Memo) -> bool {
        true
    }
}

impl Eq for Memo {}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo({} results)", self.found.borrow().1.len())
    }
}

impl SframeRegistry {
    /// An empty registry for an mm of `arch` (`mm_init_sframe()`).
    pub fn new(arch: Arch) -> Self {
        SframeRegistry { arch, by_text: BTreeMap::new(), memo: Memo::default() }
    }

    /// The architecture of the mm.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Registers the section at `sframe` = (start, end) describing `text` =
    /// (start, end): `sframe_add_section()`, used by exec for
    /// `PT_GNU_SFRAME` and by `prctl(PR_ADD_SFRAME)`.
    ///
    /// Checks, in the kernel's order: no zero address; under the mmap lock,
    /// `vma_lookup(sframe_start)` must find a VMA that `sframe_end` does not
    /// pass, and `vma_lookup(text_start)` an executable one that `text_end`
    /// does not pass (`text_end` is compared with `vm_end` although the tree
    /// then covers it inclusively, as upstream does); non-empty ranges (the
    /// kernel gets these from its header-size and maple-tree checks, with
    /// the same `-EINVAL`); the header is copied from
    /// user memory (a fault is `-EFAULT`); its preamble gets
    /// `sframe_read_header()`'s first check before anything else is decoded
    /// (magic in the task's byte order, version per `mode`,
    /// `SFRAME_F_FDE_SORTED`, PC-relative starts for V2 and V3, no auxiliary
    /// header: [`RegError::Unsupported`], the kernel's "bad/unsupported
    /// sframe header"); then FDEs and FREs present, sub-sections inside the
    /// range; then the text range must not overlap a registered one. Two stricter points than the kernel, both from the lab reader:
    /// undefined flag bits are refused, and so is another architecture's
    /// ABI (the reader decodes by the ABI byte, the kernel by the running
    /// architecture, so the two would read such a section differently).
    /// With `full_validation` (`CONFIG_SFRAME_VALIDATION`, off by default
    /// as in the kernel's configuration) every FDE and row is read and
    /// checked before insertion, so a corrupt section is refused here
    /// instead of being dropped by the first walk that trips over it.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        mem: &dyn UserMemory,
        vmas: &dyn Vmas,
        access: Access,
        sframe: (u64, u64),
        text: (u64, u64),
        mode: SframeMode,
        full_validation: bool,
    ) -> Result<(), RegError> {
        let ((sframe_start, sframe_end), (text_start, text_end)) = (sframe, text);
        if sframe_start == 0 || sframe_end == 0 || text_start == 0 || text_end == 0 {
            return Err(RegError::BadRange("zero address"));
        }
        match vmas.vma_lookup(sframe_start) {
            Some(vma) if sframe_end <= vma.end => {}
            Some(vma) => {
                return Err(RegError::OutsideVma(format!(
                    ".sframe {sframe_start:#x}..{sframe_end:#x} runs past the end of its VMA ({:#x}..{:#x})",
                    vma.start, vma.end
                )))
            }
            None => return Err(RegError::OutsideVma(format!(".sframe start {sframe_start:#x} is in no VMA"))),
        }
        match vmas.vma_lookup(text_start) {
            Some(vma) if !vma.exec => {
                return Err(RegError::OutsideVma(format!(
                    "text start {text_start:#x} is in a VMA that is not executable ({:#x}..{:#x})",
                    vma.start, vma.end
                )))
            }
            Some(vma) if text_end > vma.end => {
                return Err(RegError::OutsideVma(format!(
                    "text {text_start:#x}..{text_end:#x} runs past the end of its VMA ({:#x}..{:#x})",
                    vma.start, vma.end
                )))
            }
            Some(_) => {}
            None => return Err(RegError::OutsideVma(format!("text start {text_start:#x} is in no VMA"))),
        }
        if sframe_end <= sframe_start {
            return Err(RegError::BadRange("empty .sframe range"));
        }
        if text_end <= text_start {
            return Err(RegError::BadRange("empty text range"));
        }
        let mut header = [0u8; HEADER_SIZE as usize];
        mem.read(sframe_start, &mut header, access).map_err(RegError::Fault)?;
        if let Some(why) = preamble_refusal(&header, self.arch, mode) {
            return Err(RegError::Unsupported(why));
        }
        let src = HeaderCopy {
            header: &header,
            rest: BlockedBytes::new(UserBytes { mem, addr: sframe_start, len: sframe_end - sframe_start, access }),
        };
        let section = Section::parse(&src, sframe_start).map_err(RegError::BadHeader)?;
        let h = *section.header();
        let refusals = [
            (h.num_fdes == 0 || h.num_fres == 0, "no FDE/FRE entries"),
            (h.header_end() >= sframe_end - sframe_start, "header does not fit in the section"),
            (Arch::from_sframe_abi(h.abi) != Some(self.arch), "section is for another architecture"),
        ];
        if let Some(&(_, why)) = refusals.iter().find(|(refused, _)| *refused) {
            return Err(RegError::Refused(why));
        }
        if full_validation {
            let profile = match mode {
                SframeMode::KernelStrict => Profile::Kernel,
                SframeMode::Lab => Profile::Lab,
            };
            let options = validate::Options { profile, text: Some((text_start, text_end)) };
            let report = validate::check(&src, sframe_start, &options);
            if let Some(problem) = report.problems.first() {
                return Err(RegError::Invalid(problem.to_string()));
            }
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
    /// unmapped range `[start, end)`, returning their section starts: the lab's
    /// `MunmapSframe::Remove` variant. The kernel series has no munmap
    /// hook, so there a stale section lives on until `PR_REMOVE_SFRAME`, a
    /// lookup finds it corrupt, or the mm dies.
    pub fn unmap(&mut self, start: u64, end: u64) -> Vec<u64> {
        let hits = |lo: u64, hi: u64| lo < end && start < hi;
        let mut removed = Vec::new();
        self.by_text.retain(|_, e| {
            let keep = !hits(e.text_start, e.text_end) && !hits(e.sframe_start, e.sframe_end);
            if !keep {
                removed.push(e.sframe_start);
            }
            keep
        });
        removed
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
}

/// `sframe_read_header()`'s first check, on the preamble alone and before
/// any other field is decoded, as the kernel makes it: the magic in the
/// task's byte order, the version (3 only, or any the lab reads with
/// [`SframeMode::Lab`]), `SFRAME_F_FDE_SORTED`,
/// `SFRAME_F_FDE_FUNC_START_PCREL` (V2 and V3; V1 has no such flag) and an
/// empty auxiliary header. The kernel answers all of them with one "bad/unsupported
/// sframe header"; the reason returned names the field that failed.
fn preamble_refusal(header: &[u8; HEADER_SIZE as usize], arch: Arch, mode: SframeMode) -> Option<String> {
    let magic = match arch.sframe_abi().endian() {
        Endian::Little => u16::from_le_bytes([header[0], header[1]]),
        Endian::Big => u16::from_be_bytes([header[0], header[1]]),
    };
    let (version, flags, auxhdr_len) = (header[2], header[3], header[7]);
    if magic != MAGIC {
        return Some(format!("magic {magic:#06x}, not {MAGIC:#06x} in the task's byte order"));
    }
    let known = Version::from_byte(version).ok();
    if mode == SframeMode::KernelStrict && known != Some(Version::V3) {
        return Some(format!("version {version}, and only SFrame version 3 is accepted"));
    }
    // Lab mode: an unknown version is left to the reader, which names it.
    let checks = [
        (flags & F_FDE_SORTED == 0, "SFRAME_F_FDE_SORTED is not set"),
        (
            known.is_some_and(|v| v != Version::V1) && flags & F_FDE_FUNC_START_PCREL == 0,
            "SFRAME_F_FDE_FUNC_START_PCREL is not set",
        ),
        (auxhdr_len != 0, "the auxiliary header is not empty"),
    ];
    checks.iter().find(|(failed, _)| *failed).map(|(_, why)| (*why).to_string())
}

/// A section's bytes: the header from the registration-time copy, the rest
/// from user memory.
pub(super) struct HeaderCopy<'a, M: ?Sized> {
    pub(super) header: &'a [u8; HEADER_SIZE as usize],
    pub(super) rest: BlockedBytes<'a, M>,
}

impl<M: UserMemory + ?Sized> ByteSource for HeaderCopy<'_, M> {
    fn size(&self) -> u64 {
        self.rest.bytes.len
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
