//! The ETW source of a dump (issue 12): one interface for the trace data of every dump kind,
//! so each command is written once against it.
//!
//! * Full and bitmap dumps: the logger contexts in memory; a unit is one recovered buffer of a
//!   selected session (valid bytes known, not compressed), with the session's clock.
//! * Triage dumps (triage-etw.md): what the kernel saved at bug check; the units are the saved
//!   windows (logger 2's current buffer, the error-log tail unless it repeats a secondary-data
//!   buffer) and every buffer of the ETW secondary data, each with the clock that can be told
//!   for it.
//!
//! Units come in one canonical order (memory: sessions in slot order, buffers as found;
//! triage: the windows, then the secondary data's sessions and buffers); the warnings met on
//! the way are kept in the same order.
//!
//! Clocks of triage units (§2.4, §4.1 step 6): a blob session's ClockType with its
//! ReferenceTime and the blob's EtwPerfFreq / EtwCPUSpeedInMHz; the error-log tail takes the
//! clock of the blob session it repeats, else FILETIME when its timestamps fall between boot
//! and the crash (inferred); logger 2's window has no logger context: its timestamps are
//! taken as CPU cycles when the newest is within 10 ms of cycles before the crashing CPU's
//! KPRCB.StartCycles (anchored to the dump's SystemTime, inferred and approximate), otherwise
//! they are not converted.

use crate::addr::VirtAddr;
use crate::decode::fields::fields;
use crate::etl::header::{BufferHeader, BUFFER_HEADER_SIZE};
use crate::etl::records::walk_from;
use crate::etw::buffers::{find_buffers, read_buffer, FoundBuffer};
use crate::etw::clock::{self, ClockFacts, Converter};
use crate::etw::loggers::{list_sessions, SessionList};
use crate::etw::mode::NO_PER_PROCESSOR_BUFFERING;
use crate::etw::triage::{self, BlobSession, TriageEtw, WindowKind};
use crate::kernel::context::KernelContext;
use crate::warning::{Warning, WarningKind};
use std::borrow::Cow;

/// Newest logger-2 timestamp accepted as CPU cycles: within this many ms before StartCycles.
const CYCLES_WINDOW_MS: u64 = 10;

/// Does a session with this id and name match a `--session` selector (an id, else a name)?
pub fn selects(id: Option<u64>, name: Option<&str>, sel: Option<&str>) -> bool {
    match sel {
        None => true,
        Some(x) => match x.parse::<u64>() {
            Ok(n) => id == Some(n),
            Err(_) => name == Some(x),
        },
    }
}

/// Where a unit's bytes are.
#[derive(Clone, Debug)]
enum UnitData {
    /// A buffer in memory.
    Memory(FoundBuffer),
    /// `TriageEtw::windows[i]`.
    Window(usize),
    /// A buffer of the ETW secondary data (its bytes are in the file).
    Blob,
}

/// One unit of trace data: a buffer in memory, a saved window or a secondary-data buffer.
#[derive(Clone, Debug)]
pub struct TraceUnit {
    pub logger_id: Option<u64>,
    /// `memory`, `current_buffer`, `errlog_tail` or `secondary_data`.
    pub origin: &'static str,
    /// The buffer's virtual address (null for the secondary data, which has none).
    pub address: Option<VirtAddr>,
    /// The file offset of the unit's first byte (triage dumps).
    pub file_offset: Option<u64>,
    /// The CPU of a per-CPU session's buffer (null when the session is not per CPU or the CPU
    /// cannot be told).
    pub cpu: Option<u64>,
    /// The processor the buffer is on as far as it says (the per-CPU route it was found on,
    /// else its ClientContext), whatever the session's mode.
    pub processor: Option<u64>,
    /// The buffer header, when the unit holds it.
    pub header: Option<BufferHeader>,
    /// Where the records start in the unit's bytes, and where its valid bytes end.
    pub first_record: usize,
    pub valid: usize,
    /// Offset in the buffer of the unit's first byte (a window that starts inside a buffer).
    pub shift: usize,
    converter: usize,
    data: UnitData,
}

