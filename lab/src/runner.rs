//! The runner ties a run together: the kernel model configured from the
//! scenario, the guests set up (`guest.rs`), the scheduler run to the end
//! (`schedule.rs`), every sample judged (`judge.rs`), and the numbers, the
//! log (`log.rs`) and the expectations gathered into a [`Report`].

use std::collections::BTreeMap;

use kmodel::kernel::Kernel;
use kmodel::types::{EventLog, KernelOptions, SframeTableOptions};
use kmodel::unwind::{Method, UnwindConfig};

use crate::report::{GuestResult, Progress, Report, RunError, SampleResult, Summary};
use crate::scenario::{KernelImpl, Scenario};
use crate::schedule::Run;
use crate::symbolise::{GuestSymbols, SymbolCache};

/// Runs a scenario to the end and judges every sample.
pub fn run(scenario: &Scenario) -> Result<Report, RunError> {
    run_with_progress(scenario, &mut |_| {})
}

/// The kernel model's configuration for `scenario`.
fn kernel_options(scenario: &Scenario) -> KernelOptions {
    KernelOptions {
        cpus: scenario.machine.cpus,
        version: scenario.kernel.version,
        exit_path: scenario.kernel.exit_path,
        nmi_safe_cmpxchg: scenario.kernel.nmi_safe_cmpxchg,
        big_endian: scenario.machine.arch.big_endian(),
        unwind: UnwindConfig {
            order: scenario.kernel.unwinders().to_vec(),
            sframe_mode: scenario.kernel.sframe,
            caller_ip_adjust: scenario.kernel.caller_ip_adjust,
            ..UnwindConfig::default()
        },
        copy_on_exit_bytes: scenario.kernel.copy_on_exit_bytes,
        bits_per_long: 64,
        perf_registration: scenario.kernel.perf_registration,
        cancelled_request: scenario.kernel.cancelled_request,
        // The account reports how many in-NMI walks would have faulted.
        probe_nmi_walk: true,
        sframe_table: SframeTableOptions {
            fork: scenario.kernel.fork_table,
            munmap: scenario.kernel.munmap_sframe,
            full_validation: scenario.kernel.sframe_validation,
            prctl: scenario.kernel.sframe_prctl,
            syscalls: scenario.kernel.sframe_syscalls,
        },
        extra_unwinders: Vec::new(),
        event_log: EventLog::All,
    }
}

/// [`run`], reporting progress after every step of the scheduler.
pub fn run_with_progress(scenario: &Scenario, progress: &mut dyn FnMut(Progress)) -> Result<Report, RunError> {
    run_inner(scenario, progress, true)
}

/// [`run_with_progress`] for callers that read only the samples' verdicts
/// and their explanations, such as `validate`: no event log
/// ([`Report::log`] stays empty; every kernel event would be formatted as
/// JSON only to be dropped), only the kernel events judging reads in
/// [`Report::kernel_events`] ([`EventLog::Judging`]) and no probe of what an in-NMI walk would have
/// faulted on (a dry run per NMI with no effect on the model;
/// `summary.nmi_would_fault` stays 0) and no perf.data capture
/// ([`Report::perf`] stays empty). Verdicts are the same.
pub fn run_for_verdicts(scenario: &Scenario, progress: &mut dyn FnMut(Progress)) -> Result<Report, RunError> {
    run_inner(scenario, progress, false)
}

/// The samples of a run as one extra unwinder order's stacks judged them
/// ([`run_for_verdicts_each`]).
#[derive(Debug, Clone)]
pub struct ExtraVerdicts {
    /// Every judged sample, with that order's stack and walk.
    pub samples: Vec<SampleResult>,
    /// The report's summary with that order's verdict counts.
    pub summary: Summary,
}

