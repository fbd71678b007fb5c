//! `etwdump cswitch`: context switches per CPU, from the pending CCSWAP blocks (never flushed)
//! and from 0x0525 batches and 0x0524 CSwitch events in the recovered buffers.
//!
//! Times: see [`crate::etw::clock`]. Process names: the process list (`kernel::processes`),
//! "name (pid)"; TID 0 is "Idle"; null when the thread is not in the list.

use crate::decode::ccswap::{self, CompactSwitch};
use crate::decode::cswitch;
use crate::decode::names::{thread_state, wait_mode, wait_reason};
use crate::etl::records;
use crate::etw::ccswap::{maximum_wait_reason_of, FoundBy};
use crate::etw::clock::{self, ClockFacts, TimeFlags};
use crate::etw::source::EtwSource;
use crate::kernel::context::KernelContext;
use crate::kernel::processes;
use crate::symbols::Symbols;
use crate::time::filetime_to_iso8601;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

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
    pub new_tid: Option<u32>,
    pub new_process: Option<crate::text::Untrusted>,
    pub old_priority: Option<i8>,
    pub new_priority: Option<i8>,
    pub old_state: Option<String>,
    pub old_wait_reason: Option<String>,
    pub old_wait_mode: Option<String>,
    pub new_thread_wait_time: Option<u32>,
    /// "event", "batch" or "pending".
    pub source: &'static str,
    pub logger_id: Option<u64>,
    /// Pending blocks: the clock type slot and how the block was found.
    pub clock: Option<u64>,
    pub found_by: Option<FoundBy>,
}

/// Names of thread states and wait reasons: the symbol file's enums when it has them (they
/// follow the build), else the built-in tables; unknown values stay numbers.
struct Names<'a> {
    symbols: &'a Symbols,
}

impl Names<'_> {
    fn named(&self, v: Option<u8>, en: &str, f: fn(u8) -> Option<&'static str>) -> Option<String> {
        v.map(|x| {
            self.symbols
                .enum_name(en, i64::from(x))
                .map(String::from)
                .or_else(|| f(x).map(String::from))
                .unwrap_or_else(|| x.to_string())
        })
    }
    fn state(&self, v: Option<u8>) -> Option<String> {
        self.named(v, "_KTHREAD_STATE", thread_state)
    }
    fn wait_reason(&self, v: Option<u8>) -> Option<String> {
        self.named(v, "_KWAIT_REASON", wait_reason)
    }
}

fn name_or_number(v: Option<u8>, f: fn(u8) -> Option<&'static str>) -> Option<String> {
    v.map(|x| f(x).map_or_else(|| x.to_string(), String::from))
}

/// Where a switch was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// A switch as decoded, before names and times are attached (small: millions of these may
/// be held while per-CPU streams are merged).
#[derive(Clone, Copy, Debug)]
struct Raw {
    ts: u64,
    old_tid: u32,
    new_tid: Option<u32>,
    old_priority: Option<i8>,
    new_priority: Option<i8>,
    old_state: Option<u8>,
    old_wait_reason: Option<u8>,
    old_wait_mode: Option<u8>,
    new_thread_wait_time: Option<u32>,
    kind: Kind,
}

fn compact_raw(s: &CompactSwitch, kind: Kind) -> Raw {
    Raw {
        ts: s.time,
        old_tid: s.old_tid,
        new_tid: s.new_tid,
        old_priority: s.old_priority,
        new_priority: None,
        old_state: s.old_state,
        old_wait_reason: s.old_wait_reason,
        old_wait_mode: None,
        new_thread_wait_time: s.new_thread_wait_time,
        kind,
    }
}

