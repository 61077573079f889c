//! The scenario suite: every file in scenarios/ runs, meets its
//! expectations, keeps every invariant, and matches its insta snapshot
//! (summary and key events); runs are deterministic; replay accepts an
//! untouched log and rejects an edited one; broken scenario files fail with
//! a clear message and exit status 2; and perf 7.x, reading each run's
//! perf.data, stitches every sample as the lab does (`perf_oracle`).

mod common;
mod perf_oracle;

use std::path::Path;

use lab::replay::{replay, Replay};
use lab::Scenario;

/// The events worth reading in a snapshot: the deferred-unwind story
/// without the per-sample noise.
fn key_events(log: &[String]) -> String {
    const KEEP: [&str; 14] = [
        "\"init\"",
        "\"request\"",
        "\"task_work_queued\"",
        "\"handler_start\"",
        "\"callback\"",
        "\"exiting\"",
        "\"exit_hook\"",
        "\"exit_mm\"",
        "\"stack_copied\"",
        "\"migrate\"",
        "\"cancel_begin\"",
        "\"cancel_return\"",
        "\"sframe_add\"",
        "\"violation\"",
    ];
    // Line 1 is the header with the scenario (and its absolute paths).
    let mut out: Vec<&str> =
        log.iter().skip(1).filter(|l| KEEP.iter().any(|k| l.contains(k))).map(String::as_str).collect();
    let total = out.len();
    if total > 80 {
        out.truncate(80);
        out.push("… (truncated)");
    }
    out.join("\n")
}

#[test]
fn every_scenario_runs_deterministically_and_matches_its_snapshot() {
    let files = common::scenario_files();
    assert!(files.len() >= 50, "expected the scenario suite, found {}", files.len());
    let perf_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-oracle");
    std::fs::create_dir_all(&perf_dir).unwrap();
    // Per architecture: scenarios with a perf tracer, and what was compared.
    let mut oracle: std::collections::BTreeMap<String, (usize, perf_oracle::Compared)> = Default::default();
    // Each scenario is run (twice), read by perf and judged on a worker;
    // the snapshots are then checked in file order.
    for c in common::par::par_map(&files, |file| check_scenario(file, &perf_dir)) {
        if let Some((arch, compared)) = c.oracle {
            let entry = oracle.entry(arch).or_default();
            entry.0 += 1;
            entry.1.samples += compared.samples;
            entry.1.unstitched += compared.unstitched;
            entry.1.deferred += compared.deferred;
        }
        insta::assert_snapshot!(c.name, c.snapshot);
    }
    for (arch, (scenarios, c)) in &oracle {
        // Straight to stderr, past the test harness's capture: `make test`
        // shows how much perf compared.
        use std::io::Write as _;
        let _ =
            writeln!(
            std::io::stderr(),
            "perf 7.x oracle, {arch}: {scenarios} scenarios, {} samples stitched as the lab does ({} never stitched, \
             shown with their cookie), {} deferred records delivered unmerged as the lab does",
            c.samples, c.unstitched, c.deferred
        );
    }
    assert_eq!(oracle.len(), 3, "perf scenarios on three architectures: {oracle:?}");
}

/// What [`check_scenario`] leaves for the snapshot and the perf tally.
struct Checked {
    /// The snapshot's name: the file's stem.
    name: String,
    /// The account and the key events.
    snapshot: String,
    /// The architecture and what perf compared, for a scenario with perf.
    oracle: Option<(String, perf_oracle::Compared)>,
}

