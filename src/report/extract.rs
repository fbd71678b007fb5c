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
use crate::etl::records::{walk, Walk};
use crate::etl::writer::{
    self, file_name, synthetic_buffer, EtlFileWriter, LogfileHeader, SyntheticHeader,
};
use crate::etw::ccswap::PendingFound;
use crate::etw::clock::Converter;
use crate::etw::loggers::Session;
use crate::etw::mode::NO_PER_PROCESSOR_BUFFERING;
use crate::etw::source::{file_buffer_size, EtwSource, HeaderFacts, SourceSession, TraceUnit};
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
    /// The output exists and replacing it was not asked for (the CLI names its option).
    #[error("{0} already exists")]
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
    pub name: Option<crate::text::Untrusted>,
    pub file: String,
    pub buffers: usize,
    pub bytes: u64,
    pub records: usize,
    pub records_by_hook: BTreeMap<String, u64>,
    /// SHA-256 of the file in hex; null when it was not computed (`extract --no-hash`).
    pub sha256: Option<String>,
    pub buffer_list: Vec<ManifestBuffer>,
    pub skipped: Vec<Skipped>,
    /// Where PerfFreq, CpuSpeedInMHz and TimerResolution in the file header came from.
    pub header_sources: BTreeMap<&'static str, String>,
}

#[derive(Debug, Serialize)]
pub struct Manifest {
    /// The output contract's version ([`super::FORMAT_VERSION`]).
    pub format_version: u32,
    /// The command that wrote it: `extract` or `scan`.
    pub command: &'static str,
    pub dump: String,
    pub sessions: Vec<ManifestSession>,
    pub warnings: Vec<Warning>,
}

/// Bytes an `extract` may write beyond those of the buffers it recovered (header buffers and
/// synthetic pending buffers): 16 MiB. Every file is then at most its recovered buffers plus a
/// share of this; and all files together at most twice the dump file plus this, so the output
/// is bounded by what the dump holds even when page tables alias buffers onto shared pages.
pub const MAX_UNBACKED_OUTPUT: u64 = 16 << 20;

/// The header buffer of session `s`'s file: the logger context's facts, the dump's and `facts`.
pub(crate) fn header_buffer(
    ctx: &KernelContext<'_>,
    s: &Session,
    facts: &HeaderFacts,
    buffers_in_file: u32,
    anchor: Option<&ClockAnchor>,
) -> Vec<u8> {
    let (major, minor) = match &ctx.kuser {
        Ok(k) => (k.nt_major_version as u8, k.nt_minor_version as u8),
        Err(_) => (if ctx.build >= 10240 { 10 } else { 6 }, 0),
    };
    let no_per_cpu = s.logger_mode.unwrap_or(0) & NO_PER_PROCESSOR_BUFFERING != 0;
    // The header event as Windows writes it: the time the session started in its own clock
    // (ReferenceTime: StartPerfClock, or StartTime for the system-time clock) and the logger
    // thread's process and thread ids (LoggerThread -> ETHREAD.Cid), where the dump has them.
    let (start_clock, pid, tid) = header_event(ctx, s);
    // A session known only from what a triage dump saved: the anchors etwdump itself converts
    // its times with (the file's readers compute time = StartTime + (ts − header event's
    // TimeStamp) × scale, the scale from ClockType and PerfFreq / CpuSpeedInMHz).
    let (start_time, start_clock, clock_type, perf_freq, cpu_mhz) = match anchor {
        Some(a) => (
            Some(a.start_time),
            Some(a.raw),
            Some(u64::from(a.clock_type)),
            a.perf_freq.unwrap_or(facts.perf_freq),
            a.cpu_mhz.unwrap_or(facts.cpu_mhz),
        ),
        None => (
            s.start_time_raw,
            start_clock,
            s.clock_type,
            facts.perf_freq,
            facts.cpu_mhz,
        ),
    };
    writer::header_buffer(&LogfileHeader {
        arch: ctx.space.arch(),
        buffer_size: s.buffer_size.unwrap_or(0x10000) as u32,
        os_version: (major, minor),
        build: ctx.build,
        processors: if no_per_cpu { 1 } else { ctx.processors() },
        end_time: ctx.system_time().unwrap_or(0),
        timer_resolution: facts.timer_resolution,
        log_file_mode: s.logger_mode.unwrap_or(0) as u32,
        buffers_written: buffers_in_file,
        events_lost: s.events_lost.unwrap_or(0) as u32,
        cpu_speed_mhz: cpu_mhz,
        boot_time: ctx
            .system_time()
            .unwrap_or(0)
            .saturating_sub(ctx.up_time().unwrap_or(0)),
        perf_freq,
        start_time: start_time.unwrap_or(0),
        header_event_time: start_clock.unwrap_or(0),
        header_event_pid: pid,
        header_event_tid: tid,
        clock_type: clock_type.unwrap_or(1) as u32,
        buffers_lost: s.log_buffers_lost.unwrap_or(0) as u32,
        logger_id: s.logger_id,
        logger_name: s.name.as_ref().map_or("", |n| n.raw()),
        log_file_name: s.log_file.as_ref().map_or("", |n| n.raw()),
    })
}

