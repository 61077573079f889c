//! Where guest instructions begin and what they do to the call stack.
//!
//! The emulator counts instructions and keeps its ground-truth
//! return-address stack per translated block, so it needs two facts about a
//! block of code: the start of every instruction in it (to count the
//! instructions a block cut short did execute) and whether its last
//! instruction calls, returns or jumps indirectly. Capstone supplies the
//! instruction boundaries on all three architectures; the classification is
//! a small per-architecture rule (`classify`).

use capstone::arch::arm64::{ArchMode as Arm64Mode, Arm64Insn};
use capstone::arch::sysz::ArchMode as SyszMode;
use capstone::arch::x86::{ArchMode as X86Mode, X86Insn, X86OperandType};
use capstone::arch::{ArchDetail, BuildsCapstone as _, DetailsArchInsn as _};
use capstone::Capstone;
use kmodel::arch::Arch;

/// What an instruction does to the stack of calls in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Flow {
    /// Nothing: ordinary instructions, direct jumps and direct conditional
    /// branches (a direct tail call leaves the stack as it is).
    Plain,
    /// A call: the next instruction's address becomes a return address.
    Call,
    /// A return, or a jump through the link register.
    Return,
    /// A jump to a computed address other than a return: switch tables,
    /// tail calls through a register, `longjmp`.
    Jump,
}

/// A decoded instruction's effect on the call stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Transfer {
    /// What it does.
    pub flow: Flow,
    /// Address of the next instruction: a call's return address, and where
    /// a conditional branch that is not taken goes.
    pub next: u64,
    /// Whether the branch may fall through (s390x `b<cond>r`).
    pub conditional: bool,
}

impl Transfer {
    /// An instruction that does nothing to the call stack.
    pub const PLAIN: Transfer = Transfer { flow: Flow::Plain, next: 0, conditional: false };

    /// Whether the branch was taken, given the address execution went on at.
    pub fn taken(&self, next_pc: u64) -> bool {
        !self.conditional || next_pc != self.next
    }
}

/// A decoded block of code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Offset of each instruction from the block's start, in order.
    pub starts: Vec<u32>,
    /// The last instruction's effect.
    pub last: Transfer,
    /// Whether Capstone decoded every byte. If not, the undecodable rest
    /// counts as one instruction that does nothing to the call stack.
    pub complete: bool,
}

/// Capstone set up for one architecture.
pub struct Decoder {
    arch: Arch,
    cs: Capstone,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").field("arch", &self.arch).finish_non_exhaustive()
    }
}

impl Decoder {
    /// A decoder for `arch`'s user-mode instruction set.
    pub fn new(arch: Arch) -> Result<Decoder, capstone::Error> {
        let builder = Capstone::new();
        // Operand details are needed only to tell an x86 indirect `jmp` from a direct one.
        let cs = match arch {
            Arch::X86_64 => builder.x86().mode(X86Mode::Mode64).detail(true).build(),
            Arch::Aarch64 => builder.arm64().mode(Arm64Mode::Arm).build(),
            Arch::S390x => builder.sysz().mode(SyszMode::Default).build(),
        }?;
        Ok(Decoder { arch, cs })
    }

    /// Decodes the block of `code` at `addr`. Never fails and never returns
    /// an empty block: bytes Capstone cannot decode (or no bytes at all)
    /// count as one instruction.
    pub fn block(&self, code: &[u8], addr: u64) -> Block {
        let mut starts = Vec::new();
        let mut last = Transfer::PLAIN;
        let mut decoded = 0usize;
        if let Ok(insns) = self.cs.disasm_all(code, addr) {
            for insn in insns.iter() {
                starts.push(decoded as u32);
                decoded += insn.len();
                last = self.transfer(insn);
            }
        }
        // An empty block (the engine's bytes could not be read) still holds
        // the instruction the engine translated.
        let complete = decoded == code.len() && !code.is_empty();
        if !complete {
            starts.push(decoded as u32);
            last = Transfer::PLAIN;
        }
        Block { starts, last, complete }
    }

