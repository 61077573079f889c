//! ELF glue: where SFrame lives in an ELF file.
//!
//! The constants [`PT_GNU_SFRAME`] and [`SHT_GNU_SFRAME`] are always
//! available. The rest needs the `elf` feature (on by default), which
//! brings in goblin; the reader and the writer never need it, the way
//! gimli's reader does without `object`:
//!
//! * [`load`] finds the `.sframe` section of an ELF file (by name or by
//!   type [`SHT_GNU_SFRAME`]), or takes any other file as raw section bytes;
//! * [`load_cfi`] (with the `generate` feature as well) reads the DWARF CFI
//!   the generator translates;
//! * [`inject`] adds a generated section to an executable in a new segment
//!   with a [`PT_GNU_SFRAME`] program header, leaving the rest in place;
//!   [`generate_section`] (with `generate`) makes that section from
//!   [`load_cfi`]'s input and reports its [`Coverage`];
//! * [`sframe_segment`] finds the `PT_GNU_SFRAME` bytes in a file, and
//!   [`Symbols`] names code addresses from its function symbols;
//! * [`compare`] (with `generate`) checks a file's own `.sframe` against
//!   its CFI at every PC, with no execution.

// The list above links to items that only exist with the features.
#![cfg_attr(not(all(feature = "elf", feature = "generate")), allow(rustdoc::broken_intra_doc_links))]

#[cfg(all(feature = "elf", feature = "generate"))]
mod cfi;
#[cfg(all(feature = "elf", feature = "generate"))]
pub mod compare;
mod constants;
#[cfg(all(feature = "elf", feature = "generate"))]
mod coverage;
#[cfg(feature = "elf")]
mod file;
#[cfg(feature = "elf")]
pub mod inject;
#[cfg(feature = "elf")]
mod symbols;

pub use constants::{ELF_MAGIC, PT_GNU_SFRAME, SHT_GNU_SFRAME};
#[cfg(all(feature = "elf", feature = "generate"))]
pub use coverage::{generate_section, Coverage, GenerateError, GeneratedSection, SkippedFunction};
#[cfg(feature = "elf")]
pub use file::{bfd_target, load, raw_bfd_target, sframe_segment, InputError, SframeInput};
#[cfg(all(feature = "elf", feature = "generate"))]
pub use file::{load_cfi, CfiInput};
#[cfg(feature = "elf")]
pub use symbols::Symbols;
