//! Address spaces and their SFrame sections as the mm side sees them: a new
//! mm (`mm_init()` with `mm_init_sframe()`, `kernel/fork.c`: for exec's
//! `mm_alloc()` and fork's `dup_mm()` alike), registration of a section by
//! exec for `PT_GNU_SFRAME` (`elf_add_sframe()`) or by
//! `prctl(PR_ADD_SFRAME)` (`sframe_add_section()`), its removal by
//! `prctl(PR_REMOVE_SFRAME)` (`sframe_remove_section()`), the lab's munmap
//! hook, and the life of an mm: `mmget()` by each task that takes it,
//! `mmput()` by each that leaves it, and the end when the last one does
//! (`mmput()` → `__mmput()` → `mmdrop()` → `__mmdrop()` →
//! `sframe_free_mm()`). The registry itself is `unwind/sframe.rs`.

use crate::arch::Arch;
use crate::event::EventKind;
use crate::kernel::{Kernel, Mm, TaskState};
use crate::memory::{Access, UserMemory};
use crate::types::{MmId, Tid};
use crate::unwind::SframeRegistry;

impl Kernel {
    /// A new address space for `arch`, with an empty SFrame table
    /// (`mm_init_sframe()`).
    pub fn new_mm(&mut self, arch: Arch) -> MmId {
        self.mms.push(Mm { arch, sframe: SframeRegistry::new(arch), users: 0, freed: false });
        MmId(self.mms.len() - 1)
    }

    /// Registers an SFrame section in `mm` (exec's `PT_GNU_SFRAME`, or the
    /// prctl for dlopen/JIT code); refusals are logged, not fatal.
    pub fn add_sframe(
        &mut self,
        mm: MmId,
        mem: &dyn UserMemory,
        sframe: (u64, u64),
        text: (u64, u64),
    ) -> Result<(), String> {
        let mode = self.opts.sframe_mode();
        let result = self.mms[mm.0].sframe.add(mem, Access::Faultable, sframe, text, mode).map_err(|e| e.to_string());
        self.log(0, None, EventKind::SframeAdd { sframe: sframe.0, text: text.0, error: result.clone().err() });
        result
    }

    /// Removes SFrame sections starting at `sframe_start`, unregistered by
    /// `who` (the interface: "prctl", "sframe_unregister", "loader", …).
    pub fn remove_sframe(&mut self, mm: MmId, sframe_start: u64, who: &str) -> Result<(), String> {
        let result = self.mms[mm.0].sframe.remove(sframe_start).map_err(|e| e.to_string());
        if result.is_ok() {
            self.log(0, None, EventKind::SframeRemove { sframe: sframe_start, why: who.into() });
        }
        result
    }

    /// `munmap()` of `start..end` in `mm`: sections covering it go away.
    pub fn unmap(&mut self, mm: MmId, start: u64, end: u64) -> usize {
        let removed = self.mms[mm.0].sframe.unmap(start, end);
        if removed > 0 {
            self.log(0, None, EventKind::SframeRemove { sframe: start, why: format!("munmap removed {removed}") });
        }
        removed
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
