//! `sessions`, `buffers` and `extract` on triage dumps (minidumps): what the kernel saved at
//! bug check (triage-etw.md; [`crate::etw::triage`]). A minidump holds no logger contexts, so
//! only these sessions can be known: those started with EVENT_TRACE_ADDTO_TRIAGE_DUMP (listed
//! in the ETW secondary data with their header), logger 2 (its current buffer on the crashing
//! CPU), and the error-log session (the tail of its buffer).

use super::extract::{
    header_buffer, write_manifest, ExtractError, HeaderFacts, Manifest, ManifestBuffer,
    SessionFile, Skipped,
};
use crate::etl::header::BUFFER_HEADER_SIZE;
use crate::etl::records::{walk_from, Walk};
use crate::etl::writer::{file_name, saved_buffer, synthetic_buffer, SyntheticHeader};
use crate::etw::loggers::Session;
use crate::etw::mode::{clock_type_name, logger_mode_flags};
use crate::etw::triage::{self, TriageEtw, WindowKind};
use crate::kernel::context::KernelContext;
use crate::time::filetime_to_iso8601;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// What cannot be known from a minidump, said once with every listing.
pub const UNKNOWABLE: &str = "a minidump holds no logger contexts: sessions that were not started with EVENT_TRACE_ADDTO_TRIAGE_DUMP (0x80000000) and whose buffers the kernel did not save at bug check cannot be known from it; nor can the buffer counts, events lost or log files of any session";

/// One session known from a triage dump.
#[derive(Clone, Debug, Serialize)]
pub struct TriageSession {
    /// Null for an error-log tail whose logger cannot be told (no IopErrorLogSession in the
    /// dump and no secondary-data buffer it repeats).
    pub logger_id: Option<u64>,
    pub name: Option<String>,
    /// Where it is known from: "secondary_data", "current_buffer" or "errlog_tail".
    pub source: &'static str,
    pub logger_mode: Option<u64>,
    pub logger_mode_flags: Vec<String>,
    pub clock_type: Option<u64>,
    pub clock_type_name: Option<String>,
    pub buffer_size: Option<u64>,
    pub start_time: Option<String>,
    pub start_time_raw: Option<u64>,
    /// Buffers (or windows) recovered.
    pub buffers: usize,
}

/// Sessions and what is not known.
#[derive(Clone, Debug, Serialize)]
pub struct TriageSessions {
    pub sessions: Vec<TriageSession>,
    pub not_known: &'static str,
    pub warnings: Vec<Warning>,
}

pub fn sessions(ctx: &KernelContext<'_>) -> TriageSessions {
    let t = triage::read(ctx);
    sessions_of(&t)
}

fn sessions_of(t: &TriageEtw) -> TriageSessions {
    let mut out = Vec::new();
    if let Some(b) = &t.blob {
        for s in &b.sessions {
            out.push(TriageSession {
                logger_id: Some(s.logger_id),
                name: Some(s.name.clone()),
                source: "secondary_data",
                logger_mode: Some(s.logger_mode),
                logger_mode_flags: logger_mode_flags(s.logger_mode as u32),
                clock_type: Some(s.clock_type),
                clock_type_name: clock_type_name(s.clock_type).map(String::from),
                buffer_size: Some(s.buffer_size),
                start_time: Some(filetime_to_iso8601(s.start_time)),
                start_time_raw: Some(s.start_time),
                buffers: s.buffers.len(),
            });
        }
    }
    for w in &t.windows {
        if w.duplicate_of.is_some() {
            continue;
        }
        if let Some(id) = w.logger_id {
            if out.iter().any(|s| s.logger_id == Some(id)) {
                continue;
            }
        }
        out.push(TriageSession {
            logger_id: w.logger_id,
            name: None,
            source: w.kind.source(),
            logger_mode: None,
            logger_mode_flags: Vec::new(),
            clock_type: None,
            clock_type_name: match w.kind {
                WindowKind::CurrentBuffer => Some("unknown".into()),
                WindowKind::ErrlogTail => None,
            },
            buffer_size: w.header.as_ref().map(|h| h.buffer_size),
            start_time: None,
            start_time_raw: None,
            buffers: 1,
        });
    }
    TriageSessions {
        sessions: out,
        not_known: UNKNOWABLE,
        warnings: t.warnings.clone(),
    }
}

/// One recovered buffer or window.
#[derive(Clone, Debug, Serialize)]
pub struct TriageBuffer {
    pub session_id: Option<u64>,
    /// "current_buffer", "errlog_tail" or "secondary_data".
    pub source: &'static str,
    /// The buffer's virtual address (windows); null for the secondary data.
    pub address: Option<String>,
    /// Where the saved bytes are in the file.
    pub file_offset: Option<u64>,
    /// Offset in the buffer of the first saved byte (0 when the whole buffer start is saved).
    pub window_offset: u64,
    pub state: Option<u64>,
    pub buffer_type: Option<u64>,
    pub buffer_flag: Option<u64>,
    pub processor: Option<u64>,
    pub sequence_number: Option<u64>,
    pub buffer_size: Option<u64>,
    /// The buffer's valid length at bug check.
    pub valid_bytes: u64,
    /// Bytes saved in the dump.
    pub saved_bytes: u64,
    /// Bytes at the window start that are the tail of a cut record.
    pub partial_bytes: u64,
    pub trimmed_bytes: u64,
    pub record_count: usize,
    pub records_by_hook: BTreeMap<String, u64>,
    /// "logger N buffer K of the secondary data" when this window repeats it.
    pub duplicate_of: Option<String>,
}

