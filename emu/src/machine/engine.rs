//! The Unicorn engine as the emulator uses it: the type, and the state its
//! hooks share with the emulator.
//!
//! Hooks run inside `emu_start` and only record what happened (a trap, a page
//! touched, a block executed) and stop the engine; the emulator acts on it
//! afterwards with full access to registers and memory. The exceptions are
//! the TLB-fill hook, which must answer at once (it is the page-fault handler
//! and needs nothing but the page table), and the block hook, which keeps the
//! instruction count and the ground-truth stack ([`crate::machine::track`]). The
//! hooks are installed when the engine is created (`hooks.rs`). Guest
//! memory is host memory the emulator owns (`ram.rs`).

use crate::machine::memory::PageTable;
use crate::machine::ram::{HasRam, Piece, Ram};
use crate::machine::track::{Tracked, Tracker};
use unicorn_engine::{uc_error, Context, UcHookId, Unicorn};

/// A Unicorn instance carrying the emulator's shared state.
pub type Engine = Unicorn<'static, Shared>;

/// Why the engine stopped, as recorded by a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trap {
    /// A system call with this number; the PC is already past the instruction.
    Syscall(u64),
    /// Another interrupt (breakpoint, illegal instruction, …).
    Interrupt(u32),
}

/// State shared between the emulator and its engine hooks.
#[derive(Debug)]
pub struct Shared {
    /// Guest virtual memory: areas, permissions and page residency.
    pub(crate) pages: PageTable,
    /// A trap seen by a hook during the current `emu_start`.
    pub(crate) trap: Option<Trap>,
    /// An engine error inside a hook (reported after `emu_start` returns).
    pub(crate) hook_error: Option<uc_error>,
    /// Instruction count, stops, and the ground-truth stack.
    pub(crate) tracker: Tracker,
    /// The executable areas covered by a memory hook, and its id (see
    /// `hooks::cover_code`).
    pub(crate) code_hooks: Vec<((u64, u64), UcHookId)>,
    /// The second engine that runs the instructions before a stop inside a
    /// block (`step.rs`), once there has been one. Declared before `ram`:
    /// it maps the same host memory, so it must be closed first.
    pub(crate) stepper: Option<Box<Stepper>>,
    /// Guest physical memory (owned host buffers the engine maps).
    pub(crate) ram: Ram,
}

/// The second engine that runs the instructions before a stop inside a
/// block, with what it mirrors of the main one (`step.rs` runs it).
#[derive(Debug)]
pub(crate) struct Stepper {
    pub(crate) uc: Engine,
    /// The regions mapped, as of `epoch`.
    pub(crate) mapped: Vec<Piece>,
    /// The main engine's [`Ram::epoch`] when the stepper last caught up.
    pub(crate) epoch: u64,
    /// Registers on their way between the engines.
    pub(crate) context: Context,
}

impl HasRam for Shared {
    fn ram(&self) -> &Ram {
        &self.ram
    }

    fn ram_mut(&mut self) -> &mut Ram {
        &mut self.ram
    }
}

impl Tracked for Shared {
    fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    fn tracker_mut(&mut self) -> &mut Tracker {
        &mut self.tracker
    }
}
