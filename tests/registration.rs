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
//!   unregister leaves plugin A's entry behind; plugin B, mapped at A's
//!   address, is refused with -EEXIST and its PCs are looked up in A's
//!   entry (truncated or wrong stacks); the munmap variant removes the
//!   entry, B is registered and its stacks are exact;
//! * `fork-child-table` (and `-copy`): the child's table is empty (series v13)
//!   and a copy in the variant, and its stacks are exact only with the copy;
//! * `exec-drops-table`: exec frees the old mm's table and registers the
//!   new image's.

use kmodel::event::{Event, EventKind};
use kmodel::unwind::Method;
use lab::report::Report;
use lab::scenario::Scenario;
use lab::verdict::Verdict;
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
fn a_stale_entry_describes_another_object_unless_munmap_removes_it() {
    for arch in ARCHES {
        // The stale-entry guest: plugin A registered, dlclosed without
        // unregistering, plugin B mapped at A's address.
        let stale = run("stale-after-munmap", arch);
        let adds: Vec<_> = stale
            .kernel_events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::SframeAdd { sframe, text, error } => Some((*sframe, *text, error.clone())),
                _ => None,
            })
            .collect();
        // Program, ld.so, libc, A, then B.
        assert_eq!(adds.len(), 5, "{arch}: {adds:?}");
        let (a, b) = (&adds[3], &adds[4]);
        assert_eq!(a.2, None, "{arch}: A is registered");
        assert_eq!(b.1, a.1, "{arch}: ld.so maps B where A was (text at {:#x} and {:#x})", a.1, b.1);
        let refusal = b.2.as_deref().expect("B's registration is refused");
        assert!(
            refusal.contains("overlaps") && refusal.ends_with(&format!("registered for text at {:#x}", a.1)),
            "{arch}: B's text overlaps A's stale entry (-EEXIST): {refusal}"
        );
        let story = table_story(&stale.kernel_events);
        let about_a: Vec<_> = story.iter().filter(|(k, s, _)| *k == "remove" && *s == a.0).collect();
        // B's text, from the refusal ("text START..=END overlaps …").
        let b_end = refusal.split("..=").nth(1).and_then(|r| r.split(' ').next()).expect("the refused range");
        let b_end = u64::from_str_radix(b_end.trim_start_matches("0x"), 16).unwrap();
        let in_b = |pc: u64| (b.1..=b_end).contains(&pc);
        // The program's text is mapped lowest, below libc's (adds[2]).
        let (program, libc) = (adds[0].1, adds[2].1);
        // Stacks sampled in B's work: B's frames over the program's (not
        // B's constructors, run by ld.so inside dlopen).
        let in_b_work = |truth: &[u64]| {
            truth.first().is_some_and(|&pc| in_b(pc))
                && truth.iter().find(|&&pc| !in_b(pc)).is_some_and(|&pc| (program..libc).contains(&pc))
        };
        let first_bad = |r: &lab::report::SampleResult| match r.verdict {
            Verdict::Truncated { frames, .. } => Some(frames),
            Verdict::Wrong { frame, .. } => Some(frame),
            _ => None,
        };
        // Which frames go wrong: (index of the first bad frame, whether the
        // step to it was taken from a frame of B, wrong rather than truncated).
        let mut bad_in_b = std::collections::BTreeMap::new();
        for r in stale.samples.iter().filter(|r| in_b_work(&r.truth)) {
            if let Some(at) = first_bad(r) {
                let key = (at, in_b(r.truth[at - 1]), matches!(r.verdict, Verdict::Wrong { .. }));
                *bad_in_b.entry(key).or_insert(0) += 1;
            }
        }
        eprintln!("{arch}: stacks in B's work that go wrong, by (first bad frame, from B, wrong): {bad_in_b:?}");
        let count = |f: &dyn Fn(&(usize, bool, bool)) -> bool| {
            bad_in_b.iter().filter(|(k, _)| f(k)).map(|(_, n)| n).sum::<usize>()
        };
        assert!(count(&|_| true) > 100, "{arch}: {bad_in_b:?}");
        match arch {
            // The walk stops inside B: some of A's rows fit B's frames, the
            // next lookup lands between A's functions.
            "x86_64" => assert_eq!(count(&|&(_, from_b, wrong)| from_b && !wrong), count(&|_| true), "{arch}"),
            // A's rules give B's PC a wrong caller at once, or leave a wrong
            // frame pointer that a program frame's rule then follows.
            "aarch64" => {
                assert!(count(&|&(at, from_b, wrong)| at == 1 && from_b && wrong) > 0, "{arch}: {bad_in_b:?}");
                assert_eq!(count(&|&(_, _, wrong)| wrong), count(&|_| true), "{arch}");
            }
            // B's PC gets no usable rule (truncated) or a wrong caller, at
            // the first step.
            _ => assert_eq!(count(&|&(at, from_b, _)| at == 1 && from_b), count(&|_| true), "{arch}"),
        }

        // The same program with munmap removing entries: B is registered and
        // its stacks are B's own.
        let removed = run("stale-after-munmap-removed", arch);
        let story = table_story(&removed.kernel_events);
        let adds: Vec<_> = story.iter().filter(|(k, _, _)| *k == "add").collect();
        assert_eq!(adds.len(), 5, "{arch}: {adds:?}");
        assert!(adds.iter().all(|(_, _, d)| d == "ok"), "{arch}: every registration succeeds: {adds:?}");
        let unmapped = story.iter().filter(|(k, _, d)| *k == "remove" && d.starts_with("munmap")).count();
        assert!(unmapped >= 1, "{arch}: dlclose's munmap removes A's entry: {story:?}");

        let sampled_in_b: Vec<_> = removed.samples.iter().filter(|r| in_b_work(&r.truth)).collect();
        assert!(sampled_in_b.len() > 100, "{arch}: {} samples in B", sampled_in_b.len());
        for r in sampled_in_b {
            assert_eq!(r.verdict, Verdict::Exact, "{arch}: sample {} in B: {:x?}", r.sample, r.truth);
        }

        let (s, r) = (&stale.summary, &removed.summary);
        eprintln!(
            "{arch}: stale {}/{}/{} (exact/truncated/wrong), removed {}/{}/{}",
            s.exact, s.truncated, s.wrong, r.exact, r.truncated, r.wrong
        );
        assert_eq!(s.samples, r.samples, "{arch}: the same run");
        assert!(s.exact + 100 < r.exact, "{arch}: the stale entry costs exact stacks");
        // What the walker makes of A's rows over B's code, per architecture.
        match arch {
            // Lookups land between A's functions: truncated, never wrong; the
            // entry is never found corrupt and dies with the mm.
            "x86_64" => {
                assert!(s.truncated > r.truncated + 100, "{arch}");
                assert_eq!(s.wrong, r.wrong, "{arch}");
                assert!(about_a.iter().all(|(_, _, why)| why.contains("sframe_free_mm")), "{arch}: {about_a:?}");
            }
            // A's rules for B's code: wrong stacks, until a lookup finds the
            // entry corrupt and removes it.
            "aarch64" => assert!(s.wrong > r.wrong + 100, "{arch}"),
            // Mostly truncated, a few wrong, then removed as corrupt.
            _ => assert!(s.truncated > r.truncated + 100 && s.wrong > r.wrong, "{arch}"),
        }
        if arch != "x86_64" {
            assert!(about_a[0].2.contains("corrupt"), "{arch}: a walk drops the stale entry as corrupt: {about_a:?}");
        }
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
