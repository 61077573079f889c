//! Creating the engine with the emulator's hooks installed: the TLB fill,
//! which is the page-fault handler, and the traps (system calls and other
//! interrupts). The execution hooks that count instructions and keep the
//! ground truth are [`crate::track`]'s; this file installs them.

use crate::arch::{Machine, SyscallEntry};
use crate::engine::{Engine, Shared, Trap};
use crate::memory::{AccessKind, PageTable};
use crate::track::{self, Tracker, Tracking};
use unicorn_engine::{uc_error, MemType, Prot, TlbEntry, TlbType, Unicorn, X86Insn};

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
    let shared = Shared { pages: PageTable::default(), trap: None, hook_error: None, tracker };
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

fn trap_syscall(uc: &mut Unicorn<'_, Shared>, machine: &'static dyn Machine) {
    match machine.take_syscall(uc) {
        Ok(nr) => uc.get_data_mut().trap = Some(Trap::Syscall(nr)),
        Err(err) => uc.get_data_mut().hook_error = Some(err),
    }
    let _ = uc.emu_stop();
}

/// A fresh engine for `machine` following execution as `tracking` says
/// (for the program `file`, named in errors).
pub(crate) fn new_engine(
    machine: &'static dyn crate::arch::Machine,
    tracking: Tracking,
    file: &str,
) -> Result<crate::engine::Engine, crate::error::Error> {
    let tracker = Tracker::new(machine.info(), tracking).map_err(|err| crate::error::Error::Setup {
        file: file.to_string(),
        problem: format!("cannot set up the instruction decoder: {err}"),
    })?;
    create(machine, tracker).map_err(|err| crate::error::Error::Engine { file: file.to_string(), what: "start", err })
}
