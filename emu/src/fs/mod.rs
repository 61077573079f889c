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
//! Open files are [`OpenFile`] descriptions shared by descriptors through
//! an `Rc` (see [`FdTable`]), so `dup`, and later `fork` and pipes, share
//! one position and one set of status flags as on Linux.

mod fdtable;
mod overlay;
mod path;
mod synth;

pub(crate) use fdtable::{Desc, FdTable, FileKind, OpenFile};
pub(crate) use overlay::{file_stat as overlay_stat, Meta, Node, OverlayFile};
pub(crate) use path::{parent, Resolved};
pub(crate) use synth::Synth;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::rc::Rc;

use crate::syscall::errno::{EFBIG, EIO};

/// File type bits of `st_mode`.
pub(crate) const S_IFMT: u32 = 0o170_000;
/// A directory.
pub(crate) const S_IFDIR: u32 = 0o040_000;
/// A regular file.
pub(crate) const S_IFREG: u32 = 0o100_000;
/// A symbolic link.
pub(crate) const S_IFLNK: u32 = 0o120_000;
/// A character device.
pub(crate) const S_IFCHR: u32 = 0o020_000;
/// A pipe.
pub(crate) const S_IFIFO: u32 = 0o010_000;

/// Largest host file the guest may read: it is read whole at `open`.
const HOST_FILE_MAX: u64 = 256 << 20;
/// Most bytes the overlay holds (file contents and symlink targets); past it, `ENOSPC`.
pub(crate) const OVERLAY_MAX: u64 = 256 << 20;
/// What each new overlay node costs besides its name and contents, so that
/// millions of empty files also run into the limit.
pub(crate) const NODE_COST: u64 = 256;
/// The device number overlay and synthetic files report.
pub(crate) const OVERLAY_DEV: u64 = 0x2c;

/// A directory entry: name, inode number, `DT_*` type.
pub(crate) type DirEntry = (Vec<u8>, u64, u8);

/// What a guest-visible file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link to this target.
    Symlink(Vec<u8>),
    /// A character device, a pipe, a socket: not opened.
    Other,
}

/// Where a looked-up entry lives.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// In the overlay, under its path.
    Overlay,
    /// On the host, at this host path, with its metadata.
    Host(PathBuf, Box<std::fs::Metadata>),
    /// A synthetic `/dev` or `/proc` entry.
    Synth(Synth),
}

/// A file found by [`Vfs::lookup`].
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// What it is.
    pub(crate) kind: Kind,
    /// Where it lives.
    pub(crate) source: Source,
}

/// Everything `stat` reports, before it is laid out for an architecture.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stat {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) mode: u32,
    pub(crate) nlink: u64,
    pub(crate) uid: u64,
    pub(crate) gid: u64,
    pub(crate) rdev: u64,
    pub(crate) size: u64,
    pub(crate) blksize: u64,
    pub(crate) blocks: u64,
    /// Modification time, nanoseconds since the epoch (also used for atime and ctime).
    pub(crate) mtime_ns: u64,
}

/// The guest's file system; one per emulator (later: one per process tree).
#[derive(Debug)]
pub(crate) struct Vfs {
    /// The host directory that is the guest's `/` (`None`: no host files at all).
    pub(crate) root: Option<PathBuf>,
    /// Searched before the root (qemu-user's `-L`).
    pub(crate) prefix: Option<PathBuf>,
    /// The overlay: absolute guest path → node. `/` itself is never stored.
    pub(crate) nodes: BTreeMap<Vec<u8>, Node>,
    /// The working directory, absolute and normalised.
    pub(crate) cwd: Vec<u8>,
    /// The file-creation mask.
    pub(crate) umask: u32,
    /// Bytes the overlay holds (contents, link targets, and a fixed cost per node).
    pub(crate) used: u64,
    /// Most bytes it may hold ([`OVERLAY_MAX`] unless changed).
    pub(crate) limit: u64,
    /// The next inode number for a new overlay file.
    next_ino: u64,
    /// FNV-1a digest of every host file the guest read, by guest path.
    pub(crate) digests: BTreeMap<Vec<u8>, u64>,
    /// What `/proc/self/exe` points to.
    pub(crate) exe: Vec<u8>,
}

/// Debian's cross sysroot for `arch` (`/usr/aarch64-linux-gnu`,
/// `/usr/s390x-linux-gnu`), if installed; none for x86-64, whose libraries
/// are the host's own.
pub fn default_prefix(arch: crate::Arch) -> Option<PathBuf> {
    let dir = match arch {
        crate::Arch::X86_64 => return None,
        crate::Arch::Aarch64 => "/usr/aarch64-linux-gnu",
        crate::Arch::S390x => "/usr/s390x-linux-gnu",
    };
    Some(PathBuf::from(dir)).filter(|p| p.is_dir())
}

/// FNV-1a, 64 bits: enough to tell that an input changed, no dependency.
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

