//! `unwindlab run`, `replay`, `validate` and `demo`: options, calls into
//! the lab, printing.

use std::path::Path;

use kmodel::arch::Arch;
use kmodel::unwind::Method;
use lab::replay::{replay_file, Replay};
use lab::scenario::{KernelChoice, KernelImpl};
use lab::validate::SframeSource;
use lab::Scenario;

use super::common::{emit, emit_line, EXIT_INVALID, EXIT_OK, EXIT_USAGE};

/// Options of `run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The scenario file (JSON; see scenarios/README.md). Without it, the
    /// built-in default scenario (scenarios/basic-x86_64.json) runs.
    scenario: Option<String>,
    /// Write the event log (JSON Lines) here.
    #[arg(long, value_name = "FILE")]
    log: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write a Chrome trace-event timeline (Perfetto, chrome://tracing).
    #[arg(long, value_name = "FILE")]
    timeline: Option<String>,
    /// Write the sampled user stacks as folded stacks (flame graphs).
    #[arg(long, value_name = "FILE")]
    folded: Option<String>,
    /// Write a self-contained HTML report.
    #[arg(long, value_name = "FILE")]
    html: Option<String>,
    /// Write the explorer: one self-contained HTML page that steps through
    /// the run event by event (keyboard ←/→), with the kernel's state after
    /// each event, the user stack of the sample at hand and a tour.
    #[arg(long, value_name = "FILE")]
    explore: Option<String>,
    /// Write a Firefox Profiler profile (profiler.firefox.com).
    #[arg(long, value_name = "FILE")]
    firefox: Option<String>,
    /// Write the perf.data a Linux 7.x kernel and `perf record --call-graph
    /// fp,defer -a` would have written for the run, for perf 7.x (`perf
    /// script`, `perf report --symfs ROOT`), hotspot and the Firefox
    /// Profiler. With several perf tracers, one file each: FILE.NAME.
    #[arg(long, value_name = "FILE")]
    perf_data: Option<std::path::PathBuf>,
    #[command(flatten)]
    kernel: KernelArgs,
}

/// Checks before a run that `--perf-data`'s directory exists: a long run
/// must not end in a file that cannot be written.
pub(crate) fn check_perf_data_path(path: Option<&Path>) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.file_name().is_none() || path.is_dir() {
        return Err(format!("--perf-data {}: not a file name", path.display()));
    }
    if !dir.is_dir() {
        return Err(format!("--perf-data {}: no such directory {}", path.display(), dir.display()));
    }
    Ok(())
}

/// Writes `report`'s perf.data files (`--perf-data`), saying where.
fn write_perf_data(report: &lab::Report, path: &Path) -> Result<(), String> {
    let cmdline: Vec<String> = std::env::args().collect();
    let paths = lab::perf_data::write(report, path, &cmdline).map_err(|e| e.to_string())?;
    for p in paths {
        eprintln!("unwindlab: wrote {}", p.display());
    }
    Ok(())
}

/// Whose code runs `kernel/unwind/` (`run`, `validate`, `demo`).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct KernelArgs {
    /// Whose code runs kernel/unwind/: the lab's model, or the kernel's own
    /// deferred.c and user.c built against the lab's shim (default: what
    /// the scenario says, else the model).
    #[arg(long, value_name = "IMPL", value_parser = one_of([KernelImpl::Model, KernelImpl::KernelC], KernelImpl::to_string))]
    kernel_impl: Option<KernelImpl>,
    /// The kernel tree whose kernel/unwind/ runs (implies --kernel-impl
    /// kernel-c); default: Debian's linux-source-7.x fetched by 'make deps'.
    #[arg(long, value_name = "DIR")]
    kernel_tree: Option<std::path::PathBuf>,
}

impl KernelArgs {
    /// The choice, for the lab.
    pub(crate) fn choice(&self) -> KernelChoice {
        KernelChoice { implementation: self.kernel_impl, tree: self.kernel_tree.clone() }
    }
}

/// Options of `replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// A log written by `unwindlab run --log`.
    log: String,
}

/// A spinner on a terminal, nothing when piped or under CI: long runs say
/// how far they are.
fn progress_bar() -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() || std::env::var_os("CI").is_some() {
        return None;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}").ok()?);
    Some(bar)
}

