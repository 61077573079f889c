//! The user-space stack walk: a model of `kernel/unwind/user.c` with the
//! SFrame series on top (`kernel/unwind/sframe.c`, v13, and Jens Remus' s390
//! v4 series for the SP-from-CFA offset, the "zero" FP rule and the back
//! chain).
//!
//! Structure follows the kernel's: [`unwind_user`] records the current IP,
//! then asks the methods of [`UnwindConfig::order`] in turn for a
//! description of the caller's frame (the kernel's `struct
//! unwind_user_frame`) and applies the first one through a single step
//! function shared by every method (`unwind_user_next_common()`).
//! Per-architecture differences come from [`Arch`]'s tables only.
//!
//! Method order within one frame, as in `unwind_user_next()`:
//! * SFrame with no section, no FDE or no row for the IP (the kernel's
//!   `-EINVAL` from `sframe_find()`) → the next method (FP) is tried.
//! * SFrame lookup that finds corrupt data or takes a real fault (`-EFAULT`)
//!   → the section is removed from the registry, as the kernel does, **and
//!   the next method is still tried**: every revision of
//!   `unwind_user_next_sframe()` maps any `sframe_find()` failure to
//!   `-ENOENT` ("try next method"). (The reference text §6.2 says the walk
//!   stops there; the code it cites does not.)
//! * SFrame lookup that fails with [`MemError::WouldFault`] (a non-resident
//!   `.sframe` page read where faults are not allowed) → the walk stops and
//!   the section is kept. The kernel never runs the SFrame walk in such a
//!   context (it unwinds from task work); were it to, it would take the
//!   fault for corruption and drop a perfectly good section. The model
//!   reports the case instead ([`Trace::would_fault`]).
//! * SFrame found a row but applying it failed (a check, or a fault reading
//!   the stack) → the walk stops; FP is not tried (`default: done = true`).
//! * FP (s390x: back chain) failed for any reason → the next method, and
//!   when none is left the walk ends ([`Stop::NoMethod`], the normal end of
//!   a frame-pointer chain).
//! * An SFrame row with no data words (RA undefined) ends the walk
//!   successfully ([`Stop::Outermost`]), as the series intends. (In the v13
//!   code with flex FDEs such a row reaches `sframe_init_cfa_rule_data()`
//!   with a zero control word and fails with `-EINVAL`, so the kernel would
//!   fall back to FP there; the model follows the documented intent.)
//!
//! The IP is looked up as is, also for return addresses (no `ip - 1`), as
//! in the kernel. The FDE signal-frame bit is ignored, as in the kernel.
//!
//! The walk is bounded by [`UnwindConfig::max_entries`]; each step's work is
//! bounded by the section's size (binary search over FDEs, one FDE's rows).

mod fp;
mod sframe;

use std::cell::Cell;

pub use sframe::{RegError, SframeEntry, SframeRegistry};

use crate::arch::{Arch, UserRegs};
use crate::memory::{Access, MemError, UserMemory};

/// `UNWIND_MAX_ENTRIES` on 64-bit: the entries that fit in the deferred
/// unwinder's 4 KiB cache after its 16-byte header.
pub const UNWIND_MAX_ENTRIES: usize = 510;

/// A way of finding the caller's frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// SFrame data registered for the IP's text (`UNWIND_USER_TYPE_SFRAME`).
    Sframe,
    /// The frame-pointer chain (`UNWIND_USER_TYPE_FP`); on s390x, which has
    /// no frame-pointer convention, the back chain.
    Fp,
}

/// Which `.sframe` sections registration accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SframeMode {
    /// The v13 series: SFrame V3 only.
    #[default]
    KernelStrict,
    /// The lab's extension: V1 and V2 as well (still sorted, and PC-relative
    /// for V2), so binaries from older binutils can be walked.
    Lab,
}

/// How a walk is done.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnwindConfig {
    /// Methods tried per frame, first to last (the kernel's bit order:
    /// SFrame, then FP). A method may be left out to model a kernel without it.
    pub order: Vec<Method>,
    /// What the host passes to [`SframeRegistry::add`]; the walk itself
    /// walks whatever was registered.
    pub sframe_mode: SframeMode,
    /// Most entries recorded, the first (the user PC) included.
    pub max_entries: usize,
    /// Look up `ip − 1` for frames below the topmost, as DWARF unwinders do.
    /// Off (the kernel series as modelled): a return address just past a
    /// `noreturn` call at a function's end then falls in the next function
    /// or in no FDE at all, and the walk goes wrong there.
    pub caller_ip_adjust: bool,
}

