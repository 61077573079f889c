//! Programs with known defects (issue 16): built here for x86-64, AArch64
//! and s390x (static glibc), each with
//!
//! * `nocfi_spin`, a hand-written assembly function without CFI;
//! * `wrong_row`, whose SFrame rows are rewritten with the crate's writer to
//!   a CFA 16 bytes off (the CFI stays right);
//! * `ends_in_noreturn`, whose last instruction calls a `noreturn` function,
//!   so the return address lies just past its end;
//! * `cfi_astray`, a hand-written assembly function whose CFI describes
//!   another frame than its caller's: it says the return address is a word
//!   where its caller (`cfi_caller`) left a marker, so the SFrame generated
//!   from it agrees with it and still gives a wrong caller.
//!
//! `validate` must name each with the right cause, function and PC, and
//! `sframe compare` must find the wrong rows statically, in `wrong_row` only.

use std::path::{Path, PathBuf};
use std::process::Command;

use kmodel::unwind::Method;
use lab::explain::Cause;
use lab::validate::{validate_sframe, Plan, SframeSource};
use sframe::elf::{self, compare, inject};
use sframe::write::generate::{generate, Cfi};
use sframe::write::{encode, Word};
use sframe::{Abi, Version};

const SOURCE: &str = r#"
#include <unistd.h>
volatile long sink;
void nocfi_spin(long n);
__asm__(".text\n.globl nocfi_spin\n.type nocfi_spin, %function\nnocfi_spin:\n"
#if defined(__x86_64__)
        "1: dec %rdi\n jnz 1b\n ret\n"
#elif defined(__aarch64__)
        "1: subs x0, x0, #1\n b.ne 1b\n ret\n"
#else
        "1: brctg %r2, 1b\n br %r14\n"
#endif
        ".size nocfi_spin, .-nocfi_spin\n");
void cfi_caller(long n);
__asm__(".text\n.globl cfi_caller\n.type cfi_caller, %function\n"
        ".type cfi_astray, %function\n"
#if defined(__x86_64__)
        /* The marker just above the return address; cfi_astray's CFI puts
           its CFA 8 bytes too high, so its "return address" is the marker. */
        "cfi_caller:\n .cfi_startproc\n push $0x1234\n .cfi_adjust_cfa_offset 8\n call cfi_astray\n"
        " add $8, %rsp\n .cfi_adjust_cfa_offset -8\n ret\n .cfi_endproc\n"
        "cfi_astray:\n .cfi_startproc\n .cfi_def_cfa_offset 16\n1: dec %rdi\n jnz 1b\n ret\n .cfi_endproc\n"
#elif defined(__aarch64__)
        /* The marker at sp + 16 of the caller's frame; cfi_astray's CFI says
           a frame of 32 bytes with the return address 16 below its top. */
        "cfi_caller:\n .cfi_startproc\n stp x29, x30, [sp, #-32]!\n .cfi_def_cfa_offset 32\n"
        " .cfi_offset 29, -32\n .cfi_offset 30, -24\n mov x9, #0x1234\n str x9, [sp, #16]\n bl cfi_astray\n"
        " ldp x29, x30, [sp], #32\n .cfi_def_cfa_offset 0\n .cfi_restore 29\n .cfi_restore 30\n ret\n .cfi_endproc\n"
        "cfi_astray:\n .cfi_startproc\n .cfi_def_cfa_offset 32\n .cfi_offset 30, -16\n"
        "1: subs x0, x0, #1\n b.ne 1b\n ret\n .cfi_endproc\n"
#else
        /* The marker in the r14 slot of the save area cfi_astray may use;
           its CFI says r14 was saved there. */
        "cfi_caller:\n .cfi_startproc\n stmg %r14, %r15, 112(%r15)\n .cfi_offset 14, -48\n .cfi_offset 15, -40\n"
        " aghi %r15, -160\n .cfi_adjust_cfa_offset 160\n lghi %r1, 0x1234\n stg %r1, 112(%r15)\n"
        " brasl %r14, cfi_astray\n lmg %r14, %r15, 272(%r15)\n .cfi_restore 14\n .cfi_restore 15\n"
        " .cfi_def_cfa_offset 160\n br %r14\n .cfi_endproc\n"
        "cfi_astray:\n .cfi_startproc\n .cfi_offset 14, -48\n1: brctg %r2, 1b\n br %r14\n .cfi_endproc\n"
#endif
        ".size cfi_caller, cfi_astray - cfi_caller\n.size cfi_astray, .-cfi_astray\n");
__attribute__((noinline)) void wrong_row(long n) { for (volatile long i = 0; i < n; i++) sink += i; }
__attribute__((noinline, noreturn)) void spin_and_exit(long n) {
    for (volatile long i = 0; i < n; i++) sink += i;
    _exit(0);
}
__attribute__((noinline)) void ends_in_noreturn(long n) { sink = n; spin_and_exit(n); }
int main(void) {
    nocfi_spin(100000);
    cfi_caller(100000);
    wrong_row(20000);
    ends_in_noreturn(20000);
}
"#;

/// Builds the program with `gcc` into `dir`, or `None` without the compiler
/// (outside CI).
fn build(gcc: &str, dir: &Path) -> Option<PathBuf> {
    let src = dir.join("defects.c");
    std::fs::write(&src, SOURCE).unwrap();
    let out = dir.join("defects");
    match Command::new(gcc).args(["-O1", "-static", "-o"]).arg(&out).arg(&src).output() {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!("{gcc}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "{gcc}: {e}");
            eprintln!("skipping: {gcc}: {e}");
            None
        }
    }
}

