//! A whole file (`tools/perf/Documentation/perf.data-file-format.txt`):
//! `struct perf_file_header`, each event's IDs and attribute, the data
//! section's records, then one `struct perf_file_section` per feature bit
//! set, in bit order, and the features themselves.

use crate::abi::*;
use crate::attr::Attr;
use crate::record::Record;

/// Why a file could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A record is larger than a record header can say (64 KiB).
    RecordTooLarge {
        /// Its index in the data section.
        index: usize,
        /// Its size.
        size: usize,
    },
    /// A file has no event.
    NoEvent,
    /// An event has no ID, so no record can name it.
    NoId {
        /// The event.
        event: String,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::RecordTooLarge { index, size } => {
                write!(f, "record {index} would take {size} bytes, more than a perf record's 65,535")
            }
            Error::NoEvent => write!(f, "a perf.data file needs at least one event"),
            Error::NoId { event } => write!(f, "event {event} has no ID"),
        }
    }
}

impl std::error::Error for Error {}

/// A sampling event: its attribute, name and the IDs its records carry
/// (one per CPU or task it was opened on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its name (`HEADER_EVENT_DESC`), as perf shows it: `instructions`.
    pub name: String,
    /// Its attribute.
    pub attr: Attr,
    /// Its IDs.
    pub ids: Vec<u64>,
}

/// One object's build-id (`HEADER_BUILD_ID`): how perf finds the file a
/// mapping was of, here or under `--symfs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildId {
    /// A kernel object (else user space).
    pub kernel: bool,
    /// The build-id (at most 20 bytes).
    pub build_id: Vec<u8>,
    /// The path perf recorded for it.
    pub filename: Vec<u8>,
}

/// The header features written: what `perf report --header` shows, and
/// what perf needs to read data of another machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Features {
    /// `HEADER_HOSTNAME`.
    pub hostname: String,
    /// `HEADER_OSRELEASE` (`uname -r`).
    pub osrelease: String,
    /// `HEADER_VERSION` (of the program that wrote the file).
    pub version: String,
    /// `HEADER_ARCH` (`uname -m`: `x86_64`, `aarch64`, `s390x`).
    pub arch: String,
    /// `HEADER_NRCPUS`: available, online.
    pub nr_cpus: (u32, u32),
    /// `HEADER_CPUDESC`.
    pub cpu_desc: String,
    /// `HEADER_TOTAL_MEM`, in kB.
    pub total_mem_kb: u64,
    /// `HEADER_CMDLINE`: the command line that wrote the file.
    pub cmdline: Vec<String>,
    /// `HEADER_BUILD_ID`.
    pub build_ids: Vec<BuildId>,
}

/// A perf.data file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfData {
    /// The byte order of the machine recorded.
    pub endian: Endian,
    /// The events (at least one).
    pub events: Vec<Event>,
    /// The data section, in the order perf record would have read it.
    pub records: Vec<Record>,
    /// The header features.
    pub features: Features,
}

/// `struct perf_file_section` placeholder: where its `offset` is in `out`.
fn section(out: &mut Out, offset: u64, size: u64) -> usize {
    let at = out.len();
    out.u64(offset);
    out.u64(size);
    at
}

/// `do_write_string()`: u32 length (NUL included, padded to 64), bytes.
fn string(out: &mut Out, s: &str) {
    let len = (s.len() + 1).next_multiple_of(NAME_ALIGN);
    out.u32(len as u32);
    let start = out.len();
    out.raw(s.as_bytes());
    out.bytes.resize(start + len, 0);
}

