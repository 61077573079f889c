//! Making the lab root: every resolved object copied to its guest path
//! with generated SFrame V3 injected and checked ([`build`]).

use std::path::{Path, PathBuf};

use goblin::elf::Elf;
use kmodel::arch::Arch;
use sframe::elf::{self as sfelf, inject};
use sframe::read::validate::{self, Options, Profile};
use sframe::Version;

use super::resolve::{parse, read, Lookup, Object, Resolution, SysrootError};

/// What [`build`] did with one object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Built {
    /// The object.
    pub object: Object,
    /// Where it was written.
    pub path: PathBuf,
    /// Its GNU build-id in hex, if it has one.
    pub build_id: Option<String>,
    /// What it holds now.
    pub outcome: Outcome,
}

/// Whether an object got SFrame.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A generated SFrame V3 section was injected.
    Injected {
        /// FDEs in its CFI.
        cfi_fdes: usize,
        /// Of those, covered.
        covered: usize,
        /// SFrame FDEs written (a PLT FDE may become two).
        fdes: u32,
        /// SFrame FREs written.
        fres: u64,
        /// How much larger the file became.
        bytes_added: u64,
        /// The functions whose CFI SFrame cannot (or must not) express, and why.
        skipped: Vec<sframe::elf::SkippedFunction>,
    },
    /// Copied as it is.
    Unchanged {
        /// Why.
        reason: String,
    },
}

/// The lab root [`build`] made.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sysroot {
    /// The directory.
    pub dir: PathBuf,
    /// The architecture.
    pub arch: Arch,
    /// Where the objects were found.
    pub lookup: Lookup,
    /// Every object, in loading order.
    pub objects: Vec<Built>,
}

fn build_id(elf: &Elf<'_>, data: &[u8]) -> Option<String> {
    let notes = elf.iter_note_headers(data)?;
    notes
        .flatten()
        .find(|n| n.n_type == goblin::elf::note::NT_GNU_BUILD_ID && n.name == "GNU")
        .map(|n| n.desc.iter().map(|b| format!("{b:02x}")).collect())
}

/// The bytes at the `PT_GNU_SFRAME` segment of `data` if they are a V3
/// section the kernel accepts.
fn kernel_ready_sframe(data: &[u8]) -> bool {
    let Some((offset, size)) = sfelf::sframe_segment(data) else { return false };
    let range =
        usize::try_from(offset).ok().zip(usize::try_from(size).ok()).and_then(|(o, s)| data.get(o..o.checked_add(s)?));
    let Some(bytes) = range else { return false };
    let Ok(elf) = Elf::parse(data) else { return false };
    let Some(ph) = elf.program_headers.iter().find(|p| p.p_type == sfelf::PT_GNU_SFRAME) else { return false };
    validate::check(bytes, ph.p_vaddr, &Options { profile: Profile::Kernel, text: None }).is_valid()
}

/// The object's new bytes and what was done, or why it stays as it is.
fn with_sframe(host: &Path) -> Result<(Vec<u8>, Outcome), String> {
    let name = host.display().to_string();
    let input = sfelf::load_cfi(&name).map_err(|e| match e {
        sfelf::InputError::BadElf { reason, .. } => reason,
        other => other.to_string(),
    })?;
    if kernel_ready_sframe(&input.data) {
        return Err("already has an SFrame V3 section the kernel accepts".into());
    }
    let generated = sfelf::generate_section(&input, &name, Version::V3, None).map_err(|e| e.to_string())?;
    if generated.coverage.fdes == 0 {
        return Err(format!("its {} has no FDEs", generated.coverage.cfi));
    }
    if generated.coverage.functions == 0 {
        return Err(format!("none of its {} FDEs can be expressed in SFrame", generated.coverage.fdes));
    }
    let report = validate::check(
        generated.section.as_slice(),
        generated.address,
        &Options { profile: Profile::Kernel, text: None },
    );
    if !report.is_valid() {
        let first = report.problems.first().map(|p| p.to_string()).unwrap_or_default();
        return Err(format!("the generated section fails the kernel's checks: {first}"));
    }
    let bytes = inject::inject(&input.data, &generated.section).map_err(|e| e.to_string())?;
    let outcome = Outcome::Injected {
        cfi_fdes: generated.coverage.fdes,
        covered: generated.coverage.fdes_covered,
        fdes: report.fdes,
        fres: report.fres,
        bytes_added: (bytes.len() as u64).saturating_sub(input.data.len() as u64),
        skipped: generated.coverage.skipped.clone(),
    };
    Ok((bytes, outcome))
}

