// Reading a perf.data file back with `linux-perf-data`, an independent
// reader, in the writer's terms: shared by perfdata/tests/read_back.rs and
// tests/perf_data_roundtrip/mod.rs (`include!`d, so it is part of each test
// crate's root; see read_back.rs for where that reader stops).

use std::io::Cursor;

use byteorder::{BigEndian, LittleEndian};
use linux_perf_data::linux_perf_event_reader::{
    AttrFlags, ClockId, CommonData, CpuMode, Endianness, EventRecord, HardwareEventId, Mmap2FileId, PerfClock,
    PerfEventAttr, PerfEventType, RawEventRecord, RecordParseInfo, RecordType, SamplingPolicy, WakeupPolicy,
};
use linux_perf_data::{DsoKey, Feature, PerfFileReader, PerfFileRecord};
use perfdata::{Attr, BuildId, Endian, Event, Features, FileIdentity, PerfData, Record, SampleId};

// The ABI numbers, spelled out here rather than taken from the writer.
const CONTEXT_KERNEL: u64 = (-128i64) as u64;
const CONTEXT_USER: u64 = (-512i64) as u64;
const CONTEXT_USER_DEFERRED: u64 = (-640i64) as u64;
const RECORD_CALLCHAIN_DEFERRED: u32 = 22;
const RECORD_FINISHED_INIT: u32 = 82;
const MISC_KERNEL: u16 = 1;
const MISC_USER: u16 = 2;
const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// `IDENTIFIER | IP | TID | TIME | CPU | PERIOD | CALLCHAIN`.
const SAMPLE_TYPE: u64 = (1 << 16) | 1 | (1 << 1) | (1 << 2) | (1 << 7) | (1 << 8) | (1 << 5);
/// `struct sample_id` for that sample type: `{u32 pid, tid}`, `{u64 time}`,
/// `{u32 cpu, res}`, `{u64 identifier}` (the kernel's `id_header_size`).
const TRAILER: usize = 32;

// ---------------------------------------------------------------------------
// Reading a file back.

/// What a file holds, in the writer's terms: what the reader read back, or
/// what was written ([`expected`]).
#[derive(Debug, PartialEq, Eq)]
struct Contents {
    endian: Endian,
    events: Vec<Event>,
    /// Sorted (by their `Debug` text): the reader reorders records.
    records: Vec<Record>,
    features: Features,
    /// The header's feature bits.
    feature_bits: Vec<u32>,
    /// `HEADER_SAMPLE_TIME`.
    sample_time: Option<(u64, u64)>,
}

/// A file read back: its contents, and its records in the reader's order.
#[derive(Debug)]
struct ReadBack {
    contents: Contents,
    in_order: Vec<Record>,
}

fn u32_at(b: &[u8], at: usize, endian: Endian) -> u32 {
    let bytes: [u8; 4] = b[at..at + 4].try_into().unwrap();
    match endian {
        Endian::Little => u32::from_le_bytes(bytes),
        Endian::Big => u32::from_be_bytes(bytes),
    }
}

fn u64_at(b: &[u8], at: usize, endian: Endian) -> u64 {
    let bytes: [u8; 8] = b[at..at + 8].try_into().unwrap();
    match endian {
        Endian::Little => u64::from_le_bytes(bytes),
        Endian::Big => u64::from_be_bytes(bytes),
    }
}

/// The attribute flags word at `word`, bit n being the n-th member of the
/// C bitfield, as perf reads it: in a big-endian file each byte's bits are
/// reversed first (`swap_bitfield()`), the bytes staying where they are.
fn perf_flags(word: &[u8], endian: Endian) -> u64 {
    let mut bytes: [u8; 8] = word.try_into().unwrap();
    if endian == Endian::Big {
        for b in &mut bytes {
            *b = b.reverse_bits();
        }
    }
    u64::from_le_bytes(bytes)
}

/// Offset of the flags word in `struct perf_event_attr`.
const FLAGS_AT: usize = 40;

