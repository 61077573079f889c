//! Replaying a log: the scenario is embedded in the log's first line; it is
//! run again and the new log must be identical, line for line. When the
//! run's inputs differ (a host file a guest read changed, vanished, or a
//! new one was read), that is said first, by path: it is the likely cause
//! of any other difference.

use std::collections::BTreeMap;

use crate::report::RunError;
use crate::runner::run;
use crate::scenario::Scenario;

/// The outcome of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
    /// Byte-identical.
    Identical {
        /// Lines compared.
        lines: usize,
    },
    /// The first line that differs (1-based), with both versions.
    Diverged {
        /// Line number.
        line: usize,
        /// In the given log.
        recorded: String,
        /// In the new run.
        replayed: String,
    },
    /// The inputs differ from the logged ones (see [`InputChange`]); the
    /// rest of the log is compared as well, without its input lines.
    InputsChanged {
        /// Every input that differs, in the log's order of guests, then by
        /// path.
        changes: Vec<InputChange>,
        /// The first line (1-based, in the given log) that differs apart
        /// from the inputs, with both versions; `None` if none does.
        diverged: Option<(usize, String, String)>,
    },
}

/// How one input of the run differs from the log's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputChange {
    /// The guest that read it.
    pub guest: String,
    /// Where it comes from: `"host"` (a file under the guest's root) or
    /// `"scenario"` (given in the scenario; only an edited log makes those
    /// differ).
    pub source: String,
    /// Its absolute guest path.
    pub path: String,
    /// Its digest in the log (`None`: the logged run did not read it).
    pub then: Option<String>,
    /// Its digest now (`None`: the replay did not read it).
    pub now: Option<String>,
    /// For a file the replay did not read: whether it is missing now
    /// (under the guest's root), as far as the host can tell.
    pub missing: bool,
}

impl std::fmt::Display for InputChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.source == crate::log::SOURCE_HOST { "host file" } else { "scenario file" };
        write!(f, "{what} {} (guest {}) ", self.path, self.guest)?;
        match (&self.then, &self.now) {
            (Some(then), Some(now)) => {
                write!(f, "changed since the log was written (digest {then} then, {now} now)")
            }
            (Some(then), None) if self.missing => write!(f, "is missing now (digest {then} then)"),
            (Some(then), None) => write!(f, "was not read by the replay (digest {then} then)"),
            (None, Some(now)) => write!(f, "was read by the replay but not by the logged run (digest {now} now)"),
            (None, None) => write!(f, "differs"),
        }
    }
}

/// An input line of a log: (guest, source, path) and digest, if `line` is one.
fn input(line: &str) -> Option<((String, String, String), String)> {
    // Cheap test first: most lines are events.
    if !line.contains("\"input\"") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("event")?.as_str()? != crate::log::INPUT_EVENT {
        return None;
    }
    let field = |name: &str| v.get(name).and_then(|x| x.as_str()).map(str::to_string);
    Some(((field("guest")?, field("source")?, field("path")?), field("digest")?))
}

/// The inputs of `log` by (guest, source, path), and its other lines with
/// their 1-based numbers.
type Inputs<'l> = (BTreeMap<(String, String, String), String>, Vec<(usize, &'l str)>);

fn split_inputs<'l>(log: &[&'l str]) -> Inputs<'l> {
    let mut inputs = BTreeMap::new();
    let mut rest = Vec::new();
    for (i, line) in log.iter().enumerate() {
        match input(line) {
            Some((key, digest)) => {
                inputs.insert(key, digest);
            }
            None => rest.push((i + 1, *line)),
        }
    }
    (inputs, rest)
}

/// The first of `replayed` that differs from `recorded` (numbered as in
/// `recorded`), with both versions.
fn first_difference(recorded: &[(usize, &str)], replayed: &[&str]) -> Option<(usize, String, String)> {
    const END: &str = "(end of log)";
    for (i, new) in replayed.iter().enumerate() {
        match recorded.get(i) {
            Some((_, old)) if old == new => {}
            Some((line, old)) => return Some((*line, old.to_string(), new.to_string())),
            None => {
                let line = recorded.last().map_or(1, |(l, _)| l + 1);
                return Some((line, END.into(), new.to_string()));
            }
        }
    }
    recorded.get(replayed.len()).map(|(line, old)| (*line, old.to_string(), END.into()))
}

