//! Function descriptor entries (§4): one per function, V1/V2/V3 layouts
//! decoded into one version-neutral [`Fde`].

use super::error::Error;
use super::header::{Header, Layout, Version};
use super::reader::Reader;
use super::source::ByteSource;

/// How FRE start offsets are matched against a PC (§4.5 bit 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PcType {
    /// Rows cover increasing offsets from the function start.
    Inc,
    /// Rows repeat every `rep_size` bytes (PLT entries).
    Mask,
}

/// V3 FDE type (`sfda_func_info2` bits 0–4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FdeKind {
    /// Data words are CFA, RA, FP offsets (§5.1); every V1/V2 FDE.
    Default,
    /// Data words are (control, offset) pairs (§5.2).
    Flex,
}

/// Width of the FRE start-offset field (§4.5 bits 0–3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FreType {
    /// 1-byte start offsets.
    Addr1,
    /// 2-byte start offsets.
    Addr2,
    /// 4-byte start offsets.
    Addr4,
}

impl FreType {
    /// Bytes of one start-offset field.
    pub fn width(self) -> u8 {
        match self {
            FreType::Addr1 => 1,
            FreType::Addr2 => 2,
            FreType::Addr4 => 4,
        }
    }
}

/// Size of the V3 attribute record that precedes a function's FREs.
pub const V3_ATTR_SIZE: u64 = 5;

/// A decoded function descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Fde {
    /// Position in the FDE array.
    pub index: u32,
    /// Absolute address of the function's first byte (§4.4).
    pub start: u64,
    /// The raw start field (sign-extended to 64 bits).
    pub raw_start: i64,
    /// Function size in bytes.
    pub size: u32,
    /// Raw offset of the function's FRE block within the FRE sub-section
    /// (V3: of its attribute record).
    pub fre_offset: u32,
    /// Number of FREs.
    pub num_fres: u32,
    /// Raw info byte.
    pub info: u8,
    /// Raw info2 byte (V3; 0 before).
    pub info2: u8,
    /// Repetition size for PC type MASK (V2/V3; 0 in V1).
    pub rep_size: u8,
    /// FRE start-offset width.
    pub fre_type: FreType,
    /// PC type.
    pub pc_type: PcType,
    /// FDE type (always [`FdeKind::Default`] before V3).
    pub kind: FdeKind,
    /// AArch64: RAs are signed with the B key (else the A key).
    pub pauth_key_b: bool,
    /// V3: the function is a signal frame.
    pub signal: bool,
    /// Section offset of the first FRE.
    pub fres_at: u64,
}

impl Fde {
    /// True if `pc` lies in `[start, start + size)`, wrap-around safe.
    #[inline]
    pub fn contains(&self, pc: u64) -> bool {
        pc.wrapping_sub(self.start) < u64::from(self.size)
    }
}

/// Section offset of the start field of FDE `index` (which is also where
/// the FDE begins).
#[inline]
pub(crate) fn field_offset(header: &Header, layout: &Layout, index: u32) -> u64 {
    layout.fdes_start + u64::from(index) * header.version.fde_size()
}

/// Reads only FDE `index`'s absolute start address: the binary search's probe.
#[inline]
pub(crate) fn read_start<S: ByteSource + ?Sized>(
    r: &Reader<'_, S>,
    header: &Header,
    layout: &Layout,
    base: u64,
    index: u32,
) -> Result<(u64, i64), Error> {
    let at = field_offset(header, layout, index);
    let raw = match header.version {
        Version::V1 | Version::V2 => i64::from(r.u32(at, "FDE start address")? as i32),
        Version::V3 => r.u64(at, "FDE start offset")? as i64,
    };
    // §4.4: relative to the field itself with PCREL, else to the section start.
    let origin = if header.is_pcrel() { base.wrapping_add(at) } else { base };
    Ok((origin.wrapping_add(raw as u64), raw))
}

/// Decodes FDE `index` (the caller has checked `index < num_fdes`).
pub(crate) fn read<S: ByteSource + ?Sized>(
    r: &Reader<'_, S>,
    header: &Header,
    layout: &Layout,
    base: u64,
    index: u32,
) -> Result<Fde, Error> {
    let at = field_offset(header, layout, index);
    let (start, raw_start) = read_start(r, header, layout, base, index)?;
    let fre_block = |fre_offset: u32, need: u64, what: &'static str| -> Result<u64, Error> {
        let pos = layout.fres_start + u64::from(fre_offset);
        if pos + need > layout.fres_end {
            return Err(Error::FreOutside {
                fde: index,
                what,
                offset: pos,
                start: layout.fres_start,
                end: layout.fres_end,
            });
        }
        Ok(pos)
    };
    let (size, fre_offset, num_fres, info, info2, rep_size, fres_at);
    match header.version {
        Version::V1 | Version::V2 => {
            size = r.u32(at + 4, "FDE function size")?;
            fre_offset = r.u32(at + 8, "FDE FRE offset")?;
            num_fres = r.u32(at + 12, "FDE FRE count")?;
            info = r.u8(at + 16, "FDE info")?;
            info2 = 0;
            rep_size = if header.version == Version::V2 { r.u8(at + 17, "FDE repetition size")? } else { 0 };
            // An FDE without FREs may point anywhere (even at the end).
            fres_at = fre_block(fre_offset, 0, "first FRE")?;
        }
        Version::V3 => {
            size = r.u32(at + 8, "FDE function size")?;
            fre_offset = r.u32(at + 12, "FDE attribute offset")?;
            let attr = fre_block(fre_offset, V3_ATTR_SIZE, "FDE attribute record")?;
            num_fres = u32::from(r.u16(attr, "FDE FRE count")?);
            info = r.u8(attr + 2, "FDE info")?;
            info2 = r.u8(attr + 3, "FDE info2")?;
            rep_size = r.u8(attr + 4, "FDE repetition size")?;
            fres_at = attr + V3_ATTR_SIZE;
        }
    }
    let fre_type = match info & 0xf {
        0 => FreType::Addr1,
        1 => FreType::Addr2,
        2 => FreType::Addr4,
        value => return Err(Error::BadFreType { fde: index, value }),
    };
    let pc_type = if info & 0x10 != 0 { PcType::Mask } else { PcType::Inc };
    let kind = match info2 & 0x1f {
        0 => FdeKind::Default,
        1 => FdeKind::Flex,
        value => return Err(Error::BadFdeType { fde: index, value }),
    };
    Ok(Fde {
        index,
        start,
        raw_start,
        size,
        fre_offset,
        num_fres,
        info,
        info2,
        rep_size,
        fre_type,
        pc_type,
        kind,
        pauth_key_b: info & 0x20 != 0,
        signal: header.version == Version::V3 && info & 0x80 != 0,
        fres_at,
    })
}
