//! Instruction counting, exact stops and the ground-truth return-address
//! stack, from a hook on every translated block.
//!
//! A per-instruction hook costs as much as everything else the engine does,
//! so the emulator works per block. At the start of each block the previous
//! one has run to its end: its instructions are counted and its last
//! instruction, the only one that can transfer control, is applied to the
//! [`ShadowStack`]. Each block is decoded once ([`crate::flow`]) and cached
//! by address and size.
//!
//! Two things cut a block short, and both are settled when the engine
//! returns (`finish_run`): a fault or trap inside it (the PC then
//! says how many of its instructions ran, and its last instruction did not
//! run unless the PC is past it), and a stop. A stop at instruction N is
//! exact: if N is the first instruction of a block, the block hook stops the
//! engine before the block runs; if N is inside a block, the hook records a
//! `Cut`, stops the engine, and the run loop re-runs the block alone with
//! Unicorn's exit address set to instruction N (its translation is dropped
//! before and after, as Unicorn checks exit addresses when it translates).
//! Resuming at N translates a block that starts there. Either way no
//! instruction runs twice and none is counted twice, which is what the naive
//! version of this got wrong.
//!
//! [`Tracking::Instructions`] adds the slow reference: a per-instruction hook
//! that decodes every instruction and keeps its own stack, applying each
//! instruction when the next one starts. Tests compare the two at every
//! stop, together with the two instruction counts.
//!
//! The hooks are free functions on the engine rather than methods, so that
//! they can read a register or guest memory between uses of the tracker,
//! which lives in the engine's shared data (`Tracked`).

use crate::arch::facts::ArchInfo;
use crate::flow::{Decoder, Flow, Transfer};
use crate::shadow::{After, ShadowStack};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use unicorn_engine::Unicorn;

/// Engine data that holds a [`Tracker`]: the engine's `Shared`. The hooks
/// take it as a bound rather than as that type, so that this file does not
/// depend on the engine, which holds the tracker.
pub(crate) trait Tracked {
    /// The tracker.
    fn tracker(&self) -> &Tracker;
    /// The tracker, to change it.
    fn tracker_mut(&mut self) -> &mut Tracker;
}

/// How much the emulator follows execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Tracking {
    /// No hooks on execution: the fastest mode. The instruction count stays
    /// 0 (so the virtual clock advances only by sleeping), instruction-count
    /// limits are refused and there is no ground truth.
    Off,
    /// A hook per block: exact instruction count and stops, and the
    /// ground-truth return-address stack.
    #[default]
    Blocks,
    /// As [`Tracking::Blocks`], plus the per-instruction reference stack and
    /// count (for tests: about ten times slower).
    Instructions,
}

/// A block in which a stop falls: re-run it from `start` alone, stopping at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    pub(crate) start: u64,
    pub(crate) at: u64,
}

/// A decoded block: where it starts, its instructions' offsets, and what its
/// last instruction does.
#[derive(Debug)]
struct BlockInfo {
    start: u64,
    starts: Box<[u32]>,
    last: Transfer,
}

/// What the block hook needs of a block, copied out of [`BlockInfo`] so the
/// common path touches one small slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    addr: u64,
    size: u32,
    /// Number of instructions.
    len: u32,
    last: Transfer,
    /// Index into [`Tracker::infos`].
    index: u32,
}

impl Entry {
    /// An empty slot: no block has size 0.
    const EMPTY: Entry = Entry { addr: 0, size: 0, len: 0, last: Transfer::PLAIN, index: 0 };
}

/// Multiplicative hashing for code addresses: deterministic, and cheap
/// enough for a lookup per block (SipHash would cost as much as the rest of
/// the hook).
#[derive(Debug, Default, Clone, Copy)]
struct AddrHasher(u64);

/// An odd constant with well-mixed bits (2^64 / golden ratio).
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(26) ^ n).wrapping_mul(MIX);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type AddrMap<K, V> = HashMap<K, V, BuildHasherDefault<AddrHasher>>;

/// Slots of the direct-mapped block cache in front of the map (a power of
/// two; small enough to stay in the first-level data cache).
const SLOTS: usize = 1 << 10;

fn slot(addr: u64) -> usize {
    (addr.wrapping_mul(MIX) >> (64 - SLOTS.trailing_zeros())) as usize
}

/// Most decoded blocks (or reference instructions) kept; past this the cache
/// starts over, so a guest that generates code cannot exhaust host memory.
const MAX_CACHED: usize = 1 << 20;

/// The per-instruction reference ([`Tracking::Instructions`]).
#[derive(Debug, Default)]
pub(crate) struct Reference {
    pub(crate) stack: ShadowStack,
    pub(crate) icount: u64,
    insns: AddrMap<u64, Transfer>,
    /// The instruction that started last and has not been applied yet.
    pending: Option<(u64, Transfer)>,
    /// A block started after `pending` did, so `pending` has completed.
    block_started: bool,
}

