//! The generator: scenario JSON built field by field from the fuzzer's
//! bytes (valid and invalid values alike), byte-level mutations of it, and
//! committed guests with corrupted ELF headers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::{Result as ArbResult, Unstructured};
use serde_json::{json, Map, Value};

use kmodel::arch::Arch;

use super::limits::MAX_TIME;

/// Guest names; the last is never given to a guest (a dangling reference).
pub(super) const GUEST_NAMES: [&str; 4] = ["a", "b", "c", "nobody"];
pub(super) const WORKLOADS: [&str; 7] = ["recurse", "compute", "sleep", "exit", "sigexit", "signal", "nonsense"];
pub(super) const SYSCALLS: [&str; 8] =
    ["write", "exit_group", "exit", "nanosleep", "clock_nanosleep", "read", "brk", "bogus"];
/// Tokens spliced into generated JSON by the byte-level mutator.
pub(super) const TOKENS: [&str; 16] = [
    "0",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "1e400",
    "null",
    "true",
    "\"\"",
    "[]",
    "{}",
    ",",
    "\"x\":1,",
    "\\u0000",
    "\"kind\":\"perf\"",
    "\"action\":\"register\"",
    "\u{ff}",
];

/// The committed guest programs' directory (`guests/bin`).
pub fn guests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/bin")
}

/// The committed static guests as `arch/name` paths relative to
/// [`guests_dir`], sorted, with their bytes (read once). The dynamic ones
/// (and the plugin library) need their lab root, which generated scenarios
/// do not give: picked, they would only fail to load.
pub(super) fn committed_guests() -> &'static BTreeMap<String, Vec<u8>> {
    static GUESTS: OnceLock<BTreeMap<String, Vec<u8>>> = OnceLock::new();
    GUESTS.get_or_init(|| {
        let mut guests = BTreeMap::new();
        for arch in Arch::ALL.map(Arch::name) {
            let Ok(dir) = std::fs::read_dir(guests_dir().join(arch)) else { continue };
            for entry in dir.flatten() {
                let name = format!("{arch}/{}", entry.file_name().to_string_lossy());
                let Ok(bytes) = std::fs::read(entry.path()) else { continue };
                if emu::elf::Image::parse(&name, &bytes).is_ok_and(|image| image.interp.is_none()) {
                    guests.insert(name, bytes);
                }
            }
        }
        guests
    })
}

/// The generator's state: the fuzzer's bytes, whether this scenario is
/// "wild", and its kernel profile. A plain scenario is plausible (it parses
/// and mostly runs, with extreme but valid values); a wild one (a quarter
/// of them) also gets invalid values: dangling references, impossible
/// CPUs, zero periods, unknown variants, events out of order, and under
/// the `upstream` profile what only `sframe-v13` has.
struct Gen<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    wild: bool,
    /// Profile `upstream` (the default): x86-64, perf, frame pointers, no
    /// `.sframe` option; else `sframe-v13`, where everything goes.
    upstream: bool,
}

impl Gen<'_, '_> {
    /// True about once in `n` times — and never once the fuzzer's bytes
    /// have run out, so that short inputs make plain scenarios. (Likewise
    /// every list below starts with its plainest choice: `choose` takes the
    /// first one then.)
    fn one_in(&mut self, n: u32) -> ArbResult<bool> {
        Ok(!self.u.ratio(n - 1, n)?)
    }

    /// Whether to put an invalid value here (wild scenarios only).
    fn bad(&mut self, n: u32) -> ArbResult<bool> {
        Ok(self.wild && self.one_in(n)?)
    }

    /// Whether to use what only profile `sframe-v13` has (SFrame, its
    /// tables' options, other tracers and architectures): always under it,
    /// under `upstream` only as an invalid value.
    fn proposals(&mut self) -> ArbResult<bool> {
        Ok(!self.upstream || self.bad(8)?)
    }

