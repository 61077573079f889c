//! `kernel/unwind/user.c`: [`unwind_user`] records the current IP, then
//! asks the configured methods in turn for the caller's frame
//! (`unwind_user_next()`) and applies the first description through the
//! step shared by every method (`unwind_user_next_common()`).

use std::cell::Cell;

use super::fp;
use super::sframe::SframeRegistry;
use super::types::{CfaBase, Found, Frame, Method, Miss, Recorder, Rule, StepError, Stop, Trace, UnwindConfig};
use crate::arch::{Arch, UserRegs};
use crate::memory::{Access, UserMemory};

/// Why a task in x86's VM86 mode gets no trace: `unwind_user_word_size()`
/// is 0 there and `unwind_user_start()` refuses.
const VM86: &str = "VM86 mode: unwind_user_word_size() is 0, the kernel does not unwind it";

/// The checks a rule fails by naming a register the walk cannot read
/// there (a [`Stop::BadRule`]'s reason): a register rule or an RA kept in
/// the link register below the topmost frame, whose registers are the
/// callee's, or a register the machine lacks. Named so that a reader of
/// a walk (the lab's explanations) tells them from the other checks.
pub const REGISTER_CHECKS: [&str; 4] = [
    "register rule outside the topmost frame",
    "rule names a register the unwinder cannot read",
    "RA in the link register outside the topmost frame",
    "RA in a link register the architecture lacks",
];

/// Walks the user stack of a task whose registers at kernel entry are
/// `regs`, reading memory with `access`, as `unwind_user()` does.
///
/// `registry` is the task's mm's SFrame registry; a section found corrupt
/// is removed from it (and listed in [`Trace::removed_sections`]).
pub fn unwind_user(
    regs: &UserRegs,
    mem: &dyn UserMemory,
    registry: &mut SframeRegistry,
    access: Access,
    cfg: &UnwindConfig,
) -> Trace {
    // Nothing runs between lookups here: the walk skips the sections it
    // finds corrupt (as lookups after their removal would), and they are
    // removed once, at the end.
    let trace = walk(regs, mem, &mut Fixed(registry), access, cfg);
    for &sframe_start in &trace.removed_sections {
        // `sframe_find()`: WARN_ON_ONCE(sframe_remove_section(...)).
        let _ = registry.remove(sframe_start);
    }
    trace
}

/// [`unwind_user`] with `between` called between one frame's lookup and
/// the next, where the kernel holds no lock: each `sframe_find()` takes
/// `sframe_srcu` for itself alone, so a section may be registered or
/// removed there, and the next lookup sees the table as it is then. The
/// sections found corrupt so far are removed before `between` runs, as
/// `sframe_find()` removes them at once. Whether SFrame is tried at all is
/// decided once, at the start (`current_has_sframe()` in
/// `unwind_user_start()`).
pub(crate) fn unwind_user_interleaved(
    regs: &UserRegs,
    mem: &dyn UserMemory,
    registry: &mut SframeRegistry,
    access: Access,
    cfg: &UnwindConfig,
    between: &mut dyn FnMut(&mut SframeRegistry),
) -> Trace {
    let mut table = Live { registry, between, applied: 0 };
    let trace = walk(regs, mem, &mut table, access, cfg);
    for &sframe_start in &trace.removed_sections[table.applied..] {
        // `sframe_find()`: WARN_ON_ONCE(sframe_remove_section(...)).
        let _ = table.registry.remove(sframe_start);
    }
    trace
}

/// [`unwind_user`] without its side effect: the sections the walk finds
/// corrupt are listed in [`Trace::removed_sections`] and, for the rest of
/// the walk, treated as gone, but stay registered. For measurements that
/// must not change the model (a probe of what an in-NMI walk would do).
pub fn unwind_user_dry_run(
    regs: &UserRegs,
    mem: &dyn UserMemory,
    registry: &SframeRegistry,
    access: Access,
    cfg: &UnwindConfig,
) -> Trace {
    walk(regs, mem, &mut Fixed(registry), access, cfg)
}

/// The table a walk looks sections up in.
trait Table {
    /// The table as it is now.
    fn get(&self) -> &SframeRegistry;
    /// Between two lookups; `removed` lists the sections found corrupt.
    fn between(&mut self, removed: &[u64]);
}

/// A table nothing changes during the walk (the dry run).
struct Fixed<'a>(&'a SframeRegistry);

impl Table for Fixed<'_> {
    fn get(&self) -> &SframeRegistry {
        self.0
    }

    fn between(&mut self, _removed: &[u64]) {}
}

/// The mm's table, which may change between lookups.
struct Live<'a> {
    registry: &'a mut SframeRegistry,
    between: &'a mut dyn FnMut(&mut SframeRegistry),
    /// How many of the corrupt sections have been removed already.
    applied: usize,
}

