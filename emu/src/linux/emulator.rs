//! The emulator's machine state: a loaded program, its engine and its
//! kernel state, and what the rest of the crate does with them: memory map
//! changes, guest memory as the kernel reads and writes it, registers, and
//! the ground truth. Loading a program is `load.rs`; running it is `run.rs`.

use crate::error::Error;
use crate::linux::abi::record::SyscallRecord;
use crate::linux::elf::{Image, Located};
use crate::linux::proc_state::{Clock, Input, Output, Rng, Signals};
pub use crate::linux::proc_table::Exit;
use crate::linux::signal;
use crate::machine::arch::{Arch, ArchInfo, Machine};
use crate::machine::bytes::{self, Endian};
use crate::machine::engine::Engine;
use crate::machine::memory::{page_down, AccessKind, Area, MemFault, PageStats, PageTable, Perms};
pub use crate::machine::regs::Regs;
use crate::machine::shadow::ShadowStack;
use crate::machine::track::{Tracker, Tracking};
use kmodel::memory::Access;
use unicorn_engine::uc_error;

/// Something worth knowing that happened during a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A serviced system call (recorded with [`Config::record_syscalls`](crate::Config::record_syscalls)).
    Syscall(SyscallRecord),
    /// A system call the emulator does not implement; the guest got `-ENOSYS`.
    UnknownSyscall {
        /// Its number.
        nr: u64,
        /// Instruction count at the call.
        icount: u64,
        /// PC after the call instruction.
        pc: u64,
        /// Its name, when it is a call the emulator knows of but does not implement.
        name: Option<&'static str>,
    },
    /// An ELF object was mapped into process `pid` (at `execve`, or when
    /// its first `PT_LOAD` was `mmap`ped: `ld.so` loading a library).
    ObjectMapped {
        /// The process.
        pid: crate::linux::proc_table::Pid,
        /// Instruction count at the time.
        icount: u64,
        /// The object.
        object: crate::machine::objects::Object,
    },
    /// An ELF object left process `pid`'s address space (`munmap`,
    /// `dlclose`, `mremap`, `execve`; not reported when the process ends,
    /// whose whole table goes with it).
    ObjectUnmapped {
        /// The process.
        pid: crate::linux::proc_table::Pid,
        /// Instruction count at the time.
        icount: u64,
        /// The object.
        object: crate::machine::objects::Object,
    },
    /// A request the emulator only partly honours (named in the message).
    Warning {
        /// Instruction count at the time.
        icount: u64,
        /// What happened.
        message: String,
    },
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
    /// Numbers given to calls that have none upstream yet, with their rows
    /// (`syscall::unnumbered_map`).
    pub(crate) unnumbered: Vec<(u64, u16)>,
    /// Open file descriptors.
    pub(crate) fds: crate::linux::fs::FdTable,
    /// The file system the guest sees.
    pub(crate) fs: crate::linux::fs::Vfs,
    /// Unknown syscall numbers already reported (each is reported once).
    pub(crate) unknown_reported: std::collections::BTreeSet<u64>,
    /// The alternate signal stack `(base, size)`, if one is set.
    pub(crate) altstack: Option<(u64, u64)>,
    /// Address of the page with the sigreturn trampolines.
    pub(crate) trampoline: u64,
    /// The system call the current process sleeps in, if it does.
    pub(crate) blocked: Option<crate::linux::abi::outcome::Blocked>,
    /// While a system call runs again after sleeping: how it slept.
    pub(crate) retry: Option<crate::linux::abi::outcome::Blocked>,
    /// The process on the CPU (the per-process fields above are its).
    pub(crate) pid: crate::linux::proc_table::Pid,
    /// The thread on the CPU: its ID and addresses (the per-thread fields
    /// above — registers in the engine, `signals` but for its dispositions,
    /// `altstack`, `blocked`, the tracker's stacks — are its).
    pub(crate) task: crate::linux::proc_table::Task,
    /// Every process, the current one included.
    pub(crate) procs: std::collections::BTreeMap<crate::linux::proc_table::Pid, crate::linux::proc_table::Proc>,
    /// The scheduler's bookkeeping.
    pub(crate) sched: crate::linux::proc_table::Sched,
    /// What the guest may take of the host.
    pub(crate) limits: crate::linux::proc_table::Limits,
    /// The old image's engine after an `execve`, until the run goes on
    /// ([`Emulator::pre_exec_memory`]).
    pub(crate) pre_exec: Option<Engine>,
    /// Files mapped so far, by (path, device, inode, size, modification
    /// time), so that each is read as ELF once (`ld.so` maps a library
    /// segment by segment).
    pub(crate) mapped_files:
        std::collections::BTreeMap<crate::machine::objects::FileKey, std::rc::Rc<crate::machine::objects::MappedFile>>,
    /// The probe addresses ([`Emulator::set_probes`]), the machine's: each
    /// process's tracker takes this set when a run with probes starts
    /// (`Tracker::use_probes`); a change is a new set.
    pub(crate) probes: std::rc::Rc<std::collections::BTreeSet<u64>>,
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

