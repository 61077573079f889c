//! `unwindlab validate`: sample a binary every N instructions and tell a
//! toolchain developer, per unwinder, how often the stack was exact, where
//! (depth, PC, object, function) it was not and why ([`crate::explain`]),
//! grouped by cause and function, worst first; and which SFrame was judged
//! (each object's own `.sframe` as its toolchain emitted it, or one
//! generated from the program's CFI: [`SframeSource`]). One emulated run
//! serves every unwinder (`runner::run_for_extra_stacks`).

use std::collections::BTreeMap;
use std::path::Path;

use kmodel::arch::Arch;
use kmodel::unwind::{Method, SframeMode};
use serde::Serialize;

pub use crate::explanation::Failure;
use crate::loader::Registration;
use crate::report::{Progress, RunError};
use crate::scenario::{Guest, KernelConfig, Machine, Profile, Scenario, Tracer};

/// Results for one unwinder.
#[derive(Debug, Clone, Serialize)]
pub struct UnwinderResult {
    /// Samples judged.
    pub samples: u64,
    /// Exact stacks.
    pub exact: u64,
    /// Truncated stacks.
    pub truncated: u64,
    /// Wrong stacks.
    pub wrong: u64,
    /// Lost stacks (should be 0 here).
    pub lost: u64,
    /// Where it failed, most frequent first.
    pub failures: Vec<Failure>,
    /// How the `.sframe` sections were registered: at exec (the program's,
    /// and its interpreter's), or, for a dynamic program, also by a
    /// simulated loader for every object it maps.
    pub registration: Registration,
    /// Which SFrame was judged: every object mapped during the run, by name.
    pub judged: Vec<Judged>,
    /// Invariant violations the kernel model found in the run this
    /// unwinder was judged from (none expected). A violation means the
    /// model of the kernel, not the unwinder, went wrong, so the verdicts
    /// may not hold: said, never dropped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
}

impl UnwinderResult {
    /// `n` stacks as a percentage of the samples judged (0 with none).
    fn percent(&self, n: u64) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            100.0 * n as f64 / self.samples as f64
        }
    }
}

/// Where the SFrame of validated programs comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SframeSource {
    /// Each object's own `.sframe`, as its toolchain emitted it (V1, V2 or
    /// V3; none if it has none).
    #[default]
    Own,
    /// SFrame V3 generated from the program's DWARF CFI and injected into a
    /// copy of it (as `unwindlab sframe gen --inject` does), replacing any
    /// `.sframe` it has. Static programs only: a dynamic program's objects
    /// get theirs from a lab root made by `unwindlab sysroot`.
    Generated,
}

/// One object whose SFrame was judged, and what that SFrame was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judged {
    /// Its file name (`libc.so.6`).
    pub object: String,
    /// Its SFrame: `its own .sframe (SFrame V1)`, `generated from its CFI
    /// (SFrame V3)`, or `none`.
    pub sframe: String,
}

/// Runs `elf` with `args` once, sampling every `every` instructions, and
/// tallies the verdicts of each unwinder, as a run with it alone gives them. A dynamic program needs `root`:
/// the host directory it sees as `/`, with its interpreter and libraries.
pub fn validate(
    elf: &Path,
    root: Option<&Path>,
    args: &[String],
    every: u64,
    unwinders: &[Method],
    progress: &mut dyn FnMut(Progress),
) -> Result<BTreeMap<String, UnwinderResult>, RunError> {
    validate_sframe(
        elf,
        root,
        args,
        Plan {
            every,
            unwinders,
            source: SframeSource::Own,
            one_run: true,
            kernel: &Default::default(),
            perf_data: None,
            judging: Judging::default(),
        },
        progress,
    )
}

/// What to validate, and how ([`validate_sframe`]).
#[derive(Debug, Clone, Copy)]
pub struct Plan<'u> {
    /// Sampling period in instructions.
    pub every: u64,
    /// The unwinders judged.
    pub unwinders: &'u [Method],
    /// Which SFrame.
    pub source: SframeSource,
    /// One emulated run serves every unwinder (what `unwindlab validate`
    /// does), or each unwinder gets a run of its own: the reference the
    /// one run's results are tested against (they must be the same).
    pub one_run: bool,
    /// Whose code runs `kernel/unwind/`.
    pub kernel: &'u crate::scenario::KernelChoice,
    /// Write the first unwinder's run as perf.data here ([`crate::perf_data::write`]),
    /// with this command line in its header.
    pub perf_data: Option<(&'u Path, &'u [String])>,
    /// When the samples are judged.
    pub judging: Judging,
}

