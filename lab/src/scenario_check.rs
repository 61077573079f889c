//! What the scenario format's types cannot check: references between its
//! parts, ranges, the limits a hostile file could exceed (files, paths,
//! ftrace instances), ordering, and what the chosen profile lacks
//! ([`Scenario::validate`]). Every refusal names the JSON path.

use std::collections::BTreeMap;

use crate::scenario::{
    Action, Guest, SampleOn, Scenario, ScenarioError, Tracer, MAX_FILES, MAX_FILES_BYTES, MAX_FILE_BYTES,
    MAX_FTRACE_INSTANCES,
};

/// Longest guest path: Linux's `PATH_MAX` less its NUL.
const MAX_PATH: usize = 4095;
/// Longest name in a guest path: Linux's `NAME_MAX`.
const MAX_NAME: usize = 255;

/// Why `path` is not a usable guest path, if it is not: it must be
/// non-empty, without NUL, within Linux's limits, and normalised (no empty,
/// `.` or `..` component, no trailing `/` except for `/` itself), so that
/// the name in the scenario is the name the guest sees and the log records.
fn guest_path_problem(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("expected a path, got an empty string".into());
    }
    if path.contains('\0') {
        return Some(format!("path {path:?} contains a NUL byte"));
    }
    if path.len() > MAX_PATH {
        return Some(format!("path is {} bytes long, more than Linux's {MAX_PATH}", path.len()));
    }
    if path == "/" {
        return None;
    }
    let rest = path.strip_prefix('/').unwrap_or(path);
    for name in rest.split('/') {
        if name.is_empty() || name == "." || name == ".." {
            return Some(format!(
                "path {path:?} is not normalised (an empty, \".\" or \"..\" component, or a trailing \"/\")"
            ));
        }
        if name.len() > MAX_NAME {
            return Some(format!("path {path:?} has a name longer than Linux's {MAX_NAME} bytes"));
        }
    }
    None
}

/// The rules every tracer follows, whether registered before the guests
/// start or by an event: `at` is its JSON path, `names` the tracer names
/// seen so far (this one is added). Errors are (JSON path, message).
fn check_tracer<'s>(
    t: &'s Tracer,
    at: &str,
    names: &mut Vec<&'s str>,
    guest: &dyn Fn(&str) -> bool,
) -> Result<(), (String, String)> {
    if names.contains(&t.name()) {
        return Err((format!("{at}.name"), format!("duplicate tracer name {:?}", t.name())));
    }
    names.push(t.name());
    match t {
        Tracer::Perf { period: 0, .. } => {
            Err((format!("{at}.period"), "expected a period of at least 1 instruction".into()))
        }
        Tracer::Perf { task: Some(task), .. } if !guest(task) => {
            Err((format!("{at}.task"), format!("no guest named {task:?}")))
        }
        Tracer::Perf { task: None, inherit: false, .. } => Err((
            format!("{at}.inherit"),
            "inheritance is a task-bound session's (`task`); a CPU-wide one sees every task".into(),
        )),
        Tracer::Perf { event: SampleOn::Uprobe(function), .. } if function.is_empty() => {
            Err((format!("{at}.event.uprobe"), "expected a function name".into()))
        }
        Tracer::Ftrace { instances, .. } if *instances > MAX_FTRACE_INSTANCES => Err((
            format!("{at}.instances"),
            format!("expected at most {MAX_FTRACE_INSTANCES} instances, got {instances}"),
        )),
        _ => Ok(()),
    }
}

/// The rules for a guest's `files`, `cwd` and `root` (`at` is its JSON
/// path). Errors are (JSON path, message).
fn check_files(g: &Guest, at: &str) -> Result<(), (String, String)> {
    if let Some(cwd) = &g.cwd {
        let problem = guest_path_problem(cwd)
            .or_else(|| (!cwd.starts_with('/')).then(|| format!("expected an absolute guest path, got {cwd:?}")));
        if let Some(message) = problem {
            return Err((format!("{at}.cwd"), message));
        }
    }
    if let Some(root) = &g.root {
        if root.as_os_str().is_empty() {
            return Err((format!("{at}.root"), "expected a host directory, got an empty string".into()));
        }
        if root.as_os_str().as_encoded_bytes().contains(&0) {
            return Err((format!("{at}.root"), format!("path {:?} contains a NUL byte", root.display())));
        }
    }
    if g.files.len() > MAX_FILES {
        return Err((format!("{at}.files"), format!("expected at most {MAX_FILES} files, got {}", g.files.len())));
    }
    let mut total = 0;
    // Absolute path → the name the scenario gave it.
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (path, contents) in &g.files {
        let here = format!("{at}.files[{path:?}]");
        if let Some(message) = guest_path_problem(path) {
            return Err((here, message));
        }
        if path == "/" {
            return Err((here, "\"/\" is a directory, not a file".into()));
        }
        if contents.len() > MAX_FILE_BYTES {
            return Err((here, format!("{} bytes, more than the {MAX_FILE_BYTES} a file may have", contents.len())));
        }
        total += contents.len();
        if total > MAX_FILES_BYTES {
            return Err((here, format!("the files come to more than the {MAX_FILES_BYTES} bytes one guest may have")));
        }
        let abs = g.file_path(path);
        if abs.len() > MAX_PATH {
            return Err((here, format!("its absolute path is {} bytes long, more than Linux's {MAX_PATH}", abs.len())));
        }
        if let Some(other) = seen.get(&abs) {
            return Err((here, format!("the same file as {other:?} ({abs})")));
        }
        if g.cwd.as_deref() == Some(abs.as_str()) {
            return Err((here, format!("{abs} is the working directory, not a file")));
        }
        seen.insert(abs, path);
    }
    // A file that is also the directory of another: the emulator would
    // silently make it a directory. In sorted order the first path at or
    // after "{abs}/" is inside it if any is ("/a/b" sorts after "/a/",
    // whereas "/a.txt" sorts before it).
    for (abs, path) in &seen {
        let dir = format!("{abs}/");
        if let Some((inner, _)) = seen.range(dir.clone()..).next().filter(|(p, _)| p.starts_with(&dir)) {
            return Err((format!("{at}.files[{path:?}]"), format!("{abs} is a file, but {inner} is given inside it")));
        }
        if let Some(cwd) = g.cwd.as_deref().filter(|c| c.starts_with(&dir)) {
            return Err((
                format!("{at}.files[{path:?}]"),
                format!("{abs} is a file, but the working directory {cwd} is inside it"),
            ));
        }
    }
    Ok(())
}

