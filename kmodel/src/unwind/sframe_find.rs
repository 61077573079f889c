//! `sframe_find()` of `kernel/unwind/sframe.c` (v13 series): the rule for
//! an IP from the registered section that covers it.
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

use ::sframe::read::{
    rule, Base, ByteSource, Error, Fde, FdeKind, FrameRule, Fre, PcType, Recovery, RowRule, Section, Version,
    V1_AMD64_PLT_ENTRY_SIZE,
};

use super::sframe::{HeaderCopy, Miss, SframeEntry, SframeRegistry};
use super::types::{CfaBase, Found, Frame, Recorder, Rule};
use crate::arch::Arch;
use crate::memory::{Access, BlockedBytes, MemError, UserBytes, UserMemory, PAGE_SIZE};

impl SframeRegistry {
    /// `sframe_find()`: the rule for `ip`, or why there is none. Sections
    /// starting at an address in `removed` count as removed already.
    ///
    /// What a lookup found is remembered ([`super::sframe::Memo`]) where
    /// the next lookup of the same IP in the same section would read the
    /// same bytes with no fault: every page it read was resident, readable
    /// and not writable, and the memory's generation has not moved since
    /// (no map, unmap, protection change or eviction). The kernel reads the
    /// section again each time; the bytes, the result and the faults (none)
    /// are those it gets.
    pub(super) fn lookup(
        &self,
        mem: &Recorder<'_>,
        access: Access,
        arch: Arch,
        ip: u64,
        removed: &[u64],
    ) -> Result<Found, Miss> {
        let entry = self
            .find(ip)
            .filter(|e| !removed.contains(&e.sframe_start))
            .ok_or(Miss::NoData("no .sframe section covers the IP"))?;
        let generation = mem.generation().filter(|_| arch == self.arch());
        // The entry's ranges too: a section unregistered and registered
        // again at the same place for other text changes no memory.
        let key = [ip, entry.sframe_start, entry.sframe_end, entry.text_start, entry.text_end];
        if let Some(found) = generation.and_then(|g| self.memo.get(g, key)) {
            return found;
        }
        let touched = Touched { mem, pages: Default::default() };
        let found = lookup_in(entry, &touched, access, arch, ip);
        let cacheable = matches!(found, Ok(_) | Err(Miss::NoData(_)));
        if let Some(g) = generation.filter(|_| cacheable) {
            if touched.pages.borrow().iter().all(|&page| mem.stable_page(page)) {
                self.memo.put(g, key, found.clone());
            }
        }
        found
    }
}

/// User memory that notes the pages read through it (each once, in order).
struct Touched<'r, 'm> {
    mem: &'r Recorder<'m>,
    pages: std::cell::RefCell<Vec<u64>>,
}

impl UserMemory for Touched<'_, '_> {
    fn read(&self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemError> {
        if !buf.is_empty() {
            let mut pages = self.pages.borrow_mut();
            let last = addr.saturating_add(buf.len() as u64 - 1) & !(PAGE_SIZE - 1);
            let mut page = addr & !(PAGE_SIZE - 1);
            loop {
                if !pages.contains(&page) {
                    pages.push(page);
                }
                if page >= last {
                    break;
                }
                page += PAGE_SIZE;
            }
        }
        self.mem.read(addr, buf, access)
    }
}

/// [`SframeRegistry::lookup`] in `entry`, reading through `mem`.
fn lookup_in(entry: &SframeEntry, mem: &Touched<'_, '_>, access: Access, arch: Arch, ip: u64) -> Result<Found, Miss> {
    let src = HeaderCopy {
        header: &entry.header,
        rest: BlockedBytes::new(UserBytes {
            mem,
            addr: entry.sframe_start,
            len: entry.sframe_end - entry.sframe_start,
            access,
        }),
    };
    let start = entry.sframe_start;
    let fail = |error: Error| match error {
        Error::Fault { offset } => Miss::Fault {
            sframe_start: start,
            // The recorder saw the failed read; its kind decides the walk's fate.
            error: mem.mem.last_error.get().unwrap_or(MemError::Unmapped { addr: start.wrapping_add(offset) }),
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
            Version::V1 if h.abi == ::sframe::Abi::Amd64 => u32::from(V1_AMD64_PLT_ENTRY_SIZE),
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