/// When validate judges the samples of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judging {
    /// As the run goes, every `chunk` samples, keeping only each
    /// unwinder's counts and groups: memory bounded by the groups, not the
    /// samples (the default, with [`Judging::CHUNK`]). A perf.data file
    /// needs every record, so [`Plan::perf_data`] judges after the run.
    AsItGoes {
        /// Samples taken between two reads of what the kernel wrote.
        chunk: usize,
    },
    /// After the run, every sample at once: the reference the default is
    /// tested against (the same results, byte for byte).
    AfterTheRun,
}

impl Judging {
    /// The chunk validate judges by.
    pub const CHUNK: usize = crate::stream::CHUNK;
}

impl Default for Judging {
    fn default() -> Judging {
        Judging::AsItGoes { chunk: Judging::CHUNK }
    }
}

/// [`validate`], judging the SFrame `plan.source` says, in one run or one
/// run per unwinder as `plan.one_run` says.
pub fn validate_sframe(
    elf: &Path,
    root: Option<&Path>,
    args: &[String],
    plan: Plan<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<BTreeMap<String, UnwinderResult>, RunError> {
    let Plan { every, unwinders, source, one_run, kernel: choice, perf_data, judging } = plan;
    let name = elf.display().to_string();
    let bytes = std::fs::read(elf).map_err(|e| RunError::guest(&name, format!("{name}: {e}")))?;
    let image = emu::elf::Image::parse(&name, &bytes).map_err(|e| RunError::guest(&name, e))?;
    let arch = image.arch;
    // Frame pointers alone on x86-64 are what Linux 7.3 has; anything
    // else (SFrame, or another architecture's unwinder) is a proposal.
    let profile = if arch == Arch::X86_64 && unwinders.iter().all(|&u| u == Method::Fp) {
        Profile::Upstream
    } else {
        Profile::SframeV13
    };
    // With SFrame, every object a dynamic program loads is registered
    // (its root's); upstream registers nothing.
    let registration =
        if image.interp.is_some() && profile.has_sframe() { Registration::Loader } else { Registration::Exec };
    let generated = match source {
        SframeSource::Own => None,
        SframeSource::Generated if image.interp.is_some() => {
            return Err(RunError::guest(
                &name,
                format!(
                    "{name} is dynamically linked: make a lab root with generated SFrame in every object it loads \
                     (unwindlab sysroot {name} -o ROOT) and validate ROOT/… --root ROOT"
                ),
            ))
        }
        SframeSource::Generated => Some(GeneratedCopy::new(elf)?),
    };
    let elf = generated.as_ref().map_or(elf, |g| g.path.as_path());
    let scenario = |unwinder: Method| {
        let mut s = Scenario {
            name: format!("validate-{unwinder}"),
            description: format!("{} sampled every {every} instructions", elf.display()),
            machine: Machine { arch, cpus: 1 },
            seed: 0,
            guests: vec![Guest {
                name: "guest".into(),
                path: elf.to_path_buf(),
                args: args.to_vec(),
                stdin: String::new(),
                cpu: 0,
                sframe_patch: Vec::new(),
                files: Default::default(),
                cwd: None,
                root: root.map(Path::to_path_buf),
            }],
            tracers: vec![Tracer::Perf {
                name: "perf".into(),
                period: every,
                user_stack: kmodel::tracer::UserStackMode::Deferred,
                task: None,
                inherit: true,
                event: crate::scenario::SampleOn::Instructions,
            }],
            // Judge one unwinder alone, whatever SFrame version the file has.
            kernel: KernelConfig {
                profile,
                unwinders: Some(vec![unwinder]),
                sframe: if profile.has_sframe() { SframeMode::Lab } else { KernelConfig::default().sframe },
                registration,
                ..KernelConfig::default()
            },
            events: Vec::new(),
            stop_after: None,
            expect: None,
        };
        choice.apply(&mut s.kernel);
        s
    };
    let mut out = BTreeMap::new();
    let Some((&first, rest)) = unwinders.split_first() else { return Ok(out) };
    // One emulated run for every unwinder: the model walks each deferred
    // stack once more per other unwinder, alone, at the same point
    // (`runner::run_for_extra_stacks`); the verdicts are those of a run
    // per unwinder. Where that one run cannot stand for another unwinder's
    // own (a corrupt section was dropped), that unwinder gets its own run.
    let extra: Vec<Vec<Method>> = if one_run { rest.iter().map(|&u| vec![u]).collect() } else { Vec::new() };
    let chunk = match judging {
        Judging::AsItGoes { chunk } if perf_data.is_none() => Some(chunk),
        _ => None,
    };
    if let Some(chunk) = chunk {
        let judged = |unwinder: Method, extra: &[Vec<Method>], progress: &mut dyn FnMut(Progress)| {
            crate::runner::run_judged_as_it_goes(&scenario(unwinder), extra, chunk, progress)
        };
        let run = judged(first, &extra, progress)?;
        let mut verdicts = run.verdicts.into_iter();
        for (n, &unwinder) in unwinders.iter().enumerate() {
            let verdicts = match verdicts.next() {
                Some(Ok(v)) => {
                    UnwinderResult::of(v, judged_objects(&run.symbols, source), registration, &run.violations)
                }
                // Not from the one run: a run of its own.
                _ => {
                    debug_assert!(n > 0, "the scenario's own unwinder always stands");
                    let own = judged(unwinder, &[], progress)?;
                    let Some(Ok(v)) = own.verdicts.into_iter().next() else {
                        return Err(RunError::Scenario(format!("{unwinder}: a run of its own has no verdicts")));
                    };
                    UnwinderResult::of(v, judged_objects(&own.symbols, source), registration, &own.violations)
                }
            };
            out.insert(unwinder.to_string(), verdicts);
        }
        return Ok(out);
    }
    let (mut report, extras) =
        crate::runner::run_for_extra_stacks(&scenario(first), &extra, perf_data.is_some(), progress)?;
    if let Some((path, cmdline)) = perf_data {
        crate::perf_data::write(&report, path, cmdline).map_err(|e| RunError::Scenario(e.to_string()))?;
    }
    out.insert(first.to_string(), result(&report, source, registration));
    let extras = extras.into_iter().map(Some).chain(std::iter::repeat_with(|| None));
    for (&unwinder, verdicts) in rest.iter().zip(extras) {
        match verdicts {
            Some(Ok(v)) => {
                // The same run, judged with this unwinder's stacks: only
                // they change, in place.
                report.scenario = scenario(unwinder);
                for (s, judged) in report.samples.iter_mut().zip(v.stacks) {
                    judged.put(s);
                }
                report.summary = v.summary;
            }
            // Verdicts only: the event log is not shown, so it is not formatted.
            Some(Err(_)) | None => report = crate::runner::run_for_verdicts(&scenario(unwinder), progress)?,
        }
        out.insert(unwinder.to_string(), result(&report, source, registration));
    }
    Ok(out)
}

impl UnwinderResult {
    /// One unwinder's result from its verdict counts and groups.
    fn of(
        (summary, failures): (crate::report::Summary, Vec<Failure>),
        judged: Vec<Judged>,
        registration: Registration,
        violations: &[String],
    ) -> UnwinderResult {
        UnwinderResult {
            samples: summary.judged,
            exact: summary.exact,
            truncated: summary.truncated,
            wrong: summary.wrong,
            lost: summary.lost,
            failures,
            registration,
            judged,
            violations: violations.to_vec(),
        }
    }
}

/// One unwinder's result from the `report` of a run judged with its
/// stacks alone.
fn result(report: &crate::report::Report, source: SframeSource, registration: Registration) -> UnwinderResult {
    UnwinderResult::of(
        (report.summary.clone(), crate::explain::group(report)),
        judged_objects(&report.symbols, source),
        registration,
        &report.violations,
    )
}

/// Which SFrame each object mapped in a run (its guests' `symbols`) had.
fn judged_objects(symbols: &BTreeMap<String, crate::symbolise::GuestSymbols>, source: SframeSource) -> Vec<Judged> {
    let mut out: Vec<Judged> = Vec::new();
    for symbols in symbols.values() {
        for (object, program, code) in symbols.files() {
            let version = code.and_then(|c| c.sframe_version()).map(|v| v.number());
            let sframe = match (version, program && source == SframeSource::Generated) {
                (Some(v), true) => format!("generated from its CFI (SFrame V{v})"),
                (Some(v), false) => format!("its own .sframe (SFrame V{v})"),
                (None, _) => "none".into(),
            };
            if !out.iter().any(|j| j.object == object) {
                out.push(Judged { object: object.to_string(), sframe });
            }
        }
    }
    out.sort_by(|a, b| a.object.cmp(&b.object));
    out
}

/// A copy of a static program with SFrame V3 generated from its CFI
/// injected, in a directory of its own under the system's temporary
/// directory, removed when dropped.
struct GeneratedCopy {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl GeneratedCopy {
    fn new(elf: &Path) -> Result<GeneratedCopy, RunError> {
        let name = elf.display().to_string();
        let err = |e: &dyn std::fmt::Display| RunError::guest(&name, format!("{name}: generating SFrame: {e}"));
        let input = sframe::elf::load_cfi(&name).map_err(|e| err(&e))?;
        let generated = sframe::elf::generate_section(&input, &name, sframe::Version::V3, None).map_err(|e| err(&e))?;
        let injected = sframe::elf::inject::inject(&input.data, &generated.section).map_err(|e| err(&e))?;
        // One directory per copy: validate runs in parallel in the tests
        // (the same program too), and the first to finish removes its own;
        // the program keeps its file name.
        static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let copy = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "unwindlab-validate-{}-{copy}-{:x}",
            std::process::id(),
            emu::fs::fnv1a(name.as_bytes())
        ));
        let file = elf.file_name().map_or_else(|| "program".into(), |f| f.to_os_string());
        std::fs::create_dir_all(&dir).map_err(|e| err(&e))?;
        let path = dir.join(file);
        std::fs::write(&path, injected).map_err(|e| err(&e))?;
        Ok(GeneratedCopy { dir, path })
    }
}

