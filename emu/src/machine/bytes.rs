//! Integers in the guest's byte order.
//!
//! Everything the kernel shares with a program (the initial stack, `struct
//! stat`, iovecs, timespecs, s390x's mmap argument block) is laid out in the
//! guest's byte order, which is big-endian on s390x.

pub use sframe::Endian;

/// Encodes `value` into `out` (1, 2, 4 or 8 bytes) in byte order `endian`.
pub fn put(endian: Endian, out: &mut [u8], value: u64) {
    let width = out.len();
    debug_assert!(matches!(width, 1 | 2 | 4 | 8), "field width {width}");
    match endian {
        Endian::Little => out.copy_from_slice(&value.to_le_bytes()[..width]),
        Endian::Big => out.copy_from_slice(&value.to_be_bytes()[8 - width..]),
    }
}

/// Decodes an unsigned integer of `bytes.len()` (at most 8) bytes in byte order `endian`.
pub fn get(endian: Endian, bytes: &[u8]) -> u64 {
    let width = bytes.len().min(8);
    let mut wide = [0u8; 8];
    match endian {
        Endian::Little => {
            wide[..width].copy_from_slice(&bytes[..width]);
            u64::from_le_bytes(wide)
        }
        Endian::Big => {
            wide[8 - width..].copy_from_slice(&bytes[..width]);
            u64::from_be_bytes(wide)
        }
    }
}

/// A fixed-size structure shared with the guest (`struct stat`, a signal
/// frame), read and written field by field in the guest's byte order.
#[derive(Debug, Clone)]
pub struct GuestStruct {
    endian: Endian,
    bytes: Vec<u8>,
}

impl GuestStruct {
    /// A zeroed structure of `size` bytes.
    pub fn new(endian: Endian, size: usize) -> Self {
        GuestStruct { endian, bytes: vec![0; size] }
    }

    /// A structure read from the guest.
    pub fn from_bytes(endian: Endian, bytes: Vec<u8>) -> Self {
        GuestStruct { endian, bytes }
    }

    /// Stores `value` as a `width`-byte field at `offset`.
    pub fn set(&mut self, offset: usize, width: usize, value: u64) -> &mut Self {
        put(self.endian, &mut self.bytes[offset..offset + width], value);
        self
    }

    /// The `width`-byte field at `offset`.
    pub fn get(&self, offset: usize, width: usize) -> u64 {
        get(self.endian, &self.bytes[offset..offset + width])
    }

    /// Copies raw bytes in at `offset`.
    pub fn set_bytes(&mut self, offset: usize, data: &[u8]) -> &mut Self {
        self.bytes[offset..offset + data.len()].copy_from_slice(data);
        self
    }

    /// The raw bytes at `offset..offset + len`.
    pub fn get_bytes(&self, offset: usize, len: usize) -> &[u8] {
        &self.bytes[offset..offset + len]
    }

    /// The finished bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_both_orders() {
        for endian in [Endian::Little, Endian::Big] {
            for width in [1usize, 2, 4, 8] {
                let mut buf = vec![0u8; width];
                let value = 0x0102_0304_0506_0708u64 & (u64::MAX >> (64 - 8 * width));
                put(endian, &mut buf, value);
                assert_eq!(get(endian, &buf), value);
            }
        }
        let mut buf = [0u8; 4];
        put(Endian::Big, &mut buf, 0x1234_5678);
        assert_eq!(buf, [0x12, 0x34, 0x56, 0x78]);
    }
}
