//! Bounds-checked, endian-aware reads of fixed-size fields from a
//! [`ByteSource`]: the one place where the reader touches section bytes.

use super::error::Error;
use super::source::{ByteSource, Endian};

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
