//! Session clocks to UTC (etw-internals.md §7): 2 system time is already a FILETIME; 1 QPC
//! and 3 CPU cycles are anchored with the logger's ReferenceTime (ETW_REF_CLOCK {StartTime,
//! StartPerfClock}) and scaled by the QPC frequency or the CPU speed; 0 raw cannot be
//! converted.
//!
//! The rates are found from the evidence the dump holds, in order, and each says where it came
//! from ([`ClockFacts`]):
//! * QPC frequency: `KUSER_SHARED_DATA.QpcFrequency` (6.3+: by the layout), the globals `EtwPerfFreq` /
//!   `EtwpPerfFreq`, else inferred from the ReferenceTimes of two QPC sessions;
//! * CPU speed: the global `EtwCPUSpeedInMHz`, else `KPRCB.MHz` (by the symbols' `_KPRCB`
//!   layout, or the KDBG's `OffsetPrcbMhz`), else inferred from two cycle-clock sessions.
//!
//! Every converted time can be checked against the dump (`ClockFacts::implausible`): after
//! the dump's SystemTime or before boot (with a small slack) is flagged, never hidden.

use crate::addr::VirtAddr;
use crate::etw::loggers::{dump_system_time, Session};
use crate::kernel::context::KernelContext;
use crate::kernel::kuser::KUserSharedData;
use crate::kernel::view::View;
use crate::mem::MemError;
use crate::time::filetime_to_iso8601;
use thiserror::Error;

/// Converts one clock's raw timestamps to FILETIMEs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Converter {
    /// The timestamps are FILETIMEs (SystemTime clock).
    FileTime,
    /// FILETIME = start + (ts − raw_start) × num / den.
    Scaled {
        start: u64,
        raw_start: u64,
        num: u64,
        den: u64,
        /// How the anchor and the scale were obtained.
        how: String,
    },
    /// Why no conversion is possible.
    Unknown(String),
}

impl Converter {
    /// The FILETIME (UTC) of a raw timestamp in this clock, if it can be converted.
    pub fn to_filetime(&self, ts: u64) -> Option<u64> {
        match self {
            Converter::FileTime => Some(ts),
            Converter::Scaled {
                start,
                raw_start,
                num,
                den,
                ..
            } => {
                if *den == 0 {
                    return None;
                }
                let diff = i128::from(ts) - i128::from(*raw_start);
                // In 64 bits when the product fits (every real clock's timestamps within
                // centuries of the anchor): the same quotient, rounded toward zero alike,
                // without the 128-bit division.
                // A product past 128 bits (a rate no clock has, from hostile input) has no
                // time: None, never a wrapped value.
                let d = match (
                    i64::try_from(diff),
                    i64::try_from(*num),
                    i64::try_from(*den),
                ) {
                    (Ok(a), Ok(n), Ok(q)) => match a.checked_mul(n) {
                        Some(p) => i128::from(p / q),
                        None => diff.checked_mul(i128::from(*num))? / i128::from(*den),
                    },
                    _ => diff.checked_mul(i128::from(*num))? / i128::from(*den),
                };
                u64::try_from(i128::from(*start).checked_add(d)?).ok()
            }
            Converter::Unknown(_) => None,
        }
    }

    /// Why timestamps of this clock are not converted, if they are not.
    pub fn problem(&self) -> Option<&str> {
        match self {
            Converter::Unknown(w) => Some(w),
            _ => None,
        }
    }

    /// How far from the truth a converted time `ft` may be: two KUSER_SHARED_DATA ticks
    /// (31.25 ms) of time-keeping granularity, plus, for scaled clocks, a share of the distance
    /// from the anchor (10 ppm for QPC, 0.1% for CPU cycles at the nominal speed).
    pub fn slack(&self, ft: u64) -> u64 {
        const BASE: u64 = 312_500;
        match self {
            Converter::Scaled { start, num, .. } => {
                let d = ft.abs_diff(*start);
                BASE + if *num == 10 { d / 1000 } else { d / 100_000 }
            }
            _ => BASE,
        }
    }

