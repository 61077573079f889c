//! The SFrame (`.sframe`) stack-trace format.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod elf;
pub mod read;
pub mod write;

pub use read::{
    Abi, Base, ByteSource, CfaRule, Endian, Error, Fault, Fde, FdeKind, FrameRule, Fre, FreType, Header, Layout,
    Lookup, PcType, Recovery, RowRule, Section, Version,
};
