//! Errors of the emulator itself (bad input, engine failures), as opposed to
//! guest misbehaviour, which is reported as a signal or an event.

use unicorn_engine::uc_error;

/// Why a program could not be loaded or emulated.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file as named by the caller.
        file: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The program file is not an ELF executable this emulator can run.
    #[error("{file}: {problem}")]
    BadElf {
        /// The file as named by the caller.
        file: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The arguments, environment or options do not fit the guest.
    #[error("{file}: {problem}")]
    Setup {
        /// The program file the set-up was for.
        file: String,
        /// What does not fit.
        problem: String,
    },
    /// The guest reached one of the [`Limits`](crate::Limits) (processes, instructions).
    #[error("{file}: {problem}")]
    Limit {
        /// The program of the process that reached it.
        file: String,
        /// Which limit, and how.
        problem: String,
    },
    /// Every process waits for something no process can do.
    #[error("{file}: deadlock: every process waits ({waiting})")]
    Deadlock {
        /// The first process's program.
        file: String,
        /// Each process (each thread, as `pid/tid`, of one with several) and what it waits for.
        waiting: String,
    },
    /// Unicorn refused an operation that the emulator relies on.
    #[error("{file}: emulator engine failed to {what}: {err:?}")]
    Engine {
        /// The program being emulated.
        file: String,
        /// The operation that failed.
        what: &'static str,
        /// Unicorn's error code.
        err: uc_error,
    },
}

impl Error {
    /// What turns Unicorn's refusal of `what` into an [`Error::Engine`]
    /// naming `file` (made only on failure; callers pass it to `map_err`).
    pub(crate) fn engine(file: &str, what: &'static str) -> impl Fn(uc_error) -> Error + 'static {
        let file = file.to_string();
        move |err| Error::Engine { file: file.clone(), what, err }
    }
}
