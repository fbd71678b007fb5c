//! `etwdump cswitch`: context switches per CPU, from the pending CCSWAP blocks (never flushed)
//! and from 0x0525 batches and 0x0524 CSwitch events in the recovered buffers.
//!
//! Times: see [`crate::etw::clock`]. Process names: the process list (`kernel::processes`),
//! "name (pid)"; TID 0 is "Idle"; null when the thread is not in the list.

use crate::decode::ccswap::{self, CompactSwitch};
use crate::decode::cswitch;
use crate::decode::names::{thread_state, wait_mode, wait_reason};
use crate::etl::records;
use crate::etw::buffers::{find_buffers, read_buffer};
use crate::etw::ccswap::{find_pending, infer_clocks, maximum_wait_reason_of, FoundBy};
use crate::etw::clock::{self, ClockFacts};
use crate::etw::loggers::list_sessions;
use crate::kernel::context::KernelContext;
use crate::kernel::processes;
use crate::symbols::Symbols;
use crate::time::filetime_to_iso8601;
use serde::Serialize;

/// One context switch.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SwitchRow {
    pub cpu: Option<u64>,
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
    pub old_process: Option<String>,
    pub new_tid: Option<u32>,
    pub new_process: Option<String>,
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

fn compact_row(
    names: &Names<'_>,
    s: &CompactSwitch,
    cpu: Option<u64>,
    source: &'static str,
    logger_id: Option<u64>,
) -> SwitchRow {
    SwitchRow {
        cpu,
        timestamp: s.time,
        time: None,
        filetime: None,
        time_flag: None,
        old_tid: s.old_tid,
        old_process: None,
        new_tid: s.new_tid,
        new_process: None,
        old_priority: s.old_priority,
        new_priority: None,
        old_state: names.state(s.old_state),
        old_wait_reason: names.wait_reason(s.old_wait_reason),
        old_wait_mode: None,
        new_thread_wait_time: s.new_thread_wait_time,
        source,
        logger_id,
        clock: None,
        found_by: None,
    }
}

/// All switches found, and warnings.
pub struct CSwitchReport {
    pub rows: Vec<SwitchRow>,
    pub warnings: Vec<String>,
}

