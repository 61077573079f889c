//! Setting a guest up: its program loaded into the emulator (its `.sframe`
//! patched first if the scenario says so, found with the sframe crate's ELF
//! glue), and its task in the kernel model with the section registered.

use emu::{Config, Emulator};
use kmodel::kernel::Kernel;
use kmodel::types::Tid;

use crate::report::RunError;
use crate::scenario::{Guest, Scenario};

/// A guest while the scenario runs.
pub(crate) struct GuestRun {
    /// Its name in the scenario.
    pub(crate) name: String,
    /// The emulated process.
    pub(crate) emu: Emulator,
    /// The model's task of each of its threads, by thread ID (a process's
    /// first thread has the process's ID; the one on the CPU is
    /// [`GuestRun::tid`]). Thread IDs are never reused by the emulator, so
    /// the entries of ended threads stay.
    pub(crate) tasks: std::collections::BTreeMap<emu::Tid, Tid>,
    /// Its threads asleep in a system call (in the kernel, for the model).
    pub(crate) sleeping: std::collections::BTreeSet<emu::Tid>,
    /// The user registers of threads the emulator has just killed (a
    /// sibling's `exit_group`, fatal signal or exec), as it last switched
    /// each out: where one preempted in user mode was interrupted, which
    /// is what it enters the kernel with when the model kills it.
    pub(crate) killed_regs: std::collections::BTreeMap<Tid, kmodel::arch::UserRegs>,
    /// The CPU it runs on: its processes' first threads' CPU.
    pub(crate) cpu: usize,
    /// The CPU of each thread made by `clone(CLONE_THREAD)` (model task):
    /// assigned round robin at creation, moved by migrations that name it.
    pub(crate) thread_cpus: std::collections::BTreeMap<Tid, usize>,
    /// Its threads in creation order (index 0: the first thread; then each
    /// `clone(CLONE_THREAD)`, whatever its process): what a migration's
    /// `thread` names.
    pub(crate) threads_made: Vec<emu::Tid>,
    /// Its shell-style exit status, once it has exited.
    pub(crate) done: Option<i32>,
    /// Left asleep in the kernel when profiling ended.
    pub(crate) asleep_at_end: bool,
    /// NMIs its next (matching) system call takes in the kernel.
    pub(crate) slow: u32,
    /// Only a system call of this name is slow.
    pub(crate) slow_only: Option<String>,
    /// A migration waiting for its next kernel entry.
    pub(crate) migrate_to: Option<usize>,
    /// The thread (index in [`GuestRun::threads_made`]) whose kernel entry
    /// the migration waits for; `None`: whichever enters first.
    pub(crate) migrate_thread: Option<usize>,
    /// The slow call's NMIs hit it before it sleeps (if it sleeps), so its
    /// requests are pending while it sleeps.
    pub(crate) slow_before_sleep: bool,
    /// The simulated loader's registrations (scenario `registration: loader`).
    pub(crate) loader: crate::loader::Loader,
    /// The guest path of its program (`/guests/NAME`): frames there are
    /// named without the object's name.
    pub(crate) exe: Vec<u8>,
    /// Its processes' forks, for the objects a child starts with.
    pub(crate) forks: Vec<crate::symbolise::Fork>,
    /// When its emulator events happened, for perf.data's records: each
    /// (length of the event list, virtual time, CPU) at a system call that
    /// added events, in order (objects are mapped only by system calls,
    /// and by the first load, at time 0).
    pub(crate) clock: Vec<(usize, u64, usize)>,
    /// Each exec's program name (`comm`): (model task, time, CPU, name).
    pub(crate) comms: Vec<(Tid, u64, usize, Vec<u8>)>,
}

impl GuestRun {
    /// Forgets that the `killed` tasks' threads sleep, and their
    /// registers: they are dead.
    pub(crate) fn forget_killed(&mut self, killed: &[Tid]) {
        let tasks = &self.tasks;
        self.sleeping.retain(|t| !killed.contains(&tasks[t]));
        self.killed_regs.retain(|t, _| !killed.contains(t));
    }

    /// The model's task of the thread on the guest's CPU.
    pub(crate) fn tid(&self) -> Tid {
        // Every thread the emulator reports was added at its fork or clone.
        self.tasks[&self.emu.tid()]
    }

    /// The CPU model task `task` of this guest runs on: its own if it is a
    /// thread made by `clone(CLONE_THREAD)`, else the guest's.
    pub(crate) fn cpu_of(&self, task: Tid) -> usize {
        self.thread_cpus.get(&task).copied().unwrap_or(self.cpu)
    }

    /// Moves model task `task` to `cpu` in the lab's books (the caller
    /// migrates it in the model): a process's first thread takes the
    /// guest's CPU with it, as before threads.
    pub(crate) fn set_cpu(&mut self, task: Tid, cpu: usize) {
        match self.thread_cpus.get_mut(&task) {
            Some(c) => *c = cpu,
            None => self.cpu = cpu,
        }
    }

    /// The index in [`GuestRun::threads_made`] of thread `tid`.
    pub(crate) fn thread_index(&self, tid: emu::Tid) -> Option<usize> {
        self.threads_made.iter().position(|&t| t == tid)
    }
}

