//! Reading and writing descriptors, whatever they are open on (standard
//! streams, overlay and host files, devices), and the descriptor calls:
//! close, lseek, dup, fcntl, ioctl.

use crate::linux::abi::errno::{EAGAIN, EBADF, EINVAL, EISDIR, ENOTTY, EPIPE, ESPIPE};
use crate::linux::abi::outcome::{fail, ok, SysError, SysResult};
use crate::linux::abi::{
    F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_GETFL, F_SETFD, F_SETFL, O_ACCMODE, O_APPEND, O_CLOEXEC, O_RDONLY, O_WRONLY,
    SEEK_CUR, SEEK_END, SEEK_SET,
};
use crate::linux::emulator::Emulator;
use crate::linux::fs::{Desc, FileKind, OpenFile, PipeRead, PipeWrite, Synth};
use crate::machine::memory::AccessKind;
use kmodel::memory::Access;
use std::cell::RefCell;
use std::rc::Rc;

/// Most bytes one `read` returns (bounds host allocations whatever the guest asks).
pub(super) const READ_CHUNK: u64 = 1 << 20;
/// Most bytes one `write` transfers (Linux's `MAX_RW_COUNT`).
const MAX_RW_COUNT: u64 = 0x7fff_f000;
/// Most iovecs per call (`UIO_MAXIOV`).
const IOV_MAX: u64 = 1024;
/// `FD_CLOEXEC`.
const FD_CLOEXEC: u64 = 1;
/// Status flags `F_SETFL` may change (`fs/fcntl.c`'s `SETFL_MASK`).
const SETFL_FLAGS: [&str; 5] = ["O_APPEND", "O_NONBLOCK", "O_ASYNC", "O_DIRECT", "O_NOATIME"];

/// The description behind descriptor `fd`.
pub(super) fn file(emu: &Emulator, fd: u64) -> Result<Rc<RefCell<OpenFile>>, SysError> {
    emu.fds.get(fd).map(|d| d.file.clone()).ok_or(SysError::Errno(EBADF))
}

/// Produces up to `max` bytes from `file`, at `at` or at (and advancing) its position.
fn input(emu: &mut Emulator, file: &Rc<RefCell<OpenFile>>, max: u64, at: Option<u64>) -> Result<Vec<u8>, SysError> {
    let max = max.min(READ_CHUNK) as usize;
    let mut f = file.borrow_mut();
    if f.flags & O_ACCMODE == O_WRONLY {
        return Err(SysError::Errno(EBADF));
    }
    let slice = |data: &[u8], pos: u64| {
        let start = pos.min(data.len() as u64) as usize;
        data[start..][..(data.len() - start).min(max)].to_vec()
    };
    let pos = at.unwrap_or(f.pos);
    let nonblock = f.flags & crate::linux::abi::open_flag(emu.arch(), "O_NONBLOCK") != 0;
    let out = match &f.kind {
        FileKind::Pipe(_) if at.is_some() => return Err(SysError::Errno(ESPIPE)),
        FileKind::Pipe(end) => {
            if !end.read {
                return Err(SysError::Errno(EBADF));
            }
            return match end.pipe.borrow_mut().read(max) {
                PipeRead::Data(data) => Ok(data),
                PipeRead::Empty if nonblock => Err(SysError::Errno(EAGAIN)),
                PipeRead::Empty => Err(SysError::Block(None)),
            };
        }
        FileKind::Stdin if at.is_some() => return Err(SysError::Errno(ESPIPE)),
        FileKind::Stdin => return Ok(emu.stdin.read(max)),
        FileKind::Stdout | FileKind::Stderr => return Err(SysError::Errno(EBADF)),
        FileKind::Dir(_) => return Err(SysError::Errno(EISDIR)),
        FileKind::Overlay(o) => slice(&o.borrow().data, pos),
        FileKind::Host(data, _) | FileKind::Generated(data, _) => slice(data, pos),
        FileKind::Device(Synth::Zero) => vec![0; max],
        FileKind::Device(Synth::Random) => {
            let mut bytes = vec![0; max];
            emu.rng.fill(&mut bytes);
            bytes
        }
        // /dev/null
        FileKind::Device(_) => Vec::new(),
    };
    if at.is_none() {
        f.pos = pos + out.len() as u64;
    }
    Ok(out)
}

