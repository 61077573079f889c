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
//! * **past a noreturn call**: the frame the walk could not unwind is a
//!   return address just past a call to a noreturn function that ends its
//!   caller (`exit` calling `__run_exit_handlers`): looked up at the return
//!   address, as the kernel does, it has no FDE or another row than the call;
//! * **no CFI**: the frame the walk could not unwind is in code no FDE
//!   covers (crtstuff's `__do_global_dtors_aux` on s390x, run by `dlclose`);
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

/// What the test knows of the objects of a run: text ranges, PLT ranges,
/// and each object's SFrame section at its load address.
struct Objects {
    texts: Vec<Text>,
    plts: Vec<(u64, u64)>,
    sections: Vec<sframe::read::Section<Vec<u8>>>,
}

/// Text ranges of every object the guest maps in `args`' run, by file name,
/// and the PLT sections' ranges among them.
fn objects(arch: Arch, args: &[&str]) -> Objects {
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
    let mut sections = Vec::new();
    for o in &mapped {
        if let (Some((offset, size)), Some((addr, _))) = (sframe::elf::sframe_segment(&o.file.bytes), o.sframe()) {
            let bytes = o.file.bytes[offset as usize..(offset + size) as usize].to_vec();
            sections.push(sframe::read::Section::parse(bytes, addr).expect("a lab root section parses"));
        }
        let elf = goblin::elf::Elf::parse(&o.file.bytes).expect("a mapped object parses");
        for sh in &elf.section_headers {
            if elf.shdr_strtab.get_at(sh.sh_name).is_some_and(|n| n.starts_with(".plt")) {
                plts.push((sh.sh_addr + o.bias, sh.sh_addr + o.bias + sh.sh_size));
            }
        }
    }
    Objects { texts, plts, sections }
}

/// Explained stacks per cause, and samples taken in ld.so for a first call.
#[derive(Debug, Default)]
struct Tally {
    exact: usize,
    libc: usize,
    plt: usize,
    past_call: usize,
    no_cfi: usize,
    trampoline: usize,
    binding_samples: usize,
    binding_exact: usize,
}

/// Runs scenario `name` on `arch` (its guest runs `args`) and explains
/// every stack that is not exact; `libc_registered`: the scenario registers
/// libc.so.6's section (the simulated loader), so no walk may fall back there.
fn check(name: &str, arch: Arch, args: &[&str], libc_registered: bool) -> Tally {
    let file = repo().join("scenarios").join(format!("{name}-{}.json", arch.name()));
    let report = lab::run(&Scenario::load(&file).unwrap()).unwrap();
    assert!(report.violations.is_empty(), "{name} {arch}: {:?}", report.violations);
    let Objects { texts: objects, plts, sections } = objects(arch, args);
    let in_plt = |pc: u64| plts.iter().any(|&(s, e)| (s..e).contains(&pc));
    // The row that applies at `pc`, as (FDE start, row start), if any.
    let row = |pc: u64| sections.iter().find_map(|s| s.lookup(pc).ok().flatten().map(|l| (l.fde.start, l.fre_start)));
    // A return address whose row is not the call's (the call has one): no
    // FDE covers the return address, or it starts a new row (the call was
    // the last instruction of its region).
    let past_call = |ra: u64| row(ra - 1).is_some() && row(ra) != row(ra - 1);
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
        // The lab's own explanation, in words, for every stack that is not exact.
        let why = lab::explain::explain(&report, s).expect("a stack that is not exact is explained");
        assert!(!why.reason.is_empty() && why.frame + 1 == diverged, "{name} {arch}: {why:?}");
        // The frames the walk had to unwind up to the divergence.
        let walked = &truth[..diverged.min(truth.len())];
        if !libc_registered && walked.iter().any(|&pc| object(pc) == Some("libc.so.6")) {
            tally.libc += 1;
        } else if walked.first().is_some_and(|&pc| in_plt(pc)) {
            tally.plt += 1;
        } else if walked.len() > 1 && walked.last().is_some_and(|&ra| past_call(ra)) {
            // The frame the walk could not unwind is a return address just
            // past a call to a noreturn function that ends its caller: the
            // kernel looks callers up at the return address, where no FDE
            // (or another row) applies, not at the call.
            assert!(why.reason.contains("never returns"), "{name} {arch} sample {}: {why:?}", s.sample);
            tally.past_call += 1;
        } else if walked.windows(2).any(|w| is_ld_so(w[0]) && is_caller_code(w[1]))
            || walked.last().is_some_and(|&pc| is_ld_so(pc))
                && truth.get(diverged).is_some_and(|&pc| is_caller_code(pc))
        {
            tally.trampoline += 1;
        } else if walked.last().is_some_and(|&pc| row(pc).is_none() && row(pc.wrapping_sub(1)).is_none()) {
            // Code without CFI (crtstuff's __do_global_dtors_aux on s390x,
            // run by dlclose): no FDE, so no SFrame.
            assert!(why.reason.contains("no SFrame"), "{name} {arch} sample {}: {why:?}", s.sample);
            tally.no_cfi += 1;
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
        let t = check("dynamic-basic", arch, &["recurse", "300"], false);
        assert!(t.exact >= 19, "{arch}: {t:?}");
        eprintln!("dynamic-basic {arch}: {t:?}");
    }
}

