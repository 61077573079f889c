//! unwindlab's kernel model: an executable model of Linux's deferred user
//! unwinding (`kernel/unwind/deferred.c`), its user unwinders (`user.c`,
//! the SFrame series' `sframe.c`) and their consumers, driven step by step
//! by a host (the emulator, or a test). SFrame sections are read with the
//! [`sframe`] crate, through [`memory::UserBytes`], user memory that may fault.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arch;
pub mod deferred;
pub mod event;
pub mod interleave;
pub mod invariants;
pub mod kernel;
pub mod memory;
pub mod tracer;
pub mod unwind;
