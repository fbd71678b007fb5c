//! Pending compact context-switch batches (etw-internals.md §4.1-§4.2): one 0x400-byte block
//! (pool tag 'CCsw') per CPU per clock type, its pointer in the CPU's KPRCB.EtwSupport block.
//! Known offsets (x64), by the build's KPRCB.EtwSupport offset (§4.1): the table
//! [`crate::etw::routes::ETW_SUPPORT_ROUTES`] (pointer group + 8·clock). Other builds: a
//! validated search of the EtwSupport block for pointers to 'CCsw'-tagged allocations whose
//! contents validate (x64 and x86: 8- or 4-byte pointers, 16- or 8-byte pool headers). Each
//! block says which method found it.
//!
//! A block found at a documented offset has its clock from its slot. A block found by search
//! has its clock inferred from evidence ([`infer_clocks`]): its timestamps against each clock's
//! range at dump time, its FirstTimeStamp against its StartTick (the same instant in two
//! clocks), and its pointer's slot in the per-CPU group of four pointers (one per clock type,
//! a pointer apart; blocks of one clock sit at the same slot on every CPU). Conflicting
//! evidence leaves the clock unknown, with the reason.

use crate::addr::VirtAddr;
use crate::decode::ccswap::{decode_pending, PendingBlock, PENDING_BLOCK_SIZE};
use crate::decode::names::{maximum_wait_reason, MwrSource};
use crate::etw::clock::{self, ClockFacts};
use crate::etw::loggers::Session;
use crate::etw::routes::etw_support_route;
use crate::kernel::context::KernelContext;
use crate::mem::MemError;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::collections::BTreeMap;
use thiserror::Error;

/// Bytes of the EtwSupport block searched when no offset is known.
const SEARCH_BYTES: u64 = 0x1000;
const TAG_CCSW: [u8; 4] = *b"CCsw";
const MAX_CPUS: u64 = 2048;

/// How a block was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum FoundBy {
    /// A documented offset for this build; the slot gives the clock type.
    KnownOffset { offset: u64 },
    /// The validated search: a pointer at this offset of EtwSupport to a 'CCsw' allocation.
    Search { offset: u64 },
}

impl FoundBy {
    /// The pointer's offset in the EtwSupport block.
    pub fn offset(self) -> u64 {
        match self {
            FoundBy::KnownOffset { offset } | FoundBy::Search { offset } => offset,
        }
    }
}

/// One pending block.
#[derive(Clone, Debug)]
pub struct PendingFound {
    pub cpu: u64,
    /// The clock type: the slot index at a documented offset, or inferred (see `clock_how`).
    pub clock: Option<u64>,
    /// How the clock type was known, or why it is not.
    pub clock_how: String,
    pub block: VirtAddr,
    pub pointer: VirtAddr,
    pub found_by: FoundBy,
    pub decoded: PendingBlock,
}

/// Everything found, and the problems met.
#[derive(Clone, Debug, Default)]
pub struct PendingList {
    pub blocks: Vec<PendingFound>,
    pub warnings: Vec<Warning>,
}

/// The build's `MaximumWaitReason` (the CCSWAP state bias, etw-internals.md §4.3): the
/// `_KWAIT_REASON` enum of the symbols when they have it, else the per-build table. The second
/// value says where it came from.
pub(crate) fn maximum_wait_reason_of(ctx: &KernelContext<'_>) -> (Option<u8>, &'static str) {
    if let Some(v) = ctx
        .symbols
        .enum_value("_KWAIT_REASON", "MaximumWaitReason")
        .and_then(|v| u8::try_from(v).ok())
    {
        let from_file = ctx
            .symbols
            .own_types()
            .enum_value("_KWAIT_REASON", "MaximumWaitReason")
            .is_some();
        return (
            Some(v),
            if from_file {
                "symbols (_KWAIT_REASON.MaximumWaitReason)"
            } else {
                "built-in corpus table (_KWAIT_REASON.MaximumWaitReason of the matched build)"
            },
        );
    }
    match maximum_wait_reason(ctx.build) {
        Some((v, MwrSource::Known)) => (
            Some(v),
            "built-in per-build table (the build's _KWAIT_REASON in the layout corpus)",
        ),
        Some((v, MwrSource::Between(..))) => (
            Some(v),
            "built-in per-build table, inferred: the build lies between two corpus builds with the same MaximumWaitReason (the enum only grows)",
        ),
        None => (
            None,
            "unknown for this build (no _KWAIT_REASON in the symbols, and no corpus build pins it)",
        ),
    }
}

