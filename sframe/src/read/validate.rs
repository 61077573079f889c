//! Validation of an untrusted section (§8): everything a lookup would trip
//! over, found up front, with the work bounded by the section's size.

use super::error::Error;
use super::fde::{FdeKind, PcType};
use super::header::Version;
use super::reader::Reader;
use super::rule;
use super::section::Section;
use super::source::ByteSource;

/// Which reader's acceptance rules to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// What libsframe accepts: V1, V2 and V3, sorted or not.
    #[default]
    Lab,
    /// What the Linux SFrame unwinder accepts (v13 series): V3 only, sorted,
    /// PC-relative starts, no auxiliary header, exactly consumed data words.
    Kernel,
}

/// Most problems one report lists; the rest are only counted.
pub const MAX_PROBLEMS: usize = 50;

/// The verdict on one section.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// FDEs examined.
    pub fdes: u32,
    /// FREs examined.
    pub fres: u64,
    /// What is wrong, in the order found (at most [`MAX_PROBLEMS`]).
    pub problems: Vec<Error>,
    /// Problems found beyond those listed.
    pub more_problems: usize,
}

impl Report {
    /// True when nothing is wrong.
    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }

    fn push(&mut self, problem: Error) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(problem);
        } else {
            self.more_problems += 1;
        }
    }
}

/// A [`Report`] on one file's section, as `unwindlab sframe check` prints
/// it: [`Display`](std::fmt::Display) for text, serde for JSON (fields in
/// alphabetical order).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileReport {
    /// FDEs examined.
    pub fdes: u32,
    /// The file.
    pub file: String,
    /// FREs examined.
    pub fres: u64,
    /// Problems found beyond those listed.
    pub more_problems: usize,
    /// What is wrong.
    pub problems: Vec<String>,
    /// The rules applied.
    pub profile: Profile,
    /// True when nothing is wrong.
    pub valid: bool,
}

impl Report {
    /// The report on the section of `file`, checked with `profile`.
    pub fn for_file(&self, file: &str, profile: Profile) -> FileReport {
        FileReport {
            fdes: self.fdes,
            file: file.to_string(),
            fres: self.fres,
            more_problems: self.more_problems,
            problems: self.problems.iter().map(|p| p.to_string()).collect(),
            profile,
            valid: self.is_valid(),
        }
    }
}

impl std::fmt::Display for FileReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.valid {
            return writeln!(f, "{}: valid ({} FDEs, {} FREs)", self.file, self.fdes, self.fres);
        }
        writeln!(f, "{}: INVALID", self.file)?;
        for problem in &self.problems {
            writeln!(f, "  - {problem}")?;
        }
        if self.more_problems > 0 {
            writeln!(f, "  … and {} more", self.more_problems)?;
        }
        Ok(())
    }
}

/// What to check a section against.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Acceptance rules.
    pub profile: Profile,
    /// The text range the section describes, if known: every function must
    /// start inside it (the kernel's check) and end inside it.
    pub text: Option<(u64, u64)>,
}

/// Checks `src` (section bytes at address `base`) completely.
///
/// ```
/// use sframe::read::header::F_FDE_SORTED;
/// use sframe::read::validate::{check, Options, Profile};
/// use sframe::write::{encode, RawFunction, RawRow, RawSection};
/// use sframe::{Abi, Error, Version};
///
/// // A sorted V2 section with one function, as binutils 2.41 writes it.
/// let table = RawSection {
///     version: Version::V2,
///     abi: Abi::Amd64,
///     flags: F_FDE_SORTED,
///     cfa_fixed_fp_offset: 0,
///     cfa_fixed_ra_offset: -8,
///     functions: vec![RawFunction::new(0x1000, 16, vec![RawRow::new(0, true, &[8])])],
/// };
/// let bytes = encode(&table, 0x8000)?;
///
/// // libsframe accepts it; the kernel wants V3 with PC-relative starts.
/// assert!(check(bytes.as_slice(), 0x8000, &Options::default()).is_valid());
/// let kernel = Options { profile: Profile::Kernel, text: Some((0x1000, 0x2000)) };
/// let report = check(bytes.as_slice(), 0x8000, &kernel);
/// assert_eq!(report.fdes, 1);
/// assert!(report.problems.contains(&Error::KernelRejects("only SFrame version 3 is accepted")));
/// # Ok::<(), sframe::write::WriteError>(())
/// ```
pub fn check<S: ByteSource>(src: S, base: u64, options: &Options) -> Report {
    let mut report = Report::default();
    match Section::parse(src, base) {
        Ok(section) => check_section(&section, options, &mut report),
        Err(error) => report.push(error),
    }
    report
}

