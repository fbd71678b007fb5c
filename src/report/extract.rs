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
use crate::decode::records::{first_record_complete, Walk, BUFFER_HEADER_SIZE};
use crate::etw::buffers::{find_buffers, FoundBuffer};
use crate::etw::ccswap::{find_pending, infer_clocks, PendingFound};
use crate::etw::clock::ClockFacts;
use crate::etw::loggers::{list_sessions, Session};
use crate::etw::mode::NO_PER_PROCESSOR_BUFFERING;
use crate::kernel::context::KernelContext;
use ring::digest::{Context as Sha256, SHA256};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
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

/// A file name for a logger: `<id>-<name>.etl`, with the name reduced to `[A-Za-z0-9._ -]`,
/// no leading dots or spaces, at most 80 characters.
pub fn file_name(id: u64, name: Option<&str>) -> String {
    let mut clean: String = name
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || " ._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    while clean.contains("..") {
        clean = clean.replace("..", "_");
    }
    let clean = clean.trim_matches(|c| c == '.' || c == ' ').to_string();
    let clean: String = clean.chars().take(80).collect();
    let clean = if clean.is_empty() {
        "logger".to_string()
    } else {
        clean
    };
    format!("{id:02}-{clean}.etl")
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
    pub warnings: Vec<String>,
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

fn utf16z(s: &str) -> Vec<u8> {
    s.encode_utf16()
        .chain([0])
        .flat_map(|u| u.to_le_bytes())
        .collect()
}

/// The header buffer: WMI_BUFFER_HEADER + SYSTEM_TRACE_HEADER + TRACE_LOGFILE_HEADER + names.
pub(crate) fn header_buffer(
    ctx: &KernelContext<'_>,
    s: &Session,
    facts: &HeaderFacts,
    buffers_in_file: u32,
) -> Vec<u8> {
    let x64 = ctx.space.arch().is_64bit();
    let buffer_size = s.buffer_size.unwrap_or(0x10000) as usize;
    let h = ctx.dump.header();
    let (major, minor) = match &ctx.kuser {
        Ok(k) => (k.nt_major_version as u8, k.nt_minor_version as u8),
        Err(_) => (if ctx.build >= 10240 { 10 } else { 6 }, 0),
    };
    let mut tlh = vec![0u8; if x64 { 0x118 } else { 0x110 }];
    let put32 = |b: &mut Vec<u8>, o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    let put64 = |b: &mut Vec<u8>, o: usize, v: u64| b[o..o + 8].copy_from_slice(&v.to_le_bytes());
    put32(&mut tlh, 0x00, buffer_size as u32);
    tlh[0x04..0x08].copy_from_slice(&[major, minor, 1, 5]);
    put32(&mut tlh, 0x08, ctx.build);
    let no_per_cpu = s.logger_mode.unwrap_or(0) & NO_PER_PROCESSOR_BUFFERING != 0;
    put32(
        &mut tlh,
        0x0C,
        if no_per_cpu { 1 } else { h.number_processors },
    );
    put64(&mut tlh, 0x10, h.system_time);
    put32(&mut tlh, 0x18, facts.timer_resolution);
    // LogFileMode without REAL_TIME and the hybrid-shutdown bits (§6.1).
    put32(
        &mut tlh,
        0x20,
        (s.logger_mode.unwrap_or(0) as u32) & !(0x100 | 0x0040_0000 | 0x0080_0000),
    );
    put32(&mut tlh, 0x24, buffers_in_file);
    put32(&mut tlh, 0x28, 1);
    put32(&mut tlh, 0x2C, if x64 { 8 } else { 4 });
    put32(&mut tlh, 0x30, s.events_lost.unwrap_or(0) as u32);
    put32(&mut tlh, 0x34, facts.cpu_mhz);
    let tail = if x64 { 0xF8 } else { 0xF0 };
    put64(
        &mut tlh,
        tail,
        h.system_time.saturating_sub(h.system_up_time),
    );
    put64(&mut tlh, tail + 8, facts.perf_freq);
    put64(&mut tlh, tail + 0x10, s.start_time_raw.unwrap_or(0));
    put32(&mut tlh, tail + 0x18, s.clock_type.unwrap_or(1) as u32);
    put32(
        &mut tlh,
        tail + 0x1C,
        s.log_buffers_lost.unwrap_or(0) as u32,
    );
    tlh.extend(utf16z(s.name.as_deref().unwrap_or("")));
    tlh.extend(utf16z(s.log_file.as_deref().unwrap_or("")));
    // Keep the record 8-aligned (zeros after the strings are inside the record).
    while (0x20 + tlh.len()) % 8 != 0 {
        tlh.push(0);
    }
    let size = 0x20 + tlh.len();
    let mut rec = vec![0u8; 0x20];
    put32(&mut rec, 0, if x64 { 0xC002_0002 } else { 0xC001_0002 });
    rec[4..6].copy_from_slice(&(size as u16).to_le_bytes());
    rec.extend(tlh);
    let end = 0x48 + rec.len();
    let mut b = vec![0u8; 0x48];
    put32(&mut b, 0x00, buffer_size as u32);
    put32(&mut b, 0x04, end as u32);
    put32(&mut b, 0x08, end as u32);
    b[0x28..0x2C].copy_from_slice(&((s.logger_id as u32) << 16).to_le_bytes());
    put32(&mut b, 0x2C, 3);
    put32(&mut b, 0x30, end as u32);
    b[0x34..0x36].copy_from_slice(&0x21u16.to_le_bytes());
    b[0x36..0x38].copy_from_slice(&4u16.to_le_bytes());
    b.extend(rec);
    b.resize(buffer_size.max(end), 0xFF);
    b
}

