//! A process's life: creating one (`clone`, `fork`, `vfork`), replacing its
//! program (`execve`, `execveat`), and reaping children (`wait4`, `waitid`).
//! The process table and the scheduler are `sched.rs`; copying a process
//! is `fork.rs`.

use crate::linux::abi::errno::{E2BIG, ECHILD, EFAULT, EINVAL, ELOOP, ENOEXEC, ENOMEM};
use crate::linux::abi::outcome::{block, fail, ok, Outcome, SysError, SysResult};
use crate::linux::abi::{
    __WALL, __WCLONE, __WNOTHREAD, CLONE_CHILD_CLEARTID, CLONE_CHILD_SETTID, CLONE_FILES, CLONE_FS, CLONE_PARENT,
    CLONE_PARENT_SETTID, CLONE_SETTLS, CLONE_SIGHAND, CLONE_SYSVSEM, CLONE_THREAD, CLONE_VFORK, CLONE_VM, CSIGNAL,
    P_ALL, P_PGID, P_PID, WCONTINUED, WEXITED, WNOHANG, WNOWAIT, WUNTRACED,
};
use crate::linux::elf::Image;
use crate::linux::emulator::{Emulator, Exit};
use crate::linux::proc_state::{SigAction, SIG_IGN};
use crate::linux::proc_table::{Life, Pid, ProcessEvent};
use crate::machine::bytes;
use std::rc::Rc;

/// What a child without `CLONE_THREAD` can be asked for here. `CLONE_VM`
/// comes only with `CLONE_VFORK` (glibc's `posix_spawn`): the child gets a
/// copy, which is indistinguishable as long as it only execs or exits.
const SUPPORTED: u64 = CSIGNAL
    | CLONE_VM
    | CLONE_FS
    | CLONE_SIGHAND
    | CLONE_VFORK
    | CLONE_SYSVSEM
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_CLEARTID
    | CLONE_CHILD_SETTID;

/// What a thread (`CLONE_THREAD`) can be asked for: what glibc's
/// `pthread_create` asks for on every architecture. The new thread shares
/// the process's memory, descriptors, working directory and signal
/// dispositions whatever the flags say.
const THREAD_SUPPORTED: u64 = CLONE_VM
    | CLONE_FS
    | CLONE_FILES
    | CLONE_SIGHAND
    | CLONE_THREAD
    | CLONE_SYSVSEM
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_CLEARTID
    | CLONE_CHILD_SETTID;

pub(super) fn clone(emu: &mut Emulator, args: [u64; 6]) -> SysResult {
    let [flags, newsp, ptid, ctid, tls] = emu.info().clone_args.map(|i| args[i]);
    create(emu, flags, newsp, ptid, ctid, tls)
}

/// Bytes of `struct clone_args` in its first version (`CLONE_ARGS_SIZE_VER0`).
const CLONE_ARGS_SIZE_VER0: u64 = 64;

/// `clone3(struct clone_args *, size)`: the same as `clone` with the
/// arguments in a structure (eight `u64`s: flags, pidfd, child_tid,
/// parent_tid, exit_signal, stack, stack_size, tls; then set_tid,
/// set_tid_size, cgroup, which must be unused here).
pub(super) fn clone3(emu: &mut Emulator, [args, size, ..]: [u64; 6]) -> SysResult {
    // `copy_struct_from_user()`'s rules: too small is EINVAL, over a page
    // E2BIG, and bytes past the structure this kernel knows must be zero.
    if size < CLONE_ARGS_SIZE_VER0 {
        return fail(EINVAL);
    }
    if size > 4096 {
        return fail(E2BIG);
    }
    let mut words = [0u64; 11];
    for (i, word) in words.iter_mut().enumerate().take((size / 8) as usize) {
        *word = emu.read_uint(args + 8 * i as u64, 8)?;
    }
    let known = 8 * words.len() as u64;
    if size > known {
        let mut rest = vec![0u8; (size - known) as usize];
        emu.read(args + known, &mut rest, kmodel::memory::Access::Faultable)?;
        if rest.iter().any(|&b| b != 0) {
            return fail(E2BIG);
        }
    }
    let [flags, _pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup] =
        words;
    if set_tid != 0 || set_tid_size != 0 || cgroup != 0 {
        emu.warn("clone3: set_tid and cgroup not supported".into());
        return fail(EINVAL);
    }
    // The exit signal has its own field; the flags' low byte must be clear,
    // and a thread or a CLONE_PARENT child has no exit signal of its own.
    if flags & CSIGNAL != 0
        || exit_signal > u64::from(crate::linux::signal::NSIG)
        || (flags & (CLONE_THREAD | CLONE_PARENT) != 0 && exit_signal != 0)
    {
        return fail(EINVAL);
    }
    if (stack == 0) != (stack_size == 0) {
        return fail(EINVAL);
    }
    // The stack grows down on all three: it starts at its top.
    let sp = stack.wrapping_add(stack_size);
    create(emu, flags | exit_signal, sp, parent_tid, child_tid, tls)
}

