//! One self-contained HTML page per run (no network, no scripts): the
//! scenario, the summary, an SVG timeline, every sample's ground truth next
//! to the stack the tracer got, and a flame graph drawn here.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::export::{stacks, timeline};
use crate::report::Report;
use crate::verdict::Verdict;

/// Most samples listed one by one.
pub const MAX_SAMPLES: usize = 200;
const WIDTH: f64 = 1100.0;
const LABEL: f64 = 110.0;
const ROW: f64 = 26.0;

/// `text` escaped for HTML text and attribute values.
pub(crate) fn esc(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The page style every report page shares.
pub(crate) const STYLE: &str =
    "body{font:14px/1.4 DejaVu Sans,Verdana,sans-serif;margin:24px;color:#222;background:#fff}\
h1{font-size:22px}h2{font-size:18px;margin-top:28px}table{border-collapse:collapse}\
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\
.exact{color:#1a7f37}.truncated{color:#9a6700}.wrong{color:#cf222e}.lost{color:#8250df}\
.bad{background:#ffebe9}code{font:12px DejaVu Sans Mono,monospace}svg text{font:11px DejaVu Sans,sans-serif}";

/// Renders the report page.
pub fn report(r: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>unwindlab: {}</title><style>{STYLE}</style></head><body>",
        esc(&r.scenario.name)
    );
    let _ = write!(out, "<h1>unwindlab report: {}</h1><p>{}</p>", esc(&r.scenario.name), esc(&r.scenario.description));
    summary(r, &mut out);
    if !r.failures.is_empty() {
        out.push_str("<h2 id=\"why\">Why stacks were not exact, by function and cause</h2>");
        out.push_str(&failures_table(&r.failures));
    }
    out.push_str("<h2 id=\"timeline\">Timeline</h2>");
    timeline_svg(r, &mut out);
    out.push_str("<h2 id=\"samples\">Samples: ground truth and what the tracer got</h2>");
    samples(r, &mut out);
    out.push_str("<h2 id=\"flame\">Flame graph of the delivered user stacks</h2>");
    flame_svg(r, &mut out);
    out.push_str("</body></html>\n");
    out
}

/// Failure groups as a table, a row per function and cause, every group:
/// samples, truncated, wrong, the example's depth, PC and place, up to
/// eight PCs, and why (rows with wrong stacks marked).
pub(crate) fn failures_table(failures: &[crate::explanation::Failure]) -> String {
    let mut out = String::from(
        "<table><tr><th>samples</th><th>truncated</th><th>wrong</th><th>function</th><th>cause</th>\
         <th>example (depth, PC)</th><th>PCs</th><th>why</th></tr>",
    );
    for f in failures {
        let class = if f.wrong > 0 { " class=\"bad\"" } else { "" };
        let pcs: Vec<String> = f.pcs.iter().take(8).map(|pc| format!("{pc:#x}")).collect();
        let more = if f.pcs.len() > 8 { format!(" … ({} in all)", f.pcs.len()) } else { String::new() };
        let _ = write!(
            out,
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td>\
             <td>frame {} at <code>{:#x}</code> <code>{}</code></td><td><code>{}</code>{more}</td><td>{}</td></tr>",
            f.count,
            f.truncated,
            f.wrong,
            esc(&f.example.function),
            esc(&f.example.cause.to_string()),
            f.example.frame,
            f.example.pc,
            esc(&f.example.place),
            pcs.join(" "),
            esc(&f.example.reason)
        );
    }
    out.push_str("</table>");
    out
}

fn summary(r: &Report, out: &mut String) {
    let s = &r.summary;
    let rows = [
        ("machine", format!("{}, {} CPU(s)", r.scenario.machine.arch, r.scenario.machine.cpus)),
        (
            "kernel",
            format!(
                "profile {}: deferred.c {}, exit path {}",
                r.profile, r.scenario.kernel.version, r.scenario.kernel.exit_path
            ),
        ),
        ("parts", r.parts.to_string()),
        ("registration", registration(r)),
        ("samples", format!("{} taken, {} judged", s.samples, s.judged)),
        ("verdicts", format!("{} exact, {} truncated, {} wrong, {} lost", s.exact, s.truncated, s.wrong, s.lost)),
        ("unwinds", format!("{} in task context, {} page faults taken there", s.unwinds, s.task_faults)),
        ("in-NMI walks that would have faulted", s.nmi_would_fault.to_string()),
        ("perf buffers", format!("{} bytes (copying 8 KiB per sample: {})", s.bytes_written, s.bytes_copy_baseline)),
    ];
    out.push_str("<h2 id=\"summary\">Summary</h2><table>");
    for (k, v) in rows {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v));
    }
    for (why, n) in &s.lost_reasons {
        let _ = write!(out, "<tr><th>lost</th><td>{n}: {}</td></tr>", esc(why));
    }
    for g in &r.guests {
        let end = g.exit.map_or("still in the kernel".to_string(), |c| format!("exit status {c}"));
        let _ =
            write!(out, "<tr><th>guest {}</th><td>{} instructions, {}</td></tr>", esc(&g.name), g.instructions, end);
    }
    out.push_str("</table>");
}