/// The switches of one buffer (records from `first` to `valid`), in record order (0x0524
/// events and 0x0525 batches).
fn buffer_switches(data: &[u8], first: usize, valid: usize, mwr: Option<u8>) -> Vec<Raw> {
    let mut out = Vec::new();
    records::walk_from(data, first, valid, |r| {
        let (Some(payload), Some(ts)) = (r.perfinfo_payload(data), r.perfinfo_timestamp(data))
        else {
            return;
        };
        match r.hook {
            Some(0x0524) => {
                if let Some(c) = cswitch::decode(payload, r.version) {
                    out.push(Raw {
                        ts,
                        old_tid: c.old_tid,
                        new_tid: Some(c.new_tid),
                        old_priority: Some(c.old_priority),
                        new_priority: Some(c.new_priority),
                        old_state: Some(c.old_state),
                        old_wait_reason: (c.old_state == 5).then_some(c.old_wait_reason),
                        old_wait_mode: Some(c.old_wait_mode),
                        new_thread_wait_time: c.new_thread_wait_time,
                        kind: Kind::Event,
                    });
                }
            }
            Some(0x0525) => {
                let batch = ccswap::decode(payload, mwr);
                out.extend(batch.switches.iter().map(|sw| compact_raw(sw, Kind::Batch)));
            }
            _ => {}
        }
    });
    out
}

/// A set of switches that share a clock: one pending block, or one session's buffers. Counts
/// the implausible times met for the warning said at the end.
struct Group {
    conv: clock::Converter,
    whose: String,
    logger_id: Option<u64>,
    clock: Option<u64>,
    found_by: Option<FoundBy>,
    rows: usize,
    flags: TimeFlags,
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
    first_ts: u64,
    last_ts: u64,
}

/// Rows held at once by the per-CPU merge before it gives up strict order (about 40 bytes
/// each: 160 MB). Only buffers whose time ranges overlap are held together; real per-CPU
/// buffers of a session follow each other in time, so this is reached only by crafted memory.
const MAX_OPEN_ROWS: usize = 4 << 20;

/// The `--last` window: keep the switches of the last `window` (100 ns units) before `end`
/// (a FILETIME: the dump's SystemTime, or, when it has none, the newest switch).
#[derive(Clone, Copy, Debug)]
pub struct Last {
    pub window: u64,
    pub end: Option<u64>,
}

/// Everything `stream` needs decided before the first row: groups, streams, names.
struct Plan<'c, 'd> {
    names: Names<'c>,
    src: EtwSource<'c, 'd>,
    facts: ClockFacts,
    groups: Vec<Group>,
    streams: Vec<Stream>,
    by_tid: std::collections::HashMap<u64, (u64, crate::text::Untrusted)>,
    mwr: Option<u8>,
    warnings: Vec<Warning>,
    late_warnings: Vec<Warning>,
}

fn note(w: &mut Vec<Warning>, what: Warning) {
    crate::warning::push_once(w, what);
}

