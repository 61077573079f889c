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
use kmodel::types::{MmId, Tid, WorkId};
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
}

/// Every event in words, in the kernel's terms.
fn words(e: &Event, work: &dyn Fn(WorkId) -> String, pc: &dyn Fn(u64) -> String) -> String {
    use EventKind as K;
    match &e.kind {
        K::Init { name, ret, bit, .. } => match bit {
            Some(b) => format!("unwind_deferred_init({name}) = {ret}: bit {b}"),
            None => format!("unwind_deferred_init({name}) = {ret}"),
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
            format!("unwind_deferred_request({}){place} = {ret} ({what}), cookie {:#x}", work(*w), cookie.id())
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
            format!("callback of {}: cookie {:#x}, {nr} entries", work(*w), cookie.id())
        }
        K::Reset { cookie } => format!("unwind_reset_info(): cookie {:#x} cleared, mask zeroed", cookie.id()),
        K::ResetSkipped => "unwind_reset_info(): PENDING still set, nothing cleared".into(),
        K::Warn { site, what } => format!("WARN in the kernel's code at {site}: {what}"),
        K::CancelBegin { work: w } => format!("unwind_deferred_cancel({}): off the list, bit revoked", work(*w)),
        K::CancelReturn { work: w } => format!("unwind_deferred_cancel({}) returns: SRCU grace period over", work(*w)),
        K::MutexWait { work: w, call } => format!("{call}({}) waits for callback_mutex", work(*w)),
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

/// The names the state gives its sections: each task's `comm`, each
/// tracer's work name (the last each had).
fn section_names(changes: &[StateChange]) -> BTreeMap<Section, String> {
    let mut names = BTreeMap::new();
    for ((section, field), value) in changes.iter().flat_map(|c| &c.cells) {
        if let ("comm" | "name", Some(Value::Text(name))) = (*field, value) {
            names.insert(*section, name.clone());
        }
    }
    names
}

/// The label of a state section, and its rank in the panel.
fn section_label(s: Section, names: &BTreeMap<Section, String>) -> (String, u32) {
    let name = names.get(&s).map_or("", String::as_str);
    match s {
        Section::Unwind => ("deferred.c (global)".into(), 0),
        Section::Work(_) => (format!("tracer {name}"), 1),
        Section::Task(t) => (format!("task {t} {name}"), 2),
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
        Method::Fp if arch.back_chain().is_some() => {
            format!("back chain{}", if sframe_first { " (fallback: no SFrame row)" } else { "" })
        }
        Method::Fp => format!("frame pointer{}", if sframe_first { " (fallback: no SFrame row)" } else { "" }),
    }
}

/// The verdict in words, with the explanation of a stack that is not
/// exact (as `validate` gives it).
fn verdict_words(r: &Report, s: &SampleResult) -> String {
    match crate::explain::explain(r, s) {
        Some(e) => format!("{}. {} ({})", s.verdict, e.reason, e.cause),
        None => s.verdict.to_string(),
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
    let names = section_names(&x.changes);
    let mut tables = Tables::default();
    let (samples, namer) = samples(r, &at, &mut tables);
    let cpus = r.scenario.machine.cpus;
    let tasks: Vec<Tid> = names.keys().filter_map(|s| if let Section::Task(t) = s { Some(*t) } else { None }).collect();
    let mut states = States::new(&names, &namer, &mut tables);
    let mut lanes = Lanes::new(cpus, &tasks);
    let mut changes: Vec<Json> = vec![json!([]); events.len()];
    for c in &x.changes {
        let Some(i) = at(c.seq) else { continue };
        changes[i] = Json::Array(states.change(c, i));
        lanes.after(&states, i);
    }
    let slices = lanes.finish(events.len());
    let mut rows: Vec<String> = (0..cpus).map(|n| format!("CPU {n}")).collect();
    rows.extend(tasks.iter().map(|&t| section_label(Section::Task(t), &names).0));
    let flows: Vec<Json> = crate::export::timeline(r).flows.iter().map(|f| json!([f.events.0, f.events.1])).collect();
    let States { keys, tables, .. } = states;
    let work_name = |w: WorkId| names.get(&Section::Work(w)).cloned().unwrap_or_else(|| format!("work {}", w.0));
    let ev: Vec<Json> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let names = namer.names(e.tid.unwrap_or(0), i);
            let words = words(e, &work_name, &|pc| names.name(pc));
            json!([e.seq, e.time, e.cpu, e.tid, tables.string(&kind_name(e)), tables.string(&words)])
        })
        .collect();
    let last = events.len().saturating_sub(1);
    let tour: Vec<Json> = tour.iter().map(|s| json!([s.at.and_then(at).unwrap_or(last), s.text])).collect();
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

/// The samples as the page shows them, each with the event indices of its
/// NMI, its walk and its callback; and the namer their moments make.
fn samples<'r>(r: &'r Report, at: &dyn Fn(u64) -> Option<usize>, tables: &mut Tables) -> (Vec<Json>, Namer<'r>) {
    let mut callbacks: BTreeMap<(Tid, u64), Vec<usize>> = BTreeMap::new();
    for (i, e) in r.kernel_events.iter().enumerate() {
        if let EventKind::Callback { cookie, .. } = &e.kind {
            callbacks.entry((e.tid.unwrap_or(0), cookie.id())).or_default().push(i);
        }
    }
    let sframe_first = r.scenario.kernel.unwinders().first() == Some(&Method::Sframe);
    let mut by_task: BTreeMap<Tid, Vec<(usize, usize)>> = BTreeMap::new();
    let mut out = Vec::new();
    for (k, s) in r.samples.iter().enumerate() {
        let nmi = at(s.at.nmi);
        let unwind = s.at.unwind.and_then(at);
        // Its callback: the first of its task and cookie after its walk.
        let callback = s.at.cookie.and_then(|c| {
            let from = unwind.or(nmi).unwrap_or(0);
            callbacks.get(&(s.at.tid, c))?.iter().copied().find(|&i| i >= from)
        });
        if let Some(i) = nmi {
            by_task.entry(s.at.tid).or_default().push((i, k));
        }
        out.push(sample_json(r, s, [nmi, unwind, callback], sframe_first, tables));
    }
    for list in by_task.values_mut() {
        list.sort_unstable();
    }
    (out, Namer { report: r, by_task })
}

/// The state cells as the page holds them: a key table, every value in
/// words (code named as the task's samples saw it), and the objects of
/// each mm, which the emulator knows (read at each sample).
struct States<'a, 'r> {
    names: &'a BTreeMap<Section, String>,
    namer: &'a Namer<'r>,
    tables: &'a mut Tables,
    /// `[section label, rank, field]` per key.
    keys: Vec<Json>,
    key_of: BTreeMap<(Section, &'static str), usize>,
    /// Per task its mm, and per mm the last task seen with it.
    task_mm: BTreeMap<Tid, MmId>,
    mm_owner: BTreeMap<MmId, Tid>,
    /// Per mm the objects last shown.
    objects: BTreeMap<MmId, String>,
    /// Per CPU its current task and whether it is in an NMI; per task
    /// where it is: what the timeline's lanes read.
    cpu_task: BTreeMap<usize, Option<Tid>>,
    cpu_nmi: BTreeMap<usize, bool>,
    task_state: BTreeMap<Tid, TaskState>,
    /// The NMI events of samples, with their task.
    nmi_task: BTreeMap<usize, Tid>,
}

impl<'a, 'r> States<'a, 'r> {
    fn new(names: &'a BTreeMap<Section, String>, namer: &'a Namer<'r>, tables: &'a mut Tables) -> Self {
        let nmi_task = namer.by_task.iter().flat_map(|(t, list)| list.iter().map(move |&(i, _)| (i, *t))).collect();
        States {
            names,
            namer,
            tables,
            keys: Vec::new(),
            key_of: BTreeMap::new(),
            task_mm: BTreeMap::new(),
            mm_owner: BTreeMap::new(),
            objects: BTreeMap::new(),
            cpu_task: BTreeMap::new(),
            cpu_nmi: BTreeMap::new(),
            task_state: BTreeMap::new(),
            nmi_task,
        }
    }

    /// The key of a cell, given one the first time it is seen.
    fn key(&mut self, section: Section, field: &'static str) -> usize {
        let (keys, names) = (&mut self.keys, self.names);
        *self.key_of.entry((section, field)).or_insert_with(|| {
            let (label, rank) = section_label(section, names);
            keys.push(json!([label, rank, field]));
            keys.len() - 1
        })
    }

    /// Change `c` (of event `i`) as the page's `[key, value]` pairs.
    fn change(&mut self, c: &StateChange, i: usize) -> Vec<Json> {
        let mut cells = Vec::new();
        for ((section, field), value) in &c.cells {
            let key = self.key(*section, field);
            let shown = value.as_ref().map(|v| self.shown(*section, v, i));
            cells.push(json!([key, shown]));
        }
        // The objects of the sampled task's mm, as the emulator had them
        // mapped at the sample (the lab's, not the kernel's, state).
        if let Some((&task, &mm)) = self.nmi_task.get(&i).and_then(|t| Some((t, self.task_mm.get(t)?))) {
            let objects: Vec<String> = (self.namer.names(task, i).objects().iter())
                .map(|(file, start, end)| format!("{file} [{start:#x}, {end:#x})"))
                .collect();
            let text = objects.join(", ");
            if self.objects.get(&mm) != Some(&text) {
                let key = self.key(Section::Mm(mm), OBJECTS);
                cells.push(json!([key, self.tables.string(&text)]));
                self.objects.insert(mm, text);
            }
        }
        cells
    }

    /// A value in words (an index in the string table), or a stack of
    /// code (`[node]`); what the lanes read is noted on the way.
    fn shown(&mut self, section: Section, value: &Value, i: usize) -> Json {
        let text = match (section, value) {
            (_, Value::Text(s)) => s.clone(),
            (Section::Cpu(n), Value::Flag(on)) => {
                self.cpu_nmi.insert(n, *on);
                if *on { "yes" } else { "no" }.to_string()
            }
            (_, Value::Flag(on)) => if *on { "yes" } else { "no" }.to_string(),
            (section, Value::Task(t)) => {
                if let Section::Cpu(n) = section {
                    self.cpu_task.insert(n, *t);
                }
                t.map_or("idle".into(), |t| section_label(Section::Task(t), self.names).0)
            }
            (section, Value::State(s)) => {
                if let Section::Task(t) = section {
                    self.task_state.insert(t, *s);
                }
                match s {
                    TaskState::User => "user",
                    TaskState::Kernel => "kernel",
                    TaskState::Sleeping => "sleeping in the kernel",
                    TaskState::Dead => "dead",
                }
                .to_string()
            }
            (section, Value::Mm(mm)) => {
                if let (Section::Task(t), Some(mm)) = (section, mm) {
                    self.task_mm.insert(t, *mm);
                    self.mm_owner.insert(*mm, t);
                }
                mm.map_or("none".into(), |m| format!("mm {}", m.0))
            }
            (Section::Task(t), Value::Code(ips)) if !ips.is_empty() => {
                let names = self.namer.names(t, i);
                let frames: Vec<(String, Option<String>)> = ips.iter().map(|&pc| (names.name(pc), None)).collect();
                return json!([self.tables.stack(&frames)]);
            }
            (_, Value::Code(ips)) if ips.is_empty() => "none (nr_entries 0)".into(),
            (_, Value::Code(ips)) => ips.iter().map(|pc| format!("{pc:#x}")).collect::<Vec<_>>().join(" "),
            (section, Value::Texts(texts)) => {
                let names = match section {
                    Section::Mm(mm) => self.mm_owner.get(&mm).map_or_else(Names::none, |&t| self.namer.names(t, i)),
                    _ => Names::none(),
                };
                let list: Vec<String> = texts
                    .iter()
                    .map(|&(start, end)| {
                        let file = names.locate(start).map_or("?", |l| l.file);
                        format!("{file} [{start:#x}, {end:#x}]")
                    })
                    .collect();
                if list.is_empty() {
                    "none".into()
                } else {
                    list.join(", ")
                }
            }
        };
        json!(self.tables.string(&text))
    }
}

/// The timeline's lanes: a row per CPU (what its current task does, or
/// NMI), then one per task (where it is, or NMI while one is on its CPU);
/// each row's open slice and the slices closed, in event indices.
struct Lanes {
    cpus: usize,
    /// Task rows, after the CPUs'.
    rows: BTreeMap<Tid, usize>,
    /// Per row its state letter and since when (empty: nothing shown).
    open: Vec<(&'static str, usize)>,
    slices: Vec<Json>,
}

impl Lanes {
    fn new(cpus: usize, tasks: &[Tid]) -> Self {
        let rows: BTreeMap<Tid, usize> = tasks.iter().enumerate().map(|(n, t)| (*t, cpus + n)).collect();
        Lanes { cpus, open: vec![("", 0); cpus + rows.len()], rows, slices: Vec::new() }
    }

    /// Row `row` is in `state` from event `i` on.
    fn set(&mut self, row: usize, state: &'static str, i: usize) {
        let (old, since) = self.open[row];
        if old == state {
            return;
        }
        if !old.is_empty() && i > since {
            self.slices.push(json!([row, since, i, old]));
        }
        self.open[row] = (state, i);
    }

    /// The rows after event `i`, from what `s` knows then.
    fn after(&mut self, s: &States<'_, '_>, i: usize) {
        let state = |t: Tid| lane_state(s.task_state.get(&t).copied().unwrap_or(TaskState::Dead));
        let on_nmi = |n: usize| s.cpu_nmi.get(&n).copied().unwrap_or(false);
        for n in 0..self.cpus {
            let current = s.cpu_task.get(&n).copied().flatten();
            self.set(n, if on_nmi(n) { "n" } else { current.map_or("", state) }, i);
        }
        let rows: Vec<(Tid, usize)> = self.rows.iter().map(|(t, r)| (*t, *r)).collect();
        for (t, row) in rows {
            let nmi = (0..self.cpus).any(|n| on_nmi(n) && s.cpu_task.get(&n).copied().flatten() == Some(t));
            let known = s.task_state.contains_key(&t);
            self.set(
                row,
                if nmi {
                    "n"
                } else if known {
                    state(t)
                } else {
                    ""
                },
                i,
            );
        }
    }

    /// Every slice, the open ones closed at `end`.
    fn finish(mut self, end: usize) -> Vec<Json> {
        for row in 0..self.open.len() {
            self.set(row, "", end);
        }
        self.slices
    }
}
