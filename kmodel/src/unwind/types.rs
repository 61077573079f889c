//! The walk's vocabulary (`include/linux/unwind_user_types.h` and the
//! unwinder's configuration): the methods, how a walk is configured, why it
//! stops and what it returns; and, inside the unwinder, the frame
//! description every method produces (`struct unwind_user_frame`) and the
//! user memory that remembers how its reads failed.

use std::cell::Cell;

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

impl std::fmt::Display for Method {
    /// `sframe` or `fp`, as scenario files spell it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Method::Sframe => "sframe",
            Method::Fp => "fp",
        })
    }
}

/// Which `.sframe` sections registration accepts (scenario files: `kernel`
/// or `lab`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SframeMode {
    /// The v13 series: SFrame V3 only.
    #[default]
    #[serde(rename = "kernel")]
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
    ///
    /// [`SframeRegistry::add`]: super::SframeRegistry::add
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

/// Why one method could not find the caller's frame, for ordinary reasons
/// (no data for the IP, the FP chain ended).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Miss {
    /// The method.
    pub method: Method,
    /// Why, in words (`no .sframe section covers the IP`, `FP is below SP`):
    /// one of the model's fixed reasons, so that a walk's stop, made at
    /// every step that ends a walk and kept, copied and dropped with every
    /// judged sample, holds no string of its own.
    pub why: &'static str,
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
        /// Each method's reason, in the order tried (empty: no method is
        /// configured).
        misses: Vec<Miss>,
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

impl std::fmt::Display for Stop {
    /// In words, for logs and reports: `outermost frame`, `fault at
    /// 0x7ffe0000 (sframe)`, `corrupt .sframe at 0x4c1000: …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Outermost => f.write_str("outermost frame"),
            Stop::MaxEntries => f.write_str("max entries"),
            Stop::NoMethod { misses } if misses.is_empty() => {
                f.write_str("no method could step: no unwind method available")
            }
            Stop::NoMethod { misses } => {
                f.write_str("no method could step: ")?;
                for (i, miss) in misses.iter().enumerate() {
                    write!(f, "{}{}: {}", if i == 0 { "" } else { "; " }, miss.method, miss.why)?;
                }
                Ok(())
            }
            Stop::Fault { addr, method } => write!(f, "fault at {addr:#x} ({method})"),
            Stop::Corrupt { sframe_start, reason } => write!(f, "corrupt .sframe at {sframe_start:#x}: {reason}"),
            Stop::BadRule { reason } => write!(f, "bad rule: {reason}"),
        }
    }
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

/// The register a CFA is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CfaBase {
    /// The walk's SP.
    Sp,
    /// The walk's FP, which must not be below SP.
    Fp,
    /// Any other register by DWARF number: known in the topmost frame only.
    Reg(u32),
}

/// How to recover RA or FP (`enum unwind_user_rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
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
pub(super) struct Frame {
    pub(super) cfa_base: CfaBase,
    pub(super) cfa_offset: i64,
    pub(super) cfa_deref: bool,
    /// Caller's SP = CFA + this ([`Arch::sp_from_cfa`](crate::arch::Arch::sp_from_cfa) for SFrame).
    pub(super) sp_off: i64,
    pub(super) ra: Rule,
    pub(super) fp: Rule,
    /// The recovered RA carries a PAC signature to strip.
    pub(super) ra_mangled: bool,
}

/// What a method says about the current frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// The walk is complete.
    Outermost,
    /// The caller is found by applying this.
    Frame(Frame),
}

/// Why a frame could not be applied (the kernel's `-EINVAL` from
/// `unwind_user_next_common()`), split so the stop can say which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StepError {
    /// A sanity check failed.
    Check(&'static str),
    /// A stack read failed.
    Fault(MemError),
}

impl StepError {
    /// The stop this error means for `method`; a failed check is a bad rule
    /// for SFrame but the ordinary end of the chain for FP.
    pub(super) fn stop(&self, method: Method) -> Stop {
        match (self, method) {
            (StepError::Fault(e), _) => Stop::Fault { addr: e.addr(), method },
            (StepError::Check(why), Method::Sframe) => Stop::BadRule { reason: (*why).into() },
            (StepError::Check(why), Method::Fp) => Stop::NoMethod { misses: vec![Miss { method: Method::Fp, why }] },
        }
    }
}

/// User memory that remembers how its reads failed: the SFrame reader only
/// reports a fault's offset, the walk needs to know whether it was a
/// [`MemError::WouldFault`].
pub(super) struct Recorder<'m> {
    pub(super) mem: &'m dyn UserMemory,
    pub(super) last_error: Cell<Option<MemError>>,
    pub(super) would_fault: Cell<bool>,
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

    fn generation(&self) -> Option<u64> {
        self.mem.generation()
    }

    fn stable_page(&self, addr: u64) -> bool {
        self.mem.stable_page(addr)
    }
}

/// The walks of [`KernelOptions::extra_unwinders`] that accompanied one of
/// the model's own faultable walks.
///
/// [`KernelOptions::extra_unwinders`]: crate::types::KernelOptions::extra_unwinders
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraWalk {
    /// `seq` of the model's own walk's `Unwind` event: the walk whose trace
    /// the entry's callbacks got.
    pub event: u64,
    /// One trace per extra configuration, in order.
    pub traces: Vec<Trace>,
}

/// Every [`ExtraWalk`] of a run, and how far each extra configuration's
/// traces still stand for a run with that configuration alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtraWalks {
    /// In the order of their events.
    pub walks: Vec<ExtraWalk>,
    /// Per extra configuration: `None` while its traces are exactly those
    /// of a run of its own; else why they stopped being so. A walk that
    /// drops a corrupt `.sframe` section changes what later walks of its
    /// run find, and extra walks drop nothing (nor see what the model's own
    /// walk dropped as still there), so from the first drop that concerns
    /// an SFrame-using configuration its later traces may differ.
    pub diverged: Vec<Option<String>>,
}

impl ExtraWalks {
    /// Records the extra `traces` of the walk logged as event `event`,
    /// which dropped the sections `dropped` (by `.sframe` start); `configs`
    /// are the extra configurations.
    pub(crate) fn record(&mut self, event: u64, traces: Vec<Trace>, dropped: &[u64], configs: &[UnwindConfig]) {
        self.diverged.resize(configs.len(), None);
        for ((cfg, trace), diverged) in configs.iter().zip(&traces).zip(&mut self.diverged) {
            if diverged.is_some() || !cfg.order.contains(&Method::Sframe) {
                continue;
            }
            let by = |whose: &str, start: &u64| {
                format!("{whose} walk at event {event} dropped the .sframe section at {start:#x} as corrupt")
            };
            *diverged = dropped
                .first()
                .map(|s| by("the model's own", s))
                .or_else(|| trace.removed_sections.first().map(|s| by("this configuration's", s)));
        }
        self.walks.push(ExtraWalk { event, traces });
    }

    /// Where in [`ExtraWalks::walks`] the extra walks that accompanied the
    /// walk logged as event `event` are.
    pub fn index_of(&self, event: u64) -> Option<usize> {
        self.walks.binary_search_by_key(&event, |w| w.event).ok()
    }
}
