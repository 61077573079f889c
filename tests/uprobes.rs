//! Uprobes on a function's first instruction (`uprobe-entry-*`), sampled
//! by perf twice, with a deferred and with a classic walk: what upstream
//! does with the probed instruction decides where the deferred walk
//! starts (docs/upstream-uprobe-entry-frame.md).

mod common;

use lab::Report;

/// The samples of tracer `name`, each with its delivered stack.
fn stacks<'r>(report: &'r Report, name: &str) -> Vec<(&'r lab::report::SampleResult, &'r [u64])> {
    let out: Vec<_> = report
        .samples
        .iter()
        .filter(|s| s.tracer == name)
        .map(|s| (s, s.delivered.as_deref().expect("delivered")))
        .collect();
    assert_eq!(out.len(), 13, "{name}: a sample at each of recurse's 13 calls");
    out
}

/// x86-64 under upstream's profile: the push is emulated, and the deferred
/// walk, after `handler_chain()` cleared `auprobe`, starts past it and
/// takes the caller's frame pointer for this frame's: the immediate caller
/// is missing. The walk in the handler has the entry rule: the caller is
/// there. The kernel's own C agrees (`tests/kernel_c.rs`).
#[test]
fn x86_64_deferred_stacks_start_past_the_emulated_push_and_miss_the_caller() {
    let (report, _) = common::scenario_events("uprobe-entry-x86_64", false);
    for (s, d) in stacks(&report, "perf") {
        assert_eq!(d[0], s.truth[0] + 1, "sample {}: past the push", s.sample);
        assert_eq!(d[1..], s.truth[2..d.len() + 1], "sample {}: the caller {:#x} skipped", s.sample, s.truth[1]);
    }
    for (s, d) in stacks(&report, "perf-fp") {
        assert!(d.len() >= 3, "sample {}", s.sample);
        assert_eq!(d, &s.truth[..d.len()], "sample {}: the entry rule keeps the caller", s.sample);
    }
}

/// AArch64 and s390x single-step the entry out of line: the deferred walk
/// starts at the first XOL slot of the `[uprobes]` page (4 and 256 bytes
/// in: slot 0 is the uretprobe trampoline's).
#[test]
fn elsewhere_the_deferred_walk_starts_at_the_xol_slot() {
    for (arch, slot) in [("aarch64", 4), ("s390x", 256)] {
        let (report, _) = common::scenario_events(&format!("uprobe-entry-{arch}"), false);
        for (s, d) in stacks(&report, "perf") {
            assert_eq!(report.names(s).name(d[0]), format!("[uprobes]+{slot:#x}"), "{arch}: sample {}", s.sample);
        }
        for (s, d) in stacks(&report, "perf-fp") {
            assert_eq!(d[0], s.truth[0], "{arch}: sample {}: the handler's walk starts at the probe", s.sample);
        }
    }
}