/// [`run_for_verdicts`] that also judges, from the same run, each unwinder
/// order of `extra`: the kernel model walks every deferred stack once more
/// per order, at the same point, with the same registers and memory
/// (`KernelOptions::extra_unwinders`, a lab instrument that changes
/// nothing else), so each order's verdicts are those a run with it alone
/// gives, while the emulation, the dominant cost, is paid once. The report
/// is the scenario's own unwinders'; then, per order of `extra`, its
/// verdicts, or why this run cannot stand for a run of its own (a walk
/// dropped a corrupt `.sframe` section, which changes what later walks of
/// each run find; a stack no deferred walk made): run that one alone.
pub fn run_for_verdicts_each(
    scenario: &Scenario,
    extra: &[Vec<Method>],
    progress: &mut dyn FnMut(Progress),
) -> Result<(Report, Vec<Result<ExtraVerdicts, String>>), RunError> {
    let (report, stacks) = run_for_extra_stacks(scenario, extra, false, progress)?;
    let verdicts = stacks
        .into_iter()
        .map(|v| {
            v.map(|v| {
                let mut samples = report.samples.clone();
                for (s, judged) in samples.iter_mut().zip(v.stacks) {
                    judged.put(s);
                }
                ExtraVerdicts { samples, summary: v.summary }
            })
        })
        .collect();
    Ok((report, verdicts))
}

/// One extra unwinder order's stacks of a run ([`run_for_extra_stacks`]):
/// only what differs from the report's own samples, which validate swaps
/// into them in place rather than copying every sample's truth and names
/// once per unwinder.
pub(crate) struct ExtraStacks {
    /// Per sample of the report, in its order: that order's stack, walk
    /// and verdict ([`crate::judge::Judged::put`]).
    pub(crate) stacks: Vec<crate::judge::Judged>,
    /// The report's summary with that order's verdict counts.
    pub(crate) summary: Summary,
}

/// [`run_for_verdicts_each`] with each extra order's stacks alone
/// ([`ExtraStacks`]). The records are stitched once for every order. With
/// `perf`, the report has what its perf.data files are made of
/// ([`Report::perf`]; otherwise empty: a copy of every record, for nothing).
pub(crate) fn run_for_extra_stacks(
    scenario: &Scenario,
    extra: &[Vec<Method>],
    perf: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Report, Vec<Result<ExtraStacks, String>>), RunError> {
    let run = execute(scenario, progress, false, extra, false)?;
    let (report, stacks) = report(run, false, extra.len(), perf);
    let stacks = stacks
        .into_iter()
        .map(|v| {
            v.map(|(stacks, s)| ExtraStacks {
                stacks,
                summary: Summary {
                    judged: s.judged,
                    delivered: s.delivered,
                    exact: s.exact,
                    truncated: s.truncated,
                    wrong: s.wrong,
                    lost: s.lost,
                    lost_reasons: s.lost_reasons,
                    ..report.summary.clone()
                },
            })
        })
        .collect();
    Ok((report, stacks))
}

/// What a run judged as it went ([`run_judged_as_it_goes`]) ends with.
pub struct JudgedAsItWent {
    /// Per unwinder (the scenario's own, then each extra order), its
    /// verdict counts and groups, worst first, or why the run's extra walks
    /// cannot stand for a run of its own.
    pub verdicts: Vec<Result<(Summary, Vec<crate::explanation::Failure>), String>>,
    /// The model's invariant violations.
    pub violations: Vec<String>,
    /// Each guest's objects over the run (no samples).
    pub symbols: BTreeMap<String, GuestSymbols>,
}

/// [`run_for_verdicts_each`] that judges the samples as the run goes,
/// every `chunk` samples (`stream.rs`), and keeps only each unwinder's counts and groups, so that
/// its memory is bounded by the groups, not by the samples; the verdicts
/// and groups are those of the report. The scenario runs on one CPU with
/// one perf session (what `validate` makes); a scenario that does not is
/// refused.
pub fn run_judged_as_it_goes(
    scenario: &Scenario,
    extra: &[Vec<Method>],
    chunk: usize,
    progress: &mut dyn FnMut(Progress),
) -> Result<JudgedAsItWent, RunError> {
    let mut run = prepare(scenario, false, extra, false)?;
    let mut judge = crate::stream::Judge::new(&run, extra, chunk).map_err(RunError::Scenario)?;
    run.main_loop_reading(progress, &mut |run| judge.after_step(run))?;
    if let Some(failure) = run.k.backend_failure() {
        return Err(RunError::Scenario(failure));
    }
    let (verdicts, symbols) = judge.finish(&mut run);
    let violations = run.k.take_violations().iter().map(|v| v.to_string()).collect();
    Ok(JudgedAsItWent { verdicts, violations, symbols })
}

