//! The explorer (`run --explore`): a self-contained page of the migration
//! scenario on each architecture, and on x86-64 also with the kernel's own
//! `deferred.c` running, whose recorded states are the model's; headless
//! Chromium then steps through each page with the keyboard and checks its
//! state panel against the run's event log (`scripts/explore-check.py`:
//! the mask after perf's NMI and after its callback, the reset, the same
//! panels reached forward and backward, the tour). Chromium is installed
//! by `make`; without it the browser part is skipped, except under CI.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use lab::scenario::KernelImpl;
use lab::Scenario;

/// The explorer page and event log of `scenario`, written under `dir`.
fn explored(scenario: &Scenario, dir: &Path, name: &str) -> (lab::explore::Explored, PathBuf, PathBuf) {
    let x = lab::runner::run_explored(scenario, &mut |_| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
    let html = lab::explore::page(&x, &lab::demo::tour(&x.report));
    assert!(
        !html.contains("src=") && !html.contains("href=") && !html.contains("<link") && !html.contains("http"),
        "{name}: the page is self-contained"
    );
    let script = &html[html.find("id=\"data\">").expect("the data element")..];
    let data = &script[..script.find("</script>").expect("its end")];
    assert!(!data[1..].contains('<'), "{name}: no `<` in the data element");
    // Each sample names its own NMI: an `nmi_enter` on its CPU, one per
    // sample number (two NMIs may share a CPU and a time).
    let mut nmis = std::collections::BTreeMap::new();
    for s in &x.report.samples {
        let e = x.report.kernel_events.iter().find(|e| e.seq == s.at.nmi).expect("the sample's NMI is logged");
        assert!(matches!(e.kind, kmodel::event::EventKind::NmiEnter { .. }) && e.cpu == s.cpu, "{name}: {e:?}");
        assert_eq!(*nmis.entry(s.sample).or_insert(s.at.nmi), s.at.nmi, "{name}: sample {}", s.sample);
    }
    let distinct: std::collections::BTreeSet<u64> = nmis.values().copied().collect();
    assert_eq!(distinct.len(), nmis.len(), "{name}: two samples name one NMI");
    let seqs: Vec<u64> = x.changes.iter().map(|c| c.seq).collect();
    let events: Vec<u64> = x.report.kernel_events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, events, "{name}: every event has its state change");
    let page = dir.join(format!("{name}.html"));
    let log = dir.join(format!("{name}.log"));
    std::fs::write(&page, html).unwrap();
    std::fs::write(&log, x.report.log_text()).unwrap();
    (x, page, log)
}

#[test]
fn explorer_pages_step_through_migration_in_headless_chromium() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explore");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = Vec::new();
    for arch in ["x86_64", "aarch64", "s390x"] {
        let file = root.join(format!("scenarios/migration-{arch}.json"));
        let scenario = Scenario::load(&file).unwrap();
        let (x, page, log) = explored(&scenario, &dir, arch);
        if arch == "x86_64" {
            // The kernel's own deferred.c: the state the model mirrors
            // from it is the model's own, event for event.
            let mut c = scenario.clone();
            c.kernel.implementation = KernelImpl::KernelC;
            let (xc, page_c, log_c) = explored(&c, &dir, "x86_64-kernel-c");
            let first = x.changes.iter().zip(&xc.changes).find(|(a, b)| a != b);
            assert!(
                first.is_none() && x.changes.len() == xc.changes.len(),
                "the kernel's C and the model record different states: {first:?}"
            );
            pages.push((page_c, log_c));
        }
        pages.push((page, log));
    }
    // The reset window's struck NMI comes at the time of the entry's
    // first one, on its CPU: each sample still names its own.
    let reset = Scenario::load(&root.join("scenarios/reset-window-x86_64.json")).unwrap();
    explored(&reset, &dir, "reset-window");
    if !common::tools_or_skip(&["chromium", "python3"]) {
        return;
    }
    let script = root.join("scripts/explore-check.py");
    let out = Command::new("python3").arg(&script).args(pages.iter().flat_map(|(p, l)| [p, l])).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("\n0 failure(s)") && !text.contains("FAIL"), "{text}");
    assert_eq!(text.matches("# ").count(), 4, "every page checked: {text}");
}

/// `demo --explore`: the demo's narration is the tour of its main run's
/// page, its steps about the run's events placed at them (the NMI, the
/// request, the walk, the callback, the join, the migration), in order.
#[test]
fn the_demo_plays_as_the_tour_of_its_main_run() {
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin");
    let choice = lab::scenario::KernelChoice::default();
    let arch = kmodel::arch::Arch::X86_64;
    let (steps, x) = lab::demo::demo_explored(arch, &guests, &choice).unwrap();
    let texts: Vec<String> = steps.iter().map(|s| s.text.clone()).collect();
    assert_eq!(texts, lab::demo::demo(arch, &guests).unwrap(), "the tour is the demo's narration");
    let placed: Vec<u64> = steps.iter().filter_map(|s| s.at).collect();
    assert!(placed.len() >= 5 && placed.windows(2).all(|w| w[0] < w[1]), "steps at events, in order: {placed:?}");
    let kinds: Vec<&kmodel::event::EventKind> = placed
        .iter()
        .map(|&seq| &x.report.kernel_events.iter().find(|e| e.seq == seq).expect("a logged event").kind)
        .collect();
    use kmodel::event::EventKind as K;
    assert!(matches!(kinds[0], K::NmiEnter { .. }) && matches!(kinds[1], K::Request { ret: 0, .. }), "{kinds:?}");
    assert!(
        kinds.iter().any(|k| matches!(k, K::Callback { .. })) && kinds.iter().any(|k| matches!(k, K::Migrate { .. }))
    );
    let page = lab::explore::page(&x, &steps);
    assert!(page.contains("2. The request returns 0"), "the page carries the narration");
}
