//! Support shared by the integration tests of the `unwindlab` package: the
//! sframe crate's test support (its vectors and samples under
//! `sframe/tests/data`, toolchain checks), compiled here from its own file,
//! and the scenario files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[path = "../../sframe/tests/common/mod.rs"]
mod sframe_support;

pub use sframe_support::*;

/// The scenario files of the suite, sorted.
pub fn scenario_files() -> Vec<PathBuf> {
    json_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
}
