//! Finding a `.sframe` section in an ELF file, or taking a file as raw
//! section bytes.

use goblin::elf::Elf;

use super::constants::{PT_GNU_SFRAME, SHT_GNU_SFRAME};
use crate::Abi;

/// The section bytes to work on and where they live.
#[derive(Debug, Clone)]
pub struct SframeInput {
    /// The section's bytes.
    pub bytes: Vec<u8>,
    /// Address of its first byte.
    pub base: u64,
    /// objdump's name for the file format (from the ELF header, or from the
    /// section's ABI for raw bytes).
    pub bfd_target: Option<String>,
    /// False when the file is an ELF file without a `.sframe` section.
    pub found: bool,
    /// Addresses covered by executable `PT_LOAD` segments (linked ELF files):
    /// where every function the section describes must lie.
    pub text: Option<(u64, u64)>,
}

/// Errors naming what is wrong with an input file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file starts like ELF but is not valid ELF.
    #[error("{path}: malformed ELF: {reason}")]
    BadElf {
        /// The file.
        path: String,
        /// What goblin said.
        reason: String,
    },
}

/// objdump's BFD target name for an ELF header.
pub fn bfd_target(elf: &Elf<'_>) -> String {
    use goblin::elf::header::{EM_386, EM_AARCH64, EM_S390, EM_X86_64};
    match (elf.header.e_machine, elf.is_64, elf.little_endian) {
        (EM_X86_64, true, _) => "elf64-x86-64".into(),
        (EM_X86_64, false, _) => "elf32-x86-64".into(),
        (EM_386, _, _) => "elf32-i386".into(),
        (EM_AARCH64, true, true) => "elf64-littleaarch64".into(),
        (EM_AARCH64, true, false) => "elf64-bigaarch64".into(),
        (EM_S390, true, _) => "elf64-s390".into(),
        (EM_S390, false, _) => "elf32-s390".into(),
        (machine, is_64, le) => {
            format!("elf{}-{}-machine{machine}", if is_64 { 64 } else { 32 }, if le { "little" } else { "big" })
        }
    }
}

/// Reads `path`: an ELF file's `.sframe` section (by name, or by type
/// `SHT_GNU_SFRAME`), or the whole file as raw section bytes at `raw_base`.
///
/// ```no_run
/// use sframe::read::validate::{check, Options};
/// use sframe::Section;
///
/// let input = sframe::elf::load("prog", 0)?;
/// if !input.found {
///     println!("prog has no .sframe section");
/// } else {
///     // Every function the section describes lies in the executable segments.
///     let report = check(input.bytes.as_slice(), input.base, &Options { text: input.text, ..Default::default() });
///     println!("valid: {}", report.is_valid());
///     let section = Section::parse(input.bytes.as_slice(), input.base)?;
///     println!("{:?}", section.lookup(0x401000)?);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn load(path: &str, raw_base: u64) -> Result<SframeInput, InputError> {
    let data = std::fs::read(path).map_err(|source| InputError::Io { path: path.into(), source })?;
    if !data.starts_with(super::constants::ELF_MAGIC) {
        return Ok(SframeInput { bytes: data, base: raw_base, bfd_target: None, found: true, text: None });
    }
    let elf = Elf::parse(&data).map_err(|e| InputError::BadElf { path: path.into(), reason: e.to_string() })?;
    let target = bfd_target(&elf);
    let bad = |reason: String| InputError::BadElf { path: path.into(), reason };
    let Some((bytes, base)) = sframe_section(&elf, &data).map_err(bad)? else {
        return Ok(SframeInput { bytes: Vec::new(), base: 0, bfd_target: Some(target), found: false, text: None });
    };
    Ok(SframeInput { bytes: bytes.to_vec(), base, bfd_target: Some(target), found: true, text: text_range(&elf) })
}

/// The bytes and address of the `.sframe` section of the ELF file `data`
/// (by name or by type [`SHT_GNU_SFRAME`]), `None` without one, or why it
/// cannot be read.
pub(crate) fn sframe_section<'d>(elf: &Elf<'_>, data: &'d [u8]) -> Result<Option<(&'d [u8], u64)>, String> {
    let section = elf
        .section_headers
        .iter()
        .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(".sframe") || sh.sh_type == SHT_GNU_SFRAME);
    let Some(sh) = section else { return Ok(None) };
    if sh.sh_type == goblin::elf::section_header::SHT_NOBITS {
        return Err(".sframe has no file contents (NOBITS)".into());
    }
    let range = usize::try_from(sh.sh_offset)
        .ok()
        .zip(usize::try_from(sh.sh_size).ok())
        .and_then(|(off, size)| Some(off..off.checked_add(size)?))
        .filter(|r| r.end <= data.len())
        .ok_or_else(|| {
            format!(
                ".sframe at file offset {:#x} size {:#x} lies outside the {}-byte file",
                sh.sh_offset,
                sh.sh_size,
                data.len()
            )
        })?;
    Ok(Some((&data[range], sh.sh_addr)))
}

