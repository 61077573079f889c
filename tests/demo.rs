//! `unwindlab demo` narrates real runs on each architecture; the narration
//! is deterministic and snapshotted.

use std::process::Command;

#[test]
fn demo_narration_on_every_architecture() {
    for arch in ["x86_64", "aarch64", "s390x"] {
        let out = Command::new(env!("CARGO_BIN_EXE_unwindlab")).args(["demo", "--arch", arch]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("9. Upstream"), "{text}");
        insta::assert_snapshot!(format!("demo-{arch}"), text);
    }
}
