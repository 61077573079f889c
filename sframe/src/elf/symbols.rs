//! Naming code addresses: the function symbols of an ELF file.

use goblin::elf::Elf;

/// Function symbols, sorted by address, moved to where the file is loaded.
///
/// ```no_run
/// let data = std::fs::read("prog")?;
/// let symbols = sframe::elf::Symbols::parse(&data, 0);
/// println!("{}", symbols.name(0x401005)); // e.g. `main+0x5`
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbols(Vec<(u64, u64, String)>);

impl Symbols {
    /// The `STT_FUNC` symbols of `elf`, moved by `bias` (the load bias: 0
    /// for `ET_EXEC`, where a position-independent file was loaded otherwise).
    pub(crate) fn from_elf(elf: &Elf<'_>, bias: u64) -> Symbols {
        let mut syms: Vec<(u64, u64, String)> = elf
            .syms
            .iter()
            .filter(|s| s.st_type() == goblin::elf::sym::STT_FUNC && s.st_value != 0)
            .filter_map(|s| Some((s.st_value.wrapping_add(bias), s.st_size, elf.strtab.get_at(s.st_name)?.to_string())))
            .collect();
        syms.sort();
        syms.dedup_by_key(|s| s.0);
        Symbols(syms)
    }

    /// The function symbols of the ELF file `data` loaded with `bias` (none
    /// if it is not one).
    pub fn parse(data: &[u8], bias: u64) -> Symbols {
        Elf::parse(data).map(|elf| Symbols::from_elf(&elf, bias)).unwrap_or_default()
    }

    /// (address, size, name) of every function, sorted by address.
    pub fn entries(&self) -> &[(u64, u64, String)] {
        &self.0
    }

    /// The function containing `pc` and the offset into it.
    pub fn lookup(&self, pc: u64) -> Option<(&str, u64)> {
        let i = self.0.partition_point(|s| s.0 <= pc).checked_sub(1)?;
        let (start, size, name) = &self.0[i];
        // `pc >= start` here; subtracting cannot overflow where adding could.
        (pc - start < (*size).max(1)).then(|| (name.as_str(), pc - start))
    }

    /// `name+0xoff` for `pc`, or the hex address.
    pub fn name(&self, pc: u64) -> String {
        match self.lookup(pc) {
            Some((name, off)) => format!("{name}+{off:#x}"),
            None => format!("{pc:#x}"),
        }
    }

    /// The function name alone, or the hex address.
    pub fn function(&self, pc: u64) -> String {
        self.lookup(pc).map_or_else(|| format!("{pc:#x}"), |(name, _)| name.to_string())
    }
}
