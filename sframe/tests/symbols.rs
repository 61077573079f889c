//! Naming functions of stripped files: a program built here with
//! `gcc -O2` and stripped, and a shared library stripped with
//! `strip --strip-all`, keep a name for every function their `.eh_frame`
//! describes: `.dynsym`'s where it has one, else `fde@0x<link address>`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use sframe::elf::{load_cfi, Symbols};
use sframe::write::generate::{fde_ranges, Cfi};

/// A copy of `file` stripped with `strip ARGS`, next to it as `NAME`.
fn stripped(file: &Path, args: &[&str], name: &str) -> PathBuf {
    let out = file.with_file_name(name);
    let status = Command::new("strip").args(args).arg("-o").arg(&out).arg(file).status().unwrap();
    assert!(status.success(), "strip {args:?} {}", file.display());
    out
}

/// Every FDE start of `file` (link-time addresses).
fn fde_starts(file: &Path) -> Vec<u64> {
    let input = load_cfi(file.to_str().unwrap()).unwrap();
    let cfi = Cfi { kind: input.kind, data: &input.cfi, address: input.cfi_address };
    fde_ranges(&cfi, input.abi).unwrap().into_iter().map(|(start, _)| start).filter(|&s| s != 0).collect()
}

/// The shared library `lib<name>.so` built from C `source` with
/// `gcc -O2 -fPIC -shared`.
fn shared_lib(name: &str, source: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("symbols");
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let lib = dir.join(format!("lib{name}.so"));
    let status = Command::new("gcc").args(["-O2", "-fPIC", "-shared", "-o"]).arg(&lib).arg(&c).status().unwrap();
    assert!(status.success(), "gcc -shared {name}.c");
    lib
}

fn symbols(file: &Path, bias: u64) -> Symbols {
    Symbols::parse(&std::fs::read(file).unwrap(), bias)
}

/// No FDE of `file` starts where `symbols` (loaded with `bias`) has no function.
fn every_fde_named(file: &Path, symbols: &Symbols, bias: u64) {
    let starts = fde_starts(file);
    assert!(starts.len() > 3, "{}: only {} FDEs", file.display(), starts.len());
    for start in starts {
        let (name, off) = symbols.lookup(start + bias).unwrap_or_else(|| panic!("FDE at {start:#x} has no name"));
        assert!(!name.is_empty() && off < 0x10000, "{start:#x}: {name}+{off:#x}");
    }
}

#[test]
fn a_stripped_program_names_its_functions_from_its_fdes() {
    if !common::tools_or_skip(&["gcc", "strip"]) {
        return;
    }
    let prog = common::build_prog("gcc", "symbols", "prog-o2", &["-O2"]);
    let full = symbols(&prog, 0);
    let main = full.entries().iter().find(|(_, _, name)| name == "main").expect("main in .symtab").0;
    let bare = stripped(&prog, &[], "prog-o2-stripped");
    let bias = 0x5555_5555_4000;
    let syms = symbols(&bare, bias);
    // `main` is in no dynamic symbol table: its FDE names it, at its link address.
    assert_eq!(syms.name(main + bias + 4), format!("fde@{main:#x}+0x4"));
    assert_eq!(syms.function(main + bias), format!("fde@{main:#x}"));
    // The imported functions have no address here: no symbol names code;
    // the PLT's FDEs are named after their sections.
    let names = |s: &Symbols| s.entries().iter().map(|e| e.2.clone()).collect::<Vec<String>>();
    assert!(names(&syms).iter().all(|n| n.starts_with("fde@") || n.starts_with(".plt")), "{:?}", names(&syms));
    assert!(names(&syms).iter().any(|n| n == ".plt"), "{:?}", names(&syms));
    every_fde_named(&bare, &syms, bias);
    // The unstripped file's symbols cover its FDEs but the PLT's.
    assert!(names(&full).iter().all(|n| !n.starts_with("fde@")), "{:?}", names(&full));
}

#[test]
fn a_stripped_shared_library_keeps_its_dynamic_symbols() {
    if !common::tools_or_skip(&["gcc", "strip"]) {
        return;
    }
    let lib = shared_lib(
        "syms",
        "__attribute__((noinline)) static long hidden(long a) { return a * 3 + (a >> 2); }\n\
         long exported(long a) { return hidden(a) + hidden(a + 1); }\n\
         long other(long a) { return exported(a) * 2; }\n",
    );
    let full = symbols(&lib, 0);
    let address = |name: &str| full.entries().iter().find(|e| e.2 == name).unwrap_or_else(|| panic!("{name}")).0;
    let (exported, other, hidden) = (address("exported"), address("other"), address("hidden"));
    let bare = stripped(&lib, &["--strip-all"], "libsyms-stripped.so");
    let bias = 0x7fff_f7d0_0000;
    let syms = symbols(&bare, bias);
    assert_eq!(syms.name(exported + bias + 1), "exported+0x1");
    assert_eq!(syms.function(other + bias), "other");
    // A static function is in no symbol table of the stripped file.
    assert_eq!(syms.function(hidden + bias), format!("fde@{hidden:#x}"));
    every_fde_named(&bare, &syms, bias);
}

#[test]
fn aliases_in_dynsym_prefer_the_plain_name() {
    if !common::tools_or_skip(&["gcc", "strip"]) {
        return;
    }
    let lib = shared_lib(
        "alias",
        "long put(long a) { return a * 5 + 1; }\n\
         extern long __put(long) __attribute__((alias(\"put\")));\n\
         extern long _IO_put(long) __attribute__((weak, alias(\"put\")));\n\
         long __get(long a) { return a * 7 + 2; }\n\
         extern long get(long) __attribute__((weak, alias(\"__get\")));\n",
    );
    let bare = stripped(&lib, &["--strip-all"], "libalias-stripped.so");
    let syms = symbols(&bare, 0);
    let address = |suffix: &str| syms.entries().iter().find(|e| e.2.ends_with(suffix)).unwrap().0;
    assert_eq!(syms.function(address("put")), "put");
    // A weak plain name (glibc's `snprintf`) over a global `__` one.
    assert_eq!(syms.function(address("get")), "get");
}
