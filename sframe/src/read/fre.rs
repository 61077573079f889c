//! Frame row entries (§5): byte-packed rows of a function, decoded lazily.

use super::error::Error;
use super::fde::Fde;
use super::header::Layout;
use super::reader::Reader;
use super::source::ByteSource;

/// Most data words an FRE info byte can announce (4-bit count).
pub const MAX_WORDS: usize = 15;

/// One decoded frame row entry: start offset, info byte and raw data words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fre {
    /// Position of the row within its FDE.
    pub index: u32,
    /// Offset of the row's first PC from the function start (INC) or from
    /// the start of the repeating block (MASK).
    pub start: u32,
    /// Raw info byte.
    pub info: u8,
    /// Section offset of the row.
    pub at: u64,
    words: [u32; MAX_WORDS],
}

impl Fre {
    /// Info bit 0: the default-FDE CFA base is SP (else FP).
    pub fn cfa_base_is_sp(&self) -> bool {
        self.info & 1 != 0
    }

    /// Number of data words (0 = RA undefined, outermost frame).
    pub fn word_count(&self) -> usize {
        usize::from((self.info >> 1) & 0xf)
    }

    /// Bytes per data word (1, 2 or 4).
    pub fn word_size(&self) -> u8 {
        1 << ((self.info >> 5) & 3)
    }

    /// Info bit 7: AArch64 RA is PAC-signed for these PCs.
    pub fn ra_mangled(&self) -> bool {
        self.info & 0x80 != 0
    }

    /// Data word `i` read as unsigned (flex control words).
    pub fn word_unsigned(&self, i: usize) -> Option<u32> {
        self.words[..self.word_count()].get(i).copied()
    }

    /// Data word `i` read as signed, sign-extended from its size (offsets).
    pub fn word_signed(&self, i: usize) -> Option<i32> {
        let raw = self.word_unsigned(i)?;
        let shift = 32 - 8 * u32::from(self.word_size());
        Some(((raw << shift) as i32) >> shift)
    }

    /// Encoded size of this row in bytes.
    pub fn byte_len(&self, fde: &Fde) -> u64 {
        u64::from(fde.fre_type.width()) + 1 + self.word_count() as u64 * u64::from(self.word_size())
    }

    /// Builds a row from parts (for writers and tests); words are stored as
    /// raw bits of their size.
    pub fn from_parts(index: u32, start: u32, info: u8, words: &[u32]) -> Self {
        let mut all = [0u32; MAX_WORDS];
        let n = words.len().min(MAX_WORDS);
        all[..n].copy_from_slice(&words[..n]);
        Fre { index, start, info, at: 0, words: all }
    }
}

/// Iterator over the FREs of one FDE. Each row is bounds-checked against the
/// FRE sub-section, and every row consumes at least two bytes, so a hostile
/// FRE count cannot make it loop longer than the sub-section allows.
pub struct FreIter<'s, S: ?Sized> {
    pub(crate) reader: Reader<'s, S>,
    pub(crate) fde: Fde,
    pub(crate) layout: Layout,
    pub(crate) pos: u64,
    pub(crate) next_index: u32,
    pub(crate) failed: bool,
}

impl<S: ByteSource + ?Sized> FreIter<'_, S> {
    fn decode(&mut self) -> Result<Fre, Error> {
        let fde = &self.fde;
        let index = self.next_index;
        let at = self.pos;
        let width = fde.fre_type.width();
        let outside = |offset| Error::FreOutside {
            fde: fde.index,
            what: "FRE",
            offset,
            start: self.layout.fres_start,
            end: self.layout.fres_end,
        };
        if at + u64::from(width) + 1 > self.layout.fres_end {
            return Err(outside(at));
        }
        let start = self.reader.uint(at, width, "FRE start offset")?;
        let info = self.reader.u8(at + u64::from(width), "FRE info")?;
        if (info >> 5) & 3 == 3 {
            return Err(Error::BadWordSize { fde: fde.index, fre: index, info });
        }
        let mut fre = Fre { index, start, info, at, words: [0; MAX_WORDS] };
        let size = fre.word_size();
        let end = at + fre.byte_len(fde);
        if end > self.layout.fres_end {
            return Err(outside(at));
        }
        let mut pos = at + u64::from(width) + 1;
        let count = fre.word_count();
        for word in fre.words.iter_mut().take(count) {
            *word = self.reader.uint(pos, size, "FRE data word")?;
            pos += u64::from(size);
        }
        self.pos = end;
        Ok(fre)
    }
}

impl<S: ByteSource + ?Sized> Iterator for FreIter<'_, S> {
    type Item = Result<Fre, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next_index >= self.fde.num_fres {
            return None;
        }
        let item = self.decode();
        self.failed = item.is_err();
        self.next_index += 1;
        Some(item)
    }
}
