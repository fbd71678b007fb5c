//! `etwdump cswitch`: context switches per CPU, from the pending CCSWAP blocks (never flushed)
//! and from 0x0525 batches and 0x0524 CSwitch events in the recovered buffers.
//!
//! Times: see [`crate::etw::clock`]. Process names: the process list (`kernel::processes`),
//! "name (pid)"; TID 0 is "Idle"; null when the thread is not in the list.
//!
//! **Order.** Per CPU (CPUs ascending), rows come in UTC order: every stream (a pending block,
//! a buffer) is keyed by its records' converted FILETIMEs, whatever its clock. Records whose
//! clock cannot be converted follow the CPU's timed rows, one clock group after another (in
//! the order the groups were made: pending blocks, then sessions), each in raw order: a raw
//! value of one clock says nothing about the instant of another's. (Before issue 26 the merge
//! keyed every stream by its raw values, so a CPU's QPC, cycle-counter and FILETIME streams
//! were concatenated: one backward jump in time per CPU and clock.)
//!
//! **One row per switch.** A context switch traced by several sessions (a CSwitch event in
//! one, a compact batch or a pending block of another; the pending blocks of two clock types)
//! is one row whose `sources` lists every record that saw it. Records are the same switch
//! only on evidence (`Dedup`):
//!
//! * both were recorded by different *recorders* (a logger's buffers, or one pending block):
//!   a recorder never logs a switch twice, and two switches of one batch may share threads and
//!   time (a delta of 0);
//! * the same CPU, known (a buffer of a session without per-CPU buffers may not tell it), the
//!   same old thread and the same new thread, both known (the last switch of a flushed batch
//!   has no new thread: it is never merged);
//! * both have a UTC time (an unconvertible clock is never merged on time) and the times
//!   differ by at most the sum of the two clocks' resolutions: one raw unit in 100 ns, rounded
//!   up (QPC: 10^7 / frequency; cycles: 10 / MHz; system time: 100 ns from Windows 10, whose
//!   ETW uses KeQuerySystemTimePrecise). Before Windows 10 a system-time session's clock
//!   advances by timer ticks (15.6 ms): two switches of the same threads within a tick cannot
//!   be told apart, so its records are never merged (a warning counts them);
//! * the match is unambiguous: the connected set of records linked by the rules above has at
//!   most one record per recorder and every two of its records match. Otherwise none of them
//!   is merged and a warning counts them.
//!
//! The merged row's fields are those of its richest record (an event, which carries the new
//! thread's priority and the wait mode; then a batch; then a pending switch), its `sources`
//! every record in time order. Conversions are exact in the forge; on real memory a
//! cycle-counter time converted at the nominal speed may be off by more than the resolution,
//! and such records then stay apart (listed twice, never wrongly merged). `--per-record`
//! (`stream_with(.., per_record = true)`) gives one row per record, in the same order.

use crate::addr::VirtAddr;
use crate::decode::ccswap::{self, CompactSwitch};
use crate::decode::cswitch;
use crate::decode::names::{decimal, thread_state, wait_mode, wait_reason};
use crate::etl::records;
use crate::etw::ccswap::{maximum_wait_reason_of, FoundBy, PendingFound};
use crate::etw::clock::{self, ClockFacts, TimeFlags};
use crate::etw::source::EtwSource;
use crate::kernel::context::KernelContext;
use crate::kernel::processes;
use crate::symbols::Symbols;
use crate::text::Untrusted;
use crate::time::filetime_to_iso8601;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

mod etl;
pub use etl::{stream_etl, EtlCswitchFile};

/// One context switch.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct SwitchRow {
    pub cpu: Option<u64>,
    /// The raw clock value (`raw_timestamp` in JSON and CSV).
    #[serde(rename = "raw_timestamp")]
    pub timestamp: u64,
    /// ISO-8601 UTC; null when the clock cannot be converted (a warning says why).
    pub time: Option<String>,
    /// The same as a FILETIME (for sorting and drawing).
    #[serde(skip)]
    pub filetime: Option<u64>,
    /// "after_dump" or "before_boot" when the converted time cannot be right (a warning names
    /// the anchor used); such rows are left out of `--last` and the SVG chart.
    pub time_flag: Option<&'static str>,
    pub old_tid: u32,
    pub old_process: Option<crate::text::Untrusted>,
    /// The process id of the old thread's process, as the process column names it (the
    /// dump's thread list: the process the thread belongs to when the memory was taken; 0 for
    /// the idle thread); null when the thread is not in the list.
    pub old_pid: Option<u32>,
    pub new_tid: Option<u32>,
    pub new_process: Option<crate::text::Untrusted>,
    /// The new thread's process id (as `old_pid`).
    pub new_pid: Option<u32>,
    pub old_priority: Option<i8>,
    pub new_priority: Option<i8>,
    /// The names are shared (one per value in a listing, not one per row).
    pub old_state: Option<Untrusted>,
    pub old_wait_reason: Option<Untrusted>,
    pub old_wait_mode: Option<Untrusted>,
    /// Compact switches (batches, pending blocks): OldThreadStateWr as packed — a wait reason
    /// below the build's MaximumWaitReason, else MaximumWaitReason + state. When that bias is
    /// not known for the build, `old_state` and `old_wait_reason` stay null and this raw value
    /// is all there is (a warning says so). Null for CSwitch events, which carry both fields.
    pub old_state_wr: Option<u8>,
    pub new_thread_wait_time: Option<u32>,
    /// "event", "batch" or "pending".
    pub source: &'static str,
    pub logger_id: Option<u64>,
    /// Pending blocks: the clock type slot and how the block was found.
    pub clock: Option<u64>,
    pub found_by: Option<FoundBy>,
    /// Every record that saw this switch (one in `--per-record` mode), in time order: the
    /// same switch traced by several sessions is one row (module documentation).
    pub sources: Vec<SwitchSource>,
}

/// One record of a switch: which session or pending block saw it, when in its own clock, and
/// where the record is.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct SwitchSource {
    /// "event", "batch" or "pending".
    pub source: &'static str,
    pub logger_id: Option<u64>,
    /// The record's raw clock value (its UTC time is the row's within the clocks'
    /// resolutions).
    pub raw_timestamp: u64,
    /// The clock type (0 raw, 1 QPC, 2 system time, 3 CPU cycles) when known.
    pub clock: Option<u64>,
    /// The buffer's virtual address (events and batches; null for a unit without one, e.g. a
    /// triage dump's secondary data).
    pub buffer: Option<VirtAddr>,
    /// The record's offset in its buffer (events and batches).
    pub offset: Option<u64>,
    /// The pending block's address (pending switches).
    pub block: Option<VirtAddr>,
    /// The switch's index in its batch or pending block (0-based; null for events).
    pub index: Option<u32>,
    /// An .etl file's record (`etl --cswitch`): the file as named on the command line (a
    /// file name is shown escaped, like text from the input); `offset` is then the record's
    /// offset in the file (absent from a dump's rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<crate::text::Untrusted>,
}

impl SwitchRow {
    /// The sources for a table: `event`, or `event+pending` for a switch seen twice.
    pub(crate) fn source_label(&self) -> String {
        let mut l = String::new();
        self.push_source_label(&mut l);
        l
    }

    /// [`Self::source_label`] appended to `out`.
    pub(crate) fn push_source_label(&self, out: &mut String) {
        if self.sources.len() <= 1 {
            out.push_str(self.source);
            return;
        }
        for (i, s) in self.sources.iter().enumerate() {
            if i > 0 {
                out.push('+');
            }
            out.push_str(s.source);
        }
    }
}

/// Names of thread states, wait reasons and wait modes: the symbol file's enums when it has
/// them (they follow the build), else the built-in tables; unknown values stay numbers. Each
/// of the 256 values' name is made once.
struct Names {
    states: Vec<Untrusted>,
    wait_reasons: Vec<Untrusted>,
    wait_modes: Vec<Untrusted>,
}

