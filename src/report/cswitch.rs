//! `etwdump cswitch`: context switches per CPU, from the pending CCSWAP blocks (never flushed)
//! and from 0x0525 batches and 0x0524 CSwitch events in the recovered buffers.
//!
//! Times: see [`crate::etw::clock`]. Process names: the process list (`kernel::processes`),
//! "name (pid)"; TID 0 is "Idle"; null when the thread is not in the list.

use crate::decode::ccswap::{self, CompactSwitch};
use crate::decode::names::{maximum_wait_reason, thread_state, wait_mode, wait_reason};
use crate::decode::{cswitch, records};
use crate::etw::buffers::{find_buffers, read_buffer};
use crate::etw::ccswap::{find_pending, FoundBy};
use crate::etw::clock;
use crate::etw::loggers::list_sessions;
use crate::kernel::context::KernelContext;
use crate::kernel::processes;
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

fn name_or_number(v: Option<u8>, f: fn(u8) -> Option<&'static str>) -> Option<String> {
    v.map(|x| f(x).map_or_else(|| x.to_string(), String::from))
}

fn compact_row(
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
        old_tid: s.old_tid,
        old_process: None,
        new_tid: s.new_tid,
        new_process: None,
        old_priority: s.old_priority,
        new_priority: None,
        old_state: name_or_number(s.old_state, thread_state),
        old_wait_reason: name_or_number(s.old_wait_reason, wait_reason),
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
    let mwr = maximum_wait_reason(ctx.build);
    let list = list_sessions(ctx);
    // Pending blocks.
    let pending = find_pending(ctx);
    warnings.extend(pending.warnings);
    for p in &pending.blocks {
        let conv = clock::for_clock(ctx, &list.sessions, p.clock);
        if let Some(why) = conv.problem() {
            note(
                &mut warnings,
                format!("pending blocks: times not converted: {why}"),
            );
        }
        if let Some(b) = &p.decoded.batch {
            warnings.extend(
                b.warnings
                    .iter()
                    .map(|w| format!("pending block {} (CPU {}): {w}", p.block, p.cpu)),
            );
            for s in &b.switches {
                let mut r = compact_row(s, Some(p.cpu), "pending", None);
                r.clock = p.clock;
                r.found_by = Some(p.found_by);
                r.filetime = conv.to_filetime(s.time);
                r.time = r.filetime.map(filetime_to_iso8601);
                rows.push(r);
            }
        }
    }
    // Events and batches in the buffers of every session.
    if let Some(array) = list.array.as_ref() {
        for s in &list.sessions {
            let conv = clock::for_session(ctx, s);
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
                                    old_tid: c.old_tid,
                                    old_process: None,
                                    new_tid: Some(c.new_tid),
                                    new_process: None,
                                    old_priority: Some(c.old_priority),
                                    new_priority: Some(c.new_priority),
                                    old_state: name_or_number(Some(c.old_state), thread_state),
                                    old_wait_reason: (c.old_state == 5)
                                        .then(|| {
                                            name_or_number(Some(c.old_wait_reason), wait_reason)
                                        })
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
                                rows.push(compact_row(sw, cpu, "batch", Some(s.logger_id)));
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

impl CSwitchReport {
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
        let mut o = String::from("cpu,timestamp,time,old_tid,old_process,new_tid,new_process,old_priority,new_priority,old_state,old_wait_reason,old_wait_mode,new_thread_wait_time,source,logger_id,clock\n");
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
            ];
            o.push_str(&f.join(","));
            o.push('\n');
        }
        o
    }
}
