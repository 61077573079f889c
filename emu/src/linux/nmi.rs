//! A deterministic NMI source: an interrupt every N instructions, like a
//! perf sampling event on an instruction counter, but exact. Each NMI stops
//! the guest just before instruction number k·N and reports what the kernel
//! would see there, plus the ground truth to judge an unwinder by.

use crate::error::Error;
use crate::linux::emulator::{Emulator, Regs};
use crate::linux::run::{RunLimit, Stop};
use std::num::NonZeroU64;

/// "An NMI every `period` instructions": stops at every multiple of the period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NmiSource {
    period: NonZeroU64,
}

/// The guest's state at an NMI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NmiPoint {
    /// Instructions executed before the NMI (a multiple of the period).
    pub icount: u64,
    /// The process on the CPU.
    pub pid: crate::linux::proc_table::Pid,
    /// The thread on the CPU: the registers and the ground truth are its.
    pub tid: crate::linux::proc_table::Tid,
    /// The interrupted PC (the next instruction to run).
    pub pc: u64,
    /// The stack pointer.
    pub sp: u64,
    /// All general registers.
    pub regs: Regs,
    /// The return addresses of the calls in progress, innermost first
    /// ([`Emulator::ground_truth`]).
    pub ground_truth: Vec<u64>,
}

impl NmiSource {
    /// An NMI every `period` instructions (`None` for 0).
    pub fn every(period: u64) -> Option<NmiSource> {
        NonZeroU64::new(period).map(|period| NmiSource { period })
    }

    /// The period.
    pub fn period(&self) -> u64 {
        self.period.get()
    }

    /// The instruction count of the first NMI after `icount`: the next
    /// multiple of the period, so NMI points do not depend on where earlier
    /// runs stopped (system calls, other limits).
    pub fn next_after(&self, icount: u64) -> u64 {
        let period = self.period.get();
        (icount / period).saturating_add(1).saturating_mul(period)
    }

    /// Runs `emu` to the next NMI and returns its state there; `None` once
    /// the process has ended (before reaching it, or earlier).
    pub fn next(&self, emu: &mut Emulator) -> Result<Option<NmiPoint>, Error> {
        let at = self.next_after(emu.icount());
        loop {
            match emu.run(RunLimit::icount(at))? {
                Stop::Limit => return emu.nmi_point().map(Some),
                Stop::Exit(_) => return Ok(None),
                // `RunLimit::icount` asks for no syscall, process or probe stops.
                Stop::Syscall(_) | Stop::Process(_) | Stop::Probe(_) => {}
            }
        }
    }
}

impl Emulator {
    /// The guest's state now, as an NMI here would see it.
    pub fn nmi_point(&self) -> Result<NmiPoint, Error> {
        let regs = self.regs()?;
        Ok(NmiPoint {
            icount: self.icount(),
            pid: self.pid(),
            tid: self.tid(),
            pc: regs.pc,
            sp: regs.sp,
            ground_truth: self.ground_truth(),
            regs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_points_are_multiples_of_the_period() {
        let nmi = NmiSource::every(997).unwrap();
        assert_eq!(nmi.next_after(0), 997);
        assert_eq!(nmi.next_after(996), 997);
        assert_eq!(nmi.next_after(997), 1994);
        assert_eq!(nmi.next_after(u64::MAX), u64::MAX);
        assert!(NmiSource::every(0).is_none());
    }
}
