//! What a row means: the data words of an FRE turned into recovery rules for
//! CFA, RA and FP (§5.1 default, §5.2 flex, s390x encodings). The walker only
//! evaluates these; it never looks at words again.

use super::error::Error;
use super::fde::{Fde, FdeKind};
use super::fre::Fre;
use super::header::{Abi, Header, Version};

/// s390x stores CFA offsets as `(offset - 160) / 8` (§5.1).
pub const S390X_CFA_OFFSET_ADJUSTMENT: i32 = -160;
/// Scale of an s390x CFA offset word.
pub const S390X_CFA_OFFSET_ALIGNMENT_FACTOR: i32 = 8;

/// The register a CFA is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Base {
    /// The stack pointer (default FDEs, info bit 0 set).
    Sp,
    /// The frame pointer (default FDEs, info bit 0 clear).
    Fp,
    /// A DWARF register number (flex FDEs).
    Reg(u32),
}

impl Base {
    /// The DWARF number of the register.
    pub fn dwarf(self, abi: Abi) -> u32 {
        let (sp, fp) = abi.sp_fp_dwarf();
        match self {
            Base::Sp => sp,
            Base::Fp => fp,
            Base::Reg(r) => r,
        }
    }

    /// The same register with SP and FP named: a flex rule on SP or FP is
    /// an SP/FP rule.
    pub fn named(self, abi: Abi) -> Base {
        let (sp, fp) = abi.sp_fp_dwarf();
        match self.dwarf(abi) {
            r if r == sp => Base::Sp,
            r if r == fp => Base::Fp,
            r => Base::Reg(r),
        }
    }
}

impl RowRule {
    /// One spelling per meaning, for comparing rules that came from
    /// different encodings: SP and FP named, a register value as
    /// `reg + 0`, a fixed offset as the slot it names. (Padding needs the
    /// header: use [`FrameRule::resolved`] first.)
    pub fn canonical(self, abi: Abi) -> RowRule {
        let RowRule::Frame(mut f) = self else { return self };
        f.cfa.base = f.cfa.base.named(abi);
        let canon = |r: Recovery| match r {
            Recovery::InRegister(reg) => Recovery::Reg { reg, offset: 0, deref: false },
            Recovery::Fixed(offset) => Recovery::Cfa { offset, deref: true },
            other => other,
        };
        f.ra = canon(f.ra);
        f.fp = canon(f.fp);
        RowRule::Frame(f)
    }
}

/// How to compute the CFA: `base + offset`, loaded from there if `deref`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CfaRule {
    /// Base register.
    pub base: Base,
    /// Offset added to the base (s390x: already decoded).
    pub offset: i32,
    /// The CFA is the word stored at `base + offset`.
    pub deref: bool,
}

impl CfaRule {
    /// The rule as an expression people read: `rsp+8`, `[x29+16]`.
    pub fn describe(&self, abi: Abi) -> String {
        let sum = format!("{}{:+}", abi.register_name(self.base.dwarf(abi)), self.offset);
        if self.deref {
            format!("[{sum}]")
        } else {
            sum
        }
    }
}

/// How to recover the caller's RA or FP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// No rule: FP is unchanged; RA is still in the link register (only
    /// meaningful in the topmost frame).
    Untracked,
    /// Saved at `CFA + offset`, an offset fixed by the header for every row.
    Fixed(i32),
    /// An explicit "no rule here" (flex padding word, s390x RA word 0);
    /// falls back to the fixed offset if there is one, else as `Untracked`.
    Padding,
    /// `CFA + offset`, loaded from memory if `deref`.
    Cfa {
        /// Offset from the CFA.
        offset: i32,
        /// Value is the word at that address.
        deref: bool,
    },
    /// `reg + offset`, loaded from memory if `deref` (flex FDEs).
    Reg {
        /// DWARF register number.
        reg: u32,
        /// Offset added to the register.
        offset: i32,
        /// Value is the word at that address.
        deref: bool,
    },
    /// The value sits in a register (s390x V2 words with the low bit set).
    InRegister(u32),
}

impl Recovery {
    /// The rule as an expression people read: `[CFA-8]`, `CFA+0`, `r14`;
    /// `untracked` where there is no rule (`unchanged`, `link register`).
    pub fn describe(self, abi: Abi, untracked: &str) -> String {
        match self {
            Recovery::Untracked | Recovery::Padding => untracked.into(),
            Recovery::Fixed(offset) | Recovery::Cfa { offset, deref: true } => format!("[CFA{offset:+}]"),
            Recovery::Cfa { offset, deref: false } => format!("CFA{offset:+}"),
            Recovery::Reg { reg, offset, deref } => {
                let sum = format!("{}{offset:+}", abi.register_name(reg));
                if deref {
                    format!("[{sum}]")
                } else {
                    sum
                }
            }
            Recovery::InRegister(reg) => abi.register_name(reg),
        }
    }
}

/// The rules of one row, or the end of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowRule {
    /// RA undefined: this is the outermost frame (FRE with no data words).
    Outermost,
    /// A normal frame.
    Frame(FrameRule),
}

