//! The explorer: one self-contained HTML page (no server, no network) in
//! which a run can be stepped through event by event — a timeline per CPU
//! and per task, the kernel's state after each event with what the event
//! changed, the user stack of the sample at hand (ground truth beside the
//! walk, each frame with the rule that found it) and the demo's narration
//! as a tour. The page's data is the run's events, the cells each changed
//! ([`kmodel::state`]) and its samples; its script (`explore.js`) rebuilds
//! the state at any event from those changes and draws only what is on
//! screen, so a run of 50,000 events opens as fast as its data parses.

use std::collections::BTreeMap;

use kmodel::event::{Event, EventKind};
use kmodel::kernel::TaskState;
use kmodel::state::{Section, StateChange, Value};
use kmodel::types::Tid;
use kmodel::unwind::Method;
use serde_json::{json, Value as Json};

use crate::html::esc;
use crate::report::{Report, SampleResult};
use crate::symbolise::Names;

/// A run recorded for the explorer: its report and the cells each of its
/// events changed.
#[derive(Debug)]
pub struct Explored {
    /// The run's report (with its event log).
    pub report: Report,
    /// The state changes, one per logged event, in order.
    pub changes: Vec<StateChange>,
}

/// One step of a narration played over the page (the demo's, as a tour):
/// its words, and the event it is about (its `seq`), if one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The kernel event the step is about.
    pub at: Option<u64>,
    /// What it says.
    pub text: String,
}

/// The page's shared tables: every string once (frame names, rules, cell
/// values, event words), and every stack as a node of a tree shared by
/// stacks with the same outer frames (as the Firefox Profiler's stack
/// table): deep stacks sampled again and again cost a node per new frame.
#[derive(Default)]
struct Tables {
    strings: Vec<String>,
    string_ids: BTreeMap<String, usize>,
    /// Nodes: (parent node or -1, frame's string, rule's string or -1).
    nodes: Vec<[i64; 3]>,
    node_ids: BTreeMap<[i64; 3], usize>,
}

impl Tables {
    /// The index of `text` in the string table.
    fn string(&mut self, text: &str) -> usize {
        if let Some(&i) = self.string_ids.get(text) {
            return i;
        }
        self.strings.push(text.to_string());
        self.string_ids.insert(text.to_string(), self.strings.len() - 1);
        self.strings.len() - 1
    }

    /// The node of a stack, innermost frame first, each with its rule if
    /// any (-1: the empty stack).
    fn stack(&mut self, frames: &[(String, Option<String>)]) -> i64 {
        let mut parent = -1i64;
        for (frame, rule) in frames.iter().rev() {
            let key = [parent, self.string(frame) as i64, rule.as_ref().map_or(-1, |r| self.string(r) as i64)];
            parent = match self.node_ids.get(&key) {
                Some(&n) => n as i64,
                None => {
                    self.nodes.push(key);
                    self.node_ids.insert(key, self.nodes.len() - 1);
                    (self.nodes.len() - 1) as i64
                }
            };
        }
        parent
    }
}

/// The page's script, kept in its own file to be read as JavaScript.
const SCRIPT: &str = include_str!("explore.js");

/// The page's own style, after the report pages' shared one.
const STYLE: &str = include_str!("explore.css");

/// The field of an mm's objects, which the emulator, not the kernel model,
/// knows (read at each sample).
const OBJECTS: &str = "objects mapped (at the latest sample)";

/// Where a task is, as the timeline draws it: one letter per state.
fn lane_state(state: TaskState) -> &'static str {
    match state {
        TaskState::User => "u",
        TaskState::Kernel => "k",
        TaskState::Sleeping => "s",
        TaskState::Dead => "",
    }
}

/// The page of run `x`, with `tour` as its narration (steps whose event is
/// not in the run play at its end).
pub fn page(x: &Explored, tour: &[Step]) -> String {
    let data = data(x, tour);
    let r = &x.report;
    let title = esc(&r.scenario.name);
    // No `<` in the script element at all (a symbol name may hold
    // `</script>` or `<!--`): in JSON it can only be inside a string,
    // where `\u003c` means the same.
    let json = data.to_string().replace('<', "\\u003c");
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>unwindlab explorer: {title}</title>\
         <style>{}{STYLE}</style></head><body>\
         <script type=\"application/json\" id=\"data\">{json}</script>\
         <div id=\"app\"><noscript>The explorer needs JavaScript; `unwindlab run --html` writes a page \
         without it.</noscript></div><script>{SCRIPT}</script></body></html>\n",
        crate::html::STYLE
    )
}

