//! Every file the writer makes, read back by a second, independent reader —
//! `linux-perf-data` 0.13 with `linux-perf-event-reader` 0.10 — and compared
//! with what was written, field by field: the endianness, the events (name,
//! IDs, every attribute field written), the header features and every
//! record. Hand-made files of each kind of record in both byte orders, then
//! seeded random ones.
//!
//! Where that reader stops, the test reads the bytes it hands over:
//! * it does not know `PERF_RECORD_CALLCHAIN_DEFERRED` (22): such records
//!   come as raw records, whose cookie, `nr`, IPs and `sample_id` trailer
//!   are parsed here in the file's byte order;
//! * it keeps only the attribute flags it names (`from_bits_truncate`), so
//!   `defer_callchain` (bit 38) and `defer_output` (bit 39) are read from the
//!   raw flags word of `HEADER_EVENT_DESC` and of the attribute section;
//! * it does not undo a big-endian file's bitfield order: perf's
//!   `perf_event__attr_swap()` reverses the bits of each byte of the flags
//!   word (`swap_bitfield()`), because a big-endian C bitfield starts at the
//!   most significant bit, and the writer writes it so. Its flags for an
//!   s390x file are therefore wrong (no `sample_id_all`, so no trailers),
//!   and the records are parsed with the flags read as perf reads them;
//! * it consumes `FINISHED_ROUND` and sorts the records by time within
//!   rounds (its `sorter.rs`): records are compared as multisets.

use perfdata::{deferred_bytes, flag, sample_bytes, Error};

include!("support/reader.rs");

// ---------------------------------------------------------------------------
// Hand-made files.

/// The lab's attribute (`perf record --call-graph fp[,defer] -a`).
fn lab_attr(deferred: bool, period: u64) -> Attr {
    let mut flags = flag::DISABLED
        | flag::INHERIT
        | flag::MMAP
        | flag::COMM
        | flag::TASK
        | flag::SAMPLE_ID_ALL
        | flag::EXCLUDE_GUEST
        | flag::MMAP2
        | flag::COMM_EXEC
        | flag::BUILD_ID;
    if deferred {
        flags |= flag::DEFER_CALLCHAIN | flag::DEFER_OUTPUT;
    }
    Attr {
        kind: 0,
        config: 1,
        sample_period: period,
        sample_type: SAMPLE_TYPE,
        flags,
        wakeup_events: 0,
        sample_max_stack: 127,
    }
}

fn sid(pid: u32, tid: u32, time: u64, cpu: u32) -> SampleId {
    SampleId { pid, tid, time, cpu, id: 100 + u64::from(cpu) }
}

