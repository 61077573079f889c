//! Process identity, limits, thread set-up and exit.

use crate::linux::abi::errno::{EAGAIN, EFAULT, EINVAL, ENOSYS, ESRCH, ETIMEDOUT};
use crate::linux::abi::outcome::{block, fail, ok, Outcome, SysError, SysResult};
use crate::linux::abi::{
    ARCH_GET_FS, ARCH_SET_FS, CLOCK_MONOTONIC, CLOCK_REALTIME, FUTEX_CLOCK_REALTIME, FUTEX_CMD_MASK, FUTEX_CMP_REQUEUE,
    FUTEX_REQUEUE, FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_WAKE, FUTEX_WAKE_BITSET, PR_GET_NAME, PR_SET_NAME, RLIMIT_CORE,
    RLIMIT_NOFILE, RLIMIT_STACK,
};
use crate::linux::emulator::Emulator;
use crate::linux::proc_state::{GID, UID};
use crate::linux::proc_table::{comm, Pid, COMM};
use crate::machine::arch::Arch;

/// `exit_group`: every thread of the process ends.
pub(super) fn exit(_emu: &mut Emulator, [status, ..]: [u64; 6]) -> SysResult {
    // A parent sees only the low 8 bits.
    Ok(Outcome::Exit((status & 0xff) as i32))
}

/// `exit`: the calling thread ends; the last one's end is its process's.
pub(super) fn exit_thread(emu: &mut Emulator, args: [u64; 6]) -> SysResult {
    if emu.cur().threads.len() <= 1 {
        return exit(emu, args);
    }
    // `mm_release`: whoever joins the thread sleeps on this word.
    let addr = emu.task.clear_child_tid;
    if addr != 0 && emu.write_uint(addr, 4, 0).is_ok() {
        emu.futex_wake(addr, 1, u32::MAX);
    }
    let (pid, tid) = (emu.pid, emu.task.tid);
    let exit = crate::linux::proc_table::Exit::Code((args[0] & 0xff) as i32);
    emu.sched.events.push_back(crate::linux::proc_table::ProcessEvent::ThreadExit { pid, tid, exit, regs: None });
    emu.sched.thread_exited = true;
    Ok(Outcome::ThreadExit)
}

pub(super) fn getpid(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    ok(u64::from(emu.pid))
}

pub(super) fn gettid(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    ok(u64::from(emu.task.tid))
}

pub(super) fn getppid(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    // The first process's parent, and an orphan's reaper, is outside: init.
    ok(u64::from(emu.parent(emu.pid).unwrap_or(1)))
}

pub(super) fn getuid(_emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    ok(UID)
}

pub(super) fn getgid(_emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    ok(GID)
}

pub(super) fn sched_yield(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    // The run loop gives the CPU to the next thread (if there is one).
    emu.sched.yielded = true;
    ok(0)
}

pub(super) fn set_tid_address(emu: &mut Emulator, [addr, ..]: [u64; 6]) -> SysResult {
    emu.task.clear_child_tid = addr;
    ok(u64::from(emu.task.tid))
}

pub(super) fn set_robust_list(emu: &mut Emulator, [head, len, ..]: [u64; 6]) -> SysResult {
    // struct robust_list_head is three pointers on every 64-bit architecture.
    if len != 24 {
        return fail(EINVAL);
    }
    emu.task.robust_list = (head, len);
    ok(0)
}

pub(super) fn rseq(_emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    // As a kernel before 4.18: restartable sequences are unknown; glibc
    // then runs without them (sched_getcpu asks the kernel).
    fail(ENOSYS)
}

pub(super) fn uname(emu: &mut Emulator, [buf, ..]: [u64; 6]) -> SysResult {
    const FIELD: usize = 65;
    let machine = emu.arch().name();
    let fields: [&str; 6] = ["Linux", "unwindlab", "6.1.0", "#1 SMP unwindlab", machine, "(none)"];
    let mut out = vec![0u8; 6 * FIELD];
    for (i, field) in fields.iter().enumerate() {
        out[i * FIELD..][..field.len()].copy_from_slice(field.as_bytes());
    }
    emu.write(buf, &out)?;
    ok(0)
}

/// The soft limit on open descriptors (`RLIMIT_NOFILE`).
pub(super) const NOFILE: u64 = 1024;