    /// The effect of the single instruction `code` at `addr`
    /// ([`Transfer::PLAIN`] if it cannot be decoded).
    pub fn instruction(&self, code: &[u8], addr: u64) -> Transfer {
        match self.cs.disasm_count(code, addr, 1) {
            Ok(insns) => insns.iter().next().map_or(Transfer::PLAIN, |insn| self.transfer(insn)),
            Err(_) => Transfer::PLAIN,
        }
    }

    fn transfer(&self, insn: &capstone::Insn<'_>) -> Transfer {
        let (flow, conditional) = classify(self.arch, self, insn);
        Transfer { flow, next: insn.address() + insn.len() as u64, conditional }
    }

    /// Whether the x86 instruction's first operand is an immediate (a direct branch).
    fn x86_direct(&self, insn: &capstone::Insn<'_>) -> bool {
        let Ok(detail) = self.cs.insn_detail(insn) else { return false };
        match detail.arch_detail() {
            ArchDetail::X86Detail(x86) => {
                x86.operands().next().is_some_and(|op| matches!(op.op_type, X86OperandType::Imm(_)))
            }
            _ => false,
        }
    }
}

/// The per-architecture rule: what `insn` does to the call stack, and
/// whether it may fall through.
fn classify(arch: Arch, decoder: &Decoder, insn: &capstone::Insn<'_>) -> (Flow, bool) {
    match arch {
        Arch::X86_64 => (classify_x86_64(decoder, insn), false),
        Arch::Aarch64 => (classify_aarch64(insn), false),
        Arch::S390x => classify_s390x(insn.bytes()),
    }
}

/// x86-64: `call` in every form (relative, `*reg`, `*mem`) pushes the
/// return address; `ret` and `ret imm16` return; `jmp *reg`/`*mem` jump.
/// Far transfers do not occur in Linux user code.
fn classify_x86_64(decoder: &Decoder, insn: &capstone::Insn<'_>) -> Flow {
    let id = insn.id().0;
    if id == X86Insn::X86_INS_CALL as u32 {
        Flow::Call
    } else if id == X86Insn::X86_INS_RET as u32 {
        Flow::Return
    } else if id == X86Insn::X86_INS_JMP as u32 && !decoder.x86_direct(insn) {
        Flow::Jump
    } else {
        Flow::Plain
    }
}

/// AArch64 calls link into x30: `bl`, `blr` and the pointer-authenticating
/// `blraa`/`blrab` forms. Returns are `ret`/`ret xN` (and `retaa`/`retab`);
/// a `br` through x30 is a return too (glibc's `__longjmp` ends that way),
/// any other `br` an indirect jump.
fn classify_aarch64(insn: &capstone::Insn<'_>) -> Flow {
    use Arm64Insn::*;
    const CALLS: [Arm64Insn; 6] =
        [ARM64_INS_BL, ARM64_INS_BLR, ARM64_INS_BLRAA, ARM64_INS_BLRAAZ, ARM64_INS_BLRAB, ARM64_INS_BLRABZ];
    const RETURNS: [Arm64Insn; 3] = [ARM64_INS_RET, ARM64_INS_RETAA, ARM64_INS_RETAB];
    const JUMPS: [Arm64Insn; 5] = [ARM64_INS_BR, ARM64_INS_BRAA, ARM64_INS_BRAAZ, ARM64_INS_BRAB, ARM64_INS_BRABZ];
    /// Link register number.
    const X30: u32 = 30;
    let id = insn.id().0;
    let is = |set: &[Arm64Insn]| set.iter().any(|&i| i as u32 == id);
    if is(&CALLS) {
        Flow::Call
    } else if is(&RETURNS) {
        Flow::Return
    } else if is(&JUMPS) {
        // Every branch-to-register encoding has Rn in bits 5–9.
        let word = insn.bytes().try_into().map_or(0, u32::from_le_bytes);
        if (word >> 5) & 31 == X30 {
            Flow::Return
        } else {
            Flow::Jump
        }
    } else {
        Flow::Plain
    }
}