/// The registration interface and what the `.sframe` table saw: sections
/// registered, refused and removed (by any interface, or at the mm's end).
fn registration(r: &Report) -> String {
    use kmodel::event::EventKind;
    if !r.profile.has_sframe() {
        return "none: upstream Linux 7.3 has no .sframe registration".into();
    }
    let (mut added, mut refused, mut removed) = (0, 0, 0);
    for e in &r.kernel_events {
        match &e.kind {
            EventKind::SframeAdd { error: None, .. } => added += 1,
            EventKind::SframeAdd { error: Some(_), .. } => refused += 1,
            EventKind::SframeRemove { .. } => removed += 1,
            _ => {}
        }
    }
    // "SFrame sections", not ".sframe sections": after the separator, the
    // section name's dot read as a stray comma ("exec; ,sframe").
    format!(
        "{}; SFrame sections: {added} registered, {refused} refused, {removed} removed (frames below are named \
         object!function+offset: the object each came from)",
        r.scenario.kernel.registration
    )
}

fn color(name: &str) -> &'static str {
    match name {
        "user" => "#7ab8f5",
        "kernel" => "#f5b97a",
        "sleeping" => "#c9c9c9",
        "NMI" => "#cf222e",
        "request" => "#e36209",
        "callback" => "#1a7f37",
        "migrate" => "#8250df",
        "page faults" => "#0969da",
        "do_exit" | "exit" => "#000000",
        _ => "#888888",
    }
}

fn timeline_svg(r: &Report, out: &mut String) {
    let t = timeline(r);
    let cpus = r.scenario.machine.cpus;
    let rows = cpus + t.tasks.len();
    let height = ROW * rows as f64 + 50.0;
    let span = t.end.max(1) as f64;
    let x = |time: u64| LABEL + (WIDTH - LABEL - 10.0) * time as f64 / span;
    let _ = write!(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\">");
    let row_y = |row: usize| 10.0 + ROW * row as f64;
    for cpu in 0..cpus {
        let _ = write!(out, "<text x=\"4\" y=\"{}\">CPU {cpu}</text>", row_y(cpu) + 15.0);
        let _ = write!(
            out,
            "<line x1=\"{LABEL}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"#ddd\"/>",
            WIDTH - 10.0,
            y = row_y(cpu) + 11.0
        );
    }
    let task_row: BTreeMap<u32, usize> = t.tasks.keys().enumerate().map(|(i, tid)| (*tid, cpus + i)).collect();
    for (tid, name) in &t.tasks {
        let _ = write!(out, "<text x=\"4\" y=\"{}\">task {}</text>", row_y(task_row[tid]) + 15.0, esc(name));
    }
    for s in &t.slices {
        let (x0, x1) = (x(s.start), x(s.end));
        let _ = write!(
            out,
            "<rect x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"18\" fill=\"{}\"><title>{} {}–{}</title></rect>",
            row_y(task_row[&s.tid]) + 2.0,
            (x1 - x0).max(0.5),
            color(s.state),
            s.state,
            s.start,
            s.end
        );
    }
    for f in &t.flows {
        let _ = write!(
            out,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#1a7f37\" stroke-width=\"1\" opacity=\"0.6\"/>",
            x(f.from.1),
            row_y(f.from.0) + 11.0,
            x(f.to.1),
            row_y(f.to.0) + 11.0
        );
    }
    for i in &t.instants {
        let c = color(&i.name);
        if c == "#888888" {
            continue;
        }
        let _ = write!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"2\" height=\"22\" fill=\"{c}\"><title>{} at {}</title></rect>",
            x(i.time),
            row_y(i.cpu),
            esc(&i.name),
            i.time
        );
    }
    let legend = ["user", "kernel", "sleeping", "NMI", "request", "callback", "page faults", "migrate", "do_exit"];
    let ly = height - 18.0;
    for (n, name) in legend.iter().enumerate() {
        let lx = LABEL + n as f64 * 105.0;
        let _ = write!(
            out,
            "<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{ly}\">{name}</text>",
            ly - 9.0,
            color(name),
            lx + 14.0
        );
    }
    out.push_str("</svg>");
}

