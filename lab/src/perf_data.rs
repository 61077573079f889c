//! The `perf.data` of a run: what a Linux 7.x kernel and `perf record
//! --call-graph fp,defer -a` would have written for it, one file per perf
//! session, for perf 7.x itself (`perf script`, `perf report`) and the
//! tools that read perf's files.
//!
//! [`capture`] keeps, when the run ends, what the file is made of: each
//! session's ring-buffer records, and the side-band records perf needs to
//! name frames (COMM at start and exec, FORK, EXIT from the kernel model's
//! events, MMAP2 for every executable segment of every object the
//! emulator mapped, timed by the system call that mapped it). [`file`]
//! lays it out with the [`perfdata`] writer; [`write`] writes the files
//! atomically (a temporary file renamed, so a failed write never leaves a
//! truncated file that looks complete).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kmodel::arch::Arch;
use kmodel::event::EventKind;
use kmodel::tracer::{read_order, PerfEvent, PerfRecord, PerfScope, UserChain, UserStackMode};
use kmodel::types::Tid;
use perfdata::{flag, Attr, BuildId, Endian, Event, Features, FileIdentity, PerfData, Record, SampleId};

use crate::perf_capture::{CapturedSession, PerfCapture, Sideband};
use crate::report::Report;

/// The kernel text mapping perf record synthesizes, which the model's
/// kernel callchain addresses fall in.
const KERNEL_TEXT: (u64, u64) = (0xffff_ffff_8100_0000, 0x0100_0000);
/// The model kernel's build-id: not the host's, so perf does not name the
/// model's kernel addresses with the host's `/proc/kallsyms`.
const KERNEL_BUILD_ID: [u8; 20] = *b"unwindlab-kmodel-7.3";
/// IDs of a session's event: one per CPU, as `perf record -a` opens it.
const ID_BASE: u64 = 100;
/// A FINISHED_ROUND after at least this many records (at a change of time).
const ROUND: usize = 4096;

/// Where on the host the file a guest mapped at guest path `path` is: its
/// program (`/guests/NAME` to the guest) is the scenario's file, another
/// file is in its root. MMAP2 records name these, so that perf finds the
/// files (and their functions) where they are, for every architecture,
/// without `--symfs`; a file in no root keeps its guest path.
fn host_path(g: &crate::scenario::Guest, exe: &[u8], path: &[u8]) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt as _;
    let host = if path == exe {
        g.path.clone()
    } else if let Some(root) = &g.root {
        root.join(std::ffi::OsStr::from_bytes(path.strip_prefix(b"/").unwrap_or(path)))
    } else {
        return path.to_vec();
    };
    let host = std::fs::canonicalize(&host).unwrap_or(host);
    host.as_os_str().as_bytes().to_vec()
}