impl SyntheticBuffer {
    /// Write it into `file` with its manifest entry.
    fn push_to(self, file: &mut SessionFile) -> Result<(), ExtractError> {
        let w = walk(&self.bytes, self.bytes.len());
        let entry = ManifestBuffer {
            source: self.source,
            address: self.block.map(|b| b.to_string()),
            cpu: Some(self.cpu),
            sequence_number: self.sequence_number,
            valid_bytes: w.end as u64,
            records: w.count,
            file_offset: 0,
        };
        file.push(entry, self.bytes, &w)
    }
}

/// The clock anchors of a file whose session has no logger context (triage dumps): the pair
/// (FILETIME, raw timestamp) and the rate etwdump converts the session's records with, so
/// that a reader of the file dates every event as `events` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClockAnchor {
    /// ClockType: 1 QPC, 2 system time (FILETIME), 3 CPU cycles.
    pub clock_type: u32,
    /// StartTime (FILETIME) and the header event's TimeStamp (raw), one point of the line.
    pub start_time: u64,
    pub raw: u64,
    /// The rate, for QPC and cycles.
    pub perf_freq: Option<u64>,
    pub cpu_mhz: Option<u32>,
}

impl ClockAnchor {
    /// From a unit's converter; `fallback` is a FILETIME anchor for the system-time clock
    /// (the session's StartTime, else its first record's time). None when the clock is unknown
    /// or its rate is not one a file header can carry.
    pub(crate) fn of(conv: &Converter, fallback: Option<u64>) -> Option<ClockAnchor> {
        match *conv {
            Converter::FileTime => fallback.map(|t| ClockAnchor {
                clock_type: 2,
                start_time: t,
                raw: t,
                perf_freq: None,
                cpu_mhz: None,
            }),
            Converter::Scaled {
                start,
                raw_start,
                num: 10_000_000,
                den,
                ..
            } if den > 0 => Some(ClockAnchor {
                clock_type: 1,
                start_time: start,
                raw: raw_start,
                perf_freq: Some(den),
                cpu_mhz: None,
            }),
            Converter::Scaled {
                start,
                raw_start,
                num: 10,
                den,
                ..
            } if den > 0 => Some(ClockAnchor {
                clock_type: 3,
                start_time: start,
                raw: raw_start,
                perf_freq: None,
                cpu_mhz: u32::try_from(den).ok(),
            }),
            _ => None,
        }
    }
}

/// The header event's time (the session's start in its own clock: ReferenceTime's
/// StartPerfClock, or StartTime for the system-time clock) and the process and thread that
/// wrote it (LoggerThread -> ETHREAD.Cid), where the dump has them (0 otherwise).
fn header_event(ctx: &KernelContext<'_>, s: &Session) -> (Option<u64>, u32, u32) {
    let start_clock = crate::etw::clock::reference_time(ctx, s).map(|(st, sp)| {
        if s.clock_type == Some(2) {
            st
        } else {
            sp
        }
    });
    let (pid, tid) = ctx
        .symbols
        .layout("_WMI_LOGGER_CONTEXT")
        .and_then(|l| {
            crate::kernel::view::View::new(&ctx.space, l, s.address)
                .ptr("LoggerThread")
                .ok()
        })
        .filter(|t| !t.is_null())
        .and_then(|t| crate::kernel::processes::thread_cid(ctx, t).ok())
        .unwrap_or((0, 0));
    (
        start_clock,
        u32::try_from(pid).unwrap_or(0),
        u32::try_from(tid).unwrap_or(0),
    )
}

