//! The x86 user states upstream's `user.c` treats apart, each a stack and
//! registers with the trace a walk by frame pointers must give: a task
//! stopped by a uprobe on a function's first instruction (`push %rbp` or
//! `endbr64`: the return address is at SP, the caller's frame pointer
//! still live), the same without the uprobe (the caller is skipped), a
//! compat task's 4-byte words, and VM86 mode (no walk at all).

use kmodel::arch::{Arch, RegsMode, UserRegs};
use kmodel::memory::PagedMemory;

/// Where the stacks are (below 4 GiB, as a compat task's must be).
const STACK: u64 = 0x7000_0000;
/// The PC: a function's first instruction.
pub const ENTRY: u64 = 0x40_1000;
/// The return address into the function's caller, at SP on entry.
pub const CALLER: u64 = 0x40_1050;
/// The return addresses in the callers' frame records, outermost last.
pub const OUTER: [u64; 2] = [0x40_1100, 0x40_1200];

/// `push %rbp; mov %rsp,%rbp` and `endbr64`, the probed instructions.
const PUSH_RBP: [u8; 4] = [0x55, 0x48, 0x89, 0xe5];
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// One case: its name, memory, registers and the trace expected.
pub struct Case {
    /// What it is.
    pub name: &'static str,
    /// The stack.
    pub mem: PagedMemory,
    /// The registers at kernel entry.
    pub regs: UserRegs,
    /// The trace `user.c` gives.
    pub trace: Vec<u64>,
}

/// A stack at function entry: SP at the return address into the caller,
/// FP at the caller's frame record, which chains to one more (words of
/// `ws` bytes).
fn entry_stack(ws: u64) -> (PagedMemory, u64, u64) {
    let mut mem = PagedMemory::new();
    mem.map(STACK, 0x1000);
    let put = |mem: &mut PagedMemory, addr: u64, value: u64| mem.write(addr, &value.to_le_bytes()[..ws as usize]);
    let sp = STACK + 0x100;
    let (f0, f1) = (STACK + 0x200, STACK + 0x300);
    put(&mut mem, sp, CALLER);
    put(&mut mem, f0, f1);
    put(&mut mem, f0 + ws, OUTER[0]);
    put(&mut mem, f1, 0);
    put(&mut mem, f1 + ws, OUTER[1]);
    (mem, sp, f0)
}

/// Every case.
pub fn cases() -> Vec<Case> {
    let regs = |sp, fp, mode, probe| UserRegs { mode, probe, ..UserRegs::new(Arch::X86_64, ENTRY, sp, fp, 0) };
    let mut out = Vec::new();
    for (name, mode, ws) in [("64-bit", RegsMode::Native, 8), ("compat", RegsMode::Compat, 4)] {
        for (probe_name, probe) in [("push %rbp", Some(PUSH_RBP)), ("endbr64", Some(ENDBR64)), ("no uprobe", None)] {
            let (mem, sp, fp) = entry_stack(ws);
            // At a function's first instruction the FP chain skips the
            // caller: only the uprobe's entry frame finds it (endbr64
            // counts in 64-bit mode only).
            let entry = probe.is_some_and(|p| p == PUSH_RBP || (p == ENDBR64 && mode == RegsMode::Native));
            let trace = if entry { vec![ENTRY, CALLER, OUTER[0], OUTER[1]] } else { vec![ENTRY, OUTER[0], OUTER[1]] };
            let name = match (name, probe_name) {
                ("64-bit", "push %rbp") => "64-bit, uprobe on push %rbp",
                ("64-bit", "endbr64") => "64-bit, uprobe on endbr64",
                ("64-bit", _) => "64-bit, no uprobe",
                (_, "push %rbp") => "compat, uprobe on push %rbp",
                (_, "endbr64") => "compat, uprobe on endbr64 (not an entry in compat mode)",
                _ => "compat, no uprobe",
            };
            out.push(Case { name, mem, regs: regs(sp, fp, mode, probe), trace });
        }
    }
    let (mem, sp, fp) = entry_stack(8);
    out.push(Case { name: "VM86", mem, regs: regs(sp, fp, RegsMode::Vm86, Some(PUSH_RBP)), trace: Vec::new() });
    out
}
