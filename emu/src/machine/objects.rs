//! Files mapped into a process, and the ELF objects among them.
//!
//! Every area that maps a file carries a [`Backing`]: the file and the
//! offset of the area's first byte in it. The *objects table* of a process
//! is derived from its areas whenever it is asked for, so it always agrees
//! with the mappings: each ELF file mapped at a given load bias is one
//! [`Object`] (the program, its interpreter, every library, each `dlopen`).
//! The bias comes from the area that maps the first page of its first
//! `PT_LOAD` (the kernel and `ld.so` both map that first; later `mprotect`s,
//! gaps and `MAP_FIXED` segments do not move it): an area at `start` mapping
//! exactly that segment's page offset gives `bias = start − the segment's
//! page address`, as `perf` reads `/proc/PID/maps`. The object is gone when
//! that area is.
//!
//! The emulator reports changes as [`Event::ObjectMapped`](crate::Event::ObjectMapped) and
//! [`Event::ObjectUnmapped`](crate::Event::ObjectUnmapped), comparing the table before and after
//! each call that maps or unmaps a file, and at `execve`.

use crate::machine::page::{page_down, PAGE_SIZE};
use goblin::elf::program_header::{PF_X, PT_GNU_EH_FRAME, PT_LOAD, PT_NOTE};
use goblin::elf::Elf;
use std::rc::Rc;

/// Which file a mapping is of: path, device, inode, size, modification time.
pub(crate) type FileKey = (Vec<u8>, u64, u64, u64, u64);

/// A file as a mapping sees it: its guest path, identity and contents.
pub struct MappedFile {
    /// The absolute guest path it was opened by.
    pub path: Vec<u8>,
    /// Device number (for `/proc/PID/maps`).
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// The contents when it was opened.
    pub bytes: Rc<[u8]>,
    /// What the ELF headers say, if it is a 64-bit ELF file.
    pub elf: Option<ElfFacts>,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &String::from_utf8_lossy(&self.path))
            .field("dev", &self.dev)
            .field("ino", &self.ino)
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

impl PartialEq for MappedFile {
    /// Two openings of one file are the same file (contents are not compared).
    fn eq(&self, other: &MappedFile) -> bool {
        (self.dev, self.ino, &self.path) == (other.dev, other.ino, &other.path)
    }
}

impl Eq for MappedFile {}

impl MappedFile {
    /// The file at guest path `path` with `bytes`, its ELF facts read.
    pub fn new(path: Vec<u8>, dev: u64, ino: u64, bytes: Rc<[u8]>) -> MappedFile {
        let elf = ElfFacts::parse(&bytes);
        MappedFile { path, dev, ino, bytes, elf }
    }

    /// The file name (the last path component), as symbols are prefixed with.
    pub fn name(&self) -> String {
        let base = self.path.rsplit(|&b| b == b'/').next().unwrap_or(&self.path);
        String::from_utf8_lossy(base).into_owned()
    }
}

/// One `PT_LOAD` segment at its link address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSegment {
    /// Link address.
    pub vaddr: u64,
    /// Size in memory.
    pub memsz: u64,
    /// Offset in the file.
    pub offset: u64,
    /// Bytes from the file.
    pub filesz: u64,
    /// Whether it is executable (`PF_X`).
    pub exec: bool,
}

/// A program-header range at its link address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Link address of the first byte.
    pub vaddr: u64,
    /// Size in bytes.
    pub size: u64,
}

/// What a mapped ELF file's headers say, at link addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfFacts {
    /// `ET_DYN` (position independent) rather than `ET_EXEC`.
    pub dynamic: bool,
    /// The `PT_LOAD` segments.
    pub loads: Vec<LoadSegment>,
    /// `PT_GNU_SFRAME`, if any.
    pub sframe: Option<Range>,
    /// `PT_GNU_EH_FRAME` (`.eh_frame_hdr`), if any.
    pub eh_frame_hdr: Option<Range>,
    /// The GNU build-id note's bytes, if any.
    pub build_id: Option<Vec<u8>>,
}

impl ElfFacts {
    /// Reads the headers of `bytes`; `None` unless it is a 64-bit ELF file
    /// with at least one `PT_LOAD` (a data file, a corrupt one, …).
    pub fn parse(bytes: &[u8]) -> Option<ElfFacts> {
        let elf = Elf::parse(bytes).ok().filter(|elf| elf.is_64)?;
        let range = |p_type| {
            elf.program_headers
                .iter()
                .find(|ph| ph.p_type == p_type)
                .map(|ph| Range { vaddr: ph.p_vaddr, size: ph.p_memsz })
        };
        let loads: Vec<LoadSegment> = elf
            .program_headers
            .iter()
            .filter(|ph| ph.p_type == PT_LOAD)
            .map(|ph| LoadSegment {
                vaddr: ph.p_vaddr,
                memsz: ph.p_memsz,
                offset: ph.p_offset,
                filesz: ph.p_filesz,
                exec: ph.p_flags & PF_X != 0,
            })
            .collect();
        if loads.is_empty() {
            return None;
        }
        let build_id = elf
            .program_headers
            .iter()
            .any(|ph| ph.p_type == PT_NOTE)
            .then(|| elf.iter_note_headers(bytes))
            .flatten()
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .find(|note| note.n_type == goblin::elf::note::NT_GNU_BUILD_ID && note.name == "GNU")
            .map(|note| note.desc.to_vec());
        Some(ElfFacts {
            dynamic: elf.header.e_type == goblin::elf::header::ET_DYN,
            loads,
            sframe: range(sframe::elf::PT_GNU_SFRAME),
            eh_frame_hdr: range(PT_GNU_EH_FRAME),
            build_id,
        })
    }