/// The rundown of a kernel session's file (etl/rundown.rs): a Process DCStart per process of
/// the dump's process list, a Thread DCStart per thread, an Image DCStart per loaded kernel
/// module (ProcessId 0), stamped `ts`, packed into GENERIC buffers of processor 0 from
/// SequenceNumber `first_seq`. At most as many buffers as `room` bytes allow (with the header
/// buffer); the rest is said in a warning. The processes' user SIDs are not read (S-1-0-0),
/// nor their session ids (0xFFFFFFFF), command lines, thread affinities or user stacks (0).
fn rundown_buffers(
    ctx: &KernelContext<'_>,
    s: &Session,
    ts: u64,
    first_seq: u64,
    room: u64,
    warnings: &mut Vec<Warning>,
) -> Vec<SyntheticBuffer> {
    let buffer_size = s.buffer_size.unwrap_or(0x10000) as usize;
    // Records are built only up to what the output bound lets be written (plus one buffer):
    // a dump whose lists are long (or alias pages) cannot make the rundown grow without bound.
    let cap = room.saturating_add(buffer_size as u64);
    let records = rundown_records(ctx, s, ts, cap, warnings);
    let cut_while_building = records.bytes > cap;
    let records = records.records;
    // Pack: records back to back, 8-aligned, as many per buffer as fit.
    let mut out = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut left = 0usize;
    let total = records.len();
    let flush = |cur: &mut Vec<u8>, out: &mut Vec<SyntheticBuffer>| -> bool {
        if cur.is_empty() {
            return true;
        }
        if (out.len() as u64 + 2).saturating_mul(buffer_size as u64) > room {
            return false;
        }
        let seq = first_seq.saturating_add(out.len() as u64);
        let header = SyntheticHeader {
            size: buffer_size,
            logger_id: s.logger_id,
            sequence_number: seq,
            timestamp: ts,
            buffer_type: 0,
            processor: Some(0),
        };
        if let Some((b, _)) = synthetic_buffer(&header, cur) {
            out.push(SyntheticBuffer {
                source: "rundown",
                block: None,
                cpu: 0,
                sequence_number: seq,
                bytes: b,
            });
        }
        cur.clear();
        true
    };
    let mut full = false;
    for (i, r) in records.iter().enumerate() {
        if BUFFER_HEADER_SIZE + r.len().next_multiple_of(8) > buffer_size {
            continue; // cannot be in any buffer of this file (a name longer than BufferSize)
        }
        if BUFFER_HEADER_SIZE + cur.len() + r.len().next_multiple_of(8) > buffer_size
            && !flush(&mut cur, &mut out)
        {
            left = total - i;
            full = true;
            break;
        }
        cur.extend_from_slice(r);
        cur.resize(cur.len().next_multiple_of(8), 0);
    }
    if !full && !flush(&mut cur, &mut out) {
        left = 1;
    }
    if cut_while_building && left == 0 {
        left = 1;
    }
    if left > 0 {
        warnings.push(
            Warning::new(
                WarningKind::OutputBound,
                format!(
                    "logger {}: the rundown is cut after {} buffers ({left} of its {total} records not written): more would exceed the output bound",
                    s.logger_id,
                    out.len()
                ),
            )
            .logger(s.logger_id),
        );
    }
    out
}

/// The rundown records of session `s`'s file, stamped `ts`: a Process DCStart per process of
/// the dump's process list, each followed by a Thread DCStart per thread, then an Image DCStart
/// per loaded kernel module; built until their bytes pass `cap`.
fn rundown_records(
    ctx: &KernelContext<'_>,
    s: &Session,
    ts: u64,
    cap: u64,
    warnings: &mut Vec<Warning>,
) -> BoundedRecords {
    use crate::etl::rundown::{
        image_dcstart, process_dcstart, thread_dcstart, ImageRundown, ProcessRundown, ThreadRundown,
    };
    use crate::kernel::processes;
    let arch = ctx.space.arch();
    let (_, hpid, htid) = header_event(ctx, s);
    let procs = processes::walk(ctx);
    for w in &procs.warnings {
        let mut w = w.clone();
        w.message = format!("rundown: {}", w.message);
        warnings.push(w);
    }
    let mut records = BoundedRecords {
        records: Vec::new(),
        bytes: 0,
        cap,
    };
    'build: for p in &procs.processes {
        let d = processes::details(ctx, p);
        let pid = u32::try_from(p.pid).unwrap_or(u32::MAX);
        if !records.push(process_dcstart(
            arch,
            ts,
            &ProcessRundown {
                key: p.eprocess.get(),
                pid,
                parent_pid: d.parent_pid.map_or(0, |v| v as u32),
                session_id: u32::MAX,
                exit_status: d.exit_status.unwrap_or(0),
                directory_table_base: d.directory_table_base.unwrap_or(0),
                image_file_name: p.name.raw().as_bytes(),
            },
        )) {
            break 'build;
        }
        for &(ethread, tid) in &p.threads {
            let t = processes::thread_details(ctx, ethread);
            if !records.push(thread_dcstart(
                arch,
                ts,
                &ThreadRundown {
                    pid,
                    tid: u32::try_from(tid).unwrap_or(u32::MAX),
                    stack_base: t.stack_base.unwrap_or(0),
                    stack_limit: t.stack_limit.unwrap_or(0),
                    teb: t.teb.unwrap_or(0),
                    win32_start: t.win32_start.unwrap_or(0),
                    base_priority: t.base_priority.unwrap_or(0),
                },
            )) {
                break 'build;
            }
        }
    }
    if let (Ok(mods), true) = (&ctx.modules, records.bytes <= cap) {
        for m in &mods.modules {
            let pe = crate::kernel::pe::KernelImage::read(&ctx.space, m.base).headers;
            let name = m
                .full_name
                .as_ref()
                .or(m.base_name.as_ref())
                .map_or("", |n| n.raw());
            if !records.push(image_dcstart(
                arch,
                htid,
                hpid,
                ts,
                &ImageRundown {
                    base: m.base.get(),
                    size: u64::from(m.size),
                    pid: 0,
                    check_sum: pe.as_ref().map_or(0, |h| h.check_sum),
                    time_date_stamp: pe.as_ref().map_or(0, |h| h.time_date_stamp),
                    file_name: name,
                },
            )) {
                break;
            }
        }
    }
    records
}

