//! The differential run: one scenario on the kernel model and on the
//! kernel's own `kernel/unwind/` code (`kernel.impl` `model` and
//! `kernel-c`), with the same emulator, guests and tracers, compared event
//! by event and sample by sample. The first difference is reported with
//! the event, the field and both values; otherwise the runs are identical.
//!
//! Compared: every kernel event (its kind, fields, CPU, task and time) but
//! the kernel C's `WARN`s and the invariant checks' verdicts, which are
//! reported beside, and an `unwind` event's `stop`, since `user.c` does not
//! say why it stops; then every sample's delivered stack and verdict.

use std::path::Path;

use serde_json::Value;

use crate::report::{Report, RunError};
use crate::scenario::{KernelImpl, Scenario};

/// Where two runs first differ.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    /// What differs: `event 42` (the 42nd compared event, from 0) or
    /// `sample 7`.
    pub at: String,
    /// The event kind or sample field (`callback`, `verdict`).
    pub what: String,
    /// The field that differs (`cookie`, `nr`, `event` for the kind).
    pub field: String,
    /// The model's value (`(none)` past the end of its log).
    pub model: String,
    /// The kernel C's value.
    pub kernel_c: String,
    /// The model's event around it, in full, for context.
    pub model_event: String,
    /// The kernel C's event, in full.
    pub kernel_c_event: String,
}

/// The outcome of a differential run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The same events and samples.
    Identical {
        /// Events compared.
        events: usize,
        /// Samples compared.
        samples: usize,
        /// The kernel C's warnings (`WARN*()` and undefined behaviour), in
        /// words.
        warnings: Vec<String>,
    },
    /// The first difference.
    Differs {
        /// Where and what.
        difference: Box<Difference>,
        /// The kernel C's warnings up to the end of its run.
        warnings: Vec<String>,
    },
}

/// Runs `scenario` on both implementations (the kernel C from `tree`, or
/// the scenario's tree, or the cached Debian one) and compares them.
pub fn kernel_diff(scenario: &Scenario, tree: Option<&Path>) -> Result<Outcome, RunError> {
    let mut model = scenario.clone();
    model.kernel.implementation = KernelImpl::Model;
    let mut c = scenario.clone();
    c.kernel.implementation = KernelImpl::KernelC;
    if let Some(tree) = tree {
        c.kernel.kernel_tree = Some(tree.to_path_buf());
    }
    let m = crate::runner::run(&model)?;
    let k = crate::runner::run(&c)?;
    Ok(compare(&m, &k))
}

/// The events of a report as compared: JSON objects without `seq` (a
/// warning takes a number too), without what is not compared.
fn compared_events(r: &Report) -> Vec<Value> {
    r.kernel_events
        .iter()
        .filter_map(|e| {
            let mut v = serde_json::to_value(e).ok()?;
            let obj = v.as_object_mut()?;
            match obj.get("event").and_then(Value::as_str) {
                Some("warn" | "violation") => return None,
                Some("unwind") => {
                    obj.remove("stop");
                }
                _ => {}
            }
            obj.remove("seq");
            Some(v)
        })
        .collect()
}

/// The kernel C's warnings in a report's events.
fn warnings(r: &Report) -> Vec<String> {
    r.kernel_events
        .iter()
        .filter_map(|e| match &e.kind {
            kmodel::event::EventKind::Warn { site, what } => Some(format!("event {}: {what}: {site}", e.seq)),
            _ => None,
        })
        .collect()
}

/// Compares a model report with a kernel C report of the same scenario.
pub fn compare(model: &Report, c: &Report) -> Outcome {
    let warnings = warnings(c);
    let (me, ce) = (compared_events(model), compared_events(c));
    for i in 0..me.len().max(ce.len()) {
        let (a, b) = (me.get(i), ce.get(i));
        if a == b {
            continue;
        }
        let difference = Box::new(event_difference(i, a, b));
        return Outcome::Differs { difference, warnings };
    }
    for (a, b) in model.samples.iter().zip(&c.samples) {
        let fields = [
            ("delivered", serde_json::to_string(&a.delivered), serde_json::to_string(&b.delivered)),
            ("verdict", serde_json::to_string(&a.verdict), serde_json::to_string(&b.verdict)),
        ];
        for (field, x, y) in fields {
            let (x, y) = (x.unwrap_or_default(), y.unwrap_or_default());
            if x != y {
                let difference = Box::new(Difference {
                    at: format!("sample {}", a.sample),
                    what: "sample".into(),
                    field: field.into(),
                    model: x.clone(),
                    kernel_c: y.clone(),
                    model_event: x,
                    kernel_c_event: y,
                });
                return Outcome::Differs { difference, warnings };
            }
        }
    }
    if model.samples.len() != c.samples.len() {
        let difference = Box::new(Difference {
            at: "samples".into(),
            what: "sample".into(),
            field: "count".into(),
            model: model.samples.len().to_string(),
            kernel_c: c.samples.len().to_string(),
            model_event: String::new(),
            kernel_c_event: String::new(),
        });
        return Outcome::Differs { difference, warnings };
    }
    Outcome::Identical { events: me.len(), samples: model.samples.len(), warnings }
}

/// The first field in which two compared events differ.
fn event_difference(i: usize, a: Option<&Value>, b: Option<&Value>) -> Difference {
    let kind =
        |v: Option<&Value>| v.and_then(|v| v.get("event")).and_then(Value::as_str).unwrap_or("(none)").to_string();
    let full = |v: Option<&Value>| v.map_or_else(|| "(none: the log ends)".to_string(), Value::to_string);
    let (field, x, y) = match (a.and_then(Value::as_object), b.and_then(Value::as_object)) {
        (Some(x), Some(y)) if kind(a) == kind(b) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            let key = keys.into_iter().find(|k| x.get(*k) != y.get(*k)).cloned().unwrap_or_default();
            let show =
                |o: &serde_json::Map<String, Value>| o.get(&key).map_or("(absent)".to_string(), Value::to_string);
            (key.clone(), show(x), show(y))
        }
        _ => ("event".to_string(), kind(a), kind(b)),
    };
    Difference {
        at: format!("event {i}"),
        what: if kind(a) == "(none)" { kind(b) } else { kind(a) },
        field,
        model: x,
        kernel_c: y,
        model_event: full(a),
        kernel_c_event: full(b),
    }
}

impl std::fmt::Display for Outcome {
    /// `identical: 812 events, 40 samples` or the difference in three lines.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Identical { events, samples, warnings } => {
                write!(f, "identical: {events} kernel events, {samples} samples")?;
                if !warnings.is_empty() {
                    write!(f, "; the kernel C warned {} time(s): {}", warnings.len(), warnings.join("; "))?;
                }
                Ok(())
            }
            Outcome::Differs { difference: d, warnings } => {
                writeln!(
                    f,
                    "differs at {}, {} event, field {}: model {}, kernel C {}",
                    d.at, d.what, d.field, d.model, d.kernel_c
                )?;
                writeln!(f, "  model:    {}", d.model_event)?;
                write!(f, "  kernel C: {}", d.kernel_c_event)?;
                if !warnings.is_empty() {
                    write!(f, "\n  the kernel C warned: {}", warnings.join("; "))?;
                }
                Ok(())
            }
        }
    }
}
