//! The 28-byte preamble + header shared by every SFrame version (§3).

use super::error::Error;
use super::reader::Reader;
use super::source::{ByteSource, Endian};

/// Magic number of every SFrame section.
pub const MAGIC: u16 = 0xdee2;
/// Size of preamble + header; the auxiliary header follows.
pub const HEADER_SIZE: u64 = 28;

/// `SFRAME_F_FDE_SORTED`: FDEs sorted by function start.
pub const F_FDE_SORTED: u8 = 0x1;
/// `SFRAME_F_FRAME_POINTER`: defined for V1/V2, never produced, removed in V3.
pub const F_FRAME_POINTER: u8 = 0x2;
/// `SFRAME_F_FDE_FUNC_START_PCREL`: FDE start fields are relative to themselves.
pub const F_FDE_FUNC_START_PCREL: u8 = 0x4;

/// An SFrame format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Version {
    /// binutils 2.40: 17-byte FDEs.
    V1,
    /// binutils 2.41–2.45: 20-byte FDEs with a repetition size.
    V2,
    /// binutils 2.46: 16-byte FDE index + 5-byte attribute record, flex FDEs.
    V3,
}

impl Version {
    /// Decodes the version byte.
    pub fn from_byte(byte: u8) -> Result<Self, Error> {
        match byte {
            1 => Ok(Version::V1),
            2 => Ok(Version::V2),
            3 => Ok(Version::V3),
            other => Err(Error::UnsupportedVersion(other)),
        }
    }

    /// The version byte.
    pub fn number(self) -> u8 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
            Version::V3 => 3,
        }
    }

    /// Size of one entry of the FDE array.
    pub fn fde_size(self) -> u64 {
        match self {
            Version::V1 => 17,
            Version::V2 => 20,
            Version::V3 => 16,
        }
    }

    /// Flag bits defined for this version.
    pub fn allowed_flags(self) -> u8 {
        match self {
            Version::V1 | Version::V2 => F_FDE_SORTED | F_FRAME_POINTER | F_FDE_FUNC_START_PCREL,
            Version::V3 => F_FDE_SORTED | F_FDE_FUNC_START_PCREL,
        }
    }
}

/// The ABI/arch identifier (§3.2): which registers the rules talk about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Abi {
    /// `SFRAME_ABI_AARCH64_ENDIAN_BIG` (1).
    Aarch64Big,
    /// `SFRAME_ABI_AARCH64_ENDIAN_LITTLE` (2).
    Aarch64Little,
    /// `SFRAME_ABI_AMD64_ENDIAN_LITTLE` (3).
    Amd64,
    /// `SFRAME_ABI_S390X_ENDIAN_BIG` (4).
    S390x,
}

impl Abi {
    /// Decodes the ABI byte.
    pub fn from_byte(byte: u8) -> Result<Self, Error> {
        match byte {
            1 => Ok(Abi::Aarch64Big),
            2 => Ok(Abi::Aarch64Little),
            3 => Ok(Abi::Amd64),
            4 => Ok(Abi::S390x),
            other => Err(Error::UnknownAbi(other)),
        }
    }

    /// The ABI byte.
    pub fn id(self) -> u8 {
        match self {
            Abi::Aarch64Big => 1,
            Abi::Aarch64Little => 2,
            Abi::Amd64 => 3,
            Abi::S390x => 4,
        }
    }

    /// Byte order of sections for this ABI.
    pub fn endian(self) -> Endian {
        match self {
            Abi::Aarch64Little | Abi::Amd64 => Endian::Little,
            Abi::Aarch64Big | Abi::S390x => Endian::Big,
        }
    }

    /// True for the AArch64 ABIs, whose RAs may be PAC-signed.
    pub fn is_aarch64(self) -> bool {
        matches!(self, Abi::Aarch64Big | Abi::Aarch64Little)
    }

    /// DWARF numbers of the stack pointer and the frame pointer.
    pub fn sp_fp_dwarf(self) -> (u32, u32) {
        match self {
            Abi::Amd64 => (7, 6),
            Abi::Aarch64Big | Abi::Aarch64Little => (31, 29),
            Abi::S390x => (15, 11),
        }
    }

    /// DWARF number of the register holding the return address on entry
    /// (x86-64: the RA column 16, it lives on the stack).
    pub fn ra_dwarf(self) -> u32 {
        match self {
            Abi::Amd64 => 16,
            Abi::Aarch64Big | Abi::Aarch64Little => 30,
            Abi::S390x => 14,
        }
    }

    /// The assembler's name of DWARF register `reg`.
    pub fn register_name(self, reg: u32) -> String {
        const AMD64: [&str; 17] = [
            "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
            "r15", "rip",
        ];
        match (self, reg) {
            (Abi::Amd64, r) if (r as usize) < AMD64.len() => AMD64[r as usize].into(),
            (Abi::Aarch64Big | Abi::Aarch64Little, 31) => "sp".into(),
            (Abi::Aarch64Big | Abi::Aarch64Little, r) if r < 31 => format!("x{r}"),
            (Abi::S390x, r) if r < 16 => format!("r{r}"),
            // s390x DWARF 16..31 are the FPRs in the ABI's odd order.
            (Abi::S390x, r) if r < 32 => {
                const FPR: [u8; 16] = [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15];
                format!("f{}", FPR[(r - 16) as usize])
            }
            (_, r) => format!("dwarf{r}"),
        }
    }

    /// The BFD target name objdump prints for ELF files of this ABI.
    pub fn bfd_name(self) -> &'static str {
        match self {
            Abi::Aarch64Big => "elf64-bigaarch64",
            Abi::Aarch64Little => "elf64-littleaarch64",
            Abi::Amd64 => "elf64-x86-64",
            Abi::S390x => "elf64-s390",
        }
    }
}

