//! Loading a program: reading the ELF file, mapping its segments (and those
//! of the interpreter `PT_INTERP` names, as `fs/binfmt_elf.c` does), the
//! initial stack with arguments, environment and auxiliary vector, the page
//! with the sigreturn trampolines, the engine, and the CPU at the entry
//! point (the interpreter's, for a dynamic program).

use crate::error::Error;
use crate::linux::elf::{Image, Placement};
use crate::linux::emulator::Emulator;
use crate::linux::layout;
use crate::linux::proc_state::{Clock, Input, Output, Rng, Signals, Stdin, GID, UID};
use crate::linux::sigframe;
use crate::linux::stack::{self, at, StackSpec};
use crate::linux::syscall;
use crate::machine::hooks;
use crate::machine::memory::{page_down, page_up, Area, AreaKind, Perms};
use crate::machine::objects::{Backing, MappedFile};
use crate::machine::track::Tracking;
use std::collections::BTreeMap;
use std::rc::Rc;

/// How a program is started and what it is connected to.
#[derive(Debug, Clone)]
pub struct Config {
    /// `argv`, including `argv[0]` (default: the file name).
    pub args: Vec<Vec<u8>>,
    /// The environment, as `NAME=value` strings (default: empty).
    pub env: Vec<Vec<u8>>,
    /// Standard input.
    pub stdin: Stdin,
    /// Keep the guest's stdout and stderr bytes (see [`Emulator::stdout`]).
    pub capture_output: bool,
    /// Copy the guest's stdout and stderr to the host's as they are written.
    pub passthrough: bool,
    /// Seed for `AT_RANDOM` and `getrandom`.
    pub seed: u64,
    /// Virtual nanoseconds per instruction (the guest's clock rate).
    pub ns_per_insn: u64,
    /// What `readlink("/proc/self/exe")` answers (default: the file name made
    /// absolute; glibc insists on an absolute path).
    pub exe_path: Option<Vec<u8>>,
    /// Record every syscall as an [`Event::Syscall`](crate::Event::Syscall), with the strings its
    /// path arguments pointed to (read without faulting anything in), for
    /// traces.
    pub record_syscalls: bool,
    /// Numbers for system calls proposed upstream that have none yet, by
    /// name: `sframe_register` and `sframe_unregister` (RFC 2026). The
    /// emulator answers them `-ENOSYS`, as a kernel without them would, but
    /// traces them by name; a host that implements them (the lab's kernel
    /// model) replaces the result. Other names, and numbers of calls the
    /// emulator implements, are ignored.
    pub named_syscalls: Vec<(&'static str, u64)>,
    /// Files added to the guest's file system (its overlay) with these
    /// contents, by path (relative ones from [`Config::cwd`]).
    pub files: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The host directory the guest sees as `/`, read-only (`None`, the
    /// default: no host files at all, so runs do not depend on the machine;
    /// `unwindlab exec` uses `/`).
    pub root: Option<std::path::PathBuf>,
    /// Searched before the root, like qemu-user's `-L`. `None`: the
    /// architecture's Debian cross sysroot when there is a root that lacks
    /// the program's interpreter ([`crate::linux::fs::default_prefix`]);
    /// an empty path: none.
    pub prefix: Option<std::path::PathBuf>,
    /// The guest's working directory, absolute (default `/`).
    pub cwd: Option<Vec<u8>>,
    /// How closely execution is followed: instruction count, exact stops and
    /// ground truth need at least [`Tracking::Blocks`] (the default).
    pub tracking: Tracking,
    /// Instructions a process runs before the scheduler gives the CPU to the
    /// next one that can run (with [`Tracking::Off`] processes switch only
    /// when they block or end).
    pub quantum: u64,
    /// What the guest may take of the host (processes, memory, instructions).
    pub limits: crate::linux::proc_table::Limits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            args: Vec::new(),
            env: Vec::new(),
            stdin: Stdin::Empty,
            capture_output: true,
            passthrough: false,
            seed: 0,
            ns_per_insn: 1,
            exe_path: None,
            record_syscalls: false,
            named_syscalls: Vec::new(),
            files: BTreeMap::new(),
            root: None,
            prefix: None,
            cwd: None,
            tracking: Tracking::default(),
            quantum: 100_000,
            limits: crate::linux::proc_table::Limits::default(),
        }
    }
}

/// A program's interpreter, read and checked before the point of no return.
pub(crate) struct Interpreter {
    /// The file.
    file: Rc<MappedFile>,
    /// The bytes its segments span (what must be free to place it).
    span: u64,
}