impl SframeInput {
    /// The same section at another address (raw bytes, or an override of
    /// the ELF section address); the ELF's text range no longer applies
    /// there.
    pub fn at(mut self, base: u64) -> Self {
        self.text = self.text.filter(|_| base == self.base);
        self.base = base;
        self
    }
}

/// The file offset and size of the `PT_GNU_SFRAME` segment of the ELF file
/// `data`: where its `.sframe` bytes are before loading (`None` without
/// one, or if `data` is not ELF). Both come from the file unchecked.
pub fn sframe_segment(data: &[u8]) -> Option<(u64, u64)> {
    let elf = Elf::parse(data).ok()?;
    let ph = elf.program_headers.iter().find(|p| p.p_type == PT_GNU_SFRAME)?;
    Some((ph.p_offset, ph.p_filesz))
}

/// The BFD name for raw bytes: from the section's ABI byte when readable.
pub fn raw_bfd_target(bytes: &[u8]) -> String {
    bytes
        .get(4)
        .and_then(|&b| Abi::from_byte(b).ok())
        .map_or_else(|| "binary".to_string(), |abi| abi.bfd_name().to_string())
}

/// The span of the executable `PT_LOAD` segments, if there are any.
fn text_range(elf: &Elf<'_>) -> Option<(u64, u64)> {
    use goblin::elf::program_header::{PF_X, PT_LOAD};
    elf.program_headers
        .iter()
        .filter(|ph| ph.p_type == PT_LOAD && ph.p_flags & PF_X != 0)
        .map(|ph| (ph.p_vaddr, ph.p_vaddr.saturating_add(ph.p_memsz)))
        .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
}

/// What the SFrame generator needs from an ELF file.
#[cfg(feature = "generate")]
#[derive(Debug, Clone)]
pub struct CfiInput {
    /// The file's bytes (for injection).
    pub data: Vec<u8>,
    /// Its SFrame ABI.
    pub abi: Abi,
    /// Which CFI section was found.
    pub kind: crate::write::generate::CfiKind,
    /// That section's bytes.
    pub cfi: Vec<u8>,
    /// Its address.
    pub cfi_address: u64,
    /// Bytes in executable sections (for coverage).
    pub text_bytes: u64,
    /// Function symbols.
    pub symbols: super::symbols::Symbols,
}

/// Reads `path` for SFrame generation: `.eh_frame`, else `.debug_frame`.
///
/// The whole way from a binary without SFrame to one with it:
///
/// ```no_run
/// use sframe::elf::{self, inject};
/// use sframe::write::encode;
/// use sframe::write::generate::{generate, Cfi};
/// use sframe::Version;
///
/// let input = elf::load_cfi("prog")?;
/// let cfi = Cfi { kind: input.kind, data: &input.cfi, address: input.cfi_address };
/// let generated = generate(&cfi, input.abi, Version::V3)?;
/// // The section is encoded for the address the new segment will have.
/// let address = inject::placement(&input.data)?.address;
/// let section = encode(&generated.table, address)?;
/// std::fs::write("prog.sframe", inject::inject(&input.data, &section)?)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "generate")]
pub fn load_cfi(path: &str) -> Result<CfiInput, InputError> {
    let data = std::fs::read(path).map_err(|source| InputError::Io { path: path.into(), source })?;
    let bad = |reason: String| InputError::BadElf { path: path.into(), reason };
    let elf = Elf::parse(&data).map_err(|e| bad(e.to_string()))?;
    let abi = super::cfi::sframe_abi(&elf).map_err(bad)?;
    let cfi = super::cfi::cfi_section(&elf, &data).map_err(bad)?;
    let (kind, cfi_address, cfi) = (cfi.kind, cfi.address, cfi.data.to_vec());
    let text_bytes = elf
        .section_headers
        .iter()
        .filter(|sh| sh.sh_flags & u64::from(goblin::elf::section_header::SHF_EXECINSTR) != 0)
        .map(|sh| sh.sh_size)
        // Sizes come from the file: a corrupt one must not overflow.
        .fold(0u64, u64::saturating_add);
    let symbols = super::symbols::Symbols::from_elf(&elf, &data, 0);
    Ok(CfiInput { abi, kind, cfi_address, cfi, text_bytes, symbols, data })
}

#[cfg(feature = "generate")]
impl CfiInput {
    /// The name of the function containing `address`, if a symbol (or a
    /// PLT section) says: not the `fde@0x…` names [`Symbols`](super::Symbols)
    /// gives stripped functions, which would only repeat the FDE's address.
    pub fn function_name(&self, address: u64) -> Option<&str> {
        self.symbols.lookup(address).map(|(name, _)| name).filter(|name| !name.starts_with("fde@"))
    }
}
