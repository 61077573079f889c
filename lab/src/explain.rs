//! Why a delivered stack left the ground truth, in words: the first frame
//! the walk could not unwind correctly (its depth, PC, object and
//! function), the cause as one of a few named kinds, and the reason in
//! words, from what the kernel model's walk did (which method found each
//! frame, why it ended), what the symbols say about the place and what the
//! object's file says about its code there (its FDEs, its `.sframe` row
//! and the CFI's row at that PC).

pub use crate::explanation::{Cause, Explanation, Failure};
use crate::report::{Report, SampleResult};
use crate::scenario::Tracer;
use crate::symbolise::{Located, Names};
use crate::verdict::Verdict;
use kmodel::arch::Arch;
use kmodel::tracer::UserStackMode;
use kmodel::unwind::{Method, Stop};
use sframe::elf::compare::Gap;

/// Where frame `at` of `s` truly had its CFA and its caller's return
/// address, from the ground truth: (CFA, the return address's stack slot
/// where the call pushed it, the return address).
fn true_frame(arch: Arch, s: &SampleResult, at: usize) -> Option<(u64, Option<u64>, u64)> {
    let sp = (*s.call_sps.get(at)?)?;
    let ra = *s.truth.get(at + 1)?;
    // A call that pushes the return address leaves SP at its slot.
    let pushed = !arch.has_link_register();
    let caller_sp = if pushed { sp.wrapping_add(arch.word_size()) } else { sp };
    Some((caller_sp.wrapping_add_signed(-arch.sp_from_cfa()), pushed.then_some(sp), ra))
}

/// Functions that are signal trampolines (glibc's and the kernel's vDSO's
/// sigreturn stubs on the three architectures).
const TRAMPOLINES: [&str; 5] =
    ["__restore_rt", "__restore", "__default_rt_sa_restorer", "__default_sa_restorer", "__kernel_rt_sigreturn"];

/// A code address as explanations look at it, each fact looked up once:
/// the object holding it (and what its file says about its code there),
/// the function a symbol names there, and the stretch of code without CFI
/// around it.
struct Spot<'a> {
    /// The address.
    pc: u64,
    /// Its object, if one was mapped there.
    at: Option<Located<'a>>,
    /// [`Names::known_function`] of `pc`.
    known: Option<String>,
    /// The stretch of its object's code no FDE covers around it, if any.
    gap: Option<Gap>,
}