/// One pending batch laid out as a buffer of the file.
struct SyntheticBuffer {
    block: crate::addr::VirtAddr,
    cpu: u64,
    sequence_number: u64,
    bytes: Vec<u8>,
}

/// BufferType CTX_SWAP (etw-internals.md §2.5).
const BUFFER_TYPE_CTX_SWAP: u16 = 2;
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
    warnings: &mut Vec<String>,
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
                warnings.push(format!("pending block {} (CPU {}): {e}", p.block, p.cpu));
                continue;
            }
        };
        let size = 0x10 + payload.len();
        if BUFFER_HEADER_SIZE + size.next_multiple_of(8) > buffer_size
            || size > usize::from(u16::MAX)
        {
            warnings.push(format!(
                "pending block {} (CPU {}): a {size:#x}-byte event does not fit logger {}'s \
                 {buffer_size:#x}-byte buffers; not written",
                p.block, p.cpu, s.logger_id
            ));
            continue;
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
        warnings.push(format!(
            "logger {}: {unknown_clock} pending batches found by search have no known clock type; \
             not written into the session's file (see `cswitch`)",
            s.logger_id
        ));
    }
    out
}

/// What a synthetic WMI_BUFFER_HEADER says.
pub(crate) struct SyntheticHeader {
    pub size: usize,
    pub logger_id: u64,
    pub sequence_number: u64,
    pub timestamp: u64,
    pub buffer_type: u16,
    pub processor: Option<u64>,
}

