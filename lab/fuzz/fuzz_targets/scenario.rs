//! Arbitrary bytes as a scenario (generated JSON, mutated JSON, raw text)
//! or a corrupted guest ELF file: parsing, running and rendering must
//! either work or return an error naming the file (never panic or hang).
//! The generator and the oracle live in `lab::fuzz`, shared with the
//! seeded property test of `make test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(problem) = lab::fuzz::exercise(data).check() {
        panic!("{problem}");
    }
});
