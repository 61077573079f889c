//! The registration interfaces as kernel entry points, each error path with
//! the value the modelled kernel returns: `prctl(PR_ADD_SFRAME /
//! PR_REMOVE_SFRAME)` (v13: arguments straight to `sframe_add_section()`,
//! `PR_REMOVE_SFRAME` with arg3–arg5 zero), `sframe_register()` /
//! `sframe_unregister()` (RFC 2026: `struct sframe_setup` and its size),
//! `sframe_add_section()`'s `vma_lookup()` checks, the optional full
//! validation, and the table's life across fork (upstream empty, or the
//! copying variant) and munmap (upstream keeps, or the removing variant).

mod support;

use kmodel::arch::Arch;
use kmodel::event::EventKind;
use kmodel::kernel::Kernel;
use kmodel::memory::PagedMemory;
use kmodel::types::{ForkTable, KernelOptions, MunmapSframe, PrctlNumbers, SframeTableOptions, SyscallNumbers, Tid};
use kmodel::unwind::Vma;
use sframe::write::{RawFunction, RawRow};
use sframe::{Abi, Version};
use support::sections::{place, table};

const EINVAL: i64 = -22;
const EFAULT: i64 = -14;
const EEXIST: i64 = -17;

/// The text the sections describe, in an executable VMA.
const TEXT: (u64, u64) = (0x40_0000, 0x40_4000);
/// A read-only VMA holding the sections.
const RODATA: (u64, u64) = (0x50_0000, 0x51_0000);
/// Where the tests' `struct sframe_setup` lives (in a writable VMA).
const SETUP: u64 = 0x60_0000;

const VMAS: [Vma; 3] = [
    Vma { start: TEXT.0, end: TEXT.1, exec: true },
    Vma { start: RODATA.0, end: RODATA.1, exec: false },
    Vma { start: SETUP, end: SETUP + 0x1000, exec: false },
];

struct World {
    k: Kernel,
    mem: PagedMemory,
    t: Tid,
    /// A valid V3 section at `RODATA.0` and its end.
    good: (u64, u64),
}

fn functions(at: u64) -> Vec<RawFunction> {
    vec![RawFunction::new(at, 0x100, vec![RawRow::new(0, true, &[8])])]
}

fn world(sframe_table: SframeTableOptions) -> World {
    let mut k = support::kernel(KernelOptions { sframe_table, ..support::without_perf() });
    let mut mem = PagedMemory::new();
    mem.map(SETUP, 0x1000);
    let end = place(&mut mem, &table(Version::V3, Abi::Amd64, functions(TEXT.0 + 0x1000)), RODATA.0);
    let t = support::task(&mut k, 0);
    World { k, mem, t, good: (RODATA.0, end) }
}

impl World {
    fn prctl(&mut self, option: u64, args: [u64; 4]) -> Option<i64> {
        self.k.prctl_sframe(self.t, &self.mem, &VMAS, option, args)
    }

    fn add(&mut self, sframe: (u64, u64), text: (u64, u64)) -> i64 {
        self.prctl(79, [sframe.0, sframe.1, text.0, text.1]).expect("PR_ADD_SFRAME is the model's")
    }

    /// Writes `struct sframe_setup` at [`SETUP`].
    fn setup(&mut self, fields: [u64; 4]) {
        for (i, f) in fields.iter().enumerate() {
            self.mem.write_word(SETUP + 8 * i as u64, *f, false);
        }
    }

    fn syscall(&mut self, nr: u64, ptr: u64, size: u64) -> Option<i64> {
        self.k.sframe_syscall(self.t, &self.mem, &VMAS, nr, [ptr, size])
    }

    fn table(&self) -> Vec<(u64, u64)> {
        let mm = self.k.task(self.t).mm.unwrap();
        self.k.mm(mm).sframe.entries().map(|e| (e.sframe_start, e.text_start)).collect()
    }
}