/// Gathers what the perf.data files of a finished run need.
pub(crate) fn capture(run: &crate::schedule::Run<'_>) -> PerfCapture {
    let k = &run.k;
    let mut out = PerfCapture::default();
    for session in &k.tracers().perf {
        let period = run
            .scenario
            .tracers
            .iter()
            .filter_map(|t| match t {
                crate::scenario::Tracer::Perf { name, period, .. } if **name == *session.name => Some(*period),
                _ => None,
            })
            .next()
            .unwrap_or(1);
        out.sessions.push(CapturedSession {
            name: session.name.to_string(),
            mode: session.mode,
            scope: session.scope,
            event: session.event.clone(),
            period,
            records: read_order(&session.buffers).into_iter().map(|(cpu, r)| (cpu, r.clone())).collect(),
        });
    }
    // The user-visible pid and tid of a model task (its thread ID as it is
    // at the end: only a non-leader's exec changes it).
    let ids = |t: Tid| (k.task(t).tgid, k.task(t).pid);
    let mut parents: BTreeMap<Tid, Tid> = BTreeMap::new();
    for e in k.events() {
        let Some(tid) = e.tid else { continue };
        let (pid, t) = ids(tid);
        match &e.kind {
            EventKind::TaskNew { parent: Some(parent), .. } => {
                parents.insert(tid, *parent);
                let (ppid, ptid) = ids(*parent);
                out.sideband.push((e.time, e.cpu, pid, tid, Sideband::Fork { ppid, ptid }));
            }
            EventKind::Dead => {
                let (ppid, ptid) = parents.get(&tid).map_or((0, 0), |&p| ids(p));
                out.sideband.push((e.time, e.cpu, pid, t, Sideband::Exit { ppid, ptid }));
            }
            _ => {}
        }
    }
    for (g, guest) in run.scenario.guests.iter().zip(&run.guests) {
        for (i, &(tid, time, cpu, ref comm)) in guest.comms.iter().enumerate() {
            let (pid, t) = ids(tid);
            out.sideband.push((time, cpu, pid, t, Sideband::Comm { comm: comm.clone(), exec: i > 0 }));
        }
        for (i, e) in guest.emu.events().iter().enumerate() {
            let emu::Event::ObjectMapped { pid, object, .. } = e else { continue };
            let Some(&task) = guest.tasks.get(pid) else { continue };
            // The system call that added this event (the first load: 0).
            let at = guest.clock.partition_point(|&(len, ..)| len <= i);
            let (time, cpu) = guest.clock.get(at).map_or((k.time(), guest.cpu), |&(_, time, cpu)| (time, cpu));
            let (pid, _) = ids(task);
            let file = &object.file;
            let Some(elf) = &file.elf else { continue };
            let path = host_path(g, &guest.exe, &file.path);
            let identity = match &elf.build_id {
                Some(id) => {
                    out.build_ids.insert(path.clone(), id.clone());
                    FileIdentity::BuildId(id.clone())
                }
                None => {
                    FileIdentity::Inode { maj: (file.dev >> 8) as u32, min: (file.dev & 0xff) as u32, ino: file.ino }
                }
            };
            for seg in elf.loads.iter().filter(|s| s.exec) {
                let start = seg.vaddr.wrapping_add(object.bias);
                let addr = start & !0xfff;
                let len = (start + seg.memsz).next_multiple_of(0x1000) - addr;
                let pgoff = seg.offset & !0xfff;
                let mmap = Sideband::Mmap { addr, len, pgoff, file: identity.clone(), path: path.clone() };
                out.sideband.push((time, cpu, pid, pid, mmap));
            }
        }
    }
    out.sideband.sort_by_key(|&(time, _, _, _, ref r)| (time, r.rank()));
    out
}

/// Why perf.data could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PerfDataError {
    /// The run had no perf session.
    #[error(
        "{scenario}: the run has no perf tracer, so there is no perf.data to write (add a tracer of kind \"perf\")"
    )]
    NoPerf {
        /// The scenario.
        scenario: String,
    },
    /// A session's records cannot be written as perf.data.
    #[error("{scenario}: perf tracer {tracer}: {problem}")]
    Session {
        /// The scenario.
        scenario: String,
        /// The tracer.
        tracer: String,
        /// What is wrong.
        problem: String,
    },
    /// The file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The perf.data of session `s` of `report`; `cmdline` is the command