/// The raw flags of each event of `HEADER_EVENT_DESC` (`u32 nr, u32
/// attr_size`, then per event the attribute, `u32 nr_ids`, the name as a
/// header string, the IDs).
fn event_desc_flags(section: &[u8], endian: Endian) -> Vec<u64> {
    let nr = u32_at(section, 0, endian) as usize;
    let attr_size = u32_at(section, 4, endian) as usize;
    assert_eq!(attr_size, 144, "EVENT_DESC attr_size");
    let mut at = 8;
    let mut flags = Vec::new();
    for _ in 0..nr {
        flags.push(perf_flags(&section[at + FLAGS_AT..at + FLAGS_AT + 8], endian));
        at += attr_size;
        let nr_ids = u32_at(section, at, endian) as usize;
        let len = u32_at(section, at + 4, endian) as usize;
        assert_eq!(len % 64, 0, "a header string is padded to 64 bytes");
        at += 8 + len + 8 * nr_ids;
    }
    assert_eq!(at, section.len(), "EVENT_DESC has nothing after its events");
    flags
}

/// The header's attribute section (`struct perf_file_attr`: the attribute,
/// then the section of its IDs), each attribute parsed by the reader's
/// attribute parser: (attribute, raw flags, IDs).
fn attr_section(bytes: &[u8], endian: Endian) -> Vec<(PerfEventAttr, u64, Vec<u64>)> {
    let attr_size = u64_at(bytes, 16, endian) as usize;
    let offset = u64_at(bytes, 24, endian) as usize;
    let size = u64_at(bytes, 32, endian) as usize;
    assert_eq!(attr_size, 144 + 16, "attr_size");
    assert_eq!(size % attr_size, 0, "attribute section size");
    (0..size / attr_size)
        .map(|i| {
            let at = offset + i * attr_size;
            let (attr, len) = match endian {
                Endian::Little => PerfEventAttr::parse::<_, LittleEndian>(&bytes[at..]),
                Endian::Big => PerfEventAttr::parse::<_, BigEndian>(&bytes[at..]),
            }
            .expect("the reader parses the attribute");
            assert_eq!(len, 144, "attr.size");
            let flags = perf_flags(&bytes[at + FLAGS_AT..at + FLAGS_AT + 8], endian);
            let ids_at = u64_at(bytes, at + 144, endian) as usize;
            let ids_size = u64_at(bytes, at + 152, endian) as usize;
            assert_eq!(ids_size % 8, 0);
            let ids = (0..ids_size / 8).map(|k| u64_at(bytes, ids_at + 8 * k, endian)).collect();
            (attr, flags, ids)
        })
        .collect()
}

/// `attr` in the writer's terms, with `flags` (the raw flags: the reader
/// keeps only those it names). The fields the writer leaves zero must be.
fn attr_of(a: &PerfEventAttr, flags: u64) -> Attr {
    let (kind, config) = match a.type_ {
        PerfEventType::Hardware(id, pmu) => {
            let id = match id {
                HardwareEventId::CpuCycles => 0,
                HardwareEventId::Instructions => 1,
                other => panic!("unexpected hardware event {other:?}"),
            };
            (0, id | (u64::from(pmu.0) << 32))
        }
        // A uprobe tracer's event: the uprobe PMU's type, config 0 (an
        // entry probe) and no path or offset (`config1`, `config2`).
        PerfEventType::DynamicPmu(kind, config, 0, 0) if kind == perfdata::TYPE_UPROBE_PMU => (kind, config),
        other => panic!("unexpected event type {other:?}"),
    };
    let sample_period = match a.sampling_policy {
        SamplingPolicy::NoSampling => 0,
        SamplingPolicy::Period(p) => p.get(),
        SamplingPolicy::Frequency(f) => f,
    };
    let wakeup_events = match a.wakeup_policy {
        WakeupPolicy::EventCount(n) | WakeupPolicy::Watermark(n) => n,
    };
    assert!(a.read_format.is_empty(), "read_format");
    assert!(a.branch_sample_format.is_empty(), "branch_sample_type");
    assert_eq!(
        (a.sample_regs_user, a.sample_stack_user, a.sample_regs_intr, a.aux_watermark, a.aux_sample_size, a.sig_data),
        (0, 0, 0, 0, 0, 0)
    );
    Attr {
        kind,
        config,
        sample_period,
        sample_type: a.sample_format.bits(),
        flags,
        wakeup_events,
        sample_max_stack: a.sample_max_stack,
    }
}