impl Emulator {
    /// Reads the program at `path` and prepares it to run.
    pub fn load(path: impl AsRef<std::path::Path>, config: Config) -> Result<Emulator, Error> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| Error::Io { file: file.clone(), source })?;
        Emulator::new(&file, &bytes, config)
    }

    /// Prepares the program with contents `bytes` (named `file` in messages) to run.
    pub fn new(file: &str, bytes: &[u8], config: Config) -> Result<Emulator, Error> {
        let image = Image::parse(file, bytes)?;
        if image.interp.is_some() && config.root.is_none() && config.files.is_empty() {
            return Err(Error::Setup {
                file: file.to_string(),
                problem: "dynamically linked, but the guest has no file system to load its interpreter and \
                          libraries from (give it host files: a root, or files)"
                    .into(),
            });
        }
        let machine = crate::machine::arch::machine(image.arch);
        let fs = vfs_from_config(
            &config,
            machine.info().arch,
            config.exe_path.clone().unwrap_or_else(|| default_exe_path(file)),
            image.interp.as_deref(),
        );
        let uc = hooks::new_engine(machine, config.tracking, file, "start")?;
        let mut emu = Emulator {
            uc,
            machine,
            image,
            exit: None,
            brk_start: 0,
            brk: 0,
            stdin: Input::new(config.stdin.clone()),
            stdout: Output::new(1, config.capture_output, config.passthrough),
            stderr: Output::new(2, config.capture_output, config.passthrough),
            clock: Clock { ns_per_insn: config.ns_per_insn, slept_ns: 0 },
            rng: Rng::new(config.seed),
            signals: Signals::default(),
            events: Vec::new(),
            record_syscalls: config.record_syscalls,
            syscalls: syscall::number_map(machine.info().arch),
            unnumbered: syscall::unnumbered_map(machine.info().arch, &config.named_syscalls),
            fds: crate::linux::fs::FdTable::stdio(),
            fs,
            unknown_reported: std::collections::BTreeSet::new(),
            altstack: None,
            trampoline: 0,
            blocked: None,
            retry: None,
            pid: crate::linux::proc_table::FIRST_PID,
            task: crate::linux::proc_table::Task::new(
                crate::linux::proc_table::FIRST_PID,
                crate::linux::proc_table::comm(file.rsplit('/').next().unwrap_or_default().as_bytes()),
            ),
            procs: crate::linux::proc_table::first_process(),
            sched: crate::linux::proc_table::Sched {
                quantum: config.quantum.max(1),
                next_pid: crate::linux::proc_table::FIRST_PID + 1,
                ..Default::default()
            },
            limits: config.limits,
            mapped_files: BTreeMap::new(),
            pre_exec: None,
            probes: Rc::default(),
        };
        emu.fs.pid = u64::from(crate::linux::proc_table::FIRST_PID);
        let exe = emu.fs.exe.clone();
        if config.root.is_none() {
            // Without host files the program must still be there for
            // `execve("/proc/self/exe")`: at its /proc/self/exe path, in the overlay.
            if emu.fs.lookup(&exe, &emu.fds).is_none() {
                emu.fs.add_file(&exe, bytes, 0o755, crate::linux::proc_state::REALTIME_EPOCH_NS);
            }
        }
        let (dev, ino) = match emu.fs.lookup(&exe, &emu.fds) {
            Some(entry) => {
                let stat = emu.fs.stat(&exe, &entry);
                (stat.dev, stat.ino)
            }
            None => (0, 0),
        };
        let program = Rc::new(MappedFile::new(exe, dev, ino, Rc::from(bytes)));
        let image = emu.image.clone();
        let interp =
            emu.interpreter(&image).map_err(|(_, problem)| Error::Setup { file: file.to_string(), problem })?;
        let args = if config.args.is_empty() { vec![file.as_bytes().to_vec()] } else { config.args.clone() };
        emu.load_program(program, interp, &args, &config.env)?;
        Ok(emu)
    }

    /// Reads the interpreter `program` names, if any, from the guest's
    /// file system, before the point of no return of an `execve` (`Err`:
    /// the error number `execve` fails with, `ENOENT` or `ELIBBAD`, and why).
    pub(crate) fn interpreter(&mut self, program: &Image) -> Result<Option<Interpreter>, (i64, String)> {
        use crate::linux::abi::errno::ELIBBAD;
        let Some(name) = program.interp.clone() else { return Ok(None) };
        let shown = String::from_utf8_lossy(&name).into_owned();
        let file = match crate::linux::syscall::fs::program(self, crate::linux::abi::AT_FDCWD, &name) {
            Ok(file) => file,
            Err(crate::linux::abi::outcome::SysError::Errno(errno)) => {
                let why = crate::linux::abi::errno::name(errno).unwrap_or("error");
                let problem = format!(
                    "its interpreter {shown} cannot be opened in the guest's file system ({why}); \
                     give the architecture's libraries with a prefix (like qemu-user's -L)"
                );
                return Err((errno, problem));
            }
            Err(_) => return Err((ELIBBAD, format!("its interpreter {shown} cannot be read"))),
        };
        let image = Image::parse_at(&shown, &file.bytes, Placement::At(crate::linux::layout::MMAP_FLOOR))
            .map_err(|e| (ELIBBAD, format!("its interpreter: {e}")))?;
        if image.arch != program.arch {
            let problem = format!("its interpreter {shown} is an {} program, not {}", image.arch, program.arch);
            return Err((ELIBBAD, problem));
        }
        Ok(Some(Interpreter { file: Rc::new(file), span: image.span() }))
    }

    /// Maps the program `program` (already parsed into `self.image`) and
    /// its interpreter `interp` into the current engine, which has nothing
    /// mapped: segments, sigreturn trampolines, the initial stack with
    /// `args` and `env`; and points the CPU at the entry. Used by loading
    /// and by `execve`.
    pub(crate) fn load_program(
        &mut self,
        program: Rc<MappedFile>,
        interp: Option<Interpreter>,
        args: &[Vec<u8>],
        env: &[Vec<u8>],
    ) -> Result<(), Error> {
        let image = self.image.clone();
        self.load_segments(&image, &program)?;
        self.brk_start = page_up(self.image.end).unwrap_or(u64::MAX);
        self.brk = self.brk_start;
        // The interpreter goes where `mmap` would put it: the highest free
        // gap below the mmap base (`interpreter` checked it at the floor).
        let interp = match interp {
            Some(Interpreter { file, span }) => {
                let name = String::from_utf8_lossy(&file.path).into_owned();
                let base = self.pages().find_free(span, layout::MMAP_FLOOR, layout::MMAP_TOP).ok_or_else(|| {
                    Error::Setup { file: self.image.file.clone(), problem: "no room for the interpreter".into() }
                })?;
                let image = Image::parse_at(&name, &file.bytes, Placement::At(base))?;
                self.load_segments(&image, &file)?;
                Some((base, image.entry))
            }
            None => None,
        };
        self.trampoline = sigframe::map_trampoline(self)?;
        // AT_RANDOM takes the next 16 bytes of the seeded stream.
        let mut random = [0u8; 16];
        self.rng.fill(&mut random);
        let sp = self.build_stack(args, env, random, interp.map(|(base, _)| base))?;
        let entry = interp.map_or(self.image.entry, |(_, entry)| entry);
        self.machine.init_cpu(&mut self.uc, entry, sp).map_err(self.engine_error("set up the CPU"))?;
        self.report_objects(Vec::new());
        Ok(())
    }

    /// Maps the `PT_LOAD` segments of `image`, read from `file`: file pages
    /// non-resident (the guest has not touched them), the zeroed tail of the
    /// last file page resident (the kernel wrote it), pages past the file as
    /// zero-fill `.bss`.
    fn load_segments(&mut self, image: &Image, file: &Rc<MappedFile>) -> Result<(), Error> {
        let bytes = &file.bytes;
        for seg in &image.segments {
            let start = page_down(seg.vaddr);
            let file_end = seg.vaddr + seg.filesz;
            let file_pages_end = if seg.filesz == 0 { start } else { page_up(file_end).unwrap_or(u64::MAX) };
            let end = page_up(seg.vaddr + seg.memsz).unwrap_or(u64::MAX).max(file_pages_end);
            if file_pages_end > start {
                let first = seg.offset - (seg.vaddr - start);
                let backing = Backing { file: file.clone(), offset: first };
                self.map(Area { start, end: file_pages_end, perms: seg.perms, kind: AreaKind::File(backing) })?;
                // Whole file pages, as mmap of the file would show them.
                let last = (first + (file_pages_end - start)).min(bytes.len() as u64);
                self.uc.mem_write(start, &bytes[first as usize..last as usize]).map_err(self.engine_error("load"))?;
                if seg.memsz > seg.filesz && file_end < file_pages_end {
                    let zeros = vec![0u8; (file_pages_end - file_end) as usize];
                    self.uc.mem_write(file_end, &zeros).map_err(self.engine_error("load"))?;
                    self.pages_mut().mark_resident(file_end, zeros.len() as u64);
                }
            }
            if end > file_pages_end {
                self.map(Area { start: file_pages_end, end, perms: seg.perms, kind: AreaKind::Bss })?;
            }
        }
        Ok(())
    }

    /// Maps the stack and writes the initial stack; returns the initial SP.
    /// `interp_base` is where the interpreter was loaded (`AT_BASE`).
    fn build_stack(
        &mut self,
        args: &[Vec<u8>],
        env: &[Vec<u8>],
        random: [u8; 16],
        interp_base: Option<u64>,
    ) -> Result<u64, Error> {
        let info = self.info();
        let mut aux = vec![
            (at::PHDR, self.image.phdr),
            (at::PHENT, self.image.phent),
            (at::PHNUM, self.image.phnum),
            (at::PAGESZ, crate::machine::memory::PAGE_SIZE),
            (at::BASE, interp_base.unwrap_or(0)),
            (at::FLAGS, 0),
            (at::ENTRY, self.image.entry),
            (at::UID, UID),
            (at::EUID, UID),
            (at::GID, GID),
            (at::EGID, GID),
            (at::SECURE, 0),
            (at::HWCAP, info.hwcap),
            (at::HWCAP2, 0),
            (at::CLKTCK, 100),
        ];
        if let Some(size) = sigframe::min_stack(info.arch) {
            aux.push((at::MINSIGSTKSZ, size));
        }
        let spec = StackSpec {
            endian: info.endian,
            top: layout::STACK_TOP,
            args,
            env,
            execfn: &args[0],
            platform: info.platform.as_bytes(),
            random,
            aux: &aux,
        };
        // Linux allows arguments and environment up to a quarter of the stack.
        let image = stack::build(&spec, layout::STACK_SIZE / 4).ok_or_else(|| Error::Setup {
            file: self.image.file.clone(),
            problem: "arguments and environment do not fit on the stack".into(),
        })?;
        self.map(Area {
            start: layout::STACK_BOTTOM,
            end: layout::STACK_TOP,
            perms: Perms::RW,
            kind: AreaKind::Stack,
        })?;
        self.uc.mem_write(image.sp, &image.bytes).map_err(self.engine_error("write the initial stack"))?;
        self.pages_mut().mark_resident(image.sp, image.bytes.len() as u64);
        Ok(image.sp)
    }
}

