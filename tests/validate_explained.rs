//! `validate` explains every stack that is not exact (issue 16, item 1):
//! on Debian's own statically linked, stripped bash and busybox for the
//! three architectures, judged with their own SFrame (they have none) and
//! with SFrame generated from their CFI, every group of failures carries a
//! cause, a reason in words and a function name or FDE start (`fde@0x…`,
//! or `nofde@0x…` for code no FDE covers) — never a bare address; and the
//! report says which SFrame was judged.

mod common;

use std::path::PathBuf;

use kmodel::unwind::Method;
use lab::explain::Cause;
use lab::validate::{validate_sframe, Plan, SframeSource};

/// Where `scripts/fetch-debian-programs.sh` unpacked Debian's programs.
fn debian_cache() -> PathBuf {
    match std::env::var_os("UNWINDLAB_DEBIAN_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let base = match std::env::var_os("XDG_CACHE_HOME") {
                Some(x) if !x.is_empty() => PathBuf::from(x),
                _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"),
            };
            base.join("unwindlab/debian")
        }
    }
}

#[test]
fn every_failure_of_debian_static_shells_is_explained_and_named() {
    let cache = debian_cache();
    for arch in ["amd64", "arm64", "s390x"] {
        let dir = cache.join(arch).join("bin");
        if !dir.join("busybox").exists() {
            assert!(std::env::var_os("CI").is_none(), "{}: not fetched (make deps)", dir.display());
            eprintln!("skipping: {} not fetched (make deps)", dir.display());
            return;
        }
        let lines: [(&str, &[&str]); 2] =
            [("busybox", &["sh", "-c", "echo a | busybox tr a b"]), ("bash-static", &["-c", "x=$((6*7)); echo $x"])];
        for (program, args) in lines {
            let elf = dir.join(program);
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            for source in [SframeSource::Own, SframeSource::Generated] {
                let what = format!("{program} on {arch}, {source:?} SFrame");
                let plan = Plan {
                    every: 397,
                    unwinders: &[Method::Sframe, Method::Fp],
                    source,
                    one_run: true,
                    kernel: &Default::default(),
                    perf_data: None,
                    judging: Default::default(),
                };
                let results =
                    validate_sframe(&elf, None, &args, plan, &mut |_| {}).unwrap_or_else(|e| panic!("{what}: {e}"));
                let sframe = &results["sframe"];
                // Which SFrame was judged: Debian's toolchain emitted none.
                let judged: Vec<&str> = sframe.judged.iter().map(|j| j.sframe.as_str()).collect();
                let want = match source {
                    SframeSource::Own => "none",
                    SframeSource::Generated => "generated from its CFI (SFrame V3)",
                };
                assert_eq!(judged, [want], "{what}");
                for (unwinder, r) in &results {
                    assert!(r.samples >= 10, "{what} {unwinder}: {} samples", r.samples);
                    assert_eq!(r.failures.iter().map(|f| f.count).sum::<u64>(), r.truncated + r.wrong, "{what}");
                    for f in &r.failures {
                        let named = !f.example.function.starts_with("0x") && !f.example.place.starts_with("0x");
                        assert!(
                            named && !f.example.reason.is_empty(),
                            "{what} {unwinder}: unnamed or unexplained: {f:?}"
                        );
                        assert!(f.example.place.starts_with(&f.example.function), "{what} {unwinder}: {f:?}");
                    }
                }
                // The HTML page: self-contained, a row per function and cause.
                let html = lab::validate::html(program, &results);
                assert!(!html.contains("<script") && !html.contains("src=\"http"), "{what}: self-contained");
                for f in &sframe.failures {
                    let row = format!("<td><code>{}</code></td><td>{}</td>", f.example.function, f.example.cause);
                    assert!(html.contains(&row), "{what}: no row {row}");
                }
                // With generated SFrame most stacks are exact, and none is
                // wrong through SFrame: a wrong one is where the CFI itself
                // gives a wrong caller (a sample in glibc's __longjmp, whose
                // CFI describes the jump target); what stops is code
                // without CFI, named by where it starts.
                if source == SframeSource::Generated {
                    let wrong = sframe.failures.iter().filter(|f| f.wrong > 0);
                    assert!(wrong.clone().all(|f| f.example.cause == Cause::CfiWrong), "{what}: {:?}", sframe.failures);
                    assert_eq!(wrong.map(|f| f.wrong).sum::<u64>(), sframe.wrong, "{what}");
                    assert!(sframe.exact > 0, "{what}");
                }
                eprintln!("{what}:\n{}", lab::validate::text(&results));
            }
        }
    }
}

/// A walk cut at the emulator's sigreturn trampoline (AArch64 and s390x
/// glibc return from handlers through the vDSO) is named `[vdso]` with the
/// signal-trampoline cause, not a bare address.
#[test]
fn signal_trampolines_are_named() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("guests/bin");
    for arch in ["aarch64", "s390x"] {
        let elf = root.join(arch).join("lab-v3");
        let plan = Plan {
            every: 97,
            unwinders: &[Method::Sframe],
            source: SframeSource::Own,
            one_run: true,
            kernel: &Default::default(),
            perf_data: None,
            judging: Default::default(),
        };
        let results = validate_sframe(&elf, None, &["sigexit".into()], plan, &mut |_| {}).unwrap();
        let r = &results["sframe"];
        let vdso =
            r.failures.iter().find(|f| f.example.function == "[vdso]").unwrap_or_else(|| panic!("{arch}: {r:?}"));
        assert_eq!(vdso.example.cause, Cause::SignalFrame, "{arch}: {vdso:?}");
        assert!(vdso.example.place.starts_with("[vdso]+0x") && vdso.example.frame > 0, "{arch}: {vdso:?}");
    }
}

/// `validate --html` writes one self-contained page that headless Chromium
/// renders with its per-function table (Chromium is installed by `make`;
/// without it the browser part is skipped, except under CI).
#[test]
fn validate_html_renders_in_headless_chromium() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("validate-html");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("validate.html");
    let elf = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("guests/bin/aarch64/lab-v3");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_unwindlab"))
        .args(["validate", "--every", "97", "--unwinder", "sframe", "--html"])
        .arg(&page)
        .arg(&elf)
        .arg("sigexit")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script") && !html.contains("<link"), "self-contained");
    if !common::tools_or_skip(&["chromium"]) {
        return;
    }
    let dom = std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(["--dump-dom", &format!("file://{}", page.display())])
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    for needle in ["unwindlab validate", "SFrame judged", "[vdso]", "signal trampoline", "past a noreturn call"] {
        assert!(dom.contains(needle), "rendered page lacks {needle:?}");
    }
}
