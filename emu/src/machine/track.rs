//! Instruction counting, exact stops and the ground-truth return-address
//! stack, from a hook on every translated block.
//!
//! A per-instruction hook costs as much as everything else the engine does,
//! so the emulator works per block. A block's instructions are counted when
//! it starts; at the start of the next one it has run to its end, and its
//! last instruction, the only one that can transfer control, is applied to
//! the [`ShadowStack`]. Each block is decoded once ([`crate::machine::flow`]) and
//! cached by address and size.
//!
//! The block hook runs once per executed block (every few guest
//! instructions), so its common path is kept to a few instructions: Unicorn
//! calls it directly with the tracker as its argument (no wrapper), it reads
//! one 16-byte slot of a direct-mapped table, and it leaves calls, returns,
//! first sights and stops to a function of its own. A call or return is
//! applied in that function (the shadow stack's rule inlined there), with
//! the innermost frame looked up once and the SP read from the engine only
//! when the rule needs it (`ShadowStack::apply_reading`): calls and returns
//! come every twenty instructions or so, so each call or register read
//! saved on them shows in the shadow-stack run. What remains is mostly the
//! engine's call itself (BENCHMARKS.md, "Emulator throughput").
//!
//! Two things cut a block short, and both are settled when the engine
//! returns (`finish_run`): a fault or trap inside it (the PC then
//! says how many of its instructions ran, the rest are taken back from the
//! count, and its last instruction did not run unless the PC is past it),
//! and a stop. A stop at instruction N is exact: if N is the first
//! instruction of a block, the block hook stops the
//! engine before the block runs; if N is inside a block, the hook records a
//! `Cut` and stops the engine before the block runs, and the run loop has a
//! second engine on the same memory run the block's instructions before N
//! (`step.rs`). The main engine's translations stay as they were: Unicorn
//! compiles exit addresses into translations, so cutting the block in the
//! main engine would cost two translations per stop. Resuming at N
//! translates a block that starts there, once; it is known from the whole
//! block, so it is not decoded again.
//! Either way no instruction runs twice and none is counted twice, which is
//! what the naive version of this got wrong.
//!
//! A *probe* (a uprobe's breakpoint, `Tracker::use_probes`) is a stop
//! of the same kind at an address rather than at a count: the block hook
//! stops before a block that starts at one, and cuts a block that holds one
//! further in, as for a count. The stop is the earlier of the two; at the
//! same instruction the count's wins (the probe stops the next run there).
//! So that the fast path pays nothing for probes, a block that holds one is
//! never in the direct-mapped table: the table is only consulted, and
//! probes only looked up, on the general path, for blocks outside it. The
//! run that resumes at a probe it stopped at runs that instruction once
//! without stopping (`skip`: the first block of that run starts there).
//!
//! [`Tracking::Instructions`] adds the slow reference: a per-instruction hook
//! that decodes every instruction and keeps its own stack, applying each
//! instruction when the next one starts. Tests compare the two at every
//! stop, together with the two instruction counts.
//!
//! The per-instruction hook and `finish_run` are free functions on the
//! engine rather than methods, so that they can read a register or guest
//! memory between uses of the tracker, which lives in the engine's shared
//! data (`Tracked`); the block hook is a method of the tracker and reaches
//! the engine through Unicorn's C handle (`RawEngine`).

use crate::machine::arch::facts::ArchInfo;
use crate::machine::flow::{Decoder, Flow, Transfer};
use crate::machine::shadow::{After, ShadowStack};
use std::collections::{BTreeSet, HashMap};
use std::ffi::{c_int, c_void};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use unicorn_engine::{
    uc_emu_stop, uc_engine, uc_error, uc_hook, uc_hook_add, uc_mem_read, uc_reg_read, HookType, Unicorn,
};

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
    /// limits and probes are refused and there is no ground truth.
    Off,
    /// A hook per block: exact instruction count and stops, and nothing
    /// else: what a run needs to be deterministic (the virtual clock, the
    /// scheduler's quanta) when nobody reads the ground truth (`unwindlab
    /// exec`). Every block counts as ending in a plain instruction, so the
    /// hook never leaves its fast path to follow calls and returns.
    Count,
    /// As [`Tracking::Count`], and the ground-truth return-address stack.
    #[default]
    Blocks,
    /// As [`Tracking::Blocks`], plus the per-instruction reference stack and
    /// count (for tests: about ten times slower).
    Instructions,
}