/// A file buffer of `h.size` bytes: a WMI_BUFFER_HEADER built from `h` (BufferSize,
/// TimeStamp, SequenceNumber, ClientContext.LoggerId, BufferType), then `records` from 0x48
/// (laid out as in a buffer), the valid end 8-aligned with a zero pad, fixed up like a
/// recovered buffer. None when the records do not fit.
pub(crate) fn synthetic_buffer(h: &SyntheticHeader, records: &[u8]) -> Option<(Vec<u8>, Walk)> {
    let end = BUFFER_HEADER_SIZE + records.len().next_multiple_of(8);
    if end > h.size {
        return None;
    }
    let mut b = vec![0u8; h.size];
    b[0x00..0x04].copy_from_slice(&(h.size as u32).to_le_bytes());
    b[0x10..0x18].copy_from_slice(&h.timestamp.to_le_bytes());
    b[0x18..0x20].copy_from_slice(&h.sequence_number.to_le_bytes());
    b[0x28..0x2C].copy_from_slice(&((h.logger_id as u32) << 16).to_le_bytes());
    b[0x36..0x38].copy_from_slice(&h.buffer_type.to_le_bytes());
    b[BUFFER_HEADER_SIZE..BUFFER_HEADER_SIZE + records.len()].copy_from_slice(records);
    let w = crate::decode::records::walk(&b, end);
    fix_up(&mut b, h.processor, w.end);
    Some((b, w))
}

/// A file buffer of `size` bytes from a saved buffer start (`saved` = its header and its
/// valid bytes), fixed up like a recovered buffer. None when `saved` is longer than `size`.
pub(crate) fn saved_buffer(
    size: usize,
    processor: Option<u64>,
    saved: &[u8],
) -> Option<(Vec<u8>, Walk)> {
    let mut b = vec![0u8; size];
    b.get_mut(..saved.len())?.copy_from_slice(saved);
    let w = crate::decode::records::walk(&b, saved.len());
    fix_up(&mut b, processor, w.end);
    Some((b, w))
}

