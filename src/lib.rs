//! The `unwindlab` command line: a thin layer over the workspace crates.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
