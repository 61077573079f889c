//! Address spaces and their SFrame sections as the mm side sees them: a new
//! mm (`mm_init()` with `mm_init_sframe()`, `kernel/fork.c`: for exec's
//! `mm_alloc()` and fork's `dup_mm()` alike), registration of a section by
//! exec for `PT_GNU_SFRAME` (`elf_add_sframe()`) or by
//! `prctl(PR_ADD_SFRAME)` or `sframe_register()` (`sframe_add_section()`),
//! its removal by `prctl(PR_REMOVE_SFRAME)` or `sframe_unregister()`
//! (`sframe_remove_section()`), munmap (nothing upstream; a named variant
//! removes), and the life of an mm: `mmget()` by each task that takes it,
//! `mmput()` by each that leaves it, and the end when the last one does
//! (`mmput()` → `__mmput()` → `mmdrop()` → `__mmdrop()` →
//! `sframe_free_mm()`). The registry itself is `unwind/sframe.rs`.

use crate::arch::Arch;
use crate::event::EventKind;
use crate::kernel::{Kernel, Mm, TaskState};
use crate::memory::{Access, UserMemory};
use crate::types::{MmId, MunmapSframe, Tid, EFAULT, EINVAL};
use crate::unwind::{RegError, SframeRegistry, Vmas};

/// The only size of `struct sframe_setup` the modelled kernel knows
/// (`{sframe_start, sframe_size, text_start, text_size}`, four `u64`): the
/// size is the structure's version, and any other is `-EINVAL`.
pub const SFRAME_SETUP_SIZE: u64 = 32;

impl Kernel {
    /// A new address space for `arch`, with an empty SFrame table
    /// (`mm_init_sframe()`).
    pub fn new_mm(&mut self, arch: Arch) -> MmId {
        self.mms.push(Mm { arch, sframe: SframeRegistry::new(arch), users: 0, freed: false });
        MmId(self.mms.len() - 1)
    }

    /// Registers an SFrame section in `mm` (`sframe_add_section()`: exec's
    /// `PT_GNU_SFRAME`, and every registration interface); `vmas` answers
    /// its `vma_lookup()`s. Refusals are logged and returned, never fatal.
    pub fn add_sframe(
        &mut self,
        mm: MmId,
        mem: &dyn UserMemory,
        vmas: &dyn Vmas,
        sframe: (u64, u64),
        text: (u64, u64),
    ) -> Result<(), RegError> {
        self.sframe_add_section(None, mm, mem, vmas, sframe, text)
    }

    /// [`Kernel::add_sframe`] by `caller` (a task in one of the interfaces'
    /// system calls, whose CPU and id the log shows; `None` for exec, which
    /// the host runs before the task has the new mm).
    fn sframe_add_section(
        &mut self,
        caller: Option<Tid>,
        mm: MmId,
        mem: &dyn UserMemory,
        vmas: &dyn Vmas,
        sframe: (u64, u64),
        text: (u64, u64),
    ) -> Result<(), RegError> {
        let mode = self.opts.sframe_mode();
        let validate = self.opts.sframe_table.full_validation;
        let result = self.mms[mm.0].sframe.add(mem, vmas, Access::Faultable, sframe, text, mode, validate);
        let error = result.as_ref().err().map(|e| e.to_string());
        self.log_by(caller, EventKind::SframeAdd { sframe: sframe.0, text: text.0, error });
        result
    }

    /// Logs `kind` on `caller`'s CPU with its id, or on CPU 0 for the host.
    fn log_by(&mut self, caller: Option<Tid>, kind: EventKind) {
        let cpu = caller.map_or(0, |t| self.task(t).cpu);
        self.log(cpu, caller, kind);
    }

