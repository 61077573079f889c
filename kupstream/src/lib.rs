//! The kernel's own `kernel/unwind/` as a backend of unwindlab's kernel
//! model: `deferred.c` and `user.c` of a kernel tree, compiled with the
//! host C compiler against one small shim header (`harness/shim.h`, the
//! way the kernel's `tools/testing/vma/` builds `mm/vma.c`) and loaded into
//! the lab, where [`kmodel::kernel::Kernel::with_backend`] hands them every
//! call the rest of the kernel makes.
//!
//! | file | what |
//! |---|---|
//! | `tree.rs` | which tree: a developer's own, or Debian's `linux-source-7.x` from the cache |
//! | `compile.rs` | building the harness (cached by the hash of its inputs), with errors that name the file and line |
//! | `ffi.rs` | loading a private copy per kernel, the entry points, the calls back into the model |
//! | `harness/shim.h` | what the two files use of the kernel, each primitive an interleaving point |
//! | `harness/harness.c` | includes the two files; entry points; other CPUs as host threads taking turns |
//! | `harness/fault.c` | turns a fault in the kernel's code into an error of the run |
//!
//! The project contains no kernel code: the tree is read at run time.

mod compile;
mod error;
mod ffi;
mod tree;

use std::sync::Arc;

pub use compile::harness_cache;
pub use error::Error;
pub use ffi::Upstream;
pub use tree::{cache_dir, KernelTree, FILES};

/// The kernel's own code from `tree` (the cached Debian tree when `None`),
/// built if needed and loaded as a fresh instance: the backend for one
/// kernel (`nmi_safe_cmpxchg`: `CONFIG_ARCH_HAVE_NMI_SAFE_CMPXCHG`).
pub fn load(tree: Option<&std::path::Path>, nmi_safe_cmpxchg: bool) -> Result<Arc<Upstream>, Error> {
    let tree = match tree {
        Some(root) => KernelTree::open(root)?,
        None => KernelTree::default_tree()?,
    };
    Upstream::load(&tree, nmi_safe_cmpxchg).map(Arc::new)
}
