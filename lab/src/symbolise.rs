//! Naming the code addresses of a guest's stacks. Each of its processes
//! has, over time, its own set of ELF objects mapped (the program, `ld.so`,
//! every library, each `dlopen`): the emulator reports them as
//! `ObjectMapped`/`ObjectUnmapped` events, and a forked child starts with
//! its parent's. [`GuestSymbols`] keeps that history per process, with each
//! object's functions ([`Symbols`]) parsed once per file, and names every
//! address as the process it was sampled in saw it at that moment:
//! `main+0x5` in the guest's own program (as for static programs),
//! `libc.so.6!__libc_start_call_main+0x7a` in any other object, the hex
//! address in none. Every view of a report names frames this way.

use std::collections::BTreeMap;
use std::sync::Arc;

use emu::{Event, Object, Pid};
use sframe::elf::compare::ObjectCode;
use sframe::elf::Symbols;

/// One object as a process had it mapped.
#[derive(Debug, Clone)]
struct Mapped {
    /// Its file name (`libc.so.6`): the prefix of its functions' names,
    /// and of an address in no function (`sort+0x6627`, never bare hex).
    file: String,
    /// It is the guest's own program, whose functions go unprefixed.
    program: bool,
    /// Its load bias: the symbols are at link-time addresses.
    bias: u64,
    /// Lowest and one past the highest address its segments occupy.
    span: (u64, u64),
    /// Its functions.
    symbols: Arc<Symbols>,
    /// Its FDEs, executable sections and own `.sframe`, for explanations
    /// (`None`: not a file SFrame can describe).
    code: Option<Arc<ObjectCode>>,
}

/// A stretch of a process's life during which it had an object mapped, in
/// positions of the guest's emulator event list: live at positions `from`
/// (inclusive) to `to` (exclusive).
#[derive(Debug, Clone)]
struct Span {
    /// Index into [`GuestSymbols::objects`].
    object: usize,
    from: usize,
    to: usize,
}

/// Where a sample was taken: its process, and how many of the guest's
/// emulator events had happened then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moment {
    /// The process on the CPU.
    pub(crate) pid: Pid,
    /// Length of the emulator's event list at the sample.
    pub(crate) position: usize,
}

/// A fork: the child gets the parent's objects as they are at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fork {
    /// When, as a [`Moment`]'s position.
    pub(crate) at: usize,
    /// The calling process.
    pub(crate) parent: Pid,
    /// The new one.
    pub(crate) child: Pid,
}

/// Which file an object is, for [`SymbolCache`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum FileKey {
    /// Its GNU build-id, in hex, and its size (a stripped copy keeps the
    /// build-id but not the symbols).
    BuildId(String, usize),
    /// Without one: its guest path, device and inode.
    File(Vec<u8>, u64, u64),
}

/// What a file says about its code, parsed once per file.
type FileFacts = (Arc<Symbols>, Option<Arc<ObjectCode>>);

/// Every file's functions (and code facts) parsed once in a run: by
/// build-id and size, else by path, device and inode.
#[derive(Debug, Default)]
pub(crate) struct SymbolCache(BTreeMap<FileKey, FileFacts>);

impl SymbolCache {
    /// The functions of `object`'s file at link-time addresses, and its
    /// FDEs, sections and `.sframe`.
    fn of(&mut self, object: &Object) -> FileFacts {
        let file = &object.file;
        let key = match object.build_id() {
            Some(id) => FileKey::BuildId(id, file.bytes.len()),
            None => FileKey::File(file.path.clone(), file.dev, file.ino),
        };
        self.0
            .entry(key)
            .or_insert_with(|| {
                (Arc::new(Symbols::parse(&file.bytes, 0)), ObjectCode::parse(&file.bytes).ok().map(Arc::new))
            })
            .clone()
    }
}

/// The objects each process of a guest had mapped over the run, and where
/// each of its samples was taken: names addresses as that sample saw them.
#[derive(Debug, Clone, Default)]
pub struct GuestSymbols {
    /// Every object mapped in any process, once per mapping.
    objects: Vec<Mapped>,
    /// Per process, when it had which object.
    processes: BTreeMap<Pid, Vec<Span>>,
    /// Per sample number, where it was taken, by sample number: a sorted
    /// array, which explaining every sample in turn searches faster than a
    /// tree.
    samples: Vec<(u64, Moment)>,
    /// The page of the emulator's sigreturn trampolines (its vDSO), if known.
    trampoline: Option<u64>,
    /// The uprobes XOL pages (`[uprobes]`) its processes had.
    xol: Vec<u64>,
}

