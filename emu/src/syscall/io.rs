//! File descriptors: standard streams, read-only provided files, and what
//! glibc asks about them (stat, ioctl, fcntl), plus readlink and getcwd.

use super::abi::{
    AT_EMPTY_PATH, AT_FDCWD, F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_GETFL, F_SETFD, F_SETFL, O_ACCMODE, O_RDONLY,
    O_WRONLY, SEEK_CUR, SEEK_END, SEEK_SET,
};
use super::errno::{EACCES, EBADF, EINVAL, ENOENT, ENOTDIR, ENOTTY, ERANGE, ESPIPE};
use super::outcome::{fail, ok, SysError, SysResult};
use crate::arch::StatField;
use crate::bytes::GuestStruct;
use crate::emulator::Emulator;
use crate::memory::AccessKind;
use crate::process::{Fd, GID, UID};
use kmodel::memory::Access;

const S_IFIFO: u64 = 0o010_000;
const S_IFREG: u64 = 0o100_000;
/// Longest path the kernel accepts (`PATH_MAX`).
const PATH_MAX: usize = 4096;
/// Most bytes one `read` returns from standard input.
const READ_CHUNK: u64 = 1 << 20;
/// Most bytes one `write` transfers (Linux's `MAX_RW_COUNT`).
const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// Most iovecs per call (`UIO_MAXIOV`).
const IOV_MAX: u64 = 1024;

fn fd_entry(emu: &Emulator, fd: u64) -> Result<Fd, SysError> {
    emu.fds.get(&fd).cloned().ok_or(SysError::Errno(EBADF))
}

/// Copies what the guest wants written out of its memory.
fn output(emu: &mut Emulator, fd: u64, data: &[u8]) -> SysResult {
    match fd_entry(emu, fd)? {
        Fd::Stdout => emu.stdout.write(data),
        Fd::Stderr => emu.stderr.write(data),
        Fd::Stdin | Fd::File { .. } => return fail(EBADF),
    }
    ok(data.len() as u64)
}

/// Produces up to `max` bytes for the guest from `fd`.
fn input(emu: &mut Emulator, fd: u64, max: u64) -> Result<Vec<u8>, SysError> {
    match fd_entry(emu, fd)? {
        Fd::Stdin => Ok(emu.stdin.read(max.min(READ_CHUNK) as usize)),
        Fd::File { data, pos } => {
            let start = pos.min(data.len() as u64) as usize;
            let chunk = data[start..][..(data.len() - start).min(max as usize)].to_vec();
            emu.fds.insert(fd, Fd::File { data, pos: pos + chunk.len() as u64 });
            Ok(chunk)
        }
        Fd::Stdout | Fd::Stderr => Err(SysError::Errno(EBADF)),
    }
}

pub(super) fn read(emu: &mut Emulator, [fd, buf, count, ..]: [u64; 6]) -> SysResult {
    fd_entry(emu, fd)?;
    // Check the buffer before consuming input, so a bad pointer loses nothing.
    emu.pages().check(buf, count.min(READ_CHUNK), AccessKind::Write, Access::Faultable)?;
    let data = input(emu, fd, count)?;
    emu.write(buf, &data)?;
    ok(data.len() as u64)
}

pub(super) fn pread64(emu: &mut Emulator, [fd, buf, count, offset, ..]: [u64; 6]) -> SysResult {
    match fd_entry(emu, fd)? {
        Fd::File { data, .. } => {
            let start = offset.min(data.len() as u64) as usize;
            let chunk = &data[start..][..(data.len() - start).min(count as usize)];
            emu.write(buf, chunk)?;
            ok(chunk.len() as u64)
        }
        _ => fail(ESPIPE),
    }
}

/// Copies `count` bytes at `buf` out to `fd`, in chunks so that a huge
/// buffer never needs a huge host allocation.
fn copy_out(emu: &mut Emulator, fd: u64, buf: u64, count: u64) -> Result<(), SysError> {
    let mut done = 0;
    while done < count {
        let chunk = emu.read_vec(buf + done, (count - done).min(READ_CHUNK))?;
        output(emu, fd, &chunk)?;
        done += chunk.len() as u64;
    }
    Ok(())
}

pub(super) fn write(emu: &mut Emulator, [fd, buf, count, ..]: [u64; 6]) -> SysResult {
    fd_entry(emu, fd)?;
    let count = count.min(MAX_RW_COUNT);
    emu.pages().check(buf, count, AccessKind::Read, Access::Faultable)?;
    copy_out(emu, fd, buf, count)?;
    ok(count)
}