/// Rundown records collected up to `cap` bytes: `push` refuses (false) once the bytes kept
/// exceed the cap.
struct BoundedRecords {
    records: Vec<Vec<u8>>,
    bytes: u64,
    cap: u64,
}

impl BoundedRecords {
    fn push(&mut self, r: Vec<u8>) -> bool {
        if self.bytes > self.cap {
            return false;
        }
        self.bytes += r.len() as u64;
        self.records.push(r);
        true
    }
}

/// One pending batch laid out as a buffer of the file.
struct SyntheticBuffer {
    /// The manifest's source: "rundown" or "pending_ccswap".
    source: &'static str,
    /// The pending block it was made from.
    block: Option<crate::addr::VirtAddr>,
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
    let arch = ctx.space.arch();
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
        let seq = first_seq.saturating_add(out.len() as u64);
        // PERFINFO_TRACE_HEADER {marker, Size, HookId, TimeStamp}; version 2 (§4.2).
        let rec = crate::etl::writer::perfinfo_record(
            arch,
            2,
            HOOK_CCSWAP,
            p.decoded.last_timestamp,
            &payload,
        );
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
            source: "pending_ccswap",
            block: Some(p.block),
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

/// Where a unit is, for the manifest: its address, else its file offset.
fn place(u: &TraceUnit) -> String {
    match (u.address, u.file_offset) {
        (Some(a), _) => a.to_string(),
        (None, Some(o)) => format!("file offset {o:#x}"),
        (None, None) => "?".into(),
    }
}

/// Write the files (full, bitmap and triage dumps alike, from the dump's [`EtwSource`]),
/// each with its SHA-256. Returns the manifest.
pub fn extract(
    ctx: &KernelContext<'_>,
    dump_name: &str,
    dir: &Path,
    session: Option<&str>,
    force: bool,
) -> Result<Manifest, ExtractError> {
    extract_with(ctx, dump_name, dir, session, force, true)
}

/// [`extract`]; `hash`: compute each file's SHA-256 (on a second thread, at about 1.2 GB/s
/// per core with SHA extensions: what bounds extraction from a warm page cache). Without it
/// the manifest's `sha256` is null; the files are the same bytes.
pub fn extract_with(
    ctx: &KernelContext<'_>,
    dump_name: &str,
    dir: &Path,
    session: Option<&str>,
    force: bool,
    hash: bool,
) -> Result<Manifest, ExtractError> {
    let src = EtwSource::open(ctx, session);
    let facts = src.header_facts();
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut warnings: Vec<Warning> = src.memory().map_or_else(Vec::new, |l| l.warnings.clone());
    warnings.extend(src.warnings().iter().cloned());
    let plan = plan_files(&src, dir, session, force)?;
    let manifest_path = dir.join("manifest.json");
    if manifest_path.exists() && !force {
        return Err(ExtractError::Exists(manifest_path));
    }
    let pending = pending_batches(&src, &plan, &mut warnings);
    let mut x = Extraction {
        ctx,
        src: &src,
        facts,
        dir,
        pending,
        warnings,
        hash,
        unbacked_allowance: MAX_UNBACKED_OUTPUT,
        output_budget: ctx
            .dump
            .len()
            .saturating_mul(2)
            .saturating_add(MAX_UNBACKED_OUTPUT),
    };
    // From a cold disk, the buffers' pages are read in file order on a second thread while
    // the files are written (each buffer's pages lie apart: one random read each otherwise).
    let stop = std::sync::atomic::AtomicBool::new(false);
    let sessions = std::thread::scope(|scope| {
        scope.spawn(|| src.stream_ahead(&stop));
        let mut sessions = Vec::new();
        let written = (|| {
            for f in plan {
                if let Some(m) = x.session_file(f)? {
                    sessions.push(m);
                }
            }
            Ok::<(), ExtractError>(())
        })();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        written.map(|()| sessions)
    })?;
    let mut warnings = x.warnings;
    if let Some(what) = src.unknowable() {
        warnings.push(Warning::new(
            WarningKind::Unknowable,
            format!("not known: {what}"),
        ));
    }
    write_manifest("extract", dump_name, sessions, warnings, &manifest_path)
}

/// A session that gets a file: the source's session, its logger context and the file's name.
struct PlannedFile<'s> {
    source: &'s SourceSession,
    context: &'s Session,
    name: String,
}

