//! Frame row entries (§5): byte-packed rows of a function, decoded lazily.

use super::error::Error;
use super::fde::Fde;
use super::header::Layout;
use super::reader::Reader;
use super::source::{ByteSource, Endian};

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
        row_len(fde.fre_type.width(), self.info)
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

/// Encoded size of a row with `width`-byte start offset and info byte
/// `info`: the start, the info byte, then its data words.
#[inline]
fn row_len(width: u8, info: u8) -> u64 {
    let count = u64::from((info >> 1) & 0xf);
    u64::from(width) + 1 + (count << ((info >> 5) & 3))
}

/// The start offset and info byte of one row, and where the next row begins.
#[derive(Clone, Copy)]
struct Head {
    start: u32,
    info: u8,
    end: u64,
}

impl Head {
    /// The row with its data words still to be read.
    fn fre(self, index: u32, at: u64) -> Fre {
        Fre { index, start: self.start, info: self.info, at, words: [0; MAX_WORDS] }
    }
}

/// Decodes the start offset and info byte of row `index` at `at` and checks
/// that the whole row lies inside the FRE sub-section, without reading its
/// data words: the one check of a row's shape, shared by the iterator and
/// by [`find`].
#[inline]
fn decode_head<S: ByteSource + ?Sized>(
    reader: &Reader<'_, S>,
    fde: &Fde,
    layout: &Layout,
    index: u32,
    at: u64,
) -> Result<Head, Error> {
    let width = fde.fre_type.width();
    let outside = |offset| Error::FreOutside {
        fde: fde.index,
        what: "FRE",
        offset,
        start: layout.fres_start,
        end: layout.fres_end,
    };
    if at + u64::from(width) + 1 > layout.fres_end {
        return Err(outside(at));
    }
    let start = reader.uint(at, width, "FRE start offset")?;
    let info = reader.u8(at + u64::from(width), "FRE info")?;
    if (info >> 5) & 3 == 3 {
        return Err(Error::BadWordSize { fde: fde.index, fre: index, info });
    }
    let end = at + row_len(width, info);
    if end > layout.fres_end {
        return Err(outside(at));
    }
    Ok(Head { start, info, end })
}

/// Reads the data words of a row [`decode_head`] has checked.
#[inline]
fn decode_words<S: ByteSource + ?Sized>(reader: &Reader<'_, S>, fde: &Fde, fre: &mut Fre) -> Result<(), Error> {
    let size = fre.word_size();
    let mut pos = fre.at + u64::from(fde.fre_type.width()) + 1;
    let count = fre.word_count();
    for word in fre.words.iter_mut().take(count) {
        *word = reader.uint(pos, size, "FRE data word")?;
        pos += u64::from(size);
    }
    Ok(())
}

/// The last row of `fde` starting at or before `offset` (§6 step 3), or
/// `None` when the first row starts after it. Rows are walked by their
/// start and info bytes only, with the same checks as [`FreIter`] (each row
/// inside the sub-section, starts strictly increasing up to and including
/// the first row past `offset`); only the matching row's data words are
/// read. This is what makes a lookup cost one row's words, not every
/// earlier row's.
pub(crate) fn find<S: ByteSource + ?Sized>(
    reader: &Reader<'_, S>,
    fde: &Fde,
    layout: &Layout,
    offset: u64,
) -> Result<Option<Fre>, Error> {
    if let Some(bytes) = reader.src.as_slice() {
        if let Some(found) = scan_slice(bytes, reader.endian, fde, layout, offset) {
            let Some((index, at)) = found else { return Ok(None) };
            let head = decode_head(reader, fde, layout, index, at)?;
            let mut fre = head.fre(index, at);
            decode_words(reader, fde, &mut fre)?;
            return Ok(Some(fre));
        }
    }
    // (index, position, head) of the last row starting at or before `offset`.
    let mut found: Option<(u32, u64, Head)> = None;
    let mut at = fde.fres_at;
    for index in 0..fde.num_fres {
        let head = decode_head(reader, fde, layout, index, at)?;
        if let Some((_, _, prev)) = found.filter(|&(_, _, prev)| head.start <= prev.start) {
            return Err(Error::FreNotIncreasing { fde: fde.index, fre: index, start: head.start, prev: prev.start });
        }
        if u64::from(head.start) > offset {
            break;
        }
        found = Some((index, at, head));
        at = head.end;
    }
    let Some((index, at, head)) = found else { return Ok(None) };
    let mut fre = head.fre(index, at);
    decode_words(reader, fde, &mut fre)?;
    Ok(Some(fre))
}

/// [`find`]'s row scan straight over in-memory section bytes: the index
/// and position of the last row starting at or before `offset`, or
/// `Some(None)` when the first row starts after it. Returns `None` on
/// anything irregular (a row out of bounds, a bad word size, starts not
/// increasing), so that the checked path reports it: the rules of a row's
/// shape stay in [`decode_head`].
#[inline]
fn scan_slice(bytes: &[u8], endian: Endian, fde: &Fde, layout: &Layout, offset: u64) -> Option<Option<(u32, u64)>> {
    let end = usize::try_from(layout.fres_end).ok()?;
    let bytes = bytes.get(..end)?;
    let width = fde.fre_type.width();
    let mut at = usize::try_from(fde.fres_at).ok()?;
    let mut found: Option<(u32, usize, u32)> = None;
    for index in 0..fde.num_fres {
        let head = bytes.get(at..at + usize::from(width) + 1)?;
        let start = match (width, endian) {
            (1, _) => u32::from(head[0]),
            (2, Endian::Little) => u32::from(u16::from_le_bytes([head[0], head[1]])),
            (2, Endian::Big) => u32::from(u16::from_be_bytes([head[0], head[1]])),
            (_, Endian::Little) => u32::from_le_bytes([head[0], head[1], head[2], head[3]]),
            (_, Endian::Big) => u32::from_be_bytes([head[0], head[1], head[2], head[3]]),
        };
        let info = head[usize::from(width)];
        let next = at + usize::try_from(row_len(width, info)).ok()?;
        if (info >> 5) & 3 == 3 || next > end || found.is_some_and(|(_, _, prev)| start <= prev) {
            return None;
        }
        if u64::from(start) > offset {
            break;
        }
        found = Some((index, at, start));
        at = next;
    }
    Some(found.map(|(index, at, _)| (index, at as u64)))
}

impl<S: ByteSource + ?Sized> FreIter<'_, S> {
    fn decode(&mut self) -> Result<Fre, Error> {
        let head = decode_head(&self.reader, &self.fde, &self.layout, self.next_index, self.pos)?;
        let mut fre = head.fre(self.next_index, self.pos);
        decode_words(&self.reader, &self.fde, &mut fre)?;
        self.pos = head.end;
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
