//! Building the harness: `harness/harness.c` (which includes the tree's
//! `user.c` and `deferred.c`) against `harness/shim.h` with the host C
//! compiler, into a shared object cached by the hash of everything that
//! goes into it; and `harness/fault.c`, the process's one fault catcher.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::Error;
use crate::tree::{cache_home, KernelTree, FILES};

/// The harness's sources, compiled into the lab so that it needs no
/// source directory at run time: path under the staging directory, text.
const SOURCES: [(&str, &str); 2] =
    [("shim.h", include_str!("../harness/shim.h")), ("harness.c", include_str!("../harness/harness.c"))];

/// The fault catcher's source.
const FAULT_C: &str = include_str!("../harness/fault.c");

/// The kernel headers the shim stands in for, each one line including it.
const STUBS: [&str; 13] = [
    "linux/kernel.h",
    "linux/sched.h",
    "linux/sizes.h",
    "linux/slab.h",
    "linux/mm.h",
    "linux/uaccess.h",
    "linux/types.h",
    "linux/atomic.h",
    "linux/task_work.h",
    "linux/sched/task_stack.h",
    "linux/sched/clock.h",
    "asm/ptrace.h",
    "asm/uprobes.h",
];

/// What the built objects depend on besides the sources: bump with any
/// change of the flags or of the entry points' meaning.
const RECIPE: &str = "unwindlab harness 1: -std=gnu11 -O1 -g -fPIC -fsanitize=shift";

/// Where built harnesses live: `UNWINDLAB_HARNESS_CACHE`, else
/// `${XDG_CACHE_HOME:-~/.cache}/unwindlab/harness`.
pub fn harness_cache() -> PathBuf {
    std::env::var_os("UNWINDLAB_HARNESS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_home().join("unwindlab/harness"))
}

/// FNV-1a, 64 bits: the cache key of a build (no secrecy needed).
fn fnv1a(hash: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *hash ^= u64::from(b);
        *hash = hash.wrapping_mul(0x100_0000_01b3);
    }
}

/// The C compiler: `$CC`, else `cc`.
fn compiler() -> String {
    std::env::var("CC").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "cc".into())
}

/// The compiler's first `--version` line, part of every cache key.
fn compiler_id(cc: &str) -> Result<String, Error> {
    let out = Command::new(cc).arg("--version").output().map_err(|e| Error::Compiler {
        cc: cc.to_string(),
        problem: format!("{e} (install Debian's gcc, or set CC)"),
    })?;
    Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_string())
}

/// The fault catcher, built once per compiler.
pub(crate) fn fault_object() -> Result<PathBuf, Error> {
    let cc = compiler();
    let mut key = 0xcbf2_9ce4_8422_2325;
    for part in [RECIPE, &compiler_id(&cc)?, FAULT_C] {
        fnv1a(&mut key, part.as_bytes());
    }
    let out = harness_cache().join(format!("fault-{key:016x}.so"));
    if out.is_file() {
        return Ok(out);
    }
    let stage = stage_dir(&out)?;
    std::fs::write(stage.join("fault.c"), FAULT_C).map_err(|e| io("write", &stage, e))?;
    let tmp = stage.join("fault.so");
    run_cc(
        &cc,
        &["-std=gnu11", "-O1", "-g", "-fPIC", "-shared", "-Wall", "-o"],
        &[&tmp, &stage.join("fault.c")],
        None,
    )?;
    finish(&tmp, &out, &stage)
}