/// Writes `data` to `file`, at `at` or at (and advancing) its position;
/// returns how much went in (less than all only for a pipe).
fn output(emu: &mut Emulator, file: &Rc<RefCell<OpenFile>>, data: &[u8], at: Option<u64>) -> Result<usize, SysError> {
    let mut f = file.borrow_mut();
    if f.flags & O_ACCMODE == O_RDONLY {
        return Err(SysError::Errno(EBADF));
    }
    let nonblock = f.flags & crate::linux::abi::open_flag(emu.arch(), "O_NONBLOCK") != 0;
    match &f.kind {
        FileKind::Pipe(end) if end.write => {
            let result = end.pipe.borrow_mut().write(data);
            return match result {
                PipeWrite::Wrote(n) => Ok(n),
                PipeWrite::Full if nonblock => Err(SysError::Errno(EAGAIN)),
                PipeWrite::Full => Err(SysError::Block(None)),
                PipeWrite::Broken => {
                    // To the writing thread, as the kernel's `send_sig(SIGPIPE, current)`.
                    let tid = emu.task.tid;
                    emu.post_thread_signal(
                        tid,
                        crate::linux::signal::SIGPIPE,
                        crate::linux::sigframe::si_code::SI_USER,
                    );
                    Err(SysError::Errno(EPIPE))
                }
            };
        }
        FileKind::Pipe(_) => return Err(SysError::Errno(EBADF)),
        FileKind::Stdout => emu.stdout.write(data),
        FileKind::Stderr => emu.stderr.write(data),
        FileKind::Overlay(o) => {
            let now = super::time::wall_now_ns(emu);
            let mut o = o.borrow_mut();
            // O_APPEND writes at the end, even for pwrite (Linux's documented bug).
            let pos = if f.flags & O_APPEND != 0 { o.data.len() as u64 } else { at.unwrap_or(f.pos) };
            let end = pos.checked_add(data.len() as u64).ok_or(SysError::Errno(EINVAL))?;
            let growth = end.saturating_sub(o.data.len() as u64);
            emu.fs.charge(growth).map_err(SysError::Errno)?;
            if growth > 0 {
                o.data.resize(end as usize, 0);
            }
            o.data[pos as usize..end as usize].copy_from_slice(data);
            o.meta.mtime_ns = now;
            drop(o);
            if at.is_none() {
                f.pos = end;
            }
        }
        FileKind::Device(_) => {}
        FileKind::Stdin | FileKind::Host(..) | FileKind::Generated(..) | FileKind::Dir(_) => {
            return Err(SysError::Errno(EBADF))
        }
    }
    Ok(data.len())
}

/// `err` only says "nothing more now" (an empty or full pipe): after a
/// partial transfer the call returns what it moved instead.
fn would_block(err: &SysError) -> bool {
    matches!(err, SysError::Block(_) | SysError::Errno(EAGAIN))
}

/// Copies `count` bytes at `buf` out to `file`, in chunks so that a huge
/// buffer never needs a huge host allocation; returns how many went out. A
/// full pipe ends the copy early once something went out (a short write,
/// as the guest would see after a signal); before that, it blocks.
fn copy_out(
    emu: &mut Emulator,
    file: &Rc<RefCell<OpenFile>>,
    buf: u64,
    count: u64,
    at: Option<u64>,
) -> Result<u64, SysError> {
    let mut done = 0;
    while done < count {
        let chunk = emu.read_vec(buf + done, (count - done).min(READ_CHUNK))?;
        let n = match output(emu, file, &chunk, at.map(|at| at + done)) {
            Ok(n) => n as u64,
            Err(err) if done > 0 && would_block(&err) => return Ok(done),
            Err(err) => return Err(err),
        };
        done += n;
        if n < chunk.len() as u64 {
            break;
        }
    }
    Ok(done)
}

