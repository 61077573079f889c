//! The three architectures the model unwinds, and what differs between
//! them: word size and byte order, register roles, frame-pointer layouts.

use sframe::Abi;

/// A user-space architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// x86-64 (little-endian).
    X86_64,
    /// AArch64 (little-endian).
    Aarch64,
    /// s390x (big-endian).
    S390x,
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arch::X86_64 => "x86-64",
            Arch::Aarch64 | Arch::S390x => self.name(),
        })
    }
}

/// How a frame-pointer step finds the caller (`kernel/unwind/user.c`'s
/// per-arch frame description): CFA = FP + `cfa_off`, RA at CFA + `ra_off`,
/// saved FP at CFA + `fp_off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpFrame {
    /// CFA offset from the frame pointer.
    pub cfa_off: i64,
    /// RA slot offset from the CFA.
    pub ra_off: i64,
    /// Saved-FP slot offset from the CFA.
    pub fp_off: i64,
}

impl Arch {
    /// All three, in a fixed order.
    pub const ALL: [Arch; 3] = [Arch::X86_64, Arch::Aarch64, Arch::S390x];

    /// The machine name: Linux's `uname -m`, the scenario files' spelling
    /// and the directory of the committed guests (`x86_64`, `aarch64`,
    /// `s390x`). [`Display`](std::fmt::Display) gives the name people write
    /// (`x86-64`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::S390x => "s390x",
        }
    }

    /// How many user registers `perf record --call-graph dwarf` samples
    /// (`PERF_REGS_MASK` of `tools/perf/arch/*/include/perf_regs.h`):
    /// x86-64's 24 less the four segment registers, AArch64's x0–x30, SP
    /// and PC, s390x's 16 GPRs, 16 FPRs, the PSW mask and PC.
    pub fn perf_dwarf_regs(self) -> u32 {
        match self {
            Arch::X86_64 => 20,
            Arch::Aarch64 => 33,
            Arch::S390x => 34,
        }
    }

    /// The SFrame ABI of this architecture's user space.
    pub fn sframe_abi(self) -> Abi {
        match self {
            Arch::X86_64 => Abi::Amd64,
            Arch::Aarch64 => Abi::Aarch64Little,
            Arch::S390x => Abi::S390x,
        }
    }

    /// The architecture an SFrame ABI describes.
    pub fn from_sframe_abi(abi: Abi) -> Option<Self> {
        match abi {
            Abi::Amd64 => Some(Arch::X86_64),
            Abi::Aarch64Little => Some(Arch::Aarch64),
            Abi::S390x => Some(Arch::S390x),
            Abi::Aarch64Big => None,
        }
    }

    /// Bytes per stack word (the model covers 64-bit tasks only).
    pub fn word_size(self) -> u64 {
        8
    }

    /// True for big-endian user memory.
    pub fn big_endian(self) -> bool {
        self == Arch::S390x
    }

    /// Decodes a stack word read from user memory.
    pub fn word(self, bytes: [u8; 8]) -> u64 {
        if self.big_endian() {
            u64::from_be_bytes(bytes)
        } else {
            u64::from_le_bytes(bytes)
        }
    }

    /// The frame-pointer frame layout, or `None` where FP unwinding does not
    /// exist (s390x has only the back chain, see [`Arch::back_chain`]).
    ///
    /// x86-64: `push %rbp; mov %rsp,%rbp` → CFA = FP+16, RA at CFA−8, FP at
    /// CFA−16. AArch64: the frame record {x29, x30} at FP → CFA = FP+16, RA
    /// at CFA−8, FP at CFA−16 as well.
    pub fn fp_frame(self) -> Option<FpFrame> {
        match self {
            Arch::X86_64 | Arch::Aarch64 => Some(FpFrame { cfa_off: 16, ra_off: -8, fp_off: -16 }),
            Arch::S390x => None,
        }
    }

    /// s390x `-mbackchain`: the word at SP is the caller's SP, and the
    /// caller's r14 (RA) sits at caller SP + 112 (the register save area of
    /// the caller's frame, slot of r14). `None` elsewhere.
    pub fn back_chain(self) -> Option<i64> {
        (self == Arch::S390x).then_some(112)
    }

    /// SFrame: caller's SP = CFA + this (s390x CFA is SP at call + 160).
    pub fn sp_from_cfa(self) -> i64 {
        match self {
            Arch::S390x => -160,
            _ => 0,
        }
    }

    /// True if the return address is in a link register on entry (so the
    /// topmost frame may keep RA there).
    pub fn has_link_register(self) -> bool {
        self != Arch::X86_64
    }

    /// Removes a pointer-authentication signature from a return address
    /// that SFrame marks as mangled (AArch64 PAC). The model assumes 48-bit
    /// user virtual addresses: the signature lives in the bits above, so
    /// keeping the low 48 bits recovers the address (what the kernel's
    /// `ptrauth_strip_user_insn_pac()` does for that VA size). No other
    /// architecture signs return addresses.
    pub fn strip_pac(self, ra: u64) -> u64 {
        match self {
            Arch::Aarch64 => ra & ((1 << 48) - 1),
            Arch::X86_64 | Arch::S390x => ra,
        }
    }
}