/// Every buffer and window of a triage dump (selected by session id or name).
pub fn buffers(
    ctx: &KernelContext<'_>,
    session: Option<&str>,
) -> (Vec<TriageBuffer>, Vec<Warning>) {
    let t = triage::read(ctx);
    (buffers_of(ctx, &t, session), t.warnings)
}

fn buffers_of(ctx: &KernelContext<'_>, t: &TriageEtw, sel: Option<&str>) -> Vec<TriageBuffer> {
    let mut out = Vec::new();
    let sessions: &[triage::BlobSession] = t.blob.as_ref().map_or(&[], |b| &b.sessions);
    for w in &t.windows {
        let name = w
            .logger_id
            .and_then(|id| sessions.iter().find(|s| s.logger_id == id))
            .map(|s| s.name.as_str());
        if !crate::etw::source::selects(w.logger_id, name, sel) {
            continue;
        }
        let walk = w
            .first_record
            .map(|f| walk_from(&w.data, f, w.data.len(), |_| {}))
            .unwrap_or_default();
        let h = w.header.as_ref();
        out.push(TriageBuffer {
            session_id: w.logger_id,
            source: w.kind.source(),
            address: Some(w.base.to_string()),
            file_offset: w.file_offset,
            window_offset: w.start.get() - w.base.get(),
            state: h.map(|h| h.state),
            buffer_type: h.map(|h| h.buffer_type),
            buffer_flag: h.map(|h| h.buffer_flag),
            processor: w.processor,
            sequence_number: h.map(|h| h.sequence_number),
            buffer_size: h.map(|h| h.buffer_size),
            valid_bytes: w.valid,
            saved_bytes: w.data.len() as u64,
            partial_bytes: w.partial_bytes as u64,
            trimmed_bytes: walk.trimmed as u64,
            record_count: walk.count,
            records_by_hook: walk.by_key(),
            duplicate_of: w.duplicate_of.map(|d| {
                format!(
                    "logger {} buffer {} of the secondary data",
                    sessions[d.session].logger_id, d.buffer
                )
            }),
        });
    }
    for s in sessions {
        if !crate::etw::source::selects(Some(s.logger_id), Some(&s.name), sel) {
            continue;
        }
        for b in &s.buffers {
            let walk = ctx
                .dump
                .file_bytes(b.file_offset, b.valid as usize)
                .map(|d| walk_from(d, BUFFER_HEADER_SIZE, d.len(), |_| {}))
                .unwrap_or_default();
            let h = &b.header;
            out.push(TriageBuffer {
                session_id: Some(s.logger_id),
                source: "secondary_data",
                address: None,
                file_offset: Some(b.file_offset),
                window_offset: 0,
                state: Some(h.state),
                buffer_type: Some(h.buffer_type),
                buffer_flag: Some(h.buffer_flag),
                processor: Some(h.processor_index),
                sequence_number: Some(h.sequence_number),
                buffer_size: Some(h.buffer_size),
                valid_bytes: b.valid,
                saved_bytes: b.valid,
                partial_bytes: 0,
                trimmed_bytes: walk.trimmed as u64,
                record_count: walk.count,
                records_by_hook: walk.by_key(),
                duplicate_of: None,
            });
        }
    }
    out
}

/// One buffer for a triage ETL file: its bytes (BufferSize long) and manifest entry.
struct FileBuffer {
    bytes: Vec<u8>,
    entry: ManifestBuffer,
    walk: Walk,
}