/// A block in which a stop falls: run its first `count` instructions,
/// from `start` to the stop at `at`, elsewhere (`step.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    pub(crate) start: u64,
    pub(crate) at: u64,
    pub(crate) count: u32,
    /// The whole block's size in bytes (it identifies the decoded block).
    size: u32,
    /// The engine's instruction count at the stop, for the run loop to
    /// check that the stepper got there.
    pub(crate) icount: u64,
    /// Whether the stop is a probe's (at `at`) rather than a count's.
    pub(crate) probe: bool,
}

/// A decoded block: where it starts, its instructions' offsets, and what its
/// last instruction does.
#[derive(Debug)]
struct BlockInfo {
    start: u64,
    starts: Box<[u32]>,
    last: Transfer,
}

impl BlockInfo {
    /// The index of the instruction that starts at `pc` (how many of the
    /// block's instructions come before it), if one does.
    fn index_of(&self, pc: u64) -> Option<usize> {
        let offset = u32::try_from(pc.wrapping_sub(self.start)).ok()?;
        self.starts.binary_search(&offset).ok()
    }
}

/// What the block hook needs of a block, in 16 bytes: the hook reads one
/// slot of [`Tracker::table`] per executed block, so it stays in the
/// first-level cache. The last instruction's `next` address is the block's
/// end (a block that could not be fully decoded ends in a plain one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    addr: u64,
    size: u32,
    /// Number of instructions.
    len: u16,
    flow: Flow,
    conditional: bool,
}

impl Slot {
    /// An empty slot; no block starts at the last address with size 0.
    const EMPTY: Slot = Slot { addr: u64::MAX, size: 0, len: 0, flow: Flow::Plain, conditional: false };

    /// What the block's last instruction does.
    fn last(&self) -> Transfer {
        Transfer { flow: self.flow, next: self.addr.wrapping_add(u64::from(self.size)), conditional: self.conditional }
    }
}

/// Multiplicative hashing for code addresses: deterministic, and cheap
/// enough for the cold lookups (SipHash would cost as much as decoding).
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

/// Slots of the direct-mapped block table (a power of two; 16 KiB, small
/// enough to stay in the first-level data cache next to the engine's own).
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
    /// Guest instructions executed so far. While the engine runs it already
    /// includes the whole block that started last ([`Tracker::cur`]);
    /// `finish_run` takes back what of it did not run.
    pub(crate) icount: u64,
    /// Stop before executing instruction number `stop_at` (counting from 0).
    pub(crate) stop_at: u64,
    decoder: Decoder,
    sp_reg: i32,
    pc_reg: i32,
    lr_reg: Option<i32>,
    blocks: AddrMap<(u64, u32), u32>,
    infos: Vec<BlockInfo>,
    /// Decoded blocks by a hash of the address: the block hook's lookup,
    /// which the map would make several times slower.
    table: Box<[Slot; SLOTS]>,
    /// The block that started last, counted but not retired
    /// ([`Slot::EMPTY`] if none).
    cur: Slot,
    /// A stop inside a block, for the run loop.
    pub(crate) cut: Option<Cut>,
    /// The probe addresses the block hook stops at (empty: none). Shared
    /// with the emulator, which swaps in a new set to change it
    /// ([`Tracker::use_probes`]), so that each process's tracker sees
    /// whether its copy is current by a pointer compare.
    probes: Rc<BTreeSet<u64>>,
    /// The probe the engine stopped before, at the start of a block, in
    /// the run that has just ended (one inside a block is its `Cut`'s).
    pub(crate) hit: Option<u64>,
    /// The probe the thread stopped at and has not run yet: the next run
    /// starts there and runs that instruction without stopping. The
    /// thread's own (the scheduler parks it with the thread).
    pub(crate) skip: Option<u64>,
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

/// The engine as the block hook sees it: Unicorn's handle, used through the
/// C interface. The block hook is the one call per executed block; the
/// crate's hook wrapper would add a reference-count round trip to each
/// call, so the hook is registered directly ([`add_block_hook`]).
#[derive(Clone, Copy)]
struct RawEngine(*mut uc_engine);

impl RawEngine {
    /// A register (0 if the id is wrong, which the architecture tables rule out).
    fn reg(self, id: i32) -> u64 {
        let mut value = 0u64;
        // SAFETY: the handle is the live engine calling the hook; every
        // register the tracker reads (SP, PC, link register) is 64 bits wide.
        let err = unsafe { uc_reg_read(self.0, id, (&raw mut value).cast()) };
        if err == uc_error::OK {
            value
        } else {
            0
        }
    }