pub(super) fn fork(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    create(emu, u64::from(crate::linux::signal::SIGCHLD), 0, 0, 0, 0)
}

pub(super) fn vfork(emu: &mut Emulator, _: [u64; 6]) -> SysResult {
    create(emu, CLONE_VM | CLONE_VFORK | u64::from(crate::linux::signal::SIGCHLD), 0, 0, 0, 0)
}

/// Writes a 32-bit TID at `addr` in `uc`'s memory, if mapped writable there.
fn put_tid(emu: &mut Emulator, pid: Pid, addr: u64) -> Result<(), SysError> {
    let mut buf = [0u8; 4];
    bytes::put(emu.endian(), &mut buf, u64::from(pid));
    let child = emu.procs.get_mut(&pid).and_then(|p| p.parked.as_mut()).ok_or(SysError::Errno(EFAULT))?;
    let pages = &child.uc.get_data().pages;
    pages.check(addr, 4, crate::machine::memory::AccessKind::Write, kmodel::memory::Access::Faultable)?;
    child.uc.mem_write(addr, &buf).map_err(|_| SysError::Errno(EFAULT))
}

/// A new thread of the current process (`pthread_create`).
fn create_thread(emu: &mut Emulator, flags: u64, newsp: u64, ptid: u64, ctid: u64, tls: u64) -> SysResult {
    // Linux's own rules: a thread shares the signal handlers, which need the memory shared.
    if flags & CLONE_SIGHAND == 0 || flags & CLONE_VM == 0 {
        return fail(EINVAL);
    }
    // Legacy clone's exit-signal byte is ignored for a thread, as Linux does.
    if flags & !CSIGNAL & !THREAD_SUPPORTED != 0 {
        let unsupported = crate::linux::abi::args::spell(
            crate::linux::abi::args::CLONE_FLAGS,
            flags & !CSIGNAL & !THREAD_SUPPORTED,
            emu.arch(),
        );
        emu.warn(format!("clone: flags {unsupported} not supported for a thread"));
        return fail(EINVAL);
    }
    if flags & (CLONE_FS | CLONE_FILES) != CLONE_FS | CLONE_FILES {
        emu.warn("clone: a thread without CLONE_FS or CLONE_FILES shares them anyway".into());
    }
    emu.check_process_limit()?;
    let tls = (flags & CLONE_SETTLS != 0).then_some(tls);
    let clear = if flags & CLONE_CHILD_CLEARTID != 0 { ctid } else { 0 };
    let tid = emu.add_thread(newsp, tls, clear)?;
    // One memory: each write is seen by both threads.
    if flags & CLONE_PARENT_SETTID != 0 {
        emu.write_uint(ptid, 4, u64::from(tid))?;
    }
    if flags & CLONE_CHILD_SETTID != 0 {
        emu.write_uint(ctid, 4, u64::from(tid))?;
    }
    ok(u64::from(tid))
}

