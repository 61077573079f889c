//! Synthetic `/dev` and `/proc`: the devices a C library and shell expect
//! (and `/dev/fd`, `/dev/stdin`, `/dev/stdout`, `/dev/stderr`, links into
//! `/proc/self/fd` as udev makes them), and the one process's
//! `/proc/PID/{exe,maps,fd/}`. Never the host's, so no run depends on the
//! machine's devices or processes.

use super::fdtable::FdTable;
use super::types::{dtype, DirEntry, Kind, Stat, Synth, OVERLAY_DEV, S_IFCHR, S_IFDIR, S_IFLNK, S_IFREG};
use crate::linux::proc_state::{GID, UID};

/// Names of `/dev`, sorted, with their synthetic files.
const DEV: &[(&str, Synth)] = &[
    ("fd", Synth::DevFd),
    ("null", Synth::Null),
    ("random", Synth::Random),
    ("stderr", Synth::StdLink(2)),
    ("stdin", Synth::StdLink(0)),
    ("stdout", Synth::StdLink(1)),
    ("urandom", Synth::Random),
    ("zero", Synth::Zero),
];

impl Synth {
    /// Type and permission bits, and device number.
    fn mode(self) -> (u32, u64) {
        match self {
            Synth::DevDir | Synth::ProcDir | Synth::PidDir | Synth::FdDir => (S_IFDIR | 0o555, 0),
            Synth::Null => (S_IFCHR | 0o666, 0x103),
            Synth::Zero => (S_IFCHR | 0o666, 0x105),
            Synth::Random => (S_IFCHR | 0o666, 0x109),
            Synth::SelfLink | Synth::Exe | Synth::FdLink(_) | Synth::DevFd | Synth::StdLink(_) => (S_IFLNK | 0o777, 0),
            Synth::Maps => (S_IFREG | 0o444, 0),
        }
    }

    /// The target of a fixed link of `/dev`.
    fn dev_link(self) -> Option<Vec<u8>> {
        match self {
            Synth::DevFd => Some(b"/proc/self/fd".to_vec()),
            Synth::StdLink(n) => Some(format!("/proc/self/fd/{n}").into_bytes()),
            _ => None,
        }
    }

    /// The file's status.
    pub(crate) fn stat(self, exe: &[u8]) -> Stat {
        let (mode, rdev) = self.mode();
        let ino = match self {
            Synth::FdLink(n) => 0x1000 + n,
            other => 0x100 + other.index(),
        };
        let size = match self {
            Synth::Exe => exe.len() as u64,
            _ => self.dev_link().map_or(0, |target| target.len() as u64),
        };
        let nlink = if mode & S_IFDIR == S_IFDIR { 2 } else { 1 };
        Stat {
            dev: OVERLAY_DEV,
            ino,
            mode,
            nlink,
            uid: UID,
            gid: GID,
            rdev,
            size,
            blksize: 4096,
            blocks: 0,
            mtime_ns: 0,
        }
    }

    fn index(self) -> u64 {
        match self {
            Synth::DevDir => 0,
            Synth::Null => 1,
            Synth::Zero => 2,
            Synth::Random => 3,
            Synth::ProcDir => 4,
            Synth::SelfLink => 5,
            Synth::PidDir => 6,
            Synth::Exe => 7,
            Synth::Maps => 8,
            Synth::FdDir => 9,
            Synth::FdLink(_) => 10,
            Synth::DevFd => 11,
            Synth::StdLink(n) => 12 + n,
        }
    }
}

/// `Some(None)`: under `/dev` or `/proc` but missing; `None`: not synthetic.
pub(crate) fn lookup(abs: &[u8], exe: &[u8], pid: u64, fds: &FdTable) -> Option<Option<(Kind, Synth)>> {
    let pid = pid.to_string();
    let dir = |s| Some(Some((Kind::Dir, s)));
    let link = |target: Vec<u8>, s| Some(Some((Kind::Symlink(target), s)));
    let rest = if abs == b"/dev" {
        return dir(Synth::DevDir);
    } else if let Some(name) = abs.strip_prefix(b"/dev/") {
        return Some(DEV.iter().find(|(n, _)| n.as_bytes() == name).map(|&(_, s)| match s.dev_link() {
            Some(target) => (Kind::Symlink(target), s),
            None => (Kind::Other, s),
        }));
    } else if abs == b"/proc" {
        return dir(Synth::ProcDir);
    } else if abs == b"/proc/self" {
        return link(pid.into_bytes(), Synth::SelfLink);
    } else {
        abs.strip_prefix(b"/proc/")?
    };
    let Some(rest) = rest.strip_prefix(pid.as_bytes()) else { return Some(None) };
    Some(match rest {
        b"" => Some((Kind::Dir, Synth::PidDir)),
        b"/exe" => Some((Kind::Symlink(exe.to_vec()), Synth::Exe)),
        b"/maps" => Some((Kind::File, Synth::Maps)),
        b"/fd" => Some((Kind::Dir, Synth::FdDir)),
        _ => {
            let n = rest
                .strip_prefix(b"/fd/")
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse::<u64>().ok());
            n.filter(|n| n.to_string().len() == rest.len() - 4)
                .and_then(|n| fds.get(n).map(|d| (Kind::Symlink(d.file.borrow().path.clone()), Synth::FdLink(n))))
        }
    })
}

/// The names in a synthetic directory, or `None` if `abs` is not one.
pub(crate) fn list(abs: &[u8], exe: &[u8], pid: u64, fds: &FdTable) -> Option<Vec<DirEntry>> {
    let entry = |name: &[u8], s: Synth| {
        let st = s.stat(exe);
        (name.to_vec(), st.ino, dtype(st.mode))
    };
    let pid_name = pid.to_string();
    Some(match lookup(abs, exe, pid, fds)?? {
        (_, Synth::DevDir) => DEV.iter().map(|&(n, s)| entry(n.as_bytes(), s)).collect(),
        (_, Synth::ProcDir) => {
            // Sorted by name, as every listing is.
            vec![entry(pid_name.as_bytes(), Synth::PidDir), entry(b"self", Synth::SelfLink)]
        }
        (_, Synth::PidDir) => vec![entry(b"exe", Synth::Exe), entry(b"fd", Synth::FdDir), entry(b"maps", Synth::Maps)],
        (_, Synth::FdDir) => {
            let mut names: Vec<_> = fds.numbers().map(|n| entry(n.to_string().as_bytes(), Synth::FdLink(n))).collect();
            names.sort();
            names
        }
        _ => return None,
    })
}
