//! Whole stack walks: the same real stacks unwound with SFrame and with
//! framehop's `.eh_frame` unwinder, in nanoseconds per frame, side by side
//! in one run.
//!
//! **Capture** (not timed, deterministic): the committed
//! `guests/bin/<arch>/lab-v3` (its own `.eh_frame`, and generated SFrame V3
//! in `.sframe`) runs `recurse` and `compute` under the emulator, stopped by
//! an exact NMI every [`PERIOD`] instructions. Each stop keeps the registers,
//! a copy of the stack from the stack pointer's page up to the end of the
//! resident stack, and the emulator's ground truth (the return addresses of
//! the calls in progress). Both walkers read only that snapshot.
//!
//! **Check**: every walker's return addresses must equal the ground truth on
//! a stack for the stack to be timed; how many were captured and how many
//! both walkers unwind exactly is printed (the rest are the known SFrame
//! limits of BENCHMARKS.md's validation section: code without CFI,
//! return addresses past a `noreturn` call).
//!
//! **Walkers**:
//! * SFrame, indexed: `sframe::IndexedSection` (FDE array decoded once) and
//!   the walk below, as the kernel's SFrame unwinder walks (CFA from SP or
//!   FP, RA and FP from the CFA, register rules only in the topmost frame,
//!   the return address itself looked up in caller frames);
//! * SFrame, plain: the same walk with `Section::lookup`, which reads every
//!   FDE probe from the section bytes as a kernel reading user memory must;
//! * framehop 0.15 with its rule cache warm (one cache for all walks, as a
//!   profiler keeps it);
//! * framehop with a cold cache: a new, empty cache for every stack, so
//!   rules are found in `.eh_frame` (a stack's own repeated return addresses
//!   still hit). framehop has no switch to turn the cache off.
//!
//! framehop unwinds x86-64 and AArch64 only: on s390x there is no framehop
//! unwinder and only SFrame is timed.
//!
//! `cargo bench -p emu --bench walk` (or `make bench-walk`) prints the table
//! for BENCHMARKS.md: the median of interleaved rounds, in this thread's CPU
//! time. Without `--bench`
//! (as under `cargo test --all-targets`) it captures a few stacks, checks
//! both walkers and times nothing.

mod common;

use common::{median, thread_cpu_time};
use emu::{Arch, Config, Emulator, NmiSource, Regs, Tracking};
use framehop::{FrameAddress, Unwinder};
use goblin::elf::Elf;
use kmodel::memory::{Access, UserMemory};
use sframe::{Base, IndexedSection, Lookup, Recovery, RowRule, Section};
use std::path::PathBuf;
use std::time::Duration;

/// NMI period of the capture.
const PERIOD: u64 = 10_007;
/// Most frames a walk follows (no stack here is near it; a bound so that
/// bad unwind data cannot loop).
const MAX_FRAMES: usize = 1024;
/// Most stack bytes kept per snapshot.
const MAX_STACK: u64 = 1 << 20;

/// One captured stop: registers, stack bytes, expected return addresses.
struct Snapshot {
    regs: Regs,
    /// Address of `stack[0]`.
    stack_base: u64,
    stack: Vec<u8>,
    /// Return addresses of the calls in progress, innermost first.
    truth: Vec<u64>,
}

impl Snapshot {
    /// The 8-byte word at `addr` in the guest's byte order, if the snapshot has it.
    #[inline]
    fn word(&self, addr: u64, big_endian: bool) -> Option<u64> {
        let at = usize::try_from(addr.checked_sub(self.stack_base)?).ok()?;
        let bytes: [u8; 8] = self.stack.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if big_endian { u64::from_be_bytes(bytes) } else { u64::from_le_bytes(bytes) })
    }

    /// DWARF register `reg` at the stop (x86-64 16 is the PC).
    fn dwarf(&self, reg: u32) -> Option<u64> {
        let gprs = self.regs.gprs.iter().chain(&self.regs.extra);
        match (self.regs.arch, reg) {
            (Arch::X86_64, 16) => Some(self.regs.pc),
            (_, r) => gprs.copied().nth(r as usize),
        }
    }
}

