//! The ELF numbers of SFrame, always available (no feature needed).

/// The four bytes every ELF file starts with (`EI_MAG0..EI_MAG3`).
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
/// `SHT_GNU_SFRAME`, the section type binutils ≥ 2.45 gives `.sframe`.
pub const SHT_GNU_SFRAME: u32 = 0x6fff_fff4;
/// `PT_GNU_SFRAME`, the program header covering `.sframe` in linked files.
pub const PT_GNU_SFRAME: u32 = 0x6474_e554;
