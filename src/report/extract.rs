//! `etwdump extract`: one .etl file per session, and DIR/manifest.json.
//!
//! File layout (etw-internals.md §6.1): a header buffer whose first record is a SYSTEM_TRACE
//! header (hook 0x0000) carrying a TRACE_LOGFILE_HEADER built from the logger context, then the
//! recovered buffers, each fixed up (SavedOffset = Offset = the end of the last complete record,
//! the rest 0xFF, State Flush, processor index) and ordered by SequenceNumber.
//!
//! Pending compact context-switch batches (never flushed, etw-internals.md §4) are written too:
//! each open batch of clock type C goes, as the 0x0525 event the kernel would have logged at
//! flush, into a synthetic CTX_SWAP buffer (BufferType 2) at the end of every kernel session
//! (NT Kernel Logger, logger 0, or a SYSTEM_LOGGER_MODE session) whose ClockType is C (§4.1:
//! EtwpCCSwapFlush sends batches to the kernel loggers of the batch's clock type).
//!
//! Logger names come from memory an attacker may control: file names are sanitized, nothing
//! is written outside DIR, existing files are kept unless `force`, and every file is written
//! to a temporary name and renamed when complete.

use crate::decode::ccswap::PENDING_HEADER;
use crate::etl::header::{BufferHeader, BUFFER_HEADER_SIZE, BUFFER_TYPE_CTX_SWAP};
use crate::etl::records::{first_record_complete, walk, Walk};
use crate::etl::writer::{
    self, file_name, synthetic_buffer, EtlFileWriter, LogfileHeader, SyntheticHeader,
};
use crate::etw::buffers::{find_buffers, FoundBuffer};
use crate::etw::ccswap::{find_pending, infer_clocks, PendingFound};
use crate::etw::clock::ClockFacts;
use crate::etw::loggers::{list_sessions, Session};
use crate::etw::mode::NO_PER_PROCESSOR_BUFFERING;
use crate::kernel::context::KernelContext;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ExtractError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} already exists (use --force to overwrite)")]
    Exists(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ExtractError + '_ {
    move |source| ExtractError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[derive(Debug, Serialize)]
pub struct ManifestBuffer {
    /// "header" (built from the logger context), "memory" (a recovered buffer) or
    /// "pending_ccswap" (a synthetic CTX_SWAP buffer holding one pending batch).
    pub source: &'static str,
    /// Null for the header buffer; the pending block for "pending_ccswap".
    pub address: Option<String>,
    /// The processor the buffer belongs to, when known.
    pub cpu: Option<u64>,
    pub sequence_number: u64,
    pub valid_bytes: u64,
    pub records: usize,
    pub file_offset: u64,
}

#[derive(Debug, Serialize)]
pub struct Skipped {
    pub address: String,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct ManifestSession {
    pub logger_id: u64,
    pub name: Option<String>,
    pub file: String,
    pub buffers: usize,
    pub bytes: u64,
    pub records: usize,
    pub records_by_hook: BTreeMap<String, u64>,
    pub sha256: String,
    pub buffer_list: Vec<ManifestBuffer>,
    pub skipped: Vec<Skipped>,
    /// Where PerfFreq, CpuSpeedInMHz and TimerResolution in the file header came from.
    pub header_sources: BTreeMap<&'static str, String>,
}

#[derive(Debug, Serialize)]
pub struct Manifest {
    pub dump: String,
    pub sessions: Vec<ManifestSession>,
    pub warnings: Vec<Warning>,
}

/// Bytes an `extract` may write beyond those of the buffers it recovered (header buffers and
/// synthetic pending buffers): 16 MiB. Every file is then at most its recovered buffers plus a
/// share of this; and all files together at most twice the dump file plus this, so the output
/// is bounded by what the dump holds even when page tables alias buffers onto shared pages.
pub const MAX_UNBACKED_OUTPUT: u64 = 16 << 20;

/// Clock and machine facts for the file header, with where each came from.
pub(crate) struct HeaderFacts {
    perf_freq: u64,
    cpu_mhz: u32,
    timer_resolution: u32,
    pub(crate) sources: BTreeMap<&'static str, String>,
}

impl HeaderFacts {
    /// Triage dumps: from the ETW secondary data's header (EtwPerfFreq, EtwCPUSpeedInMHz,
    /// KeMaximumIncrement), else the crashing CPU's KPRCB.MHz, else documented defaults.
    pub(crate) fn from_triage(
        _ctx: &KernelContext<'_>,
        blob: Option<crate::etw::triage::BlobHeader>,
        kprcb_mhz: Option<u64>,
    ) -> HeaderFacts {
        let mut sources = BTreeMap::new();
        let (perf_freq, f) = match blob.map(|b| b.perf_freq).filter(|&f| f > 0) {
            Some(f) => (f, "ETW secondary data: EtwPerfFreq".to_string()),
            None => (
                10_000_000,
                "assumed 10000000 (no ETW secondary data)".to_string(),
            ),
        };
        sources.insert("perf_freq", f);
        let (cpu_mhz, m) = match (blob.map(|b| b.cpu_speed_mhz).filter(|&m| m > 0), kprcb_mhz) {
            (Some(m), _) => (m, "ETW secondary data: EtwCPUSpeedInMHz".to_string()),
            (None, Some(m)) => (m as u32, "the crashing CPU's KPRCB.MHz".to_string()),
            (None, None) => (0, "unknown (0)".to_string()),
        };
        sources.insert("cpu_speed_mhz", m);
        let (timer_resolution, r) = match blob.map(|b| b.maximum_increment).filter(|&m| m > 0) {
            Some(v) => (v, "ETW secondary data: KeMaximumIncrement".to_string()),
            None => (156_250, "assumed 156250".to_string()),
        };
        sources.insert("timer_resolution", r);
        HeaderFacts {
            perf_freq,
            cpu_mhz,
            timer_resolution,
            sources,
        }
    }
}

fn header_facts(ctx: &KernelContext<'_>, clocks: &ClockFacts) -> HeaderFacts {
    let mut sources = BTreeMap::new();
    let perf_freq = match &clocks.qpc_frequency {
        Ok(r) => {
            sources.insert("perf_freq", r.source.clone());
            r.value
        }
        Err(why) => {
            sources.insert("perf_freq", format!("assumed 10000000 ({why})"));
            10_000_000
        }
    };
    let cpu_mhz = match &clocks.cpu_mhz {
        Ok(r) => {
            sources.insert("cpu_speed_mhz", r.source.clone());
            clocks.cpu_mhz_value()
        }
        Err(why) => {
            sources.insert("cpu_speed_mhz", format!("unknown (0): {why}"));
            0
        }
    };
    let timer_resolution = match ctx.global_u32("KeMaximumIncrement") {
        Some(v) => {
            sources.insert("timer_resolution", "KeMaximumIncrement".into());
            v
        }
        None => {
            sources.insert(
                "timer_resolution",
                "assumed 156250 (KeMaximumIncrement not available)".into(),
            );
            156_250
        }
    };
    HeaderFacts {
        perf_freq,
        cpu_mhz,
        timer_resolution,
        sources,
    }
}

/// The header buffer of session `s`'s file: the logger context's facts, the dump's and `facts`.
pub(crate) fn header_buffer(
    ctx: &KernelContext<'_>,
    s: &Session,
    facts: &HeaderFacts,
    buffers_in_file: u32,
) -> Vec<u8> {
    let h = ctx.dump.header();
    let (major, minor) = match &ctx.kuser {
        Ok(k) => (k.nt_major_version as u8, k.nt_minor_version as u8),
        Err(_) => (if ctx.build >= 10240 { 10 } else { 6 }, 0),
    };
    let no_per_cpu = s.logger_mode.unwrap_or(0) & NO_PER_PROCESSOR_BUFFERING != 0;
    writer::header_buffer(&LogfileHeader {
        x64: ctx.space.arch().is_64bit(),
        buffer_size: s.buffer_size.unwrap_or(0x10000) as u32,
        os_version: (major, minor),
        build: ctx.build,
        processors: if no_per_cpu { 1 } else { h.number_processors },
        end_time: h.system_time,
        timer_resolution: facts.timer_resolution,
        log_file_mode: s.logger_mode.unwrap_or(0) as u32,
        buffers_written: buffers_in_file,
        events_lost: s.events_lost.unwrap_or(0) as u32,
        cpu_speed_mhz: facts.cpu_mhz,
        boot_time: h.system_time.saturating_sub(h.system_up_time),
        perf_freq: facts.perf_freq,
        start_time: s.start_time_raw.unwrap_or(0),
        clock_type: s.clock_type.unwrap_or(1) as u32,
        buffers_lost: s.log_buffers_lost.unwrap_or(0) as u32,
        logger_id: s.logger_id,
        logger_name: s.name.as_deref().unwrap_or(""),
        log_file_name: s.log_file.as_deref().unwrap_or(""),
    })
}

/// One pending batch laid out as a buffer of the file.
struct SyntheticBuffer {
    block: crate::addr::VirtAddr,
    cpu: u64,
    sequence_number: u64,
    bytes: Vec<u8>,
}

/// PERFINFO hook of a compact context-switch batch.
const HOOK_CCSWAP: u16 = 0x0525;

/// The pending batches a kernel session `s` would have received: the open batches (at least one
/// switch) whose clock type is the session's, each as a 0x0525 PERFINFO event (payload = the
/// block's bytes [0x10, UsedBytes), timestamp = LastTimeStamp, §4.2) alone in a CTX_SWAP buffer
/// of the session's BufferSize. Blocks found by the search (clock type unknown) are not written.
fn pending_buffers(
    ctx: &KernelContext<'_>,
    s: &Session,
    pending: &[PendingFound],
    first_seq: u64,
    room: u64,
    warnings: &mut Vec<Warning>,
) -> Vec<SyntheticBuffer> {
    let mut out = Vec::new();
    if !crate::etw::loggers::is_kernel_session(s) || pending.is_empty() {
        return out;
    }
    let x64 = ctx.space.arch().is_64bit();
    let buffer_size = s.buffer_size.unwrap_or(0x10000) as usize;
    let mut unknown_clock = 0;
    for p in pending {
        if p.decoded
            .batch
            .as_ref()
            .is_none_or(|b| b.switches.is_empty())
        {
            continue;
        }
        let Some(clock) = p.clock else {
            unknown_clock += 1;
            continue;
        };
        if Some(clock) != s.clock_type {
            continue;
        }
        let used = p.decoded.used_bytes as usize;
        let payload = match ctx.space.read_vec(p.block, used) {
            Ok(b) => b[PENDING_HEADER..].to_vec(),
            Err(e) => {
                warnings.push(
                    Warning::new(
                        WarningKind::Unreadable,
                        format!("pending block {} (CPU {}): {e}", p.block, p.cpu),
                    )
                    .cpu(p.cpu)
                    .at(p.block),
                );
                continue;
            }
        };
        let size = 0x10 + payload.len();
        if BUFFER_HEADER_SIZE + size.next_multiple_of(8) > buffer_size
            || size > usize::from(u16::MAX)
        {
            warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "pending block {} (CPU {}): a {size:#x}-byte event does not fit logger {}'s \
                         {buffer_size:#x}-byte buffers; not written",
                        p.block, p.cpu, s.logger_id
                    ),
                )
                .logger(s.logger_id)
                .cpu(p.cpu)
                .at(p.block),
            );
            continue;
        }
        // The header buffer and every synthetic buffer are BufferSize bytes each.
        if (out.len() as u64 + 2).saturating_mul(buffer_size as u64) > room {
            warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {}: pending batches beyond the first {} are not built: their {buffer_size:#x}-byte synthetic buffers would exceed the output bound",
                        s.logger_id,
                        out.len()
                    ),
                )
                .logger(s.logger_id),
            );
            break;
        }
        let seq = first_seq + out.len() as u64;
        // PERFINFO_TRACE_HEADER {marker, Size, HookId, TimeStamp}; version 2 (§4.2).
        let marker: u32 = if x64 { 0xC011_0002 } else { 0xC010_0002 };
        let mut rec = Vec::with_capacity(size);
        rec.extend_from_slice(&marker.to_le_bytes());
        rec.extend_from_slice(&(size as u16).to_le_bytes());
        rec.extend_from_slice(&HOOK_CCSWAP.to_le_bytes());
        rec.extend_from_slice(&p.decoded.last_timestamp.to_le_bytes());
        rec.extend_from_slice(&payload);
        let header = SyntheticHeader {
            size: buffer_size,
            logger_id: s.logger_id,
            sequence_number: seq,
            timestamp: p.decoded.last_timestamp,
            buffer_type: BUFFER_TYPE_CTX_SWAP,
            processor: Some(p.cpu),
        };
        let Some((b, _)) = synthetic_buffer(&header, &rec) else {
            continue; // checked above: it fits
        };
        out.push(SyntheticBuffer {
            block: p.block,
            cpu: p.cpu,
            sequence_number: seq,
            bytes: b,
        });
    }
    if unknown_clock > 0 {
        warnings.push(
            Warning::new(
                WarningKind::Time,
                format!(
                    "logger {}: {unknown_clock} pending batches found by search have no known clock type; \
                     not written into the session's file (see `cswitch`)",
                    s.logger_id
                ),
            )
            .logger(s.logger_id),
        );
    }
    out
}

