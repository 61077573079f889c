//! unwindlab's laboratory: JSON [`scenario`]s drive the emulator (`emu`)
//! and the kernel model (`kmodel`) together; every deferred user stack is
//! judged against the emulator's ground truth ([`verdict`]); every run
//! yields a deterministic JSON Lines event log that [`replay`] re-checks.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod demo;
pub mod export;
pub mod html;
pub mod replay;
pub mod runner;
pub mod scenario;
pub mod symbols;
pub mod validate;
pub mod verdict;

pub use runner::{run, run_with_progress, Progress, Report, RunError};
pub use scenario::{Scenario, ScenarioError};