/// The names of code addresses for task `tid` at event `at`: as its
/// latest sample up to there saw them (its first, before any).
struct Namer<'r> {
    report: &'r Report,
    /// Per task, its samples' (event index of the NMI, sample index).
    by_task: BTreeMap<Tid, Vec<(usize, usize)>>,
}

impl<'r> Namer<'r> {
    fn names(&self, tid: Tid, at: usize) -> Names<'r> {
        let Some(list) = self.by_task.get(&tid) else { return Names::none() };
        let k = list.partition_point(|&(nmi, _)| nmi <= at).saturating_sub(1);
        list.get(k).map_or_else(Names::none, |&(_, s)| self.report.names(&self.report.samples[s]))
    }

    /// Names for anything of mm `mm` at event `at`: those of a task that
    /// had it, by [`Namer::names`].
    fn names_of_mm(&self, owners: &BTreeMap<usize, Tid>, mm: usize, at: usize) -> Names<'r> {
        owners.get(&mm).map_or_else(Names::none, |&tid| self.names(tid, at))
    }
}

/// Every event in words, in the kernel's terms.
fn words(e: &Event, work: &dyn Fn(usize) -> String, pc: &dyn Fn(u64) -> String) -> String {
    use EventKind as K;
    match &e.kind {
        K::Init { work: w, ret, bit, .. } => match bit {
            Some(b) => format!("unwind_deferred_init({}) = {ret}: bit {b}", work(w.0)),
            None => format!("unwind_deferred_init({}) = {ret}", work(w.0)),
        },
        K::TaskNew { parent: Some(p), thread: true } => format!("clone(CLONE_VM | CLONE_THREAD) by task {p}"),
        K::TaskNew { parent: Some(p), .. } => format!("fork by task {p}: copy_process(), unwind_task_init()"),
        K::TaskNew { parent: None, .. } => "task created".into(),
        K::Entry { reason, pc: at } => format!("enters the kernel ({reason}) from user PC {}", pc(*at)),
        K::ReturnToUser => "exit_to_user_mode(): back in user mode".into(),
        K::NmiEnter { from_user: true } => "NMI (perf's sampling interrupt) in user mode".into(),
        K::NmiEnter { from_user: false } => "NMI (perf's sampling interrupt) in the kernel".into(),
        K::NmiExit => "NMI returns".into(),
        K::Request { work: w, ret, cookie, in_nmi } => {
            let what = match ret {
                0 => "queued: a callback will come".to_string(),
                1 => "already pending or done this entry".to_string(),
                r => format!("refused ({})", kmodel::types::errno_name(*r)),
            };
            let place = if *in_nmi { " in NMI" } else { "" };
            format!("unwind_deferred_request({}){place} = {ret} ({what}), cookie {:#x}", work(w.0), cookie.id())
        }
        K::TaskWorkQueued { mode, ret } => format!("task_work_add(unwind_deferred_task_work, {mode}) = {ret}"),
        K::HandlerStart { bits, context } => {
            format!("unwind_deferred_task_work() runs ({context}): fetch_andnot took bits {bits:#x} from unwind_mask")
        }
        K::Unwind { nr, stop, faults, faultable, .. } => format!(
            "unwind_user_faultable(): {nr} entries walked{}, {faults} page fault(s); stopped: {stop}",
            if *faultable { "" } else { " (not faultable)" }
        ),
        K::Callback { work: w, cookie, nr } => {
            format!("callback of {}: cookie {:#x}, {nr} entries", work(w.0), cookie.id())
        }
        K::Reset { cookie } => format!("unwind_reset_info(): cookie {:#x} cleared, mask zeroed", cookie.id()),
        K::ResetSkipped => "unwind_reset_info(): PENDING still set, nothing cleared".into(),
        K::Warn { site, what } => format!("WARN in the kernel's code at {site}: {what}"),
        K::CancelBegin { work: w } => format!("unwind_deferred_cancel({}): off the list, bit revoked", work(w.0)),
        K::CancelReturn { work: w } => format!("unwind_deferred_cancel({}) returns: SRCU grace period over", work(w.0)),
        K::MutexWait { work: w, call } => format!("{call}({}) waits for callback_mutex", work(w.0)),
        K::Migrate { from, to } => format!("migrated from CPU {from} to CPU {to}"),
        K::Sleep => "sleeps in the kernel".into(),
        K::Wake => "woken".into(),
        K::Exiting { code } => format!("do_exit({code}): PF_EXITING set"),
        K::ExitHook { variant } => format!("exit hook ({variant}): pending unwind run before exit_mm()"),
        K::StackCopied { bytes } => format!("{bytes} bytes of user stack copied before exit_mm()"),
        K::ExitMm => "exit_mm(): the task has no user memory any more".into(),
        K::Dead => "dead".into(),
        K::Exec { mm, pc: at, pending } => format!(
            "execve(): mm {} from entry {}{}",
            mm.0,
            pc(*at),
            if *pending { "; a deferred unwind stays pending" } else { "" }
        ),
        K::ZapOtherThreads { why, killed } => {
            let killed: Vec<String> = killed.iter().map(|t| format!("task {t}")).collect();
            format!(
                "{why}: zap_other_threads() kills {}",
                if killed.is_empty() { "none".into() } else { killed.join(", ") }
            )
        }
        K::FatalSignal { code } => format!("get_signal(): fatal signal, do_group_exit({code})"),
        K::DeThread { leader, pid } => format!("de_thread(): leader {leader} gone, takes pid {pid}"),
        K::SframeAdd { sframe, text, error: None } => {
            format!("sframe_add_section(): .sframe at {sframe:#x} for text at {}", pc(*text))
        }
        K::SframeAdd { sframe, text, error: Some(why) } => {
            format!("sframe_add_section() refused .sframe at {sframe:#x} (text {}): {why}", pc(*text))
        }
        K::SframeRemove { sframe, why } => format!("sframe_remove_section({sframe:#x}): {why}"),
        K::Record { tracer, record, bytes } => format!("{tracer} writes {record} ({bytes} bytes)"),
        K::Violation { invariant, detail } => format!("INVARIANT VIOLATED {invariant}: {detail}"),
    }
}