impl Drop for GeneratedCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The warning that a run's kernel model broke its invariants.
fn violations_warning(violations: &[String], first: &str) -> String {
    format!(
        "warning: the kernel model broke {} invariant(s) in this run, so these verdicts may not hold (first: {first})",
        violations.len()
    )
}

/// The results as text: per unwinder the verdict shares, any invariant
/// the kernel model broke, which SFrame was judged, then the groups of
/// failures, worst first, each with its cause, function, depth, PC and
/// reason.
pub fn text(results: &BTreeMap<String, UnwinderResult>) -> String {
    let mut out = String::new();
    for (name, r) in results {
        let pct = |n: u64| r.percent(n);
        out += &format!(
            "{name}: {} samples: {:.1}% exact, {:.1}% truncated, {:.1}% wrong\n",
            r.samples,
            pct(r.exact),
            pct(r.truncated),
            pct(r.wrong)
        );
        if let Some(first) = r.violations.first() {
            out += &format!("    {}\n", violations_warning(&r.violations, first));
        }
        if name == "sframe" {
            let judged: Vec<String> = r.judged.iter().map(|j| format!("{}: {}", j.object, j.sframe)).collect();
            out += &format!("    SFrame judged: {}\n", judged.join("; "));
        }
        if r.registration == Registration::Loader {
            out += "    sections: every loaded object's (a simulated loader registers each as it is mapped)\n";
        }
        out += &crate::explanation::listed(&r.failures, "    ");
    }
    out
}

