//! Dynamically linked programs: the committed dynamic guest
//! (`guests/bin/<arch>/lab-dyn`, lazy binding, and its dlopened
//! `libunwindlab-plugin.so`) on Debian's own `ld.so` and `libc.so.6` (the
//! host's for x86-64, the cross sysroots for AArch64 and s390x):
//!
//! * its output and status equal qemu-user's (x86-64: the program run natively);
//! * the fast ground truth and instruction count equal the per-instruction
//!   reference at every NMI point, through `ld.so` start-up, PLT calls,
//!   the lazy-binding resolver, `dlopen`ed code and calls between objects;
//! * inside `ld.so` while a first call is being bound, the ground truth is
//!   the caller's chain: the PLT call's return address into `first_calls`,
//!   then 31 frames of `deep`, then `main`;
//! * the objects table names the program, `ld.so`, `libc.so.6` and the plugin,
//!   and each `dlopen`/`dlclose` maps and unmaps the plugin.

mod common;

use emu::{Arch, Config, Emulator, Event, Exit, NmiSource, Stdin, Tracking};
use std::path::{Path, PathBuf};
use std::process::Command;

fn guest_dir(arch: Arch) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin").join(arch.name())
}

/// `LD_LIBRARY_PATH` for the guest: where the plugin is.
fn library_path(arch: Arch) -> String {
    format!("LD_LIBRARY_PATH={}", guest_dir(arch).display())
}