/// Find every CPU's pending blocks (clocks of search-found blocks are left to
/// [`infer_clocks`]).
pub fn find_pending(ctx: &KernelContext<'_>) -> PendingList {
    let mut out = PendingList::default();
    let space = &ctx.space;
    let arch = space.arch();
    // Where KPRCB.EtwSupport is: the kernel's own layout, else confirmed or searched by
    // evidence (etw::etw_support).
    let loc = crate::etw::etw_support::locate(ctx);
    let Some(es_off) = loc.offset else {
        out.warnings.push(
            Warning::new(
                WarningKind::NotFound,
                format!(
                    "pending CCSWAP blocks not searched: {} (build {})",
                    loc.evidence, ctx.build
                ),
            )
            .field("_KPRCB.EtwSupport"),
        );
        return out;
    };
    match loc.how {
        crate::kernel::context::LocatedHow::Searched => out.warnings.push(
            Warning::new(WarningKind::Inferred, loc.evidence.clone()).field("_KPRCB.EtwSupport"),
        ),
        crate::kernel::context::LocatedHow::Unconfirmed => out.warnings.push(
            Warning::new(
                WarningKind::Unconfirmed,
                format!(
                    "{}: pending blocks are looked for through it; if it is wrong, none is found",
                    loc.evidence
                ),
            )
            .field("_KPRCB.EtwSupport"),
        ),
        _ => {}
    }
    let (mwr, _) = maximum_wait_reason_of(ctx);
    let cpus = u64::from(ctx.processors()).clamp(1, MAX_CPUS);
    for cpu in 0..cpus {
        let es = match crate::kernel::processes::prcb(ctx, cpu).and_then(|prcb| {
            space
                .read_ptr(prcb.offset(es_off))
                .map_err(|e| format!("KPRCB.EtwSupport: {e}"))
        }) {
            Ok(p) if !p.is_null() => p,
            Ok(_) => continue,
            Err(e) => {
                out.warnings.push(
                    Warning::new(WarningKind::Unreadable, format!("CPU {cpu}: {e}")).cpu(cpu),
                );
                continue;
            }
        };
        // The documented offsets are x64 ones (§4.1): the build's group, by its KPRCB offset or
        // build; else a documented group this very block holds (every non-NULL pointer of the
        // group a 'CCsw' block, at least one); else (x86 too) the search.
        let documented = etw_support_route(arch, ctx.build, es_off).map(|r| {
            (
                r.pending,
                format!("the documented EtwSupport+{:#x}", r.pending),
            )
        });
        match documented.or_else(|| group_by_evidence(ctx, es)) {
            Some((base, how)) => read_group(ctx, (cpu, es), base, &how, mwr, &mut out),
            None => search(ctx, cpu, es, mwr, &mut out),
        }
    }
    out
}

/// A documented pending-pointer group (§4.1) that the EtwSupport block at `es` holds, where the
/// build is not one the documentation names: the group whose non-NULL pointers all lead to
/// 'CCsw' blocks (at least one), when exactly one documented group does.
fn group_by_evidence(ctx: &KernelContext<'_>, es: VirtAddr) -> Option<(u64, String)> {
    let space = &ctx.space;
    if !space.arch().is_64bit() {
        return None;
    }
    let fits: Vec<u64> = crate::etw::routes::ETW_SUPPORT_ROUTES
        .iter()
        .map(|r| r.pending)
        .filter(|&base| {
            let ptrs: Vec<VirtAddr> = (0..4u64)
                .filter_map(|c| space.read_ptr(es.offset(base + 8 * c)).ok())
                .filter(|p| !p.is_null())
                .collect();
            !ptrs.is_empty()
                && ptrs
                    .iter()
                    .all(|&p| crate::kernel::pool::tag_before(space, p) == Some(TAG_CCSW))
        })
        .collect();
    match fits.as_slice() {
        [base] => Some((
            *base,
            format!("EtwSupport+{base:#x}, a documented group this block holds (every non-NULL pointer there leads to a 'CCsw' block), inferred"),
        )),
        _ => None,
    }
}

