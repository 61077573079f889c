//! The fixtures the kmodel tests share, each defined once: kernels and
//! their tasks ([`kernel`], [`task`], [`callbacks`]), a synthetic
//! frame-pointer stack ([`stack`]), and stacks and `.sframe` sections
//! placed in memory for the unwinder tests ([`sections`]), the x86 user
//! states `user.c` treats apart ([`x86_modes`]), and a
//! parallel map for long tests of independent runs ([`par`]).
#![allow(dead_code)]

pub mod par;
pub mod sections;
pub mod stack;
pub mod x86_modes;

use kmodel::arch::Arch;
use kmodel::event::EventKind;
use kmodel::kernel::Kernel;
use kmodel::types::{KernelOptions, PerfRegistration, Tid};
use kmodel::unwind::Vma;

/// One executable VMA over the whole address space: for tests whose
/// registrations are not about `vma_lookup()`.
pub const ANY_VMA: &[Vma; 1] = &[Vma { start: 0, end: u64::MAX, exec: true }];

/// A kernel with invariant checking on, whatever the build profile.
pub fn kernel(opts: KernelOptions) -> Kernel {
    let mut k = Kernel::new(opts);
    k.set_checks(true);
    k
}

/// Options for a kernel whose only tracers are the test's own: perf would
/// register late, with a deferred session, and there is none.
pub fn without_perf() -> KernelOptions {
    KernelOptions { perf_registration: PerfRegistration::Late, ..KernelOptions::default() }
}

/// A user task named "task" on `cpu`, in an x86-64 address space of its own.
pub fn task(k: &mut Kernel, cpu: usize) -> Tid {
    let mm = k.new_mm(Arch::X86_64);
    k.spawn("task", mm, cpu)
}

/// The cookie value tracers see for counter `cnt` on `cpu` (little endian:
/// the counter in the high half, CPU + 1 in the low half).
pub fn cookie(cnt: u64, cpu: u64) -> u64 {
    (cnt << 32) | (cpu + 1)
}

/// Every callback so far: (work index, cookie value, entries delivered).
pub fn callbacks(k: &Kernel) -> Vec<(usize, u64, usize)> {
    k.events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Callback { work, cookie, nr } => Some((work.0, cookie.id(), *nr)),
            _ => None,
        })
        .collect()
}
