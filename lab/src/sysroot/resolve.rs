//! Finding the objects a dynamically linked program loads, the way
//! `ld.so` finds them ([`resolve`]; see the module above).

use std::collections::{HashMap, VecDeque};
use std::path::{Component, Path, PathBuf};

use goblin::elf::header::{ET_DYN, ET_EXEC};
use goblin::elf::Elf;
use kmodel::arch::Arch;
use sframe::elf as sfelf;

/// Debian's multiarch triplet for `arch` (`x86_64-linux-gnu`, …).
pub fn triplet(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "x86_64-linux-gnu",
        Arch::Aarch64 => "aarch64-linux-gnu",
        Arch::S390x => "s390x-linux-gnu",
    }
}

/// The directories Debian's `ld.so` for `arch` searches last, in its order:
/// `/lib/TRIPLET`, `/usr/lib/TRIPLET`, `/lib`, `/usr/lib`.
pub fn default_dirs(arch: Arch) -> [String; 4] {
    let t = triplet(arch);
    [format!("/lib/{t}"), format!("/usr/lib/{t}"), "/lib".into(), "/usr/lib".into()]
}

/// Why no lab root could be made.
#[derive(Debug, thiserror::Error)]
pub enum SysrootError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not an ELF file the lab can use.
    #[error("{path}: {reason}")]
    BadElf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A needed object is nowhere `ld.so` would look.
    #[error("{name} (needed by {by}) not found; searched {searched}")]
    NotFound {
        /// The name asked for.
        name: String,
        /// The guest path of the object that needs it.
        by: String,
        /// The directories tried, in order.
        searched: String,
    },
}

/// Where guest paths are found on the host: under `prefix` first (when
/// there is one), then under `root`, like `qemu-user -L` and
/// `unwindlab exec --prefix`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Lookup {
    /// Searched first (Debian's cross sysroot, an unpacked root, …).
    pub prefix: Option<PathBuf>,
    /// Searched second; normally `/`.
    pub root: PathBuf,
}

impl Lookup {
    /// The host file for the absolute guest path `guest`, if there is one.
    pub fn host(&self, guest: &Path) -> Option<PathBuf> {
        let rel = guest.strip_prefix("/").unwrap_or(guest);
        self.prefix.iter().chain(std::iter::once(&self.root)).map(|base| base.join(rel)).find(|p| p.is_file())
    }
}

/// Why an object is in the root.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The program itself.
    Program,
    /// Its `PT_INTERP`, `ld.so`.
    Interpreter,
    /// A `DT_NEEDED` entry of the object at this index.
    Needed {
        /// Index of the object that asked for it first.
        by: usize,
    },
    /// Given with `--with` (an object the program `dlopen`s).
    Extra,
}

/// One object the program loads.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Object {
    /// Its absolute path as `ld.so` opens it in the guest.
    pub guest: PathBuf,
    /// The host file it is read from.
    pub host: PathBuf,
    /// Why it is loaded.
    pub role: Role,
    /// Its `DT_SONAME`, if any.
    pub soname: Option<String>,
}

/// Every object a program loads, in loading order (program, interpreter,
/// `DT_NEEDED` breadth-first, then the extras and what they need).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Resolution {
    /// The program's architecture.
    pub arch: Arch,
    /// Where the host files were found.
    pub lookup: Lookup,
    /// The objects; index 0 is the program, 1 its interpreter.
    pub objects: Vec<Object>,
}

/// What the resolver needs to know about one ELF file.
struct Dynamic {
    interp: Option<String>,
    needed: Vec<String>,
    rpath: Vec<String>,
    runpath: Vec<String>,
    soname: Option<String>,
}

/// The identity `ld.so` checks candidates against: machine, class, byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ident {
    machine: u16,
    is_64: bool,
    little: bool,
}

pub(super) fn read(path: &Path) -> Result<Vec<u8>, SysrootError> {
    std::fs::read(path).map_err(|source| SysrootError::Io { path: path.into(), source })
}

pub(super) fn parse<'a>(path: &Path, data: &'a [u8]) -> Result<Elf<'a>, SysrootError> {
    if !data.starts_with(sfelf::ELF_MAGIC) {
        return Err(SysrootError::BadElf { path: path.into(), reason: "not an ELF file".into() });
    }
    Elf::parse(data).map_err(|e| SysrootError::BadElf { path: path.into(), reason: format!("malformed ELF: {e}") })
}

fn ident(elf: &Elf<'_>) -> Ident {
    Ident { machine: elf.header.e_machine, is_64: elf.is_64, little: elf.little_endian }
}