    /// `size` bytes of code at `addr` (empty if they cannot be read).
    fn code(self, addr: u64, size: u32) -> Vec<u8> {
        let mut code = vec![0u8; size as usize];
        // SAFETY: the handle is the live engine; the buffer holds `size` bytes.
        let err = unsafe { uc_mem_read(self.0, addr, code.as_mut_ptr().cast(), u64::from(size)) };
        if err == uc_error::OK {
            code
        } else {
            Vec::new()
        }
    }

    /// Stops the engine before the block that is starting runs.
    fn stop(self) {
        // SAFETY: the handle is the live engine calling the hook.
        let _ = unsafe { uc_emu_stop(self.0) };
    }
}

/// Installs the block hook on `uc`, whose shared data holds the tracker.
///
/// Unicorn compiles a direct call to the only block hook into each
/// translated block; the hook gets the tracker itself as its user data.
pub(crate) fn add_block_hook<D: Tracked>(uc: &mut Unicorn<'_, D>) -> Result<(), uc_error> {
    let tracker: *mut Tracker = uc.get_data_mut().tracker_mut();
    let callback: unsafe extern "C" fn(*mut uc_engine, u64, u32, *mut c_void) = on_block;
    let mut handle: uc_hook = 0;
    // SAFETY: the tracker lives in the engine's shared data, which the
    // `Unicorn` keeps in one heap allocation for the engine's whole life
    // (never moved; fields are replaced in place) and drops only after
    // closing the engine, which removes the hook. Unicorn calls hooks one
    // at a time, from inside `emu_start`, while no Rust reference to the
    // shared data is live.
    let err = unsafe {
        uc_hook_add(
            uc.get_handle(),
            &raw mut handle,
            HookType::BLOCK.0 as c_int,
            callback as *mut c_void,
            tracker.cast(),
            1,
            0,
        )
    };
    err.into()
}

/// The block hook, as Unicorn calls it: retires the previous block, then
/// counts this one or stops before it.
unsafe extern "C" fn on_block(uc: *mut uc_engine, addr: u64, size: u32, tracker: *mut c_void) {
    // SAFETY: `tracker` is the one `add_block_hook` registered (see there).
    let t = unsafe { &mut *tracker.cast::<Tracker>() };
    t.on_block(RawEngine(uc), addr, size);
}

impl Tracker {
    /// The block hook's work. The common case (the previous block ended in
    /// a plain instruction or a direct branch, this one is in its table
    /// slot, no stop in it, no reference) is one slot read, two compares
    /// and an addition, with no call: so that it needs no registers saved,
    /// everything else is left to [`Tracker::on_block_general`], called
    /// last (a jump). Probes cost nothing here: a block with one is never
    /// in the table.
    #[inline]
    fn on_block(&mut self, uc: RawEngine, addr: u64, size: u32) {
        // Fields are read in place rather than through copies of the slots:
        // a narrow load from a wider copy just stored stalls.
        let index = slot(addr);
        if self.cur.flow == Flow::Plain
            && self.reference.is_none()
            && self.table[index].addr == addr
            && self.table[index].size == size
        {
            let end = self.icount + u64::from(self.table[index].len);
            if end <= self.stop_at {
                self.icount = end;
                self.cur = self.table[index];
                return;
            }
        }
        self.on_block_general(uc, addr, size);
    }

    /// The block hook's work in every case: retires the previous block
    /// (inlined: this is the path of every call and return), then counts
    /// this one or stops before it; first sights and stops each have a
    /// function of their own.
    #[inline(never)]
    fn on_block_general(&mut self, uc: RawEngine, addr: u64, size: u32) {
        if self.cur.flow != Flow::Plain {
            self.retire(uc, self.cur, addr);
        }
        if let Some(reference) = &mut self.reference {
            reference.block_started = true;
        }
        let index = slot(addr);
        // A block in the table holds no probe; one outside it may.
        let (block, probe) = if self.table[index].addr == addr && self.table[index].size == size {
            (self.table[index], None)
        } else {
            let block = self.decode(uc, addr, size);
            let probe = if self.probes.is_empty() { None } else { self.first_probe(block) };
            (block, probe)
        };
        let end = self.icount + u64::from(block.len);
        // The earlier stop; at the same instruction the count's, with no
        // skip, so the probe stops the run that resumes there.
        let limit = (end > self.stop_at).then(|| self.stop_at.saturating_sub(self.icount));
        match (probe, limit) {
            (Some((index, _)), limit) if limit.is_none_or(|limit| index < limit) => {
                self.stop_in(uc, block, index, true);
            }
            (_, Some(limit)) => self.stop_in(uc, block, limit, false),
            _ => {
                self.icount = end;
                self.cur = block;
            }
        }
    }

