//! `unwindlab validate`: sample a binary every N instructions and tell a
//! toolchain developer, per unwinder, how often the stack was exact and
//! where (function, PC) it was not.

use std::collections::BTreeMap;
use std::path::Path;

use kmodel::unwind::{Method, SframeMode};
use serde::Serialize;

use crate::loader::Registration;
use crate::report::{Progress, RunError};
use crate::scenario::{Guest, KernelConfig, Machine, Scenario, Tracer};

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
}

/// A place where an unwinder went wrong or stopped early.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The function whose frame could not be unwound correctly.
    pub function: String,
    /// The PC in it (the last correct entry of the stack).
    pub pc: u64,
    /// Where that is: `function+0x12`, `libc.so.6!puts+0x1c`, or hex.
    pub place: String,
    /// "truncated" or "wrong".
    pub kind: &'static str,
    /// Why, in words ([`crate::explain`]).
    pub reason: String,
    /// How many samples failed there.
    pub count: u64,
}

/// Runs `elf` with `args` once per unwinder, sampling every `every`
/// instructions, and tallies the verdicts. A dynamic program needs `root`:
/// the host directory it sees as `/`, with its interpreter and libraries.
pub fn validate(
    elf: &Path,
    root: Option<&Path>,
    args: &[String],
    every: u64,
    unwinders: &[Method],
    progress: &mut dyn FnMut(Progress),
) -> Result<BTreeMap<String, UnwinderResult>, RunError> {
    let name = elf.display().to_string();
    let bytes = std::fs::read(elf).map_err(|e| RunError::guest(&name, format!("{name}: {e}")))?;
    let image = emu::elf::Image::parse(&name, &bytes).map_err(|e| RunError::guest(&name, e))?;
    let arch = image.arch;
    let registration = if image.interp.is_some() { Registration::Loader } else { Registration::Exec };
    let mut out = BTreeMap::new();
    for &unwinder in unwinders {
        let scenario = Scenario {
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
            }],
            // Judge one unwinder alone, whatever SFrame version the file has;
            // for a dynamic program, every object it loads (its root's).
            kernel: KernelConfig {
                unwinders: vec![unwinder],
                sframe: SframeMode::Lab,
                registration,
                ..KernelConfig::default()
            },
            events: Vec::new(),
            stop_after: None,
            expect: None,
        };
        // Verdicts only: the event log is not shown, so it is not formatted.
        let report = crate::runner::run_for_verdicts(&scenario, progress)?;
        let mut failures: BTreeMap<(u64, &'static str, String), Failure> = BTreeMap::new();
        for s in &report.samples {
            let Some(why) = crate::explain::explain(&report, s) else { continue };
            let kind = s.verdict.kind();
            failures
                .entry((why.pc, kind, why.reason.clone()))
                .or_insert(Failure {
                    function: why.function,
                    pc: why.pc,
                    place: why.place,
                    kind,
                    reason: why.reason,
                    count: 0,
                })
                .count += 1;
        }
        let mut failures: Vec<Failure> = failures.into_values().collect();
        failures.sort_by(|a, b| b.count.cmp(&a.count).then(a.pc.cmp(&b.pc)));
        let s = &report.summary;
        out.insert(
            unwinder.to_string(),
            UnwinderResult {
                samples: s.judged,
                exact: s.exact,
                truncated: s.truncated,
                wrong: s.wrong,
                lost: s.lost,
                failures,
                registration,
            },
        );
    }
    Ok(out)
}

/// Failure places listed per unwinder in [`text`].
const LISTED: usize = 15;

/// The results as text: per unwinder the verdict shares, then the places
/// it failed most often.
pub fn text(results: &BTreeMap<String, UnwinderResult>) -> String {
    let mut out = String::new();
    for (name, r) in results {
        let pct = |n: u64| if r.samples == 0 { 0.0 } else { 100.0 * n as f64 / r.samples as f64 };
        out += &format!(
            "{name}: {} samples: {:.1}% exact, {:.1}% truncated, {:.1}% wrong\n",
            r.samples,
            pct(r.exact),
            pct(r.truncated),
            pct(r.wrong)
        );
        if r.registration == Registration::Loader {
            out += "    sections: every loaded object's (a simulated loader registers each as it is mapped)\n";
        }
        for f in r.failures.iter().take(LISTED) {
            out += &format!("    {:6} × {:9} at {:#x} in {}: {}\n", f.count, f.kind, f.pc, f.place, f.reason);
        }
        if r.failures.len() > LISTED {
            out += &format!("    … {} more places (--json lists all)\n", r.failures.len() - LISTED);
        }
    }
    out
}
