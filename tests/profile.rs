//! The kernel profile (`kernel.profile`): `upstream`, the default, is Linux
//! 7.3 as measured — frame pointers on x86-64, perf, no `.sframe` table —
//! and refuses what only the proposals (`sframe-v13`) have, naming the
//! field; an upstream run registers no section, answers no registration
//! call and walks frame pointers; every report says which parts of its run
//! are upstream and which are proposals.

mod common;

use std::path::Path;

use kmodel::event::EventKind;
use kmodel::unwind::Method;
use lab::scenario::{Profile, Scenario};
use lab::verdict::Verdict;

const SET: &str = "set \"profile\": \"sframe-v13\"";

/// A scenario text with `machine`, one guest (the committed lab guest of
/// `arch`) and `extra` fields; no `kernel.profile` unless `extra` gives one.
fn scenario(arch: &str, extra: &str) -> String {
    let guest = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin").join(arch).join("lab-v3");
    format!(
        r#"{{"name":"p","machine":{{"arch":"{arch}"}},"guests":[{{"name":"g","path":{:?},"args":["recurse","40"]}}],
            "tracers":[{{"kind":"perf","name":"perf","period":997}}]{extra}}}"#,
        guest.display().to_string()
    )
}

#[test]
fn upstream_refuses_what_only_the_proposals_have() {
    let cases = [
        (
            "sframe-unwinder",
            scenario("x86_64", r#","kernel":{"unwinders":["sframe","fp"]}"#),
            vec![
                "at kernel.unwinders: \"sframe\" is a proposal (the SFrame series v13), not in upstream Linux 7.3",
                SET,
            ],
        ),
        (
            "aarch64",
            scenario("aarch64", ""),
            vec![
                "at machine.arch: aarch64 has no user unwinder in upstream Linux 7.3 (HAVE_UNWIND_USER_FP is x86-only)",
                SET,
            ],
        ),
        (
            "s390x-explicit-upstream",
            scenario("s390x", r#","kernel":{"profile":"upstream"}"#),
            vec!["at machine.arch: s390x has no user unwinder", SET],
        ),
        (
            "ftrace",
            scenario("x86_64", "").replace(r#""tracers":["#, r#""tracers":[{"kind":"ftrace","name":"f"},"#),
            vec!["at tracers[0].kind: \"ftrace\" (userstacktrace_delay) is a proposal", "perf is the only user", SET],
        ),
        (
            "bpf-registered-late",
            scenario("x86_64", r#","events":[{"at":10,"action":"register","tracer":{"kind":"bpf","name":"b"}}]"#),
            vec!["at events[0].tracer.kind: \"bpf\" is a lab model", SET],
        ),
        (
            "loader-registration",
            scenario("x86_64", r#","kernel":{"registration":"loader-syscall"}"#),
            vec!["at kernel.registration: \"loader-syscall\" is a proposal (sframe_register(), RFC 2026)", SET],
        ),
        (
            "fork-table",
            scenario("x86_64", r#","kernel":{"fork_table":"copy"}"#),
            vec!["at kernel.fork_table: only matters to the SFrame unwinder", SET],
        ),
        (
            "sframe-patch",
            scenario("x86_64", "").replace(r#""args""#, r#""sframe_patch":[[0,0]],"args""#),
            vec!["at guests[0].sframe_patch: only matters to the SFrame unwinder", SET],
        ),
        (
            "unknown-profile",
            scenario("x86_64", r#","kernel":{"profile":"v6.19"}"#),
            vec!["at kernel.profile", "unknown variant"],
        ),
    ];
    common::assert_refused("profile-refused", &cases);
    // The same scenarios with the proposals run (here: parse).
    for arch in common::ARCHES {
        let text = scenario(arch, r#","kernel":{"profile":"sframe-v13","registration":"loader-syscall"}"#);
        let s = Scenario::parse(&text, "p.json").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.kernel.unwinders(), [Method::Sframe, Method::Fp], "the proposals' default order");
    }
    let upstream = Scenario::parse(&scenario("x86_64", ""), "p.json").unwrap();
    assert_eq!(upstream.kernel.profile, Profile::Upstream, "the default");
    assert_eq!(upstream.kernel.unwinders(), [Method::Fp], "upstream's default order");
}

/// `upstream-fp-basic-x86_64`: no `.sframe` section is registered, every
/// stack is walked by frame pointers alone and is right down to `main`'s
/// caller; only glibc's start code, which keeps no frame pointer, ends the
/// walks early. With SFrame injected into the program, the profile decides:
/// only `sframe-v13` registers its section (frame pointers, read alone,
/// give the same stacks).
#[test]
fn an_upstream_run_registers_nothing_and_walks_frame_pointers() {
    let (report, _) = common::scenario_events("upstream-fp-basic-x86_64", false);
    assert_eq!(report.profile, Profile::Upstream);
    let sframe_events =
        |r: &lab::Report| r.kernel_events.iter().filter(|e| matches!(e.kind, EventKind::SframeAdd { .. })).count();
    assert_eq!(sframe_events(&report), 0, "no .sframe section registered");
    assert!(!report.log.iter().any(|l| l.contains("\"sframe_add\"")), "nor logged");
    assert!(report.samples.len() >= 10, "{} samples", report.samples.len());
    let mut to_main = 0;
    for s in &report.samples {
        let walk = s.walk.as_ref().expect("every stack comes from a deferred walk");
        assert!(walk.methods.iter().all(|&m| m == Method::Fp), "sample {}: {:?}", s.sample, walk.methods);
        let delivered = s.delivered.as_deref().unwrap_or_default();
        if delivered.len() + 2 == s.truth.len() && s.truth.starts_with(delivered) {
            let names = report.names(s);
            let missing: Vec<String> = s.truth[delivered.len()..].iter().map(|&pc| names.function(pc)).collect();
            assert_eq!(missing, ["__libc_start_main", "_start"], "sample {}", s.sample);
            to_main += 1;
        }
    }
    assert!(
        to_main * 10 >= report.samples.len() * 8,
        "{to_main} of {} stacks right to main's caller",
        report.samples.len()
    );
    // The same program with SFrame V3 injected, frame pointers alone under
    // either profile: only sframe-v13 registers its section.
    let mut fpv3 =
        Scenario::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/upstream-fp-basic-x86_64.json")).unwrap();
    fpv3.guests[0].path = fpv3.guests[0].path.with_file_name("lab-fpv3");
    let upstream = lab::run(&fpv3).unwrap();
    fpv3.kernel.profile = Profile::SframeV13;
    fpv3.kernel.unwinders = Some(vec![Method::Fp]);
    let proposals = lab::run(&fpv3).unwrap();
    assert_eq!(sframe_events(&upstream), 0, "upstream registers no section");
    assert_eq!(sframe_events(&proposals), 1, "sframe-v13 registers the program's section at exec");
    let verdicts = |r: &lab::Report| r.samples.iter().map(|s| s.verdict.clone()).collect::<Vec<Verdict>>();
    assert_eq!(verdicts(&proposals), verdicts(&upstream), "frame pointers read no .sframe");
}

/// A guest's own registration calls under `upstream` reach no model: the
/// prctl options are unknown (`EINVAL`) and the system calls do not exist
/// (`ENOSYS`), as on Linux 7.3; nothing is registered or removed.
#[test]
fn upstream_answers_no_registration_call() {
    let guest = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin/x86_64/sframereg-v3");
    let text = format!(
        r#"{{"name":"reg-upstream","machine":{{"arch":"x86_64"}},"guests":[{{"name":"reg","path":{:?}}}],
            "tracers":[{{"kind":"perf","name":"perf","period":4001}}]}}"#,
        guest.display().to_string()
    );
    let report = lab::run(&Scenario::parse(&text, "reg-upstream.json").unwrap()).unwrap();
    assert_eq!(report.guests[0].exit, Some(0));
    let stdout = &report.guests[0].stdout;
    let calls: Vec<&str> = stdout.lines().filter(|l| l.starts_with("prctl") || l.starts_with("sframe_")).collect();
    assert!(calls.len() >= 20, "{stdout}");
    for line in calls {
        let expected = if line.starts_with("prctl") { "-22 EINVAL" } else { "-38 ENOSYS" };
        assert!(line.ends_with(expected), "{line}");
    }
    let table = report
        .kernel_events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::SframeAdd { .. } | EventKind::SframeRemove { .. }))
        .count();
    assert_eq!(table, 0, "no .sframe table upstream");
}

/// The parts each report lists follow what the scenario uses.
#[test]
fn the_parts_follow_what_a_scenario_uses() {
    let parts = |name: &str| {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("scenarios/{name}.json"));
        let s = Scenario::load(&file).unwrap_or_else(|e| panic!("{e}"));
        s.kernel.profile.parts(&s)
    };
    let upstream = parts("upstream-fp-exit-x86_64");
    assert_eq!(upstream.upstream, ["deferred.c", "user.c FP walk", "perf"]);
    assert!(upstream.proposals.is_empty());
    assert_eq!(upstream.to_string(), "upstream (Linux 7.3): deferred.c, user.c FP walk, perf; proposals: none");
    let basic = parts("basic-x86_64");
    assert_eq!(basic.upstream, ["deferred.c", "user.c FP walk", "perf"]);
    assert_eq!(basic.proposals, ["SFrame unwinder (series v13)", ".sframe registration at exec (series v13)"]);
    let aarch64 = parts("basic-aarch64");
    assert_eq!(aarch64.upstream, ["deferred.c", "perf"], "no FP walk upstream on aarch64");
    assert!(aarch64.proposals.contains(&"aarch64 frame-pointer unwinder (a lab model: no series posted)"));
    assert!(parts("basic-s390x").proposals.contains(&"s390x back-chain unwinder (s390 series v4)"));
    let tracers = parts("three-tracers-x86_64").proposals;
    assert!(tracers.iter().any(|p| p.starts_with("ftrace userstacktrace_delay")), "{tracers:?}");
    assert!(tracers.iter().any(|p| p.starts_with("BPF")), "{tracers:?}");
    let syscall = parts("loader-syscall-registration-x86_64").proposals;
    assert!(syscall.contains(&"loader registration through sframe_register (RFC 2026)"), "{syscall:?}");
    assert!(parts("loader-registration-x86_64").proposals.contains(&"loader registration through prctl (series v13)"));
    assert!(parts("fork-child-table-copy-x86_64").proposals.contains(&"fork copies the .sframe table (a lab variant)"));
    let removed = parts("stale-after-munmap-removed-x86_64").proposals;
    assert!(removed.contains(&"munmap removes .sframe entries (a lab variant)"), "{removed:?}");
}

/// `run --json` carries the profile and the parts; the text account and
/// the HTML report say them.
#[test]
fn every_report_says_the_profile_and_its_parts() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/upstream-fp-basic-x86_64.json");
    let out = common::unwindlab(&["run", file.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["profile"], "upstream");
    assert_eq!(json["parts"]["upstream"], serde_json::json!(["deferred.c", "user.c FP walk", "perf"]));
    assert_eq!(json["parts"]["proposals"], serde_json::json!([]));
    assert_eq!(json["scenario"]["kernel"]["profile"], "upstream");
    let report = lab::run(&Scenario::load(&file).unwrap()).unwrap();
    let account = report.account();
    assert!(account.contains("kernel profile upstream: deferred.c v6.19, exit path upstream"), "{account}");
    assert!(account.contains("upstream (Linux 7.3): deferred.c, user.c FP walk, perf; proposals: none"), "{account}");
    let html = lab::html::report(&report);
    for needle in [
        "profile upstream: deferred.c v6.19",
        "upstream (Linux 7.3): deferred.c, user.c FP walk, perf; proposals: none",
        "none: upstream Linux 7.3 has no .sframe registration",
    ] {
        assert!(html.contains(needle), "the HTML report lacks {needle:?}");
    }
}