    /// The first probe in `block` that stops: its instruction index and
    /// address. The run's first block takes the thread's skip: a probe it
    /// starts with has stopped the thread already and now runs.
    #[cold]
    #[inline(never)]
    fn first_probe(&mut self, block: Slot) -> Option<(u64, u64)> {
        let skip = self.skip.take();
        let info = self.info(block)?;
        let end = block.addr.saturating_add(u64::from(block.size));
        self.probes
            .range(block.addr..end)
            .filter(|&&probe| !(probe == block.addr && skip == Some(probe)))
            .find_map(|&probe| Some((info.index_of(probe)? as u64, probe)))
    }

    /// Applies the completed control transfer ending `block` to the
    /// ground-truth stack; execution went on at `next_pc`.
    #[inline(always)]
    fn retire(&mut self, uc: RawEngine, block: Slot, next_pc: u64) {
        let (sp, lr) = (self.sp_reg, self.lr_reg);
        // Each register read is a call into the engine: only what the rule needs.
        self.stack.apply_reading(block.last(), next_pc, |link| After {
            sp: uc.reg(sp),
            lr: lr.filter(|_| link).map(|lr| uc.reg(lr)),
        });
    }

    /// The stop is before instruction `remaining` of `block` (before the
    /// block if 0): stops the engine before the block runs, recording the
    /// cut for the run loop if the stop is inside, and the hit if it is a
    /// probe's.
    #[cold]
    fn stop_in(&mut self, uc: RawEngine, block: Slot, remaining: u64, probe: bool) {
        self.cur = Slot::EMPTY;
        if remaining > 0 {
            if let Some(info) = self.info(block) {
                let at = block.addr + u64::from(info.starts[remaining as usize]);
                let icount = self.icount + remaining;
                self.cut =
                    Some(Cut { start: block.addr, at, count: remaining as u32, size: block.size, icount, probe });
                self.record_tail(block, remaining as usize);
            }
        } else if probe {
            self.hit = Some(block.addr);
        }
        uc.stop();
    }

    /// Records the block the run resumes with after a stop before
    /// instruction `r` of `block` (it ends where `block` does) as a part of
    /// the decoded block, so that it costs no decode.
    fn record_tail(&mut self, block: Slot, r: usize) {
        let Some(info) = self.info(block) else { return };
        let split = info.starts[r];
        let tail = BlockInfo {
            start: block.addr + u64::from(split),
            starts: info.starts[r..].iter().map(|&offset| offset - split).collect(),
            last: info.last,
        };
        let key = (tail.start, block.size - split);
        if self.infos.len() < MAX_CACHED && !self.blocks.contains_key(&key) {
            self.blocks.insert(key, self.infos.len() as u32);
            self.infos.push(tail);
        }
    }

    /// Counts what ran of the block `cut` is in, which ran elsewhere up to
    /// `pc` (the stop, or an instruction that faulted or trapped before it).
    /// None of those instructions is the block's last, so the ground-truth
    /// stack does not change.
    pub(crate) fn stepped(&mut self, cut: Cut, pc: u64) {
        // At the stop itself `index_of` gives `cut.count`.
        let ran = self.info_at(cut.start, cut.size).and_then(|info| info.index_of(pc)).map_or(cut.count, |i| i as u32);
        self.icount += u64::from(ran.min(cut.count));
    }

    /// The decoded block `block` (its full record).
    fn info(&self, block: Slot) -> Option<&BlockInfo> {
        self.info_at(block.addr, block.size)
    }

    /// The decoded block at `addr` of `size` bytes.
    fn info_at(&self, addr: u64, size: u32) -> Option<&BlockInfo> {
        let index = *self.blocks.get(&(addr, size))?;
        self.infos.get(index as usize)
    }

