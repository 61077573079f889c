//! Deterministic emulation of static Linux programs on x86-64, AArch64 and
//! s390x, built on Unicorn.
//!
//! [`Emulator`] loads a static (or static-PIE) ELF executable, builds the
//! Linux initial stack, and runs it with a Linux system-call layer shared by
//! the three architectures. Execution is deterministic: the clock is virtual
//! (derived from the instruction count), randomness comes from a seed, and a
//! run can be stopped at any instruction count and resumed with identical
//! results. Guest memory tracks page residency, and the kernel side can read
//! it faultably or not (the kernel model's
//! [`Access`](kmodel::memory::Access)), also as an SFrame
//! [`ByteSource`](sframe::ByteSource) ([`GuestView`]).
//!
//! ```no_run
//! use emu::{Config, Emulator, Exit};
//! let mut emu = Emulator::load("hello", Config::default())?;
//! assert_eq!(emu.run_to_exit()?, Exit::Code(0));
//! print!("{}", String::from_utf8_lossy(emu.stdout()));
//! # Ok::<(), emu::Error>(())
//! ```
//!
//! # How it is built
//!
//! In two halves, as QEMU keeps its CPU engine apart from `linux-user/`;
//! files import one way only, so do the entries of each folder (a folder
//! taken as one), and `machine/` never imports `linux/`
//! (`scripts/import-cycles.sh` checks all three).
//!
//! **The machine** (`machine/`): the engine and what the lab adds to it.
//!
//! * **Architectures** ([`arch`]): the architecture is the kernel model's
//!   [`Arch`]; one [`Machine`] trait, one small impl per architecture
//!   (`arch/machine.rs`); everything constant (registers, syscall
//!   convention, `struct stat` layout, `AT_HWCAP`, trampolines) is an
//!   [`ArchInfo`] table ([`arch::info`]). A CPU interrupt is reported as an
//!   [`arch::Interrupt`]; which signal it becomes is Linux's business. The
//!   architectures see the engine as an [`arch::Cpu`] (registers and
//!   memory), not as the engine built on them.
//! * **Memory** ([`memory`], [`engine`], `hooks.rs`): Unicorn runs with its
//!   *virtual* TLB, whose fill hook consults the [`PageTable`]. A fill is the guest
//!   touching a page: a non-resident page becomes resident and is counted as
//!   a guest fault; a refused access is a SIGSEGV. Physical memory is
//!   identity-mapped and mirrors the mapped areas, in host memory the
//!   emulator owns (`ram.rs`), so a second engine can share it. This one mechanism works on
//!   all three architectures (s390x reports nothing usable otherwise), gives
//!   per-page permissions and residency, and makes eviction a TLB flush.
//!   The objects mapped from files are [`objects`].
//! * **Instruction count and ground truth** ([`track`], [`flow`],
//!   [`shadow`]): a hook per translated block counts instructions (each
//!   block decoded once with Capstone) and keeps the ground-truth
//!   return-address stack from the block's last instruction. Stops are exact,
//!   *before* instruction N, also inside a block, so runs with and without
//!   stops execute the same instructions; the instructions of a block
//!   before a stop inside it run in a second engine on the same memory
//!   (`step.rs`), so no translation is cut. Probes (breakpoints for
//!   uprobes: [`Emulator::set_probes`], [`RunLimit::and_probes`]) stop the
//!   same way before the instruction at an address, and blocks that hold
//!   one stay off the hook's fast path. [`Tracking::Instructions`] adds a
//!   per-instruction reference that tests compare against.
//!
//! **The Linux it runs** (`linux/`):
//!
//! * **The emulator** ([`Emulator`], `emulator.rs`): the running process's
//!   engine, memory map and registers, guest memory as the kernel reads
//!   it, and every other process; loading a program (`load.rs`, [`elf`],
//!   [`layout`], [`stack`]: segments, initial stack, engine, CPU); and the
//!   run loop (`run.rs`), the one place that services system calls and
//!   turns faults and traps into signals. [`NmiSource`] stops every N
//!   instructions and reports registers and ground truth.
//! * **Per-process state** (`proc_state.rs`): what the kernel keeps per
//!   process besides memory: its IDs, standard streams ([`Stdin`]) and open
//!   files, the virtual clock, the random stream, signal dispositions
//!   ([`SigAction`]).
//! * **Processes and threads** (`proc_table.rs`, `sched.rs`, `fork.rs`):
//!   the process table and its types ([`Pid`], [`Tid`], [`ProcessEvent`],
//!   [`Limits`]); the deterministic scheduler, which keeps the running
//!   thread's and process's state in the emulator's fields and parks the
//!   others' (a context switch swaps them; threads of one process share its
//!   engine and swap registers through a Unicorn context and their own
//!   ground-truth stacks); and the copy a `fork` makes, each process with
//!   its own engine.
//! * **System calls** ([`syscall`]): one table keyed by name with the
//!   numbers for each architecture; handlers are shared. A hook only records
//!   the trap and stops the engine; the run loop services the call. The
//!   calls about the calling task (IDs, limits, thread set-up, futexes) are
//!   `syscall/task.rs`; those that create, replace and reap processes
//!   `syscall/life.rs`. Files, pipes and `/dev`, `/proc` are [`fs`]. What
//!   they all speak, the user ABI (constants, error numbers, a call's
//!   outcome and record), is `linux/abi/`, below them, so files, signal
//!   frames and the emulator's state need not import the calls.
//! * **Signals** ([`signal`], [`sigframe`]): handlers run on Linux's own
//!   frame layout for each architecture (one file each under `sigframe/`),
//!   so unwinders can walk through them; the sigreturn trampolines live in
//!   a vDSO-like page.
//! * **The kernel model's view** ([`UserView`], [`GuestView`], `From<&Regs>`
//!   for [`kmodel::arch::UserRegs`]): user memory with faultable and
//!   non-faultable reads, registers by DWARF number.
//!
//! **On the host** ([`host`]): a program run like `qemu-user` runs it, with
//! the host's environment and streams (`unwindlab exec`).

#![warn(missing_docs)]

mod error;
pub mod host;
mod linux;
mod machine;

// The crate's public modules, by the names they had before the two halves
// were made folders (`emu::memory`, `emu::syscall`, …).
pub use linux::{elf, fs, layout, sigframe, signal, stack, syscall};
pub use machine::{arch, bytes, engine, flow, memory, objects, shadow, track};

pub use error::Error;
pub use linux::emulator::{Emulator, Event, Exit, Regs};
pub use linux::load::Config;
pub use linux::nmi::{NmiPoint, NmiSource};
pub use linux::proc_state::{SigAction, Stdin};
pub use linux::proc_table::{Limits, Pid, ProcessEvent, Tid, FIRST_PID};
pub use linux::run::{RunLimit, Stop};
pub use linux::syscall::SyscallRecord;
pub use linux::user::UserView;
pub use linux::view::GuestView;
pub use machine::arch::{Arch, ArchInfo, Machine};
pub use machine::memory::{AccessKind, Area, AreaKind, MemFault, PageStats, PageTable, Perms, PAGE_SIZE};
pub use machine::objects::{MappedFile, Object};
pub use machine::shadow::{After, FrameKind, ShadowFrame, ShadowStack};
pub use machine::track::Tracking;