pub fn collect(ctx: &KernelContext<'_>, cpu_filter: Option<u64>) -> CSwitchReport {
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let note = |w: &mut Vec<String>, what: String| {
        if !w.contains(&what) {
            w.push(what);
        }
    };
    let names = Names {
        symbols: &ctx.symbols,
    };
    let (mwr, _) = maximum_wait_reason_of(ctx);
    if mwr.is_none() {
        warnings.push(format!(
            "MaximumWaitReason of build {} is unknown (no _KWAIT_REASON in the symbols): compact \
             switches' old states are not decoded",
            ctx.build
        ));
    }
    let list = list_sessions(ctx);
    let facts = ClockFacts::gather(ctx, &list.sessions);
    // Pending blocks.
    let mut pending = find_pending(ctx);
    infer_clocks(ctx, &facts, &list.sessions, &mut pending);
    warnings.extend(pending.warnings);
    for p in &pending.blocks {
        let conv = match p.clock {
            Some(c) => clock::for_clock(ctx, &facts, &list.sessions, c),
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
                    format!(
                        "pending block {} (CPU {}): clock {c} {}",
                        p.block, p.cpu, p.clock_how
                    ),
                );
            }
        }
        if let Some(why) = conv.problem() {
            note(
                &mut warnings,
                format!(
                    "pending block {} (CPU {}): times not converted: {why}",
                    p.block, p.cpu
                ),
            );
        }
        let first_row = rows.len();
        if let Some(b) = &p.decoded.batch {
            warnings.extend(
                b.warnings
                    .iter()
                    .map(|w| format!("pending block {} (CPU {}): {w}", p.block, p.cpu)),
            );
            // The last switch's new thread is the CPU's current thread (§4.3), when the
            // block is the CPU's newest (an open batch).
            let mut current = None;
            if b.switches.last().is_some_and(|s| s.new_tid.is_none()) {
                match processes::current_thread(ctx, p.cpu) {
                    Ok((_, tid)) => current = u32::try_from(tid).ok(),
                    Err(why) => note(
                        &mut warnings,
                        format!("last pending switch's new thread unknown: {why}"),
                    ),
                }
            }
            let last = b.switches.len().saturating_sub(1);
            for (i, s) in b.switches.iter().enumerate() {
                let mut r = compact_row(&names, s, Some(p.cpu), "pending", None);
                if i == last && r.new_tid.is_none() {
                    r.new_tid = current;
                }
                r.clock = p.clock;
                r.found_by = Some(p.found_by);
                r.filetime = conv.to_filetime(s.time);
                r.time = r.filetime.map(filetime_to_iso8601);
                rows.push(r);
            }
        }
        flag_times(
            &facts,
            &mut rows[first_row..],
            &format!("pending block {} (CPU {})", p.block, p.cpu),
            &conv,
            &mut warnings,
        );
    }
    // Events and batches in the buffers of every session.
    if let Some(array) = list.array.as_ref() {
        for s in &list.sessions {
            let conv = clock::for_session(ctx, &facts, s);
            if let Some(why) = conv.problem() {
                note(
                    &mut warnings,
                    format!("logger {}: times not converted: {why}", s.logger_id),
                );
            }
            let first_row = rows.len();
            for b in find_buffers(ctx, array, s).buffers {
                let (Some(valid), false) = (b.header.valid_bytes(), b.header.compressed()) else {
                    continue;
                };
                let Ok(data) = read_buffer(ctx, &b) else {
                    continue;
                };
                let cpu = b.cpu.or(Some(b.header.processor_index));
                records::walk_each(&data, valid as usize, |r| {
                    let (Some(payload), Some(ts)) =
                        (r.perfinfo_payload(&data), r.perfinfo_timestamp(&data))
                    else {
                        return;
                    };
                    match r.hook {
                        Some(0x0524) => {
                            if let Some(c) = cswitch::decode(payload, r.version) {
                                rows.push(SwitchRow {
                                    cpu,
                                    timestamp: ts,
                                    time: None,
                                    filetime: None,
                                    time_flag: None,
                                    old_tid: c.old_tid,
                                    old_process: None,
                                    new_tid: Some(c.new_tid),
                                    new_process: None,
                                    old_priority: Some(c.old_priority),
                                    new_priority: Some(c.new_priority),
                                    old_state: names.state(Some(c.old_state)),
                                    old_wait_reason: (c.old_state == 5)
                                        .then(|| names.wait_reason(Some(c.old_wait_reason)))
                                        .flatten(),
                                    old_wait_mode: name_or_number(Some(c.old_wait_mode), wait_mode),
                                    new_thread_wait_time: c.new_thread_wait_time,
                                    source: "event",
                                    logger_id: Some(s.logger_id),
                                    clock: None,
                                    found_by: None,
                                });
                            }
                        }
                        Some(0x0525) => {
                            let batch = ccswap::decode(payload, mwr);
                            for sw in &batch.switches {
                                rows.push(compact_row(&names, sw, cpu, "batch", Some(s.logger_id)));
                            }
                        }
                        _ => {}
                    }
                });
            }
            for r in &mut rows[first_row..] {
                r.filetime = conv.to_filetime(r.timestamp);
                r.time = r.filetime.map(filetime_to_iso8601);
            }
            flag_times(
                &facts,
                &mut rows[first_row..],
                &format!("logger {}", s.logger_id),
                &conv,
                &mut warnings,
            );
        }
    }
    if let Some(c) = cpu_filter {
        rows.retain(|r| r.cpu == Some(c));
    }
    // Thread id → process, from the process list.
    let procs = processes::walk(ctx);
    warnings.extend(procs.warnings.iter().cloned());
    let by_tid = procs.by_tid();
    let name_of = |tid: u32| -> Option<String> {
        if tid == 0 {
            return Some("Idle".into());
        }
        by_tid
            .get(&u64::from(tid))
            .map(|(pid, name)| format!("{name} ({pid})"))
    };
    for r in &mut rows {
        r.old_process = name_of(r.old_tid);
        r.new_process = r.new_tid.and_then(name_of);
    }
    rows.sort_by_key(|r| (r.cpu, r.timestamp));
    CSwitchReport { rows, warnings }
}

/// Flag the rows whose converted time cannot be right (after the dump's SystemTime or before
/// boot) and say how many, for whom, and with which anchor.
fn flag_times(
    facts: &ClockFacts,
    rows: &mut [SwitchRow],
    whose: &str,
    conv: &clock::Converter,
    warnings: &mut Vec<String>,
) {
    let (mut after, mut before, mut example) = (0usize, 0usize, None);
    for r in rows.iter_mut() {
        let Some(ft) = r.filetime else { continue };
        if let Some(why) = facts.implausible(ft, conv) {
            let late = facts.system_time.is_some_and(|now| ft > now);
            r.time_flag = Some(if late { "after_dump" } else { "before_boot" });
            if late {
                after += 1;
            } else {
                before += 1;
            }
            example.get_or_insert(why);
        }
    }
    if after + before > 0 {
        warnings.push(format!(
            "{whose}: {} of {} switch times fall after the dump's SystemTime and {before} before boot (e.g. {}); converted with {}: the clock facts or the anchor do not fit these timestamps",
            after,
            rows.len(),
            example.unwrap_or_default(),
            conv.how().unwrap_or("FILETIME timestamps (system-time clock)")
        ));
    }
}