    /// The block at `addr` of `size` bytes, decoded on first sight, and
    /// put in its table slot unless it holds a probe.
    #[cold]
    #[inline(never)]
    fn decode(&mut self, uc: RawEngine, addr: u64, size: u32) -> Slot {
        let index = match self.blocks.get(&(addr, size)) {
            Some(&index) => index,
            None => {
                // The engine has just translated these bytes, so they are mapped.
                let code = uc.code(addr, size);
                if self.infos.len() >= MAX_CACHED {
                    self.forget_code();
                }
                let block = self.decoder.block(&code, addr);
                if !block.complete {
                    self.undecodable.push(addr);
                }
                let index = self.infos.len() as u32;
                self.infos.push(BlockInfo { start: addr, starts: block.starts.into(), last: block.last });
                self.blocks.insert((addr, size), index);
                index
            }
        };
        let info = &self.infos[index as usize];
        // Unicorn's blocks hold at most 512 instructions.
        let len = u16::try_from(info.starts.len()).unwrap_or(u16::MAX);
        // Counting alone: no transfer is ever retired onto the stack.
        let flow = if self.mode == Tracking::Count { Flow::Plain } else { info.last.flow };
        let block = Slot { addr, size, len, flow, conditional: info.last.conditional };
        if !self.holds_probe(block) {
            self.table[slot(addr)] = block;
        }
        block
    }

    /// Whether a probe address falls in `block`'s bytes (at an instruction
    /// or not: either way it is kept out of the table, which costs nothing).
    fn holds_probe(&self, block: Slot) -> bool {
        let end = block.addr.saturating_add(u64::from(block.size));
        !self.probes.is_empty() && self.probes.range(block.addr..end).next().is_some()
    }

    /// Makes `probes` the addresses the block hook stops at (`None`: none,
    /// for a run without probes). The caller keeps the set and passes the
    /// same one until it changes, which then costs one pass over the table,
    /// to take out the blocks that hold a new probe.
    pub(crate) fn use_probes(&mut self, probes: Option<&Rc<BTreeSet<u64>>>) {
        match probes {
            None => {
                // Blocks kept out of the table come back as they run.
                if !self.probes.is_empty() {
                    self.probes = Rc::default();
                }
            }
            Some(probes) if !Rc::ptr_eq(&self.probes, probes) => {
                self.probes = Rc::clone(probes);
                if !self.probes.is_empty() {
                    for index in 0..SLOTS {
                        if self.table[index] != Slot::EMPTY && self.holds_probe(self.table[index]) {
                            self.table[index] = Slot::EMPTY;
                        }
                    }
                }
            }
            Some(_) => {}
        }
    }

    /// The thread is about to run from `pc`: its skip stands only if it is
    /// there and the probe is still one (a signal handler, or a run
    /// without probes, has taken it elsewhere or run the instruction).
    pub(crate) fn resume_at(&mut self, pc: u64) {
        if self.skip.is_some_and(|skip| skip != pc || !self.probes.contains(&skip)) {
            self.skip = None;
        }
    }
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
/// returned: takes back the instructions of the block that did not run
/// and applies its last instruction if it completed.
pub(crate) fn finish_run<D: Tracked>(uc: &mut Unicorn<'_, D>) {
    let t = uc.get_data().tracker();
    // Nothing to settle (a stop before a block; the stepper, which follows
    // no blocks): no register is read, as at most stops.
    if t.cur == Slot::EMPTY && t.reference.is_none() {
        return;
    }
    let pc = reg(uc, t.pc_reg);
    let regs = after(uc, t);
    let t = tracker(uc);
    let cur = std::mem::replace(&mut t.cur, Slot::EMPTY);
    if cur != Slot::EMPTY {
        let len = u64::from(cur.len);
        // Stopped at one of the block's instructions: those before it ran.
        let ran = t.info(cur).and_then(|info| info.index_of(pc)).map_or(len, |i| i as u64);
        t.icount -= len - ran;
        if ran == len {
            t.stack.apply(cur.last(), pc, Some(regs));
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
            table: Box::new([Slot::EMPTY; SLOTS]),
            cur: Slot::EMPTY,
            cut: None,
            probes: Rc::default(),
            hit: None,
            skip: None,
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
        self.table.fill(Slot::EMPTY);
        self.cur = Slot::EMPTY;
        if let Some(reference) = &mut self.reference {
            reference.insns.clear();
        }
    }

    /// A signal handler was entered (see [`ShadowStack::signal`]). The
    /// thread's skip goes: the probed instruction runs after the handler,
    /// and stops again first.
    pub(crate) fn signal_delivered(&mut self, trampoline: u64, sp: u64, resume_pc: u64) {
        self.skip = None;
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