    /// How the conversion is done (None for FILETIMEs and for no conversion).
    pub fn how(&self) -> Option<&str> {
        match self {
            Converter::Scaled { how, .. } => Some(how),
            _ => None,
        }
    }
}

/// A converted time that cannot be right ([`ClockFacts::implausible`]); FILETIMEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Implausible {
    /// `ft` is after the dump's SystemTime `now`.
    AfterDump { ft: u64, now: u64 },
    /// `ft` is before boot.
    BeforeBoot { ft: u64, boot: u64 },
}

impl std::fmt::Display for Implausible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Implausible::AfterDump { ft, now } => write!(
                f,
                "{} is after the dump's SystemTime {}",
                filetime_to_iso8601(ft),
                filetime_to_iso8601(now)
            ),
            Implausible::BeforeBoot { ft, boot } => write!(
                f,
                "{} is before boot ({})",
                filetime_to_iso8601(ft),
                filetime_to_iso8601(boot)
            ),
        }
    }
}

/// Converted times of one session or block that cannot be right ([`ClockFacts::implausible`]):
/// how many fall after the dump and before boot, and the first example.
#[derive(Clone, Debug, Default)]
pub(crate) struct TimeFlags {
    pub after: usize,
    pub before: usize,
    pub example: Option<String>,
}

impl TimeFlags {
    /// The flag of time `ft` converted by `conv` (`after_dump`, `before_boot`, or None),
    /// counted; `at` says where it was met, for the first example.
    pub fn check(
        &mut self,
        facts: &ClockFacts,
        ft: u64,
        conv: &Converter,
        at: impl FnOnce(String) -> String,
    ) -> Option<&'static str> {
        let why = facts.implausible(ft, conv)?;
        let late = matches!(why, Implausible::AfterDump { .. });
        if self.example.is_none() {
            self.example = Some(at(why.to_string()));
        }
        if late {
            self.after += 1;
        } else {
            self.before += 1;
        }
        Some(if late { "after_dump" } else { "before_boot" })
    }

    /// Any time flagged.
    pub fn any(&self) -> bool {
        self.after + self.before > 0
    }
}

/// A rate (QPC frequency in Hz, or CPU speed in MHz) and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rate {
    pub value: u64,
    pub source: String,
}

/// Why a rate is not known.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RateError {
    #[error("the QPC frequency is unknown: KUSER_SHARED_DATA.QpcFrequency is not in the dump (or the build predates it), no EtwPerfFreq global, and fewer than two QPC sessions to infer it from")]
    QpcFrequency,
    /// Each source of the CPU speed, in order, and why it gave none.
    #[error("the CPU speed is unknown: {}", join(.0, "; "))]
    CpuSpeed(Vec<NoCpuSpeed>),
}

/// Why one source of the CPU speed gave none.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum NoCpuSpeed {
    #[error("EtwCPUSpeedInMHz at {0} is 0")]
    GlobalZero(VirtAddr),
    #[error("EtwCPUSpeedInMHz: {0}")]
    GlobalUnreadable(MemError),
    #[error("no EtwCPUSpeedInMHz symbol")]
    NoGlobal,
    #[error("no _KPRCB.MHz offset (symbols or KDBG OffsetPrcbMhz)")]
    NoPrcbOffset,
    /// `via`: the field as found (by the symbols or the KDBG); the first CPU's read error.
    #[error("{via} is 0 or unreadable on every CPU{}", first_error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default())]
    PrcbZero {
        via: &'static str,
        first_error: Option<String>,
    },
    #[error("fewer than two cycle-clock sessions to infer it from")]
    NoInference,
}

/// Why no clock type fits a span of raw timestamps ([`infer_clock`]).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub(crate) enum NoClock {
    #[error(
        "the dump's SystemTime or boot time is unknown, so no clock type can be tested against it"
    )]
    NoTimeRange,
    /// Why each clock type does not fit.
    #[error("timestamps {lo}..{hi} fit no clock type ({})", why_not.join("; "))]
    NoneFits {
        lo: u64,
        hi: u64,
        why_not: Vec<String>,
    },
    #[error(
        "timestamps {lo}..{hi} fit clock types {} alike",
        join(clocks, " and ")
    )]
    SeveralFit { lo: u64, hi: u64, clocks: Vec<u64> },
}

