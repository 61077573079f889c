//! Why a delivered stack left the ground truth, in words: the frame the
//! walk could not unwind correctly, where it is (`object!function`), and the
//! reason, from what the kernel model's walk did (which method found each
//! frame, why it ended) and what the symbols say about the place.

use crate::report::{Report, SampleResult};
use crate::verdict::Verdict;
use kmodel::unwind::{Method, Stop};
use serde::Serialize;

/// The first place a stack went wrong, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// Index of the last right frame: the one the walk failed to unwind.
    pub frame: usize,
    /// Its PC (frame 0) or return address.
    pub pc: u64,
    /// Where that is: `function+0x12`, `libc.so.6!puts+0x1c`, or hex.
    pub place: String,
    /// The function alone (for grouping): `libc.so.6!puts`.
    pub function: String,
    /// Why, in words.
    pub reason: String,
}

/// Explains sample `s` of `report` if its stack is truncated or wrong.
pub fn explain(report: &Report, s: &SampleResult) -> Option<Explanation> {
    let diverged = match s.verdict {
        Verdict::Truncated { frames, .. } => frames,
        Verdict::Wrong { frame, .. } => frame,
        Verdict::Exact | Verdict::Lost { .. } => return None,
    };
    let names = report.names(s);
    let Some(frame) = diverged.checked_sub(1) else {
        let pc = s.truth.first().copied().unwrap_or(0);
        return Some(Explanation {
            frame: 0,
            pc,
            place: names.name(pc),
            function: names.function(pc),
            reason: "the first entry is not the interrupted PC".into(),
        });
    };
    let pc = s.truth[frame];
    // A return address that is not in the function of its call: the call to
    // a noreturn function was the last instruction of its caller. Only a
    // known function at the call says so: unnamed places all differ.
    let caller = names.known_function(pc.wrapping_sub(1));
    let past_call = caller.filter(|f| frame > 0 && names.known_function(pc).as_ref() != Some(f)).map(|f| {
        format!(
            "the return address lies just past the end of {f} (its last instruction calls a function that \
             never returns); the kernel looks callers up at the return address, not at the call"
        )
    });
    let methods = s.walk.as_ref().map(|w| w.methods.as_slice()).unwrap_or_default();
    let fallback = methods.iter().take(frame).position(|&m| m == Method::Fp);
    let reason = match (&s.verdict, past_call) {
        (_, Some(past)) => past,
        (Verdict::Truncated { .. }, None) => match &s.walk {
            Some(walk) => stop_in_words(&walk.stop),
            None => "the walk stopped here".into(),
        },
        (Verdict::Wrong { .. }, None) => {
            let sframe_first = report.scenario.kernel.unwinders.first() == Some(&Method::Sframe);
            match (methods.get(frame), fallback) {
                (Some(Method::Fp), _) if sframe_first => {
                    "no SFrame row applied here, and the frame-pointer fallback found a wrong caller".into()
                }
                (Some(Method::Fp), _) => "frame pointers found a wrong caller: this code keeps no frame pointer".into(),
                (_, Some(at)) => format!(
                    "the walk went astray after frame {at} ({}) was unwound by frame pointers, \
                     which left a wrong stack or frame pointer",
                    names.function(s.truth[at])
                ),
                _ => "the SFrame row here gives a wrong caller: the row disagrees with the code".into(),
            }
        }
        _ => unreachable!("exact and lost stacks returned above"),
    };
    Some(Explanation { frame, pc, place: names.name(pc), function: names.function(pc), reason })
}

/// The model's reason a walk ended, for people.
fn stop_in_words(stop: &Stop) -> String {
    match stop {
        Stop::NoMethod { misses } if !misses.is_empty() => {
            let why = |m: Method| misses.iter().find(|miss| miss.method == m).map(|miss| miss.why.as_str());
            match (why(Method::Sframe), why(Method::Fp)) {
                (Some(s), Some(f)) => format!("no SFrame for it ({s}), and frame pointers failed ({f})"),
                (Some(s), None) => format!("no SFrame for it ({s})"),
                (None, Some(f)) => format!("frame pointers failed ({f})"),
                (None, None) => stop.to_string(),
            }
        }
        Stop::BadRule { reason } => format!("its SFrame row cannot be applied: {reason}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::stop_in_words;
    use kmodel::unwind::{Method, Miss, Stop};

    #[test]
    fn stops_read_as_sentences() {
        let miss = |method, why: &str| Miss { method, why: why.into() };
        let both = Stop::NoMethod {
            misses: vec![miss(Method::Sframe, "no section for 0x10"), miss(Method::Fp, "FP below SP")],
        };
        assert_eq!(
            stop_in_words(&both),
            "no SFrame for it (no section for 0x10), and frame pointers failed (FP below SP)"
        );
        let rule = Stop::BadRule { reason: "register rule below the topmost frame".into() };
        assert_eq!(stop_in_words(&rule), "its SFrame row cannot be applied: register rule below the topmost frame");
        assert_eq!(stop_in_words(&Stop::Outermost), "outermost frame");
    }
}