/// The pending blocks of one CPU's pointer group at `es + base` (slot = clock type).
fn read_group(
    ctx: &KernelContext<'_>,
    (cpu, es): (u64, VirtAddr),
    base: u64,
    how: &str,
    mwr: Option<u8>,
    out: &mut PendingList,
) {
    let space = &ctx.space;
    let psize = space.arch().pointer_size();
    for clock in 0..4u64 {
        let offset = base + psize * clock;
        let pointer = es.offset(offset);
        let block = match space.read_ptr(pointer) {
            Ok(p) if !p.is_null() => p,
            Ok(_) => continue,
            Err(e) => {
                out.warnings.push(
                    Warning::new(
                        WarningKind::Unreadable,
                        format!("CPU {cpu} clock {clock}: pointer at {pointer}: {e}"),
                    )
                    .cpu(cpu)
                    .at(pointer),
                );
                continue;
            }
        };
        match read_block(ctx, block, mwr) {
            Ok(decoded) => out.blocks.push(PendingFound {
                cpu,
                clock: Some(clock),
                clock_how: format!("its pointer's slot {clock} at {how}"),
                block,
                pointer,
                found_by: FoundBy::KnownOffset { offset },
                decoded,
            }),
            Err(why) => out.warnings.push(
                Warning::new(
                    WarningKind::Anomaly,
                    format!("CPU {cpu} clock {clock}: block at {block}: {why}"),
                )
                .cpu(cpu)
                .at(block),
            ),
        }
    }
}

/// Why a pending block is not used.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
enum BadBlock {
    #[error("{0}")]
    Unreadable(MemError),
    /// What the decoder's validation found wrong.
    #[error("{0}")]
    Invalid(String),
}

fn read_block(
    ctx: &KernelContext<'_>,
    block: VirtAddr,
    mwr: Option<u8>,
) -> Result<PendingBlock, BadBlock> {
    let bytes = ctx
        .space
        .read_vec(block, PENDING_BLOCK_SIZE)
        .map_err(BadBlock::Unreadable)?;
    decode_pending(&bytes, mwr).map_err(BadBlock::Invalid)
}

fn search(ctx: &KernelContext<'_>, cpu: u64, es: VirtAddr, mwr: Option<u8>, out: &mut PendingList) {
    let space = &ctx.space;
    let width = space.arch().width();
    let psize = space.arch().pointer_size() as usize;
    // Small-pool allocations are aligned to the POOL_HEADER size (16 on x64, 8 on x86).
    let align = crate::kernel::pool::header_size(space);
    let mut area = vec![0u8; SEARCH_BYTES as usize];
    let n = space.read_prefix(es, &mut area);
    for off in (0..n.saturating_sub(psize - 1)).step_by(psize) {
        let mut raw = [0u8; 8];
        raw[..psize].copy_from_slice(&area[off..off + psize]);
        let v = VirtAddr::new(u64::from_le_bytes(raw));
        if !v.is_kernel(width) || v.get() % align != 0 {
            continue;
        }
        if crate::kernel::pool::tag_before(space, v) != Some(TAG_CCSW) {
            continue;
        }
        let pointer = es.offset(off as u64);
        match read_block(ctx, v, mwr) {
            Ok(decoded) => out.blocks.push(PendingFound {
                cpu,
                clock: None,
                clock_how: "found by search; clock not yet inferred".into(),
                block: v,
                pointer,
                found_by: FoundBy::Search { offset: off as u64 },
                decoded,
            }),
            Err(why) => out.warnings.push(
                Warning::new(
                    WarningKind::Anomaly,
                    format!(
                        "CPU {cpu}: 'CCsw' block at {v} (pointer at EtwSupport+{off:#x}) fails validation: {why}"
                    ),
                )
                .cpu(cpu)
                .at(v),
            ),
        }
    }
}

/// What a block's timestamps say about one candidate clock.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fit {
    /// Every test that could be made passed (the tests named).
    Fits(String),
    /// A test failed.
    Fails(String),
    /// No test could be made.
    Untestable(String),
}

/// Slack of the StartTick test: four ticks plus 1% of the uptime.
fn tick_slack(facts: &ClockFacts, uptime: u64) -> u64 {
    4 * facts.tick + uptime / 100
}

