//! Threaded scenarios on every architecture: each thread is its own task
//! of the kernel model, sharing its process's mm and SFrame table. What
//! their logs must show: a thread's own exit serving its pending request
//! while its sibling keeps the mm; `exit_group` serving every killed
//! sibling's request from task_work before its `do_exit()`; `de_thread`
//! at an exec from a non-leader; the mm freed once, by the last thread;
//! samples of two threads on two CPUs, each judged against its own
//! thread's ground truth and joined to its own deferred records. Every
//! log replays byte for byte.

mod common;

use common::{is, ARCHES};
use serde_json::Value;
use std::collections::BTreeSet;

/// The report and the log lines of a run (see [`common::scenario_events`]).
fn events(name: &str) -> (lab::Report, Vec<Value>) {
    common::scenario_events(name, true)
}

/// The "mm freed" removals: (task, seq).
fn freed(ev: &[Value]) -> Vec<(u64, u64)> {
    ev.iter()
        .filter(|e| is(e, "sframe_remove") && e["why"].as_str().unwrap().contains("sframe_free_mm"))
        .map(|e| (e["tid"].as_u64().unwrap(), e["seq"].as_u64().unwrap()))
        .collect()
}

#[test]
fn a_thread_exits_with_a_request_pending_while_its_sibling_keeps_the_mm() {
    for arch in ARCHES {
        let (report, ev) = events(&format!("thread-exit-while-pending-{arch}"));
        // The first task to exit is a thread (pthread_exit), not the leader.
        let exiting = ev.iter().position(|e| is(e, "exiting")).expect("a thread exits");
        let thread = ev[exiting]["tid"].clone();
        assert!(ev.iter().any(|e| is(e, "task_new") && e["thread"] == true && e["tid"] == thread), "{arch}");
        // Its own exit, its exit hook serving a request made in that call.
        let hook = ev[exiting..].iter().position(|e| is(e, "exit_hook")).unwrap() + exiting;
        assert_eq!(ev[hook]["tid"], thread, "{arch}");
        let cb = ev[hook..].iter().find(|e| is(e, "callback")).expect("served by the exit hook");
        assert_eq!(cb["tid"], thread, "{arch}");
        assert!(cb["nr"].as_u64().unwrap() > 1, "{arch}: a real stack, not an empty one");
        // The mm lives on: freed once, by the main thread at the end.
        let f = freed(&ev);
        assert_eq!(f.len(), 1, "{arch}: {f:?}");
        assert_eq!(f[0].0, 1, "{arch}: the last thread frees the mm");
        assert!(f[0].1 > ev[hook]["seq"].as_u64().unwrap(), "{arch}");
        assert_eq!(report.summary.lost, 0, "{arch}");
    }
}

#[test]
fn exit_group_serves_every_killed_siblings_pending_request() {
    for arch in ARCHES {
        let (report, ev) = events(&format!("exit-group-many-pending-{arch}"));
        let zap = ev.iter().position(|e| is(e, "zap_other_threads")).expect("exit_group zaps");
        assert_eq!(ev[zap]["why"], "exit_group", "{arch}");
        let killed: Vec<Value> = ev[zap]["killed"].as_array().unwrap().clone();
        // The leader (asleep in pthread_join) and the three sleepers.
        assert_eq!(killed.len(), 4, "{arch}");
        assert_eq!(killed[0], 1, "{arch}");
        for t in &killed[1..] {
            // Asleep with a request pending ...
            let sleep = ev[..zap].iter().rposition(|e| is(e, "sleep") && &e["tid"] == t).expect("asleep");
            let req = ev[..sleep].iter().rposition(|e| is(e, "request") && &e["tid"] == t).unwrap();
            let cookie = ev[req]["cookie"].clone();
            assert!(
                !ev[req..zap].iter().any(|e| is(e, "callback") && e["cookie"] == cookie),
                "{arch}: {t} still pending at exit_group"
            );
            // ... served from task_work in get_signal(), before its do_exit(), with a real stack.
            let cb = ev[zap..].iter().position(|e| is(e, "callback") && e["cookie"] == cookie).unwrap() + zap;
            assert_eq!(&ev[cb]["tid"], t, "{arch}");
            assert!(ev[cb]["nr"].as_u64().unwrap() > 1, "{arch}");
            let start = ev[..cb].iter().rev().find(|e| is(e, "handler_start")).unwrap();
            assert_eq!(start["context"], "task_work", "{arch}");
            let fatal = ev[cb..].iter().position(|e| is(e, "fatal_signal") && &e["tid"] == t);
            let exiting = ev[cb..].iter().position(|e| is(e, "exiting") && &e["tid"] == t);
            assert!(fatal.unwrap() < exiting.unwrap(), "{arch}");
        }
        // The leader had nothing pending: it dies through get_signal() too.
        let fatal = ev[zap..].iter().position(|e| is(e, "fatal_signal") && e["tid"] == 1);
        let exiting = ev[zap..].iter().position(|e| is(e, "exiting") && e["tid"] == 1);
        assert!(fatal.unwrap() < exiting.unwrap(), "{arch}");
        // The table is freed once, by the last killed thread, after every callback.
        let f = freed(&ev);
        assert_eq!(f.len(), 1, "{arch}: {f:?}");
        assert_eq!(Value::from(f[0].0), killed[3], "{arch}");
        let last_cb = ev.iter().filter(|e| is(e, "callback")).map(|e| e["seq"].as_u64().unwrap()).max().unwrap();
        assert!(last_cb < f[0].1, "{arch}");
        assert_eq!((report.summary.lost, report.guests[0].exit), (0, Some(7)), "{arch}");
    }
}

