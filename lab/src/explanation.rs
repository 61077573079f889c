//! What a non-exact stack's explanation is made of ([`crate::explain`]
//! words them): the [`Cause`] kinds, one stack's [`Explanation`], and a
//! [`Failure`], a group of stacks that left the truth in one function for
//! one cause. Types only, so that a [`crate::report::Report`] can hold the
//! groups of its run without the report and the engine that fills them
//! importing each other.

use serde::Serialize;

/// The kind of cause a stack left the truth, for grouping and filtering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// No FDE covers the PC: code without CFI, so no SFrame either.
    NoCfi,
    /// The PC has CFI, but no registered `.sframe` section covers it.
    NoSection,
    /// The return address lies just past a call to a `noreturn` function
    /// that ends its caller.
    PastNoreturn,
    /// The SFrame row there gives a caller other than the truth.
    WrongRow,
    /// The SFrame rows agree with the CFI, and the CFI itself gives a
    /// caller other than the truth: it describes another frame than the
    /// caller's (glibc's `__longjmp` describes the jump target's).
    CfiWrong,
    /// An SFrame rule that needs a register the walk cannot read there: a
    /// register-based rule or an RA in the link register below the topmost
    /// frame (its registers are the callee's), or a register the machine
    /// lacks (`kmodel::unwind::REGISTER_CHECKS`).
    RegisterRule,
    /// Another SFrame rule the unwinder refuses (a CFA that does not move
    /// toward the caller, an RA or FP at the CFA without a load).
    BadRule,
    /// The frame is a signal trampoline: its caller is in the signal frame.
    SignalFrame,
    /// The frame-pointer fallback (or walk) found a wrong caller.
    FpWrong,
    /// An earlier frame unwound by frame pointers left a wrong stack or
    /// frame pointer, and the walk went astray from there.
    FpAstray,
    /// The frame-pointer chain ended (the FP unwinder's usual end).
    FpEnded,
    /// The `.sframe` section was dropped as corrupt.
    CorruptSection,
    /// A read of user memory failed: the stack (or `.sframe`) was not there.
    Fault,
    /// The walk recorded its most entries.
    MaxEntries,
    /// The first entry is not the interrupted PC.
    FirstEntry,
}

impl std::fmt::Display for Cause {
    /// A short label people read: `no CFI`, `past a noreturn call`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cause::NoCfi => "no CFI",
            Cause::NoSection => "no registered section",
            Cause::PastNoreturn => "past a noreturn call",
            Cause::WrongRow => "wrong SFrame row",
            Cause::CfiWrong => "CFI gives a wrong caller",
            Cause::RegisterRule => "register rule below the top",
            Cause::BadRule => "refused SFrame rule",
            Cause::SignalFrame => "signal trampoline",
            Cause::FpWrong => "frame pointers wrong",
            Cause::FpAstray => "astray after an FP frame",
            Cause::FpEnded => "frame pointers ended",
            Cause::CorruptSection => "corrupt section dropped",
            Cause::Fault => "user memory fault",
            Cause::MaxEntries => "most entries",
            Cause::FirstEntry => "first entry",
        })
    }
}

/// The first place a stack went wrong, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// Depth of the last right frame (0: the interrupted PC): the one the
    /// walk failed to unwind.
    pub frame: usize,
    /// Its PC (frame 0) or return address.
    pub pc: u64,
    /// The object holding it (`libc.so.6`), or `?` where none is mapped.
    pub object: String,
    /// Where that is: `function+0x12`, `libc.so.6!puts+0x1c`,
    /// `busybox!nofde@0x4ed900+0x16a` (code no FDE covers, named by the
    /// start of its stretch), or hex where no object is mapped.
    pub place: String,
    /// The function alone (for grouping): `libc.so.6!puts`,
    /// `libc.so.6!fde@0x27710`, `busybox!nofde@0x4ed900`.
    pub function: String,
    /// The kind of cause.
    pub cause: Cause,
    /// Why, in words.
    pub reason: String,
    /// The object's own `.sframe` row at the PC, in words, if one applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sframe_row: Option<String>,
    /// The CFI's row at the PC as an SFrame rule, in words (for a wrong row).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cfi_row: Option<String>,
    /// The true caller (the truth's next entry), for a wrong stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<u64>,
    /// What the walk delivered instead, for a wrong stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub got: Option<u64>,
    /// For a wrong row: the frame's true CFA, from the ground truth (the
    /// stack pointer at the call that made the frame).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_cfa: Option<u64>,
    /// For a wrong row: where its caller's return address truly is, where
    /// the call pushed it (x86-64); on AArch64 and s390x the call leaves it
    /// in the link register and the ground truth does not see where the
    /// function saves it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ra_slot: Option<u64>,
    /// For a wrong row: its caller's true return address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_ra: Option<u64>,
}

/// A group of stacks that left the truth in the same function for the
/// same cause, with the first of them as the example.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The first stack of the group, explained: where (function, object,
    /// PC, depth), the cause and the reason, the rows and the truth. Its
    /// fields appear at the top level of the JSON.
    #[serde(flatten)]
    pub example: Explanation,
    /// "truncated" or "wrong" (the example's; a group may hold both).
    pub kind: &'static str,
    /// How many samples failed in this function for this cause.
    pub count: u64,
    /// Of those, truncated and wrong.
    pub truncated: u64,
    /// Wrong stacks.
    pub wrong: u64,
    /// The distinct PCs they failed at, by address.
    pub pcs: Vec<u64>,
}

/// Failure groups a text account lists ([`listed`]).
pub const LISTED: usize = 15;

/// The first [`LISTED`] of `failures` in lines of text ([`line`]), each
/// after `indent`, and how many more there are.
pub fn listed(failures: &[Failure], indent: &str) -> String {
    let mut out = String::new();
    for f in failures.iter().take(LISTED) {
        out += &format!("{indent}{}\n", line(f));
    }
    if failures.len() > LISTED {
        out += &format!("{indent}… {} more groups (--json lists all)\n", failures.len() - LISTED);
    }
    out
}

/// A failure group in one line of text: its count and kind, function,
/// cause, example frame, PC and place, how many PCs, and the reason.
pub fn line(f: &Failure) -> String {
    let pcs = match f.pcs.len() {
        1 => String::new(),
        n => format!(", {n} PCs"),
    };
    format!(
        "{:6} × {} in {} [{}]: e.g. frame {} at {:#x} ({}{pcs}): {}",
        f.count,
        f.kind,
        f.example.function,
        f.example.cause,
        f.example.frame,
        f.example.pc,
        f.example.place,
        f.example.reason
    )
}