/// A short name of each event kind, for the event list's first column.
fn kind_name(e: &Event) -> String {
    serde_json::to_value(&e.kind)
        .ok()
        .and_then(|v| v.get("event").and_then(Json::as_str).map(str::to_string))
        .unwrap_or_default()
}

/// The label of a state section, and its rank in the panel.
fn section_label(s: Section, works: &[String], tasks: &BTreeMap<Tid, String>) -> (String, u32) {
    match s {
        Section::Unwind => ("deferred.c (global)".into(), 0),
        Section::Work(w) => (format!("tracer {}", works.get(w.0).map_or("?", String::as_str)), 1),
        Section::Task(t) => (format!("task {t} {}", tasks.get(&t).map_or("", String::as_str)), 2),
        Section::Cpu(n) => (format!("CPU {n}"), 3),
        Section::Mm(m) => (format!("mm {}", m.0), 4),
    }
}

/// The rule that found frame `j` (> 0) of a delivered stack: the method,
/// and for SFrame the object's own row at the frame below's PC.
fn rule(method: Method, below: u64, names: &Names<'_>, arch: kmodel::arch::Arch, sframe_first: bool) -> String {
    match method {
        Method::Sframe => {
            let row = names.locate(below).and_then(|l| l.code.and_then(|c| c.sframe_row(l.link)));
            format!("SFrame row: {}", row.unwrap_or_else(|| "a registered section's row".into()))
        }
        Method::Fp if arch == kmodel::arch::Arch::S390x => {
            format!("back chain{}", if sframe_first { " (fallback: no SFrame row)" } else { "" })
        }
        Method::Fp => format!("frame pointer{}", if sframe_first { " (fallback: no SFrame row)" } else { "" }),
    }
}

/// The verdict in words, with the explanation of a stack that is not
/// exact (as `validate` gives it).
fn verdict_words(r: &Report, s: &SampleResult) -> String {
    use crate::verdict::Verdict;
    let what = match &s.verdict {
        Verdict::Exact => "exact: every frame, in order".to_string(),
        Verdict::Truncated { frames, expected } => format!("truncated: {frames} of {expected} frames"),
        Verdict::Wrong { frame, .. } => format!("wrong from frame {frame}"),
        Verdict::Lost { why } => format!("lost: {why}"),
    };
    match crate::explain::explain(r, s) {
        Some(e) => format!("{what}. {} ({})", e.reason, e.cause),
        None => what,
    }
}