#[test]
fn prctl_add_refuses_with_the_kernels_errnos() {
    let mut w = world(SframeTableOptions::default());
    let good = w.good;
    // Zero addresses.
    assert_eq!(w.add((0, good.1), TEXT), EINVAL);
    assert_eq!(w.add(good, (TEXT.0, 0)), EINVAL);
    // The section must start in a VMA and not run past it.
    assert_eq!(w.add((0x7000_0000, 0x7000_0100), TEXT), EINVAL);
    assert_eq!(w.add((good.0, RODATA.1 + 1), TEXT), EINVAL);
    // The text must start in an executable VMA and not run past it.
    assert_eq!(w.add(good, RODATA), EINVAL);
    assert_eq!(w.add(good, (0x3f_0000, 0x40_1000)), EINVAL);
    assert_eq!(w.add(good, (TEXT.0, TEXT.1 + 1)), EINVAL);
    // Inside its VMA but not readable: the header copy faults.
    assert_eq!(w.add((RODATA.1 - 0x100, RODATA.1), TEXT), EFAULT);
    // A header the kernel refuses: bad magic, and a V2 section.
    let at = RODATA.0 + 0x400;
    let end = place(&mut w.mem, &table(Version::V3, Abi::Amd64, functions(TEXT.0 + 0x1000)), at);
    w.mem.write(at, &[0, 0]);
    assert_eq!(w.add((at, end), TEXT), EINVAL);
    let v2 = place(&mut w.mem, &table(Version::V2, Abi::Amd64, functions(TEXT.0 + 0x1000)), RODATA.0 + 0x800);
    assert_eq!(w.add((RODATA.0 + 0x800, v2), TEXT), EINVAL);
    assert!(w.table().is_empty(), "nothing refused was registered");
    // Accepted; then the same text again overlaps (the maple tree's -EEXIST).
    assert_eq!(w.add(good, TEXT), 0);
    assert_eq!(w.add(good, (TEXT.1 - 0x10, TEXT.1)), EEXIST);
    assert_eq!(w.table(), [(good.0, TEXT.0)]);
    // Every call, accepted or refused, is in the log.
    let adds = w.k.events().iter().filter(|e| matches!(e.kind, EventKind::SframeAdd { .. })).count();
    assert_eq!(adds, 12);
}

#[test]
fn prctl_remove_wants_only_sframe_start() {
    let mut w = world(SframeTableOptions::default());
    let good = w.good;
    assert_eq!(w.add(good, TEXT), 0);
    assert_eq!(w.prctl(80, [good.0, 1, 0, 0]), Some(EINVAL));
    assert_eq!(w.prctl(80, [good.0, 0, 0, 1]), Some(EINVAL));
    assert_eq!(w.prctl(80, [good.0 + 8, 0, 0, 0]), Some(EINVAL), "never registered there");
    assert_eq!(w.table().len(), 1);
    assert_eq!(w.prctl(80, [good.0, 0, 0, 0]), Some(0));
    assert!(w.table().is_empty());
    assert_eq!(w.prctl(80, [good.0, 0, 0, 0]), Some(EINVAL), "already removed");
    // Any other option is not the model's: the host answers it.
    assert_eq!(w.prctl(15, [0, 0, 0, 0]), None);
}

#[test]
fn prctl_option_numbers_are_configurable() {
    let prctl = PrctlNumbers { add: 74, remove: 75 };
    let mut w = world(SframeTableOptions { prctl, ..SframeTableOptions::default() });
    let good = w.good;
    assert_eq!(w.prctl(79, [good.0, good.1, TEXT.0, TEXT.1]), None, "79 is nothing here");
    assert_eq!(w.prctl(74, [good.0, good.1, TEXT.0, TEXT.1]), Some(0));
    assert_eq!(w.prctl(75, [good.0, 0, 0, 0]), Some(0));
}

#[test]
fn sframe_register_checks_size_then_reads_the_structure() {
    let mut w = world(SframeTableOptions::default());
    let good = w.good;
    let (register, unregister) = (1000, 1001);
    w.setup([good.0, good.1 - good.0, TEXT.0, TEXT.1 - TEXT.0]);
    // The size is the structure's version: only 32 is known.
    for size in [0, 24, 40, 64] {
        assert_eq!(w.syscall(register, SETUP, size), Some(EINVAL), "size {size}");
        assert_eq!(w.syscall(unregister, SETUP, size), Some(EINVAL), "size {size}");
    }
    // An unreadable structure.
    assert_eq!(w.syscall(register, 0x7000_0000, 32), Some(EFAULT));
    assert_eq!(w.syscall(register, SETUP + 0xff0, 32), Some(EFAULT), "runs off its page");
    assert_eq!(w.syscall(unregister, 0x7000_0000, 32), Some(EFAULT));
    // The rules of sframe_add_section() apply to what it describes.
    w.setup([good.0, good.1 - good.0, RODATA.0, 0x100]);
    assert_eq!(w.syscall(register, SETUP, 32), Some(EINVAL), "text not executable");
    w.setup([good.0, good.1 - good.0, TEXT.0, TEXT.1 - TEXT.0]);
    assert_eq!(w.syscall(register, SETUP, 32), Some(0));
    assert_eq!(w.syscall(register, SETUP, 32), Some(EEXIST));
    // Unregister: every field but sframe_start must be 0.
    assert_eq!(w.syscall(unregister, SETUP, 32), Some(EINVAL));
    w.setup([good.0, 0, TEXT.0, 0]);
    assert_eq!(w.syscall(unregister, SETUP, 32), Some(EINVAL));
    w.setup([good.0 + 4, 0, 0, 0]);
    assert_eq!(w.syscall(unregister, SETUP, 32), Some(EINVAL), "never registered there");
    w.setup([good.0, 0, 0, 0]);
    assert_eq!(w.syscall(unregister, SETUP, 32), Some(0));
    assert!(w.table().is_empty());
    // Other numbers are not the model's.
    assert_eq!(w.syscall(39, SETUP, 32), None);
}

