//! `etwdump scan`: every trace buffer, pending block and logger context in physical memory,
//! live or not ([`crate::etw::carve`]), as rows: one per object, then one per orphan group.

use super::extract::{
    header_buffer, write_manifest, ExtractError, Manifest, ManifestBuffer, SessionFile,
};
use crate::etl::records::walk;
use crate::etl::writer::{file_name, fix_up};
use crate::etw::carve::{buffer_bytes, scan, Class, Progress, ScanReport};
use crate::etw::loggers::Session;
use crate::kernel::context::KernelContext;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::path::Path;

/// One row of `scan`: a carved object or an orphan group (`kind`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScanRow {
    /// `buffer`, `pending_block`, `logger_context` or `orphan_group`.
    pub kind: &'static str,
    /// `live`, `orphaned`, `stale_copy` or `unknown` (the live state could not be established;
    /// a warning says why); null for a group.
    pub class: Option<Class>,
    pub physical_address: Option<String>,
    pub virtual_address: Option<String>,
    pub logger_id: Option<u64>,
    pub buffer_size: Option<u64>,
    pub sequence_number: Option<u64>,
    /// The buffer header's raw clock value (`raw_timestamp` in JSON and CSV since
    /// format_version 3: Timesketch reads a `timestamp` as microseconds since 1970).
    #[serde(rename = "raw_timestamp")]
    pub timestamp: Option<u64>,
    pub processor: Option<u64>,
    pub valid_bytes: Option<u64>,
    pub recovered_bytes: Option<u64>,
    pub records: Option<usize>,
    /// Where the record chain ends in the recovered bytes.
    pub chain_end: Option<u64>,
    pub complete: Option<bool>,
    /// Buffers whose record chain stops before the recovered bytes end: where, in which page
    /// (and its physical address), and whether at a page's start (a page reused by another
    /// allocation).
    pub chain_break: Option<crate::etw::carve::ChainBreak>,
    /// Buffers: the orphan group; groups: their number.
    pub group: Option<usize>,
    pub used_bytes: Option<u32>,
    pub switches: Option<usize>,
    pub clock_type: Option<u64>,
    pub name: Option<crate::text::Untrusted>,
    /// Groups: how many buffers, and why they are taken as one session.
    pub buffers: Option<usize>,
    pub evidence: Option<String>,
}

/// The scan and its rows.
pub struct Scan {
    pub report: ScanReport,
}

impl Scan {
    /// Scan `ctx`'s physical memory on `threads` threads.
    pub fn run(ctx: &KernelContext<'_>, threads: usize, progress: &Progress) -> Scan {
        Scan {
            report: scan(ctx, threads, progress),
        }
    }

    /// The problems met.
    pub fn warnings(&self) -> &[Warning] {
        &self.report.warnings
    }

    /// The rows: buffers, pending blocks, contexts (each in physical order), then the groups.
    pub fn rows(&self) -> Vec<ScanRow> {
        let r = &self.report;
        let mut out = Vec::new();
        for b in &r.buffers {
            out.push(ScanRow {
                kind: "buffer",
                class: Some(b.class),
                physical_address: Some(b.physical_address.to_string()),
                virtual_address: b.virtual_address.map(|v| v.to_string()),
                logger_id: Some(b.logger_id),
                buffer_size: Some(b.buffer_size),
                sequence_number: Some(b.sequence_number),
                timestamp: Some(b.timestamp),
                processor: Some(b.processor),
                valid_bytes: Some(b.valid_bytes),
                recovered_bytes: Some(b.recovered_bytes),
                records: Some(b.records),
                chain_end: Some(b.chain_end),
                complete: Some(b.complete),
                chain_break: b.chain_break,
                group: b.group,
                ..ScanRow::default()
            });
        }
        for b in &r.blocks {
            out.push(ScanRow {
                kind: "pending_block",
                class: Some(b.class),
                physical_address: Some(b.physical_address.to_string()),
                virtual_address: b.virtual_address.map(|v| v.to_string()),
                timestamp: Some(b.last_timestamp),
                used_bytes: Some(b.used_bytes),
                switches: Some(b.switches),
                ..ScanRow::default()
            });
        }
        for c in &r.contexts {
            out.push(ScanRow {
                kind: "logger_context",
                class: Some(c.class),
                physical_address: Some(c.physical_address.to_string()),
                virtual_address: c.virtual_address.map(|v| v.to_string()),
                logger_id: Some(c.logger_id),
                buffer_size: Some(c.buffer_size),
                clock_type: Some(c.clock_type),
                name: c.name.clone(),
                evidence: c.note.clone(),
                ..ScanRow::default()
            });
        }
        for g in &r.groups {
            out.push(ScanRow {
                kind: "orphan_group",
                physical_address: g.context.map(|p| p.to_string()),
                logger_id: Some(g.logger_id),
                buffer_size: Some(g.buffer_size),
                records: Some(g.records),
                group: Some(g.group),
                name: g.name.clone(),
                buffers: Some(g.buffers),
                evidence: Some(g.evidence.clone()),
                sequence_number: Some(g.first_sequence),
                ..ScanRow::default()
            });
        }
        out
    }
}

