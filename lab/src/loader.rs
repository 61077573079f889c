//! How a process's `.sframe` sections reach the kernel model, beyond exec.
//!
//! With [`Registration::Exec`] (upstream v13, the default) only exec
//! registers sections: the program's and its interpreter's
//! (`guest.rs`'s `image_mm`); libraries `ld.so` maps later are never
//! registered, so a walk that reaches them falls back to frame pointers.
//! [`Registration::Loader`] adds the *simulated loader*: what a dynamic loader
//! with SFrame support would do (not in glibc yet):
//! register each object's `PT_GNU_SFRAME` once its text is mapped
//! executable, and unregister it before the object is unmapped. The lab sees
//! objects come and go through the emulator's
//! [`emu::Event::ObjectMapped`]/[`emu::Event::ObjectUnmapped`], and acts at
//! the stop of the system call that mapped or unmapped them, while the task
//! is still in the kernel: the same point at which a loader's own call,
//! made right after (or before) its `mmap`/`munmap`, would reach the kernel.

use emu::{Emulator, Event, Object, PageTable, Perms, Pid};
use kmodel::kernel::Kernel;
use kmodel::types::MmId;
use kmodel::unwind::Vma;
use serde::{Deserialize, Serialize};

/// Which interfaces register SFrame sections (scenario `kernel.registration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    /// Upstream (v13 `elf_add_sframe`): exec registers the program and its
    /// interpreter; nothing else is ever registered.
    #[default]
    Exec,
    /// Exec, plus a loader that registers every object it maps and
    /// unregisters it before unmapping it (not upstream in glibc).
    Loader,
}

impl std::fmt::Display for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Registration::Exec => "exec",
            Registration::Loader => "exec + simulated loader",
        })
    }
}

/// The emulator's areas as the model's `vma_lookup()` sees them: one VMA
/// per area, executable when mapped with `PROT_EXEC`. A copy, taken before
/// the model reads user memory (which borrows the emulator).
pub(crate) fn emu_vmas(pages: &PageTable) -> Vec<Vma> {
    pages.areas().map(|a| Vma { start: a.start, end: a.end, exec: a.perms.contains(Perms::EXEC) }).collect()
}

/// The simulated loader's state for one guest (all its processes).
#[derive(Debug, Default)]
pub(crate) struct Loader {
    /// Emulator events already looked at.
    seen: usize,
    /// Objects mapped whose text is not executable yet, by process.
    waiting: Vec<(Pid, Object)>,
    /// Sections registered by the loader: process and section start.
    registered: Vec<(Pid, u64)>,
}

impl Loader {
    /// Forgets the objects of every event so far: exec (and the first load)
    /// registered what they mapped themselves.
    pub(crate) fn skip_to(&mut self, events: &[Event], pid: Pid) {
        self.seen = events.len();
        self.waiting.retain(|(p, _)| *p != pid);
        self.registered.retain(|(p, _)| *p != pid);
    }

    /// Acts on what the system call `emu` just stopped at did to the
    /// objects of its current process: unregister what is gone, register
    /// in `mm` what is now mapped executable.
    pub(crate) fn after_syscall(&mut self, k: &mut Kernel, mm: MmId, emu: &mut Emulator) {
        let pid = emu.pid();
        let events = emu.events();
        for event in events.get(self.seen..).unwrap_or_default() {
            match event {
                Event::ObjectMapped { pid: p, object, .. } if *p == pid && object.sframe().is_some() => {
                    self.waiting.push((pid, object.clone()));
                }
                Event::ObjectUnmapped { pid: p, object, .. } if *p == pid => {
                    self.waiting.retain(|(q, o)| !(*q == pid && o == object));
                    if let Some((start, _)) = object.sframe() {
                        if let Some(at) = self.registered.iter().position(|&r| r == (pid, start)) {
                            self.registered.remove(at);
                            // Refusals are logged by the model.
                            let _ = k.remove_sframe(mm, start, "unregistered by the loader before munmap");
                        }
                    }
                }
                _ => {}
            }
        }
        self.seen = events.len();
        let mut still = Vec::new();
        for (p, object) in std::mem::take(&mut self.waiting) {
            let (Some((start, size)), Some(text)) = (object.sframe(), object.text()) else { continue };
            let executable = emu.pages().area(text.0).is_some_and(|a| a.perms.contains(Perms::EXEC));
            if p != pid || !executable {
                still.push((p, object));
                continue;
            }
            let vmas = emu_vmas(emu.pages());
            let mem = emu.user_memory();
            if k.add_sframe(mm, &mem, &vmas, (start, start.saturating_add(size)), text).is_ok() {
                self.registered.push((pid, start));
            }
        }
        self.waiting = still;
    }
}
