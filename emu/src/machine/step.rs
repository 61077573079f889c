//! Exact stops inside a block without retranslating it: a second engine,
//! the *stepper*, runs the instructions before the stop.
//!
//! Unicorn compiles its exit address into the code it translates, so
//! stopping the main engine inside a block means translating the block cut
//! at the stop and, when it next runs, whole again (BENCHMARKS.md, "Emulator
//! throughput"). Instead, the main engine's block hook stops it before the
//! block runs (`track`), and the stepper, an engine of the same machine that
//! maps the same host memory (`ram.rs`), runs the block's first
//! instructions with Unicorn's instruction count: a per-instruction hook
//! that stops it before the one at the stop. The registers go over and back
//! as a Unicorn context, the page table (residency, faults) is lent to the
//! stepper for the run, and so is the per-instruction reference with
//! [`Tracking::Instructions`](crate::Tracking::Instructions), whose hook
//! the stepper has too. The main engine's translations are never touched;
//! the stepper keeps its own, so after the first stops in a block neither
//! engine translates anything.
//!
//! The stepper maps what the main engine maps. Every region mapped or
//! unmapped (`ram.rs`) and every change of permissions
//! (`Emulator::flush_tlb`) moves the main engine's `Ram::epoch`; the
//! stepper then maps the regions again and drops its translations and TLB
//! before it runs. A fault or
//! trap in the stepped instructions ends the step where the main engine
//! would have ended: the run loop handles it the same way.

use crate::error::Error;
use crate::machine::arch::Machine;
use crate::machine::engine::{Engine, Stepper, Trap};
use crate::machine::hooks;
use crate::machine::ram::Piece;
use crate::machine::track::{self, Cut, Tracking};
use unicorn_engine::uc_error;

impl Stepper {
    /// A stepper for an engine of `machine` running `file` (for messages),
    /// with the per-instruction reference if the main engine has it.
    pub(crate) fn new(machine: &'static dyn Machine, tracking: Tracking, file: &str) -> Result<Stepper, Error> {
        let what = "start the stepping engine";
        let mut uc = hooks::new_engine(machine, Tracking::Off, file, what)?;
        let err = Error::engine(file, what);
        if tracking == Tracking::Instructions {
            uc.add_code_hook(1, 0, track::on_instruction).map_err(&err)?;
        }
        let context = uc.context_alloc().map_err(err)?;
        // An epoch the main engine never has: the first step maps everything.
        Ok(Stepper { uc, mapped: Vec::new(), epoch: u64::MAX, context })
    }

    /// Maps the main engine's regions again and drops every translation
    /// and TLB entry, if its memory changed since the last step.
    fn sync(&mut self, main: &Engine) -> Result<(), uc_error> {
        let ram = &main.get_data().ram;
        if self.epoch == ram.epoch {
            return Ok(());
        }
        let pieces: Vec<Piece> = ram.pieces().collect();
        if pieces != self.mapped {
            for piece in std::mem::take(&mut self.mapped) {
                self.uc.mem_unmap(piece.start, piece.len)?;
            }
            for &piece in &pieces {
                // SAFETY: the host memory belongs to the main engine's data,
                // which owns this stepper and drops it first; the stepper
                // maps exactly the main engine's current regions.
                unsafe { self.uc.mem_map_ptr(piece.start, piece.len, unicorn_engine::Prot::ALL, piece.host.cast())? };
                self.mapped.push(piece);
            }
        }
        self.uc.ctl_flush_tb()?;
        self.uc.ctl_flush_tlb()?;
        self.epoch = ram.epoch;
        Ok(())
    }
}

/// What ended a run of an engine: a trap seen by a hook and the engine's result.
pub(crate) type Ended = (Option<Trap>, Result<(), uc_error>);

/// Runs the instructions of the block `cut` is in up to the stop, in
/// `stepper` on the memory and registers of `main` (stopped before the
/// block), and hands the registers back. Returns what ended the run, as for
/// a run of the main engine.
pub(crate) fn step(main: &mut Engine, stepper: &mut Stepper, cut: Cut) -> Result<Ended, uc_error> {
    stepper.sync(main)?;
    main.context_save(&mut stepper.context)?;
    stepper.uc.context_restore(&stepper.context)?;
    lend(main, &mut stepper.uc);
    let result = stepper.uc.emu_start(cut.start, 0, 0, cut.count as usize);
    track::finish_run(&mut stepper.uc);
    lend(main, &mut stepper.uc);
    let theirs = stepper.uc.get_data_mut();
    let trap = theirs.trap.take();
    let hook_error = theirs.hook_error.take();
    stepper.uc.context_save(&mut stepper.context)?;
    main.context_restore(&stepper.context)?;
    if let Some(err) = hook_error {
        main.get_data_mut().hook_error = Some(err);
    }
    Ok((trap, result))
}

/// Swaps what the stepper borrows from the main engine for a step: the page
/// table and the per-instruction reference (called again to give them back).
fn lend(main: &mut Engine, stepper: &mut Engine) {
    let (mine, theirs) = (main.get_data_mut(), stepper.get_data_mut());
    std::mem::swap(&mut mine.pages, &mut theirs.pages);
    std::mem::swap(&mut mine.tracker.reference, &mut theirs.tracker.reference);
}