impl Names {
    /// `symbols`: None for an .etl file (the built-in tables only). A name the symbols give
    /// that is the built-in table's, and the number shown for a value neither names, are
    /// static (nothing is counted when millions of rows share them).
    fn new(symbols: Option<&Symbols>) -> Names {
        let table = |en: &str, f: fn(u8) -> Option<&'static str>| -> Vec<Untrusted> {
            (0..=255u8)
                .map(|x| {
                    let builtin = f(x);
                    match symbols.and_then(|s| s.enum_name(en, i64::from(x))) {
                        Some(n) if Some(n) != builtin => Untrusted::new(n),
                        _ => Untrusted::from_static(builtin.unwrap_or_else(|| decimal(x))),
                    }
                })
                .collect()
        };
        Names {
            states: table("_KTHREAD_STATE", thread_state),
            wait_reasons: table("_KWAIT_REASON", wait_reason),
            // The wait mode's names are the built-in table's (KPROCESSOR_MODE).
            wait_modes: (0..=255u8)
                .map(|x| Untrusted::from_static(wait_mode(x).unwrap_or_else(|| decimal(x))))
                .collect(),
        }
    }
    fn pick(t: &[Untrusted], v: Option<u8>) -> Option<Untrusted> {
        v.and_then(|x| t.get(usize::from(x)).cloned())
    }
    fn state(&self, v: Option<u8>) -> Option<Untrusted> {
        Self::pick(&self.states, v)
    }
    fn wait_reason(&self, v: Option<u8>) -> Option<Untrusted> {
        Self::pick(&self.wait_reasons, v)
    }
    fn wait_mode(&self, v: Option<u8>) -> Option<Untrusted> {
        Self::pick(&self.wait_modes, v)
    }
}

/// Where a switch was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Event,
    Batch,
    Pending,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Event => "event",
            Kind::Batch => "batch",
            Kind::Pending => "pending",
        }
    }
}

/// The merge order of a record on its CPU: (0, 0, FILETIME) when its clock converts, else
/// (1, its group, raw value): after the timed rows, group by group.
type Key = (u8, u64, u64);

/// A switch as decoded, before names and times are attached (small: millions of these may
/// be held while per-CPU streams are merged).
#[derive(Clone, Copy, Debug)]
struct Raw {
    key: Key,
    ts: u64,
    /// The record's offset in its unit (events and batches).
    offset: u32,
    /// The switch's index in its batch or pending block.
    index: u32,
    old_tid: u32,
    new_tid: Option<u32>,
    old_priority: Option<i8>,
    new_priority: Option<i8>,
    old_state: Option<u8>,
    old_wait_reason: Option<u8>,
    old_wait_mode: Option<u8>,
    old_state_wr: Option<u8>,
    new_thread_wait_time: Option<u32>,
    kind: Kind,
}

fn compact_raw(s: &CompactSwitch, kind: Kind, offset: usize, index: usize) -> Raw {
    Raw {
        key: (0, 0, 0),
        ts: s.time,
        offset: offset as u32,
        index: index as u32,
        old_tid: s.old_tid,
        new_tid: s.new_tid,
        old_priority: s.old_priority,
        new_priority: None,
        old_state: s.old_state,
        old_wait_reason: s.old_wait_reason,
        old_wait_mode: None,
        old_state_wr: s.old_state_wr,
        new_thread_wait_time: s.new_thread_wait_time,
        kind,
    }
}

/// The switches of one buffer (records from `first` to `valid`), in record order (0x0524
/// events and 0x0525 batches).
fn buffer_switches(data: &[u8], first: usize, valid: usize, mwr: Option<u8>) -> Vec<Raw> {
    let mut out = Vec::new();
    each_switch(data, first, valid, mwr, |r| out.push(r));
    out
}

/// [`buffer_switches`], each switch given to `out` instead of kept.
fn each_switch(data: &[u8], first: usize, valid: usize, mwr: Option<u8>, mut out: impl FnMut(Raw)) {
    records::walk_from(data, first, valid, |r| {
        let (Some(payload), Some(ts)) = (r.perfinfo_payload(data), r.perfinfo_timestamp(data))
        else {
            return;
        };
        match r.hook {
            Some(0x0524) => {
                if let Some(c) = cswitch::decode(payload, r.version) {
                    out(Raw {
                        key: (0, 0, 0),
                        ts,
                        offset: r.offset as u32,
                        index: 0,
                        old_tid: c.old_tid,
                        new_tid: Some(c.new_tid),
                        old_priority: Some(c.old_priority),
                        new_priority: Some(c.new_priority),
                        old_state: Some(c.old_state),
                        old_wait_reason: (c.old_state == 5).then_some(c.old_wait_reason),
                        old_wait_mode: Some(c.old_wait_mode),
                        old_state_wr: None,
                        new_thread_wait_time: c.new_thread_wait_time,
                        kind: Kind::Event,
                    });
                }
            }
            Some(0x0525) => {
                let batch = ccswap::decode(payload, mwr);
                for (i, sw) in batch.switches.iter().enumerate() {
                    out(compact_raw(sw, Kind::Batch, r.offset, i));
                }
            }
            _ => {}
        }
    });
}

/// The smallest merge key and the largest raw time of unit `u`'s switches (group `g`, clock
/// `conv`); None when it has none or cannot be read.
fn unit_range(
    src: &EtwSource<'_, '_>,
    u: &crate::etw::source::TraceUnit,
    conv: &clock::Converter,
    g: usize,
    mwr: Option<u8>,
) -> Option<(Key, u64)> {
    let data = src.bytes(u)?;
    let mut range: Option<(Key, u64)> = None;
    each_switch(&data, u.first_record, u.valid, mwr, |r| {
        // The smallest key (a time that cannot be converted keys after every timed one, so
        // the smallest raw value need not have it).
        let k = key_of(conv, g, r.ts);
        range = Some(match range {
            None => (k, r.ts),
            Some((f, l)) => (f.min(k), l.max(r.ts)),
        });
    });
    range
}

/// [`unit_range`] of each (unit, group) of `todo`, in its order, on up to `threads` threads
/// (each unit is read and decoded: the longest step before the first row).
fn unit_ranges(
    src: &EtwSource<'_, '_>,
    groups: &[Group],
    todo: &[(usize, usize)],
    mwr: Option<u8>,
    threads: usize,
) -> Vec<Option<(Key, u64)>> {
    super::in_order(todo, threads, |&(i, g)| {
        let u = src.all_units().get(i)?;
        unit_range(src, u, &groups.get(g)?.conv, g, mwr)
    })
}

/// A set of switches that share a clock: one pending block, or one session's buffers. Counts
/// the implausible times met for the warning said at the end.
struct Group {
    conv: clock::Converter,
    whose: String,
    logger_id: Option<u64>,
    /// Pending blocks: the clock type slot.
    clock: Option<u64>,
    /// The clock type of the group's records (pending: the slot's; sessions: the context's).
    clock_type: Option<u64>,
    found_by: Option<FoundBy>,
    /// Pending blocks: the block's address.
    block: Option<VirtAddr>,
    /// One raw unit in 100 ns, rounded up (None: the clock cannot be converted).
    resolution: Option<u64>,
}

/// What the rows of one [`Group`] counted as they were given (kept apart from the plan, which
/// the thread decoding streams ahead of the merge reads at the same time).
#[derive(Default)]
struct Tally {
    rows: usize,
    flags: TimeFlags,
}

/// One raw unit of `conv`'s clock in 100 ns, rounded up, at least 1 (module documentation);
/// None when it cannot be converted, or when its resolution is too coarse to tell switches
/// apart (system time before Windows 10).
fn resolution(conv: &clock::Converter, build: u32) -> Option<u64> {
    match conv {
        // KeQuerySystemTimePrecise from Windows 10 on (etw-internals.md §7); before, the
        // system time advances by clock ticks.
        clock::Converter::FileTime => (build >= 10240).then_some(1),
        clock::Converter::Scaled { num, den, .. } => (*den > 0).then(|| num.div_ceil(*den).max(1)),
        clock::Converter::Unknown(_) => None,
    }
}

/// Where the units of [`Source::Unit`] are: the dump's ETW source, or .etl files.
enum Feed<'c, 'd> {
    /// One per listing (never moved while rows stream): its size does not matter.
    Dump(Box<EtwSource<'c, 'd>>),
    Etl(etl::EtlFeed),
}

/// Where a stream's switches come from.
enum Source {
    /// Already decoded (a pending block: at most a few hundred switches).
    Rows(Vec<Raw>),
    /// A unit of the dump's ETW source (a buffer, a saved window), decoded when the merge
    /// reaches its first switch.
    Unit(usize),
}

/// The switches of one CPU from one source, in time order once opened.
struct Stream {
    cpu: Option<u64>,
    group: usize,
    source: Source,
    first_key: Key,
    last_ts: u64,
}