/// One of every record, as the lab writes them.
fn hand_file(endian: Endian, deferred: bool) -> PerfData {
    let (k0, k1) = (0xffff_ffff_8100_1000, 0xffff_ffff_8100_2000);
    let (cookie1, cookie2) = ((3 << 32) | 1, (5 << 32) | 2);
    let user = [0x40_1234, 0x40_1500, 0x40_1800, 0x7fff_f7a0_1000, 0x40_0100];
    let build_id: Vec<u8> = (1..=20).collect();
    let records = vec![
        Record::KernelMmap {
            id: SampleId { pid: u32::MAX, tid: 0, time: 0, cpu: 0, id: 100 },
            addr: 0xffff_ffff_8100_0000,
            len: 0x0100_0000,
            pgoff: 0xffff_ffff_8100_0000,
            filename: b"[kernel.kallsyms]_text".to_vec(),
        },
        Record::Comm { id: sid(10, 10, 0, 0), comm: b"sh".to_vec(), exec: false },
        Record::Fork { id: sid(10, 11, 5, 1), ppid: 10, ptid: 10 },
        // Longer than TASK_COMM_LEN: 15 bytes are kept.
        Record::Comm { id: sid(10, 10, 7, 0), comm: b"a-program-with-a-long-name".to_vec(), exec: true },
        Record::Mmap2 {
            id: sid(10, 10, 8, 0),
            addr: 0x40_0000,
            len: 0x2000,
            pgoff: 0,
            file: FileIdentity::BuildId(build_id.clone()),
            prot: 5,
            flags: 2,
            filename: b"/guests/x86_64/lab-v3".to_vec(),
        },
        Record::Mmap2 {
            id: sid(10, 10, 8, 0),
            addr: 0x7fff_f7a0_0000,
            len: 0x1_8000,
            pgoff: 0x2000,
            file: FileIdentity::Inode { maj: 8, min: 1, ino: 0x1234_5678_9abc },
            prot: 5,
            flags: 2,
            filename: b"/lib/x86_64-linux-gnu/libc.so.6".to_vec(),
        },
        Record::FinishedInit,
        // Kernel-mode sample, user part deferred.
        Record::Sample {
            id: sid(10, 10, 100, 0),
            ip: k0,
            kernel: true,
            period: 997,
            callchain: vec![CONTEXT_KERNEL, k0, k1, CONTEXT_USER_DEFERRED, cookie1],
        },
        // User-mode sample, deferred.
        Record::Sample {
            id: sid(10, 11, 110, 1),
            ip: user[0],
            kernel: false,
            period: 997,
            callchain: vec![CONTEXT_USER_DEFERRED, cookie2],
        },
        // Frame-pointer chains: kernel and user, user only; none.
        Record::Sample {
            id: sid(10, 10, 111, 0),
            ip: k0,
            kernel: true,
            period: 997,
            callchain: vec![CONTEXT_KERNEL, k0, k1, CONTEXT_USER, user[0], user[1], user[2]],
        },
        Record::Sample {
            id: sid(10, 11, 112, 1),
            ip: user[1],
            kernel: false,
            period: 997,
            callchain: vec![CONTEXT_USER, user[1], user[2], user[3]],
        },
        Record::Sample { id: sid(10, 11, 113, 1), ip: user[2], kernel: false, period: 997, callchain: vec![] },
        Record::CallchainDeferred { id: sid(10, 10, 120, 0), cookie: cookie1, ips: user.to_vec() },
        // A failed unwind (or an exit): nr = 0.
        Record::CallchainDeferred { id: sid(10, 11, 121, 1), cookie: cookie2, ips: vec![] },
        Record::Lost { id: sid(10, 10, 130, 0), lost: 5 },
        Record::FinishedRound,
        Record::Exit { id: sid(10, 11, 140, 1), ppid: 10, ptid: 10 },
        Record::FinishedRound,
    ];
    let features = Features {
        hostname: "unwindlab".into(),
        osrelease: "7.3-unwindlab-upstream".into(),
        version: "unwindlab 0.1.0".into(),
        arch: if endian == Endian::Big { "s390x" } else { "x86_64" }.into(),
        nr_cpus: (2, 2),
        cpu_desc: "unwindlab emulated x86-64 (Unicorn)".into(),
        total_mem_kb: 1 << 20,
        cmdline: vec![
            "unwindlab".into(),
            "run".into(),
            "scenarios/x.json".into(),
            "--perf-data".into(),
            "p.data".into(),
        ],
        build_ids: vec![
            BuildId { kernel: false, build_id, filename: b"/guests/x86_64/lab-v3".to_vec() },
            BuildId {
                kernel: true,
                build_id: b"unwindlab-kmodel-7.3".to_vec(),
                filename: b"[kernel.kallsyms]".to_vec(),
            },
        ],
    };
    let event = Event { name: "instructions".into(), attr: lab_attr(deferred, 997), ids: vec![100, 101] };
    PerfData { endian, events: vec![event], records, features }
}