fn split_paths(list: &[&str]) -> Vec<String> {
    list.iter().flat_map(|l| l.split(':')).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn dynamic(elf: &Elf<'_>) -> Dynamic {
    Dynamic {
        interp: elf.interpreter.map(str::to_string),
        needed: elf.libraries.iter().map(|s| s.to_string()).collect(),
        rpath: split_paths(&elf.rpaths),
        // An object with DT_RUNPATH has its DT_RPATH ignored (glibc's
        // get-dynamic-info.h).
        runpath: split_paths(&elf.runpaths),
        soname: elf.soname.map(str::to_string),
    }
}

/// `path` made absolute (against the working directory) and normalised
/// lexically, as a guest path.
fn normalize(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| Path::new("/").join(path));
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// A `DT_RPATH`/`DT_RUNPATH` entry with its dynamic string tokens expanded,
/// or `None` for one `ld.so` would ignore (relative, or an unknown token).
fn expand(entry: &str, origin: &Path, arch: Arch) -> Option<PathBuf> {
    let origin = origin.to_str()?;
    let lib = format!("lib/{}", triplet(arch));
    let mut s = entry.to_string();
    for (token, value) in [("ORIGIN", origin), ("LIB", lib.as_str()), ("PLATFORM", emu::arch::info(arch).platform)] {
        s = s.replace(&format!("${{{token}}}"), value).replace(&format!("${token}"), value);
    }
    (s.starts_with('/') && !s.contains('$')).then(|| normalize(Path::new(&s)))
}

/// Resolves what `program` loads (plus the `extras` it `dlopen`s: names
/// searched like its `DT_NEEDED` entries, or paths), finding guest paths
/// under `prefix` first, then under `/`. Without a prefix, the one
/// `unwindlab exec` uses ([`emu::fs::default_prefix`]: Debian's cross
/// sysroot for AArch64 and s390x, none for x86-64); an empty path: none.
pub fn resolve(program: &Path, extras: &[String], prefix: Option<&Path>) -> Result<Resolution, SysrootError> {
    let data = read(program)?;
    let elf = parse(program, &data)?;
    let id = ident(&elf);
    let arch = emu::arch::from_elf_machine(elf.header.e_machine).filter(|_| elf.is_64).ok_or_else(|| {
        SysrootError::BadElf {
            path: program.into(),
            reason: format!(
                "unsupported machine {} (e_machine {}, {}-bit); supported: x86-64, AArch64, s390x",
                goblin::elf::header::machine_to_str(elf.header.e_machine),
                elf.header.e_machine,
                if elf.is_64 { 64 } else { 32 }
            ),
        }
    })?;
    let prefix = match prefix {
        Some(p) if p.as_os_str().is_empty() => None,
        Some(p) => Some(p.to_path_buf()),
        None => emu::fs::default_prefix(arch),
    };
    let lookup = &Lookup { prefix, root: PathBuf::from("/") };
    let info = dynamic(&elf);
    let Some(interp) = info.interp.clone() else {
        return Err(SysrootError::BadElf {
            path: program.into(),
            reason: "statically linked (no PT_INTERP): nothing to resolve; use `unwindlab sframe gen --inject`".into(),
        });
    };
    let mut r = Resolver { arch, id, lookup, objects: Vec::new(), infos: Vec::new(), by_name: HashMap::new() };
    // A program inside the prefix is where the guest sees it (`/usr/bin/sort`
    // of an unpacked Debian root); any other at its own absolute path.
    let inside = lookup.prefix.as_ref().and_then(|p| {
        let rel = std::fs::canonicalize(program).ok()?.strip_prefix(std::fs::canonicalize(p).ok()?).ok()?.to_path_buf();
        Some(Path::new("/").join(rel))
    });
    let guest = inside.unwrap_or_else(|| normalize(program));
    r.add(Object { guest, host: program.into(), role: Role::Program, soname: None }, info);
    let interp_guest = normalize(Path::new(&interp));
    let host = lookup.host(&interp_guest).ok_or_else(|| SysrootError::NotFound {
        name: interp.clone(),
        by: r.objects[0].guest.display().to_string(),
        searched: format!("the interpreter path under {}", r.bases()),
    })?;
    let data = read(&host)?;
    let elf = parse(&host, &data)?;
    if ident(&elf) != id {
        return Err(SysrootError::BadElf { path: host, reason: "the interpreter is for another machine".into() });
    }
    let info = dynamic(&elf);
    let soname = info.soname.clone();
    r.add(Object { guest: interp_guest, host, role: Role::Interpreter, soname }, info);
    r.breadth_first(0)?;
    for extra in extras {
        let index = if extra.contains('/') {
            r.load_path(Path::new(extra), Role::Extra, 0)?
        } else {
            r.search(extra, 0, Role::Extra)?
        };
        r.breadth_first(index)?;
    }
    Ok(Resolution { arch, lookup: lookup.clone(), objects: r.objects })
}

struct Resolver<'a> {
    arch: Arch,
    id: Ident,
    lookup: &'a Lookup,
    objects: Vec<Object>,
    infos: Vec<Dynamic>,
    /// Requested names, sonames, guest paths and host files → object index.
    by_name: HashMap<String, usize>,
}

