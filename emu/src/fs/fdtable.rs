//! Descriptors and open-file descriptions.
//!
//! A descriptor is a number, a close-on-exec flag and a shared description
//! (`Rc<RefCell<OpenFile>>`): `dup` and `fcntl(F_DUPFD)` share the
//! description (one position, one set of status flags), as later `fork`
//! and the two ends of a pipe will.

use super::overlay::OverlayFile;
use super::types::{DirEntry, Stat, Synth};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

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
        let write = crate::syscall::abi::O_WRONLY;
        for (fd, kind, flags, name) in [
            (0, FileKind::Stdin, 0, "pipe:[0]"),
            (1, FileKind::Stdout, write, "pipe:[1]"),
            (2, FileKind::Stderr, write, "pipe:[2]"),
        ] {
            t.insert(fd, Desc { file: OpenFile::new(kind, flags, name.as_bytes().to_vec()), cloexec: false });
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
