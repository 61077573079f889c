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
//! * **The emulator** ([`Emulator`]): its machine state and what is done
//!   with it (`emulator.rs`: memory map, guest memory as the kernel reads
//!   it, registers); loading a program (`load.rs`: segments, initial stack,
//!   engine, CPU); and the run loop (`run.rs`), the one place that services
//!   system calls and turns faults and traps into signals. Files depend on
//!   each other one way only (`scripts/import-cycles.sh`): what lies below
//!   the machine state (architectures, engine, memory, tracking) knows
//!   nothing of it; system calls and signal frames work on it and are
//!   called only from loading and the run loop.
//! * **Architectures** ([`arch`]): the architecture is the kernel model's
//!   [`Arch`]; one [`Machine`] trait, one small impl per architecture
//!   ([`arch::machine`]); everything constant (registers, syscall
//!   convention, `struct stat` layout, `AT_HWCAP`, trampolines) is an
//!   [`ArchInfo`] table ([`arch::info`]).
//! * **Memory** ([`memory`], [`engine`], `hooks.rs`): Unicorn runs with its
//!   *virtual* TLB, whose fill hook consults the [`PageTable`]. A fill is the guest
//!   touching a page: a non-resident page becomes resident and is counted as
//!   a guest fault; a refused access is a SIGSEGV. Physical memory is
//!   identity-mapped and mirrors the mapped areas, in host memory the
//!   emulator owns (`ram.rs`), so a second engine can share it. This one mechanism works on
//!   all three architectures (s390x reports nothing usable otherwise), gives
//!   per-page permissions and residency, and makes eviction a TLB flush.
//! * **System calls** ([`syscall`]): one table keyed by name with the
//!   numbers for each architecture; handlers are shared. A hook only records
//!   the trap and stops the engine; the run loop services the call.
//! * **Instruction count and ground truth** ([`track`], [`flow`],
//!   [`shadow`]): a hook per translated block counts instructions (each
//!   block decoded once with Capstone) and keeps the ground-truth
//!   return-address stack from the block's last instruction. Stops are exact,
//!   *before* instruction N, also inside a block, so runs with and without
//!   stops execute the same instructions; the instructions of a block
//!   before a stop inside it run in a second engine on the same memory
//!   (`step.rs`), so no translation is cut. [`Tracking::Instructions`] adds a
//!   per-instruction reference that tests compare against. [`NmiSource`]
//!   stops every N instructions and reports registers and ground truth.
//! * **The kernel model's view** ([`UserView`], `From<&Regs>` for
//!   [`kmodel::arch::UserRegs`]): user memory with faultable and
//!   non-faultable reads, registers by DWARF number.
//! * **The process** (`process.rs`): what the kernel keeps per process
//!   besides memory: its IDs, standard streams ([`Stdin`]) and open files,
//!   the virtual clock, the random stream, signal dispositions
//!   ([`SigAction`]).
//! * **Processes and threads** (`procs.rs`, `sched.rs`, `fork.rs`): the
//!   process table and its types ([`Pid`], [`Tid`], [`ProcessEvent`],
//!   [`Limits`]); the deterministic scheduler, which keeps the running
//!   thread's and process's state in the emulator's fields and parks the
//!   others' (a context switch swaps them; threads of one process share its
//!   engine and swap registers through a Unicorn context and their own
//!   ground-truth stacks); and the copy a `fork` makes, each process with
//!   its own engine. Futexes are `syscall/process.rs`.
//!   The calls that create, replace and reap processes are
//!   `syscall/life.rs`; pipes are `fs/pipe.rs`.
//! * **On the host** ([`host`]): a program run like `qemu-user` runs it, with
//!   the host's environment and streams (`unwindlab exec`).
//! * **Signals** ([`sigframe`]): handlers run on Linux's own frame layout for
//!   each architecture (one file each under `sigframe/`), so unwinders can
//!   walk through them; the sigreturn trampolines live in a vDSO-like page.

#![warn(missing_docs)]

pub mod arch;
pub mod bytes;
pub mod elf;
mod emulator;
pub mod engine;
mod error;
pub mod flow;
mod fork;
pub mod fs;
mod hooks;
pub mod host;
pub mod layout;
mod load;
pub mod memory;
mod nmi;
pub mod objects;
mod page;
mod process;
mod procs;
mod ram;
mod regs;
mod run;
mod sched;
pub mod shadow;
pub mod sigframe;
pub mod signal;
pub mod stack;
mod step;
pub mod syscall;
pub mod track;
mod user;
mod view;

pub use arch::{Arch, ArchInfo, Machine};
pub use emulator::{Emulator, Event, Exit, Regs};
pub use error::Error;
pub use load::Config;
pub use memory::{AccessKind, Area, AreaKind, MemFault, PageStats, PageTable, Perms, PAGE_SIZE};
pub use nmi::{NmiPoint, NmiSource};
pub use objects::{MappedFile, Object};
pub use process::{SigAction, Stdin};
pub use procs::{Limits, Pid, ProcessEvent, Tid, FIRST_PID};
pub use run::{RunLimit, Stop};
pub use shadow::{After, FrameKind, ShadowFrame, ShadowStack};
pub use syscall::SyscallRecord;
pub use track::Tracking;
pub use user::UserView;
pub use view::GuestView;