    /// Removes SFrame sections starting at `sframe_start`
    /// (`sframe_remove_section()`), unregistered by `who` (the interface:
    /// "prctl", "sframe_unregister", the simulated loader…).
    ///
    /// The kernel frees a removed section after an SRCU grace period
    /// (`call_srcu()`), because `sframe_find()` may be reading it: each
    /// lookup holds `sframe_srcu` for its own duration only, and no walk
    /// keeps a section between lookups (checked against upstream: the
    /// `unwind::sframe` module doc). The model runs one lookup atomically,
    /// so no lookup can be inside its read section here; a walk in progress
    /// between two lookups keeps the frames it has and its next lookup no
    /// longer finds the section (it falls back).
    pub fn remove_sframe(&mut self, mm: MmId, sframe_start: u64, who: &str) -> Result<(), RegError> {
        self.sframe_remove_section(None, mm, sframe_start, who)
    }

    /// [`Kernel::remove_sframe`] by `caller` (see `sframe_add_section`).
    fn sframe_remove_section(
        &mut self,
        caller: Option<Tid>,
        mm: MmId,
        sframe_start: u64,
        who: &str,
    ) -> Result<(), RegError> {
        let result = self.mms[mm.0].sframe.remove(sframe_start);
        if result.is_ok() {
            self.log_by(caller, EventKind::SframeRemove { sframe: sframe_start, why: who.into() });
        }
        result
    }

    /// `munmap()` of `start..end` in `mm`. Upstream nothing happens to the
    /// table: an entry whose mapping went away stays until unregistered,
    /// found corrupt, or freed with the mm ([`MunmapSframe::Keep`]). With
    /// [`MunmapSframe::Remove`] the sections intersecting the range go.
    /// Returns how many were removed.
    pub fn unmap(&mut self, mm: MmId, start: u64, end: u64) -> usize {
        if self.opts.sframe_table.munmap == MunmapSframe::Keep {
            return 0;
        }
        let removed = self.mms[mm.0].sframe.unmap(start, end);
        for &sframe in &removed {
            let why = format!("munmap of {start:#x}..{end:#x}");
            self.log(0, None, EventKind::SframeRemove { sframe, why });
        }
        removed.len()
    }

    /// `prctl(option, arg2, arg3, arg4, arg5)` by `tid`, if `option` is one
    /// of the registration options ([`PrctlNumbers`]); `None` for any other
    /// option, which the host answers itself. `PR_ADD_SFRAME` passes its
    /// four arguments to `sframe_add_section(sframe_start, sframe_end,
    /// text_start, text_end)`; `PR_REMOVE_SFRAME` wants arg3–arg5 zero
    /// (`-EINVAL`) and removes by `sframe_start`. The result is the
    /// system call's return value (0 or a negative errno).
    ///
    /// [`PrctlNumbers`]: crate::types::PrctlNumbers
    pub fn prctl_sframe(
        &mut self,
        tid: Tid,
        mem: &dyn UserMemory,
        vmas: &dyn Vmas,
        option: u64,
        args: [u64; 4],
    ) -> Option<i64> {
        let numbers = self.opts.sframe_table.prctl;
        if option == numbers.add {
            return Some(self.add_by(tid, mem, vmas, (args[0], args[1]), (args[2], args[3])));
        }
        if option == numbers.remove {
            return Some(self.remove_by(tid, args, "prctl(PR_REMOVE_SFRAME)"));
        }
        None
    }

    /// `sframe_register(struct sframe_setup *setup, size_t size)` by `tid`:
    /// an unknown `size` is `-EINVAL` before anything is read; an unreadable
    /// structure `-EFAULT`; then [`Kernel::sframe_register_setup`].
    pub fn sframe_register(&mut self, tid: Tid, mem: &dyn UserMemory, vmas: &dyn Vmas, setup: u64, size: u64) -> i64 {
        match self.read_setup(tid, mem, setup, size) {
            Ok(fields) => self.sframe_register_setup(tid, mem, vmas, fields),
            Err(ret) => ret,
        }
    }

