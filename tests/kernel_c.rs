//! Upstream in the loop: every x86-64 scenario runs on the kernel model and
//! on the kernel's own `kernel/unwind/` C code (the Debian `linux-source-7.x`
//! tree `make deps` fetched, built against the lab's shim), and the two give
//! identical kernel events, delivered stacks and verdicts — as the
//! scenario is (its own unwinders: `deferred.c` is the kernel's, the
//! proposals' walks the lab's) and with frame pointers only (upstream's own
//! configuration: `user.c` walks too). Where the model differs on purpose,
//! the difference is a named option and is listed here.
//!
//! A mutation check then patches copies of the tree with known bugs and
//! requires the differential run to catch each one.

use std::path::{Path, PathBuf};

use kmodel::unwind::Method;
use lab::kdiff::{kernel_diff, Outcome};
use lab::Scenario;

/// Exit-path variants that change `unwind_user_faultable()` itself: lab
/// designs that exist only in the model (`kmodel::backend_refuses`).
const MODEL_ONLY: [&str; 2] = ["exit-copy-on-exit-x86_64", "exit-unwind-at-syscall-entry-x86_64"];

fn x86_scenarios() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
        .expect("scenarios/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| p.file_stem().and_then(|s| s.to_str()).is_some_and(|s| s.ends_with("x86_64")))
        .collect();
    files.sort();
    files
}

/// Runs every x86-64 scenario (with `fp_only`, upstream's configuration)
/// on both implementations; returns (scenarios, events, samples) compared.
fn differential(fp_only: bool) -> (usize, usize, usize) {
    let (mut scenarios, mut events, mut samples) = (0, 0, 0);
    let mut differences = Vec::new();
    for file in x86_scenarios() {
        let name = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        let mut scenario = Scenario::load(&file).unwrap_or_else(|e| panic!("{e}"));
        if fp_only {
            scenario.kernel.unwinders = Some(vec![Method::Fp]);
        }
        match kernel_diff(&scenario, None) {
            Ok(Outcome::Identical { events: e, samples: s, .. }) => {
                scenarios += 1;
                events += e;
                samples += s;
            }
            Ok(other) => differences.push(format!("{name}: {other}")),
            Err(e) if MODEL_ONLY.contains(&name.as_str()) => {
                assert!(e.to_string().contains("exists only in the model"), "{name}: {e}");
            }
            Err(e) => differences.push(format!("{name}: cannot run: {e}")),
        }
    }
    assert!(differences.is_empty(), "the model and the kernel's code differ:\n{}", differences.join("\n"));
    (scenarios, events, samples)
}

#[test]
fn every_x86_64_scenario_is_identical_on_the_model_and_the_kernel_code() {
    let (n, events, samples) = differential(false);
    eprintln!(
        "kernel C vs model, scenarios as written: {n} scenarios identical ({events} kernel events, {samples} samples)"
    );
    assert!(n >= 40, "{n}");
}

#[test]
fn with_frame_pointers_only_user_c_walks_and_agrees_with_the_model() {
    let (n, events, samples) = differential(true);
    eprintln!("kernel C vs model, FP only (user.c walks): {n} scenarios identical ({events} kernel events, {samples} samples)");
    assert!(n >= 40, "{n}");
}

/// A copy of the cached tree's files with `file`'s `from` replaced by `to`.
fn mutated_tree(dir: &Path, file: &str, from: &str, to: &str) -> PathBuf {
    let tree = kupstream::KernelTree::default_tree().unwrap_or_else(|e| panic!("{e}"));
    for f in kupstream::FILES {
        let dest = dir.join(f);
        std::fs::create_dir_all(dest.parent().expect("a directory")).expect("create");
        let mut text = std::fs::read_to_string(tree.root.join(f)).expect("read");
        if f == file {
            assert!(text.contains(from), "{file} no longer contains {from:?}: the mutation needs updating");
            text = text.replacen(from, to, 1);
        }
        std::fs::write(&dest, text).expect("write");
    }
    dir.to_path_buf()
}

