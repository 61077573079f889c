//! Pipes: a bounded byte queue shared by a read end and a write end.
//!
//! Each end is held by open-file descriptions ([`PipeEnd`] inside a
//! `FileKind::Pipe`); the pipe counts the ends still open, as the kernel's
//! `pipe_inode_info` counts readers and writers, so a reader sees end of
//! file once every write end is closed (in every process) and a writer gets
//! `EPIPE` and `SIGPIPE` once every read end is. `pipe2` makes a read end
//! and a write end; opening the pipe again through `/proc/self/fd/N` makes
//! a new end of the mode asked for, both sides at once for `O_RDWR`, as the
//! kernel's `fifo_open` does for a pipe's inode.

use super::types::{Stat, S_IFIFO};
use crate::linux::abi::{POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
use crate::linux::proc_state::{GID, REALTIME_EPOCH_NS, UID};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// Bytes a pipe holds before writers block (Linux's default, 16 pages).
pub(crate) const PIPE_CAPACITY: usize = 65_536;
/// Writes of at most this many bytes are atomic (`PIPE_BUF`).
pub(crate) const PIPE_BUF: usize = 4096;

/// The shared part of a pipe.
#[derive(Debug, Default)]
pub(crate) struct Pipe {
    /// Bytes written and not yet read.
    pub(crate) data: VecDeque<u8>,
    /// Open read ends.
    pub(crate) readers: u32,
    /// Open write ends.
    pub(crate) writers: u32,
    /// Its inode number (what `/proc/self/fd/N` shows as `pipe:[ino]`).
    pub(crate) ino: u64,
}

/// One end of a pipe, as an open-file description holds it: a reader, a
/// writer, or both (opened `O_RDWR` through `/proc/self/fd/N`). Cloning it
/// opens the end once more; dropping it closes it.
#[derive(Debug)]
pub(crate) struct PipeEnd {
    pub(crate) pipe: Rc<RefCell<Pipe>>,
    /// It counts as a reader.
    pub(crate) read: bool,
    /// It counts as a writer.
    pub(crate) write: bool,
}

impl PipeEnd {
    /// A new pipe with inode number `ino`: its read end and its write end.
    pub(crate) fn pair(ino: u64) -> (PipeEnd, PipeEnd) {
        let pipe = Rc::new(RefCell::new(Pipe { ino, ..Pipe::default() }));
        let read = PipeEnd::open(&pipe, true, false);
        let write = PipeEnd::open(&pipe, false, true);
        (read, write)
    }

    /// A new end of `pipe` that reads and/or writes.
    pub(crate) fn open(pipe: &Rc<RefCell<Pipe>>, read: bool, write: bool) -> PipeEnd {
        let mut p = pipe.borrow_mut();
        p.readers += u32::from(read);
        p.writers += u32::from(write);
        PipeEnd { pipe: pipe.clone(), read, write }
    }

    /// What `poll` reports for this end, as the kernel's `pipe_poll`: for
    /// a reader, `POLLIN` with data and `POLLHUP` once no writer is left;
    /// for a writer, `POLLOUT` with room, or `POLLERR` once no reader is
    /// left (a write would not block: `EPIPE`).
    pub(crate) fn events(&self) -> u64 {
        let p = self.pipe.borrow();
        let mut events = 0;
        if self.read {
            if !p.data.is_empty() {
                events |= POLLIN | POLLRDNORM;
            }
            if p.writers == 0 {
                events |= POLLHUP;
            }
        }
        if self.write {
            if p.readers == 0 {
                events |= POLLERR;
            } else if p.data.len() < PIPE_CAPACITY {
                events |= POLLOUT | POLLWRNORM;
            }
        }
        events
    }
}

impl Clone for PipeEnd {
    fn clone(&self) -> Self {
        PipeEnd::open(&self.pipe, self.read, self.write)
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        let mut p = self.pipe.borrow_mut();
        p.readers -= u32::from(self.read);
        p.writers -= u32::from(self.write);
    }
}

/// What `/proc/self/fd/N` reads for a pipe with inode `ino`, as on Linux.
pub(crate) fn pipe_name(ino: u64) -> Vec<u8> {
    format!("pipe:[{ino}]").into_bytes()
}

/// The status of a pipe with inode `ino` (the guest's standard streams are pipes too).
pub(crate) fn fifo_stat(ino: u64) -> Stat {
    Stat {
        dev: 0x0e,
        ino,
        mode: S_IFIFO | 0o600,
        nlink: 1,
        uid: UID,
        gid: GID,
        blksize: 4096,
        mtime_ns: REALTIME_EPOCH_NS,
        ..Stat::default()
    }
}

/// What reading `max` bytes from a read end gives.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PipeRead {
    /// These bytes (empty: end of file).
    Data(Vec<u8>),
    /// Nothing yet, and a writer may still write.
    Empty,
}