/// The harness built from `tree` (with `CONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG`
/// if `nmi_safe_cmpxchg`): the path of its shared object, built now unless
/// the cache has it.
pub(crate) fn harness_object(tree: &KernelTree, nmi_safe_cmpxchg: bool) -> Result<PathBuf, Error> {
    let cc = compiler();
    let mut key = 0xcbf2_9ce4_8422_2325;
    fnv1a(&mut key, RECIPE.as_bytes());
    fnv1a(&mut key, compiler_id(&cc)?.as_bytes());
    fnv1a(&mut key, &[u8::from(nmi_safe_cmpxchg)]);
    for (name, text) in SOURCES {
        fnv1a(&mut key, name.as_bytes());
        fnv1a(&mut key, text.as_bytes());
    }
    for file in FILES {
        let path = tree.root.join(file);
        let bytes = std::fs::read(&path).map_err(|e| io("read", &path, e))?;
        fnv1a(&mut key, file.as_bytes());
        fnv1a(&mut key, &bytes);
    }
    let out = harness_cache().join(format!("harness-{key:016x}.so"));
    if out.is_file() {
        return Ok(out);
    }
    let stage = stage_dir(&out)?;
    for (name, text) in SOURCES {
        std::fs::write(stage.join(name), text).map_err(|e| io("write", &stage, e))?;
    }
    for stub in STUBS {
        let path = stage.join("include").join(stub);
        std::fs::create_dir_all(path.parent().expect("a stub has a directory")).map_err(|e| io("create", &path, e))?;
        std::fs::write(&path, "/* unwindlab: everything comes from the one shim header. */\n#include \"shim.h\"\n")
            .map_err(|e| io("write", &path, e))?;
    }
    let root = tree.root.canonicalize().map_err(|e| io("resolve", &tree.root, e))?;
    let (r, s) = (root.display().to_string(), stage.display().to_string());
    let object = stage.join("harness.o");
    let mut flags: Vec<String> = [
        "-std=gnu11",
        "-O1",
        "-g",
        "-fPIC",
        "-Wall",
        "-Wno-unused-function",
        "-Wno-unused-but-set-variable",
        "-Wno-maybe-uninitialized",
        "-Werror=implicit-function-declaration",
        "-Werror=incompatible-pointer-types",
        "-Werror=int-conversion",
        "-fsanitize=shift",
    ]
    .iter()
    .map(|f| f.to_string())
    .collect();
    if nmi_safe_cmpxchg {
        flags.push("-DCONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG=1".into());
    }
    // __FILE__ relative to the tree, so that sites read `kernel/unwind/deferred.c`.
    flags.extend([
        format!("-fmacro-prefix-map={r}/="),
        format!("-fmacro-prefix-map={s}/=unwindlab/"),
        format!("-iquote{s}"),
        format!("-I{s}/include"),
        format!("-I{r}/include"),
        format!("-I{r}/arch/x86/include"),
        format!("-iquote{r}"),
        "-c".into(),
        "-o".into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    run_cc(&cc, &flags, &[&object, &stage.join("harness.c")], Some((&root, &stage)))?;
    let tmp = stage.join("harness.so");
    // Linked without the sanitizer's run time: the harness reports the
    // undefined shifts itself.
    run_cc(&cc, &["-shared", "-o"], &[&tmp, &object, Path::new("-lpthread")], None)?;
    finish(&tmp, &out, &stage)
}

/// A fresh staging directory beside `out`.
fn stage_dir(out: &Path) -> Result<PathBuf, Error> {
    let dir = out.with_extension(format!("build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| io("create", &dir, e))?;
    Ok(dir)
}

/// Moves the built `tmp` to `out` (atomically: a reader never sees half a
/// file) and removes the staging directory.
fn finish(tmp: &Path, out: &Path, stage: &Path) -> Result<PathBuf, Error> {
    std::fs::rename(tmp, out).map_err(|e| io("rename", out, e))?;
    let _ = std::fs::remove_dir_all(stage);
    Ok(out.to_path_buf())
}

/// Runs the compiler; on failure, the first error it names, with paths
/// shown relative to the tree (`sources`: the tree and the staging
/// directory, for a compile of the kernel's code).
fn run_cc(cc: &str, flags: &[&str], paths: &[&Path], sources: Option<(&Path, &Path)>) -> Result<(), Error> {
    let out = Command::new(cc)
        .args(flags)
        .args(paths)
        .output()
        .map_err(|e| Error::Compiler { cc: cc.to_string(), problem: e.to_string() })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let Some((root, stage)) = sources else {
        return Err(Error::Compiler { cc: cc.to_string(), problem: first_error(&stderr) });
    };
    let shown = stderr
        .replace(&format!("{}/", root.display()), "")
        .replace(&format!("{}/", stage.display()), "unwindlab/harness/");
    Err(Error::Build { root: root.to_path_buf(), first: first_error(&shown), errors: count_errors(&shown) })
}

/// The first `error:` line of a compiler's output (or its first line).
fn first_error(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.contains("error:"))
        .or_else(|| stderr.lines().next())
        .unwrap_or("the compiler failed without a message")
        .trim()
        .to_string()
}

fn count_errors(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.contains("error:")).count()
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Io { what: format!("{what} {}", path.display()), source: e }
}
