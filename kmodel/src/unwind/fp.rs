//! The FP method: where the frame-pointer chain (x86-64, AArch64) or the
//! s390x back chain says the caller's frame is. Like the kernel's
//! `unwind_user_fp_get_frame()`, this only describes the frame; the shared
//! step applies it with the usual checks.

use super::types::{CfaBase, Found, Frame, Rule, StepError};
use crate::arch::Arch;

/// The caller's frame as the FP convention of `arch` describes it, for a
/// frame whose SP is `sp`, with stack words of `ws` bytes; `entry`: the
/// topmost frame of a task stopped at a function's first instruction
/// (`unwind_user_at_function_start()`); `load` reads a stack word.
pub(super) fn frame(
    arch: Arch,
    sp: u64,
    ws: u64,
    entry: bool,
    load: impl Fn(u64) -> Result<u64, StepError>,
) -> Result<Found, StepError> {
    if let Some(layout) = arch.fp_frame() {
        // Offsets in words of the task (a compat task's are 4 bytes).
        let words = |off: i64| off / arch.word_size() as i64 * ws as i64;
        if entry {
            // `ARCH_INIT_USER_FP_ENTRY_FRAME`: nothing pushed yet, so
            // CFA = SP + 1 word, the return address at SP, FP the caller's.
            return Ok(Found::Frame(Frame {
                cfa_base: CfaBase::Sp,
                cfa_offset: ws as i64,
                cfa_deref: false,
                sp_off: 0,
                ra: Rule::Cfa { offset: -(ws as i64), deref: true },
                fp: Rule::Retain,
                ra_mangled: false,
            }));
        }
        // `ARCH_INIT_USER_FP_FRAME`: CFA = FP + 2 words, RA and the caller's
        // FP saved just below it (x86-64 push/mov, the AArch64 frame record).
        return Ok(Found::Frame(Frame {
            cfa_base: CfaBase::Fp,
            cfa_offset: words(layout.cfa_off),
            cfa_deref: false,
            sp_off: 0,
            ra: Rule::Cfa { offset: words(layout.ra_off), deref: true },
            fp: Rule::Cfa { offset: words(layout.fp_off), deref: true },
            ra_mangled: false,
        }));
    }
    let Some(ra_slot) = arch.back_chain() else {
        return Err(StepError::Check("the architecture has no frame-pointer convention"));
    };
    // s390x v4 series: the word at SP is the caller's SP (the back chain);
    // 0 marks the outermost frame. The series expresses the caller as an
    // SP-based CFA (caller SP + 160) so the shared step checks that the
    // caller's SP is above this one (the topmost frame may keep it) and
    // aligned; RA is the caller's r14 slot. FP cannot be recovered and
    // becomes 0, so a later FP-based SFrame rule fails instead of using a
    // stale value. The vDSO wrapper frame special case is not modelled,
    // and 64-bit offsets replace the series' s32 ones (they differ only for
    // back chains jumping more than 2 GiB).
    let caller_sp = load(sp)?;
    if caller_sp == 0 {
        return Ok(Found::Outermost);
    }
    let sp_off = arch.sp_from_cfa();
    Ok(Found::Frame(Frame {
        cfa_base: CfaBase::Sp,
        cfa_offset: (caller_sp.wrapping_sub(sp) as i64).wrapping_sub(sp_off),
        cfa_deref: false,
        sp_off,
        ra: Rule::Cfa { offset: ra_slot + sp_off, deref: true },
        fp: Rule::Zero,
        ra_mangled: false,
    }))
}
