//! Scenario fuzzing. A scenario file is untrusted input, like an `.sframe`
//! section: [`exercise`] turns arbitrary bytes into one input — scenario
//! JSON built field by field by [`scenario_json`] (valid and invalid values
//! alike), that JSON mutated byte by byte, raw text, or a committed guest
//! with corrupted ELF headers — then parses it, runs it and renders the
//! report. One generator serves the `cargo fuzz` target (`lab/fuzz`,
//! `make fuzz-scenario`) and the seeded property test in `make test`
//! (`tests/scenario_fuzz.rs`).
//!
//! The oracle: nothing panics or hangs; an input either runs or is refused
//! with an error that names the file ([`Outcome::check`]). Every run is
//! bounded ([`confine`]): at most [`MAX_TIME`] of virtual time and about
//! [`MAX_SAMPLES`] sampling NMIs, guests only from `guests/bin/`.

use arbitrary::{Result as ArbResult, Unstructured};

use crate::report::{Report, RunError};
use crate::runner::run;
use crate::scenario::{Action, Scenario, ScenarioError, Tracer};

mod gen;
mod limits;

use gen::{committed_guests, corrupted_elf, mutate};
pub use gen::{guests_dir, scenario_json};
use limits::ELF_RUN;
pub use limits::{ELF_FILE, FILE, MAX_GUESTS, MAX_SAMPLES, MAX_TIME};

/// What one input did.
#[derive(Debug)]
pub enum Outcome {
    /// The fuzzer's bytes ran out before an input was made.
    Empty,
    /// Refused by the parser.
    Invalid(ScenarioError),
    /// Parsed, but outside what the harness runs (see [`confine`]).
    Skipped(&'static str),
    /// Refused by the runner.
    Failed(RunError),
    /// Ran to the end.
    Ran(Box<Report>),
    /// A corrupted ELF file the emulator refused.
    ElfRefused(emu::Error),
    /// A corrupted ELF file that loaded (and ran a little, or failed to).
    ElfLoaded,
}

impl Outcome {
    /// The oracle beyond "no panic": every refusal is a clear error naming
    /// the file (or the guest) and the problem.
    pub fn check(&self) -> Result<(), String> {
        let named = |message: String, prefix: &str| {
            let clear = message.starts_with(prefix) && message.len() > prefix.len() && !message.contains("panicked");
            if clear {
                Ok(())
            } else {
                Err(format!("unclear error (expected \"{prefix}…\"): {message}"))
            }
        };
        match self {
            Outcome::Invalid(e) => named(e.to_string(), &format!("{FILE}: ")),
            Outcome::Failed(e @ RunError::Guest { guest, .. }) => named(e.to_string(), &format!("guest {guest}: ")),
            Outcome::Failed(e @ RunError::Scenario(_)) => named(e.to_string(), ""),
            Outcome::ElfRefused(e) => named(e.to_string(), &format!("{ELF_FILE}: ")),
            Outcome::Empty | Outcome::Skipped(_) | Outcome::Ran(_) | Outcome::ElfLoaded => Ok(()),
        }
    }
}

/// Makes a parsed scenario safe and quick to run: guest paths are taken
/// relative to [`guests_dir`] and must name a committed guest (or nothing
/// at all: a missing file is a run error worth checking); virtual time is
/// capped at [`MAX_TIME`] and at [`MAX_SAMPLES`] shortest periods; slow
/// system calls share [`MAX_SAMPLES`] NMIs. Returns why a scenario cannot
/// be run at all.
pub fn confine(s: &mut Scenario) -> Result<(), &'static str> {
    if s.guests.len() > MAX_GUESTS {
        return Err("more guests than the harness runs");
    }
    for g in &mut s.guests {
        // Runs must not depend on the machine's files (nor read a device).
        if g.root.is_some() {
            return Err("a guest that sees host files");
        }
        let committed = g.path.to_str().is_some_and(|p| committed_guests().contains_key(p));
        let path = guests_dir().join(&g.path);
        // Never read an arbitrary existing file (a device, a huge file).
        if !committed && std::fs::symlink_metadata(&path).is_ok() {
            return Err("a guest path that is not a committed guest");
        }
        g.path = path;
    }
    let registered = s.events.iter().filter_map(|e| match &e.action {
        Action::Register { tracer } => Some(tracer),
        _ => None,
    });
    let period = s
        .tracers
        .iter()
        .chain(registered)
        .filter_map(|t| match t {
            Tracer::Perf { period, .. } => Some(*period),
            _ => None,
        })
        .min();
    let cap = period.map_or(MAX_TIME, |p| p.saturating_mul(MAX_SAMPLES).min(MAX_TIME));
    s.stop_after = Some(s.stop_after.map_or(cap, |t| t.min(cap)));
    let mut nmis = MAX_SAMPLES;
    for e in &mut s.events {
        if let Action::SlowSyscall { nmis: n, .. } = &mut e.action {
            *n = (*n).min(u32::try_from(nmis).unwrap_or(u32::MAX));
            nmis -= u64::from(*n);
        }
    }
    Ok(())
}