/// `(soft, hard)` limit for `resource`.
fn limit(resource: u64) -> (u64, u64) {
    const INFINITY: u64 = u64::MAX;
    match resource {
        RLIMIT_STACK => (crate::linux::layout::STACK_SIZE, INFINITY),
        RLIMIT_CORE => (0, INFINITY),
        RLIMIT_NOFILE => (NOFILE, 1 << 20),
        _ => (INFINITY, INFINITY),
    }
}

/// Number of resource kinds (`RLIM_NLIMITS`).
const RLIM_NLIMITS: u64 = 16;

fn write_limit(emu: &mut Emulator, resource: u64, addr: u64) -> SysResult {
    let (soft, hard) = limit(resource);
    emu.write_uint(addr, 8, soft)?;
    emu.write_uint(addr + 8, 8, hard)?;
    ok(0)
}

pub(super) fn getrlimit(emu: &mut Emulator, [resource, addr, ..]: [u64; 6]) -> SysResult {
    if resource >= RLIM_NLIMITS {
        return fail(EINVAL);
    }
    write_limit(emu, resource, addr)
}

pub(super) fn prlimit64(emu: &mut Emulator, [pid, resource, new, old, ..]: [u64; 6]) -> SysResult {
    if target(emu, pid).is_none() {
        return fail(ESRCH);
    }
    if resource >= RLIM_NLIMITS {
        return fail(EINVAL);
    }
    if new != 0 {
        emu.warn(format!("prlimit64: new limit for resource {resource} ignored"));
    }
    if old != 0 {
        write_limit(emu, resource, old)?;
    }
    ok(0)
}

pub(super) fn arch_prctl(emu: &mut Emulator, [code, addr, ..]: [u64; 6]) -> SysResult {
    debug_assert_eq!(emu.arch(), Arch::X86_64, "arch_prctl exists only on x86-64");
    match code {
        ARCH_SET_FS => {
            emu.set_tls(addr)?;
            ok(0)
        }
        ARCH_GET_FS => {
            let tls = emu.regs()?.tls;
            emu.write_uint(addr, 8, tls)?;
            ok(0)
        }
        _ => {
            emu.warn(format!("arch_prctl code {code:#x} not supported"));
            fail(EINVAL)
        }
    }
}

/// `prctl`: the thread's name (`PR_SET_NAME`, `PR_GET_NAME`: 16 bytes with
/// the terminating NUL, as `comm`), which glibc's `pthread_setname_np` and
/// programs use. Every other option is `EINVAL`, as from a kernel without
/// it: a host with a kernel model (the lab) answers the options the model
/// implements itself, at the call's stop ([`Emulator::set_syscall_return`]).
pub(super) fn prctl(emu: &mut Emulator, [option, arg2, ..]: [u64; 6]) -> SysResult {
    match option {
        PR_SET_NAME => {
            // strncpy_from_user() of at most 15 bytes: a longer name is cut.
            let (name, _) = crate::linux::emulator::scan_cstr(arg2, COMM - 1, |at, len| emu.read_vec(at, len))
                .map_err(|_| SysError::Errno(EFAULT))?;
            emu.task.comm = comm(&name);
            ok(0)
        }
        PR_GET_NAME => {
            let name = emu.task.comm;
            emu.write(arg2, &name)?;
            ok(0)
        }
        _ => fail(EINVAL),
    }
}

