//! The SFrame (`.sframe`) stack-trace format: read it, check it, print it,
//! write it, generate it from DWARF CFI, and find or put it in ELF files.
//!
//! SFrame describes, for every PC of a program, how to find the caller's
//! frame: the CFA (canonical frame address) from SP or FP, and where the
//! return address and the caller's FP were saved. Linux unwinds user stacks
//! with it; binutils (gas, ld, objdump) makes and prints it. This crate
//! reads SFrame V1, V2 and V3 exactly (every ABI: x86-64, AArch64 in both
//! byte orders with PAC, s390x), and is safe on hostile bytes: every count
//! and offset is checked before use, errors are values, and the work done
//! is bounded by the section's size. Section numbers (§) in the
//! documentation refer to the SFrame specification.
//!
//! It is meant to be usable alone, the way gimli is: a toolchain test, an
//! unwinder or a kernel model needs nothing else from unwindlab.
//!
//! # Modules
//!
//! * [`read`]: decoding. [`Section::parse`] checks the header and layout,
//!   [`Section::lookup`] answers "how do I unwind from this PC?" without
//!   allocating ([`Section::indexed`] decodes the FDE array once for
//!   faster repeated lookups); [`read::validate`] checks a whole untrusted section against
//!   libsframe's rules or the Linux kernel's stricter ones;
//!   [`read::dump`] prints a section exactly as the `objdump --sframe` of
//!   the binutils release that made it does. All reads go through
//!   [`ByteSource`], so the same code runs over a byte slice or over memory
//!   where a read may fault (a kernel reading user memory).
//! * [`write`](mod@write): encoding. A table of functions and rows
//!   ([`write::RawSection`]) becomes section bytes in any version, byte order
//!   and ABI ([`write::encode`]); [`write::Encoding`] turns recovery rules
//!   into rows; `write::generate` (feature `generate`) translates
//!   `.eh_frame` or `.debug_frame` into such a table.
//! * [`elf`]: the ELF side: the `PT_GNU_SFRAME` and `SHT_GNU_SFRAME`
//!   constants (always), and with the `elf` feature finding `.sframe` or
//!   the CFI in an ELF file and injecting a section into an executable.
//!
//! The types most users need are re-exported here at the crate root.
//!
//! # Features
//!
//! | feature | default | adds | dependency |
//! |---|---|---|---|
//! | `elf` | yes | `elf::load`, `elf::inject`, … (section finding, injection) | goblin |
//! | `generate` | yes | `write::generate`, and `elf::load_cfi` with `elf` | gimli |
//!
//! With `default-features = false` the crate is the reader, the validator,
//! the dump and the writer, with no dependency beyond serde and thiserror:
//! a reader-only user needs neither gimli nor goblin.
//!
//! # Example
//!
//! Encode a one-function x86-64 section, read it back, and ask for the rule
//! at a PC:
//!
//! ```
//! use sframe::read::header::{F_FDE_FUNC_START_PCREL, F_FDE_SORTED};
//! use sframe::write::{encode, RawFunction, RawRow, RawSection};
//! use sframe::{Abi, Base, Recovery, RowRule, Section, Version};
//!
//! // A 32-byte function at 0x401000: CFA = SP+8 on entry; after its
//! // one-byte `push %rbp`, CFA = SP+16 with the caller's FP at CFA-16.
//! // (x86-64 always has the return address at CFA-8: a fixed offset.)
//! let table = RawSection {
//!     version: Version::V3,
//!     abi: Abi::Amd64,
//!     flags: F_FDE_SORTED | F_FDE_FUNC_START_PCREL,
//!     cfa_fixed_fp_offset: 0,
//!     cfa_fixed_ra_offset: -8,
//!     functions: vec![RawFunction::new(
//!         0x401000,
//!         32,
//!         vec![RawRow::new(0, true, &[8]), RawRow::new(1, true, &[16, -16])],
//!     )],
//! };
//! let base = 0x402000; // where the section is loaded
//! let bytes = encode(&table, base)?;
//!
//! let section = Section::parse(bytes.as_slice(), base)?;
//! let found = section.lookup(0x401004)?.expect("a row covers this PC");
//! println!("FDE {} FRE {}: {:?}", found.fde.index, found.fre_index, found.rule);
//! let RowRule::Frame(frame) = found.rule else { unreachable!("not the outermost frame") };
//! assert_eq!((frame.cfa.base, frame.cfa.offset), (Base::Sp, 16));
//! assert_eq!(frame.ra, Recovery::Cfa { offset: -8, deref: true });
//! assert_eq!(frame.fp, Recovery::Cfa { offset: -16, deref: true });
//! assert!(section.lookup(0x401020)?.is_none()); // past the function
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod elf;
pub mod read;
pub mod write;

pub use read::{
    Abi, Base, ByteSource, CfaRule, Endian, Error, Fault, Fde, FdeKind, FrameRule, Fre, FreType, Header,
    IndexedSection, Layout, Lookup, PcType, Recovery, RowRule, Section, Version,
};
