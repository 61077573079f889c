//! `unwindlab sysroot`: a lab root with SFrame everywhere for a dynamically
//! linked program (the work is `lab::sysroot`'s).

use std::path::PathBuf;

use lab::sysroot;

use super::common::{emit, emit_line, EXIT_OK, EXIT_USAGE};

/// Options of `sysroot`.
#[derive(Debug, clap::Args)]
pub(crate) struct SysrootArgs {
    /// A dynamically linked x86-64, AArch64 or s390x program.
    program: PathBuf,
    /// The directory to fill (created if missing; files in it are replaced).
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Where the program's libraries are, searched before `/` like
    /// qemu-user's `-L` (default: as `unwindlab exec`, Debian's cross
    /// sysroot for AArch64 and s390x, none for x86-64; "" for none).
    #[arg(long, value_name = "ROOT")]
    prefix: Option<PathBuf>,
    /// An object the program dlopens: a name searched like its DT_NEEDED
    /// entries, or a path; it and what it needs are added (repeatable).
    #[arg(long = "with", value_name = "EXTRA")]
    with: Vec<String>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &SysrootArgs) -> i32 {
    let built = sysroot::resolve(&args.program, &args.with, args.prefix.as_deref())
        .and_then(|r| sysroot::build(&r, &args.output));
    match built {
        Ok(root) => {
            if args.json {
                emit_line(&serde_json::to_string_pretty(&root).unwrap_or_default());
            } else {
                emit(&root.to_string());
            }
            EXIT_OK
        }
        Err(e) => {
            eprintln!("unwindlab: {e}");
            EXIT_USAGE
        }
    }
}