/// The items' texts joined by `sep`.
fn join<T: std::fmt::Display>(items: &[T], sep: &str) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(sep)
}

/// The clock facts of one dump, gathered once.
#[derive(Clone, Debug)]
pub struct ClockFacts {
    pub qpc_frequency: Result<Rate, RateError>,
    pub cpu_mhz: Result<Rate, RateError>,
    /// The dump's SystemTime (FILETIME).
    pub system_time: Option<u64>,
    /// SystemTime − SystemUpTime (FILETIME).
    pub boot_time: Option<u64>,
    /// Length of a KUSER_SHARED_DATA tick in 100 ns (KeMaximumIncrement, else 156250).
    pub tick: u64,
}

impl ClockFacts {
    /// Gather the rates and the dump's time range from every source the dump offers.
    pub fn gather(ctx: &KernelContext<'_>, sessions: &[Session]) -> ClockFacts {
        let system_time = dump_system_time(ctx);
        let up = ctx.up_time().unwrap_or(0);
        let boot_time = system_time
            .and_then(|t| t.checked_sub(up))
            .filter(|_| up > 0);
        ClockFacts {
            qpc_frequency: qpc_frequency(ctx, sessions),
            cpu_mhz: cpu_mhz(ctx, sessions),
            system_time,
            boot_time,
            tick: ctx
                .global_u32("KeMaximumIncrement")
                .filter(|&t| (10_000..=1_000_000).contains(&t))
                .map_or(156_250, u64::from),
        }
    }

    /// Why a time `ft` converted by `conv` cannot be right: after the dump's SystemTime or
    /// before boot, by more than the converter's [`Converter::slack`]. The reason is text only
    /// when shown (a listing checks millions of times and keeps one example).
    pub(crate) fn implausible(&self, ft: u64, conv: &Converter) -> Option<Implausible> {
        let slack = conv.slack(ft);
        if let Some(now) = self.system_time {
            if ft > now.saturating_add(slack) {
                return Some(Implausible::AfterDump { ft, now });
            }
        }
        if let Some(boot) = self.boot_time {
            if ft.saturating_add(slack) < boot {
                return Some(Implausible::BeforeBoot { ft, boot });
            }
        }
        None
    }

    /// The CPU-speed value for an ETL header: the rate, or 0 when unknown.
    pub(crate) fn cpu_mhz_value(&self) -> u32 {
        self.cpu_mhz
            .as_ref()
            .ok()
            .and_then(|r| u32::try_from(r.value).ok())
            .unwrap_or(0)
    }
}

/// At least this much time between two sessions' ReferenceTimes before a rate is inferred
/// from them (1 s: the 100 ns StartTime then bounds the error to 1e-7).
const MIN_INFERENCE_SPAN: u64 = 10_000_000;

/// The rate of clock `clock` from two sessions' ReferenceTimes (raw ticks per second), with
/// the sessions used, when two of them are far enough apart.
fn inferred_rate(
    ctx: &KernelContext<'_>,
    sessions: &[Session],
    clock: u64,
) -> Option<(u64, String)> {
    let mut anchors: Vec<(u64, u64, u64)> = sessions
        .iter()
        .filter(|s| s.clock_type == Some(clock))
        .filter_map(|s| {
            reference_time(ctx, s)
                .filter(|&(st, sp)| st != 0 && sp != 0)
                .map(|(st, sp)| (st, sp, s.logger_id))
        })
        .collect();
    anchors.sort();
    let (a, b) = (anchors.first()?, anchors.last()?);
    let dt = b.0.checked_sub(a.0)?;
    let draw = b.1.checked_sub(a.1)?;
    if dt < MIN_INFERENCE_SPAN || draw == 0 {
        return None;
    }
    let per_second = (u128::from(draw) * 10_000_000 / u128::from(dt)) as u64;
    Some((
        per_second,
        format!(
            "inferred from the ReferenceTimes of loggers {} and {} ({:.3} s apart)",
            a.2,
            b.2,
            dt as f64 / 1e7
        ),
    ))
}