/// CFA, RA and FP rules of a normal frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FrameRule {
    /// How to compute the CFA.
    pub cfa: CfaRule,
    /// How to recover the return address.
    pub ra: Recovery,
    /// How to recover the caller's frame pointer.
    pub fp: Recovery,
    /// AArch64: the recovered RA is PAC-signed and must be stripped.
    pub ra_mangled: bool,
}

impl FrameRule {
    /// Replaces header-relative forms (`Fixed`, `Padding`) by what they
    /// mean, so a walker sees only `Untracked`, `Cfa`, `Reg`, `InRegister`.
    pub fn resolved(mut self, header: &Header) -> Self {
        let resolve = |rec: Recovery, fixed: i8| match rec {
            Recovery::Fixed(offset) => Recovery::Cfa { offset, deref: true },
            Recovery::Padding if fixed != 0 => Recovery::Cfa { offset: i32::from(fixed), deref: true },
            Recovery::Padding => Recovery::Untracked,
            other => other,
        };
        self.ra = resolve(self.ra, header.cfa_fixed_ra_offset);
        self.fp = resolve(self.fp, header.cfa_fixed_fp_offset);
        self
    }
}

/// A row's rule plus how many data words it consumed; validation uses the
/// count to find leftover words, which the kernel rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interpretation {
    /// The rule, with header-relative forms left in place (objdump shows them).
    pub rule: RowRule,
    /// Data words the rule used.
    pub words_used: usize,
}

fn decode_cfa_offset(abi: Abi, word: i32) -> i32 {
    if abi == Abi::S390x {
        word.wrapping_mul(S390X_CFA_OFFSET_ALIGNMENT_FACTOR).wrapping_sub(S390X_CFA_OFFSET_ADJUSTMENT)
    } else {
        word
    }
}

/// Interprets `fre` of `fde` with libsframe's (lenient) rules: unused
/// trailing words are allowed here and reported via `words_used`.
pub fn interpret(header: &Header, fde: &Fde, fre: &Fre) -> Result<Interpretation, Error> {
    let n = fre.word_count();
    let bad = |reason: String| Error::BadFreData { fde: fde.index, fre: fre.index, reason };
    if n == 0 {
        if header.version == Version::V1 {
            return Err(bad("no data words (V1 has no RA-undefined rows)".into()));
        }
        return Ok(Interpretation { rule: RowRule::Outermost, words_used: 0 });
    }
    let word = |i: usize| fre.word_signed(i).unwrap_or(0);
    let fixed = |off: i8| if off != 0 { Recovery::Fixed(i32::from(off)) } else { Recovery::Untracked };
    let (cfa, ra, fp, used) = match fde.kind {
        FdeKind::Default => {
            let base = if fre.cfa_base_is_sp() { Base::Sp } else { Base::Fp };
            let cfa = CfaRule { base, offset: decode_cfa_offset(header.abi, word(0)), deref: false };
            let mut next = 1;
            let mut take = |fixed_off: i8, is_ra: bool| -> Recovery {
                if fixed_off != 0 {
                    return Recovery::Fixed(i32::from(fixed_off));
                }
                if next >= n {
                    return Recovery::Untracked;
                }
                let w = word(next);
                next += 1;
                match header.abi {
                    Abi::S390x if is_ra && w == 0 => Recovery::Padding,
                    Abi::S390x if header.version == Version::V2 && w & 1 != 0 => Recovery::InRegister((w >> 1) as u32),
                    _ => Recovery::Cfa { offset: w, deref: true },
                }
            };
            let ra = take(header.cfa_fixed_ra_offset, true);
            let fp = take(header.cfa_fixed_fp_offset, false);
            (cfa, ra, fp, next)
        }
        FdeKind::Flex => {
            if n < 2 {
                return Err(bad(format!("flex row with {n} data word(s); the CFA needs a pair")));
            }
            let control = |i: usize| fre.word_unsigned(i).unwrap_or(0);
            let cfa_ctl = control(0);
            if cfa_ctl & 1 == 0 {
                return Err(bad("flex CFA rule is not register-based (reg_p = 0)".into()));
            }
            let cfa = CfaRule {
                base: Base::Reg(cfa_ctl >> 3),
                offset: decode_cfa_offset(header.abi, word(1)),
                deref: cfa_ctl & 2 != 0,
            };
            let mut next = 2;
            let mut take = |fixed_off: i8| -> Result<Recovery, Error> {
                if next >= n {
                    return Ok(fixed(fixed_off));
                }
                let ctl = control(next);
                if ctl == 0 {
                    next += 1;
                    return Ok(Recovery::Padding);
                }
                if next + 1 >= n {
                    return Err(bad(format!("flex control word {next} has no offset word")));
                }
                let offset = word(next + 1);
                next += 2;
                let deref = ctl & 2 != 0;
                Ok(if ctl & 1 != 0 {
                    Recovery::Reg { reg: ctl >> 3, offset, deref }
                } else {
                    Recovery::Cfa { offset, deref }
                })
            };
            let ra = take(header.cfa_fixed_ra_offset)?;
            let fp = take(header.cfa_fixed_fp_offset)?;
            (cfa, ra, fp, next)
        }
    };
    Ok(Interpretation {
        rule: RowRule::Frame(FrameRule { cfa, ra, fp, ra_mangled: fre.ra_mangled() }),
        words_used: used,
    })
}
