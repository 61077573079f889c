//! Putting a generated `.sframe` into an ELF file: a new read-only `PT_LOAD`
//! segment holding a copy of the program header table and the section, a
//! `PT_GNU_SFRAME` header describing it, and a `.sframe` section header.
//! Everything already in the file keeps its offset and address, so the
//! program runs exactly as before.
//!
//! The same holds for shared objects (`ET_DYN` with `PT_DYNAMIC`: libraries,
//! `ld.so`, PIEs). Every header but `PT_PHDR` is copied unchanged
//! (`PT_DYNAMIC`, `PT_GNU_RELRO`, `PT_TLS`, `PT_GNU_EH_FRAME`, `PT_NOTE`,
//! `PT_INTERP`, … keep describing the bytes they described), and the new
//! table is found the same way by every reader of program headers:
//!
//! * `e_phoff` points at it in the file, where the kernel and `ld.so` read
//!   the headers of what they map;
//! * it lies in the new `PT_LOAD`, so a loader that takes the segment
//!   holding `e_phoff` (`ld.so` for a library, the kernel's `AT_PHDR`)
//!   finds it in memory;
//! * the new segment keeps the first segment's address − offset delta, so
//!   base + `e_phoff` (how `ld.so` finds its own headers, `__ehdr_start`)
//!   is its address too;
//! * `PT_PHDR`, if any (PIEs, `libc.so.6`), is moved to cover it: `ld.so`
//!   computes an executable's load bias from it.
//!
//! The new `PT_LOAD` goes after the highest segment's end, at an offset and
//! address aligned to the largest `p_align` of the file (at least a page),
//! and stays last among the `PT_LOAD`s, which must be sorted by address.

use goblin::elf::program_header::{PF_R, PT_LOAD, PT_PHDR};
use goblin::elf::Elf;

use super::constants::{PT_GNU_SFRAME, SHT_GNU_SFRAME};

const PHDR_SIZE: u64 = 56;
const SHDR_SIZE: u64 = 64;
/// How far past the end of the file the new segment may start (alignment
/// padding, or a gap up to the highest segment's end): more comes from a
/// corrupt header, and the rewritten file would be that large.
const MAX_GAP: u64 = 1 << 30;

/// Why a file cannot be rewritten.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// Not an ELF file we can rewrite.
    #[error("{0}")]
    Unsupported(String),
    /// The section could not be encoded at its address.
    #[error("encoding the section at {address:#x}: {reason}")]
    Encode {
        /// Where it was to be loaded.
        address: u64,
        /// The writer's error.
        reason: String,
    },
}

/// Where the new segment goes; the caller encodes the section for `address`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Address of the section's first byte.
    pub address: u64,
}

fn put(out: &mut Vec<u8>, value: u64, width: usize, little: bool) {
    let bytes = if little { value.to_le_bytes() } else { value.to_be_bytes() };
    if little {
        out.extend_from_slice(&bytes[..width]);
    } else {
        out.extend_from_slice(&bytes[8 - width..]);
    }
}

fn patch(data: &mut [u8], at: usize, value: u64, width: usize, little: bool) {
    let mut v = Vec::with_capacity(width);
    put(&mut v, value, width, little);
    data[at..at + width].copy_from_slice(&v);
}

struct Phdr {
    p_type: u32,
    p_flags: u32,
    p_offset: u64,
    p_vaddr: u64,
    p_filesz: u64,
    p_memsz: u64,
    p_align: u64,
}

impl Phdr {
    fn write(&self, out: &mut Vec<u8>, little: bool) {
        put(out, u64::from(self.p_type), 4, little);
        put(out, u64::from(self.p_flags), 4, little);
        put(out, self.p_offset, 8, little);
        put(out, self.p_vaddr, 8, little);
        put(out, self.p_vaddr, 8, little); // p_paddr
        put(out, self.p_filesz, 8, little);
        put(out, self.p_memsz, 8, little);
        put(out, self.p_align, 8, little);
    }
}

fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align.max(1)) * align.max(1)
}

/// Layout decisions for `file`, computed before the section is encoded.
struct Plan {
    little: bool,
    seg_offset: u64,
    phdrs: Vec<Phdr>,
    sframe_offset_in_seg: u64,
    /// Address of the section's first byte.
    sframe_vaddr: u64,
}