impl<'a> Spot<'a> {
    /// `pc` as `names` see it.
    fn new(names: &Names<'a>, pc: u64) -> Spot<'a> {
        let (at, known) = names.locate_known(pc);
        let gap = at.as_ref().and_then(|l| l.code?.gap_at(l.link));
        Spot { pc, at, known, gap }
    }
}

/// Where `spot` is, as (place, function): the symbol's names where there
/// is one, else, in code no FDE covers, `OBJECT!nofde@START` after the
/// start of that stretch of code (stripped programs have no other name for
/// it). The place is a text field: empty unless `words`.
fn place_of(names: &Names<'_>, spot: &Spot<'_>, words: bool) -> (String, String) {
    let pc = spot.pc;
    if let Some(off) = names.trampoline_offset(pc) {
        return (say(words, || format!("[vdso]+{off:#x}")), "[vdso]".into());
    }
    if let Some(function) = &spot.known {
        return (say(words, || names.name(pc)), function.clone());
    }
    if let (Some(l), Some(gap)) = (&spot.at, &spot.gap) {
        // Unprefixed in the guest's own program, as its functions are.
        let object = if l.program { String::new() } else { format!("{}!", l.file) };
        let function = format!("{object}nofde@{:#x}", gap.start);
        return (say(words, || format!("{function}+{:#x}", l.link - gap.start)), function);
    }
    (say(words, || names.name(pc)), names.function(pc))
}

/// Every non-exact stack of `report` in groups by function and cause,
/// worst first (most samples, then wrong before truncated): each stack
/// classified, only each group's first explained in words (its example),
/// as `validate` and the run reports show them.
pub fn group(report: &Report) -> Vec<Failure> {
    let mut groups = Groups::default();
    for (order, s) in (0u64..).zip(&report.samples) {
        groups.add(report, s, order);
    }
    groups.worst_first()
}

/// [`group`] a sample at a time, in any order, for a reader that judges
/// samples as they come and keeps only the groups: each group's example
/// is its sample with the lowest `order` (what [`group`]'s example is when
/// the order is the report's).
#[derive(Debug, Default)]
pub(crate) struct Groups {
    /// Per cause and function: the order of its example, and the group.
    groups: std::collections::BTreeMap<(Cause, String), (u64, Failure)>,
}

impl Groups {
    /// Counts sample `s` of `report` (a report of its run, or of the
    /// stretch of it that holds `s`) in its group if its stack is truncated
    /// or wrong; `order` places it among the samples added.
    pub(crate) fn add(&mut self, report: &Report, s: &SampleResult, order: u64) {
        let Some(class) = classify(report, s) else { return };
        let kind = s.verdict.kind();
        let example = || explain(report, s).expect("a classified stack is explained");
        let (first, group) = self.groups.entry((class.cause, class.function)).or_insert_with(|| {
            (order, Failure { example: example(), kind, count: 0, truncated: 0, wrong: 0, pcs: Vec::new() })
        });
        if order < *first {
            (*first, group.example, group.kind) = (order, example(), kind);
        }
        group.count += 1;
        group.truncated += u64::from(kind == "truncated");
        group.wrong += u64::from(kind == "wrong");
        if let Err(at) = group.pcs.binary_search(&class.pc) {
            group.pcs.insert(at, class.pc);
        }
    }

    /// The groups, worst first (most samples, then wrong before
    /// truncated).
    pub(crate) fn worst_first(self) -> Vec<Failure> {
        let mut failures: Vec<Failure> = self.groups.into_values().map(|(_, f)| f).collect();
        failures.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(b.wrong.cmp(&a.wrong))
                .then(a.example.function.cmp(&b.example.function))
                .then(a.example.cause.cmp(&b.example.cause))
        });
        failures
    }
}

/// Explains sample `s` of `report` if its stack is truncated or wrong.
pub fn explain(report: &Report, s: &SampleResult) -> Option<Explanation> {
    explain_in(report, s, true)
}

/// Where and why sample `s` of `report` left the truth, without the words:
/// what groups it with others (cause, function) and where (depth, PC).
/// Validate classifies every sample this way and words only the first of
/// each group ([`explain`]): the reasons, rows and names of the rest would
/// be dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Class {
    /// The kind of cause.
    pub(crate) cause: Cause,
    /// The function, as [`Explanation::function`].
    pub(crate) function: String,
    /// The PC, as [`Explanation::pc`].
    pub(crate) pc: u64,
}

/// Classifies sample `s` of `report` if its stack is truncated or wrong:
/// the same cause, function and PC as [`explain`] gives, at a fraction of
/// the cost.
pub(crate) fn classify(report: &Report, s: &SampleResult) -> Option<Class> {
    explain_in(report, s, false).map(|e| Class { cause: e.cause, function: e.function, pc: e.pc })
}

/// `f`'s words where they are wanted (`words`), else nothing: a
/// classification renders no text.
fn say(words: bool, f: impl FnOnce() -> String) -> String {
    if words {
        f()
    } else {
        String::new()
    }
}