/// The merge key of raw value `ts` of group `g` ([`Key`]).
fn key_of(conv: &clock::Converter, g: usize, ts: u64) -> Key {
    match conv.to_filetime(ts) {
        Some(ft) => (0, 0, ft),
        None => (1, g as u64, ts),
    }
}

/// Bytes of decoded switches the per-CPU merge holds at once before it gives up strict order
/// (issue 30: every command's resident set under 256 MiB). Only buffers whose time ranges
/// overlap are held together; real per-CPU buffers of a session follow each other in time, so
/// this is reached only by crafted memory (or the forge's benchmark session, whose buffers of a
/// CPU share one time range: docs/performance.md).
const MAX_OPEN_BYTES: usize = 96 << 20;
/// [`MAX_OPEN_BYTES`] in switches (80 bytes each on 64-bit: 1,258,291).
/// Streams the opening thread may have decoded before the merge asks for them (each one
/// buffer's switches: about 100 KB for a 64 KiB buffer).
const OPENED_AHEAD: usize = 8;
const MAX_OPEN_ROWS: usize = MAX_OPEN_BYTES / std::mem::size_of::<Raw>();

/// The `--last` window: keep the switches of the last `window` (100 ns units) before `end`
/// (a FILETIME: the dump's SystemTime, or, when it has none, the newest switch).
#[derive(Clone, Copy, Debug)]
pub struct Last {
    pub window: u64,
    pub end: Option<u64>,
}

/// Everything `stream` needs decided before the first row: groups, streams, names.
struct Plan<'c, 'd> {
    names: Names,
    feed: Feed<'c, 'd>,
    /// The dump's clock facts (which converted times cannot be right); None for .etl files.
    facts: Option<ClockFacts>,
    groups: Vec<Group>,
    streams: Vec<Stream>,
    /// Thread id → its process id (None when it does not fit 32 bits) and the process as the
    /// rows show it ("name (pid)"): [`threads`].
    by_tid: Threads,
    mwr: Option<u8>,
    warnings: Vec<Warning>,
    late_warnings: Vec<Warning>,
}

/// Thread id → process id (None when it does not fit 32 bits) and "name (pid)", each text
/// made once and shared by the rows.
type Threads =
    std::collections::HashMap<u32, (Option<u32>, Untrusted), foldhash::fast::RandomState>;

/// The [`Threads`] of (thread id, process id, process name) triples; a thread id over 32 bits
/// is no thread a switch record can name.
fn threads<'n>(list: impl IntoIterator<Item = (u64, u64, &'n Untrusted)>) -> Threads {
    list.into_iter()
        .filter_map(|(tid, pid, name)| {
            let tid = u32::try_from(tid).ok()?;
            Some((
                tid,
                (
                    u32::try_from(pid).ok(),
                    name.map(|n| format!("{n} ({pid})")),
                ),
            ))
        })
        .collect()
}

fn note(w: &mut Vec<Warning>, what: Warning) {
    crate::warning::push_once(w, what);
}

/// The [`Plan`] of `src`'s switches (of CPU `cpu_filter`, all when None): a clock group per
/// pending block and per converter of the units, a stream per block and unit with switches.
fn plan<'c, 'd>(
    ctx: &'c KernelContext<'d>,
    src: EtwSource<'c, 'd>,
    cpu_filter: Option<u64>,
) -> Plan<'c, 'd> {
    let mut warnings = Vec::new();
    let names = Names::new(Some(&ctx.symbols));
    let (mwr, _) = maximum_wait_reason_of(ctx);
    if mwr.is_none() {
        warnings.push(
            Warning::new(
                WarningKind::NotFound,
                format!(
                    "MaximumWaitReason of build {} is unknown (no _KWAIT_REASON in the symbols, and no \
                     corpus build pins it): compact switches' OldThreadStateWr cannot be split, so \
                     their old state and wait reason are left empty (CSwitch events carry both and \
                     are decoded)",
                    ctx.build
                ),
            )
            .field("_KWAIT_REASON.MaximumWaitReason"),
        );
    }
    // The dump's ETW source: the sessions, their units and clocks, the pending batches.
    let sessions: &[crate::etw::loggers::Session] = src.memory().map_or(&[], |l| &l.sessions);
    let facts = src
        .clock_facts()
        .cloned()
        .unwrap_or_else(|| ClockFacts::gather(ctx, sessions));
    let mut gather = Gather {
        ctx,
        facts: &facts,
        cpu_filter,
        groups: Vec::new(),
        streams: Vec::new(),
        warnings,
    };
    // Pending blocks.
    let pending = src.pending().unwrap_or_default();
    gather.warnings.extend(pending.warnings);
    for p in &pending.blocks {
        gather.pending_block(p, sessions);
    }
    gather.units(&src, mwr);
    let Gather {
        groups,
        streams,
        warnings,
        ..
    } = gather;
    // Thread id → process, from the process list.
    let procs = processes::walk(ctx);
    let by_tid = threads(procs.by_tid().into_iter().map(|(t, (p, n))| (t, p, n)));
    Plan {
        names,
        feed: Feed::Dump(Box::new(src)),
        facts: Some(facts),
        groups,
        streams,
        by_tid,
        mwr,
        warnings,
        late_warnings: procs.warnings,
    }
}

/// The clock groups and streams [`plan`] gathers (of the CPU `cpu_filter` chooses, all when
/// None), with the warnings met.
struct Gather<'f, 'c, 'd> {
    ctx: &'c KernelContext<'d>,
    facts: &'f ClockFacts,
    cpu_filter: Option<u64>,
    groups: Vec<Group>,
    streams: Vec<Stream>,
    warnings: Vec<Warning>,
}