#[test]
fn hand_made_files_read_back_identically_in_both_byte_orders() {
    for endian in [Endian::Little, Endian::Big] {
        for deferred in [true, false] {
            let data = hand_file(endian, deferred);
            let back = round_trip(&data);
            let records = data.records.iter().filter(|r| !matches!(r, Record::FinishedRound)).count();
            assert_eq!(back.in_order.len(), records);
            let flags = back.contents.events[0].attr.flags;
            assert_eq!(flags & flag::DEFER_CALLCHAIN != 0, deferred, "defer_callchain (bit 38)");
            assert_eq!(flags & flag::DEFER_OUTPUT != 0, deferred, "defer_output (bit 39)");
            assert_eq!(back.contents.events[0].name, "instructions");
            assert_eq!(back.contents.events[0].attr.sample_type, SAMPLE_TYPE);
            assert_eq!(back.contents.events[0].attr.sample_period, 997);
            if endian == Endian::Little {
                // The reader's own time order, by time then file order: the
                // records were written in time order.
                let written: Vec<&Record> = data.records.iter().filter(|r| r.time().is_some()).collect();
                let read: Vec<&Record> = back.in_order.iter().filter(|r| r.time().is_some()).collect();
                let written: Vec<Record> = written
                    .into_iter()
                    .map(|r| match r {
                        Record::Comm { id, comm, exec } => {
                            Record::Comm { id: *id, comm: comm[..comm.len().min(15)].to_vec(), exec: *exec }
                        }
                        r => r.clone(),
                    })
                    .collect();
                assert_eq!(read.into_iter().cloned().collect::<Vec<_>>(), written, "time order");
            }
        }
    }
}

#[test]
fn the_flags_word_is_laid_out_as_perf_reads_it() {
    // perf.data-file-format and perf's swap_bitfield(): a little-endian
    // file has bit n at byte n/8, bit n%8; a big-endian one at byte n/8,
    // bit 7 - n%8.
    for endian in [Endian::Little, Endian::Big] {
        let bytes = hand_file(endian, true).to_bytes().unwrap();
        let attrs = u64_at(&bytes, 24, endian) as usize;
        let word = &bytes[attrs + FLAGS_AT..attrs + FLAGS_AT + 8];
        let bit = |n: usize| {
            let b = word[n / 8];
            match endian {
                Endian::Little => (b >> (n % 8)) & 1 == 1,
                Endian::Big => (b >> (7 - n % 8)) & 1 == 1,
            }
        };
        let set: Vec<usize> = (0..64).filter(|&n| bit(n)).collect();
        // disabled, inherit, mmap, comm, task, sample_id_all, exclude_guest,
        // mmap2, comm_exec, build_id, defer_callchain, defer_output.
        assert_eq!(set, [0, 1, 8, 9, 13, 18, 20, 23, 24, 34, 38, 39], "{endian:?}");
        if endian == Endian::Big {
            // The bytes perf 7.3's notes give for s390x.
            assert_eq!(word[4] & 0x03, 0x03, "defer_callchain = byte 4 |= 0x02, defer_output = byte 4 |= 0x01");
            assert_eq!(word[2] & 0x20, 0x20, "sample_id_all = byte 2 |= 0x20");
        }
        // The magic: the u64 "PERFILE2" in the file's byte order.
        assert_eq!(&bytes[..8], if endian == Endian::Big { b"2ELIFREP" } else { b"PERFILE2" });
    }
}

#[test]
fn record_sizes_are_the_abi_sizes() {
    for n in [0, 1, 2, 5, 127, 500, 8184] {
        let chain = vec![CONTEXT_USER; n];
        let sample = Record::Sample { id: sid(1, 1, 1, 0), ip: 1, kernel: false, period: 1, callchain: chain.clone() };
        assert_eq!(sample.size(), sample_bytes(n));
        assert_eq!(sample.size(), 8 + 8 * 6 + 8 + 8 * n);
        let deferred = Record::CallchainDeferred { id: sid(1, 1, 1, 0), cookie: 3, ips: chain };
        assert_eq!(deferred.size(), deferred_bytes(n));
        assert_eq!(deferred.size(), 8 + 16 + 8 * n + TRAILER);
    }
}

#[test]
fn the_largest_deferred_record_fits_and_one_more_entry_does_not() {
    // 8 + 16 + 8 * 8184 + 32 = 65,528 ≤ 65,535 < 65,536 (8,185 entries).
    for endian in [Endian::Little, Endian::Big] {
        let mut data = hand_file(endian, true);
        data.records.push(Record::CallchainDeferred {
            id: sid(10, 10, 200, 0),
            cookie: 7,
            ips: (0..8184).map(|i| 0x40_0000 + 4 * i).collect(),
        });
        round_trip(&data);
        let index = data.records.len();
        data.records.push(Record::CallchainDeferred { id: sid(10, 10, 201, 0), cookie: 9, ips: vec![1; 8185] });
        assert_eq!(data.to_bytes(), Err(Error::RecordTooLarge { index, size: 65_536 }));
    }
}