/// The string at `addr`, up to its NUL or `max` bytes, read page by page
/// with `read(at, len)` so that a page after the NUL is never touched; and
/// whether the NUL was found. Shared by the kernel-side reads (faultable)
/// and the tracer's peek (which must not fault anything in).
pub(crate) fn scan_cstr<E>(
    addr: u64,
    max: usize,
    mut read: impl FnMut(u64, u64) -> Result<Vec<u8>, E>,
) -> Result<(Vec<u8>, bool), E> {
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let chunk = (page_down(at) + crate::machine::memory::PAGE_SIZE - at).min((max - out.len()) as u64);
        let bytes = read(at, chunk)?;
        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
            out.extend_from_slice(&bytes[..nul]);
            return Ok((out, true));
        }
        out.extend_from_slice(&bytes);
        match at.checked_add(chunk) {
            Some(next) => at = next,
            None => break,
        }
    }
    Ok((out, false))
}

impl Emulator {
    /// Every host file the guest has read, by guest path, with the FNV-1a
    /// digest ([`crate::linux::fs::fnv1a`]) of what it read: inputs from the machine that a
    /// replay elsewhere may not share.
    pub fn host_inputs(&self) -> Vec<(Vec<u8>, u64)> {
        self.fs.digests.iter().map(|(p, d)| (p.clone(), *d)).collect()
    }