fn read_at(emu: &mut Emulator, fd: u64, buf: u64, count: u64, at: Option<u64>) -> SysResult {
    let file = file(emu, fd)?;
    // Check the buffer before consuming input, so a bad pointer loses nothing.
    emu.pages().check(buf, count.min(READ_CHUNK), AccessKind::Write, Access::Faultable)?;
    let data = input(emu, &file, count, at)?;
    emu.write(buf, &data)?;
    ok(data.len() as u64)
}

fn write_at(emu: &mut Emulator, fd: u64, buf: u64, count: u64, at: Option<u64>) -> SysResult {
    let file = file(emu, fd)?;
    let count = count.min(MAX_RW_COUNT);
    emu.pages().check(buf, count, AccessKind::Read, Access::Faultable)?;
    ok(copy_out(emu, &file, buf, count, at)?)
}

/// A pread/pwrite offset: negative is `EINVAL`; a stream is `ESPIPE`.
fn offset(emu: &Emulator, fd: u64, off: u64) -> Result<Option<u64>, SysError> {
    let file = file(emu, fd)?;
    if matches!(file.borrow().kind, FileKind::Stdin | FileKind::Stdout | FileKind::Stderr | FileKind::Pipe(_)) {
        return Err(SysError::Errno(ESPIPE));
    }
    if (off as i64) < 0 {
        return Err(SysError::Errno(EINVAL));
    }
    Ok(Some(off))
}

pub(super) fn read(emu: &mut Emulator, [fd, buf, count, ..]: [u64; 6]) -> SysResult {
    read_at(emu, fd, buf, count, None)
}

pub(super) fn write(emu: &mut Emulator, [fd, buf, count, ..]: [u64; 6]) -> SysResult {
    write_at(emu, fd, buf, count, None)
}

pub(super) fn pread64(emu: &mut Emulator, [fd, buf, count, off, ..]: [u64; 6]) -> SysResult {
    let at = offset(emu, fd, off)?;
    read_at(emu, fd, buf, count, at)
}

pub(super) fn pwrite64(emu: &mut Emulator, [fd, buf, count, off, ..]: [u64; 6]) -> SysResult {
    let at = offset(emu, fd, off)?;
    write_at(emu, fd, buf, count, at)
}

/// The `(base, len)` pairs of an iovec array.
fn iovecs(emu: &mut Emulator, iov: u64, count: u64) -> Result<Vec<(u64, u64)>, SysError> {
    if count > IOV_MAX {
        return Err(SysError::Errno(EINVAL));
    }
    (0..count).map(|i| Ok((emu.read_uint(iov + 16 * i, 8)?, emu.read_uint(iov + 16 * i + 8, 8)?))).collect()
}

fn writev_at(emu: &mut Emulator, fd: u64, iov: u64, count: u64, at: Option<u64>) -> SysResult {
    let file = file(emu, fd)?;
    let iovecs = iovecs(emu, iov, count)?;
    // Check every buffer first: a bad one fails the call before anything is written.
    let mut total = 0u64;
    for &(base, len) in &iovecs {
        let len = len.min(MAX_RW_COUNT - total);
        emu.pages().check(base, len, AccessKind::Read, Access::Faultable)?;
        total += len;
    }
    let mut left = total;
    let mut done = 0;
    for (base, len) in iovecs {
        let len = len.min(left);
        let wrote = match copy_out(emu, &file, base, len, at.map(|at| at + done)) {
            Ok(n) => n,
            Err(err) if done > 0 && would_block(&err) => return ok(done),
            Err(err) => return Err(err),
        };
        left -= wrote;
        done += wrote;
        if wrote < len {
            break;
        }
    }
    ok(done)
}