#[test]
fn a_deferred_record_of_9000_entries_is_too_large() {
    let mut data = hand_file(Endian::Little, true);
    let index = 3;
    data.records
        .insert(index, Record::CallchainDeferred { id: sid(10, 10, 1, 0), cookie: 1, ips: vec![0x40_1000; 9000] });
    let size = deferred_bytes(9000);
    assert_eq!(size, 72_056);
    assert_eq!(data.to_bytes(), Err(Error::RecordTooLarge { index, size }));
}

#[test]
fn a_file_needs_an_event_with_an_id() {
    let mut data = hand_file(Endian::Little, true);
    data.events[0].ids.clear();
    assert_eq!(data.to_bytes(), Err(Error::NoId { event: "instructions".into() }));
    data.events.clear();
    assert_eq!(data.to_bytes(), Err(Error::NoEvent));
}

// ---------------------------------------------------------------------------
// Random files.

/// xorshift64*: small, deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng((seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed_5eed_5eed_5eed) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn upto(&mut self, max: usize) -> usize {
        self.below(max as u64 + 1) as usize
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.upto(items.len() - 1)]
    }

    /// Boundaries, context markers, small numbers, anything.
    fn u64(&mut self) -> u64 {
        match self.below(4) {
            0 => self.pick(&[0, 1, u64::MAX, 1 << 63, CONTEXT_KERNEL, CONTEXT_USER, CONTEXT_USER_DEFERRED]),
            1 => self.below(10_000),
            _ => self.next(),
        }
    }

    fn u32(&mut self) -> u32 {
        match self.below(4) {
            0 => self.pick(&[0, 1, u32::MAX, 1 << 31]),
            1 => self.below(100) as u32,
            _ => self.next() as u32,
        }
    }

    /// Bytes of a C string (no NUL), up to `max`.
    fn c_bytes(&mut self, max: usize) -> Vec<u8> {
        (0..self.upto(max)).map(|_| 1 + self.below(255) as u8).collect()
    }

    /// A header string (UTF-8, no NUL), up to `max` characters.
    fn text(&mut self, max: usize) -> String {
        (0..self.upto(max)).map(|_| self.pick(&['a', 'Z', '0', ' ', '-', '/', '.', '_', 'é', '→', '~'])).collect()
    }
}

fn random_sample_id(rng: &mut Rng, ids: &[u64]) -> SampleId {
    SampleId { pid: rng.u32(), tid: rng.u32(), time: rng.u64(), cpu: rng.u32(), id: rng.pick(ids) }
}

fn random_ips(rng: &mut Rng, max: usize) -> Vec<u64> {
    let n = if rng.one_in(50) { 300 + rng.upto(300) } else { rng.upto(max) };
    (0..n).map(|_| rng.u64()).collect()
}

fn random_record(rng: &mut Rng, ids: &[u64]) -> Record {
    let id = random_sample_id(rng, ids);
    match rng.below(11) {
        0..=2 => {
            let kernel = rng.one_in(2);
            let mut callchain = Vec::new();
            match rng.below(4) {
                // What the kernel writes: a kernel part, then a deferred or
                // frame-pointer user part.
                0..=2 => {
                    if kernel {
                        callchain.push(CONTEXT_KERNEL);
                        callchain.extend(random_ips(rng, 6));
                    }
                    if rng.one_in(2) {
                        callchain.extend([CONTEXT_USER_DEFERRED, rng.u64()]);
                    } else if !rng.one_in(5) {
                        callchain.push(CONTEXT_USER);
                        callchain.extend(random_ips(rng, 20));
                    }
                }
                // Anything.
                _ => callchain = random_ips(rng, 30),
            }
            Record::Sample { id, ip: rng.u64(), kernel, period: rng.u64(), callchain }
        }
        3..=4 => Record::CallchainDeferred { id, cookie: rng.u64(), ips: random_ips(rng, 30) },
        5 => Record::Comm { id, comm: rng.c_bytes(24), exec: rng.one_in(2) },
        6 => Record::Fork { id, ppid: rng.u32(), ptid: rng.u32() },
        7 => Record::Exit { id, ppid: rng.u32(), ptid: rng.u32() },
        8 => {
            let file = if rng.one_in(2) {
                FileIdentity::BuildId(rng.c_bytes(24))
            } else {
                FileIdentity::Inode { maj: rng.u32(), min: rng.u32(), ino: rng.u64() }
            };
            Record::Mmap2 {
                id,
                addr: rng.u64(),
                len: rng.u64(),
                pgoff: rng.u64(),
                file,
                prot: rng.u32(),
                flags: rng.u32(),
                filename: rng.c_bytes(80),
            }
        }
        9 => Record::KernelMmap { id, addr: rng.u64(), len: rng.u64(), pgoff: rng.u64(), filename: rng.c_bytes(40) },
        _ => match rng.below(3) {
            0 => Record::Lost { id, lost: rng.u64() },
            1 => Record::FinishedRound,
            _ => Record::FinishedInit,
        },
    }
}

