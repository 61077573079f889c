//! The HTML report of the migration scenario is self-contained, shows both
//! CPU tracks and the stitched stack, and renders in headless Chromium to a
//! picture that is not blank (Chromium is installed by `make`; without it the
//! browser part is skipped, except under CI).

mod common;

use std::path::Path;
use std::process::Command;

use lab::Scenario;

fn chromium(args: &[&str], profile: &Path) -> std::process::Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn migration_report_renders_in_headless_chromium() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/migration-x86_64.json");
    let report = lab::run(&Scenario::load(&file).unwrap()).unwrap();
    let html = lab::html::report(&report);
    assert!(!html.contains("<script") && !html.contains("src=\"http") && !html.contains("<link"), "self-contained");
    let registration = "exec; SFrame sections: 1 registered, 0 refused, 1 removed (frames below";
    for needle in ["CPU 0", "CPU 1", "record on CPU 1", "do_sleep", "Flame graph", "exact", registration] {
        assert!(html.contains(needle), "report lacks {needle:?}");
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-html");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    std::fs::write(&page, &html).unwrap();
    if !common::tools_or_skip(&["chromium"]) {
        return;
    }
    let url = format!("file://{}", page.display());
    let dom = chromium(&["--dump-dom", &url], &dir.join("profile-dom"));
    let dom = String::from_utf8_lossy(&dom.stdout);
    for needle in ["CPU 0", "CPU 1", "task lab", "do_sleep"] {
        assert!(dom.contains(needle), "rendered page lacks {needle:?}");
    }
    let png = dir.join("report.png");
    let shot = chromium(
        &["--window-size=1200,1500", &format!("--screenshot={}", png.display()), &url],
        &dir.join("profile-shot"),
    );
    assert!(png.is_file(), "no screenshot: {}", String::from_utf8_lossy(&shot.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let pixels = &buf[..info.buffer_size()];
    let step = info.color_type.samples();
    let colours: std::collections::BTreeSet<&[u8]> = pixels.chunks(step).collect();
    assert!(colours.len() > 50, "the screenshot looks blank: {} colours", colours.len());
}