impl Gather<'_, '_, '_> {
    /// Are the switches of `cpu` wanted?
    fn wanted(&self, cpu: Option<u64>) -> bool {
        self.cpu_filter.is_none_or(|c| cpu == Some(c))
    }

    /// Pending block `p`: a group of its own (its clock), and a stream of its switches when
    /// its CPU is wanted and it has some.
    fn pending_block(&mut self, p: &PendingFound, sessions: &[crate::etw::loggers::Session]) {
        let ctx = self.ctx;
        let conv = match p.clock {
            Some(c) => clock::for_clock(ctx, self.facts, sessions, c),
            None => clock::Converter::Unknown(format!("the block's clock type is {}", p.clock_how)),
        };
        if let (Some(c), true) = (p.clock, matches!(p.found_by, FoundBy::Search { .. })) {
            if p.decoded
                .batch
                .as_ref()
                .is_some_and(|b| !b.switches.is_empty())
            {
                note(
                    &mut self.warnings,
                    Warning::new(
                        WarningKind::Inferred,
                        format!(
                            "pending block {} (CPU {}): clock {c} {}",
                            p.block, p.cpu, p.clock_how
                        ),
                    )
                    .cpu(p.cpu)
                    .at(p.block),
                );
            }
        }
        if let Some(why) = conv.problem() {
            note(
                &mut self.warnings,
                Warning::new(
                    WarningKind::Time,
                    format!(
                        "pending block {} (CPU {}): times not converted: {why}",
                        p.block, p.cpu
                    ),
                )
                .cpu(p.cpu)
                .at(p.block),
            );
        }
        let mut rows = self.pending_rows(p);
        self.groups.push(Group {
            resolution: resolution(&conv, ctx.build),
            conv,
            whose: format!("pending block {} (CPU {})", p.block, p.cpu),
            logger_id: None,
            clock: p.clock,
            clock_type: p.clock,
            found_by: Some(p.found_by),
            block: Some(p.block),
        });
        if self.wanted(Some(p.cpu)) && !rows.is_empty() {
            let g = self.groups.len() - 1;
            for r in &mut rows {
                r.key = key_of(&self.groups[g].conv, g, r.ts);
            }
            rows.sort_by_key(|r| r.key);
            self.streams.push(Stream {
                cpu: Some(p.cpu),
                group: g,
                first_key: rows[0].key,
                last_ts: rows.iter().map(|r| r.ts).max().unwrap_or(0),
                source: Source::Rows(rows),
            });
        }
    }

    /// The switches of pending block `p`'s batch (none without one), the last one's new
    /// thread filled in from the CPU's current thread when the batch leaves it open.
    fn pending_rows(&mut self, p: &PendingFound) -> Vec<Raw> {
        let Some(b) = &p.decoded.batch else {
            return Vec::new();
        };
        self.warnings.extend(b.warnings.iter().map(|w| {
            Warning::new(
                WarningKind::Decode,
                format!("pending block {} (CPU {}): {w}", p.block, p.cpu),
            )
            .cpu(p.cpu)
            .at(p.block)
        }));
        // The last switch's new thread is the CPU's current thread (§4.3), when the
        // block is the CPU's newest (an open batch).
        let mut current = None;
        if b.switches.last().is_some_and(|s| s.new_tid.is_none()) {
            match processes::current_thread(self.ctx, p.cpu) {
                Ok((_, tid)) => current = u32::try_from(tid).ok(),
                Err(why) => note(
                    &mut self.warnings,
                    Warning::new(
                        WarningKind::NotFound,
                        format!("last pending switch's new thread unknown: {why}"),
                    )
                    .cpu(p.cpu),
                ),
            }
        }
        let mut rows: Vec<Raw> = b
            .switches
            .iter()
            .enumerate()
            .map(|(i, s)| compact_raw(s, Kind::Pending, 0, i))
            .collect();
        if let Some(last) = rows.last_mut().filter(|r| r.new_tid.is_none()) {
            last.new_tid = current;
        }
        rows
    }

    /// Events and batches in the units of the dump's ETW source (the sessions' buffers in
    /// memory, a triage dump's saved windows and secondary data): each unit is decoded once
    /// here for its time range (nothing is kept; on every CPU), and again when the merge
    /// reaches it. One group per clock.
    fn units(&mut self, src: &EtwSource<'_, '_>, mwr: Option<u8>) {
        let ctx = self.ctx;
        for w in src.warnings() {
            note(&mut self.warnings, w.clone());
        }
        let mut group_of: std::collections::HashMap<usize, usize> = Default::default();
        // (unit, group) of each unit to decode.
        let mut todo: Vec<(usize, usize)> = Vec::new();
        for (i, u) in src
            .all_units()
            .iter()
            .enumerate()
            .filter(|(_, u)| u.skip.is_none())
        {
            let g = *group_of.entry(src.converter_index(u)).or_insert_with(|| {
                let conv = src.converter(u).clone();
                let clock_type = src
                    .sessions()
                    .iter()
                    .find(|s| s.logger_id.is_some() && s.logger_id == u.logger_id)
                    .and_then(|s| s.context.as_ref())
                    .and_then(|c| c.clock_type);
                self.groups.push(Group {
                    resolution: resolution(&conv, ctx.build),
                    conv,
                    whose: match u.logger_id {
                        Some(id) => format!("logger {id}"),
                        None => u.origin.to_string(),
                    },
                    logger_id: u.logger_id,
                    clock: None,
                    clock_type,
                    found_by: None,
                    block: None,
                });
                self.groups.len() - 1
            });
            if self.wanted(u.processor) {
                todo.push((i, g));
            }
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ranges = unit_ranges(src, &self.groups, &todo, mwr, threads);
        for (&(i, g), range) in todo.iter().zip(ranges) {
            let Some((first, last)) = range else {
                continue;
            };
            self.streams.push(Stream {
                cpu: src.all_units()[i].processor,
                group: g,
                source: Source::Unit(i),
                first_key: first,
                last_ts: last,
            });
        }
    }
}

impl Plan<'_, '_> {
    /// The process id of thread `tid` (0 for the idle thread), from the thread list.
    /// Thread `tid`'s process as the rows show it ("name (pid)"; "Idle" for thread 0) and
    /// its process id (0 for the idle thread), from the thread list; None when not in it.
    fn thread(&self, tid: u32) -> (Option<crate::text::Untrusted>, Option<u32>) {
        if tid == 0 {
            return (Some(Untrusted::from_static("Idle")), Some(0));
        }
        match self.by_tid.get(&tid) {
            Some((pid, shown)) => (Some(shown.clone()), *pid),
            None => (None, None),
        }
    }

    /// The record `r` of stream `s` as the merge gives it: its UTC time and time flag, counted
    /// (the row and its flag) in the group's tally. Called once per record, in merge order.
    fn timed(&self, tallies: &mut [Tally], s: usize, r: &Raw) -> Item {
        let g = self.streams[s].group;
        let group = &self.groups[g];
        let filetime = group.conv.to_filetime(r.ts);
        let mut no_tally = Tally::default();
        let tally = tallies.get_mut(g).unwrap_or(&mut no_tally);
        let time_flag = match (&self.facts, filetime) {
            (Some(facts), Some(ft)) => tally.flags.check(facts, ft, &group.conv, |why| why),
            _ => None,
        };
        tally.rows += 1;
        Item {
            sid: s,
            raw: *r,
            filetime,
            time_flag,
        }
    }

    /// Where the record of `it` is, as a row's source.
    fn source(&self, it: &Item) -> SwitchSource {
        let (s, r) = (it.sid, &it.raw);
        let group = &self.groups[self.streams[s].group];
        let logger_id = match r.kind {
            Kind::Pending => None,
            _ => group.logger_id,
        };
        let mut source = SwitchSource {
            source: r.kind.name(),
            logger_id,
            raw_timestamp: r.ts,
            clock: group.clock_type,
            ..SwitchSource::default()
        };
        match (&self.streams[s].source, r.kind) {
            (_, Kind::Pending) => {
                source.block = group.block;
                source.index = Some(r.index);
            }
            (Source::Unit(i), kind) => {
                match &self.feed {
                    Feed::Dump(src) => {
                        let u = &src.all_units()[*i];
                        source.buffer = u.address;
                        source.offset = Some(u.shift as u64 + u64::from(r.offset));
                    }
                    Feed::Etl(f) => {
                        let b = &f.buffers[*i];
                        source.file = Some(f.files[b.file].name.as_str().into());
                        source.offset = Some(b.offset + u64::from(r.offset));
                    }
                }
                source.index = (kind == Kind::Batch).then_some(r.index);
            }
            (Source::Rows(_), _) => {}
        }
        source
    }

    /// The row of the record `it` ([`Plan::timed`]), with names, time and its source.
    fn row(&self, it: &Item) -> SwitchRow {
        let (s, r) = (it.sid, &it.raw);
        let (cpu, g) = (self.streams[s].cpu, self.streams[s].group);
        let group = &self.groups[g];
        let (logger_id, clock, found_by) = match r.kind {
            Kind::Pending => (None, group.clock, group.found_by),
            _ => (group.logger_id, None, None),
        };
        let (old_process, old_pid) = self.thread(r.old_tid);
        let (new_process, new_pid) = match r.new_tid {
            Some(t) => self.thread(t),
            None => (None, None),
        };
        SwitchRow {
            cpu,
            timestamp: r.ts,
            time: it.filetime.map(filetime_to_iso8601),
            filetime: it.filetime,
            time_flag: it.time_flag,
            old_tid: r.old_tid,
            old_process,
            old_pid,
            new_tid: r.new_tid,
            new_process,
            new_pid,
            old_priority: r.old_priority,
            new_priority: r.new_priority,
            old_state: self.names.state(r.old_state),
            old_wait_reason: self.names.wait_reason(r.old_wait_reason),
            old_wait_mode: self.names.wait_mode(r.old_wait_mode),
            old_state_wr: r.old_state_wr,
            new_thread_wait_time: r.new_thread_wait_time,
            source: r.kind.name(),
            logger_id,
            clock,
            found_by,
            sources: vec![self.source(it)],
        }
    }

    /// The row of a decided switch: its own, or, for records merged into one switch, the
    /// primary record's with every record as a source (in time order).
    fn decided(&self, d: &Decided<Item>) -> SwitchRow {
        match d {
            Decided::One(it) => self.row(it),
            Decided::Merged(primary, members) => {
                let mut row = self.row(primary);
                row.sources = members.iter().map(|m| self.source(m)).collect();
                row
            }
        }
    }

    /// Open stream `s`: its switches, in time order (stable: ties keep record order).
    fn open(&self, s: usize) -> Vec<Raw> {
        let g = self.streams[s].group;
        let mut rows = match &self.streams[s].source {
            Source::Rows(r) => r.clone(),
            Source::Unit(i) => match &self.feed {
                Feed::Dump(src) => {
                    let u = &src.all_units()[*i];
                    match src.bytes(u) {
                        Some(data) => buffer_switches(&data, u.first_record, u.valid, self.mwr),
                        None => Vec::new(),
                    }
                }
                Feed::Etl(f) => f.switches(*i, self.mwr),
            },
        };
        for r in &mut rows {
            r.key = key_of(&self.groups[g].conv, g, r.ts);
        }
        rows.sort_by_key(|r| r.key);
        // Held until the merge passes them: no growth slack (a buffer's switches are pushed
        // one by one, and doubling left up to twice their bytes allocated: 168 MB held on the
        // benchmark dump, heaptrack).
        rows.shrink_to_fit();
        rows
    }

