//! `etwdump buffers`: every trace buffer the dump holds, from its ETW source: a memory dump's
//! buffers of each session (found on the lists and per-CPU routes), a triage dump's saved
//! windows and secondary-data buffers. One row per buffer or window, those that give no
//! records included (with why).

use crate::etl::header::state_name;
use crate::etl::records::walk_from;
use crate::etw::buffers::BufferList;
use crate::etw::source::{EtwSource, Skip, TraceUnit};
use crate::kernel::context::KernelContext;
use crate::warning::Warning;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One buffer (or saved window), analysed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BufferRow {
    /// Null for a saved error-log window whose logger cannot be told.
    pub session_id: Option<u64>,
    pub session_name: Option<crate::text::Untrusted>,
    /// Where the bytes are: `memory`, `current_buffer`, `errlog_tail` or `secondary_data`.
    pub source: &'static str,
    /// The buffer's virtual address (null for the secondary data, which has none).
    pub address: Option<String>,
    /// Where the saved bytes are in the file (triage dumps).
    pub file_offset: Option<u64>,
    /// Offset in the buffer of the first byte held (a window that starts inside its buffer).
    pub window_offset: u64,
    /// The lists and per-CPU routes a memory buffer was found on.
    pub lists: Vec<BufferList>,
    pub state: Option<u64>,
    pub state_name: Option<&'static str>,
    pub buffer_type: Option<u64>,
    pub buffer_flag: Option<u64>,
    pub processor: Option<u64>,
    pub sequence_number: Option<u64>,
    pub buffer_size: Option<u64>,
    /// The buffer's valid length (a saved window: at bug check); 0 when it has no valid end.
    pub valid_bytes: u64,
    /// Bytes of it saved in a triage dump (null for memory: the whole buffer is there).
    pub saved_bytes: Option<u64>,
    /// Bytes at a window's start that are the tail of a record cut by the kernel's limit.
    pub partial_bytes: u64,
    pub trimmed_bytes: u64,
    pub record_count: usize,
    pub records_by_hook: BTreeMap<String, u64>,
    pub compressed: bool,
    /// "logger N buffer K of the secondary data" when this window repeats it; the kernel
    /// buffer's address when this consumer's buffer is a copy of one still in kernel memory.
    pub duplicate_of: Option<String>,
    /// A buffer queued for a real-time consumer: the consumer's process (its address space
    /// holds `address`) and how the buffer was found there.
    pub consumer_pid: Option<u64>,
    pub consumer_process: Option<crate::text::Untrusted>,
    pub found_via: Option<String>,
    /// A triage window: how it was found and where its base and end pointers were read.
    pub window: Option<crate::etw::source::WindowEvidence>,
    pub warnings: Vec<String>,
}

/// Rows built on every core, this many units at a time, and emitted in order.
const CHUNK: usize = 256;

/// Stream one row per buffer or window of the selected sessions to `emit`, in the source's
/// canonical order; returns the warnings (the session list's, then the source's).
pub fn stream(
    ctx: &KernelContext<'_>,
    session: Option<&str>,
    emit: &mut dyn FnMut(&BufferRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    let src = EtwSource::open_units(ctx, session);
    let names: HashMap<u64, crate::text::Untrusted> = src
        .sessions()
        .iter()
        .filter_map(|s| Some((s.logger_id?, s.name()?.clone())))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    for chunk in src.all_units().chunks(CHUNK) {
        for r in rows_parallel(&src, &names, chunk, threads) {
            emit(&r)?;
        }
    }
    let mut warnings = src.memory().map_or_else(Vec::new, |l| l.warnings.clone());
    warnings.extend(src.warnings().iter().cloned());
    Ok(warnings)
}

/// Every row, collected (tests and small listings).
pub struct BufferReport {
    pub rows: Vec<BufferRow>,
    pub warnings: Vec<Warning>,
}

/// Find, read and walk every buffer of the selected sessions.
pub fn analyse(ctx: &KernelContext<'_>, session: Option<&str>) -> BufferReport {
    let mut rows = Vec::new();
    let warnings = stream(ctx, session, &mut |r| {
        rows.push(r.clone());
        Ok(())
    })
    .unwrap_or_default();
    BufferReport { rows, warnings }
}

/// Read and walk `units` on up to `threads` cores (the order of the rows is kept).
fn rows_parallel(
    src: &EtwSource<'_, '_>,
    names: &HashMap<u64, crate::text::Untrusted>,
    units: &[TraceUnit],
    threads: usize,
) -> Vec<BufferRow> {
    super::in_order(units, threads, |u| row(src, names, u))
}

fn row(
    src: &EtwSource<'_, '_>,
    names: &HashMap<u64, crate::text::Untrusted>,
    u: &TraceUnit,
) -> BufferRow {
    let h = u.header.as_ref();
    let triage = u.origin != "memory";
    let mut r = BufferRow {
        session_id: u.logger_id,
        session_name: u.logger_id.and_then(|id| names.get(&id).cloned()),
        source: u.origin,
        address: u.address.map(|a| a.to_string()),
        file_offset: u.file_offset,
        window_offset: u.shift as u64,
        lists: u.lists.clone(),
        state: h.map(|h| h.state),
        state_name: h.map(|h| state_name(h.state)),
        buffer_type: h.map(|h| h.buffer_type),
        buffer_flag: h.map(|h| h.buffer_flag),
        processor: u.processor,
        sequence_number: h.map(|h| h.sequence_number),
        buffer_size: h.map(|h| h.buffer_size),
        valid_bytes: u.buffer_valid.unwrap_or(0),
        saved_bytes: triage.then_some(u.valid as u64),
        partial_bytes: u.partial_bytes as u64,
        compressed: matches!(u.skip, Some(Skip::Compressed)),
        consumer_pid: u.owner.as_ref().and_then(|o| o.pid),
        consumer_process: u.owner.as_ref().and_then(|o| o.process.clone()),
        found_via: u.via.map(|v| v.to_string()),
        window: u.window,
        ..BufferRow::default()
    };
    match &u.skip {
        Some(Skip::Compressed) => {
            r.warnings.push("compressed buffer: not parsed".into());
            return r;
        }
        Some(s @ (Skip::NoValidEnd { .. } | Skip::NotInFile)) => {
            r.warnings.push(s.to_string());
            return r;
        }
        Some(Skip::Duplicate { logger_id, buffer }) => {
            r.duplicate_of = Some(format!(
                "logger {logger_id} buffer {buffer} of the secondary data"
            ));
        }
        Some(Skip::NoRecordChain) => r.warnings.push("no complete record chain".into()),
        Some(Skip::CopyOf { address }) => {
            r.duplicate_of = Some(address.to_string());
        }
        None => {}
    }
    match src.try_bytes(u) {
        Ok(d) => {
            let w = walk_from(&d, u.first_record, u.valid, |_| {});
            r.record_count = w.count;
            r.records_by_hook = w.by_key();
            r.trimmed_bytes = w.trimmed as u64;
            if let Some(t) = &w.torn {
                r.warnings
                    .push(format!("records stop at +{:#x}: {}", t.offset, t.reason));
            }
        }
        Err(e) => r.warnings.push(format!("buffer data: {e}")),
    }
    r
}