/// The `(base, len)` pairs of an iovec array.
fn iovecs(emu: &mut Emulator, iov: u64, count: u64) -> Result<Vec<(u64, u64)>, SysError> {
    if count > IOV_MAX {
        return Err(SysError::Errno(EINVAL));
    }
    (0..count).map(|i| Ok((emu.read_uint(iov + 16 * i, 8)?, emu.read_uint(iov + 16 * i + 8, 8)?))).collect()
}

pub(super) fn writev(emu: &mut Emulator, [fd, iov, count, ..]: [u64; 6]) -> SysResult {
    fd_entry(emu, fd)?;
    let iovecs = iovecs(emu, iov, count)?;
    // Check every buffer first: a bad one fails the call before anything is written.
    let mut total = 0u64;
    for &(base, len) in &iovecs {
        let len = len.min(MAX_RW_COUNT - total);
        emu.pages().check(base, len, AccessKind::Read, Access::Faultable)?;
        total += len;
    }
    let mut left = total;
    for (base, len) in iovecs {
        let len = len.min(left);
        copy_out(emu, fd, base, len)?;
        left -= len;
    }
    ok(total)
}

pub(super) fn readv(emu: &mut Emulator, [fd, iov, count, ..]: [u64; 6]) -> SysResult {
    fd_entry(emu, fd)?;
    let mut total = 0u64;
    for (base, len) in iovecs(emu, iov, count)? {
        if len == 0 {
            continue;
        }
        emu.pages().check(base, len.min(READ_CHUNK), AccessKind::Write, Access::Faultable)?;
        let data = input(emu, fd, len)?;
        emu.write(base, &data)?;
        total += data.len() as u64;
        if (data.len() as u64) < len {
            break;
        }
    }
    ok(total)
}

pub(super) fn close(emu: &mut Emulator, [fd, ..]: [u64; 6]) -> SysResult {
    match emu.fds.remove(&fd) {
        Some(_) => ok(0),
        None => fail(EBADF),
    }
}

pub(super) fn lseek(emu: &mut Emulator, [fd, offset, whence, ..]: [u64; 6]) -> SysResult {
    let Fd::File { data, pos } = fd_entry(emu, fd)? else { return fail(ESPIPE) };
    let base = match whence {
        SEEK_SET => 0,
        SEEK_CUR => pos as i64,
        SEEK_END => data.len() as i64,
        _ => return fail(EINVAL),
    };
    let Some(new) = base.checked_add(offset as i64).filter(|&new| new >= 0) else { return fail(EINVAL) };
    emu.fds.insert(fd, Fd::File { data, pos: new as u64 });
    ok(new as u64)
}

pub(super) fn ioctl(emu: &mut Emulator, [fd, ..]: [u64; 6]) -> SysResult {
    // No terminal is ever attached: isatty() is false, whatever the host has.
    fd_entry(emu, fd)?;
    fail(ENOTTY)
}

pub(super) fn fcntl(emu: &mut Emulator, [fd, cmd, arg, ..]: [u64; 6]) -> SysResult {
    let entry = fd_entry(emu, fd)?;
    match cmd {
        F_GETFD | F_SETFD | F_SETFL => ok(0),
        F_GETFL => ok(if matches!(entry, Fd::Stdout | Fd::Stderr) { O_WRONLY } else { O_RDONLY }),
        F_DUPFD | F_DUPFD_CLOEXEC => {
            // The kernel takes the lowest descriptor as an int and checks it
            // against RLIMIT_NOFILE.
            let from = i64::from(arg as i32);
            if !(0..super::process::NOFILE as i64).contains(&from) {
                return fail(EINVAL);
            }
            let new = lowest_free_fd(emu, from as u64);
            emu.fds.insert(new, entry);
            ok(new)
        }
        _ => fail(EINVAL),
    }
}

fn lowest_free_fd(emu: &Emulator, from: u64) -> u64 {
    (from..).find(|fd| !emu.fds.contains_key(fd)).unwrap_or(from)
}

/// Reads a path argument.
fn path(emu: &mut Emulator, addr: u64) -> Result<Vec<u8>, SysError> {
    emu.read_cstr(addr, PATH_MAX)?.ok_or(SysError::Errno(super::errno::ENAMETOOLONG))
}