fn plan(data: &[u8]) -> Result<Plan, InjectError> {
    let elf = Elf::parse(data).map_err(|e| InjectError::Unsupported(format!("malformed ELF: {e}")))?;
    if !elf.is_64 {
        return Err(InjectError::Unsupported("only 64-bit ELF files are supported".into()));
    }
    if elf.header.e_phentsize as u64 != PHDR_SIZE
        || (elf.header.e_shnum != 0 && elf.header.e_shentsize as u64 != SHDR_SIZE)
    {
        return Err(InjectError::Unsupported("unexpected program or section header entry size".into()));
    }
    let loads: Vec<_> = elf.program_headers.iter().filter(|p| p.p_type == PT_LOAD).collect();
    let first = loads.first().ok_or_else(|| InjectError::Unsupported("no PT_LOAD segment".into()))?;
    let align = loads.iter().map(|p| p.p_align).max().unwrap_or(0x1000).max(0x1000);
    let end = loads.iter().map(|p| p.p_vaddr.saturating_add(p.p_memsz)).max().unwrap_or(0);
    // Keep the first segment's address−offset delta so that both ways of
    // computing AT_PHDR (the PT_LOAD that holds e_phoff, or first segment
    // base + e_phoff) find the new table.
    let delta = first.p_vaddr.wrapping_sub(first.p_offset);
    let len = data.len() as u64;
    let too_far = |offset: u64| {
        InjectError::Unsupported(format!(
            "the new segment would start at file offset {offset:#x} (alignment {align:#x}, segments up to \
             {end:#x}), more than {MAX_GAP:#x} bytes past the end of the {len}-byte file"
        ))
    };
    // Bounded before rounding up, so the arithmetic below cannot overflow.
    if align > MAX_GAP {
        return Err(too_far(align));
    }
    let mut seg_offset = align_up(len, align);
    if seg_offset.wrapping_add(delta) < end {
        let needed = end.wrapping_sub(delta);
        if needed > len + MAX_GAP {
            return Err(too_far(needed));
        }
        seg_offset = align_up(needed, align);
    }
    let seg_vaddr = seg_offset.wrapping_add(delta);
    // Loaders require p_vaddr ≡ p_offset modulo p_align: an unusual first
    // segment delta gets the largest alignment it allows (at least a page).
    let seg_align = if delta % align == 0 { align } else { 1u64 << delta.trailing_zeros().min(63) };
    if seg_align < 0x1000 {
        return Err(InjectError::Unsupported(format!(
            "the first PT_LOAD's address − offset ({delta:#x}) is not a multiple of the page size"
        )));
    }
    let has_sframe = elf.program_headers.iter().any(|p| p.p_type == PT_GNU_SFRAME);
    let count = elf.program_headers.len() as u64 + 1 + u64::from(!has_sframe);
    let table_size = count * PHDR_SIZE;
    let sframe_offset_in_seg = align_up(table_size, 8);
    let sframe_vaddr = seg_vaddr.checked_add(sframe_offset_in_seg).ok_or_else(|| {
        InjectError::Unsupported(format!("the new segment's address {seg_vaddr:#x} wraps around the address space"))
    })?;
    let mut phdrs: Vec<Phdr> = Vec::new();
    let last_load = elf.program_headers.iter().rposition(|p| p.p_type == PT_LOAD).unwrap_or(0);
    for (i, p) in elf.program_headers.iter().enumerate() {
        let mut copy = Phdr {
            p_type: p.p_type,
            p_flags: p.p_flags,
            p_offset: p.p_offset,
            p_vaddr: p.p_vaddr,
            p_filesz: p.p_filesz,
            p_memsz: p.p_memsz,
            p_align: p.p_align,
        };
        if p.p_type == PT_PHDR {
            copy.p_offset = seg_offset;
            copy.p_vaddr = seg_vaddr;
            copy.p_filesz = table_size;
            copy.p_memsz = table_size;
        }
        if p.p_type == PT_GNU_SFRAME {
            continue; // re-added below, pointing at the new section
        }
        phdrs.push(copy);
        if i == last_load {
            // PT_LOAD entries stay sorted by address: the new one is highest.
            phdrs.push(Phdr {
                p_type: PT_LOAD,
                p_flags: PF_R,
                p_offset: seg_offset,
                p_vaddr: seg_vaddr,
                p_filesz: 0,
                p_memsz: 0,
                p_align: seg_align,
            });
        }
    }
    phdrs.push(Phdr {
        p_type: PT_GNU_SFRAME,
        p_flags: PF_R,
        p_offset: 0,
        p_vaddr: 0,
        p_filesz: 0,
        p_memsz: 0,
        p_align: 8,
    });
    Ok(Plan { little: elf.little_endian, seg_offset, phdrs, sframe_offset_in_seg, sframe_vaddr })
}

/// Where the section will live in the rewritten `data`.
pub fn placement(data: &[u8]) -> Result<Placement, InjectError> {
    let p = plan(data)?;
    Ok(Placement { address: p.sframe_vaddr })
}