fn create(emu: &mut Emulator, flags: u64, newsp: u64, ptid: u64, ctid: u64, tls: u64) -> SysResult {
    if flags & CLONE_THREAD != 0 {
        return create_thread(emu, flags, newsp, ptid, ctid, tls);
    }
    if flags & CLONE_VM != 0 && flags & CLONE_VFORK == 0 {
        emu.warn(
            "clone: CLONE_VM without CLONE_VFORK or CLONE_THREAD (memory shared between processes) is not supported"
                .into(),
        );
        return fail(EINVAL);
    }
    if flags & !SUPPORTED != 0 {
        let unsupported =
            crate::linux::abi::args::spell(crate::linux::abi::args::CLONE_FLAGS, flags & !SUPPORTED, emu.arch());
        emu.warn(format!("clone: flags {unsupported} not supported"));
        return fail(EINVAL);
    }
    emu.check_process_limit()?;
    if !emu.may_expand(emu.pages().mapped(), "fork") {
        return fail(ENOMEM);
    }
    let mut child = emu.copy_for_fork()?;
    let info = emu.info();
    let err = emu.engine_error("set up a child");
    if newsp != 0 {
        child.uc.reg_write(info.sp, newsp).map_err(&err)?;
    }
    if flags & CLONE_SETTLS != 0 {
        emu.machine.set_tls(&mut child.uc, tls).map_err(&err)?;
    }
    if flags & CLONE_CHILD_CLEARTID != 0 {
        child.task.clear_child_tid = ctid;
    }
    let pid = emu.add_process(child, (flags & CSIGNAL) as u32);
    if flags & CLONE_CHILD_SETTID != 0 {
        put_tid(emu, pid, ctid)?;
    }
    if flags & CLONE_PARENT_SETTID != 0 {
        // Both copies: the memory is "shared" until the child execs.
        put_tid(emu, pid, ptid)?;
        emu.write_uint(ptid, 4, u64::from(pid))?;
    }
    if flags & CLONE_VFORK != 0 {
        // The calling thread waits (its siblings run on).
        let caller = emu.task.tid;
        if let Some(child) = emu.procs.get_mut(&pid) {
            child.vfork_parent = Some(caller);
        }
    }
    ok(u64::from(pid))
}

/// Most bytes of arguments and environment (a quarter of the stack, as Linux allows).
const ARG_MAX: usize = (crate::linux::layout::STACK_SIZE / 4) as usize;

/// The strings of a NULL-terminated array of pointers (`argv`, `envp`);
/// a null array is empty. `used` counts bytes against [`ARG_MAX`].
fn strings(emu: &mut Emulator, array: u64, used: &mut usize) -> Result<Vec<Vec<u8>>, SysError> {
    let mut out = Vec::new();
    if array == 0 {
        return Ok(out);
    }
    loop {
        let ptr = emu.read_uint(array + 8 * out.len() as u64, 8)?;
        if ptr == 0 {
            return Ok(out);
        }
        let s = emu.read_cstr(ptr, ARG_MAX - *used)?.ok_or(SysError::Errno(E2BIG))?;
        *used += s.len() + 1 + 8;
        if *used > ARG_MAX {
            return Err(SysError::Errno(E2BIG));
        }
        out.push(s);
    }
}

/// The interpreter line of a `#!` script: the interpreter and its one optional argument.
fn shebang(data: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let line = data.strip_prefix(b"#!")?;
    // The kernel reads at most this much of the line (BINPRM_BUF_SIZE).
    let line = &line[..line.len().min(254)];
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = line.iter().position(|b| !blank(b))?;
    let line = &line[start..];
    let end = line.iter().position(blank).unwrap_or(line.len());
    let (interp, rest) = line.split_at(end);
    let rest: Vec<u8> = rest.iter().copied().skip_while(blank).collect();
    let arg = rest.iter().rposition(|b| !blank(b)).map(|last| rest[..=last].to_vec());
    Some((interp.to_vec(), arg))
}

pub(super) fn execve(emu: &mut Emulator, [path, argv, envp, ..]: [u64; 6]) -> SysResult {
    exec(emu, crate::linux::abi::AT_FDCWD, path, argv, envp)
}

pub(super) fn execveat(emu: &mut Emulator, [dirfd, path, argv, envp, flags, ..]: [u64; 6]) -> SysResult {
    if flags != 0 {
        emu.warn(format!("execveat: flags {flags:#x} not supported"));
        return fail(EINVAL);
    }
    exec(emu, dirfd, path, argv, envp)
}

