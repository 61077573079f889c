//! `unwindlab sframe gen`: SFrame from an ELF file's DWARF CFI, written as a
//! raw section or injected into a copy of the file.

use std::collections::BTreeMap;

use sframe::elf::{self, inject, CfiInput};
use sframe::write::generate::{self, Cfi, Generated};
use sframe::{write, Version};

use super::{emit, emit_line, EXIT_INVALID, EXIT_OK, EXIT_USAGE};

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
    #[arg(long, value_parser = super::parse_addr, conflicts_with = "inject")]
    base: Option<u64>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// The coverage summary of one generation.
#[derive(Debug, serde::Serialize)]
pub struct Summary {
    /// The input file.
    pub file: String,
    /// ABI of the section.
    pub abi: sframe::Abi,
    /// SFrame version written.
    pub version: u8,
    /// Which CFI section was read.
    pub cfi: generate::CfiKind,
    /// FDEs in the CFI.
    pub fdes: usize,
    /// FDEs fully covered.
    pub fdes_covered: usize,
    /// SFrame functions written (a PLT FDE may become two).
    pub functions: usize,
    /// Of those, flex FDEs.
    pub flex: usize,
    /// Of those, PC-type MASK FDEs.
    pub mask: usize,
    /// Bytes of code the covered functions span.
    pub covered_bytes: u64,
    /// Bytes of code all FDEs span.
    pub fde_bytes: u64,
    /// Bytes of executable sections.
    pub text_bytes: u64,
    /// Size of the generated section.
    pub sframe_bytes: usize,
    /// Size of the CFI section it came from.
    pub cfi_bytes: usize,
    /// Skip reasons with their counts.
    pub reasons: BTreeMap<String, usize>,
    /// Every skipped function.
    pub skipped: Vec<SkippedFunction>,
}

/// A skipped function, named when the symbol table knows it.
#[derive(Debug, serde::Serialize)]
pub struct SkippedFunction {
    /// Symbol name.
    pub function: Option<String>,
    /// FDE start.
    pub start: u64,
    /// FDE size.
    pub size: u64,
    /// First PC that could not be expressed.
    pub at: u64,
    /// Why.
    pub reason: String,
}

/// Builds the summary of `generated` for `input`.
pub fn summarize(path: &str, input: &CfiInput, generated: &Generated, sframe_bytes: usize) -> Summary {
    let mut reasons = BTreeMap::new();
    for s in &generated.skipped {
        *reasons.entry(s.reason.clone()).or_insert(0) += 1;
    }
    let skipped_bytes: u64 = generated.skipped.iter().map(|s| s.size).sum();
    let covered_bytes: u64 = generated.covered.iter().map(|c| u64::from(c.size)).sum();
    Summary {
        file: path.to_string(),
        abi: input.abi,
        version: generated.table.version.number(),
        cfi: input.kind,
        fdes: generated.fdes,
        fdes_covered: generated.fdes - generated.skipped.len(),
        functions: generated.covered.len(),
        flex: generated.covered.iter().filter(|c| c.flex).count(),
        mask: generated.covered.iter().filter(|c| c.mask).count(),
        covered_bytes,
        fde_bytes: covered_bytes + skipped_bytes,
        text_bytes: input.text_bytes,
        sframe_bytes,
        cfi_bytes: input.cfi.len(),
        reasons,
        skipped: generated
            .skipped
            .iter()
            .map(|s| SkippedFunction {
                function: input.function_name(s.start).map(str::to_string),
                start: s.start,
                size: s.size,
                at: s.at,
                reason: s.reason.clone(),
            })
            .collect(),
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl Summary {
    /// The human-readable report.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{}: SFrame V{} from {:?}: {} of {} FDEs covered ({:.1}%), {} functions ({} flex, {} PLT mask)\n",
            self.file,
            self.version,
            self.cfi,
            self.fdes_covered,
            self.fdes,
            percent(self.fdes_covered as u64, self.fdes as u64),
            self.functions,
            self.flex,
            self.mask
        );
        out += &format!(
            "  code covered: {} of {} FDE bytes ({:.1}%), {:.1}% of {} executable bytes\n",
            self.covered_bytes,
            self.fde_bytes,
            percent(self.covered_bytes, self.fde_bytes),
            percent(self.covered_bytes, self.text_bytes),
            self.text_bytes
        );
        out += &format!(
            "  size: .sframe {} bytes vs CFI {} bytes ({:.2}x)\n",
            self.sframe_bytes,
            self.cfi_bytes,
            self.sframe_bytes as f64 / self.cfi_bytes.max(1) as f64
        );
        if !self.skipped.is_empty() {
            out += &format!("  skipped {} FDEs:\n", self.skipped.len());
            for (reason, count) in &self.reasons {
                out += &format!("    {count:5}  {reason}\n");
            }
            for s in self.skipped.iter().take(20) {
                out += &format!(
                    "      {} at {:#x} (FDE {:#x}+{:#x}): {}\n",
                    s.function.as_deref().unwrap_or("?"),
                    s.at,
                    s.start,
                    s.size,
                    s.reason
                );
            }
            if self.skipped.len() > 20 {
                out += &format!("      … {} more (--json lists all)\n", self.skipped.len() - 20);
            }
        }
        out
    }
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
    let cfi = Cfi { kind: input.kind, data: &input.cfi, address: input.cfi_address };
    let generated = match generate::generate(&cfi, input.abi, version) {
        Ok(generated) => generated,
        Err(e) => {
            eprintln!("unwindlab: {}: {e}", args.file);
            return EXIT_INVALID;
        }
    };
    let address = match args.base {
        Some(base) => base,
        None => match inject::placement(&input.data) {
            Ok(p) => p.address,
            Err(e) => {
                eprintln!("unwindlab: {}: {e}", args.file);
                return EXIT_INVALID;
            }
        },
    };
    let section = match write::encode(&generated.table, address) {
        Ok(section) => section,
        Err(e) => {
            eprintln!("unwindlab: {}: encoding the section at {address:#x}: {e}", args.file);
            return EXIT_INVALID;
        }
    };
    let summary = summarize(&args.file, &input, &generated, section.len());
    if let Some(out) = &args.output {
        let bytes = if args.inject {
            match inject::inject(&input.data, &section) {
                Ok(bytes) => bytes,
                Err(e) => {
                    eprintln!("unwindlab: {}: {e}", args.file);
                    return EXIT_INVALID;
                }
            }
        } else {
            section
        };
        if let Err(e) = write_output(out, &bytes, args.inject.then_some(args.file.as_str())) {
            eprintln!("unwindlab: {out}: {e}");
            return EXIT_USAGE;
        }
    }
    if args.json {
        emit_line(&serde_json::to_string_pretty(&summary).unwrap_or_default());
    } else {
        emit(&summary.text());
    }
    EXIT_OK
}

/// Writes `bytes`; an injected ELF keeps the permissions of `like`.
fn write_output(path: &str, bytes: &[u8], like: Option<&str>) -> std::io::Result<()> {
    std::fs::write(path, bytes)?;
    if let Some(original) = like {
        let permissions = std::fs::metadata(original)?.permissions();
        std::fs::set_permissions(path, permissions)?;
    }
    Ok(())
}
