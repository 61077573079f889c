//! unwindlab's kernel model: an executable model of Linux's deferred user
//! unwinding (`kernel/unwind/deferred.c`), its user unwinders (`user.c`,
//! the SFrame series' `sframe.c`) and their consumers, driven step by step
//! by a host (the emulator, or a test). SFrame sections are read with the
//! [`sframe`] crate, through [`memory::UserBytes`], user memory that may fault.
//!
//! # Where the kernel's code is modelled
//!
//! [`kernel::Kernel`] is the whole model; its methods live in the file of
//! the kernel code they stand for:
//!
//! | kernel function or structure | file |
//! |---|---|
//! | `union unwind_task_id`, `struct unwind_task_info`, `struct unwind_cache`, `UNWIND_PENDING`/`UNWIND_USED`; errnos; the model's options | `types.rs` |
//! | `struct unwind_work`, the task, CPU (`unwind_ctx_ctr`) and mm state; boot; the read API | `kernel.rs` |
//! | `unwind_deferred_init()`, `unwind_deferred_request()` with `get_cookie()`, `unwind_deferred_task_work()` (`process_unwind_deferred()`), `unwind_user_faultable()`, `unwind_reset_info()`, `unwind_deferred_cancel()` (SRCU grace period, `callback_mutex`), `unwind_deferred_task_exit()` | `deferred.rs` |
//! | entry from user mode, `exit_to_user_mode()`, the NMI path and its `TWA_NMI_CURRENT` self-IPI; `task_work_add()` (`TWA_RESUME`, `TWA_NMI_CURRENT`), `task_work_run()` | `entry.rs` |
//! | `do_exit()`: `perf_event_exit_task()`, the exit hook, `exit_mm()`, `exit_task_work()` in order ([`Kernel::exit`]); the lab's exit-path variants; `exit_group()` → `do_group_exit()` with `zap_other_threads()` ([`Kernel::exit_group`]); a killed thread's `get_signal()` (task_work first, then `do_group_exit()`) | `exit.rs` |
//! | `copy_process()` with `unwind_task_init()` and `copy_mm()`: `dup_mm()` for a fork ([`Kernel::fork`]), `mmget()` for `clone(CLONE_VM \| CLONE_THREAD)` ([`Kernel::clone_thread`]); `execve()`: `de_thread()` ([`Kernel::de_thread`]: siblings killed and through their exit paths, `exchange_tids()`), `exec_mmap()`, `start_thread()` ([`Kernel::exec`]); context switch, migration, sleep and wake-up, `signal_wake_up()` of a killed thread ([`Kernel::signal_wake_up`]) | `task.rs` |
//! | `mm_init()`'s `mm_init_sframe()`, exec's `PT_GNU_SFRAME` (`elf_add_sframe()`), `prctl(PR_ADD_SFRAME / PR_REMOVE_SFRAME)` and `sframe_register()` / `sframe_unregister()` calling `sframe_add_section()` (with its `vma_lookup()` checks) / `sframe_remove_section()`; munmap (upstream: nothing; a named variant removes); `mm_users`: `mmget()`, `mmput()` → `__mmdrop()` → `sframe_free_mm()` at the last put | `mm.rs` |
//! | `unwind_user()`, `unwind_user_next()`, `unwind_user_next_common()`, `unwind_user_next_sframe()` | `unwind/user.rs` |
//! | `unwind_user_next_fp()` (`unwind_user_fp_get_frame()`), the s390x back chain | `unwind/fp.rs` |
//! | `struct sframe_section`, `sframe_add_section()` (and `CONFIG_SFRAME_VALIDATION`), `sframe_remove_section()` | `unwind/sframe.rs` |
//! | `sframe_find()` (`__find_fde()`, `__find_fre()`, the data-word accounting) | `unwind/sframe_find.rs` |
//! | `struct unwind_user_frame`, `UNWIND_MAX_ENTRIES`, the unwinder's configuration | `unwind/types.rs` |
//! | `perf_event_init()` registering `perf_unwind_work`, `perf_callchain()` in the sampling NMI and in a uprobe's handler, perf's deferred callback (`PERF_RECORD_CALLCHAIN_DEFERRED`); sessions bound to a task, inherited by its heirs (`perf_event_init_task()`) or not | `tracer/perf.rs`, `tracer/types.rs` |
//! | a uprobe's trap: `handle_swbp()` → `handler_chain()` with `utask->auprobe` set, then the probed instruction emulated (`arch_uprobe_skip_sstep()`) or stepped out of line | `uprobe.rs` |
//! | an ftrace instance with `userstacktrace_delay`, a BPF program on the sampling event | `tracer/ftrace_bpf.rs` |
//! | the perf tool joining deferred callchains to samples | `tracer/stitch.rs` |
//! | the reference's invariants (§9), the mm's life with several tasks (M1–M4), and their ledger | `invariants/` |
//! | the points where an NMI or a cancel may strike | `interleave.rs` |
//! | the event log | `event.rs` |
//! | the state as cells, and the cells each event changed (an explorer's instrument, no kernel code) | `state.rs` (the types), `cells.rs` (read from the kernel) |
//! | the interface to a second implementation of `deferred.c` and `user.c`: the kernel's own code (`kupstream`) | `backend.rs` |
//! | the model's side of it: each `deferred.c` entry handed to the backend, the calls back answered, its state mirrored | `upstream.rs` |
//! | user memory that may fault, user registers, per-architecture tables | `memory.rs`, `arch.rs` |
//!
//! # Threads
//!
//! Several tasks may share one mm: [`Kernel::clone_thread`] makes a thread
//! (shared mm and SFrame table, its own deferred state, empty at first),
//! [`Kernel::exit`] ends one thread (its own exit hook, one `mmput()`),
//! [`Kernel::exit_group`] ends the group (the caller at once, every other
//! thread when next it heads for user mode: [`Kernel::signal_wake_up`] or
//! [`Kernel::return_to_user`]), and an exec from any thread calls
//! [`Kernel::de_thread`] before [`Kernel::exec`]. The mm and its table
//! live until the last task drops it ([`Mm::users`], [`Mm::freed`]).
//!
//! [`Kernel::clone_thread`]: kernel::Kernel::clone_thread
//! [`Kernel::exit`]: kernel::Kernel::exit
//! [`Kernel::exit_group`]: kernel::Kernel::exit_group
//! [`Kernel::signal_wake_up`]: kernel::Kernel::signal_wake_up
//! [`Kernel::return_to_user`]: kernel::Kernel::return_to_user
//! [`Kernel::de_thread`]: kernel::Kernel::de_thread
//! [`Kernel::exec`]: kernel::Kernel::exec
//! [`Kernel::fork`]: kernel::Kernel::fork
//! [`Mm::users`]: kernel::Mm::users
//! [`Mm::freed`]: kernel::Mm::freed
//!
//! # Layers
//!
//! No file imports one that imports it back (`scripts/import-cycles.sh`):
//! `types`, `arch`, `memory`, `event`, `interleave`, `state`, `unwind` and the
//! tracers' and invariants' data come first; `kernel.rs` holds the state
//! built from them; the files that model kernel code (`deferred`, `entry`,
//! `exit`, `task`, `mm`, `cells`, `tracer/perf`, `tracer/ftrace_bpf`,
//! `invariants/check`) add `impl Kernel` blocks and are imported by none.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arch;
pub mod backend;
mod cells;
mod deferred;
mod entry;
pub mod event;
mod exit;
pub mod interleave;
pub mod invariants;
pub mod kernel;
pub mod memory;
mod mm;
pub mod state;
mod task;
pub mod tracer;
pub mod types;
pub mod unwind;
pub mod uprobe;
mod upstream;

pub use upstream::backend_refuses;