fn load(arch: Arch, args: &[&str], tracking: Tracking) -> Emulator {
    let exe = guest_dir(arch).join("lab-dyn");
    let mut argv = vec![b"lab-dyn".to_vec()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    let config = Config {
        args: argv,
        env: vec![library_path(arch).into_bytes()],
        stdin: Stdin::Bytes(b"hello\n".to_vec()),
        tracking,
        root: Some("/".into()),
        ..Config::default()
    };
    Emulator::load(&exe, config).expect("load the dynamic guest")
}

/// The reference run: qemu-user with the cross sysroot, or the program itself.
fn reference(arch: Arch, args: &[&str]) -> Option<(Vec<u8>, Vec<u8>, i32)> {
    let exe = guest_dir(arch).join("lab-dyn");
    let (_, qemu) = common::toolchain(arch);
    let mut cmd = match arch {
        Arch::X86_64 => Command::new(&exe),
        _ => {
            if !common::require(qemu) {
                return None;
            }
            let mut cmd = Command::new(qemu);
            cmd.arg("-L").arg(format!("/usr/{}-linux-gnu", arch.name())).arg("-0").arg("lab-dyn").arg(&exe);
            cmd
        }
    };
    let out = cmd
        .args(args)
        .env_clear()
        .env("LD_LIBRARY_PATH", guest_dir(arch))
        .stdin(std::fs::File::open("/dev/null").unwrap())
        .output()
        .expect("run the reference");
    Some((out.stdout, out.stderr, out.status.code().unwrap_or(-1)))
}

/// The address range of the program's function `name` (the guest is a PIE:
/// its symbols move by the load bias).
fn function(emu: &Emulator, name: &str) -> std::ops::Range<u64> {
    let bytes = std::fs::read(guest_dir(emu.arch()).join("lab-dyn")).unwrap();
    let elf = goblin::elf::Elf::parse(&bytes).unwrap();
    let sym = elf
        .syms
        .iter()
        .find(|s| s.is_function() && elf.strtab.get_at(s.st_name) == Some(name))
        .unwrap_or_else(|| panic!("no function {name}"));
    let bias = emu.image().bias;
    sym.st_value + bias..sym.st_value + bias + sym.st_size
}

#[test]
fn dynamic_guest_output_equals_reference() {
    for arch in Arch::ALL {
        for args in [&["lazy"][..], &["plugin", "3"], &["recurse", "50"], &["signal", "10"]] {
            let Some((stdout, stderr, status)) = reference(arch, args) else { continue };
            let mut emu = load(arch, args, Tracking::Blocks);
            let exit = emu.run_to_exit().expect("run");
            let what = format!("{arch} lab-dyn {}", args.join(" "));
            assert_eq!(String::from_utf8_lossy(emu.stdout()), String::from_utf8_lossy(&stdout), "{what}");
            assert_eq!(String::from_utf8_lossy(emu.stderr()), String::from_utf8_lossy(&stderr), "{what}");
            assert_eq!(exit, Exit::Code(status), "{what}");
            let warnings: Vec<_> = emu.events().iter().filter(|e| matches!(e, Event::Warning { .. })).collect();
            assert!(warnings.is_empty(), "{what}: {warnings:?}");
        }
    }
}

/// Fast and per-instruction ground truth agree at every NMI point of the
/// dynamic guest's workloads, and in `ld.so` during lazy binding the truth
/// is the caller's chain.
fn ground_truth_across_objects(arch: Arch) {
    let mut in_resolver = 0;
    for (args, period) in [(&["lazy"][..], 7), (&["plugin", "2"], 11), (&["signal", "8"], 13)] {
        let mut emu = load(arch, args, Tracking::Instructions);
        let what = format!("{arch} lab-dyn {}", args.join(" "));
        let [first_calls, deep, main] = ["first_calls", "deep", "main"].map(|f| function(&emu, f));
        let ld_so = emu.objects().into_iter().find(|o| o.file.name().starts_with("ld")).expect("ld.so is mapped");
        let ld_text = ld_so.text().expect("ld.so has text");
        let source = NmiSource::every(period).unwrap();
        let mut points = 0;
        while let Some(point) = source.next(&mut emu).expect("run to the next NMI") {
            let reference = emu.reference_ground_truth().expect("reference tracking");
            assert_eq!(point.ground_truth, reference, "{what}: ground truths differ at {}", point.icount);
            assert_eq!(emu.reference_icount(), Some(point.icount), "{what}: counts differ at {}", point.icount);
            points += 1;
            let truth = &point.ground_truth;
            if (ld_text.0..ld_text.1).contains(&point.pc) {
                if let Some(at) = truth.iter().position(|ra| first_calls.contains(ra)) {
                    // The resolver (or what it calls) runs for a call first_calls made.
                    let callers = &truth[at + 1..];
                    assert!(callers.len() >= 32, "{what} at {}: {truth:x?}", point.icount);
                    assert!(callers[..31].iter().all(|ra| deep.contains(ra)), "{what} at {}: {truth:x?}", point.icount);
                    assert!(main.contains(&callers[31]), "{what} at {}: {truth:x?}", point.icount);
                    in_resolver += 1;
                }
            }
        }
        assert_eq!(emu.ground_truth(), emu.reference_ground_truth().unwrap(), "{what}: at exit");
        assert_eq!(emu.exit_status(), Some(Exit::Code(0)), "{what}");
        assert!(points > 1000, "{what}: only {points} NMI points");
        if args[0] == "plugin" {
            // Each round maps the plugin and unmaps it again.
            let plugin = |e: &Event| match e {
                Event::ObjectMapped { object, .. } if object.file.name() == "libunwindlab-plugin.so" => Some(true),
                Event::ObjectUnmapped { object, .. } if object.file.name() == "libunwindlab-plugin.so" => Some(false),
                _ => None,
            };
            let seen: Vec<bool> = emu.events().iter().filter_map(plugin).collect();
            assert_eq!(seen, [true, false, true, false], "{what}");
        }
    }
    // A dozen first calls, each resolved with tens of instructions at least.
    assert!(in_resolver >= 20, "{arch}: only {in_resolver} NMIs inside ld.so during lazy binding");
}

#[test]
fn ground_truth_across_objects_x86_64() {
    ground_truth_across_objects(Arch::X86_64);
}

#[test]
fn ground_truth_across_objects_aarch64() {
    ground_truth_across_objects(Arch::Aarch64);
}

#[test]
fn ground_truth_across_objects_s390x() {
    ground_truth_across_objects(Arch::S390x);
}

/// The objects table right after start (program and interpreter, mapped by
/// the kernel) and at the end of a run (libc too), with the program first.
#[test]
fn objects_table_names_every_object() {
    for arch in Arch::ALL {
        let mut emu = load(arch, &["recurse", "3"], Tracking::Blocks);
        let names = |emu: &Emulator| emu.objects().iter().map(|o| o.file.name()).collect::<Vec<_>>();
        let at_start = names(&emu);
        assert_eq!(at_start.len(), 2, "{arch}: {at_start:?}");
        assert_eq!(at_start[0], "lab-dyn", "{arch}: {at_start:?}");
        assert!(at_start[1].starts_with("ld"), "{arch}: {at_start:?}");
        let program = &emu.objects()[0];
        assert_eq!(program.bias, emu.image().bias, "{arch}");
        assert!(program.text().is_some_and(|(s, e)| (s..e).contains(&emu.image().entry)), "{arch}");
        assert!(program.build_id().is_some(), "{arch}");
        emu.run_to_exit().expect("run");
        let at_end = names(&emu);
        assert!(at_end.iter().any(|n| n == "libc.so.6"), "{arch}: {at_end:?}");
        let mapped = emu.events().iter().filter(|e| matches!(e, Event::ObjectMapped { .. })).count();
        assert_eq!(mapped, at_end.len(), "{arch}: one event per object: {at_end:?}");
    }
}