fn exec(emu: &mut Emulator, dirfd: u64, path: u64, argv: u64, envp: u64) -> SysResult {
    let mut path = emu.read_cstr(path, 4096)?.ok_or(SysError::Errno(crate::linux::abi::errno::ENAMETOOLONG))?;
    let mut used = 0;
    let mut args = strings(emu, argv, &mut used)?;
    let env = strings(emu, envp, &mut used)?;
    let mut program = super::fs::program(emu, dirfd, &path)?;
    let as_called = path.clone();
    // Scripts: the interpreter runs with the script's path (up to the kernel's depth).
    for _ in 0..4 {
        let Some((interp, arg)) = shebang(&program.bytes) else { break };
        let mut new_args = vec![interp.clone()];
        new_args.extend(arg);
        new_args.push(path.clone());
        new_args.extend(args.into_iter().skip(1));
        args = new_args;
        program = super::fs::program(emu, crate::linux::abi::AT_FDCWD, &interp)?;
        path = interp;
    }
    if program.bytes.starts_with(b"#!") {
        return fail(ELOOP);
    }
    let file = String::from_utf8_lossy(&program.path).into_owned();
    let image = match Image::parse(&file, &program.bytes) {
        Ok(image) if image.arch == emu.arch() => image,
        Ok(image) => {
            emu.warn(format!("execve {file}: an {} program cannot run on {}", image.arch, emu.arch()));
            return fail(ENOEXEC);
        }
        Err(e) => {
            emu.warn(format!("execve: {e}"));
            return fail(ENOEXEC);
        }
    };
    if args.is_empty() {
        // Linux adds an empty argv[0] rather than start a program without one.
        args.push(Vec::new());
    }
    // The interpreter is opened before the point of no return, as by
    // `load_elf_binary`: a missing one fails the call.
    let interp = match emu.interpreter(&image) {
        Ok(interp) => interp,
        Err((errno, problem)) => {
            emu.warn(format!("execve {file}: {problem}"));
            return fail(errno);
        }
    };
    emu.image = image;
    // The point of no return: the old program is gone, and with it the
    // other threads (`de_thread`); the caller takes the leader's ID.
    emu.kill_other_threads();
    let (pid, old_tid) = (emu.pid, emu.task.tid);
    if old_tid != pid {
        let me = emu.cur_mut();
        me.threads.remove(&old_tid);
        me.threads.insert(pid, None);
    }
    // begin_new_exec(): the thread is named after the file as the call
    // named it (a script's, not its interpreter's).
    let name = as_called.rsplit(|&b| b == b'/').next().unwrap_or_default();
    emu.task = crate::linux::proc_table::Task::new(pid, crate::linux::proc_table::comm(name));
    let before = emu.objects();
    let base = emu.icount();
    let new = crate::machine::hooks::new_engine(emu.machine, emu.tracking(), &file, "start")?;
    // Kept until the run goes on: what the kernel still sees of the old mm
    // while de_thread() takes the other threads through their exits.
    emu.pre_exec = Some(std::mem::replace(&mut emu.uc, new));
    emu.sched.base = base;
    emu.sched.start = 0;
    emu.altstack = None;
    for action in emu.signals.actions.iter_mut() {
        if action.handler != SIG_IGN {
            *action = SigAction::default();
        }
    }
    let closing: Vec<u64> = emu.fds.numbers().filter(|&fd| emu.fds.get(fd).is_some_and(|d| d.cloexec)).collect();
    for fd in closing {
        emu.fds.remove(fd);
    }
    emu.fs.exe = program.path.clone();
    emu.report_objects(before);
    emu.load_program(Rc::new(program), interp, &args, &env)?;
    let me = emu.cur_mut();
    me.execed = true;
    me.vfork_parent = None;
    emu.sched.events.push_back(ProcessEvent::Exec { pid, tid: old_tid, path: as_called });
    Ok(Outcome::Resume)
}

