//! Test data shared by the integration tests: the simple-frame-rs vectors and
//! the V1 samples made on this machine, both committed under
//! `sframe/tests/data`, and the toolchain checks. The workspace root's tests
//! (the `unwindlab` CLI on the same data) compile this file too, through a
//! `#[path]` module, rather than keeping a copy.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// One section with the objdump text that binutils printed for it.
pub struct Vector {
    /// File name of the vector.
    pub name: String,
    /// Section bytes (empty: the file had no .sframe section).
    pub bytes: Vec<u8>,
    /// Section address.
    pub base: u64,
    /// objdump's full output.
    pub objdump: String,
}

/// `sframe/tests/data`, from the manifest directory of whichever package's
/// tests include this file: the sframe crate's or the workspace root's.
pub fn data_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    if env!("CARGO_PKG_NAME") == "sframe" {
        manifest.join("tests/data")
    } else {
        manifest.join("sframe/tests/data")
    }
}

#[derive(serde::Deserialize)]
struct Json {
    section_base: u64,
    content: Vec<u8>,
    groundtruth: String,
}

/// The 108 simple-frame-rs vectors (binutils 2.40–2.46).
pub fn simple_frame_vectors() -> Vec<Vector> {
    json_files(&data_dir().join("simple-frame-rs"))
        .into_iter()
        .map(|p| {
            let json: Json = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            Vector {
                name: p.file_name().unwrap().to_string_lossy().into_owned(),
                bytes: json.content,
                base: json.section_base,
                objdump: json.groundtruth,
            }
        })
        .collect()
}

/// The `.json` files in `dir`, sorted.
pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
}

/// The V1 samples made with Debian's binutils 2.40 (section address from
/// the samples' README: 0 for objects).
pub fn v1_samples() -> Vec<Vector> {
    let dir = data_dir().join("sframe-samples");
    let bases = [("v1-x86_64-t-exe", 0x21b8), ("v1-x86_64-p-exe", 0x4020f0)];
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".sframe.bin").map(str::to_string))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|stem| Vector {
            bytes: std::fs::read(dir.join(format!("{stem}.sframe.bin"))).unwrap(),
            objdump: std::fs::read_to_string(dir.join(format!("{stem}.objdump.txt"))).unwrap(),
            base: bases.iter().find(|(n, _)| *n == stem).map_or(0, |(_, b)| *b),
            name: stem,
        })
        .collect()
}

/// Every vector with data, from both sets.
pub fn all_with_data() -> Vec<Vector> {
    simple_frame_vectors().into_iter().chain(v1_samples()).filter(|v| !v.bytes.is_empty()).collect()
}

/// objdump text with trailing white space of each line and leading/trailing
/// blank lines removed.
pub fn normalise(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    lines.join("\n").trim_matches('\n').to_string()
}

/// The "FILE:     file format TARGET" line's parts.
pub fn banner(objdump: &str) -> (String, String) {
    let line = objdump.lines().find(|l| l.contains(":     file format ")).unwrap();
    let (file, target) = line.split_once(":     file format ").unwrap();
    (file.to_string(), target.to_string())
}

/// True if `tool --version` runs.
pub fn have(tool: &str) -> bool {
    std::process::Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// True if every tool is installed. Otherwise the test says so and passes,
/// except under CI (`CI` set), where a missing tool is a failure.
pub fn tools_or_skip(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if missing.is_empty() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI must have {missing:?} (`make` installs them)");
    eprintln!("skipping: {missing:?} not installed (run `make`)");
    false
}

/// Compiles the toolchain test program `toolchain/prog.c` with `gcc` and
/// `flags` into `CARGO_TARGET_TMPDIR/<dir>/<name>`.
pub fn build_prog(gcc: &str, dir: &str, name: &str, flags: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    let status = std::process::Command::new(gcc)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(data_dir().join("toolchain/prog.c"))
        .status()
        .unwrap();
    assert!(status.success(), "{gcc} {flags:?}");
    out
}