/// s390x, by opcode: the architecture defines branches by opcode and mask
/// fields, while Capstone splits `bcr` into a mnemonic per condition.
///
/// * Calls are the branch-and-save instructions that link into %r14 (the
///   ABI's return-address register): `brasl`, `bras`, `basr`, `bas`, `balr`,
///   `bal`. Linking into another register is not a call: `bras %r13, …`
///   jumps over a literal pool and leaves its address in %r13.
/// * Returns are branches to %r14: `br %r14` and the conditional
///   `b<cond>r %r14` (`bcr M, %r14`), and `b 0(%r14)`.
/// * Other branches to a register or computed address are indirect jumps.
/// * Register 0 as the branch address means "do not branch" (`bcr 15, %r0`
///   serialises, `basr %rX, %r0` only loads the address).
fn classify_s390x(bytes: &[u8]) -> (Flow, bool) {
    /// The ABI's return-address register.
    const R14: u8 = 14;
    let byte = |i: usize| bytes.get(i).copied().unwrap_or(0);
    let (r1, r2) = (byte(1) >> 4, byte(1) & 15);
    let link = |r1: u8| if r1 == R14 { Flow::Call } else { Flow::Jump };
    match (byte(0), byte(1) & 15) {
        // BCR M1, R2: mask 15 always branches, 0 never.
        (0x07, _) if r1 != 0 && r2 != 0 => (if r2 == R14 { Flow::Return } else { Flow::Jump }, r1 != 15),
        // BASR/BALR R1, R2.
        (0x0d | 0x05, _) if r2 != 0 => (link(r1), false),
        // BAS/BAL R1, D2(X2, B2).
        (0x4d | 0x45, _) => (link(r1), false),
        // BC M1, D2(X2, B2): a branch to a computed address; `b 0(%r14)` returns.
        (0x47, _) if r1 != 0 => {
            let returns = r2 == 0 && byte(2) >> 4 == R14 && byte(2) & 15 == 0 && byte(3) == 0;
            (if returns { Flow::Return } else { Flow::Jump }, r1 != 15)
        }
        // BCTR R1, R2: decrement and branch to a register while non-zero.
        (0x06, _) if r2 != 0 => (Flow::Jump, true),
        // BRAS R1, I2 and BRASL R1, I2 (relative): calls only when linking into %r14.
        (0xa7 | 0xc0, 5) if r1 == R14 => (Flow::Call, false),
        _ => (Flow::Plain, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(arch: Arch, code: &[u8]) -> (Flow, bool) {
        let t = Decoder::new(arch).expect("capstone").instruction(code, 0x1000);
        (t.flow, t.conditional)
    }

    #[test]
    fn x86_64_calls_returns_and_jumps() {
        let plain = (Flow::Plain, false);
        let cases: &[(&[u8], (Flow, bool))] = &[
            (&[0xe8, 0, 0, 0, 0], (Flow::Call, false)),             // call rel32
            (&[0xff, 0xd0], (Flow::Call, false)),                   // call *%rax
            (&[0x41, 0xff, 0x14, 0x24], (Flow::Call, false)),       // call *(%r12)
            (&[0xff, 0x15, 0, 0, 0, 0], (Flow::Call, false)),       // call *0(%rip)
            (&[0xc3], (Flow::Return, false)),                       // ret
            (&[0xf3, 0xc3], (Flow::Return, false)),                 // repz ret
            (&[0xc2, 0x08, 0x00], (Flow::Return, false)),           // ret $8
            (&[0xff, 0xe0], (Flow::Jump, false)),                   // jmp *%rax
            (&[0x3e, 0xff, 0xe2], (Flow::Jump, false)),             // notrack jmp *%rdx
            (&[0xff, 0x24, 0xc5, 0, 0, 0, 0], (Flow::Jump, false)), // jmp *0(,%rax,8)
            (&[0xeb, 0xfe], plain),                                 // jmp .
            (&[0xe9, 0, 0, 0, 0], plain),                           // jmp rel32
            (&[0x74, 0x02], plain),                                 // je
            (&[0x0f, 0x05], plain),                                 // syscall
        ];
        for (code, expected) in cases {
            assert_eq!(flow(Arch::X86_64, code), *expected, "{code:02x?}");
        }
        let t = Decoder::new(Arch::X86_64).unwrap().instruction(&[0xff, 0x15, 0, 0, 0, 0], 0x1000);
        assert_eq!(t.next, 0x1006);
    }

    #[test]
    fn aarch64_calls_returns_and_jumps() {
        let cases: &[(u32, Flow)] = &[
            (0x9400_0010, Flow::Call),   // bl
            (0xd63f_0020, Flow::Call),   // blr x1
            (0xd65f_03c0, Flow::Return), // ret
            (0xd65f_0020, Flow::Return), // ret x1
            (0xd61f_03c0, Flow::Return), // br x30
            (0xd61f_0200, Flow::Jump),   // br x16
            (0x1400_0004, Flow::Plain),  // b
            (0xb400_0040, Flow::Plain),  // cbz x0
            (0xd400_0001, Flow::Plain),  // svc #0
        ];
        for &(word, expected) in cases {
            assert_eq!(flow(Arch::Aarch64, &word.to_le_bytes()), (expected, false), "{word:#010x}");
        }
    }

    #[test]
    fn s390x_calls_link_into_r14_and_conditional_returns_count() {
        let cases: &[(&[u8], (Flow, bool))] = &[
            (&[0xc0, 0xe5, 0, 0, 0, 8], (Flow::Call, false)),   // brasl %r14, .+16
            (&[0xa7, 0xe5, 0, 4], (Flow::Call, false)),         // bras %r14, .+8
            (&[0x0d, 0xe1], (Flow::Call, false)),               // basr %r14, %r1
            (&[0x4d, 0xe0, 0x10, 0x00], (Flow::Call, false)),   // bas %r14, 0(%r1)
            (&[0xa7, 0xd5, 0, 4], (Flow::Plain, false)),        // bras %r13, .+8 (literal pool)
            (&[0xc0, 0x15, 0, 0, 0, 8], (Flow::Plain, false)),  // brasl %r1, …
            (&[0x07, 0xfe], (Flow::Return, false)),             // br %r14
            (&[0x07, 0x8e], (Flow::Return, true)),              // ber %r14
            (&[0x07, 0x7e], (Flow::Return, true)),              // bner %r14
            (&[0x47, 0xf0, 0xe0, 0x00], (Flow::Return, false)), // b 0(%r14)
            (&[0x07, 0xf1], (Flow::Jump, false)),               // br %r1
            (&[0x07, 0x21], (Flow::Jump, true)),                // bor %r1
            (&[0x07, 0x00], (Flow::Plain, false)),              // nopr
            (&[0x07, 0xf0], (Flow::Plain, false)),              // bcr 15, %r0 (serialise)
            (&[0x0d, 0x10], (Flow::Plain, false)),              // basr %r1, %r0 (no branch)
            (&[0xa7, 0xf4, 0, 4], (Flow::Plain, false)),        // j .+8
            (&[0x0a, 0x01], (Flow::Plain, false)),              // svc 1
        ];
        for (code, expected) in cases {
            assert_eq!(flow(Arch::S390x, code), *expected, "{code:02x?}");
        }
    }

    #[test]
    fn blocks_give_instruction_starts_and_undecodable_rest_counts_once() {
        let x86 = Decoder::new(Arch::X86_64).unwrap();
        // mov %rdi, %rax; add $1, %rax; call *%rax
        let block = x86.block(&[0x48, 0x89, 0xf8, 0x48, 0x83, 0xc0, 0x01, 0xff, 0xd0], 0x4000);
        assert_eq!(block.starts, [0, 3, 7]);
        assert_eq!(block.last, Transfer { flow: Flow::Call, next: 0x4009, conditional: false });
        assert!(block.complete);
        // nop, then a lone REX prefix Capstone cannot decode.
        let block = x86.block(&[0x90, 0x48], 0x4000);
        assert_eq!(block.starts, [0, 1]);
        assert_eq!(block.last, Transfer::PLAIN);
        assert!(!block.complete);
        assert_eq!(x86.block(&[], 0x4000).starts, [0]);
    }
}
