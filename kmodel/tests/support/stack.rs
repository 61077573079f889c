//! A synthetic user stack with frame pointers, for the tests of the
//! deferred-unwind code.

use kmodel::arch::{Arch, UserRegs};
use kmodel::memory::PagedMemory;

/// Stack top of the synthetic task.
pub const STACK_TOP: u64 = 0x7fff_f000_0000;
/// Text addresses of the synthetic call chain (outermost last).
pub const CALLERS: [u64; 4] = [0x40_1100, 0x40_1200, 0x40_1300, 0x40_1400];

/// A user stack of `depth` frame-pointer frames (x86-64 / AArch64 layout:
/// saved FP at FP, RA at FP+8), the outermost with FP 0. Returns memory and
/// the registers of the innermost frame; its PC is 0x401000.
pub fn fp_stack(arch: Arch, depth: usize) -> (PagedMemory, UserRegs) {
    let mut mem = PagedMemory::new();
    mem.map(STACK_TOP - 0x10_0000, 0x10_0000);
    let be = arch.big_endian();
    let mut fp = STACK_TOP - 0x1000;
    let sp = fp - 0x40;
    let first_fp = fp;
    for i in 0..depth {
        let caller_fp = if i + 1 == depth { 0 } else { fp + 0x100 };
        mem.write_word(fp, caller_fp, be);
        mem.write_word(fp + 8, CALLERS[i % CALLERS.len()] + i as u64, be);
        fp = caller_fp;
    }
    let regs = UserRegs::new(arch, 0x40_1000, sp, first_fp, 0);
    (mem, regs)
}

/// The trace the FP unwinder must find for [`fp_stack`].
pub fn expected_trace(depth: usize) -> Vec<u64> {
    let mut v = vec![0x40_1000];
    v.extend((0..depth).map(|i| CALLERS[i % CALLERS.len()] + i as u64));
    v
}