/// One sample as the page shows it: its stacks as nodes of `t`.
fn sample_json(r: &Report, s: &SampleResult, at: [Option<usize>; 3], sframe_first: bool, t: &mut Tables) -> Json {
    let names = r.names(s);
    let truth: Vec<(String, Option<String>)> = s.truth.iter().map(|&pc| (names.name(pc), None)).collect();
    let arch = r.scenario.machine.arch;
    let got = s.delivered.as_ref().map(|ips| {
        let frames: Vec<(String, Option<String>)> = ips
            .iter()
            .enumerate()
            .map(|(j, &pc)| {
                let how = match (j, &s.walk) {
                    (0, _) => "the PC, from the registers at kernel entry".to_string(),
                    (_, Some(w)) => w
                        .methods
                        .get(j - 1)
                        .map_or_else(String::new, |&m| rule(m, ips[j - 1], &names, arch, sframe_first)),
                    (_, None) => "walked in the NMI".to_string(),
                };
                (names.name_or_unmapped(pc), Some(how))
            })
            .collect();
        t.stack(&frames)
    });
    json!({
        "n": s.sample, "tracer": s.tracer, "tid": s.at.tid, "cpu": s.cpu,
        "nmi": at[0], "unwind": at[1], "callback": at[2],
        "verdict": s.verdict.kind(), "why": t.string(&verdict_words(r, s)),
        "cookie": s.at.cookie.map(|c| format!("{c:#x}")),
        "truth": t.stack(&truth), "got": got,
        "stop": s.walk.as_ref().map(|w| w.stop.to_string()),
        "cookie_frame": s.cookie_frame(),
    })
}

