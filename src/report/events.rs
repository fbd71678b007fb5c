//! `etwdump events`: one row per record, for every dump type.
//!
//! * Full and bitmap dumps: the records of every recovered buffer of every session (source
//!   `memory`), with the session's clock.
//! * Triage dumps (triage-etw.md): logger 2's saved current buffer (`current_buffer`), the
//!   error-log tail (`errlog_tail`) unless it repeats a buffer of the ETW blob (then its records
//!   are listed once, from the blob, and a warning says so), and every buffer of the ETW blob
//!   (`secondary_data`).
//!
//! Clocks (§2.4, §4.1 step 6): a blob session's ClockType with its ReferenceTime and the blob's
//! EtwPerfFreq / EtwCPUSpeedInMHz; the error-log tail takes the clock of the blob session it
//! repeats, else FILETIME when its timestamps fall between boot and the crash (inferred);
//! logger 2's window has no logger context: its timestamps are taken as CPU cycles when the
//! newest is within 10 ms of cycles before the crashing CPU's KPRCB.StartCycles (anchored to the
//! dump's SystemTime, inferred and approximate), otherwise they are not converted.
//!
//! PERFINFO interrupt and DPC records carry a routine address (PERFINFO_INTERRUPT_INFORMATION /
//! PERFINFO_DPC_INFORMATION: InitialTime, then the routine); it is resolved to `module+offset`
//! through the loaded-module list (the triage driver list in minidumps) and, inside the kernel,
//! to the nearest preceding kernel symbol when symbols are loaded.

use crate::decode::fields::{fields, kind_name};
use crate::decode::hooks::{has_routine, hook_name};
use crate::etl::header::BUFFER_HEADER_SIZE;
use crate::etl::records::{walk_from, Record};
use crate::etw::buffers::{find_buffers, read_buffer};
use crate::etw::clock::{self, Converter};
use crate::etw::loggers::list_sessions;
use crate::etw::mode::NO_PER_PROCESSOR_BUFFERING;
use crate::etw::triage::{self, BlobSession, TriageEtw, WindowKind};
use crate::kernel::context::KernelContext;
use crate::time::filetime_to_iso8601;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;

/// Newest logger-2 timestamp accepted as CPU cycles: within this many ms before StartCycles.
const CYCLES_WINDOW_MS: u64 = 10;

/// One record.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct EventRow {
    pub logger_id: Option<u64>,
    /// `memory`, `current_buffer`, `errlog_tail` or `secondary_data`.
    pub source: &'static str,
    /// The buffer's virtual address (null for the secondary data, which has none).
    pub buffer: Option<String>,
    /// Offset of the record in its buffer.
    pub offset: usize,
    /// File offset of the record (triage dumps).
    pub file_offset: Option<u64>,
    pub header_type: &'static str,
    /// Kernel hook id ("0x0f44"); null for EVENT_HEADER and other hook-less records.
    pub hook: Option<String>,
    pub hook_name: Option<&'static str>,
    pub provider: Option<String>,
    pub event_id: Option<u16>,
    pub version: Option<u16>,
    /// Raw timestamp in the session's clock.
    pub timestamp: Option<u64>,
    /// ISO-8601 UTC; null when the clock cannot be converted (a warning says why).
    pub time: Option<String>,
    #[serde(skip)]
    pub filetime: Option<u64>,
    pub cpu: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub size: usize,
    /// Interrupt/DPC routine address and its resolution.
    pub routine: Option<String>,
    pub routine_symbol: Option<String>,
}

/// The rows and the problems met.
#[derive(Debug, Default)]
pub struct EventsReport {
    pub rows: Vec<EventRow>,
    pub warnings: Vec<Warning>,
}

/// Resolves addresses to `module+offset` and kernel symbols.
struct Resolver {
    /// (base, size, name), sorted by base.
    modules: Vec<(u64, u64, String)>,
    kernel_base: Option<u64>,
    /// (RVA, name), sorted.
    kernel_symbols: Vec<(u64, String)>,
}

