//! The ground-truth return-address stack: the calls actually in progress,
//! built from the calls, returns and indirect jumps the guest executes and
//! from signal delivery and return.
//!
//! # Rules
//!
//! Every frame records the stack pointer just after its call (x86-64: the
//! address of the pushed return address; AArch64, s390x: the caller's SP,
//! which the call leaves unchanged). Stacks grow down, so a frame whose
//! recorded SP is below the current SP belongs to a call that has ended.
//!
//! * **Call**: push the return address (the next instruction) and the SP.
//! * **Return to `T`**: pop down to the innermost frame whose return address
//!   is `T` (recursion returns one level: the innermost match is the right
//!   one). If no frame matches, this is a non-local return (s390x and
//!   AArch64 `__longjmp` end with a branch to the link register): drop every
//!   frame whose SP is at or below the SP after the return. "At" matters on
//!   the link-register architectures, where a call made from the `setjmp`
//!   caller recorded exactly the SP that `longjmp` restores.
//! * **Indirect jump** (switch tables, tail calls through a register,
//!   `longjmp`): drop the frames whose SP is below the current SP, and on
//!   the link-register architectures also a frame whose SP equals it unless
//!   its return address is still in the link register. A function that
//!   allocated no frame (or has popped it) and tail-calls through a register
//!   jumps with exactly the SP its call recorded, and with its return
//!   address in the link register (x86-64: on the stack, at that SP): that
//!   frame is the one the tail-called function returns through and stays.
//!   After a `longjmp` (x86-64 `jmp *%rdx`, s390x `br %r4`), the frame of the
//!   call that was in progress in the `setjmp` caller recorded the SP that
//!   `longjmp` restores (AArch64, s390x) or one 8 bytes below it (x86-64),
//!   and the link register holds `setjmp`'s return address instead: it goes.
//!   An indirect jump *to the innermost return address* is a return through
//!   another register (s390x `_init`/`_fini`: `br %r4`) and pops that frame.
//! * **Direct jumps** (direct tail calls included) change nothing.
//! * **Signal delivery** pushes a marker frame: the handler "returns" into
//!   the sigreturn trampoline, so the marker's return address is the
//!   trampoline and its SP is the handler's entry SP; it also remembers the
//!   interrupted PC. The handler's `ret` to the trampoline marks it returned
//!   (execution is then in the trampoline, whose caller is the interrupted
//!   code). **sigreturn** removes the innermost marker and everything above
//!   it, which restores the stack to its state at delivery: frames below a
//!   marker are never changed while it is there (returns search no deeper
//!   than it, and the SP rules that may cross it remove it).
//!
//! Known limits: a handler that leaves by `siglongjmp` to a stack at *lower*
//! addresses than its alternate signal stack keeps its marker (the SP rules
//! cannot see that it left). A guest that calls without ever returning while
//! keeping its SP (e.g. `call 1f; 1: pop; jmp …` in a loop) would grow the
//! stack without bound, so beyond [`MAX_FRAMES`] calls are no longer
//! recorded and [`ShadowStack::overflowed`] says so.

use crate::machine::flow::{Flow, Transfer};

/// The registers a rule may need after an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct After {
    /// The stack pointer.
    pub sp: u64,
    /// The link register (x30, r14); `None` on x86-64.
    pub lr: Option<u64>,
}

/// Most frames the stack holds; the 8 MiB main stack holds at most a million
/// 8-byte x86-64 return addresses, so only a guest that calls without using
/// stack gets here.
pub const MAX_FRAMES: usize = 1 << 20;

/// One call in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShadowFrame {
    /// The return address: the instruction after the call (for a signal
    /// marker, the sigreturn trampoline the handler returns to).
    pub ra: u64,
    /// The stack pointer just after the call (the handler's entry SP for a marker).
    pub sp: u64,
    /// A call or a signal delivery.
    pub kind: FrameKind,
}

/// What pushed a [`ShadowFrame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FrameKind {
    /// A call instruction.
    Call,
    /// Delivery of a signal to a handler.
    Signal {
        /// Where the interrupted code resumes after sigreturn.
        resume_pc: u64,
        /// The handler has returned into the trampoline (sigreturn is next).
        returned: bool,
    },
}