/// Why the first entry is not the interrupted PC `pc`, where the lab can
/// tell: the kernel moved the PC between the sample and the walk (a
/// uprobe's instruction, emulated or stepped out of line).
fn first_entry_reason(names: &Names<'_>, pc: u64, s: &SampleResult) -> String {
    let got = s.delivered.as_ref().and_then(|d| d.first().copied());
    match got {
        Some(got) if names.xol_offset(got).is_some() => format!(
            "the first entry is not the interrupted PC: the walk started at {}, a uprobe's XOL slot, where the \
             kernel left the PC to single-step the probed instruction out of line; the deferred unwind ran \
             before the copy did",
            names.name(got)
        ),
        Some(got) if (1..16).contains(&got.wrapping_sub(pc)) => format!(
            "the first entry is not the interrupted PC: the walk started at {}, after the probed instruction, \
             which the kernel emulated before the deferred unwind ran",
            names.name(got)
        ),
        _ => "the first entry is not the interrupted PC".into(),
    }
}

/// [`explain`] (`words`), or [`classify`]'s cause, function and PC with
/// every text field empty (`!words`).
fn explain_in(report: &Report, s: &SampleResult, words: bool) -> Option<Explanation> {
    let diverged = match s.verdict {
        Verdict::Truncated { frames, .. } => frames,
        Verdict::Wrong { frame, .. } => frame,
        Verdict::Exact | Verdict::Lost { .. } => return None,
    };
    let names = report.names(s);
    let Some(frame) = diverged.checked_sub(1) else {
        let spot = Spot::new(&names, s.truth.first().copied().unwrap_or(0));
        let (place, function) = place_of(&names, &spot, words);
        return Some(Explanation {
            frame: 0,
            pc: spot.pc,
            object: spot.at.map_or("?".into(), |l| l.file.to_string()),
            place,
            function,
            cause: Cause::FirstEntry,
            reason: say(words, || first_entry_reason(&names, spot.pc, s)),
            sframe_row: None,
            cfi_row: None,
            expected: None,
            got: None,
            true_cfa: None,
            ra_slot: None,
            true_ra: None,
        });
    };
    let spot = Spot::new(&names, s.truth[frame]);
    let pc = spot.pc;
    let code = spot.at.as_ref().and_then(|l| l.code.map(|c| (l, c)));
    let (mut place, mut function) = place_of(&names, &spot, words);
    let sframe_row = code.filter(|_| words).and_then(|(l, c)| c.sframe_row(l.link));
    // A return address that is not in the function of its call: the call to
    // a noreturn function was the last instruction of its caller. Only a
    // known function at the call says so: unnamed places all differ. The
    // interrupted PC (frame 0) was reached by no call.
    let caller = (frame > 0).then(|| names.known_function(pc.wrapping_sub(1))).flatten();
    let past_call = caller.filter(|f| spot.known.as_ref() != Some(f)).map(|f| {
        // Grouped under the function that makes the call, at its last byte.
        (place, function) = (say(words, || names.name(pc.wrapping_sub(1))), f.clone());
        say(words, || {
            format!(
                "the return address lies just past the end of {f} (its last instruction calls a function that \
                 never returns); the kernel looks callers up at the return address, not at the call"
            )
        })
    });
    let trampoline = match &spot.known {
        Some(f) if TRAMPOLINES.contains(&f.rsplit('!').next().unwrap_or(f)) => Some(say(words, || {
            format!(
                "{f} is a signal trampoline: its caller is the interrupted code, saved in the signal frame, and a \
                 signal frame's rule is register-based, which the kernel applies only to the topmost frame"
            )
        })),
        _ => names.trampoline_offset(pc).map(|_| {
            say(words, || {
                "this is the kernel's sigreturn trampoline in the [vdso], which no .sframe covers: its caller is \
                 the interrupted code, saved in the signal frame"
                    .to_string()
            })
        }),
    };
    // A classic in-NMI (or in-handler) walk records no walk of its own:
    // it is frame pointers throughout.
    let in_nmi_fp =
        s.walk.is_none()
            && report.scenario.tracers.iter().any(
                |t| matches!(t, Tracer::Perf { name, user_stack: UserStackMode::FpInNmi, .. } if *name == s.tracer),
            );
    let nmi_methods = vec![Method::Fp; if in_nmi_fp { frame + 1 } else { 0 }];
    let methods = s.walk.as_ref().map_or(nmi_methods.as_slice(), |w| w.methods.as_slice());
    let fallback = methods.iter().take(frame).position(|&m| m == Method::Fp);
    let (expected, got) = match s.verdict {
        Verdict::Wrong { expected, got, .. } => (expected, Some(got)),
        _ => (None, None),
    };
    let (mut cfi_row, mut sframe_row, mut frame_at) = (None, sframe_row, frame);
    let (cause, reason) = match (&s.verdict, past_call, trampoline) {
        (_, Some(past), _) => (Cause::PastNoreturn, past),
        (_, None, Some(trampoline)) => (Cause::SignalFrame, trampoline),
        (Verdict::Truncated { .. }, None, None) => match &s.walk {
            Some(walk) => {
                let sframe = report.scenario.kernel.unwinders().contains(&Method::Sframe);
                stop_cause(&walk.stop, sframe, code.map(|(l, c)| (l.file, l.link, c)), spot.gap.as_ref(), words)
            }
            None => (Cause::FpEnded, say(words, || "the walk stopped here".into())),
        },
        (Verdict::Wrong { .. }, None, None) => {
            let sframe_first = !in_nmi_fp && report.scenario.kernel.unwinders().first() == Some(&Method::Sframe);
            let at_entry =
                !sframe_first && frame == 0 && methods.first() == Some(&Method::Fp) && names.is_function_start(pc);
            let callers = say(words, || {
                format!(
                    "it gave {} where the truth is {}",
                    got.map_or("nothing".into(), |g| names.name_or_unmapped(g)),
                    expected.map_or("the end of the stack".into(), |e| names.name(e))
                )
            });
            match (methods.get(frame), fallback) {
                (Some(Method::Fp), _) if at_entry => (
                    Cause::FpWrong,
                    say(words, || {
                        format!(
                            "frame pointers found a wrong caller at a function's first instruction, where its frame \
                             is not set up yet and the caller's return address is still at SP or in the link \
                             register (only x86-64's walk has the entry rule, under a uprobe): {callers}"
                        )
                    }),
                ),
                (Some(Method::Fp), _) if sframe_first => (
                    Cause::FpWrong,
                    say(words, || {
                        format!(
                            "no SFrame row applied here{}, and the frame-pointer fallback found a wrong caller: \
                             {callers}",
                            no_cfi_note(code.map(|(l, c)| (l.link, c)))
                        )
                    }),
                ),
                (Some(Method::Fp), _) => (
                    Cause::FpWrong,
                    say(words, || {
                        format!("frame pointers found a wrong caller (this code keeps no frame pointer): {callers}")
                    }),
                ),
                (_, Some(at)) => (
                    Cause::FpAstray,
                    say(words, || {
                        format!(
                            "the walk went astray after frame {at} ({}) was unwound by frame pointers, \
                             which left a wrong stack or frame pointer",
                            names.function(s.truth[at])
                        )
                    }),
                ),
                _ => {
                    // The first frame up to here whose row contradicts its
                    // CFI is the culprit: a wrong CFA below passes a wrong
                    // SP up, and a right row above then reads wrong slots.
                    let culprit = (0..=frame).find_map(|at| {
                        let l = names.locate(s.truth[at])?;
                        Some((at, l.code?.row_disagreement(l.link)?))
                    });
                    match culprit {
                        Some((at, (row, cfi))) if at < frame => {
                            (place, function) = place_of(&names, &Spot::new(&names, s.truth[at]), words);
                            (frame_at, sframe_row, cfi_row) = (at, Some(row.clone()), Some(cfi.clone()));
                            let reason = say(words, || {
                                format!(
                                    "the SFrame row of frame {at} disagrees with its CFI: {row}; the CFI says {cfi}; \
                                     the walk went on from a wrong CFA and, at frame {frame}, {callers}"
                                )
                            });
                            (Cause::WrongRow, reason)
                        }
                        _ => {
                            // No row up to here contradicts its CFI: if the
                            // row here is the object's own section's and CFI
                            // covers the PC, the CFI itself leads astray.
                            cfi_row = code.and_then(|(l, c)| c.cfi_row(l.link));
                            let own_row = code.and_then(|(l, c)| c.sframe_row(l.link));
                            match (culprit, own_row, cfi_row.is_some()) {
                                (None, Some(row), true) => (
                                    Cause::CfiWrong,
                                    say(words, || {
                                        format!(
                                            "the SFrame row here is the CFI's ({row}), and the CFI itself gives a \
                                             wrong caller: {callers}; CFI can describe another frame than the \
                                             caller's (glibc's __longjmp's describes the jump target's, whose \
                                             saved return address is mangled)"
                                        )
                                    }),
                                ),
                                _ => {
                                    let row = sframe_row.as_deref().unwrap_or("a row of a section not in the file");
                                    let cfi =
                                        cfi_row.as_deref().map_or(String::new(), |r| format!("; the CFI says {r}"));
                                    (
                                        Cause::WrongRow,
                                        say(words, || {
                                            format!("the SFrame row here gives a wrong caller: {row}{cfi}; {callers}")
                                        }),
                                    )
                                }
                            }
                        }
                    }
                }
            }
        }
        _ => unreachable!("exact and lost stacks returned above"),
    };
    // A wrong row: what the truth is, next to the rows.
    let truth = matches!(cause, Cause::WrongRow | Cause::CfiWrong)
        .then(|| true_frame(report.scenario.machine.arch, s, frame_at))
        .flatten();
    let reason = match truth {
        Some((cfa, slot, ra)) if words => {
            let slot = slot.map_or(String::new(), |slot| format!(" at {slot:#x}"));
            format!("{reason}; true CFA {cfa:#x}, RA{slot} = {}", names.name(ra))
        }
        _ => reason,
    };
    let at = if frame_at == frame { spot.at } else { names.locate(s.truth[frame_at]) };
    Some(Explanation {
        frame: frame_at,
        pc: s.truth[frame_at],
        object: at.map_or("?".into(), |l| l.file.to_string()),
        place,
        function,
        cause,
        reason,
        sframe_row,
        cfi_row,
        expected,
        got,
        true_cfa: truth.map(|t| t.0),
        ra_slot: truth.and_then(|t| t.1),
        true_ra: truth.map(|t| t.2),
    })
}