impl Resolver {
    fn new(ctx: &KernelContext<'_>) -> Resolver {
        let mut modules: Vec<(u64, u64, String)> = match ctx.dump.triage() {
            Some(t) => t
                .drivers
                .iter()
                .map(|d| {
                    // Driver-list names are paths (\SystemRoot\System32\drivers\x.sys).
                    let base = d.name.rsplit(['\\', '/']).next().unwrap_or(&d.name);
                    (d.base, u64::from(d.size), base.to_string())
                })
                .collect(),
            None => ctx
                .modules
                .as_ref()
                .map(|l| {
                    l.modules
                        .iter()
                        .map(|m| {
                            (
                                m.base.get(),
                                u64::from(m.size),
                                m.base_name.clone().unwrap_or_else(|| "?".into()),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        modules.sort_by_key(|m| m.0);
        let mut kernel_symbols: Vec<(u64, String)> = ctx
            .symbols
            .all_symbols()
            .map(|(n, r)| (r, n.to_string()))
            .collect();
        kernel_symbols.sort();
        Resolver {
            modules,
            kernel_base: ctx.base.map(|b| b.get()),
            kernel_symbols,
        }
    }

    /// (`module+0xoff`, `nt!Symbol+0xoff` when inside the kernel and known).
    fn resolve(&self, va: u64) -> (Option<String>, Option<String>) {
        let i = self.modules.partition_point(|m| m.0 <= va);
        let module = i
            .checked_sub(1)
            .map(|i| &self.modules[i])
            .filter(|m| va - m.0 < m.1);
        let text = module.map(|m| format!("{}+{:#x}", m.2, va - m.0));
        let sym = match (module, self.kernel_base) {
            (Some(m), Some(kb)) if m.0 == kb => {
                let rva = va - kb;
                let j = self.kernel_symbols.partition_point(|s| s.0 <= rva);
                j.checked_sub(1).map(|j| {
                    let (r, n) = &self.kernel_symbols[j];
                    if *r == rva {
                        format!("nt!{n}")
                    } else {
                        format!("nt!{n}+{:#x}", rva - r)
                    }
                })
            }
            _ => None,
        };
        (text, sym)
    }
}

/// Context for the rows of one buffer.
struct BufferCtx<'a> {
    logger_id: Option<u64>,
    source: &'static str,
    buffer: Option<String>,
    /// File offset of `buf[0]` (triage).
    file_base: Option<u64>,
    cpu: Option<u64>,
    conv: &'a Converter,
    pointer_size: usize,
}

/// Where rows go as they are made: a callback, and its first error (after one, rows are
/// dropped and the error is returned when the current buffer is done).
struct Sink<'e> {
    emit: &'e mut dyn FnMut(&EventRow) -> std::io::Result<()>,
    err: Option<std::io::Error>,
}

impl Sink<'_> {
    fn push(&mut self, r: &EventRow) {
        if self.err.is_none() {
            if let Err(e) = (self.emit)(r) {
                self.err = Some(e);
            }
        }
    }

    fn check(&mut self) -> std::io::Result<()> {
        match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The rows of `buf[start..valid]`; record offsets are reported `shift` bytes further on
/// (a triage window's offset in its buffer).
fn push_rows(
    out: &mut Sink<'_>,
    res: &Resolver,
    bc: &BufferCtx<'_>,
    buf: &[u8],
    (start, valid, shift): (usize, usize, usize),
) -> crate::etl::records::Walk {
    walk_from(buf, start, valid, |r: &Record| {
        let f = fields(buf, r);
        let (mut routine, mut routine_symbol) = (None, None);
        if let (Some(h), Some(p)) = (r.hook, r.perfinfo_payload(buf)) {
            if has_routine(h) {
                let v = if bc.pointer_size == 8 {
                    p.get(8..16)
                        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                } else {
                    p.get(8..12)
                        .map(|b| u64::from(u32::from_le_bytes(b.try_into().unwrap_or([0; 4]))))
                };
                if let Some(v) = v {
                    let (m, s) = res.resolve(v);
                    routine = Some(format!("{v:#x}"));
                    routine_symbol = s.or(m);
                }
            }
        }
        let filetime = f.timestamp.and_then(|t| bc.conv.to_filetime(t));
        out.push(&EventRow {
            logger_id: bc.logger_id,
            source: bc.source,
            buffer: bc.buffer.clone(),
            offset: r.offset + shift,
            file_offset: bc.file_base.map(|b| b + r.offset as u64),
            header_type: kind_name(r.kind),
            hook: r.hook.map(|h| format!("{h:#06x}")),
            hook_name: r.hook.and_then(hook_name),
            provider: f.provider,
            event_id: f.event_id,
            version: f.version,
            timestamp: f.timestamp,
            time: filetime.map(filetime_to_iso8601),
            filetime,
            cpu: bc.cpu,
            pid: f.pid,
            tid: f.tid,
            size: r.size,
            routine,
            routine_symbol,
        });
    })
}

/// The converter of a blob session's clock.
fn blob_converter(s: &BlobSession, perf_freq: u64, mhz: u64) -> Converter {
    match s.clock_type {
        2 => Converter::FileTime,
        1 if perf_freq > 0 => Converter::Scaled {
            start: s.reference_system_time,
            raw_start: s.reference_perf_clock,
            num: 10_000_000,
            den: perf_freq,
            how: "QPC: the session's ReferenceTime and the blob's EtwPerfFreq".into(),
        },
        3 if mhz > 0 => Converter::Scaled {
            start: s.reference_system_time,
            raw_start: s.reference_perf_clock,
            num: 10,
            den: mhz,
            how: "CPU cycles: the session's ReferenceTime and EtwCPUSpeedInMHz (nominal speed: approximate)"
                .into(),
        },
        c => Converter::Unknown(format!(
            "clock type {c} with EtwPerfFreq {perf_freq} and CPU speed {mhz} MHz cannot be converted"
        )),
    }
}

/// Every record of `ctx`'s buffers (sessions selected by id or name), collected.
pub fn collect(ctx: &KernelContext<'_>, session: Option<&str>) -> EventsReport {
    let mut rows = Vec::new();
    let warnings = stream(ctx, session, &mut |r| {
        rows.push(r.clone());
        Ok(())
    })
    .unwrap_or_default();
    EventsReport { rows, warnings }
}

/// Stream one row per record to `emit` as the buffers are walked (sessions in list order,
/// buffers as found, records in buffer order); one buffer in memory at a time. Returns the
/// warnings.
pub fn stream(
    ctx: &KernelContext<'_>,
    session: Option<&str>,
    emit: &mut dyn FnMut(&EventRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    let mut rep = Warnings::default();
    let mut sink = Sink { emit, err: None };
    let res = Resolver::new(ctx);
    let pointer_size = ctx.space.arch().pointer_size() as usize;
    let sel = |id: Option<u64>, name: Option<&str>| super::selects(id, name, session);
    if ctx.dump.triage().is_some() {
        let t = triage::read(ctx);
        rep.warnings.extend(t.warnings.iter().cloned());
        triage_rows(ctx, &t, &res, pointer_size, &sel, &mut rep, &mut sink)?;
        return Ok(rep.warnings);
    }
    let list = list_sessions(ctx);
    let Some(array) = list.array.as_ref() else {
        rep.warnings.push(Warning::new(
            WarningKind::NotFound,
            "no logger array found: no buffers to list",
        ));
        return Ok(rep.warnings);
    };
    let facts = clock::ClockFacts::gather(ctx, &list.sessions);
    for s in list
        .sessions
        .iter()
        .filter(|s| super::buffers::selected(s, session))
    {
        let conv = clock::for_session(ctx, &facts, s);
        if let Some(why) = conv.problem() {
            rep.warnings.push(
                Warning::new(
                    WarningKind::Time,
                    format!("logger {}: times not converted: {why}", s.logger_id),
                )
                .logger(s.logger_id),
            );
        }
        let per_cpu = s.logger_mode.unwrap_or(0) & NO_PER_PROCESSOR_BUFFERING == 0;
        let found = find_buffers(ctx, array, s);
        rep.warnings.extend(
            found
                .warnings
                .iter()
                .map(|w| w.clone().in_logger(s.logger_id)),
        );
        for b in &found.buffers {
            let (Some(valid), false) = (b.header.valid_bytes(), b.header.compressed()) else {
                continue;
            };
            let Ok(data) = read_buffer(ctx, b) else {
                continue;
            };
            let bc = BufferCtx {
                logger_id: Some(s.logger_id),
                source: "memory",
                buffer: Some(b.address.to_string()),
                file_base: None,
                cpu: per_cpu.then(|| b.cpu.unwrap_or(b.header.processor_index)),
                conv: &conv,
                pointer_size,
            };
            push_rows(
                &mut sink,
                &res,
                &bc,
                &data,
                (BUFFER_HEADER_SIZE, valid as usize, 0),
            );
            sink.check()?;
        }
    }
    Ok(rep.warnings)
}

/// Warnings gathered while rows stream.
#[derive(Default)]
struct Warnings {
    warnings: Vec<Warning>,
}

fn triage_rows(
    ctx: &KernelContext<'_>,
    t: &TriageEtw,
    res: &Resolver,
    pointer_size: usize,
    sel: &dyn Fn(Option<u64>, Option<&str>) -> bool,
    rep: &mut Warnings,
    sink: &mut Sink<'_>,
) -> std::io::Result<()> {
    let blob_h = t.blob.as_ref().and_then(|b| b.header);
    let perf_freq = blob_h.map_or(0, |b| b.perf_freq);
    let mhz = t
        .crash_cpu
        .and_then(|c| c.mhz)
        .filter(|&m| m > 0)
        .or(blob_h.map(|b| u64::from(b.cpu_speed_mhz)))
        .unwrap_or(0);
    let blob_sessions: &[BlobSession] = t.blob.as_ref().map_or(&[], |b| &b.sessions);
    for w in &t.windows {
        let name = w
            .logger_id
            .and_then(|id| blob_sessions.iter().find(|s| s.logger_id == id))
            .map(|s| s.name.as_str());
        if !sel(w.logger_id, name) {
            continue;
        }
        if let Some(d) = w.duplicate_of {
            let s = &blob_sessions[d.session];
            rep.warnings.push(Warning::new(WarningKind::Inferred, format!(
                "{}: the window [{}, {}) repeats the last {:#x} bytes of logger {}'s buffer {} in the ETW secondary data; its records are listed once, from there",
                w.kind.source(),
                w.start,
                w.end,
                w.data.len(),
                s.logger_id,
                d.buffer
            )));
            continue;
        }
        let Some(first) = w.first_record else {
            rep.warnings.push(Warning::new(
                WarningKind::Decode,
                format!(
                    "{} [{}, {}): no complete record chain ({} bytes)",
                    w.kind.source(),
                    w.start,
                    w.end,
                    w.data.len()
                ),
            ));
            continue;
        };
        if w.partial_bytes > 0 {
            rep.warnings.push(Warning::new(WarningKind::Decode, format!(
                "{}: the window starts {:#x} bytes inside a record (the tail of a record cut by the kernel's {:#x}-byte limit); skipped",
                w.kind.source(),
                w.partial_bytes,
                w.kind.limit()
            )));
        }
        let (conv, inferred) = match w.kind {
            WindowKind::CurrentBuffer => current_buffer_clock(ctx, t, w, mhz),
            WindowKind::ErrlogTail => errlog_clock(ctx, w, blob_sessions, perf_freq, mhz),
        };
        if let Some(why) = conv.problem() {
            rep.warnings.push(Warning::new(
                WarningKind::Time,
                format!("{}: times not converted: {why}", w.kind.source()),
            ));
        }
        if let Some(how) = inferred {
            rep.warnings.push(Warning::new(
                WarningKind::Inferred,
                format!("{}: {how}", w.kind.source()),
            ));
        }
        let bc = BufferCtx {
            logger_id: w.logger_id,
            source: w.kind.source(),
            buffer: Some(w.base.to_string()),
            file_base: w.file_offset,
            cpu: match w.kind {
                WindowKind::CurrentBuffer => w.processor.or(t.crash_cpu.and_then(|c| c.number)),
                WindowKind::ErrlogTail => None,
            },
            conv: &conv,
            pointer_size,
        };
        // Offsets in rows are buffer offsets: window offset + (start − base).
        let shift = (w.start.get() - w.base.get()) as usize;
        push_rows(sink, res, &bc, &w.data, (first, w.data.len(), shift));
        sink.check()?;
    }
    for s in blob_sessions {
        if !sel(Some(s.logger_id), Some(&s.name)) {
            continue;
        }
        let conv = blob_converter(s, perf_freq, mhz);
        if let Some(why) = conv.problem() {
            rep.warnings.push(
                Warning::new(
                    WarningKind::Time,
                    format!("logger {}: times not converted: {why}", s.logger_id),
                )
                .logger(s.logger_id),
            );
        }
        let per_cpu = s.logger_mode & NO_PER_PROCESSOR_BUFFERING == 0;
        for b in &s.buffers {
            let Some(data) = ctx.dump.file_bytes(b.file_offset, b.valid as usize) else {
                continue;
            };
            let bc = BufferCtx {
                logger_id: Some(s.logger_id),
                source: "secondary_data",
                buffer: None,
                file_base: Some(b.file_offset),
                cpu: per_cpu.then_some(b.header.processor_index),
                conv: &conv,
                pointer_size,
            };
            let walk = push_rows(
                sink,
                res,
                &bc,
                data,
                (BUFFER_HEADER_SIZE, b.valid as usize, 0),
            );
            sink.check()?;
            if let Some(torn) = walk.torn {
                rep.warnings.push(
                    Warning::new(
                        WarningKind::Decode,
                        format!(
                            "logger {}: buffer at file offset {:#x}: records stop at +{:#x}: {}",
                            s.logger_id, b.file_offset, torn.offset, torn.reason
                        ),
                    )
                    .logger(s.logger_id),
                );
            }
        }
    }
    Ok(())
}

/// Logger 2's window: CPU cycles anchored at the crashing CPU's StartCycles when the newest
/// timestamp is just before it (triage-etw.md §2.4), else unknown.
/// The timestamps of a window's records.
fn window_timestamps(w: &triage::SavedWindow) -> Vec<u64> {
    let mut v = Vec::new();
    if let Some(first) = w.first_record {
        walk_from(&w.data, first, w.data.len(), |r| {
            v.extend(fields(&w.data, r).timestamp);
        });
    }
    v
}

/// The converter of a window's clock, and the inference it rests on (said in a warning).
type WindowClock = (Converter, Option<String>);

/// Logger 2's window: CPU cycles anchored at the crashing CPU's StartCycles when the newest
/// timestamp is just before it (triage-etw.md §2.4), else unknown.
fn current_buffer_clock(
    ctx: &KernelContext<'_>,
    t: &TriageEtw,
    w: &triage::SavedWindow,
    mhz: u64,
) -> WindowClock {
    let newest = window_timestamps(w).into_iter().max();
    let (Some(newest), Some(sc)) = (newest, t.crash_cpu.and_then(|c| c.start_cycles)) else {
        return (Converter::Unknown(
            "logger 2's clock type is not in the dump (no logger context) and the crashing CPU's KPRCB.StartCycles is unknown".into(),
        ), None);
    };
    if mhz == 0 {
        let why = "the CPU speed (KPRCB.MHz, EtwCPUSpeedInMHz) is unknown";
        return (Converter::Unknown(why.into()), None);
    }
    let window = mhz * 1000 * CYCLES_WINDOW_MS;
    if newest <= sc && sc - newest <= window {
        let how = format!(
            "clock inferred as CPU cycles: the newest timestamp is {} cycles before the crashing CPU's KPRCB.StartCycles {sc:#x}; times = SystemTime − (StartCycles − ts) / {mhz} MHz (approximate)",
            sc - newest
        );
        let conv = Converter::Scaled {
            start: ctx.dump.header().system_time,
            raw_start: sc,
            num: 10,
            den: mhz,
            how: how.clone(),
        };
        (conv, Some(how))
    } else {
        (Converter::Unknown(format!(
            "logger 2's clock type is not in the dump, and its newest timestamp {newest:#x} is not within {CYCLES_WINDOW_MS} ms of cycles before KPRCB.StartCycles {sc:#x}"
        )), None)
    }
}

/// The error-log tail: its blob session's clock, else FILETIME when plausible.
fn errlog_clock(
    ctx: &KernelContext<'_>,
    w: &triage::SavedWindow,
    sessions: &[BlobSession],
    perf_freq: u64,
    mhz: u64,
) -> WindowClock {
    if let Some(s) = w
        .logger_id
        .and_then(|id| sessions.iter().find(|s| s.logger_id == id))
    {
        return (blob_converter(s, perf_freq, mhz), None);
    }
    let h = ctx.dump.header();
    let (lo, hi) = (
        h.system_time
            .saturating_sub(h.system_up_time + 864_000_000_000),
        h.system_time + 600_000_000,
    );
    let ts = window_timestamps(w);
    if !ts.is_empty() && ts.iter().all(|t| (lo..=hi).contains(t)) {
        let how = "clock inferred as system time: every timestamp is a FILETIME between boot and the dump";
        (Converter::FileTime, Some(how.into()))
    } else {
        let why = "the error-log session's clock type is not in the dump";
        (Converter::Unknown(why.into()), None)
    }
}
