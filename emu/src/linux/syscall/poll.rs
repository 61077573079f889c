//! Waiting for descriptors to be ready: `poll`, `ppoll`, `select`,
//! `pselect6`. Pipes are ready when a read or write would not block;
//! everything else (files, devices, the standard streams) always is, as
//! regular files are on Linux. A call with nothing ready sleeps until a
//! descriptor may have become ready or its timeout passes.

use crate::linux::abi::errno::EINVAL;
use crate::linux::abi::outcome::{block, fail, ok, SysError, SysResult};
use crate::linux::abi::{POLLERR, POLLHUP, POLLIN, POLLNVAL, POLLOUT, POLLPRI, POLLRDBAND, POLLRDNORM, POLLWRNORM};
use crate::linux::emulator::Emulator;
use crate::linux::fs::FileKind;

/// What `select`'s read set waits for.
const SELECT_IN: u64 = POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR;
/// What `select`'s write set waits for.
const SELECT_OUT: u64 = POLLOUT | POLLWRNORM | POLLERR;
/// What `select`'s exception set waits for.
const SELECT_EX: u64 = POLLPRI;

/// What descriptor `fd` is ready for now, as `poll` reports it
/// (`POLLERR` and `POLLHUP` whether asked or not).
fn ready(emu: &Emulator, fd: u64, events: u64) -> u64 {
    let Some(desc) = emu.fds.get(fd) else { return POLLNVAL };
    let f = desc.file.borrow();
    let all = match &f.kind {
        FileKind::Pipe(end) => end.events(),
        _ => POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM,
    };
    all & (events | POLLERR | POLLHUP)
}

/// The deadline for a timeout of `ns` (`None`: wait forever).
fn deadline(emu: &Emulator, timeout_ns: Option<u64>) -> Option<u64> {
    timeout_ns.map(|ns| emu.deadline(ns))
}

/// Whether the call has waited as long as it may.
fn timed_out(emu: &Emulator, timeout_ns: Option<u64>) -> bool {
    timeout_ns == Some(0) || deadline(emu, timeout_ns).is_some_and(|d| emu.now_ns() >= d)
}

fn poll_common(emu: &mut Emulator, fds: u64, nfds: u64, timeout_ns: Option<u64>) -> SysResult {
    if nfds > super::task::NOFILE {
        return fail(EINVAL);
    }
    // struct pollfd: int fd, short events, short revents.
    let mut entries = Vec::with_capacity(nfds as usize);
    for i in 0..nfds {
        let fd = emu.read_uint(fds + 8 * i, 4)? as u32 as i32;
        let events = emu.read_uint(fds + 8 * i + 4, 2)?;
        entries.push((fd, events));
    }
    let revents: Vec<u64> =
        entries.iter().map(|&(fd, events)| if fd < 0 { 0 } else { ready(emu, fd as u64, events) }).collect();
    let count = revents.iter().filter(|&&r| r != 0).count() as u64;
    if count == 0 && !timed_out(emu, timeout_ns) {
        return block(deadline(emu, timeout_ns));
    }
    for (i, r) in revents.into_iter().enumerate() {
        emu.write_uint(fds + 8 * i as u64 + 6, 2, r)?;
    }
    ok(count)
}

pub(super) fn poll(emu: &mut Emulator, [fds, nfds, timeout, ..]: [u64; 6]) -> SysResult {
    let ms = timeout as i64;
    let timeout_ns = (ms >= 0).then(|| (ms as u64).saturating_mul(1_000_000));
    poll_common(emu, fds, nfds, timeout_ns)
}

pub(super) fn ppoll(emu: &mut Emulator, [fds, nfds, tsp, ..]: [u64; 6]) -> SysResult {
    // The signal mask argument is not applied: no signal arrives while the
    // emulator decides, so only a handler's timing could differ.
    let timeout_ns = timeout(emu, tsp, 1)?;
    poll_common(emu, fds, nfds, timeout_ns)
}

/// The timeout at `addr`, a `struct timespec` (`unit` 1) or `struct
/// timeval` (`unit` 1000), in nanoseconds; `None` for a null pointer (wait
/// forever); `EINVAL` if it is not a valid duration.
fn timeout(emu: &mut Emulator, addr: u64, unit: u64) -> Result<Option<u64>, SysError> {
    if addr == 0 {
        return Ok(None);
    }
    Ok(Some(super::time::read_duration(emu, addr, unit)?.ok_or(SysError::Errno(EINVAL))?))
}

fn select_common(emu: &mut Emulator, nfds: u64, sets: [u64; 3], timeout_ns: Option<u64>) -> SysResult {
    let nfds = nfds as i64;
    if !(0..=super::task::NOFILE as i64).contains(&nfds) {
        return fail(EINVAL);
    }
    let words = (nfds as u64).div_ceil(64);
    let mut ins = [vec![0u64; words as usize], vec![0u64; words as usize], vec![0u64; words as usize]];
    for (set, addr) in ins.iter_mut().zip(sets) {
        if addr != 0 {
            for (w, word) in set.iter_mut().enumerate() {
                *word = emu.read_uint(addr + 8 * w as u64, 8)?;
            }
        }
    }
    let mut outs = [vec![0u64; words as usize], vec![0u64; words as usize], vec![0u64; words as usize]];
    let mut count = 0;
    for fd in 0..nfds as u64 {
        let (w, bit) = ((fd / 64) as usize, 1u64 << (fd % 64));
        let wanted: Vec<bool> = ins.iter().map(|set| set[w] & bit != 0).collect();
        if !wanted.contains(&true) {
            continue;
        }
        if emu.fds.get(fd).is_none() {
            return fail(crate::linux::abi::errno::EBADF);
        }
        for (k, mask) in [SELECT_IN, SELECT_OUT, SELECT_EX].into_iter().enumerate() {
            if wanted[k] && ready(emu, fd, mask) & mask != 0 {
                outs[k][w] |= bit;
                count += 1;
            }
        }
    }
    if count == 0 && !timed_out(emu, timeout_ns) {
        return block(deadline(emu, timeout_ns));
    }
    for (set, addr) in outs.iter().zip(sets) {
        if addr != 0 {
            for (w, &word) in set.iter().enumerate() {
                emu.write_uint(addr + 8 * w as u64, 8, word)?;
            }
        }
    }
    ok(count)
}

pub(super) fn select(emu: &mut Emulator, [nfds, r, w, e, tv, ..]: [u64; 6]) -> SysResult {
    let timeout_ns = timeout(emu, tv, 1000)?;
    select_common(emu, nfds, [r, w, e], timeout_ns)
}

pub(super) fn pselect6(emu: &mut Emulator, [nfds, r, w, e, ts, ..]: [u64; 6]) -> SysResult {
    let timeout_ns = timeout(emu, ts, 1)?;
    select_common(emu, nfds, [r, w, e], timeout_ns)
}