/// The kernel of a run: the model, or the kernel's own code of the tree
/// the scenario names (`kernel.impl`), built and loaded now.
fn new_kernel(scenario: &Scenario, opts: KernelOptions) -> Result<Kernel, RunError> {
    match scenario.kernel.implementation {
        KernelImpl::Model => Ok(Kernel::new(opts)),
        KernelImpl::KernelC => {
            let backend = kupstream::load(scenario.kernel.kernel_tree.as_deref(), opts.nmi_safe_cmpxchg)
                .map_err(|e| RunError::Scenario(e.to_string()))?;
            Kernel::with_backend(opts, backend)
                .map_err(|e| RunError::Scenario(format!("kernel.impl \"kernel-c\" cannot run this scenario: {e}")))
        }
    }
}

/// `full`: the log and the in-NMI probe too (see [`run_for_verdicts`]).
fn run_inner(scenario: &Scenario, progress: &mut dyn FnMut(Progress), full: bool) -> Result<Report, RunError> {
    let run = execute(scenario, progress, full, &[], false)?;
    Ok(report(run, full, 0, full).0)
}

/// [`run_with_progress`], recording the kernel's state at every event for
/// an explorer ([`crate::explore`]).
pub fn run_explored(
    scenario: &Scenario,
    progress: &mut dyn FnMut(Progress),
) -> Result<crate::explore::Explored, RunError> {
    let mut run = execute(scenario, progress, true, &[], true)?;
    let changes = run.k.take_state_changes();
    Ok(crate::explore::Explored { report: report(run, true, 0, true).0, changes })
}

/// Runs `scenario` to the end (`full`: see [`run_inner`]; `extra`: see
/// [`run_for_verdicts_each`]).
fn execute<'s>(
    scenario: &'s Scenario,
    progress: &mut dyn FnMut(Progress),
    full: bool,
    extra: &[Vec<Method>],
    states: bool,
) -> Result<Run<'s>, RunError> {
    let mut run = prepare(scenario, full, extra, states)?;
    run.main_loop(progress)?;
    if let Some(failure) = run.k.backend_failure() {
        return Err(RunError::Scenario(failure));
    }
    Ok(run)
}

/// A run of `scenario` ready to start: the kernel configured, the guests
/// set up (`full`, `extra`: see [`execute`]; `states`: the kernel records
/// its state at every event, from before the first task).
fn prepare<'s>(scenario: &'s Scenario, full: bool, extra: &[Vec<Method>], states: bool) -> Result<Run<'s>, RunError> {
    // Scenarios built in code (validate, demo) get the parser's checks too:
    // everything below relies on them.
    scenario.validate(&format!("scenario {}", scenario.name)).map_err(|e| RunError::Scenario(e.to_string()))?;
    let opts = kernel_options(scenario);
    let extra_unwinders =
        extra.iter().map(|order| UnwindConfig { order: order.clone(), ..opts.unwind.clone() }).collect();
    let event_log = if full { EventLog::All } else { EventLog::Judging };
    let mut k = new_kernel(scenario, KernelOptions { probe_nmi_walk: full, extra_unwinders, event_log, ..opts })?;
    k.set_checks(true);
    k.record_states(states);
    let mut guests = Vec::new();
    for g in &scenario.guests {
        guests.push(crate::guest::set_up(g, scenario, &mut k)?);
    }
    let mut run = Run::new(scenario, k, guests)?;
    run.keep_log = full;
    Ok(run)
}

