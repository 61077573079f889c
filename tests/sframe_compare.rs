//! `unwindlab sframe compare` (issue 16, item 3): the static check of
//! `.sframe` against CFI over the committed guests finds every own section
//! in agreement with its CFI; `--shard K/N` outputs merged by `sframe
//! merge` give exactly the report of one run; a malformed ELF file is an
//! error in the report (never a panic) and other files in a directory are
//! skipped quietly.

use std::path::{Path, PathBuf};
use std::process::Command;

fn unwindlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_unwindlab")).args(args).output().expect("run unwindlab");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn guests() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("guests/bin").display().to_string()
}

#[test]
fn committed_guests_agree_with_their_cfi() {
    let (code, json, err) = unwindlab(&["sframe", "compare", "--json", &guests()]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let files = report["files"].as_array().unwrap();
    assert!(files.len() >= 25, "{} files", files.len());
    let totals = &report["totals"];
    assert_eq!((totals["errors"].as_u64(), totals["disagreeing_bytes"].as_u64()), (Some(0), Some(0)));
    // Every guest built with SFrame (V3 from the generator, V1 from gas) was
    // checked on most of its code; the others say they have none.
    for f in files {
        let name = f["file"].as_str().unwrap();
        let sframe = f["sframe"].as_str().unwrap();
        if name.ends_with("-v3") || name.ends_with("-fpv3") || name.ends_with("-gsframe") {
            assert!(sframe.starts_with("SFrame V"), "{name}: {sframe}");
            assert!(f["checked_bytes"].as_u64().unwrap() > 2000, "{name}: {f}");
        } else if name.ends_with("-fp") || name.ends_with("-o2") {
            assert_eq!(sframe, "none", "{name}");
        }
    }
    // gas's V1 covers the program's own code only: libc's functions are
    // reported as CFI without SFrame, each with a reason.
    let gsframe = files.iter().find(|f| f["file"].as_str().unwrap().ends_with("x86_64/lab-gsframe")).unwrap();
    let uncovered = gsframe["uncovered"].as_array().unwrap();
    assert!(uncovered.len() > 100 && uncovered.iter().all(|u| !u["reason"].as_str().unwrap().is_empty()));
    let (_, text, _) = unwindlab(&["sframe", "compare", &guests()]);
    assert!(text.contains("x86_64/lab-fp: no .sframe section (the toolchain emitted none)"), "{text}");
    assert!(text.contains("files (") && text.contains("0 of "), "{text}");
}

#[test]
fn shard_reports_merge_into_the_report_of_one_run() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sframe-compare-shards");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Guests plus a corrupt ELF and a text file the walk must skip.
    let mut corrupt = std::fs::read(Path::new(&guests()).join("x86_64/lab-v3")).unwrap();
    corrupt.truncate(200);
    std::fs::write(dir.join("corrupt-elf"), &corrupt).unwrap();
    std::fs::write(dir.join("notes.txt"), "not an ELF file").unwrap();
    let dir_arg = dir.display().to_string();
    let (code, whole, err) = unwindlab(&["sframe", "compare", "--json", &guests(), &dir_arg]);
    assert_eq!(code, 1, "the corrupt file is an error: {err}");
    let report: serde_json::Value = serde_json::from_str(&whole).unwrap();
    let files = report["files"].as_array().unwrap();
    assert!(files.iter().all(|f| !f["file"].as_str().unwrap().ends_with("notes.txt")), "non-ELF files are skipped");
    let bad = files.iter().find(|f| f["file"].as_str().unwrap().ends_with("corrupt-elf")).unwrap();
    assert!(bad["error"].as_str().is_some_and(|e| !e.is_empty()), "{bad}");
    let mut shards = Vec::new();
    for k in 0..3 {
        let (_, json, err) =
            unwindlab(&["sframe", "compare", "--json", "--shard", &format!("{k}/3"), &guests(), &dir_arg]);
        let shard: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("shard {k}: {e}: {err}"));
        assert!(shard["files"].as_array().unwrap().len() < files.len(), "shard {k} is a part");
        let path = dir.join(format!("shard-{k}.json"));
        std::fs::write(&path, json).unwrap();
        shards.push(path.display().to_string());
    }
    let mut args = vec!["sframe", "merge", "--json"];
    args.extend(shards.iter().map(String::as_str));
    let (code, merged, err) = unwindlab(&args);
    assert_eq!(code, 1, "{err}");
    assert_eq!(merged, whole, "merged shards differ from one run");
    // A shard given twice is refused, naming the file.
    let (code, _, err) = unwindlab(&["sframe", "merge", &shards[0], &shards[0]]);
    assert_eq!(code, 2);
    assert!(err.contains("more than one report"), "{err}");
    let (code, _, err) = unwindlab(&["sframe", "compare", "--shard", "3/3", &guests()]);
    assert_eq!(code, 2, "{err}");
}
