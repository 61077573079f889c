//! The scheduler at a guest's system call (`Run::syscall`): the kernel
//! model's entry and exit around it, and what the call does to the model's
//! tasks and mms (fork, clone, exec, the registration calls, exit, sleeps,
//! slow calls and migrations waiting for a kernel entry).

use emu::{ProcessEvent, SyscallRecord};
use kmodel::event::EntryReason;

use crate::report::RunError;
use crate::schedule::Run;

impl Run<'_> {
    pub(crate) fn syscall(&mut self, g: usize, record: &SyscallRecord, stop_after: u64) -> Result<(), RunError> {
        let name = record.name;
        let regs = self.user_regs(g)?;
        // The thread that made the call: an execve by a non-leader thread
        // has already given it the leader's ID in the emulator.
        let caller = self.guests[g]
            .emu
            .queued_process_events()
            .find_map(|e| match e {
                ProcessEvent::Exec { tid, .. } => Some(*tid),
                _ => None,
            })
            .unwrap_or_else(|| self.guests[g].emu.tid());
        let guest = &mut self.guests[g];
        let tid = guest.tasks[&caller];
        let pid = guest.emu.pid();
        if caller != pid && guest.emu.tid() == pid {
            // From now on the emulator's ID `pid` is the caller's (the old
            // leader, killed by the exec, goes through de_thread() below).
            guest.tasks.insert(pid, tid);
            guest.sleeping.remove(&pid);
        }
        if self.guests[g].sleeping.remove(&caller) {
            self.k.wake(tid);
        } else {
            let mem = self.guests[g].emu.user_memory();
            self.k.enter(tid, EntryReason::Syscall, regs.clone(), &mem);
        }
        // A slow system call: the task stays in the kernel for this many
        // sampling periods and every period's NMI hits it there.
        let matches = self.guests[g].slow_only.as_deref().is_none_or(|only| only == name);
        let slow = if matches { std::mem::take(&mut self.guests[g].slow) } else { 0 };
        self.slow_nmis(g, slow, stop_after)?;
        if self.guests[g].asleep_at_end {
            return Ok(());
        }
        // A migration waiting for a slow call happens in that call, between
        // its NMIs and the return to user.
        let waits_for_slow = self.guests[g].slow > 0;
        let guest = &self.guests[g];
        let this_thread = guest.migrate_thread.is_none_or(|i| guest.thread_index(caller) == Some(i));
        if let Some(to) = guest.migrate_to.filter(|_| !waits_for_slow && this_thread) {
            self.guests[g].migrate_to = None;
            self.k.sleep(tid);
            self.k.migrate(tid, to);
            self.guests[g].set_cpu(tid, to);
            self.k.wake(tid);
        }
        if matches!(name, "nanosleep" | "clock_nanosleep") {
            self.k.sleep(tid);
            self.k.wake(tid);
        }
        let guest = &mut self.guests[g];
        // What the call did to processes, still queued for the next run:
        // the model must see it now, while the task is in the kernel.
        let queued: Vec<ProcessEvent> = guest.emu.queued_process_events().cloned().collect();
        for event in queued {
            match event {
                // copy_process(): the child starts with no deferred state
                // (unwind_task_init) and an empty SFrame table; its first
                // run is a return from the call.
                ProcessEvent::Fork { parent, child } => {
                    let task = self.k.fork(tid, guest.cpu);
                    guest.tasks.insert(child, task);
                    // The child has its parent's objects (no events say so).
                    guest.forks.push(crate::symbolise::Fork { at: guest.emu.events().len(), parent, child });
                }
                // clone(CLONE_THREAD): the thread shares the mm and gets
                // the next CPU round robin (the first thread has the guest's).
                ProcessEvent::Thread { tid: thread, .. } => {
                    let cpu = (guest.cpu + guest.threads_made.len()) % self.scenario.machine.cpus;
                    let task = self.k.clone_thread(tid, cpu);
                    guest.tasks.insert(thread, task);
                    guest.thread_cpus.insert(task, cpu);
                    guest.threads_made.push(thread);
                }
                // de_thread() first if it has siblings (they go through
                // their exits now; their ThreadExit events, queued before
                // this one, need nothing more). Then the new image's mm
                // with its section, and its registers: what a pending
                // request walks on the way out.
                ProcessEvent::Exec { pid, tid: old, ref path } => {
                    let comm = crate::guest::comm_of(path);
                    guest.comms.push((tid, self.k.time(), guest.cpu_of(tid), comm));
                    if !self.k.threads_of(tid).is_empty() {
                        // The siblings' exits (and any pending unwind of
                        // theirs) read the old image, as the kernel's still
                        // has the old mm in de_thread().
                        let (k, user_regs) = (&mut self.k, &guest.killed_regs);
                        let killed = guest
                            .emu
                            .pre_exec_memory(|mem| k.de_thread(tid, user_regs, mem))
                            .expect("the emulator keeps the old image at execve's stop");
                        guest.forget_killed(&killed);
                    }
                    let mm = crate::guest::image_mm(&mut self.k, &mut guest.emu, self.scenario);
                    self.k.exec(tid, mm, regs.clone());
                    // The caller has the leader's ID already (see above).
                    debug_assert!(guest.tasks[&pid] == tid && guest.tasks[&old] == tid);
                    guest.loader.skip_to(guest.emu.events(), pid);
                }
                _ => {}
            }
        }
        // The guest's own call to a registration interface: the model
        // answers it (it still runs in the kernel, in that call). Upstream
        // has no such interface: the emulator's EINVAL or ENOSYS stands.
        if self.scenario.kernel.profile.has_sframe() {
            let guest = &mut self.guests[g];
            crate::loader::model_call(&mut self.k, tid, &mut guest.emu, record)
                .map_err(|e| RunError::guest(&guest.name, e))?;
        }
        // munmap: in the series v13 the table keeps its entries; the lab's
        // MunmapSframe::Remove variant drops those it unmaps.
        if name == "munmap" && record.ret == 0 {
            if let Some(mm) = self.k.task(tid).mm {
                let [start, len, ..] = record.args;
                self.k.unmap(mm, start, start.saturating_add(len));
            }
        }
        let how = self.scenario.kernel.registration;
        if how.has_loader() && self.k.task(tid).mm.is_some() {
            let guest = &mut self.guests[g];
            let unregisters = self.scenario.kernel.loader_unregisters;
            guest.loader.after_syscall(&mut self.k, tid, how, unregisters, &mut guest.emu);
        }
        let guest = &mut self.guests[g];
        let events = guest.emu.events().len();
        if guest.clock.last().is_none_or(|&(at, ..)| at < events) {
            guest.clock.push((events, self.k.time(), guest.cpu_of(tid)));
        }
        let mem = self.guests[g].emu.user_memory();
        self.k.return_to_user(tid, &mem);
        Ok(())
    }
}