/// Write the files. Returns the manifest.
pub fn extract(
    ctx: &KernelContext<'_>,
    dump_name: &str,
    dir: &Path,
    session: Option<&str>,
    force: bool,
) -> Result<Manifest, ExtractError> {
    if ctx.dump.triage().is_some() {
        return super::triage::extract(ctx, dump_name, dir, session, force);
    }
    let list = list_sessions(ctx);
    let clocks = ClockFacts::gather(ctx, &list.sessions);
    let facts = header_facts(ctx, &clocks);
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut warnings = list.warnings.clone();
    let mut used = HashSet::new();
    let mut plan = Vec::new();
    for s in list
        .sessions
        .iter()
        .filter(|s| super::buffers::selected(s, session))
    {
        let mut name = file_name(s.logger_id, s.name.as_deref());
        let mut n = 2;
        while !used.insert(name.to_ascii_lowercase()) {
            name = file_name(
                s.logger_id,
                Some(&format!("{}-{n}", s.name.as_deref().unwrap_or("logger"))),
            );
            n += 1;
        }
        let path = dir.join(&name);
        if path.exists() && !force {
            return Err(ExtractError::Exists(path));
        }
        plan.push((s, name));
    }
    let manifest_path = dir.join("manifest.json");
    if manifest_path.exists() && !force {
        return Err(ExtractError::Exists(manifest_path));
    }
    // Pending compact cswitch batches (only looked for when a kernel session is extracted).
    let pending = if plan
        .iter()
        .any(|(s, _)| crate::etw::loggers::is_kernel_session(s))
    {
        let mut p = find_pending(ctx);
        infer_clocks(ctx, &clocks, &list.sessions, &mut p);
        warnings.extend(p.warnings.into_iter().map(|mut w| {
            w.message = format!("pending CCSWAP: {}", w.message);
            w
        }));
        p.blocks
    } else {
        Vec::new()
    };
    let mut sessions = Vec::new();
    let mut unbacked_allowance = MAX_UNBACKED_OUTPUT;
    let mut output_budget = ctx
        .dump
        .len()
        .saturating_mul(2)
        .saturating_add(MAX_UNBACKED_OUTPUT);
    for (s, name) in plan {
        // Pass 1 (cheap): which buffers go into the file. A buffer is written when it is not
        // compressed, its valid end is plausible and its first record is complete: exactly
        // when a full walk would count at least one record.
        let mut skipped = Vec::new();
        let mut data: Vec<(FoundBuffer, u64)> = Vec::new();
        if let Some(array) = list.array.as_ref() {
            let found = find_buffers(ctx, array, s);
            warnings.extend(found.warnings.into_iter().map(|w| w.in_logger(s.logger_id)));
            for b in found.buffers {
                let address = b.address.to_string();
                if b.header.compressed() {
                    skipped.push(Skipped {
                        address,
                        reason: "compressed buffer (not decompressed)".into(),
                    });
                    continue;
                }
                let Some(valid) = b.header.valid_bytes() else {
                    skipped.push(Skipped {
                        address,
                        reason: "no valid end (CurrentOffset and SavedOffset implausible)".into(),
                    });
                    continue;
                };
                let mut prefix = [0u8; BUFFER_HEADER_SIZE + 8];
                match ctx.space.read(b.address, &mut prefix) {
                    Ok(()) if first_record_complete(&prefix, valid as usize) => {
                        data.push((b, valid))
                    }
                    Ok(()) => skipped.push(Skipped {
                        address,
                        reason: "no complete record".into(),
                    }),
                    Err(e) => skipped.push(Skipped {
                        address,
                        reason: e.to_string(),
                    }),
                }
            }
        }
        data.sort_by_key(|(b, _)| (b.header.sequence_number, b.address));
        // An ETL file's buffers are all BufferSize long (§6.1): the session's, or, when that
        // value is not plausible (an anomaly), the first recovered buffer's own; buffers of
        // another size cannot go into the same file.
        let fixed;
        let s = match s.buffer_size {
            Some(b) if crate::etw::loggers::plausible_buffer_size(b) => s,
            _ => match data.first().map(|(b, _)| b.header.buffer_size) {
                Some(size) => {
                    warnings.push(
                        Warning::new(
                            WarningKind::Anomaly,
                            format!(
                                "logger {}: its BufferSize {} is not plausible: the file uses the recovered buffers' {size:#x}",
                                s.logger_id,
                                s.buffer_size.map_or("(unreadable)".into(), |b| format!("{b:#x}"))
                            ),
                        )
                        .logger(s.logger_id)
                        .field("_WMI_LOGGER_CONTEXT.BufferSize"),
                    );
                    let mut c = s.clone();
                    c.buffer_size = Some(size);
                    fixed = c;
                    &fixed
                }
                None => s,
            },
        };
        data.retain(|(b, _)| {
            let keep = Some(b.header.buffer_size) == s.buffer_size;
            if !keep {
                skipped.push(Skipped {
                    address: b.address.to_string(),
                    reason: format!(
                        "BufferSize {:#x} differs from the file's {:#x}",
                        b.header.buffer_size,
                        s.buffer_size.unwrap_or(0)
                    ),
                });
            }
            keep
        });
        // Pending batches for this session, as synthetic CTX_SWAP buffers after the others.
        let next_seq = data
            .iter()
            .map(|(b, _)| b.header.sequence_number)
            .max()
            .map_or(1, |m| m.saturating_add(1));
        // Built at most as many as the output bound below can keep (each is BufferSize bytes
        // in memory until written: fuzz finding 5).
        let room = unbacked_allowance
            .saturating_add(data.iter().map(|(b, _)| b.header.buffer_size).sum::<u64>());
        let mut synthetic = pending_buffers(ctx, s, &pending, next_seq, room, &mut warnings);
        // Output bound: bytes not read from the dump (the header buffer and the synthetic
        // pending buffers, each BufferSize long) may exceed what the session's recovered
        // buffers occupy only by the extract-wide allowance, so a small dump whose loggers claim
        // 64 MiB buffers cannot make `extract` write gigabytes.
        let buffer_size = s.buffer_size.unwrap_or(0x10000).max(1);
        let backed: u64 = data.iter().map(|(b, _)| b.header.buffer_size).sum();
        let extra = |n: usize| {
            buffer_size
                .saturating_mul(n as u64 + 1)
                .saturating_sub(backed)
        };
        while !synthetic.is_empty() && extra(synthetic.len()) > unbacked_allowance {
            synthetic.pop();
            warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {}: a pending batch is not written: its {buffer_size:#x}-byte synthetic buffer would exceed the output bound ({} bytes not backed by the dump left)",
                        s.logger_id, unbacked_allowance
                    ),
                )
                .logger(s.logger_id),
            );
        }
        if extra(synthetic.len()) > unbacked_allowance {
            warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {}: not written: no recovered buffer backs its {buffer_size:#x}-byte header buffer and only {unbacked_allowance} bytes may be written that the dump does not hold",
                        s.logger_id
                    ),
                )
                .logger(s.logger_id),
            );
            continue;
        }
        unbacked_allowance -= extra(synthetic.len());
        // Total bound: page tables that map many buffers onto the same stored pages could
        // otherwise make a small dump yield unbounded output. A real dump's buffers are distinct
        // memory, so twice the file plus the unbacked allowance never cuts a genuine one.
        let fixed_part = buffer_size.saturating_mul(synthetic.len() as u64 + 1);
        let mut total = fixed_part.saturating_add(backed);
        let mut dropped = 0usize;
        while total > output_budget && !data.is_empty() {
            if let Some((b, _)) = data.pop() {
                total -= b.header.buffer_size;
                dropped += 1;
                skipped.push(Skipped {
                    address: b.address.to_string(),
                    reason: "not written: the extract's output bound is reached".into(),
                });
            }
        }
        if dropped > 0 {
            warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {}: {dropped} buffers not written: the output would exceed {} bytes (twice the dump plus {MAX_UNBACKED_OUTPUT}); the dump's page tables map more buffer bytes than the file holds",
                        s.logger_id,
                        2 * ctx.dump.len() + MAX_UNBACKED_OUTPUT
                    ),
                )
                .logger(s.logger_id),
            );
        }
        if total > output_budget {
            warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {}: not written: the extract's output bound ({} bytes) is reached",
                        s.logger_id,
                        2 * ctx.dump.len() + MAX_UNBACKED_OUTPUT
                    ),
                )
                .logger(s.logger_id),
            );
            continue;
        }
        output_budget -= total;
        let synthetic_count = synthetic.len();
        let header = header_buffer(ctx, s, &facts, (data.len() + synthetic.len()) as u32 + 1);
        let mut file = SessionFile::create(dir, &name, header)?;
        // Read each buffer again (one at a time) into a buffer the file's hashing thread hands
        // back, walk it, fix it up and write it.
        for (found, valid) in &data {
            let mut bytes = file.spare();
            bytes.resize(found.header.buffer_size as usize, 0);
            if let Err(e) = ctx.space.read(found.address, &mut bytes) {
                skipped.push(Skipped {
                    address: found.address.to_string(),
                    reason: format!("buffer data: {e}"),
                });
                continue;
            }
            let cpu = found.cpu.or(Some(found.header.processor_index));
            let w = walk(&bytes, *valid as usize);
            writer::fix_up(&mut bytes, cpu, w.end);
            let entry = ManifestBuffer {
                source: "memory",
                address: Some(found.address.to_string()),
                cpu,
                sequence_number: found.header.sequence_number,
                valid_bytes: w.end as u64,
                records: w.count,
                file_offset: 0,
            };
            file.push(entry, bytes, &w)?;
        }
        for p in synthetic {
            let w = walk(&p.bytes, p.bytes.len());
            let entry = ManifestBuffer {
                source: "pending_ccswap",
                address: Some(p.block.to_string()),
                cpu: Some(p.cpu),
                sequence_number: p.sequence_number,
                valid_bytes: w.end as u64,
                records: w.count,
                file_offset: 0,
            };
            file.push(entry, p.bytes, &w)?;
        }
        if file.data_buffers() != data.len() + synthetic_count {
            // A buffer vanished between the reads: BuffersWritten in the header must match.
            file.rewrite_header(&header_buffer(
                ctx,
                s,
                &facts,
                file.data_buffers() as u32 + 1,
            ))?;
        }
        sessions.push(file.finish(s.logger_id, s.name.clone(), name, skipped, &facts)?);
    }
    let m = Manifest {
        dump: dump_name.to_string(),
        sessions,
        warnings,
    };
    write_manifest(&m, &manifest_path)?;
    Ok(m)
}

