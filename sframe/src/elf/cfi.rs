//! Where an ELF file's DWARF CFI is and which SFrame ABI its machine has:
//! shared by the CFI loader (`file.rs`) and the naming of stripped
//! functions by their FDEs (`symbols.rs`).

use crate::Abi;
use goblin::elf::Elf;

/// The SFrame ABI of an ELF file's machine, or why it has none.
pub(crate) fn sframe_abi(elf: &Elf<'_>) -> Result<Abi, String> {
    use goblin::elf::header::{EM_AARCH64, EM_S390, EM_X86_64};
    match (elf.header.e_machine, elf.is_64, elf.little_endian) {
        (EM_X86_64, true, true) => Ok(Abi::Amd64),
        (EM_AARCH64, true, true) => Ok(Abi::Aarch64Little),
        (EM_AARCH64, true, false) => Ok(Abi::Aarch64Big),
        (EM_S390, true, false) => Ok(Abi::S390x),
        (machine, is_64, _) => Err(format!(
            "SFrame has no ABI for this machine (e_machine {machine}, {}-bit)",
            if is_64 { 64 } else { 32 }
        )),
    }
}

/// The DWARF CFI of the ELF file `data` (parsed as `elf`): `.eh_frame`,
/// else `.debug_frame`, at its section address.
pub(crate) fn cfi_section<'d>(elf: &Elf<'_>, data: &'d [u8]) -> Result<crate::write::generate::Cfi<'d>, String> {
    use crate::write::generate::{Cfi, CfiKind};
    let section = |name: &str| {
        elf.section_headers.iter().find(|sh| elf.shdr_strtab.get_at(sh.sh_name) == Some(name) && sh.sh_size > 0)
    };
    let (kind, sh) = match (section(".eh_frame"), section(".debug_frame")) {
        (Some(sh), _) => (CfiKind::EhFrame, sh),
        (None, Some(sh)) => (CfiKind::DebugFrame, sh),
        (None, None) => return Err("no .eh_frame or .debug_frame section: no CFI to generate SFrame from".into()),
    };
    let range = (sh.sh_offset as usize)..(sh.sh_offset as usize).saturating_add(sh.sh_size as usize);
    let data = data.get(range).ok_or_else(|| "CFI section lies outside the file".to_string())?;
    Ok(Cfi { kind, data, address: sh.sh_addr })
}