    /// The load bias of an area at `start` mapping file offset `offset`,
    /// if that is where the first `PT_LOAD`'s file pages begin (the mapping
    /// that places an object: the kernel and `ld.so` both map it first, and
    /// later `mprotect`s and gaps never move it). The exact page offset
    /// matters: a later segment may share the first one's last file page.
    fn bias_of(&self, start: u64, offset: u64) -> Option<u64> {
        let first = self.loads.iter().min_by_key(|s| s.offset)?;
        (offset == page_down(first.offset) && first.vaddr % PAGE_SIZE == first.offset % PAGE_SIZE)
            .then(|| start.wrapping_sub(page_down(first.vaddr)))
    }

    /// Lowest page and one past the highest byte of the segments, at link addresses.
    fn extent(&self) -> (u64, u64) {
        let low = self.loads.iter().map(|s| page_down(s.vaddr)).min().unwrap_or(0);
        let high = self.loads.iter().map(|s| s.vaddr.saturating_add(s.memsz)).max().unwrap_or(0);
        (low, high)
    }
}

/// The file part of an area: which file, and where in it the area starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backing {
    /// The file.
    pub file: Rc<MappedFile>,
    /// Offset in the file of the area's first byte.
    pub offset: u64,
}

impl Backing {
    /// The same file, `delta` bytes further on (the upper part of a split area).
    pub fn advanced(&self, delta: u64) -> Backing {
        Backing { file: self.file.clone(), offset: self.offset + delta }
    }
}

/// An ELF object mapped into a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The file.
    pub file: Rc<MappedFile>,
    /// Added to every link-time address of the file.
    pub bias: u64,
}

impl Object {
    fn facts(&self) -> &ElfFacts {
        self.file.elf.as_ref().expect("objects are ELF files")
    }

    /// The executable `PT_LOAD` segments' span, at load addresses.
    pub fn text(&self) -> Option<(u64, u64)> {
        self.facts()
            .loads
            .iter()
            .filter(|s| s.exec)
            .map(|s| (s.vaddr.wrapping_add(self.bias), s.vaddr.wrapping_add(self.bias).wrapping_add(s.memsz)))
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }

    /// `PT_GNU_SFRAME` at its load address and size.
    pub fn sframe(&self) -> Option<(u64, u64)> {
        self.facts().sframe.map(|r| (r.vaddr.wrapping_add(self.bias), r.size))
    }

    /// `PT_GNU_EH_FRAME` at its load address and size.
    pub fn eh_frame_hdr(&self) -> Option<(u64, u64)> {
        self.facts().eh_frame_hdr.map(|r| (r.vaddr.wrapping_add(self.bias), r.size))
    }

    /// The build-id in hex, if the file has one.
    pub fn build_id(&self) -> Option<String> {
        self.facts().build_id.as_ref().map(|id| id.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Lowest and one past the highest address its segments occupy.
    pub fn span(&self) -> (u64, u64) {
        let (low, high) = self.facts().extent();
        (low.wrapping_add(self.bias), high.wrapping_add(self.bias))
    }
}

impl std::fmt::Display for Object {
    /// `/lib/x86_64-linux-gnu/libc.so.6 at 0x7ffff7d8a000 (text 0x…-0x…, build-id 1a2b…, .sframe)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {:#x}", String::from_utf8_lossy(&self.file.path), self.span().0)?;
        let mut notes = Vec::new();
        if let Some((start, end)) = self.text() {
            notes.push(format!("text {start:#x}-{end:#x}"));
        }
        if let Some(id) = self.build_id() {
            notes.push(format!("build-id {}", &id[..id.len().min(12)]));
        }
        notes.push(
            match (self.sframe().is_some(), self.eh_frame_hdr().is_some()) {
                (true, true) => ".sframe, .eh_frame_hdr",
                (true, false) => ".sframe",
                (false, true) => ".eh_frame_hdr",
                (false, false) => "no unwind tables",
            }
            .into(),
        );
        write!(f, " ({})", notes.join(", "))
    }
}

/// The objects mapped by `areas`: each file-backed area's start address and
/// file part, by address.
pub fn objects<'a>(areas: impl Iterator<Item = (u64, &'a Backing)>) -> Vec<Object> {
    let mut out: Vec<Object> = Vec::new();
    for (start, backing) in areas {
        let Some(bias) = backing.file.elf.as_ref().and_then(|elf| elf.bias_of(start, backing.offset)) else {
            continue;
        };
        let candidate = Object { file: backing.file.clone(), bias };
        let (low, high) = candidate.span();
        // Areas come by address, so a lower placement of the same file that
        // overlaps this one came first: this area is a later segment of it
        // whose page offset happens to be the first one's (a tiny file).
        let inside = |o: &Object| o.file == candidate.file && o.span().0 < high && low < o.span().1;
        if !out.iter().any(inside) {
            out.push(candidate);
        }
    }
    out
}

/// What changed between two tables: (mapped, unmapped).
pub fn changes(before: &[Object], after: &[Object]) -> (Vec<Object>, Vec<Object>) {
    let same = |a: &Object, b: &Object| a.bias == b.bias && a.file == b.file;
    let mapped = after.iter().filter(|a| !before.iter().any(|b| same(a, b))).cloned().collect();
    let unmapped = before.iter().filter(|b| !after.iter().any(|a| same(a, b))).cloned().collect();
    (mapped, unmapped)
}
