//! Command-line parsing and dispatch.

use clap::{Parser, Subcommand};

mod exec;
mod run;
mod sframe;
mod sframe_gen;

/// unwindlab: a deterministic laboratory for deferred user-space unwinding.
#[derive(Debug, Parser)]
#[command(name = "unwindlab", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read, check and query SFrame (.sframe) sections.
    #[command(subcommand)]
    Sframe(sframe::SframeCommand),
    /// Run a static x86-64, AArch64 or s390x program under the emulator
    /// (options go before ELF); exits with the program's status.
    Exec(exec::ExecArgs),
    /// Run a scenario: guests under the emulator, the kernel model, verdicts.
    Run(run::RunArgs),
    /// Re-run the scenario recorded in a log and check the new log is identical.
    Replay(run::ReplayArgs),
    /// Sample a program and report, per unwinder, how often its stacks are exact.
    Validate(run::ValidateArgs),
    /// A narrated tour of deferred unwinding, from real runs.
    Demo(run::DemoArgs),
}

/// Exit status for a run that found nothing wrong.
pub const EXIT_OK: i32 = 0;
/// Exit status for input that is invalid (a failed check, an undecodable section).
pub const EXIT_INVALID: i32 = 1;
/// Exit status for usage errors and unreadable files.
pub const EXIT_USAGE: i32 = 2;

/// Parses the command line, runs the command and returns the exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    match cli.command {
        Command::Sframe(cmd) => sframe::run(cmd),
        Command::Exec(args) => exec::run(args),
        Command::Run(args) => run::run(&args),
        Command::Replay(args) => run::run_replay(&args),
        Command::Validate(args) => run::run_validate(&args),
        Command::Demo(args) => run::run_demo(&args),
    }
}

/// Parses an address: hex with `0x`, or decimal.
pub fn parse_addr(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("'{text}' is not an address (use 0x-prefixed hex or decimal)"))
}

/// Writes command output to stdout. A closed pipe (`| head`) ends the
/// output quietly instead of panicking as `print!` would.
pub fn emit(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// [`emit`] plus a newline.
pub fn emit_line(text: &str) {
    emit(text);
    emit("\n");
}
