//! `unwindlab demo`: a guided run that tells, step by step and in plain
//! words, how deferred user unwinding works and where it breaks — from the
//! events of two real runs of the guest on the chosen architecture. The
//! runs walk SFrame, so they use profile `sframe-v13`, and the narration
//! says which of what it shows are proposals and what upstream Linux 7.3
//! has.

use std::path::Path;

use kmodel::arch::Arch;
use kmodel::event::EventKind;
use kmodel::types::ExitPath;

use crate::explore::{Explored, Step};
use crate::report::{Report, RunError};
use crate::runner::{run, run_explored};
use crate::scenario::{Action, Guest, KernelChoice, KernelConfig, Machine, Profile, Scenario, TimedEvent, Tracer};
use crate::symbolise::Names;

fn scenario(arch: Arch, guests_dir: &Path, mode: &str, exit_path: ExitPath, events: Vec<TimedEvent>) -> Scenario {
    Scenario {
        name: format!("demo-{mode}"),
        description: String::new(),
        machine: Machine { arch, cpus: 2 },
        seed: 0,
        guests: vec![Guest {
            name: "lab".into(),
            path: guests_dir.join(arch.name()).join("lab-v3"),
            args: vec![mode.into(), "12".into()],
            stdin: "x\n".into(),
            cpu: 0,
            sframe_patch: Vec::new(),
            files: Default::default(),
            cwd: None,
            root: None,
        }],
        tracers: vec![Tracer::Perf {
            name: "perf".into(),
            period: 4001,
            user_stack: kmodel::tracer::UserStackMode::Deferred,
            task: None,
            inherit: true,
            event: crate::scenario::SampleOn::Instructions,
        }],
        kernel: KernelConfig { profile: Profile::SframeV13, exit_path, ..KernelConfig::default() },
        events,
        stop_after: None,
        expect: None,
    }
}

/// What upstream Linux 7.3 has of the unwinding the demo shows on `arch`.
fn upstream_has(arch: Arch) -> String {
    match arch {
        Arch::X86_64 => "Upstream Linux 7.3 walks user stacks by frame pointers, on x86-64 only: the SFrame walk \
                         and the .sframe registration shown here are proposals (the SFrame series v13)."
            .into(),
        Arch::Aarch64 | Arch::S390x => format!(
            "Upstream Linux 7.3 walks user stacks by frame pointers on x86-64 only and has no user unwinder on \
             {arch} (HAVE_UNWIND_USER_FP is x86-only): the SFrame walk, the .sframe registration and the {} \
             shown here are proposals ({}).",
            if arch == Arch::S390x { "back-chain fallback" } else { "frame-pointer fallback" },
            if arch == Arch::S390x { "the SFrame series v13 and the s390 series v4" } else { "the SFrame series v13" }
        ),
    }
}

fn step(at: Option<u64>, text: String) -> Step {
    Step { at, text }
}

fn frames(names: Names<'_>, ips: &[u64]) -> String {
    let names: Vec<String> = ips.iter().take(6).map(|&pc| names.function(pc)).collect();
    let more = if ips.len() > 6 { format!(" … ({} frames)", ips.len()) } else { String::new() };
    format!("{}{more}", names.join(" ← "))
}

/// The narrated steps for `arch`; `guests_dir` holds `<arch>/lab-v3`.
pub fn demo(arch: Arch, guests_dir: &Path) -> Result<Vec<String>, RunError> {
    demo_on(arch, guests_dir, &KernelChoice::default())
}

/// [`demo`] with `choice` saying whose code runs `kernel/unwind/`.
pub fn demo_on(arch: Arch, guests_dir: &Path, choice: &KernelChoice) -> Result<Vec<String>, RunError> {
    let (steps, _) =
        demo_steps(arch, guests_dir, choice, |s| run(s).map(|report| Explored { report, changes: Vec::new() }))?;
    Ok(steps.into_iter().map(|s| s.text).collect())
}