impl GuestSymbols {
    /// The history of a guest from its emulator's `events` (all of them,
    /// in order: positions index this list) and its `forks`; `program` is
    /// the guest path of its own program, whose frames are not prefixed;
    /// `samples` says where each of its samples was taken.
    pub(crate) fn new(
        events: &[Event],
        forks: &[Fork],
        program: &[u8],
        samples: BTreeMap<u64, Moment>,
        cache: &mut SymbolCache,
    ) -> GuestSymbols {
        let mut out = GuestSymbols { samples: samples.into_iter().collect(), ..GuestSymbols::default() };
        // Per process, the objects mapped now: (index into `objects`, since).
        let mut live: BTreeMap<Pid, Vec<(usize, usize)>> = BTreeMap::new();
        // The object each mapping was (to find it again when it goes).
        let mut identity: Vec<Object> = Vec::new();
        let mut forks = forks.iter().peekable();
        for (i, e) in events.iter().enumerate() {
            while let Some(f) = forks.next_if(|f| f.at <= i) {
                out.fork(f, &mut live);
            }
            match e {
                Event::ObjectMapped { pid, object, .. } => {
                    let (symbols, code) = cache.of(object);
                    out.objects.push(Mapped {
                        file: object.file.name(),
                        program: object.file.path == program,
                        bias: object.bias,
                        span: object.span(),
                        symbols,
                        code,
                    });
                    identity.push(object.clone());
                    live.entry(*pid).or_default().push((out.objects.len() - 1, i + 1));
                }
                Event::ObjectUnmapped { pid, object, .. } => {
                    let now = live.entry(*pid).or_default();
                    if let Some(k) = now.iter().position(|&(o, _)| &identity[o] == object) {
                        let gone = now.remove(k);
                        out.close(*pid, vec![gone], i + 1);
                    }
                }
                _ => {}
            }
        }
        for f in forks {
            out.fork(f, &mut live);
        }
        for (pid, now) in live {
            out.close(pid, now, usize::MAX);
        }
        out
    }

    /// `f.child` starts with what `f.parent` has mapped (a pid used again
    /// ends what its earlier process had).
    fn fork(&mut self, f: &Fork, live: &mut BTreeMap<Pid, Vec<(usize, usize)>>) {
        let inherited: Vec<(usize, usize)> =
            live.get(&f.parent).into_iter().flatten().map(|&(o, _)| (o, f.at)).collect();
        if let Some(earlier) = live.insert(f.child, inherited) {
            self.close(f.child, earlier, f.at);
        }
    }

    /// Records that `pid` had each of `mapped` (object, since) until `to`.
    fn close(&mut self, pid: Pid, mapped: Vec<(usize, usize)>, to: usize) {
        let spans = self.processes.entry(pid).or_default();
        spans.extend(mapped.into_iter().map(|(object, from)| Span { object, from, to }));
    }

    /// The same, knowing the page of the sigreturn trampolines is at `at`.
    pub(crate) fn with_trampoline(mut self, at: u64) -> GuestSymbols {
        self.trampoline = Some(at);
        self
    }

    /// The same, knowing its processes' uprobes XOL pages are at `pages`.
    pub(crate) fn with_xol(mut self, pages: Vec<u64>) -> GuestSymbols {
        self.xol = pages;
        self
    }

    /// Every object file mapped during the run, once per file name, by
    /// name: (name, whether it is the guest's program, its code facts).
    pub fn files(&self) -> Vec<(&str, bool, Option<&ObjectCode>)> {
        let mut files: BTreeMap<&str, (bool, Option<&ObjectCode>)> = BTreeMap::new();
        for o in &self.objects {
            files.entry(o.file.as_str()).or_insert((o.program, o.code.as_deref()));
        }
        files.into_iter().map(|(name, (program, code))| (name, program, code)).collect()
    }

    /// The names as sample number `sample` saw them (none known: hex).
    pub fn at(&self, sample: u64) -> Names<'_> {
        let moment = self.samples.binary_search_by_key(&sample, |s| s.0).ok().map(|at| self.samples[at].1);
        Names { symbols: Some(self), moment }
    }
}

