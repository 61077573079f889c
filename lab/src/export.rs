//! Views of a run in formats people already open: a Chrome trace-event
//! timeline (Perfetto, chrome://tracing) and folded stacks (flame graphs).

use std::collections::BTreeMap;

use kmodel::event::EventKind;
use serde_json::{json, Value};

use crate::runner::Report;
use crate::validate::Symbols;
use crate::verdict::Verdict;

const CPUS_PID: u64 = 1;
const TASKS_PID: u64 = 2;

/// The run as Chrome trace-event JSON: one track per CPU and per task;
/// slices for user, kernel and sleeping time; instant events for NMIs,
/// requests, task_work, callbacks, faults, migrations and exits; flow arrows
/// from every request to the callback that served it. Timestamps are the
/// model's virtual time (guest instructions), shown as microseconds.
pub fn chrome_trace(report: &Report) -> Value {
    let mut events: Vec<Value> = Vec::new();
    let meta = |pid: u64, tid: u64, name: String| json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}});
    events.push(json!({"ph": "M", "name": "process_name", "pid": CPUS_PID, "tid": 0, "args": {"name": "CPUs"}}));
    events.push(json!({"ph": "M", "name": "process_name", "pid": TASKS_PID, "tid": 0, "args": {"name": "Tasks"}}));
    for cpu in 0..report.scenario.machine.cpus {
        events.push(meta(CPUS_PID, cpu as u64, format!("CPU {cpu}")));
    }
    // Task states as slices: (tid) -> (state, since).
    let mut state: BTreeMap<u32, (&'static str, u64)> = BTreeMap::new();
    let mut names: BTreeMap<u32, String> = BTreeMap::new();
    let mut requests: BTreeMap<(u32, u64, usize), Vec<(u64, usize)>> = BTreeMap::new();
    let mut flows: Vec<Value> = Vec::new();
    let mut next_flow = 1u64;
    let close = |events: &mut Vec<Value>, tid: u32, now: u64, state: &mut BTreeMap<u32, (&'static str, u64)>| {
        if let Some((name, since)) = state.remove(&tid) {
            events.push(json!({"ph": "X", "name": name, "cat": "state", "pid": TASKS_PID, "tid": tid,
                "ts": since, "dur": now - since}));
        }
    };
    for e in &report.kernel_events {
        let t = e.time;
        let cpu = e.cpu as u64;
        let instant = |name: &str, args: Value| json!({"ph": "i", "s": "t", "name": name, "cat": "unwind", "pid": CPUS_PID, "tid": cpu, "ts": t, "args": args});
        match &e.kind {
            EventKind::TaskNew { .. } => {
                let tid = e.tid.unwrap_or(0);
                // Tasks are spawned in guest order with tids from 1.
                let guest = (tid as usize).checked_sub(1).and_then(|i| report.guests.get(i));
                let name = guest.map_or(format!("task {tid}"), |g| g.name.clone());
                names.insert(tid, name);
                state.insert(tid, ("user", t));
            }
            EventKind::Entry { reason, .. } => {
                let tid = e.tid.unwrap_or(0);
                close(&mut events, tid, t, &mut state);
                state.insert(tid, ("kernel", t));
                events.push(instant(&format!("entry ({reason:?})").to_lowercase(), json!({"tid": tid})));
            }
            EventKind::ReturnToUser => {
                let tid = e.tid.unwrap_or(0);
                close(&mut events, tid, t, &mut state);
                state.insert(tid, ("user", t));
            }
            EventKind::Sleep => {
                let tid = e.tid.unwrap_or(0);
                close(&mut events, tid, t, &mut state);
                state.insert(tid, ("sleeping", t));
            }
            EventKind::Wake => {
                let tid = e.tid.unwrap_or(0);
                close(&mut events, tid, t, &mut state);
                state.insert(tid, ("kernel", t));
            }
            EventKind::Dead => {
                let tid = e.tid.unwrap_or(0);
                close(&mut events, tid, t, &mut state);
                events.push(instant("exit", json!({"tid": tid})));
            }
            EventKind::NmiEnter { from_user } => events.push(instant("NMI", json!({"from_user": from_user}))),
            EventKind::Request { work, ret, cookie, .. } => {
                events.push(instant(
                    "request",
                    json!({"work": work.0, "ret": ret, "cookie": format!("{:#x}", cookie.id())}),
                ));
                if *ret >= 0 {
                    let key = (e.tid.unwrap_or(0), cookie.id(), work.0);
                    requests.entry(key).or_default().push((t, e.cpu));
                }
            }
            EventKind::TaskWorkQueued { mode, .. } => events.push(instant("task_work", json!({"mode": mode}))),
            EventKind::HandlerStart { context, .. } => events.push(instant("handler", json!({"context": context}))),
            EventKind::Callback { work, cookie, nr } => {
                let tid = e.tid.unwrap_or(0);
                events.push(instant(
                    "callback",
                    json!({"work": work.0, "frames": nr, "cookie": format!("{:#x}", cookie.id())}),
                ));
                for (rt, rcpu) in requests.remove(&(tid, cookie.id(), work.0)).unwrap_or_default() {
                    let id = next_flow;
                    next_flow += 1;
                    flows.push(json!({"ph": "s", "id": id, "name": "deferred", "cat": "flow", "pid": CPUS_PID, "tid": rcpu, "ts": rt}));
                    flows.push(json!({"ph": "f", "bp": "e", "id": id, "name": "deferred", "cat": "flow", "pid": CPUS_PID, "tid": cpu, "ts": t}));
                }
            }
            EventKind::Unwind { faults, nr, .. } if *faults > 0 => {
                events.push(instant("page faults", json!({"faults": faults, "frames": nr})));
            }
            EventKind::Migrate { from, to } => events.push(instant("migrate", json!({"from": from, "to": to}))),
            EventKind::Exiting { code } => events.push(instant("do_exit", json!({"code": code}))),
            _ => {}
        }
    }
    let end = report.kernel_events.last().map_or(0, |e| e.time);
    let open: Vec<u32> = state.keys().copied().collect();
    for tid in open {
        close(&mut events, tid, end, &mut state);
    }
    for (tid, name) in names {
        events.push(meta(TASKS_PID, u64::from(tid), format!("task {name}")));
    }
    events.extend(flows);
    // Perfetto wants every track's events in timestamp order.
    events.sort_by_key(|e| (e["pid"].as_u64(), e["tid"].as_u64(), e["ts"].as_u64().unwrap_or(0)));
    json!({"traceEvents": events, "displayTimeUnit": "ns"})
}

/// Folded stacks (`frame;frame;… count`, outermost first) of every judged
/// sample's delivered user stack, symbolised with the guests' ELF symbols;
/// lost stacks appear as `[lost]`.
pub fn folded(report: &Report) -> String {
    let symbols: BTreeMap<String, Symbols> =
        report.scenario.guests.iter().map(|g| (g.name.clone(), Symbols::read(&g.path))).collect();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for s in &report.samples {
        let syms = &symbols[&s.guest];
        let mut frames: Vec<String> = vec![s.guest.clone()];
        match (&s.verdict, &s.delivered) {
            (Verdict::Lost { .. }, _) | (_, None) => frames.push("[lost]".into()),
            (_, Some(ips)) => frames.extend(ips.iter().rev().map(|&pc| syms.function(pc))),
        }
        *counts.entry(frames.join(";")).or_insert(0) += 1;
    }
    counts.into_iter().map(|(stack, n)| format!("{stack} {n}\n")).collect()
}
