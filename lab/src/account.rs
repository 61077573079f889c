//! The text account of a run ([`Report::account`]): what `unwindlab run`
//! prints and the scenario snapshots keep.

use crate::report::Report;

impl Report {
    /// A readable account of a run.
    pub fn account(&self) -> String {
        let r = self;
        let s = &r.summary;
        let mut out = format!("scenario {}: {}\n", r.scenario.name, r.scenario.description);
        let k = &r.scenario.kernel;
        out += &format!(
            "  machine: {}, {} CPU(s); kernel profile {}: deferred.c {}, exit path {}\n",
            r.scenario.machine.arch, r.scenario.machine.cpus, r.profile, k.version, k.exit_path
        );
        out += &format!("  {}\n", r.parts);
        if !k.implementation.is_model() {
            // Which code ran deferred.c (and, FP on x86-64, user.c).
            let tree =
                k.kernel_tree.as_ref().map_or("the tree 'make deps' fetched".into(), |t| t.display().to_string());
            out += &format!("  kernel code: the kernel's own kernel/unwind/ C ({tree}), not the model\n");
        }
        for g in &r.guests {
            out += &format!(
                "  guest {}: {} instructions, {}\n",
                g.name,
                g.instructions,
                match g.exit {
                    Some(code) => format!("exited with {code}"),
                    None => "still in the kernel at the end".into(),
                }
            );
        }
        out += &format!(
            "  samples: {} taken, {} judged: {} exact, {} truncated, {} wrong, {} lost\n",
            s.samples, s.judged, s.exact, s.truncated, s.wrong, s.lost
        );
        for (why, n) in &s.lost_reasons {
            out += &format!("    lost {n}: {why}\n");
        }
        if !r.failures.is_empty() {
            let n = r.failures.len();
            let groups = if n == 1 { "1 group".to_string() } else { format!("{n} groups, worst first") };
            out += &format!("    why not exact, by function and cause ({groups}):\n");
            out += &crate::explanation::listed(&r.failures, "      ");
        }
        if s.unstitched > 0 {
            out += &format!(
                "    never stitched: {} deferred samples (perf script prints each with its cookie as the last frame)\n",
                s.unstitched
            );
        }
        out += &format!(
            "  kernel: {} requests queued, {} joined a pending unwind, {} refused; {} unwinds in task context ({} page faults)\n",
            s.requests[0], s.requests[1], s.requests[2], s.unwinds, s.task_faults
        );
        out += &format!("  in-NMI walks that would have needed a page fault: {}\n", s.nmi_would_fault);
        out += &format!(
            "  perf buffers: {} bytes written (copying 8 KiB of stack per sample: {} bytes)\n",
            s.bytes_written, s.bytes_copy_baseline
        );
        if let Some(err) = s.perf_init_error {
            out += &format!(
                "  perf registered late: unwind_deferred_init() returned {}; {} samples of its deferred sessions fell back to the in-NMI walk\n",
                kmodel::types::errno_name(err),
                s.perf_unregistered_samples
            );
        }
        for (tracer, n) in &s.callbacks {
            out += &format!("  callbacks to {tracer}: {n}\n");
        }
        if s.violations > 0 {
            out += &format!("  INVARIANT VIOLATIONS: {}\n", s.violations);
            for v in &r.violations {
                out += &format!("{v}\n");
            }
        }
        for f in &r.expectation_failures {
            out += &format!("  EXPECTATION FAILED: {f}\n");
        }
        out
    }
}
