//! SFrame for an ELF file from its DWARF CFI, encoded where it will be
//! loaded, with a coverage report: what `unwindlab sframe gen` does before
//! it writes the section or injects it.

use std::collections::BTreeMap;

use super::file::CfiInput;
use super::inject;
use crate::write::generate::{self, Cfi, CfiKind, GenError, Generated};
use crate::write::{self, WriteError};
use crate::{Abi, Version};

/// A generated, encoded section and its coverage.
#[derive(Debug, Clone)]
pub struct GeneratedSection {
    /// The section's bytes.
    pub section: Vec<u8>,
    /// The address they are encoded for.
    pub address: u64,
    /// What the section covers.
    pub coverage: Coverage,
}

/// Why no section could be made.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The CFI could not be translated at all.
    #[error(transparent)]
    Generate(#[from] GenError),
    /// There is no address for the section: the file cannot take a new segment.
    #[error(transparent)]
    Placement(#[from] inject::InjectError),
    /// The table cannot be encoded at that address.
    #[error("encoding the section at {address:#x}: {source}")]
    Encode {
        /// The address.
        address: u64,
        /// The writer's error.
        source: WriteError,
    },
}

/// Generates SFrame `version` for `input` (the file `file`) and encodes it
/// for `address`, or, without one, for where [`inject::inject`] will put it.
pub fn generate_section(
    input: &CfiInput,
    file: &str,
    version: Version,
    address: Option<u64>,
) -> Result<GeneratedSection, GenerateError> {
    let cfi = Cfi { kind: input.kind, data: &input.cfi, address: input.cfi_address };
    let generated = generate::generate(&cfi, input.abi, version)?;
    let address = match address {
        Some(address) => address,
        None => inject::placement(&input.data)?.address,
    };
    let section =
        write::encode(&generated.table, address).map_err(|source| GenerateError::Encode { address, source })?;
    let coverage = Coverage::new(file, input, &generated, section.len());
    Ok(GeneratedSection { section, address, coverage })
}

/// The coverage report of one generation; [`Display`](std::fmt::Display)
/// gives it as text, serde as JSON.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Coverage {
    /// The input file.
    pub file: String,
    /// ABI of the section.
    pub abi: Abi,
    /// SFrame version written.
    pub version: u8,
    /// Which CFI section was read.
    pub cfi: CfiKind,
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
#[derive(Debug, Clone, serde::Serialize)]
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

/// Skipped functions listed one by one in the text.
const LISTED: usize = 20;

impl Coverage {
    /// The coverage of `generated` for `input` (the file `file`), whose
    /// encoded section is `sframe_bytes` long.
    pub fn new(file: &str, input: &CfiInput, generated: &Generated, sframe_bytes: usize) -> Coverage {
        let mut reasons = BTreeMap::new();
        for s in &generated.skipped {
            *reasons.entry(s.reason.clone()).or_insert(0) += 1;
        }
        // FDE sizes come from the file's CFI: corrupt ones must not overflow.
        let skipped_bytes: u64 = generated.skipped.iter().map(|s| s.size).fold(0, u64::saturating_add);
        let covered_bytes: u64 = generated.covered.iter().map(|c| u64::from(c.size)).sum();
        Coverage {
            file: file.to_string(),
            abi: input.abi,
            version: generated.table.version.number(),
            cfi: input.kind,
            fdes: generated.fdes,
            fdes_covered: generated.fdes - generated.skipped.len(),
            functions: generated.covered.len(),
            flex: generated.covered.iter().filter(|c| c.flex).count(),
            mask: generated.covered.iter().filter(|c| c.mask).count(),
            covered_bytes,
            fde_bytes: covered_bytes.saturating_add(skipped_bytes),
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
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{}: SFrame V{} from {}: {} of {} FDEs covered ({:.1}%), {} functions ({} flex, {} PLT mask)",
            self.file,
            self.version,
            self.cfi,
            self.fdes_covered,
            self.fdes,
            percent(self.fdes_covered as u64, self.fdes as u64),
            self.functions,
            self.flex,
            self.mask
        )?;
        writeln!(
            f,
            "  code covered: {} of {} FDE bytes ({:.1}%), {:.1}% of {} executable bytes",
            self.covered_bytes,
            self.fde_bytes,
            percent(self.covered_bytes, self.fde_bytes),
            percent(self.covered_bytes, self.text_bytes),
            self.text_bytes
        )?;
        writeln!(
            f,
            "  size: .sframe {} bytes vs CFI {} bytes ({:.2}x)",
            self.sframe_bytes,
            self.cfi_bytes,
            self.sframe_bytes as f64 / self.cfi_bytes.max(1) as f64
        )?;
        if self.skipped.is_empty() {
            return Ok(());
        }
        writeln!(f, "  skipped {} FDEs:", self.skipped.len())?;
        for (reason, count) in &self.reasons {
            writeln!(f, "    {count:5}  {reason}")?;
        }
        for s in self.skipped.iter().take(LISTED) {
            writeln!(
                f,
                "      {} at {:#x} (FDE {:#x}+{:#x}): {}",
                s.function.as_deref().unwrap_or("?"),
                s.at,
                s.start,
                s.size,
                s.reason
            )?;
        }
        if self.skipped.len() > LISTED {
            writeln!(f, "      … {} more (--json lists all)", self.skipped.len() - LISTED)?;
        }
        Ok(())
    }
}
