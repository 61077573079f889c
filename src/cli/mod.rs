//! Command-line parsing and dispatch.

use clap::{Parser, Subcommand};

pub use common::{emit, emit_line, parse_addr, EXIT_INVALID, EXIT_OK, EXIT_USAGE};

mod common;
mod exec;
mod run;
mod sframe;
mod sframe_compare;
mod sframe_gen;
mod sysroot;

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
    /// Run an x86-64, AArch64 or s390x Linux program, static or dynamic,
    /// under the emulator (options go before ELF); exits with the program's
    /// status.
    ///
    /// The program sees the host directory --root (default /) as /,
    /// read-only: its writes stay in memory. Its working directory is --cwd
    /// if given; else the host's working directory as the program sees it
    /// inside the root (with --root R, host directory R/a/b is /a/b, as
    /// `chroot R` after `cd` would leave it; with the default root, the same
    /// path); else, when the host's working directory is outside the root,
    /// /, and a note on stderr says so. Relative paths among the program's
    /// arguments are taken from that directory.
    Exec(exec::ExecArgs),
    /// Run a scenario: guests under the emulator, the kernel model, verdicts.
    Run(run::RunArgs),
    /// Re-run the scenario recorded in a log and check the new log is identical.
    Replay(run::ReplayArgs),
    /// Sample a program and report, per unwinder, how often its stacks are exact.
    Validate(run::ValidateArgs),
    /// A narrated tour of deferred unwinding, from real runs.
    Demo(run::DemoArgs),
    /// Run scenarios on the kernel model and on the kernel's own
    /// kernel/unwind/ C code, and report the first event where they differ.
    KernelDiff(run::KernelDiffArgs),
    /// Copy a dynamically linked program and every object it loads into a
    /// directory (a prefix for qemu-user -L and exec --prefix), each with
    /// generated SFrame V3 injected.
    Sysroot(sysroot::SysrootArgs),
}

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
        Command::KernelDiff(args) => run::run_kernel_diff(&args),
        Command::Sysroot(args) => sysroot::run(&args),
    }
}
