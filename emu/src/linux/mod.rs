//! The Linux the machine runs: what QEMU's `linux-user/` is to its CPU
//! engine. It works on the machine (`crate::machine`) and is never imported
//! by it.
//!
//! * the emulated system's state ([`emulator`]: the running process's
//!   engine and memory, and every process);
//! * loading a program ([`load`], [`elf`], [`layout`], [`stack`]: segments,
//!   the address-space layout, the initial stack);
//! * processes and threads: what the kernel keeps per process besides
//!   memory ([`proc_state`]: IDs, streams, clock, random stream, signal
//!   dispositions), the process table and its types ([`proc_table`]), the
//!   deterministic scheduler ([`sched`]), the copy a `fork` makes
//!   ([`fork`]);
//! * the run loop ([`run`]), the one place that services system calls and
//!   turns faults and traps into signals, and the NMI source on top of it
//!   ([`nmi`]);
//! * the user ABI below them all ([`abi`]: constants, error numbers, a
//!   call's outcome, arguments and record), then system calls ([`syscall`]:
//!   one table, per-architecture numbers, shared handlers), files ([`fs`]),
//!   signals ([`signal`], [`sigframe`]);
//! * user memory as the kernel reads it ([`user`], [`view`]).

pub(crate) mod abi;
pub mod elf;
pub(crate) mod emulator;
pub(crate) mod fork;
pub mod fs;
pub mod layout;
pub(crate) mod load;
pub(crate) mod nmi;
pub(crate) mod proc_state;
pub(crate) mod proc_table;
pub(crate) mod run;
pub(crate) mod sched;
pub mod sigframe;
pub mod signal;
pub mod stack;
pub mod syscall;
pub(crate) mod user;
pub(crate) mod view;
mod xol;
