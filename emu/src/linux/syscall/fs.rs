//! The path calls: open, stat, statx, access, getdents64, readlink,
//! getcwd/chdir, umask, mkdir, unlink/rmdir, rename, symlink, truncate; on
//! the guest's file system ([`crate::linux::fs`]), whose overlay takes every change.

use crate::linux::abi::errno::{
    EACCES, EBADF, EBUSY, EEXIST, EINVAL, EISDIR, ELOOP, EMFILE, ENAMETOOLONG, ENOENT, ENOTDIR, ENOTEMPTY, EOPNOTSUPP,
    ERANGE, EXDEV,
};
use crate::linux::abi::outcome::{fail, ok, SysError, SysResult};
use crate::linux::abi::{
    AT_EMPTY_PATH, AT_FDCWD, AT_REMOVEDIR, AT_SYMLINK_NOFOLLOW, O_ACCMODE, O_CLOEXEC, O_CREAT, O_EXCL, O_NOCTTY,
    O_PATH, O_RDONLY, O_TMPFILE, O_TRUNC,
};
use crate::linux::emulator::Emulator;
use crate::linux::fs::{
    parent, Desc, Entry, FileKind, Kind, Meta, Node, OpenFile, OverlayFile, Resolved, Source, Stat, Synth, NODE_COST,
};
use crate::machine::arch::StatField;
use crate::machine::bytes::GuestStruct;
use std::cell::RefCell;
use std::rc::Rc;

/// Longest path the kernel accepts (`PATH_MAX`).
const PATH_MAX: usize = 4096;
/// Open flags that only act at open: not kept in the description (`F_GETFL` omits them).
const OPEN_ONLY: u64 = O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_CLOEXEC;
/// `RENAME_NOREPLACE`.
const RENAME_NOREPLACE: u64 = 1;
/// `X_OK` of `access`.
const X_OK: u64 = 1;
/// `STATX_BASIC_STATS`: what every `statx` here fills in.
const STATX_BASIC_STATS: u64 = 0x7ff;

/// The guest's value of open flag `name` (AArch64 numbers a few differently).
fn oflag(emu: &Emulator, name: &str) -> u64 {
    crate::linux::abi::open_flag(emu.arch(), name)
}

/// Reads a path argument.
fn read_path(emu: &mut Emulator, addr: u64) -> Result<Vec<u8>, SysError> {
    emu.read_cstr(addr, PATH_MAX)?.ok_or(SysError::Errno(ENAMETOOLONG))
}

fn errno(e: i64) -> SysError {
    SysError::Errno(e)
}

/// The directory a relative `path` starts from: the working directory for
/// `AT_FDCWD`, else the directory open at `dirfd`.
fn start_dir(emu: &Emulator, dirfd: u64, path: &[u8]) -> Result<Vec<u8>, SysError> {
    if path.starts_with(b"/") || dirfd == AT_FDCWD {
        return Ok(emu.fs.cwd.clone());
    }
    let file = super::io::file(emu, dirfd)?;
    let f = file.borrow();
    match f.kind {
        FileKind::Dir(_) => Ok(f.path.clone()),
        _ => Err(errno(ENOTDIR)),
    }
}

/// Looks `path` up from `dirfd`.
fn resolve(emu: &Emulator, dirfd: u64, path: &[u8], follow: bool) -> Result<Resolved, SysError> {
    let start = start_dir(emu, dirfd, path)?;
    emu.fs.resolve(&start, path, follow, &emu.fds).map_err(errno)
}

/// Reads path argument `addr` and looks it up from `dirfd`.
fn lookup_arg(emu: &mut Emulator, dirfd: u64, addr: u64, follow: bool) -> Result<Resolved, SysError> {
    let path = read_path(emu, addr)?;
    resolve(emu, dirfd, &path, follow)
}

/// Fails where nothing may be created: `/dev` (`EACCES`: the guest is no
/// root) and `/proc`, whose lookups of missing names fail (`ENOENT`, as
/// `echo x > /dev/fd/9` says on Linux when descriptor 9 is not open).
fn check_creatable(abs: &[u8]) -> Result<(), SysError> {
    if abs.starts_with(b"/proc/") {
        return Err(errno(ENOENT));
    }
    if abs.starts_with(b"/dev/") {
        return Err(errno(EACCES));
    }
    Ok(())
}

/// Whether the host has something at `abs` that the overlay must hide once removed.
fn host_has(emu: &Emulator, abs: &[u8]) -> bool {
    emu.fs.host_visible(abs) && emu.fs.host(abs).is_some()
}

