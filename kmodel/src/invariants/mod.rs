//! The invariants of the reference (§9), checked as the model runs:
//! structural ones (I1–I6) after every host call, behavioural ones (B1–B6,
//! B8) from a ledger of requests and callbacks per (task, cookie), and the
//! API's preconditions (§2.3): P1, a work is cancelled at most once
//! (upstream has no guard: the second `unwind_deferred_cancel()` computes
//! `BIT(-1)` and deletes the list entry again; checked in
//! [`Kernel::unwind_deferred_cancel`]); P2, a work requests only after its
//! init returned 0 (upstream takes `BIT(0)`, PENDING, or `BIT(1)`, USED,
//! as its bit otherwise). With several tasks per mm, the
//! mm's life: M1, no walk reads an mm `__mmdrop()` has freed (checked at
//! every walk) and no live task has one; M2, an mm is freed at most once
//! and never taken or dropped after (`mmget()`/`mmput()`); M3, it is freed
//! only after its last task left; M4, `mm_users` counts exactly the live
//! tasks that have it; and B4 also when two tasks hold the same cookie at
//! once. A violation is recorded with the events that led to it.
//!
//! `ledger.rs` holds what the checks keep ([`Ledger`], [`Violation`]),
//! `check.rs` the checks themselves, called from the code they watch.
//!
//! [`Kernel::unwind_deferred_cancel`]: crate::kernel::Kernel::unwind_deferred_cancel

mod check;
mod ledger;

pub use self::ledger::{Ledger, LedgerEntry, Violation, HISTORY};