/// The user registers saved at kernel entry: what every unwind starts from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UserRegs {
    /// Architecture.
    pub arch: Arch,
    /// Program counter.
    pub pc: u64,
    /// Registers by DWARF number (x86-64 0–16, AArch64 0–31 with 31 = SP,
    /// s390x 0–15 and the FPRs as 16–31, where leaf functions may keep FP
    /// and RA); SP, FP and the link register among them.
    pub gprs: Vec<u64>,
    /// The x86 mode the registers were saved in (`cs`, `flags`): what
    /// `unwind_user_word_size()` reads.
    #[serde(default, skip_serializing_if = "RegsMode::is_native")]
    pub mode: RegsMode,
    /// The first bytes of the instruction a uprobe the task is stopped at
    /// replaced (`current->utask->auprobe->insn`), which x86's
    /// `is_uprobe_at_func_entry()` reads beside the registers; `None`: no
    /// uprobe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<[u8; 4]>,
}

/// The x86 mode a task's user registers were saved in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegsMode {
    /// The architecture's own mode (x86-64: 64-bit).
    #[default]
    Native,
    /// A 32-bit (compat) task on x86-64: 4-byte stack words.
    Compat,
    /// Virtual-8086 mode (`X86_VM_MASK`): the kernel does not unwind it.
    Vm86,
}

impl RegsMode {
    /// The architecture's own mode.
    pub fn is_native(&self) -> bool {
        *self == RegsMode::Native
    }
}

/// `endbr64`, which x86's `is_uprobe_at_func_entry()` counts as a
/// function's first instruction (64-bit only), as `push %rbp` (0x55).
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

impl UserRegs {
    /// `unwind_user_word_size()`: the size of a stack word the walk reads
    /// (x86: 0 in VM86 mode, which the kernel does not unwind; 4 for a
    /// compat task).
    pub fn word_size(&self) -> u64 {
        match self.mode {
            RegsMode::Native => self.arch.word_size(),
            RegsMode::Compat => 4,
            RegsMode::Vm86 => 0,
        }
    }

    /// x86's `unwind_user_at_function_start()`: the task is stopped by a
    /// uprobe on a function's first instruction (`push %rbp`, or `endbr64`
    /// in 64-bit mode), where the caller's frame pointer is still live and
    /// the return address is at SP. Upstream has the rule on x86 only.
    pub fn at_function_start(&self) -> bool {
        self.arch == Arch::X86_64
            && self.probe.is_some_and(|insn| insn[0] == 0x55 || (self.mode == RegsMode::Native && insn == ENDBR64))
    }

    /// Registers with every GPR zero but PC, SP and FP (and LR if given).
    pub fn new(arch: Arch, pc: u64, sp: u64, fp: u64, lr: u64) -> Self {
        let (sp_n, fp_n) = arch.sframe_abi().sp_fp_dwarf();
        let mut gprs = vec![0; Self::gpr_count(arch)];
        gprs[sp_n as usize] = sp;
        gprs[fp_n as usize] = fp;
        if arch.has_link_register() {
            gprs[arch.sframe_abi().ra_dwarf() as usize] = lr;
        }
        UserRegs { arch, pc, gprs, mode: RegsMode::Native, probe: None }
    }

    /// Number of DWARF-numbered GPRs kept.
    pub fn gpr_count(arch: Arch) -> usize {
        match arch {
            Arch::X86_64 => 17,
            Arch::Aarch64 => 32,
            Arch::S390x => 32,
        }
    }

    /// A register by DWARF number, if the model keeps it.
    pub fn dwarf(&self, reg: u32) -> Option<u64> {
        self.gprs.get(reg as usize).copied()
    }

    /// Stack pointer.
    pub fn sp(&self) -> u64 {
        self.dwarf(self.arch.sframe_abi().sp_fp_dwarf().0).unwrap_or(0)
    }

    /// Frame pointer (rbp / x29 / r11).
    pub fn fp(&self) -> u64 {
        self.dwarf(self.arch.sframe_abi().sp_fp_dwarf().1).unwrap_or(0)
    }

    /// Link register (x30 / r14), `None` on x86-64.
    pub fn lr(&self) -> Option<u64> {
        self.arch.has_link_register().then(|| self.dwarf(self.arch.sframe_abi().ra_dwarf()).unwrap_or(0))
    }
}