impl Vfs {
    /// A file system with `root` (and `prefix` searched first) from the
    /// host, the working directory `cwd` and the executable `exe`.
    pub(crate) fn new(root: Option<PathBuf>, prefix: Option<PathBuf>, cwd: Vec<u8>, exe: Vec<u8>) -> Vfs {
        let cwd = if cwd.starts_with(b"/") { path::normalize(&cwd) } else { b"/".to_vec() };
        Vfs {
            root,
            prefix,
            nodes: BTreeMap::new(),
            cwd,
            umask: 0o022,
            used: 0,
            limit: OVERLAY_MAX,
            next_ino: 1 << 32,
            digests: BTreeMap::new(),
            exe,
        }
    }

    /// The file system `config` asks for, for a guest of `arch` whose
    /// `/proc/self/exe` is `exe`, with the configuration's files added.
    pub(crate) fn from_config(config: &crate::Config, arch: crate::Arch, exe: Vec<u8>) -> Vfs {
        let prefix = match &config.prefix {
            Some(p) if p.as_os_str().is_empty() => None,
            Some(p) => Some(p.clone()),
            None if config.root.is_some() => default_prefix(arch),
            None => None,
        };
        let cwd = config.cwd.clone().unwrap_or_else(|| b"/".to_vec());
        let mut fs = Vfs::new(config.root.clone(), prefix, cwd, exe);
        for (path, data) in &config.files {
            fs.add_file(path, data, crate::process::REALTIME_EPOCH_NS);
        }
        fs
    }

    /// Charges `bytes` to the overlay, or fails with `ENOSPC` past its limit.
    pub(crate) fn charge(&mut self, bytes: u64) -> Result<(), i64> {
        match self.used.checked_add(bytes).filter(|&used| used <= self.limit) {
            Some(used) => {
                self.used = used;
                Ok(())
            }
            None => Err(crate::syscall::errno::ENOSPC),
        }
    }

    /// Gives `bytes` back to the overlay.
    pub(crate) fn release(&mut self, bytes: u64) {
        self.used = self.used.saturating_sub(bytes);
    }

    /// A fresh inode number for an overlay file.
    pub(crate) fn new_ino(&mut self) -> u64 {
        self.next_ino += 1;
        self.next_ino
    }

    /// Adds a file with `data` at `path` (relative to the working
    /// directory), with any missing parent directories: the scenario's files.
    pub(crate) fn add_file(&mut self, path: &[u8], data: &[u8], now_ns: u64) {
        let abs = self.absolute(path);
        let mut at = Vec::new();
        let parts: Vec<&[u8]> = abs.split(|&b| b == b'/').filter(|c| !c.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(b'/');
            at.extend_from_slice(part);
            if i + 1 == parts.len() {
                break;
            }
            if !matches!(self.nodes.get(&at), Some(Node::Dir(..))) {
                let meta = Meta { mode: 0o755, ino: self.new_ino(), mtime_ns: now_ns };
                self.nodes.insert(at.clone(), Node::Dir(meta, false));
            }
        }
        let meta = Meta { mode: 0o644, ino: self.new_ino(), mtime_ns: now_ns };
        self.used += data.len() as u64;
        self.nodes.insert(abs, Node::File(Rc::new(RefCell::new(OverlayFile { data: data.to_vec(), meta }))));
    }

    /// `path` made absolute against the working directory and normalised
    /// lexically (only for paths the emulator itself is given).
    pub(crate) fn absolute(&self, path: &[u8]) -> Vec<u8> {
        if path.starts_with(b"/") {
            path::normalize(path)
        } else {
            path::normalize(&[&self.cwd[..], b"/", path].concat())
        }
    }

    /// The host path for guest path `abs`, and its metadata, if the host has it.
    pub(crate) fn host(&self, abs: &[u8]) -> Option<(PathBuf, std::fs::Metadata)> {
        let root = self.root.as_ref()?;
        let rel = std::ffi::OsStr::from_bytes(abs.strip_prefix(b"/").unwrap_or(abs));
        if !rel.is_empty() {
            if let Some(prefix) = &self.prefix {
                let p = prefix.join(rel);
                if let Ok(meta) = std::fs::symlink_metadata(&p) {
                    return Some((p, meta));
                }
            }
        }
        let p = root.join(rel);
        std::fs::symlink_metadata(&p).ok().map(|meta| (p, meta))
    }

    /// Whether the host may be consulted for `abs`: no ancestor in the
    /// overlay is opaque, a whiteout or a non-directory.
    pub(crate) fn host_visible(&self, abs: &[u8]) -> bool {
        let mut end = abs.len();
        while let Some(slash) = abs[..end].iter().rposition(|&b| b == b'/') {
            if slash == 0 {
                return true;
            }
            match self.nodes.get(&abs[..slash]) {
                None | Some(Node::Dir(_, false)) => {}
                Some(_) => return false,
            }
            end = slash;
        }
        true
    }