    fn choose<'c, T>(&mut self, items: &'c [T]) -> ArbResult<&'c T> {
        self.u.choose(items)
    }

    /// For a field where every number is valid: usually one of `typical`
    /// (boundaries and typical values are where bugs live), sometimes any.
    fn any(&mut self, typical: &[u64]) -> ArbResult<u64> {
        if self.one_in(12)? {
            self.u.arbitrary()
        } else {
            Ok(*self.choose(typical)?)
        }
    }

    /// For a bounded field: one of `valid`, or in wild scenarios sometimes
    /// one of `invalid` or any number.
    fn pick(&mut self, valid: &[u64], invalid: &[u64]) -> ArbResult<u64> {
        if self.bad(6)? {
            if invalid.is_empty() || self.one_in(3)? {
                self.u.arbitrary()
            } else {
                Ok(*self.choose(invalid)?)
            }
        } else {
            Ok(*self.choose(valid)?)
        }
    }

    /// A short string, sometimes with a character JSON must escape.
    fn text(&mut self) -> ArbResult<String> {
        let mut text = String::new();
        for _ in 0..self.u.int_in_range(0..=12)? {
            text.push(char::from(self.u.int_in_range(0x20..=0x7e)?));
        }
        if self.one_in(8)? {
            text.push('\u{7}');
        }
        Ok(text)
    }

    /// One of `existing`, or (wild) a name that refers to nothing.
    fn reference(&mut self, existing: &[String]) -> ArbResult<String> {
        if existing.is_empty() || self.bad(8)? {
            Ok("nobody".to_string())
        } else {
            Ok(self.choose(existing)?.clone())
        }
    }

    /// A tracer object named `name`.
    fn tracer(&mut self, name: &str, guests: &[String]) -> ArbResult<Value> {
        let mut t = Map::new();
        t.insert("name".into(), json!(name));
        // Upstream has perf alone.
        let kind = if self.proposals()? { self.u.int_in_range(0..=4)? } else { 0 };
        match kind {
            0..=1 => {
                t.insert("kind".into(), json!("perf"));
                let period =
                    if self.bad(8)? { 0 } else { self.any(&[997, 1, 7, 97, 500, 2_000, 4_001, 10_007, u64::MAX])? };
                t.insert("period".into(), json!(period));
                let user_stack = match self.u.int_in_range(0..=3)? {
                    0 => None,
                    1 => Some(json!({"mode": "deferred"})),
                    2 => Some(json!({"mode": "fp_in_nmi"})),
                    _ => {
                        Some(json!({"mode": "copy_stack", "bytes": self.any(&[8_192, 0, 8, 512, 1 << 20, u64::MAX])?}))
                    }
                };
                if self.bad(8)? {
                    t.insert("user_stack".into(), json!({"mode": "telepathy"}));
                } else if let Some(mode) = user_stack {
                    t.insert("user_stack".into(), mode);
                }
                if self.one_in(4)? {
                    t.insert("task".into(), json!(self.reference(guests)?));
                    if self.one_in(3)? {
                        t.insert("inherit".into(), json!(false));
                    }
                } else if self.bad(8)? {
                    // Inheritance is a task-bound session's: refused.
                    t.insert("inherit".into(), json!(false));
                }
                // A uprobe on a function every lab guest has, or (wild) on
                // one no guest has or no name: refused, naming the tracer.
                if self.one_in(6)? {
                    let function = if self.bad(8)? { *self.choose(&["no_such_function", ""])? } else { "main" };
                    t.insert("event".into(), json!({ "uprobe": function }));
                }
            }
            2..=3 => {
                t.insert("kind".into(), json!("ftrace"));
                if self.one_in(2)? {
                    let instances =
                        self.pick(&[1, 0, 2, 3, 61, 62, 63, 70, 1_024], &[1_025, u64::from(u32::MAX), 1 << 32])?;
                    t.insert("instances".into(), json!(instances));
                }
            }
            _ => {
                t.insert("kind".into(), json!("bpf"));
            }
        }
        Ok(Value::Object(t))
    }

    /// A guest object for a machine of `arch` with `cpus` CPUs.
    fn guest(&mut self, name: &str, arch: &str, cpus: u64) -> ArbResult<Value> {
        let guests: Vec<&String> = committed_guests().keys().collect();
        let own: Vec<&String> = guests.iter().copied().filter(|g| g.starts_with(&format!("{arch}/"))).collect();
        let path = if self.bad(16)? {
            match self.u.int_in_range(0..=2)? {
                0 => self.choose(&guests)?.to_string(),
                1 => format!("{arch}/absent"),
                _ => "/dev/zero".to_string(),
            }
        } else {
            self.choose(&own)?.to_string()
        };
        let mut args = vec![json!(self.choose(&WORKLOADS)?)];
        if !self.one_in(4)? {
            let n = self.any(&[40, 0, 1, 3, 10, 100, 300, 2_000])?;
            args.push(json!(if self.one_in(16)? { format!("-{n}") } else { n.to_string() }));
        }
        if self.one_in(16)? {
            args.push(json!(self.text()?));
        }
        let mut g = Map::new();
        g.insert("name".into(), json!(name));
        g.insert("path".into(), json!(path));
        g.insert("args".into(), Value::Array(args));
        if self.one_in(6)? {
            g.insert("stdin".into(), json!(self.text()?));
        }
        if self.one_in(3)? {
            let last = cpus.saturating_sub(1);
            g.insert("cpu".into(), json!(self.pick(&[0, 1.min(last), last], &[cpus, 64])?));
        }
        if self.one_in(8)? && self.proposals()? {
            let mut patches = Vec::new();
            for _ in 0..self.u.int_in_range(1..=4)? {
                let at = self.pick(&[0, 1, 2, 3, 4, 5, 8, 16, 24, 32, 100], &[1 << 20, u64::MAX])?;
                patches.push(json!([at, self.u.arbitrary::<u8>()?]));
            }
            g.insert("sframe_patch".into(), Value::Array(patches));
        }
        if self.one_in(8)? {
            self.files(&mut g)?;
        }
        Ok(Value::Object(g))
    }

    /// A guest's `files` and `cwd` (its `root` never: the harness runs no
    /// scenario that reads the host). Wild ones get paths the parser must
    /// refuse: relative or unnormalised working directories, NUL bytes,
    /// `.` and `..`, a file inside a file, too many files.
    fn files(&mut self, g: &mut Map<String, Value>) -> ArbResult<()> {
        const PATHS: [&str; 6] = ["in.txt", "/etc/motd", "/data/a", "data/b", "/guests/x", "/proc/self/x"];
        const BAD: [&str; 7] = ["", "/", "a/./b", "../a", "a\0b", "/a/", "/etc/motd/inner"];
        let mut files = Map::new();
        let count = if self.bad(8)? { crate::scenario::MAX_FILES + 1 } else { self.u.int_in_range(0..=3)? };
        for i in 0..count {
            let path = if self.bad(6)? {
                self.choose(&BAD)?.to_string()
            } else if i < PATHS.len() {
                self.choose(&PATHS)?.to_string()
            } else {
                format!("/many/{i}")
            };
            files.insert(path, json!(self.text()?));
        }
        g.insert("files".into(), Value::Object(files));
        if self.one_in(2)? {
            let cwd = if self.bad(6)? {
                *self.choose(&["work", "/a/../b", "", "/etc/motd"])?
            } else {
                *self.choose(&["/", "/work", "/data"])?
            };
            g.insert("cwd".into(), json!(cwd));
        }
        Ok(())
    }

    /// Kernel options: every field sometimes, every variant of each.
    fn kernel(&mut self) -> ArbResult<Value> {
        let mut k = Map::new();
        if !self.upstream {
            k.insert("profile".into(), json!("sframe-v13"));
        } else if self.one_in(2)? {
            k.insert("profile".into(), json!(if self.bad(8)? { "v6.19" } else { "upstream" }));
        }
        if self.one_in(2)? {
            k.insert("version".into(), json!(self.choose(&["v6.19", "v6.17"])?));
        }
        if self.one_in(2)? {
            let paths = ["upstream", "v6.17", "none", "copy-on-exit", "unwind-at-syscall-entry"];
            k.insert("exit_path".into(), json!(self.choose(&paths)?));
        }
        if self.one_in(3)? {
            let count = if self.bad(4)? { 0 } else { self.u.int_in_range(1..=3)? };
            let methods: &[&str] = if self.proposals()? { &["sframe", "fp"] } else { &["fp"] };
            let unwinders = (0..count).map(|_| Ok(json!(self.choose(methods)?)));
            k.insert("unwinders".into(), Value::Array(unwinders.collect::<ArbResult<_>>()?));
        }
        if self.one_in(3)? && self.proposals()? {
            k.insert("sframe".into(), json!(self.choose(&["kernel", "lab"])?));
        }
        if self.one_in(4)? {
            k.insert("nmi_safe_cmpxchg".into(), json!(self.u.arbitrary::<bool>()?));
        }
        if self.one_in(4)? {
            k.insert("copy_on_exit_bytes".into(), json!(self.any(&[8_192, 0, 8, 4_096, 1 << 20, u64::MAX])?));
        }
        if self.one_in(4)? && self.proposals()? {
            k.insert("caller_ip_adjust".into(), json!(self.u.arbitrary::<bool>()?));
        }
        if self.one_in(4)? {
            k.insert("perf_registration".into(), json!(self.choose(&["boot", "late"])?));
        }
        if self.one_in(4)? && self.proposals()? {
            k.insert("registration".into(), json!(self.choose(&["exec", "loader"])?));
        }
        Ok(Value::Object(k))
    }

    /// An event action; `tracers` grows with registrations.
    fn action(&mut self, index: usize, guests: &[String], tracers: &mut Vec<String>, cpus: u64) -> ArbResult<Value> {
        let task = self.reference(guests)?;
        let last = cpus.saturating_sub(1);
        Ok(match self.u.int_in_range(0..=5)? {
            0 => {
                let mut a =
                    json!({"action": "migrate", "task": task, "cpu": self.pick(&[last, 0, 1.min(last)], &[cpus, 64])?});
                if self.one_in(4)? {
                    a["thread"] = json!(self.pick(&[0, 1, 2], &[1 << 20])?);
                }
                a
            }
            1 => {
                let what = match self.u.int_in_range(0..=2)? {
                    0 => json!("stack"),
                    1 => json!("sframe"),
                    _ => {
                        let ends = [0x40_0000, 0, 0x40_2000, 0x7fff_ffff_0000, 0x7fff_ffff_f000, u64::MAX];
                        json!({"range": [self.any(&ends)?, self.any(&ends)?]})
                    }
                };
                json!({"action": "evict", "task": task, "what": what})
            }
            2 => json!({"action": "cancel", "tracer": self.reference(tracers)?}),
            3 => {
                let name = if self.bad(8)? { "t0".to_string() } else { format!("late{index}") };
                let tracer = self.tracer(&name, guests)?;
                tracers.push(name);
                json!({"action": "register", "tracer": tracer})
            }
            4 => {
                let signal = self.pick(&[10, 1, 2, 9, 11, 12, 15, 17, 19, 28, 64], &[0, 65])?;
                json!({"action": "signal", "task": task, "signal": signal})
            }
            _ => {
                let nmis = self.pick(&[2, 0, 1, 5, 20, 1_000, u64::from(u32::MAX)], &[1 << 32])?;
                let mut a = json!({"action": "slow_syscall", "task": task, "nmis": nmis});
                if self.one_in(2)? {
                    a["syscall"] = json!(self.choose(&SYSCALLS)?);
                }
                if self.one_in(4)? {
                    a["before_sleep"] = json!(self.u.arbitrary::<bool>()?);
                }
                a
            }
        })
    }

    /// A whole scenario.
    fn scenario(&mut self) -> ArbResult<Value> {
        self.upstream = !self.one_in(2)?;
        let arch = *self.choose(&Arch::ALL.map(Arch::name))?;
        let arch = if self.proposals()? { arch } else { Arch::X86_64.name() };
        let mut s = Map::new();
        s.insert("name".into(), json!(format!("fuzz-{arch}")));
        if self.one_in(8)? {
            s.insert("description".into(), json!(self.text()?));
        }
        let cpus = self.pick(&[1, 2, 3, 4, 64], &[0, 65])?;
        let mut machine = json!({"arch": if self.bad(32)? { "riscv64" } else { arch }});
        if cpus != 1 || self.one_in(2)? {
            machine["cpus"] = json!(cpus);
        }
        s.insert("machine".into(), machine);
        if self.one_in(2)? {
            s.insert("seed".into(), json!(self.u.arbitrary::<u64>()?));
        }
        let count = if self.bad(16)? { 0 } else { *self.choose(&[1usize, 1, 1, 2, 2, 3])? };
        let mut guests = Vec::new();
        let mut values = Vec::new();
        for (i, own) in GUEST_NAMES.iter().enumerate().take(count) {
            let name = if self.bad(8)? { *self.choose(&GUEST_NAMES[..i + 1])? } else { own };
            values.push(self.guest(name, arch, cpus)?);
            guests.push(name.to_string());
        }
        s.insert("guests".into(), Value::Array(values));
        let mut tracers: Vec<String> = Vec::new();
        let mut values = Vec::new();
        for i in 0..*self.choose(&[0usize, 1, 1, 1, 2, 2, 3, 4])? {
            let name = if self.bad(8)? { "t0".to_string() } else { format!("t{i}") };
            values.push(self.tracer(&name, &guests)?);
            tracers.push(name);
        }
        if !values.is_empty() || self.one_in(4)? {
            s.insert("tracers".into(), Value::Array(values));
        }
        // Profile sframe-v13 is named in the kernel object, which upstream
        // scenarios may leave out.
        if !self.upstream || self.one_in(2)? {
            s.insert("kernel".into(), self.kernel()?);
        }
        let mut at = 0u64;
        let mut events = Vec::new();
        for i in 0..*self.choose(&[0usize, 0, 1, 2, 3, 5, 8])? {
            at = if self.bad(8)? {
                *self.choose(&[0, u64::MAX])?
            } else {
                at.saturating_add(self.any(&[1_000, 0, 1, 100, 5_000, 20_000, 50_000])?)
            };
            let mut e = self.action(i, &guests, &mut tracers, cpus)?;
            e["at"] = json!(at);
            events.push(e);
        }
        if !events.is_empty() {
            s.insert("events".into(), Value::Array(events));
        }
        if !self.one_in(8)? {
            s.insert("stop_after".into(), json!(self.any(&[MAX_TIME, 0, 1, 1_000, 20_000, 60_000, u64::MAX])?));
        }
        if self.one_in(8)? {
            let mut x = Map::new();
            x.insert("min_samples".into(), json!(self.any(&[0, 1, 10])?));
            x.insert("min_exact_share".into(), json!(f64::from(self.u.int_in_range(0u8..=10)?) / 10.0));
            if let Some(g) = guests.first() {
                x.insert("exit".into(), json!({ g.as_str(): self.u.int_in_range(-1i32..=130)? }));
            }
            s.insert("expect".into(), Value::Object(x));
        }
        if self.bad(32)? {
            s.insert("colour".into(), json!("blue"));
        }
        Ok(Value::Object(s))
    }
}

