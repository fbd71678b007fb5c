//! Session clocks to UTC (etw-internals.md §7): 2 system time is already a FILETIME; 1 QPC
//! and 3 CPU cycles are anchored with the logger's ReferenceTime (ETW_REF_CLOCK {StartTime,
//! StartPerfClock}) and scaled by the performance frequency (KUSER_SHARED_DATA.QpcFrequency)
//! or the CPU speed (EtwCPUSpeedInMHz); 0 raw cannot be converted.

use crate::etw::loggers::Session;
use crate::kernel::context::KernelContext;
use crate::kernel::kuser::KUserSharedData;
use crate::kernel::view::View;

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
                let d =
                    (i128::from(ts) - i128::from(*raw_start)) * i128::from(*num) / i128::from(*den);
                u64::try_from(i128::from(*start) + d).ok()
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
}

/// The converter for a session's clock.
pub fn for_session(ctx: &KernelContext<'_>, s: &Session) -> Converter {
    let clock = s.clock_type.unwrap_or(1);
    match clock {
        2 => return Converter::FileTime,
        0 => return Converter::Unknown("clock type 0 (raw) cannot be converted".into()),
        _ => {}
    }
    let Some((start, raw_start)) = reference_time(ctx, s) else {
        return Converter::Unknown(format!(
            "logger {}: its ReferenceTime is not readable",
            s.logger_id
        ));
    };
    match clock {
        1 => match KUserSharedData::qpc_frequency(&ctx.space, ctx.build) {
            Some(f) => Converter::Scaled {
                start,
                raw_start,
                num: 10_000_000,
                den: f,
                how: format!(
                    "logger {}'s ReferenceTime and KUSER_SHARED_DATA.QpcFrequency {f}",
                    s.logger_id
                ),
            },
            None => Converter::Unknown(
                "QPC clock: KUSER_SHARED_DATA.QpcFrequency is not in the dump".into(),
            ),
        },
        3 => match ctx.global_u32("EtwCPUSpeedInMHz").filter(|&m| m > 0) {
            Some(mhz) => Converter::Scaled {
                start,
                raw_start,
                num: 10,
                den: u64::from(mhz),
                how: format!(
                    "logger {}'s ReferenceTime and EtwCPUSpeedInMHz {mhz} (approximate: the nominal CPU speed)",
                    s.logger_id
                ),
            },
            None => Converter::Unknown(
                "CPU-cycle clock: EtwCPUSpeedInMHz is unknown (no symbol, or not in the dump)"
                    .into(),
            ),
        },
        c => Converter::Unknown(format!("unknown clock type {c}")),
    }
}

/// ReferenceTime {StartTime, StartPerfClock} of a logger context.
fn reference_time(ctx: &KernelContext<'_>, s: &Session) -> Option<(u64, u64)> {
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

/// The converter for pending blocks of clock slot `clock`: that of a session using the same
/// clock type (the NT Kernel Logger first).
pub fn for_clock(ctx: &KernelContext<'_>, sessions: &[Session], clock: Option<u64>) -> Converter {
    let Some(c) = clock else {
        return Converter::Unknown(
            "the block's clock type is unknown (found by search, not at a documented offset)"
                .into(),
        );
    };
    if c == 2 {
        return Converter::FileTime;
    }
    let mut candidates: Vec<&Session> = sessions
        .iter()
        .filter(|s| s.clock_type == Some(c))
        .collect();
    candidates.sort_by_key(|s| s.logger_id);
    match candidates.first() {
        Some(s) => for_session(ctx, s),
        None => Converter::Unknown(format!(
            "no session uses clock type {c}, so there is no reference time to anchor it"
        )),
    }
}