fn check_section<S: ByteSource>(section: &Section<S>, options: &Options, report: &mut Report) {
    let h = *section.header();
    let layout = *section.layout();
    if options.profile == Profile::Kernel {
        let rules: [(bool, &'static str); 6] = [
            (h.version == Version::V3, "only SFrame version 3 is accepted"),
            (h.auxhdr_len == 0, "auxiliary header must be empty"),
            (h.num_fdes > 0, "no FDEs"),
            (h.num_fres > 0, "no FREs"),
            (h.is_sorted(), "SFRAME_F_FDE_SORTED is not set"),
            (h.is_pcrel(), "SFRAME_F_FDE_FUNC_START_PCREL is not set"),
        ];
        for (ok, why) in rules {
            if !ok {
                report.push(Error::KernelRejects(why));
            }
        }
    }
    check_trailing(section, report);

    // Running totals bound the work: FDEs may share FRE blocks, so stop
    // decoding rows once more bytes were claimed than the sub-section holds.
    let fre_budget = layout.fres_end - layout.fres_start;
    let mut fre_bytes: u64 = 0;
    let mut fre_count: u64 = 0;
    let mut prev: Option<(u32, u64, u64)> = None;
    for index in 0..h.num_fdes {
        report.fdes += 1;
        let fde = match section.fde(index) {
            Ok(fde) => fde,
            Err(error) => {
                report.push(error);
                continue;
            }
        };
        let reserved = if h.version == Version::V3 { 0x40 } else { 0xc0 };
        let pauth_ok = h.abi.is_aarch64() || fde.info & 0x20 == 0;
        if fde.info & reserved != 0 || !pauth_ok || fde.info2 & 0xe0 != 0 {
            report.push(Error::BadFdeInfo { fde: index, info: fde.info });
        }
        if fde.pc_type == PcType::Mask && h.version != Version::V1 && fde.rep_size == 0 {
            report.push(Error::MaskWithoutRepSize { fde: index });
        }
        let end = fde.start.wrapping_add(u64::from(fde.size));
        if let Some((text_start, text_end)) = options.text {
            if fde.start < text_start || fde.start >= text_end || end > text_end || end < fde.start {
                report.push(Error::OutsideText { fde: index, start: fde.start, size: fde.size, text_start, text_end });
            }
        }
        if h.is_sorted() {
            if let Some((prev_index, prev_start, prev_end)) = prev {
                if fde.start <= prev_start {
                    report.push(Error::Unsorted { fde: index, start: fde.start, prev: prev_index, prev_start });
                } else if fde.start < prev_end {
                    report.push(Error::Overlap { fde: index, start: fde.start, prev: prev_index, prev_end });
                }
            }
            prev = Some((index, fde.start, end));
        }
        if h.version == Version::V3 {
            fre_bytes += super::fde::V3_ATTR_SIZE;
        }
        fre_count += u64::from(fde.num_fres);
        let mut prev_start: Option<u32> = None;
        for fre in section.fres(&fde) {
            if fre_bytes > fre_budget {
                break;
            }
            let fre = match fre {
                Ok(fre) => fre,
                Err(error) => {
                    report.push(error);
                    break;
                }
            };
            report.fres += 1;
            fre_bytes += fre.byte_len(&fde);
            let bad = |reason: String| Error::BadFreData { fde: index, fre: fre.index, reason };
            if let Some(prev) = prev_start.filter(|&p| fre.start <= p) {
                report.push(Error::FreNotIncreasing { fde: index, fre: fre.index, start: fre.start, prev });
            }
            prev_start = Some(fre.start);
            if fde.pc_type == PcType::Inc && fre.start > fde.size {
                report.push(Error::FreBeyondFunction { fde: index, fre: fre.index, start: fre.start, size: fde.size });
            }
            if fre.word_count() > 6 {
                report.push(bad(format!("{} data words (libsframe allows at most 6)", fre.word_count())));
                continue;
            }
            match rule::interpret(&h, &fde, &fre) {
                Err(error) => report.push(error),
                Ok(interp) => {
                    if interp.words_used != fre.word_count() {
                        report.push(bad(format!(
                            "{} data word(s) but the rule uses {}",
                            fre.word_count(),
                            interp.words_used
                        )));
                    }
                    // A flex row of 3 words ends in a lone padding word.
                    if options.profile == Profile::Kernel && fde.kind == FdeKind::Flex && fre.word_count() == 3 {
                        report.push(Error::KernelRejects("flex row ending in a lone padding word"));
                    }
                }
            }
        }
    }
    if fre_count != u64::from(h.num_fres) {
        report.push(Error::FreAccounting(format!("FDEs claim {fre_count} FREs, the header {}", h.num_fres)));
    }
    if fre_bytes > fre_budget {
        report
            .push(Error::FreAccounting(format!("FDEs claim more than the {fre_budget} bytes of the FRE sub-section")));
    }
}

fn check_trailing<S: ByteSource>(section: &Section<S>, report: &mut Report) {
    let r = Reader { src: section.source(), endian: section.header().endian };
    let size = section.source().size();
    let start = section.layout().fres_end;
    let mut nonzero = 0u64;
    for offset in start..size {
        match r.u8(offset, "trailing byte") {
            Ok(0) => {}
            Ok(_) => nonzero += 1,
            Err(error) => {
                report.push(error);
                return;
            }
        }
    }
    if nonzero != 0 {
        report.push(Error::TrailingGarbage { offset: start, count: nonzero });
    }
}
