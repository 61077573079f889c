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

use kmodel::arch::Arch;
use kmodel::types::{ForkTable, MunmapSframe};
use kmodel::unwind::Method;
use serde::{Deserialize, Serialize};

use crate::loader::Registration;
use crate::scenario::{Action, KernelConfig, Scenario, Tracer};

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

// The parts as reports name them ([`Profile::parts`]).
const DEFERRED: &str = "deferred.c";
const FP_WALK: &str = "user.c FP walk";
const PERF: &str = "perf";
const SFRAME: &str = "SFrame unwinder (series v13)";
const SFRAME_S390X: &str = "SFrame unwinder (series v13, s390 series v4)";
const EXEC: &str = ".sframe registration at exec (series v13)";
const PRCTL: &str = "loader registration through prctl (series v13)";
const SYSCALL: &str = "loader registration through sframe_register (RFC 2026)";
const FTRACE: &str = "ftrace userstacktrace_delay (posted as v6)";
const BPF: &str = "BPF tracer (a lab model: no series posted)";
const AARCH64_FP: &str = "aarch64 frame-pointer unwinder (a lab model: no series posted)";
const BACK_CHAIN: &str = "s390x back-chain unwinder (s390 series v4)";
const FORK_COPY: &str = "fork copies the .sframe table (a lab variant)";
const MUNMAP_REMOVE: &str = "munmap removes .sframe entries (a lab variant)";

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

    /// Which parts of `scenario`'s run are upstream code and which are
    /// proposals, from what it uses: its unwinders on its architecture,
    /// its tracers, its registration and its `.sframe` table variants.
    pub fn parts(self, scenario: &Scenario) -> Parts {
        let k = &scenario.kernel;
        let mut parts = Parts { upstream: vec![DEFERRED], proposals: Vec::new() };
        for method in k.unwinders() {
            match (method, scenario.machine.arch) {
                (Method::Fp, Arch::X86_64) => parts.upstream.push(FP_WALK),
                (Method::Fp, Arch::Aarch64) => parts.proposals.push(AARCH64_FP),
                (Method::Fp, Arch::S390x) => parts.proposals.push(BACK_CHAIN),
                (Method::Sframe, Arch::S390x) => parts.proposals.push(SFRAME_S390X),
                (Method::Sframe, _) => parts.proposals.push(SFRAME),
            }
        }
        for (_, tracer) in tracers(scenario) {
            let (list, name) = match tracer {
                Tracer::Perf { .. } => (&mut parts.upstream, PERF),
                Tracer::Ftrace { .. } => (&mut parts.proposals, FTRACE),
                Tracer::Bpf { .. } => (&mut parts.proposals, BPF),
            };
            if !list.contains(&name) {
                list.push(name);
            }
        }
        if self.has_sframe() {
            parts.proposals.push(EXEC);
        }
        parts.proposals.extend(match k.registration {
            Registration::Exec => None,
            Registration::Loader => Some(PRCTL),
            Registration::LoaderSyscall => Some(SYSCALL),
        });
        if k.fork_table == ForkTable::Copy {
            parts.proposals.push(FORK_COPY);
        }
        if k.munmap_sframe == MunmapSframe::Remove {
            parts.proposals.push(MUNMAP_REMOVE);
        }
        parts
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

/// Every tracer of `scenario` with its JSON path: those registered before
/// the guests start, then those its events register.
fn tracers(scenario: &Scenario) -> impl Iterator<Item = (String, &Tracer)> {
    let first = scenario.tracers.iter().enumerate().map(|(i, t)| (format!("tracers[{i}]"), t));
    let late = scenario.events.iter().enumerate().filter_map(|(i, e)| match &e.action {
        Action::Register { tracer } => Some((format!("events[{i}].tracer"), tracer)),
        _ => None,
    });
    first.chain(late)
}

/// What a scenario under [`Profile::Upstream`] asks for that Linux 7.3
/// does not have, if anything: (JSON path, message). Options that only
/// tune `.sframe` tables are refused too rather than ignored: a scenario
/// that sets one expects an effect it cannot have.
pub(crate) fn upstream_problem(s: &Scenario) -> Option<(String, String)> {
    if s.kernel.profile != Profile::Upstream {
        return None;
    }
    const SET: &str = "set \"profile\": \"sframe-v13\"";
    let problem = |path: &str, message: String| Some((path.to_string(), format!("{message}; {SET}")));
    if s.machine.arch != Arch::X86_64 {
        return problem(
            "machine.arch",
            format!("{} has no user unwinder in upstream Linux 7.3 (HAVE_UNWIND_USER_FP is x86-only)", s.machine.arch),
        );
    }
    if s.kernel.unwinders().contains(&Method::Sframe) {
        return problem(
            "kernel.unwinders",
            "\"sframe\" is a proposal (the SFrame series v13), not in upstream Linux 7.3".into(),
        );
    }
    for (at, tracer) in tracers(s) {
        let what = match tracer {
            Tracer::Perf { .. } => continue,
            Tracer::Ftrace { .. } => "\"ftrace\" (userstacktrace_delay) is a proposal, posted as v6",
            Tracer::Bpf { .. } => "\"bpf\" is a lab model (no series posted)",
        };
        return problem(
            &format!("{at}.kind"),
            format!("{what}, not in upstream Linux 7.3, where perf is the only user of deferred unwinding"),
        );
    }
    let registration = match s.kernel.registration {
        Registration::Exec => None,
        Registration::Loader => Some(("loader-prctl", "prctl PR_ADD_SFRAME, the SFrame series v13")),
        Registration::LoaderSyscall => Some(("loader-syscall", "sframe_register(), RFC 2026")),
    };
    if let Some((name, what)) = registration {
        return problem(
            "kernel.registration",
            format!("\"{name}\" is a proposal ({what}), not in upstream Linux 7.3, which registers no .sframe section"),
        );
    }
    let (k, default) = (&s.kernel, KernelConfig::default());
    let table_options = [
        ("kernel.sframe", k.sframe != default.sframe),
        ("kernel.caller_ip_adjust", k.caller_ip_adjust != default.caller_ip_adjust),
        ("kernel.sframe_prctl", k.sframe_prctl != default.sframe_prctl),
        ("kernel.sframe_syscalls", k.sframe_syscalls != default.sframe_syscalls),
        ("kernel.fork_table", k.fork_table != default.fork_table),
        ("kernel.munmap_sframe", k.munmap_sframe != default.munmap_sframe),
        ("kernel.sframe_validation", k.sframe_validation != default.sframe_validation),
        ("kernel.loader_unregisters", k.loader_unregisters != default.loader_unregisters),
    ];
    let patched = s.guests.iter().position(|g| !g.sframe_patch.is_empty()).map(|i| format!("guests[{i}].sframe_patch"));
    let set = table_options.iter().find(|(_, set)| *set).map(|(path, _)| path.to_string()).or(patched);
    set.and_then(|path| {
        problem(
            &path,
            "only matters to the SFrame unwinder and its .sframe tables, which upstream Linux 7.3 does not have".into(),
        )
    })
}
