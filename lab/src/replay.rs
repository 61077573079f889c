//! Replaying a log: the scenario is embedded in the log's first line; it is
//! run again and the new log must be identical, line for line.

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
    for (i, replayed) in report.log.iter().enumerate() {
        match recorded.get(i) {
            Some(r) if *r == replayed => {}
            other => {
                return Ok(Replay::Diverged {
                    line: i + 1,
                    recorded: other.map(|s| s.to_string()).unwrap_or_else(|| "(end of log)".into()),
                    replayed: replayed.clone(),
                })
            }
        }
    }
    if recorded.len() > report.log.len() {
        return Ok(Replay::Diverged {
            line: report.log.len() + 1,
            recorded: recorded[report.log.len()].to_string(),
            replayed: "(end of log)".into(),
        });
    }
    Ok(Replay::Identical { lines: recorded.len() })
}