/// The ETW source of one dump.
pub struct EtwSource<'c, 'd> {
    ctx: &'c KernelContext<'d>,
    /// Memory: the sessions and clock facts; triage: what was saved.
    memory: Option<(SessionList, ClockFacts)>,
    triage: Option<TriageEtw>,
    converters: Vec<Converter>,
    units: Vec<TraceUnit>,
    warnings: Vec<Warning>,
}

impl<'c, 'd> EtwSource<'c, 'd> {
    /// Open the source of `ctx`'s dump, with the units of the sessions `sel` selects (by
    /// logger id or name; all when None).
    pub fn open(ctx: &'c KernelContext<'d>, sel: Option<&str>) -> EtwSource<'c, 'd> {
        let mut src = EtwSource {
            ctx,
            memory: None,
            triage: None,
            converters: Vec::new(),
            units: Vec::new(),
            warnings: Vec::new(),
        };
        if ctx.dump.triage().is_some() {
            src.open_triage(sel);
        } else {
            src.open_memory(sel);
        }
        src
    }

    /// The units, in canonical order.
    pub fn units(&self) -> &[TraceUnit] {
        &self.units
    }

    /// Warnings met while finding the units.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The clock converter of a unit.
    pub fn converter(&self, u: &TraceUnit) -> &Converter {
        &self.converters[u.converter]
    }

    /// Which converter a unit uses (units with the same index share a clock).
    pub fn converter_index(&self, u: &TraceUnit) -> usize {
        u.converter
    }

    /// Memory dumps: the session list and the clock facts the units were found with.
    pub fn memory(&self) -> Option<(&SessionList, &ClockFacts)> {
        self.memory.as_ref().map(|(l, f)| (l, f))
    }