/// [`demo_on`] with its main run recorded for the explorer: the narration,
/// its steps placed at the main run's events, and that run
/// ([`crate::explore::page`] plays the one over the other).
pub fn demo_explored(arch: Arch, guests_dir: &Path, choice: &KernelChoice) -> Result<(Vec<Step>, Explored), RunError> {
    demo_steps(arch, guests_dir, choice, |s| run_explored(s, &mut |_| {}))
}

/// The demo's runs, the main one by `main_run`, and its narration.
fn demo_steps(
    arch: Arch,
    guests_dir: &Path,
    choice: &KernelChoice,
    main_run: impl Fn(&Scenario) -> Result<Explored, RunError>,
) -> Result<(Vec<Step>, Explored), RunError> {
    let configured = |mut s: Scenario| {
        choice.apply(&mut s.kernel);
        s
    };
    let run = |s: Scenario| run(&configured(s));
    let slow = TimedEvent {
        at: 0,
        action: Action::SlowSyscall {
            task: "lab".into(),
            nmis: 3,
            syscall: Some("clock_nanosleep".into()),
            before_sleep: false,
        },
    };
    let migrate = TimedEvent { at: 0, action: Action::Migrate { task: "lab".into(), cpu: 1, thread: None } };
    let explored = main_run(&configured(scenario(arch, guests_dir, "sleep", ExitPath::Upstream, vec![slow, migrate])))?;
    let main = &explored.report;
    let exit_slow = TimedEvent {
        at: 0,
        action: Action::SlowSyscall {
            task: "lab".into(),
            nmis: 2,
            syscall: Some("exit_group".into()),
            before_sleep: false,
        },
    };
    let lost = run(scenario(arch, guests_dir, "exit", ExitPath::None, vec![exit_slow.clone()]))?;
    let kept = run(scenario(arch, guests_dir, "exit", ExitPath::Upstream, vec![exit_slow]))?;
    let mut steps = vec![step(
        None,
        format!(
            "unwindlab demo on {arch}: the guest `lab sleep` runs under the emulator on a 2-CPU kernel model; \
         perf samples it every 4,001 instructions and wants each sample's user stack. The model runs kernel \
         profile {} — {}. {}",
            main.profile,
            main.parts,
            upstream_has(arch)
        ),
    )];
    steps.extend(tour(main));
    steps.extend(exit_story(&lost, &kept).into_iter().map(|text| step(None, text)));
    Ok((steps, explored))
}