/// The guest, its unwind sections and its captured stacks.
struct Subject {
    arch: Arch,
    elf_bytes: Vec<u8>,
    snapshots: Vec<Snapshot>,
}

fn guest(arch: Arch) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name()).join("lab-v3")
}

/// Runs `args` on `arch`'s guest and keeps a snapshot at every NMI (at most `limit`).
fn capture(arch: Arch, args: &[&str], limit: usize, into: &mut Vec<Snapshot>) {
    let exe = guest(arch);
    let mut argv = vec![b"lab".to_vec()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    let config = Config { args: argv, tracking: Tracking::Blocks, ..Config::default() };
    let mut emu = Emulator::load(&exe, config).unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let source = NmiSource::every(PERIOD).expect("non-zero period");
    let mut taken = 0;
    while let Some(point) = source.next(&mut emu).expect("run to the next NMI") {
        if taken == limit {
            break;
        }
        let regs = point.regs.clone();
        let stack_base = regs.sp & !(emu::PAGE_SIZE - 1);
        let mut stack = Vec::new();
        let memory = emu.user_memory();
        let mut page = [0u8; emu::PAGE_SIZE as usize];
        // Up to the end of the resident stack: the first page that cannot
        // be read without a fault is past everything the program has used.
        while (stack.len() as u64) < MAX_STACK
            && memory.read(stack_base + stack.len() as u64, &mut page, Access::NoFault).is_ok()
        {
            stack.extend_from_slice(&page);
        }
        into.push(Snapshot { regs, stack_base, stack, truth: point.ground_truth });
        taken += 1;
    }
}

/// The bytes and address range of section `name`.
fn section<'a>(elf: &Elf<'_>, bytes: &'a [u8], name: &str) -> Option<(&'a [u8], std::ops::Range<u64>)> {
    let header = elf.section_headers.iter().find(|h| elf.shdr_strtab.get_at(h.sh_name) == Some(name))?;
    let data = bytes.get(header.sh_offset as usize..(header.sh_offset + header.sh_size) as usize)?;
    Some((data, header.sh_addr..header.sh_addr + header.sh_size))
}

/// Follows `lookup`'s rules from the stop in `snap`, pushing each caller's
/// return address into `out`, as the kernel's SFrame unwinder does: the
/// CFA from SP or FP (any register, or a load, only in the topmost frame,
/// where the registers are known), the RA and FP from the CFA, the RA
/// itself looked up in caller frames, the caller's SP from the CFA as
/// `kmodel::arch::Arch::sp_from_cfa` says. Stops at an outermost row, at a PC
/// without a row, or at anything it cannot recover.
#[inline]
fn sframe_walk(
    lookup: impl Fn(u64) -> Result<Option<Lookup>, sframe::Error>,
    snap: &Snapshot,
    big_endian: bool,
    out: &mut Vec<u64>,
) {
    let (mut pc, mut sp, mut fp) = (snap.regs.pc, snap.regs.sp, snap.regs.fp);
    for depth in 0..MAX_FRAMES {
        let topmost = depth == 0;
        let Ok(Some(found)) = lookup(pc) else { return };
        let RowRule::Frame(rule) = found.rule else { return };
        let reg = |r: u32| if topmost { snap.dwarf(r) } else { None };
        let base = match rule.cfa.base {
            Base::Sp => Some(sp),
            Base::Fp => Some(fp),
            Base::Reg(r) => reg(r),
        };
        let Some(mut cfa) = base.map(|b| b.wrapping_add(rule.cfa.offset as i64 as u64)) else { return };
        if rule.cfa.deref {
            let Some(loaded) = snap.word(cfa, big_endian) else { return };
            cfa = loaded;
        }
        let recover = |how: Recovery, untracked: Option<u64>| -> Option<u64> {
            let (at, deref) = match how {
                Recovery::Untracked | Recovery::Padding | Recovery::Fixed(_) => return untracked,
                Recovery::Cfa { offset, deref } => (cfa.wrapping_add(offset as i64 as u64), deref),
                Recovery::Reg { reg: r, offset, deref } => (reg(r)?.wrapping_add(offset as i64 as u64), deref),
                Recovery::InRegister(r) => return reg(r),
            };
            if deref {
                snap.word(at, big_endian)
            } else {
                Some(at)
            }
        };
        // An untracked RA is still in the link register: known only on top.
        let link = if topmost { snap.regs.ra } else { None };
        let (Some(ra), Some(next_fp)) = (recover(rule.ra, link), recover(rule.fp, Some(fp))) else { return };
        if ra == 0 {
            return;
        }
        out.push(ra);
        // The caller's SP is the CFA (s390x: 160 bytes below it).
        (pc, sp, fp) = (ra, cfa.wrapping_add(snap.regs.arch.sp_from_cfa() as u64), next_fp);
    }
}

