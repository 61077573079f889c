//! Scenarios with several processes, on every architecture: what the
//! kernel model must do at fork and exec while an unwind is pending, and a
//! pipeline of three processes whose samples are each judged against the
//! ground truth of the process they hit, with a log that replays byte for
//! byte.

mod common;

use common::{is, ARCHES};
use serde_json::Value;

/// The report and the log lines of a run (see [`common::scenario_events`]).
fn events(name: &str) -> (lab::Report, Vec<Value>) {
    common::scenario_events(name, false)
}

#[test]
fn fork_while_pending_the_child_inherits_nothing_and_the_parent_is_served() {
    for arch in ARCHES {
        let (report, ev) = events(&format!("fork-while-pending-{arch}"));
        let fork = ev.iter().position(|e| is(e, "task_new") && e["parent"] == 1).expect("a fork");
        let child = ev[fork]["tid"].clone();
        // The parent's request made in the kernel just before the fork ...
        let pending = ev[..fork].iter().rev().find(|e| is(e, "request") && e["tid"] == 1).expect("a request");
        let cookie = pending["cookie"].clone();
        // ... is delivered to the parent after the fork, never to the child.
        let served = ev[fork..].iter().find(|e| is(e, "callback") && e["cookie"] == cookie).expect("served");
        assert_eq!(served["tid"], 1, "{arch}");
        assert!(
            !ev.iter().any(|e| e["tid"] == child && e["cookie"] == cookie),
            "{arch}: child saw the parent's cookie"
        );
        // The child's own first request has a cookie of its own.
        let first = ev.iter().find(|e| is(e, "request") && e["tid"] == child).expect("the child is sampled");
        assert_ne!(first["cookie"], cookie, "{arch}");
        assert_eq!(report.summary.lost, 0, "{arch}");
    }
}

#[test]
fn exec_while_pending_delivers_the_new_images_stack_with_the_old_cookie() {
    for arch in ARCHES {
        let (report, ev) = events(&format!("exec-while-pending-{arch}"));
        let exec = ev.iter().position(|e| is(e, "exec")).expect("an exec");
        assert_eq!(ev[exec]["pending"], true, "{arch}");
        let before = ev[..exec].iter().rev().find(|e| is(e, "request")).expect("a request before the exec");
        let cb = ev[exec..].iter().find(|e| is(e, "callback")).expect("a callback after the exec");
        assert_eq!(cb["cookie"], before["cookie"], "{arch}");
        // The walk on the way out starts at the new image's entry point
        // (AArch64 then adds the zero link register: `_start` has no CFI).
        let entry = ev[exec]["pc"].as_u64().unwrap();
        let at_entry: Vec<_> = report.samples.iter().filter(|s| s.truth == [entry]).collect();
        assert!(!at_entry.is_empty(), "{arch}: no sample in execve");
        for s in at_entry {
            assert_eq!(s.delivered.as_ref().and_then(|d| d.first()), Some(&entry), "{arch}: sample {}", s.sample);
        }
    }
}

#[test]
fn pipeline_samples_every_process_and_replays() {
    for arch in ARCHES {
        let (report, ev) = events(&format!("pipeline-{arch}"));
        let forks = ev.iter().filter(|e| is(e, "task_new") && !e["parent"].is_null()).count();
        assert_eq!(forks, 3, "{arch}");
        assert_eq!(ev.iter().filter(|e| is(e, "exec")).count(), 1, "{arch}");
        let sampled: std::collections::BTreeSet<_> =
            ev.iter().filter(|e| is(e, "request")).map(|e| e["tid"].to_string()).collect();
        assert!(sampled.len() >= 3, "{arch}: samples hit only tasks {sampled:?}");
        assert_eq!(report.summary.lost, 0, "{arch}");
        assert_eq!(report.guests[0].exit, Some(0), "{arch}");
        assert!(report.guests[0].stdout.contains("pipeline: 3 of 3 stages succeeded"), "{arch}");
    }
}

#[test]
fn an_inheriting_session_samples_the_child_and_a_no_inherit_one_only_the_parent() {
    use kmodel::tracer::PerfRecord;
    for arch in ARCHES {
        let (report, ev) = events(&format!("perf-inherit-{arch}"));
        let fork = ev.iter().find(|e| is(e, "task_new") && e["parent"] == 1).expect("a fork");
        assert_ne!(fork["tid"], 1, "{arch}");
        // The threads whose records each session's buffers hold.
        let tids = |name: &str| -> std::collections::BTreeSet<u32> {
            let session = report.perf.sessions.iter().find(|s| s.name == name).expect("the session");
            session
                .records
                .iter()
                .map(|(_, r)| match r {
                    PerfRecord::Sample { tid, .. } | PerfRecord::Deferred { tid, .. } => *tid,
                })
                .collect()
        };
        let (inherit, plain) = (tids("perf"), tids("perf-no-inherit"));
        assert_eq!(plain.len(), 1, "{arch}: --no-inherit sees the parent alone");
        assert!(inherit.is_superset(&plain) && inherit.len() == 2, "{arch}: {inherit:?} against {plain:?}");
        // Every sample of the child is served and stitched in the
        // inheriting session.
        let count = |name: &str| report.samples.iter().filter(|s| s.tracer == name).count();
        assert!(count("perf") > count("perf-no-inherit"), "{arch}");
        assert!(report.samples.iter().all(|s| s.delivered.is_some()), "{arch}");
    }
}