fn samples(r: &Report, out: &mut String) {
    out.push_str(
        "<table><tr><th>#</th><th>CPU</th><th>instr.</th><th>verdict</th><th>ground truth</th><th>delivered</th></tr>",
    );
    for s in r.samples.iter().take(MAX_SAMPLES) {
        let names = r.names(s);
        let bad_from = match s.verdict {
            Verdict::Wrong { frame, .. } => frame,
            Verdict::Truncated { frames, .. } => frames,
            _ => usize::MAX,
        };
        let list = |ips: &[u64], mark: bool| -> String {
            ips.iter()
                .take(40)
                .enumerate()
                .map(|(i, &pc)| {
                    let class = if mark && i >= bad_from { " class=\"bad\"" } else { "" };
                    format!("<div{class}><code>{pc:#x}</code> {}</div>", esc(&names.name(pc)))
                })
                .collect()
        };
        let where_ = match s.deferred_cpu {
            Some(c) if c != s.cpu => format!("{} → record on CPU {c}", s.cpu),
            _ => s.cpu.to_string(),
        };
        let detail = esc(&s.verdict.to_string());
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{where_}</td><td>{}</td><td class=\"{}\">{detail}</td><td>{}</td><td>{}</td></tr>",
            s.sample,
            s.icount,
            s.verdict.kind(),
            list(&s.truth, true),
            s.cookie_frame().map_or_else(
                || list(s.delivered.as_deref().unwrap_or(&[]), true),
                |c| esc(&format!("{c} (never stitched)"))
            )
        );
    }
    out.push_str("</table>");
    if r.samples.len() > MAX_SAMPLES {
        let _ = write!(out, "<p>… and {} more samples.</p>", r.samples.len() - MAX_SAMPLES);
    }
}

#[derive(Default)]
struct Node {
    count: u64,
    children: BTreeMap<String, Node>,
}

fn flame_svg(r: &Report, out: &mut String) {
    let mut root = Node::default();
    for (frames, n) in stacks(r) {
        root.count += n;
        let mut node = &mut root;
        for f in frames {
            node = node.children.entry(f).or_default();
            node.count += n;
        }
    }
    fn depth(n: &Node) -> usize {
        1 + n.children.values().map(depth).max().unwrap_or(0)
    }
    let levels = depth(&root).min(60);
    let height = 18.0 * levels as f64 + 10.0;
    let _ = write!(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\">");
    /// The flame graph's fixed facts: rows drawn and samples in all.
    struct Scale {
        levels: usize,
        total: u64,
    }
    fn draw(n: &Node, name: &str, (x, w): (f64, f64), level: usize, scale: &Scale, out: &mut String) {
        let (levels, total) = (scale.levels, scale.total);
        if level >= levels || w < 0.5 {
            return;
        }
        let y = 18.0 * (levels - 1 - level) as f64;
        let hue = 10 + (name.bytes().map(u32::from).sum::<u32>() % 50);
        let _ = write!(
            out,
            "<g><title>{} ({} samples, {:.1}%)</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"17\" fill=\"hsl({hue},85%,60%)\"/>",
            esc(name),
            n.count,
            100.0 * n.count as f64 / total.max(1) as f64
        );
        if w > 40.0 {
            let chars = ((w - 6.0) / 6.5) as usize;
            let label: String = name.chars().take(chars).collect();
            let _ = write!(out, "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>", x + 3.0, y + 13.0, esc(&label));
        }
        out.push_str("</g>");
        let mut cx = x;
        for (child, c) in &n.children {
            let cw = w * c.count as f64 / n.count.max(1) as f64;
            draw(c, child, (cx, cw), level + 1, scale, out);
            cx += cw;
        }
    }
    draw(&root, "all", (0.0, WIDTH), 0, &Scale { levels, total: root.count }, out);
    out.push_str("</svg>");
}