/// The decoded header of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Header {
    /// Format version.
    pub version: Version,
    /// Raw `sfp_flags`.
    pub flags: u8,
    /// ABI/arch identifier.
    pub abi: Abi,
    /// Byte order, from the magic number.
    pub endian: Endian,
    /// `sfh_cfa_fixed_fp_offset` (0 = not fixed).
    pub cfa_fixed_fp_offset: i8,
    /// `sfh_cfa_fixed_ra_offset` (0 = not fixed).
    pub cfa_fixed_ra_offset: i8,
    /// Length of the auxiliary header after the 28 fixed bytes.
    pub auxhdr_len: u8,
    /// Number of FDEs.
    pub num_fdes: u32,
    /// Number of FREs (V3: not counting attribute records).
    pub num_fres: u32,
    /// Bytes in the FRE sub-section.
    pub fre_len: u32,
    /// FDE sub-section offset from the end of the header.
    pub fdeoff: u32,
    /// FRE sub-section offset from the end of the header.
    pub freoff: u32,
}

impl Header {
    /// Reads and checks the header: magic, version, flags, ABI and its byte
    /// order. Layout checks are [`Layout::of`]'s.
    pub(crate) fn parse<S: ByteSource + ?Sized>(src: &S) -> Result<Self, Error> {
        let probe = Reader { src, endian: Endian::Little };
        let magic = probe.u16(0, "magic")?;
        let endian = if magic == MAGIC {
            Endian::Little
        } else if magic.swap_bytes() == MAGIC {
            Endian::Big
        } else {
            return Err(Error::BadMagic(magic));
        };
        let r = Reader { src, endian };
        // Make a truncated header one clear error instead of a field-by-field one.
        r.bytes::<{ HEADER_SIZE as usize }>(0, "SFrame header")?;
        let version = Version::from_byte(r.u8(2, "version")?)?;
        let flags = r.u8(3, "flags")?;
        if flags & !version.allowed_flags() != 0 {
            return Err(Error::BadFlags { version: version.number(), flags, allowed: version.allowed_flags() });
        }
        let abi_byte = r.u8(4, "ABI")?;
        let abi = Abi::from_byte(abi_byte)?;
        if abi.endian() != endian {
            return Err(Error::AbiEndianMismatch { abi: abi_byte, abi_endian: abi.endian(), magic_endian: endian });
        }
        Ok(Header {
            version,
            flags,
            abi,
            endian,
            cfa_fixed_fp_offset: r.u8(5, "fixed FP offset")? as i8,
            cfa_fixed_ra_offset: r.u8(6, "fixed RA offset")? as i8,
            auxhdr_len: r.u8(7, "auxiliary header length")?,
            num_fdes: r.u32(8, "FDE count")?,
            num_fres: r.u32(12, "FRE count")?,
            fre_len: r.u32(16, "FRE length")?,
            fdeoff: r.u32(20, "FDE offset")?,
            freoff: r.u32(24, "FRE offset")?,
        })
    }

    /// True if `SFRAME_F_FDE_SORTED` is set.
    pub fn is_sorted(&self) -> bool {
        self.flags & F_FDE_SORTED != 0
    }

    /// True if FDE start fields are relative to the field (§4.4).
    pub fn is_pcrel(&self) -> bool {
        self.flags & F_FDE_FUNC_START_PCREL != 0
    }

    /// End of header + auxiliary header: the origin of `fdeoff`/`freoff`.
    pub fn header_end(&self) -> u64 {
        HEADER_SIZE + u64::from(self.auxhdr_len)
    }
}

/// Where the sub-sections lie, computed once with checked arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Layout {
    /// Section offset of the FDE array.
    pub fdes_start: u64,
    /// Section offset just past the FDE array.
    pub fdes_end: u64,
    /// Section offset of the FRE sub-section.
    pub fres_start: u64,
    /// Section offset just past the FRE sub-section (end of meaningful data).
    pub fres_end: u64,
}

impl Layout {
    /// Checks that the FDE array and the FRE sub-section fit in `size` bytes
    /// without overlapping (§8). Counts are validated here, before anything
    /// is iterated or allocated from them.
    pub fn of(header: &Header, size: u64) -> Result<Self, Error> {
        let hdr_end = header.header_end();
        if hdr_end > size {
            return Err(Error::BadLayout(format!(
                "auxiliary header ({} bytes) runs past the {size}-byte section",
                header.auxhdr_len
            )));
        }
        let fdes_start = hdr_end + u64::from(header.fdeoff);
        let fdes_end = fdes_start + u64::from(header.num_fdes) * header.version.fde_size();
        let fres_start = hdr_end + u64::from(header.freoff);
        let fres_end = fres_start + u64::from(header.fre_len);
        if header.fdeoff > header.freoff {
            return Err(Error::BadLayout(format!(
                "FDE offset {:#x} is after FRE offset {:#x}",
                header.fdeoff, header.freoff
            )));
        }
        if fdes_end > fres_start {
            return Err(Error::BadLayout(format!(
                "{} FDEs end at {fdes_end:#x}, past the FRE sub-section start {fres_start:#x}",
                header.num_fdes
            )));
        }
        if fres_end > size {
            return Err(Error::BadLayout(format!(
                "FRE sub-section {fres_start:#x}..{fres_end:#x} runs past the {size}-byte section"
            )));
        }
        Ok(Layout { fdes_start, fdes_end, fres_start, fres_end })
    }
}