/// The files to write, one per selected session with a logger: each named after its logger
/// (made unique, case-insensitively, by a `-2`, `-3`… suffix). An error when a file exists
/// and `force` is not given.
fn plan_files<'s>(
    src: &'s EtwSource<'_, '_>,
    dir: &Path,
    session: Option<&str>,
    force: bool,
) -> Result<Vec<PlannedFile<'s>>, ExtractError> {
    let mut used = HashSet::new();
    let mut plan = Vec::new();
    for s in src.sessions().iter().filter(|s| s.selected(session)) {
        // A session needs a logger to name its file after and to gather its buffers by.
        let (Some(logger_id), Some(context)) = (s.logger_id, s.context.as_ref()) else {
            continue;
        };
        let mut name = file_name(logger_id, s.name().map(|n| n.raw()));
        let mut n = 2;
        while !used.insert(name.to_ascii_lowercase()) {
            name = file_name(
                logger_id,
                Some(&format!("{}-{n}", s.name().map_or("logger", |n| n.raw()))),
            );
            n += 1;
        }
        let path = dir.join(&name);
        if path.exists() && !force {
            return Err(ExtractError::Exists(path));
        }
        plan.push(PlannedFile {
            source: s,
            context,
            name,
        });
    }
    Ok(plan)
}

/// Pending compact cswitch batches, only looked for when a kernel session is extracted; the
/// search's warnings go to `warnings`.
fn pending_batches(
    src: &EtwSource<'_, '_>,
    plan: &[PlannedFile<'_>],
    warnings: &mut Vec<Warning>,
) -> Vec<PendingFound> {
    match plan
        .iter()
        .any(|f| crate::etw::loggers::is_kernel_session(f.context))
        .then(|| src.pending())
        .flatten()
    {
        Some(p) => {
            warnings.extend(p.warnings.into_iter().map(|mut w| {
                w.message = format!("pending CCSWAP: {}", w.message);
                w
            }));
            p.blocks
        }
        None => Vec::new(),
    }
}

/// An `extract` under way: the source, what every file shares (header facts, pending
/// batches), the warnings so far and what is left of the output bounds.
struct Extraction<'x, 'c, 'd> {
    ctx: &'c KernelContext<'d>,
    src: &'x EtwSource<'c, 'd>,
    facts: HeaderFacts,
    dir: &'x Path,
    pending: Vec<PendingFound>,
    warnings: Vec<Warning>,
    /// Compute each file's SHA-256.
    hash: bool,
    /// Bytes not read from the dump that may still be written (header and synthetic buffers
    /// beyond what a session's recovered buffers occupy).
    unbacked_allowance: u64,
    /// Bytes that may still be written in all.
    output_budget: u64,
}

/// What goes into one session's file: its logger context with the file's BufferSize, the
/// units in file order and those left out with why.
struct FileContents<'u> {
    sess: Session,
    buffer_size: u64,
    data: Vec<&'u TraceUnit>,
    skipped: Vec<Skipped>,
    /// The first record time of the file's data.
    first_time: Option<u64>,
}

impl FileContents<'_> {
    /// Bytes of the recovered buffers the file holds.
    fn backed(&self) -> u64 {
        self.buffer_size.saturating_mul(self.data.len() as u64)
    }
}

impl<'x, 'c, 'd> Extraction<'x, 'c, 'd> {
    /// Write session `f`'s file; None when it gets none (a triage session without records, or
    /// an output bound reached).
    fn session_file(
        &mut self,
        f: PlannedFile<'x>,
    ) -> Result<Option<ManifestSession>, ExtractError> {
        let s = f.source;
        let Some(mut file) = self.contents(s, f.context) else {
            return Ok(None);
        };
        let Some(synthetic) = self.synthetic_buffers(&file) else {
            return Ok(None);
        };
        if !self.within_output_budget(&mut file, synthetic.len()) {
            return Ok(None);
        }
        // A session without a logger context (triage): the file carries etwdump's own clock
        // anchors, those of its first unit whose clock is known.
        let anchor = if s.source == "logger_context" {
            None
        } else {
            self.anchor(&file)
        };
        self.write_file(s, f.name, file, synthetic, anchor)
            .map(Some)
    }

