//! `unwindlab sframe dump|lookup|check`.

use clap::{Args, Subcommand};
use sframe::elf::{self, SframeInput};
use sframe::read::dump::{self, ObjdumpStyle};
use sframe::read::validate::{self, Profile};
use sframe::{Abi, Base, CfaRule, Lookup, Recovery, RowRule, Section};

use super::{emit, emit_line, parse_addr, EXIT_INVALID, EXIT_OK, EXIT_USAGE};

#[derive(Debug, Subcommand)]
pub(crate) enum SframeCommand {
    /// Print a section the way `objdump --sframe` of the producing binutils does.
    Dump {
        #[command(flatten)]
        input: InputArgs,
        /// Print a JSON listing instead.
        #[arg(long)]
        json: bool,
        /// Imitate this binutils release's objdump (2.40 … 2.46) instead of
        /// the one that writes sections of this version.
        #[arg(long, value_name = "RELEASE")]
        objdump: Option<String>,
    },
    /// Print the unwind rule at each PC.
    Lookup {
        #[command(flatten)]
        input: InputArgs,
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
        /// Addresses to look up (0x-prefixed hex or decimal).
        #[arg(required = true, value_parser = parse_addr)]
        pcs: Vec<u64>,
    },
    /// Generate SFrame from an ELF file's DWARF CFI (raw section or injected).
    Gen(super::sframe_gen::GenArgs),
    /// Validate a section; exit status 0 if valid, 1 if not.
    Check {
        #[command(flatten)]
        input: InputArgs,
        /// Apply the Linux kernel unwinder's stricter acceptance rules.
        #[arg(long)]
        kernel: bool,
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct InputArgs {
    /// An ELF file (its .sframe section is used) or raw section bytes.
    file: String,
    /// Address of the section's first byte (raw input; overrides the ELF
    /// section address).
    #[arg(long, value_parser = parse_addr)]
    base: Option<u64>,
}

impl InputArgs {
    fn load(&self) -> Result<SframeInput, String> {
        let mut input = elf::load(&self.file, self.base.unwrap_or(0)).map_err(|e| e.to_string())?;
        if let Some(base) = self.base {
            // The ELF's own text range no longer applies at another address.
            input.text = input.text.filter(|_| base == input.base);
            input.base = base;
        }
        Ok(input)
    }
}

pub(crate) fn run(cmd: SframeCommand) -> i32 {
    match cmd {
        SframeCommand::Dump { input, json, objdump } => run_dump(&input, json, objdump.as_deref()),
        SframeCommand::Lookup { input, json, pcs } => run_lookup(&input, json, &pcs),
        SframeCommand::Check { input, kernel, json } => run_check(&input, kernel, json),
        SframeCommand::Gen(args) => super::sframe_gen::run(&args),
    }
}

fn fail(file: &str, what: impl std::fmt::Display) -> i32 {
    eprintln!("unwindlab: {file}: {what}");
    EXIT_INVALID
}

fn load_or_report(input: &InputArgs) -> Result<SframeInput, i32> {
    input.load().map_err(|e| {
        eprintln!("unwindlab: {e}");
        EXIT_USAGE
    })
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

fn run_dump(args: &InputArgs, json: bool, release: Option<&str>) -> i32 {
    let input = match load_or_report(args) {
        Ok(input) => input,
        Err(code) => return code,
    };
    let forced = match release.map(|r| (r, ObjdumpStyle::from_release(r))) {
        Some((r, None)) => {
            eprintln!("unwindlab: --objdump {r}: expected a binutils release from 2.40 to 2.46");
            return EXIT_USAGE;
        }
        Some((_, style)) => style,
        None => None,
    };
    let target = input.bfd_target.clone().unwrap_or_else(|| elf::raw_bfd_target(&input.bytes));
    if !input.found {
        // objdump prints the banner alone for a file without the section.
        if json {
            emit_line("null");
        } else {
            emit(&dump::file_banner(&args.file, &target));
        }
        eprintln!("unwindlab: {}: no .sframe section", args.file);
        return EXIT_OK;
    }
    let section = match Section::parse(input.bytes.as_slice(), input.base) {
        Ok(section) => section,
        Err(e) => return fail(&args.file, e),
    };
    let listing = match dump::listing(&section) {
        Ok(listing) => listing,
        Err(e) => return fail(&args.file, e),
    };
    if json {
        emit_line(&to_json(&listing));
    } else {
        let style = forced.unwrap_or_else(|| ObjdumpStyle::for_header(section.header()));
        emit(&dump::file_banner(&args.file, &target));
        emit(&dump::objdump_text(&listing, style));
    }
    EXIT_OK
}

fn run_lookup(args: &InputArgs, json: bool, pcs: &[u64]) -> i32 {
    let input = match load_or_report(args) {
        Ok(input) => input,
        Err(code) => return code,
    };
    if !input.found {
        return fail(&args.file, "no .sframe section");
    }
    let section = match Section::parse(input.bytes.as_slice(), input.base) {
        Ok(section) => section,
        Err(e) => return fail(&args.file, e),
    };
    let mut status = EXIT_OK;
    let mut results = Vec::new();
    for &pc in pcs {
        let result = section.lookup(pc);
        if json {
            results.push(match &result {
                Ok(found) => serde_json::json!({ "pc": pc, "lookup": found }),
                Err(e) => serde_json::json!({ "pc": pc, "error": e.to_string() }),
            });
            continue;
        }
        match result {
            Ok(Some(found)) => emit_line(&format!("{pc:#x}: {}", describe(section.header().abi, &found))),
            Ok(None) => emit_line(&format!("{pc:#x}: no SFrame row covers this PC")),
            Err(e) => {
                emit_line(&format!("{pc:#x}: error: {e}"));
                status = EXIT_INVALID;
            }
        }
    }
    if json {
        emit_line(&to_json(&results));
    }
    status
}

fn run_check(args: &InputArgs, kernel: bool, json: bool) -> i32 {
    let input = match load_or_report(args) {
        Ok(input) => input,
        Err(code) => return code,
    };
    if !input.found {
        return fail(&args.file, "no .sframe section");
    }
    let profile = if kernel { Profile::Kernel } else { Profile::Lab };
    let options = validate::Options { profile, text: input.text };
    let report = validate::check(input.bytes.as_slice(), input.base, &options);
    if json {
        let problems: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
        emit_line(&to_json(&serde_json::json!({
            "file": args.file,
            "profile": profile,
            "valid": report.is_valid(),
            "fdes": report.fdes,
            "fres": report.fres,
            "problems": problems,
            "more_problems": report.more_problems,
        })));
    } else if report.is_valid() {
        emit_line(&format!("{}: valid ({} FDEs, {} FREs)", args.file, report.fdes, report.fres));
    } else {
        emit_line(&format!("{}: INVALID", args.file));
        for problem in &report.problems {
            emit_line(&format!("  - {problem}"));
        }
        if report.more_problems > 0 {
            emit_line(&format!("  … and {} more", report.more_problems));
        }
    }
    if report.is_valid() {
        EXIT_OK
    } else {
        EXIT_INVALID
    }
}

/// One line a person can read: where the function is and how to unwind.
fn describe(abi: Abi, found: &Lookup) -> String {
    let fde = &found.fde;
    let place = format!(
        "FDE {} ({:#x}+{:#x}) FRE {} (+{:#x})",
        fde.index, fde.start, fde.size, found.fre_index, found.fre_start
    );
    match found.rule {
        RowRule::Outermost => format!("{place}: outermost frame (RA undefined)"),
        RowRule::Frame(frame) => format!(
            "{place}: CFA = {}; RA = {}{}; FP = {}",
            cfa_expr(abi, &frame.cfa),
            recovery_expr(abi, frame.ra, "link register"),
            if frame.ra_mangled { " (PAC-signed)" } else { "" },
            recovery_expr(abi, frame.fp, "unchanged"),
        ),
    }
}

fn base_name(abi: Abi, base: Base) -> String {
    abi.register_name(base.dwarf(abi))
}

fn cfa_expr(abi: Abi, cfa: &CfaRule) -> String {
    let sum = format!("{}{:+}", base_name(abi, cfa.base), cfa.offset);
    if cfa.deref {
        format!("[{sum}]")
    } else {
        sum
    }
}

fn recovery_expr(abi: Abi, rec: Recovery, untracked: &str) -> String {
    match rec {
        Recovery::Untracked | Recovery::Padding => untracked.into(),
        Recovery::Fixed(offset) | Recovery::Cfa { offset, deref: true } => format!("[CFA{offset:+}]"),
        Recovery::Cfa { offset, deref: false } => format!("CFA{offset:+}"),
        Recovery::Reg { reg, offset, deref } => {
            let sum = format!("{}{offset:+}", abi.register_name(reg));
            if deref {
                format!("[{sum}]")
            } else {
                sum
            }
        }
        Recovery::InRegister(reg) => abi.register_name(reg),
    }
}
