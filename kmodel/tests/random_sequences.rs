//! Property test: random sequences of host events (entries, returns, NMIs,
//! requests, cancels, registrations, migrations, sleeps, exits) on 2 CPUs,
//! 2 tasks and up to 3 tracers keep every invariant. Seeded: the same
//! sequences every run.

mod support;

use kmodel::arch::Arch;
use kmodel::event::EntryReason;
use kmodel::kernel::TaskState;
use kmodel::types::{ExitPath, KernelOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use support::stack::fp_stack;

#[derive(Debug, Clone)]
enum Op {
    Enter(usize),
    Return(usize),
    Nmi(usize, usize),
    Request(usize, usize),
    Cancel(usize),
    Init,
    Migrate(usize, usize),
    Sleep(usize),
    Wake(usize),
    Exit(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..2).prop_map(Op::Enter),
        4 => (0usize..2).prop_map(Op::Return),
        4 => (0usize..2, 0usize..3).prop_map(|(c, w)| Op::Nmi(c, w)),
        3 => (0usize..2, 0usize..3).prop_map(|(t, w)| Op::Request(t, w)),
        1 => (0usize..3).prop_map(Op::Cancel),
        1 => Just(Op::Init),
        2 => (0usize..2, 0usize..2).prop_map(|(t, c)| Op::Migrate(t, c)),
        1 => (0usize..2).prop_map(Op::Sleep),
        1 => (0usize..2).prop_map(Op::Wake),
        1 => (0usize..2).prop_map(Op::Exit),
    ]
}

fn exit_path() -> impl Strategy<Value = ExitPath> {
    prop_oneof![
        Just(ExitPath::Upstream),
        Just(ExitPath::V6_17),
        Just(ExitPath::None),
        Just(ExitPath::CopyOnExit),
        Just(ExitPath::UnwindAtSyscallEntry)
    ]
}

#[test]
fn random_event_sequences_keep_every_invariant() {
    let seed = *b"unwindlab-kmodel-random-sequence";
    let mut runner = TestRunner::new_with_rng(
        Config { cases: 400, ..Config::default() },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    );
    runner
        .run(&(exit_path(), prop::collection::vec(op(), 1..60)), |(exit_path, ops)| {
            let (mem, regs) = fp_stack(Arch::X86_64, 3);
            let mut k = support::kernel(KernelOptions { exit_path, ..KernelOptions::default() });
            let mut works: Vec<_> = (0..2).map(|i| k.unwind_deferred_init(&format!("t{i}")).0).collect();
            let mm = k.new_mm(Arch::X86_64);
            let tasks = [k.spawn("a", mm, 0), k.spawn("b", mm, 1)];
            for op in ops {
                match op {
                    Op::Enter(t) => {
                        let tid = tasks[t];
                        if k.task(tid).state == TaskState::User && k.current(k.task(tid).cpu).is_none_or(|c| c == tid) {
                            k.enter(tid, EntryReason::Syscall, regs.clone(), &mem);
                        }
                    }
                    Op::Return(t) => {
                        let tid = tasks[t];
                        if k.task(tid).state == TaskState::Kernel && !k.task(tid).exiting {
                            k.return_to_user(tid, &mem);
                        }
                    }
                    Op::Nmi(cpu, w) => {
                        if let (Some(&work), Some(tid)) = (works.get(w), k.current(cpu)) {
                            let regs = (k.task(tid).state == TaskState::User).then(|| regs.clone());
                            k.nmi_request(cpu, work, regs, &mem);
                        }
                    }
                    Op::Request(t, w) => {
                        let tid = tasks[t];
                        let cpu = k.task(tid).cpu;
                        if k.task(tid).state == TaskState::Kernel && k.current(cpu) == Some(tid) {
                            if let Some(&work) = works.get(w) {
                                k.unwind_deferred_request(cpu, work);
                            }
                        }
                    }
                    Op::Cancel(w) => {
                        if w < works.len() {
                            k.unwind_deferred_cancel(works.remove(w));
                        }
                    }
                    Op::Init => {
                        if works.len() < 3 {
                            let n = k.works().len();
                            works.push(k.unwind_deferred_init(&format!("t{n}")).0);
                        }
                    }
                    Op::Migrate(t, cpu) => {
                        let tid = tasks[t];
                        let state = k.task(tid).state;
                        let busy = k.current(cpu).is_some_and(|c| c != tid && k.task(c).state != TaskState::Dead);
                        if (state == TaskState::Sleeping || state == TaskState::Kernel) && !busy {
                            k.migrate(tid, cpu);
                        }
                    }
                    Op::Sleep(t) => {
                        if k.task(tasks[t]).state == TaskState::Kernel {
                            k.sleep(tasks[t]);
                        }
                    }
                    Op::Wake(t) => {
                        if k.task(tasks[t]).state == TaskState::Sleeping {
                            k.wake(tasks[t]);
                        }
                    }
                    Op::Exit(t) => {
                        let tid = tasks[t];
                        if k.task(tid).state == TaskState::Kernel && !k.task(tid).exiting {
                            k.exit(tid, 0, &mem);
                        }
                    }
                }
                let violations = k.take_violations();
                prop_assert!(violations.is_empty(), "{}", violations.iter().map(|v| v.to_string()).collect::<String>());
            }
            Ok(())
        })
        .unwrap();
}