#[test]
fn lazy_binding_stacks_are_exact_or_explained_and_samples_hit_the_resolver() {
    for arch in Arch::ALL {
        let t = check("lazy-binding", arch, &["lazy", "30"], false);
        eprintln!("lazy-binding {arch}: {t:?}");
        assert!(t.binding_samples >= 20, "{arch}: {t:?}");
    }
}

/// `validate` of `program` (a path under `root`) with SFrame alone: every
/// object's section registered, no stack wrong, most exact.
fn validate_clean(root: &std::path::Path, program: &str, args: &[&str], what: &str) {
    let results = lab::validate::validate(
        &root.join(program.trim_start_matches('/')),
        Some(root),
        &args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        97,
        &[kmodel::unwind::Method::Sframe],
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let r = &results["sframe"];
    assert_eq!(r.registration, lab::loader::Registration::Loader, "{what}");
    assert!(r.samples > 500, "{what}: {} samples", r.samples);
    assert_eq!((r.wrong, r.lost), (0, 0), "{what}: {:?}", r.failures);
    // Every place is named and every failure has a reason in words.
    for f in &r.failures {
        assert!(!f.example.place.starts_with("0x") && !f.example.reason.is_empty(), "{what}: {f:?}");
    }
    assert!(r.exact * 10 >= r.samples * 7, "{what}: {} of {} exact", r.exact, r.samples);
}

/// `validate` takes a dynamic program with its lab root: with SFrame in
/// every object, the dynamic guest's stacks are never wrong on any
/// architecture (the walks that stop are at ld.so's lazy-binding
/// trampolines, PLT stubs and return addresses past noreturn calls).
#[test]
fn validate_finds_no_wrong_stack_in_the_dynamic_guest() {
    for arch in Arch::ALL {
        let root = repo().join("guests/root").join(arch.name());
        validate_clean(&root, "guests/lab-dyn", &["plugin"], &format!("lab-dyn on {arch}"));
    }
}

/// The same for two of Debian's own programs, `sort` and `gzip`, each on a
/// lab root `unwindlab sysroot` makes from the Debian root the set-up
/// fetched (`make deps`).
#[test]
fn validate_finds_no_wrong_stack_in_debian_programs() {
    let cache = std::env::var_os("UNWINDLAB_DEBIAN_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
        base.join("unwindlab/debian")
    });
    for (debian, arch) in [("amd64", Arch::X86_64), ("arm64", Arch::Aarch64), ("s390x", Arch::S390x)] {
        let debian_root = cache.join(format!("root-{debian}"));
        if !debian_root.join("usr/bin/sort").exists() {
            assert!(std::env::var_os("CI").is_none(), "{}: not fetched (make deps)", debian_root.display());
            eprintln!("skipping: {} not fetched (make deps)", debian_root.display());
            return;
        }
        for (program, args) in [("sort", &["/in.txt"][..]), ("gzip", &["-c", "/in.txt"])] {
            let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("lab-root-{program}-{debian}"));
            let _ = std::fs::remove_dir_all(&root);
            let status = std::process::Command::new(env!("CARGO_BIN_EXE_unwindlab"))
                .arg("sysroot")
                .arg(debian_root.join("usr/bin").join(program))
                .arg("--prefix")
                .arg(&debian_root)
                .arg("-o")
                .arg(&root)
                .stdout(std::process::Stdio::null())
                .status()
                .expect("run unwindlab sysroot");
            assert!(status.success(), "sysroot of {program} on {debian}");
            std::fs::write(root.join("in.txt"), "3\n1\n2\nkernel\nsframe\nb\na\n").unwrap();
            // A program inside the prefix keeps its path in the lab root.
            validate_clean(&root, &format!("usr/bin/{program}"), args, &format!("{program} on {arch}"));
        }
    }
}

/// With the simulated loader, libc.so.6 and the plugin are registered as
/// they are mapped: what is not exact is a PLT stub, a PC without an FDE or
/// ld.so's trampoline, never a frame in an unregistered object; nine
/// stacks in ten are exact.
#[test]
fn loader_registration_stacks_are_exact_or_explained_without_fallback_to_libc() {
    for arch in Arch::ALL {
        let t = check("loader-registration", arch, &["plugin", "2"], true);
        eprintln!("loader-registration {arch}: {t:?}");
        assert!(t.exact * 10 >= (t.exact + t.plt + t.past_call + t.no_cfi + t.trampoline) * 9, "{arch}: {t:?}");
    }
}