fn readv_at(emu: &mut Emulator, fd: u64, iov: u64, count: u64, at: Option<u64>) -> SysResult {
    let file = file(emu, fd)?;
    let mut total = 0u64;
    for (base, len) in iovecs(emu, iov, count)? {
        if len == 0 {
            continue;
        }
        emu.pages().check(base, len.min(READ_CHUNK), AccessKind::Write, Access::Faultable)?;
        let data = match input(emu, &file, len, at.map(|at| at + total)) {
            Ok(data) => data,
            Err(err) if total > 0 && would_block(&err) => break,
            Err(err) => return Err(err),
        };
        emu.write(base, &data)?;
        total += data.len() as u64;
        if (data.len() as u64) < len {
            break;
        }
    }
    ok(total)
}

pub(super) fn writev(emu: &mut Emulator, [fd, iov, count, ..]: [u64; 6]) -> SysResult {
    writev_at(emu, fd, iov, count, None)
}

pub(super) fn readv(emu: &mut Emulator, [fd, iov, count, ..]: [u64; 6]) -> SysResult {
    readv_at(emu, fd, iov, count, None)
}

pub(super) fn preadv(emu: &mut Emulator, [fd, iov, count, off, ..]: [u64; 6]) -> SysResult {
    let at = offset(emu, fd, off)?;
    readv_at(emu, fd, iov, count, at)
}

pub(super) fn pwritev(emu: &mut Emulator, [fd, iov, count, off, ..]: [u64; 6]) -> SysResult {
    let at = offset(emu, fd, off)?;
    writev_at(emu, fd, iov, count, at)
}

pub(super) fn close(emu: &mut Emulator, [fd, ..]: [u64; 6]) -> SysResult {
    match emu.fds.remove(fd) {
        Some(_) => ok(0),
        None => fail(EBADF),
    }
}

pub(super) fn lseek(emu: &mut Emulator, [fd, offset, whence, ..]: [u64; 6]) -> SysResult {
    let file = file(emu, fd)?;
    let mut f = file.borrow_mut();
    let len = match &f.kind {
        FileKind::Stdin | FileKind::Stdout | FileKind::Stderr | FileKind::Pipe(_) => return fail(ESPIPE),
        FileKind::Overlay(o) => o.borrow().data.len() as u64,
        FileKind::Host(data, _) | FileKind::Generated(data, _) => data.len() as u64,
        FileKind::Dir(_) | FileKind::Device(_) => 0,
    };
    let base = match whence {
        SEEK_SET => 0,
        SEEK_CUR => f.pos as i64,
        SEEK_END => len as i64,
        _ => return fail(EINVAL),
    };
    let Some(new) = base.checked_add(offset as i64).filter(|&new| new >= 0) else { return fail(EINVAL) };
    f.pos = new as u64;
    if new == 0 {
        // rewinddir: the next getdents64 lists the directory afresh.
        f.listing = None;
    }
    ok(new as u64)
}

pub(super) fn ioctl(emu: &mut Emulator, [fd, ..]: [u64; 6]) -> SysResult {
    // No terminal is ever attached: isatty() is false, whatever the host has.
    file(emu, fd)?;
    fail(ENOTTY)
}

/// Puts `file` at the lowest free descriptor at or above `from`.
fn dup_from(emu: &mut Emulator, file: Rc<RefCell<OpenFile>>, from: u64, cloexec: bool) -> SysResult {
    let Some(new) = emu.fds.lowest_free(from, super::task::NOFILE) else {
        return fail(crate::linux::abi::errno::EMFILE);
    };
    emu.fds.insert(new, Desc { file, cloexec });
    ok(new)
}

