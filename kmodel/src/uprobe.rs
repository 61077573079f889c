//! Uprobes as the deferred unwinder meets them (`kernel/events/uprobes.c`,
//! with each architecture's `uprobes.c`): the breakpoint's trap,
//! `handle_swbp()` running the consumers in `handler_chain()` with
//! `utask->auprobe` set (what x86's `is_uprobe_at_func_entry()` reads,
//! and so `unwind_user_at_function_start()`), and what the kernel does
//! with the probed instruction afterwards: emulate it
//! (`arch_uprobe_skip_sstep()`) or single-step a copy of it out of line
//! (XOL), the PC left at the copy's slot. Both happen in
//! `exit_to_user_mode_loop()` (TIF_UPROBE) before the task_work loop, so a
//! deferred unwind requested by a consumer walks the registers as they are
//! *after* `handler_chain()` has cleared `auprobe`: the entry-frame rule
//! never applies to it, only to walks made inside the handler (perf's
//! classic `perf_callchain_user()`).

use crate::arch::{Arch, UserRegs};
use crate::event::EntryReason;
use crate::kernel::Kernel;
use crate::memory::UserMemory;
use crate::types::Tid;

/// What the kernel does with a probed instruction once the consumers have
/// run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UprobeStep {
    /// Emulated in the kernel (`arch_uprobe_skip_sstep()`): the task
    /// returns to user mode after the instruction, its effect applied.
    Emulated,
    /// Single-stepped from a copy in the XOL area (`pre_ssout()`): the task
    /// returns to user mode with its PC at the copy's slot, everything
    /// else as at the probe; the single-step trap then moves the PC past
    /// the original.
    OutOfLine,
}

/// The probed instruction's first bytes as `is_uprobe_at_func_entry()`
/// keeps them (`auprobe->insn`).
fn first_bytes(insn: &[u8]) -> [u8; 4] {
    let mut out = [0u8; 4];
    for (o, b) in out.iter_mut().zip(insn) {
        *o = *b;
    }
    out
}

impl Arch {
    /// The first XOL slot of an area at `area` (`xol_get_insn_slot()`:
    /// slot 0 holds the uretprobe trampoline; `UPROBE_XOL_SLOT_BYTES` is
    /// 128 on x86-64, 4 on AArch64, 256 on s390x).
    pub fn xol_slot(self, area: u64) -> u64 {
        area + match self {
            Arch::X86_64 => 128,
            Arch::Aarch64 => 4,
            Arch::S390x => 256,
        }
    }

    /// Whether upstream emulates `insn` (the instruction's bytes in the
    /// guest's order) rather than single-stepping it out of line: on
    /// x86-64 pushes of a register (`push_setup_xol_ops()`), NOPs and
    /// relative branches (`branch_setup_xol_ops()`); on AArch64 the NOP
    /// and the instructions `decode-insn.c` simulates (branches, ADR/ADRP,
    /// literal loads); on s390x the PC-relative ones `uprobes.c` emulates
    /// (the RIL formats under opcodes 0xc0, 0xc4, 0xc6).
    pub fn uprobe_emulates(self, insn: &[u8]) -> bool {
        match self {
            Arch::X86_64 => {
                // A REX.B prefix (0x41) selects r8-r15; other prefixes are
                // not what a compiler puts first in a function.
                let op = match insn {
                    [0x41, op, ..] => *op,
                    [op, ..] => *op,
                    [] => return false,
                };
                matches!(op, 0x50..=0x57 | 0x90 | 0xe8 | 0xe9 | 0xeb | 0x70..=0x7f)
                    || matches!(insn, [0x0f, 0x1f, ..] | [0x0f, 0x80..=0x8f, ..] | [0x66, 0x90, ..])
            }
            Arch::Aarch64 => {
                let Some(word) = insn.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])) else {
                    return false;
                };
                word == 0xd503_201f // NOP
                    || word & 0x7c00_0000 == 0x1400_0000 // B, BL
                    || word & 0xff00_0010 == 0x5400_0000 // B.cond
                    || word & 0x7e00_0000 == 0x3400_0000 // CBZ, CBNZ
                    || word & 0x7e00_0000 == 0x3600_0000 // TBZ, TBNZ
                    || word & 0x1f00_0000 == 0x1000_0000 // ADR, ADRP
                    || word & 0xfe1f_fc1f == 0xd61f_0000 // BR, BLR, RET
                    || word & 0x3b00_0000 == 0x1800_0000 // LDR (literal), LDRSW (literal)
            }
            Arch::S390x => matches!(insn, [0xc0 | 0xc4 | 0xc6, ..]),
        }
    }
}

