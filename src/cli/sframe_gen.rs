//! `unwindlab sframe gen`: SFrame from an ELF file's DWARF CFI, written as a
//! raw section or injected into a copy of the file.

use sframe::elf::{self, inject};
use sframe::Version;

use super::common::{emit, emit_line, EXIT_INVALID, EXIT_OK, EXIT_USAGE};

/// Options of `sframe gen`.
#[derive(Debug, clap::Args)]
pub(crate) struct GenArgs {
    /// The ELF file whose .eh_frame (or .debug_frame) to translate.
    file: String,
    /// SFrame version to write.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=3))]
    sframe_version: u8,
    /// Where to write the raw section (without --inject) or the new ELF file.
    #[arg(short, long, value_name = "OUT")]
    output: Option<String>,
    /// Write a copy of FILE with the section in a new PT_GNU_SFRAME segment.
    #[arg(long, requires = "output")]
    inject: bool,
    /// Address the raw section will be loaded at (default: where --inject
    /// would put it).
    #[arg(long, value_parser = super::common::parse_addr, conflicts_with = "inject")]
    base: Option<u64>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &GenArgs) -> i32 {
    let input = match elf::load_cfi(&args.file) {
        Ok(input) => input,
        Err(e) => {
            eprintln!("unwindlab: {e}");
            return EXIT_USAGE;
        }
    };
    let version = if args.sframe_version == 2 { Version::V2 } else { Version::V3 };
    let generated = match elf::generate_section(&input, &args.file, version, args.base) {
        Ok(generated) => generated,
        Err(e) => {
            eprintln!("unwindlab: {}: {e}", args.file);
            return EXIT_INVALID;
        }
    };
    if let Some(out) = &args.output {
        let written = if args.inject {
            match inject::inject(&input.data, &generated.section) {
                Ok(bytes) => inject::write_like(out, &bytes, &args.file),
                Err(e) => {
                    eprintln!("unwindlab: {}: {e}", args.file);
                    return EXIT_INVALID;
                }
            }
        } else {
            std::fs::write(out, &generated.section)
        };
        if let Err(e) = written {
            eprintln!("unwindlab: {out}: {e}");
            return EXIT_USAGE;
        }
    }
    if args.json {
        emit_line(&serde_json::to_string_pretty(&generated.coverage).unwrap_or_default());
    } else {
        emit(&generated.coverage.to_string());
    }
    EXIT_OK
}