/// A code address placed in the object holding it ([`Names::locate`]).
#[derive(Debug, Clone, Copy)]
pub struct Located<'a> {
    /// The object's file name (`libc.so.6`).
    pub file: &'a str,
    /// The address in the file (link-time).
    pub link: u64,
    /// The object is the guest's own program (its names go unprefixed).
    pub program: bool,
    /// Its FDEs, sections and own `.sframe` (`None`: not parsable).
    pub code: Option<&'a ObjectCode>,
}

/// Names of code addresses as one sample's process had its objects mapped.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a> {
    symbols: Option<&'a GuestSymbols>,
    moment: Option<Moment>,
}

impl<'a> Names<'a> {
    /// Names for a sample nothing is known of: every address in hex.
    pub fn none() -> Names<'a> {
        Names { symbols: None, moment: None }
    }

    /// The object containing `pc`, if the process had one mapped there.
    fn object(&self, pc: u64) -> Option<&'a Mapped> {
        let (symbols, Moment { pid, position }) = (self.symbols?, self.moment?);
        symbols
            .processes
            .get(&pid)?
            .iter()
            .filter(|s| (s.from..s.to).contains(&position))
            .map(|s| &symbols.objects[s.object])
            .find(|o| (o.span.0..o.span.1).contains(&pc))
    }

    /// The objects the process had mapped at this moment, by address:
    /// (file name, first address, address past the end).
    pub fn objects(&self) -> Vec<(&'a str, u64, u64)> {
        let (Some(symbols), Some(Moment { pid, position })) = (self.symbols, self.moment) else { return Vec::new() };
        let mut out: Vec<(&'a str, u64, u64)> = symbols
            .processes
            .get(&pid)
            .into_iter()
            .flatten()
            .filter(|s| (s.from..s.to).contains(&position))
            .map(|s| &symbols.objects[s.object])
            .map(|o| (o.file.as_str(), o.span.0, o.span.1))
            .collect();
        out.sort_by_key(|o| (o.1, o.2));
        out
    }

    /// `pc` named with `function`'s form of a symbol: `[OBJECT!]function…`,
    /// `OBJECT+0xlink` for an address its object has no function at, else hex.
    fn named(&self, pc: u64, function: impl Fn(&str, u64) -> String) -> String {
        let Some(o) = self.object(pc) else {
            return match self.xol_offset(pc) {
                Some(off) => format!("[uprobes]+{off:#x}"),
                None => format!("{pc:#x}"),
            };
        };
        let link = pc.wrapping_sub(o.bias);
        match o.symbols.lookup(link) {
            Some((name, off)) if o.program => function(name, off),
            Some((name, off)) => format!("{}!{}", o.file, function(name, off)),
            None => format!("{}+{link:#x}", o.file),
        }
    }

    /// `pc`'s offset in the page of the sigreturn trampolines (the
    /// emulator's vDSO), if it is there.
    pub fn trampoline_offset(&self, pc: u64) -> Option<u64> {
        let page = self.symbols?.trampoline?;
        pc.checked_sub(page).filter(|&off| off < 0x1000)
    }

    /// `pc`'s offset in a uprobes XOL page (`[uprobes]`), if it is in one.
    pub fn xol_offset(&self, pc: u64) -> Option<u64> {
        self.symbols?.xol.iter().find_map(|&page| pc.checked_sub(page).filter(|&off| off < 0x1000))
    }

    /// Where `pc` is: its object's file name, the link-time address and
    /// what the file says about its code, if the process had one mapped there.
    pub fn locate(&self, pc: u64) -> Option<Located<'a>> {
        let o = self.object(pc)?;
        Some(Located { file: &o.file, link: pc.wrapping_sub(o.bias), program: o.program, code: o.code.as_deref() })
    }

    /// `function+0xoff` (`libc.so.6!function+0xoff` outside the guest's
    /// program), or the address.
    pub fn name(&self, pc: u64) -> String {
        self.named(pc, |name, off| format!("{name}+{off:#x}"))
    }

    /// The function containing `pc` (`libc.so.6!function` outside the
    /// guest's program), if a symbol says there is one.
    pub fn known_function(&self, pc: u64) -> Option<String> {
        self.locate_known(pc).1
    }

    /// Whether `pc` is the first instruction of a function a symbol names.
    pub fn is_function_start(&self, pc: u64) -> bool {
        self.object(pc).is_some_and(|o| o.symbols.lookup(pc.wrapping_sub(o.bias)).is_some_and(|(_, off)| off == 0))
    }

    /// [`Names::locate`] and [`Names::known_function`] of `pc` at once,
    /// its object found once (explanations ask both of every PC).
    pub fn locate_known(&self, pc: u64) -> (Option<Located<'a>>, Option<String>) {
        let Some(o) = self.object(pc) else { return (None, None) };
        let link = pc.wrapping_sub(o.bias);
        let known = o.symbols.lookup(link).map(|(name, _)| match o.program {
            true => name.to_string(),
            false => format!("{}!{name}", o.file),
        });
        (Some(Located { file: &o.file, link, program: o.program, code: o.code.as_deref() }), known)
    }

    /// `pc` named as [`Names::name`] does, or, where no object is mapped
    /// (a walk's wrong guess: a null or garbage return address), the
    /// address with that said.
    pub fn name_or_unmapped(&self, pc: u64) -> String {
        match self.object(pc) {
            Some(_) => self.name(pc),
            None => format!("{pc:#x} (no object is mapped there)"),
        }
    }

    /// The function alone (`libc.so.6!function` outside the guest's
    /// program), or the address.
    pub fn function(&self, pc: u64) -> String {
        self.named(pc, |name, _| name.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu::MappedFile;
    use std::rc::Rc;

    /// The x86-64 lab guest (a static program with symbols) as the file at
    /// guest path `path`, loaded with `bias`.
    fn object(path: &str, bias: u64) -> Object {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../guests/bin/x86_64/lab-v3");
        let bytes: Rc<[u8]> = std::fs::read(file).unwrap().into();
        Object { file: Rc::new(MappedFile::new(path.as_bytes().to_vec(), 1, 2, bytes)), bias }
    }

    fn mapped(pid: Pid, object: &Object) -> Event {
        Event::ObjectMapped { pid, icount: 0, object: object.clone() }
    }

    fn unmapped(pid: Pid, object: &Object) -> Event {
        Event::ObjectUnmapped { pid, icount: 0, object: object.clone() }
    }

    #[test]
    fn names_follow_each_process_over_time() {
        const PARENT: Pid = emu::FIRST_PID;
        const CHILD: Pid = PARENT + 1;
        const LIB: u64 = 0x7fff_0000_0000;
        let (main, recurse) = (0x4014f0, 0x401fb0);
        let program = object("/guests/lab", 0);
        let lib = object("/lib/libx.so.1", LIB);
        let other = object("/bin/other", 0);
        let events = [
            mapped(PARENT, &program),  // 0
            mapped(PARENT, &lib),      // 1
            unmapped(PARENT, &lib),    // 2 (the child, forked at 2, keeps it)
            unmapped(CHILD, &program), // 3: the child's execve
            unmapped(CHILD, &lib),     // 4
            mapped(CHILD, &other),     // 5
        ];
        let forks = [Fork { at: 2, parent: PARENT, child: CHILD }];
        let at = |pid, position| Moment { pid, position };
        let samples = BTreeMap::from([
            (0, at(PARENT, 0)),
            (1, at(PARENT, 2)),
            (2, at(PARENT, 3)),
            (3, at(CHILD, 3)),
            (4, at(CHILD, 6)),
        ]);
        let symbols = GuestSymbols::new(&events, &forks, b"/guests/lab", samples, &mut SymbolCache::default());
        let name = |sample, pc| symbols.at(sample).name(pc);
        // Nothing mapped yet: hex.
        assert_eq!(name(0, main + 5), "0x4014f5");
        // The guest's own program unprefixed, a library by its file name.
        assert_eq!(name(1, main + 5), "main+0x5");
        assert_eq!(symbols.at(1).function(LIB + recurse + 8), "libx.so.1!recurse");
        assert_eq!(name(1, LIB + recurse + 8), "libx.so.1!recurse+0x8");
        // Unmapped in the parent...
        assert_eq!(name(2, LIB + recurse), format!("{:#x}", LIB + recurse));
        // ...but the child inherited it at the fork.
        assert_eq!(name(3, LIB + recurse), "libx.so.1!recurse+0x0");
        // After its execve the child runs another program: prefixed.
        assert_eq!(name(4, main), "other!main+0x0");
        assert_eq!(name(4, LIB + recurse), format!("{:#x}", LIB + recurse));
        // A sample nothing is known of.
        assert_eq!(symbols.at(99).name(main), "0x4014f0");
        assert_eq!(Names::none().function(main), "0x4014f0");
    }
}
