//! Path resolution, component by component as the kernel's `namei` does:
//! `.` and `..` are taken lexically against the directories actually
//! walked, symbolic links are followed (host and overlay ones alike, with
//! absolute targets inside the guest's root) up to a limit, and the errors
//! are Linux's.
//!
//! The links of `/proc/PID/fd` are the kernel's "magic" links: followed,
//! they lead to the open file itself, not to the name they read as, so that
//! `/dev/stdin` opens the pipe a shell connected, and `/dev/fd/3` a file
//! since unlinked (see [`OpenFile::by_identity`](super::OpenFile::by_identity)).

use super::fdtable::FdTable;
use super::name::{join, split};
use super::types::{Kind, Synth};
use super::vfs::{Entry, Source, Vfs};
use crate::linux::abi::errno::{ELOOP, ENAMETOOLONG, ENOENT, ENOTDIR};
use std::collections::VecDeque;

/// Most symbolic links one lookup follows (Linux's `MAXSYMLINKS`).
const MAX_SYMLINKS: u32 = 40;
/// Longest file name (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// What a followed link of `/proc/PID/fd` leads to when its descriptor's
/// file is known by identity: that file, with the name it was opened by
/// (which a new description keeps, as Linux's keeps the dentry). Other
/// descriptors' links are followed by their names, as any link.
fn magic(entry: &Entry, fds: &FdTable) -> Option<(Vec<u8>, Entry)> {
    let Source::Synth(Synth::FdLink(n)) = entry.source else { return None };
    let file = fds.get(n)?.file.clone();
    let (kind, path) = {
        let f = file.borrow();
        (f.by_identity()?, f.path.clone())
    };
    Some((path, Entry { kind, source: Source::Open(file) }))
}

/// The outcome of a lookup that found the parent directory.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The absolute, normalised path of the last component (for a link of
    /// `/proc/PID/fd` that led to an open file: the name that file was
    /// opened by, which may be `pipe:[N]`).
    pub(crate) path: Vec<u8>,
    /// What is there (`None`: nothing, but the parent is a directory).
    pub(crate) entry: Option<Entry>,
    /// The path ended in `/`: it must name a directory.
    pub(crate) trailing_slash: bool,
}

impl Vfs {
    /// Looks `path` up from directory `start` (absolute), following a
    /// symbolic link in the last component only if `follow` (or the path
    /// ends in `/`).
    pub(crate) fn resolve(&self, start: &[u8], path: &[u8], follow: bool, fds: &FdTable) -> Result<Resolved, i64> {
        if path.is_empty() {
            return Err(ENOENT);
        }
        let trailing_slash = path.ends_with(b"/");
        let mut cur: Vec<Vec<u8>> = if path.starts_with(b"/") { Vec::new() } else { split(start).collect() };
        let mut todo: VecDeque<Vec<u8>> = split(path).collect();
        let mut links = 0;
        while let Some(comp) = todo.pop_front() {
            match &comp[..] {
                b"." => continue,
                b".." => {
                    cur.pop();
                    continue;
                }
                _ => {}
            }
            if comp.len() > NAME_MAX {
                return Err(ENAMETOOLONG);
            }
            let last = todo.is_empty();
            cur.push(comp);
            let abs = join(&cur);
            let Some(entry) = self.lookup(&abs, fds) else {
                return if last { Ok(Resolved { path: abs, entry: None, trailing_slash }) } else { Err(ENOENT) };
            };
            match &entry.kind {
                Kind::Symlink(target) if !last || follow || trailing_slash => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(ELOOP);
                    }
                    if let Some((path, open)) = magic(&entry, fds) {
                        // Not a directory: nothing can come after it.
                        if !last || trailing_slash {
                            return Err(ENOTDIR);
                        }
                        return Ok(Resolved { path, entry: Some(open), trailing_slash });
                    }
                    if target.is_empty() {
                        return Err(ENOENT);
                    }
                    cur.pop();
                    if target.starts_with(b"/") {
                        cur.clear();
                    }
                    for (i, c) in split(target).enumerate() {
                        todo.insert(i, c);
                    }
                    // A target of "/" or "." leaves nothing after it: the directory itself.
                }
                Kind::Dir => {
                    if last {
                        return Ok(Resolved { path: abs, entry: Some(entry), trailing_slash });
                    }
                }
                _ if last => {
                    if trailing_slash {
                        return Err(ENOTDIR);
                    }
                    return Ok(Resolved { path: abs, entry: Some(entry), trailing_slash });
                }
                _ => return Err(ENOTDIR),
            }
        }
        // Ended on `.`, `..`, `/` or a link to a directory.
        let abs = join(&cur);
        match self.lookup(&abs, fds) {
            Some(entry) if entry.kind == Kind::Dir => Ok(Resolved { path: abs, entry: Some(entry), trailing_slash }),
            Some(_) => Err(ENOTDIR),
            None => Err(ENOENT),
        }
    }
}
