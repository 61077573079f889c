//! Finding a `.sframe` section in an ELF file, or taking a file as raw
//! section bytes.

use goblin::elf::Elf;
use kmodel::sframe::Abi;

/// `SHT_GNU_SFRAME`, the section type binutils ≥ 2.45 gives `.sframe`.
pub const SHT_GNU_SFRAME: u32 = 0x6fff_fff4;
/// `PT_GNU_SFRAME`, the program header covering `.sframe` in linked files.
pub const PT_GNU_SFRAME: u32 = 0x6474_e554;

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
pub fn load(path: &str, raw_base: u64) -> Result<SframeInput, InputError> {
    let data = std::fs::read(path).map_err(|source| InputError::Io { path: path.into(), source })?;
    if !data.starts_with(b"\x7fELF") {
        return Ok(SframeInput { bytes: data, base: raw_base, bfd_target: None, found: true, text: None });
    }
    let elf = Elf::parse(&data).map_err(|e| InputError::BadElf { path: path.into(), reason: e.to_string() })?;
    let target = bfd_target(&elf);
    let section = elf
        .section_headers
        .iter()
        .find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(".sframe") || sh.sh_type == SHT_GNU_SFRAME);
    let Some(sh) = section else {
        return Ok(SframeInput { bytes: Vec::new(), base: 0, bfd_target: Some(target), found: false, text: None });
    };
    if sh.sh_type == goblin::elf::section_header::SHT_NOBITS {
        return Err(InputError::BadElf { path: path.into(), reason: ".sframe has no file contents (NOBITS)".into() });
    }
    let range = usize::try_from(sh.sh_offset)
        .ok()
        .zip(usize::try_from(sh.sh_size).ok())
        .and_then(|(off, size)| Some(off..off.checked_add(size)?))
        .filter(|r| r.end <= data.len())
        .ok_or_else(|| InputError::BadElf {
            path: path.into(),
            reason: format!(
                ".sframe at file offset {:#x} size {:#x} lies outside the {}-byte file",
                sh.sh_offset,
                sh.sh_size,
                data.len()
            ),
        })?;
    Ok(SframeInput {
        bytes: data[range].to_vec(),
        base: sh.sh_addr,
        bfd_target: Some(target),
        found: true,
        text: text_range(&elf),
    })
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
