//! A lab root with SFrame everywhere: the objects a dynamically linked
//! program loads, found the way `ld.so` finds them, copied into a directory
//! with generated SFrame V3 injected into each (`unwindlab sysroot`).
//!
//! [`resolve`] follows `PT_INTERP`, then `DT_NEEDED` breadth-first (each
//! name loaded once, matched by requested name, soname and file), searching
//! like glibc's `ld.so` for a prefix: `DT_RPATH` of the requesting object
//! and its loaders (each only without `DT_RUNPATH`) and of the program, then
//! the requester's `DT_RUNPATH` (`$ORIGIN`, `$LIB` and `$PLATFORM`
//! expanded), then the architecture's default directories
//! ([`default_dirs`]). A candidate of another machine, class or byte order
//! is skipped as `ld.so` skips it. `LD_LIBRARY_PATH` and the host's
//! `/etc/ld.so.cache` are not consulted: [`build`] writes an empty
//! `etc/ld.so.cache` into the directory so that `ld.so` run there does not
//! consult one either.
//!
//! A guest path is looked up on the host the way `qemu-user -L PREFIX` and
//! `unwindlab exec --prefix PREFIX` do: under the prefix first, then from
//! `/` ([`Lookup`]). [`build`] puts every object at its guest path under the
//! output directory (the program at its own absolute path, or at its path
//! in the prefix if it is there, so `$ORIGIN` keeps its meaning), which
//! makes that directory a prefix for both.
//! Generation and injection are the `sframe` crate's
//! ([`sframe::elf::generate_section`], [`sframe::elf::inject`]); every
//! injected section is checked with the kernel's acceptance rules.

//!
//! Resolution is `resolve.rs`, the directory's making `build.rs`.

mod build;
mod resolve;

pub use build::{build, Built, Outcome, Sysroot};
pub use resolve::{default_dirs, resolve, triplet, Lookup, Object, Resolution, Role, SysrootError};
