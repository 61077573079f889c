//! Creating the engine with the emulator's hooks installed: the TLB fill,
//! which is the page-fault handler, and the traps (system calls and other
//! interrupts). The execution hooks that count instructions and keep the
//! ground truth are [`crate::machine::track`]'s; this file installs them.

use crate::machine::arch::{Machine, SyscallEntry};
use crate::machine::engine::{Engine, Shared, Trap};
use crate::machine::memory::{AccessKind, PageTable, Perms};
use crate::machine::track::{self, Tracker, Tracking};
use unicorn_engine::{uc_error, HookType, MemType, Prot, TlbEntry, TlbType, Unicorn, X86Insn};

/// Creates an engine for `machine` with the emulator's hooks installed.
///
/// Memory goes through Unicorn's *virtual* TLB with a fill hook that consults
/// the page table, for three reasons: it is the only way the engine reports
/// first touches of pages on s390x (whose MMU raises a program check without
/// the address otherwise); it gives per-page permissions and residency without
/// splitting Unicorn's memory regions (a split copies the whole region); and
/// evicting a page is just a TLB flush. Physical memory is identity-mapped.
/// The price is lower throughput (1.5–2.7× per the measurements), the same on
/// every architecture, so results stay comparable across them.
///
/// `tracker` decides which execution hooks exist: none, one per block, or
/// one per block and one per instruction. They are installed before anything
/// is translated, because Unicorn compiles hook calls into translated code.
pub(crate) fn create(machine: &'static dyn Machine, tracker: Tracker) -> Result<Engine, uc_error> {
    let info = machine.info();
    let mode = tracker.mode;
    let shared = Shared {
        pages: PageTable::default(),
        trap: None,
        hook_error: None,
        tracker,
        code_hooks: Vec::new(),
        stepper: None,
        ram: crate::machine::ram::Ram::default(),
    };
    let mut uc = Unicorn::new_with_data(info.uc_arch, info.uc_mode, shared)?;
    uc.ctl_set_tlb_type(TlbType::VIRTUAL)?;

    uc.add_tlb_hook(1, 0, |uc, page, kind| {
        let access = match kind {
            MemType::WRITE => AccessKind::Write,
            MemType::FETCH => AccessKind::Execute,
            _ => AccessKind::Read,
        };
        let perms = uc.get_data_mut().pages.guest_touch(page, access)?;
        Some(TlbEntry { paddr: page, perms: Prot(u32::from(perms.bits())) })
    })?;

    if mode != Tracking::Off {
        track::add_block_hook(&mut uc)?;
    }
    if mode == Tracking::Instructions {
        uc.add_code_hook(1, 0, track::on_instruction)?;
    }

    if info.entry == SyscallEntry::Instruction {
        uc.add_insn_sys_hook(X86Insn::SYSCALL, 1, 0, move |uc| trap_syscall(uc, machine))?;
    }
    let syscall_intno = match info.entry {
        SyscallEntry::Interrupt(intno) => Some(intno),
        SyscallEntry::Instruction => None,
    };
    // Every other interrupt (breakpoint, illegal instruction, divide error, …)
    // becomes a signal once the engine has stopped.
    uc.add_intr_hook(move |uc, intno| {
        if Some(intno) == syscall_intno {
            trap_syscall(uc, machine);
        } else {
            uc.get_data_mut().trap = Some(Trap::Interrupt(intno));
            let _ = uc.emu_stop();
        }
    })?;
    Ok(uc)
}

/// Most executable areas [`cover_code`] covers.
const MAX_CODE_HOOKS: usize = 32;

/// Covers every executable area of the page table with a memory hook that
/// never fires, and no other area.
///
/// After translating a block, Unicorn scans its whole TLB to put the block's
/// page back on the slow write path (so that a write to translated code is
/// seen) — unless a memory hook covers the block's address: then it keeps
/// every page under such a hook on the slow write path instead. The scan
/// walks the TLB of every address-space mode (many on AArch64), and a stop
/// inside a block makes the engine translate the block that starts at the
/// stop the first time one falls there (`track`; BENCHMARKS.md). Only code
/// pages pay the slow path here; the data areas, which the guest writes,
/// stay uncovered. The hook (an unmapped-fetch hook) could
/// only fire for an address the TLB-fill hook gave without physical memory
/// behind it, which identity mapping rules out, and it declines to handle it,
/// as no hook would.
///
/// At most [`MAX_CODE_HOOKS`] areas are covered (the lowest): Unicorn walks
/// its hook list at every translation, and a guest may map code in many
/// pieces. The others only lose the speed-up.
pub(crate) fn cover_code(uc: &mut Engine) -> Result<(), uc_error> {
    let wanted: Vec<(u64, u64)> = uc
        .get_data()
        .pages
        .areas()
        .filter(|area| area.perms.contains(Perms::EXEC))
        .map(|area| (area.start, area.end))
        .take(MAX_CODE_HOOKS)
        .collect();
    let current = std::mem::take(&mut uc.get_data_mut().code_hooks);
    let mut kept = Vec::with_capacity(wanted.len());
    for (range, id) in current {
        if wanted.contains(&range) {
            kept.push((range, id));
        } else {
            uc.remove_hook(id)?;
        }
    }
    for range in wanted {
        if !kept.iter().any(|&(r, _)| r == range) {
            let id = uc.add_mem_hook(HookType::MEM_FETCH_UNMAPPED, range.0, range.1 - 1, |_, _, _, _, _| false)?;
            kept.push((range, id));
        }
    }
    uc.get_data_mut().code_hooks = kept;
    Ok(())
}

fn trap_syscall(uc: &mut Unicorn<'_, Shared>, machine: &'static dyn Machine) {
    match machine.take_syscall(uc) {
        Ok(nr) => uc.get_data_mut().trap = Some(Trap::Syscall(nr)),
        Err(err) => uc.get_data_mut().hook_error = Some(err),
    }
    let _ = uc.emu_stop();
}

/// A fresh engine for `machine` following execution as `tracking` says
/// (for the program `file`; `what` the engine is for, named in errors).
pub(crate) fn new_engine(
    machine: &'static dyn crate::machine::arch::Machine,
    tracking: Tracking,
    file: &str,
    what: &'static str,
) -> Result<crate::machine::engine::Engine, crate::error::Error> {
    let tracker = Tracker::new(machine.info(), tracking).map_err(|err| crate::error::Error::Setup {
        file: file.to_string(),
        problem: format!("cannot set up the instruction decoder: {err}"),
    })?;
    create(machine, tracker).map_err(crate::error::Error::engine(file, what))
}
