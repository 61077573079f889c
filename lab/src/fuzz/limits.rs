//! The bounds every fuzz input runs within, and the file names its errors
//! must carry: shared by the generator (which stays inside them for
//! plausible scenarios) and the harness (which enforces them).

/// The file name scenario errors must carry.
pub const FILE: &str = "fuzz.json";
/// The file name ELF errors must carry.
pub const ELF_FILE: &str = "fuzz.elf";
/// Most virtual time (guest instructions plus slow system calls) of a run.
pub const MAX_TIME: u64 = 150_000;
/// About the most sampling NMIs of a run: the run's time is also capped at
/// this many of its shortest sampling periods, and slow system calls share
/// this many NMIs.
pub const MAX_SAMPLES: u64 = 200;
/// Most guests of a run (each is an emulator with its own memory).
pub const MAX_GUESTS: usize = 4;
/// Guest instructions run from a corrupted ELF file.
pub(crate) const ELF_RUN: u64 = 20_000;
