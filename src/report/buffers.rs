//! `etwdump buffers`: every trace buffer a session still holds in memory.

use crate::etl::header::state_name;
use crate::etl::records::walk;
use crate::etw::buffers::{find_buffers, read_buffer, BufferList, FoundBuffer};
use crate::etw::loggers::{list_sessions, Session, SessionList};
use crate::kernel::context::KernelContext;
use crate::warning::Warning;
use serde::Serialize;
use std::collections::BTreeMap;

/// One buffer, analysed.
#[derive(Clone, Debug, Serialize)]
pub struct BufferRow {
    pub session_id: u64,
    pub session_name: Option<String>,
    pub address: String,
    pub lists: Vec<BufferList>,
    pub state: u64,
    pub state_name: &'static str,
    pub buffer_type: u64,
    pub buffer_flag: u64,
    pub processor: Option<u64>,
    pub sequence_number: u64,
    pub buffer_size: u64,
    pub valid_bytes: u64,
    pub trimmed_bytes: u64,
    pub record_count: usize,
    pub records_by_hook: BTreeMap<String, u64>,
    pub compressed: bool,
    pub warnings: Vec<String>,
}

/// Buffers of the selected sessions, with the session list they came from.
pub struct BufferReport {
    pub sessions: SessionList,
    pub rows: Vec<BufferRow>,
    /// Session-level problems (list walks), by session id.
    pub warnings: Vec<Warning>,
}

/// Does `s` match a `--session` selector (id or name)?
pub fn selected(s: &Session, sel: Option<&str>) -> bool {
    crate::etw::source::selects(Some(s.logger_id), s.name.as_deref(), sel)
}

/// Find, read and walk every buffer of the selected sessions.
pub fn analyse(ctx: &KernelContext<'_>, session: Option<&str>) -> BufferReport {
    let sessions = list_sessions(ctx);
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    if let Some(array) = sessions.array.clone() {
        for s in sessions.sessions.iter().filter(|s| selected(s, session)) {
            let found = find_buffers(ctx, &array, s);
            warnings.extend(found.warnings.into_iter().map(|w| w.in_logger(s.logger_id)));
            rows.extend(rows_parallel(ctx, s, &found.buffers));
        }
    }
    BufferReport {
        sessions,
        rows,
        warnings,
    }
}

/// Read and walk the buffers on every core (the order of the rows is kept).
fn rows_parallel(ctx: &KernelContext<'_>, s: &Session, buffers: &[FoundBuffer]) -> Vec<BufferRow> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || buffers.len() < 64 {
        return buffers.iter().map(|b| row(ctx, s, b)).collect();
    }
    let chunk = buffers.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = buffers
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || part.iter().map(|b| row(ctx, s, b)).collect::<Vec<_>>())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

fn row(ctx: &KernelContext<'_>, s: &Session, b: &FoundBuffer) -> BufferRow {
    let h = &b.header;
    let mut r = BufferRow {
        session_id: s.logger_id,
        session_name: s.name.clone(),
        address: b.address.to_string(),
        lists: b.lists.iter().copied().collect(),
        state: h.state,
        state_name: state_name(h.state),
        buffer_type: h.buffer_type,
        buffer_flag: h.buffer_flag,
        processor: b.cpu.or(Some(h.processor_index)),
        sequence_number: h.sequence_number,
        buffer_size: h.buffer_size,
        valid_bytes: 0,
        trimmed_bytes: 0,
        record_count: 0,
        records_by_hook: BTreeMap::new(),
        compressed: h.compressed(),
        warnings: Vec::new(),
    };
    let Some(valid) = h.valid_bytes() else {
        r.warnings.push(format!(
            "neither CurrentOffset {:#x} nor SavedOffset {:#x} is a valid end for BufferSize {:#x}",
            h.current_offset, h.saved_offset, h.buffer_size
        ));
        return r;
    };
    r.valid_bytes = valid;
    if r.compressed {
        r.warnings.push("compressed buffer: not parsed".into());
        return r;
    }
    match read_buffer(ctx, b) {
        Ok(d) => {
            let w = walk(&d, valid as usize);
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