/// Whether a block's timestamps fit clock `clock` (1 QPC, 2 system time, 3 cycles).
fn fit(
    ctx: &KernelContext<'_>,
    facts: &ClockFacts,
    sessions: &[Session],
    b: &PendingBlock,
    clock: u64,
) -> Fit {
    let conv = clock::for_clock(ctx, facts, sessions, clock);
    if let Some(why) = conv.problem() {
        return Fit::Untestable(why.to_string());
    }
    let mut stamps = vec![("LastTimeStamp", b.last_timestamp)];
    if let Some(batch) = &b.batch {
        stamps.push(("FirstTimeStamp", batch.first_time));
    }
    stamps.retain(|&(_, t)| t != 0);
    if stamps.is_empty() {
        return Fit::Untestable("the block holds no timestamp".into());
    }
    for &(name, t) in &stamps {
        let Some(ft) = conv.to_filetime(t) else {
            return Fit::Fails(format!("{name} {t:#x} does not convert"));
        };
        if let Some(why) = facts.implausible(ft, &conv) {
            return Fit::Fails(format!("{name} {t:#x} under this clock: {why}"));
        }
    }
    let mut tests = "its timestamps convert into [boot, dump]".to_string();
    if let (Some(batch), Some(boot)) = (&b.batch, facts.boot_time) {
        if let Some(ft) = conv.to_filetime(batch.first_time) {
            let uptime = ft.saturating_sub(boot);
            let by_tick = u64::from(b.start_tick) * facts.tick;
            if uptime.abs_diff(by_tick) > tick_slack(facts, uptime) {
                return Fit::Fails(format!(
                    "FirstTimeStamp would be {:.3} s after boot, StartTick {} says {:.3} s",
                    uptime as f64 / 1e7,
                    b.start_tick,
                    by_tick as f64 / 1e7
                ));
            }
            tests.push_str(" and its FirstTimeStamp agrees with its StartTick");
        }
    }
    Fit::Fits(tests)
}

/// The clocks a search-found block may have: the clock types of the kernel sessions listed
/// (0-3), all four when none is listed.
fn candidate_clocks(sessions: &[Session]) -> Vec<u64> {
    let in_use: std::collections::BTreeSet<u64> = sessions
        .iter()
        .filter(|s| crate::etw::loggers::is_kernel_session(s))
        .filter_map(|s| s.clock_type)
        .filter(|&c| c <= 3)
        .collect();
    if in_use.is_empty() {
        (0..=3).collect()
    } else {
        in_use.into_iter().collect()
    }
}

/// The clock block `b`'s timestamps leave among `candidates` (None unless exactly one), and
/// the note saying how each candidate fared.
fn clock_by_time(
    ctx: &KernelContext<'_>,
    facts: &ClockFacts,
    sessions: &[Session],
    b: &PendingBlock,
    candidates: &[u64],
) -> (Option<u64>, String) {
    let fits: Vec<(u64, Fit)> = candidates
        .iter()
        .map(|&c| {
            let f = if c == 0 {
                Fit::Untestable("raw timestamps cannot be converted or tested".into())
            } else {
                fit(ctx, facts, sessions, b, c)
            };
            (c, f)
        })
        .collect();
    let possible: Vec<u64> = fits
        .iter()
        .filter(|(_, f)| !matches!(f, Fit::Fails(_)))
        .map(|&(c, _)| c)
        .collect();
    let text = format!(
        "kernel sessions use clocks {candidates:?}; {}",
        fits.iter()
            .map(|(c, f)| {
                let (verdict, why) = match f {
                    Fit::Fits(w) => ("fits", w),
                    Fit::Fails(w) => ("fails", w),
                    Fit::Untestable(w) => ("cannot be excluded", w),
                };
                format!("clock {c} {verdict}: {why}")
            })
            .collect::<Vec<_>>()
            .join("; ")
    );
    ((possible.len() == 1).then(|| possible[0]), text)
}