fn scenario(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(format!("{name}.json"));
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn known_bugs_planted_in_deferred_c_are_caught_by_the_differential_run() {
    let mutants: [(&str, &str, &str, &str, &str); 4] = [
        (
            "no exit hook (unwind_deferred_task_exit() does nothing)",
            "kernel/unwind/deferred.c",
            "\tif (!unwind_pending(info))\n\t\treturn;\n\n\tprocess_unwind_deferred(task);",
            "\treturn;\n\n\tprocess_unwind_deferred(task);",
            "exit-upstream-x86_64",
        ),
        ("the cookie counter's odd bit forgotten", "kernel/unwind/deferred.c", "u32 cnt = 1;", "u32 cnt = 0;", "basic-x86_64"),
        (
            "unwind_reset_info() skipped",
            "include/linux/unwind_deferred.h",
            "if (likely(!bits))",
            "if (1)",
            "basic-x86_64",
        ),
        (
            "UNWIND_PENDING cleared too early (right after task_work_add())",
            "kernel/unwind/deferred.c",
            "\tret = task_work_add(current, &info->work, twa_mode);\n",
            "\tret = task_work_add(current, &info->work, twa_mode);\n\tatomic_long_andnot(UNWIND_PENDING, &info->unwind_mask);\n",
            "three-tracers-x86_64",
        ),
    ];
    let base = std::env::temp_dir().join(format!("unwindlab-mutants-{}", std::process::id()));
    for (i, (bug, file, from, to, name)) in mutants.into_iter().enumerate() {
        let tree = mutated_tree(&base.join(i.to_string()), file, from, to);
        let outcome = kernel_diff(&scenario(name), Some(&tree)).unwrap_or_else(|e| panic!("{bug}: {e}"));
        match outcome {
            Outcome::Differs { difference, .. } => eprintln!(
                "mutant '{bug}': caught by {name} at {} ({} event, field {}: model {}, kernel C {})",
                difference.at, difference.what, difference.field, difference.model, difference.kernel_c
            ),
            Outcome::Identical { .. } => panic!("mutant '{bug}' was not caught by {name}"),
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_tree_that_does_not_build_is_named_with_its_file_and_line() {
    let dir = std::env::temp_dir().join(format!("unwindlab-badtree-{}", std::process::id()));
    let tree =
        mutated_tree(&dir, "kernel/unwind/deferred.c", "guard(irqsave)();", "guard(irqsave)(); frobnicate_kernel();");
    let mut s = scenario("basic-x86_64");
    s.kernel.implementation = lab::scenario::KernelImpl::KernelC;
    s.kernel.kernel_tree = Some(tree);
    let e = lab::run(&s).expect_err("a tree that does not build").to_string();
    assert!(e.contains("does not build against unwindlab's shim"), "{e}");
    assert!(e.contains("kernel/unwind/deferred.c:"), "{e}");
    assert!(e.contains("frobnicate_kernel"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tree_without_the_files_is_named() {
    let dir = std::env::temp_dir().join(format!("unwindlab-emptytree-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create");
    let e = kupstream::load(Some(&dir), true).err().expect("no files").to_string();
    assert!(e.contains("has no kernel/unwind/deferred.c"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fault_in_the_kernel_code_is_an_error_of_the_run_not_a_crash() {
    let dir = std::env::temp_dir().join(format!("unwindlab-crashtree-{}", std::process::id()));
    let tree = mutated_tree(
        &dir,
        "kernel/unwind/deferred.c",
        "\tbits = atomic_long_fetch_andnot(UNWIND_PENDING,",
        "\t*(volatile int *)8 = 0;\n\tbits = atomic_long_fetch_andnot(UNWIND_PENDING,",
    );
    let mut s = scenario("basic-x86_64");
    s.kernel.implementation = lab::scenario::KernelImpl::KernelC;
    s.kernel.kernel_tree = Some(tree);
    let e = lab::run(&s).expect_err("the code faults").to_string();
    assert!(e.contains("faulted"), "{e}");
    assert!(e.contains("Segmentation fault at address 0x8"), "{e}");
    assert!(e.contains("kernel/unwind/deferred.c:"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
