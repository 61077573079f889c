//! Named interleaving points: every place where the kernel code uses an
//! atomic read-modify-write or may be interrupted by an NMI on the same task.
//! A test installs an [`Interleaver`] with [`Kernel::set_interleaver`] and
//! injects NMIs (or cancels, tracer registrations, `.sframe` registrations
//! and removals) at any of them.
//!
//! [`Interleaver`]: crate::kernel::Interleaver
//! [`Kernel::set_interleaver`]: crate::kernel::Kernel::set_interleaver

use serde::Serialize;

/// A point in the deferred-unwind code where something else may happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// Request: the task and context checks passed, before `work->bit` is
    /// read (`READ_ONCE(work->bit)`): a cancel that completes here leaves
    /// the request `bit` -1.
    RequestBeforeBitRead,
    /// Request: `work->bit` read, before `get_cookie()`.
    RequestStart,
    /// `get_cookie()`: counter computed, before the cmpxchg of `id.cnt`.
    CookieBeforeCmpxchg,
    /// `get_cookie()`: `id.cnt` assigned, before the per-CPU counter and
    /// `id.cpu` are written (an NMI here finds `id.cpu` 0, computes the
    /// same count and loses the cmpxchg).
    CookieAfterCmpxchg,
    /// Request: cookie taken, before the fast-path read of the mask.
    RequestAfterCookie,
    /// Request: fast path saw the bit clear, before `fetch_or`.
    RequestBeforeFetchOr,
    /// Request: claimed PENDING, before `task_work_add()`.
    RequestBeforeTaskWorkAdd,
    /// `task_work_add()`: the work is on the task's list, the notification
    /// (`TIF_NOTIFY_RESUME`, or the `TWA_NMI_CURRENT` irq_work) not sent.
    TaskWorkAddBeforeNotify,
    /// Handler: started, before `fetch_andnot(PENDING)`.
    HandlerBeforeFetchAndnot,
    /// Handler: bits snapshot taken, before the unwind.
    HandlerAfterFetchAndnot,
    /// `unwind_user()`: one frame's `sframe_find()` done, before the next
    /// (each lookup holds `sframe_srcu` for itself alone, so the table may
    /// change here). Reached only while an interleaver is installed.
    UnwindBetweenLookups,
    /// Handler: unwound, before the SRCU-protected callback walk.
    HandlerAfterUnwind,
    /// Handler: the list walk has stepped to the n-th work still on the
    /// list, before `test_bit(work->bit, &bits)` reads its bit (a cancel
    /// here leaves the walk holding a work whose bit is -1).
    HandlerBeforeCallback,
    /// Handler: the list walked, before leaving the SRCU read section (the
    /// last point of the grace period of a cancel begun during the walk).
    HandlerBeforeSrcuUnlock,
    /// Reset: mask read non-zero, before the cmpxchg to 0.
    ResetBeforeCmpxchg,
    /// Reset: the mask is 0, `id` still holds the cookie (upstream's
    /// window: `unwind_reset_info()` clears `id` only after the cmpxchg).
    ResetAfterCmpxchg,
    /// Reset: `id` cleared, the cache not yet.
    ResetBeforeCacheClear,
    /// After `unwind_reset_info()`, before the actual return to user mode.
    AfterResetBeforeUser,
    /// `do_exit()`: PF_EXITING set, before `perf_event_exit_task()`.
    ExitBeforePerfExit,
    /// `do_exit()`: before `exit_mm()`.
    ExitBeforeExitMm,
    /// `unwind_deferred_cancel()`: the grace period over, before its loop
    /// clears the bit in the next task (`for_each_process_thread()`).
    CancelBeforeClearTask,
    /// A primitive of the kernel's own code, run by the upstream backend
    /// (each atomic, bit operation, lock, list step and user read).
    Upstream(crate::backend::Site),
}