impl Default for UnwindConfig {
    fn default() -> Self {
        UnwindConfig {
            order: vec![Method::Sframe, Method::Fp],
            sframe_mode: SframeMode::KernelStrict,
            max_entries: UNWIND_MAX_ENTRIES,
            caller_ip_adjust: false,
        }
    }
}

/// Why a walk ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Stop {
    /// A frame said it is the last one: an SFrame row with RA undefined, or
    /// a back chain of 0. The successful end.
    Outermost,
    /// `max_entries` entries were recorded (also when it is 0: the kernel's
    /// `unwind_user()` refuses with `-EINVAL` and records nothing).
    MaxEntries,
    /// No method could step, for ordinary reasons: the FP chain ended (FP 0
    /// is below SP), no SFrame data covers the IP and FP failed a check, or
    /// no method is configured. The usual end of an FP walk.
    NoMethod {
        /// Each method's reason, in the order tried.
        reason: String,
    },
    /// A read of user memory failed: the stack (while applying a frame) or
    /// the `.sframe` section.
    Fault {
        /// Address of the failed read.
        addr: u64,
        /// The method that was reading.
        method: Method,
    },
    /// The SFrame data for the IP was corrupt (the section was removed) and
    /// no later method could step either.
    Corrupt {
        /// Start address of the removed section.
        sframe_start: u64,
        /// What was wrong.
        reason: String,
    },
    /// SFrame described the frame but its rule could not be applied (e.g. a
    /// register rule below the topmost frame, an RA kept in a link register
    /// on x86-64, a CFA that does not move toward the caller).
    BadRule {
        /// The failed check.
        reason: String,
    },
}

/// The result of one walk.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Trace {
    /// Return addresses, innermost first; `entries[0]` is the user PC at
    /// kernel entry.
    pub entries: Vec<u64>,
    /// The method that produced `entries[i + 1]`.
    pub methods: Vec<Method>,
    /// Why the walk ended.
    pub stop: Stop,
    /// Some read failed with [`MemError::WouldFault`]: the walk was cut
    /// short by the context, not by the stack or the data.
    pub would_fault: bool,
    /// Start addresses of the `.sframe` sections this walk found corrupt
    /// and removed from the registry, in the order found.
    pub removed_sections: Vec<u64>,
}

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
    let mem = Recorder { mem, last_error: Cell::new(None), would_fault: Cell::new(false) };
    let mut trace = Trace {
        entries: Vec::new(),
        methods: Vec::new(),
        stop: Stop::MaxEntries,
        would_fault: false,
        removed_sections: Vec::new(),
    };
    if cfg.max_entries == 0 {
        return trace;
    }
    let mut walk = Walk {
        regs,
        arch: regs.arch,
        mem: &mem,
        access,
        // `current_has_sframe()`: SFrame is a method only if the mm has sections.
        sframe_available: !registry.is_empty(),
        caller_ip_adjust: cfg.caller_ip_adjust,
        state: State { ip: regs.pc, sp: regs.sp(), fp: regs.fp(), topmost: true },
    };
    loop {
        trace.entries.push(walk.state.ip);
        if trace.entries.len() >= cfg.max_entries {
            trace.stop = Stop::MaxEntries;
            break;
        }
        match walk.next(&cfg.order, registry, &mut trace.removed_sections) {
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

/// The register a CFA is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CfaBase {
    /// The walk's SP.
    Sp,
    /// The walk's FP, which must not be below SP.
    Fp,
    /// Any other register by DWARF number: known in the topmost frame only.
    Reg(u32),
}

/// How to recover RA or FP (`enum unwind_user_rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// The value cannot be recovered: FP becomes 0, RA is an error.
    Zero,
    /// Unchanged: FP keeps its value, RA is still in the link register
    /// (topmost frame only).
    Retain,
    /// `CFA + offset`, loaded from there if `deref`.
    Cfa { offset: i64, deref: bool },
    /// `reg + offset`, loaded from there if `deref` (topmost frame only).
    Reg { reg: u32, offset: i64, deref: bool },
}

