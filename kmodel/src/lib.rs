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
//! | `do_exit()`: `perf_event_exit_task()`, the exit hook, `exit_mm()`, `exit_task_work()` in order; the lab's exit-path variants | `exit.rs` |
//! | `copy_process()` with `unwind_task_init()` and `dup_mm()`; `execve()` (`exec_mmap()`, `start_thread()`); context switch, migration, sleep and wake-up | `task.rs` |
//! | `mm_init()`'s `mm_init_sframe()`, exec's `PT_GNU_SFRAME` (`elf_add_sframe()`) and `prctl(PR_ADD_SFRAME / PR_REMOVE_SFRAME)` calling `sframe_add_section()` / `sframe_remove_section()`; munmap; `mmput()` → `__mmdrop()` → `sframe_free_mm()` | `mm.rs` |
//! | `unwind_user()`, `unwind_user_next()`, `unwind_user_next_common()`, `unwind_user_next_sframe()` | `unwind/user.rs` |
//! | `unwind_user_next_fp()` (`unwind_user_fp_get_frame()`), the s390x back chain | `unwind/fp.rs` |
//! | `struct sframe_section`, `sframe_add_section()`, `sframe_remove_section()` | `unwind/sframe.rs` |
//! | `sframe_find()` (`__find_fde()`, `__find_fre()`, the data-word accounting) | `unwind/sframe_find.rs` |
//! | `struct unwind_user_frame`, `UNWIND_MAX_ENTRIES`, the unwinder's configuration | `unwind/types.rs` |
//! | `perf_event_init()` registering `perf_unwind_work`, `perf_callchain()` in the sampling NMI, perf's deferred callback (`PERF_RECORD_CALLCHAIN_DEFERRED`) | `tracer/perf.rs` |
//! | an ftrace instance with `userstacktrace_delay`, a BPF program on the sampling event | `tracer/ftrace_bpf.rs` |
//! | the perf tool joining deferred callchains to samples | `tracer/stitch.rs` |
//! | the reference's invariants (§9) and their ledger | `invariants/` |
//! | the points where an NMI or a cancel may strike | `interleave.rs` |
//! | the event log | `event.rs` |
//! | user memory that may fault, user registers, per-architecture tables | `memory.rs`, `arch.rs` |
//!
//! # Layers
//!
//! No file imports one that imports it back (`scripts/import-cycles.sh`):
//! `types`, `arch`, `memory`, `event`, `interleave`, `unwind` and the
//! tracers' and invariants' data come first; `kernel.rs` holds the state
//! built from them; the files that model kernel code (`deferred`, `entry`,
//! `exit`, `task`, `mm`, `tracer/perf`, `tracer/ftrace_bpf`,
//! `invariants/check`) add `impl Kernel` blocks and are imported by none.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arch;
mod deferred;
mod entry;
pub mod event;
mod exit;
pub mod interleave;
pub mod invariants;
pub mod kernel;
pub mod memory;
mod mm;
mod task;
pub mod tracer;
pub mod types;
pub mod unwind;