/// `futex`: waits queue in `Sched::futexes` (oldest first) keyed by the
/// process and the address, private or not (processes share no memory
/// here); a wait blocks and is retried until a wake marks it, its timeout
/// (on the virtual clock) passes, or a signal interrupts it.
pub(super) fn futex(emu: &mut Emulator, [uaddr, op, val, timeout, uaddr2, val3]: [u64; 6]) -> SysResult {
    let cmd = op & FUTEX_CMD_MASK;
    match cmd {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let bitset = if cmd == FUTEX_WAIT { u32::MAX } else { val3 as u32 };
            if bitset == 0 || uaddr % 4 != 0 {
                return fail(EINVAL);
            }
            if let Some(retry) = emu.retry {
                return futex_wait_again(emu, retry.deadline);
            }
            let current = emu.read_uint(uaddr, 4).map_err(|_| SysError::Errno(EFAULT))?;
            // `val` is a u32, already narrowed.
            if current != val {
                return fail(EAGAIN);
            }
            let deadline = match timeout {
                0 => None,
                t => {
                    let Some(ns) = super::time::read_duration(emu, t, 1)? else { return fail(EINVAL) };
                    // FUTEX_WAIT_BITSET's timeout is absolute, on CLOCK_MONOTONIC
                    // unless FUTEX_CLOCK_REALTIME; FUTEX_WAIT's is relative.
                    let relative = if cmd == FUTEX_WAIT {
                        ns
                    } else {
                        let clock = if op & FUTEX_CLOCK_REALTIME != 0 { CLOCK_REALTIME } else { CLOCK_MONOTONIC };
                        ns.saturating_sub(super::time::now_ns(emu, clock).unwrap_or(0))
                    };
                    Some(emu.now_ns().saturating_add(relative))
                }
            };
            if deadline.is_some_and(|d| d <= emu.now_ns()) {
                return fail(ETIMEDOUT);
            }
            if deadline.is_none() && emu.cur().threads.len() <= 1 {
                // Nobody could ever wake a lone thread: Linux would hang;
                // answering EAGAIN lets the guest go on, with a warning.
                emu.warn("futex wait with no other thread to wake it".into());
                return fail(EAGAIN);
            }
            let (pid, tid) = (emu.pid, emu.task.tid);
            emu.sched.futexes.push(crate::linux::proc_table::FutexWaiter {
                pid,
                tid,
                addr: uaddr,
                bitset,
                woken: false,
            });
            block(deadline)
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            let bitset = if cmd == FUTEX_WAKE { u32::MAX } else { val3 as u32 };
            if bitset == 0 {
                return fail(EINVAL);
            }
            ok(emu.futex_wake(uaddr, val, bitset))
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => {
            if cmd == FUTEX_CMP_REQUEUE {
                let current = emu.read_uint(uaddr, 4).map_err(|_| SysError::Errno(EFAULT))?;
                if current != val3 & 0xffff_ffff {
                    return fail(EAGAIN);
                }
            }
            let woken = emu.futex_wake(uaddr, val, u32::MAX);
            // The timeout argument is `val2`: how many to move (a u32).
            let limit = u64::from(timeout as u32);
            // Waiters never have an empty bitset (FUTEX_WAIT_BITSET refuses one).
            let mut moved = 0;
            for w in emu.futex_waiters(uaddr, limit, u32::MAX) {
                w.addr = uaddr2;
                moved += 1;
            }
            ok(woken + moved)
        }
        cmd => {
            emu.warn(format!("futex operation {cmd} not supported"));
            fail(ENOSYS)
        }
    }
}

/// A futex wait runs again: done if a wake chose it, `ETIMEDOUT` past its
/// deadline, else it sleeps on.
fn futex_wait_again(emu: &mut Emulator, deadline: Option<u64>) -> SysResult {
    let tid = emu.task.tid;
    let Some(at) = emu.sched.futexes.iter().position(|w| w.tid == tid) else {
        // No longer queued (its process changed under it): a spurious wake-up.
        return ok(0);
    };
    if emu.sched.futexes[at].woken {
        emu.sched.futexes.remove(at);
        return ok(0);
    }
    if deadline.is_some_and(|d| emu.now_ns() >= d) {
        emu.sched.futexes.remove(at);
        return fail(ETIMEDOUT);
    }
    block(deadline)
}

pub(super) fn sched_getaffinity(emu: &mut Emulator, [pid, len, mask, ..]: [u64; 6]) -> SysResult {
    if thread_target(emu, pid).is_none() {
        return fail(ESRCH);
    }
    if len < 8 || len % 8 != 0 {
        return fail(EINVAL);
    }
    // One CPU: bit 0 of the first word.
    emu.write_uint(mask, 8, 1)?;
    ok(8)
}

pub(super) fn getrandom(emu: &mut Emulator, [buf, len, ..]: [u64; 6]) -> SysResult {
    // Linux returns at most this much per call.
    let len = len.min(33_554_431);
    emu.pages().check(buf, len, crate::machine::memory::AccessKind::Write, kmodel::memory::Access::Faultable)?;
    let mut bytes = vec![0u8; len as usize];
    emu.rng.fill(&mut bytes);
    emu.write(buf, &bytes)?;
    ok(len)
}

