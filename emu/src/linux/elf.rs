//! Reading an ELF executable (or the interpreter it names) into a loadable
//! [`Image`].
//!
//! `ET_EXEC` programs load at their link addresses; `ET_DYN` programs (PIE,
//! static or with an interpreter) at the architecture's fixed PIE base, as
//! Linux does without address-space randomisation; an interpreter where
//! the caller places it (`binfmt_elf` maps it like `mmap` would). Every count
//! and range from the file is checked before use, and every error names the
//! file and the problem.

use crate::error::Error;
use crate::machine::arch::Arch;
use crate::machine::memory::{page_down, Perms, PAGE_SIZE};
use goblin::elf::header::{ET_DYN, ET_EXEC};
use goblin::elf::program_header::{PF_R, PF_W, PF_X, PT_INTERP, PT_LOAD, PT_PHDR};
use goblin::elf::Elf;
use sframe::elf::PT_GNU_SFRAME;

/// Lowest address a segment may occupy (Linux's default `mmap_min_addr`).
const MIN_ADDR: u64 = 0x1_0000;

/// How the program is linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfKind {
    /// `ET_EXEC`: fixed addresses.
    Exec,
    /// `ET_DYN` without an interpreter: relocates itself, loaded at a bias.
    StaticPie,
    /// `ET_DYN` with an interpreter (`PT_INTERP`): a PIE the dynamic loader relocates.
    Pie,
}

/// Where an `ET_DYN` image goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A program: `ET_DYN` at the architecture's PIE base.
    Program,
    /// An interpreter: its lowest page at this address.
    At(u64),
}

/// One `PT_LOAD` segment, at its load address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Load address of the first byte.
    pub vaddr: u64,
    /// Size in memory.
    pub memsz: u64,
    /// Offset of the first byte in the file.
    pub offset: u64,
    /// Bytes taken from the file; the rest up to `memsz` is zero.
    pub filesz: u64,
    /// Permissions from `p_flags`.
    pub perms: Perms,
}

/// A segment located in guest memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    /// Load address.
    pub addr: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A static executable, ready to be loaded.
#[derive(Debug, Clone)]
pub struct Image {
    /// The file as named by the caller.
    pub file: String,
    /// Its architecture.
    pub arch: Arch,
    /// How it is linked.
    pub kind: ElfKind,
    /// Added to every link-time address (0 for `ET_EXEC`).
    pub bias: u64,
    /// Entry point, at its load address.
    pub entry: u64,
    /// Load address of the program headers (`AT_PHDR`).
    pub phdr: u64,
    /// Size of one program header (`AT_PHENT`).
    pub phent: u64,
    /// Number of program headers (`AT_PHNUM`).
    pub phnum: u64,
    /// The `PT_LOAD` segments, in file order.
    pub segments: Vec<Segment>,
    /// The `PT_GNU_SFRAME` segment, if any.
    pub sframe: Option<Located>,
    /// End of the highest segment (where the `brk` heap starts, rounded up).
    pub end: u64,
    /// The interpreter `PT_INTERP` names (the dynamic loader), if any.
    pub interp: Option<Vec<u8>>,
}

impl Image {
    /// The span of the executable segments at their load addresses: the
    /// text an SFrame section describes (`None` without executable code).
    pub fn text_range(&self) -> Option<(u64, u64)> {
        self.segments
            .iter()
            .filter(|s| s.perms.contains(crate::machine::memory::Perms::EXEC))
            .map(|s| (s.vaddr, s.vaddr + s.memsz))
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }

