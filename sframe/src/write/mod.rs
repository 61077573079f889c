//! Writing: a word-level table of functions and rows ([`RawSection`]) is
//! encoded as section bytes ([`encode`]) in any version, byte order and ABI;
//! [`Encoding`] turns recovery rules into rows. With the `generate` feature,
//! the `generate` module builds such a table from DWARF CFI (with gimli).

mod encode;
#[cfg(feature = "generate")]
pub mod generate;

pub use encode::{encode, fre_type_for, Encoding, RawFunction, RawRow, RawSection, Word, WriteError};