/// Which children a wait is for.
#[derive(Debug, Clone, Copy)]
enum Which {
    Any,
    Pid(Pid),
    Group(Pid),
}

/// The children of the current process that `which` selects, in pid
/// order, and the first of them that has ended.
fn children(emu: &Emulator, which: Which) -> (usize, Option<(Pid, Exit)>) {
    let me = emu.pid;
    let mine = emu.procs.iter().filter(|(&pid, p)| {
        p.ppid == me
            && match which {
                Which::Any => true,
                Which::Pid(want) => pid == want,
                Which::Group(g) => p.pgid == g,
            }
    });
    let mut count = 0;
    let mut ended = None;
    for (&pid, p) in mine {
        count += 1;
        if let (None, Life::Zombie(exit)) = (ended, p.life) {
            ended = Some((pid, exit));
        }
    }
    (count, ended)
}

/// The `wait` status word of `exit`.
fn status_word(exit: Exit) -> u64 {
    match exit {
        Exit::Code(code) => ((code as u64) & 0xff) << 8,
        Exit::Signal { signal, .. } => u64::from(signal & 0x7f),
    }
}

/// Bytes of `struct rusage` on every 64-bit architecture (all zero here).
const RUSAGE_SIZE: usize = 144;

pub(super) fn wait4(emu: &mut Emulator, [pid, status, options, rusage, ..]: [u64; 6]) -> SysResult {
    let pid = pid as i64;
    let which = match pid {
        -1 => Which::Any,
        0 => Which::Group(emu.cur().pgid),
        p if p < 0 => Which::Group(p.unsigned_abs() as Pid),
        p => Which::Pid(p as Pid),
    };
    if options & !(WNOHANG | WUNTRACED | WCONTINUED | __WNOTHREAD | __WALL | __WCLONE) != 0 {
        return fail(EINVAL);
    }
    let (count, ended) = children(emu, which);
    if count == 0 {
        return fail(ECHILD);
    }
    let Some((child, exit)) = ended else {
        return if options & WNOHANG != 0 { ok(0) } else { block(None) };
    };
    if status != 0 {
        emu.write_uint(status, 4, status_word(exit))?;
    }
    if rusage != 0 {
        emu.write(rusage, &[0; RUSAGE_SIZE])?;
    }
    emu.procs.remove(&child);
    ok(u64::from(child))
}

pub(super) fn waitid(emu: &mut Emulator, [idtype, id, infop, options, rusage, ..]: [u64; 6]) -> SysResult {
    let which = match idtype {
        P_ALL => Which::Any,
        P_PID if id > 0 => Which::Pid(id as Pid),
        P_PGID if id == 0 => Which::Group(emu.cur().pgid),
        P_PGID => Which::Group(id as Pid),
        _ => return fail(EINVAL),
    };
    if options & WEXITED == 0 {
        // Only ended children can be waited for here: nothing stops or continues.
        return fail(EINVAL);
    }
    let (count, ended) = children(emu, which);
    if count == 0 {
        return fail(ECHILD);
    }
    let mut info = bytes::GuestStruct::new(emu.endian(), crate::linux::sigframe::SIGINFO_SIZE);
    let Some((child, exit)) = ended else {
        if options & WNOHANG == 0 {
            return block(None);
        }
        if infop != 0 {
            emu.write(infop, &info.into_bytes())?;
        }
        return ok(0);
    };
    // CLD_EXITED with the code, or CLD_KILLED with the signal.
    let (code, value) = match exit {
        Exit::Code(c) => (1, (c as u64) & 0xff),
        Exit::Signal { signal, .. } => (2, u64::from(signal)),
    };
    if infop != 0 {
        info.set(0, 4, u64::from(crate::linux::signal::SIGCHLD)).set(8, 4, code).set(16, 4, u64::from(child));
        info.set(20, 4, crate::linux::proc_state::UID).set(24, 4, value);
        emu.write(infop, &info.into_bytes())?;
    }
    if rusage != 0 {
        emu.write(rusage, &[0; RUSAGE_SIZE])?;
    }
    if options & WNOWAIT == 0 {
        emu.procs.remove(&child);
    }
    ok(0)
}
