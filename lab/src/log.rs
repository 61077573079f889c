//! The run's JSON Lines log: a header with the scenario, the kernel
//! model's events with the lab's own lines (samples and their ground
//! truth) in between, and the summary last. [`replay`](crate::replay)
//! compares it line for line.

use kmodel::event::Event;

use crate::report::Summary;
use crate::scenario::Scenario;

/// The line logged for a sample taken: the ground truth at the NMI.
pub(crate) fn sample_line(sample: u64, guest: &str, cpu: usize, icount: u64, truth: &[u64]) -> String {
    serde_json::json!({"event": "sample", "sample": sample, "guest": guest, "cpu": cpu,
        "icount": icount, "truth": truth.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>()})
    .to_string()
}

/// The whole log: `extra` lines go before the event of their index (after
/// the last event if none has it).
pub(crate) fn lines(
    scenario: &Scenario,
    events: &[Event],
    extra: &[(usize, String)],
    summary: &Summary,
) -> Vec<String> {
    let mut lines = vec![serde_json::json!({"unwindlab_log": 1, "scenario": scenario}).to_string()];
    let mut extra = extra.iter().peekable();
    for (i, e) in events.iter().enumerate() {
        while let Some((_, line)) = extra.next_if(|(at, _)| *at == i) {
            lines.push(line.clone());
        }
        lines.push(serde_json::to_string(e).unwrap_or_default());
    }
    lines.extend(extra.map(|(_, l)| l.clone()));
    lines.push(serde_json::json!({"summary": summary}).to_string());
    lines
}