/// Loads guest `g` of `scenario` and gives the kernel model its address
/// space, its `.sframe` and its task.
pub(crate) fn set_up(g: &Guest, scenario: &Scenario, k: &mut Kernel) -> Result<GuestRun, RunError> {
    let arch = scenario.machine.arch;
    // argv[0] and /proc/self/exe must not depend on where the checkout
    // is: their lengths change the guest's instruction counts.
    let file_name = g.path.file_name().map_or_else(|| g.name.clone(), |n| n.to_string_lossy().into_owned());
    let mut args = vec![file_name.clone().into_bytes()];
    args.extend(g.args.iter().map(|a| a.clone().into_bytes()));
    let exe = format!("/guests/{file_name}").into_bytes();
    let config = Config {
        args,
        stdin: emu::Stdin::Bytes(g.stdin.clone().into_bytes()),
        capture_output: true,
        passthrough: false,
        seed: scenario.seed,
        exe_path: Some(exe.clone()),
        files: g.files.iter().map(|(p, c)| (p.clone().into_bytes(), c.clone().into_bytes())).collect(),
        cwd: g.cwd.clone().map(String::into_bytes),
        root: g.root.clone(),
        // The root alone: no cross sysroot searched first, so what the
        // guest sees is what the scenario names (and what the log's
        // digests are of), on any machine.
        prefix: Some(std::path::PathBuf::new()),
        // The registration calls at the scenario's numbers: traced by name
        // (the model answers them, `loader::model_call`). Upstream has no
        // such calls: unnamed, they fail with ENOSYS as on Linux 7.3.
        named_syscalls: if scenario.kernel.profile.has_sframe() {
            scenario.kernel.sframe_syscalls.named()
        } else {
            Vec::new()
        },
        ..Config::default()
    };
    if let Some(root) = g.root.as_ref().filter(|r| !r.is_dir()) {
        return Err(RunError::guest(&g.name, format!("root {}: no such host directory", root.display())));
    }
    let mut emu = load(g, config)?;
    if emu.arch() != arch {
        return Err(RunError::guest(&g.name, format!("is not an {arch} program")));
    }
    let mm = image_mm(k, &mut emu, scenario);
    let tid = k.spawn(&g.name, mm, g.cpu);
    let run = GuestRun {
        name: g.name.clone(),
        emu,
        tasks: std::collections::BTreeMap::from([(emu::FIRST_PID, tid)]),
        sleeping: std::collections::BTreeSet::new(),
        killed_regs: std::collections::BTreeMap::new(),
        cpu: g.cpu,
        thread_cpus: std::collections::BTreeMap::new(),
        threads_made: vec![emu::FIRST_PID],
        done: None,
        asleep_at_end: false,
        slow: 0,
        slow_only: None,
        migrate_to: None,
        migrate_thread: None,
        slow_before_sleep: false,
        loader: crate::loader::Loader::default(),
        clock: Vec::new(),
        comms: vec![(tid, 0, g.cpu, comm_of(&exe))],
        exe,
        forks: Vec::new(),
    };
    let mut run = run;
    run.clock.push((run.emu.events().len(), 0, g.cpu));
    // Exec registered what the first load mapped.
    run.loader.skip_to(run.emu.events(), emu::FIRST_PID);
    Ok(run)
}

/// A new mm in the model for the program `emu` has just loaded (at start
/// or by `execve`), with the `PT_GNU_SFRAME` sections registered as exec
/// registers them in the SFrame series v13 (`elf_add_sframe`): the
/// program's and its interpreter's — the objects mapped at exec — each
/// with its text. Libraries `ld.so` maps later are not registered by exec.
/// Under `scenario`'s profile `upstream` nothing is registered: Linux 7.3
/// has no `.sframe` tables.
pub(crate) fn image_mm(k: &mut Kernel, emu: &mut Emulator, scenario: &Scenario) -> kmodel::types::MmId {
    let mm = k.new_mm(emu.arch());
    if !scenario.kernel.profile.has_sframe() {
        return mm;
    }
    // Registering a section maps nothing: one copy of the areas serves all.
    let vmas = crate::loader::emu_vmas(emu.pages());
    for object in emu.objects() {
        let (Some((addr, size)), Some(text)) = (object.sframe(), object.text()) else { continue };
        let mem = emu.user_memory();
        // A refused section is logged by the model; FP remains.
        let _ = k.add_sframe(mm, &mem, &vmas, (addr, addr.saturating_add(size)), text);
    }
    mm
}

/// Loads a guest, with its `.sframe` patched first if the scenario says so
/// (in the file's bytes: the section is read-only once loaded).
fn load(g: &Guest, config: Config) -> Result<Emulator, RunError> {
    let mut bytes =
        std::fs::read(&g.path).map_err(|e| RunError::guest(&g.name, format!("{}: {e}", g.path.display())))?;
    if !g.sframe_patch.is_empty() {
        let (offset, size) = sframe::elf::sframe_segment(&bytes)
            .ok_or_else(|| RunError::guest(&g.name, "sframe_patch given but the program has no PT_GNU_SFRAME"))?;
        for &(at, byte) in &g.sframe_patch {
            let pos = offset.checked_add(at).filter(|_| at < size).and_then(|p| usize::try_from(p).ok());
            match pos.and_then(|p| bytes.get_mut(p)) {
                Some(b) => *b = byte,
                None => return Err(RunError::guest(&g.name, format!("sframe_patch offset {at} is past the section"))),
            }
        }
    }
    Emulator::new(&g.path.display().to_string(), &bytes, config).map_err(|e| RunError::guest(&g.name, e))
}

/// The `comm` of a program at guest path `path`: its file name, at most 15
/// bytes (`__set_task_comm()`).
pub(crate) fn comm_of(path: &[u8]) -> Vec<u8> {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    name[..name.len().min(15)].to_vec()
}
