//! Views of a run in formats people already open: a Chrome trace-event
//! timeline (Perfetto, chrome://tracing) and folded stacks (flame graphs).
//! [`timeline`] extracts what happened when, once; the renderers (here and
//! in [`crate::html`]) only draw it.

use std::collections::BTreeMap;

use kmodel::event::EventKind;
use serde_json::{json, Value};

use crate::report::Report;
use crate::verdict::Verdict;

/// A span of a task in one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// Task id.
    pub tid: u32,
    /// "user", "kernel" or "sleeping".
    pub state: &'static str,
    /// Start (virtual time).
    pub start: u64,
    /// End.
    pub end: u64,
}

/// A moment on a CPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Instant {
    /// CPU.
    pub cpu: usize,
    /// Time.
    pub time: u64,
    /// What ("NMI", "request", "callback", …).
    pub name: String,
    /// Details.
    pub args: Value,
}

/// A request and the callback that served it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// CPU and time of the request.
    pub from: (usize, u64),
    /// CPU and time of the callback.
    pub to: (usize, u64),
    /// The two events, by index in the report's kernel events.
    pub events: (usize, usize),
}

/// What happened when: task states, CPU instants, request → callback flows.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Task names by tid.
    pub tasks: BTreeMap<u32, String>,
    /// Task state slices.
    pub slices: Vec<Slice>,
    /// CPU instants.
    pub instants: Vec<Instant>,
    /// Request → callback arrows.
    pub flows: Vec<Flow>,
    /// Last event time.
    pub end: u64,
}