/// Instruction count, stop requests, decoded code and the ground-truth stack.
#[derive(Debug)]
pub(crate) struct Tracker {
    pub(crate) mode: Tracking,
    /// Guest instructions executed so far.
    pub(crate) icount: u64,
    /// Stop before executing instruction number `stop_at` (counting from 0).
    pub(crate) stop_at: u64,
    decoder: Decoder,
    sp_reg: i32,
    pc_reg: i32,
    lr_reg: Option<i32>,
    blocks: AddrMap<(u64, u32), u32>,
    infos: Vec<BlockInfo>,
    /// Recently used blocks, by a hash of the address: the block hook's
    /// lookup, which the map would make several times slower.
    recent: Box<[Entry]>,
    /// The block that started last and has not been retired, as its slot in
    /// `recent` (which only the lookup after retiring may overwrite).
    cur: Option<u32>,
    /// A stop inside a block, for the run loop.
    pub(crate) cut: Option<Cut>,
    /// The ground-truth stack.
    pub(crate) stack: ShadowStack,
    pub(crate) reference: Option<Reference>,
    /// Start addresses of blocks Capstone could not fully decode, not yet reported.
    pub(crate) undecodable: Vec<u64>,
}

/// Reads a register inside a hook; the engine reads its own registers
/// unless the register id is wrong, which the architecture tables rule out.
fn reg<D>(uc: &Unicorn<'_, D>, reg: i32) -> u64 {
    uc.reg_read(reg).unwrap_or(0)
}

/// The tracker in the engine's shared data.
fn tracker<'u, D: Tracked>(uc: &'u mut Unicorn<'_, D>) -> &'u mut Tracker {
    uc.get_data_mut().tracker_mut()
}

/// The registers after an instruction, as the ground-truth rules use them.
fn after<D>(uc: &Unicorn<'_, D>, t: &Tracker) -> After {
    After { sp: reg(uc, t.sp_reg), lr: t.lr_reg.map(|lr| reg(uc, lr)) }
}

/// The registers, if applying `last` (which continued at `next_pc`) to
/// `stack` needs them.
fn after_for<D>(uc: &Unicorn<'_, D>, t: &Tracker, stack: &ShadowStack, last: Transfer, next_pc: u64) -> Option<After> {
    stack.needs_registers(last, next_pc).then(|| after(uc, t))
}

/// The block hook: retires the previous block, then counts or stops before
/// this one.
pub(crate) fn on_block<D: Tracked>(uc: &mut Unicorn<'_, D>, addr: u64, size: u32) {
    let t = tracker(uc);
    if let Some(cur) = t.cur.take() {
        let cur = t.recent[cur as usize];
        t.icount += u64::from(cur.len);
        // Most blocks end in a plain instruction or a direct branch.
        if cur.last.flow != Flow::Plain {
            retire_transfer(uc, cur.last, addr);
        }
    }
    let t = tracker(uc);
    if let Some(reference) = &mut t.reference {
        reference.block_started = true;
    }
    let index = slot(addr);
    let cached = t.recent[index];
    let entry = if cached.addr == addr && cached.size == size { cached } else { block(uc, addr, size) };
    let t = tracker(uc);
    let remaining = t.stop_at.saturating_sub(t.icount);
    if remaining >= u64::from(entry.len) {
        t.cur = Some(index as u32);
        return;
    }
    // The stop is before this block (0) or inside it.
    if remaining > 0 {
        let at = addr + u64::from(t.infos[entry.index as usize].starts[remaining as usize]);
        t.cut = Some(Cut { start: addr, at });
    }
    let _ = uc.emu_stop();
}

/// Applies a completed control transfer to the ground-truth stack.
fn retire_transfer<D: Tracked>(uc: &mut Unicorn<'_, D>, last: Transfer, next_pc: u64) {
    let t = uc.get_data().tracker();
    let regs = after_for(uc, t, &t.stack, last, next_pc);
    tracker(uc).stack.apply(last, next_pc, regs);
}

/// The block at `addr` of `size` bytes, decoding it on first sight.
fn block<D: Tracked>(uc: &mut Unicorn<'_, D>, addr: u64, size: u32) -> Entry {
    let known = tracker(uc).blocks.get(&(addr, size)).copied();
    let index = match known {
        Some(index) => index,
        None => {
            // The engine has just translated these bytes, so they are mapped.
            let code = uc.mem_read_as_vec(addr, size as usize).unwrap_or_default();
            let t = tracker(uc);
            if t.infos.len() >= MAX_CACHED {
                t.forget_code();
            }
            let block = t.decoder.block(&code, addr);
            if !block.complete {
                t.undecodable.push(addr);
            }
            let index = t.infos.len() as u32;
            t.infos.push(BlockInfo { start: addr, starts: block.starts.into(), last: block.last });
            t.blocks.insert((addr, size), index);
            index
        }
    };
    let t = tracker(uc);
    let info = &t.infos[index as usize];
    let entry = Entry { addr, size, len: info.starts.len() as u32, last: info.last, index };
    t.recent[slot(addr)] = entry;
    entry
}