/// The pointer group the timed blocks imply: each block whose clock is known (`p.clock`) or
/// told by its timestamps (`by_time`) gives the group's base (its offset − slot·`psize`). Returns
/// how many blocks imply each base, and the base when they agree (a warning when they do not).
fn pointer_group(
    list: &mut PendingList,
    by_time: &[Option<u64>],
    psize: u64,
) -> (BTreeMap<u64, usize>, Option<u64>) {
    let mut bases: BTreeMap<u64, usize> = BTreeMap::new();
    for (p, c) in list.blocks.iter().zip(by_time) {
        let slot = p.clock.or(*c);
        if let Some(base) = slot.and_then(|c| p.found_by.offset().checked_sub(c * psize)) {
            *bases.entry(base).or_default() += 1;
        }
    }
    let group = match bases.len() {
        1 => bases.keys().next().copied(),
        _ => None,
    };
    if bases.len() > 1 {
        list.warnings.push(Warning::new(WarningKind::Conflict, format!(
            "pending blocks: the clock evidence implies different pointer groups ({}): conflicting blocks get no clock",
            bases
                .iter()
                .map(|(b, n)| format!("EtwSupport+{b:#x} by {n} blocks"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    (bases, group)
}

/// Give every search-found block a clock type, from the evidence (module doc), and check every
/// block's timestamps against the dump's time range.
pub fn infer_clocks(
    ctx: &KernelContext<'_>,
    facts: &ClockFacts,
    sessions: &[Session],
    list: &mut PendingList,
) {
    let psize = ctx.space.arch().pointer_size();
    // 0. Candidate clocks: a block of clock c exists only while a kernel session of clock c
    // takes compact context switches (§4.1: EtwpCCSwapStart, CCSwapNumLoggersPerClockType),
    // so the clock types of the kernel sessions listed; all four when none is listed.
    let candidates = candidate_clocks(sessions);
    // 1. Timestamps, per block: a clock is excluded only by a failed test; an untestable clock
    // (raw, or a rate that is unknown) cannot be excluded.
    let mut by_time: Vec<Option<u64>> = Vec::with_capacity(list.blocks.len());
    let mut notes: Vec<String> = Vec::with_capacity(list.blocks.len());
    for p in &list.blocks {
        if p.clock.is_some() {
            by_time.push(None);
            notes.push(String::new());
            continue;
        }
        let (c, text) = clock_by_time(ctx, facts, sessions, &p.decoded, &candidates);
        by_time.push(c);
        notes.push(text);
    }
    // 2. The pointer group: each timed block implies the group's base (offset − slot·psize).
    let (bases, group) = pointer_group(list, &by_time, psize);
    // 3. Decide.
    for (i, p) in list.blocks.iter_mut().enumerate() {
        if p.clock.is_some() {
            continue;
        }
        let off = p.found_by.offset();
        let by_slot = group.and_then(|b| {
            let d = off.checked_sub(b)?;
            (d % psize == 0 && d / psize < 4).then_some(d / psize)
        });
        match (by_time[i], by_slot) {
            (Some(c), Some(s)) if c == s => {
                let base = group.unwrap_or(0);
                let others = bases.get(&base).copied().unwrap_or(1).saturating_sub(1);
                p.clock = Some(c);
                p.clock_how = format!(
                    "inferred: clock {c} from its timestamps ({}); its pointer is slot {s} of the group at EtwSupport+{base:#x}, {}",
                    notes[i],
                    if others > 0 {
                        format!("as {others} other blocks' clocks imply")
                    } else {
                        "no other block to compare with".into()
                    }
                );
            }
            (None, Some(s)) if candidates.contains(&s) => {
                p.clock = Some(s);
                p.clock_how = format!(
                    "inferred: its pointer's slot {s} in the group at EtwSupport+{:#x} (other CPUs' blocks place the group); its timestamps alone do not decide ({})",
                    group.unwrap_or(0),
                    notes[i]
                );
            }
            (Some(c), s) => {
                p.clock_how = format!(
                    "unknown: its timestamps say clock {c} but its pointer at EtwSupport+{off:#x} {} ({})",
                    match s {
                        Some(s) => format!("is slot {s} of the group"),
                        None => "is not in the group the other blocks imply".into(),
                    },
                    notes[i]
                );
            }
            (None, _) => {
                p.clock_how = format!(
                    "unknown: its timestamps leave more than one clock (or none) and no pointer group places it ({})",
                    notes[i]
                );
            }
        }
    }
    // 4. Every block with a clock: its timestamps within the dump's time range.
    for p in &list.blocks {
        let Some(c) = p.clock else { continue };
        if let Fit::Fails(why) = fit(ctx, facts, sessions, &p.decoded, c) {
            list.warnings.push(
                Warning::new(
                    WarningKind::Time,
                    format!(
                        "pending block {} (CPU {}, clock {c}): {why}",
                        p.block, p.cpu
                    ),
                )
                .cpu(p.cpu)
                .at(p.block),
            );
        }
    }
}
