//! Signal dispositions, the blocked mask, and sending signals to oneself.
//! Delivery happens in the run loop once a signal is pending and unblocked.

use crate::linux::abi::errno::{EINVAL, ENOMEM, EPERM, ESRCH};
use crate::linux::abi::outcome::{block, fail, ok, SysResult};
use crate::linux::abi::{SIG_BLOCK, SIG_SETMASK, SIG_UNBLOCK};
use crate::linux::emulator::Emulator;
use crate::linux::proc_state::{sig_bit, SigAction, UNBLOCKABLE};
use crate::linux::proc_table::Pid;
use crate::linux::sigframe::{si_code, SS_DISABLE, SS_ONSTACK};
use crate::linux::signal::{NSIG, SIGKILL, SIGSTOP};

/// Size of the kernel's signal set on every 64-bit architecture.
const SIGSET_SIZE: u64 = 8;

fn valid(sig: u64) -> Option<u32> {
    (1..=u64::from(NSIG)).contains(&sig).then_some(sig as u32)
}

pub(super) fn rt_sigaction(emu: &mut Emulator, [sig, act, oact, size, ..]: [u64; 6]) -> SysResult {
    let Some(sig) = valid(sig).filter(|_| size == SIGSET_SIZE) else { return fail(EINVAL) };
    if act != 0 && (sig == SIGKILL || sig == SIGSTOP) {
        return fail(EINVAL);
    }
    // The kernel's struct sigaction is the same four words on all three:
    // handler, flags, restorer, mask.
    let new = if act != 0 {
        let mut words = [0u64; 4];
        for (i, word) in words.iter_mut().enumerate() {
            *word = emu.read_uint(act + 8 * i as u64, 8)?;
        }
        Some(SigAction { handler: words[0], flags: words[1], restorer: words[2], mask: words[3] & !UNBLOCKABLE })
    } else {
        None
    };
    if oact != 0 {
        let old = emu.signals.actions[sig as usize];
        for (i, word) in [old.handler, old.flags, old.restorer, old.mask].into_iter().enumerate() {
            emu.write_uint(oact + 8 * i as u64, 8, word)?;
        }
    }
    if let Some(new) = new {
        emu.signals.actions[sig as usize] = new;
        if new.handler == crate::linux::proc_state::SIG_IGN {
            // Pending ones are discarded, in every thread and the process.
            emu.signals.pending &= !sig_bit(sig);
            let me = emu.cur_mut();
            me.shared.pending &= !sig_bit(sig);
            for thread in me.threads.values_mut().flatten() {
                thread.signals.pending &= !sig_bit(sig);
            }
        }
    }
    ok(0)
}

pub(super) fn rt_sigprocmask(emu: &mut Emulator, [how, set, oset, size, ..]: [u64; 6]) -> SysResult {
    if size != SIGSET_SIZE {
        return fail(EINVAL);
    }
    let old = emu.signals.blocked;
    if set != 0 {
        let set = emu.read_uint(set, 8)?;
        emu.signals.blocked = match how {
            SIG_BLOCK => old | set,
            SIG_UNBLOCK => old & !set,
            SIG_SETMASK => set,
            _ => return fail(EINVAL),
        } & !UNBLOCKABLE;
    }
    if oset != 0 {
        emu.write_uint(oset, 8, old)?;
    }
    ok(0)
}

/// Sends `sig` to each of the processes `targets` (signal 0 only checks
/// that there is one); `code` is its `si_code`.
fn send(emu: &mut Emulator, targets: &[Pid], sig: u64, code: i32) -> SysResult {
    if sig != 0 && valid(sig).is_none() {
        return fail(EINVAL);
    }
    if targets.is_empty() {
        return fail(ESRCH);
    }
    if let Some(sig) = valid(sig) {
        for &pid in targets {
            emu.post_signal(pid, sig, code);
        }
    }
    ok(0)
}

pub(super) fn kill(emu: &mut Emulator, [pid, sig, ..]: [u64; 6]) -> SysResult {
    // `pid_t` is narrowed: -1 is -1 however it was passed.
    let pid = pid as i64;
    let targets = match pid {
        // Every process but the caller (and init, which is not here).
        -1 => emu.pids().into_iter().filter(|&p| p != emu.pid).collect(),
        0 => emu.group(emu.cur().pgid),
        p if p < 0 => emu.group(p.unsigned_abs() as Pid),
        // A zombie counts: the signal is then lost.
        p => emu.known_pid(p as u64).into_iter().collect(),
    };
    send(emu, &targets, sig, si_code::SI_USER)
}

