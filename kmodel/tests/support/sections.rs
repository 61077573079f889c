//! Stacks and `.sframe` sections placed in a [`PagedMemory`], for the
//! unwinder's tests and the deferred-unwind tests that walk SFrame data.

use kmodel::arch::{Arch, UserRegs};
use kmodel::kernel::Kernel;
use kmodel::memory::{Access, PagedMemory};
use kmodel::types::MmId;
use kmodel::unwind::{SframeMode, SframeRegistry};
use sframe::write::{encode, RawFunction, RawRow, RawSection, Word};
use sframe::{Abi, Version};

/// Where the tests put their stacks.
pub const STACK: u64 = 0x7000_0000;
/// Where the tests put `.sframe` sections.
pub const SFRAME: u64 = 0x5000_0000;
/// Text described by the sections.
pub const TEXT: (u64, u64) = (0x40_0000, 0x40_4000);

/// Writes a stack word in `arch`'s byte order.
pub fn word(mem: &mut PagedMemory, arch: Arch, addr: u64, value: u64) {
    mem.write_word(addr, value, arch.big_endian());
}

/// An x86-64 / AArch64 frame record at `fp`: saved FP, then RA above it.
pub fn frame_record(mem: &mut PagedMemory, arch: Arch, fp: u64, saved_fp: u64, ra: u64) {
    word(mem, arch, fp, saved_fp);
    word(mem, arch, fp + 8, ra);
}

/// A section table with the flags the kernel wants (sorted, PC-relative)
/// and gas's fixed offsets for `abi`.
pub fn table(version: Version, abi: Abi, functions: Vec<RawFunction>) -> RawSection {
    let flags = if version == Version::V1 { 0x1 } else { 0x5 };
    let ra = if abi == Abi::Amd64 { -8 } else { 0 };
    RawSection { version, abi, flags, cfa_fixed_fp_offset: 0, cfa_fixed_ra_offset: ra, functions }
}

/// Encodes `t` at `addr`, writes it to memory, and returns its end.
pub fn place(mem: &mut PagedMemory, t: &RawSection, addr: u64) -> u64 {
    let bytes = encode(t, addr).expect("encodable table");
    mem.write(addr, &bytes);
    addr + bytes.len() as u64
}

/// Places `t` at [`SFRAME`] and registers it for [`TEXT`] in a fresh
/// registry (lab mode, so any version).
pub fn registered(mem: &mut PagedMemory, arch: Arch, t: &RawSection) -> SframeRegistry {
    let end = place(mem, t, SFRAME);
    let mut registry = SframeRegistry::new(arch);
    registry
        .add(mem, super::ANY_VMA, Access::Faultable, (SFRAME, end), TEXT, SframeMode::Lab, false)
        .expect("section registers");
    registry
}

/// A flex row from (control, offset) words.
pub fn flex_row(start: u32, words: &[(u32, i32)]) -> RawRow {
    let words = words.iter().flat_map(|&(c, o)| [Word::Unsigned(c), Word::Signed(o)]).collect();
    RawRow { start, cfa_base_sp: false, ra_mangled: false, words }
}

/// A flex control word: register `reg` (or the CFA if `None`), loaded if `deref`.
pub fn ctl(reg: Option<u32>, deref: bool) -> u32 {
    let d = u32::from(deref) << 1;
    match reg {
        Some(r) => r << 3 | d | 1,
        None => d,
    }
}

/// Where the deferred-unwind tests (fork/exec, threads) put their mm's
/// `.sframe` section.
pub const MM_SECTION: u64 = 0x60_0000;
/// The text that [`register_frameless_section`]'s section describes.
pub const MM_TEXT: (u64, u64) = (0x40_0000, 0x41_0000);
/// A return address an SFrame walk finds at SP (put there by
/// [`register_frameless_section`]).
pub const SFRAME_RA: u64 = 0x40_1abc;

/// Registers in `mm`, at [`MM_SECTION`], a section whose one row (for the
/// function at 0x401000) says "frameless: CFA = SP + 8, RA at SP", and
/// puts [`SFRAME_RA`] at the SP of `regs` (those of
/// [`fp_stack`](super::stack::fp_stack)), so an SFrame walk and a
/// frame-pointer walk of that stack differ in their second entry.
pub fn register_frameless_section(k: &mut Kernel, mm: MmId, mem: &mut PagedMemory, regs: &UserRegs) {
    mem.write_word(regs.sp(), SFRAME_RA, false);
    let functions = vec![RawFunction::new(0x40_1000, 0x100, vec![RawRow::new(0, true, &[8])])];
    let end = place(mem, &table(Version::V3, Abi::Amd64, functions), MM_SECTION);
    k.add_sframe(mm, mem, super::ANY_VMA, (MM_SECTION, end), MM_TEXT).unwrap();
}