impl CSwitchReport {
    /// Keep the switches of the last `window` (100 ns units) before `end` (a FILETIME: the
    /// dump's SystemTime, or the newest switch when the dump has none). Switches without a
    /// wall-clock time cannot be placed: they are dropped and counted in a warning.
    pub fn keep_last(&mut self, window: u64, end: Option<u64>) {
        let end = end
            .filter(|&e| e != 0)
            .or_else(|| self.rows.iter().filter_map(|r| r.filetime).max());
        let Some(end) = end else {
            if !self.rows.is_empty() {
                self.warnings.push(format!(
                    "--last: no switch has a wall-clock time; {} switches dropped",
                    self.rows.len()
                ));
            }
            self.rows.clear();
            return;
        };
        let from = end.saturating_sub(window);
        let untimed = self.rows.iter().filter(|r| r.filetime.is_none()).count();
        let flagged = self
            .rows
            .iter()
            .filter(|r| r.filetime.is_some() && r.time_flag.is_some())
            .count();
        self.rows
            .retain(|r| r.time_flag.is_none() && r.filetime.is_some_and(|t| t >= from));
        if untimed > 0 {
            self.warnings.push(format!(
                "--last: {untimed} switches without a wall-clock time dropped"
            ));
        }
        if flagged > 0 {
            self.warnings.push(format!(
                "--last: {flagged} switches whose time falls after the dump or before boot dropped (they cannot be placed in the window)"
            ));
        }
    }

    /// JSON Lines with the Timesketch fields.
    pub fn to_jsonl(&self) -> String {
        super::to_jsonl(&self.rows, |r| {
            let who = |tid: Option<u32>, p: &Option<String>| match (tid, p) {
                (Some(t), Some(p)) => format!("{p} tid {t}"),
                (Some(t), None) => format!("tid {t}"),
                (None, _) => "unknown thread".into(),
            };
            let mut message = format!(
                "CPU {}: {} -> {}",
                r.cpu.map_or_else(|| "?".into(), |c| c.to_string()),
                who(Some(r.old_tid), &r.old_process),
                who(r.new_tid, &r.new_process)
            );
            if let Some(st) = &r.old_state {
                message.push_str(&format!("; old thread {st}"));
                if let Some(w) = &r.old_wait_reason {
                    message.push_str(&format!(" ({w})"));
                }
            }
            message.push_str(&format!(" [{}]", r.source));
            super::Timesketch {
                datetime: r.time.clone(),
                timestamp_desc: "Context switch",
                message,
            }
        })
    }

    pub fn to_table(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{:>4} {:>20} {:>8} {:>8} {:>5} {:<16} {:<18} {:>8}  source",
            "CPU",
            "timestamp (raw)",
            "old TID",
            "new TID",
            "prio",
            "old state",
            "wait reason",
            "wait"
        );
        for r in &self.rows {
            let _ = writeln!(
                o,
                "{:>4} {:>20} {:>8} {:>8} {:>5} {:<16} {:<18} {:>8}  {}",
                r.cpu.map(|c| c.to_string()).unwrap_or_default(),
                r.timestamp,
                r.old_tid,
                r.new_tid
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "?".into()),
                r.old_priority.map(|p| p.to_string()).unwrap_or_default(),
                r.old_state.as_deref().unwrap_or("-"),
                r.old_wait_reason.as_deref().unwrap_or("-"),
                r.new_thread_wait_time
                    .map(|w| w.to_string())
                    .unwrap_or_default(),
                r.source
            );
        }
        o
    }

    pub fn to_csv(&self) -> String {
        let mut o = String::from("cpu,timestamp,time,old_tid,old_process,new_tid,new_process,old_priority,new_priority,old_state,old_wait_reason,old_wait_mode,new_thread_wait_time,source,logger_id,clock,time_flag\n");
        let n = |v: Option<String>| v.unwrap_or_default();
        for r in &self.rows {
            let f = [
                n(r.cpu.map(|x| x.to_string())),
                r.timestamp.to_string(),
                n(r.time.clone()),
                r.old_tid.to_string(),
                n(r.old_process.clone()),
                n(r.new_tid.map(|x| x.to_string())),
                n(r.new_process.clone()),
                n(r.old_priority.map(|x| x.to_string())),
                n(r.new_priority.map(|x| x.to_string())),
                n(r.old_state.clone()),
                n(r.old_wait_reason.clone()),
                n(r.old_wait_mode.clone()),
                n(r.new_thread_wait_time.map(|x| x.to_string())),
                r.source.to_string(),
                n(r.logger_id.map(|x| x.to_string())),
                n(r.clock.map(|x| x.to_string())),
                r.time_flag.unwrap_or_default().to_string(),
            ];
            o.push_str(&super::csv_line(&f));
        }
        o
    }
}
