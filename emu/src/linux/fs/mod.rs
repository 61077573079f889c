//! The file system the guest sees: the host tree read-only under a root,
//! an in-memory overlay that takes every write, and synthetic `/dev` and
//! `/proc` directories.
//!
//! Lookups go overlay first (a whiteout hides a host entry; an opaque
//! directory hides the host directory it replaced), then the host: under the
//! per-architecture prefix first (like qemu-user's `-L`), then under the
//! root. Nothing here ever writes to the host. `/dev` and `/proc` are always
//! synthetic, even with the host's `/` as root: the host's devices and
//! processes would make runs depend on the machine.
//!
//! Open files are `OpenFile` descriptions shared by descriptors through
//! an `Rc` (see `FdTable`), so `dup`, `fork` and the two ends of a pipe
//! share one position and one set of status flags as on Linux.
//! Opening a link of `/proc/PID/fd` (or `/dev/stdin`, `/dev/fd/N`, which
//! lead there) opens the open file again, as Linux does: a new end of the
//! same pipe, a new description of the same overlay file (`path.rs` finds
//! it, `OpenFile::reopen` and the open call make the description).

mod fdtable;
mod overlay;
mod path;
mod pipe;
mod synth;

mod name;
mod types;
mod vfs;

pub(crate) use fdtable::{Desc, FdTable, FileKind, OpenFile};
pub(crate) use name::parent;
pub(crate) use overlay::{Meta, Node, OverlayFile};
pub(crate) use path::Resolved;
pub(crate) use pipe::{pipe_name, PipeEnd, PipeRead, PipeWrite};
pub(crate) use types::*;
pub use vfs::{default_prefix, fnv1a};
pub(crate) use vfs::{Entry, Source, Vfs};

#[cfg(test)]
mod tests;