/// Runs scenario `file` twice (the logs must be equal), with every
/// invariant kept and every expectation met, and its perf.data read by
/// perf 7.x (files in `perf_dir`).
fn check_scenario(file: &Path, perf_dir: &Path) -> Checked {
    let scenario = Scenario::load(file).unwrap_or_else(|e| panic!("{e}"));
    let report = lab::run(&scenario).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let oracle = (!report.perf.sessions.is_empty())
        .then(|| (scenario.machine.arch.to_string(), perf_oracle::check(&report, perf_dir)));
    // Only a scenario that shows a window of upstream's own code breaks
    // invariants, the ones it names (checked with its expectations).
    let shown = scenario.expect.as_ref().is_some_and(|x| x.violations.is_some());
    assert!(shown || report.violations.is_empty(), "{}:\n{}", file.display(), report.violations.join("\n"));
    assert!(report.expectation_failures.is_empty(), "{}: {:?}", file.display(), report.expectation_failures);
    // Every stack that is not exact has a named cause and a reason in the
    // JSON report (issue 27): its groups count them all.
    let json = serde_json::to_value(&report).unwrap();
    let groups = json["failures"].as_array().unwrap_or_else(|| panic!("{}: no failures in the JSON", file.display()));
    let counted: u64 = groups.iter().map(|g| g["count"].as_u64().unwrap_or(0)).sum();
    assert_eq!(counted, report.summary.truncated + report.summary.wrong, "{}: stacks without a cause", file.display());
    for g in groups {
        let named = |k: &str| g[k].as_str().is_some_and(|v| !v.is_empty());
        assert!(named("cause") && named("reason") && named("function"), "{}: {g}", file.display());
    }
    let again = lab::run(&scenario).unwrap();
    assert!(again.log == report.log, "{}: two runs gave different logs", file.display());
    let name = file.file_stem().unwrap().to_string_lossy().into_owned();
    let snapshot = format!("{}\n--- key events ---\n{}", report.account(), key_events(&report.log));
    Checked { name, snapshot, oracle }
}

#[test]
fn replay_accepts_an_untouched_log_and_rejects_an_edited_one() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/migration-x86_64.json");
    let report = lab::run(&Scenario::load(&file).unwrap()).unwrap();
    let log = report.log.join("\n") + "\n";
    assert_eq!(replay(&log, "log").unwrap(), Replay::Identical { lines: report.log.len() });
    // Change one event: the callback's CPU.
    let edited: Vec<String> = report
        .log
        .iter()
        .map(|l| if l.contains("\"callback\"") { l.replacen("\"cpu\":1", "\"cpu\":0", 1) } else { l.clone() })
        .collect();
    assert_ne!(edited, report.log, "the log has a callback on CPU 1 to edit");
    match replay(&(edited.join("\n") + "\n"), "log").unwrap() {
        Replay::Diverged { line, recorded, replayed } => {
            assert!(recorded.contains("\"callback\"") && replayed.contains("\"callback\""), "line {line}");
        }
        other => panic!("edited log accepted: {other:?}"),
    }
}

