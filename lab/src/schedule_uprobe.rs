//! Uprobes in a run: placing one (`perf probe -x PROGRAM FUNCTION`: the
//! function's address in the guest's program, a probe in its emulator)
//! and a hit: the breakpoint's trap through the kernel model's
//! `handle_swbp()` (its perf sessions sample there, and the sample's
//! ground truth is read at the probe), then the probed instruction
//! emulated or stepped out of line as upstream does, each with its way
//! back to user mode and the task_work that runs on it.

use std::collections::BTreeSet;

use emu::{RunLimit, Stop};
use kmodel::event::EntryReason;
use kmodel::tracer::PerfEvent;
use kmodel::uprobe::UprobeStep;

use crate::report::RunError;
use crate::schedule::{Probed, Run};

/// Longest instruction a probe copies (x86-64's `MAX_UINSN_BYTES`).
const MAX_INSN: usize = 16;

impl Run<'_> {
    /// Places tracer `tracer`'s uprobe on `function` in the program of the
    /// guest named `task`, or of every guest whose program has it, and
    /// returns the session's event.
    pub(crate) fn place_uprobe(
        &mut self,
        tracer: &str,
        task: Option<&str>,
        function: &str,
        period: u64,
    ) -> Result<PerfEvent, RunError> {
        let mut addr: Option<(u64, String)> = None;
        for g in 0..self.guests.len() {
            if task.is_some_and(|t| t != self.guests[g].name) {
                continue;
            }
            let host = &self.scenario.guests[g].path;
            let data = std::fs::read(host).map_err(|e| {
                RunError::Scenario(format!("tracer {tracer}: cannot read {} for its uprobe: {e}", host.display()))
            })?;
            let guest = &self.guests[g];
            let symbols = sframe::elf::Symbols::parse(&data, guest.emu.image().bias);
            let Some(&(at, ..)) = symbols.entries().iter().find(|(.., name)| name == function) else { continue };
            if let Some((other, name)) = addr.as_ref().filter(|(other, _)| *other != at) {
                return Err(RunError::Scenario(format!(
                    "tracer {tracer}: {function} is at {other:#x} in guest {name}'s program and at {at:#x} in {}'s; \
                     a uprobe session probes one address (bind it to a guest with \"task\")",
                    guest.name
                )));
            }
            addr = Some((at, guest.name.clone()));
            let file = guest.emu.image().file.clone();
            let probed =
                self.probes.entry(g).or_insert_with(|| Probed { file, addrs: BTreeSet::new(), xol: BTreeSet::new() });
            probed.addrs.insert(at);
            let addrs: Vec<u64> = probed.addrs.iter().copied().collect();
            self.guests[g].emu.set_probes(addrs);
        }
        let Some((addr, _)) = addr else {
            let whose = task.map_or_else(|| "any guest's program".to_string(), |t| format!("guest {t}'s program"));
            return Err(RunError::Scenario(format!("tracer {tracer}: no function {function:?} in {whose}")));
        };
        Ok(PerfEvent::Uprobe { function: function.into(), addr, period })
    }

    /// Guest `g`'s running thread is at a uprobe's address `addr`: the
    /// trap, the handler chain (samples), then the instruction as the
    /// kernel handles it. Emulated (x86-64's `push %rbp`): the task
    /// returns after it, and a deferred unwind the handlers requested walks
    /// from there. Out of line: the task returns with its PC at the XOL
    /// slot (where the deferred unwind starts), runs the copy, and the
    /// single-step trap brings it back into the kernel, which moves the PC
    /// past the original. The guest runs the original in place: the same
    /// effect as the copy.
    pub(crate) fn uprobe(&mut self, g: usize, addr: u64) -> Result<(), RunError> {
        // Another program after an exec: the emulator steps over the
        // address on the next run.
        if self.probes.get(&g).is_none_or(|p| p.file != self.guests[g].emu.image().file) {
            return Ok(());
        }
        let tid = self.guests[g].tid();
        let regs = self.user_regs(g)?;
        let insn = self.probed_insn(g, addr);
        let (seq, at, nmi) = (self.k.tracers().samples, self.k.events().len(), self.k.next_seq());
        let step = {
            let mem = self.guests[g].emu.user_memory();
            self.k.uprobe_hit(tid, regs.clone(), &insn, &mem)
        };
        if self.k.tracers().samples != seq {
            self.take_truth(g, seq, at, nmi)?;
        }
        match step {
            UprobeStep::Emulated => {
                self.step_probed(g, addr)?;
                let after = self.user_regs(g)?;
                self.k.set_user_regs(tid, after);
                let mem = self.guests[g].emu.user_memory();
                self.k.return_to_user(tid, &mem);
            }
            UprobeStep::OutOfLine => {
                let xol = self.guests[g].emu.xol_area().map_err(|e| RunError::guest(&self.guests[g].name, e))?;
                if let Some(p) = self.probes.get_mut(&g) {
                    p.xol.insert(xol);
                }
                let slot = regs.arch.xol_slot(xol);
                let mut at_slot = regs.clone();
                at_slot.pc = slot;
                self.k.set_user_regs(tid, at_slot);
                {
                    let mem = self.guests[g].emu.user_memory();
                    self.k.return_to_user(tid, &mem);
                }
                self.step_probed(g, addr)?;
                let after = self.user_regs(g)?;
                // The single-step trap, past the copy (a branch's target
                // is fixed up the same way, arch_uprobe_post_xol()).
                let mut trapped = after.clone();
                let len = after.pc.wrapping_sub(addr);
                trapped.pc = if (1..=MAX_INSN as u64).contains(&len) { slot + len } else { after.pc };
                let mem = self.guests[g].emu.user_memory();
                self.k.enter(tid, EntryReason::Exception, trapped, &mem);
                self.k.set_user_regs(tid, after);
                self.k.return_to_user(tid, &mem);
            }
        }
        Ok(())
    }

    /// The bytes at `addr` the probe copies: as many of [`MAX_INSN`] as
    /// are mapped.
    fn probed_insn(&self, g: usize, addr: u64) -> Vec<u8> {
        let emu = &self.guests[g].emu;
        (1..=MAX_INSN)
            .rev()
            .find_map(|n| {
                let mut buf = vec![0u8; n];
                emu.read_nofault(addr, &mut buf).ok().map(|()| buf)
            })
            .unwrap_or_default()
    }

    /// Runs the probed instruction at `addr` of guest `g`'s running
    /// thread, and nothing else.
    fn step_probed(&mut self, g: usize, addr: u64) -> Result<(), RunError> {
        let guest = &mut self.guests[g];
        let (thread, icount) = (guest.emu.tid(), guest.emu.icount());
        let stop = guest.emu.run(RunLimit::icount(icount + 1)).map_err(|e| RunError::guest(&guest.name, e))?;
        if stop != Stop::Limit || guest.emu.tid() != thread || guest.emu.icount() != icount + 1 {
            return Err(RunError::guest(
                &guest.name,
                format!(
                    "the instruction under the uprobe at {addr:#x} did not run alone on thread {thread}: the run \
                     stopped after {} instructions, on thread {}",
                    guest.emu.icount() - icount,
                    guest.emu.tid()
                ),
            ));
        }
        Ok(())
    }
}