impl Resolver<'_> {
    fn bases(&self) -> String {
        match &self.lookup.prefix {
            Some(p) => format!("{} then {}", p.display(), self.lookup.root.display()),
            None => self.lookup.root.display().to_string(),
        }
    }

    fn add(&mut self, object: Object, info: Dynamic) -> usize {
        let index = self.objects.len();
        let keys = [
            Some(object.guest.display().to_string()),
            std::fs::canonicalize(&object.host).ok().map(|p| format!("host:{}", p.display())),
            info.soname.clone(),
        ];
        for key in keys.into_iter().flatten() {
            self.by_name.entry(key).or_insert(index);
        }
        self.objects.push(object);
        self.infos.push(info);
        index
    }

    /// Loads every `DT_NEEDED` of the objects from `start` on, breadth-first.
    fn breadth_first(&mut self, start: usize) -> Result<(), SysrootError> {
        let mut queue: VecDeque<usize> = (start..self.objects.len()).collect();
        while let Some(index) = queue.pop_front() {
            for name in self.infos[index].needed.clone() {
                let before = self.objects.len();
                let found = if name.contains('/') {
                    self.load_path(Path::new(&name), Role::Needed { by: index }, index)?
                } else {
                    self.search(&name, index, Role::Needed { by: index })?
                };
                self.by_name.entry(name).or_insert(found);
                if self.objects.len() > before {
                    queue.push_back(found);
                }
            }
        }
        Ok(())
    }

    /// The loader chain of `index`: it, the object that loaded it, … up to
    /// the program.
    fn chain(&self, mut index: usize) -> Vec<usize> {
        let mut chain = vec![index];
        while let Role::Needed { by } = self.objects[index].role {
            if chain.contains(&by) {
                break;
            }
            chain.push(by);
            index = by;
        }
        if !chain.contains(&0) {
            chain.push(0);
        }
        chain
    }

    fn origin(&self, index: usize) -> PathBuf {
        self.objects[index].guest.parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
    }

    /// The directories `ld.so` tries for a name `index` asks for, in order.
    fn search_dirs(&self, index: usize) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        let push = |dirs: &mut Vec<PathBuf>, entries: &[String], origin: &Path| {
            for e in entries {
                if let Some(d) = expand(e, origin, self.arch) {
                    if !dirs.contains(&d) {
                        dirs.push(d);
                    }
                }
            }
        };
        if self.infos[index].runpath.is_empty() {
            for l in self.chain(index) {
                if self.infos[l].runpath.is_empty() {
                    push(&mut dirs, &self.infos[l].rpath, &self.origin(l));
                }
            }
        }
        push(&mut dirs, &self.infos[index].runpath, &self.origin(index));
        for d in default_dirs(self.arch) {
            let d = PathBuf::from(d);
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        dirs
    }

    /// `name` (no slash) as `ld.so` finds it for the object `index`.
    fn search(&mut self, name: &str, index: usize, role: Role) -> Result<usize, SysrootError> {
        if let Some(&found) = self.by_name.get(name) {
            return Ok(found);
        }
        let dirs = self.search_dirs(index);
        for dir in &dirs {
            let guest = dir.join(name);
            if let Some(found) = self.try_load(&guest, role.clone())? {
                return Ok(found);
            }
        }
        Err(SysrootError::NotFound {
            name: name.into(),
            by: self.objects[index].guest.display().to_string(),
            searched: format!(
                "{} under {}",
                dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":"),
                self.bases()
            ),
        })
    }

    /// A name with a slash: that path (relative ones from the working directory).
    fn load_path(&mut self, path: &Path, role: Role, by: usize) -> Result<usize, SysrootError> {
        let guest = normalize(path);
        match self.try_load(&guest, role)? {
            Some(found) => Ok(found),
            None => Err(SysrootError::NotFound {
                name: path.display().to_string(),
                by: self.objects[by].guest.display().to_string(),
                searched: format!("that path under {}", self.bases()),
            }),
        }
    }

    /// The object at `guest`, loaded if it is there and of the program's
    /// machine (`None`: `ld.so` would go on searching).
    fn try_load(&mut self, guest: &Path, role: Role) -> Result<Option<usize>, SysrootError> {
        if let Some(&found) = self.by_name.get(&guest.display().to_string()) {
            return Ok(Some(found));
        }
        let Some(host) = self.lookup.host(guest) else { return Ok(None) };
        if let Some(&found) =
            std::fs::canonicalize(&host).ok().and_then(|p| self.by_name.get(&format!("host:{}", p.display())))
        {
            return Ok(Some(found));
        }
        let data = read(&host)?;
        // ld.so skips files that are not ELF objects of the right machine.
        let Ok(elf) = parse(&host, &data) else { return Ok(None) };
        if ident(&elf) != self.id || !matches!(elf.header.e_type, ET_DYN | ET_EXEC) {
            return Ok(None);
        }
        let info = dynamic(&elf);
        let soname = info.soname.clone();
        if let Some(&found) = soname.as_ref().and_then(|s| self.by_name.get(s)) {
            return Ok(Some(found));
        }
        Ok(Some(self.add(Object { guest: guest.into(), host, role, soname }, info)))
    }
}