/// `struct unwind_user_frame`: how to get from this frame to its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frame {
    cfa_base: CfaBase,
    cfa_offset: i64,
    cfa_deref: bool,
    /// Caller's SP = CFA + this ([`Arch::sp_from_cfa`] for SFrame).
    sp_off: i64,
    ra: Rule,
    fp: Rule,
    /// The recovered RA carries a PAC signature to strip.
    ra_mangled: bool,
}

/// What a method says about the current frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// The walk is complete.
    Outermost,
    /// The caller is found by applying this.
    Frame(Frame),
}

/// Why a frame could not be applied (the kernel's `-EINVAL` from
/// `unwind_user_next_common()`), split so the stop can say which.
#[derive(Debug, Clone, PartialEq, Eq)]
enum StepError {
    /// A sanity check failed.
    Check(&'static str),
    /// A stack read failed.
    Fault(MemError),
}

impl StepError {
    /// The stop this error means for `method`; a failed check is a bad rule
    /// for SFrame but the ordinary end of the chain for FP.
    fn stop(&self, method: Method) -> Stop {
        match (self, method) {
            (StepError::Fault(e), _) => Stop::Fault { addr: e.addr(), method },
            (StepError::Check(why), Method::Sframe) => Stop::BadRule { reason: (*why).into() },
            (StepError::Check(why), Method::Fp) => Stop::NoMethod { reason: format!("fp: {why}") },
        }
    }
}

/// User memory that remembers how its reads failed: the SFrame reader only
/// reports a fault's offset, the walk needs to know whether it was a
/// [`MemError::WouldFault`].
struct Recorder<'m> {
    mem: &'m dyn UserMemory,
    last_error: Cell<Option<MemError>>,
    would_fault: Cell<bool>,
}

impl UserMemory for Recorder<'_> {
    fn read(&self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemError> {
        let result = self.mem.read(addr, buf, access);
        if let Err(error) = result {
            self.last_error.set(Some(error));
            if matches!(error, MemError::WouldFault { .. }) {
                self.would_fault.set(true);
            }
        }
        result
    }
}

/// One walk in progress.
struct Walk<'a> {
    regs: &'a UserRegs,
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
            return Err(StepError::Check("register rule outside the topmost frame"));
        }
        self.regs.dwarf(reg).ok_or(StepError::Check("rule names a register the unwinder cannot read"))
    }

    /// `unwind_user_next()`: one frame up, by the first method that can;
    /// the method on success, why the walk ends otherwise.
    fn next(
        &mut self,
        order: &[Method],
        registry: &mut SframeRegistry,
        removed: &mut Vec<u64>,
    ) -> Result<Method, Stop> {
        // Failures of methods that let the next one try, in order.
        let mut misses: Vec<Stop> = Vec::new();
        for &method in order {
            let found = match method {
                Method::Sframe if !self.sframe_available => continue,
                Method::Sframe => match registry.lookup(self.mem, self.access, self.arch, self.lookup_ip()) {
                    Ok(found) => found,
                    Err(miss) => {
                        if let Some(sframe_start) = miss.drops_section() {
                            // `sframe_find()`: WARN_ON_ONCE(sframe_remove_section(...)).
                            let _ = registry.remove(sframe_start);
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
                Method::Fp => match fp::frame(self) {
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
        let reasons: Vec<String> = misses
            .into_iter()
            .filter_map(|s| match s {
                Stop::NoMethod { reason } => Some(reason),
                _ => None,
            })
            .collect();
        let reason = if reasons.is_empty() { "no unwind method available".to_string() } else { reasons.join("; ") };
        Err(Stop::NoMethod { reason })
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
        if sp % self.arch.word_size() != 0 {
            return Err(StepError::Check("caller's SP is not word-aligned"));
        }
        let ra = match frame.ra {
            Rule::Zero => return Err(StepError::Check("return address cannot be recovered")),
            Rule::Retain if !state.topmost => {
                return Err(StepError::Check("RA in the link register outside the topmost frame"))
            }
            Rule::Retain => self.regs.lr().ok_or(StepError::Check("RA in a link register the architecture lacks"))?,
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
