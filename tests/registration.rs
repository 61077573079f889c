//! The registration scenarios (issue 15), on every architecture, checked
//! from their reports and kernel events: what each interface and each
//! variant of the table does to real runs.
//!
//! * `no-library-sframe` vs `loader-registration` and
//!   `loader-syscall-registration`: exec-time registration alone leaves
//!   libc.so.6 and the plugin unregistered, so fewer stacks are exact; the
//!   simulated loader through either interface registers and removes the
//!   same sections and gives the same verdicts;
//! * `dlopen-during-pending` / `dlclose-during-pending`: the table changes
//!   between the request and its unwind;
//! * `stale-after-munmap` (and `-removed`): a loader that does not
//!   unregister leaves a stale entry that refuses the next registration
//!   with -EEXIST; the munmap variant removes it instead;
//! * `fork-child-table` (and `-copy`): the child's table is empty upstream
//!   and a copy in the variant, and its stacks are exact only with the copy;
//! * `exec-drops-table`: exec frees the old mm's table and registers the
//!   new image's.

use kmodel::event::{Event, EventKind};
use kmodel::unwind::Method;
use lab::report::Report;
use lab::scenario::Scenario;
use std::path::PathBuf;

const ARCHES: [&str; 3] = ["x86_64", "aarch64", "s390x"];

fn run(name: &str, arch: &str) -> Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}-{arch}.json"));
    let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let report = lab::run(&scenario).unwrap_or_else(|e| panic!("{name}-{arch}: {e}"));
    assert!(report.violations.is_empty(), "{name}-{arch}: {:?}", report.violations);
    assert!(report.expectation_failures.is_empty(), "{name}-{arch}: {:?}", report.expectation_failures);
    report
}

/// The `.sframe` table's story: (kind, section start, detail) per add or
/// remove, in order.
fn table_story(events: &[Event]) -> Vec<(&'static str, u64, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SframeAdd { sframe, error, .. } => {
                Some(("add", *sframe, error.clone().unwrap_or_else(|| "ok".into())))
            }
            EventKind::SframeRemove { sframe, why } => Some(("remove", *sframe, why.clone())),
            _ => None,
        })
        .collect()
}

/// Index of the first event matching `f`.
fn position(events: &[Event], f: impl Fn(&EventKind) -> bool) -> usize {
    events.iter().position(|e| f(&e.kind)).expect("the event happens")
}

#[test]
fn the_loader_through_either_interface_beats_exec_only_registration() {
    for arch in ARCHES {
        let exec = run("no-library-sframe", arch);
        let prctl = run("loader-registration", arch);
        let syscall = run("loader-syscall-registration", arch);
        let (e, p, s) = (&exec.summary, &prctl.summary, &syscall.summary);
        eprintln!(
            "{arch}: exec-only {}/{}/{}, loader {}/{}/{}",
            e.exact, e.truncated, e.wrong, p.exact, p.truncated, p.wrong
        );
        assert_eq!(e.samples, p.samples, "{arch}: the same run");
        assert!(e.exact < p.exact, "{arch}: exec-only {} exact, with the loader {}", e.exact, p.exact);
        // Exec registers the program and ld.so only; the loader adds libc
        // and the plugin (twice) and removes the plugin twice.
        let adds = |r: &Report| table_story(&r.kernel_events).iter().filter(|(k, _, _)| *k == "add").count();
        assert_eq!(adds(&exec), 2, "{arch}");
        assert_eq!(adds(&prctl), 5, "{arch}");
        let unregistered = |r: &Report, by: &str| {
            table_story(&r.kernel_events).iter().filter(|(k, _, why)| *k == "remove" && why.as_str() == by).count()
        };
        assert_eq!(unregistered(&prctl, "prctl(PR_REMOVE_SFRAME)"), 2, "{arch}");
        assert_eq!(unregistered(&syscall, "sframe_unregister()"), 2, "{arch}");
        // The interface changes nothing else: same table, same verdicts.
        let sections =
            |r: &Report| table_story(&r.kernel_events).into_iter().map(|(k, s, _)| (k, s)).collect::<Vec<_>>();
        assert_eq!(sections(&prctl), sections(&syscall), "{arch}");
        assert_eq!((p.exact, p.truncated, p.wrong), (s.exact, s.truncated, s.wrong), "{arch}");
    }
}

#[test]
fn the_table_changes_between_request_and_unwind() {
    for arch in ARCHES {
        for (name, change) in [("dlopen-during-pending", "add"), ("dlclose-during-pending", "remove")] {
            let r = run(name, arch);
            let ev = &r.kernel_events;
            // The plugin's change: the 4th add (after program, ld.so, libc),
            // or the first unregistration.
            let at = ev
                .iter()
                .enumerate()
                .filter(|(_, e)| match &e.kind {
                    EventKind::SframeAdd { .. } => change == "add",
                    EventKind::SframeRemove { why, .. } => change == "remove" && why.starts_with("prctl"),
                    _ => false,
                })
                .map(|(i, _)| i)
                .nth(if change == "add" { 3 } else { 0 })
                .expect("the plugin's registration change");
            let request = ev[..at].iter().rposition(|e| matches!(e.kind, EventKind::Request { .. })).unwrap();
            let unwind = at + position(&ev[at..], |k| matches!(k, EventKind::Unwind { .. }));
            // No unwind between the request and the change: it was pending.
            assert!(
                !ev[request..at].iter().any(|e| matches!(e.kind, EventKind::Unwind { .. })),
                "{name}-{arch}: the request was served before the table changed"
            );
            // The stack is in ld.so and libc (registered): walked by SFrame.
            let EventKind::Unwind { methods, .. } = &ev[unwind].kind else { unreachable!() };
            assert!(methods.iter().all(|m| *m == Method::Sframe), "{name}-{arch}: {methods:?}");
        }
    }
}

