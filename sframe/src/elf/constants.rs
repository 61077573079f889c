//! The ELF numbers of SFrame, always available (no feature needed).

/// `SHT_GNU_SFRAME`, the section type binutils ≥ 2.45 gives `.sframe`.
pub const SHT_GNU_SFRAME: u32 = 0x6fff_fff4;
/// `PT_GNU_SFRAME`, the program header covering `.sframe` in linked files.
pub const PT_GNU_SFRAME: u32 = 0x6474_e554;
