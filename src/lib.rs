//! The `unwindlab` command line: argument parsing (clap) and printing
//! only; the work is done by the workspace crates.
//!
//! | command | file | calls |
//! |---|---|---|
//! | `sframe dump`, `lookup`, `check` | `cli/sframe.rs` | `sframe`: `elf::load`, `Section`, `read::dump`, `read::validate` |
//! | `sframe gen` | `cli/sframe_gen.rs` | `sframe::elf`: `load_cfi`, `generate_section` (with its `Coverage`), `inject` |
//! | `exec` | `cli/exec.rs` | `emu::host::run_config` |
//! | `run`, `replay`, `validate`, `demo` | `cli/run.rs` | `lab`: `run_with_progress` and the report's views, `replay::replay_file`, `validate`, `demo` |
//!
//! `cli/mod.rs` holds the command enum, the exit statuses and the output
//! helpers.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
