//! The user-space stack walk: a model of `kernel/unwind/user.c` with the
//! SFrame series on top (`kernel/unwind/sframe.c`, v13, and Jens Remus' s390
//! v4 series for the SP-from-CFA offset, the "zero" FP rule and the back
//! chain).
//!
//! Structure follows the kernel's: [`unwind_user`] records the current IP,
//! then asks the methods of [`UnwindConfig::order`] in turn for a
//! description of the caller's frame (the kernel's `struct
//! unwind_user_frame`) and applies the first one through a single step
//! function shared by every method (`unwind_user_next_common()`).
//! Per-architecture differences come from [`Arch`]'s tables only.
//!
//! Method order within one frame, as in `unwind_user_next()`:
//! * SFrame with no section, no FDE or no row for the IP (the kernel's
//!   `-EINVAL` from `sframe_find()`) → the next method (FP) is tried.
//! * SFrame lookup that finds corrupt data or takes a real fault (`-EFAULT`)
//!   → the section is removed from the registry, as the kernel does, **and
//!   the next method is still tried**: every revision of
//!   `unwind_user_next_sframe()` maps any `sframe_find()` failure to
//!   `-ENOENT` ("try next method"). (The reference text §6.2 says the walk
//!   stops there; the code it cites does not.)
//! * SFrame lookup that fails with [`MemError::WouldFault`] (a non-resident
//!   `.sframe` page read where faults are not allowed) → the walk stops and
//!   the section is kept. The kernel never runs the SFrame walk in such a
//!   context (it unwinds from task work); were it to, it would take the
//!   fault for corruption and drop a perfectly good section. The model
//!   reports the case instead ([`Trace::would_fault`]).
//! * SFrame found a row but applying it failed (a check, or a fault reading
//!   the stack) → the walk stops; FP is not tried (`default: done = true`).
//! * FP (s390x: back chain) failed for any reason → the next method, and
//!   when none is left the walk ends ([`Stop::NoMethod`], the normal end of
//!   a frame-pointer chain).
//! * An SFrame row with no data words (RA undefined) ends the walk
//!   successfully ([`Stop::Outermost`]), as the series intends. (In the v13
//!   code with flex FDEs such a row reaches `sframe_init_cfa_rule_data()`
//!   with a zero control word and fails with `-EINVAL`, so the kernel would
//!   fall back to FP there; the model follows the documented intent.)
//!
//! The IP is looked up as is, also for return addresses (no `ip - 1`), as
//! in the kernel. The FDE signal-frame bit is ignored, as in the kernel.
//!
//! The walk is bounded by [`UnwindConfig::max_entries`]; each step's work is
//! bounded by the section's size (binary search over FDEs, one FDE's rows).
//!
//! The files follow the kernel's: `user.rs` is `user.c` (the walk and the
//! step every method shares), `fp.rs` its frame-pointer method,
//! `sframe.rs` and `sframe_find.rs` are `sframe.c` (the per-mm registry of
//! sections, and `sframe_find()` over the [`::sframe`] reader), and
//! `types.rs` is the walk's vocabulary.
//!
//! [`Arch`]: crate::arch::Arch
//! [`MemError::WouldFault`]: crate::memory::MemError::WouldFault

mod fp;
mod sframe;
mod sframe_find;
mod types;
mod user;

pub use self::sframe::{RegError, SframeEntry, SframeRegistry, Vma, Vmas};
pub use self::types::{ExtraWalk, ExtraWalks, Method, Miss, SframeMode, Stop, Trace, UnwindConfig, UNWIND_MAX_ENTRIES};
pub(crate) use self::user::unwind_user_interleaved;
pub use self::user::{unwind_user, unwind_user_dry_run, REGISTER_CHECKS};