impl Kernel {
    /// The breakpoint of a uprobe at `regs.pc` traps (`insn`: the probed
    /// instruction, which the breakpoint replaced): the task enters the
    /// kernel, and `handle_swbp()` runs the consumers with `auprobe` set,
    /// the registers at the probe: every perf session probing the address
    /// counts the hit and samples when its period has come. Returns what
    /// the kernel does next with the instruction; the host carries it out
    /// (runs the guest's instruction, or not yet), gives the registers the
    /// task returns with ([`Kernel::set_user_regs`]) and returns it to user
    /// mode, where the task_work loop serves any deferred request.
    pub fn uprobe_hit(&mut self, tid: Tid, regs: UserRegs, insn: &[u8], mem: &dyn UserMemory) -> UprobeStep {
        let (arch, pc) = (regs.arch, regs.pc);
        self.enter(tid, EntryReason::Uprobe, regs, mem);
        let cpu = self.task(tid).cpu;
        let probe = first_bytes(insn);
        if let Some(r) = &mut self.task_mut(tid).regs {
            r.probe = Some(probe);
        }
        self.tracers_on_uprobe(cpu, tid, pc, mem);
        if let Some(r) = &mut self.task_mut(tid).regs {
            r.probe = None;
        }
        if arch.uprobe_emulates(insn) {
            UprobeStep::Emulated
        } else {
            UprobeStep::OutOfLine
        }
    }

    /// The user registers `tid` (in the kernel) will return with, as the
    /// kernel left them in `pt_regs` (after emulating an instruction, or
    /// pointing at an XOL slot).
    pub fn set_user_regs(&mut self, tid: Tid, regs: UserRegs) {
        self.ledger_user_pc(tid, regs.pc);
        self.task_mut(tid).regs = Some(regs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries the lab's guests start functions with: x86-64's `push
    /// %rbp` is emulated, `endbr64` and `sub` are stepped; AArch64's `stp
    /// x29, x30, [sp, #-N]!` and `paciasp` are stepped, `b` simulated;
    /// s390x's `stmg` is stepped, `larl` emulated.
    #[test]
    fn function_entries_are_emulated_or_stepped_as_upstream_does() {
        assert!(Arch::X86_64.uprobe_emulates(&[0x55, 0x48, 0x89, 0xe5]));
        assert!(Arch::X86_64.uprobe_emulates(&[0x41, 0x57]));
        assert!(!Arch::X86_64.uprobe_emulates(&[0xf3, 0x0f, 0x1e, 0xfa]));
        assert!(!Arch::X86_64.uprobe_emulates(&[0x48, 0x83, 0xec, 0x08]));
        assert!(!Arch::Aarch64.uprobe_emulates(&0xa9bf_7bfdu32.to_le_bytes()));
        assert!(!Arch::Aarch64.uprobe_emulates(&0xd503_233fu32.to_le_bytes()));
        assert!(Arch::Aarch64.uprobe_emulates(&0x1400_0010u32.to_le_bytes()));
        assert!(!Arch::S390x.uprobe_emulates(&[0xeb, 0x6f, 0xf0, 0x30, 0x00, 0x24]));
        assert!(Arch::S390x.uprobe_emulates(&[0xc0, 0x10, 0x00, 0x00, 0x00, 0x10]));
    }
}