#[test]
fn a_stale_entry_refuses_the_next_registration_unless_munmap_removes_it() {
    for arch in ARCHES {
        let stale = run("stale-after-munmap", arch);
        let story = table_story(&stale.kernel_events);
        let plugin = story[3].1;
        let about_plugin: Vec<_> = story.iter().filter(|(_, s, _)| *s == plugin).collect();
        assert_eq!(about_plugin[0].2, "ok", "{arch}");
        assert!(about_plugin[1].0 == "add" && about_plugin[1].2.contains("overlaps"), "{arch}: {about_plugin:?}");
        assert!(about_plugin[2].2.contains("sframe_free_mm"), "{arch}: the stale entry lived until the mm died");
        let removed = run("stale-after-munmap-removed", arch);
        let story = table_story(&removed.kernel_events);
        let about_plugin: Vec<_> =
            story.iter().filter(|(_, s, _)| *s == plugin).map(|(k, _, d)| (*k, d.as_str())).collect();
        assert_eq!(about_plugin.len(), 4, "{arch}: {about_plugin:?}");
        assert!(about_plugin.iter().all(|(k, d)| *k == "remove" && d.starts_with("munmap") || *d == "ok"), "{arch}");
        // Either way the same bytes are described: the verdicts agree.
        assert_eq!(stale.summary.exact, removed.summary.exact, "{arch}");
    }
}

#[test]
fn a_forked_child_has_an_empty_table_upstream_and_a_copy_in_the_variant() {
    for arch in ARCHES {
        let upstream = run("fork-child-table", arch);
        let copy = run("fork-child-table-copy", arch);
        let child_adds = |r: &Report| {
            let new = position(&r.kernel_events, |k| matches!(k, EventKind::TaskNew { parent: Some(_), .. }));
            let child = r.kernel_events[new].tid;
            r.kernel_events.iter().filter(|e| e.tid == child && matches!(e.kind, EventKind::SframeAdd { .. })).count()
        };
        assert_eq!(child_adds(&upstream), 0, "{arch}");
        assert_eq!(child_adds(&copy), 1, "{arch}");
        let (u, c) = (&upstream.summary, &copy.summary);
        eprintln!("{arch}: fork upstream {}/{} exact, copy {}/{}", u.exact, u.judged, c.exact, c.judged);
        assert!(u.exact < c.exact, "{arch}: the child's FP walks lose stacks upstream");
    }
}

#[test]
fn exec_frees_the_old_table_and_registers_the_new_image() {
    for arch in ARCHES {
        let r = run("exec-drops-table", arch);
        // The new image's section goes into the new mm before exec_mmap()
        // switches to it; then the old mm, and its table, are freed.
        let exec = position(&r.kernel_events, |k| matches!(k, EventKind::Exec { .. }));
        let before = table_story(&r.kernel_events[..exec]);
        let after = table_story(&r.kernel_events[exec..]);
        assert_eq!(before.len(), 2, "{arch}: the program's section at start and for the new image, {before:?}");
        assert!(before.iter().all(|(k, _, d)| *k == "add" && d == "ok"), "{arch}: {before:?}");
        assert!(after[0].0 == "remove" && after[0].2.contains("sframe_free_mm"), "{arch}: {after:?}");
    }
}

/// What the registration guest prints under the kernel model: every
/// interface's error paths with the series' errnos (under `unwindlab exec`,
/// with no model, every prctl is EINVAL and every call ENOSYS).
const REGISTER_ERRORS: &str = "\
own section: found
prctl add own (exec registered it)           -17 EEXIST
prctl remove own                             0 ok
prctl remove own again                       -22 EINVAL
prctl remove with arg3 set                   -22 EINVAL
prctl remove never registered                -22 EINVAL
prctl unknown option                         -22 EINVAL
prctl add bad magic                          -22 EINVAL
prctl add V2 section                         -22 EINVAL
prctl add section outside any VMA            -22 EINVAL
prctl add section past its VMA               -22 EINVAL
prctl add text not executable                -22 EINVAL
prctl add text past its VMA                  -22 EINVAL
prctl add zero address                       -22 EINVAL
prctl add unreadable header                  -14 EFAULT
prctl add own                                0 ok
prctl add own overlapping                    -17 EEXIST
sframe_register size 24                      -22 EINVAL
sframe_register size 40                      -22 EINVAL
sframe_register unreadable struct            -14 EFAULT
sframe_register own (registered)             -17 EEXIST
sframe_unregister with sframe_size set       -22 EINVAL
sframe_unregister size 16                    -22 EINVAL
sframe_unregister own                        0 ok
sframe_unregister own again                  -22 EINVAL
sframe_register own                          0 ok
";

#[test]
fn a_guests_own_calls_get_the_models_errnos() {
    for arch in ARCHES {
        let r = run("register-errors", arch);
        let out = &r.guests[0].stdout;
        eprintln!("{arch}:\n{out}");
        assert_eq!(out, REGISTER_ERRORS, "{arch}");
        // Each call that got past its own checks reached sframe_add_section():
        // exec's, eleven prctl adds, two sframe_register() of a good struct.
        let story = table_story(&r.kernel_events);
        assert_eq!(story.iter().filter(|(k, _, _)| *k == "add").count(), 1 + 11 + 2, "{arch}: {story:?}");
    }
}