fn plan<'c, 'd>(
    ctx: &'c KernelContext<'d>,
    src: EtwSource<'c, 'd>,
    cpu_filter: Option<u64>,
) -> Plan<'c, 'd> {
    let mut warnings = Vec::new();
    let names = Names {
        symbols: &ctx.symbols,
    };
    let (mwr, _) = maximum_wait_reason_of(ctx);
    if mwr.is_none() {
        warnings.push(
            Warning::new(
                WarningKind::NotFound,
                format!(
                    "MaximumWaitReason of build {} is unknown (no _KWAIT_REASON in the symbols): compact \
                     switches' old states are not decoded",
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
    let mut groups = Vec::new();
    let mut streams = Vec::new();
    let wanted = |cpu: Option<u64>| cpu_filter.is_none_or(|c| cpu == Some(c));
    // Pending blocks.
    let pending = src.pending().unwrap_or_default();
    warnings.extend(pending.warnings);
    for p in &pending.blocks {
        let conv = match p.clock {
            Some(c) => clock::for_clock(ctx, &facts, sessions, c),
            None => clock::Converter::Unknown(format!("the block's clock type is {}", p.clock_how)),
        };
        if let (Some(c), true) = (p.clock, matches!(p.found_by, FoundBy::Search { .. })) {
            if p.decoded
                .batch
                .as_ref()
                .is_some_and(|b| !b.switches.is_empty())
            {
                note(
                    &mut warnings,
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
                &mut warnings,
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
        let mut rows = Vec::new();
        if let Some(b) = &p.decoded.batch {
            warnings.extend(b.warnings.iter().map(|w| {
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
                match processes::current_thread(ctx, p.cpu) {
                    Ok((_, tid)) => current = u32::try_from(tid).ok(),
                    Err(why) => note(
                        &mut warnings,
                        Warning::new(
                            WarningKind::NotFound,
                            format!("last pending switch's new thread unknown: {why}"),
                        )
                        .cpu(p.cpu),
                    ),
                }
            }
            rows = b
                .switches
                .iter()
                .map(|s| compact_raw(s, Kind::Pending))
                .collect();
            if let Some(last) = rows.last_mut().filter(|r| r.new_tid.is_none()) {
                last.new_tid = current;
            }
        }
        groups.push(Group {
            conv,
            whose: format!("pending block {} (CPU {})", p.block, p.cpu),
            logger_id: None,
            clock: p.clock,
            found_by: Some(p.found_by),
            rows: 0,
            flags: TimeFlags::default(),
        });
        if wanted(Some(p.cpu)) && !rows.is_empty() {
            rows.sort_by_key(|r| r.ts);
            streams.push(Stream {
                cpu: Some(p.cpu),
                group: groups.len() - 1,
                first_ts: rows[0].ts,
                last_ts: rows[rows.len() - 1].ts,
                source: Source::Rows(rows),
            });
        }
    }
    // Events and batches in the units of the dump's ETW source (the sessions' buffers in
    // memory, a triage dump's saved windows and secondary data): each unit is decoded once
    // here for its time range (nothing is kept), and again when the merge reaches it. One
    // group per clock.
    for w in src.warnings() {
        note(&mut warnings, w.clone());
    }
    let mut group_of: std::collections::HashMap<usize, usize> = Default::default();
    for (i, u) in src
        .all_units()
        .iter()
        .enumerate()
        .filter(|(_, u)| u.skip.is_none())
    {
        let g = *group_of.entry(src.converter_index(u)).or_insert_with(|| {
            groups.push(Group {
                conv: src.converter(u).clone(),
                whose: match u.logger_id {
                    Some(id) => format!("logger {id}"),
                    None => u.origin.to_string(),
                },
                logger_id: u.logger_id,
                clock: None,
                found_by: None,
                rows: 0,
                flags: TimeFlags::default(),
            });
            groups.len() - 1
        });
        let cpu = u.processor;
        if !wanted(cpu) {
            continue;
        }
        let Some(data) = src.bytes(u) else {
            continue;
        };
        let rows = buffer_switches(&data, u.first_record, u.valid, mwr);
        let (Some(first), Some(last)) = (
            rows.iter().map(|r| r.ts).min(),
            rows.iter().map(|r| r.ts).max(),
        ) else {
            continue;
        };
        streams.push(Stream {
            cpu,
            group: g,
            source: Source::Unit(i),
            first_ts: first,
            last_ts: last,
        });
    }
    // Thread id → process, from the process list.
    let procs = processes::walk(ctx);
    let by_tid = procs
        .by_tid()
        .into_iter()
        .map(|(t, (p, n))| (t, (p, n.clone())))
        .collect();
    Plan {
        names,
        src,
        facts,
        groups,
        streams,
        by_tid,
        mwr,
        warnings,
        late_warnings: procs.warnings,
    }
}

impl Plan<'_, '_> {
    fn process(&self, tid: u32) -> Option<crate::text::Untrusted> {
        if tid == 0 {
            return Some("Idle".into());
        }
        self.by_tid
            .get(&u64::from(tid))
            .map(|(pid, name)| name.map(|n| format!("{n} ({pid})")))
    }

    /// The row of `r` from stream `s`, with names, time and flag; counts the flag.
    fn row(&mut self, s: usize, r: &Raw) -> SwitchRow {
        let (cpu, g) = (self.streams[s].cpu, self.streams[s].group);
        let group = &mut self.groups[g];
        let filetime = group.conv.to_filetime(r.ts);
        let time_flag =
            filetime.and_then(|ft| group.flags.check(&self.facts, ft, &group.conv, |why| why));
        group.rows += 1;
        let (logger_id, clock, found_by) = match r.kind {
            Kind::Pending => (None, group.clock, group.found_by),
            _ => (group.logger_id, None, None),
        };
        SwitchRow {
            cpu,
            timestamp: r.ts,
            time: filetime.map(filetime_to_iso8601),
            filetime,
            time_flag,
            old_tid: r.old_tid,
            old_process: self.process(r.old_tid),
            new_tid: r.new_tid,
            new_process: r.new_tid.and_then(|t| self.process(t)),
            old_priority: r.old_priority,
            new_priority: r.new_priority,
            old_state: self.names.state(r.old_state),
            old_wait_reason: self.names.wait_reason(r.old_wait_reason),
            old_wait_mode: name_or_number(r.old_wait_mode, wait_mode),
            new_thread_wait_time: r.new_thread_wait_time,
            source: r.kind.name(),
            logger_id,
            clock,
            found_by,
        }
    }

    /// Open stream `s`: its switches, in time order (stable: ties keep record order).
    fn open(&self, s: usize) -> Vec<Raw> {
        let mut rows = match &self.streams[s].source {
            Source::Rows(r) => r.clone(),
            Source::Unit(i) => {
                let u = &self.src.all_units()[*i];
                match self.src.bytes(u) {
                    Some(data) => buffer_switches(&data, u.first_record, u.valid, self.mwr),
                    None => Vec::new(),
                }
            }
        };
        rows.sort_by_key(|r| r.ts);
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

/// Stream every context switch to `emit`, per CPU in time order (CPUs ascending; ties keep
/// the order of pending blocks, then sessions, buffers and records), with `--cpu` and
/// `--last` applied. Rows are merged from per-CPU streams (one per pending block and per
/// buffer, each decoded when the merge reaches it), so memory holds only the buffers whose
/// time ranges overlap, never the whole listing. Returns the warnings.
pub fn stream(
    ctx: &KernelContext<'_>,
    cpu_filter: Option<u64>,
    last: Option<Last>,
    emit: &mut dyn FnMut(&SwitchRow) -> std::io::Result<()>,
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
    emit: &mut dyn FnMut(&SwitchRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    let mut p = plan(ctx, src, cpu_filter);
    // --last: the window's start, or None when nothing can be placed.
    let from = last.map(|l| {
        l.end
            .filter(|&e| e != 0)
            .or_else(|| p.newest())
            .map(|end| end.saturating_sub(l.window))
    });
    let (mut untimed, mut flagged, mut dropped_all) = (0usize, 0usize, 0usize);
    // Streams by CPU, then by first timestamp; `order` = creation order breaks ties.
    let mut order: Vec<usize> = (0..p.streams.len()).collect();
    order.sort_by_key(|&i| (p.streams[i].cpu, p.streams[i].first_ts, i));
    let mut disorder = Vec::new();
    let mut next = 0;
    while next < order.len() {
        let cpu = p.streams[order[next]].cpu;
        let end = order[next..]
            .iter()
            .position(|&i| p.streams[i].cpu != cpu)
            .map_or(order.len(), |n| next + n);
        let cpu_streams = &order[next..end];
        next = end;
        let firsts: Vec<(u64, usize)> = cpu_streams
            .iter()
            .map(|&i| (p.streams[i].first_ts, i))
            .collect();
        let mut sink = Emitting {
            plan: &mut p,
            from,
            untimed: &mut untimed,
            flagged: &mut flagged,
            dropped_all: &mut dropped_all,
            emit: &mut *emit,
            result: Ok(()),
        };
        let out_of_order = merge(&firsts, &mut sink, MAX_OPEN_ROWS);
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
    let mut warnings = std::mem::take(&mut p.warnings);
    for g in &p.groups {
        if g.flags.any() {
            let mut w = Warning::new(
                WarningKind::Time,
                format!(
                    "{}: {} of {} switch times fall after the dump's SystemTime and {} before boot (e.g. {}); converted with {}: the clock facts or the anchor do not fit these timestamps",
                    g.whose,
                    g.flags.after,
                    g.rows,
                    g.flags.before,
                    g.flags.example.clone().unwrap_or_default(),
                    g.conv.how().unwrap_or("FILETIME timestamps (system-time clock)")
                ),
            );
            w.logger_id = g.logger_id;
            warnings.push(w);
        }
    }
    warnings.extend(disorder);
    warnings.extend(std::mem::take(&mut p.late_warnings));
    if let Some(from) = from {
        warnings.extend(last_warnings(from, dropped_all, untimed, flagged));
    }
    Ok(warnings)
}

/// What the per-CPU merge reads from (streams, opened by id) and gives its rows to.
trait MergeSource {
    /// Stream `sid`'s switches in time order.
    fn open(&mut self, sid: usize) -> Vec<Raw>;
    fn emit(&mut self, sid: usize, r: &Raw);
}

/// k-way merge of one CPU's streams. `firsts` = (first timestamp, stream id), sorted; rows
/// come out by (timestamp, stream id, index in stream), which is the stable sort of all the
/// streams' rows by timestamp when ids follow creation order. A stream is opened only when
/// the merge reaches its first timestamp, so only streams whose time ranges overlap are held;
/// when they hold `max_open` rows, the smallest held row is given early to make room (out of
/// strict order). Returns how many rows were given early.
fn merge(firsts: &[(u64, usize)], src: &mut impl MergeSource, max_open: usize) -> usize {
    use std::cmp::Reverse;
    type Heap = std::collections::BinaryHeap<Reverse<(u64, usize, usize)>>;
    /// Give the smallest held row and advance its stream; false when nothing is held.
    fn give(
        heap: &mut Heap,
        open: &mut std::collections::HashMap<usize, Vec<Raw>>,
        held: &mut usize,
        f: &mut dyn FnMut(usize, &Raw),
    ) -> bool {
        let Some(Reverse((_, s, i))) = heap.pop() else {
            return false;
        };
        let rows = &open[&s];
        f(s, &rows[i]);
        match rows.get(i + 1) {
            Some(n) => heap.push(Reverse((n.ts, s, i + 1))),
            None => {
                if let Some(r) = open.remove(&s) {
                    *held -= r.len();
                }
            }
        }
        true
    }
    let mut open: std::collections::HashMap<usize, Vec<Raw>> = Default::default();
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
            if let Some(r) = rows.first() {
                heap.push(Reverse((r.ts, sid, 0)));
                held += rows.len();
                open.insert(sid, rows);
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
    plan: &'a mut Plan<'c, 'd>,
    from: Option<Option<u64>>,
    untimed: &'a mut usize,
    flagged: &'a mut usize,
    dropped_all: &'a mut usize,
    emit: &'a mut dyn FnMut(&SwitchRow) -> std::io::Result<()>,
    result: std::io::Result<()>,
}

impl MergeSource for Emitting<'_, '_, '_> {
    fn open(&mut self, sid: usize) -> Vec<Raw> {
        self.plan.open(sid)
    }

    fn emit(&mut self, sid: usize, r: &Raw) {
        if self.result.is_err() {
            return;
        }
        let row = self.plan.row(sid, r);
        self.result = keep_row(
            &row,
            self.from,
            self.untimed,
            self.flagged,
            self.dropped_all,
            self.emit,
        );
    }
}

/// Apply `--last` (`from`: None = no window; Some(None) = nothing can be placed) and emit.
fn keep_row(
    row: &SwitchRow,
    from: Option<Option<u64>>,
    untimed: &mut usize,
    flagged: &mut usize,
    dropped_all: &mut usize,
    emit: &mut dyn FnMut(&SwitchRow) -> std::io::Result<()>,
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

/// Every switch, collected (see [`stream`] for the order; the CLI streams instead).
pub fn collect(ctx: &KernelContext<'_>, cpu_filter: Option<u64>) -> CSwitchReport {
    let mut rows = Vec::new();
    let warnings = stream(ctx, cpu_filter, None, &mut |r| {
        rows.push(r.clone());
        Ok(())
    })
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
                &r,
                from,
                &mut untimed,
                &mut flagged,
                &mut dropped_all,
                &mut |r| {
                    kept.push(r.clone());
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
            ts,
            old_tid: tag,
            new_tid: None,
            old_priority: None,
            new_priority: None,
            old_state: None,
            old_wait_reason: None,
            old_wait_mode: None,
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
            v.sort_by_key(|r| r.ts);
            v
        }
        fn emit(&mut self, sid: usize, r: &Raw) {
            self.out.push((sid, r.ts, r.old_tid));
        }
    }

    fn run(streams: Vec<Vec<Raw>>, max_open: usize) -> (Fixed, usize) {
        let mut firsts: Vec<(u64, usize)> = streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.iter().map(|r| r.ts).min().map(|m| (m, i)))
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