    /// The newest FILETIME of any switch (the end of `--last` when the dump has none).
    fn newest(&self) -> Option<u64> {
        self.streams
            .iter()
            .filter_map(|s| self.groups[s.group].conv.to_filetime(s.last_ts))
            .max()
    }
}

/// Stream every context switch to `emit`, one row per switch (the records of several
/// sessions that saw it in its `sources`: module documentation), per CPU in UTC order (CPUs
/// ascending; the rows without a UTC time after the timed ones; ties keep the order of pending
/// blocks, then sessions, buffers and records), with `--cpu` and `--last` applied. Rows are
/// merged from per-CPU streams (one per pending block and per buffer, each decoded when the
/// merge reaches it), so memory holds only the buffers whose time ranges overlap, never the
/// whole listing. Returns the warnings.
pub fn stream(
    ctx: &KernelContext<'_>,
    cpu_filter: Option<u64>,
    last: Option<Last>,
    emit: &mut dyn FnMut(SwitchRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    stream_from(ctx, EtwSource::open(ctx, None), cpu_filter, last, emit)
}

/// [`stream`] over the units of `src` (e.g. [`EtwSource::open_carved`]: the buffers that
/// nothing leads to any more; their pending blocks are not among them).
pub fn stream_from<'c, 'd>(
    ctx: &'c KernelContext<'d>,
    src: EtwSource<'c, 'd>,
    cpu_filter: Option<u64>,
    last: Option<Last>,
    emit: &mut dyn FnMut(SwitchRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    stream_with(ctx, src, cpu_filter, last, false, emit)
}

/// [`stream_from`]; with `per_record`, one row per record (`--per-record`: a switch traced by
/// two sessions is two rows), in the same order.
pub fn stream_with<'c, 'd>(
    ctx: &'c KernelContext<'d>,
    src: EtwSource<'c, 'd>,
    cpu_filter: Option<u64>,
    last: Option<Last>,
    per_record: bool,
    emit: &mut dyn FnMut(SwitchRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    run(plan(ctx, src, cpu_filter), last, per_record, emit)
}

/// Merge, name and give the switches `p` planned ([`stream_with`]).
fn run(
    mut p: Plan<'_, '_>,
    last: Option<Last>,
    per_record: bool,
    emit: &mut dyn FnMut(SwitchRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    let max_res = p
        .groups
        .iter()
        .filter_map(|g| g.resolution)
        .max()
        .unwrap_or(0);
    let mut dedup = (!per_record).then(|| Dedup::new(max_res));
    // --last: the window's start, or None when nothing can be placed.
    let from = last.map(|l| {
        l.end
            .filter(|&e| e != 0)
            .or_else(|| p.newest())
            .map(|end| end.saturating_sub(l.window))
    });
    let (mut untimed, mut flagged, mut dropped_all) = (0usize, 0usize, 0usize);
    // Streams by CPU, then by first key; `order` = creation order breaks ties.
    let mut order: Vec<usize> = (0..p.streams.len()).collect();
    order.sort_by_key(|&i| (p.streams[i].cpu, p.streams[i].first_key, i));
    let mut disorder = Vec::new();
    let mut tallies: Vec<Tally> = std::iter::repeat_with(Tally::default)
        .take(p.groups.len())
        .collect();
    // The streams are opened (read, decoded, sorted) on a second thread, in the order the
    // merges will ask for them (CPU by CPU, each CPU's by first key: `order`), a few ahead.
    let plan = &p;
    let done = std::thread::scope(|scope| -> std::io::Result<()> {
        let (tx, ahead) = std::sync::mpsc::sync_channel::<(usize, Vec<Raw>)>(OPENED_AHEAD);
        let opener = std::thread::Builder::new()
            .name("etwdump-cswitch-open".into())
            .spawn_scoped(scope, {
                let order = &order;
                move || {
                    for &sid in order {
                        if tx.send((sid, plan.open(sid))).is_err() {
                            return;
                        }
                    }
                }
            });
        // Without a thread, every stream is opened by the merge itself.
        let mut ahead = opener.is_ok().then_some(ahead);
        let mut next = 0;
        while next < order.len() {
            let cpu = p.streams[order[next]].cpu;
            let end = order[next..]
                .iter()
                .position(|&i| p.streams[i].cpu != cpu)
                .map_or(order.len(), |n| next + n);
            let cpu_streams = &order[next..end];
            next = end;
            let firsts: Vec<(Key, usize)> = cpu_streams
                .iter()
                .map(|&i| (p.streams[i].first_key, i))
                .collect();
            let mut sink = Emitting {
                plan,
                tallies: &mut tallies,
                ahead: ahead.take(),
                from,
                untimed: &mut untimed,
                flagged: &mut flagged,
                dropped_all: &mut dropped_all,
                emit: &mut *emit,
                result: Ok(()),
                dedup: dedup.as_mut(),
                ready: Vec::new(),
            };
            let out_of_order = merge(&firsts, &mut sink, MAX_OPEN_ROWS);
            sink.flush();
            ahead = sink.ahead.take();
            std::mem::replace(&mut sink.result, Ok(()))?;
            if out_of_order > 0 {
                let mut w = Warning::new(
                WarningKind::Bound,
                format!(
                    "CPU {}: the time ranges of its buffers overlap beyond {MAX_OPEN_ROWS} held switches; {out_of_order} switches were given before the merge could place them (not in strict time order)",
                    cpu.map_or("?".into(), |c| c.to_string())
                ),
            );
                w.cpu = cpu;
                disorder.push(w);
            }
        }
        Ok(())
    });
    done?;
    let mut warnings = std::mem::take(&mut p.warnings);
    for (g, t) in p.groups.iter().zip(&tallies) {
        if t.flags.any() {
            let mut w = Warning::new(
                WarningKind::Time,
                format!(
                    "{}: {} of {} switch times fall after the dump's SystemTime and {} before boot (e.g. {}); converted with {}: the clock facts or the anchor do not fit these timestamps",
                    g.whose,
                    t.flags.after,
                    t.rows,
                    t.flags.before,
                    t.flags.example.clone().unwrap_or_default(),
                    g.conv.how().unwrap_or("FILETIME timestamps (system-time clock)")
                ),
            );
            w.logger_id = g.logger_id;
            warnings.push(w);
        }
    }
    warnings.extend(disorder);
    if let Some(d) = &dedup {
        warnings.extend(d.warnings());
    }
    warnings.extend(std::mem::take(&mut p.late_warnings));
    if let Some(from) = from {
        warnings.extend(last_warnings(from, dropped_all, untimed, flagged));
    }
    Ok(warnings)
}

/// What the per-CPU merge reads from (streams, opened by id) and gives its rows to.
trait MergeSource {
    /// Stream `sid`'s switches in key order.
    fn open(&mut self, sid: usize) -> Vec<Raw>;
    fn emit(&mut self, sid: usize, r: &Raw);
}

/// How many rows ahead of the one given the merge asks the cache for (a row is 80 bytes:
/// four rows are five lines on).
const PREFETCH_AHEAD: usize = 4;

/// k-way merge of one CPU's streams. `firsts` = (first key, stream id), sorted; rows come out
/// by (key, stream id, index in stream), which is the stable sort of all the streams' rows by
/// key when ids follow creation order. A stream is opened only when
/// the merge reaches its first timestamp, so only streams whose time ranges overlap are held;
/// when they hold `max_open` rows, the smallest held row is given early to make room (out of
/// strict order). Returns how many rows were given early.
fn merge(firsts: &[(Key, usize)], src: &mut impl MergeSource, max_open: usize) -> usize {
    use std::cmp::Reverse;
    type Heap = std::collections::BinaryHeap<Reverse<(Key, usize, usize)>>;
    /// Give the smallest held row and advance its stream; false when nothing is held.
    fn give(
        heap: &mut Heap,
        open: &mut [Vec<Raw>],
        held: &mut usize,
        f: &mut dyn FnMut(usize, &Raw),
    ) -> bool {
        // The smallest held row is replaced in place by its stream's next one (one sift down,
        // where a pop and a push take two passes): the order given is the same, the heap's
        // entries being unique.
        let Some(mut top) = heap.peek_mut() else {
            return false;
        };
        let Reverse((_, s, i)) = *top;
        // Every stream in the heap has its rows in its slot (pushed with them).
        let Some(rows) = open.get_mut(s) else {
            std::collections::binary_heap::PeekMut::pop(top);
            return true;
        };
        if let Some(r) = rows.get(i) {
            f(s, r);
        }
        // The stream's row a few ahead: it is asked for only after the rows of every other
        // open stream have had their turn (hundreds, when buffers overlap), long enough for
        // memory to answer, and a stream's lines are fetched one by one otherwise.
        #[cfg(target_arch = "x86_64")]
        if let Some(ahead) = rows.get(i + PREFETCH_AHEAD) {
            // SAFETY: a prefetch only hints the cache: it never faults and reads no value.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>((ahead as *const Raw).cast());
            }
        }
        match rows.get(i + 1) {
            Some(n) => *top = Reverse((n.key, s, i + 1)),
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
                *held -= rows.len();
                *rows = Vec::new();
            }
        }
        true
    }
    // The open streams' rows, by stream id (a slot per id in `firsts`; empty when closed).
    let slots = firsts.iter().map(|&(_, s)| s + 1).max().unwrap_or(0);
    let mut open: Vec<Vec<Raw>> = std::iter::repeat_with(Vec::new).take(slots).collect();
    let mut heap: Heap = Default::default();
    let (mut held, mut early, mut k) = (0usize, 0usize, 0usize);
    loop {
        // Open every stream that starts at or before the smallest held timestamp.
        while let Some(&(first, sid)) = firsts.get(k) {
            if heap.peek().is_some_and(|Reverse((ts, ..))| first > *ts) {
                break;
            }
            if held >= max_open && give(&mut heap, &mut open, &mut held, &mut |s, r| src.emit(s, r))
            {
                early += 1;
                continue;
            }
            let rows = src.open(sid);
            if let (Some(r), Some(slot)) = (rows.first(), open.get_mut(sid)) {
                heap.push(Reverse((r.key, sid, 0)));
                held += rows.len();
                *slot = rows;
            }
            k += 1;
        }
        if !give(&mut heap, &mut open, &mut held, &mut |s, r| src.emit(s, r)) {
            return early;
        }
    }
}

/// The merge's sink in `stream`: names and times attached, `--last` applied, the caller's
/// callback (its first error ends the output).
struct Emitting<'a, 'c, 'd> {
    plan: &'a Plan<'c, 'd>,
    tallies: &'a mut [Tally],
    /// The streams opened ahead by the opening thread, in the order the merges ask for them
    /// (None: opened here).
    ahead: Option<std::sync::mpsc::Receiver<(usize, Vec<Raw>)>>,
    from: Option<Option<u64>>,
    untimed: &'a mut usize,
    flagged: &'a mut usize,
    dropped_all: &'a mut usize,
    emit: &'a mut dyn FnMut(SwitchRow) -> std::io::Result<()>,
    result: std::io::Result<()>,
    /// None: one row per record (`--per-record`).
    dedup: Option<&'a mut Dedup>,
    /// Switches the merge decided, to give.
    ready: Vec<Decided<Item>>,
}

impl Emitting<'_, '_, '_> {
    fn deliver(&mut self, row: SwitchRow) {
        if self.result.is_err() {
            return;
        }
        self.result = keep_row(
            row,
            self.from,
            self.untimed,
            self.flagged,
            self.dropped_all,
            self.emit,
        );
    }

    /// Give the switches the merge decided, as rows (`ready` keeps its capacity).
    fn deliver_ready(&mut self) {
        let mut ready = std::mem::take(&mut self.ready);
        for d in ready.drain(..) {
            if self.result.is_err() {
                break;
            }
            self.deliver(self.plan.decided(&d));
        }
        self.ready = ready;
    }

    /// The end of a CPU: give the rows still held.
    fn flush(&mut self) {
        if let Some(d) = self.dedup.as_deref_mut() {
            d.flush(&mut self.ready);
            self.deliver_ready();
        }
    }
}

