//! The file system itself ([`Vfs`]): the overlay's nodes, the host root
//! and prefix, the working directory, and what a name resolves to
//! ([`Entry`]); path-walking methods are in `path.rs`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::rc::Rc;

use super::fdtable::{FdTable, OpenFile};
use super::name::normalize;
use super::overlay::{Meta, Node, OverlayFile};
use super::synth;
use super::types::Synth;
use super::types::*;
use crate::linux::abi::errno::{EFBIG, EIO};

/// Where a looked-up entry lives.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// In the overlay, under its path.
    Overlay,
    /// On the host, at this host path, with its metadata.
    Host(PathBuf, Box<std::fs::Metadata>),
    /// A synthetic `/dev` or `/proc` entry.
    Synth(Synth),
    /// The file an open description is open on, known by what it is (a
    /// pipe, a standard stream, an overlay file): where a link of
    /// `/proc/PID/fd` leads (see [`OpenFile::by_identity`]).
    Open(Rc<RefCell<OpenFile>>),
}

/// A file found by [`Vfs::lookup`].
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// What it is.
    pub(crate) kind: Kind,
    /// Where it lives.
    pub(crate) source: Source,
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
    /// What `/proc/self/exe` points to (the current process's; swapped at a context switch).
    pub(crate) exe: Vec<u8>,
    /// The current process's pid, for `/proc/self`.
    pub(crate) pid: u64,
}

impl Vfs {
    /// A file system with `root` (and `prefix` searched first) from the
    /// host, the working directory `cwd` and the executable `exe`.
    pub(crate) fn new(root: Option<PathBuf>, prefix: Option<PathBuf>, cwd: Vec<u8>, exe: Vec<u8>) -> Vfs {
        let cwd = if cwd.starts_with(b"/") { normalize(&cwd) } else { b"/".to_vec() };
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
            // Set by the loader (the first process) and at each context switch.
            pid: 0,
        }
    }

    /// Charges `bytes` to the overlay, or fails with `ENOSPC` past its limit.
    pub(crate) fn charge(&mut self, bytes: u64) -> Result<(), i64> {
        match self.used.checked_add(bytes).filter(|&used| used <= self.limit) {
            Some(used) => {
                self.used = used;
                Ok(())
            }
            None => Err(crate::linux::abi::errno::ENOSPC),
        }
    }

    /// Gives `bytes` back to the overlay.
    pub(crate) fn release(&mut self, bytes: u64) {
        self.used = self.used.saturating_sub(bytes);
    }

    /// A fresh inode number for an overlay file.
    /// The metadata of a new overlay node: permission bits `mode`, a fresh
    /// inode number, modified at `now_ns`.
    pub(crate) fn new_meta(&mut self, mode: u32, now_ns: u64) -> Meta {
        self.next_ino += 1;
        Meta { mode, ino: self.next_ino, mtime_ns: now_ns }
    }

    /// Adds a file with `data` at `path` (relative to the working
    /// directory), with any missing parent directories: the scenario's files.
    pub(crate) fn add_file(&mut self, path: &[u8], data: &[u8], mode: u32, now_ns: u64) {
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
                let meta = self.new_meta(0o755, now_ns);
                self.nodes.insert(at.clone(), Node::Dir(meta, false));
            }
        }
        let meta = self.new_meta(mode, now_ns);
        self.used += data.len() as u64;
        self.nodes.insert(abs, Node::File(Rc::new(RefCell::new(OverlayFile { data: data.to_vec(), meta }))));
    }

    /// `path` made absolute against the working directory and normalised
    /// lexically (only for paths the emulator itself is given).
    pub(crate) fn absolute(&self, path: &[u8]) -> Vec<u8> {
        if path.starts_with(b"/") {
            normalize(path)
        } else {
            normalize(&[&self.cwd[..], b"/", path].concat())
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
        if let Some(synth) = synth::lookup(abs, &self.exe, self.pid, fds) {
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
            Source::Open(file) => file.borrow().stat(&self.exe),
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
                crate::linux::abi::errno::EACCES
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
        if let Some(names) = synth::list(abs, &self.exe, self.pid, fds) {
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

/// Debian's cross sysroot for `arch` (`/usr/aarch64-linux-gnu`,
/// `/usr/s390x-linux-gnu`), if installed; none for x86-64, whose libraries
/// are the host's own.
pub fn default_prefix(arch: kmodel::arch::Arch) -> Option<PathBuf> {
    let dir = match arch {
        kmodel::arch::Arch::X86_64 => return None,
        kmodel::arch::Arch::Aarch64 => "/usr/aarch64-linux-gnu",
        kmodel::arch::Arch::S390x => "/usr/s390x-linux-gnu",
    };
    Some(PathBuf::from(dir)).filter(|p| p.is_dir())
}

/// FNV-1a, 64 bits: enough to tell that an input changed, no dependency.
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}
