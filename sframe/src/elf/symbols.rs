//! Naming code addresses: the function symbols of an ELF file.

use goblin::elf::Elf;

/// Function symbols, sorted by address, moved to where the file is loaded.
///
/// Stripped files are named too: from `.dynsym` when `.symtab` has no
/// functions, and wherever no symbol covers the start of an FDE of the
/// file's DWARF CFI (`.eh_frame`, else `.debug_frame`; with the `generate`
/// feature) the FDE's range is a function `fde@0x<link-time address>`. PLT
/// sections no symbol covers are functions of their names (`.plt`), and a
/// symbol without a size reaches to the next function.
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
    /// The functions of the ELF file `data` (parsed as `elf`), moved by
    /// `bias` (the load bias: 0 for `ET_EXEC`, where a position-independent
    /// file was loaded otherwise): its `STT_FUNC` and `STT_GNU_IFUNC`
    /// symbols (`.symtab`, else `.dynsym`), then its FDEs no symbol covers.
    pub(crate) fn from_elf(elf: &Elf<'_>, data: &[u8], bias: u64) -> Symbols {
        use goblin::elf::sym::{STB_GLOBAL, STB_WEAK, STT_FUNC, STT_GNU_IFUNC};
        // (address, IFUNC, rank, size, name), the first at each address
        // kept: a function's own symbol wins over an IFUNC symbol naming it
        // (the resolver); among `.dynsym`'s aliases (`snprintf`,
        // `_IO_snprintf`, `__snprintf`) the rank prefers the fewest leading
        // underscores, then global over weak.
        let functions = |syms: &goblin::elf::Symtab<'_>, strtab: &goblin::strtab::Strtab<'_>, ranked: bool| {
            syms.iter()
                .filter(|s| matches!(s.st_type(), STT_FUNC | STT_GNU_IFUNC) && s.st_value != 0)
                .filter_map(|s| {
                    let name = strtab.get_at(s.st_name)?;
                    let binding = match s.st_bind() {
                        STB_GLOBAL => 0,
                        STB_WEAK => 1,
                        _ => 2,
                    };
                    let underscores = name.bytes().take_while(|&b| b == b'_').count();
                    let rank = if ranked { (underscores, binding) } else { (0, 0) };
                    Some((s.st_value, s.st_type() == STT_GNU_IFUNC, rank, s.st_size, name.to_string()))
                })
                .collect::<Vec<_>>()
        };
        let mut syms = functions(&elf.syms, &elf.strtab, false);
        if syms.is_empty() {
            syms = functions(&elf.dynsyms, &elf.dynstrtab, true);
        }
        syms.sort();
        syms.dedup_by_key(|s| s.0);
        let mut symbols = Symbols(syms.into_iter().map(|(address, _, _, size, name)| (address, size, name)).collect());
        symbols.fill_plt(elf);
        symbols.fill_from_fdes(elf, data);
        // Unsized symbols (crt files' `_start`, `frame_dummy`, …) reach to
        // the next function, as perf takes them.
        let starts: Vec<u64> = symbols.0.iter().map(|s| s.0).skip(1).collect();
        for (s, next) in symbols.0.iter_mut().zip(starts) {
            if s.1 == 0 {
                s.1 = next - s.0;
            }
        }
        for s in &mut symbols.0 {
            s.0 = s.0.wrapping_add(bias);
        }
        symbols
    }

    /// Adds each PLT section (`.plt`, `.plt.sec`, `.plt.got`, `.iplt`) no
    /// function covers as a function of its name: their stubs have no
    /// symbols, and not always an FDE.
    fn fill_plt(&mut self, elf: &Elf<'_>) {
        let plts: Vec<(u64, u64, String)> = elf
            .section_headers
            .iter()
            .filter(|sh| sh.sh_addr != 0 && sh.sh_size != 0)
            .filter_map(|sh| {
                let name = elf.shdr_strtab.get_at(sh.sh_name)?;
                (name.starts_with(".plt") || name == ".iplt").then(|| (sh.sh_addr, sh.sh_size, name.to_string()))
            })
            .filter(|&(start, _, _)| self.lookup(start).is_none())
            .collect();
        if !plts.is_empty() {
            self.0.extend(plts);
            self.0.sort();
        }
    }

    /// Adds an `fde@0x…` function for every FDE whose start no function
    /// covers (link-time addresses, before the bias is applied).
    #[cfg(feature = "generate")]
    fn fill_from_fdes(&mut self, elf: &Elf<'_>, data: &[u8]) {
        let Ok(abi) = super::cfi::sframe_abi(elf) else { return };
        let Ok(cfi) = super::cfi::cfi_section(elf, data) else { return };
        let Ok(mut fdes) = crate::write::generate::fde_ranges(&cfi, abi) else { return };
        fdes.sort_unstable();
        fdes.dedup_by_key(|f| f.0);
        let uncovered: Vec<(u64, u64, String)> = fdes
            .into_iter()
            .filter(|&(start, _)| start != 0 && self.lookup(start).is_none())
            .map(|(start, size)| (start, size, format!("fde@{start:#x}")))
            .collect();
        if !uncovered.is_empty() {
            self.0.extend(uncovered);
            self.0.sort();
        }
    }

    /// Without the `generate` feature there is no CFI reader: symbols only.
    #[cfg(not(feature = "generate"))]
    fn fill_from_fdes(&mut self, _: &Elf<'_>, _: &[u8]) {}

    /// The functions of the ELF file `data` loaded with `bias` (none if it
    /// is not one); see [`Symbols`] for where they come from.
    pub fn parse(data: &[u8], bias: u64) -> Symbols {
        Elf::parse(data).map(|elf| Symbols::from_elf(&elf, data, bias)).unwrap_or_default()
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