    /// `sframe_register()` past the copy of its structure, `fields` =
    /// `{sframe_start, sframe_size, text_start, text_size}`:
    /// `sframe_add_section(sframe_start, sframe_start + sframe_size,
    /// text_start, text_start + text_size)`. A host that calls on a task's
    /// behalf without a structure in its memory (the lab's simulated
    /// loader) enters here, so its results and log are the call's.
    pub fn sframe_register_setup(&mut self, tid: Tid, mem: &dyn UserMemory, vmas: &dyn Vmas, fields: [u64; 4]) -> i64 {
        let [sframe_start, sframe_size, text_start, text_size] = fields;
        let sframe = (sframe_start, sframe_start.wrapping_add(sframe_size));
        let text = (text_start, text_start.wrapping_add(text_size));
        self.add_by(tid, mem, vmas, sframe, text)
    }

    /// `sframe_add_section()` of the `sframe` and `text` ranges into
    /// `tid`'s mm, as a system call by `tid` returns it (`-EINVAL` for a
    /// task without an mm): the part both registration interfaces share.
    fn add_by(&mut self, tid: Tid, mem: &dyn UserMemory, vmas: &dyn Vmas, sframe: (u64, u64), text: (u64, u64)) -> i64 {
        let Some(mm) = self.task(tid).mm else { return i64::from(EINVAL) };
        errno(self.sframe_add_section(Some(tid), mm, mem, vmas, sframe, text))
    }

    /// `sframe_unregister(struct sframe_setup *setup, size_t size)` by
    /// `tid`: the same size and fault rules as [`Kernel::sframe_register`],
    /// then [`Kernel::sframe_unregister_setup`].
    pub fn sframe_unregister(&mut self, tid: Tid, mem: &dyn UserMemory, setup: u64, size: u64) -> i64 {
        match self.read_setup(tid, mem, setup, size) {
            Ok(fields) => self.sframe_unregister_setup(tid, fields),
            Err(ret) => ret,
        }
    }

    /// `sframe_unregister()` past the copy of its structure: only
    /// `sframe_start` may be set (any other field non-zero is `-EINVAL`);
    /// the sections starting there are removed (`-EINVAL` if none).
    pub fn sframe_unregister_setup(&mut self, tid: Tid, fields: [u64; 4]) -> i64 {
        self.remove_by(tid, fields, "sframe_unregister()")
    }

    /// The removal both interfaces share, `fields` = `{sframe_start, 0, 0,
    /// 0}` (any other field non-zero, or a task without an mm, is
    /// `-EINVAL`): `sframe_remove_section(sframe_start)` by `tid`, logged
    /// as unregistered by `who`.
    fn remove_by(&mut self, tid: Tid, fields: [u64; 4], who: &str) -> i64 {
        let Some(mm) = self.task(tid).mm else { return i64::from(EINVAL) };
        if fields[1..].iter().any(|&f| f != 0) {
            return i64::from(EINVAL);
        }
        errno(self.sframe_remove_section(Some(tid), mm, fields[0], who))
    }

    /// A system call by `tid` that the model implements: the two
    /// registration calls at their configured numbers ([`SyscallNumbers`]),
    /// with the arguments as passed; `None` for any other number.
    ///
    /// [`SyscallNumbers`]: crate::types::SyscallNumbers
    pub fn sframe_syscall(
        &mut self,
        tid: Tid,
        mem: &dyn UserMemory,
        vmas: &dyn Vmas,
        nr: u64,
        args: [u64; 2],
    ) -> Option<i64> {
        let numbers = self.opts.sframe_table.syscalls;
        if nr == numbers.register {
            Some(self.sframe_register(tid, mem, vmas, args[0], args[1]))
        } else if nr == numbers.unregister {
            Some(self.sframe_unregister(tid, mem, args[0], args[1]))
        } else {
            None
        }
    }

