//! The dynamic scenarios (issue 13): `dynamic-basic` and `lazy-binding` on
//! every architecture. The guest runs on its lab root (`guests/root/<arch>`:
//! Debian's ld.so and libc.so.6 with SFrame V3), and exec registers the
//! sections of the program and of ld.so only, as the v13 series does. Every
//! stack that is not exact must be explained by one of two causes, counted
//! per cause:
//!
//! * **libc**: the walk went through a frame in `libc.so.6`, whose section
//!   nobody registered, so it fell back to frame pointers there;
//! * **plt**: the sample hit a PLT stub, which no CFI describes on AArch64
//!   and s390x (the linkers emit `.eh_frame` for `.plt` on x86-64 only), so
//!   the first step fell back to frame pointers;
//! * **trampoline**: the walk went through ld.so's lazy-binding trampoline
//!   (the ld.so frame a PLT stub jumped to: its caller is a call site in
//!   another object), whose CFI does not describe the frame the
//!   PLT stub built (AArch64's `_dl_runtime_resolve` FDE has no CFI
//!   instructions at all in Debian's build; x86-64's keeps its CFA in %rbx,
//!   which SFrame cannot express).
//!
//! And `lazy-binding` must take samples inside ld.so while a first call is
//! being bound (on x86-64 none of them is exact: the trampoline's frame
//! cannot be described in SFrame, so every walk through it is cut there).

use emu::{Arch, Config, Emulator, Event};
use lab::scenario::Scenario;
use lab::verdict::Verdict;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// An object's file name and text range.
type Text = (String, u64, u64);

/// Text ranges of every object the guest maps in `args`' run, by file name,
/// and the PLT sections' ranges among them.
fn objects(arch: Arch, args: &[&str]) -> (Vec<Text>, Vec<(u64, u64)>) {
    let root = repo().join("guests/root").join(arch.name());
    let mut argv = vec![b"lab-dyn".to_vec()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    let config = Config {
        args: argv,
        root: Some(root.clone()),
        prefix: Some(PathBuf::new()),
        exe_path: Some(b"/guests/lab-dyn".to_vec()),
        ..Config::default()
    };
    let mut emu = Emulator::load(root.join("guests/lab-dyn"), config).expect("load the dynamic guest");
    emu.run_to_exit().expect("run the dynamic guest");
    let mapped: Vec<_> = emu
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::ObjectMapped { object, .. } => Some(object.clone()),
            _ => None,
        })
        .collect();
    let texts = mapped.iter().filter_map(|o| o.text().map(|(start, end)| (o.file.name(), start, end))).collect();
    let mut plts = Vec::new();
    for o in &mapped {
        let elf = goblin::elf::Elf::parse(&o.file.bytes).expect("a mapped object parses");
        for sh in &elf.section_headers {
            if elf.shdr_strtab.get_at(sh.sh_name).is_some_and(|n| n.starts_with(".plt")) {
                plts.push((sh.sh_addr + o.bias, sh.sh_addr + o.bias + sh.sh_size));
            }
        }
    }
    (texts, plts)
}

/// Explained stacks per cause, and samples taken in ld.so for a first call.
#[derive(Debug, Default)]
struct Tally {
    exact: usize,
    libc: usize,
    plt: usize,
    trampoline: usize,
    binding_samples: usize,
    binding_exact: usize,
}

fn check(name: &str, arch: Arch, args: &[&str]) -> Tally {
    let file = repo().join("scenarios").join(format!("{name}-{}.json", arch.name()));
    let report = lab::run(&Scenario::load(&file).unwrap()).unwrap();
    assert!(report.violations.is_empty(), "{name} {arch}: {:?}", report.violations);
    let (objects, plts) = objects(arch, args);
    let in_plt = |pc: u64| plts.iter().any(|&(s, e)| (s..e).contains(&pc));
    let object = |pc: u64| objects.iter().find(|(_, s, e)| (*s..*e).contains(&pc)).map(|o| o.0.as_str());
    let is_ld_so = |pc: u64| object(pc).is_some_and(|n| n.starts_with("ld"));
    // Code that calls through a PLT: every object but ld.so (libc.so.6 binds
    // its own PLT slots lazily too).
    let is_caller_code = |pc: u64| object(pc).is_some_and(|n| !n.starts_with("ld"));
    let mut tally = Tally::default();
    for s in &report.samples {
        let truth = &s.truth;
        // In ld.so, for a call another object made through its PLT: binding.
        if truth.len() > 1 && is_ld_so(truth[0]) && truth.windows(2).any(|w| is_ld_so(w[0]) && is_caller_code(w[1])) {
            tally.binding_samples += 1;
            tally.binding_exact += usize::from(s.verdict == Verdict::Exact);
        }
        // The first frame the walk got wrong or did not reach.
        let diverged = match s.verdict {
            Verdict::Exact => {
                tally.exact += 1;
                continue;
            }
            Verdict::Truncated { frames, .. } => frames,
            Verdict::Wrong { frame, .. } => frame,
            Verdict::Lost { ref why } => panic!("{name} {arch} sample {}: lost ({why})", s.sample),
        };
        // The frames the walk had to unwind up to the divergence.
        let walked = &truth[..diverged.min(truth.len())];
        if walked.iter().any(|&pc| object(pc) == Some("libc.so.6")) {
            tally.libc += 1;
        } else if walked.first().is_some_and(|&pc| in_plt(pc)) {
            tally.plt += 1;
        } else if walked.windows(2).any(|w| is_ld_so(w[0]) && is_caller_code(w[1]))
            || walked.last().is_some_and(|&pc| is_ld_so(pc))
                && truth.get(diverged).is_some_and(|&pc| is_caller_code(pc))
        {
            tally.trampoline += 1;
        } else {
            let names: Vec<String> =
                truth.iter().take(diverged + 2).map(|&pc| format!("{pc:#x} {}", object(pc).unwrap_or("?"))).collect();
            panic!("{name} {arch} sample {}: {:?} not explained; truth {names:?}", s.sample, s.verdict);
        }
    }
    tally
}

#[test]
fn dynamic_basic_stacks_are_exact_or_explained() {
    for arch in Arch::ALL {
        let t = check("dynamic-basic", arch, &["recurse", "300"]);
        assert!(t.exact >= 19, "{arch}: {t:?}");
        eprintln!("dynamic-basic {arch}: {t:?}");
    }
}

#[test]
fn lazy_binding_stacks_are_exact_or_explained_and_samples_hit_the_resolver() {
    for arch in Arch::ALL {
        let t = check("lazy-binding", arch, &["lazy", "30"]);
        eprintln!("lazy-binding {arch}: {t:?}");
        assert!(t.binding_samples >= 20, "{arch}: {t:?}");
    }
}

/// `validate` takes a dynamic program with its root and judges its stacks
/// on every architecture.
#[test]
fn validate_runs_the_dynamic_guest_on_its_root() {
    for arch in Arch::ALL {
        let root = repo().join("guests/root").join(arch.name());
        let results = lab::validate::validate(
            &root.join("guests/lab-dyn"),
            Some(&root),
            &["plugin".into()],
            997,
            &[kmodel::unwind::Method::Sframe],
            &mut |_| {},
        )
        .expect("validate the dynamic guest");
        let sframe = &results["sframe"];
        assert!(sframe.samples > 50, "{arch}: {} samples", sframe.samples);
        assert_eq!(sframe.lost, 0, "{arch}");
        assert!(sframe.exact > 0, "{arch}");
    }
}