fn qpc_frequency(ctx: &KernelContext<'_>, sessions: &[Session]) -> Result<Rate, RateError> {
    let offset = match ctx.symbols.layout("_KUSER_SHARED_DATA") {
        Some(l) => l.field("QpcFrequency").map(|f| f.offset),
        None => KUserSharedData::qpc_frequency_offset(ctx.build),
    };
    if let Some(f) = offset.and_then(|o| KUserSharedData::qpc_frequency(&ctx.space, o)) {
        return Ok(Rate {
            value: f,
            source: "KUSER_SHARED_DATA.QpcFrequency".into(),
        });
    }
    for g in ["EtwPerfFreq", "EtwpPerfFreq"] {
        if let Some(va) = ctx.global(g) {
            if let Ok(f) = ctx.space.read_u64(va) {
                if f > 0 {
                    return Ok(Rate {
                        value: f,
                        source: format!("the global {g}"),
                    });
                }
            }
        }
    }
    match inferred_rate(ctx, sessions, 1) {
        Some((f, how)) => Ok(Rate {
            value: f,
            source: format!("{f} Hz {how}"),
        }),
        None => Err(RateError::QpcFrequency),
    }
}

fn cpu_mhz(ctx: &KernelContext<'_>, sessions: &[Session]) -> Result<Rate, RateError> {
    let mut why = Vec::new();
    match ctx.global("EtwCPUSpeedInMHz") {
        Some(va) => match ctx.space.read_u32(va) {
            Ok(m) if m > 0 => {
                return Ok(Rate {
                    value: u64::from(m),
                    source: "the global EtwCPUSpeedInMHz (nominal speed: approximate)".into(),
                })
            }
            Ok(_) => why.push(NoCpuSpeed::GlobalZero(va)),
            Err(e) => why.push(NoCpuSpeed::GlobalUnreadable(e)),
        },
        None => why.push(NoCpuSpeed::NoGlobal),
    }
    match prcb_mhz(ctx) {
        Ok(r) => return Ok(r),
        Err(e) => why.push(e),
    }
    if let Some((per_second, how)) = inferred_rate(ctx, sessions, 3) {
        let mhz = (per_second + 500_000) / 1_000_000;
        if mhz > 0 {
            return Ok(Rate {
                value: mhz,
                source: format!("{mhz} MHz {how}"),
            });
        }
    }
    why.push(NoCpuSpeed::NoInference);
    Err(RateError::CpuSpeed(why))
}