    /// The unit's bytes (None when they cannot be read any more).
    pub fn bytes(&self, u: &TraceUnit) -> Option<Cow<'c, [u8]>> {
        match &u.data {
            UnitData::Memory(b) => read_buffer(self.ctx, b).ok().map(Cow::Owned),
            UnitData::Window(i) => {
                let w = self.triage.as_ref()?.windows.get(*i)?;
                Some(Cow::Owned(w.data.clone()))
            }
            UnitData::Blob => self
                .ctx
                .dump
                .file_bytes(u.file_offset?, u.valid)
                .map(Cow::Borrowed),
        }
    }

    /// Keep a session's clock (saying when it cannot convert); returns its index.
    fn add_session_clock(&mut self, logger_id: u64, conv: Converter) -> usize {
        if let Some(why) = conv.problem() {
            self.warnings.push(
                Warning::new(
                    WarningKind::Time,
                    format!("logger {logger_id}: times not converted: {why}"),
                )
                .logger(logger_id),
            );
        }
        self.converters.push(conv);
        self.converters.len() - 1
    }

    fn open_memory(&mut self, sel: Option<&str>) {
        let ctx = self.ctx;
        let list = list_sessions(ctx);
        let facts = ClockFacts::gather(ctx, &list.sessions);
        match list.array.as_ref() {
            None => self.warnings.push(Warning::new(
                WarningKind::NotFound,
                "no logger array found: no buffers to list",
            )),
            Some(array) => {
                for s in list
                    .sessions
                    .iter()
                    .filter(|s| selects(Some(s.logger_id), s.name.as_deref(), sel))
                {
                    let converter =
                        self.add_session_clock(s.logger_id, clock::for_session(ctx, &facts, s));
                    let per_cpu = s.logger_mode.unwrap_or(0) & NO_PER_PROCESSOR_BUFFERING == 0;
                    let found = find_buffers(ctx, array, s);
                    self.warnings
                        .extend(found.warnings.into_iter().map(|w| w.in_logger(s.logger_id)));
                    for b in found.buffers {
                        let (Some(valid), false) = (b.header.valid_bytes(), b.header.compressed())
                        else {
                            continue;
                        };
                        self.units.push(TraceUnit {
                            logger_id: Some(s.logger_id),
                            origin: "memory",
                            address: Some(b.address),
                            file_offset: None,
                            cpu: per_cpu.then(|| b.cpu.unwrap_or(b.header.processor_index)),
                            processor: b.cpu.or(Some(b.header.processor_index)),
                            header: Some(b.header),
                            first_record: BUFFER_HEADER_SIZE,
                            valid: valid as usize,
                            shift: 0,
                            converter,
                            data: UnitData::Memory(b),
                        });
                    }
                }
            }
        }
        self.memory = Some((list, facts));
    }

    fn open_triage(&mut self, sel: Option<&str>) {
        let ctx = self.ctx;
        let t = triage::read(ctx);
        self.warnings.extend(t.warnings.iter().cloned());
        let blob_h = t.blob.as_ref().and_then(|b| b.header);
        let perf_freq = blob_h.map_or(0, |b| b.perf_freq);
        let mhz = t
            .crash_cpu
            .and_then(|c| c.mhz)
            .filter(|&m| m > 0)
            .or(blob_h.map(|b| u64::from(b.cpu_speed_mhz)))
            .unwrap_or(0);
        let blob_sessions: &[BlobSession] = t.blob.as_ref().map_or(&[], |b| &b.sessions);
        for (i, w) in t.windows.iter().enumerate() {
            let name = w
                .logger_id
                .and_then(|id| blob_sessions.iter().find(|s| s.logger_id == id))
                .map(|s| s.name.as_str());
            if !selects(w.logger_id, name, sel) {
                continue;
            }
            if let Some(d) = w.duplicate_of {
                let s = &blob_sessions[d.session];
                self.warnings.push(Warning::new(WarningKind::Inferred, format!(
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
                self.warnings.push(Warning::new(
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
                self.warnings.push(Warning::new(WarningKind::Decode, format!(
                    "{}: the window starts {:#x} bytes inside a record (the tail of a record cut by the kernel's {:#x}-byte limit); skipped",
                    w.kind.source(),
                    w.partial_bytes,
                    w.kind.limit()
                )));
            }
            let (conv, inferred) = match w.kind {
                WindowKind::CurrentBuffer => current_buffer_clock(ctx, &t, w, mhz),
                WindowKind::ErrlogTail => errlog_clock(ctx, w, blob_sessions, perf_freq, mhz),
            };
            if let Some(why) = conv.problem() {
                self.warnings.push(Warning::new(
                    WarningKind::Time,
                    format!("{}: times not converted: {why}", w.kind.source()),
                ));
            }
            if let Some(how) = inferred {
                self.warnings.push(Warning::new(
                    WarningKind::Inferred,
                    format!("{}: {how}", w.kind.source()),
                ));
            }
            self.converters.push(conv);
            let cpu = match w.kind {
                WindowKind::CurrentBuffer => w.processor.or(t.crash_cpu.and_then(|c| c.number)),
                WindowKind::ErrlogTail => None,
            };
            self.units.push(TraceUnit {
                logger_id: w.logger_id,
                origin: w.kind.source(),
                address: Some(w.base),
                file_offset: w.file_offset,
                cpu,
                processor: cpu,
                header: w.header,
                first_record: first,
                valid: w.data.len(),
                // Offsets in rows are buffer offsets: window offset + (start − base).
                shift: (w.start.get() - w.base.get()) as usize,
                converter: self.converters.len() - 1,
                data: UnitData::Window(i),
            });
        }
        for s in blob_sessions {
            if !selects(Some(s.logger_id), Some(&s.name), sel) {
                continue;
            }
            let converter = self.add_session_clock(s.logger_id, blob_converter(s, perf_freq, mhz));
            let per_cpu = s.logger_mode & NO_PER_PROCESSOR_BUFFERING == 0;
            for b in &s.buffers {
                if ctx
                    .dump
                    .file_bytes(b.file_offset, b.valid as usize)
                    .is_none()
                {
                    continue;
                }
                self.units.push(TraceUnit {
                    logger_id: Some(s.logger_id),
                    origin: "secondary_data",
                    address: None,
                    file_offset: Some(b.file_offset),
                    cpu: per_cpu.then_some(b.header.processor_index),
                    processor: Some(b.header.processor_index),
                    header: Some(b.header),
                    first_record: BUFFER_HEADER_SIZE,
                    valid: b.valid as usize,
                    shift: 0,
                    converter,
                    data: UnitData::Blob,
                });
            }
        }
        self.triage = Some(t);
    }
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
