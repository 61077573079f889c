//! How a process's `.sframe` sections reach the kernel model, beyond exec
//! (profile `sframe-v13` only: upstream Linux 7.3 has no `.sframe` tables).
//!
//! With [`Registration::Exec`] (the SFrame series v13, the default) only exec
//! registers sections: the program's and its interpreter's
//! (`guest.rs`'s `image_mm`); libraries `ld.so` maps later are never
//! registered, so a walk that reaches them falls back to frame pointers.
//! [`Registration::Loader`] (`loader-prctl`) and
//! [`Registration::LoaderSyscall`] (`loader-syscall`) add the *simulated
//! loader*: what a dynamic loader with SFrame support would do (not in
//! glibc yet), through `prctl()` or through `sframe_register()`:
//! register each object's `PT_GNU_SFRAME` once its text is mapped
//! executable, and unregister it before the object is unmapped. The lab sees
//! objects come and go through the emulator's
//! [`emu::Event::ObjectMapped`]/[`emu::Event::ObjectUnmapped`], and acts at
//! the stop of the system call that mapped or unmapped them, while the task
//! is still in the kernel: the same point at which a loader's own call,
//! made right after (or before) its `mmap`/`munmap`, would reach the kernel.
//! It enters the model where the interface does, on the calling task
//! (`Kernel::prctl_sframe`, `Kernel::sframe_register_setup`), so its
//! results and log events are those of the call a loader would make.
//!
//! A guest may also call the interfaces itself: `model_call` answers the
//! registration prctl options and system calls at their stop with the
//! model's return value.

use emu::{Emulator, Event, Object, PageTable, Perms, Pid};
use kmodel::kernel::Kernel;
use kmodel::types::Tid;
use kmodel::unwind::Vma;
use serde::{Deserialize, Serialize};

/// Which interfaces register SFrame sections (scenario `kernel.registration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Registration {
    /// The SFrame series v13 (`elf_add_sframe`): exec registers the program and its
    /// interpreter; nothing else is ever registered (a guest may still
    /// call the interfaces itself).
    #[default]
    #[serde(rename = "exec")]
    Exec,
    /// Exec, plus a loader that registers every object it maps and
    /// unregisters it before unmapping it (not upstream in glibc), through
    /// `prctl(PR_ADD_SFRAME / PR_REMOVE_SFRAME)` (v13). `loader` is
    /// accepted for it.
    #[serde(rename = "loader-prctl", alias = "loader")]
    Loader,
    /// The same simulated loader, through `sframe_register()` /
    /// `sframe_unregister()` (RFC 2026).
    #[serde(rename = "loader-syscall")]
    LoaderSyscall,
}

impl Registration {
    /// True when the simulated loader runs.
    pub fn has_loader(self) -> bool {
        self != Registration::Exec
    }
}

impl std::fmt::Display for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Registration::Exec => "exec",
            Registration::Loader => "exec + simulated loader (prctl)",
            Registration::LoaderSyscall => "exec + simulated loader (sframe_register)",
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
    /// A loader that does not unregister (`unregisters` false: the
    /// scenario's `loader_unregisters`) leaves a stale entry behind each
    /// object it unmaps.
    pub(crate) fn after_syscall(
        &mut self,
        k: &mut Kernel,
        tid: Tid,
        how: Registration,
        unregisters: bool,
        emu: &mut Emulator,
    ) {
        let pid = emu.pid();
        let events = emu.events();
        let mut gone = Vec::new();
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
                            if unregisters {
                                gone.push(start);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        self.seen = events.len();
        for start in gone {
            // Refusals are logged by the model.
            unregister(k, tid, how, emu, start);
        }
        let mut still = Vec::new();
        for (p, object) in std::mem::take(&mut self.waiting) {
            let (Some((start, size)), Some(text)) = (object.sframe(), object.text()) else { continue };
            let executable = emu.pages().area(text.0).is_some_and(|a| a.perms.contains(Perms::EXEC));
            if p != pid || !executable {
                still.push((p, object));
                continue;
            }
            if register(k, tid, how, emu, (start, size), text) == 0 {
                self.registered.push((pid, start));
            }
        }
        self.waiting = still;
    }
}

/// Registers a section of `size` bytes at `start` for `text` on `tid`'s
/// behalf through the interface `how` names; the call's return value.
fn register(
    k: &mut Kernel,
    tid: Tid,
    how: Registration,
    emu: &mut Emulator,
    sframe: (u64, u64),
    text: (u64, u64),
) -> i64 {
    let vmas = emu_vmas(emu.pages());
    let mem = emu.user_memory();
    let (start, size) = sframe;
    if how == Registration::LoaderSyscall {
        return k.sframe_register_setup(tid, &mem, &vmas, [start, size, text.0, text.1.wrapping_sub(text.0)]);
    }
    let add = k.options().sframe_table.prctl.add;
    let args = [start, start.saturating_add(size), text.0, text.1];
    k.prctl_sframe(tid, &mem, &vmas, add, args).expect("PR_ADD_SFRAME is the model's")
}

/// Unregisters the section at `start` on `tid`'s behalf through `how`.
fn unregister(k: &mut Kernel, tid: Tid, how: Registration, emu: &mut Emulator, start: u64) -> i64 {
    if how == Registration::LoaderSyscall {
        return k.sframe_unregister_setup(tid, [start, 0, 0, 0]);
    }
    let vmas = emu_vmas(emu.pages());
    let mem = emu.user_memory();
    let remove = k.options().sframe_table.prctl.remove;
    k.prctl_sframe(tid, &mem, &vmas, remove, [start, 0, 0, 0]).expect("PR_REMOVE_SFRAME is the model's")
}

/// A guest's own call to a registration interface, at the call's stop:
/// `prctl` with one of the model's options, or `sframe_register` /
/// `sframe_unregister` (which the emulator names at the scenario's numbers
/// but does not implement). The model answers, and its value replaces the
/// emulator's (`EINVAL` for an unknown prctl option, `ENOSYS` for the
/// calls) in the guest's return register. `None` when the call is not one
/// of these.
pub(crate) fn model_call(
    k: &mut Kernel,
    tid: Tid,
    emu: &mut Emulator,
    record: &emu::SyscallRecord,
) -> Result<Option<i64>, emu::Error> {
    // Every system call stops here: the areas are copied only for these.
    if !matches!(record.name, "prctl" | "sframe_register" | "sframe_unregister") {
        return Ok(None);
    }
    let a = record.args;
    let vmas = emu_vmas(emu.pages());
    let ret = {
        let mem = emu.user_memory();
        if record.name == "prctl" {
            k.prctl_sframe(tid, &mem, &vmas, a[0], [a[1], a[2], a[3], a[4]])
        } else {
            k.sframe_syscall(tid, &mem, &vmas, record.nr, [a[0], a[1]])
        }
    };
    if let Some(ret) = ret {
        emu.set_syscall_return(ret)?;
    }
    Ok(ret)
}