/// Rewrites `data` with `sframe` (encoded for [`placement`]'s address) added.
pub fn inject(data: &[u8], sframe: &[u8]) -> Result<Vec<u8>, InjectError> {
    let mut p = plan(data)?;
    let elf = Elf::parse(data).map_err(|e| InjectError::Unsupported(format!("malformed ELF: {e}")))?;
    let little = p.little;
    let sframe_vaddr = p.sframe_vaddr;
    let seg_size = p.sframe_offset_in_seg + sframe.len() as u64;
    for ph in &mut p.phdrs {
        if ph.p_type == PT_LOAD && ph.p_offset == p.seg_offset && ph.p_filesz == 0 {
            ph.p_filesz = seg_size;
            ph.p_memsz = seg_size;
        }
        if ph.p_type == PT_GNU_SFRAME {
            ph.p_offset = p.seg_offset + p.sframe_offset_in_seg;
            ph.p_vaddr = sframe_vaddr;
            ph.p_filesz = sframe.len() as u64;
            ph.p_memsz = sframe.len() as u64;
        }
    }
    let mut out = data.to_vec();
    out.resize(p.seg_offset as usize, 0);
    for ph in &p.phdrs {
        ph.write(&mut out, little);
    }
    out.resize((p.seg_offset + p.sframe_offset_in_seg) as usize, 0);
    out.extend_from_slice(sframe);

    // Section headers: old ones (an old .sframe renamed), a new .sframe,
    // and the string table rewritten at the end with the new names.
    let shstrndx = elf.header.e_shstrndx as usize;
    let old_strtab = elf
        .section_headers
        .get(shstrndx)
        .and_then(|sh| {
            data.get(usize::try_from(sh.sh_offset).ok()?..usize::try_from(sh.sh_offset.checked_add(sh.sh_size)?).ok()?)
        })
        .unwrap_or(&[]);
    let mut strtab = old_strtab.to_vec();
    if strtab.is_empty() {
        strtab.push(0);
    }
    let name_sframe = strtab.len() as u64;
    strtab.extend_from_slice(b".sframe\0");
    let name_old = strtab.len() as u64;
    strtab.extend_from_slice(b".sframe.replaced\0");
    let name_shstrtab = strtab.len() as u64;
    strtab.extend_from_slice(b".shstrtab\0");
    let strtab_offset = out.len() as u64;
    out.extend_from_slice(&strtab);
    let shoff = align_up(out.len() as u64, 8);
    out.resize(shoff as usize, 0);
    let mut shnum = 0u64;
    let mut new_shstrndx = shstrndx as u64;
    for (i, sh) in elf.section_headers.iter().enumerate() {
        let is_old_sframe = elf.shdr_strtab.get_at(sh.sh_name) == Some(".sframe") || sh.sh_type == SHT_GNU_SFRAME;
        let (name, offset, size) = if i == shstrndx && i != 0 {
            (name_shstrtab, strtab_offset, strtab.len() as u64)
        } else if is_old_sframe {
            (name_old, sh.sh_offset, sh.sh_size)
        } else {
            (u64::from(sh.sh_name as u32), sh.sh_offset, sh.sh_size)
        };
        let sh_type = if is_old_sframe { goblin::elf::section_header::SHT_PROGBITS } else { sh.sh_type };
        write_shdr(
            &mut out,
            little,
            name,
            sh_type,
            sh.sh_flags,
            sh.sh_addr,
            offset,
            size,
            sh.sh_link,
            sh.sh_info,
            sh.sh_addralign,
            sh.sh_entsize,
        );
        shnum += 1;
    }
    if elf.section_headers.is_empty() {
        write_shdr(&mut out, little, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        write_shdr(
            &mut out,
            little,
            name_shstrtab,
            goblin::elf::section_header::SHT_STRTAB,
            0,
            0,
            strtab_offset,
            strtab.len() as u64,
            0,
            0,
            1,
            0,
        );
        new_shstrndx = 1;
        shnum = 2;
    }
    let flags = u64::from(goblin::elf::section_header::SHF_ALLOC);
    write_shdr(
        &mut out,
        little,
        name_sframe,
        SHT_GNU_SFRAME,
        flags,
        sframe_vaddr,
        p.seg_offset + p.sframe_offset_in_seg,
        sframe.len() as u64,
        0,
        0,
        8,
        0,
    );
    shnum += 1;

    // ELF header: e_phoff 0x20, e_shoff 0x28, e_phnum 0x38, e_shnum 0x3c, e_shstrndx 0x3e.
    patch(&mut out, 0x20, p.seg_offset, 8, little);
    patch(&mut out, 0x28, shoff, 8, little);
    patch(&mut out, 0x38, p.phdrs.len() as u64, 2, little);
    patch(&mut out, 0x3c, shnum, 2, little);
    patch(&mut out, 0x3e, new_shstrndx, 2, little);
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn write_shdr(
    out: &mut Vec<u8>,
    little: bool,
    name: u64,
    sh_type: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    addralign: u64,
    entsize: u64,
) {
    put(out, name, 4, little);
    put(out, u64::from(sh_type), 4, little);
    put(out, flags, 8, little);
    put(out, addr, 8, little);
    put(out, offset, 8, little);
    put(out, size, 8, little);
    put(out, u64::from(link), 4, little);
    put(out, u64::from(info), 4, little);
    put(out, addralign, 8, little);
    put(out, entsize, 8, little);
}

/// Writes `bytes`, an [`inject`]ed copy of the file `original`, to `path`
/// with `original`'s permissions, so that an executable stays executable.
pub fn write_like(path: &str, bytes: &[u8], original: &str) -> std::io::Result<()> {
    std::fs::write(path, bytes)?;
    let permissions = std::fs::metadata(original)?.permissions();
    std::fs::set_permissions(path, permissions)
}
