//! Support shared by the integration tests of the `unwindlab` package: the
//! sframe crate's test support (its vectors and samples under
//! `sframe/tests/data`, toolchain checks), compiled here from its own file,
//! and the scenario files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[path = "../../sframe/tests/common/mod.rs"]
mod sframe_support;

// Not every test binary uses them (exports, scenarios: only the scenario files).
#[allow(unused_imports)]
pub use sframe_support::*;

/// The scenario files of the suite, sorted.
pub fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}
