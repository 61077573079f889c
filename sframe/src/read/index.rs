//! A section with its FDE array decoded once, for callers that look up many
//! PCs in the same section (a profiler, a walker, a benchmark).
//!
//! [`Section::lookup`] reads everything it needs from the source on every
//! call, which is what a reader of memory that may change or fault must do
//! (the kernel reads user memory afresh each time). When the bytes stay put,
//! the FDE array can be decoded once: [`IndexedSection`] keeps every FDE's
//! start in a sorted array, a table of fixed-width address buckets over it
//! (a PC's bucket holds one or two candidate starts, searched branch-free),
//! and every decoded FDE, so a lookup touches the source only for the rows
//! of one function. Answers are exactly those of [`Section::lookup`].

use super::error::Error;
use super::fde::Fde;
use super::section::{Lookup, Section};
use super::source::ByteSource;

/// A [`Section`] whose FDEs have been decoded once, answering
/// [`IndexedSection::lookup`] with the same results as [`Section::lookup`]
/// in fewer reads. It allocates once, at [`Section::indexed`] (under 80
/// bytes per FDE, bounded by the section's size); a lookup allocates nothing.
///
/// The index is a snapshot of the FDE array: it stays right as long as the
/// section's bytes do not change.
///
/// ```
/// use sframe::write::{encode, RawFunction, RawRow, RawSection};
/// use sframe::{Abi, Section, Version};
///
/// let functions = (0..100u64)
///     .map(|i| RawFunction::new(0x1000 + i * 0x40, 0x30, vec![RawRow::new(0, true, &[8]), RawRow::new(1, true, &[16, -16])]))
///     .collect();
/// let table =
///     RawSection { version: Version::V3, abi: Abi::Amd64, flags: 0x5, cfa_fixed_fp_offset: 0, cfa_fixed_ra_offset: -8, functions };
/// let bytes = encode(&table, 0x9000)?;
/// let section = Section::parse(bytes.as_slice(), 0x9000)?;
/// let plain = section.lookup(0x1485)?;
/// let indexed = section.indexed()?;
/// assert_eq!(indexed.lookup(0x1485)?, plain);
/// assert_eq!(plain.unwrap().fde.index, 18);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct IndexedSection<S> {
    section: Section<S>,
    /// Every FDE's absolute start, non-decreasing: the search keys. Empty
    /// when the section cannot be searched this way (not flagged sorted, or
    /// starts that go down although it is): lookups then take
    /// [`Section::find_fde`]'s path, so the answers stay the same.
    starts: Vec<u64>,
    /// Buckets of the address range `starts[0]..`, each `1 << shift` bytes:
    /// `buckets[b]` is the number of starts in buckets before `b`, so the
    /// FDE for a PC is among the few starts of the PC's own bucket (one
    /// load and a short search instead of ⌈log2 n⌉ dependent loads). At
    /// most about two buckets per FDE, whatever the addresses.
    buckets: Vec<u32>,
    /// Bucket width as a power of two.
    shift: u32,
    /// FDE `i` decoded, or `None` when it does not decode: a lookup that
    /// lands on it decodes it again from the source to report the error.
    fdes: Vec<Option<Fde>>,
}

impl<S: ByteSource> Section<S> {
    /// Decodes the FDE array once (O(number of FDEs)) for fast repeated
    /// lookups; see [`IndexedSection`]. Fails only when the source faults
    /// while the FDEs are read; an FDE that does not decode is reported by
    /// the lookups that need it, as [`Section::lookup`] would.
    pub fn indexed(self) -> Result<IndexedSection<S>, Error> {
        IndexedSection::new(self)
    }
}

impl<S: ByteSource> IndexedSection<S> {
    /// Indexes `section`: see [`Section::indexed`].
    pub fn new(section: Section<S>) -> Result<Self, Error> {
        let count = section.header().num_fdes;
        // Layout::of has checked that the FDE array fits in the source, so
        // the count is bounded by the section's size.
        let mut fdes = Vec::with_capacity(count as usize);
        for index in 0..count {
            match section.fde(index) {
                Ok(fde) => fdes.push(Some(fde)),
                Err(fault @ Error::Fault { .. }) => return Err(fault),
                Err(_) => fdes.push(None),
            }
        }
        let mut starts = Vec::new();
        if section.header().is_sorted() {
            starts.reserve_exact(fdes.len());
            for index in 0..count {
                let start = match fdes[index as usize] {
                    Some(fde) => fde.start,
                    None => section.fde_start(index)?,
                };
                if starts.last().is_some_and(|&last| start < last) {
                    // Flagged sorted but not: keep the plain search's answers.
                    starts = Vec::new();
                    break;
                }
                starts.push(start);
            }
        }
        let (buckets, shift) = bucket(&starts);
        Ok(IndexedSection { section, starts, buckets, shift, fdes })
    }

    /// The section this index was built from.
    pub fn section(&self) -> &Section<S> {
        &self.section
    }

    /// The FDE whose function contains `pc`, as [`Section::find_fde`].
    #[inline]
    pub fn find_fde(&self, pc: u64) -> Result<Option<Fde>, Error> {
        self.with_fde(pc, |fde| Ok(Some(*fde)))
    }

