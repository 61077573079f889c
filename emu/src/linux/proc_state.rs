//! Per-process state of the emulated Linux kernel that is not memory: the
//! process's identity, standard streams and open files, the virtual clock,
//! the random stream, and signal dispositions.

use crate::linux::signal::{NSIG, SIGKILL, SIGSTOP};
use std::io::{Read as _, Write as _};

/// The user ID the guest runs as.
pub(crate) const UID: u64 = 1000;
/// The group ID the guest runs as.
pub(crate) const GID: u64 = 1000;

/// Where the guest's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Stdin {
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// The host's standard input (read on demand; the CLI uses this).
    Host,
    /// End of file at once.
    #[default]
    Empty,
}

/// A guest output stream (fd 1 or 2): captured, passed through to the host's, or both.
#[derive(Debug)]
pub(crate) struct Output {
    fd: u32,
    capture: bool,
    passthrough: bool,
    pub(crate) captured: Vec<u8>,
}

impl Output {
    pub(crate) fn new(fd: u32, capture: bool, passthrough: bool) -> Self {
        Output { fd, capture, passthrough, captured: Vec::new() }
    }

    pub(crate) fn write(&mut self, data: &[u8]) {
        if self.capture {
            self.captured.extend_from_slice(data);
        }
        if self.passthrough {
            // A closed host pipe must not stop the guest: Linux would report
            // EPIPE to it, but for a lab run the guest's own view matters more.
            let _ = match self.fd {
                2 => std::io::stderr().lock().write_all(data),
                _ => std::io::stdout().lock().write_all(data).and_then(|()| std::io::stdout().flush()),
            };
        }
    }
}

/// The guest's standard input with its read position.
#[derive(Debug)]
pub(crate) struct Input {
    source: Stdin,
    pos: usize,
}

impl Input {
    pub(crate) fn new(source: Stdin) -> Self {
        Input { source, pos: 0 }
    }

    /// Reads up to `max` bytes; empty at end of file.
    pub(crate) fn read(&mut self, max: usize) -> Vec<u8> {
        match &self.source {
            Stdin::Bytes(bytes) => {
                let rest = &bytes[self.pos.min(bytes.len())..];
                let chunk = rest[..rest.len().min(max)].to_vec();
                self.pos += chunk.len();
                chunk
            }
            Stdin::Host => {
                let mut buf = vec![0u8; max.min(1 << 16)];
                let n = std::io::stdin().lock().read(&mut buf).unwrap_or(0);
                buf.truncate(n);
                buf
            }
            Stdin::Empty => Vec::new(),
        }
    }
}

/// Time as the guest sees it: a function of the instruction count and of
/// the time it has slept, never of the host's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// Nanoseconds each instruction takes.
    pub(crate) ns_per_insn: u64,
    /// Nanoseconds spent in sleeps.
    pub(crate) slept_ns: u64,
}

/// `CLOCK_REALTIME` at instruction 0: 2033-05-18 03:33:20 UTC, later than
/// any host file's modification time a guest may see (tar warns of files
/// "in the future", make rebuilds), and the same in every run.
pub(crate) const REALTIME_EPOCH_NS: u64 = 2_000_000_000 * NS_PER_SEC;
/// `CLOCK_MONOTONIC` at instruction 0: as if the machine had been up 1000 s.
pub(crate) const MONOTONIC_EPOCH_NS: u64 = 1_000 * NS_PER_SEC;
/// Nanoseconds per second.
pub(crate) const NS_PER_SEC: u64 = 1_000_000_000;

impl Clock {
    /// Nanoseconds of virtual time since instruction 0.
    pub(crate) fn elapsed_ns(&self, icount: u64) -> u64 {
        icount.saturating_mul(self.ns_per_insn).saturating_add(self.slept_ns)
    }

    /// CPU time: instructions only, sleeps excluded.
    pub(crate) fn cpu_ns(&self, icount: u64) -> u64 {
        icount.saturating_mul(self.ns_per_insn)
    }
}

/// A small deterministic random stream (SplitMix64) for `AT_RANDOM` and `getrandom`.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// A signal disposition as set by `rt_sigaction` (kernel `struct sigaction`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SigAction {
    /// `SIG_DFL` (0), `SIG_IGN` (1) or the handler's address.
    pub handler: u64,
    /// `SA_*` flags.
    pub flags: u64,
    /// `sa_restorer` (the `rt_sigreturn` trampoline glibc supplies).
    pub restorer: u64,
    /// Signals blocked while the handler runs.
    pub mask: u64,
}

/// `SIG_DFL`.
pub const SIG_DFL: u64 = 0;
/// `SIG_IGN`.
pub const SIG_IGN: u64 = 1;

/// Signal dispositions, the blocked mask and pending signals.
#[derive(Debug, Clone)]
pub(crate) struct Signals {
    pub(crate) actions: [SigAction; NSIG as usize + 1],
    pub(crate) blocked: u64,
    pub(crate) pending: u64,
    /// `si_code` of each pending signal (`SI_USER` or `SI_TKILL`).
    pub(crate) sent_code: [i32; NSIG as usize + 1],
    /// The mask `rt_sigsuspend` replaced, restored when the handler of the
    /// signal that woke it returns.
    pub(crate) suspend_restore: Option<u64>,
}

impl Default for Signals {
    fn default() -> Self {
        Signals {
            actions: [SigAction::default(); NSIG as usize + 1],
            blocked: 0,
            pending: 0,
            sent_code: [0; NSIG as usize + 1],
            suspend_restore: None,
        }
    }
}

/// Bit of `sig` in a signal set.
pub(crate) fn sig_bit(sig: u32) -> u64 {
    1u64 << (sig - 1)
}

/// Signals that can be neither caught nor blocked (SIGKILL, SIGSTOP).
pub(crate) const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));