/// Write DIR/manifest.json through a temporary name.
pub(crate) fn write_manifest(m: &Manifest, path: &Path) -> Result<(), ExtractError> {
    let tmp = path.with_file_name(format!(".manifest.json.tmp-{}", std::process::id()));
    let text = serde_json::to_vec_pretty(m).unwrap_or_default();
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// One session's .etl being written (full and triage dumps alike): the header buffer, then
/// each buffer with its manifest entry; records counted by hook as they go.
pub(crate) struct SessionFile {
    w: EtlFileWriter,
    list: Vec<ManifestBuffer>,
    records: usize,
    by_hook: BTreeMap<String, u64>,
}

impl SessionFile {
    pub(crate) fn create(dir: &Path, name: &str, header: Vec<u8>) -> Result<Self, ExtractError> {
        let mut w = EtlFileWriter::create(dir, name).map_err(io(&dir.join(name)))?;
        let end = BufferHeader::from_bytes(&header).map_or(0, |h| h.saved_offset as usize);
        let hw = walk(&header, end);
        let list = vec![ManifestBuffer {
            source: "header",
            address: None,
            cpu: None,
            sequence_number: 0,
            valid_bytes: hw.end as u64,
            records: hw.count,
            file_offset: 0,
        }];
        let tmp = w.temp_path().to_path_buf();
        w.push(header).map_err(io(&tmp))?;
        Ok(SessionFile {
            w,
            list,
            records: 0,
            by_hook: BTreeMap::new(),
        })
    }

    /// A buffer to read the next one into (recycled when the hashing thread is done with one).
    pub(crate) fn spare(&self) -> Vec<u8> {
        self.w.spare()
    }

    /// The buffers after the header.
    pub(crate) fn data_buffers(&self) -> usize {
        self.list.len() - 1
    }

    pub(crate) fn push(
        &mut self,
        mut entry: ManifestBuffer,
        bytes: Vec<u8>,
        walk: &Walk,
    ) -> Result<(), ExtractError> {
        entry.file_offset = self.w.len();
        self.records += walk.count;
        for (k, v) in walk.by_key() {
            *self.by_hook.entry(k).or_insert(0) += v;
        }
        let tmp = self.w.temp_path().to_path_buf();
        self.w.push(bytes).map_err(io(&tmp))?;
        self.list.push(entry);
        Ok(())
    }

    pub(crate) fn rewrite_header(&mut self, header: &[u8]) -> Result<(), ExtractError> {
        let tmp = self.w.temp_path().to_path_buf();
        self.w.rewrite_start(header).map_err(io(&tmp))
    }

    pub(crate) fn finish(
        self,
        logger_id: u64,
        name: Option<String>,
        file: String,
        skipped: Vec<Skipped>,
        facts: &HeaderFacts,
    ) -> Result<ManifestSession, ExtractError> {
        let tmp = self.w.temp_path().to_path_buf();
        let (bytes, sha256) = self.w.commit().map_err(io(&tmp))?;
        Ok(ManifestSession {
            logger_id,
            name,
            file,
            buffers: self.list.len() - 1,
            bytes,
            records: self.records,
            records_by_hook: self.by_hook,
            sha256,
            buffer_list: self.list,
            skipped,
            header_sources: facts.sources.clone(),
        })
    }
}
