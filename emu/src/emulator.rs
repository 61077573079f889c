//! The emulator: a loaded program, its engine and its kernel state, and the
//! deterministic run loop.

use crate::arch::{Arch, ArchInfo, Machine};
use crate::bytes::{self, Endian};
use crate::elf::{Image, Located};
use crate::engine::{self, Engine, Trap};
use crate::error::Error;
use crate::layout;
use crate::memory::{page_down, page_up, AccessKind, Area, AreaKind, MemFault, PageStats, PageTable, Perms};
use crate::process::{Clock, Input, Output, Rng, Signals, Stdin};
use crate::shadow::ShadowStack;
use crate::sigframe::{self, si_code, Cause};
use crate::signal;
use crate::stack::{self, at, StackSpec};
use crate::syscall::{self, SyscallRecord};
use crate::track::{self, Tracker, Tracking};
use kmodel::memory::Access;
use std::collections::BTreeMap;
use unicorn_engine::{uc_error, Prot};

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
    /// Record every syscall as an [`Event::Syscall`], with the strings its
    /// path arguments pointed to (read without faulting anything in), for
    /// traces.
    pub record_syscalls: bool,
    /// Files added to the guest's file system (its overlay) with these
    /// contents, by path (relative ones from [`Config::cwd`]).
    pub files: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The host directory the guest sees as `/`, read-only (`None`, the
    /// default: no host files at all, so runs do not depend on the machine;
    /// `unwindlab exec` uses `/`).
    pub root: Option<std::path::PathBuf>,
    /// Searched before the root, like qemu-user's `-L`. `None`: the
    /// architecture's Debian cross sysroot when there is a root
    /// ([`crate::fs::default_prefix`]); an empty path: none.
    pub prefix: Option<std::path::PathBuf>,
    /// The guest's working directory, absolute (default `/`).
    pub cwd: Option<Vec<u8>>,
    /// How closely execution is followed: instruction count, exact stops and
    /// ground truth need at least [`Tracking::Blocks`] (the default).
    pub tracking: Tracking,
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
            files: BTreeMap::new(),
            root: None,
            prefix: None,
            cwd: None,
            tracking: Tracking::default(),
        }
    }
}

/// How a guest process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `exit`/`exit_group` with this status (the low 8 bits, as a parent sees it).
    Code(i32),
    /// Killed by a signal.
    Signal {
        /// The signal number.
        signal: u32,
        /// The refused memory access behind a SIGSEGV, if that was the cause.
        fault: Option<MemFault>,
        /// PC when the signal was raised.
        pc: u64,
    },
}

impl Exit {
    /// The status a shell reports: the exit code, or 128 + the signal number.
    pub fn shell_status(&self) -> i32 {
        match *self {
            Exit::Code(code) => code,
            Exit::Signal { signal, .. } => 128 + signal as i32,
        }
    }
}

/// Where [`Emulator::run`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunLimit {
    /// Stop before executing instruction number `n`, i.e. when [`Emulator::icount`] is `n`.
    pub until_icount: Option<u64>,
    /// Stop after each serviced system call.
    pub after_syscall: bool,
}

impl RunLimit {
    /// Run until the process ends.
    pub fn to_exit() -> Self {
        RunLimit::default()
    }

    /// Run until the instruction count reaches `icount`.
    pub fn icount(icount: u64) -> Self {
        RunLimit { until_icount: Some(icount), after_syscall: false }
    }

    /// Also stop after each system call.
    pub fn and_syscalls(self) -> Self {
        RunLimit { after_syscall: true, ..self }
    }
}

/// Why [`Emulator::run`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The instruction count reached the limit.
    Limit,
    /// A system call was serviced (only with [`RunLimit::after_syscall`]).
    Syscall(SyscallRecord),
    /// The process has ended.
    Exit(Exit),
}

/// Something worth knowing that happened during a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A serviced system call (recorded with [`Config::record_syscalls`]).
    Syscall(SyscallRecord),
    /// A system call the emulator does not implement; the guest got `-ENOSYS`.
    UnknownSyscall {
        /// Its number.
        nr: u64,
        /// Its name, when it is a call the emulator knows of but does not implement.
        name: Option<&'static str>,
        /// Instruction count at the call.
        icount: u64,
        /// PC after the call instruction.
        pc: u64,
    },
    /// A request the emulator only partly honours (named in the message).
    Warning {
        /// Instruction count at the time.
        icount: u64,
        /// What happened.
        message: String,
    },
}