impl Point {
    /// Every point, in code order.
    pub const ALL: [Point; 21] = [
        Point::RequestBeforeBitRead,
        Point::RequestStart,
        Point::CookieBeforeCmpxchg,
        Point::CookieAfterCmpxchg,
        Point::RequestAfterCookie,
        Point::RequestBeforeFetchOr,
        Point::RequestBeforeTaskWorkAdd,
        Point::TaskWorkAddBeforeNotify,
        Point::HandlerBeforeFetchAndnot,
        Point::HandlerAfterFetchAndnot,
        Point::UnwindBetweenLookups,
        Point::HandlerAfterUnwind,
        Point::HandlerBeforeCallback,
        Point::HandlerBeforeSrcuUnlock,
        Point::ResetBeforeCmpxchg,
        Point::ResetAfterCmpxchg,
        Point::ResetBeforeCacheClear,
        Point::AfterResetBeforeUser,
        Point::ExitBeforePerfExit,
        Point::ExitBeforeExitMm,
        Point::CancelBeforeClearTask,
    ];

    /// The operation the point is in, for counts of placements per
    /// operation: `request`, `get_cookie`, `task_work_add`, `handler`,
    /// `reset`, `exit`, `cancel`; a primitive of the kernel's own code is
    /// in its function.
    pub fn operation(&self) -> &'static str {
        match self {
            Point::RequestBeforeBitRead
            | Point::RequestStart
            | Point::RequestAfterCookie
            | Point::RequestBeforeFetchOr
            | Point::RequestBeforeTaskWorkAdd => "request",
            Point::CookieBeforeCmpxchg | Point::CookieAfterCmpxchg => "get_cookie",
            Point::TaskWorkAddBeforeNotify => "task_work_add",
            Point::HandlerBeforeFetchAndnot
            | Point::HandlerAfterFetchAndnot
            | Point::UnwindBetweenLookups
            | Point::HandlerAfterUnwind
            | Point::HandlerBeforeCallback
            | Point::HandlerBeforeSrcuUnlock => "handler",
            Point::ResetBeforeCmpxchg
            | Point::ResetAfterCmpxchg
            | Point::ResetBeforeCacheClear
            | Point::AfterResetBeforeUser => "reset",
            Point::ExitBeforePerfExit | Point::ExitBeforeExitMm => "exit",
            Point::CancelBeforeClearTask => "cancel",
            Point::Upstream(site) => site.func,
        }
    }

    /// The point's name, as scenario files spell it (`reset_after_cmpxchg`);
    /// none for a primitive of the kernel's own code.
    pub fn name(&self) -> Option<String> {
        match self {
            Point::Upstream(_) => None,
            p => serde_json::to_value(p).ok().and_then(|v| v.as_str().map(str::to_string)),
        }
    }

    /// The point named `name` ([`Point::name`]).
    pub fn named(name: &str) -> Option<Point> {
        Point::ALL.into_iter().find(|p| p.name().as_deref() == Some(name))
    }

    /// Where the kernel's own code is at this moment, for the points it has
    /// a primitive at: (function, primitive) of its [`Site`]. A point of
    /// the model with none (a plain store in C, a step the C does not
    /// split) cannot be reached on the upstream backend.
    ///
    /// [`Site`]: crate::backend::Site
    pub fn upstream_site(&self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            Point::RequestBeforeBitRead => ("unwind_deferred_request", "READ_ONCE"),
            Point::RequestBeforeFetchOr => ("unwind_deferred_request", "atomic_long_fetch_or"),
            Point::HandlerBeforeFetchAndnot => ("process_unwind_deferred", "atomic_long_fetch_andnot"),
            Point::HandlerAfterFetchAndnot => ("process_unwind_deferred", "after atomic_long_fetch_andnot"),
            Point::ResetBeforeCmpxchg => ("unwind_reset_info", "atomic_long_try_cmpxchg"),
            Point::ResetAfterCmpxchg => ("unwind_reset_info", "after atomic_long_try_cmpxchg"),
            _ => return None,
        })
    }

    /// Whether this point, reached on either backend, is the moment `named`
    /// stands for: the model's point itself, or its primitive in the
    /// kernel's code ([`Point::upstream_site`]).
    pub fn is(&self, named: Point) -> bool {
        match self {
            Point::Upstream(site) => named.upstream_site() == Some((site.func, site.op)),
            p => *p == named,
        }
    }
}