/// Sends `sig` to thread `tid` alone, if it is alive and (with `tgid`) of process `tgid`.
fn send_thread(emu: &mut Emulator, tgid: Option<u64>, tid: u64, sig: u64) -> SysResult {
    if (sig != 0 && valid(sig).is_none()) || (tid as i64) <= 0 {
        return fail(EINVAL);
    }
    let owner = Pid::try_from(tid).ok().and_then(|t| emu.owner(t));
    if owner.filter(|&p| tgid.is_none_or(|g| u64::from(p) == g)).is_none() {
        // A zombie's leader is still there: the signal is lost.
        let zombie = emu.known_pid(tid).is_some() && tgid.is_none_or(|g| g == tid);
        return if zombie { ok(0) } else { fail(ESRCH) };
    }
    if let Some(sig) = valid(sig) {
        emu.post_thread_signal(tid as Pid, sig, si_code::SI_TKILL);
    }
    ok(0)
}

pub(super) fn tkill(emu: &mut Emulator, [tid, sig, ..]: [u64; 6]) -> SysResult {
    send_thread(emu, None, tid, sig)
}

pub(super) fn tgkill(emu: &mut Emulator, [tgid, tid, sig, ..]: [u64; 6]) -> SysResult {
    if (tgid as i64) <= 0 {
        return fail(EINVAL);
    }
    send_thread(emu, Some(tgid), tid, sig)
}

pub(super) fn pause(_emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    // Woken only by a signal, which ends the sleep with EINTR (run loop).
    block(None)
}

pub(super) fn rt_sigsuspend(emu: &mut Emulator, [set, size, ..]: [u64; 6]) -> SysResult {
    if size != SIGSET_SIZE {
        return fail(EINVAL);
    }
    if emu.retry.is_none() {
        // The mask while asleep; the old one comes back when the handler
        // returns (the signal frame saves it, `Signals::suspend_restore`).
        let mask = emu.read_uint(set, 8)?;
        emu.signals.suspend_restore = Some(emu.signals.blocked);
        emu.signals.blocked = mask & !UNBLOCKABLE;
    }
    block(None)
}

pub(super) fn sigaltstack(emu: &mut Emulator, [ss, old, ..]: [u64; 6]) -> SysResult {
    // The smallest MINSIGSTKSZ of the three (x86-64, s390x); AArch64's 5120
    // is not enforced.
    const MINSIGSTKSZ: u64 = 2048;
    // stack_t: ss_sp (8), ss_flags (int, 4, padded), ss_size (8).
    if old != 0 {
        let current = emu.reg(emu.info().sp)?;
        let (sp, flags, size) = match emu.altstack {
            None => (0, SS_DISABLE, 0),
            Some((base, size)) if current > base && current - base <= size => (base, SS_ONSTACK, size),
            Some((base, size)) => (base, 0, size),
        };
        emu.write_uint(old, 8, sp)?;
        emu.write_uint(old + 8, 4, flags)?;
        emu.write_uint(old + 16, 8, size)?;
    }
    if ss != 0 {
        let sp = emu.read_uint(ss, 8)?;
        let flags = emu.read_uint(ss + 8, 4)?;
        let size = emu.read_uint(ss + 16, 8)?;
        let current = emu.reg(emu.info().sp)?;
        if emu.altstack.is_some_and(|(base, size)| current > base && current - base <= size) {
            // The stack cannot be changed while running on it.
            return fail(EPERM);
        }
        emu.altstack = if flags & SS_DISABLE != 0 {
            None
        } else if flags & !SS_ONSTACK != 0 {
            return fail(EINVAL);
        } else if size < MINSIGSTKSZ {
            return fail(ENOMEM);
        } else if sp.checked_add(size).is_none() {
            return fail(EINVAL);
        } else {
            Some((sp, size))
        };
    }
    ok(0)
}

pub(super) fn rt_sigreturn(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    crate::linux::sigframe::sigreturn(emu, true)
}

pub(super) fn sigreturn(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    crate::linux::sigframe::sigreturn(emu, false)
}