    /// The caller's `struct sframe_setup` (in the task's byte order), or
    /// the return value that refuses the call.
    fn read_setup(&self, tid: Tid, mem: &dyn UserMemory, setup: u64, size: u64) -> Result<[u64; 4], i64> {
        if size != SFRAME_SETUP_SIZE {
            return Err(i64::from(EINVAL));
        }
        let mm = self.task(tid).mm.ok_or(i64::from(EINVAL))?;
        let arch = self.mms[mm.0].arch;
        let mut fields = [0u64; 4];
        for (i, field) in fields.iter_mut().enumerate() {
            let mut bytes = [0u8; 8];
            mem.read(setup.wrapping_add(8 * i as u64), &mut bytes, Access::Faultable).map_err(|_| i64::from(EFAULT))?;
            *field = arch.word(bytes);
        }
        Ok(fields)
    }

    /// `mmget()`: a task takes `mm` as its mm (spawn, `dup_mm()`,
    /// `clone(CLONE_VM)`, exec's new mm).
    pub(crate) fn mmget(&mut self, mm: MmId) {
        if self.check && self.mms[mm.0].freed {
            self.violation("M2", format!("mmget() of mm {} after __mmdrop() freed it", mm.0));
        }
        self.mms[mm.0].users += 1;
    }

    /// `mmput()` of `mm` by `tid`, which no longer uses it (exec replaced
    /// it, or `exit_mm()`): it drops one reference (`mm_users`). Other
    /// threads of the group, or any task sharing the mm, keep it alive
    /// with its SFrame sections. When the last reference goes, and no copy
    /// of a stack taken on exit pins the mm, the mm dies and `__mmdrop()`
    /// frees its SFrame sections (`sframe_free_mm()`), once. Each freed
    /// section is logged; the [`MmId`] stays valid, with an empty table,
    /// marked [`Mm::freed`], as nothing can reach the mm through a task any
    /// more.
    pub(crate) fn mmput(&mut self, mm: MmId, cpu: usize, tid: Tid) {
        let m = &mut self.mms[mm.0];
        if m.freed || m.users == 0 {
            // A double mmput(): upstream a use-after-free or a second
            // sframe_free_mm() of the same tree.
            let detail = format!("mmput() of mm {} by task {tid} with mm_users {} (freed: {})", mm.0, m.users, m.freed);
            if self.check {
                self.violation("M2", detail);
            }
            return;
        }
        m.users -= 1;
        if m.users > 0 {
            return;
        }
        // The copy-on-exit variant's copy refers to the mm's sections: it
        // pins the mm (an mmgrab(), in kernel terms) and the mm is not freed.
        if self.tasks.values().any(|t| t.stack_copy.as_ref().is_some_and(|c| c.mm == mm)) {
            return;
        }
        if self.check {
            let users: Vec<Tid> =
                self.tasks.values().filter(|t| t.state != TaskState::Dead && t.mm == Some(mm)).map(|t| t.tid).collect();
            if !users.is_empty() {
                self.violation("M3", format!("mm {} freed while tasks {users:?} still have it as their mm", mm.0));
            }
        }
        let arch = self.mms[mm.0].arch;
        self.mms[mm.0].freed = true;
        let old = std::mem::replace(&mut self.mms[mm.0].sframe, SframeRegistry::new(arch));
        for entry in old.entries() {
            self.log(
                cpu,
                Some(tid),
                EventKind::SframeRemove { sframe: entry.sframe_start, why: "mm freed (sframe_free_mm)".into() },
            );
        }
    }

    /// Invariant M1: a walk of `tid`'s user stack (`what`) reads `mm`'s
    /// SFrame table and user memory; that mm must not have been freed.
    pub(crate) fn check_walk_mm(&mut self, tid: Tid, mm: MmId, what: &str) {
        if self.check && self.mms[mm.0].freed {
            self.violation("M1", format!("{what} for task {tid} reads mm {}, which __mmdrop() has freed", mm.0));
        }
    }
}

/// A registration's result as the system call returns it.
fn errno(result: Result<(), RegError>) -> i64 {
    result.map_or_else(|e| i64::from(e.errno()), |()| 0)
}