impl PerfData {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        if self.events.is_empty() {
            return Err(Error::NoEvent);
        }
        if let Some(e) = self.events.iter().find(|e| e.ids.is_empty()) {
            return Err(Error::NoId { event: e.name.clone() });
        }
        let trailer = self.events[0].attr.flags & crate::attr::flag::SAMPLE_ID_ALL != 0;
        let mut out = Out::new(self.endian);
        // struct perf_file_header, its sections filled in below.
        out.raw(b"PERFILE2");
        if self.endian == Endian::Big {
            // The magic is the u64 "PERFILE2" in the machine's order.
            out.bytes[..8].reverse();
        }
        out.u64(FILE_HEADER_SIZE as u64);
        out.u64((ATTR_SIZE + 16) as u64);
        let attrs_at = section(&mut out, 0, 0);
        let data_at = section(&mut out, 0, 0);
        section(&mut out, 0, 0); // event_types: unused
        let features = self.feature_bits();
        let mut bitmap = [0u64; 4];
        for &f in &features {
            bitmap[f as usize / 64] |= 1 << (f % 64);
        }
        for word in bitmap {
            out.u64(word);
        }
        debug_assert_eq!(out.len(), FILE_HEADER_SIZE);
        // Each event's IDs, then the attributes naming them.
        let mut id_offsets = Vec::new();
        for e in &self.events {
            id_offsets.push(out.len() as u64);
            for &id in &e.ids {
                out.u64(id);
            }
        }
        let attrs = out.len();
        for (e, &ids) in self.events.iter().zip(&id_offsets) {
            e.attr.encode(&mut out, self.endian);
            section(&mut out, ids, 8 * e.ids.len() as u64);
        }
        out.set_u64(attrs_at, attrs as u64);
        out.set_u64(attrs_at + 8, (out.len() - attrs) as u64);
        let data = out.len();
        for (index, r) in self.records.iter().enumerate() {
            let before = out.len();
            r.encode(&mut out, trailer);
            let size = out.len() - before;
            if size > usize::from(u16::MAX) {
                return Err(Error::RecordTooLarge { index, size });
            }
        }
        out.set_u64(data_at, data as u64);
        out.set_u64(data_at + 8, (out.len() - data) as u64);
        // The feature sections' index, then each feature.
        let index = out.len();
        for _ in &features {
            section(&mut out, 0, 0);
        }
        for (i, &f) in features.iter().enumerate() {
            let start = out.len();
            self.write_feature(&mut out, f);
            out.set_u64(index + 16 * i, start as u64);
            out.set_u64(index + 16 * i + 8, (out.len() - start) as u64);
        }
        Ok(out.bytes)
    }

    /// The features written, in bit order.
    fn feature_bits(&self) -> Vec<u32> {
        use crate::abi::feature::*;
        let mut bits = vec![HOSTNAME, OSRELEASE, VERSION, ARCH, NRCPUS, CPUDESC, TOTAL_MEM, CMDLINE, EVENT_DESC];
        if !self.features.build_ids.is_empty() {
            bits.push(BUILD_ID);
        }
        if self.sample_times().is_some() {
            bits.push(SAMPLE_TIME);
        }
        bits.sort_unstable();
        bits
    }

    /// The first and last sample's times.
    fn sample_times(&self) -> Option<(u64, u64)> {
        let mut times = self.records.iter().filter_map(|r| match r {
            Record::Sample { id, .. } => Some(id.time),
            _ => None,
        });
        let first = times.next()?;
        Some(times.fold((first, first), |(lo, hi), t| (lo.min(t), hi.max(t))))
    }

    fn write_feature(&self, out: &mut Out, f: u32) {
        use crate::abi::feature::*;
        let ft = &self.features;
        match f {
            HOSTNAME => string(out, &ft.hostname),
            OSRELEASE => string(out, &ft.osrelease),
            VERSION => string(out, &ft.version),
            ARCH => string(out, &ft.arch),
            NRCPUS => {
                out.u32(ft.nr_cpus.0);
                out.u32(ft.nr_cpus.1);
            }
            CPUDESC => string(out, &ft.cpu_desc),
            TOTAL_MEM => out.u64(ft.total_mem_kb),
            CMDLINE => {
                out.u32(ft.cmdline.len() as u32);
                for arg in &ft.cmdline {
                    string(out, arg);
                }
            }
            EVENT_DESC => {
                out.u32(self.events.len() as u32);
                out.u32(ATTR_SIZE as u32);
                for e in &self.events {
                    e.attr.encode(out, self.endian);
                    out.u32(e.ids.len() as u32);
                    string(out, &e.name);
                    for &id in &e.ids {
                        out.u64(id);
                    }
                }
            }
            BUILD_ID => {
                for b in &ft.build_ids {
                    // struct perf_record_header_build_id: header, pid,
                    // build_id[20] + size + padding, filename (NAME_ALIGN).
                    let start = out.len();
                    out.u32(RECORD_BUILD_ID);
                    let misc = MISC_BUILD_ID_SIZE | if b.kernel { MISC_KERNEL } else { MISC_USER };
                    out.u16(misc);
                    out.u16(0);
                    out.u32(u32::MAX); // pid: HOST_KERNEL_ID, the host machine
                    let id = &b.build_id[..b.build_id.len().min(20)];
                    out.raw(id);
                    out.raw(&[0; 20][id.len()..]);
                    out.raw(&[id.len() as u8, 0, 0, 0]);
                    out.c_string(&b.filename, NAME_ALIGN);
                    let size = out.len() - start;
                    out.set_u16(start + 6, size as u16);
                }
            }
            SAMPLE_TIME => {
                let (first, last) = self.sample_times().unwrap_or_default();
                out.u64(first);
                out.u64(last);
            }
            _ => unreachable!("feature {f} is not written"),
        }
    }
}

/// `PERF_RECORD_HEADER_BUILD_ID`, the type of a build-id feature entry.
const RECORD_BUILD_ID: u32 = 67;