impl Table for Live<'_> {
    fn get(&self) -> &SframeRegistry {
        self.registry
    }

    fn between(&mut self, removed: &[u64]) {
        for &sframe_start in &removed[self.applied..] {
            let _ = self.registry.remove(sframe_start);
        }
        self.applied = removed.len();
        (self.between)(self.registry);
    }
}

/// The walk itself, over `table` (generic: the table is asked once per
/// frame, on the hot path of every unwind).
fn walk(regs: &UserRegs, mem: &dyn UserMemory, table: &mut impl Table, access: Access, cfg: &UnwindConfig) -> Trace {
    let mem = Recorder { mem, last_error: Cell::new(None), would_fault: Cell::new(false) };
    // Room for a typical stack up front: one allocation, not a doubling per
    // few frames.
    let mut trace = Trace {
        entries: Vec::with_capacity(cfg.max_entries.min(32)),
        methods: Vec::with_capacity(cfg.max_entries.min(32)),
        stop: Stop::MaxEntries,
        would_fault: false,
        removed_sections: Vec::new(),
    };
    if cfg.max_entries == 0 {
        return trace;
    }
    // `unwind_user_start()`: no word size (x86 VM86 mode), no walk.
    let ws = regs.word_size();
    if ws == 0 {
        trace.stop = Stop::NoMethod { misses: vec![Miss { method: Method::Fp, why: VM86 }] };
        return trace;
    }
    let mut walk = Walk {
        regs,
        ws,
        arch: regs.arch,
        mem: &mem,
        access,
        // `current_has_sframe()`: SFrame is a method only if the mm has sections.
        sframe_available: !table.get().is_empty(),
        caller_ip_adjust: cfg.caller_ip_adjust,
        state: State { ip: regs.pc, sp: regs.sp(), fp: regs.fp(), topmost: true },
    };
    loop {
        trace.entries.push(walk.state.ip);
        if trace.entries.len() >= cfg.max_entries {
            trace.stop = Stop::MaxEntries;
            break;
        }
        if !walk.state.topmost {
            table.between(&trace.removed_sections);
        }
        match walk.next(&cfg.order, table.get(), &mut trace.removed_sections) {
            Ok(method) => trace.methods.push(method),
            Err(stop) => {
                trace.stop = stop;
                break;
            }
        }
    }
    trace.would_fault = mem.would_fault.get();
    trace
}

/// `struct unwind_user_state`: where the walk is.
#[derive(Debug, Clone, Copy)]
struct State {
    ip: u64,
    sp: u64,
    fp: u64,
    /// True until the first step: only here are the live registers known.
    topmost: bool,
}

/// One walk in progress.
struct Walk<'a> {
    regs: &'a UserRegs,
    /// The size of a stack word (`unwind_user_word_size()`).
    ws: u64,
    arch: Arch,
    mem: &'a Recorder<'a>,
    access: Access,
    sframe_available: bool,
    caller_ip_adjust: bool,
    state: State,
}

