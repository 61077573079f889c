//! The overlay's nodes: everything the guest creates or changes lives here,
//! in memory, for the length of the run.

use super::types::{Kind, Stat, OVERLAY_DEV, S_IFDIR, S_IFLNK, S_IFREG};
use crate::linux::proc_state::{GID, UID};
use std::cell::RefCell;
use std::rc::Rc;

/// Metadata of an overlay node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta {
    /// Permission bits (no type bits).
    pub(crate) mode: u32,
    /// Inode number.
    pub(crate) ino: u64,
    /// Modification time, virtual nanoseconds since the epoch.
    pub(crate) mtime_ns: u64,
}

/// A regular file of the overlay, shared with the descriptions that have it
/// open (so an unlinked file stays readable through them, as on Linux).
#[derive(Debug)]
pub(crate) struct OverlayFile {
    /// Its contents.
    pub(crate) data: Vec<u8>,
    /// Its metadata.
    pub(crate) meta: Meta,
}

/// One path of the overlay.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// A directory; `true` when opaque (it replaced a removed host
    /// directory, whose entries must not show through).
    Dir(Meta, bool),
    /// A regular file.
    File(Rc<RefCell<OverlayFile>>),
    /// A symbolic link to this target.
    Symlink(Meta, Vec<u8>),
    /// A removed host entry.
    Whiteout,
}

impl Node {
    /// What the node is.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Node::Dir(..) => Kind::Dir,
            Node::File(_) => Kind::File,
            Node::Symlink(_, target) => Kind::Symlink(target.clone()),
            Node::Whiteout => Kind::Other,
        }
    }

    /// Its status.
    pub(crate) fn stat(&self) -> Stat {
        let (meta, mode, size, nlink) = match self {
            Node::Dir(meta, _) => (*meta, S_IFDIR, 4096, 2),
            Node::File(file) => {
                let file = file.borrow();
                (file.meta, S_IFREG, file.data.len() as u64, 1)
            }
            Node::Symlink(meta, target) => (*meta, S_IFLNK, target.len() as u64, 1),
            Node::Whiteout => (Meta { mode: 0, ino: 0, mtime_ns: 0 }, 0, 0, 0),
        };
        file_stat(meta, mode, size, nlink)
    }
}

/// The status of an overlay file of type `ifmt`.
pub(crate) fn file_stat(meta: Meta, ifmt: u32, size: u64, nlink: u64) -> Stat {
    Stat {
        dev: OVERLAY_DEV,
        ino: meta.ino,
        mode: ifmt | meta.mode,
        nlink,
        uid: UID,
        gid: GID,
        rdev: 0,
        size,
        blksize: 4096,
        blocks: size.div_ceil(4096) * 8,
        mtime_ns: meta.mtime_ns,
    }
}
