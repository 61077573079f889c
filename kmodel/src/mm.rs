//! Address spaces and their SFrame sections as the mm side sees them: a new
//! mm (`mm_init_sframe()`), registration of a section by exec for
//! `PT_GNU_SFRAME` or by `prctl(PR_ADD_SFRAME)` (`sframe_add_section()`),
//! its removal by `prctl(PR_REMOVE_SFRAME)` (`sframe_remove_section()`),
//! and the lab's munmap hook. The registry itself is `unwind/sframe.rs`.

use crate::arch::Arch;
use crate::event::EventKind;
use crate::kernel::{Kernel, Mm};
use crate::memory::{Access, UserMemory};
use crate::types::MmId;
use crate::unwind::SframeRegistry;

impl Kernel {
    /// A new address space for `arch`.
    pub fn new_mm(&mut self, arch: Arch) -> MmId {
        self.mms.push(Mm { arch, sframe: SframeRegistry::new(arch) });
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

    /// Removes SFrame sections starting at `sframe_start` (the prctl).
    pub fn remove_sframe(&mut self, mm: MmId, sframe_start: u64) -> Result<(), String> {
        let result = self.mms[mm.0].sframe.remove(sframe_start).map_err(|e| e.to_string());
        if result.is_ok() {
            self.log(0, None, EventKind::SframeRemove { sframe: sframe_start, why: "prctl".into() });
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
}