pub(super) fn fcntl(emu: &mut Emulator, [fd, cmd, arg, ..]: [u64; 6]) -> SysResult {
    let file = file(emu, fd)?;
    match cmd {
        F_GETFD => ok(u64::from(emu.fds.get(fd).is_some_and(|d| d.cloexec))),
        F_SETFD => {
            if let Some(d) = emu.fds.get_mut(fd) {
                d.cloexec = arg & FD_CLOEXEC != 0;
            }
            ok(0)
        }
        F_GETFL => ok(file.borrow().flags),
        F_SETFL => {
            let mut f = file.borrow_mut();
            // Per architecture: AArch64 numbers O_DIRECT differently.
            let mask = SETFL_FLAGS.iter().fold(0, |m, name| m | crate::linux::abi::open_flag(emu.arch(), name));
            f.flags = (f.flags & !mask) | (arg & mask);
            ok(0)
        }
        F_DUPFD | F_DUPFD_CLOEXEC => {
            // The kernel takes the lowest descriptor as an int and checks it
            // against RLIMIT_NOFILE.
            let from = i64::from(arg as i32);
            if !(0..super::task::NOFILE as i64).contains(&from) {
                return fail(EINVAL);
            }
            dup_from(emu, file, from as u64, cmd == F_DUPFD_CLOEXEC)
        }
        _ => fail(EINVAL),
    }
}

/// Inode numbers of pipes start here (a deterministic count, as `pipe:[N]` shows).
const PIPE_INO: u64 = 0x10_0000;

pub(super) fn pipe(emu: &mut Emulator, [fds, ..]: [u64; 6]) -> SysResult {
    pipe2(emu, [fds, 0, 0, 0, 0, 0])
}

pub(super) fn pipe2(emu: &mut Emulator, [fds, flags, ..]: [u64; 6]) -> SysResult {
    let nonblock = crate::linux::abi::open_flag(emu.arch(), "O_NONBLOCK");
    if flags & !(O_CLOEXEC | nonblock | crate::linux::abi::open_flag(emu.arch(), "O_DIRECT")) != 0 {
        return fail(EINVAL);
    }
    let Some(r) = emu.fds.lowest_free(0, super::task::NOFILE) else { return fail(crate::linux::abi::errno::EMFILE) };
    let Some(w) = (r + 1..super::task::NOFILE).find(|&fd| emu.fds.get(fd).is_none()) else {
        return fail(crate::linux::abi::errno::EMFILE);
    };
    // The array is written before the descriptors exist: a bad pointer leaves nothing open.
    emu.write_uint(fds, 4, r)?;
    emu.write_uint(fds + 4, 4, w)?;
    emu.sched.pipes += 1;
    let ino = PIPE_INO + emu.sched.pipes;
    let (read_end, write_end) = crate::linux::fs::PipeEnd::pair(ino);
    let name = crate::linux::fs::pipe_name(ino);
    let status = flags & nonblock;
    let cloexec = flags & O_CLOEXEC != 0;
    let read_file = OpenFile::new(FileKind::Pipe(read_end), O_RDONLY | status, name.clone());
    let write_file = OpenFile::new(FileKind::Pipe(write_end), O_WRONLY | status, name);
    emu.fds.insert(r, Desc { file: read_file, cloexec });
    emu.fds.insert(w, Desc { file: write_file, cloexec });
    ok(0)
}

pub(super) fn dup(emu: &mut Emulator, [fd, ..]: [u64; 6]) -> SysResult {
    let file = file(emu, fd)?;
    dup_from(emu, file, 0, false)
}

pub(super) fn dup2(emu: &mut Emulator, [old, new, ..]: [u64; 6]) -> SysResult {
    file(emu, old)?;
    if old == new {
        return ok(new);
    }
    dup3(emu, [old, new, 0, 0, 0, 0])
}

pub(super) fn dup3(emu: &mut Emulator, [old, new, flags, ..]: [u64; 6]) -> SysResult {
    if flags & !O_CLOEXEC != 0 || old == new {
        return fail(EINVAL);
    }
    let file = file(emu, old)?;
    if new >= super::task::NOFILE {
        return fail(EBADF);
    }
    emu.fds.insert(new, Desc { file, cloexec: flags & O_CLOEXEC != 0 });
    ok(new)
}