#[test]
fn syscall_numbers_are_configurable() {
    let syscalls = SyscallNumbers { register: 471, unregister: 472 };
    let mut w = world(SframeTableOptions { syscalls, ..SframeTableOptions::default() });
    let good = w.good;
    w.setup([good.0, good.1 - good.0, TEXT.0, TEXT.1 - TEXT.0]);
    assert_eq!(w.syscall(1000, SETUP, 32), None);
    assert_eq!(w.syscall(471, SETUP, 32), Some(0));
    w.setup([good.0, 0, 0, 0]);
    assert_eq!(w.syscall(472, SETUP, 32), Some(0));
}

/// Two FDEs out of order in a section flagged sorted: the header is fine,
/// so the default kernel accepts it (a walk would find it corrupt later);
/// `CONFIG_SFRAME_VALIDATION` refuses it at add time with -EFAULT.
#[test]
fn full_validation_refuses_at_add_time_what_the_default_accepts() {
    for (full_validation, want) in [(false, 0), (true, EFAULT)] {
        let mut w = world(SframeTableOptions { full_validation, ..SframeTableOptions::default() });
        let mut fns = functions(TEXT.0 + 0x2000);
        fns.extend(functions(TEXT.0 + 0x1000));
        let mut t = table(Version::V3, Abi::Amd64, fns);
        t.flags |= 0x1; // claims sorted
        let at = RODATA.0 + 0x800;
        let end = place(&mut w.mem, &t, at);
        assert_eq!(w.add((at, end), TEXT), want, "full validation {full_validation}");
        assert_eq!(w.add(w.good, TEXT), if want == 0 { EEXIST } else { 0 });
    }
}

/// A table as (section start, text start) pairs.
type Entries = Vec<(u64, u64)>;

/// The parent's and the child's tables after a fork with `fork`.
fn fork_child_table(fork: ForkTable) -> (Entries, Entries) {
    let mut w = world(SframeTableOptions { fork, ..SframeTableOptions::default() });
    let good = w.good;
    assert_eq!(w.add(good, TEXT), 0);
    let child = w.k.fork(w.t, 1);
    let table = |k: &Kernel, t: Tid| {
        let mm = k.task(t).mm.unwrap();
        k.mm(mm).sframe.entries().map(|e| (e.sframe_start, e.text_start)).collect::<Vec<_>>()
    };
    (table(&w.k, w.t), table(&w.k, child))
}

#[test]
fn fork_gives_an_empty_table_upstream_and_a_copy_in_the_variant() {
    let (parent, child) = fork_child_table(ForkTable::Empty);
    assert_eq!((parent.len(), child.len()), (1, 0));
    let (parent, child) = fork_child_table(ForkTable::Copy);
    assert_eq!(parent, child);
    assert_eq!(child.len(), 1);
}

#[test]
fn munmap_keeps_entries_upstream_and_removes_them_in_the_variant() {
    for (munmap, left) in [(MunmapSframe::Keep, 1), (MunmapSframe::Remove, 0)] {
        let mut w = world(SframeTableOptions { munmap, ..SframeTableOptions::default() });
        let good = w.good;
        assert_eq!(w.add(good, TEXT), 0);
        let mm = w.k.task(w.t).mm.unwrap();
        assert_eq!(w.k.unmap(mm, TEXT.0, TEXT.1), 1 - left);
        assert_eq!(w.table().len(), left, "{munmap:?}");
    }
}

/// Exec gives the task a new mm with an empty table; the old one dies with
/// its last user and frees its sections.
#[test]
fn exec_gives_a_new_empty_table() {
    let mut w = world(SframeTableOptions::default());
    let good = w.good;
    assert_eq!(w.add(good, TEXT), 0);
    let old = w.k.task(w.t).mm.unwrap();
    let regs = kmodel::arch::UserRegs::new(Arch::X86_64, TEXT.0 + 0x1000, 0x7fff_0000, 0, 0);
    w.k.enter(w.t, kmodel::event::EntryReason::Syscall, regs.clone(), &w.mem);
    let new = w.k.new_mm(Arch::X86_64);
    w.k.exec(w.t, new, regs);
    assert!(w.table().is_empty());
    assert!(w.k.mm(old).freed && w.k.mm(old).sframe.is_empty());
}
