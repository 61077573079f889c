//! Scenario files are untrusted input. The scenario fuzzer's generator
//! (`lab::fuzz`, also behind `make fuzz-scenario`) run as a bounded, seeded
//! property test: no input panics, every refusal names the file, every run
//! replays to an identical log. Then one regression test per input that
//! used to panic, hang or exhaust memory.

mod common;
mod perf_data_roundtrip;

use std::collections::{BTreeMap, BTreeSet};

use lab::fuzz::{exercise, exercise_text, Outcome, FILE};
use lab::replay::{replay, Replay};
use lab::scenario::Action;

/// Inputs per run: ≈ 25 s of CPU in a debug build.
const INPUTS: u64 = 800;

/// `len` deterministic pseudo-random bytes for `seed` (SplitMix64).
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    salted_bytes(seed, 0x5eed, len)
}

/// [`bytes`] with another `salt`: another stream for the same seeds.
fn salted_bytes(seed: u64, salt: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn action_kind(a: &Action) -> &'static str {
    match a {
        Action::Migrate { .. } => "migrate",
        Action::Evict { .. } => "evict",
        Action::Cancel { .. } => "cancel",
        Action::Register { .. } => "register",
        Action::Signal { .. } => "signal",
        Action::SlowSyscall { .. } => "slow_syscall",
        Action::AtPoint { .. } => "at_point",
    }
}

/// Exercises the input of `seed` and checks its outcome (a run must replay
/// identically): its kind, and for a run its samples and event actions.
fn exercise_seed(seed: u64) -> (&'static str, Option<(u64, Vec<&'static str>)>) {
    let data = bytes(seed, 256 + (seed as usize * 37) % 1024);
    let outcome = exercise(&data);
    if let Err(problem) = outcome.check() {
        panic!("seed {seed}: {problem}");
    }
    let kind = match &outcome {
        Outcome::Empty => "empty",
        Outcome::Invalid(_) => "invalid",
        Outcome::Skipped(_) => "skipped",
        Outcome::Failed(_) => "failed",
        Outcome::Ran(_) => "ran",
        Outcome::ElfRefused(_) => "elf refused",
        Outcome::ElfLoaded => "elf loaded",
    };
    let Outcome::Ran(report) = outcome else { return (kind, None) };
    // The log embeds the (confined) scenario: parsed back and run again,
    // it must give the same log, line for line.
    let log = report.log.join("\n");
    match replay(&log, "fuzz.jsonl") {
        Ok(Replay::Identical { lines }) => assert_eq!(lines, report.log.len()),
        other => panic!("seed {seed}: a second run differs: {other:?}"),
    }
    (kind, Some((report.summary.samples, report.scenario.events.iter().map(|e| action_kind(&e.action)).collect())))
}

#[test]
fn generated_scenarios_run_or_fail_clearly_and_replay_identically() {
    let mut outcomes: BTreeMap<&str, u64> = BTreeMap::new();
    let mut actions_run = BTreeSet::new();
    let mut samples = 0;
    // The inputs on one worker per CPU; their tallies in seed order.
    let seeds: Vec<u64> = (0..INPUTS).collect();
    for (kind, ran) in common::par::par_map(&seeds, |&seed| exercise_seed(seed)) {
        *outcomes.entry(kind).or_default() += 1;
        if let Some((n, actions)) = ran {
            samples += n;
            actions_run.extend(actions);
        }
    }
    eprintln!("{INPUTS} inputs: {outcomes:?}; {samples} samples; actions run: {actions_run:?}");
    // The generator must keep reaching the interesting paths, not only errors.
    let count = |k: &str| outcomes.get(k).copied().unwrap_or(0);
    assert!(count("ran") >= INPUTS / 4, "too few runs: {outcomes:?}");
    assert!(samples >= 1_000, "too few samples: {samples}");
    for k in ["invalid", "failed", "elf refused"] {
        assert!(count(k) > 0, "no {k} outcome: {outcomes:?}");
    }
    for a in ["migrate", "evict", "cancel", "register", "signal", "slow_syscall"] {
        assert!(actions_run.contains(a), "no run with a {a} event: {actions_run:?}");
    }
}

/// A scenario on the committed x86-64 SFrame guest, under profile
/// `sframe-v13` (every tracer kind, SFrame), with `extra` fields.
fn scenario(extra: &str) -> String {
    format!(
        r#"{{"name":"r","machine":{{"arch":"x86_64","cpus":2}},"guests":[{{"name":"g","path":"x86_64/lab-v3","args":["recurse","40"]}}],"kernel":{{"profile":"sframe-v13"}}{extra}}}"#
    )
}

fn refused(text: &str) -> String {
    match exercise_text(text) {
        Outcome::Invalid(e) => e.to_string(),
        other => panic!("accepted: {other:?}"),
    }
}

#[test]
fn a_tracer_registered_by_an_event_is_checked_like_the_others() {
    // A zero period used to divide by zero in the runner.
    let err = refused(&scenario(
        r#","events":[{"at":10,"action":"register","tracer":{"kind":"perf","name":"p","period":0}}]"#,
    ));
    assert!(err.starts_with(&format!("{FILE}: at events[0].tracer.period: expected a period")), "{err}");
    let err = refused(&scenario(
        r#","tracers":[{"kind":"bpf","name":"b"}],"events":[{"at":1,"action":"register","tracer":{"kind":"bpf","name":"b"}}]"#,
    ));
    assert!(err.contains("events[0].tracer.name: duplicate tracer name \"b\""), "{err}");
    let err = refused(&scenario(
        r#","events":[{"at":1,"action":"register","tracer":{"kind":"perf","name":"p","period":9,"task":"x"}}]"#,
    ));
    assert!(err.contains("events[0].tracer.task: no guest named \"x\""), "{err}");
}

#[test]
fn ftrace_instances_are_bounded() {
    // 2^32 − 1 instances used to keep the runner registering for minutes.
    let err = refused(&scenario(r#","tracers":[{"kind":"ftrace","name":"f","instances":4294967295}]"#));
    assert!(err.contains("tracers[0].instances: expected at most 1024 instances, got 4294967295"), "{err}");
}

#[test]
fn an_sframe_patch_offset_near_the_top_of_u64_is_an_error() {
    // offset + at used to overflow.
    match exercise_text(
        &scenario(r#","tracers":[{"kind":"perf","name":"p","period":997}]"#)
            .replace(r#""args""#, r#""sframe_patch":[[18446744073709551615,0]],"args""#),
    ) {
        Outcome::Failed(e) => {
            assert!(e.to_string().contains("sframe_patch offset 18446744073709551615 is past"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_slow_syscall_with_a_huge_period_ends_the_run() {
    // Virtual time used to overflow: each slow NMI lasts one period.
    let text = scenario(
        r#","tracers":[{"kind":"perf","name":"p","period":18446744073709551615}],"events":[{"at":0,"action":"slow_syscall","task":"g","nmis":3}]"#,
    );
    let Outcome::Ran(report) = exercise_text(&text) else { panic!("did not run") };
    assert_eq!(report.guests[0].exit, None, "asleep in the slow call at the end");
}
