//! Copying a process for `fork`: a new engine with an eager copy of every
//! mapped page (all-zero pages are left to the new engine's zero fill),
//! the page table with its residency, the registers, and the ground truth.
//!
//! The copy is eager rather than copy-on-write (host memory to host memory,
//! `ram.rs`): a shell's process is a few MiB, most of it untouched stack
//! and heap that the zero check skips (the cost is in BENCHMARKS.md).

use crate::error::Error;
use crate::linux::emulator::Emulator;
use crate::linux::proc_table::Parked;

impl Emulator {
    /// The current process's state, copied for a child: memory, registers
    /// (with the call's result 0), descriptors (sharing their open-file
    /// descriptions), signal dispositions and mask (no pending signals),
    /// working directory and ground truth. Of its threads only the calling
    /// one is copied, as in Linux: the others' stacks stay in the memory,
    /// nobody runs on them.
    pub(crate) fn copy_for_fork(&self) -> Result<Parked, Error> {
        let info = self.info();
        let err = self.engine_error("copy a process");
        let tracker = self.tracker().fork(info).map_err(|e| Error::Setup {
            file: self.image.file.clone(),
            problem: format!("cannot set up the instruction decoder: {e}"),
        })?;
        let mut uc = crate::machine::hooks::create(self.machine, tracker).map_err(&err)?;
        crate::machine::ram::copy(&self.uc.get_data().ram, &mut uc).map_err(&err)?;
        uc.get_data_mut().pages = self.pages().clone();
        crate::machine::hooks::cover_code(&mut uc).map_err(&err)?;
        // Every register, vector and floating-point ones included: the
        // child returns from the same call with the same live values.
        let context = self.uc.context_init().map_err(&err)?;
        uc.context_restore(&context).map_err(&err)?;
        uc.reg_write(info.syscall.ret, 0).map_err(&err)?;
        uc.ctl_flush_tlb().map_err(&err)?;
        let mut signals = self.signals.clone();
        signals.pending = 0;
        Ok(Parked {
            uc,
            image: self.image.clone(),
            exit: None,
            brk_start: self.brk_start,
            brk: self.brk,
            signals,
            fds: self.fds.clone(),
            altstack: self.altstack,
            trampoline: self.trampoline,
            blocked: None,
            cwd: self.fs.cwd.clone(),
            umask: self.fs.umask,
            exe: self.fs.exe.clone(),
            // The child's one thread; its ID is set when it gets one. Its
            // name is the caller's, as copy_process() copies `comm`.
            task: crate::linux::proc_table::Task::new(0, self.task.comm),
        })
    }

    /// Guest memory mapped by every process together (for [`crate::Limits::memory`]).
    fn memory_in_use(&self) -> u64 {
        let parked = self.procs.values().filter_map(|p| p.parked.as_ref()).map(|p| p.uc.get_data().pages.mapped());
        self.pages().mapped() + parked.sum::<u64>()
    }

    /// Whether `bytes` more may be mapped within [`crate::Limits::memory`]
    /// (the kernel's `may_expand_vm`); if not, says so in a warning and the
    /// caller fails as the kernel would (`ENOMEM`, or brk's old break).
    pub(crate) fn may_expand(&mut self, bytes: u64, what: &str) -> bool {
        let limit = self.limits.memory;
        if self.memory_in_use().saturating_add(bytes) <= limit {
            return true;
        }
        self.warn(format!("{what} refused: guest memory would exceed its limit of {limit} bytes"));
        false
    }
}