/// The page's data.
fn data(x: &Explored, tour: &[Step]) -> Json {
    let r = &x.report;
    let events = &r.kernel_events;
    let index: BTreeMap<u64, usize> = events.iter().enumerate().map(|(i, e)| (e.seq, i)).collect();
    let at = |seq: u64| index.get(&seq).copied();
    let works: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Init { work, name, .. } => Some((work.0, name.clone())),
            _ => None,
        })
        .fold(Vec::new(), |mut v, (w, name)| {
            if v.len() <= w {
                v.resize(w + 1, "?".to_string());
            }
            v[w] = name;
            v
        });
    // The samples' events: the NMI (same CPU and time), the walk, the
    // callback of its tracer's work with its cookie.
    let mut nmis: BTreeMap<(usize, u64), usize> = BTreeMap::new();
    let mut callbacks: BTreeMap<(Tid, u64), Vec<usize>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        match &e.kind {
            EventKind::NmiEnter { .. } => {
                nmis.entry((e.cpu, e.time)).or_insert(i);
            }
            EventKind::Callback { cookie, .. } => {
                callbacks.entry((e.tid.unwrap_or(0), cookie.id())).or_default().push(i);
            }
            _ => {}
        }
    }
    let mut tables = Tables::default();
    let mut by_task: BTreeMap<Tid, Vec<(usize, usize)>> = BTreeMap::new();
    let sframe_first = r.scenario.kernel.unwinders().first() == Some(&Method::Sframe);
    let mut samples = Vec::new();
    for (k, s) in r.samples.iter().enumerate() {
        let nmi = nmis.get(&(s.cpu, s.at.time)).copied();
        let unwind = s.at.unwind.and_then(at);
        let callback = s.at.cookie.and_then(|c| {
            let list = callbacks.get(&(s.at.tid, c))?;
            let from = unwind.or(nmi).unwrap_or(0);
            list.iter().copied().find(|&i| i >= from)
        });
        if let Some(i) = nmi {
            by_task.entry(s.at.tid).or_default().push((i, k));
        }
        samples.push(sample_json(r, s, [nmi, unwind, callback], sframe_first, &mut tables));
    }
    for list in by_task.values_mut() {
        list.sort_unstable();
    }
    let namer = Namer { report: r, by_task };
    // Tasks' names, from the state (their `comm`).
    let mut tasks: BTreeMap<Tid, String> = BTreeMap::new();
    for c in &x.changes {
        for ((section, field), value) in &c.cells {
            if let (Section::Task(t), "comm", Some(Value::Text(name))) = (section, *field, value) {
                tasks.insert(*t, name.clone());
            }
        }
    }
    // The state changes, with a key table; code addresses named.
    let mut keys: Vec<Json> = Vec::new();
    let mut key_of: BTreeMap<(Section, &'static str), usize> = BTreeMap::new();
    let mut mm_owner: BTreeMap<usize, Tid> = BTreeMap::new();
    let mut task_mm: BTreeMap<Tid, usize> = BTreeMap::new();
    let mut objects_shown: BTreeMap<usize, String> = BTreeMap::new();
    let nmi_task: BTreeMap<usize, Tid> =
        namer.by_task.iter().flat_map(|(t, list)| list.iter().map(move |&(i, _)| (i, *t))).collect();
    let mut changes: Vec<Json> = vec![json!([]); events.len()];
    // The timeline's lanes: CPU rows first, then a row per task; each
    // lane's current (state, since) and its slices.
    let cpus = r.scenario.machine.cpus;
    let mut cpu_task: Vec<Option<Tid>> = vec![None; cpus];
    let mut cpu_nmi = vec![false; cpus];
    let mut task_state: BTreeMap<Tid, TaskState> = BTreeMap::new();
    let mut lanes: BTreeMap<usize, (String, usize)> = BTreeMap::new();
    let mut slices: Vec<Json> = Vec::new();
    let task_row: BTreeMap<Tid, usize> = tasks.keys().enumerate().map(|(n, t)| (*t, cpus + n)).collect();
    let mut set_lane = |slices: &mut Vec<Json>, row: usize, state: String, i: usize| {
        let (old, since) = lanes.remove(&row).unwrap_or_default();
        if old == state {
            lanes.insert(row, (old, since));
            return;
        }
        if !old.is_empty() && i > since {
            slices.push(json!([row, since, i, old]));
        }
        lanes.insert(row, (state, i));
    };
    for c in &x.changes {
        let Some(i) = at(c.seq) else { continue };
        let mut cells = Vec::new();
        for ((section, field), value) in &c.cells {
            let key = *key_of.entry((*section, field)).or_insert_with(|| {
                let (label, rank) = section_label(*section, &works, &tasks);
                keys.push(json!([label, rank, field]));
                keys.len() - 1
            });
            match (section, value) {
                (Section::Cpu(n), Some(Value::Task(t))) if *n < cpus => cpu_task[*n] = *t,
                (Section::Cpu(n), Some(Value::Flag(on))) if *n < cpus && *field == "NMI" => cpu_nmi[*n] = *on,
                (Section::Task(t), Some(Value::State(s))) => {
                    task_state.insert(*t, *s);
                }
                (Section::Task(t), Some(Value::Text(m))) if *field == "mm" => {
                    if let Some(mm) = m.strip_prefix("mm ").and_then(|m| m.parse().ok()) {
                        mm_owner.insert(mm, *t);
                        task_mm.insert(*t, mm);
                    }
                }
                _ => {}
            }
            let text = |t: &mut Tables, text: &str| json!(t.string(text));
            let shown = value.as_ref().map(|v| match v {
                Value::Text(s) => text(&mut tables, s),
                Value::Flag(on) => text(&mut tables, if *on { "yes" } else { "no" }),
                Value::Task(None) => text(&mut tables, "idle"),
                Value::Task(Some(t)) => {
                    text(&mut tables, &format!("task {t} {}", tasks.get(t).map_or("", String::as_str)))
                }
                Value::State(s) => text(
                    &mut tables,
                    match s {
                        TaskState::User => "user",
                        TaskState::Kernel => "kernel",
                        TaskState::Sleeping => "sleeping in the kernel",
                        TaskState::Dead => "dead",
                    },
                ),
                Value::Code(ips) => match (section, ips.is_empty()) {
                    (Section::Task(t), false) => {
                        let names = namer.names(*t, i);
                        let frames: Vec<(String, Option<String>)> =
                            ips.iter().map(|&pc| (names.name(pc), None)).collect();
                        json!([tables.stack(&frames)])
                    }
                    _ => text(&mut tables, &code_cell(*section, ips, &namer, &mm_owner, i)),
                },
            });
            cells.push(json!([key, shown]));
        }
        // The objects of the sampled task's mm, as the emulator had them
        // mapped at the sample (the lab's, not the kernel's, state).
        if let Some(mm) = nmi_task.get(&i).and_then(|t| task_mm.get(t)) {
            let objects: Vec<String> = namer
                .names(nmi_task[&i], i)
                .objects()
                .iter()
                .map(|(file, start, end)| format!("{file} [{start:#x}, {end:#x})"))
                .collect();
            let text = objects.join(", ");
            if objects_shown.get(mm) != Some(&text) {
                let shown = tables.string(&text);
                let key = *key_of.entry((Section::Mm(kmodel::types::MmId(*mm)), OBJECTS)).or_insert_with(|| {
                    keys.push(json!([format!("mm {mm}"), 4, OBJECTS]));
                    keys.len() - 1
                });
                cells.push(json!([key, shown]));
                objects_shown.insert(*mm, text);
            }
        }
        changes[i] = Json::Array(cells);
        for (n, t) in cpu_task.iter().enumerate() {
            let state = match (cpu_nmi[n], t) {
                (true, _) => "n".to_string(),
                (false, Some(t)) => lane_state(task_state.get(t).copied().unwrap_or(TaskState::Dead)).to_string(),
                (false, None) => String::new(),
            };
            set_lane(&mut slices, n, state, i);
        }
        for (t, row) in &task_row {
            let on_nmi = cpu_task.iter().zip(&cpu_nmi).any(|(c, &nmi)| nmi && *c == Some(*t));
            let state = match task_state.get(t) {
                _ if on_nmi => "n".to_string(),
                Some(s) => lane_state(*s).to_string(),
                None => String::new(),
            };
            set_lane(&mut slices, *row, state, i);
        }
    }
    let end = events.len();
    for row in 0..cpus + task_row.len() {
        set_lane(&mut slices, row, String::new(), end);
    }
    let mut rows: Vec<String> = (0..cpus).map(|n| format!("CPU {n}")).collect();
    rows.extend(task_row.keys().map(|t| format!("task {t} {}", tasks.get(t).map_or("", String::as_str))));
    // Request → callback arrows: each request that will be served, to the
    // first callback of its work, task and cookie after it.
    let mut flows = Vec::new();
    let mut waiting: BTreeMap<(Tid, u64, usize), Vec<usize>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        match &e.kind {
            EventKind::Request { work, ret, cookie, .. } if *ret >= 0 => {
                waiting.entry((e.tid.unwrap_or(0), cookie.id(), work.0)).or_default().push(i);
            }
            EventKind::Callback { work, cookie, .. } => {
                for from in waiting.remove(&(e.tid.unwrap_or(0), cookie.id(), work.0)).unwrap_or_default() {
                    flows.push(json!([from, i]));
                }
            }
            _ => {}
        }
    }
    let work_name = |w: usize| works.get(w).cloned().unwrap_or_else(|| format!("work {w}"));
    let ev: Vec<Json> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let tid = e.tid.unwrap_or(0);
            let names = namer.names(tid, i);
            let pc = |a: u64| names.name(a);
            json!([
                e.seq,
                e.time,
                e.cpu,
                e.tid,
                tables.string(&kind_name(e)),
                tables.string(&words(e, &work_name, &pc))
            ])
        })
        .collect();
    let tour: Vec<Json> =
        tour.iter().map(|s| json!([s.at.and_then(at).unwrap_or(end.saturating_sub(1)), s.text])).collect();
    let backend = match r.scenario.kernel.implementation {
        crate::scenario::KernelImpl::Model => "the lab's model of kernel/unwind/",
        crate::scenario::KernelImpl::KernelC => "the kernel's own deferred.c and user.c",
    };
    json!({
        "title": r.scenario.name,
        "description": r.scenario.description,
        "about": format!("{}, {} CPUs; kernel profile {} ({}); run by {backend}",
            r.scenario.machine.arch, cpus, r.profile, r.parts),
        "keys": keys, "ev": ev, "ch": changes,
        "rows": rows, "slices": slices, "flows": flows,
        "samples": samples, "tour": tour,
        "str": tables.strings, "nodes": tables.nodes,
    })
}

/// A cell of code addresses in words: a task's cached trace, named as the
/// task's latest sample saw its objects; an mm's registered sections, each
/// with the object whose text it covers.
fn code_cell(section: Section, ips: &[u64], namer: &Namer<'_>, mm_owner: &BTreeMap<usize, Tid>, at: usize) -> String {
    match section {
        Section::Mm(m) => {
            let names = namer.names_of_mm(mm_owner, m.0, at);
            let list: Vec<String> = ips
                .chunks(2)
                .map(|r| {
                    let file = names.locate(r[0]).map_or("?", |l| l.file);
                    format!("{file} [{:#x}, {:#x}]", r[0], r.get(1).copied().unwrap_or(0))
                })
                .collect();
            if list.is_empty() {
                "none".into()
            } else {
                list.join(", ")
            }
        }
        Section::Task(_) if ips.is_empty() => "none (nr_entries 0)".into(),
        _ => ips.iter().map(|pc| format!("{pc:#x}")).collect::<Vec<_>>().join(" "),
    }
}
