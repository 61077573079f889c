//! `validate` judges every unwinder from one emulated run (issue 16, item
//! 4): the kernel model walks each deferred stack once more per other
//! unwinder, at the same point (`KernelOptions::extra_unwinders`). The
//! results must be exactly those of a run per unwinder: on committed
//! guests of the three architectures, with frame pointers and SFrame V3
//! or SFrame alone, both unwinders in either order, every tally and every
//! explained group (cause, function, example, reason, rows, PCs) is the
//! same as those of a run per unwinder (`Plan::one_run` false), which runs the program once per
//! unwinder as `validate` used to.

use std::path::Path;

mod common;

use kmodel::unwind::Method;
use lab::validate::{validate_sframe, Plan, SframeSource};

#[test]
fn one_run_judges_each_unwinder_as_its_own_run_does() {
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin");
    let args: Vec<String> = ["recurse", "120"].iter().map(|a| a.to_string()).collect();
    for arch in ["x86_64", "aarch64", "s390x"] {
        for program in ["lab-v3", "lab-fpv3"] {
            let elf = guests.join(arch).join(program);
            for unwinders in [[Method::Sframe, Method::Fp], [Method::Fp, Method::Sframe]] {
                let what = format!("{program} on {arch}, {unwinders:?}");
                let run = |one: bool| {
                    let plan = Plan {
                        every: 397,
                        unwinders: &unwinders,
                        source: SframeSource::Own,
                        one_run: one,
                        kernel: &Default::default(),
                        perf_data: None,
                        judging: Default::default(),
                    };
                    let results =
                        validate_sframe(&elf, None, &args, plan, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
                    serde_json::to_value(&results).expect("results serialise")
                };
                let (one, separate) = (run(true), run(false));
                for unwinder in ["sframe", "fp"] {
                    let samples = one[unwinder]["samples"].as_u64().unwrap_or(0);
                    assert!(samples >= 20, "{what}: {unwinder}: {samples} samples");
                }
                assert_eq!(
                    one,
                    separate,
                    "{what}: one run and a run per unwinder differ:\n{}\n---\n{}",
                    serde_json::to_string_pretty(&one).unwrap_or_default(),
                    serde_json::to_string_pretty(&separate).unwrap_or_default()
                );
            }
        }
    }
}

/// The runner's side, on the scenario suite: with extra unwinder orders the
/// model's own run is unchanged (its events, faults included, and every
/// sample), and each extra order's samples — delivered stack, walk,
/// verdict — are those of the scenario run with that order alone.
#[test]
fn extra_unwinders_change_nothing_and_match_their_own_runs() {
    use lab::runner::{run_for_verdicts, run_for_verdicts_each};
    let orders =
        [vec![Method::Fp], vec![Method::Sframe], vec![Method::Sframe, Method::Fp], vec![Method::Fp, Method::Sframe]];
    let json = |samples: &[lab::report::SampleResult]| serde_json::to_value(samples).expect("samples serialise");
    let mut compared = 0;
    for file in scenario_list() {
        let scenario = lab::Scenario::load(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let what = &scenario.name;
        let own = run_for_verdicts(&scenario, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
        let (report, extras) =
            run_for_verdicts_each(&scenario, &orders, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(report.kernel_events == own.kernel_events, "{what}: the model's own run changed");
        assert_eq!(json(&report.samples), json(&own.samples), "{what}");
        for (order, extra) in orders.iter().zip(extras) {
            let mut alone = scenario.clone();
            alone.kernel.unwinders = Some(order.clone());
            let alone = run_for_verdicts(&alone, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
            match extra {
                Ok(v) => {
                    assert_eq!(json(&v.samples), json(&alone.samples), "{what} {order:?}");
                    let tally = |s: &lab::report::Summary| (s.judged, s.exact, s.truncated, s.wrong, s.lost);
                    assert_eq!(tally(&v.summary), tally(&alone.summary), "{what} {order:?}");
                    compared += 1;
                }
                // Only where in-NMI walks made the stacks (no perf work).
                Err(why) => {
                    assert!(what.starts_with("perf-late"), "{what} {order:?}: not from one run: {why}");
                    assert!(why.contains("no faultable walk"), "{what}: {why}");
                }
            }
        }
    }
    assert!(compared > 0);
}

/// Scenario files to compare on: every path through the deferred walk
/// (task_work, exit hook, stack copied on exit, cache served after
/// `exit_mm()`), evicted `.sframe` pages (faults the extra walks must not
/// take), signal frames, threads, a dynamic program with a loader's
/// registrations; and one whose stacks come from in-NMI walks (perf
/// registered too late), which no extra walk accompanies.
fn scenario_list() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut names: Vec<String> = Vec::new();
    for arch in ["x86_64", "aarch64", "s390x"] {
        for name in ["basic", "sframe-not-resident", "exit-copy-on-exit", "fp-vs-sframe-o2"] {
            names.push(format!("{name}-{arch}"));
        }
    }
    for name in [
        "exit-unwind-at-syscall-entry",
        "signal-frames",
        "threads-two-cpus",
        "loader-registration",
        "perf-late-after-70-ftrace",
    ] {
        names.push(format!("{name}-x86_64"));
    }
    names.iter().map(|n| dir.join(format!("{n}.json"))).collect()
}

/// A walk that drops a corrupt section changes what the later walks of its
/// run find: from then on an SFrame-using extra order cannot stand for a
/// run of its own, and says so (validate then gives it one); a
/// frame-pointer order, which reads no `.sframe`, still can.
#[test]
fn a_dropped_section_ends_what_one_run_can_stand_for() {
    use lab::runner::{run_for_verdicts, run_for_verdicts_each};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let elf = dir.join("guests/bin/x86_64/lab-fpv3");
    // recurse's third row (at 0x402044) rewritten to start at 0, before
    // the second: the first walk through recurse finds the rows not
    // increasing and the kernel drops the section.
    let (offset, start) = (17970, 0);
    let bytes = std::fs::read(&elf).expect("lab-fpv3");
    let (at, _) = sframe::elf::sframe_segment(&bytes).expect("PT_GNU_SFRAME");
    assert_eq!(bytes[(at + offset) as usize], 4, "recurse's third row starts at +4");
    let text = format!(
        r#"{{"name": "dropped", "description": "a corrupt row", "machine": {{"arch": "x86_64", "cpus": 1}},
            "guests": [{{"name": "lab", "path": "guests/bin/x86_64/lab-fpv3", "args": ["recurse", "100"],
                         "sframe_patch": [[{offset}, {start}]]}}],
            "tracers": [{{"kind": "perf", "name": "perf", "period": 4001}}], "kernel": {{"profile": "sframe-v13"}}}}"#
    );
    let scenario = lab::Scenario::parse_in(&text, "dropped.json", dir).expect("scenario");
    for (own, extra) in
        [(vec![Method::Sframe, Method::Fp], vec![Method::Sframe]), (vec![Method::Fp], vec![Method::Sframe])]
    {
        let mut scenario = scenario.clone();
        scenario.kernel.unwinders = Some(own.clone());
        let orders = [extra.clone(), vec![Method::Fp]];
        let (_, extras) = run_for_verdicts_each(&scenario, &orders, &mut |_| {}).expect("runs");
        let whose = if own.contains(&Method::Sframe) { "the model's own" } else { "this configuration's" };
        match &extras[0] {
            Err(why) => {
                assert!(why.starts_with(whose) && why.contains("dropped the .sframe section"), "{own:?}: {why}")
            }
            Ok(_) => panic!("{own:?}: {extra:?} stands for its own run though a section was dropped"),
        }
        let fp = extras[1].as_ref().unwrap_or_else(|why| panic!("{own:?}: fp: {why}"));
        scenario.kernel.unwinders = Some(vec![Method::Fp]);
        let alone = run_for_verdicts(&scenario, &mut |_| {}).expect("runs");
        let json = |samples: &[lab::report::SampleResult]| serde_json::to_value(samples).expect("samples serialise");
        assert_eq!(json(&fp.samples), json(&alone.samples), "{own:?}");
    }
}

/// `validate` judges the samples as the run goes and keeps only counts and
/// groups (issue 26: memory bounded by the groups, not the samples). Its
/// results must be those of judging every sample after the run, byte for
/// byte: on guests of the three architectures whose runs have stacks that
/// wait across chunks (threads on one CPU, a task asleep), stacks never
/// delivered (exit before the return to user, a thread that exec'd and
/// took its leader's ID), wrong and truncated stacks (signal frames, `-O2`
/// code without frame pointers), forks and execs.
#[test]
fn judged_as_it_goes_is_judged_after_the_run() {
    use lab::validate::Judging;
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin");
    let runs: [(&str, &[&str]); 7] = [
        ("lab-o2", &["signal"]),
        ("lab-v3", &["exit"]),
        ("lab-fpv3", &["sleep"]),
        ("threads-v3", &["exit-pending", "3"]),
        ("threads-v3", &["exec-from-thread", "2"]),
        ("procs-v3", &["fork", "3"]),
        ("procs-v3", &["pipeline", "4"]),
    ];
    let cases: Vec<(&str, &str, &[&str])> =
        ["x86_64", "aarch64", "s390x"].iter().flat_map(|&arch| runs.map(|(p, a)| (arch, p, a))).collect();
    let unwinders = [Method::Sframe, Method::Fp];
    let compared = common::par::par_map(&cases, |&(arch, program, args)| {
        let elf = guests.join(arch).join(program);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let what = format!("{program} {} on {arch}", args.join(" "));
        let run = |judging: Judging| {
            let plan = Plan {
                every: 97,
                unwinders: &unwinders,
                source: SframeSource::Own,
                one_run: true,
                kernel: &Default::default(),
                perf_data: None,
                judging,
            };
            let results =
                validate_sframe(&elf, None, &args, plan, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
            serde_json::to_string_pretty(&results).expect("results serialise")
        };
        let after = run(Judging::AfterTheRun);
        // Three samples a chunk: a read after nearly every step that
        // takes one, and stacks waiting across reads.
        let going = run(Judging::AsItGoes { chunk: 3 });
        assert!(going == after, "{what}: judged as it goes:\n{going}\n---\nafter the run:\n{after}");
        1
    });
    assert_eq!(compared.iter().sum::<usize>(), 21);
}

/// The runner's side of judging as the run goes, on every scenario of the
/// suite that runs on one CPU with one perf session (109 of them: stacks
/// lost to exits, sleeps, cancelled tracers and renamed threads among
/// them): with an extra unwinder order, in chunks of three samples, each unwinder's verdict counts (lost stacks by reason included),
/// invariant violations and groups of failures (examples and all) are
/// those of the run judged after it ends.
#[test]
fn every_one_cpu_scenario_judged_as_it_goes_is_judged_after_it_ends() {
    use lab::runner::{run_for_verdicts_each, run_judged_as_it_goes};
    let files: Vec<_> = common::scenario_files()
        .into_iter()
        .filter_map(|file| {
            let scenario = lab::Scenario::load(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let perf = scenario.tracers.iter().filter(|t| matches!(t, lab::scenario::Tracer::Perf { .. })).count();
            (scenario.machine.cpus == 1 && perf == 1).then_some(scenario)
        })
        .collect();
    assert!(files.len() >= 100, "{} scenarios", files.len());
    let extra = [vec![Method::Fp]];
    let lost: u64 = common::par::par_map(&files, |scenario| {
        let what = &scenario.name;
        let (report, extras) =
            run_for_verdicts_each(scenario, &extra, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
        let tally = |s: &lab::report::Summary| {
            (s.judged, s.delivered, s.exact, s.truncated, s.wrong, s.lost, s.lost_reasons.clone(), s.unstitched)
        };
        let groups = |f: &[lab::explain::Failure]| serde_json::to_string(f).expect("groups serialise");
        let mut after = vec![Ok((tally(&report.summary), groups(&lab::explain::group(&report))))];
        for x in extras {
            after.push(x.map(|x| {
                let mut r = report.clone();
                let mut fp = scenario.clone();
                fp.kernel.unwinders = Some(vec![Method::Fp]);
                (r.scenario, r.samples) = (fp, x.samples);
                (tally(&x.summary), groups(&lab::explain::group(&r)))
            }));
        }
        let going = run_judged_as_it_goes(scenario, &extra, 3, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(going.violations, report.violations, "{what}");
        let going: Vec<_> = going
            .verdicts
            .iter()
            .map(|v| v.as_ref().map(|(s, f)| (tally(s), groups(f))).map_err(|e| e.clone()))
            .collect();
        assert_eq!(going, after, "{what}");
        report.summary.lost
    })
    .into_iter()
    .sum();
    assert!(lost > 0, "no scenario lost a stack");
}
