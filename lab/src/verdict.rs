//! Judging a delivered user stack against the ground truth captured when
//! the sample was taken (the user stack cannot change while the task is in
//! the kernel, so that truth still holds when the deferred callback runs).

use serde::Serialize;

/// The verdict on one sample's user stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Every frame, in order.
    Exact,
    /// A correct prefix: the walk stopped early.
    Truncated {
        /// Frames delivered (the first missing one is this index).
        frames: usize,
        /// Frames the truth has.
        expected: usize,
    },
    /// A frame differs.
    Wrong {
        /// Index of the first wrong frame.
        frame: usize,
        /// What the truth has there (None: the truth ended).
        expected: Option<u64>,
        /// What was delivered.
        got: u64,
    },
    /// No stack reached the tracer.
    Lost {
        /// Why.
        why: String,
    },
}

impl Verdict {
    /// Compares a delivered stack (PC first) with the truth (PC first).
    pub fn judge(delivered: &[u64], truth: &[u64]) -> Verdict {
        Verdict::judge_prefix(delivered, truth, truth.len())
    }

    /// [`Verdict::judge`] against the first entries of a truth `depth`
    /// entries deep: the same verdict while `truth` holds more entries than
    /// `delivered` (or all `depth`), which a walk bounded by
    /// `UNWIND_MAX_ENTRIES` never outgrows.
    pub fn judge_prefix(delivered: &[u64], truth: &[u64], depth: usize) -> Verdict {
        debug_assert!(truth.len() == depth || truth.len() > delivered.len(), "the truth kept is too short");
        if let Some(frame) = delivered.iter().zip(truth).position(|(d, t)| d != t) {
            return Verdict::Wrong { frame, expected: Some(truth[frame]), got: delivered[frame] };
        }
        match delivered.len().cmp(&depth) {
            std::cmp::Ordering::Equal => Verdict::Exact,
            std::cmp::Ordering::Less => Verdict::Truncated { frames: delivered.len(), expected: depth },
            std::cmp::Ordering::Greater => Verdict::Wrong { frame: depth, expected: None, got: delivered[depth] },
        }
    }

    /// Short name for tallies.
    pub fn kind(&self) -> &'static str {
        match self {
            Verdict::Exact => "exact",
            Verdict::Truncated { .. } => "truncated",
            Verdict::Wrong { .. } => "wrong",
            Verdict::Lost { .. } => "lost",
        }
    }
}

impl std::fmt::Display for Verdict {
    /// `exact`, `truncated: 3 of 5`, `wrong from frame 2` or `lost: why`,
    /// as every report shows a sample's verdict.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Exact => f.write_str("exact"),
            Verdict::Truncated { frames, expected } => write!(f, "truncated: {frames} of {expected}"),
            Verdict::Wrong { frame, .. } => write!(f, "wrong from frame {frame}"),
            Verdict::Lost { why } => write!(f, "lost: {why}"),
        }
    }
}
