//! What the subcommand files share: exit statuses, address parsing and
//! output. It lives apart from `mod.rs` so that those files, which `mod.rs`
//! dispatches to, need not import it back.

/// Exit status for a run that found nothing wrong.
pub const EXIT_OK: i32 = 0;
/// Exit status for input that is invalid (a failed check, an undecodable section).
pub const EXIT_INVALID: i32 = 1;
/// Exit status for usage errors and unreadable files.
pub const EXIT_USAGE: i32 = 2;

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