impl MergeSource for Emitting<'_, '_, '_> {
    fn open(&mut self, sid: usize) -> Vec<Raw> {
        if let Some(ahead) = &self.ahead {
            match ahead.recv() {
                Ok((s, rows)) if s == sid => return rows,
                // Not the stream asked for (the orders differ): open everything here from
                // now on.
                _ => self.ahead = None,
            }
        }
        self.plan.open(sid)
    }

    fn emit(&mut self, sid: usize, r: &Raw) {
        if self.result.is_err() {
            return;
        }
        let item = self.plan.timed(self.tallies, sid, r);
        let g = &self.plan.groups[self.plan.streams[sid].group];
        // An .etl file is one recorder (the same buffer kept in two files, e.g. a session's
        // log file and `extract`'s copy of memory, is then one switch with two sources).
        let recorder = match (r.kind, g.logger_id, &self.plan.feed) {
            (Kind::Pending, ..) | (_, None, _) | (_, _, Feed::Etl(_)) => {
                Recorder::Group(self.plan.streams[sid].group)
            }
            (_, Some(id), Feed::Dump(_)) => Recorder::Logger(id),
        };
        let res = g.resolution;
        let Some(d) = self.dedup.as_deref_mut() else {
            self.deliver(self.plan.row(&item));
            return;
        };
        match (item.filetime, res) {
            (Some(ft), Some(res)) => d.push(
                Held {
                    cpu: self.plan.streams[sid].cpu,
                    old_tid: r.old_tid,
                    new_tid: r.new_tid,
                    item,
                    ft,
                    res,
                    recorder,
                    rank: r.kind,
                },
                &mut self.ready,
            ),
            // No UTC time: never merged on time (the timed rows all came before); a time too
            // coarse to tell switches apart: never merged, given in its place.
            (ft, _) => {
                match ft {
                    None => d.untimed += 1,
                    Some(_) => d.coarse += 1,
                }
                d.flush(&mut self.ready);
                self.ready.push(Decided::One(item));
            }
        }
        self.deliver_ready();
    }
}

/// Who recorded a switch: a logger (all its buffers), or one pending block. A recorder never
/// records one switch twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recorder {
    Logger(u64),
    Group(usize),
}

/// A record as the merge gives it ([`Plan::timed`]): rows are built from it only once
/// [`Dedup`] has decided which switch it is (a record held there is about 100 bytes where
/// its row is over 300).
#[derive(Clone, Copy, Debug)]
struct Item {
    /// Its stream.
    sid: usize,
    raw: Raw,
    filetime: Option<u64>,
    time_flag: Option<&'static str>,
}

/// A switch decided by [`Dedup`]: one record, or records of several recorders merged — the
/// primary record (whose fields the row shows) and every member in time order (the row's
/// sources).
#[derive(Debug)]
enum Decided<T> {
    One(T),
    Merged(T, Vec<T>),
}

/// A timed record held by [`Dedup`] until no later record can be the same switch: what
/// matching needs, and the record (`item`).
#[derive(Clone, Copy)]
struct Held<T> {
    item: T,
    cpu: Option<u64>,
    old_tid: u32,
    new_tid: Option<u32>,
    ft: u64,
    res: u64,
    recorder: Recorder,
    /// Which record's fields a merged row shows: the lowest (event, batch, pending).
    rank: Kind,
}

/// Records held at once by [`Dedup`]: past this the held ones are decided as they are (a
/// warning counts the cuts). Only records within a few clock resolutions of each other are
/// held together, so real memory holds one to three.
const MAX_HELD: usize = 256;

/// One row per switch: the per-CPU merge gives the timed records in UTC order; records within
/// reach of each other are held, then grouped by the rule of the module documentation.
struct Dedup<T = Item> {
    /// The largest resolution of any clock in the listing.
    max_res: u64,
    held: Vec<Held<T>>,
    /// No record after this FILETIME can match a held one.
    reach: u64,
    /// Records folded into another's row.
    merged: usize,
    /// Records that matched ambiguously (kept apart).
    ambiguous: usize,
    /// Times the bound cut a group of held records.
    cut: usize,
    /// Records without a UTC time (never merged).
    untimed: usize,
    /// Records of a clock too coarse to merge on (system time before Windows 10).
    coarse: usize,
    /// Records that could be merged (timed, of a fine clock).
    candidates: usize,
}

impl<T: Copy> Dedup<T> {
    fn new(max_res: u64) -> Dedup<T> {
        Dedup {
            max_res,
            held: Vec::new(),
            reach: 0,
            merged: 0,
            ambiguous: 0,
            cut: 0,
            untimed: 0,
            coarse: 0,
            candidates: 0,
        }
    }