/// Flag bits a random attribute may have: every named one below bit 40
/// (bits 40–63 are reserved, which perf refuses), `sample_id_all` always
/// (the writer's records carry the trailer when the first event has it;
/// perf requires the events to agree on it).
const FLAG_BITS: [u32; 39] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
    32, 33, 34, 35, 36, 37, 38, 39,
];

fn random_file(rng: &mut Rng) -> PerfData {
    let endian = if rng.one_in(2) { Endian::Big } else { Endian::Little };
    let mut next_id = rng.below(1 << 40);
    let events: Vec<Event> = (0..1 + rng.upto(2))
        .map(|_| {
            let mut flags = flag::SAMPLE_ID_ALL;
            for &bit in &FLAG_BITS {
                if rng.one_in(3) {
                    flags |= 1 << bit;
                }
            }
            let ids = (0..1 + rng.upto(4))
                .map(|_| {
                    next_id += 1 + rng.below(1000);
                    next_id
                })
                .collect();
            Event {
                name: rng.text(30),
                attr: Attr {
                    kind: 0,
                    config: rng.below(2),
                    sample_period: rng.u64(),
                    sample_type: SAMPLE_TYPE,
                    flags,
                    wakeup_events: rng.u32(),
                    sample_max_stack: rng.below(1 << 16) as u16,
                },
                ids,
            }
        })
        .collect();
    let ids: Vec<u64> = events.iter().flat_map(|e| e.ids.clone()).collect();
    let records = (0..rng.upto(60)).map(|_| random_record(rng, &ids)).collect();
    let mut build_ids = Vec::new();
    if rng.one_in(2) {
        build_ids.push(BuildId { kernel: true, build_id: rng.c_bytes(24), filename: b"[kernel.kallsyms]".to_vec() });
    }
    for i in 0..rng.upto(4) {
        // Distinct paths, none perf reads as special ([vdso], //anon, …).
        let mut filename = format!("/usr/lib/lib{i}-").into_bytes();
        filename.extend(rng.c_bytes(30).into_iter().filter(|&b| b != b'/'));
        build_ids.push(BuildId { kernel: false, build_id: rng.c_bytes(24), filename });
    }
    let features = Features {
        hostname: rng.text(70),
        osrelease: rng.text(20),
        version: rng.text(20),
        arch: rng.pick(&["x86_64", "aarch64", "s390x", ""]).into(),
        nr_cpus: (rng.u32(), rng.u32()),
        cpu_desc: rng.text(90),
        total_mem_kb: rng.u64(),
        cmdline: (0..rng.upto(5)).map(|_| rng.text(40)).collect(),
        build_ids,
    };
    PerfData { endian, events, records, features }
}

#[test]
fn random_files_read_back_identically() {
    const FILES: u64 = 400;
    let (mut records, mut big) = (0, 0);
    for seed in 0..FILES {
        let mut rng = Rng::new(seed);
        let data = random_file(&mut rng);
        let back = std::panic::catch_unwind(|| round_trip(&data))
            .unwrap_or_else(|_| panic!("seed {seed}: the file read back differs from {data:#?}"));
        records += back.in_order.len();
        big += usize::from(data.endian == Endian::Big);
    }
    eprintln!("{FILES} random files ({big} big-endian), {records} records read back and compared");
    assert!(big > FILES as usize / 4 && big < FILES as usize * 3 / 4);
}