/// framehop's unwinder for one architecture, with a cache factory.
enum Framehop {
    X86_64(framehop::x86_64::UnwinderX86_64<Vec<u8>>),
    Aarch64(framehop::aarch64::UnwinderAarch64<Vec<u8>>),
}

/// A framehop cache of the unwinder's architecture.
enum Cache {
    X86_64(Box<framehop::x86_64::CacheX86_64>),
    Aarch64(Box<framehop::aarch64::CacheAarch64>),
}

impl Framehop {
    /// The unwinder for `subject`'s executable (a static, non-PIE program
    /// loaded at its link addresses), or `None` where framehop has none.
    fn new(subject: &Subject) -> Option<Framehop> {
        let elf = Elf::parse(&subject.elf_bytes).expect("the guest is an ELF file");
        let bytes = &subject.elf_bytes;
        let (text, text_svma) = section(&elf, bytes, ".text").expect(".text");
        let (eh_frame, eh_frame_svma) = section(&elf, bytes, ".eh_frame").expect(".eh_frame");
        let hdr = section(&elf, bytes, ".eh_frame_hdr");
        let loads = elf.program_headers.iter().filter(|p| p.p_type == goblin::elf::program_header::PT_LOAD);
        let start = loads.clone().map(|p| p.p_vaddr).min().expect("a PT_LOAD");
        let end = loads.map(|p| p.p_vaddr + p.p_memsz).max().expect("a PT_LOAD");
        let info = framehop::ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: Some(text_svma),
            text: Some(text.to_vec()),
            eh_frame_svma: Some(eh_frame_svma),
            eh_frame: Some(eh_frame.to_vec()),
            eh_frame_hdr_svma: hdr.as_ref().map(|(_, range)| range.clone()),
            eh_frame_hdr: hdr.map(|(data, _)| data.to_vec()),
            ..Default::default()
        };
        let module = framehop::Module::new("lab-v3".into(), start..end, 0, info);
        match subject.arch {
            Arch::X86_64 => {
                let mut unwinder = framehop::x86_64::UnwinderX86_64::new();
                unwinder.add_module(module);
                Some(Framehop::X86_64(unwinder))
            }
            Arch::Aarch64 => {
                let mut unwinder = framehop::aarch64::UnwinderAarch64::new();
                unwinder.add_module(module);
                Some(Framehop::Aarch64(unwinder))
            }
            Arch::S390x => None,
        }
    }

    /// A new, empty cache.
    fn cache(&self) -> Cache {
        match self {
            Framehop::X86_64(_) => Cache::X86_64(Box::default()),
            Framehop::Aarch64(_) => Cache::Aarch64(Box::default()),
        }
    }

    /// Unwinds `snap`, pushing each return address into `out`.
    #[inline]
    fn walk(&self, cache: &mut Cache, snap: &Snapshot, out: &mut Vec<u64>) {
        let mut read = |addr: u64| snap.word(addr, false).ok_or(());
        let regs = &snap.regs;
        let mut push = |frame: Result<Option<FrameAddress>, framehop::Error>| match frame {
            Ok(Some(FrameAddress::ReturnAddress(ra))) => {
                out.push(ra.get());
                true
            }
            Ok(Some(FrameAddress::InstructionPointer(_))) => true,
            _ => false,
        };
        match (self, cache) {
            (Framehop::X86_64(unwinder), Cache::X86_64(cache)) => {
                let start = framehop::x86_64::UnwindRegsX86_64::new(regs.pc, regs.sp, regs.fp);
                let mut frames = unwinder.iter_frames(regs.pc, start, cache, &mut read);
                for _ in 0..=MAX_FRAMES {
                    if !push(frames.next()) {
                        break;
                    }
                }
            }
            (Framehop::Aarch64(unwinder), Cache::Aarch64(cache)) => {
                let lr = regs.ra.expect("AArch64 has a link register");
                let start = framehop::aarch64::UnwindRegsAarch64::new(lr, regs.sp, regs.fp);
                let mut frames = unwinder.iter_frames(regs.pc, start, cache, &mut read);
                for _ in 0..=MAX_FRAMES {
                    if !push(frames.next()) {
                        break;
                    }
                }
            }
            _ => unreachable!("a cache of another architecture"),
        }
    }
}