/// The results as one self-contained HTML page (no scripts, no network,
/// the scenario report's style): per unwinder the verdict shares, which
/// SFrame was judged, and a table with a row per function and cause, worst
/// first, every group listed.
pub fn html(title: &str, results: &BTreeMap<String, UnwinderResult>) -> String {
    use crate::html::{esc, STYLE};
    let mut out = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>unwindlab validate: {t}</title>\
         <style>{STYLE}</style></head><body><h1>unwindlab validate: {t}</h1>",
        t = esc(title)
    );
    for (name, r) in results {
        let pct = |n: u64| r.percent(n);
        out += &format!(
            "<h2 id=\"{n}\">{n}: {} samples</h2><p><span class=\"exact\">{:.1}% exact</span>, \
             <span class=\"truncated\">{:.1}% truncated</span>, <span class=\"wrong\">{:.1}% wrong</span></p>",
            r.samples,
            pct(r.exact),
            pct(r.truncated),
            pct(r.wrong),
            n = esc(name)
        );
        if let Some(first) = r.violations.first() {
            out += &format!("<p class=\"bad\">{}</p>", esc(&violations_warning(&r.violations, first)));
        }
        out += "<table><tr><th>object</th><th>SFrame judged</th></tr>";
        for j in &r.judged {
            out += &format!("<tr><td><code>{}</code></td><td>{}</td></tr>", esc(&j.object), esc(&j.sframe));
        }
        out += "</table>";
        if r.failures.is_empty() {
            continue;
        }
        out += "<h3>Where the stacks left the truth, per function</h3>";
        out += &crate::html::failures_table(&r.failures);
    }
    out += "</body></html>\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant violations of the kernel model are said in every output,
    /// never dropped; a run without them says nothing of them.
    #[test]
    fn violations_are_said() {
        let result = |violations: Vec<String>| UnwinderResult {
            samples: 10,
            exact: 10,
            truncated: 0,
            wrong: 0,
            lost: 0,
            failures: Vec::new(),
            registration: Registration::Exec,
            judged: Vec::new(),
            violations,
        };
        let clean = BTreeMap::from([("sframe".to_string(), result(Vec::new()))]);
        assert!(!text(&clean).contains("invariant"));
        assert!(!serde_json::to_string(&clean).unwrap().contains("violations"));
        let broken = BTreeMap::from([("sframe".to_string(), result(vec!["B1: cookie 0x1 called twice".into()]))]);
        let warning = "the kernel model broke 1 invariant(s) in this run, so these verdicts may not hold \
                       (first: B1: cookie 0x1 called twice)";
        assert!(text(&broken).contains(warning), "{}", text(&broken));
        assert!(html("prog", &broken).contains(warning));
        assert!(serde_json::to_string(&broken).unwrap().contains("\"violations\":[\"B1: cookie 0x1 called twice\"]"));
    }
}
