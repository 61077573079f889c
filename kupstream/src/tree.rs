//! Which kernel tree's `kernel/unwind/` runs: a developer's own (`--kernel-tree
//! DIR`, `UNWINDLAB_KERNEL_TREE`) or the one `make deps` extracted from
//! Debian's `linux-source-7.x` (`scripts/fetch-linux-source.sh`), and what
//! to call it in reports.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// The files of a tree the harness compiles or includes, relative to its
/// root.
pub const FILES: [&str; 7] = [
    "kernel/unwind/deferred.c",
    "kernel/unwind/user.c",
    "include/linux/unwind_deferred.h",
    "include/linux/unwind_deferred_types.h",
    "include/linux/unwind_user.h",
    "include/linux/unwind_user_types.h",
    "arch/x86/include/asm/unwind_user.h",
];

/// A kernel tree with the files of [`FILES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelTree {
    /// Its root directory.
    pub root: PathBuf,
    /// What it is, for reports: `Linux 7.3.4 (Debian linux-source-7.3
    /// 7.3.4-1~bpo13+1)`, `Linux 7.4.0-rc1 at /src/linux`.
    pub name: String,
}

impl KernelTree {
    /// The tree at `root`, or which file it lacks.
    pub fn open(root: &Path) -> Result<Self, Error> {
        if !root.is_dir() {
            return Err(Error::Tree { root: root.to_path_buf(), problem: "not a directory".into() });
        }
        for file in FILES {
            if !root.join(file).is_file() {
                return Err(Error::Tree {
                    root: root.to_path_buf(),
                    problem: format!("it has no {file} (the deferred-unwind code is in Linux 6.17 and later)"),
                });
            }
        }
        Ok(KernelTree { root: root.to_path_buf(), name: name_of(root) })
    }

    /// The tree to use when none is given: `UNWINDLAB_KERNEL_TREE`, else the
    /// one `make deps` extracted into the cache.
    pub fn default_tree() -> Result<Self, Error> {
        if let Some(dir) = std::env::var_os("UNWINDLAB_KERNEL_TREE") {
            return KernelTree::open(Path::new(&dir));
        }
        let cached = cache_dir().join("current");
        if !cached.exists() {
            return Err(Error::NoTree { looked: cached });
        }
        KernelTree::open(&cached)
    }
}

/// `${UNWINDLAB_LINUX_CACHE:-${XDG_CACHE_HOME:-~/.cache}/unwindlab/linux}`,
/// where `scripts/fetch-linux-source.sh` puts the trees it extracts.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("UNWINDLAB_LINUX_CACHE") {
        return PathBuf::from(dir);
    }
    cache_home().join("unwindlab/linux")
}

/// `${XDG_CACHE_HOME:-~/.cache}`.
pub(crate) fn cache_home() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| std::env::temp_dir().join("unwindlab-cache"))
}

/// A tree's name: from the fetch script's `.unwindlab-source` line
/// (`linux-source-7.3 7.3.4-1~bpo13+1 trixie-backports`), else from its
/// Makefile's version lines, else its path.
fn name_of(root: &Path) -> String {
    if let Ok(text) = std::fs::read_to_string(root.join(".unwindlab-source")) {
        let mut words = text.split_whitespace();
        if let (Some(package), Some(version)) = (words.next(), words.next()) {
            let upstream = version.split('-').next().unwrap_or(version);
            return format!("Linux {upstream} (Debian {package} {version})");
        }
    }
    let shown = root.display();
    match makefile_version(root) {
        Some(v) => format!("Linux {v} at {shown}"),
        None => format!("the kernel tree at {shown}"),
    }
}

/// `VERSION.PATCHLEVEL.SUBLEVEL` and `EXTRAVERSION` of a tree's Makefile.
fn makefile_version(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(root.join("Makefile")).ok()?;
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (key, value) = l.split_once('=')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    Some(format!("{}.{}.{}{}", field("VERSION")?, field("PATCHLEVEL")?, field("SUBLEVEL")?, field("EXTRAVERSION")?))
}
