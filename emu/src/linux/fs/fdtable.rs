//! Descriptors and open-file descriptions.
//!
//! A descriptor is a number, a close-on-exec flag and a shared description
//! (`Rc<RefCell<OpenFile>>`): `dup` and `fcntl(F_DUPFD)` share the
//! description (one position, one set of status flags), as later `fork`
//! and the two ends of a pipe will.
//!
//! Opening `/proc/self/fd/N` (or `/dev/stdin`, `/dev/fd/N`, which lead
//! there) makes a new description of the same file, as Linux opens the
//! inode again: see [`OpenFile::reopen`].

use super::overlay::{file_stat, OverlayFile};
use super::pipe::{fifo_stat, pipe_name, PipeEnd};
use super::types::{DirEntry, Kind, Stat, Synth, S_IFREG};
use crate::linux::abi::errno::EACCES;
use crate::linux::abi::{O_ACCMODE, O_RDONLY, O_WRONLY};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The inode numbers of the guest's standard input, output and error,
/// which it sees as pipes (`pipe:[1]`, …), whatever the host connected:
/// the emulator is never a terminal (`isatty` is false), so that runs do
/// not depend on how they were started.
const STDIO_INO: [u64; 3] = [1, 2, 3];

/// What an open description reads and writes.
#[derive(Debug, Clone)]
pub(crate) enum FileKind {
    /// Standard input.
    Stdin,
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// An overlay file (shared with the overlay: writes are seen by every opener).
    Overlay(Rc<RefCell<OverlayFile>>),
    /// A host file read at open (read-only), and its status then.
    Host(Rc<[u8]>, Stat),
    /// Generated contents (`/proc/self/maps`), and the status to report.
    Generated(Rc<[u8]>, Stat),
    /// A directory, by absolute guest path, and its status.
    Dir(Stat),
    /// A device of `/dev`: [`Synth::Null`], [`Synth::Zero`] or [`Synth::Random`].
    Device(Synth),
    /// One end of a pipe.
    Pipe(super::pipe::PipeEnd),
}

/// An open-file description.
#[derive(Debug)]
pub(crate) struct OpenFile {
    /// What it is.
    pub(crate) kind: FileKind,
    /// The file position.
    pub(crate) pos: u64,
    /// Access mode and status flags (`O_RDONLY`, `O_APPEND`, …) in the guest's numbering.
    pub(crate) flags: u64,
    /// The absolute path it was opened by (what `/proc/self/fd/N` reads).
    pub(crate) path: Vec<u8>,
    /// A directory's entries (name, inode, `DT_*` type) as the first
    /// `getdents64` saw them: the position indexes this list, so a guest
    /// removing entries while it reads (`rm -r`) skips none. Rewinding drops it.
    pub(crate) listing: Option<Rc<[DirEntry]>>,
}

impl OpenFile {
    /// A description of `kind` opened by `path` with `flags`.
    pub(crate) fn new(kind: FileKind, flags: u64, path: Vec<u8>) -> Rc<RefCell<OpenFile>> {
        Rc::new(RefCell::new(OpenFile { kind, pos: 0, flags, path, listing: None }))
    }

    /// Its file's status (`fstat`; `exe` is `/proc/self/exe`'s target).
    pub(crate) fn stat(&self, exe: &[u8]) -> Stat {
        match &self.kind {
            // Pipes, as the standard streams are: no terminal, so stdio
            // buffers fully whatever the host has.
            FileKind::Stdin => fifo_stat(STDIO_INO[0]),
            FileKind::Stdout => fifo_stat(STDIO_INO[1]),
            FileKind::Stderr => fifo_stat(STDIO_INO[2]),
            FileKind::Pipe(end) => fifo_stat(end.pipe.borrow().ino),
            FileKind::Overlay(o) => {
                let o = o.borrow();
                file_stat(o.meta, S_IFREG, o.data.len() as u64, 1)
            }
            FileKind::Host(_, st) | FileKind::Generated(_, st) | FileKind::Dir(st) => *st,
            FileKind::Device(dev) => dev.stat(exe),
        }
    }