/// Runs `f` with a progress callback that drives [`progress_bar`].
fn with_progress<T>(f: impl FnOnce(&mut dyn FnMut(lab::Progress)) -> T) -> T {
    let bar = progress_bar();
    let mut last = 0u64;
    let result = f(&mut |p: lab::Progress| {
        if let Some(bar) = &bar {
            // Redrawing costs more than a scheduler step: every 10⁵ instructions.
            if p.instructions / 100_000 != last {
                last = p.instructions / 100_000;
                bar.set_message(format!("{} guest instructions, {} samples", p.instructions, p.samples));
                bar.tick();
            }
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

/// The default scenario, built in; its guest is found in the source tree the
/// binary was built from.
const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/basic-x86_64.json");

fn default_scenario() -> Result<Scenario, lab::ScenarioError> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    Scenario::parse_in(DEFAULT_SCENARIO, "built-in scenario basic-x86_64", &dir)
}

pub(crate) fn run(args: &RunArgs) -> i32 {
    let name = args.scenario.clone().unwrap_or_else(|| "built-in scenario".into());
    let loaded = match &args.scenario {
        Some(path) => Scenario::load(Path::new(path)),
        None => default_scenario(),
    };
    let mut scenario = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("unwindlab: {e}");
            return EXIT_USAGE;
        }
    };
    args.kernel.choice().apply(&mut scenario.kernel);
    if let Err(e) = check_perf_data_path(args.perf_data.as_deref()) {
        eprintln!("unwindlab: {e}");
        return EXIT_USAGE;
    }
    if args.perf_data.is_some() && !scenario.tracers.iter().any(|t| matches!(t, lab::scenario::Tracer::Perf { .. })) {
        eprintln!("unwindlab: --perf-data: {name} has no perf tracer, so there is no perf.data to write");
        return EXIT_USAGE;
    }
    let ran = match &args.explore {
        Some(_) => with_progress(|p| lab::runner::run_explored(&scenario, p)).map(|x| {
            let page = lab::explore::page(&x, &lab::demo::tour(&x.report));
            (x.report, Some(page))
        }),
        None => with_progress(|p| lab::run_with_progress(&scenario, p)).map(|r| (r, None)),
    };
    let (report, explorer) = match ran {
        Ok(r) => r,
        Err(e) => {
            eprintln!("unwindlab: {name}: {e}");
            return EXIT_INVALID;
        }
    };
    if let (Some(path), Some(page)) = (&args.explore, explorer) {
        if let Err(e) = std::fs::write(path, page) {
            eprintln!("unwindlab: {path}: {e}");
            return EXIT_USAGE;
        }
    }
    if let Some(path) = &args.log {
        if let Err(e) = std::fs::write(path, report.log_text()) {
            eprintln!("unwindlab: {path}: {e}");
            return EXIT_USAGE;
        }
    }
    type Render = fn(&lab::Report) -> String;
    let outputs: [(&Option<String>, Render); 4] = [
        (&args.timeline, |r| serde_json::to_string(&lab::export::chrome_trace(r)).unwrap_or_default()),
        (&args.folded, lab::export::folded),
        (&args.html, lab::html::report),
        (&args.firefox, |r| serde_json::to_string(&lab::export::firefox(r)).unwrap_or_default()),
    ];
    for (path, render) in outputs {
        if let Some(path) = path {
            if let Err(e) = std::fs::write(path, render(&report)) {
                eprintln!("unwindlab: {path}: {e}");
                return EXIT_USAGE;
            }
        }
    }
    if let Some(path) = &args.perf_data {
        if let Err(e) = write_perf_data(&report, path) {
            eprintln!("unwindlab: {e}");
            return EXIT_USAGE;
        }
    }
    if args.json {
        emit_line(&serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        emit(&report.account());
    }
    if report.expectation_failures.is_empty() {
        EXIT_OK
    } else {
        EXIT_INVALID
    }
}

pub(crate) fn run_replay(args: &ReplayArgs) -> i32 {
    match replay_file(&args.log) {
        Ok(Replay::Identical { lines }) => {
            emit_line(&format!("{}: replayed, {lines} lines identical", args.log));
            EXIT_OK
        }
        Ok(Replay::Diverged { line, recorded, replayed }) => {
            emit_line(&format!("{}: diverges at line {line}", args.log));
            emit_line(&format!("  recorded: {recorded}"));
            emit_line(&format!("  replayed: {replayed}"));
            EXIT_INVALID
        }
        Ok(Replay::InputsChanged { changes, diverged }) => {
            // One line: which inputs changed (the likely cause) and where
            // the run differs; then both versions of that line.
            let changes: Vec<String> = changes.iter().map(ToString::to_string).collect();
            let outcome = match &diverged {
                Some((line, ..)) => format!("the run differs from line {line}"),
                None => "the rest of the run is identical".to_string(),
            };
            emit_line(&format!("{}: {}; {outcome}", args.log, changes.join("; ")));
            if let Some((_, recorded, replayed)) = diverged {
                emit_line(&format!("  recorded: {recorded}"));
                emit_line(&format!("  replayed: {replayed}"));
            }
            EXIT_INVALID
        }
        Err(e) => {
            eprintln!("unwindlab: {e}");
            EXIT_USAGE
        }
    }
}

/// Options of `validate`.
#[derive(Debug, clap::Args)]
pub(crate) struct ValidateArgs {
    /// The ELF program: static, or dynamic with `--root`.
    elf: String,
    /// Its arguments; everything after ELF is passed on, options included.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
    /// The host directory the program sees as `/` (read-only), holding a
    /// dynamic program's interpreter and libraries, e.g. a lab root made by
    /// `unwindlab sysroot` (default: no host files). The program starts in
    /// its `/`, as a scenario's guest does, whatever the host's working
    /// directory: relative arguments name files there.
    #[arg(long, value_name = "DIR")]
    root: Option<std::path::PathBuf>,
    /// Sample every N guest instructions.
    #[arg(long, default_value_t = 997)]
    every: u64,
    /// Judge only this unwinder (default: both).
    #[arg(long, value_parser = one_of([Method::Sframe, Method::Fp], Method::to_string))]
    unwinder: Option<Method>,
    /// Which SFrame to judge: each object's own .sframe as its toolchain
    /// emitted it, or SFrame V3 generated from the program's CFI (static
    /// programs; for a dynamic one, make a root with `unwindlab sysroot`).
    #[arg(long, default_value = "own", value_parser = one_of([SframeSource::Own, SframeSource::Generated], |s| {
        match s { SframeSource::Own => "own", SframeSource::Generated => "generated" }.to_string()
    }))]
    sframe: SframeSource,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also write an HTML report (a table per unwinder, a row per function
    /// and cause) to this file.
    #[arg(long, value_name = "FILE")]
    html: Option<std::path::PathBuf>,
    /// Also write the run's perf.data (the first unwinder's deferred
    /// callchains; see `run --perf-data`).
    #[arg(long, value_name = "FILE")]
    perf_data: Option<std::path::PathBuf>,
    #[command(flatten)]
    kernel: KernelArgs,
}

