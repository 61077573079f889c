//! `unwindlab sframe compare` and `sframe merge`: the static check of
//! `.sframe` against CFI over files and directories, on every core, in
//! shards, and the merge of shard reports. The work is the `sframe`
//! crate's ([`sframe::elf::compare`]); this file parses options, spreads
//! the files over threads and prints.

use std::path::PathBuf;

use rayon::prelude::*;
use sframe::elf::compare::{self, Report};

use super::common::{emit, emit_line, EXIT_INVALID, EXIT_OK, EXIT_USAGE};

/// Options of `sframe compare`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// ELF files and directories (searched recursively for ELF files;
    /// symbolic links are not followed, other files are skipped).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Compare only shard K of N (0 ≤ K < N) of the files sorted by path,
    /// e.g. `--shard $JOB_COMPLETION_INDEX/8`; `sframe merge` joins the
    /// shards' `--json` reports.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `sframe merge`.
#[derive(Debug, clap::Args)]
pub(crate) struct MergeArgs {
    /// JSON reports of `sframe compare --shard K/N --json`.
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    /// Print the merged report as JSON.
    #[arg(long)]
    json: bool,
}

/// Parses `K/N` with 0 ≤ K < N.
fn parse_shard(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("'{text}' is not a shard: use K/N with 0 ≤ K < N, e.g. 0/4");
    let (k, n) = text.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (k.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if k >= n {
        return Err(bad());
    }
    Ok((k, n))
}

/// Prints `report` and returns the exit status: 0 when nothing disagrees
/// and every file could be read, 1 otherwise.
fn finish(report: &Report, json: bool) -> i32 {
    if json {
        emit_line(&serde_json::to_string_pretty(report).unwrap_or_default());
    } else {
        emit(&report.to_string());
    }
    if report.totals.errors == 0 && report.totals.disagreeing_files == 0 {
        EXIT_OK
    } else {
        EXIT_INVALID
    }
}

pub(crate) fn run_compare(args: &CompareArgs) -> i32 {
    let files = match compare::elf_files(&args.paths) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("unwindlab: sframe compare: {e}");
            return EXIT_USAGE;
        }
    };
    let files = match args.shard {
        Some((k, n)) => compare::shard(files, k, n),
        None => files,
    };
    let reports: Vec<_> = files.par_iter().map(|path| compare::compare_file(path)).collect();
    finish(&Report::new(reports), args.json)
}

pub(crate) fn run_merge(args: &MergeArgs) -> i32 {
    let mut reports = Vec::new();
    for path in &args.reports {
        let parsed = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Report>(&text).map_err(|e| format!("not a compare report: {e}")));
        match parsed {
            Ok(report) => reports.push(report),
            Err(e) => {
                eprintln!("unwindlab: sframe merge: {}: {e}", path.display());
                return EXIT_USAGE;
            }
        }
    }
    match Report::merge(reports) {
        Ok(report) => finish(&report, args.json),
        Err(e) => {
            eprintln!("unwindlab: sframe merge: {e}");
            EXIT_USAGE
        }
    }
}