/// A snapshot of the general registers in an architecture-neutral form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regs {
    /// Architecture, which gives the meaning of [`Regs::gprs`].
    pub arch: Arch,
    /// Program counter.
    pub pc: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer (rbp, x29, r11).
    pub fp: u64,
    /// Link register (x30, r14); `None` on x86-64, where the return address is on the stack.
    pub ra: Option<u64>,
    /// Thread pointer.
    pub tls: u64,
    /// General registers by DWARF register number (names in [`ArchInfo::gpr_names`]).
    pub gprs: Vec<u64>,
    /// Registers after the GPRs in DWARF numbering that unwind rules may
    /// name: s390x f0–f15 as DWARF 16–31 (leaf functions park %r11 and %r14
    /// in them); empty elsewhere.
    pub extra: Vec<u64>,
}

/// A static Linux program running under emulation.
pub struct Emulator {
    pub(crate) uc: Engine,
    pub(crate) machine: &'static dyn Machine,
    pub(crate) image: Image,
    pub(crate) exit: Option<Exit>,
    pub(crate) brk_start: u64,
    pub(crate) brk: u64,
    pub(crate) stdin: Input,
    pub(crate) stdout: Output,
    pub(crate) stderr: Output,
    pub(crate) clock: Clock,
    pub(crate) rng: Rng,
    pub(crate) signals: Signals,
    pub(crate) events: Vec<Event>,
    pub(crate) record_syscalls: bool,
    /// Syscall number → row of the syscall table, for this architecture.
    pub(crate) syscalls: Vec<Option<u16>>,
    /// Open file descriptors.
    pub(crate) fds: crate::fs::FdTable,
    /// The file system the guest sees.
    pub(crate) fs: crate::fs::Vfs,
    /// Unknown syscall numbers already reported (each is reported once).
    pub(crate) unknown_reported: std::collections::BTreeSet<u64>,
    /// The alternate signal stack `(base, size)`, if one is set.
    pub(crate) altstack: Option<(u64, u64)>,
    /// Address of the page with the sigreturn trampolines.
    pub(crate) trampoline: u64,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("file", &self.image.file)
            .field("arch", &self.arch())
            .field("icount", &self.icount())
            .field("exit", &self.exit)
            .finish_non_exhaustive()
    }
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
        let machine = crate::arch::machine(image.arch);
        let engine_err = |what| move |err| Error::Engine { file: file.to_string(), what, err };
        let tracker = Tracker::new(image.arch, config.tracking).map_err(|err| Error::Setup {
            file: file.to_string(),
            problem: format!("cannot set up the instruction decoder: {err}"),
        })?;
        let uc = engine::create(machine, tracker).map_err(engine_err("start"))?;
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
            fds: crate::fs::FdTable::stdio(),
            fs: crate::fs::Vfs::from_config(
                &config,
                machine.info().arch,
                config.exe_path.clone().unwrap_or_else(|| default_exe_path(file)),
            ),
            unknown_reported: std::collections::BTreeSet::new(),
            altstack: None,
            trampoline: 0,
        };
        emu.load_segments(bytes)?;
        emu.trampoline = sigframe::map_trampoline(&mut emu)?;
        // AT_RANDOM takes the first 16 bytes of the seeded stream.
        let mut random = [0u8; 16];
        emu.rng.fill(&mut random);
        let sp = emu.build_stack(&config, random)?;
        let entry = emu.image.entry;
        machine.init_cpu(&mut emu.uc, entry, sp).map_err(engine_err("set up the CPU"))?;
        Ok(emu)
    }

    /// Wraps an engine error with the program's name and what was being done.
    pub(crate) fn engine_error(&self, what: &'static str) -> impl Fn(uc_error) -> Error + 'static {
        let file = self.image.file.clone();
        move |err| Error::Engine { file: file.clone(), what, err }
    }

    /// Drops cached translations after a change of the memory map, so the
    /// TLB-fill hook sees the guest's next access to every page.
    pub(crate) fn flush_tlb(&mut self) -> Result<(), Error> {
        self.uc.ctl_flush_tlb().map_err(self.engine_error("flush the TLB"))
    }

    /// Maps the `PT_LOAD` segments: file pages non-resident (the guest has
    /// not touched them), the zeroed tail of the last file page resident (the
    /// kernel wrote it), pages past the file as zero-fill `.bss`.
    fn load_segments(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let segments = self.image.segments.clone();
        for seg in &segments {
            let start = page_down(seg.vaddr);
            let file_end = seg.vaddr + seg.filesz;
            let file_pages_end = if seg.filesz == 0 { start } else { page_up(file_end).unwrap_or(u64::MAX) };
            let end = page_up(seg.vaddr + seg.memsz).unwrap_or(u64::MAX).max(file_pages_end);
            if file_pages_end > start {
                self.map(Area { start, end: file_pages_end, perms: seg.perms, kind: AreaKind::Image })?;
                // Whole file pages, as mmap of the file would show them.
                let first = seg.offset - (seg.vaddr - start);
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
        self.brk_start = page_up(self.image.end).unwrap_or(u64::MAX);
        self.brk = self.brk_start;
        Ok(())
    }

    /// Maps the stack and writes the initial stack; returns the initial SP.
    fn build_stack(&mut self, config: &Config, random: [u8; 16]) -> Result<u64, Error> {
        let info = self.info();
        let args = if config.args.is_empty() { vec![self.image.file.as_bytes().to_vec()] } else { config.args.clone() };
        let aux = [
            (at::PHDR, self.image.phdr),
            (at::PHENT, self.image.phent),
            (at::PHNUM, self.image.phnum),
            (at::PAGESZ, crate::memory::PAGE_SIZE),
            (at::BASE, 0),
            (at::FLAGS, 0),
            (at::ENTRY, self.image.entry),
            (at::UID, syscall::UID),
            (at::EUID, syscall::UID),
            (at::GID, syscall::GID),
            (at::EGID, syscall::GID),
            (at::SECURE, 0),
            (at::HWCAP, info.hwcap),
            (at::HWCAP2, 0),
            (at::CLKTCK, 100),
        ];
        let spec = StackSpec {
            endian: info.endian,
            top: layout::STACK_TOP,
            args: &args,
            env: &config.env,
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

    // ---- memory map changes -------------------------------------------------

    /// Maps `area` with zero-filled contents, replacing whatever was there
    /// (like `MAP_FIXED`).
    pub(crate) fn map(&mut self, area: Area) -> Result<(), Error> {
        self.unmap(area.start, area.end)?;
        // Physical memory mirrors the mapped areas one to one (identity mapped);
        // permissions are enforced by the TLB-fill hook, so it is all RWX here.
        self.uc.mem_map(area.start, area.end - area.start, Prot::ALL).map_err(self.engine_error("map memory"))?;
        self.pages_mut().insert(area);
        self.flush_tlb()
    }

    /// Unmaps `start..end` (holes allowed).
    pub(crate) fn unmap(&mut self, start: u64, end: u64) -> Result<(), Error> {
        let removed = self.pages_mut().remove(start, end);
        if removed.is_empty() {
            return Ok(());
        }
        for (s, e) in removed {
            self.uc.mem_unmap(s, e - s).map_err(self.engine_error("unmap memory"))?;
        }
        self.code_may_have_changed();
        self.flush_tlb()
    }

    /// Changes the permissions of `start..end`; `false` if it is not all mapped.
    pub(crate) fn protect(&mut self, start: u64, end: u64, perms: Perms) -> Result<bool, Error> {
        if !self.pages_mut().protect(start, end, perms) {
            return Ok(false);
        }
        // A program that generates code makes it executable this way.
        self.code_may_have_changed();
        self.flush_tlb()?;
        Ok(true)
    }

    /// Drops decoded instructions: memory that held code was unmapped,
    /// replaced or made executable, so an address may now hold other code.
    fn code_may_have_changed(&mut self) {
        self.uc.get_data_mut().tracker.forget_code();
    }

    /// Grows the area ending at `old_end` to `new_end` (the heap), keeping it
    /// one area; `false` if something else is in the way.
    pub(crate) fn grow(&mut self, old_end: u64, new_end: u64) -> Result<bool, Error> {
        if !self.pages().is_free(old_end, new_end) || self.pages().area(old_end - 1).is_none() {
            return Ok(false);
        }
        self.uc.mem_map(old_end, new_end - old_end, Prot::ALL).map_err(self.engine_error("map memory"))?;
        self.pages_mut().extend(old_end, new_end);
        self.flush_tlb()?;
        Ok(true)
    }

    // ---- guest memory as the kernel side sees it ------------------------------

    /// The page table (areas, residency, fault counts).
    pub fn pages(&self) -> &PageTable {
        &self.uc.get_data().pages
    }

    pub(crate) fn pages_mut(&mut self) -> &mut PageTable {
        &mut self.uc.get_data_mut().pages
    }

    /// Page-fault and eviction counters.
    pub fn page_stats(&self) -> PageStats {
        self.pages().stats()
    }

    /// Reads guest memory as the kernel would: [`Access::Faultable`] brings
    /// non-resident pages in (counted), [`Access::NoFault`] fails on
    /// them and changes nothing. Either fails, without side effects, on
    /// unmapped or unreadable memory.
    pub fn read(&mut self, addr: u64, buf: &mut [u8], mode: Access) -> Result<(), MemFault> {
        self.pages().check(addr, buf.len() as u64, AccessKind::Read, mode)?;
        if mode == Access::Faultable {
            self.pages_mut().fault_in(addr, buf.len() as u64);
        }
        self.uc.mem_read(addr, buf).map_err(|_| MemFault::Unmapped { addr })
    }

    /// Reads guest memory without faulting and without needing `&mut self`
    /// (an [`Access::NoFault`] read).
    pub fn read_nofault(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        self.pages().check(addr, buf.len() as u64, AccessKind::Read, Access::NoFault)?;
        self.uc.mem_read(addr, buf).map_err(|_| MemFault::Unmapped { addr })
    }

    /// Writes guest memory as the kernel would (`copy_to_user`): the range must
    /// be mapped writable; non-resident pages are brought in and counted.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemFault> {
        self.pages().check(addr, data.len() as u64, AccessKind::Write, Access::Faultable)?;
        self.pages_mut().fault_in(addr, data.len() as u64);
        self.uc.mem_write(addr, data).map_err(|_| MemFault::Unmapped { addr })
    }

    /// Makes the pages of `addr..addr + len` non-resident (contents are kept);
    /// returns how many were resident.
    pub fn evict(&mut self, addr: u64, len: u64) -> Result<u64, Error> {
        let end = addr.saturating_add(len);
        let evicted = self.pages_mut().evict(addr, end);
        // Drop cached translations so the guest's next touch faults again.
        self.flush_tlb()?;
        Ok(evicted)
    }

    /// A [`sframe::ByteSource`] over `len` bytes of guest memory at `base`.
    pub fn view(&mut self, base: u64, len: u64, mode: Access) -> crate::view::GuestView<'_> {
        crate::view::GuestView::new(self, base, len, mode)
    }

    /// Reads `len` bytes (faultable).
    pub(crate) fn read_vec(&mut self, addr: u64, len: u64) -> Result<Vec<u8>, MemFault> {
        // Check before allocating: `len` comes from the guest.
        self.pages().check(addr, len, AccessKind::Read, Access::Faultable)?;
        let mut buf = vec![0u8; len as usize];
        self.read(addr, &mut buf, Access::Faultable)?;
        Ok(buf)
    }

    /// Reads an unsigned integer of `width` bytes in the guest's byte order (faultable).
    pub(crate) fn read_uint(&mut self, addr: u64, width: usize) -> Result<u64, MemFault> {
        let mut buf = [0u8; 8];
        self.read(addr, &mut buf[..width], Access::Faultable)?;
        Ok(bytes::get(self.endian(), &buf[..width]))
    }

    /// Writes an unsigned integer of `width` bytes in the guest's byte order.
    pub(crate) fn write_uint(&mut self, addr: u64, width: usize, value: u64) -> Result<(), MemFault> {
        let mut buf = [0u8; 8];
        bytes::put(self.endian(), &mut buf[..width], value);
        self.write(addr, &buf[..width])
    }

    /// Reads a NUL-terminated string of at most `max` bytes (faultable); `None` if too long.
    pub(crate) fn read_cstr(&mut self, addr: u64, max: usize) -> Result<Option<Vec<u8>>, MemFault> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            // Read up to the end of the page, so an unmapped next page is not touched.
            let chunk = (page_down(at) + crate::memory::PAGE_SIZE - at).min((max - out.len()) as u64);
            let bytes = self.read_vec(at, chunk)?;
            if let Some(nul) = bytes.iter().position(|&b| b == 0) {
                out.extend_from_slice(&bytes[..nul]);
                return Ok(Some(out));
            }
            out.extend_from_slice(&bytes);
            at += chunk;
        }
        Ok(None)
    }

    // ---- registers and state -------------------------------------------------

    /// The architecture.
    pub fn arch(&self) -> Arch {
        self.machine.info().arch
    }

    pub(crate) fn info(&self) -> &'static ArchInfo {
        self.machine.info()
    }

    pub(crate) fn endian(&self) -> Endian {
        self.info().endian
    }

    /// The loaded program.
    pub fn image(&self) -> &Image {
        &self.image
    }

    /// The `PT_GNU_SFRAME` segment, at its load address.
    pub fn sframe(&self) -> Option<Located> {
        self.image.sframe
    }

    /// Instructions executed so far: those that completed (one that faults
    /// counts when it runs again and completes). Always 0 with [`Tracking::Off`].
    pub fn icount(&self) -> u64 {
        self.tracker().icount
    }

    /// How closely execution is followed ([`Config::tracking`]).
    pub fn tracking(&self) -> Tracking {
        self.tracker().mode
    }

    fn tracker(&self) -> &Tracker {
        &self.uc.get_data().tracker
    }

    /// The ground truth: the return addresses of the calls in progress, as an
    /// exact unwinder lists them after the current PC, innermost first. A
    /// signal handler's frame contributes its sigreturn trampoline and then
    /// the interrupted PC (see [`ShadowStack::return_addresses`]). Empty with
    /// [`Tracking::Off`].
    pub fn ground_truth(&self) -> Vec<u64> {
        self.tracker().stack.return_addresses()
    }

    /// The ground-truth stack itself, frame by frame (`None` with [`Tracking::Off`]).
    pub fn shadow_stack(&self) -> Option<&ShadowStack> {
        (self.tracking() != Tracking::Off).then(|| &self.tracker().stack)
    }

    /// The per-instruction reference for [`Emulator::ground_truth`]
    /// (only with [`Tracking::Instructions`]).
    pub fn reference_ground_truth(&self) -> Option<Vec<u64>> {
        Some(self.tracker().reference.as_ref()?.stack.return_addresses())
    }

    /// The per-instruction reference for [`Emulator::icount`]: instructions
    /// counted one by one as they complete (only with [`Tracking::Instructions`]).
    pub fn reference_icount(&self) -> Option<u64> {
        Some(self.tracker().reference.as_ref()?.icount)
    }

    /// Turns blocks the decoder could not read into warnings (their
    /// instruction count may be off).
    fn report_undecodable(&mut self) {
        let tracker = &mut self.uc.get_data_mut().tracker;
        if tracker.undecodable.is_empty() {
            return;
        }
        for addr in std::mem::take(&mut tracker.undecodable) {
            self.warn(format!("cannot decode all the code at {addr:#x}; it counts as one instruction"));
        }
    }

    /// Nanoseconds of virtual time since the start.
    pub fn virtual_time_ns(&self) -> u64 {
        self.clock.elapsed_ns(self.icount())
    }

    /// The current heap break.
    pub fn brk(&self) -> u64 {
        self.brk
    }

    /// How the process ended, once it has.
    pub fn exit_status(&self) -> Option<Exit> {
        self.exit
    }

    /// Everything the guest wrote to stdout (with [`Config::capture_output`]).
    pub fn stdout(&self) -> &[u8] {
        &self.stdout.captured
    }

    /// Everything the guest wrote to stderr (with [`Config::capture_output`]).
    pub fn stderr(&self) -> &[u8] {
        &self.stderr.captured
    }

    /// Events so far.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Removes and returns the events so far.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    pub(crate) fn warn(&mut self, message: String) {
        let icount = self.icount();
        self.events.push(Event::Warning { icount, message });
    }

    /// The general registers.
    pub fn regs(&self) -> Result<Regs, Error> {
        let info = self.info();
        let read = |reg: i32| self.uc.reg_read(reg).map_err(self.engine_error("read a register"));
        let gprs = info.gprs.iter().map(|&reg| read(reg)).collect::<Result<Vec<_>, _>>()?;
        let extra = info.extra_dwarf.iter().map(|&reg| read(reg)).collect::<Result<Vec<_>, _>>()?;
        Ok(Regs {
            arch: info.arch,
            pc: read(info.pc)?,
            sp: read(info.sp)?,
            fp: read(info.fp)?,
            ra: info.ra.map(read).transpose()?,
            tls: self.machine.tls(&self.uc).map_err(self.engine_error("read the thread pointer"))?,
            gprs,
            extra,
        })
    }

    pub(crate) fn reg(&self, reg: i32) -> Result<u64, Error> {
        self.uc.reg_read(reg).map_err(self.engine_error("read a register"))
    }

    pub(crate) fn set_reg(&mut self, reg: i32, value: u64) -> Result<(), Error> {
        let file = self.image.file.clone();
        self.uc.reg_write(reg, value).map_err(|err| Error::Engine { file, what: "write a register", err })
    }

    pub(crate) fn set_tls(&mut self, value: u64) -> Result<(), Error> {
        let file = self.image.file.clone();
        self.machine.set_tls(&mut self.uc, value).map_err(|err| Error::Engine {
            file,
            what: "set the thread pointer",
            err,
        })
    }

    // ---- running -------------------------------------------------------------

    /// Runs until `limit`, the end of the process, or (if asked) a syscall.
    ///
    /// Runs are deterministic: the same program, configuration and sequence of
    /// limits give the same stops, registers and instruction counts.
    ///
    /// Instruction-count limits need [`Tracking::Blocks`] or more.
    pub fn run(&mut self, limit: RunLimit) -> Result<Stop, Error> {
        if limit.until_icount.is_some() && self.tracking() == Tracking::Off {
            return Err(Error::Setup {
                file: self.image.file.clone(),
                problem: "instruction-count limits need instruction tracking".into(),
            });
        }
        let stop_at = limit.until_icount.unwrap_or(u64::MAX);
        loop {
            if let Some(exit) = self.exit {
                return Ok(Stop::Exit(exit));
            }
            if self.icount() >= stop_at {
                return Ok(Stop::Limit);
            }
            if self.deliver_pending_signals()? {
                continue;
            }
            let shared = self.uc.get_data_mut();
            shared.tracker.stop_at = stop_at;
            shared.trap = None;
            // A stop inside a block: run that block alone up to the stop (see `track`).
            let cut = shared.tracker.cut.take();
            let pc = self.reg(self.info().pc)?;
            // Only translations covering the block's first instruction are
            // dropped: the cut run must not find one; those starting later in
            // the block (where earlier stops resumed) stay valid.
            let until = match cut {
                Some(cut) => {
                    self.uc
                        .ctl_remove_cache(cut.start, cut.start.saturating_add(1))
                        .map_err(self.engine_error("drop a translation"))?;
                    cut.at
                }
                // Unicorn always has an exit address; 0 is never code.
                None => 0,
            };
            let result = self.uc.emu_start(pc, until, 0, 0);
            track::finish_run(&mut self.uc);
            if let Some(cut) = cut {
                // The translation that ends at the exit address must not be reused.
                self.uc
                    .ctl_remove_cache(cut.start, cut.start.saturating_add(1))
                    .map_err(self.engine_error("drop a translation"))?;
            }
            self.report_undecodable();
            let shared = self.uc.get_data_mut();
            let trap = shared.trap.take();
            if let Some(err) = shared.hook_error.take() {
                return Err(self.engine_error("handle a trap")(err));
            }
            if let (Some(cut), None, Ok(())) = (cut, trap, result) {
                if self.icount() != stop_at {
                    return Err(Error::Setup {
                        file: self.image.file.clone(),
                        problem: format!(
                            "the engine did not stop at instruction {stop_at} (at {:#x}) but after {}",
                            cut.at,
                            self.icount()
                        ),
                    });
                }
                continue;
            }
            match (trap, result) {
                (Some(Trap::Syscall(nr)), _) => {
                    let record = syscall::dispatch(self, nr)?;
                    if limit.after_syscall {
                        return Ok(Stop::Syscall(record));
                    }
                }
                (Some(Trap::Interrupt(intno)), _) => {
                    let sig = self.machine.interrupt_signal(intno);
                    let code = match sig {
                        signal::SIGTRAP => si_code::TRAP_BRKPT,
                        signal::SIGFPE => si_code::FPE_INTDIV,
                        signal::SIGSEGV => si_code::SEGV_MAPERR,
                        _ => si_code::ILL_ILLOPC,
                    };
                    let pc = self.reg(self.info().pc)?;
                    self.raise_synchronous(sig, Cause::Fault(code, pc))?;
                }
                (None, Ok(())) => {
                    let cut_pending = self.tracker().cut.is_some();
                    if self.icount() < stop_at && !cut_pending {
                        // The engine stopped without a reason: the guest jumped to
                        // address 0, which Unicorn treats as the end of the run.
                        let pc = self.reg(self.info().pc)?;
                        self.pages_mut().record_fault(Some(MemFault::Unmapped { addr: pc }));
                        self.raise_synchronous(signal::SIGSEGV, Cause::Fault(si_code::SEGV_MAPERR, pc))?;
                    }
                }
                (None, Err(uc_error::INSN_INVALID)) => {
                    let pc = self.reg(self.info().pc)?;
                    self.raise_synchronous(signal::SIGILL, Cause::Fault(si_code::ILL_ILLOPC, pc))?;
                }
                (
                    None,
                    Err(
                        uc_error::EXCEPTION
                        | uc_error::READ_UNMAPPED
                        | uc_error::WRITE_UNMAPPED
                        | uc_error::FETCH_UNMAPPED
                        | uc_error::READ_PROT
                        | uc_error::WRITE_PROT
                        | uc_error::FETCH_PROT
                        | uc_error::READ_UNALIGNED
                        | uc_error::WRITE_UNALIGNED
                        | uc_error::FETCH_UNALIGNED,
                    ),
                ) => {
                    let cause = match self.pages().last_fault() {
                        Some(MemFault::Protection { addr, .. }) => Cause::Fault(si_code::SEGV_ACCERR, addr),
                        Some(fault) => Cause::Fault(si_code::SEGV_MAPERR, fault.addr()),
                        None => Cause::Fault(si_code::SEGV_MAPERR, 0),
                    };
                    self.raise_synchronous(signal::SIGSEGV, cause)?;
                }
                (None, Err(err)) => return Err(self.engine_error("run the guest")(err)),
            }
        }
    }

    /// Runs the process to its end.
    pub fn run_to_exit(&mut self) -> Result<Exit, Error> {
        match self.run(RunLimit::to_exit())? {
            Stop::Exit(exit) => Ok(exit),
            // Neither a limit nor syscall stops were asked for.
            Stop::Limit | Stop::Syscall(_) => unreachable!("run without limits stopped early"),
        }
    }

    /// A fault or trap raised `sig` for the current instruction: its handler
    /// runs if it has one and it is not blocked; otherwise the process dies
    /// (Linux's `force_sig`).
    fn raise_synchronous(&mut self, sig: u32, cause: Cause) -> Result<(), Error> {
        let handler = self.signals.actions[sig as usize].handler;
        let blocked = self.signals.blocked & crate::process::sig_bit(sig) != 0;
        if handler == crate::process::SIG_DFL || handler == crate::process::SIG_IGN || blocked {
            return self.terminate(sig);
        }
        sigframe::deliver(self, sig, cause)
    }

    /// Makes signal `sig` pending, as `kill()` from another process would;
    /// it is delivered when the guest next runs (if not blocked).
    pub fn send_signal(&mut self, sig: u32) -> Result<(), Error> {
        if !(1..=64).contains(&sig) {
            return Err(Error::Setup { file: self.image.file.clone(), problem: format!("no signal {sig}") });
        }
        self.signals.pending |= crate::process::sig_bit(sig);
        Ok(())
    }

    /// Delivers the lowest pending, unblocked signal; `true` if the guest's
    /// state changed (a handler was entered or the process ended).
    fn deliver_pending_signals(&mut self) -> Result<bool, Error> {
        let ready = self.signals.pending & !self.signals.blocked;
        if ready == 0 {
            return Ok(false);
        }
        let sig = ready.trailing_zeros() + 1;
        self.signals.pending &= !crate::process::sig_bit(sig);
        let code = self.signals.sent_code[sig as usize];
        match self.signals.actions[sig as usize].handler {
            crate::process::SIG_IGN => Ok(false),
            crate::process::SIG_DFL => match signal::default_action(sig) {
                signal::DefaultAction::Terminate => {
                    self.terminate(sig)?;
                    Ok(true)
                }
                signal::DefaultAction::Ignore | signal::DefaultAction::StopOrContinue => Ok(false),
            },
            _ => {
                sigframe::deliver(self, sig, Cause::Sent(code))?;
                Ok(true)
            }
        }
    }

    pub(crate) fn terminate(&mut self, sig: u32) -> Result<(), Error> {
        let pc = self.reg(self.info().pc)?;
        let fault = if sig == signal::SIGSEGV { self.pages().last_fault() } else { None };
        self.exit = Some(Exit::Signal { signal: sig, fault, pc });
        Ok(())
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