/// ` (no CFI covers it)` where no FDE covers `link`, else nothing.
fn no_cfi_note(code: Option<(u64, &sframe::elf::compare::ObjectCode)>) -> &'static str {
    match code {
        Some((link, c)) if c.fde_at(link).is_none() => " (no FDE covers it: code without CFI)",
        _ => "",
    }
}

/// Why a walk that ended early ended, as a cause and words: the model's
/// stop, and for a missing SFrame row (`sframe`: the walk may use SFrame),
/// whether the file has CFI there (the object's `file` name, the PC's
/// `link` address, its code facts, the `gap` in its CFI there); the words
/// empty unless `say` (see [`classify`]).
fn stop_cause(
    stop: &Stop,
    sframe: bool,
    code: Option<(&str, u64, &sframe::elf::compare::ObjectCode)>,
    gap: Option<&Gap>,
    say: bool,
) -> (Cause, String) {
    let mut words = self::say(say, || stop_in_words(stop));
    match stop {
        Stop::NoMethod { misses } if sframe => {
            // The walk tries SFrame only where some section is registered.
            if say && !misses.iter().any(|m| m.method == Method::Sframe) {
                words = match misses.iter().find(|m| m.method == Method::Fp) {
                    Some(fp) => format!(
                        "no SFrame for it (no .sframe section is registered in this process), \
                         and frame pointers failed ({})",
                        fp.why
                    ),
                    None => "no SFrame for it (no .sframe section is registered in this process)".into(),
                };
            }
            let Some((file, link, c)) = code else { return (Cause::NoSection, words) };
            if let Some(gap) = gap {
                return (
                    Cause::NoCfi,
                    self::say(say, || {
                        let (text, covered) = c.fde_coverage();
                        format!(
                            "no FDE covers this PC: code without CFI in {file}'s {} (no FDE from {:#x} to {:#x}; \
                             {:.0}% of {file}'s executable bytes have none), so {words}",
                            gap.section,
                            gap.start,
                            gap.end,
                            100.0 * text.saturating_sub(covered) as f64 / text.max(1) as f64
                        )
                    }),
                );
            }
            match c.fde_at(link) {
                None => (Cause::NoCfi, self::say(say, || format!("no FDE covers this PC, so {words}"))),
                Some((start, size)) => (
                    Cause::NoSection,
                    self::say(say, || {
                        let own = match c.sframe_version() {
                            Some(v) => format!("{file} has .sframe V{}", v.number()),
                            None => format!("{file} has no .sframe"),
                        };
                        format!(
                            "no registered .sframe section covers it, though its CFI does (FDE {start:#x}+{size:#x}; \
                             {own}): {words}"
                        )
                    }),
                ),
            }
        }
        Stop::NoMethod { .. } => (Cause::FpEnded, words),
        Stop::BadRule { reason } if kmodel::unwind::REGISTER_CHECKS.contains(&reason.as_str()) => {
            (Cause::RegisterRule, words)
        }
        Stop::BadRule { .. } => (Cause::BadRule, words),
        Stop::Corrupt { .. } => (Cause::CorruptSection, words),
        Stop::Fault { .. } => (Cause::Fault, words),
        Stop::MaxEntries => (Cause::MaxEntries, words),
        Stop::Outermost => (Cause::FpEnded, words),
    }
}

