//! `unwindlab sframe dump|lookup|check` (and the dispatch to `gen`,
//! `compare`, `merge`).

use clap::{Args, Subcommand};
use sframe::elf::{self, SframeInput};
use sframe::read::dump::{self, ObjdumpStyle};
use sframe::read::validate::{self, Profile};
use sframe::Section;

use super::common::{emit, emit_line, parse_addr, EXIT_INVALID, EXIT_OK, EXIT_USAGE};

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
    /// Check files' own .sframe against their DWARF CFI at every PC, with
    /// no execution (files and directories, on every core, in shards).
    Compare(super::sframe_compare::CompareArgs),
    /// Merge the JSON reports of `compare --shard` into one report.
    Merge(super::sframe_compare::MergeArgs),
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
        let input = elf::load(&self.file, self.base.unwrap_or(0)).map_err(|e| e.to_string())?;
        Ok(match self.base {
            Some(base) => input.at(base),
            None => input,
        })
    }
}

pub(crate) fn run(cmd: SframeCommand) -> i32 {
    match cmd {
        SframeCommand::Dump { input, json, objdump } => run_dump(&input, json, objdump.as_deref()),
        SframeCommand::Lookup { input, json, pcs } => run_lookup(&input, json, &pcs),
        SframeCommand::Check { input, kernel, json } => run_check(&input, kernel, json),
        SframeCommand::Gen(args) => super::sframe_gen::run(&args),
        SframeCommand::Compare(args) => super::sframe_compare::run_compare(&args),
        SframeCommand::Merge(args) => super::sframe_compare::run_merge(&args),
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
            Ok(Some(found)) => emit_line(&format!("{pc:#x}: {}", found.describe(section.header().abi))),
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
    let report = validate::check(input.bytes.as_slice(), input.base, &options).for_file(&args.file, profile);
    if json {
        emit_line(&to_json(&report));
    } else {
        emit(&report.to_string());
    }
    if report.valid {
        EXIT_OK
    } else {
        EXIT_INVALID
    }
}
