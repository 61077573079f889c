//! The machine: the CPU engine and what the lab adds to it, knowing nothing
//! of Linux (as QEMU keeps its CPU engine apart from `linux-user/`).
//!
//! * the architectures ([`arch`]): one [`Machine`](arch::Machine) trait and
//!   an [`ArchInfo`](arch::ArchInfo) table per architecture;
//! * the engine ([`engine`], `hooks.rs`): Unicorn with the hooks every engine
//!   gets (the TLB fill that consults the page table, the syscall and
//!   interrupt traps, the block hook);
//! * guest memory ([`memory`], `ram.rs`, `page.rs`, [`objects`]): the
//!   memory map with permissions and residency, the host memory behind it,
//!   the objects mapped from files;
//! * instruction counts, exact stops and ground truth ([`track`], [`flow`],
//!   [`shadow`], `step.rs`): the per-block count, the shadow stack of return
//!   addresses, and the second engine that runs a block up to a stop inside
//!   it;
//! * registers by name (`regs.rs`) and byte order ([`bytes`]).
//!
//! Nothing here imports the Linux half (`crate::linux`); what the CPU
//! reports (a trap, an interrupt) the Linux half turns into system calls and
//! signals (`scripts/import-cycles.sh` checks the direction).

pub mod arch;
pub mod bytes;
pub mod engine;
pub mod flow;
pub(crate) mod hooks;
pub mod memory;
pub mod objects;
pub(crate) mod page;
pub(crate) mod ram;
pub(crate) mod regs;
pub mod shadow;
pub(crate) mod step;
pub mod track;