fn write(path: &Path, bytes: &[u8], permissions: std::fs::Permissions) -> Result<(), SysrootError> {
    let io = |source| SysrootError::Io { path: path.into(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    // A previous copy may be read-only, or a symlink into the host.
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
        _ => {}
    }
    std::fs::write(path, bytes).map_err(io)?;
    std::fs::set_permissions(path, permissions).map_err(io)
}

/// Copies every object of `resolution` to its guest path under `dir`
/// with a generated SFrame V3 section injected (unchanged, with the
/// reason, when there is nothing to generate from or it cannot be done),
/// and writes an empty `etc/ld.so.cache` there.
pub fn build(resolution: &Resolution, dir: &Path) -> Result<Sysroot, SysrootError> {
    let paths: Vec<PathBuf> =
        resolution.objects.iter().map(|o| dir.join(o.guest.strip_prefix("/").unwrap_or(&o.guest))).collect();
    // Never write over what the root is made from (`-o /`, `-o PREFIX`).
    let same =
        |a: &Path, b: &Path| std::fs::canonicalize(a).is_ok_and(|a| std::fs::canonicalize(b).is_ok_and(|b| a == b));
    let sources = resolution.lookup.prefix.iter().chain([&resolution.lookup.root]);
    let clash = sources
        .map(|s| (dir.to_path_buf(), s.as_path()))
        .chain(paths.iter().zip(&resolution.objects).map(|(p, o)| (p.clone(), o.host.as_path())))
        .find(|(ours, theirs)| same(ours, theirs));
    if let Some((path, _)) = clash {
        return Err(SysrootError::Io {
            path,
            source: std::io::Error::other("is where the objects come from: choose an output directory of its own"),
        });
    }
    let mut objects = Vec::new();
    for (object, path) in resolution.objects.iter().zip(paths) {
        let data = read(&object.host)?;
        let id = parse(&object.host, &data).ok().and_then(|elf| build_id(&elf, &data));
        let (bytes, outcome) = match with_sframe(&object.host) {
            Ok(done) => done,
            Err(reason) => (data, Outcome::Unchanged { reason }),
        };
        let permissions = std::fs::metadata(&object.host)
            .map_err(|source| SysrootError::Io { path: object.host.clone(), source })?
            .permissions();
        write(&path, &bytes, permissions)?;
        objects.push(Built { object: object.clone(), path, build_id: id, outcome });
    }
    write(&dir.join("etc/ld.so.cache"), &[], std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    Ok(Sysroot { dir: dir.into(), arch: resolution.arch, lookup: resolution.lookup.clone(), objects })
}

impl Sysroot {
    /// The command line that runs the program in this root under qemu-user.
    pub fn qemu_command(&self) -> String {
        let qemu = format!("qemu-{}", self.arch.name());
        let program = self.objects.first().map(|b| b.path.display().to_string()).unwrap_or_default();
        format!("{qemu} -L {} {program}", self.dir.display())
    }
}

/// The table people read: one line per object (its path in the root, short
/// build-id, FDEs, FREs, bytes added or why it is unchanged).
impl std::fmt::Display for Sysroot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let width = self.objects.iter().map(|b| b.object.guest.as_os_str().len()).max().unwrap_or(6).max(6);
        writeln!(f, "{:width$}  {:8}  {:>11}  {:>6}  {:>8}", "object", "build-id", "FDEs", "FREs", "added")?;
        for b in &self.objects {
            let id = b.build_id.as_deref().map_or("-", |s| &s[..s.len().min(8)]);
            let guest = b.object.guest.display().to_string();
            match &b.outcome {
                Outcome::Injected { cfi_fdes, covered, fres, bytes_added, .. } => writeln!(
                    f,
                    "{guest:width$}  {id:8}  {:>11}  {fres:>6}  {:>8}",
                    format!("{covered}/{cfi_fdes}"),
                    format!("+{bytes_added}")
                )?,
                Outcome::Unchanged { reason } => writeln!(f, "{guest:width$}  {id:8}  unchanged: {reason}")?,
            }
        }
        // What was left out, object by object: a toolchain developer's to-do list.
        for b in &self.objects {
            let Outcome::Injected { skipped, .. } = &b.outcome else { continue };
            for s in skipped {
                let name = s.function.clone().unwrap_or_else(|| format!("fde@{:#x}", s.start));
                writeln!(f, "  skipped in {}: {name} at {:#x}: {}", b.object.guest.display(), s.at, s.reason)?;
            }
        }
        let injected = self.objects.iter().filter(|b| matches!(b.outcome, Outcome::Injected { .. })).count();
        let from = match &self.lookup.prefix {
            Some(p) => format!("prefix {}, then /", p.display()),
            None => "no prefix".into(),
        };
        writeln!(
            f,
            "{} objects for {} ({from}), {injected} with SFrame V3, in {} (etc/ld.so.cache empty)",
            self.objects.len(),
            self.arch,
            self.dir.display(),
        )?;
        writeln!(f, "run: {}", self.qemu_command())
    }
}