#[test]
fn exec_from_a_thread_goes_through_de_thread() {
    for arch in ARCHES {
        let (report, ev) = events(&format!("exec-from-thread-{arch}"));
        let de = ev.iter().position(|e| is(e, "de_thread")).expect("de_thread");
        let thread = ev[de]["tid"].as_u64().unwrap();
        assert!(thread != 1 && ev.iter().any(|e| is(e, "task_new") && e["thread"] == true && e["tid"] == thread));
        assert_eq!((ev[de]["leader"].as_u64(), ev[de]["pid"].as_u64()), (Some(1), Some(1)), "{arch}");
        let zap = ev[..de].iter().rposition(|e| is(e, "zap_other_threads")).unwrap();
        assert_eq!(ev[zap]["why"], "de_thread", "{arch}");
        // The leader and the computing sibling die before the exec goes on.
        let killed = ev[zap]["killed"].as_array().unwrap();
        assert_eq!(killed.len(), 2, "{arch}: {killed:?}");
        for t in killed {
            assert!(ev[zap..de].iter().any(|e| is(e, "dead") && &e["tid"] == t), "{arch}: {t} dies first");
        }
        assert!(killed.contains(&Value::from(1)), "{arch}");
        let exec = ev[de..].iter().position(|e| is(e, "exec")).unwrap() + de;
        assert_eq!((ev[exec]["tid"].as_u64(), &ev[exec]["pending"]), (Some(thread), &Value::Bool(true)), "{arch}");
        // The old table freed once, at exec_mmap(); the new one at the end.
        let f = freed(&ev);
        assert_eq!(f.len(), 2, "{arch}: {f:?}");
        assert_eq!(f[0], (thread, ev[exec + 1]["seq"].as_u64().unwrap()), "{arch}");
        // The request pending across the exec is served with its cookie,
        // but the record names the leader's pid, which the thread took:
        // perf's tool cannot join it to the samples made before.
        let before = ev[..de].iter().rev().find(|e| is(e, "request")).unwrap();
        assert!(ev[exec..].iter().any(|e| is(e, "callback") && e["cookie"] == before["cookie"]), "{arch}");
        assert_eq!(report.summary.lost, 3, "{arch}");
        assert!(report.summary.lost_reasons.keys().all(|r| r.contains("exchange_tids")), "{arch}");
        // After the exec the caller is sampled as the process's thread.
        assert!(ev.iter().any(|e| is(e, "sample") && e["task"] == thread && e["thread"] == 1000), "{arch}");
    }
}

#[test]
fn two_threads_on_two_cpus_are_each_judged_against_their_own_ground_truth() {
    for arch in ARCHES {
        let (report, ev) = events(&format!("threads-two-cpus-{arch}"));
        let samples: Vec<&Value> = ev.iter().filter(|e| is(e, "sample")).collect();
        let pairs: BTreeSet<(u64, u64, u64)> = samples
            .iter()
            .map(|s| (s["cpu"].as_u64().unwrap(), s["thread"].as_u64().unwrap(), s["task"].as_u64().unwrap()))
            .collect();
        // The two computing threads: the first created on CPU 1, the
        // second on CPU 0 (round robin); the main thread (CPU 0) is
        // sampled only before it sleeps in pthread_join. No other pairing.
        let computing: BTreeSet<_> = pairs.iter().filter(|p| p.2 != 1).copied().collect();
        assert_eq!(computing, BTreeSet::from([(1, 1001, 2), (0, 1002, 3)]), "{arch}");
        assert!(pairs.iter().all(|p| p.2 != 1 || p.0 == 0), "{arch}: {pairs:?}");
        // Every stack exact: each judged against the truth of the thread the NMI hit.
        assert_eq!(
            (report.summary.judged, report.summary.exact),
            (samples.len() as u64, samples.len() as u64),
            "{arch}"
        );
        // Each deferred record was joined to its own thread's samples: the
        // cookie of every sample's request is its thread's, on its CPU.
        for r in report.samples.iter() {
            let cpu = r.deferred_cpu.expect("a deferred record joined");
            assert_eq!(cpu, r.cpu, "{arch}: the record is in its thread's CPU's buffer");
        }
        // Each thread's callbacks run on its own CPU, with that CPU's
        // cookies (the CPU is one half of the cookie: which half depends
        // on the byte order), never the other thread's.
        for (cpu, _, task) in pairs {
            for e in ev.iter().filter(|e| is(e, "callback") && e["tid"] == task) {
                let cookie = u64::from_str_radix(e["cookie"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
                assert_eq!(e["cpu"], cpu, "{arch}");
                assert!(cookie >> 32 == cpu + 1 || cookie & 0xffff_ffff == cpu + 1, "{arch}: {e}");
            }
        }
    }
}