/// The file name made absolute, as the kernel reports `/proc/self/exe`.
fn default_exe_path(file: &str) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt as _;
    match std::path::absolute(file) {
        Ok(path) => path.as_os_str().as_bytes().to_vec(),
        Err(_) => [b"/", file.as_bytes()].concat(),
    }
}

/// Whether the host directory `root` holds guest path `path` (symbolic
/// links followed as the host follows them: Debian's are relative).
fn in_root(root: &std::path::Path, path: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    root.join(std::ffi::OsStr::from_bytes(path.strip_prefix(b"/").unwrap_or(path))).exists()
}

/// The file system `config` asks for, for a guest of `arch` whose
/// `/proc/self/exe` is `exe` and whose program names the interpreter
/// `interp`, with the configuration's files added.
fn vfs_from_config(
    config: &Config,
    arch: kmodel::arch::Arch,
    exe: Vec<u8>,
    interp: Option<&[u8]>,
) -> crate::linux::fs::Vfs {
    let prefix = match (&config.prefix, &config.root) {
        (Some(p), _) if p.as_os_str().is_empty() => None,
        (Some(p), _) => Some(p.clone()),
        // A root that holds the program's interpreter is a whole system
        // (Debian's arm64 tree): its libraries come with that ld.so, so no
        // cross sysroot goes before it. Searched first, the cross package's
        // ld.so ran with the root's libc.so.6, two builds of glibc whose
        // private layouts differ (`_rtld_global`, Debian 12's 2.36-8 cross
        // package against 2.36-9+deb12u14): xz -T2 spun forever in
        // pthread_create() on AArch64 and s390x.
        (None, Some(root)) if interp.is_some_and(|i| in_root(root, i)) => None,
        (None, Some(_)) => crate::linux::fs::default_prefix(arch),
        (None, None) => None,
    };
    let cwd = config.cwd.clone().unwrap_or_else(|| b"/".to_vec());
    let mut fs = crate::linux::fs::Vfs::new(config.root.clone(), prefix, cwd, exe);
    for (path, data) in &config.files {
        fs.add_file(path, data, 0o644, crate::linux::proc_state::REALTIME_EPOCH_NS);
    }
    fs
}
