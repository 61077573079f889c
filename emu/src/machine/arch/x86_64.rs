//! x86-64.

use super::facts::{ArchInfo, StatField as F, StatLayout, SyscallConv, SyscallEntry};
use super::machine::{Cpu, Interrupt, Machine};
use crate::machine::bytes::Endian;
use kmodel::arch::Arch;
use unicorn_engine::{uc_error, Mode, RegisterX86 as R};

/// The x86-64 machine.
pub(crate) struct X86_64;

static STAT: StatLayout = StatLayout {
    size: 144,
    fields: &[
        (F::Dev, 0, 8),
        (F::Ino, 8, 8),
        (F::Nlink, 16, 8),
        (F::Mode, 24, 4),
        (F::Uid, 28, 4),
        (F::Gid, 32, 4),
        (F::Rdev, 40, 8),
        (F::Size, 48, 8),
        (F::Blksize, 56, 8),
        (F::Blocks, 64, 8),
        (F::Time, 72, 8),
        (F::Time, 88, 8),
        (F::Time, 104, 8),
    ],
};

static INFO: ArchInfo = ArchInfo {
    arch: Arch::X86_64,
    uc_arch: unicorn_engine::Arch::X86,
    uc_mode: Mode::MODE_64,
    endian: Endian::Little,
    elf_machine: goblin::elf::header::EM_X86_64,
    pc: R::RIP as i32,
    sp: R::RSP as i32,
    fp: R::RBP as i32,
    ra: None,
    extra_dwarf: &[],
    gprs: &[
        R::RAX as i32,
        R::RDX as i32,
        R::RCX as i32,
        R::RBX as i32,
        R::RSI as i32,
        R::RDI as i32,
        R::RBP as i32,
        R::RSP as i32,
        R::R8 as i32,
        R::R9 as i32,
        R::R10 as i32,
        R::R11 as i32,
        R::R12 as i32,
        R::R13 as i32,
        R::R14 as i32,
        R::R15 as i32,
    ],
    gpr_names: &[
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
    ],
    syscall: SyscallConv {
        nr: R::RAX as i32,
        args: [R::RDI as i32, R::RSI as i32, R::RDX as i32, R::R10 as i32, R::R8 as i32, R::R9 as i32],
        ret: R::RAX as i32,
    },
    syscall_len: 2,
    clone_args: [0, 1, 2, 3, 4],
    entry: SyscallEntry::Instruction,
    // CPUID.1:EDX of Unicorn's qemu64 CPU, which is what Linux puts here.
    hwcap: 0x078b_fbfd,
    platform: "x86_64",
    pie_base: 0x5555_5555_4000,
    stat: &STAT,
    mmap_args_in_memory: false,
    red_zone: 128,
    // mov $15, %eax (rt_sigreturn); syscall
    sigreturn_code: &[0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05],
    old_sigreturn_code: &[],
};

impl Machine for X86_64 {
    fn info(&self) -> &'static ArchInfo {
        &INFO
    }

    fn tls(&self, read: &dyn Fn(i32) -> Result<u64, uc_error>) -> Result<u64, uc_error> {
        read(R::FS_BASE.into())
    }

    fn set_tls(&self, uc: &mut dyn Cpu, value: u64) -> Result<(), uc_error> {
        uc.write_reg(R::FS_BASE as i32, value)
    }

    fn interrupt(&self, intno: u32) -> Interrupt {
        match intno {
            0 | 16 | 19 => Interrupt::Arithmetic,
            1 | 3 => Interrupt::Breakpoint,
            6 => Interrupt::Illegal,
            _ => Interrupt::MemoryFault,
        }
    }
}