    /// What opening it again leads to, if it is known by what it is rather
    /// than by its path: a pipe, a standard stream, an overlay file (which
    /// may be unlinked, as a shell's here-document is, or renamed). Files
    /// known by path (host files, which the guest cannot change in place,
    /// directories, devices, generated files) are opened again by their
    /// path, a link like any other: `None`.
    pub(crate) fn by_identity(&self) -> Option<Kind> {
        match self.kind {
            FileKind::Overlay(_) => Some(Kind::File),
            FileKind::Pipe(_) | FileKind::Stdin | FileKind::Stdout | FileKind::Stderr => Some(Kind::Other),
            FileKind::Host(..) | FileKind::Generated(..) | FileKind::Dir(_) | FileKind::Device(_) => None,
        }
    }

    /// A new description's contents for a pipe or standard stream opened
    /// again with access mode `acc` (`O_RDONLY`, …): a new end of the same
    /// pipe, reading and/or writing as asked (as the kernel's `fifo_open`
    /// on the pipe's inode, which does not wait for a partner); the same
    /// host stream, which goes one way only: the other is `EACCES`.
    /// Overlay files are opened as files (the open's `O_TRUNC` applies).
    pub(crate) fn reopen(&self, acc: u64) -> Result<FileKind, i64> {
        let acc = acc & O_ACCMODE;
        match &self.kind {
            FileKind::Pipe(end) => Ok(FileKind::Pipe(PipeEnd::open(&end.pipe, acc != O_WRONLY, acc != O_RDONLY))),
            FileKind::Stdin if acc == O_RDONLY => Ok(FileKind::Stdin),
            FileKind::Stdout if acc == O_WRONLY => Ok(FileKind::Stdout),
            FileKind::Stderr if acc == O_WRONLY => Ok(FileKind::Stderr),
            _ => Err(EACCES),
        }
    }
}

/// A descriptor.
#[derive(Debug, Clone)]
pub(crate) struct Desc {
    /// The description.
    pub(crate) file: Rc<RefCell<OpenFile>>,
    /// `FD_CLOEXEC`: closed by a future `execve`.
    pub(crate) cloexec: bool,
}

/// A process's descriptor table (a `fork` copies it: the copies share
/// their open-file descriptions).
#[derive(Debug, Default, Clone)]
pub(crate) struct FdTable {
    map: BTreeMap<u64, Desc>,
}

impl FdTable {
    /// Standard input, output and error as descriptors 0, 1, 2.
    pub(crate) fn stdio() -> FdTable {
        let mut t = FdTable::default();
        let streams = [(FileKind::Stdin, O_RDONLY), (FileKind::Stdout, O_WRONLY), (FileKind::Stderr, O_WRONLY)];
        for (fd, ((kind, flags), ino)) in (0..).zip(streams.into_iter().zip(STDIO_INO)) {
            t.insert(fd, Desc { file: OpenFile::new(kind, flags, pipe_name(ino)), cloexec: false });
        }
        t
    }

    /// Descriptor `fd`.
    pub(crate) fn get(&self, fd: u64) -> Option<&Desc> {
        self.map.get(&fd)
    }

    /// Descriptor `fd`, to change its flag.
    pub(crate) fn get_mut(&mut self, fd: u64) -> Option<&mut Desc> {
        self.map.get_mut(&fd)
    }

    /// Puts `desc` at `fd`, returning what was there.
    pub(crate) fn insert(&mut self, fd: u64, desc: Desc) -> Option<Desc> {
        self.map.insert(fd, desc)
    }

    /// Removes `fd`.
    pub(crate) fn remove(&mut self, fd: u64) -> Option<Desc> {
        self.map.remove(&fd)
    }

    /// The open descriptors, in order.
    pub(crate) fn numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.map.keys().copied()
    }

    /// The lowest free descriptor at or above `from`, if below `limit`.
    pub(crate) fn lowest_free(&self, from: u64, limit: u64) -> Option<u64> {
        (from..limit).find(|fd| !self.map.contains_key(fd))
    }
}