/// A copy of `prog` with SFrame V3 from its CFI injected, `wrong_row`'s
/// rows given a CFA 16 bytes too high.
fn inject_wrong_row(prog: &Path) -> (PathBuf, (u64, u64)) {
    let input = elf::load_cfi(prog.to_str().unwrap()).unwrap();
    let function = |name: &str| {
        let (start, size, _) = input.symbols.entries().iter().find(|s| s.2 == name).unwrap();
        (*start, *size)
    };
    let wrong = function("wrong_row");
    let cfi = Cfi { kind: input.kind, data: &input.cfi, address: input.cfi_address };
    let mut table = generate(&cfi, input.abi, Version::V3).unwrap().table;
    // s390x encodes CFA offsets in units of 8 bytes.
    let step = if input.abi == Abi::S390x { 2 } else { 16 };
    let f = table.functions.iter_mut().find(|f| f.start == wrong.0).expect("wrong_row has SFrame");
    for row in &mut f.rows {
        let Some(Word::Signed(cfa)) = row.words.first_mut() else { panic!("{row:?}") };
        *cfa += step;
    }
    let address = inject::placement(&input.data).unwrap().address;
    let section = encode(&table, address).unwrap();
    let out = prog.with_extension("wrong-row");
    std::fs::write(&out, inject::inject(&input.data, &section).unwrap()).unwrap();
    (out, wrong)
}

#[test]
fn validate_and_compare_name_each_defect() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("defects");
    for gcc in ["gcc", "aarch64-linux-gnu-gcc", "s390x-linux-gnu-gcc"] {
        let dir = tmp.join(gcc);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let Some(prog) = build(gcc, &dir) else { continue };
        let (defective, wrong) = inject_wrong_row(&prog);
        let symbols = elf::Symbols::parse(&std::fs::read(&prog).unwrap(), 0);
        let range = |name: &str| {
            let (start, size, _) = symbols.entries().iter().find(|s| s.2 == name).unwrap();
            *start..*start + *size
        };

        // Statically: only wrong_row disagrees with the CFI, at its rows.
        let report = compare::compare_file(&defective);
        assert!(report.error.is_none(), "{gcc}: {report:?}");
        assert!(!report.disagreements.is_empty(), "{gcc}: the wrong row is not found");
        for d in &report.disagreements {
            assert_eq!(d.function, "wrong_row", "{gcc}: {d:?}");
            assert!(wrong.0 <= d.start && d.end <= wrong.0 + wrong.1, "{gcc}: {d:?}");
        }

        // Running: each defect named with its cause, function and PC.
        let plan = Plan {
            every: 97,
            unwinders: &[Method::Sframe],
            source: SframeSource::Own,
            one_run: true,
            kernel: &Default::default(),
            perf_data: None,
            judging: Default::default(),
        };
        let results = validate_sframe(&defective, None, &[], plan, &mut |_| {}).unwrap();
        let r = &results["sframe"];
        let group = |cause: Cause, function: &str| {
            r.failures
                .iter()
                .find(|f| f.example.cause == cause && f.example.function == function)
                .unwrap_or_else(|| panic!("{gcc}: no {cause} group in {function}: {:#?}", r.failures))
        };
        let nocfi = group(Cause::NoCfi, "nocfi_spin");
        assert!(nocfi.pcs.iter().all(|pc| range("nocfi_spin").contains(pc)), "{gcc}: {nocfi:?}");
        assert!(nocfi.example.reason.contains("no FDE covers this PC"), "{gcc}: {nocfi:?}");
        let bad = group(Cause::WrongRow, "wrong_row");
        assert!(bad.pcs.iter().all(|pc| range("wrong_row").contains(pc)), "{gcc}: {bad:?}");
        assert!(bad.example.reason.contains("the CFI says"), "{gcc}: {bad:?}");
        assert!(bad.example.sframe_row.is_some() && bad.example.cfi_row.is_some() && bad.wrong > 0, "{gcc}: {bad:?}");
        // Next to the rows, the truth: the CFA, where the return address
        // is (x86-64: the call pushed it just below the CFA) and its value,
        // main's call of wrong_row.
        let (cfa, ra) = (bad.example.true_cfa.expect("true CFA"), bad.example.true_ra.expect("true RA"));
        assert!(range("main").contains(&ra), "{gcc}: {bad:?}");
        let slot = if gcc == "gcc" { format!(" at {:#x}", cfa - 8) } else { String::new() };
        assert_eq!(bad.example.ra_slot, (gcc == "gcc").then(|| cfa - 8), "{gcc}: {bad:?}");
        assert!(bad.example.reason.contains(&format!("true CFA {cfa:#x}, RA{slot} = main+")), "{gcc}: {bad:?}");
        // CFI that describes another frame: the rows agree with it, the
        // caller is the caller's marker.
        let astray = group(Cause::CfiWrong, "cfi_astray");
        assert!(astray.pcs.iter().all(|pc| range("cfi_astray").contains(pc)), "{gcc}: {astray:?}");
        assert!(astray.wrong > 0 && astray.example.frame == 0, "{gcc}: {astray:?}");
        assert_eq!(astray.example.sframe_row.is_some(), astray.example.cfi_row.is_some(), "{gcc}: {astray:?}");
        assert!(astray.example.reason.contains("it gave 0x1234"), "{gcc}: {astray:?}");
        assert!(range("cfi_caller").contains(&astray.example.true_ra.expect("true RA")), "{gcc}: {astray:?}");
        let past = group(Cause::PastNoreturn, "ends_in_noreturn");
        assert_eq!(past.pcs, [range("ends_in_noreturn").end], "{gcc}: {past:?}");
        assert!(past.example.frame >= 1, "{gcc}: {past:?}");
        eprintln!("{gcc}:\n{}", lab::validate::text(&results));
    }
}