    /// Take record `h` (in UTC order); the rows it lets the merge decide go to `out`.
    fn push(&mut self, h: Held<T>, out: &mut Vec<Decided<T>>) {
        self.candidates += 1;
        if !self.held.is_empty() && (h.ft > self.reach || self.held.len() >= MAX_HELD) {
            if h.ft <= self.reach {
                self.cut += 1;
            }
            self.flush(out);
        }
        self.reach = self
            .reach
            .max(h.ft.saturating_add(h.res).saturating_add(self.max_res));
        self.held.push(h);
    }

    /// Whether `a` and `b` are the same switch by themselves (module documentation).
    fn matches(a: &Held<T>, b: &Held<T>) -> bool {
        a.recorder != b.recorder
            && a.cpu.is_some()
            && a.cpu == b.cpu
            && a.old_tid == b.old_tid
            && a.new_tid.is_some()
            && a.new_tid == b.new_tid
            && a.ft.abs_diff(b.ft) <= a.res.saturating_add(b.res)
    }

    /// Decide every held record: one row per unambiguous group, in UTC order, to `out`.
    fn flush(&mut self, out: &mut Vec<Decided<T>>) {
        self.reach = 0;
        if self.held.len() <= 1 {
            // The common case: nothing within reach (the held vector keeps its capacity).
            out.extend(self.held.pop().map(|h| Decided::One(h.item)));
            return;
        }
        // One recorder, in UTC order: no two records can be one switch (`matches`), so every
        // group is one record and the rows go in the order held (what sorting by UTC time
        // and position gives). Dense records of one session (many within a clock
        // resolution) take this path instead of the pairwise comparison.
        let first = self.held[0].recorder;
        if self
            .held
            .windows(2)
            .all(|w| w[1].recorder == first && w[0].ft <= w[1].ft)
        {
            out.extend(self.held.drain(..).map(|h| Decided::One(h.item)));
            return;
        }
        let held = std::mem::take(&mut self.held);
        let n = held.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for i in 0..n {
            for j in i + 1..n {
                if Self::matches(&held[i], &held[j]) {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
        let mut groups: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for i in 0..n {
            let r = root(&mut parent, i);
            groups.entry(r).or_default().push(i);
        }
        let mut rows: Vec<(u64, usize, Decided<T>)> = Vec::with_capacity(n);
        for members in groups.into_values() {
            let clique = members.iter().enumerate().all(|(k, &i)| {
                members[k + 1..]
                    .iter()
                    .all(|&j| Self::matches(&held[i], &held[j]))
            });
            if members.len() == 1 || !clique {
                if members.len() > 1 {
                    self.ambiguous += members.len();
                }
                rows.extend(
                    members
                        .iter()
                        .map(|&i| (held[i].ft, i, Decided::One(held[i].item))),
                );
                continue;
            }
            let primary = *members
                .iter()
                .min_by_key(|&&i| (held[i].rank, held[i].ft, i))
                .expect("non-empty");
            // Each record is one source (the row of one record has one).
            let mut sources: Vec<(u64, usize)> = members.iter().map(|&i| (held[i].ft, i)).collect();
            sources.sort();
            let sources = sources.into_iter().map(|(_, i)| held[i].item).collect();
            self.merged += members.len() - 1;
            rows.push((
                held[primary].ft,
                members[0],
                Decided::Merged(held[primary].item, sources),
            ));
        }
        rows.sort_by_key(|(ft, i, _)| (*ft, *i));
        out.extend(rows.into_iter().map(|(_, _, r)| r));
    }

    /// What the listing should say about its merging.
    fn warnings(&self) -> Vec<Warning> {
        let mut out = Vec::new();
        if self.ambiguous > 0 {
            out.push(Warning::new(
                WarningKind::Inferred,
                format!(
                    "{} switch records match records of other sessions ambiguously (more than one candidate, or two of one session): listed apart, one row each",
                    self.ambiguous
                ),
            ));
        }
        if self.cut > 0 {
            out.push(Warning::new(
                WarningKind::Bound,
                format!(
                    "{} times more than {MAX_HELD} switch records fell within a few clock resolutions of each other: records around those points may be listed apart although they are one switch",
                    self.cut
                ),
            ));
        }
        // Said only when other records could have been the same switches.
        if self.coarse > 0 && self.candidates > 0 {
            out.push(Warning::new(
                WarningKind::Time,
                format!(
                    "{} switch records are timed by a system-time clock before Windows 10, which advances by timer ticks: they are never merged with other sessions' records of the same switch (two switches of the same threads within a tick cannot be told apart); --per-record lists every record",
                    self.coarse
                ),
            ));
        }
        if self.untimed > 0 && self.candidates + self.coarse > 0 {
            out.push(Warning::new(
                WarningKind::Time,
                format!(
                    "{} switch records have no UTC time: they follow each CPU's timed rows and are never merged with other sessions' records (a raw value of an unconvertible clock cannot be compared with another clock's)",
                    self.untimed
                ),
            ));
        }
        out
    }
}

/// Apply `--last` (`from`: None = no window; Some(None) = nothing can be placed) and emit.
fn keep_row(
    row: SwitchRow,
    from: Option<Option<u64>>,
    untimed: &mut usize,
    flagged: &mut usize,
    dropped_all: &mut usize,
    emit: &mut dyn FnMut(SwitchRow) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match from {
        None => emit(row),
        Some(None) => {
            *dropped_all += 1;
            Ok(())
        }
        Some(Some(from)) => match row.filetime {
            None => {
                *untimed += 1;
                Ok(())
            }
            Some(_) if row.time_flag.is_some() => {
                *flagged += 1;
                Ok(())
            }
            Some(t) if t >= from => emit(row),
            Some(_) => Ok(()),
        },
    }
}

/// What `--last` left out, said once each.
fn last_warnings(
    from: Option<u64>,
    dropped_all: usize,
    untimed: usize,
    flagged: usize,
) -> Vec<Warning> {
    let mut out = Vec::new();
    if from.is_none() && dropped_all > 0 {
        out.push(Warning::new(
            WarningKind::Time,
            format!("--last: no switch has a wall-clock time; {dropped_all} switches dropped"),
        ));
    }
    if untimed > 0 {
        out.push(Warning::new(
            WarningKind::Time,
            format!("--last: {untimed} switches without a wall-clock time dropped"),
        ));
    }
    if flagged > 0 {
        out.push(Warning::new(
            WarningKind::Time,
            format!(
                "--last: {flagged} switches whose time falls after the dump or before boot dropped (they cannot be placed in the window)"
            ),
        ));
    }
    out
}

/// All switches found, and warnings.
pub struct CSwitchReport {
    pub rows: Vec<SwitchRow>,
    pub warnings: Vec<Warning>,
}

/// Every switch, collected, one row per switch (see [`stream`] for the order; the CLI streams
/// instead).
pub fn collect(ctx: &KernelContext<'_>, cpu_filter: Option<u64>) -> CSwitchReport {
    collect_with(ctx, cpu_filter, false)
}

/// [`collect`]; with `per_record`, one row per record (`--per-record`).
pub fn collect_with(
    ctx: &KernelContext<'_>,
    cpu_filter: Option<u64>,
    per_record: bool,
) -> CSwitchReport {
    let mut rows = Vec::new();
    let warnings = stream_with(
        ctx,
        EtwSource::open(ctx, None),
        cpu_filter,
        None,
        per_record,
        &mut |r| {
            rows.push(r.clone());
            Ok(())
        },
    )
    .unwrap_or_default();
    CSwitchReport { rows, warnings }
}

impl CSwitchReport {
    /// Keep the switches of the last `window` (100 ns units) before `end` (a FILETIME: the
    /// dump's SystemTime, or the newest switch when the dump has none). Switches without a
    /// wall-clock time cannot be placed: they are dropped and counted in a warning.
    pub fn keep_last(&mut self, window: u64, end: Option<u64>) {
        let end = end
            .filter(|&e| e != 0)
            .or_else(|| self.rows.iter().filter_map(|r| r.filetime).max());
        let from = Some(end.map(|e| e.saturating_sub(window)));
        let (mut untimed, mut flagged, mut dropped_all) = (0, 0, 0);
        let mut kept = Vec::new();
        for r in std::mem::take(&mut self.rows) {
            let _ = keep_row(
                r,
                from,
                &mut untimed,
                &mut flagged,
                &mut dropped_all,
                &mut |r| {
                    kept.push(r);
                    Ok(())
                },
            );
        }
        self.rows = kept;
        self.warnings
            .extend(last_warnings(from.flatten(), dropped_all, untimed, flagged));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(ts: u64, tag: u32) -> Raw {
        Raw {
            key: (0, 0, ts),
            ts,
            offset: 0,
            index: 0,
            old_tid: tag,
            new_tid: None,
            old_priority: None,
            new_priority: None,
            old_state: None,
            old_wait_reason: None,
            old_wait_mode: None,
            old_state_wr: None,
            new_thread_wait_time: None,
            kind: Kind::Event,
        }
    }

    struct Fixed {
        streams: Vec<Vec<Raw>>,
        opened: Vec<usize>,
        out: Vec<(usize, u64, u32)>,
    }

    impl MergeSource for Fixed {
        fn open(&mut self, sid: usize) -> Vec<Raw> {
            self.opened.push(sid);
            let mut v = self.streams[sid].clone();
            v.sort_by_key(|r| r.key);
            v
        }
        fn emit(&mut self, sid: usize, r: &Raw) {
            self.out.push((sid, r.ts, r.old_tid));
        }
    }

    fn run(streams: Vec<Vec<Raw>>, max_open: usize) -> (Fixed, usize) {
        let mut firsts: Vec<(Key, usize)> = streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.iter().map(|r| r.key).min().map(|m| (m, i)))
            .collect();
        firsts.sort();
        let mut f = Fixed {
            streams,
            opened: Vec::new(),
            out: Vec::new(),
        };
        let early = merge(&firsts, &mut f, max_open);
        (f, early)
    }

    #[test]
    fn the_merge_is_the_stable_sort_and_opens_streams_only_when_reached() {
        // Stream 0: unsorted inside; 1 and 2 tie with 0 at 5; 3 starts after everything.
        let streams = vec![
            vec![raw(9, 1), raw(5, 2), raw(7, 3), raw(5, 4)],
            vec![raw(5, 5), raw(6, 6)],
            vec![raw(1, 7), raw(5, 8)],
            vec![raw(100, 9), raw(100, 10)],
        ];
        let mut want: Vec<(usize, u64, u32)> = Vec::new();
        for (sid, s) in streams.iter().enumerate() {
            let mut v = s.clone();
            v.sort_by_key(|r| r.ts);
            want.extend(v.iter().map(|r| (sid, r.ts, r.old_tid)));
        }
        // Stable sort by timestamp of the concatenation in stream order.
        want.sort_by_key(|&(sid, ts, _)| (ts, sid));
        let (f, early) = run(streams.clone(), usize::MAX);
        assert_eq!(early, 0);
        assert_eq!(f.out, want);
        assert_eq!(f.opened, vec![2, 0, 1, 3]);
        // Stream 3 is opened only after the others are drained: at most 3 held at once.
        // A bound of 3 rows: the same rows, some given early (out of strict order).
        let (g, early) = run(streams, 3);
        assert!(early > 0);
        let mut a = g.out.clone();
        a.sort();
        let mut b = want.clone();
        b.sort();
        assert_eq!(a, b);
    }

    /// A record for [`Dedup`]: CPU 0, threads 5 → 6, at `ft` with resolution `res`; the
    /// record itself is its kind and time.
    fn held(ft: u64, res: u64, rec: Recorder, kind: Kind) -> Held<(Kind, u64)> {
        Held {
            item: (kind, ft),
            cpu: Some(0),
            old_tid: 5,
            new_tid: Some(6),
            ft,
            res,
            recorder: rec,
            rank: kind,
        }
    }

    /// The rows of the switches `Dedup` decided for `records` (each record's row: its kind
    /// as the source, its time; a merged switch's: the primary's, every member a source).
    fn run_dedup(records: Vec<Held<(Kind, u64)>>) -> (Vec<SwitchRow>, Dedup<(Kind, u64)>) {
        let max_res = records.iter().map(|h| h.res).max().unwrap_or(0);
        let mut d = Dedup::new(max_res);
        let mut out = Vec::new();
        for h in records {
            d.push(h, &mut out);
        }
        d.flush(&mut out);
        let source = |&(kind, ft): &(Kind, u64)| SwitchSource {
            source: kind.name(),
            raw_timestamp: ft,
            ..SwitchSource::default()
        };
        let row = |&(kind, ft): &(Kind, u64)| SwitchRow {
            cpu: Some(0),
            old_tid: 5,
            new_tid: Some(6),
            filetime: Some(ft),
            source: kind.name(),
            sources: vec![source(&(kind, ft))],
            ..SwitchRow::default()
        };
        let rows = out
            .iter()
            .map(|d| match d {
                Decided::One(it) => row(it),
                Decided::Merged(p, members) => SwitchRow {
                    sources: members.iter().map(source).collect(),
                    ..row(p)
                },
            })
            .collect();
        (rows, d)
    }

    #[test]
    fn dedup_merges_only_on_evidence() {
        let (a, b, p) = (Recorder::Logger(0), Recorder::Logger(2), Recorder::Group(7));
        // Within the sum of the resolutions (1 + 3): one row, the event's fields, both sources
        // in time order.
        let (rows, d) = run_dedup(vec![
            held(100, 3, p, Kind::Pending),
            held(104, 1, b, Kind::Event),
        ]);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].source, "event");
        assert_eq!(rows[0].filetime, Some(104));
        let srcs: Vec<&str> = rows[0].sources.iter().map(|s| s.source).collect();
        assert_eq!(srcs, ["pending", "event"]);
        assert_eq!(rows[0].source_label(), "pending+event");
        assert_eq!(d.merged, 1);
        // One unit further apart: two rows.
        let (rows, _) = run_dedup(vec![
            held(100, 3, p, Kind::Pending),
            held(105, 1, b, Kind::Event),
        ]);
        assert_eq!(rows.len(), 2);
        // One recorder never records a switch twice (a batch's delta of 0).
        let (rows, _) = run_dedup(vec![
            held(100, 1, a, Kind::Batch),
            held(100, 1, a, Kind::Batch),
        ]);
        assert_eq!(rows.len(), 2);
        // Ambiguous: an event matching two switches of one batch: nothing merged, counted.
        let (rows, d) = run_dedup(vec![
            held(100, 1, a, Kind::Batch),
            held(100, 1, a, Kind::Batch),
            held(101, 1, b, Kind::Event),
        ]);
        assert_eq!(rows.len(), 3);
        assert_eq!((d.merged, d.ambiguous), (0, 3));
        assert_eq!(d.warnings().len(), 1);
        // Three recorders, every two matching: one row with three sources.
        let (rows, _) = run_dedup(vec![
            held(100, 1, a, Kind::Batch),
            held(100, 1, p, Kind::Pending),
            held(101, 1, b, Kind::Event),
        ]);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].sources.len(), 3);
        // Unknown new thread or CPU: never merged.
        let mut x = held(100, 1, a, Kind::Batch);
        x.new_tid = None;
        let (rows, _) = run_dedup(vec![x, held(100, 1, b, Kind::Event)]);
        assert_eq!(rows.len(), 2);
        let mut x = held(100, 1, a, Kind::Event);
        let mut y = held(100, 1, b, Kind::Event);
        (x.cpu, y.cpu) = (None, None);
        let (rows, _) = run_dedup(vec![x, y]);
        assert_eq!(rows.len(), 2);
        // Output in time order, whatever was merged.
        let (rows, _) = run_dedup(vec![
            held(100, 1, a, Kind::Batch),
            held(101, 1, p, Kind::Pending),
            held(102, 1, b, Kind::Event),
            held(200, 1, a, Kind::Batch),
        ]);
        let times: Vec<u64> = rows.iter().filter_map(|r| r.filetime).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }

    #[test]
    fn sequential_streams_never_hold_more_than_one() {
        // 50 streams of 10 rows each, one after the other in time (a session's per-CPU
        // buffers): with a bound of 10 rows nothing is given early.
        let streams: Vec<Vec<Raw>> = (0..50u64)
            .map(|s| (0..10).map(|i| raw(s * 100 + i, 0)).collect())
            .collect();
        let (f, early) = run(streams, 10);
        assert_eq!(early, 0);
        assert_eq!(f.out.len(), 500);
        assert!(f.out.windows(2).all(|w| w[0].1 <= w[1].1));
    }
}