/// Checks where `path` is looked up. Relative paths are relative to `dirfd`:
/// from the working directory (`AT_FDCWD`) they name provided files as
/// given; a descriptor must be open, and none is a directory.
fn check_dirfd(emu: &Emulator, dirfd: u64, path: &[u8]) -> Result<(), SysError> {
    if path.is_empty() {
        return Err(SysError::Errno(ENOENT));
    }
    if path.starts_with(b"/") || dirfd == AT_FDCWD {
        return Ok(());
    }
    fd_entry(emu, dirfd)?;
    Err(SysError::Errno(ENOTDIR))
}

/// Looks a path up among the provided files.
fn open_path(emu: &mut Emulator, dirfd: u64, path_addr: u64, flags: u64) -> SysResult {
    let path = path(emu, path_addr)?;
    check_dirfd(emu, dirfd, &path)?;
    let Some(data) = emu.provided.get(&path).cloned() else { return fail(ENOENT) };
    if flags & O_ACCMODE != O_RDONLY {
        return fail(EACCES);
    }
    let fd = lowest_free_fd(emu, 0);
    emu.fds.insert(fd, Fd::File { data, pos: 0 });
    ok(fd)
}

pub(super) fn open(emu: &mut Emulator, [path, flags, ..]: [u64; 6]) -> SysResult {
    open_path(emu, AT_FDCWD, path, flags)
}

pub(super) fn openat(emu: &mut Emulator, [dirfd, path, flags, ..]: [u64; 6]) -> SysResult {
    open_path(emu, dirfd, path, flags)
}

/// Writes the kernel's `struct stat` for `entry` at `addr`.
fn write_stat(emu: &mut Emulator, addr: u64, entry: &Fd, ino: u64) -> SysResult {
    let (mode, size) = match entry {
        // Pipes: no terminal, so stdio buffers fully whatever the host has.
        Fd::Stdin | Fd::Stdout | Fd::Stderr => (S_IFIFO | 0o600, 0),
        Fd::File { data, .. } => (S_IFREG | 0o444, data.len() as u64),
    };
    let layout = emu.info().stat;
    let time = crate::process::REALTIME_EPOCH_NS / crate::process::NS_PER_SEC;
    let mut st = GuestStruct::new(emu.endian(), layout.size);
    for &(field, offset, width) in layout.fields {
        let value = match field {
            StatField::Dev => 0x0e,
            StatField::Ino => ino,
            StatField::Nlink => 1,
            StatField::Mode => mode,
            StatField::Uid => UID,
            StatField::Gid => GID,
            StatField::Rdev => 0,
            StatField::Size => size,
            StatField::Blksize => 4096,
            StatField::Blocks => size.div_ceil(512),
            StatField::Time => time,
        };
        st.set(offset, width, value);
    }
    emu.write(addr, &st.into_bytes())?;
    ok(0)
}

pub(super) fn fstat(emu: &mut Emulator, [fd, buf, ..]: [u64; 6]) -> SysResult {
    let entry = fd_entry(emu, fd)?;
    write_stat(emu, buf, &entry, fd + 1)
}

pub(super) fn newfstatat(emu: &mut Emulator, [dirfd, path_addr, buf, flags, ..]: [u64; 6]) -> SysResult {
    let path = path(emu, path_addr)?;
    if path.is_empty() {
        if flags & AT_EMPTY_PATH == 0 {
            return fail(ENOENT);
        }
        let entry = fd_entry(emu, dirfd)?;
        return write_stat(emu, buf, &entry, dirfd + 1);
    }
    check_dirfd(emu, dirfd, &path)?;
    let Some(rank) = emu.provided.keys().position(|p| *p == path) else { return fail(ENOENT) };
    let data = emu.provided[&path].clone();
    write_stat(emu, buf, &Fd::File { data, pos: 0 }, 100 + rank as u64)
}

fn readlink_common(emu: &mut Emulator, dirfd: u64, path_addr: u64, buf: u64, size: u64) -> SysResult {
    // `int bufsiz`, checked before the path is read.
    if size as i64 <= 0 {
        return fail(EINVAL);
    }
    let path = path(emu, path_addr)?;
    check_dirfd(emu, dirfd, &path)?;
    if path != b"/proc/self/exe" {
        return fail(if emu.provided.contains_key(&path) { EINVAL } else { ENOENT });
    }
    let target = emu.exe_path.clone();
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
    if size < 2 {
        return fail(ERANGE);
    }
    emu.write(buf, b"/\0")?;
    ok(2)
}