/// Fix a recovered buffer up for the file, in place.
pub(crate) fn fix_up(d: &mut [u8], processor: Option<u64>, end: usize) {
    let put32 = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    put32(d, 0x04, end as u32);
    put32(d, 0x08, end as u32);
    put32(d, 0x2C, 3);
    put32(d, 0x30, end as u32);
    if let Some(cpu) = processor {
        let cc = u16::try_from(cpu & 0x7FF).unwrap_or(0);
        d[0x28..0x2A].copy_from_slice(&cc.to_le_bytes());
        let flag = u16::from_le_bytes([d[0x34], d[0x35]]) | 0x20;
        d[0x34..0x36].copy_from_slice(&flag.to_le_bytes());
    }
    d[end..].fill(0xFF);
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
        plan.push((s, name, path));
    }
    let manifest_path = dir.join("manifest.json");
    if manifest_path.exists() && !force {
        return Err(ExtractError::Exists(manifest_path));
    }
    // Pending compact cswitch batches (only looked for when a kernel session is extracted).
    let pending = if plan
        .iter()
        .any(|(s, _, _)| crate::etw::loggers::is_kernel_session(s))
    {
        let mut p = find_pending(ctx);
        infer_clocks(ctx, &clocks, &list.sessions, &mut p);
        warnings.extend(p.warnings.iter().map(|w| format!("pending CCSWAP: {w}")));
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
    for (s, name, path) in plan {
        // Pass 1 (cheap): which buffers go into the file. A buffer is written when it is not
        // compressed, its valid end is plausible and its first record is complete: exactly
        // when a full walk would count at least one record.
        let mut skipped = Vec::new();
        let mut data: Vec<(FoundBuffer, u64)> = Vec::new();
        if let Some(array) = list.array.as_ref() {
            let found = find_buffers(ctx, array, s);
            for w in found.warnings {
                warnings.push(format!("logger {}: {w}", s.logger_id));
            }
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
                    warnings.push(format!(
                        "logger {}: its BufferSize {} is not plausible: the file uses the recovered buffers' {size:#x}",
                        s.logger_id,
                        s.buffer_size.map_or("(unreadable)".into(), |b| format!("{b:#x}"))
                    ));
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
        let mut synthetic = pending_buffers(ctx, s, &pending, next_seq, &mut warnings);
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
            warnings.push(format!(
                "logger {}: a pending batch is not written: its {buffer_size:#x}-byte synthetic buffer would exceed the output bound ({} bytes not backed by the dump left)",
                s.logger_id, unbacked_allowance
            ));
        }
        if extra(synthetic.len()) > unbacked_allowance {
            warnings.push(format!(
                "logger {}: not written: no recovered buffer backs its {buffer_size:#x}-byte header buffer and only {unbacked_allowance} bytes may be written that the dump does not hold",
                s.logger_id
            ));
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
            warnings.push(format!(
                "logger {}: {dropped} buffers not written: the output would exceed {} bytes (twice the dump plus {MAX_UNBACKED_OUTPUT}); the dump's page tables map more buffer bytes than the file holds",
                s.logger_id,
                2 * ctx.dump.len() + MAX_UNBACKED_OUTPUT
            ));
        }
        if total > output_budget {
            warnings.push(format!(
                "logger {}: not written: the extract's output bound ({} bytes) is reached",
                s.logger_id,
                2 * ctx.dump.len() + MAX_UNBACKED_OUTPUT
            ));
            continue;
        }
        output_budget -= total;
        let header = header_buffer(ctx, s, &facts, (data.len() + synthetic.len()) as u32 + 1);
        let header_end = header.u32_le(4);
        let header_records = crate::decode::records::walk(&header, header_end).count;
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let mut file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        let mut hasher = Sha256::new(&SHA256);
        let mut buffer_list = vec![ManifestBuffer {
            source: "header",
            address: None,
            cpu: None,
            sequence_number: 0,
            valid_bytes: header_end as u64,
            records: header_records,
            file_offset: 0,
        }];
        let mut off = header.len() as u64;
        file.write_all(&header).map_err(io(&tmp))?;
        hasher.update(&header);
        let mut records = 0;
        let mut by_hook: BTreeMap<String, u64> = BTreeMap::new();
        // Main thread: read each buffer again (one at a time) into a recycled buffer, walk it,
        // fix it up and write it; a second thread hashes it (SHA-256 is sequential: it gets a
        // core to itself) and hands the buffer back for reuse (no zero-fill, no page faults).
        type Shared = std::sync::Arc<Vec<u8>>;
        let (htx, hrx) = std::sync::mpsc::sync_channel::<Shared>(16);
        let (back_tx, back_rx) = std::sync::mpsc::channel::<Shared>();
        let written = std::thread::scope(|scope| -> std::io::Result<(std::fs::File, Sha256)> {
            let hash = scope.spawn(move || {
                for b in hrx {
                    hasher.update(&b);
                    // The main thread may be gone (error path): then the buffer is dropped.
                    let _ = back_tx.send(b);
                }
                hasher
            });
            let mut io_result = Ok(());
            let mut send = |bytes: Vec<u8>, file: &mut std::fs::File| -> bool {
                if let Err(e) = file.write_all(&bytes) {
                    io_result = Err(e);
                    return false;
                }
                htx.send(std::sync::Arc::new(bytes)).is_ok()
            };
            for (found, valid) in &data {
                let size = found.header.buffer_size as usize;
                let mut bytes = back_rx
                    .try_recv()
                    .ok()
                    .and_then(|a| std::sync::Arc::try_unwrap(a).ok())
                    .unwrap_or_default();
                bytes.resize(size, 0);
                if let Err(e) = ctx.space.read(found.address, &mut bytes) {
                    skipped.push(Skipped {
                        address: found.address.to_string(),
                        reason: format!("buffer data: {e}"),
                    });
                    continue;
                }
                let w = crate::decode::records::walk(&bytes, *valid as usize);
                fix_up(
                    &mut bytes,
                    found.cpu.or(Some(found.header.processor_index)),
                    w.end,
                );
                buffer_list.push(ManifestBuffer {
                    source: "memory",
                    address: Some(found.address.to_string()),
                    cpu: found.cpu.or(Some(found.header.processor_index)),
                    sequence_number: found.header.sequence_number,
                    valid_bytes: w.end as u64,
                    records: w.count,
                    file_offset: off,
                });
                off += bytes.len() as u64;
                records += w.count;
                for (k, v) in w.by_key() {
                    *by_hook.entry(k).or_insert(0) += v;
                }
                if !send(bytes, &mut file) {
                    break;
                }
            }
            for p in &synthetic {
                let w = crate::decode::records::walk(&p.bytes, p.bytes.len());
                buffer_list.push(ManifestBuffer {
                    source: "pending_ccswap",
                    address: Some(p.block.to_string()),
                    cpu: Some(p.cpu),
                    sequence_number: p.sequence_number,
                    valid_bytes: w.end as u64,
                    records: w.count,
                    file_offset: off,
                });
                off += p.bytes.len() as u64;
                records += w.count;
                for (k, v) in w.by_key() {
                    *by_hook.entry(k).or_insert(0) += v;
                }
                if !send(p.bytes.clone(), &mut file) {
                    break;
                }
            }
            drop(htx); // ends the hasher's loop
            let hasher = hash
                .join()
                .map_err(|_| std::io::Error::other("hash thread panicked"))?;
            io_result.map(|()| (file, hasher))
        });
        let (mut f, mut hasher) = written.map_err(io(&tmp))?;
        let data_buffers = buffer_list.len() - 1;
        if data_buffers != data.len() + synthetic.len() {
            // A buffer vanished between the reads: BuffersWritten in the header must match.
            let fixed = header_buffer(ctx, s, &facts, data_buffers as u32 + 1);
            use std::io::{Seek, SeekFrom};
            f.seek(SeekFrom::Start(0)).map_err(io(&tmp))?;
            f.write_all(&fixed).map_err(io(&tmp))?;
            let all = std::fs::read(&tmp).map_err(io(&tmp))?;
            hasher = Sha256::new(&SHA256);
            hasher.update(&all);
        }
        // No fsync: the rename is what keeps a partial file from ever carrying the final name.
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        sessions.push(ManifestSession {
            logger_id: s.logger_id,
            name: s.name.clone(),
            file: name,
            buffers: data_buffers,
            bytes: off,
            records,
            records_by_hook: by_hook,
            sha256: hasher
                .finish()
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            buffer_list,
            skipped,
            header_sources: facts.sources.clone(),
        });
    }
    let m = Manifest {
        dump: dump_name.to_string(),
        sessions,
        warnings,
    };
    let tmp = dir.join(format!(".manifest.json.tmp-{}", std::process::id()));
    let text = serde_json::to_vec_pretty(&m).unwrap_or_default();
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &manifest_path).map_err(io(&manifest_path))?;
    Ok(m)
}