impl Scan {
    /// Write each orphan group as its own .etl in `dir` (`carved-<group>-<id>-<name>.etl`) and
    /// `dir/manifest.json`, which says the files were carved and why each group's buffers are
    /// taken as one session. Buffers in SequenceNumber order, each fixed up as `extract` does; a
    /// partial buffer keeps the records of its recovered bytes. The header buffer carries what
    /// the surviving context or the buffers say (LoggerId, BufferSize, the context's name); the
    /// rest (clock type, start time) is unknown and left 0, said in the manifest's warnings.
    pub fn extract(
        &self,
        ctx: &KernelContext<'_>,
        dump_name: &str,
        dir: &Path,
        force: bool,
    ) -> Result<Manifest, ExtractError> {
        std::fs::create_dir_all(dir).map_err(|source| ExtractError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let manifest_path = dir.join("manifest.json");
        if manifest_path.exists() && !force {
            return Err(ExtractError::Exists(manifest_path));
        }
        let facts = crate::etw::source::EtwSource::open_sessions(ctx).header_facts();
        let mut warnings = self.report.warnings.clone();
        let mut sessions = Vec::new();
        for g in &self.report.groups {
            let mut bufs: Vec<_> = self
                .report
                .buffers
                .iter()
                .filter(|b| b.group == Some(g.group))
                .collect();
            bufs.sort_by_key(|b| (b.sequence_number, b.physical_address));
            let name = format!(
                "carved-{}-{}",
                g.group,
                file_name(g.logger_id, g.name.as_ref().map(|n| n.raw()))
            );
            let path = dir.join(&name);
            if path.exists() && !force {
                return Err(ExtractError::Exists(path));
            }
            let mut sess = Session::bare(g.logger_id, crate::addr::VirtAddr::new(0), "carved");
            sess.name = g.name.clone();
            sess.buffer_size = Some(g.buffer_size);
            let header = header_buffer(ctx, &sess, &facts, bufs.len() as u32 + 1, None);
            let mut file = SessionFile::create(dir, &name, header, true)?;
            let mut skipped = Vec::new();
            for b in bufs {
                let Some((mut bytes, end)) = buffer_bytes(ctx, b) else {
                    skipped.push(super::extract::Skipped {
                        address: b.physical_address.to_string(),
                        reason: "its first page is no longer readable".into(),
                    });
                    continue;
                };
                let w = walk(&bytes, end);
                fix_up(&mut bytes, Some(b.processor), w.end);
                let entry = ManifestBuffer {
                    source: if b.complete {
                        "carved"
                    } else {
                        "carved_partial"
                    },
                    address: Some(b.physical_address.to_string()),
                    cpu: Some(b.processor),
                    sequence_number: b.sequence_number,
                    valid_bytes: w.end as u64,
                    records: w.count,
                    file_offset: 0,
                };
                file.push(entry, bytes, &w)?;
            }
            if file.data_buffers() != g.buffers {
                file.rewrite_header(&header_buffer(
                    ctx,
                    &sess,
                    &facts,
                    file.data_buffers() as u32 + 1,
                    None,
                ))?;
            }
            warnings.push(
                Warning::new(
                    WarningKind::Inferred,
                    format!(
                        "{name}: carved (no logger context leads to these buffers): {}",
                        g.evidence
                    ),
                )
                .logger(g.logger_id),
            );
            sessions.push(file.finish(g.logger_id, g.name.clone(), name, skipped, &facts)?);
        }
        write_manifest("scan", dump_name, sessions, warnings, &manifest_path)
    }
}