    /// The units of `context`'s logger that go into its file, in file order, with the file's
    /// BufferSize; None when a session known only from what a triage dump saved has no records
    /// (one with a logger context in memory always gets a file: its header says what the
    /// session was).
    fn contents(&mut self, s: &SourceSession, context: &Session) -> Option<FileContents<'x>> {
        let mut skipped = Vec::new();
        let (mut data, first_time) = self.units_in_order(context.logger_id, &mut skipped);
        // An ETL file's buffers are all one size (§6.1); buffers of another cannot go in.
        let (buffer_size, anomaly) = file_buffer_size(s, &data);
        self.warnings.extend(anomaly);
        data.retain(|u| {
            let own = u.header.map(|h| h.buffer_size);
            let keep =
                u.origin != "memory" && u.origin != "secondary_data" || own == Some(buffer_size);
            if !keep {
                skipped.push(Skipped {
                    address: place(u),
                    reason: format!(
                        "BufferSize {:#x} differs from the file's {buffer_size:#x}",
                        own.unwrap_or(0)
                    ),
                });
            }
            keep
        });
        if data.is_empty() && s.source != "logger_context" {
            return None;
        }
        let mut sess = context.clone();
        sess.buffer_size = Some(buffer_size);
        Some(FileContents {
            sess,
            buffer_size,
            data,
            skipped,
            first_time,
        })
    }

    /// The units of logger `logger_id` whose first record is complete (exactly when a full
    /// walk would count a record), in time order, and the first record time among them; the
    /// others go to `skipped` with why.
    fn units_in_order(
        &self,
        logger_id: u64,
        skipped: &mut Vec<Skipped>,
    ) -> (Vec<&'x TraceUnit>, Option<u64>) {
        let src = self.src;
        // Pass 1 (cheap): which units go into the file; the others are listed with why.
        let mut data: Vec<&TraceUnit> = Vec::new();
        for u in src
            .all_units()
            .iter()
            .filter(|u| u.logger_id == Some(logger_id))
        {
            match src.has_record(u) {
                Ok(true) => data.push(u),
                Ok(false) => skipped.push(Skipped {
                    address: place(u),
                    reason: u.skip.as_ref().map_or_else(
                        || format!("{}: no complete record", u.origin),
                        |why| format!("{}: {why}", u.origin),
                    ),
                }),
                Err(e) => skipped.push(Skipped {
                    address: place(u),
                    reason: e.to_string(),
                }),
            }
        }
        // Time order: by the first record's timestamp (so each processor's buffers follow
        // one another in time, as consumers read them), then SequenceNumber (flush order,
        // which an in-flight buffer does not have); buffers without a timed first record
        // after the timed ones, by SequenceNumber.
        let mut keyed: Vec<_> = data
            .into_iter()
            .map(|u| {
                let t = src.first_time(u);
                (
                    (
                        t.is_none(),
                        t.unwrap_or(0),
                        u.header.map_or(1, |h| h.sequence_number),
                        u.address.map_or(0, |a| a.get()),
                        u.file_offset,
                    ),
                    u,
                )
            })
            .collect();
        keyed.sort_by_key(|(k, _)| *k);
        // The rundown is stamped with the first record time of the file's data.
        let first_time = keyed.iter().find(|(k, _)| !k.0).map(|(k, _)| k.1);
        (keyed.into_iter().map(|(_, u)| u).collect(), first_time)
    }

    /// The synthetic buffers of `file` (a kernel session's rundown, then its pending batches),
    /// as many as the unbacked-output allowance keeps, which they then use up; None (with a
    /// warning) when not even the header buffer fits the allowance.
    fn synthetic_buffers(&mut self, file: &FileContents<'_>) -> Option<Vec<SyntheticBuffer>> {
        let (ctx, sess, buffer_size) = (self.ctx, &file.sess, file.buffer_size);
        let logger_id = sess.logger_id;
        // Pending batches for this session, as synthetic CTX_SWAP buffers after the others.
        let next_seq = file
            .data
            .iter()
            .filter_map(|u| u.header.map(|h| h.sequence_number))
            .max()
            .map_or(1, |m| m.saturating_add(1));
        let backed = file.backed();
        // Built at most as many as the output bound below can keep (each is BufferSize bytes
        // in memory until written: fuzz finding 5).
        let room = self.unbacked_allowance.saturating_add(backed);
        // A kernel session's file starts with the rundown of the dump's processes, threads
        // and modules (stamped with its data's first time, else the header event's), then
        // come the pending batches: synthetic buffers, the rundown first.
        let mut synthetic = if crate::etw::loggers::is_kernel_session(sess) {
            let ts = file.first_time.or(header_event(ctx, sess).0).unwrap_or(0);
            rundown_buffers(ctx, sess, ts, next_seq, room, &mut self.warnings)
        } else {
            Vec::new()
        };
        let rundown_len = synthetic.len() as u64;
        synthetic.extend(pending_buffers(
            ctx,
            sess,
            &self.pending,
            next_seq.saturating_add(rundown_len),
            room.saturating_sub(rundown_len.saturating_mul(buffer_size)),
            &mut self.warnings,
        ));
        // Output bound: bytes not read from the dump (the header buffer and the synthetic
        // pending buffers, each BufferSize long) may exceed what the session's recovered
        // buffers occupy only by the extract-wide allowance, so a small dump whose loggers claim
        // 64 MiB buffers cannot make `extract` write gigabytes.
        let unbacked_allowance = self.unbacked_allowance;
        let extra = |n: usize| {
            buffer_size
                .saturating_mul(n as u64 + 1)
                .saturating_sub(backed)
        };
        while !synthetic.is_empty() && extra(synthetic.len()) > unbacked_allowance {
            let what = match synthetic.pop() {
                Some(p) if p.source == "rundown" => "a rundown buffer",
                _ => "a pending batch",
            };
            self.warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {logger_id}: {what} is not written: its {buffer_size:#x}-byte synthetic buffer would exceed the output bound ({unbacked_allowance} bytes not backed by the dump left)",
                    ),
                )
                .logger(logger_id),
            );
        }
        if extra(synthetic.len()) > unbacked_allowance {
            self.warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {logger_id}: not written: no recovered buffer backs its {buffer_size:#x}-byte header buffer and only {unbacked_allowance} bytes may be written that the dump does not hold",
                    ),
                )
                .logger(logger_id),
            );
            return None;
        }
        self.unbacked_allowance -= extra(synthetic.len());
        Some(synthetic)
    }

    /// Keep `file` (with its `synthetic` buffers) within the extract's total output bound,
    /// dropping its last units as needed, and take its bytes from the budget; false (with a
    /// warning) when not even the rest fits.
    fn within_output_budget(&mut self, file: &mut FileContents<'_>, synthetic: usize) -> bool {
        let (logger_id, buffer_size) = (file.sess.logger_id, file.buffer_size);
        // Total bound: page tables that map many buffers onto the same stored pages could
        // otherwise make a small dump yield unbounded output. A real dump's buffers are distinct
        // memory, so twice the file plus the unbacked allowance never cuts a genuine one.
        let fixed_part = buffer_size.saturating_mul(synthetic as u64 + 1);
        let mut total = fixed_part.saturating_add(file.backed());
        let mut dropped = 0usize;
        while total > self.output_budget {
            let Some(u) = file.data.pop() else { break };
            total -= buffer_size;
            dropped += 1;
            file.skipped.push(Skipped {
                address: place(u),
                reason: "not written: the extract's output bound is reached".into(),
            });
        }
        let bound = 2 * self.ctx.dump.len() + MAX_UNBACKED_OUTPUT;
        if dropped > 0 {
            self.warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {logger_id}: {dropped} buffers not written: the output would exceed {bound} bytes (twice the dump plus {MAX_UNBACKED_OUTPUT}); the dump's page tables map more buffer bytes than the file holds",
                    ),
                )
                .logger(logger_id),
            );
        }
        if total > self.output_budget {
            self.warnings.push(
                Warning::new(
                    WarningKind::OutputBound,
                    format!(
                        "logger {logger_id}: not written: the extract's output bound ({bound} bytes) is reached",
                    ),
                )
                .logger(logger_id),
            );
            return false;
        }
        self.output_budget -= total;
        true
    }

    /// The clock anchors of a file whose session has no logger context: those of its first
    /// unit whose clock is known (warned about when its units' clocks differ or none is).
    fn anchor(&mut self, file: &FileContents<'_>) -> Option<ClockAnchor> {
        let logger_id = file.sess.logger_id;
        let fallback = file
            .sess
            .start_time_raw
            .filter(|&t| t > 0)
            .or(file.first_time);
        let anchors: Vec<ClockAnchor> = file
            .data
            .iter()
            .filter_map(|u| ClockAnchor::of(self.src.converter(u), fallback))
            .collect();
        if anchors
            .iter()
            .any(|a| a.clock_type != anchors[0].clock_type)
        {
            self.warnings.push(
                Warning::new(
                    WarningKind::Time,
                    format!("logger {logger_id}: its buffers use different clocks; the file's header carries the first one's, so a reader dates the others wrongly"),
                )
                .logger(logger_id),
            );
        }
        if anchors.is_empty() && !file.data.is_empty() {
            self.warnings.push(
                Warning::new(
                    WarningKind::Time,
                    format!("logger {logger_id}: its clock is not known, so the file's StartTime and header event carry none and a reader cannot date its events"),
                )
                .logger(logger_id),
            );
        }
        anchors.first().copied()
    }

    /// Write the file `name` of session `s`: the header buffer, the rundown, each unit read
    /// again and fixed up, then the pending batches; the header rewritten when a unit could
    /// not be read again. Returns its manifest entry.
    fn write_file(
        &self,
        s: &SourceSession,
        name: String,
        file: FileContents<'_>,
        synthetic: Vec<SyntheticBuffer>,
        anchor: Option<ClockAnchor>,
    ) -> Result<ManifestSession, ExtractError> {
        let (ctx, src, facts) = (self.ctx, self.src, &self.facts);
        let FileContents {
            sess,
            buffer_size,
            data,
            mut skipped,
            ..
        } = file;
        let sess = &sess;
        let planned = data.len() + synthetic.len();
        let header = header_buffer(ctx, sess, facts, planned as u32 + 1, anchor.as_ref());
        let mut out = SessionFile::create(self.dir, &name, header, self.hash)?;
        // The rundown right after the header buffer.
        let (rundown, synthetic): (Vec<_>, Vec<_>) =
            synthetic.into_iter().partition(|p| p.source == "rundown");
        for p in rundown {
            p.push_to(&mut out)?;
        }
        // Each unit read again (one at a time) into a buffer the file's hashing thread hands
        // back, walked, fixed up and written; the next PREFETCH units' pages are asked for
        // ahead, so cold reads overlap the work.
        const PREFETCH: usize = 16;
        for u in data.iter().take(PREFETCH) {
            src.prefetch(u);
        }
        for (i, u) in data.iter().enumerate() {
            if let Some(next) = data.get(i + PREFETCH) {
                src.prefetch(next);
            }
            match src.file_buffer(u, buffer_size as usize, out.spare()) {
                Ok((bytes, w)) => {
                    let entry = ManifestBuffer {
                        source: u.origin,
                        address: u.address.map(|a| a.to_string()),
                        cpu: u.processor,
                        sequence_number: u.header.map_or(1, |h| h.sequence_number),
                        valid_bytes: w.end as u64,
                        records: w.count,
                        file_offset: 0,
                    };
                    out.push(entry, bytes, &w)?;
                }
                Err(reason) => skipped.push(Skipped {
                    address: place(u),
                    reason: reason.to_string(),
                }),
            }
        }
        for p in synthetic {
            p.push_to(&mut out)?;
        }
        if out.data_buffers() != planned {
            // A buffer vanished between the reads: BuffersWritten in the header must match.
            out.rewrite_header(&header_buffer(
                ctx,
                sess,
                facts,
                out.data_buffers() as u32 + 1,
                anchor.as_ref(),
            ))?;
        }
        out.finish(sess.logger_id, s.name().cloned(), name, skipped, facts)
    }
}