/// Removes `abs` from the guest's view: a whiteout if the host has it.
fn remove_path(emu: &mut Emulator, abs: &[u8]) {
    if host_has(emu, abs) {
        emu.fs.nodes.insert(abs.to_vec(), Node::Whiteout);
    } else {
        emu.fs.nodes.remove(abs);
    }
}

/// Charges `bytes` to the overlay, or `ENOSPC`.
fn charge(emu: &mut Emulator, bytes: u64) -> Result<(), SysError> {
    emu.fs.charge(bytes).map_err(errno)
}

/// Charges a new node at `abs`.
fn charge_node(emu: &mut Emulator, abs: &[u8]) -> Result<(), SysError> {
    charge(emu, NODE_COST + abs.len() as u64)
}

/// The overlay file at `abs`, copying a host file up first.
fn copy_up(
    emu: &mut Emulator,
    abs: &[u8],
    entry: &Entry,
    keep_data: bool,
) -> Result<Rc<RefCell<OverlayFile>>, SysError> {
    match &entry.source {
        Source::Overlay => match emu.fs.nodes.get(abs) {
            Some(Node::File(f)) => Ok(f.clone()),
            _ => Err(errno(EINVAL)),
        },
        Source::Host(host, meta) => {
            let data = if keep_data { emu.fs.read_host(abs, host).map_err(errno)?.to_vec() } else { Vec::new() };
            charge(emu, NODE_COST + (abs.len() + data.len()) as u64)?;
            use std::os::unix::fs::MetadataExt as _;
            let meta = Meta { mode: meta.mode() & 0o7777, ino: meta.ino(), mtime_ns: super::time::wall_now_ns(emu) };
            let file = Rc::new(RefCell::new(OverlayFile { data, meta }));
            emu.fs.nodes.insert(abs.to_vec(), Node::File(file.clone()));
            Ok(file)
        }
        // An overlay file opened again through /proc/self/fd: itself.
        Source::Open(file) => match &file.borrow().kind {
            FileKind::Overlay(o) => Ok(o.clone()),
            _ => Err(errno(EINVAL)),
        },
        Source::Synth(_) => Err(errno(EACCES)),
    }
}

