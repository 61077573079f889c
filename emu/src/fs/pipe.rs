//! Pipes: a bounded byte queue shared by a read end and a write end.
//!
//! Each end is held by open-file descriptions ([`PipeEnd`] inside a
//! `FileKind::Pipe`); the pipe counts the ends still open, as the kernel's
//! `pipe_inode_info` counts readers and writers, so a reader sees end of
//! file once every write end is closed (in every process) and a writer gets
//! `EPIPE` and `SIGPIPE` once every read end is.

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

/// One end of a pipe, as an open-file description holds it. Cloning it
/// opens the end once more; dropping it closes it.
#[derive(Debug)]
pub(crate) struct PipeEnd {
    pub(crate) pipe: Rc<RefCell<Pipe>>,
    /// The write end (else the read end).
    pub(crate) write: bool,
}

impl PipeEnd {
    /// A new pipe with inode number `ino`: its read end and its write end.
    pub(crate) fn pair(ino: u64) -> (PipeEnd, PipeEnd) {
        let pipe = Rc::new(RefCell::new(Pipe { ino, ..Pipe::default() }));
        let read = PipeEnd::open(&pipe, false);
        let write = PipeEnd::open(&pipe, true);
        (read, write)
    }

    fn open(pipe: &Rc<RefCell<Pipe>>, write: bool) -> PipeEnd {
        let mut p = pipe.borrow_mut();
        if write {
            p.writers += 1;
        } else {
            p.readers += 1;
        }
        PipeEnd { pipe: pipe.clone(), write }
    }

    /// Whether a read would return now (data, or end of file), a write
    /// would make progress now (room, or no reader: `EPIPE`).
    pub(crate) fn ready(&self) -> bool {
        let p = self.pipe.borrow();
        if self.write {
            p.readers == 0 || p.data.len() < PIPE_CAPACITY
        } else {
            !p.data.is_empty() || p.writers == 0
        }
    }

    /// The other end is closed everywhere (`POLLHUP` for a reader, `POLLERR` for a writer).
    pub(crate) fn hung_up(&self) -> bool {
        let p = self.pipe.borrow();
        if self.write {
            p.readers == 0
        } else {
            p.writers == 0
        }
    }
}

impl Clone for PipeEnd {
    fn clone(&self) -> Self {
        PipeEnd::open(&self.pipe, self.write)
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        let mut p = self.pipe.borrow_mut();
        if self.write {
            p.writers -= 1;
        } else {
            p.readers -= 1;
        }
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
        assert!(r.hung_up() && r.ready());
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
        assert!(w.hung_up() && w.ready());
    }
}