/// The log lines of the run's inputs: guest by guest in scenario order,
/// the files the scenario gave it, then the host files it read, each sorted
/// by absolute guest path (a host path that is not UTF-8 is shown lossily).
fn input_lines(run: &Run<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    for (g, guest) in run.scenario.guests.iter().zip(&run.guests) {
        let given: BTreeMap<String, u64> =
            g.files.iter().map(|(p, c)| (g.file_path(p), emu::fs::fnv1a(c.as_bytes()))).collect();
        for (path, digest) in given {
            lines.push(crate::log::input_line(&g.name, crate::log::SOURCE_SCENARIO, &path, digest));
        }
        for (path, digest) in guest.emu.host_inputs() {
            let path = String::from_utf8_lossy(&path);
            lines.push(crate::log::input_line(&g.name, crate::log::SOURCE_HOST, &path, digest));
        }
    }
    lines
}

/// Bytes the samples of every perf session would have written with `perf
/// record --call-graph dwarf` (8 KiB of stack and the user registers each,
/// the kernel callchain as it was; no deferred records).
fn dwarf_baseline(tracers: &kmodel::tracer::Tracers, regs: u32) -> u64 {
    tracers
        .perf
        .iter()
        .flat_map(|s| s.buffers.iter().flatten())
        .map(|r| r.dwarf_bytes(regs, 8192))
        .fold(0, u64::saturating_add)
}

/// The report of a finished run, and the stacks of its first `extra`
/// extra unwinder orders: the perf records stitched once for all; with
/// `perf`, what its perf.data files are made of.
fn report(mut run: Run<'_>, with_log: bool, extra: usize, perf: bool) -> (Report, Vec<crate::judge::Extra>) {
    let symbols = run.symbols(&mut SymbolCache::default());
    let perf = if perf { crate::perf_data::capture(&run) } else { Default::default() };
    // Done with the model: its extra walks' traces move into the stacks,
    // and what the lab saw at each NMI into the samples.
    let mut walks = run.k.take_extra_walks();
    let taken = std::mem::take(&mut run.samples);
    let stitched = crate::judge::Stitched::new(&run.k);
    let (samples, mut summary, extras) = crate::judge::judge_run(
        &crate::judge::Session::of(&run.k),
        stitched,
        taken,
        &run.guests,
        &run.cancelled,
        &mut walks,
        extra,
    );
    let k = &mut run.k;
    summary.samples = k.tracers().samples;
    summary.bytes_written = k.tracers().perf_bytes();
    summary.bytes_copy_baseline = dwarf_baseline(k.tracers(), run.scenario.machine.arch.perf_dwarf_regs());
    summary.unwinds = k.stats().unwinds;
    summary.task_faults = k.stats().task_faults;
    summary.nmi_would_fault = k.stats().nmi_walk_would_fault;
    summary.perf_init_error = k.tracers().perf_init_error;
    summary.perf_unregistered_samples = k.tracers().perf_unregistered_samples;
    summary.requests = [k.stats().requests_queued, k.stats().requests_joined, k.stats().requests_refused];
    for e in k.events() {
        if let kmodel::event::EventKind::Callback { work, .. } = e.kind {
            *summary.callbacks.entry(k.work(work).name.clone()).or_insert(0) += 1;
        }
    }
    let violations: Vec<String> = k.take_violations().iter().map(|v| v.to_string()).collect();
    summary.violations = violations.len() as u64;
    summary.instructions = run.global();
    let guests: Vec<GuestResult> = run
        .guests
        .iter()
        .map(|g| GuestResult {
            name: g.name.clone(),
            exit: g.done,
            stdout: String::from_utf8_lossy(g.emu.stdout()).into_owned(),
            instructions: g.emu.icount(),
        })
        .collect();
    let log = if with_log {
        crate::log::lines(run.scenario, &input_lines(&run), run.k.events(), &run.extra, &summary)
    } else {
        Vec::new()
    };
    let mut report = Report {
        scenario: run.scenario.clone(),
        profile: run.scenario.kernel.profile,
        parts: run.scenario.kernel.profile.parts(run.scenario),
        summary,
        samples,
        failures: Vec::new(),
        guests,
        violations,
        expectation_failures: Vec::new(),
        log,
        kernel_events: run.k.take_events(),
        symbols,
        perf,
    };
    report.expectation_failures = crate::judge::expectations(&report);
    if with_log {
        report.failures = crate::explain::group(&report);
    }
    (report, extras)
}