trait U32Le {
    fn u32_le(&self, off: usize) -> usize;
}

impl U32Le for Vec<u8> {
    fn u32_le(&self, off: usize) -> usize {
        u32::from_le_bytes([self[off], self[off + 1], self[off + 2], self[off + 3]]) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_become_safe_file_names() {
        assert_eq!(
            file_name(2, Some("Circular Kernel Context Logger")),
            "02-Circular Kernel Context Logger.etl"
        );
        assert_eq!(
            file_name(3, Some("../../etc/passwd")),
            "03-____etc_passwd.etl"
        );
        assert_eq!(
            file_name(4, Some("a/b\\c:d*e?f\"g<h>i|j")),
            "04-a_b_c_d_e_f_g_h_i_j.etl"
        );
        assert_eq!(file_name(5, Some("..")), "05-_.etl");
        assert_eq!(file_name(6, Some("\u{0}\u{1b}[31m")), "06-___31m.etl");
        assert_eq!(file_name(7, None), "07-logger.etl");
        assert_eq!(file_name(8, Some("   ")), "08-logger.etl");
        let long = "x".repeat(5000);
        assert_eq!(file_name(9, Some(&long)).len(), 3 + 80 + 4);
        assert_eq!(file_name(10, Some("Ünïcode名")), "10-_n_code_.etl");
        for n in ["CON", "nul", "COM1"] {
            // Reserved device names never stand alone: the id prefix is always there.
            assert!(file_name(1, Some(n)).starts_with("01-"));
        }
    }
}