/// A record's `sample_id` as the reader's trailer parser reads it.
fn sample_id(c: &CommonData) -> SampleId {
    assert_eq!(c.stream_id, None);
    SampleId {
        pid: c.pid.expect("pid") as u32,
        tid: c.tid.expect("tid") as u32,
        time: c.timestamp.expect("time"),
        cpu: c.cpu.expect("cpu"),
        id: c.id.expect("identifier"),
    }
}

fn align8(n: usize) -> usize {
    n.next_multiple_of(8)
}

/// One record of the data section in the writer's terms, checking its
/// `misc`, its size (from the ABI's layouts, not the writer's) and that the
/// fields a record has twice (body and trailer) agree.
fn record_of(r: &RawEventRecord, endian: Endian) -> Record {
    let size = 8 + r.data.len();
    let parsed = r.parse().expect("the reader parses the record");
    let trailer = || sample_id(&r.common_data().expect("the reader parses the trailer"));
    let record = match parsed {
        EventRecord::Sample(s) => {
            assert!(r.misc == MISC_KERNEL || r.misc == MISC_USER, "sample misc {:#x}", r.misc);
            let kernel = r.misc == MISC_KERNEL;
            assert_eq!(s.cpu_mode, if kernel { CpuMode::Kernel } else { CpuMode::User });
            assert!(s.addr.is_none() && s.stream_id.is_none() && s.raw.is_none());
            assert!(s.user_regs.is_none() && s.user_stack.is_none() && s.intr_regs.is_none());
            assert!(s.phys_addr.is_none() && s.data_page_size.is_none() && s.code_page_size.is_none());
            let chain = s.callchain.expect("callchain");
            let callchain: Vec<u64> = (0..chain.len()).map(|i| chain.get(i).unwrap()).collect();
            assert_eq!(size, 8 + 6 * 8 + 8 + 8 * callchain.len(), "sample size");
            let id = SampleId {
                pid: s.pid.expect("pid") as u32,
                tid: s.tid.expect("tid") as u32,
                time: s.timestamp.expect("time"),
                cpu: s.cpu.expect("cpu"),
                id: s.id.expect("identifier"),
            };
            assert_eq!(trailer(), id, "the reader's common data of a sample");
            Record::Sample { id, ip: s.ip.expect("ip"), kernel, period: s.period.expect("period"), callchain }
        }
        EventRecord::Raw(raw) if raw.record_type == RecordType(RECORD_CALLCHAIN_DEFERRED) => {
            assert_eq!(r.misc, MISC_USER, "CALLCHAIN_DEFERRED misc");
            // struct { header; u64 cookie; u64 nr; u64 ips[nr]; struct sample_id; }
            let b = r.data.as_slice();
            let cookie = u64_at(&b, 0, endian);
            let nr = u64_at(&b, 8, endian) as usize;
            assert_eq!(b.len(), 16 + 8 * nr + TRAILER, "CALLCHAIN_DEFERRED size for nr = {nr}");
            let ips = (0..nr).map(|i| u64_at(&b, 16 + 8 * i, endian)).collect();
            let t = 16 + 8 * nr;
            let id = SampleId {
                pid: u32_at(&b, t, endian),
                tid: u32_at(&b, t + 4, endian),
                time: u64_at(&b, t + 8, endian),
                cpu: u32_at(&b, t + 16, endian),
                id: u64_at(&b, t + 24, endian),
            };
            assert_eq!(u32_at(&b, t + 20, endian), 0, "sample_id res");
            assert_eq!(trailer(), id, "the reader's trailer of a deferred record");
            Record::CallchainDeferred { id, cookie, ips }
        }
        EventRecord::Comm(c) => {
            assert_eq!(r.misc, if c.is_execve { MISC_COMM_EXEC } else { 0 }, "COMM misc");
            let id = trailer();
            assert_eq!((c.pid as u32, c.tid as u32), (id.pid, id.tid), "COMM pid/tid");
            let comm = c.name.as_slice().to_vec();
            assert_eq!(size, 8 + 8 + align8(comm.len() + 1) + TRAILER, "COMM size");
            Record::Comm { id, comm, exec: c.is_execve }
        }
        EventRecord::Fork(f) | EventRecord::Exit(f) => {
            assert_eq!(r.misc, 0, "FORK/EXIT misc");
            let id = trailer();
            assert_eq!((f.pid as u32, f.tid as u32, f.timestamp), (id.pid, id.tid, id.time), "FORK/EXIT task");
            assert_eq!(size, 8 + 24 + TRAILER, "FORK/EXIT size");
            let (ppid, ptid) = (f.ppid as u32, f.ptid as u32);
            if r.record_type == RecordType::FORK {
                Record::Fork { id, ppid, ptid }
            } else {
                Record::Exit { id, ppid, ptid }
            }
        }
        EventRecord::Mmap2(m) => {
            let build_id = matches!(m.file_id, Mmap2FileId::BuildId(_));
            assert_eq!(r.misc, MISC_USER | if build_id { MISC_MMAP_BUILD_ID } else { 0 }, "MMAP2 misc");
            assert_eq!(m.cpu_mode, CpuMode::User);
            let id = trailer();
            assert_eq!((m.pid as u32, m.tid as u32), (id.pid, id.tid), "MMAP2 pid/tid");
            let file = match m.file_id {
                Mmap2FileId::BuildId(b) => FileIdentity::BuildId(b),
                Mmap2FileId::InodeAndVersion(v) => {
                    assert_eq!(v.inode_generation, 0);
                    FileIdentity::Inode { maj: v.major, min: v.minor, ino: v.inode }
                }
            };
            let filename = m.path.as_slice().to_vec();
            assert_eq!(size, 8 + 8 + 24 + 24 + 8 + align8(filename.len() + 1) + TRAILER, "MMAP2 size");
            Record::Mmap2 {
                id,
                addr: m.address,
                len: m.length,
                pgoff: m.page_offset,
                file,
                prot: m.protection,
                flags: m.flags,
                filename,
            }
        }
        EventRecord::Mmap(m) => {
            assert_eq!(r.misc, MISC_KERNEL, "MMAP misc");
            assert_eq!((m.pid, m.tid, m.cpu_mode, m.is_executable), (-1, 0, CpuMode::Kernel, true));
            let filename = m.path.as_slice().to_vec();
            assert_eq!(size, 8 + 8 + 24 + align8(filename.len() + 1) + TRAILER, "MMAP size");
            Record::KernelMmap { id: trailer(), addr: m.address, len: m.length, pgoff: m.page_offset, filename }
        }
        EventRecord::Lost(l) => {
            assert_eq!(r.misc, 0, "LOST misc");
            let id = trailer();
            assert_eq!(l.id, id.id, "LOST id");
            assert_eq!(size, 8 + 16 + TRAILER, "LOST size");
            Record::Lost { id, lost: l.count }
        }
        other => panic!("a record the writer does not write: {other:?}"),
    };
    assert_eq!(record.size(), size, "Record::size() of {record:?}");
    record
}