/// The walkers timed, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walker {
    SframeIndexed,
    SframePlain,
    FramehopCached,
    FramehopCold,
}

const WALKERS: [Walker; 4] = [Walker::SframeIndexed, Walker::SframePlain, Walker::FramehopCached, Walker::FramehopCold];

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    // Stacks per workload, rounds and passes over all stacks per round.
    let (limit, rounds, passes, compute) = if full { (400, 9, 200, "2") } else { (8, 0, 0, "1") };
    println!(
        "guest: lab-v3 recurse and compute {compute}, an NMI every {PERIOD} instructions (at most {limit} stacks each);"
    );
    if full {
        println!(
            "median of {rounds} interleaved rounds of {passes} passes over the stacks every walker unwinds exactly"
        );
        println!(
            "| architecture | stacks (exact / captured) | frames | SFrame, indexed | SFrame, plain lookups | \
             framehop, warm cache | framehop, cold cache |"
        );
        println!("|---|---|---|---|---|---|---|");
    }
    for arch in Arch::ALL {
        let mut snapshots = Vec::new();
        capture(arch, &["recurse"], limit, &mut snapshots);
        capture(arch, &["compute", compute], limit, &mut snapshots);
        let elf_bytes = std::fs::read(guest(arch)).expect("read the guest");
        let subject = Subject { arch, elf_bytes, snapshots };
        let elf = Elf::parse(&subject.elf_bytes).expect("the guest is an ELF file");
        let (sframe_bytes, sframe_range) = section(&elf, &subject.elf_bytes, ".sframe").expect("lab-v3 has .sframe");
        let plain = Section::parse(sframe_bytes, sframe_range.start).expect("a valid .sframe");
        let indexed: IndexedSection<&[u8]> = plain.clone().indexed().expect("a slice never faults");
        let big_endian = arch == Arch::S390x;
        let framehop = Framehop::new(&subject);

        // Check every walker against the ground truth; keep the stacks all get exactly right.
        let captured = subject.snapshots.len();
        let mut warm = framehop.as_ref().map(Framehop::cache);
        let mut out = Vec::new();
        let exact: Vec<&Snapshot> = subject
            .snapshots
            .iter()
            .filter(|snap| {
                out.clear();
                sframe_walk(|pc| indexed.lookup(pc), snap, big_endian, &mut out);
                let mut right = out == snap.truth;
                out.clear();
                sframe_walk(|pc| plain.lookup(pc), snap, big_endian, &mut out);
                right &= out == snap.truth;
                if let (Some(framehop), Some(cache)) = (&framehop, &mut warm) {
                    out.clear();
                    framehop.walk(cache, snap, &mut out);
                    right &= out == snap.truth;
                }
                right
            })
            .collect();
        let frames: usize = exact.iter().map(|s| s.truth.len() + 1).sum();
        assert!(exact.len() * 10 >= captured * 9, "{arch}: only {} of {captured} stacks unwound exactly", exact.len());

        let mut times: [Vec<Duration>; 4] = Default::default();
        for _ in 0..rounds {
            for (i, walker) in WALKERS.into_iter().enumerate() {
                let Some(framehop) = &framehop else {
                    if matches!(walker, Walker::FramehopCached | Walker::FramehopCold) {
                        continue;
                    }
                    let start = thread_cpu_time();
                    run_sframe(walker, &indexed, &plain, &exact, big_endian, passes, &mut out);
                    times[i].push(thread_cpu_time().saturating_sub(start));
                    continue;
                };
                let elapsed = match walker {
                    Walker::SframeIndexed | Walker::SframePlain => {
                        let start = thread_cpu_time();
                        run_sframe(walker, &indexed, &plain, &exact, big_endian, passes, &mut out);
                        thread_cpu_time().saturating_sub(start)
                    }
                    Walker::FramehopCached => {
                        let cache = warm.as_mut().expect("a cache");
                        let start = thread_cpu_time();
                        for _ in 0..passes {
                            for snap in &exact {
                                out.clear();
                                framehop.walk(cache, std::hint::black_box(snap), &mut out);
                            }
                        }
                        thread_cpu_time().saturating_sub(start)
                    }
                    Walker::FramehopCold => {
                        let mut elapsed = Duration::ZERO;
                        for _ in 0..passes {
                            // New caches are made before the clock starts:
                            // their allocation is not the unwinder's work.
                            let mut cold: Vec<Cache> = exact.iter().map(|_| framehop.cache()).collect();
                            let start = thread_cpu_time();
                            for (snap, cache) in exact.iter().zip(&mut cold) {
                                out.clear();
                                framehop.walk(cache, std::hint::black_box(snap), &mut out);
                            }
                            elapsed += thread_cpu_time().saturating_sub(start);
                        }
                        elapsed
                    }
                };
                times[i].push(elapsed);
                std::hint::black_box(&out);
            }
        }
        if !full {
            println!(
                "{arch}: {} of {captured} stacks unwound exactly by every walker (timed only with --bench)",
                exact.len()
            );
            continue;
        }
        // Each cell: time per frame, and its ratio to the indexed SFrame walk's.
        let per_frame = |t: Vec<Duration>| median(t).as_nanos() as f64 / (frames * passes) as f64;
        let reference = per_frame(times[0].clone());
        let cells: Vec<String> = times
            .into_iter()
            .map(|t| match t.is_empty() {
                true => "no framehop unwinder".to_string(),
                false => {
                    let ns = per_frame(t);
                    format!("{ns:.1} ns/frame ({:.2}×)", ns / reference)
                }
            })
            .collect();
        println!("| {arch} | {} / {captured} | {frames} | {} |", exact.len(), cells.join(" | "));
    }
}

/// `passes` SFrame walks over every stack in `stacks`.
fn run_sframe(
    walker: Walker,
    indexed: &IndexedSection<&[u8]>,
    plain: &Section<&[u8]>,
    stacks: &[&Snapshot],
    big_endian: bool,
    passes: usize,
    out: &mut Vec<u64>,
) {
    for _ in 0..passes {
        for snap in stacks {
            out.clear();
            let snap = std::hint::black_box(*snap);
            match walker {
                Walker::SframeIndexed => sframe_walk(|pc| indexed.lookup(pc), snap, big_endian, out),
                _ => sframe_walk(|pc| plain.lookup(pc), snap, big_endian, out),
            }
        }
    }
}