/// What writing to a write end does.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PipeWrite {
    /// This many bytes went in.
    Wrote(usize),
    /// No room yet.
    Full,
    /// Nobody will ever read: `EPIPE` and `SIGPIPE`.
    Broken,
}

impl Pipe {
    /// Takes up to `max` bytes.
    pub(crate) fn read(&mut self, max: usize) -> PipeRead {
        if self.data.is_empty() {
            return if self.writers == 0 { PipeRead::Data(Vec::new()) } else { PipeRead::Empty };
        }
        let n = max.min(self.data.len());
        PipeRead::Data(self.data.drain(..n).collect())
    }

    /// Adds as much of `data` as fits; a write of at most [`PIPE_BUF`]
    /// bytes goes in whole or not at all.
    pub(crate) fn write(&mut self, data: &[u8]) -> PipeWrite {
        if self.readers == 0 {
            return PipeWrite::Broken;
        }
        let room = PIPE_CAPACITY - self.data.len();
        if room == 0 || (data.len() <= PIPE_BUF && room < data.len()) {
            return PipeWrite::Full;
        }
        let n = room.min(data.len());
        self.data.extend(&data[..n]);
        PipeWrite::Wrote(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_are_counted_and_end_of_file_follows_the_last_writer() {
        let (r, w) = PipeEnd::pair(7);
        let w2 = w.clone();
        assert_eq!(r.pipe.borrow().writers, 2);
        assert_eq!(w.pipe.borrow_mut().write(b"abc"), PipeWrite::Wrote(3));
        assert_eq!(r.pipe.borrow_mut().read(2), PipeRead::Data(b"ab".to_vec()));
        assert_eq!(r.pipe.borrow_mut().read(9), PipeRead::Data(b"c".to_vec()));
        assert_eq!(r.pipe.borrow_mut().read(9), PipeRead::Empty);
        drop(w);
        assert_eq!(r.pipe.borrow_mut().read(9), PipeRead::Empty);
        drop(w2);
        assert_eq!(r.pipe.borrow_mut().read(9), PipeRead::Data(Vec::new()));
        assert_eq!(r.events(), POLLHUP);
    }

    #[test]
    fn an_end_opened_again_counts_as_what_it_was_opened_for() {
        let (r, w) = PipeEnd::pair(3);
        let both = PipeEnd::open(&r.pipe, true, true);
        assert_eq!((r.pipe.borrow().readers, r.pipe.borrow().writers), (2, 2));
        drop(w);
        // The end opened for both keeps the pipe open either way.
        assert_eq!(r.events(), 0);
        assert_eq!(both.events(), POLLOUT | POLLWRNORM);
        assert_eq!(both.pipe.borrow_mut().write(b"x"), PipeWrite::Wrote(1));
        assert_eq!(both.events(), POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM);
        drop(both);
        assert_eq!(r.events(), POLLIN | POLLRDNORM | POLLHUP);
        assert_eq!((r.pipe.borrow().readers, r.pipe.borrow().writers), (1, 0));
    }

    #[test]
    fn small_writes_are_atomic_and_a_closed_reader_breaks_the_pipe() {
        let (r, w) = PipeEnd::pair(1);
        let mut p = w.pipe.borrow_mut();
        assert_eq!(p.write(&vec![0; PIPE_CAPACITY - 10]), PipeWrite::Wrote(PIPE_CAPACITY - 10));
        assert_eq!(p.write(&[1; 11]), PipeWrite::Full);
        assert_eq!(p.write(&[1; 10]), PipeWrite::Wrote(10));
        assert_eq!(p.write(&[1; 1]), PipeWrite::Full);
        drop(p);
        drop(r);
        assert_eq!(w.pipe.borrow_mut().write(b"x"), PipeWrite::Broken);
        assert_eq!(w.events(), POLLERR);
    }
}