pub(crate) fn run_validate(args: &ValidateArgs) -> i32 {
    if args.every == 0 {
        eprintln!("unwindlab: --every must be at least 1");
        return EXIT_USAGE;
    }
    let unwinders = match args.unwinder {
        Some(unwinder) => vec![unwinder],
        None => vec![Method::Sframe, Method::Fp],
    };
    let choice = args.kernel.choice();
    if let Err(e) = check_perf_data_path(args.perf_data.as_deref()) {
        eprintln!("unwindlab: {e}");
        return EXIT_USAGE;
    }
    let cmdline: Vec<String> = std::env::args().collect();
    let results = match with_progress(|p| {
        let (elf, root) = (Path::new(&args.elf), args.root.as_deref());
        let plan = lab::validate::Plan {
            every: args.every,
            unwinders: &unwinders,
            source: args.sframe,
            one_run: true,
            kernel: &choice,
            perf_data: args.perf_data.as_deref().map(|p| (p, cmdline.as_slice())),
            judging: Default::default(),
        };
        lab::validate::validate_sframe(elf, root, &args.args, plan, p)
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("unwindlab: {}: {e}", args.elf);
            return EXIT_USAGE;
        }
    };
    if let Some(html) = &args.html {
        if let Err(e) = std::fs::write(html, lab::validate::html(&args.elf, &results)) {
            eprintln!("unwindlab: {}: {e}", html.display());
            return EXIT_USAGE;
        }
    }
    if args.json {
        emit_line(&serde_json::to_string_pretty(&results).unwrap_or_default());
        return EXIT_OK;
    }
    emit(&lab::validate::text(&results));
    EXIT_OK
}