/// The stack of calls in progress (see the module documentation for the rules).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShadowStack {
    frames: Vec<ShadowFrame>,
    overflowed: u64,
}

impl ShadowStack {
    /// An empty stack (the program's entry point has no caller).
    pub fn new() -> Self {
        Self::default()
    }

    /// The frames, outermost first.
    pub fn frames(&self) -> &[ShadowFrame] {
        &self.frames
    }

    /// Calls that were not recorded because the stack was full.
    pub fn overflowed(&self) -> u64 {
        self.overflowed
    }

    /// The addresses an exact unwinder lists after the current PC, innermost
    /// first: each call's return address; for a signal frame the trampoline
    /// (unless the handler has already returned into it), then the
    /// interrupted PC.
    pub fn return_addresses(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.frames.len() + 1);
        out.extend(self.entries().map(|(ra, _)| ra));
        out
    }

    /// [`ShadowStack::return_addresses`], each with the stack pointer just
    /// after the call that pushed it, where the ground truth knows it
    /// (`None` for a signal frame's interrupted PC): one walk of the frames
    /// gives both, in step.
    pub fn entries(&self) -> impl Iterator<Item = (u64, Option<u64>)> + '_ {
        self.frames.iter().rev().flat_map(|frame| {
            let (call, interrupted) = match frame.kind {
                FrameKind::Call => (Some(frame.ra), None),
                FrameKind::Signal { resume_pc, returned } => ((!returned).then_some(frame.ra), Some(resume_pc)),
            };
            call.map(|ra| (ra, Some(frame.sp))).into_iter().chain(interrupted.map(|pc| (pc, None)))
        })
    }

    /// Whether [`ShadowStack::apply`] needs the registers for `t`, which
    /// continued at `next_pc` (so hooks read them only then).
    pub fn needs_registers(&self, t: Transfer, next_pc: u64) -> bool {
        t.taken(next_pc)
            && match t.flow {
                Flow::Plain => false,
                Flow::Call | Flow::Jump => true,
                Flow::Return => self.return_match(next_pc).is_none(),
            }
    }

    /// Applies an executed instruction's effect: `next_pc` is where execution
    /// went on, `after` the registers after the instruction (needed only when
    /// [`ShadowStack::needs_registers`] says so).
    pub fn apply(&mut self, t: Transfer, next_pc: u64, after: Option<After>) {
        // Missing registers (a caller that did not need to read them) stand
        // for the lowest SP: no frame is below it.
        self.apply_reading(t, next_pc, |_| after.unwrap_or_default());
    }

    /// [`ShadowStack::apply`] for a caller that reads the registers only if
    /// a rule needs them: `read` is called at most once, with whether the
    /// link register is needed too. This is the block hook's path for every
    /// call and return (a read is a call into the engine), so the return's
    /// frame is looked up once, here, and a call reads the SP alone.
    #[inline]
    pub fn apply_reading(&mut self, t: Transfer, next_pc: u64, read: impl FnOnce(bool) -> After) {
        if !t.taken(next_pc) {
            return;
        }
        match t.flow {
            Flow::Plain => {}
            Flow::Call => self.call(t.next, read(false).sp),
            Flow::Return => match self.return_match(next_pc) {
                Some(i) => self.return_through(i),
                None => self.drop_below(read(false).sp),
            },
            // An indirect jump to a pending return address is a return by
            // another register (glibc's s390x `_init`/`_fini` end in
            // `br %r4` after reloading the saved %r14 into %r4): the
            // innermost frame is the one it returns through.
            Flow::Jump if self.innermost_ra() == Some(next_pc) => self.return_through(self.frames.len() - 1),
            Flow::Jump => self.jump(read(true)),
        }
    }

    /// Return address of the innermost call frame, if the innermost frame is one.
    fn innermost_ra(&self) -> Option<u64> {
        self.frames.last().filter(|f| matches!(f.kind, FrameKind::Call)).map(|f| f.ra)
    }

    /// A call returning to `ra` was made; the SP is now `sp`.
    pub fn call(&mut self, ra: u64, sp: u64) {
        self.push(ShadowFrame { ra, sp, kind: FrameKind::Call });
    }

    /// The frame a return to `target` returns through: the innermost one with
    /// that return address, searching down to the innermost signal marker and
    /// no deeper (a return cannot leave a handler's frame other than into its
    /// trampoline).
    fn return_match(&self, target: u64) -> Option<usize> {
        for (i, frame) in self.frames.iter().enumerate().rev() {
            match frame.kind {
                FrameKind::Call if frame.ra == target => return Some(i),
                FrameKind::Call => {}
                FrameKind::Signal { returned, .. } => return (frame.ra == target && !returned).then_some(i),
            }
        }
        None
    }

    /// A return to `target` was executed; the SP is now `sp`.
    pub fn ret(&mut self, target: u64, sp: u64) {
        match self.return_match(target) {
            Some(i) => self.return_through(i),
            None => self.drop_below(sp),
        }
    }

    /// A return went through frame `i` (see [`ShadowStack::return_match`]):
    /// the frames above it have ended, and so has it unless it is a signal
    /// marker, which is then marked returned.
    fn return_through(&mut self, i: usize) {
        self.frames.truncate(i + 1);
        match &mut self.frames[i].kind {
            FrameKind::Call => {
                self.frames.pop();
            }
            FrameKind::Signal { returned, .. } => *returned = true,
        }
    }

    /// An indirect jump was executed; the registers are now `after`.
    pub fn jump(&mut self, after: After) {
        while let Some(top) = self.frames.last() {
            let gone = top.sp < after.sp || (top.sp == after.sp && after.lr.is_some_and(|lr| lr != top.ra));
            if !gone {
                break;
            }
            self.frames.pop();
        }
    }

    /// A signal handler was entered with SP `sp`; it returns to `trampoline`
    /// and sigreturn resumes the interrupted code at `resume_pc`.
    pub fn signal(&mut self, trampoline: u64, sp: u64, resume_pc: u64) {
        self.push(ShadowFrame { ra: trampoline, sp, kind: FrameKind::Signal { resume_pc, returned: false } });
    }

    /// `rt_sigreturn` (or s390x `sigreturn`): back to the state at the
    /// innermost delivery. Without a marker (a forged signal frame) nothing
    /// changes.
    pub fn sigreturn(&mut self) {
        if let Some(i) = self.frames.iter().rposition(|f| matches!(f.kind, FrameKind::Signal { .. })) {
            self.frames.truncate(i);
        }
    }

    fn push(&mut self, frame: ShadowFrame) {
        if self.frames.len() < MAX_FRAMES {
            self.frames.push(frame);
        } else {
            self.overflowed += 1;
        }
    }

    /// Drops the innermost frames whose SP is at or below `sp`.
    fn drop_below(&mut self, sp: u64) {
        while self.frames.last().is_some_and(|top| top.sp <= sp) {
            self.frames.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(frames: &[(u64, u64)]) -> ShadowStack {
        let mut s = ShadowStack::new();
        for &(ra, sp) in frames {
            s.call(ra, sp);
        }
        s
    }

    #[test]
    fn recursion_returns_one_level_at_a_time() {
        let mut s = stack(&[(0x100, 0x9000), (0x200, 0x8f00), (0x200, 0x8e00), (0x200, 0x8d00)]);
        s.ret(0x200, 0x8d08);
        assert_eq!(s.return_addresses(), [0x200, 0x200, 0x100]);
        s.ret(0x200, 0x8e08);
        assert_eq!(s.return_addresses(), [0x200, 0x100]);
    }

    #[test]
    fn non_local_return_drops_frames_at_or_below_the_new_sp() {
        // s390x longjmp: `br %r14` to the setjmp return address (not on the
        // stack), SP back to the setjmp caller's, which is what its callee recorded.
        let mut s = stack(&[(0x100, 0x9000), (0x200, 0x8f00), (0x300, 0x8e00)]);
        s.ret(0x150, 0x8f00);
        assert_eq!(s.return_addresses(), [0x100]);
    }

    const JUMP: Transfer = Transfer { flow: Flow::Jump, next: 0, conditional: false };

    #[test]
    fn indirect_jumps_drop_frames_below_and_equal_ones_not_in_the_link_register() {
        // x86-64 longjmp: SP back above the callee's recorded slot.
        let mut s = stack(&[(0x100, 0x9000), (0x200, 0x8ef8), (0x300, 0x8e00)]);
        s.apply(JUMP, 0x150, Some(After { sp: 0x8f00, lr: None }));
        assert_eq!(s.return_addresses(), [0x100]);
        // s390x longjmp: the call from the setjmp caller recorded the SP it restores.
        let mut s = stack(&[(0x100, 0x9000), (0x200, 0x8f00), (0x300, 0x8e00)]);
        s.apply(JUMP, 0x150, Some(After { sp: 0x8f00, lr: Some(0x150) }));
        assert_eq!(s.return_addresses(), [0x100]);
        // A tail call through a register from a frameless function keeps its frame.
        for lr in [None, Some(0x200)] {
            let mut s = stack(&[(0x100, 0x9000), (0x200, 0x8f00)]);
            s.apply(JUMP, 0x4000, Some(After { sp: 0x8f00, lr }));
            assert_eq!(s.return_addresses(), [0x200, 0x100]);
        }
    }

    #[test]
    fn registers_are_read_only_when_a_rule_needs_them_and_give_what_apply_gives() {
        let call = Transfer { flow: Flow::Call, next: 0x300, conditional: false };
        let ret = Transfer { flow: Flow::Return, next: 0, conditional: false };
        let regs = After { sp: 0x8e80, lr: Some(0x150) };
        // (transfer, where execution went on, the link register flag of the read or no read)
        let cases = [
            (call, 0x4000, Some(false)),
            (ret, 0x200, None),
            (ret, 0x999, Some(false)),
            (JUMP, 0x200, None),
            (JUMP, 0x150, Some(true)),
            (Transfer { flow: Flow::Plain, next: 0, conditional: false }, 0x10, None),
        ];
        for (t, next_pc, read) in cases {
            let mut lazy = stack(&[(0x100, 0x9000), (0x200, 0x8f00)]);
            let mut eager = lazy.clone();
            let mut seen = None;
            lazy.apply_reading(t, next_pc, |link| {
                assert!(seen.replace(link).is_none(), "read twice");
                regs
            });
            assert_eq!(seen, read, "{t:?} to {next_pc:#x}");
            // Never more reads than `needs_registers` asks of other callers.
            assert!(seen.is_none() || eager.needs_registers(t, next_pc));
            eager.apply(t, next_pc, Some(regs));
            assert_eq!(lazy, eager, "{t:?} to {next_pc:#x}");
        }
    }

    #[test]
    fn untaken_conditional_returns_change_nothing() {
        let mut s = stack(&[(0x100, 0x9000)]);
        let ber = Transfer { flow: Flow::Return, next: 0x2002, conditional: true };
        assert!(!s.needs_registers(ber, 0x2002));
        s.apply(ber, 0x2002, None);
        assert_eq!(s.return_addresses(), [0x100]);
        assert!(!s.needs_registers(ber, 0x100), "the return matches a frame");
        s.apply(ber, 0x100, None);
        assert!(s.return_addresses().is_empty());
    }

    #[test]
    fn signal_frames_list_trampoline_and_interrupted_pc_and_sigreturn_restores() {
        let mut s = stack(&[(0x100, 0x9000), (0x200, 0x8f00)]);
        let before = s.clone();
        s.signal(0x7000, 0x8000, 0x2345);
        s.call(0x5000, 0x7f00);
        assert_eq!(s.return_addresses(), [0x5000, 0x7000, 0x2345, 0x200, 0x100]);
        s.ret(0x5000, 0x7f08);
        // The handler returns into the trampoline: no longer listed.
        s.ret(0x7000, 0x8008);
        assert_eq!(s.return_addresses(), [0x2345, 0x200, 0x100]);
        s.sigreturn();
        assert_eq!(s, before);
        // A return inside a handler never matches frames below the marker.
        s.signal(0x7000, 0x8000, 0x2345);
        s.ret(0x200, 0x7000);
        assert_eq!(s.return_addresses(), [0x7000, 0x2345, 0x200, 0x100]);
        s.sigreturn();
        assert_eq!(s, before);
    }

    #[test]
    fn leaving_a_handler_by_longjmp_drops_its_marker() {
        let mut s = stack(&[(0x100, 0x9000), (0x200, 0x8f00)]);
        s.signal(0x7000, 0x8000, 0x2345);
        s.apply(JUMP, 0x150, Some(After { sp: 0x8e80, lr: Some(0x150) }));
        assert_eq!(s.return_addresses(), [0x200, 0x100]);
    }
}