impl Scenario {
    /// Checks what the types cannot: references, ranges, ordering.
    pub fn validate(&self, file: &str) -> Result<(), ScenarioError> {
        let bad = |path: String, message: String| Err(ScenarioError::Invalid { file: file.to_string(), path, message });
        if self.machine.cpus == 0 || self.machine.cpus > 64 {
            return bad("machine.cpus".into(), format!("expected 1 to 64 CPUs, got {}", self.machine.cpus));
        }
        if self.guests.is_empty() {
            return bad("guests".into(), "expected at least one guest".into());
        }
        let guest = |name: &str| self.guests.iter().any(|g| g.name == name);
        for (i, g) in self.guests.iter().enumerate() {
            if g.cpu >= self.machine.cpus {
                return bad(
                    format!("guests[{i}].cpu"),
                    format!("CPU {} does not exist ({} CPUs)", g.cpu, self.machine.cpus),
                );
            }
            if self.guests[..i].iter().any(|o| o.name == g.name) {
                return bad(format!("guests[{i}].name"), format!("duplicate guest name {:?}", g.name));
            }
            if let Err((path, message)) = check_files(g, &format!("guests[{i}]")) {
                return bad(path, message);
            }
        }
        let mut tracers: Vec<&str> = Vec::new();
        for (i, t) in self.tracers.iter().enumerate() {
            if let Err((path, message)) = check_tracer(t, &format!("tracers[{i}]"), &mut tracers, &guest) {
                return bad(path, message);
            }
        }
        if self.kernel.unwinders().is_empty() {
            return bad("kernel.unwinders".into(), "expected at least one unwinder".into());
        }
        let mut last = 0;
        for (i, e) in self.events.iter().enumerate() {
            if e.at < last {
                return bad(format!("events[{i}].at"), format!("events must be in time order ({} < {last})", e.at));
            }
            last = e.at;
            let task = match &e.action {
                Action::Migrate { task, cpu, .. } => {
                    if *cpu >= self.machine.cpus {
                        return bad(format!("events[{i}].cpu"), format!("CPU {cpu} does not exist"));
                    }
                    Some(task)
                }
                Action::Evict { task, .. } | Action::SlowSyscall { task, .. } | Action::Signal { task, .. } => {
                    Some(task)
                }
                Action::AtPoint { task, point, strike } => {
                    let Some(named) = kmodel::interleave::Point::named(point) else {
                        let names: Vec<String> =
                            kmodel::interleave::Point::ALL.iter().filter_map(|p| p.name()).collect();
                        return bad(
                            format!("events[{i}].point"),
                            format!("no point named {point:?} (the points: {})", names.join(", ")),
                        );
                    };
                    if self.kernel.implementation == crate::scenario::KernelImpl::KernelC
                        && named.upstream_site().is_none()
                    {
                        return bad(
                            format!("events[{i}].point"),
                            format!("{point}: the kernel's own code has no primitive there (kernel.impl kernel-c)"),
                        );
                    }
                    match strike {
                        crate::scenario::Strike::Cancel(tracer) if !tracers.contains(&tracer.as_str()) => {
                            return bad(format!("events[{i}].strike.cancel"), format!("no tracer named {tracer:?}"));
                        }
                        crate::scenario::Strike::Nmi
                            if self.tracers.iter().any(|t| {
                                matches!(t, Tracer::Perf { user_stack, .. }
                                    if *user_stack != kmodel::tracer::UserStackMode::Deferred)
                            }) =>
                        {
                            return bad(
                                format!("events[{i}].strike"),
                                "an NMI at a point of the kernel's code reads no user memory: every perf tracer \
                                 must take its user stacks deferred"
                                    .into(),
                            );
                        }
                        _ => {}
                    }
                    Some(task)
                }
                Action::Cancel { tracer } => {
                    if !tracers.contains(&tracer.as_str()) {
                        return bad(format!("events[{i}].tracer"), format!("no tracer named {tracer:?}"));
                    }
                    None
                }
                Action::Register { tracer } => {
                    if let Err((path, message)) =
                        check_tracer(tracer, &format!("events[{i}].tracer"), &mut tracers, &guest)
                    {
                        return bad(path, message);
                    }
                    None
                }
            };
            if let Some(task) = task.filter(|t| !guest(t)) {
                return bad(format!("events[{i}].task"), format!("no guest named {task:?}"));
            }
            if let Action::Signal { signal, .. } = e.action {
                if !(1..=64).contains(&signal) {
                    return bad(format!("events[{i}].signal"), format!("expected a signal from 1 to 64, got {signal}"));
                }
            }
        }
        // Last: a scenario that makes sense, asking for what its profile lacks.
        if let Some((path, message)) = self.upstream_problem() {
            return bad(path, message);
        }
        Ok(())
    }
}
