//! unwindlab's laboratory: JSON [`scenario`]s drive the emulator (`emu`)
//! and the kernel model (`kmodel`) together; every deferred user stack is
//! judged against the emulator's ground truth ([`verdict`]); every run
//! yields a deterministic JSON Lines event log that [`replay`] re-checks.
//!
//! # How it is built
//!
//! * [`scenario`]: the file format, parsed and checked; its enums are the
//!   kernel model's own (architecture, kernel version, exit path,
//!   unwinders, SFrame acceptance).
//! * [`profile`]: which kernel a scenario models, upstream Linux 7.3 as
//!   measured or with the proposals (`sframe-v13`), and which parts of a
//!   run are which.
//! * [`runner`]: [`run`] configures the model from the scenario and ties
//!   the private parts of a run together:
//!   - `guest.rs` sets each guest up: its program in the emulator (its
//!     `.sframe` patched first if the scenario says so, found with
//!     `sframe::elf`), its task and `.sframe` in the model;
//!   - `schedule.rs` is the deterministic scheduler: the guest with the
//!     fewest instructions runs next; system calls, sampling NMIs, exits
//!     and the timed events go to the model;
//!   - `judge.rs` judges every sample against its ground truth and the run
//!     against the scenario's expectations; `stream.rs` does it as the run
//!     goes, for `validate`, keeping only counts and groups;
//!   - `log.rs` writes the JSON Lines log;
//!   - [`loader`] registers sections the way a scenario's `registration`
//!     says (profile `sframe-v13`): exec only (series v13), or also a
//!     simulated dynamic loader.
//! * [`report`]: what a run produces ([`Report`]), and `account.rs` its
//!   text account ([`Report::account`]).
//! * [`symbolise`]: every frame named as its sample's process had its ELF
//!   objects mapped then ([`Report::names`]: `main+0x5`,
//!   `libc.so.6!puts+0x1c`), from the emulator's object events and the
//!   forks; the objects' functions from [`sframe::elf::Symbols`].
//! * Views of a report: [`export`] (Chrome trace, folded stacks, Firefox
//!   Profiler) and [`html`]; of a run recorded with the kernel's state at
//!   every event ([`runner::run_explored`]): [`explore`], a page that steps
//!   through it.
//! * Built on runs: [`explain`] (why a stack left the truth, in words),
//!   [`replay`], [`validate`] (a binary sampled per unwinder), [`demo`] (a narrated tour) and [`kdiff`] (one
//!   scenario on the model and on the kernel's own C code, compared); with the `fuzzgen` feature,
//!   `fuzz` (the scenario generator of the fuzz target).
//! * [`sysroot`]: a lab root for a dynamically linked program, every object
//!   it loads found like `ld.so` does and given generated SFrame V3.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod account;
pub mod demo;
pub mod explain;
pub mod explanation;
pub mod explore;
pub mod export;
#[cfg(feature = "fuzzgen")]
pub mod fuzz;
mod guest;
pub mod html;
mod judge;
pub mod kdiff;
pub mod loader;
mod log;
pub mod perf_capture;
pub mod perf_data;
pub mod profile;
mod profile_parts;
pub mod replay;
pub mod report;
pub mod runner;
pub mod scenario;
mod scenario_check;
mod scenario_kernel;
mod schedule;
mod schedule_syscall;
mod schedule_uprobe;
mod stream;
pub mod symbolise;
pub mod sysroot;
pub mod validate;
pub mod verdict;

pub use report::{Progress, Report, RunError};
pub use runner::{run, run_with_progress};
pub use scenario::{Scenario, ScenarioError};