#[test]
fn broken_scenarios_fail_with_a_clear_message_and_status_2() {
    let guest = common::lab_guest();
    let base = |extra: &str| {
        format!(
            r#"{{"name":"bad","machine":{{"arch":"x86_64","cpus":2}},"guests":[{{"name":"g","path":{:?}}}]{extra}}}"#,
            guest.display().to_string()
        )
    };
    let cases = [
        ("malformed-field", base(r#","tracers":[{"kind":"perf","name":"p","period":"often"}]"#), "tracers[0]"),
        ("unknown-field", base(r#","kernel":{"exit_path":"upstream","colour":"blue"}"#), "kernel"),
        ("unknown-variant", base(r#","kernel":{"exit_path":"sideways"}"#), "kernel.exit_path"),
        ("unknown-perf-registration", base(r#","kernel":{"perf_registration":"never"}"#), "kernel.perf_registration"),
        ("impossible-cpu", base(r#","events":[{"at":5,"action":"migrate","task":"g","cpu":7}]"#), "events[0].cpu"),
        (
            "unknown-task",
            base(r#","events":[{"at":5,"action":"evict","task":"nobody","what":"stack"}]"#),
            "events[0].task",
        ),
        (
            "unknown-guest-path",
            r#"{"name":"bad","machine":{"arch":"x86_64"},"guests":[{"name":"g","path":"no/such/program"}]}"#
                .to_string(),
            "guests[0].path",
        ),
        (
            "unknown-point",
            base(r#","events":[{"at":5,"action":"at_point","task":"g","point":"nowhere","strike":"nmi"}]"#),
            "events[0].point",
        ),
        (
            "point-without-site-on-kernel-c",
            base(
                r#","kernel":{"impl":"kernel-c"},"events":[{"at":5,"action":"at_point","task":"g","point":"request_start","strike":"nmi"}]"#,
            ),
            "events[0].point",
        ),
        (
            "at-point-cancel-of-nobody",
            base(
                r#","events":[{"at":5,"action":"at_point","task":"g","point":"request_start","strike":{"cancel":"x"}}]"#,
            ),
            "events[0].strike.cancel",
        ),
        (
            "at-point-nmi-with-an-in-nmi-perf",
            base(
                r#","tracers":[{"kind":"perf","name":"p","period":9,"user_stack":{"mode":"fp_in_nmi"}}],"events":[{"at":5,"action":"at_point","task":"g","point":"request_start","strike":"nmi"}]"#,
            ),
            "events[0].strike",
        ),
        ("not-json", "{ this is not json".to_string(), "at "),
    ];
    let cases: Vec<_> = cases.into_iter().map(|(name, text, path)| (name, text, vec![path])).collect();
    common::assert_refused("bad-scenarios", &cases);
}

/// Runs a scenario on the x86-64 lab guest (`recurse 50`, profile
/// `sframe-v13`: any tracer, SFrame) with these tracers and events (JSON
/// arrays), expecting exit 0: what `unwindlab run` printed, and its exit
/// status.
fn run_recurse(name: &str, tracers: &str, events: &str) -> (String, Option<i32>) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let guest = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin/x86_64/lab-v3");
    let text = format!(
        r#"{{"name":"{name}","machine":{{"arch":"x86_64"}},"kernel":{{"profile":"sframe-v13"}},
            "guests":[{{"name":"lab","path":{:?},"args":["recurse","50"]}}],
            "tracers":{tracers}, "events":{events},
            "expect":{{"exit":{{"lab":0}}}}}}"#,
        guest.display().to_string()
    );
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, text).unwrap();
    let out = common::unwindlab(&["run", file.to_str().unwrap()]);
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.code())
}

/// Cancelling one tracer twice is a kernel bug upstream (the second
/// `unwind_deferred_cancel()` computes `BIT(-1)` and deletes the list entry
/// again): the run reports invariant P1, and with `expect` it fails.
#[test]
fn a_tracer_cancelled_twice_is_reported() {
    let (stdout, status) = run_recurse(
        "double-cancel",
        r#"[{"kind":"perf","name":"perf","period":2003},{"kind":"ftrace","name":"ftrace"}]"#,
        r#"[{"at":5000,"action":"cancel","tracer":"ftrace"},{"at":9000,"action":"cancel","tracer":"ftrace"}]"#,
    );
    assert_eq!(status, Some(1), "an expectation failed: {stdout}");
    assert!(stdout.contains("INVARIANT VIOLATIONS: 1"), "{stdout}");
    assert!(stdout.contains("invariant P1 violated: work 1 (ftrace) cancelled twice"), "{stdout}");
    assert!(stdout.contains("EXPECTATION FAILED: 1 invariant violation(s)"), "{stdout}");
}

/// Two perf sessions share perf's one work: cancelling both cancels that
/// work once, which is no double cancel.
#[test]
fn two_perf_sessions_cancelled_are_not_a_double_cancel() {
    let (stdout, status) = run_recurse(
        "two-perf-cancel",
        r#"[{"kind":"perf","name":"p1","period":2003},{"kind":"perf","name":"p2","period":3001}]"#,
        r#"[{"at":5000,"action":"cancel","tracer":"p1"},{"at":9000,"action":"cancel","tracer":"p2"}]"#,
    );
    assert_eq!(status, Some(0), "{stdout}");
    assert!(!stdout.contains("INVARIANT VIOLATIONS"), "{stdout}");
}
