//! The plain data of the file system: file types and their mode bits, what
//! a name is ([`Kind`]), what `stat` reports ([`Stat`]) and which
//! synthetic file one is ([`Synth`]). Every other file
//! of `fs` builds on these; they import nothing from it.

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
pub(crate) const HOST_FILE_MAX: u64 = 256 << 20;
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

/// The `DT_*` type of a mode.
pub(crate) fn dtype(mode: u32) -> u8 {
    ((mode & S_IFMT) >> 12) as u8
}

/// A synthetic file of `/dev` or `/proc` (what each is: `synth.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synth {
    /// `/dev`.
    DevDir,
    /// `/dev/null`.
    Null,
    /// `/dev/zero`.
    Zero,
    /// `/dev/urandom` and `/dev/random`: the emulator's seeded stream.
    Random,
    /// `/dev/fd`, a link to `/proc/self/fd`.
    DevFd,
    /// `/dev/stdin`, `/dev/stdout`, `/dev/stderr`: links to `/proc/self/fd/N`.
    StdLink(u64),
    /// `/proc`.
    ProcDir,
    /// `/proc/self`, a link to `PID`.
    SelfLink,
    /// `/proc/PID`.
    PidDir,
    /// `/proc/PID/exe`.
    Exe,
    /// `/proc/PID/maps`, generated at open from the memory areas.
    Maps,
    /// `/proc/PID/fd`.
    FdDir,
    /// `/proc/PID/fd/N`: a link that reads as the name of what descriptor
    /// N is open on, and leads to the open file itself (see `path.rs`).
    FdLink(u64),
}
