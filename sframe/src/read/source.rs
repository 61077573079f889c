//! Where section bytes come from.
//!
//! The kernel reads `.sframe` straight out of user memory, where any access may
//! fault, so every decoder of the reader goes through [`ByteSource`] instead of
//! holding a slice. A slice is the trivial source; a model of user memory
//! (unwindlab's kernel model reads emulated memory that way) is another.

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
/// [`Error::Fault`](crate::Error::Fault) with the offset, and the same
/// lookup succeeds once the bytes can be read.
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

    /// All the bytes, when the source is plain memory that cannot fault:
    /// the reader then scans rows straight out of the slice (a lookup's
    /// hot loop). Sources that may fault keep the default, `None`.
    #[inline]
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
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

    #[inline]
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
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

    #[inline]
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
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

    #[inline]
    fn as_slice(&self) -> Option<&[u8]> {
        (**self).as_slice()
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