/// The narration of run `r`: the first NMI, request, walk, callback, join
/// and migration in it, each at its event, then the numbers (the demo's
/// story, which any run's explorer can play).
pub fn tour(r: &Report) -> Vec<Step> {
    let mut steps = Vec::new();
    let first = r.samples.first();
    if let Some(s) = first {
        steps.push(step(
            Some(s.at.nmi),
            format!(
                "1. An NMI fires on CPU {} while the task runs user code at {:#x} in {}. Reading the user stack could \
             fault here (a page of stack or of .sframe may not be resident), and an NMI cannot sleep to fault \
             it in. So perf only writes the kernel part of the callchain plus a marker, and asks for the user \
             stack later: unwind_deferred_request().",
                s.cpu,
                s.truth[0],
                r.names(s).function(s.truth[0])
            ),
        ));
    }
    let mut seen_request = false;
    let mut seen_callback = false;
    let mut seen_join = false;
    let mut seen_migrate = false;
    for e in &r.kernel_events {
        match &e.kind {
            EventKind::Request { ret: 0, cookie, .. } if !seen_request => {
                seen_request = true;
                steps.push(step(
                    Some(e.seq),
                    format!(
                    "2. The request returns 0 and cookie {:#x}: CPU {} + 1 in one half, that CPU's counter ({}, always \
                     odd) in the other. The sample records the cookie; the task_work is queued with TWA_NMI_CURRENT \
                     so that a self-interrupt makes the task enter the kernel again before it runs more user code.",
                    cookie.id(),
                    e.cpu,
                    cookie.cnt
                ),
                ));
            }
            EventKind::Unwind { nr, faults, .. } if seen_request && !seen_callback => {
                steps.push(step(
                    Some(e.seq),
                    format!(
                        "3. On the way back to user mode the task-work handler walks the user stack once, with SFrame \
                     (a proposal, the SFrame series v13: upstream Linux 7.3 walks frame pointers, on x86-64 only), \
                     in task context where page faults are allowed: {nr} frames, {faults} page fault(s) taken."
                    ),
                ));
            }
            EventKind::Callback { cookie, nr, .. } if !seen_callback => {
                seen_callback = true;
                let first = r.samples.first();
                let delivered = first.and_then(|s| s.delivered.clone()).unwrap_or_default();
                steps.push(step(
                    Some(e.seq),
                    format!(
                    "4. perf's callback writes PERF_RECORD_CALLCHAIN_DEFERRED (cookie {:#x}, {nr} frames) into the \
                     buffer of CPU {}: {}. The perf tool joins it to the sample by (task, cookie). Verdict against \
                     the emulator's ground truth: {}.",
                    cookie.id(),
                    e.cpu,
                    frames(first.map_or_else(Names::none, |s| r.names(s)), &delivered),
                    r.samples.first().map_or("none", |s| s.verdict.kind())
                ),
                ));
            }
            EventKind::Request { ret: 1, cookie, .. } if !seen_join => {
                seen_join = true;
                steps.push(step(
                    Some(e.seq),
                    format!(
                    "5. A long system call (clock_nanosleep, kept in the kernel for three sampling periods) is hit by \
                     more NMIs. They get the same cookie {:#x} and return 1: the stack cannot change while the task \
                     is in the kernel, so one unwind serves them all.",
                    cookie.id()
                ),
                ));
            }
            EventKind::Migrate { from, to } if !seen_migrate => {
                seen_migrate = true;
                steps.push(step(
                    Some(e.seq),
                    format!(
                    "6. Before returning to user the task is migrated from CPU {from} to CPU {to}. The callback runs \
                     where the task returns, so the deferred record lands in CPU {to}'s buffer, not in the buffer of \
                     the sample: consumers must match by (task, cookie), never by CPU."
                ),
                ));
            }
            _ => {}
        }
    }
    let s = &r.summary;
    steps.push(step(
        None,
        format!(
            "7. In all: {} samples, {} exact stacks, {} unwinds (not one per sample), {} bytes written to the perf \
         buffers where copying 8 KiB of stack per sample would have written {}.",
            s.samples, s.exact, s.unwinds, s.bytes_written, s.bytes_copy_baseline
        ),
    ));
    if let Some(why) = why_not_exact(r) {
        steps.push(step(None, format!("   {why}")));
    }
    steps
}

/// The stacks of `r` that were not exact, and the worst group's
/// explanation, as `run` and `validate` give them ([`crate::explain`]).
fn why_not_exact(r: &Report) -> Option<String> {
    let worst = r.failures.first()?;
    let n: u64 = r.failures.iter().map(|f| f.count).sum();
    Some(format!(
        "Not exact: {n} stack(s) in {} group(s) by function and cause; the most: {}.",
        r.failures.len(),
        crate::explanation::line(worst).trim_start()
    ))
}

fn exit_story(lost: &Report, kept: &Report) -> Vec<String> {
    let lost_n = lost.summary.lost;
    let kept_exact = kept.summary.exact;
    vec![
        format!(
            "8. The corner case: the task calls exit() while NMIs still wait for its stack. The kernel sets \
             PF_EXITING (new requests fail), and later exit_mm() takes the user memory away. With no exit hook \
             (exit path `none`), the queued task_work only runs in exit_task_work(), after exit_mm(): the callback \
             gets an empty stack. Here: {lost_n} of {} stacks lost.",
            lost.summary.judged
        ),
        format!(
            "9. Upstream (Linux 7.3, whose deferred.c is the v6.19 variant) runs the pending unwind synchronously \
             right before exit_mm() (unwind_deferred_task_exit()) and cancels the task_work: {} of {} stacks \
             delivered ({kept_exact} exact), {} lost.",
            kept.summary.delivered, kept.summary.judged, kept.summary.lost
        ),
    ]
    .into_iter()
    .chain(why_not_exact(kept).map(|why| format!("   {why}")))
    .collect()
}