/// that wrote it (`HEADER_CMDLINE`).
pub fn file(report: &Report, s: usize, cmdline: &[String]) -> Result<PerfData, PerfDataError> {
    let capture = &report.perf;
    let session = &capture.sessions[s];
    let scenario = &report.scenario;
    let arch = scenario.machine.arch;
    let cpus = scenario.machine.cpus;
    let problem = |problem: String| PerfDataError::Session {
        scenario: scenario.name.clone(),
        tracer: session.name.clone(),
        problem,
    };
    // `--no-inherit` clears `inherit`; perf record sets it otherwise.
    let inherit = if matches!(session.scope, PerfScope::Task(_)) { 0 } else { flag::INHERIT };
    let mut flags = flag::DISABLED
        | inherit
        | flag::MMAP
        | flag::COMM
        | flag::TASK
        | flag::SAMPLE_ID_ALL
        | flag::EXCLUDE_GUEST
        | flag::MMAP2
        | flag::COMM_EXEC
        | flag::BUILD_ID;
    match session.mode {
        UserStackMode::Deferred => flags |= flag::DEFER_CALLCHAIN | flag::DEFER_OUTPUT,
        UserStackMode::FpInNmi => {}
        UserStackMode::CopyStack { bytes } => {
            return Err(problem(format!(
                "its stack copies ({bytes} bytes per sample, `--call-graph dwarf`) are not written to perf.data: the \
                 lab keeps their unwound IPs, not the bytes"
            )))
        }
    }
    let (kind, config, name) = match &session.event {
        PerfEvent::Instructions => (perfdata::TYPE_HARDWARE, perfdata::COUNT_HW_INSTRUCTIONS, "instructions".into()),
        PerfEvent::Uprobe { function, .. } => (perfdata::TYPE_UPROBE_PMU, 0, format!("uprobe:{function}")),
    };
    let attr = Attr {
        kind,
        config,
        sample_period: session.period,
        sample_type: perfdata::SAMPLE_TYPE,
        flags,
        wakeup_events: 0,
        sample_max_stack: 127,
    };
    let id_of = |cpu: usize| ID_BASE + cpu as u64;
    let event = Event { name, attr, ids: (0..cpus).map(id_of).collect() };
    let sid = |time: u64, cpu: usize, pid: u32, tid: u32| SampleId { pid, tid, time, cpu: cpu as u32, id: id_of(cpu) };
    let mut records = vec![Record::KernelMmap {
        id: sid(0, 0, u32::MAX, 0),
        addr: KERNEL_TEXT.0,
        len: KERNEL_TEXT.1,
        pgoff: KERNEL_TEXT.0,
        filename: b"[kernel.kallsyms]_text".to_vec(),
    }];
    // Side-band and session records merged by time (side-band first, but
    // an exit after the session's records of that time).
    let mut side = capture.sideband.iter().peekable();
    let mut initial_done = false;
    let mut since_round = 0;
    let mut last_time = 0;
    let mut push = |records: &mut Vec<Record>, r: Record, time: u64| {
        if since_round >= ROUND && time != last_time {
            records.push(Record::FinishedRound);
            since_round = 0;
        }
        records.push(r);
        since_round += 1;
        last_time = time;
    };
    let side_record = |&(time, cpu, pid, tid, ref r): &(u64, usize, u32, u32, Sideband)| {
        let id = sid(time, cpu, pid, tid);
        match r {
            Sideband::Fork { ppid, ptid } => Record::Fork { id, ppid: *ppid, ptid: *ptid },
            Sideband::Exit { ppid, ptid } => Record::Exit { id, ppid: *ppid, ptid: *ptid },
            Sideband::Comm { comm, exec } => Record::Comm { id, comm: comm.clone(), exec: *exec },
            Sideband::Mmap { addr, len, pgoff, file, path } => Record::Mmap2 {
                id,
                addr: *addr,
                len: *len,
                pgoff: *pgoff,
                file: file.clone(),
                prot: 5,  // PROT_READ | PROT_EXEC
                flags: 2, // MAP_PRIVATE
                filename: path.clone(),
            },
        }
    };
    for (cpu, r) in &session.records {
        let time = r.time();
        while let Some(s) = side.next_if(|s| s.0 < time || (s.0 == time && s.4.rank() < 3)) {
            push(&mut records, side_record(s), s.0);
        }
        if !initial_done {
            // What perf record synthesized for the tasks that existed
            // when it started ends here.
            records.push(Record::FinishedInit);
            initial_done = true;
        }
        let record = match r {
            PerfRecord::Sample { time, tid, tgid, ip, kernel, user, .. } => {
                let mut callchain = Vec::new();
                if !kernel.is_empty() {
                    callchain.push(perfdata::CONTEXT_KERNEL);
                    callchain.extend_from_slice(kernel);
                }
                match user {
                    UserChain::Deferred { cookie } => {
                        callchain.extend_from_slice(&[perfdata::CONTEXT_USER_DEFERRED, cookie.id()])
                    }
                    UserChain::Ips(ips) => {
                        callchain.push(perfdata::CONTEXT_USER);
                        callchain.extend_from_slice(ips);
                    }
                    UserChain::Copied { .. } | UserChain::None => {}
                }
                Record::Sample {
                    id: sid(*time, *cpu, *tgid, *tid),
                    ip: *ip,
                    kernel: !kernel.is_empty(),
                    period: session.period,
                    callchain,
                }
            }
            PerfRecord::Deferred { time, tid, tgid, cookie, ips, .. } => {
                Record::CallchainDeferred { id: sid(*time, *cpu, *tgid, *tid), cookie: cookie.id(), ips: ips.clone() }
            }
        };
        push(&mut records, record, time);
    }
    for s in side {
        push(&mut records, side_record(s), s.0);
    }
    if !initial_done {
        records.push(Record::FinishedInit);
    }
    records.push(Record::FinishedRound);
    let mut build_ids: Vec<BuildId> = capture
        .build_ids
        .iter()
        .map(|(path, id)| BuildId { kernel: false, build_id: id.clone(), filename: path.clone() })
        .chain([BuildId { kernel: true, build_id: KERNEL_BUILD_ID.to_vec(), filename: b"[kernel.kallsyms]".to_vec() }])
        .collect();
    build_ids.sort_by(|a, b| a.filename.cmp(&b.filename));
    let features = Features {
        hostname: "unwindlab".into(),
        osrelease: format!("7.3-unwindlab-{}", scenario.kernel.implementation),
        version: concat!("unwindlab ", env!("CARGO_PKG_VERSION")).into(),
        arch: arch.name().into(),
        nr_cpus: (cpus as u32, cpus as u32),
        cpu_desc: format!("unwindlab emulated {arch} (Unicorn)"),
        total_mem_kb: 0,
        cmdline: cmdline.to_vec(),
        build_ids,
    };
    let endian = if arch == Arch::S390x { Endian::Big } else { Endian::Little };
    Ok(PerfData { endian, events: vec![event], records, features })
}