/// Extracts the timeline of a run from the model's events.
pub fn timeline(report: &Report) -> Timeline {
    let mut t = Timeline { end: report.kernel_events.last().map_or(0, |e| e.time), ..Timeline::default() };
    let mut state: BTreeMap<u32, (&'static str, u64)> = BTreeMap::new();
    // Per (task, cookie, work) the requests waiting: (CPU, time, event).
    let mut pending: BTreeMap<_, Vec<(usize, u64, usize)>> = BTreeMap::new();
    let switch = |t: &mut Timeline,
                  state: &mut BTreeMap<u32, (&'static str, u64)>,
                  tid: u32,
                  now: u64,
                  next: Option<&'static str>| {
        if let Some((name, since)) = state.remove(&tid) {
            t.slices.push(Slice { tid, state: name, start: since, end: now });
        }
        if let Some(next) = next {
            state.insert(tid, (next, now));
        }
    };
    for (i, e) in report.kernel_events.iter().enumerate() {
        let (now, cpu, tid) = (e.time, e.cpu, e.tid.unwrap_or(0));
        let mut instant = |name: &str, args: Value| {
            t.instants.push(Instant { cpu, time: now, name: name.to_string(), args });
        };
        match &e.kind {
            EventKind::TaskNew { .. } => {
                // Tasks are spawned in guest order with tids from 1.
                let guest = (tid as usize).checked_sub(1).and_then(|i| report.guests.get(i));
                t.tasks.insert(tid, guest.map_or(format!("task {tid}"), |g| g.name.clone()));
                switch(&mut t, &mut state, tid, now, Some("user"));
            }
            EventKind::Entry { reason, .. } => {
                instant(&format!("entry ({reason})"), json!({"tid": tid}));
                switch(&mut t, &mut state, tid, now, Some("kernel"));
            }
            EventKind::ReturnToUser => switch(&mut t, &mut state, tid, now, Some("user")),
            EventKind::Sleep => switch(&mut t, &mut state, tid, now, Some("sleeping")),
            EventKind::Wake => switch(&mut t, &mut state, tid, now, Some("kernel")),
            EventKind::Dead => {
                instant("exit", json!({"tid": tid}));
                switch(&mut t, &mut state, tid, now, None);
            }
            EventKind::NmiEnter { from_user } => instant("NMI", json!({"from_user": from_user})),
            EventKind::Request { work, ret, cookie, .. } => {
                instant("request", json!({"work": work.0, "ret": ret, "cookie": format!("{:#x}", cookie.id())}));
                if *ret >= 0 {
                    pending.entry((tid, cookie.id(), work.0)).or_default().push((cpu, now, i));
                }
            }
            EventKind::TaskWorkQueued { mode, .. } => instant("task_work", json!({"mode": mode})),
            EventKind::HandlerStart { context, .. } => instant("handler", json!({"context": context})),
            EventKind::Callback { work, cookie, nr } => {
                instant("callback", json!({"work": work.0, "frames": nr, "cookie": format!("{:#x}", cookie.id())}));
                for (from_cpu, from_time, from) in pending.remove(&(tid, cookie.id(), work.0)).unwrap_or_default() {
                    t.flows.push(Flow { from: (from_cpu, from_time), to: (cpu, now), events: (from, i) });
                }
            }
            EventKind::Unwind { faults, nr, .. } if *faults > 0 => {
                instant("page faults", json!({"faults": faults, "frames": nr}));
            }
            EventKind::Migrate { from, to } => instant("migrate", json!({"from": from, "to": to})),
            EventKind::Exiting { code } => instant("do_exit", json!({"code": code})),
            _ => {}
        }
    }
    let end = t.end;
    let open: Vec<u32> = state.keys().copied().collect();
    for tid in open {
        switch(&mut t, &mut state, tid, end, None);
    }
    t
}

const CPUS_PID: u64 = 1;
const TASKS_PID: u64 = 2;

/// The run as Chrome trace-event JSON: one track per CPU and per task;
/// slices for user, kernel and sleeping time; instant events for NMIs,
/// requests, task_work, callbacks, faults, migrations and exits; flow arrows
/// from every request to the callback that served it. Timestamps are the
/// model's virtual time (guest instructions), shown as microseconds.
pub fn chrome_trace(report: &Report) -> Value {
    let t = timeline(report);
    let meta = |kind: &str, pid: u64, tid: u64, name: String| json!({"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}});
    let mut events =
        vec![meta("process_name", CPUS_PID, 0, "CPUs".into()), meta("process_name", TASKS_PID, 0, "Tasks".into())];
    for cpu in 0..report.scenario.machine.cpus {
        events.push(meta("thread_name", CPUS_PID, cpu as u64, format!("CPU {cpu}")));
    }
    for (tid, name) in &t.tasks {
        events.push(meta("thread_name", TASKS_PID, u64::from(*tid), format!("task {name}")));
    }
    for s in &t.slices {
        events.push(json!({"ph": "X", "name": s.state, "cat": "state", "pid": TASKS_PID, "tid": s.tid,
            "ts": s.start, "dur": s.end - s.start}));
    }
    for i in &t.instants {
        events.push(json!({"ph": "i", "s": "t", "name": i.name, "cat": "unwind", "pid": CPUS_PID, "tid": i.cpu,
            "ts": i.time, "args": i.args}));
    }
    for (n, f) in t.flows.iter().enumerate() {
        let id = n as u64 + 1;
        events.push(json!({"ph": "s", "id": id, "name": "deferred", "cat": "flow", "pid": CPUS_PID,
            "tid": f.from.0, "ts": f.from.1}));
        events.push(json!({"ph": "f", "bp": "e", "id": id, "name": "deferred", "cat": "flow", "pid": CPUS_PID,
            "tid": f.to.0, "ts": f.to.1}));
    }
    // Perfetto wants every track's events in timestamp order.
    events.sort_by_key(|e| (e["pid"].as_u64(), e["tid"].as_u64(), e["ts"].as_u64().unwrap_or(0)));
    json!({"traceEvents": events, "displayTimeUnit": "ns"})
}

/// Sampled user stacks aggregated: (frames outermost first, count), with
/// the guest's name as the root, `[lost]` for lost stacks and, as perf's
/// tool has it, the cookie for a deferred sample never stitched.
pub fn stacks(report: &Report) -> BTreeMap<Vec<String>, u64> {
    let mut counts: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for s in &report.samples {
        let names = report.names(s);
        let mut frames: Vec<String> = vec![s.guest.clone()];
        match (&s.verdict, &s.delivered) {
            // perf's tool shows the cookie where the stack never came.
            _ if s.cookie_frame().is_some() => frames.extend(s.cookie_frame()),
            (Verdict::Lost { .. }, _) | (_, None) => frames.push("[lost]".into()),
            (_, Some(ips)) => frames.extend(ips.iter().rev().map(|&pc| names.function(pc))),
        }
        *counts.entry(frames).or_insert(0) += 1;
    }
    counts
}

/// Folded stacks (`frame;frame;… count`, outermost first), one line per
/// distinct stack, for flame-graph tools.
pub fn folded(report: &Report) -> String {
    stacks(report).into_iter().map(|(frames, n)| format!("{} {n}\n", frames.join(";"))).collect()
}

/// The sampled stacks as a Firefox Profiler profile (profiler.firefox.com):
/// one process and thread per guest, a sample per judged sample at its
/// instruction count, user frames symbolised from the guest's ELF symbols
/// (category "User") under which the kernel part hangs (category "Kernel");
/// stacks that never arrived show as a single "[lost: why]" frame.
pub fn firefox(report: &Report) -> Value {
    use fxprof_processed_profile::{
        CategoryColor, CpuDelta, Frame, FrameFlags, FrameInfo, Profile, ReferenceTimestamp, SamplingInterval, Timestamp,
    };
    let period = report
        .scenario
        .tracers
        .iter()
        .filter_map(|t| match t {
            crate::scenario::Tracer::Perf { period, .. } => Some(*period),
            _ => None,
        })
        .min()
        .unwrap_or(1);
    let mut profile = Profile::new(
        &format!("unwindlab {}", report.scenario.name),
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        SamplingInterval::from_nanos(period),
    );
    let user = profile.add_category("User", CategoryColor::Yellow);
    let kernel = profile.add_category("Kernel", CategoryColor::Orange);
    let lost = profile.add_category("Lost", CategoryColor::Red);
    let start = Timestamp::from_nanos_since_reference(0);
    let mut threads = BTreeMap::new();
    for (i, g) in report.scenario.guests.iter().enumerate() {
        let process = profile.add_process(&g.name, i as u32 + 1, start);
        let thread = profile.add_thread(process, i as u32 + 1, start, true);
        profile.set_thread_name(thread, &g.name);
        threads.insert(g.name.clone(), thread);
    }
    for s in &report.samples {
        let Some(thread) = threads.get(&s.guest) else { continue };
        let names = report.names(s);
        let mut labels: Vec<(String, fxprof_processed_profile::CategoryHandle)> = match (&s.verdict, &s.delivered) {
            (Verdict::Lost { why }, _) => match s.cookie_frame() {
                Some(cookie) => vec![(format!("{cookie} never stitched ({why})"), lost)],
                None => vec![(format!("[lost: {why}]"), lost)],
            },
            (_, None) => vec![("[lost]".to_string(), lost)],
            (_, Some(ips)) => ips.iter().rev().map(|&pc| (names.name(pc), user)).collect(),
        };
        labels.extend(s.kernel.iter().rev().map(|&pc| (format!("[kernel] {pc:#x}"), kernel)));
        let frames: Vec<FrameInfo> = labels
            .iter()
            .map(|(label, category)| FrameInfo {
                frame: Frame::Label(profile.intern_string(label)),
                category_pair: (*category).into(),
                flags: FrameFlags::empty(),
            })
            .collect();
        let stack = profile.intern_stack_frames(*thread, frames.into_iter());
        profile.add_sample(*thread, Timestamp::from_nanos_since_reference(s.icount), stack, CpuDelta::ZERO, 1);
    }
    serde_json::to_value(&profile).unwrap_or(Value::Null)
}