/// `extract` on a triage dump: one ETL per logger with recovered records (secondary-data
/// buffers, logger 2's window, the error-log tail unless it repeats a secondary-data buffer).
pub fn extract(
    ctx: &KernelContext<'_>,
    dump_name: &str,
    dir: &Path,
    session: Option<&str>,
    force: bool,
) -> Result<Manifest, ExtractError> {
    let t = triage::read(ctx);
    let mut warnings: Vec<Warning> = t.warnings.clone();
    let list = sessions_of(&t);
    std::fs::create_dir_all(dir).map_err(|e| ExtractError::Io {
        path: dir.to_path_buf(),
        source: e,
    })?;
    let manifest_path = dir.join("manifest.json");
    if manifest_path.exists() && !force {
        return Err(ExtractError::Exists(manifest_path));
    }
    let blob_h = t.blob.as_ref().and_then(|b| b.header);
    let facts = HeaderFacts::from_triage(ctx, blob_h, t.crash_cpu.and_then(|c| c.mhz));
    let mut used = HashSet::new();
    let mut out = Vec::new();
    for s in &list.sessions {
        let Some(logger_id) = s.logger_id else {
            continue; // no logger to name the file after or to gather records by
        };
        if !crate::etw::source::selects(s.logger_id, s.name.as_deref(), session) {
            continue;
        }
        let mut bufs: Vec<FileBuffer> = Vec::new();
        let mut skipped = Vec::new();
        let mut size = s.buffer_size.map(|b| b as usize);
        // Windows of this logger.
        for w in t.windows.iter().filter(|w| w.logger_id == Some(logger_id)) {
            if w.duplicate_of.is_some() {
                continue;
            }
            let Some(first) = w.first_record else {
                skipped.push(Skipped {
                    address: w.base.to_string(),
                    reason: format!("{}: no complete record chain", w.kind.source()),
                });
                continue;
            };
            let bsize = w
                .header
                .as_ref()
                .map(|h| h.buffer_size as usize)
                .or(size)
                .unwrap_or(w.kind.limit() as usize + BUFFER_HEADER_SIZE)
                .max(w.data.len() + BUFFER_HEADER_SIZE)
                .next_multiple_of(0x1000);
            size.get_or_insert(bsize);
            let seq = w.header.as_ref().map_or(1, |h| h.sequence_number);
            let made = if w.starts_at_base {
                saved_buffer(bsize, w.processor, &w.data)
            } else {
                let h = SyntheticHeader {
                    size: bsize,
                    logger_id,
                    sequence_number: seq,
                    timestamp: 0,
                    buffer_type: 0,
                    processor: w.processor,
                };
                synthetic_buffer(&h, &w.data[first..])
            };
            match made {
                Some((bytes, walk)) => bufs.push(FileBuffer {
                    entry: ManifestBuffer {
                        source: w.kind.source(),
                        address: Some(w.base.to_string()),
                        cpu: w.processor,
                        sequence_number: seq,
                        valid_bytes: walk.end as u64,
                        records: walk.count,
                        file_offset: 0,
                    },
                    bytes,
                    walk,
                }),
                None => skipped.push(Skipped {
                    address: w.base.to_string(),
                    reason: "does not fit the session's buffer size".into(),
                }),
            }
        }
        // Secondary-data buffers.
        if let Some(bs) = t
            .blob
            .as_ref()
            .and_then(|b| b.sessions.iter().find(|x| x.logger_id == logger_id))
        {
            for b in &bs.buffers {
                let Some(data) = ctx.dump.file_bytes(b.file_offset, b.valid as usize) else {
                    continue;
                };
                let bsize = bs.buffer_size as usize;
                match saved_buffer(bsize, Some(b.header.processor_index), data) {
                    Some((bytes, walk)) if walk.count > 0 => bufs.push(FileBuffer {
                        entry: ManifestBuffer {
                            source: "secondary_data",
                            address: None,
                            cpu: Some(b.header.processor_index),
                            sequence_number: b.header.sequence_number,
                            valid_bytes: walk.end as u64,
                            records: walk.count,
                            file_offset: 0,
                        },
                        bytes,
                        walk,
                    }),
                    Some(_) => skipped.push(Skipped {
                        address: format!("file offset {:#x}", b.file_offset),
                        reason: "no complete record".into(),
                    }),
                    None => skipped.push(Skipped {
                        address: format!("file offset {:#x}", b.file_offset),
                        reason: "valid length exceeds BufferSize".into(),
                    }),
                }
            }
        }
        if bufs.is_empty() {
            continue;
        }
        bufs.sort_by_key(|b| b.entry.sequence_number);
        let bsize = size.unwrap_or(0x1000);
        let sess = Session {
            name: s.name.clone(),
            logger_mode: s.logger_mode,
            clock_type: s.clock_type,
            buffer_size: Some(bsize as u64),
            start_time_raw: s.start_time_raw,
            ..Session::bare(logger_id, crate::addr::VirtAddr::new(0), "triage")
        };
        let header = header_buffer(ctx, &sess, &facts, bufs.len() as u32 + 1);
        let mut name = file_name(logger_id, s.name.as_deref());
        let mut n = 2;
        while !used.insert(name.to_ascii_lowercase()) {
            name = file_name(logger_id, Some(&format!("logger-{n}")));
            n += 1;
        }
        let path = dir.join(&name);
        if path.exists() && !force {
            return Err(ExtractError::Exists(path));
        }
        let header_len = header.len();
        let mut file = SessionFile::create(dir, &name, header)?;
        for b in bufs {
            if b.bytes.len() != header_len {
                warnings.push(Warning::new(
                    WarningKind::Anomaly,
                    format!(
                        "logger {}: a {:#x}-byte buffer in a file of {:#x}-byte buffers; skipped",
                        logger_id,
                        b.bytes.len(),
                        header_len
                    ),
                ));
                continue;
            }
            file.push(b.entry, b.bytes, &b.walk)?;
        }
        out.push(file.finish(logger_id, s.name.clone(), name, skipped, &facts)?);
    }
    warnings.push(Warning::new(
        WarningKind::Unknowable,
        format!("not known: {UNKNOWABLE}"),
    ));
    let m = Manifest {
        dump: dump_name.to_string(),
        sessions: out,
        warnings,
    };
    write_manifest(&m, &manifest_path)?;
    Ok(m)
}
