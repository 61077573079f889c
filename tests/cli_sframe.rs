//! The `unwindlab sframe` commands on good and bad files: exit statuses,
//! messages naming the file and the problem, and never a panic.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn unwindlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_unwindlab")).args(args).output().unwrap()
}

fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-sframe");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit status in {0, 1, 2} and no panic message.
fn assert_no_panic(out: &Output, what: &str) {
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert!(matches!(out.status.code(), Some(0..=2)), "{what}: status {:?}, {stderr}", out.status);
}

#[test]
fn dump_of_a_raw_section_matches_objdump() {
    let v = common::simple_frame_vectors()
        .into_iter()
        .find(|v| v.name == "cfi-sframe-x86_64-esc-expr-1-2.46.json")
        .unwrap();
    let path = scratch("esc.sframe", &v.bytes);
    let p = path.to_str().unwrap();
    let out = unwindlab(&["sframe", "dump", p, "--base", &format!("{:#x}", v.base)]);
    assert!(out.status.success());
    let ours = text(&out.stdout).replace(p, "X");
    let (file, _) = common::banner(&v.objdump);
    assert_eq!(common::normalise(&ours), common::normalise(&v.objdump.replace(&file, "X")));
}

#[test]
fn lookup_prints_rules_and_json() {
    let v = common::simple_frame_vectors()
        .into_iter()
        .find(|v| v.name == "cfi-sframe-x86_64-esc-expr-1-2.46.json")
        .unwrap();
    let path = scratch("esc2.sframe", &v.bytes);
    let base = format!("{:#x}", v.base);
    let p = path.to_str().unwrap();
    let out = unwindlab(&["sframe", "lookup", p, "--base", &base, "0x401000", "0x40101a", "0x401100"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(
        lines,
        [
            "0x401000: FDE 0 (0x401000+0x5f) FRE 0 (+0x0): CFA = rsp+8; RA = [CFA-8]; FP = unchanged",
            "0x40101a: FDE 0 (0x401000+0x5f) FRE 3 (+0x1a): CFA = [rbp-8]; RA = [CFA-8]; FP = [rbp+0]",
            "0x401100: no SFrame row covers this PC",
        ]
    );
    let out = unwindlab(&["sframe", "lookup", p, "--base", &base, "--json", "0x40101a"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rule = &json[0]["lookup"]["rule"]["frame"];
    assert_eq!(rule["cfa"]["base"]["reg"], 6);
    assert_eq!(rule["cfa"]["deref"], true);
    assert_eq!(rule["ra"]["cfa"]["offset"], -8);
}

#[test]
fn check_accepts_vectors_and_explains_problems() {
    let v = common::simple_frame_vectors().into_iter().find(|v| v.name == "test-x86_64-2.46.json").unwrap();
    let good = scratch("good.sframe", &v.bytes);
    let out = unwindlab(&["sframe", "check", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let out = unwindlab(&["sframe", "check", "--kernel", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stdout));

    let mut bad = v.bytes.clone();
    bad[3] |= 0x80; // an undefined flag
    let bad = scratch("bad.sframe", &bad);
    let out = unwindlab(&["sframe", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("bad.sframe: INVALID"), "{stdout}");
    assert!(stdout.contains("flags 0x85 have bits undefined for version 3"), "{stdout}");

    let v1 = common::v1_samples().into_iter().find(|v| v.name == "v1-x86_64-t-exe").unwrap();
    let v1 = scratch("v1.sframe", &v1.bytes);
    let out = unwindlab(&["sframe", "check", "--kernel", v1.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("kernel would reject: only SFrame version 3 is accepted"));
}

#[test]
fn bad_files_get_clear_errors() {
    let missing = unwindlab(&["sframe", "dump", "/nonexistent/file"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("/nonexistent/file"));

    let empty = scratch("empty", b"");
    let out = unwindlab(&["sframe", "dump", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("empty: magic at offset 0x0"), "{}", text(&out.stderr));

    let garbage = scratch("garbage", b"this is not an SFrame section at all");
    let out = unwindlab(&["sframe", "check", garbage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("bad magic"));

    // Our own binary is an ELF file without .sframe.
    let exe = std::fs::read(env!("CARGO_BIN_EXE_unwindlab")).unwrap();
    let no_sframe = scratch("no-sframe.elf", &exe);
    let out = unwindlab(&["sframe", "check", no_sframe.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no .sframe section"));

    // An ELF header whose section table lies far beyond the file.
    let mut broken = exe[..4096].to_vec();
    broken[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
    let broken = scratch("broken.elf", &broken);
    let out = unwindlab(&["sframe", "dump", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("broken.elf: malformed ELF"), "{}", text(&out.stderr));

    let out = unwindlab(&["sframe", "lookup", garbage.to_str().unwrap(), "pc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("'pc' is not an address"));
}

#[test]
fn no_command_panics_on_mangled_sections() {
    let mut runs = 0;
    for v in common::all_with_data().into_iter().step_by(7) {
        let mut variants = vec![v.bytes[..v.bytes.len() / 2].to_vec(), v.bytes[..29.min(v.bytes.len())].to_vec()];
        for i in (0..v.bytes.len()).step_by(5) {
            let mut b = v.bytes.clone();
            b[i] ^= 0xa5;
            variants.push(b);
        }
        for (k, bytes) in variants.iter().enumerate() {
            let path = scratch(&format!("m-{}-{k}", v.name), bytes);
            let p = path.to_str().unwrap();
            let base = format!("{:#x}", v.base);
            let pc = format!("{:#x}", v.base.wrapping_sub(0x1000));
            for args in [
                vec!["sframe", "dump", p, "--base", &base],
                vec!["sframe", "dump", "--json", p, "--base", &base],
                vec!["sframe", "check", p, "--base", &base],
                vec!["sframe", "lookup", p, "--base", &base, &pc, "0x401000", "0x1129"],
            ] {
                runs += 1;
                assert_no_panic(&unwindlab(&args), &format!("{args:?}"));
            }
        }
    }
    assert!(runs > 200);
}
