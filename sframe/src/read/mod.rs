//! Reading: an exact SFrame (`.sframe`) reader for V1, V2 and V3, all four
//! ABIs and both byte orders, safe on hostile bytes.
//!
//! Data flows one way: [`Section::parse`] checks the header and layout,
//! [`Section::fde`] decodes one function descriptor, [`Section::fres`]
//! iterates its rows, [`rule::interpret`] turns a row into recovery rules,
//! and [`Section::lookup`] does PC → FDE → FRE → rule ([`IndexedSection`]
//! does it faster for many lookups in bytes that stay put, decoding the FDE
//! array once). All reads go through
//! [`ByteSource`], so the same code runs over a slice or over memory that
//! may fault (a kernel reading user memory). [`validate`] checks a whole
//! untrusted section up front and [`dump`] prints it as objdump does; both
//! only read.

pub mod dump;
mod error;
pub mod fde;
pub mod fre;
pub mod header;
mod index;
mod reader;
pub mod rule;
mod section;
pub mod source;
pub mod validate;

pub use error::Error;
pub use fde::{Fde, FdeKind, FreType, PcType};
pub use fre::Fre;
pub use header::{Abi, Header, Layout, Version};
pub use index::IndexedSection;
pub use rule::{Base, CfaRule, FrameRule, Recovery, RowRule};
pub use section::{Lookup, Section, V1_AMD64_PLT_ENTRY_SIZE};
pub use source::{ByteSource, Endian, Fault};