/// `/proc/self/maps`, from the emulator's memory areas.
fn maps(emu: &Emulator) -> Vec<u8> {
    use crate::machine::memory::AreaKind;
    let mut out = String::new();
    for area in emu.pages().areas() {
        // Every mapping is private (`p`): shared ones are read-only copies here.
        let (offset, dev, ino, name) = match &area.kind {
            AreaKind::File(b) => (b.offset, b.file.dev, b.file.ino, String::from_utf8_lossy(&b.file.path).into_owned()),
            AreaKind::Heap => (0, 0, 0, "[heap]".into()),
            AreaKind::Stack => (0, 0, 0, "[stack]".into()),
            AreaKind::Vdso => (0, 0, 0, "[vdso]".into()),
            AreaKind::Uprobes => (0, 0, 0, "[uprobes]".into()),
            AreaKind::Bss | AreaKind::Anonymous => (0, 0, 0, String::new()),
        };
        // The kernel's `show_map_vma` layout, device as major:minor.
        let line = format!(
            "{:08x}-{:08x} {}p {offset:08x} {:02x}:{:02x} {ino} ",
            area.start,
            area.end,
            area.perms,
            (dev >> 8) & 0xfff,
            (dev & 0xff) | ((dev >> 12) & 0xfff00)
        );
        if name.is_empty() {
            out.push_str(&line);
        } else {
            out.push_str(&format!("{line:<73}{name}"));
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// Opens `path` from `dirfd`: the common part of `open`, `openat`, `creat`.
fn open_path(emu: &mut Emulator, dirfd: u64, path_addr: u64, flags: u64, mode: u64) -> SysResult {
    let path = read_path(emu, path_addr)?;
    let acc = flags & O_ACCMODE;
    if acc == O_ACCMODE || flags & O_TMPFILE != 0 || flags & O_PATH != 0 {
        return fail(if acc == O_ACCMODE { EINVAL } else { EOPNOTSUPP });
    }
    let creat = flags & O_CREAT != 0;
    let excl = creat && flags & O_EXCL != 0;
    let nofollow = flags & oflag(emu, "O_NOFOLLOW") != 0;
    let directory = flags & oflag(emu, "O_DIRECTORY") != 0;
    let r = resolve(emu, dirfd, &path, !nofollow && !excl)?;
    let truncate = flags & O_TRUNC != 0;
    let kind = match &r.entry {
        None => {
            if !creat {
                return fail(ENOENT);
            }
            if r.trailing_slash || directory {
                return fail(EISDIR);
            }
            check_creatable(&r.path)?;
            let meta = new_meta(emu, (mode as u32) & 0o7777 & !emu.fs.umask);
            let file = Rc::new(RefCell::new(OverlayFile { data: Vec::new(), meta }));
            emu.fs.nodes.insert(r.path.clone(), Node::File(file.clone()));
            FileKind::Overlay(file)
        }
        Some(_) if excl => return fail(EEXIST),
        Some(entry) => match &entry.kind {
            Kind::Symlink(_) => return fail(ELOOP),
            Kind::Dir => {
                if acc != O_RDONLY || creat {
                    return fail(EISDIR);
                }
                FileKind::Dir(emu.fs.stat(&r.path, entry))
            }
            _ if directory => return fail(ENOTDIR),
            Kind::File => match &entry.source {
                Source::Synth(_) => {
                    let data: Rc<[u8]> = Rc::from(maps(emu));
                    FileKind::Generated(data, emu.fs.stat(&r.path, entry))
                }
                Source::Host(host, _) if acc == O_RDONLY && !truncate => {
                    let stat = emu.fs.stat(&r.path, entry);
                    FileKind::Host(emu.fs.read_host(&r.path, host).map_err(errno)?, stat)
                }
                _ => {
                    let file = copy_up(emu, &r.path, entry, !truncate)?;
                    if truncate && acc != O_RDONLY {
                        let mut f = file.borrow_mut();
                        emu.fs.release(f.data.len() as u64);
                        f.data.clear();
                        f.meta.mtime_ns = super::time::wall_now_ns(emu);
                    }
                    FileKind::Overlay(file)
                }
            },
            Kind::Other => match &entry.source {
                Source::Synth(dev @ (Synth::Null | Synth::Zero | Synth::Random)) => FileKind::Device(*dev),
                // A pipe or standard stream, through /proc/self/fd.
                Source::Open(file) => file.borrow().reopen(acc).map_err(errno)?,
                _ => return fail(EACCES),
            },
        },
    };
    let Some(fd) = emu.fds.lowest_free(0, super::task::NOFILE) else { return fail(EMFILE) };
    let kept = (flags & !OPEN_ONLY) | oflag(emu, "O_LARGEFILE");
    let file = OpenFile::new(kind, kept, r.path);
    emu.fds.insert(fd, Desc { file, cloexec: flags & O_CLOEXEC != 0 });
    ok(fd)
}

pub(super) fn open(emu: &mut Emulator, [path, flags, mode, ..]: [u64; 6]) -> SysResult {
    open_path(emu, AT_FDCWD, path, flags, mode)
}

pub(super) fn openat(emu: &mut Emulator, [dirfd, path, flags, mode, ..]: [u64; 6]) -> SysResult {
    open_path(emu, dirfd, path, flags, mode)
}

pub(super) fn creat(emu: &mut Emulator, [path, mode, ..]: [u64; 6]) -> SysResult {
    open_path(emu, AT_FDCWD, path, O_CREAT | 1 | O_TRUNC, mode)
}

/// The status of what descriptor `fd` is open on.
pub(super) fn fd_stat(emu: &Emulator, fd: u64) -> Result<Stat, SysError> {
    Ok(super::io::file(emu, fd)?.borrow().stat(&emu.fs.exe))
}

/// Writes the architecture's `struct stat` for `st` at `addr`.
fn write_stat(emu: &mut Emulator, addr: u64, st: &Stat) -> SysResult {
    let layout = emu.info().stat;
    let mut out = GuestStruct::new(emu.endian(), layout.size);
    for &(field, offset, width) in layout.fields {
        let value = match field {
            StatField::Dev => st.dev,
            StatField::Ino => st.ino,
            StatField::Nlink => st.nlink,
            StatField::Mode => u64::from(st.mode),
            StatField::Uid => st.uid,
            StatField::Gid => st.gid,
            StatField::Rdev => st.rdev,
            StatField::Size => st.size,
            StatField::Blksize => st.blksize,
            StatField::Blocks => st.blocks,
            StatField::Time => st.mtime_ns / crate::linux::proc_state::NS_PER_SEC,
        };
        out.set(offset, width, value);
    }
    emu.write(addr, &out.into_bytes())?;
    ok(0)
}

/// The status of path argument `addr` from `dirfd`, or of `dirfd` itself
/// for an empty path with `AT_EMPTY_PATH`.
fn path_stat(emu: &mut Emulator, dirfd: u64, addr: u64, flags: u64) -> Result<Stat, SysError> {
    let path = read_path(emu, addr)?;
    if path.is_empty() && flags & AT_EMPTY_PATH != 0 {
        if dirfd == AT_FDCWD {
            let cwd = emu.fs.cwd.clone();
            let r = emu.fs.resolve(b"/", &cwd, true, &emu.fds).map_err(errno)?;
            let entry = r.entry.ok_or(errno(ENOENT))?;
            return Ok(emu.fs.stat(&r.path, &entry));
        }
        return fd_stat(emu, dirfd);
    }
    let r = resolve(emu, dirfd, &path, flags & AT_SYMLINK_NOFOLLOW == 0)?;
    let entry = r.entry.ok_or(errno(ENOENT))?;
    Ok(emu.fs.stat(&r.path, &entry))
}

pub(super) fn stat(emu: &mut Emulator, [path, buf, ..]: [u64; 6]) -> SysResult {
    let st = path_stat(emu, AT_FDCWD, path, 0)?;
    write_stat(emu, buf, &st)
}

pub(super) fn lstat(emu: &mut Emulator, [path, buf, ..]: [u64; 6]) -> SysResult {
    let st = path_stat(emu, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW)?;
    write_stat(emu, buf, &st)
}

pub(super) fn fstat(emu: &mut Emulator, [fd, buf, ..]: [u64; 6]) -> SysResult {
    let st = fd_stat(emu, fd)?;
    write_stat(emu, buf, &st)
}

pub(super) fn newfstatat(emu: &mut Emulator, [dirfd, path, buf, flags, ..]: [u64; 6]) -> SysResult {
    let st = path_stat(emu, dirfd, path, flags)?;
    write_stat(emu, buf, &st)
}

/// Splits a device number into major and minor, as the kernel's `MAJOR`/`MINOR` of `new_encode_dev`.
fn dev_parts(dev: u64) -> (u64, u64) {
    (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff), (dev & 0xff) | ((dev >> 12) & !0xff))
}

pub(super) fn statx(emu: &mut Emulator, [dirfd, path, flags, _mask, buf, ..]: [u64; 6]) -> SysResult {
    let st = path_stat(emu, dirfd, path, flags)?;
    // struct statx is the same on every architecture.
    let mut out = GuestStruct::new(emu.endian(), 256);
    out.set(0, 4, STATX_BASIC_STATS).set(4, 4, st.blksize).set(16, 4, st.nlink).set(20, 4, st.uid);
    out.set(24, 4, st.gid).set(28, 2, u64::from(st.mode)).set(32, 8, st.ino).set(40, 8, st.size);
    out.set(48, 8, st.blocks);
    let (sec, nsec) =
        (st.mtime_ns / crate::linux::proc_state::NS_PER_SEC, st.mtime_ns % crate::linux::proc_state::NS_PER_SEC);
    // atime, btime (not in the mask: left 0), ctime, mtime.
    for at in [64, 96, 112] {
        out.set(at, 8, sec).set(at + 8, 4, nsec);
    }
    let (rmaj, rmin) = dev_parts(st.rdev);
    let (dmaj, dmin) = dev_parts(st.dev);
    out.set(128, 4, rmaj).set(132, 4, rmin).set(136, 4, dmaj).set(140, 4, dmin);
    emu.write(buf, &out.into_bytes())?;
    ok(0)
}

fn access_common(emu: &mut Emulator, dirfd: u64, path: u64, mode: u64, flags: u64) -> SysResult {
    if mode & !7 != 0 {
        return fail(EINVAL);
    }
    let st = path_stat(emu, dirfd, path, flags & (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))?;
    // Reads are checked at open, writes go to the overlay: only execution is refused here.
    if mode & X_OK != 0 && st.mode & 0o111 == 0 {
        return fail(EACCES);
    }
    ok(0)
}

pub(super) fn access(emu: &mut Emulator, [path, mode, ..]: [u64; 6]) -> SysResult {
    access_common(emu, AT_FDCWD, path, mode, 0)
}

pub(super) fn faccessat(emu: &mut Emulator, [dirfd, path, mode, ..]: [u64; 6]) -> SysResult {
    access_common(emu, dirfd, path, mode, 0)
}

pub(super) fn faccessat2(emu: &mut Emulator, [dirfd, path, mode, flags, ..]: [u64; 6]) -> SysResult {
    access_common(emu, dirfd, path, mode, flags)
}

pub(super) fn getdents64(emu: &mut Emulator, [fd, buf, count, ..]: [u64; 6]) -> SysResult {
    let file = super::io::file(emu, fd)?;
    let (path, pos, st, listing) = {
        let f = file.borrow();
        let FileKind::Dir(st) = f.kind else { return fail(ENOTDIR) };
        (f.path.clone(), f.pos, st, f.listing.clone())
    };
    let names = match listing {
        Some(names) if pos > 0 => names,
        _ => {
            // `.` and `..` first, then the names sorted: the same order every run.
            let parent_path = parent(&path).0.to_vec();
            let parent_ino = emu
                .fs
                .resolve(b"/", &parent_path, true, &emu.fds)
                .ok()
                .and_then(|r| r.entry.map(|e| emu.fs.stat(&r.path, &e).ino))
                .unwrap_or(st.ino);
            let mut names = vec![(b".".to_vec(), st.ino, 4u8), (b"..".to_vec(), parent_ino, 4u8)];
            names.extend(emu.fs.list(&path, &emu.fds));
            let names: Rc<[_]> = names.into();
            file.borrow_mut().listing = Some(names.clone());
            names
        }
    };
    let count = count.min(super::io::READ_CHUNK) as usize;
    let mut out = Vec::new();
    let mut next = pos;
    for (i, (name, ino, dtype)) in names.iter().enumerate().skip(pos.min(names.len() as u64) as usize) {
        let reclen = (19 + name.len() + 1).next_multiple_of(8);
        if out.len() + reclen > count {
            if out.is_empty() {
                return fail(EINVAL);
            }
            break;
        }
        let mut rec = GuestStruct::new(emu.endian(), reclen);
        rec.set(0, 8, *ino).set(8, 8, i as u64 + 1).set(16, 2, reclen as u64).set(18, 1, u64::from(*dtype));
        rec.set_bytes(19, name);
        out.extend(rec.into_bytes());
        next = i as u64 + 1;
    }
    emu.write(buf, &out)?;
    file.borrow_mut().pos = next;
    ok(out.len() as u64)
}

fn readlink_common(emu: &mut Emulator, dirfd: u64, path: u64, buf: u64, size: u64) -> SysResult {
    // `int bufsiz`, checked before the path is read.
    if size as i64 <= 0 {
        return fail(EINVAL);
    }
    let r = lookup_arg(emu, dirfd, path, false)?;
    let Some(Entry { kind: Kind::Symlink(target), .. }) = r.entry else {
        return fail(if r.entry.is_some() { EINVAL } else { ENOENT });
    };
    let n = target.len().min(size as usize);
    emu.write(buf, &target[..n])?;
    ok(n as u64)
}

pub(super) fn readlink(emu: &mut Emulator, [path, buf, size, ..]: [u64; 6]) -> SysResult {
    readlink_common(emu, AT_FDCWD, path, buf, size)
}

pub(super) fn readlinkat(emu: &mut Emulator, [dirfd, path, buf, size, ..]: [u64; 6]) -> SysResult {
    readlink_common(emu, dirfd, path, buf, size)
}

pub(super) fn getcwd(emu: &mut Emulator, [buf, size, ..]: [u64; 6]) -> SysResult {
    let cwd = [&emu.fs.cwd[..], b"\0"].concat();
    if (size as usize) < cwd.len() {
        return fail(ERANGE);
    }
    emu.write(buf, &cwd)?;
    ok(cwd.len() as u64)
}

pub(super) fn chdir(emu: &mut Emulator, [path, ..]: [u64; 6]) -> SysResult {
    let r = lookup_arg(emu, AT_FDCWD, path, true)?;
    match r.entry {
        Some(Entry { kind: Kind::Dir, .. }) => {
            emu.fs.cwd = r.path;
            ok(0)
        }
        Some(_) => fail(ENOTDIR),
        None => fail(ENOENT),
    }
}

pub(super) fn fchdir(emu: &mut Emulator, [fd, ..]: [u64; 6]) -> SysResult {
    let file = super::io::file(emu, fd)?;
    let f = file.borrow();
    let FileKind::Dir(_) = f.kind else { return fail(ENOTDIR) };
    emu.fs.cwd = f.path.clone();
    ok(0)
}

pub(super) fn umask(emu: &mut Emulator, [mask, ..]: [u64; 6]) -> SysResult {
    let old = emu.fs.umask;
    emu.fs.umask = (mask as u32) & 0o777;
    ok(u64::from(old))
}

fn mkdir_common(emu: &mut Emulator, dirfd: u64, path: u64, mode: u64) -> SysResult {
    let r = lookup_arg(emu, dirfd, path, false)?;
    if r.entry.is_some() {
        return fail(EEXIST);
    }
    check_creatable(&r.path)?;
    charge_node(emu, &r.path)?;
    // Replacing a removed host directory: its old entries must stay hidden.
    let opaque = matches!(emu.fs.nodes.get(&r.path), Some(Node::Whiteout));
    let meta = new_meta(emu, (mode as u32) & 0o7777 & !emu.fs.umask);
    emu.fs.nodes.insert(r.path, Node::Dir(meta, opaque));
    ok(0)
}

pub(super) fn mkdir(emu: &mut Emulator, [path, mode, ..]: [u64; 6]) -> SysResult {
    mkdir_common(emu, AT_FDCWD, path, mode)
}

pub(super) fn mkdirat(emu: &mut Emulator, [dirfd, path, mode, ..]: [u64; 6]) -> SysResult {
    mkdir_common(emu, dirfd, path, mode)
}

fn unlink_common(emu: &mut Emulator, dirfd: u64, path: u64, flags: u64) -> SysResult {
    if flags & !AT_REMOVEDIR != 0 {
        return fail(EINVAL);
    }
    let raw = read_path(emu, path)?;
    let rmdir = flags & AT_REMOVEDIR != 0;
    if rmdir && (raw.ends_with(b"/.") || raw == b".") {
        return fail(EINVAL);
    }
    let r = resolve(emu, dirfd, &raw, false)?;
    let Some(entry) = r.entry else { return fail(ENOENT) };
    if matches!(entry.source, Source::Synth(_)) {
        return fail(EACCES);
    }
    match (rmdir, &entry.kind) {
        (false, Kind::Dir) => return fail(EISDIR),
        (true, Kind::Dir) => {
            if r.path == b"/" {
                return fail(EBUSY);
            }
            if !emu.fs.list(&r.path, &emu.fds).is_empty() {
                return fail(ENOTEMPTY);
            }
        }
        (true, _) => return fail(ENOTDIR),
        (false, _) => {}
    }
    remove_path(emu, &r.path);
    ok(0)
}

pub(super) fn unlink(emu: &mut Emulator, [path, ..]: [u64; 6]) -> SysResult {
    unlink_common(emu, AT_FDCWD, path, 0)
}

pub(super) fn rmdir(emu: &mut Emulator, [path, ..]: [u64; 6]) -> SysResult {
    unlink_common(emu, AT_FDCWD, path, AT_REMOVEDIR)
}

pub(super) fn unlinkat(emu: &mut Emulator, [dirfd, path, flags, ..]: [u64; 6]) -> SysResult {
    unlink_common(emu, dirfd, path, flags)
}

fn rename_common(emu: &mut Emulator, olddir: u64, old: u64, newdir: u64, new: u64, flags: u64) -> SysResult {
    if flags & !RENAME_NOREPLACE != 0 {
        // RENAME_EXCHANGE and RENAME_WHITEOUT are not modelled.
        return fail(EINVAL);
    }
    let old = read_path(emu, old)?;
    let new = read_path(emu, new)?;
    let from = resolve(emu, olddir, &old, false)?;
    let to = resolve(emu, newdir, &new, false)?;
    // Linux renames only normal names: `.` or `..` last is busy.
    let dotted = |p: &[u8]| matches!(p.rsplit(|&b| b == b'/').find(|c| !c.is_empty()), Some(b"." | b".."));
    if dotted(&old) || dotted(&new) {
        return fail(EBUSY);
    }
    let Some(src) = from.entry else { return fail(ENOENT) };
    // A trailing slash on either name says "directory".
    if (from.trailing_slash || to.trailing_slash) && src.kind != Kind::Dir {
        return fail(ENOTDIR);
    }
    if matches!(src.source, Source::Synth(_)) || to.entry.as_ref().is_some_and(|e| matches!(e.source, Source::Synth(_)))
    {
        return fail(EACCES);
    }
    check_creatable(&to.path)?;
    if from.path == to.path {
        return ok(0);
    }
    if to.path.starts_with(&from.path) && to.path.get(from.path.len()) == Some(&b'/') {
        return fail(EINVAL);
    }
    if let Some(dst) = &to.entry {
        if flags & RENAME_NOREPLACE != 0 {
            return fail(EEXIST);
        }
        match (&src.kind, &dst.kind) {
            (Kind::Dir, Kind::Dir) if !emu.fs.list(&to.path, &emu.fds).is_empty() => return fail(ENOTEMPTY),
            (Kind::Dir, Kind::Dir) => {}
            (Kind::Dir, _) => return fail(ENOTDIR),
            (_, Kind::Dir) => return fail(EISDIR),
            _ => {}
        }
    }
    let replaces_host = host_has(emu, &to.path);
    let node = match (&src.kind, &src.source) {
        // A host directory would have to be copied up whole; overlayfs
        // (without redirect_dir) says EXDEV too, and `mv` copies instead.
        (Kind::Dir, Source::Host(..)) => return fail(EXDEV),
        (Kind::Dir, _) => {
            let Some(Node::Dir(meta, _)) = emu.fs.nodes.get(&from.path).cloned() else { return fail(EXDEV) };
            if host_has(emu, &from.path) {
                return fail(EXDEV);
            }
            // Move the subtree's nodes.
            let prefix = [&from.path[..], b"/"].concat();
            let moved: Vec<Vec<u8>> = emu
                .fs
                .nodes
                .range(prefix.clone()..)
                .map(|(p, _)| p.clone())
                .take_while(|p| p.starts_with(&prefix))
                .collect();
            for p in moved {
                if let Some(n) = emu.fs.nodes.remove(&p) {
                    emu.fs.nodes.insert([&to.path[..], &p[from.path.len()..]].concat(), n);
                }
            }
            Node::Dir(meta, replaces_host)
        }
        (Kind::Symlink(target), Source::Host(_, meta)) => {
            use std::os::unix::fs::MetadataExt as _;
            charge(emu, target.len() as u64)?;
            Node::Symlink(
                Meta { mode: 0o777, ino: meta.ino(), mtime_ns: super::time::wall_now_ns(emu) },
                target.clone(),
            )
        }
        (Kind::File, Source::Host(..)) => Node::File(copy_up(emu, &from.path, &src, true)?),
        _ => match emu.fs.nodes.get(&from.path) {
            Some(n) => n.clone(),
            None => return fail(ENOENT),
        },
    };
    remove_path(emu, &from.path);
    emu.fs.nodes.insert(to.path, node);
    ok(0)
}

pub(super) fn rename(emu: &mut Emulator, [old, new, ..]: [u64; 6]) -> SysResult {
    rename_common(emu, AT_FDCWD, old, AT_FDCWD, new, 0)
}

pub(super) fn renameat(emu: &mut Emulator, [olddir, old, newdir, new, ..]: [u64; 6]) -> SysResult {
    rename_common(emu, olddir, old, newdir, new, 0)
}

pub(super) fn renameat2(emu: &mut Emulator, [olddir, old, newdir, new, flags, ..]: [u64; 6]) -> SysResult {
    rename_common(emu, olddir, old, newdir, new, flags)
}

fn symlink_common(emu: &mut Emulator, target: u64, dirfd: u64, path: u64) -> SysResult {
    let target = read_path(emu, target)?;
    if target.is_empty() {
        return fail(ENOENT);
    }
    let r = lookup_arg(emu, dirfd, path, false)?;
    if r.entry.is_some() {
        return fail(EEXIST);
    }
    check_creatable(&r.path)?;
    charge(emu, NODE_COST + (r.path.len() + target.len()) as u64)?;
    let meta = new_meta(emu, 0o777);
    emu.fs.nodes.insert(r.path, Node::Symlink(meta, target));
    ok(0)
}

pub(super) fn symlink(emu: &mut Emulator, [target, path, ..]: [u64; 6]) -> SysResult {
    symlink_common(emu, target, AT_FDCWD, path)
}

pub(super) fn symlinkat(emu: &mut Emulator, [target, dirfd, path, ..]: [u64; 6]) -> SysResult {
    symlink_common(emu, target, dirfd, path)
}

/// Sets the length of `file` to `len`, within the overlay's budget.
fn set_len(emu: &mut Emulator, file: &Rc<RefCell<OverlayFile>>, len: u64) -> SysResult {
    if (len as i64) < 0 {
        return fail(EINVAL);
    }
    let old = file.borrow().data.len() as u64;
    if len > old {
        charge(emu, len - old)?;
    } else {
        emu.fs.release(old - len);
    }
    let now = super::time::wall_now_ns(emu);
    let mut f = file.borrow_mut();
    f.data.resize(len as usize, 0);
    f.meta.mtime_ns = now;
    ok(0)
}

pub(super) fn truncate(emu: &mut Emulator, [path, len, ..]: [u64; 6]) -> SysResult {
    if (len as i64) < 0 {
        return fail(EINVAL);
    }
    let r = lookup_arg(emu, AT_FDCWD, path, true)?;
    let Some(entry) = r.entry else { return fail(ENOENT) };
    match entry.kind {
        Kind::Dir => fail(EISDIR),
        Kind::File if !matches!(entry.source, Source::Synth(_)) => {
            let file = copy_up(emu, &r.path, &entry, true)?;
            set_len(emu, &file, len)
        }
        _ => fail(EINVAL),
    }
}

pub(super) fn ftruncate(emu: &mut Emulator, [fd, len, ..]: [u64; 6]) -> SysResult {
    let file = super::io::file(emu, fd)?;
    let f = file.borrow();
    if f.flags & O_ACCMODE == O_RDONLY {
        return fail(EINVAL);
    }
    match &f.kind {
        FileKind::Overlay(o) => {
            let o = o.clone();
            drop(f);
            set_len(emu, &o, len)
        }
        FileKind::Stdin | FileKind::Stdout | FileKind::Stderr => fail(EINVAL),
        _ => fail(EBADF),
    }
}

/// The metadata of a node the guest creates now with permission bits `mode`.
fn new_meta(emu: &mut Emulator, mode: u32) -> Meta {
    let now = super::time::wall_now_ns(emu);
    emu.fs.new_meta(mode, now)
}

/// The program file `path` names from `dirfd`, for `execve`: its absolute
/// path and contents. A directory, a device or a file without an execute
/// bit is `EACCES`, as for the kernel.
/// The executable file `path` names from `dirfd`, read whole, as `execve`
/// and the loader of an interpreter open it (`ENOENT`, `EACCES` as Linux).
pub(crate) fn program(
    emu: &mut Emulator,
    dirfd: u64,
    path: &[u8],
) -> Result<crate::machine::objects::MappedFile, SysError> {
    let r = resolve(emu, dirfd, path, true)?;
    let Some(entry) = r.entry else { return Err(errno(ENOENT)) };
    let stat = emu.fs.stat(&r.path, &entry);
    if !matches!(entry.kind, Kind::File) || stat.mode & 0o111 == 0 {
        return Err(errno(EACCES));
    }
    let data: Rc<[u8]> = match &entry.source {
        Source::Host(host, _) => emu.fs.read_host(&r.path, host).map_err(errno)?,
        Source::Overlay => match emu.fs.nodes.get(&r.path) {
            Some(Node::File(file)) => Rc::from(file.borrow().data.clone()),
            _ => return Err(errno(ENOENT)),
        },
        // An overlay file open at a descriptor (`fexecve`'s /proc/self/fd/N).
        Source::Open(file) => match &file.borrow().kind {
            FileKind::Overlay(o) => Rc::from(o.borrow().data.clone()),
            _ => return Err(errno(EACCES)),
        },
        Source::Synth(_) => return Err(errno(EACCES)),
    };
    Ok(crate::machine::objects::MappedFile::new(r.path, stat.dev, stat.ino, data))
}

pub(super) fn utimensat(emu: &mut Emulator, [dirfd, path, times, flags, ..]: [u64; 6]) -> SysResult {
    let nofollow = flags & AT_SYMLINK_NOFOLLOW != 0;
    // A null path is the file open at `dirfd` (`futimens`).
    let abs = if path == 0 {
        super::io::file(emu, dirfd)?.borrow().path.clone()
    } else {
        let r = lookup_arg(emu, dirfd, path, !nofollow)?;
        if r.entry.is_none() {
            return fail(ENOENT);
        }
        r.path
    };
    // Only the modification time is kept (times[1]); `stat` reports it for all three.
    let mtime = if times == 0 {
        Some(super::time::wall_now_ns(emu))
    } else {
        let sec = emu.read_uint(times + 16, 8)?;
        match emu.read_uint(times + 24, 8)? {
            crate::linux::abi::UTIME_OMIT => None,
            crate::linux::abi::UTIME_NOW => Some(super::time::wall_now_ns(emu)),
            ns if ns < 1_000_000_000 => Some(sec.saturating_mul(1_000_000_000).saturating_add(ns)),
            _ => return fail(EINVAL),
        }
    };
    // Host files are read-only and keep their time: the change would need a
    // copy of the whole file in the overlay for one timestamp.
    if let (Some(mtime), Some(Node::File(file))) = (mtime, emu.fs.nodes.get(&abs)) {
        file.borrow_mut().meta.mtime_ns = mtime;
    }
    ok(0)
}