pub(super) fn sysinfo(emu: &mut Emulator, [info, ..]: [u64; 6]) -> SysResult {
    // struct sysinfo on 64-bit: uptime, loads[3], six memory sizes, procs
    // (u16) at 80, totalhigh, freehigh, mem_unit (u32) at 104; 112 bytes.
    // Fixed figures: the host's would make runs differ.
    let uptime = emu.clock.elapsed_ns(emu.icount()) / crate::linux::proc_state::NS_PER_SEC;
    let mut out = crate::machine::bytes::GuestStruct::new(emu.endian(), 112);
    out.set(0, 8, uptime).set(32, 8, 1 << 30).set(40, 8, 1 << 29).set(64, 8, 0).set(80, 2, 1).set(104, 4, 1);
    emu.write(info, &out.into_bytes())?;
    ok(0)
}

/// The process `pid` names (0: the caller), if it exists.
fn target(emu: &Emulator, pid: u64) -> Option<Pid> {
    match pid {
        0 => Some(emu.pid),
        p => emu.known_pid(p),
    }
}

/// The process of the thread `tid` names (0: the caller), if it exists
/// (calls that take a thread ID: `sched_getaffinity`).
fn thread_target(emu: &Emulator, tid: u64) -> Option<Pid> {
    target(emu, tid).or_else(|| Pid::try_from(tid).ok().and_then(|t| emu.owner(t)))
}

pub(super) fn getpgrp(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    ok(u64::from(emu.cur().pgid))
}

pub(super) fn getpgid(emu: &mut Emulator, [pid, ..]: [u64; 6]) -> SysResult {
    match target(emu, pid) {
        Some(p) => ok(u64::from(emu.procs[&p].pgid)),
        None => fail(ESRCH),
    }
}

pub(super) fn getsid(emu: &mut Emulator, [pid, ..]: [u64; 6]) -> SysResult {
    match target(emu, pid) {
        Some(p) => ok(u64::from(emu.procs[&p].sid)),
        None => fail(ESRCH),
    }
}

pub(super) fn setpgid(emu: &mut Emulator, [pid, pgid, ..]: [u64; 6]) -> SysResult {
    if (pgid as i64) < 0 {
        return fail(EINVAL);
    }
    // The caller or one of its children (`kernel/sys.c`'s rules).
    let Some(who) = target(emu, pid).filter(|&p| p == emu.pid || emu.procs[&p].ppid == emu.pid) else {
        return fail(ESRCH);
    };
    let me = emu.cur();
    let (my_sid, my_pid) = (me.sid, emu.pid);
    let p = &emu.procs[&who];
    if who != my_pid && (p.execed || p.sid != my_sid) {
        return fail(if p.execed { crate::linux::abi::errno::EACCES } else { crate::linux::abi::errno::EPERM });
    }
    if p.sid == who {
        // A session leader stays in its group.
        return fail(crate::linux::abi::errno::EPERM);
    }
    let pgid = if pgid == 0 { who } else { pgid as Pid };
    // Joining a group needs one in the same session.
    if pgid != who && !emu.procs.values().any(|q| q.pgid == pgid && q.sid == my_sid) {
        return fail(crate::linux::abi::errno::EPERM);
    }
    emu.procs.get_mut(&who).expect("checked above").pgid = pgid;
    ok(0)
}

pub(super) fn setsid(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    let pid = emu.pid;
    // A group leader cannot start a session: its group would span two.
    if emu.procs.values().any(|p| p.pgid == pid) {
        return fail(crate::linux::abi::errno::EPERM);
    }
    let me = emu.cur_mut();
    me.sid = pid;
    me.pgid = pid;
    ok(u64::from(pid))
}

#[cfg(test)]
mod tests {
    use crate::linux::proc_table::comm;

    #[test]
    fn a_thread_name_is_cut_to_15_bytes_and_nul_padded() {
        assert_eq!(&comm(b"worker")[..], b"worker\0\0\0\0\0\0\0\0\0\0");
        assert_eq!(&comm(b"a-very-long-thread-name")[..], b"a-very-long-thr\0");
        assert_eq!(comm(b""), [0; 16]);
    }
}