/// Parses `bytes` with the reader and turns what it read into [`Contents`].
fn read_back(bytes: &[u8]) -> ReadBack {
    let PerfFileReader { mut perf_file, mut record_iter } =
        PerfFileReader::parse_file(Cursor::new(bytes)).expect("the reader opens the file");
    let endian = match perf_file.endian() {
        Endianness::LittleEndian => Endian::Little,
        Endianness::BigEndian => Endian::Big,
    };
    // The events: EVENT_DESC as the reader parsed it, its flags raw.
    let desc = perf_file.feature_section_data(Feature::EVENT_DESC).expect("EVENT_DESC");
    let flags = event_desc_flags(desc, endian);
    let attributes = perf_file.event_attributes();
    assert_eq!(attributes.len(), flags.len());
    let mut events = Vec::new();
    let mut parse_infos = Vec::new();
    for (a, &raw) in attributes.iter().zip(&flags) {
        let named = AttrFlags::from_bits_truncate(raw);
        // The reader's flags: what it names of the raw flags; in a
        // big-endian file, the bits it reads without swap_bitfield().
        // (Its bits reversed: bit n of the bitfield is bit 63 - n of the
        // big-endian u64.)
        let misread = AttrFlags::from_bits_truncate(raw.reverse_bits());
        match endian {
            Endian::Little => assert_eq!(a.attr.flags, named, "the reader's attribute flags"),
            Endian::Big => assert!(
                a.attr.flags == named || a.attr.flags == misread,
                "the reader's attribute flags {:?}: neither {named:?} nor (big-endian bitfield not swapped) {misread:?}",
                a.attr.flags
            ),
        }
        if endian == Endian::Little {
            // clockid is written 0: CLOCK_REALTIME with use_clockid.
            let clock = if named.contains(AttrFlags::USE_CLOCKID) {
                matches!(a.attr.clock, PerfClock::ClockId(ClockId::Realtime))
            } else {
                matches!(a.attr.clock, PerfClock::Default)
            };
            assert!(clock, "clock {:?}", a.attr.clock);
        }
        events.push(Event {
            name: a.name().expect("event name").to_string(),
            attr: attr_of(&a.attr, raw),
            ids: a.ids().to_vec(),
        });
        let mut fixed = a.attr;
        fixed.flags = named;
        parse_infos.push(RecordParseInfo::new(&fixed, perf_file.endian()));
    }
    // The attribute section agrees with EVENT_DESC (perf takes attributes
    // and IDs from it, the names from EVENT_DESC).
    let section = attr_section(bytes, endian);
    assert_eq!(section.len(), events.len(), "attributes in the attribute section");
    for ((attr, raw, ids), e) in section.iter().zip(&events) {
        assert_eq!(attr_of(attr, *raw), e.attr, "the attribute section's attribute");
        assert_eq!(ids, &e.ids, "the attribute section's IDs");
    }
    // The header features.
    let feature_bits = perf_file.features().iter().map(|f| f.0).collect();
    let string = |s: Result<Option<&str>, linux_perf_data::Error>, what: &str| {
        s.unwrap_or_else(|e| panic!("{what}: {e}")).unwrap_or_else(|| panic!("no {what}")).to_string()
    };
    let nr_cpus = perf_file.nr_cpus().expect("NRCPUS").expect("NRCPUS");
    let mut build_ids: Vec<BuildId> = perf_file
        .build_ids()
        .expect("BUILD_ID")
        .into_iter()
        .map(|(key, info)| BuildId {
            kernel: matches!(key, DsoKey::Kernel | DsoKey::GuestKernel | DsoKey::KernelModule { .. }),
            build_id: info.build_id,
            filename: info.path,
        })
        .collect();
    build_ids.sort_by(|a, b| (&a.filename, a.kernel).cmp(&(&b.filename, b.kernel)));
    let features = Features {
        hostname: string(perf_file.hostname(), "hostname"),
        osrelease: string(perf_file.os_release(), "osrelease"),
        version: string(perf_file.perf_version(), "version"),
        arch: string(perf_file.arch(), "arch"),
        nr_cpus: (nr_cpus.nr_cpus_available, nr_cpus.nr_cpus_online),
        cpu_desc: string(perf_file.cpu_desc(), "cpu_desc"),
        total_mem_kb: perf_file.total_mem().expect("TOTAL_MEM").expect("TOTAL_MEM"),
        cmdline: perf_file.cmdline().expect("CMDLINE").expect("CMDLINE").into_iter().map(String::from).collect(),
        build_ids,
    };
    let sample_time =
        perf_file.sample_time_range().expect("SAMPLE_TIME").map(|t| (t.first_sample_time, t.last_sample_time));
    // The records.
    let mut in_order = Vec::new();
    while let Some(record) = record_iter.next_record(&mut perf_file).expect("the reader reads the next record") {
        match record {
            PerfFileRecord::EventRecord { attr_index, record } => {
                let fixed = parse_infos[0];
                if endian == Endian::Little {
                    assert_eq!(record.parse_info, parse_infos[attr_index], "the reader's parse info");
                }
                let r = record_of(&RawEventRecord::new(record.record_type, record.misc, record.data, fixed), endian);
                let id = match &r {
                    Record::Sample { id, .. }
                    | Record::CallchainDeferred { id, .. }
                    | Record::Comm { id, .. }
                    | Record::Fork { id, .. }
                    | Record::Exit { id, .. }
                    | Record::Mmap2 { id, .. }
                    | Record::KernelMmap { id, .. }
                    | Record::Lost { id, .. } => id.id,
                    Record::FinishedRound | Record::FinishedInit => unreachable!(),
                };
                let owner = events.iter().position(|e| e.ids.contains(&id)).unwrap_or(0);
                // In a big-endian file with several events, the reader
                // cannot find a non-sample record's ID (it reads no
                // sample_id_all) and gives the first event.
                let blind = endian == Endian::Big && events.len() > 1 && !matches!(r, Record::Sample { .. });
                assert!(
                    attr_index == owner || (blind && attr_index == 0),
                    "the reader's event {attr_index} for {r:?}, of event {owner}"
                );
                in_order.push(r);
            }
            PerfFileRecord::UserRecord(u) => {
                let kind = u.record_type.record_type().0;
                assert_eq!(kind, RECORD_FINISHED_INIT, "a user record the writer does not write: {kind}");
                assert_eq!((u.misc, u.data.len()), (0, 0), "FINISHED_INIT");
                in_order.push(Record::FinishedInit);
            }
        }
    }
    let mut records = in_order.clone();
    records.sort_by_cached_key(|r| format!("{r:?}"));
    ReadBack { contents: Contents { endian, events, records, features, feature_bits, sample_time }, in_order }
}

