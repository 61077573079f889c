//! The timeline of every scenario is valid Chrome trace-event JSON in the
//! ways Perfetto relies on (phases, pid/tid, timestamps monotonic per track,
//! flow ids paired), folded stacks are well formed, and (x86-64) the
//! explorer's page is made, linear in the run's events.

mod common;
mod perf_data;

use std::collections::BTreeMap;

use lab::Scenario;

fn check_trace(name: &str, trace: &serde_json::Value) -> (usize, usize) {
    let events = trace["traceEvents"].as_array().unwrap_or_else(|| panic!("{name}: no traceEvents"));
    let mut last_ts: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut flows: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    let mut tracks = std::collections::BTreeSet::new();
    for e in events {
        let ph = e["ph"].as_str().unwrap_or_else(|| panic!("{name}: event without ph: {e}"));
        assert!(matches!(ph, "M" | "X" | "i" | "s" | "f"), "{name}: unexpected phase {ph}");
        let pid = e["pid"].as_u64().unwrap_or_else(|| panic!("{name}: no pid: {e}"));
        let tid = e["tid"].as_u64().unwrap_or_else(|| panic!("{name}: no tid: {e}"));
        assert!(e["name"].is_string(), "{name}: no name: {e}");
        if ph == "M" {
            continue;
        }
        tracks.insert((pid, tid));
        let ts = e["ts"].as_u64().unwrap_or_else(|| panic!("{name}: no ts: {e}"));
        let last = last_ts.entry((pid, tid)).or_insert(0);
        assert!(ts >= *last, "{name}: timestamps go back on track {pid}/{tid}: {ts} < {last}");
        *last = ts;
        match ph {
            "X" => assert!(e["dur"].is_u64(), "{name}: slice without dur: {e}"),
            "i" => assert!(matches!(e["s"].as_str(), Some("t" | "p" | "g")), "{name}: instant without scope"),
            "s" | "f" => {
                let id = e["id"].as_u64().unwrap();
                let entry = flows.entry(id).or_insert((0, 0));
                if ph == "s" {
                    entry.0 += 1;
                } else {
                    entry.1 += 1;
                    assert_eq!(e["bp"], "e", "{name}: flow end binds to the enclosing slice");
                }
            }
            _ => {}
        }
    }
    for (id, (s, f)) in &flows {
        assert_eq!((*s, *f), (1, 1), "{name}: flow {id} not paired");
    }
    (tracks.len(), flows.len())
}

/// Checks the Chrome trace and the folded stacks of scenario `file`'s run;
/// its flow arrows.
fn check_exports(file: &std::path::Path) -> usize {
    let name = file.file_stem().unwrap().to_string_lossy().into_owned();
    // The x86-64 runs are recorded for the explorer too (its code is the
    // same for every architecture; tests/explore.rs steps through all
    // three): the page is made, with a state change for every event.
    let scenario = Scenario::load(file).unwrap();
    let report = if name.ends_with("x86_64") {
        let x = lab::runner::run_explored(&scenario, &mut |_| {}).unwrap();
        let page = lab::explore::page(&x, &lab::demo::tour(&x.report));
        assert_eq!(x.changes.len(), x.report.kernel_events.len(), "{name}: a state change per event");
        // Linear in events: every string and stack once, however deep.
        let bound = 4096 * x.report.kernel_events.len() + 200_000;
        assert!(page.contains("id=\"data\"") && page.len() < bound, "{name}: {} bytes", page.len());
        x.report
    } else {
        lab::run(&scenario).unwrap()
    };
    let trace = lab::export::chrome_trace(&report);
    // Round-trip through text, as a viewer would read it.
    let trace: serde_json::Value = serde_json::from_str(&trace.to_string()).unwrap();
    let (tracks, flows) = check_trace(&name, &trace);
    assert!(tracks >= 2, "{name}: expected CPU and task tracks");
    // Every request that got a callback has its arrow.
    if name.starts_with("migration") {
        assert!(flows > 0, "{name}: no flow arrows");
    }
    let folded = lab::export::folded(&report);
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        assert!(count.parse::<u64>().unwrap() > 0 && !stack.is_empty() && !stack.contains(' '), "{name}: {line}");
    }
    assert_eq!(
        folded.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum::<u64>(),
        report.summary.judged
    );
    flows
}

#[test]
fn every_timeline_is_valid_chrome_trace_json_and_folded_stacks_are_well_formed() {
    // One run per scenario, on one worker per CPU.
    let files = common::scenario_files();
    let total_flows: usize = common::par::par_map(&files, |file| check_exports(file)).into_iter().sum();
    assert!(total_flows > 100);
}
