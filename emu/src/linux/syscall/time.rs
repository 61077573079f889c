//! The virtual clock: time is a function of the instruction count plus the
//! time slept, so two runs of a program see the same times.

use crate::linux::abi::errno::EINVAL;
use crate::linux::abi::outcome::{block, fail, ok, SysResult};
use crate::linux::abi::{
    CLOCK_BOOTTIME, CLOCK_BOOTTIME_ALARM, CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE, CLOCK_MONOTONIC_RAW,
    CLOCK_PROCESS_CPUTIME_ID, CLOCK_REALTIME, CLOCK_REALTIME_ALARM, CLOCK_REALTIME_COARSE, CLOCK_TAI,
    CLOCK_THREAD_CPUTIME_ID, TIMER_ABSTIME,
};
use crate::linux::emulator::Emulator;
use crate::linux::proc_state::{MONOTONIC_EPOCH_NS, NS_PER_SEC, REALTIME_EPOCH_NS};

/// The value of clock `clock` in nanoseconds, or `None` for an unknown clock.
pub(super) fn now_ns(emu: &Emulator, clock: u64) -> Option<u64> {
    let icount = emu.icount();
    match clock {
        CLOCK_REALTIME | CLOCK_REALTIME_COARSE | CLOCK_REALTIME_ALARM | CLOCK_TAI => Some(wall_now_ns(emu)),
        CLOCK_MONOTONIC | CLOCK_MONOTONIC_RAW | CLOCK_MONOTONIC_COARSE | CLOCK_BOOTTIME | CLOCK_BOOTTIME_ALARM => {
            Some(MONOTONIC_EPOCH_NS + emu.clock.elapsed_ns(icount))
        }
        CLOCK_PROCESS_CPUTIME_ID | CLOCK_THREAD_CPUTIME_ID => Some(emu.clock.cpu_ns(icount)),
        _ => None,
    }
}

/// Writes a `struct timespec` (two 64-bit words on every 64-bit architecture).
fn write_timespec(emu: &mut Emulator, addr: u64, ns: u64) -> Result<(), crate::machine::memory::MemFault> {
    emu.write_uint(addr, 8, ns / NS_PER_SEC)?;
    emu.write_uint(addr + 8, 8, ns % NS_PER_SEC)
}

/// Reads a `struct timespec` (`unit` 1: seconds and nanoseconds) or a
/// `struct timeval` (`unit` 1000: microseconds) as nanoseconds; `None` if
/// it is not a valid duration.
pub(super) fn read_duration(
    emu: &mut Emulator,
    addr: u64,
    unit: u64,
) -> Result<Option<u64>, crate::machine::memory::MemFault> {
    let sec = emu.read_uint(addr, 8)? as i64;
    let frac = emu.read_uint(addr + 8, 8)? as i64;
    if sec < 0 || !(0..(NS_PER_SEC / unit) as i64).contains(&frac) {
        return Ok(None);
    }
    Ok(Some((sec as u64).saturating_mul(NS_PER_SEC).saturating_add(frac as u64 * unit)))
}

/// Reads a `struct timespec`; `None` if it is not a valid duration.
fn read_timespec(emu: &mut Emulator, addr: u64) -> Result<Option<u64>, crate::machine::memory::MemFault> {
    read_duration(emu, addr, 1)
}

pub(super) fn clock_gettime(emu: &mut Emulator, [clock, ts, ..]: [u64; 6]) -> SysResult {
    let Some(ns) = now_ns(emu, clock) else { return fail(EINVAL) };
    write_timespec(emu, ts, ns)?;
    ok(0)
}

pub(super) fn clock_getres(emu: &mut Emulator, [clock, res, ..]: [u64; 6]) -> SysResult {
    if now_ns(emu, clock).is_none() {
        return fail(EINVAL);
    }
    if res != 0 {
        write_timespec(emu, res, 1)?;
    }
    ok(0)
}

pub(super) fn gettimeofday(emu: &mut Emulator, [tv, tz, ..]: [u64; 6]) -> SysResult {
    let ns = wall_now_ns(emu);
    if tv != 0 {
        emu.write_uint(tv, 8, ns / NS_PER_SEC)?;
        emu.write_uint(tv + 8, 8, ns % NS_PER_SEC / 1000)?;
    }
    if tz != 0 {
        // struct timezone: UTC, no daylight saving.
        emu.write(tz, &[0u8; 8])?;
    }
    ok(0)
}

/// `time(tloc)`: the wall clock's seconds, also stored at `tloc` unless it
/// is null (x86-64 only; glibc calls it there when there is no vDSO).
pub(super) fn time(emu: &mut Emulator, [tloc, ..]: [u64; 6]) -> SysResult {
    let secs = wall_now_ns(emu) / NS_PER_SEC;
    if tloc != 0 {
        emu.write_uint(tloc, 8, secs)?;
    }
    ok(secs)
}

/// Sleeps `ns`: alone, the clock simply moves on; with other processes,
/// the caller sleeps until the machine's clock reaches the deadline.
fn sleep(emu: &mut Emulator, ns: u64) -> SysResult {
    let deadline = emu.deadline(ns);
    let now = emu.now_ns();
    if now >= deadline {
        return ok(0);
    }
    if !emu.others_alive() {
        emu.clock.slept_ns = emu.clock.slept_ns.saturating_add(deadline - now);
        return ok(0);
    }
    block(Some(deadline))
}

pub(super) fn nanosleep(emu: &mut Emulator, [req, ..]: [u64; 6]) -> SysResult {
    let Some(ns) = read_timespec(emu, req)? else { return fail(EINVAL) };
    sleep(emu, ns)
}

pub(super) fn clock_nanosleep(emu: &mut Emulator, [clock, flags, req, ..]: [u64; 6]) -> SysResult {
    let Some(now) = now_ns(emu, clock) else { return fail(EINVAL) };
    let Some(ns) = read_timespec(emu, req)? else { return fail(EINVAL) };
    // On a retry the deadline is the first attempt's (`Emulator::deadline`).
    let ns = if flags & TIMER_ABSTIME != 0 && emu.retry.is_none() { ns.saturating_sub(now) } else { ns };
    sleep(emu, ns)
}

/// The virtual wall clock, for overlay timestamps.
pub(super) fn wall_now_ns(emu: &Emulator) -> u64 {
    REALTIME_EPOCH_NS + emu.clock.elapsed_ns(emu.icount())
}