/// `KPRCB.MHz` of the first CPU that has it: by the `_KPRCB` layout, else by the KDBG's
/// `OffsetPrcbMhz` (the field the debugger uses). CPUs that disagree are said so.
fn prcb_mhz(ctx: &KernelContext<'_>) -> Result<Rate, NoCpuSpeed> {
    let (offset, via) = match ctx
        .symbols
        .layout("_KPRCB")
        .and_then(|l| l.field("MHz"))
        .map(|f| f.offset)
    {
        Some(o) => (o, "_KPRCB.MHz"),
        None => match ctx.kdbg().and_then(|k| k.offset_prcb_mhz()) {
            Some(o) => (o, "KPRCB.MHz (at the KDBG's OffsetPrcbMhz)"),
            None => return Err(NoCpuSpeed::NoPrcbOffset),
        },
    };
    let cpus = u64::from(ctx.processors()).clamp(1, 2048);
    let mut values = Vec::new();
    let mut errors = Vec::new();
    for cpu in 0..cpus {
        match crate::kernel::processes::prcb(ctx, cpu).and_then(|p| {
            ctx.space
                .read_u32(p.offset(offset))
                .map_err(|e| e.to_string())
        }) {
            Ok(m) if m > 0 => values.push((cpu, m)),
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
        if values.len() >= 4 {
            break;
        }
    }
    let Some(&(cpu, m)) = values.first() else {
        return Err(NoCpuSpeed::PrcbZero {
            via,
            first_error: errors.into_iter().next(),
        });
    };
    let disagree = values.iter().any(|&(_, v)| v != m);
    Ok(Rate {
        value: u64::from(m),
        source: format!(
            "{via} of CPU {cpu}{}",
            if disagree {
                " (CPUs disagree; the first is used)"
            } else {
                ""
            }
        ),
    })
}

/// The converter for a session's clock.
pub(crate) fn for_session(ctx: &KernelContext<'_>, facts: &ClockFacts, s: &Session) -> Converter {
    let clock = s.clock_type.unwrap_or(1);
    match clock {
        2 => return Converter::FileTime,
        0 => return Converter::Unknown("clock type 0 (raw) cannot be converted".into()),
        1 | 3 => {}
        c => return Converter::Unknown(format!("unknown clock type {c}")),
    }
    let Some((start, raw_start)) = reference_time(ctx, s) else {
        return Converter::Unknown(format!(
            "logger {}: its ReferenceTime is not readable",
            s.logger_id
        ));
    };
    scaled(
        facts,
        clock,
        start,
        raw_start,
        &format!("logger {}'s ReferenceTime", s.logger_id),
    )
}

/// The converter of clock 1 or 3 anchored at (FILETIME `start`, raw `raw_start`).
fn scaled(facts: &ClockFacts, clock: u64, start: u64, raw_start: u64, anchor: &str) -> Converter {
    match clock {
        1 => match &facts.qpc_frequency {
            Ok(r) => Converter::Scaled {
                start,
                raw_start,
                num: 10_000_000,
                den: r.value,
                how: format!(
                    "{anchor} and QPC frequency {} Hz from {}",
                    r.value, r.source
                ),
            },
            Err(why) => Converter::Unknown(format!("QPC clock: {why}")),
        },
        3 => match &facts.cpu_mhz {
            Ok(r) => Converter::Scaled {
                start,
                raw_start,
                num: 10,
                den: r.value,
                how: format!("{anchor} and CPU speed {} MHz from {}", r.value, r.source),
            },
            Err(why) => Converter::Unknown(format!("CPU-cycle clock: {why}")),
        },
        c => Converter::Unknown(format!("clock type {c} is not scaled")),
    }
}

/// ReferenceTime {StartTime, StartPerfClock} of a logger context.
pub fn reference_time(ctx: &KernelContext<'_>, s: &Session) -> Option<(u64, u64)> {
    let l = ctx.symbols.layout("_WMI_LOGGER_CONTEXT")?;
    let v = View::new(&ctx.space, l, s.address);
    let rt = v.field_va("ReferenceTime").ok()?;
    // ETW_REF_CLOCK: StartTime at +0, StartPerfClock at +8 (§7; layout from the symbols when
    // they have it).
    let (st, sp) = match ctx.symbols.layout("_ETW_REF_CLOCK") {
        Some(r) => (
            r.field("StartTime")?.offset,
            r.field("StartPerfClock")?.offset,
        ),
        None => (0, 8),
    };
    Some((
        ctx.space.read_u64(rt.offset(st)).ok()?,
        ctx.space.read_u64(rt.offset(sp)).ok()?,
    ))
}

/// The converter for timestamps of clock type `clock` that belong to no session (pending
/// blocks): that of a session using the same clock type (the lowest logger id first); for QPC
/// and cycles without such a session, counted from boot (approximate, said so).
pub(crate) fn for_clock(
    ctx: &KernelContext<'_>,
    facts: &ClockFacts,
    sessions: &[Session],
    clock: u64,
) -> Converter {
    if clock == 2 {
        return Converter::FileTime;
    }
    if clock == 0 {
        return Converter::Unknown("clock type 0 (raw) cannot be converted".into());
    }
    let mut candidates: Vec<&Session> = sessions
        .iter()
        .filter(|s| s.clock_type == Some(clock))
        .collect();
    candidates.sort_by_key(|s| s.logger_id);
    for s in &candidates {
        let c = for_session(ctx, facts, s);
        if c.problem().is_none() {
            return c;
        }
    }
    match (candidates.first(), facts.boot_time) {
        (Some(s), _) => for_session(ctx, facts, s),
        (None, Some(boot)) => match scaled(
            facts,
            clock,
            boot,
            0,
            "boot time (the counter taken as 0 at boot: approximate)",
        ) {
            c @ Converter::Scaled { .. } => c,
            u => u,
        },
        (None, None) => Converter::Unknown(format!(
            "no session uses clock type {clock} and the boot time is unknown, so there is no anchor"
        )),
    }
}

/// The clock of raw timestamps `lo..=hi` of one session that no logger context names any more
/// (carved buffers whose context was reused): the clock types (1 QPC, 2 system time, 3 CPU
/// cycles) whose conversion ([`for_clock`]) puts both ends inside the dump's time range, from
/// boot to its SystemTime. Exactly one must fit; otherwise the reason (none fits, or several
/// do: early timestamps of a QPC and of a cycle clock can both look plausible).
pub(crate) fn infer_clock(
    ctx: &KernelContext<'_>,
    facts: &ClockFacts,
    sessions: &[Session],
    (lo, hi): (u64, u64),
) -> Result<(u64, Converter), NoClock> {
    if facts.system_time.is_none() || facts.boot_time.is_none() {
        return Err(NoClock::NoTimeRange);
    }
    let mut fits = Vec::new();
    let mut why_not = Vec::new();
    for clock in 1..=3u64 {
        let conv = for_clock(ctx, facts, sessions, clock);
        if let Some(p) = conv.problem() {
            why_not.push(format!("clock type {clock}: {p}"));
            continue;
        }
        let ends = [lo, hi].map(|t| conv.to_filetime(t));
        match ends {
            [Some(a), Some(b)] => match facts
                .implausible(a, &conv)
                .or_else(|| facts.implausible(b, &conv))
            {
                None => fits.push((clock, conv)),
                Some(w) => why_not.push(format!("clock type {clock}: {w}")),
            },
            _ => why_not.push(format!("clock type {clock}: not convertible")),
        }
    }
    match fits.len() {
        1 => Ok(fits.remove(0)),
        0 => Err(NoClock::NoneFits { lo, hi, why_not }),
        _ => Err(NoClock::SeveralFit {
            lo,
            hi,
            clocks: fits.iter().map(|(c, _)| *c).collect(),
        }),
    }
}

#[cfg(test)]
mod conversion_tests {
    use super::Converter;
    use proptest::prelude::*;

    /// The conversion's definition: the 128-bit quotient (None past 128 bits).
    fn reference(start: u64, raw_start: u64, num: u64, den: u64, ts: u64) -> Option<u64> {
        if den == 0 {
            return None;
        }
        let d = (i128::from(ts) - i128::from(raw_start)).checked_mul(i128::from(num))?
            / i128::from(den);
        u64::try_from(i128::from(start).checked_add(d)?).ok()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        /// The 64-bit path gives the 128-bit quotient, for any values and for a real clock's
        /// (timestamps near the anchor, 10 MHz over a CPU or QPC frequency).
        #[test]
        fn the_64_bit_path_is_the_128_bit_quotient(
            start in prop_oneof![any::<u64>(), 0u64..1 << 60],
            raw_start in prop_oneof![any::<u64>(), 0u64..1 << 50],
            near in prop_oneof![any::<u64>(), 0u64..1 << 40],
            below in any::<bool>(),
            num in prop_oneof![any::<u64>(), Just(10_000_000u64), 0u64..1 << 34],
            den in prop_oneof![any::<u64>(), 0u64..1 << 34, Just(0u64)],
        ) {
            let ts = if below { raw_start.wrapping_sub(near) } else { raw_start.wrapping_add(near) };
            let c = Converter::Scaled { start, raw_start, num, den, how: String::new() };
            prop_assert_eq!(c.to_filetime(ts), reference(start, raw_start, num, den, ts));
        }
    }
}
