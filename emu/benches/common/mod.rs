//! Timing shared by the emulator's benchmarks: this thread's CPU time (the
//! machine's cores are shared with other jobs, and time spent descheduled
//! would otherwise land on whatever was being timed) and the median of
//! interleaved rounds.

use std::time::Duration;

/// CPU time the calling thread has used so far; differences of two
/// readings are what the benchmarks report.
pub fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill.
    let err = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(err, 0, "the thread CPU clock is unavailable");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The median of `xs` (the upper one of an even count).
pub fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}