/// What reading `data` back must give: FINISHED_ROUND is the reader's, a
/// COMM keeps 15 bytes (`TASK_COMM_LEN`), a build-id 20.
fn expected(data: &PerfData) -> Contents {
    let mut records: Vec<Record> = data
        .records
        .iter()
        .filter(|r| !matches!(r, Record::FinishedRound))
        .map(|r| match r {
            Record::Comm { id, comm, exec } => {
                Record::Comm { id: *id, comm: comm[..comm.len().min(15)].to_vec(), exec: *exec }
            }
            Record::Mmap2 { id, addr, len, pgoff, file: FileIdentity::BuildId(b), prot, flags, filename } => {
                Record::Mmap2 {
                    id: *id,
                    addr: *addr,
                    len: *len,
                    pgoff: *pgoff,
                    file: FileIdentity::BuildId(b[..b.len().min(20)].to_vec()),
                    prot: *prot,
                    flags: *flags,
                    filename: filename.clone(),
                }
            }
            r => r.clone(),
        })
        .collect();
    records.sort_by_cached_key(|r| format!("{r:?}"));
    let mut features = data.features.clone();
    for b in &mut features.build_ids {
        b.build_id.truncate(20);
    }
    features.build_ids.sort_by(|a, b| (&a.filename, a.kernel).cmp(&(&b.filename, b.kernel)));
    let times = data.records.iter().filter_map(|r| match r {
        Record::Sample { id, .. } => Some(id.time),
        _ => None,
    });
    let sample_time = times.fold(None, |range, t| match range {
        None => Some((t, t)),
        Some((lo, hi)) => Some((t.min(lo), t.max(hi))),
    });
    // HOSTNAME, OSRELEASE, VERSION, ARCH, NRCPUS, CPUDESC, TOTAL_MEM,
    // CMDLINE, EVENT_DESC; BUILD_ID with build-ids, SAMPLE_TIME with samples.
    let mut feature_bits = vec![3, 4, 5, 6, 7, 8, 10, 11, 12];
    if !data.features.build_ids.is_empty() {
        feature_bits.insert(0, 2);
    }
    if sample_time.is_some() {
        feature_bits.push(21);
    }
    Contents { endian: data.endian, events: data.events.clone(), records, features, feature_bits, sample_time }
}

/// Writes `data`, reads it back and compares everything; returns the read.
fn round_trip(data: &PerfData) -> ReadBack {
    let bytes = data.to_bytes().expect("the writer writes the file");
    let back = read_back(&bytes);
    let (got, want) = (&back.contents, expected(data));
    assert_eq!(got.endian, want.endian, "endianness");
    assert_eq!(got.events, want.events, "events");
    assert_eq!(got.features, want.features, "features");
    assert_eq!(got.feature_bits, want.feature_bits, "feature bits");
    assert_eq!(got.sample_time, want.sample_time, "sample time");
    assert_eq!(got.records.len(), want.records.len(), "record count");
    for (g, w) in got.records.iter().zip(&want.records) {
        assert_eq!(g, w, "a record");
    }
    assert_eq!(got, &want);
    back
}