/// Options of `demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Architecture of the guest.
    #[arg(long, default_value = "x86_64", value_parser = one_of(Arch::ALL, |a| a.name().to_string()))]
    arch: Arch,
    /// Wait for Enter between steps (only on a terminal).
    #[arg(long)]
    step: bool,
    /// Also write the explorer of the demo's main run, with the narration
    /// as its tour (press t).
    #[arg(long, value_name = "FILE")]
    explore: Option<String>,
    #[command(flatten)]
    kernel: KernelArgs,
}

pub(crate) fn run_demo(args: &DemoArgs) -> i32 {
    use std::io::IsTerminal as _;
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin");
    let choice = args.kernel.choice();
    let made = match &args.explore {
        Some(path) => lab::demo::demo_explored(args.arch, &guests, &choice).and_then(|(steps, x)| {
            std::fs::write(path, lab::explore::page(&x, &steps))
                .map_err(|e| lab::report::RunError::Scenario(format!("{path}: {e}")))?;
            Ok(steps.into_iter().map(|s| s.text).collect())
        }),
        None => lab::demo::demo_on(args.arch, &guests, &choice),
    };
    let steps: Vec<String> = match made {
        Ok(steps) => steps,
        Err(e) => {
            eprintln!("unwindlab: demo: {e}");
            return EXIT_INVALID;
        }
    };
    let interactive = args.step && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    for (i, step) in steps.iter().enumerate() {
        emit_line(step);
        emit_line("");
        if interactive && i + 1 < steps.len() {
            emit("[Enter] ");
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        }
    }
    EXIT_OK
}

/// Options of `kernel-diff`.
#[derive(Debug, clap::Args)]
pub(crate) struct KernelDiffArgs {
    /// Scenario files; a directory stands for its *.json files, in name order.
    #[arg(required = true)]
    scenarios: Vec<std::path::PathBuf>,
    /// The kernel tree whose kernel/unwind/ runs (default: Debian's
    /// linux-source-7.x fetched by 'make deps').
    #[arg(long, value_name = "DIR")]
    kernel_tree: Option<std::path::PathBuf>,
    /// Print JSON (one object per scenario).
    #[arg(long)]
    json: bool,
}

/// `kernel-diff`: each scenario on the model and on the kernel's own code.
/// Exit 0 if every one is identical, 1 if one differs or cannot run.
pub(crate) fn run_kernel_diff(args: &KernelDiffArgs) -> i32 {
    let mut files = Vec::new();
    for path in &args.scenarios {
        if path.is_dir() {
            let mut found: Vec<_> = match std::fs::read_dir(path) {
                Ok(dir) => dir
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect(),
                Err(e) => {
                    eprintln!("unwindlab: {}: {e}", path.display());
                    return EXIT_USAGE;
                }
            };
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    let mut status = EXIT_OK;
    for file in &files {
        let shown = file.display();
        let outcome = Scenario::load(file)
            .map_err(|e| e.to_string())
            .and_then(|s| lab::kdiff::kernel_diff(&s, args.kernel_tree.as_deref()).map_err(|e| e.to_string()));
        if !matches!(outcome, Ok(lab::kdiff::Outcome::Identical { .. })) {
            status = EXIT_INVALID;
        }
        match (outcome, args.json) {
            (Ok(o), true) => {
                let mut v = serde_json::to_value(&o).unwrap_or_default();
                v["scenario"] = serde_json::Value::String(shown.to_string());
                emit_line(&v.to_string());
            }
            (Ok(o), false) => emit_line(&format!("{shown}: {o}")),
            (Err(e), true) => emit_line(
                &serde_json::json!({"scenario": shown.to_string(), "outcome": "error", "error": e}).to_string(),
            ),
            (Err(e), false) => emit_line(&format!("{shown}: cannot run: {e}")),
        }
    }
    status
}

/// A parser accepting one of `values`, each spelled as `name` gives it.
fn one_of<T: Copy + Send + Sync + 'static, const N: usize>(
    values: [T; N],
    name: fn(&T) -> String,
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser as _;
    let names = values.map(|v| name(&v));
    clap::builder::PossibleValuesParser::new(names.clone())
        .map(move |s| values[names.iter().position(|n| *n == s).unwrap_or_default()])
}
