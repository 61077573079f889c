//! What a profile means for one scenario: which parts of its run are
//! upstream code and which are proposals ([`Profile::parts`]), and what a
//! scenario under [`Profile::Upstream`] asks for that Linux 7.3 lacks
//! (`Scenario::upstream_problem`, the last of the scenario's checks).
//! Apart from `profile.rs` so that the scenario types can name a profile
//! without importing what reads a scenario.

use kmodel::arch::Arch;
use kmodel::types::{ForkTable, MunmapSframe};
use kmodel::unwind::Method;

use crate::loader::Registration;
use crate::profile::{Parts, Profile};
use crate::scenario::{Action, KernelConfig, Scenario, Tracer};

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
impl Scenario {
    /// See [`upstream_problem`].
    pub(crate) fn upstream_problem(&self) -> Option<(String, String)> {
        upstream_problem(self)
    }
}

fn upstream_problem(s: &Scenario) -> Option<(String, String)> {
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