/// The per-instruction hook ([`Tracking::Instructions`]): applies the
/// previous instruction, which has completed, and decodes this one.
pub(crate) fn on_instruction<D: Tracked>(uc: &mut Unicorn<'_, D>, addr: u64, size: u32) {
    let t = uc.get_data().tracker();
    let Some(reference) = &t.reference else { return };
    let regs = reference.pending.and_then(|(_, last)| after_for(uc, t, &reference.stack, last, addr));
    let known = reference.insns.get(&addr).copied();
    let this = match known {
        Some(this) => this,
        None => {
            let code = uc.mem_read_as_vec(addr, size as usize).unwrap_or_default();
            tracker(uc).decoder.instruction(&code, addr)
        }
    };
    let Some(reference) = &mut tracker(uc).reference else { return };
    if let Some((_, last)) = reference.pending.take() {
        reference.icount += 1;
        reference.stack.apply(last, addr, regs);
    }
    reference.block_started = false;
    if known.is_none() {
        if reference.insns.len() >= MAX_CACHED {
            reference.insns.clear();
        }
        reference.insns.insert(addr, this);
    }
    reference.pending = Some((addr, this));
}

/// Settles the block (and instruction) that were running when the engine
/// returned: counts what ran of them and applies a last instruction that
/// completed.
pub(crate) fn finish_run<D: Tracked>(uc: &mut Unicorn<'_, D>) {
    let t = uc.get_data().tracker();
    let pc = reg(uc, t.pc_reg);
    let regs = after(uc, t);
    let t = tracker(uc);
    if let Some(cur) = t.cur.take() {
        let cur = t.recent[cur as usize];
        let info = &t.infos[cur.index as usize];
        let len = u64::from(cur.len);
        // Stopped at one of the block's instructions: those before it ran.
        let ran = u32::try_from(pc.wrapping_sub(info.start))
            .ok()
            .and_then(|offset| info.starts.binary_search(&offset).ok())
            .map_or(len, |i| i as u64);
        t.icount += ran;
        if ran == len {
            t.stack.apply(cur.last, pc, Some(regs));
        }
    }
    if let Some(reference) = &mut t.reference {
        if let Some((addr, last)) = reference.pending.take() {
            if reference.block_started || pc != addr {
                reference.icount += 1;
                reference.stack.apply(last, pc, Some(regs));
            }
        }
        reference.block_started = false;
    }
}

impl Tracker {
    pub(crate) fn new(info: &ArchInfo, mode: Tracking) -> Result<Tracker, capstone::Error> {
        Ok(Tracker {
            mode,
            icount: 0,
            stop_at: u64::MAX,
            decoder: Decoder::new(info.arch)?,
            sp_reg: info.sp,
            pc_reg: info.pc,
            lr_reg: info.ra,
            blocks: AddrMap::default(),
            infos: Vec::new(),
            recent: vec![Entry::EMPTY; SLOTS].into_boxed_slice(),
            cur: None,
            cut: None,
            stack: ShadowStack::new(),
            reference: (mode == Tracking::Instructions).then(Reference::default),
            undecodable: Vec::new(),
        })
    }

    /// The ground truth a `fork` child starts with: the parent's stacks, at
    /// the child's own instruction count 0, nothing decoded yet.
    pub(crate) fn fork(&self, info: &ArchInfo) -> Result<Tracker, capstone::Error> {
        let mut child = Tracker::new(info, self.mode)?;
        child.stack = self.stack.clone();
        if let (Some(mine), Some(theirs)) = (&mut child.reference, &self.reference) {
            mine.stack = theirs.stack.clone();
        }
        Ok(child)
    }

    /// Forgets decoded code (the memory map changed, so addresses may now
    /// hold other instructions).
    pub(crate) fn forget_code(&mut self) {
        self.blocks.clear();
        self.infos.clear();
        self.recent.fill(Entry::EMPTY);
        self.cur = None;
        if let Some(reference) = &mut self.reference {
            reference.insns.clear();
        }
    }

    /// A signal handler was entered (see [`ShadowStack::signal`]).
    pub(crate) fn signal_delivered(&mut self, trampoline: u64, sp: u64, resume_pc: u64) {
        self.stack.signal(trampoline, sp, resume_pc);
        if let Some(reference) = &mut self.reference {
            reference.stack.signal(trampoline, sp, resume_pc);
        }
    }

    /// `rt_sigreturn` or `sigreturn` (see [`ShadowStack::sigreturn`]).
    pub(crate) fn sigreturn(&mut self) {
        self.stack.sigreturn();
        if let Some(reference) = &mut self.reference {
            reference.stack.sigreturn();
        }
    }
}
