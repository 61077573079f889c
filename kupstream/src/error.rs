//! Why the kernel's code cannot run, each case naming the file or tool.

use std::path::PathBuf;

/// Why the kernel's code cannot run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No tree was given and the cache has none.
    #[error(
        "no kernel tree: {} does not exist; run 'make deps' (scripts/fetch-linux-source.sh fetches Debian's \
         linux-source-7.x) or give --kernel-tree DIR",
        looked.display()
    )]
    NoTree {
        /// Where the cached tree was looked for.
        looked: PathBuf,
    },
    /// The tree lacks something.
    #[error("kernel tree {}: {problem}", root.display())]
    Tree {
        /// The tree.
        root: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The C compiler could not be run or failed on the harness's own code.
    #[error("C compiler {cc}: {problem}")]
    Compiler {
        /// The compiler.
        cc: String,
        /// What went wrong.
        problem: String,
    },
    /// The tree's code does not compile against the shim.
    #[error(
        "kernel tree {}: its kernel/unwind/ code does not build against unwindlab's shim ({errors} error(s)); \
         the first: {first}",
        root.display()
    )]
    Build {
        /// The tree.
        root: PathBuf,
        /// The compiler's first error, paths relative to the tree.
        first: String,
        /// How many errors it reported.
        errors: usize,
    },
    /// The built harness could not be loaded (a symbol the shim lacks).
    #[error("the harness built from {tree} cannot be loaded: {problem}")]
    Load {
        /// The tree's name.
        tree: String,
        /// The loader's message.
        problem: String,
    },
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// The operation and the path.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}
