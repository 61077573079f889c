//! ELF glue: where SFrame lives in an ELF file.
//!
//! The constants below are always available. The rest needs the `elf`
//! feature (on by default), which brings in goblin; the reader and the
//! writer never need it, the way gimli's reader does without `object`:
//!
//! * [`load`] finds the `.sframe` section of an ELF file (by name or by
//!   type [`SHT_GNU_SFRAME`]), or takes any other file as raw section bytes;
//! * [`load_cfi`] (with the `generate` feature as well) reads the DWARF CFI
//!   the generator translates;
//! * [`inject`] adds a generated section to an executable in a new segment
//!   with a [`PT_GNU_SFRAME`] program header, leaving the rest in place.

// The list above links to items that only exist with the features.
#![cfg_attr(not(all(feature = "elf", feature = "generate")), allow(rustdoc::broken_intra_doc_links))]

/// `SHT_GNU_SFRAME`, the section type binutils ≥ 2.45 gives `.sframe`.
pub const SHT_GNU_SFRAME: u32 = 0x6fff_fff4;
/// `PT_GNU_SFRAME`, the program header covering `.sframe` in linked files.
pub const PT_GNU_SFRAME: u32 = 0x6474_e554;

#[cfg(feature = "elf")]
mod file;
#[cfg(feature = "elf")]
pub mod inject;

#[cfg(feature = "elf")]
pub use file::{bfd_target, load, raw_bfd_target, InputError, SframeInput};
#[cfg(all(feature = "elf", feature = "generate"))]
pub use file::{load_cfi, CfiInput};