/// A scenario as JSON: every field, valid values mostly and extreme ones
/// often; a quarter of them "wild", with invalid values too.
pub fn scenario_json(u: &mut Unstructured) -> ArbResult<Value> {
    let wild = !u.ratio(3u8, 4)?;
    Gen { u, wild, upstream: true }.scenario()
}

/// `text` with a few byte-level edits: deletions, spliced JSON tokens,
/// overwritten and duplicated bytes.
pub(super) fn mutate(u: &mut Unstructured, text: String) -> ArbResult<String> {
    let mut bytes = text.into_bytes();
    for _ in 0..u.int_in_range(1..=4)? {
        let at = u.choose_index(bytes.len() + 1)?;
        match u.int_in_range(0..=3)? {
            0 => {
                let end = at.saturating_add(u.int_in_range(1..=16)?).min(bytes.len());
                bytes.drain(at..end);
            }
            1 => {
                let token = u.choose(&TOKENS)?.as_bytes();
                bytes.splice(at..at, token.iter().copied());
            }
            2 => {
                if let Some(b) = bytes.get_mut(at) {
                    *b = u.arbitrary()?;
                }
            }
            _ => {
                let end = at.saturating_add(u.int_in_range(1..=32)?).min(bytes.len());
                let span = bytes[at..end].to_vec();
                bytes.splice(at..at, span);
            }
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A committed guest with a few corrupted bytes, mostly in its ELF and
/// program headers.
pub(super) fn corrupted_elf(u: &mut Unstructured) -> ArbResult<Vec<u8>> {
    let guests: Vec<&Vec<u8>> = committed_guests().values().collect();
    let mut bytes = (*u.choose(&guests)?).clone();
    let mut g = Gen { u, wild: true, upstream: true };
    for _ in 0..g.u.int_in_range(1..=8)? {
        let span = if g.one_in(4)? { bytes.len() } else { bytes.len().min(4_096) };
        let at = g.u.choose_index(span)?;
        if g.one_in(2)? {
            bytes[at] = g.u.arbitrary()?;
        } else {
            let value = g.any(&[0, 1, 0x1000, 0x40_0000, 0x7fff_ffff_f000, 1 << 63, u64::MAX])?;
            let end = (at + 8).min(bytes.len());
            bytes[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
        }
    }
    Ok(bytes)
}