    /// Wraps an engine error with the program's name and what was being done.
    pub(crate) fn engine_error(&self, what: &'static str) -> impl Fn(uc_error) -> Error + 'static {
        Error::engine(&self.image.file, what)
    }

    /// Drops cached translations after a change of the memory map, so the
    /// TLB-fill hook sees the guest's next access to every page.
    pub(crate) fn flush_tlb(&mut self) -> Result<(), Error> {
        crate::machine::hooks::cover_code(&mut self.uc).map_err(self.engine_error("hook the code areas"))?;
        // The stepper (`step.rs`) flushes what it cached when it next runs.
        self.uc.get_data_mut().ram.epoch += 1;
        self.uc.ctl_flush_tlb().map_err(self.engine_error("flush the TLB"))
    }

    // ---- memory map changes -------------------------------------------------

    /// Maps `area` with zero-filled contents, replacing whatever was there
    /// (like `MAP_FIXED`).
    pub(crate) fn map(&mut self, area: Area) -> Result<(), Error> {
        self.unmap(area.start, area.end)?;
        // Physical memory mirrors the mapped areas one to one (identity mapped);
        // permissions are enforced by the TLB-fill hook, so it is all RWX here.
        crate::machine::ram::map(&mut self.uc, area.start, area.end).map_err(self.engine_error("map memory"))?;
        self.pages_mut().insert(area);
        self.flush_tlb()
    }

    /// Unmaps `start..end` (holes allowed).
    pub(crate) fn unmap(&mut self, start: u64, end: u64) -> Result<(), Error> {
        let had_code = self.pages().areas().any(|a| a.start < end && start < a.end && a.perms.contains(Perms::EXEC));
        let removed = self.pages_mut().remove(start, end);
        if removed.is_empty() {
            return Ok(());
        }
        // Unicorn keeps the blocks it translated from unmapped code: code
        // mapped there later (a library dlopened where another was
        // dlclosed) would run the old object's instructions. Its ranged
        // removal (`ctl_remove_cache`) left them in place, so all go.
        if had_code {
            self.uc.ctl_flush_tb().map_err(self.engine_error("drop translated code"))?;
        }
        for (s, e) in removed {
            crate::machine::ram::unmap(&mut self.uc, s, e).map_err(self.engine_error("unmap memory"))?;
        }
        self.code_may_have_changed();
        self.flush_tlb()
    }

    /// The ELF objects mapped into the current process, by address.
    pub fn objects(&self) -> Vec<crate::machine::objects::Object> {
        let files = self.pages().areas().filter_map(|area| match &area.kind {
            crate::machine::memory::AreaKind::File(backing) => Some((area.start, backing)),
            _ => None,
        });
        crate::machine::objects::objects(files)
    }

    /// Reports how the objects table changed since it was `before`
    /// ([`Event::ObjectMapped`], [`Event::ObjectUnmapped`]).
    pub(crate) fn report_objects(&mut self, before: Vec<crate::machine::objects::Object>) {
        let (mapped, unmapped) = crate::machine::objects::changes(&before, &self.objects());
        let (pid, icount) = (self.pid, self.icount());
        for object in unmapped {
            self.events.push(Event::ObjectUnmapped { pid, icount, object });
        }
        for object in mapped {
            self.events.push(Event::ObjectMapped { pid, icount, object });
        }
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
        crate::machine::ram::map(&mut self.uc, old_end, new_end).map_err(self.engine_error("map memory"))?;
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
        self.copy_out(addr, buf)
    }

    /// Copies guest memory the caller has checked straight from the host
    /// memory the emulator owns (`ram.rs`): no engine call, which matters
    /// for the kernel model's many small reads of `.sframe` and stacks.
    fn copy_out(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        if self.uc.get_data().ram.read(addr, buf) {
            Ok(())
        } else {
            Err(MemFault::Unmapped { addr })
        }
    }

    /// Reads guest memory without faulting and without needing `&mut self`
    /// (an [`Access::NoFault`] read).
    pub fn read_nofault(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        self.pages().check(addr, buf.len() as u64, AccessKind::Read, Access::NoFault)?;
        self.copy_out(addr, buf)
    }

    /// Reads guest memory as a faultable read would, but leaves a
    /// non-resident page non-resident and counts no fault: the lab's extra
    /// walks beside the kernel model's own (kmodel's
    /// `UserMemory::read_untracked`). Fails, like [`Emulator::read`], on
    /// unmapped or unreadable memory.
    pub(crate) fn read_untracked(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        self.pages().check(addr, buf.len() as u64, AccessKind::Read, Access::Faultable)?;
        self.copy_out(addr, buf)
    }

    /// The 4 KiB page containing `addr`, in place, if an [`Access::NoFault`]
    /// read of it would succeed (mapped, readable, resident): no copy, one
    /// residency check.
    pub(crate) fn resident_page(&self, addr: u64) -> Result<&[u8], MemFault> {
        let page = page_down(addr);
        self.pages().check(page, crate::machine::memory::PAGE_SIZE, AccessKind::Read, Access::NoFault)?;
        self.uc.get_data().ram.page(page).ok_or(MemFault::Unmapped { addr })
    }

    /// The memory epoch ([`crate::machine::ram`]): it moves with every change of
    /// the memory map, permissions or residency.
    pub(crate) fn memory_epoch(&self) -> u64 {
        self.uc.get_data().ram.epoch
    }

    /// True if the page of `addr` is mapped readable, resident and not
    /// writable.
    pub(crate) fn stable_page(&self, addr: u64) -> bool {
        let (page, pages) = (page_down(addr), self.pages());
        pages.check(page, crate::machine::memory::PAGE_SIZE, AccessKind::Read, Access::NoFault).is_ok()
            && matches!(
                pages.check(page, crate::machine::memory::PAGE_SIZE, AccessKind::Write, Access::Faultable),
                Err(MemFault::Protection { .. })
            )
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
        let (bytes, found) = scan_cstr(addr, max, |at, len| self.read_vec(at, len))?;
        Ok(found.then_some(bytes))
    }

    // ---- registers and state -------------------------------------------------

    /// Address of the page holding the sigreturn trampolines (the kernel's
    /// vDSO has them): a return address there is a signal frame's.
    pub fn trampoline(&self) -> u64 {
        self.trampoline
    }

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

    /// Instructions executed so far by all the processes together: those
    /// that completed (one that faults counts when it runs again and
    /// completes). Always 0 with [`Tracking::Off`].
    pub fn icount(&self) -> u64 {
        self.sched.base + (self.tracker().icount - self.sched.start)
    }

    /// How closely execution is followed ([`Config::tracking`](crate::Config::tracking)).
    pub fn tracking(&self) -> Tracking {
        self.tracker().mode
    }

    /// The tracker in the engine's shared data.
    pub(crate) fn tracker(&self) -> &Tracker {
        &self.uc.get_data().tracker
    }

    /// The ground truth: the return addresses of the calls in progress, as an
    /// exact unwinder lists them after the current PC, innermost first. A
    /// signal handler's frame contributes its sigreturn trampoline and then
    /// the interrupted PC (see [`ShadowStack::return_addresses`]). Empty
    /// below [`Tracking::Blocks`].
    pub fn ground_truth(&self) -> Vec<u64> {
        self.tracker().stack.return_addresses()
    }

    /// The ground-truth stack itself, frame by frame (`None` below
    /// [`Tracking::Blocks`]).
    pub fn shadow_stack(&self) -> Option<&ShadowStack> {
        (self.tracking() >= Tracking::Blocks).then(|| &self.tracker().stack)
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

    /// Nanoseconds of virtual time since the start.
    pub fn virtual_time_ns(&self) -> u64 {
        self.clock.elapsed_ns(self.icount())
    }

    /// The current heap break.
    pub fn brk(&self) -> u64 {
        self.brk
    }

    /// How the machine ended, once it has: the first process's status, once
    /// every process has ended.
    pub fn exit_status(&self) -> Option<Exit> {
        self.machine_exit()
    }

    /// Everything the guest wrote to stdout (with [`Config::capture_output`](crate::Config::capture_output)).
    pub fn stdout(&self) -> &[u8] {
        &self.stdout.captured
    }

    /// Everything the guest wrote to stderr (with [`Config::capture_output`](crate::Config::capture_output)).
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
        self.regs_with(&|reg| self.uc.reg_read(reg))
    }

    /// The user registers of thread `tid` of the current process while it
    /// is off the CPU (as it was last switched out: for a thread preempted
    /// in user mode, where it was interrupted), or of the thread on the
    /// CPU. `None` for a thread the process does not have.
    pub fn thread_regs(&self, tid: crate::linux::proc_table::Tid) -> Option<Result<Regs, Error>> {
        if tid == self.task.tid {
            return Some(self.regs());
        }
        let parked = self.procs.get(&self.pid)?.threads.get(&tid)?.as_deref()?;
        Some(self.regs_with(&|reg| parked.context.reg_read(reg)))
    }

    /// Registers read with `read` (the engine's, or a saved context's).
    fn regs_with(&self, read: &dyn Fn(i32) -> Result<u64, uc_error>) -> Result<Regs, Error> {
        let info = self.info();
        // The error (with the program's name) is made only on failure: NMIs read every register.
        let get = |reg: i32| read(reg).map_err(|err| self.engine_error("read a register")(err));
        let gprs = info.gprs.iter().map(|&reg| get(reg)).collect::<Result<Vec<_>, _>>()?;
        let extra = info.extra_dwarf.iter().map(|&reg| get(reg)).collect::<Result<Vec<_>, _>>()?;
        Ok(Regs {
            arch: info.arch,
            pc: get(info.pc)?,
            sp: get(info.sp)?,
            fp: get(info.fp)?,
            ra: info.ra.map(get).transpose()?,
            tls: self.machine.tls(read).map_err(|err| self.engine_error("read the thread pointer")(err))?,
            gprs,
            extra,
        })
    }

    pub(crate) fn reg(&self, reg: i32) -> Result<u64, Error> {
        self.uc.reg_read(reg).map_err(|err| self.engine_error("read a register")(err))
    }

    /// Replaces the return value of the system call the run is stopped at
    /// (`ret`: a value or a negative errno): for a host whose kernel model
    /// implements the call (the lab's `.sframe` registration calls), so the
    /// guest sees the model's answer instead of the emulator's.
    pub fn set_syscall_return(&mut self, ret: i64) -> Result<(), Error> {
        let reg = self.info().syscall.ret;
        self.set_reg(reg, ret as u64)
    }

    pub(crate) fn set_reg(&mut self, reg: i32, value: u64) -> Result<(), Error> {
        self.uc.reg_write(reg, value).map_err(|err| self.engine_error("write a register")(err))
    }

    pub(crate) fn set_tls(&mut self, value: u64) -> Result<(), Error> {
        let err = self.engine_error("set the thread pointer");
        self.machine.set_tls(&mut self.uc, value).map_err(err)
    }

    pub(crate) fn terminate(&mut self, sig: u32) -> Result<(), Error> {
        let pc = self.reg(self.info().pc)?;
        let fault = if sig == signal::SIGSEGV { self.pages().last_fault() } else { None };
        self.exit = Some(Exit::Signal { signal: sig, fault, pc });
        Ok(())
    }
}