    /// Parses `bytes`, the contents of the program `file`.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Image, Error> {
        Image::parse_at(file, bytes, Placement::Program)
    }

    /// The bytes between the lowest and the end of the highest `PT_LOAD`
    /// page: what an interpreter needs free to be placed.
    pub fn span(&self) -> u64 {
        let low = self.segments.iter().map(|s| page_down(s.vaddr)).min().unwrap_or(0);
        crate::machine::memory::page_up(self.end).unwrap_or(u64::MAX) - low
    }

    /// Parses `bytes`, the contents of `file`, to be placed as `placement` says.
    pub fn parse_at(file: &str, bytes: &[u8], placement: Placement) -> Result<Image, Error> {
        let bad = |problem: String| Error::BadElf { file: file.to_string(), problem };
        let elf = Elf::parse(bytes).map_err(|e| bad(format!("not a readable ELF file: {e}")))?;
        let header = &elf.header;
        let arch = crate::machine::arch::from_elf_machine(header.e_machine).ok_or_else(|| {
            bad(format!(
                "unsupported machine {} (e_machine {}); supported: x86-64, AArch64, s390x",
                goblin::elf::header::machine_to_str(header.e_machine),
                header.e_machine
            ))
        })?;
        if !elf.is_64 {
            return Err(bad(format!("32-bit ELF for {arch}; only 64-bit programs are supported")));
        }
        let little = crate::machine::arch::info(arch).endian == crate::machine::bytes::Endian::Little;
        if elf.little_endian != little {
            return Err(bad(format!("{arch} program in the wrong byte order")));
        }
        let interp = match elf.program_headers.iter().find(|ph| ph.p_type == PT_INTERP) {
            None => None,
            Some(ph) => {
                let name = usize::try_from(ph.p_offset)
                    .ok()
                    .and_then(|at| bytes.get(at..at.checked_add(usize::try_from(ph.p_filesz).ok()?)?))
                    .ok_or_else(|| bad("PT_INTERP lies past the end of the file".into()))?;
                let name = name.split(|&b| b == 0).next().unwrap_or_default();
                if name.is_empty() || placement != Placement::Program {
                    return Err(bad(if name.is_empty() {
                        "PT_INTERP names no interpreter".into()
                    } else {
                        "the interpreter has an interpreter itself (PT_INTERP)".into()
                    }));
                }
                Some(name.to_vec())
            }
        };
        let kind = match header.e_type {
            ET_EXEC => ElfKind::Exec,
            ET_DYN if interp.is_some() => ElfKind::Pie,
            ET_DYN => ElfKind::StaticPie,
            other => return Err(bad(format!("not an executable (e_type {other})"))),
        };

        let loads: Vec<_> = elf.program_headers.iter().filter(|ph| ph.p_type == PT_LOAD).collect();
        let lowest = loads.iter().map(|ph| ph.p_vaddr).min().ok_or_else(|| bad("no PT_LOAD segment".into()))?;
        let bias = match (kind, placement) {
            (ElfKind::Exec, _) => 0,
            (_, Placement::Program) => crate::machine::arch::info(arch).pie_base.wrapping_sub(page_down(lowest)),
            (_, Placement::At(base)) => base.wrapping_sub(page_down(lowest)),
        };

        let mut segments: Vec<Segment> = Vec::with_capacity(loads.len());
        for (i, ph) in loads.iter().enumerate() {
            let what = format!("PT_LOAD segment {i} (offset {:#x}, address {:#x})", ph.p_offset, ph.p_vaddr);
            if ph.p_filesz > ph.p_memsz {
                return Err(bad(format!("{what}: file size {:#x} exceeds memory size {:#x}", ph.p_filesz, ph.p_memsz)));
            }
            if ph.p_offset.checked_add(ph.p_filesz).is_none_or(|end| end > bytes.len() as u64) {
                return Err(bad(format!("{what}: file part ends past the end of the file ({} bytes)", bytes.len())));
            }
            if ph.p_vaddr % PAGE_SIZE != ph.p_offset % PAGE_SIZE {
                return Err(bad(format!("{what}: address and file offset differ modulo the page size")));
            }
            let vaddr = ph.p_vaddr.wrapping_add(bias);
            let end = vaddr.checked_add(ph.p_memsz).filter(|&end| end <= crate::linux::layout::USER_TOP);
            if vaddr < MIN_ADDR || end.is_none() {
                return Err(bad(format!("{what}: loads at {vaddr:#x}, outside the user address space")));
            }
            let seg = Segment {
                vaddr,
                memsz: ph.p_memsz,
                offset: ph.p_offset,
                filesz: ph.p_filesz,
                perms: perms(ph.p_flags),
            };
            if let Some(other) =
                segments.iter().position(|o| seg.vaddr < o.vaddr + o.memsz && o.vaddr < seg.vaddr + seg.memsz)
            {
                return Err(bad(format!("{what} overlaps PT_LOAD segment {other}")));
            }
            segments.push(seg);
        }
        let end = segments.iter().map(|s| s.vaddr + s.memsz).max().unwrap_or(0);
        let contains = |addr: u64| segments.iter().any(|s| (s.vaddr..s.vaddr + s.memsz).contains(&addr));

        let entry = header.e_entry.wrapping_add(bias);
        if !contains(entry) {
            return Err(bad(format!("entry point {:#x} is outside every PT_LOAD segment", header.e_entry)));
        }

        let phent = u64::from(header.e_phentsize);
        let phnum = u64::from(header.e_phnum);
        let phdr = match elf.program_headers.iter().find(|ph| ph.p_type == PT_PHDR) {
            Some(ph) => ph.p_vaddr.wrapping_add(bias),
            None => {
                // As Linux does: the program headers' address is where the
                // PT_LOAD segment holding their file bytes puts them.
                let size = phent * phnum;
                loads
                    .iter()
                    .find(|ph| ph.p_offset <= header.e_phoff && header.e_phoff + size <= ph.p_offset + ph.p_filesz)
                    .map(|ph| ph.p_vaddr.wrapping_add(bias) + (header.e_phoff - ph.p_offset))
                    .ok_or_else(|| bad("program headers are not inside any PT_LOAD segment".into()))?
            }
        };
        if !contains(phdr) {
            return Err(bad(format!("program headers at {phdr:#x} are not loaded")));
        }

        let sframe = match elf.program_headers.iter().find(|ph| ph.p_type == PT_GNU_SFRAME) {
            Some(ph) => {
                let addr = ph.p_vaddr.wrapping_add(bias);
                if addr.checked_add(ph.p_memsz).is_none_or(|end| end > crate::linux::layout::USER_TOP) {
                    return Err(bad(format!(
                        "PT_GNU_SFRAME (address {:#x}, size {:#x}) lies outside the user address space",
                        ph.p_vaddr, ph.p_memsz
                    )));
                }
                Some(Located { addr, size: ph.p_memsz })
            }
            None => None,
        };

        Ok(Image { file: file.to_string(), arch, kind, bias, entry, phdr, phent, phnum, segments, sframe, end, interp })
    }
}

fn perms(p_flags: u32) -> Perms {
    let mut perms = Perms::NONE;
    for (flag, perm) in [(PF_R, Perms::READ), (PF_W, Perms::WRITE), (PF_X, Perms::EXEC)] {
        if p_flags & flag != 0 {
            perms = perms | perm;
        }
    }
    perms
}