/// Write DIR/manifest.json (at `path`, through a temporary name): the manifest of dump
/// `dump_name`'s `sessions`, with `warnings`, written by `command`. Returns it.
pub(crate) fn write_manifest(
    command: &'static str,
    dump_name: &str,
    sessions: Vec<ManifestSession>,
    warnings: Vec<Warning>,
    path: &Path,
) -> Result<Manifest, ExtractError> {
    let m = Manifest {
        format_version: super::FORMAT_VERSION,
        command,
        dump: dump_name.to_string(),
        sessions,
        warnings,
    };
    let tmp = path.with_file_name(format!(".manifest.json.tmp-{}", std::process::id()));
    let text = serde_json::to_vec_pretty(&m).unwrap_or_default();
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))?;
    Ok(m)
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
    pub(crate) fn create(
        dir: &Path,
        name: &str,
        header: Vec<u8>,
        hash: bool,
    ) -> Result<Self, ExtractError> {
        let mut w = EtlFileWriter::create_with(dir, name, hash).map_err(io(&dir.join(name)))?;
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
    pub(crate) fn spare(&mut self) -> Vec<u8> {
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
        name: Option<crate::text::Untrusted>,
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

#[cfg(test)]
mod tests {
    use super::BoundedRecords;

    /// The rundown's collector keeps records until their bytes pass the cap, then refuses
    /// every further one (the bound on what a dump's lists can make it build).
    #[test]
    fn rundown_records_stop_at_the_cap() {
        let mut b = BoundedRecords {
            records: Vec::new(),
            bytes: 0,
            cap: 100,
        };
        let kept = (0..1000).take_while(|_| b.push(vec![0u8; 0x30])).count();
        assert_eq!(kept, 3);
        assert_eq!(b.bytes, 0x90);
        assert!(!b.push(vec![0u8; 1]));
        assert_eq!(b.records.len(), 3);
    }
}