/// Why a log cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The log cannot be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The first line is not an unwindlab log header.
    #[error("{file}: line 1 is not an unwindlab log header: {message}")]
    BadHeader {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// Running the embedded scenario failed.
    #[error("{file}: {source}")]
    Run {
        /// The file.
        file: String,
        /// The runner's error.
        source: RunError,
    },
}

/// Reads the log `file` and [`replay`]s it.
pub fn replay_file(file: &str) -> Result<Replay, ReplayError> {
    let log = std::fs::read_to_string(file).map_err(|source| ReplayError::Io { file: file.into(), source })?;
    replay(&log, file)
}

/// Re-runs the scenario recorded in `log` (named `file` in errors).
pub fn replay(log: &str, file: &str) -> Result<Replay, ReplayError> {
    let first = log.lines().next().unwrap_or_default();
    let header: serde_json::Value = serde_json::from_str(first)
        .map_err(|e| ReplayError::BadHeader { file: file.into(), message: e.to_string() })?;
    let scenario = header
        .get("scenario")
        .filter(|_| header.get("unwindlab_log").is_some())
        .ok_or_else(|| ReplayError::BadHeader { file: file.into(), message: "no embedded scenario".into() })?;
    let scenario = Scenario::parse(&scenario.to_string(), file)
        .map_err(|e| ReplayError::BadHeader { file: file.into(), message: e.to_string() })?;
    let report = run(&scenario).map_err(|source| ReplayError::Run { file: file.into(), source })?;
    let recorded: Vec<&str> = log.lines().collect();
    let replayed: Vec<&str> = report.log.iter().map(String::as_str).collect();
    let (then, recorded_rest) = split_inputs(&recorded);
    let (now, replayed_rest) = split_inputs(&replayed);
    if then != now {
        let changes = input_changes(&scenario, &then, &now);
        let replayed_rest: Vec<&str> = replayed_rest.iter().map(|(_, l)| *l).collect();
        return Ok(Replay::InputsChanged { changes, diverged: first_difference(&recorded_rest, &replayed_rest) });
    }
    let numbered: Vec<(usize, &str)> = recorded.iter().enumerate().map(|(i, l)| (i + 1, *l)).collect();
    Ok(match first_difference(&numbered, &replayed) {
        Some((line, recorded, replayed)) => Replay::Diverged { line, recorded, replayed },
        None => Replay::Identical { lines: recorded.len() },
    })
}

/// Every input in `then` (the log's) or `now` (the replay's) that is not
/// the same in both.
fn input_changes(
    scenario: &Scenario,
    then: &BTreeMap<(String, String, String), String>,
    now: &BTreeMap<(String, String, String), String>,
) -> Vec<InputChange> {
    let mut keys: Vec<&(String, String, String)> = then.keys().chain(now.keys()).collect();
    // In the log's order: guests as the scenario lists them, then by source and path.
    let position = |name: &str| scenario.guests.iter().position(|g| g.name == name).unwrap_or(usize::MAX);
    keys.sort_by(|a, b| (position(&a.0), *a).cmp(&(position(&b.0), *b)));
    keys.dedup();
    keys.into_iter()
        .filter(|k| then.get(*k) != now.get(*k))
        .map(|key @ (guest, source, path)| {
            let root = scenario.guests.iter().find(|g| &g.name == guest).and_then(|g| g.root.as_ref());
            let missing = source == crate::log::SOURCE_HOST
                && now.get(key).is_none()
                && root.is_some_and(|r| std::fs::metadata(r.join(path.trim_start_matches('/'))).is_err());
            InputChange {
                guest: guest.clone(),
                source: source.clone(),
                path: path.clone(),
                then: then.get(key).cloned(),
                now: now.get(key).cloned(),
                missing,
            }
        })
        .collect()
}
