//! Where section bytes come from.
//!
//! The kernel reads `.sframe` straight out of user memory, where any access may
//! fault, so every decoder of the reader goes through [`ByteSource`] instead of
//! holding a slice. A slice is the trivial source; a model of user memory
//! (unwindlab's kernel model reads emulated memory that way) is another.

use super::Error;

/// A failed read of source bytes, e.g. a page of emulated user memory that is
/// not resident and may not be brought in from the current context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Offset from the start of the source at which the read failed.
    pub offset: u64,
}

/// Random-access bytes of one `.sframe` section, offsets counted from its start.
///
/// `[u8]`, `Vec<u8>` and references to sources are sources. A source of
/// one's own decides when a read fails; the reader reports that as
/// [`Error::Fault`] with the offset, and the same lookup succeeds once the
/// bytes can be read.
///
/// ```
/// use sframe::{ByteSource, Error, Fault, Section};
///
/// /// Section bytes of which only those from `resident_from` on can be read.
/// struct Paged<'a> {
///     bytes: &'a [u8],
///     resident_from: u64,
/// }
///
/// impl ByteSource for Paged<'_> {
///     fn size(&self) -> u64 {
///         self.bytes.len() as u64
///     }
///
///     fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
///         if offset < self.resident_from {
///             return Err(Fault { offset });
///         }
///         self.bytes.read_at(offset, buf)
///     }
/// }
///
/// let bytes = [0u8; 128];
/// let Err(err) = Section::parse(Paged { bytes: &bytes, resident_from: 64 }, 0) else { unreachable!() };
/// assert_eq!(err, Error::Fault { offset: 0 });
/// assert!(err.is_fault()); // a fault, not corrupt data: worth retrying
/// ```
pub trait ByteSource {
    /// Size of the section in bytes; every read stays below it.
    fn size(&self) -> u64;

    /// Fills `buf` with the bytes at `offset..offset + buf.len()`.
    ///
    /// Callers only ask for ranges inside [`ByteSource::size`]; a source fails
    /// only for reasons of its own (a fault), never for bounds.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault>;
}

impl ByteSource for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    #[inline]
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let start = usize::try_from(offset).map_err(|_| Fault { offset })?;
        match start.checked_add(buf.len()).and_then(|end| self.get(start..end)) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            None => Err(Fault { offset }),
        }
    }
}

impl ByteSource for Vec<u8> {
    fn size(&self) -> u64 {
        self.as_slice().size()
    }

    #[inline]
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.as_slice().read_at(offset, buf)
    }
}

impl<T: ByteSource + ?Sized> ByteSource for &T {
    fn size(&self) -> u64 {
        (**self).size()
    }

    #[inline]
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Fault> {
        (**self).read_at(offset, buf)
    }
}

/// Byte order of a section, taken from how its magic number reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Endian {
    /// Little-endian (x86-64, little-endian AArch64).
    Little,
    /// Big-endian (s390x, big-endian AArch64).
    Big,
}

/// Bounds-checked, endian-aware reads of fixed-size fields from a source.
///
/// Every read first checks the range against the section size, so a hostile
/// count or offset yields [`Error::OutOfBounds`], never a read past the end.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'s, S: ?Sized> {
    pub(crate) src: &'s S,
    pub(crate) endian: Endian,
}

impl<S: ByteSource + ?Sized> Reader<'_, S> {
    #[inline]
    pub(crate) fn bytes<const N: usize>(&self, offset: u64, what: &'static str) -> Result<[u8; N], Error> {
        let size = self.src.size();
        match offset.checked_add(N as u64) {
            Some(end) if end <= size => {}
            _ => {
                return Err(Error::OutOfBounds { what, offset, len: N as u64, size });
            }
        }
        let mut buf = [0u8; N];
        self.src.read_at(offset, &mut buf).map_err(|fault| Error::Fault { offset: fault.offset })?;
        Ok(buf)
    }

    #[inline]
    pub(crate) fn u8(&self, offset: u64, what: &'static str) -> Result<u8, Error> {
        Ok(self.bytes::<1>(offset, what)?[0])
    }

    #[inline]
    pub(crate) fn u16(&self, offset: u64, what: &'static str) -> Result<u16, Error> {
        let b = self.bytes::<2>(offset, what)?;
        Ok(match self.endian {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        })
    }

    #[inline]
    pub(crate) fn u32(&self, offset: u64, what: &'static str) -> Result<u32, Error> {
        let b = self.bytes::<4>(offset, what)?;
        Ok(match self.endian {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        })
    }

    #[inline]
    pub(crate) fn u64(&self, offset: u64, what: &'static str) -> Result<u64, Error> {
        let b = self.bytes::<8>(offset, what)?;
        Ok(match self.endian {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        })
    }

    /// An unsigned field of 1, 2 or 4 bytes (FRE start addresses, data words).
    #[inline]
    pub(crate) fn uint(&self, offset: u64, width: u8, what: &'static str) -> Result<u32, Error> {
        match width {
            1 => self.u8(offset, what).map(u32::from),
            2 => self.u16(offset, what).map(u32::from),
            _ => self.u32(offset, what),
        }
    }
}