impl Walk<'_> {
    /// A stack word (`get_user()`), in the task's byte order.
    fn load(&self, addr: u64) -> Result<u64, StepError> {
        if self.ws == 4 {
            // A compat task's word, zero-extended (`get_user_word()`).
            let mut bytes = [0u8; 4];
            self.mem.read(addr, &mut bytes, self.access).map_err(StepError::Fault)?;
            let word = if self.arch.big_endian() { u32::from_be_bytes(bytes) } else { u32::from_le_bytes(bytes) };
            return Ok(u64::from(word));
        }
        let mut bytes = [0u8; 8];
        self.mem.read(addr, &mut bytes, self.access).map_err(StepError::Fault)?;
        Ok(self.arch.word(bytes))
    }

    /// The PC whose SFrame row describes this frame.
    fn lookup_ip(&self) -> u64 {
        if self.caller_ip_adjust && !self.state.topmost {
            self.state.ip.wrapping_sub(1)
        } else {
            self.state.ip
        }
    }

    /// A live register, which only the topmost frame has
    /// (`unwind_user_get_reg()`).
    fn topmost_reg(&self, reg: u32) -> Result<u64, StepError> {
        if !self.state.topmost {
            return Err(StepError::Check(REGISTER_CHECKS[0]));
        }
        self.regs.dwarf(reg).ok_or(StepError::Check(REGISTER_CHECKS[1]))
    }

    /// `unwind_user_next()`: one frame up, by the first method that can;
    /// the method on success, why the walk ends otherwise.
    /// `removed` lists the sections found corrupt so far: the kernel has
    /// removed them, so they no longer describe anything.
    fn next(&mut self, order: &[Method], registry: &SframeRegistry, removed: &mut Vec<u64>) -> Result<Method, Stop> {
        // Failures of methods that let the next one try, in order.
        let mut misses: Vec<Stop> = Vec::new();
        for &method in order {
            let found = match method {
                Method::Sframe if !self.sframe_available => continue,
                Method::Sframe => match registry.lookup(self.mem, self.access, self.arch, self.lookup_ip(), removed) {
                    Ok(found) => found,
                    Err(miss) => {
                        if let Some(sframe_start) = miss.drops_section() {
                            // `sframe_find()` removes it (see [`unwind_user`]).
                            removed.push(sframe_start);
                        }
                        match miss.stop() {
                            // Lab decision (module docs): a context that may not
                            // fault ends the walk, keeping the section.
                            stop @ Stop::Fault { .. } if miss.is_would_fault() => return Err(stop),
                            stop => misses.push(stop),
                        }
                        continue;
                    }
                },
                Method::Fp => match fp::frame(
                    self.arch,
                    self.state.sp,
                    self.ws,
                    self.state.topmost && self.regs.at_function_start(),
                    |addr| self.load(addr),
                ) {
                    Ok(found) => found,
                    Err(error) => {
                        misses.push(error.stop(method));
                        continue;
                    }
                },
            };
            let frame = match found {
                Found::Outermost => return Err(Stop::Outermost),
                Found::Frame(frame) => frame,
            };
            match self.apply(&frame) {
                Ok(()) => return Ok(method),
                // A row was found but is unusable: the kernel gives up here.
                Err(error) if method == Method::Sframe => return Err(error.stop(method)),
                Err(error) => misses.push(error.stop(method)),
            }
        }
        // The first miss that is more than "nothing here" says most.
        if let Some(stop) = misses.iter().find(|s| !matches!(s, Stop::NoMethod { .. })) {
            return Err(stop.clone());
        }
        let misses = misses
            .into_iter()
            .flat_map(|s| match s {
                Stop::NoMethod { misses } => misses,
                _ => Vec::new(),
            })
            .collect();
        Err(Stop::NoMethod { misses })
    }

    /// `unwind_user_next_common()`: applies `frame` to the state, with the
    /// kernel's checks in the kernel's order. Nothing changes on failure.
    fn apply(&mut self, frame: &Frame) -> Result<(), StepError> {
        let state = self.state;
        let base = match frame.cfa_base {
            CfaBase::Sp => state.sp,
            CfaBase::Fp if state.fp < state.sp => return Err(StepError::Check("CFA from FP, but FP is below SP")),
            CfaBase::Fp => state.fp,
            CfaBase::Reg(reg) => self.topmost_reg(reg)?,
        };
        let mut cfa = base.wrapping_add_signed(frame.cfa_offset);
        if frame.cfa_deref {
            cfa = self.load(cfa)?;
        }
        let sp = cfa.wrapping_add_signed(frame.sp_off);
        // The topmost frame may keep its SP (a leaf); every other step must
        // move toward the caller, which is what bounds an honest walk.
        if sp <= state.sp.wrapping_sub(u64::from(state.topmost)) {
            return Err(StepError::Check("stack does not grow toward the caller"));
        }
        if sp % self.ws != 0 {
            return Err(StepError::Check("caller's SP is not word-aligned"));
        }
        let ra = match frame.ra {
            Rule::Zero => return Err(StepError::Check("return address cannot be recovered")),
            Rule::Retain if !state.topmost => return Err(StepError::Check(REGISTER_CHECKS[2])),
            Rule::Retain => self.regs.lr().ok_or(StepError::Check(REGISTER_CHECKS[3]))?,
            // A return address cannot be a stack address.
            Rule::Cfa { deref: false, .. } => return Err(StepError::Check("RA = CFA + offset without a load")),
            Rule::Cfa { offset, deref: true } => self.load(cfa.wrapping_add_signed(offset))?,
            Rule::Reg { reg, offset, deref } => self.recover_from_reg(reg, offset, deref)?,
        };
        let ra = if frame.ra_mangled { self.arch.strip_pac(ra) } else { ra };
        let fp = match frame.fp {
            // Not an error: a later FP-based frame will fail on it instead.
            Rule::Zero => 0,
            Rule::Retain => state.fp,
            Rule::Cfa { deref: false, .. } => return Err(StepError::Check("FP = CFA + offset without a load")),
            Rule::Cfa { offset, deref: true } => self.load(cfa.wrapping_add_signed(offset))?,
            Rule::Reg { reg, offset, deref } => self.recover_from_reg(reg, offset, deref)?,
        };
        self.state = State { ip: ra, sp, fp, topmost: false };
        Ok(())
    }

    /// `reg + offset`, loaded from there if `deref`.
    fn recover_from_reg(&self, reg: u32, offset: i64, deref: bool) -> Result<u64, StepError> {
        let value = self.topmost_reg(reg)?.wrapping_add_signed(offset);
        if deref {
            self.load(value)
        } else {
            Ok(value)
        }
    }
}