/// The files `--perf-data PATH` writes for `report`: PATH for its one perf
/// session; with several, one per session, `PATH.NAME`.
pub fn paths(report: &Report, path: &Path) -> Vec<PathBuf> {
    let sessions = &report.perf.sessions;
    if sessions.len() == 1 {
        return vec![path.to_path_buf()];
    }
    sessions
        .iter()
        .map(|s| {
            let mut p = path.as_os_str().to_owned();
            p.push(format!(".{}", s.name));
            PathBuf::from(p)
        })
        .collect()
}

/// Writes the perf.data files of `report` ([`paths`]), each atomically;
/// returns the paths written.
pub fn write(report: &Report, path: &Path, cmdline: &[String]) -> Result<Vec<PathBuf>, PerfDataError> {
    if report.perf.sessions.is_empty() {
        return Err(PerfDataError::NoPerf { scenario: report.scenario.name.clone() });
    }
    let paths = paths(report, path);
    let mut files = Vec::new();
    for (s, p) in paths.iter().enumerate() {
        let data = file(report, s, cmdline)?;
        let bytes = data.to_bytes().map_err(|e| PerfDataError::Session {
            scenario: report.scenario.name.clone(),
            tracer: report.perf.sessions[s].name.clone(),
            problem: e.to_string(),
        })?;
        files.push((p, bytes));
    }
    for (p, bytes) in &files {
        write_atomically(p, bytes).map_err(|source| PerfDataError::Io { path: p.display().to_string(), source })?;
    }
    Ok(paths)
}

/// Writes `bytes` to `path` through a temporary file in the same
/// directory, renamed over it when complete.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().ok_or_else(|| std::io::Error::other("not a file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
