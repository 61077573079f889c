//! Which kernel a scenario models ([`Profile`]): upstream Linux as measured
//! (Debian's `linux-source-7.3`, 7.3.4), or upstream plus the proposals
//! the lab also models; and, for a given scenario, which parts of its run
//! are upstream code and which are proposals ([`Parts`]).
//!
//! Measured in 7.3: `kernel/unwind/` holds `deferred.c` and `user.c` only;
//! the user unwinder walks frame pointers, on x86-64 only
//! (`HAVE_UNWIND_USER_FP` is selected by x86 alone); perf is the only
//! in-kernel user of deferred unwinding; there is no SFrame unwinder and
//! no `.sframe` registration of any kind. `deferred.c` there behaves as the
//! model's `v6.19` variant (`TWA_NMI_CURRENT` from NMI).

use kmodel::unwind::Method;
use serde::{Deserialize, Serialize};

/// Which kernel the run models (scenario `kernel.profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Profile {
    /// Linux 7.3 as measured: `deferred.c` and `user.c`'s frame-pointer
    /// walk, on x86-64 only, with perf as the only user; no `.sframe`
    /// section is ever registered. The default.
    #[default]
    #[serde(rename = "upstream")]
    Upstream,
    /// Upstream plus the proposals: the SFrame unwinder with its
    /// frame-pointer fallback, exec-time `PT_GNU_SFRAME` registration and
    /// `prctl(PR_ADD_SFRAME)` (SFrame series v13), `sframe_register()` (RFC
    /// 2026), the aarch64 frame-pointer and s390x back-chain unwinders, the
    /// `.sframe` table's fork and munmap rules and their lab variants, and
    /// the ftrace (`userstacktrace_delay`) and BPF tracers.
    #[serde(rename = "sframe-v13")]
    SframeV13,
}

impl std::fmt::Display for Profile {
    /// `upstream` or `sframe-v13`, as scenario files spell it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Profile::Upstream => "upstream",
            Profile::SframeV13 => "sframe-v13",
        })
    }
}

impl Profile {
    /// The unwinders when the scenario names none: frame pointers alone
    /// upstream, SFrame with frame pointers as its fallback otherwise.
    pub fn default_unwinders(self) -> &'static [Method] {
        match self {
            Profile::Upstream => &[Method::Fp],
            Profile::SframeV13 => &[Method::Sframe, Method::Fp],
        }
    }

    /// True when the kernel has `.sframe` tables: exec registers each
    /// `PT_GNU_SFRAME` and a guest's registration calls reach the model.
    /// Upstream has neither (those calls fail as on Linux 7.3: `prctl`
    /// with `EINVAL`, the unassigned system calls with `ENOSYS`).
    pub fn has_sframe(self) -> bool {
        self == Profile::SframeV13
    }
}

/// Which parts of a run are upstream Linux 7.3 and which are proposals
/// (or lab variants of them), in the order the run uses them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Parts {
    /// Upstream code: `deferred.c`, `user.c`'s frame-pointer walk (x86-64),
    /// perf.
    pub upstream: Vec<&'static str>,
    /// Proposals and lab variants, each with where it comes from.
    pub proposals: Vec<&'static str>,
}

impl std::fmt::Display for Parts {
    /// `upstream (Linux 7.3): deferred.c, user.c FP walk, perf; proposals: none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let proposals = if self.proposals.is_empty() { "none".to_string() } else { self.proposals.join(", ") };
        write!(f, "upstream (Linux 7.3): {}; proposals: {proposals}", self.upstream.join(", "))
    }
}