/// Parses, confines, runs and renders scenario `text` (named [`FILE`]).
pub fn exercise_text(text: &str) -> Outcome {
    let mut scenario = match Scenario::parse(text, FILE) {
        Ok(s) => s,
        Err(e) => return Outcome::Invalid(e),
    };
    if let Err(why) = confine(&mut scenario) {
        return Outcome::Skipped(why);
    }
    match run(&scenario) {
        Ok(report) => {
            // Every view of a report must cope with whatever ran.
            let _ = report.account();
            let _ = crate::export::chrome_trace(&report);
            let _ = crate::export::folded(&report);
            let _ = crate::export::firefox(&report);
            let _ = crate::html::report(&report);
            Outcome::Ran(Box::new(report))
        }
        Err(e) => Outcome::Failed(e),
    }
}

/// What one fuzz input is, before it is exercised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Scenario text (named [`FILE`]).
    Scenario(String),
    /// A guest ELF file (named [`ELF_FILE`]).
    Elf(Vec<u8>),
}

/// The input fuzzer bytes make: the first byte picks raw text, generated
/// JSON mutated byte by byte, a corrupted ELF file, or (most often)
/// generated JSON. `None` when the bytes run out first. (To see what a
/// crashing artifact was: `input(&std::fs::read(artifact)?)`.)
pub fn input(data: &[u8]) -> Option<Input> {
    let mut u = Unstructured::new(data);
    let made = (|| -> ArbResult<Input> {
        Ok(match u.arbitrary::<u8>()? % 8 {
            0 => Input::Scenario(String::from_utf8_lossy(u.take_rest()).into_owned()),
            1 | 2 => {
                let value = scenario_json(&mut u)?;
                Input::Scenario(mutate(&mut u, value.to_string())?)
            }
            3 => Input::Elf(corrupted_elf(&mut u)?),
            _ => {
                let value = scenario_json(&mut u)?;
                let pretty = u.arbitrary()?;
                Input::Scenario(if pretty {
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                } else {
                    value.to_string()
                })
            }
        })
    })();
    made.ok()
}

/// One fuzz input, exercised.
pub fn exercise(data: &[u8]) -> Outcome {
    match input(data) {
        Some(Input::Scenario(text)) => exercise_text(&text),
        Some(Input::Elf(bytes)) => exercise_elf(&bytes),
        None => Outcome::Empty,
    }
}

/// Loads ELF `bytes` (named [`ELF_FILE`]), names its entry point and runs
/// it a little.
pub fn exercise_elf(bytes: &[u8]) -> Outcome {
    let config = emu::Config { capture_output: true, passthrough: false, ..emu::Config::default() };
    let mut emu = match emu::Emulator::new(ELF_FILE, bytes, config) {
        Ok(emu) => emu,
        Err(e) => return Outcome::ElfRefused(e),
    };
    let _ = sframe::elf::Symbols::parse(bytes, emu.image().bias).name(emu.image().entry);
    let _ = emu.image().text_range();
    // Its own errors (a crash of the corrupted program) are fine; panics are not.
    let _ = emu.run(emu::RunLimit::icount(ELF_RUN));
    Outcome::ElfLoaded
}
