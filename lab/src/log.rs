//! The run's JSON Lines log: a header with the scenario, the run's inputs
//! (one line per file a guest was given or read from the host, with its
//! digest; none when there are none), the kernel model's events with the
//! lab's own lines (samples and their ground truth) in between, and the
//! summary last. [`replay`](crate::replay) compares it line for line, and
//! the input lines by path first, to say which input changed.

use kmodel::event::Event;

use crate::report::Summary;
use crate::scenario::Scenario;

/// The thread a sample hit: its process and thread IDs in the emulator,
/// and its task in the kernel model.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thread {
    pub(crate) pid: emu::Pid,
    pub(crate) tid: emu::Tid,
    pub(crate) task: kmodel::types::Tid,
}

/// The line logged for a sample taken: the thread it hit and its ground
/// truth at the NMI.
pub(crate) fn sample_line(sample: u64, guest: &str, cpu: usize, icount: u64, thread: Thread, truth: &[u64]) -> String {
    serde_json::json!({"event": "sample", "sample": sample, "guest": guest, "cpu": cpu,
        "pid": thread.pid, "thread": thread.tid, "task": thread.task,
        "icount": icount, "truth": truth.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>()})
    .to_string()
}

/// The value of `"event"` in an input line.
pub(crate) const INPUT_EVENT: &str = "input";
/// The `"source"` of a file the scenario gave a guest.
pub(crate) const SOURCE_SCENARIO: &str = "scenario";
/// The `"source"` of a host file a guest read (under its `root`).
pub(crate) const SOURCE_HOST: &str = "host";

/// The line logged for an input of guest `guest`: a file at guest path
/// `path` from `source` ([`SOURCE_SCENARIO`] or [`SOURCE_HOST`]) whose
/// contents have FNV-1a digest `digest` (fixed width: it is a digest, not
/// a number to read).
pub(crate) fn input_line(guest: &str, source: &str, path: &str, digest: u64) -> String {
    serde_json::json!({"event": INPUT_EVENT, "guest": guest, "source": source, "path": path,
        "digest": format!("{digest:#018x}")})
    .to_string()
}

/// The whole log: `inputs` lines right after the header, `extra` lines
/// before the event of their index (after the last event if none has it).
pub(crate) fn lines(
    scenario: &Scenario,
    inputs: &[String],
    events: &[Event],
    extra: &[(usize, String)],
    summary: &Summary,
) -> Vec<String> {
    let mut lines = vec![serde_json::json!({"unwindlab_log": 1, "scenario": scenario}).to_string()];
    lines.extend(inputs.iter().cloned());
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
