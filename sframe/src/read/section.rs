//! A section at a known address: the entry point of reading, and lookup
//! (PC → FDE → FRE → rule).

use super::error::Error;
use super::fde::{self, Fde, PcType};
use super::fre::{self, Fre};
use super::header::{Abi, Header, Layout, Version};
use super::reader::Reader;
use super::rule::{self, RowRule};
use super::source::ByteSource;

/// V1 has no repetition size: ld 2.40's only PC-type MASK FDEs are the
/// x86-64 pltN entries, 16 bytes each, so V1 MASK lookups on AMD64 use it.
/// (libsframe 2.40 treats V1 MASK like INC, which mis-describes every PLT
/// entry after the first.)
pub const V1_AMD64_PLT_ENTRY_SIZE: u8 = 16;

/// One `.sframe` section at a known load address, read through `S`.
#[derive(Debug, Clone)]
pub struct Section<S> {
    src: S,
    base: u64,
    header: Header,
    layout: Layout,
}

/// The answer to "how do I unwind from this PC?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Lookup {
    /// The function's descriptor.
    pub fde: Fde,
    /// Index of the matching row within the FDE.
    pub fre_index: u32,
    /// The matching row's start offset.
    pub fre_start: u32,
    /// The rule as encoded (fixed offsets and padding shown as such).
    pub encoded: RowRule,
    /// The rule with fixed offsets and padding resolved: what a walker evaluates.
    pub rule: RowRule,
}

impl Lookup {
    /// One line people read: where the function and the row are, and how to
    /// unwind (`FDE 4 (0x11f0+0x75) FRE 1 (+0x1): CFA = rsp+16; RA = [CFA-8];
    /// FP = [CFA-16]`).
    pub fn describe(&self, abi: Abi) -> String {
        let fde = &self.fde;
        format!(
            "FDE {} ({:#x}+{:#x}) FRE {} (+{:#x}): {}",
            fde.index,
            fde.start,
            fde.size,
            self.fre_index,
            self.fre_start,
            self.describe_rule(abi)
        )
    }

    /// How to unwind, in words, without where the row is (`CFA = rsp+16;
    /// RA = [CFA-8]; FP = [CFA-16]`).
    pub fn describe_rule(&self, abi: Abi) -> String {
        match self.rule {
            RowRule::Outermost => "outermost frame (RA undefined)".to_string(),
            RowRule::Frame(frame) => format!(
                "CFA = {}; RA = {}{}; FP = {}",
                frame.cfa.describe(abi),
                frame.ra.describe(abi, "link register"),
                if frame.ra_mangled { " (PAC-signed)" } else { "" },
                frame.fp.describe(abi, "unchanged"),
            ),
        }
    }
}

impl<S: ByteSource> Section<S> {
    /// Reads the header of a section whose first byte is at address `base`
    /// and checks that its sub-sections fit. O(1): nothing is iterated.
    pub fn parse(src: S, base: u64) -> Result<Self, Error> {
        let header = Header::parse(&src)?;
        let layout = Layout::of(&header, src.size())?;
        Ok(Section { src, base, header, layout })
    }

    /// The decoded header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Where the sub-sections lie.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Address of the section's first byte.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The byte source.
    pub fn source(&self) -> &S {
        &self.src
    }

    fn reader(&self) -> Reader<'_, S> {
        Reader { src: &self.src, endian: self.header.endian }
    }

    /// Decodes FDE `index`.
    pub fn fde(&self, index: u32) -> Result<Fde, Error> {
        if index >= self.header.num_fdes {
            return Err(Error::NoSuchFde { index, count: self.header.num_fdes });
        }
        fde::read(&self.reader(), &self.header, &self.layout, self.base, index)
    }

    /// All FDEs in array order.
    pub fn fdes(&self) -> impl Iterator<Item = Result<Fde, Error>> + '_ {
        (0..self.header.num_fdes).map(move |i| self.fde(i))
    }

    /// The rows of `fde`, in encoded order.
    pub fn fres(&self, fde: &Fde) -> fre::FreIter<'_, S> {
        fre::FreIter {
            reader: self.reader(),
            fde: *fde,
            layout: self.layout,
            pos: fde.fres_at,
            next_index: 0,
            failed: false,
        }
    }

    /// Absolute start address of FDE `index` (reads only its start field).
    pub fn fde_start(&self, index: u32) -> Result<u64, Error> {
        if index >= self.header.num_fdes {
            return Err(Error::NoSuchFde { index, count: self.header.num_fdes });
        }
        Ok(fde::read_start(&self.reader(), &self.header, &self.layout, self.base, index)?.0)
    }

    /// The FDE whose function contains `pc`: a binary search in sorted
    /// sections (§6 step 2), a linear scan otherwise (unlinked objects).
    pub fn find_fde(&self, pc: u64) -> Result<Option<Fde>, Error> {
        let count = self.header.num_fdes;
        if count == 0 {
            return Ok(None);
        }
        if !self.header.is_sorted() {
            for index in 0..count {
                let fde = self.fde(index)?;
                if fde.contains(pc) {
                    return Ok(Some(fde));
                }
            }
            return Ok(None);
        }
        // Last FDE with start <= pc.
        let (mut lo, mut hi) = (0u32, count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.fde_start(mid)? <= pc {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return Ok(None);
        }
        let fde = self.fde(lo - 1)?;
        Ok(fde.contains(pc).then_some(fde))
    }

    /// The row of `fde` that covers `pc` (§6 step 3), or `None` when the
    /// first row starts after it. Rows must start strictly increasing.
    pub fn find_fre(&self, fde: &Fde, pc: u64) -> Result<Option<Fre>, Error> {
        if !fde.contains(pc) {
            return Ok(None);
        }
        let mut offset = pc.wrapping_sub(fde.start);
        if fde.pc_type == PcType::Mask {
            let rep = match (self.header.version, self.header.abi) {
                (Version::V1, Abi::Amd64) => V1_AMD64_PLT_ENTRY_SIZE,
                (Version::V1, _) => 0,
                _ if fde.rep_size == 0 => return Err(Error::MaskWithoutRepSize { fde: fde.index }),
                _ => fde.rep_size,
            };
            if rep != 0 {
                offset %= u64::from(rep);
            }
        }
        fre::find(&self.reader(), fde, &self.layout, offset)
    }

    /// PC → FDE → FRE → rule, or `None` if no row covers `pc`.
    pub fn lookup(&self, pc: u64) -> Result<Option<Lookup>, Error> {
        let Some(fde) = self.find_fde(pc)? else { return Ok(None) };
        self.lookup_in(&fde, pc)
    }

    /// FRE → rule for a `pc` whose FDE is known: the second half of
    /// [`Section::lookup`], shared with [`IndexedSection`](super::IndexedSection).
    #[inline]
    pub(crate) fn lookup_in(&self, fde: &Fde, pc: u64) -> Result<Option<Lookup>, Error> {
        let Some(fre) = self.find_fre(fde, pc)? else { return Ok(None) };
        let encoded = rule::interpret(&self.header, fde, &fre)?.rule;
        let rule = match encoded {
            RowRule::Frame(frame) => RowRule::Frame(frame.resolved(&self.header)),
            RowRule::Outermost => RowRule::Outermost,
        };
        Ok(Some(Lookup { fde: *fde, fre_index: fre.index, fre_start: fre.start, encoded, rule }))
    }
}