    /// PC → FDE → FRE → rule, as [`Section::lookup`] (the same answer,
    /// reading only the matching function's rows).
    #[inline]
    pub fn lookup(&self, pc: u64) -> Result<Option<Lookup>, Error> {
        self.with_fde(pc, |fde| self.section.lookup_in(fde, pc))
    }

    /// Calls `then` with the FDE whose function contains `pc`, if any. By
    /// reference: a lookup copies the FDE once, into its answer (copies of
    /// these structures were a good part of a lookup's time).
    #[inline]
    fn with_fde<T>(&self, pc: u64, then: impl FnOnce(&Fde) -> Result<Option<T>, Error>) -> Result<Option<T>, Error> {
        if self.starts.is_empty() {
            return match self.section.find_fde(pc)? {
                Some(fde) => then(&fde),
                None => Ok(None),
            };
        }
        let Some(index) = locate(&self.starts, &self.buckets, self.shift, pc) else { return Ok(None) };
        match &self.fdes[index] {
            Some(fde) if fde.contains(pc) => then(fde),
            Some(_) => Ok(None),
            None => match self.section.fde(index as u32)? {
                fde if fde.contains(pc) => then(&fde),
                _ => Ok(None),
            },
        }
    }
}

/// Index of the last key `<= pc` in the non-decreasing `keys`.
///
/// The standard library's partition point is a branch-free binary search
/// (each step a conditional move, not a jump the CPU must guess: random
/// PCs would make every guess a coin toss). A hand-written `if` was
/// compiled into a jump.
#[inline]
fn last_at_or_before(keys: &[u64], pc: u64) -> Option<usize> {
    keys.partition_point(|&key| key <= pc).checked_sub(1)
}

/// Index of the last of the non-empty, non-decreasing `starts` at or
/// before `pc`, found through the `buckets` of width `1 << shift` that
/// [`bucket`] made for them.
#[inline]
fn locate(starts: &[u64], buckets: &[u32], shift: u32, pc: u64) -> Option<usize> {
    let offset = pc.checked_sub(*starts.first()?)?;
    let b = usize::try_from(offset >> shift).unwrap_or(usize::MAX);
    let (from, to) = match (buckets.get(b), b.checked_add(1).and_then(|next| buckets.get(next))) {
        (Some(&from), Some(&to)) => (from as usize, to as usize),
        // Past the last bucket: every start is at or before `pc`.
        _ => return Some(starts.len() - 1),
    };
    // Every start before `from` is in an earlier bucket, hence <= pc; every
    // start from `to` on is in a later one, hence > pc.
    let within = last_at_or_before(&starts[from..to], pc).map_or(0, |i| i + 1);
    (from + within).checked_sub(1)
}

/// The buckets of [`IndexedSection`] for non-decreasing, non-empty `starts`
/// (none for an empty list): the narrowest power-of-two width that keeps
/// the table within two entries per start, and the count table.
fn bucket(starts: &[u64]) -> (Vec<u32>, u32) {
    let (Some(&first), Some(&last)) = (starts.first(), starts.last()) else { return (Vec::new(), 0) };
    let span = last - first;
    let most = 2 * starts.len() as u64;
    let mut shift = 0;
    while (span >> shift) >= most {
        shift += 1;
    }
    let count = (span >> shift) + 1;
    let mut buckets = Vec::with_capacity(count as usize + 1);
    let mut next = 0usize;
    for b in 0..=count {
        // Starts in buckets before `b`: those with (start - first) >> shift < b.
        while next < starts.len() && (starts[next] - first) >> shift < b {
            next += 1;
        }
        buckets.push(next as u32);
    }
    (buckets, shift)
}

#[cfg(test)]
mod tests {
    use super::{bucket, last_at_or_before, locate};

    #[test]
    fn bucketed_search_matches_a_linear_scan() {
        // Dense, sparse, duplicated and far-apart starts (one at the top of
        // the address space stretches the buckets to their widest).
        let lists: [&[u64]; 5] = [
            &[0x1000],
            &[0x1000, 0x1010, 0x1010, 0x1400, 0x1404, 0x9000],
            &[5, 6, 7, 8, 1000, 1001, 5000],
            &[0, u64::MAX],
            &[0x10, 0x20, u64::MAX - 1, u64::MAX],
        ];
        for starts in lists {
            let (buckets, shift) = bucket(starts);
            assert!(buckets.len() <= 2 * starts.len() + 1, "{starts:x?}: {} buckets", buckets.len());
            let mut pcs: Vec<u64> = starts.iter().flat_map(|&s| [s.wrapping_sub(1), s, s.wrapping_add(1)]).collect();
            pcs.extend([0, 0x800, 0x1200, 0x5000, u64::MAX]);
            for pc in pcs {
                let linear = starts.iter().rposition(|&k| k <= pc);
                assert_eq!(locate(starts, &buckets, shift, pc), linear, "{starts:x?}, pc {pc:#x}");
            }
        }
    }

    #[test]
    fn last_at_or_before_matches_a_linear_scan() {
        let keys = [3u64, 5, 5, 5, 9, 12, 12, 40];
        for n in 0..=keys.len() {
            let keys = &keys[..n];
            for pc in 0..45 {
                let linear = keys.iter().rposition(|&k| k <= pc);
                assert_eq!(last_at_or_before(keys, pc), linear, "{n} keys, pc {pc}");
            }
        }
    }
}