/// The model's reason a walk ended, for people.
fn stop_in_words(stop: &Stop) -> String {
    match stop {
        Stop::NoMethod { misses } if !misses.is_empty() => {
            let why = |m: Method| misses.iter().find(|miss| miss.method == m).map(|miss| miss.why);
            match (why(Method::Sframe), why(Method::Fp)) {
                (Some(s), Some(f)) => format!("no SFrame for it ({s}), and frame pointers failed ({f})"),
                (Some(s), None) => format!("no SFrame for it ({s})"),
                (None, Some(f)) => format!("frame pointers failed ({f})"),
                (None, None) => stop.to_string(),
            }
        }
        Stop::BadRule { reason } => format!("its SFrame row cannot be applied: {reason}"),
        Stop::Corrupt { sframe_start, reason } => {
            format!("the .sframe section at {sframe_start:#x} was dropped as corrupt ({reason})")
        }
        Stop::Fault { addr, method } => {
            format!("reading user memory at {addr:#x} failed while unwinding by {method}: a stack or .sframe page could not be read")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::stop_in_words;
    use kmodel::unwind::{Method, Miss, Stop};

    #[test]
    fn stops_read_as_sentences() {
        let miss = |method, why: &'static str| Miss { method, why };
        let both = Stop::NoMethod {
            misses: vec![miss(Method::Sframe, "no section for 0x10"), miss(Method::Fp, "FP below SP")],
        };
        assert_eq!(
            stop_in_words(&both),
            "no SFrame for it (no section for 0x10), and frame pointers failed (FP below SP)"
        );
        let rule = Stop::BadRule { reason: "register rule below the topmost frame".into() };
        assert_eq!(stop_in_words(&rule), "its SFrame row cannot be applied: register rule below the topmost frame");
        assert_eq!(stop_in_words(&Stop::Outermost), "outermost frame");
    }
}