    /// The entry at absolute, normalised path `abs` (no symlink followed).
    pub(crate) fn lookup(&self, abs: &[u8], fds: &FdTable) -> Option<Entry> {
        if let Some(synth) = synth::lookup(abs, &self.exe, fds) {
            return synth.map(|(kind, s)| Entry { kind, source: Source::Synth(s) });
        }
        if abs == b"/" {
            let source = match self.host(b"/") {
                Some((p, meta)) => Source::Host(p, Box::new(meta)),
                None => Source::Overlay,
            };
            return Some(Entry { kind: Kind::Dir, source });
        }
        match self.nodes.get(abs) {
            Some(Node::Whiteout) => return None,
            Some(node) => return Some(Entry { kind: node.kind(), source: Source::Overlay }),
            None => {}
        }
        if !self.host_visible(abs) {
            return None;
        }
        let (p, meta) = self.host(abs)?;
        let ft = meta.file_type();
        let kind = if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File
        } else if ft.is_symlink() {
            Kind::Symlink(std::fs::read_link(&p).ok()?.as_os_str().as_bytes().to_vec())
        } else {
            Kind::Other
        };
        Some(Entry { kind, source: Source::Host(p, Box::new(meta)) })
    }

    /// The status of `entry` at `abs`.
    pub(crate) fn stat(&self, abs: &[u8], entry: &Entry) -> Stat {
        match &entry.source {
            Source::Host(_, m) => Stat {
                dev: m.dev(),
                ino: m.ino(),
                mode: m.mode(),
                nlink: m.nlink(),
                uid: u64::from(m.uid()),
                gid: u64::from(m.gid()),
                rdev: m.rdev(),
                size: m.size(),
                blksize: m.blksize(),
                blocks: m.blocks(),
                mtime_ns: (m.mtime().max(0) as u64).saturating_mul(1_000_000_000) + m.mtime_nsec().max(0) as u64,
            },
            Source::Synth(s) => s.stat(&self.exe),
            Source::Overlay => match self.nodes.get(abs) {
                Some(node) => node.stat(),
                // The root with no host tree.
                None => Stat { dev: OVERLAY_DEV, ino: 1, mode: S_IFDIR | 0o755, nlink: 2, ..Stat::default() },
            },
        }
    }

    /// Reads a host file whole (capped), recording its digest.
    pub(crate) fn read_host(&mut self, abs: &[u8], host: &std::path::Path) -> Result<Rc<[u8]>, i64> {
        let meta = std::fs::metadata(host).map_err(|_| EIO)?;
        if meta.len() > HOST_FILE_MAX {
            return Err(EFBIG);
        }
        let data = std::fs::read(host).map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                crate::syscall::errno::EACCES
            } else {
                EIO
            }
        })?;
        self.digests.insert(abs.to_vec(), fnv1a(&data));
        Ok(Rc::from(data))
    }

    /// The names in directory `abs` (no `.` or `..`), sorted, with their
    /// inode numbers and `DT_*` types: the overlay's merged over the host's.
    pub(crate) fn list(&self, abs: &[u8], fds: &FdTable) -> Vec<DirEntry> {
        if let Some(names) = synth::list(abs, &self.exe, fds) {
            return names;
        }
        let mut names: BTreeMap<Vec<u8>, ()> = BTreeMap::new();
        if self.host_visible(abs) && !matches!(self.nodes.get(abs), Some(Node::Dir(_, true))) {
            if let Some((p, meta)) = self.host(abs) {
                if meta.is_dir() {
                    for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                        names.insert(e.file_name().as_bytes().to_vec(), ());
                    }
                }
            }
            // The prefix may hide part of the root's directory: merge both.
            if let (Some(root), Some(_)) = (&self.root, &self.prefix) {
                let rel = std::ffi::OsStr::from_bytes(abs.strip_prefix(b"/").unwrap_or(abs));
                for e in std::fs::read_dir(root.join(rel)).into_iter().flatten().flatten() {
                    names.insert(e.file_name().as_bytes().to_vec(), ());
                }
            }
        }
        let base = if abs == b"/" { b"/".to_vec() } else { [abs, b"/"].concat() };
        for (p, _) in self.nodes.range(base.clone()..) {
            let Some(rest) = p.strip_prefix(&base[..]) else { break };
            if !rest.is_empty() && !rest.contains(&b'/') {
                names.insert(rest.to_vec(), ());
            }
        }
        names
            .into_keys()
            .filter_map(|name| {
                let child = [&base[..], &name].concat();
                let entry = self.lookup(&child, fds)?;
                let st = self.stat(&child, &entry);
                Some((name, st.ino, dtype(st.mode)))
            })
            .collect()
    }
}

/// The `DT_*` type of a mode.
pub(crate) fn dtype(mode: u32) -> u8 {
    ((mode & S_IFMT) >> 12) as u8
}

impl crate::Emulator {
    /// Every host file the guest has read, by guest path, with the FNV-1a
    /// digest ([`fnv1a`]) of what it read: inputs from the machine that a
    /// replay elsewhere may not share.
    pub fn host_inputs(&self) -> Vec<(Vec<u8>, u64)> {
        self.fs.digests.iter().map(|(p, d)| (p.clone(), *d)).collect()
    }
}

#[cfg(test)]
mod tests;
