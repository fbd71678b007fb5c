//! `etwdump events`: one row per record of every unit of the dump's ETW source
//! ([`crate::etw::source`]: the buffers in memory of full and bitmap dumps, source `memory`;
//! the saved windows `current_buffer` / `errlog_tail` and the secondary data `secondary_data`
//! of triage dumps), each with its unit's clock; written once for every dump kind.
//!
//! PERFINFO interrupt and DPC records carry a routine address (PERFINFO_INTERRUPT_INFORMATION /
//! PERFINFO_DPC_INFORMATION: InitialTime, then the routine); it is resolved to `module+offset`
//! through the loaded-module list (the triage driver list in minidumps) and, inside the kernel,
//! to the nearest preceding kernel symbol when symbols are loaded.

use crate::decode::fields::{fields, kind_name};
use crate::decode::hooks::{has_routine, hook_name};
use crate::etl::logfile::LogfileInfo;
use crate::etl::records::{walk_from, Record};
use crate::etw::clock::{ClockFacts, Converter, TimeFlags};
use crate::etw::source::EtwSource;
use crate::kernel::context::KernelContext;
use crate::time::filetime_to_iso8601;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::collections::BTreeMap;

/// One record.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct EventRow {
    pub logger_id: Option<u64>,
    /// `memory`, `current_buffer`, `errlog_tail`, `secondary_data`, or `etl_file` (a
    /// record of an .etl file, `etwdump etl --events`).
    pub source: &'static str,
    /// The buffer's virtual address (null for the secondary data, which has none); for an
    /// .etl file, the buffer's file offset.
    pub buffer: Option<String>,
    /// Offset of the record in its buffer.
    pub offset: usize,
    /// File offset of the record (triage dumps and .etl files).
    pub file_offset: Option<u64>,
    pub header_type: &'static str,
    /// Kernel hook id ("0x0f44"); null for EVENT_HEADER and other hook-less records.
    pub hook: Option<String>,
    pub hook_name: Option<&'static str>,
    pub provider: Option<String>,
    /// The provider's name, from the table `providers` uses (EVENT_HEADER records whose
    /// provider GUID it knows; null otherwise: never guessed).
    pub provider_name: Option<&'static str>,
    pub event_id: Option<u16>,
    pub version: Option<u16>,
    /// Raw timestamp in the session's clock (`raw_timestamp` in JSON and CSV).
    #[serde(rename = "raw_timestamp")]
    pub timestamp: Option<u64>,
    /// ISO-8601 UTC; null when the clock cannot be converted (a warning says why).
    pub time: Option<String>,
    #[serde(skip)]
    pub filetime: Option<u64>,
    /// "after_dump" or "before_boot" when the converted time cannot be right (as for
    /// `cswitch`: a warning per logger gives the count, an example and the conversion used).
    /// A carved buffer's last record can run into a page that now holds other data; its
    /// header's timestamp is then flagged this way.
    pub time_flag: Option<&'static str>,
    pub cpu: Option<u64>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub size: usize,
    /// Interrupt/DPC routine address and its resolution.
    pub routine: Option<String>,
    pub routine_symbol: Option<String>,
    /// MESSAGE (TRACE_MESSAGE / WPP) records: the option flags ("0x00aa"), the sequence
    /// number and the component id where the flags carry them. For these records `provider`
    /// is the message GUID and `event_id` the MessageNumber; the payload is not decoded (its
    /// format is in the provider's TMF data, which no dump holds).
    pub message_flags: Option<String>,
    pub sequence: Option<u32>,
    pub component_id: Option<u32>,
    /// The decoded payload (`decode::dispatch`): a kernel event whose MOF class and version
    /// have an established layout, or a TraceLogging event decoded from its own metadata; its
    /// class (and event and provider names), fields in wire order, and what did not fit; null
    /// when no decoder knows the record.
    pub payload: Option<crate::decode::payload::Payload>,
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
    modules: Vec<(u64, u64, crate::text::Untrusted)>,
    kernel_base: Option<u64>,
    /// (RVA, name), sorted.
    kernel_symbols: Vec<(u64, String)>,
}

impl Resolver {
    /// No modules and no symbols (an .etl file): routines are shown, not resolved.
    fn none() -> Resolver {
        Resolver {
            modules: Vec::new(),
            kernel_base: None,
            kernel_symbols: Vec::new(),
        }
    }

    fn new(ctx: &KernelContext<'_>) -> Resolver {
        let mut modules = ctx.loaded_modules();
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
        let text = module.map(|m| format!("{}+{:#x}", m.2.raw(), va - m.0));
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
    /// The dump's time range converted times are checked against (none for .etl files).
    facts: Option<&'a ClockFacts>,
}

/// Converted times of one logger, and those that cannot be right.
#[derive(Default)]
struct Flagged {
    rows: u64,
    flags: TimeFlags,
    how: Option<String>,
}

/// Where rows go as they are made: a callback, and its first error (after one, rows are
/// dropped and the error is returned when the current buffer is done).
struct Sink<'e> {
    emit: &'e mut dyn FnMut(EventRow) -> std::io::Result<()>,
    err: Option<std::io::Error>,
}

impl Sink<'_> {
    fn push(&mut self, r: EventRow) {
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
    flagged: &mut Flagged,
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
                    routine = Some(crate::addr::hex_string(v, 1));
                    routine_symbol = s.or(m);
                }
            }
        }
        let filetime = f.timestamp.and_then(|t| bc.conv.to_filetime(t));
        flagged.rows += u64::from(filetime.is_some());
        let time_flag = filetime.zip(bc.facts).and_then(|(ft, facts)| {
            flagged.flags.check(facts, ft, bc.conv, |why| {
                format!(
                    "{} +{:#x}: {why}",
                    bc.buffer.as_deref().unwrap_or("buffer"),
                    r.offset + shift
                )
            })
        });
        out.push(EventRow {
            logger_id: bc.logger_id,
            source: bc.source,
            buffer: bc.buffer.clone(),
            offset: r.offset + shift,
            file_offset: bc.file_base.map(|b| b + r.offset as u64),
            header_type: kind_name(r.kind),
            hook: r.hook.map(|h| crate::addr::hex_string(u64::from(h), 4)),
            hook_name: r.hook.and_then(hook_name),
            provider: f.provider,
            provider_name: f
                .provider_id
                .as_ref()
                .and_then(crate::etw::provider_names::provider_name),
            event_id: f.event_id,
            version: f.version,
            timestamp: f.timestamp,
            time: filetime.map(filetime_to_iso8601),
            filetime,
            time_flag,
            cpu: bc.cpu,
            pid: f.pid,
            tid: f.tid,
            size: r.size,
            routine,
            routine_symbol,
            message_flags: f
                .message_flags
                .map(|x| crate::addr::hex_string(u64::from(x), 4)),
            sequence: f.sequence,
            component_id: f.component_id,
            payload: crate::decode::dispatch::decode(buf, r),
        });
    })
}

/// Every record of `ctx`'s buffers (sessions selected by id or name), collected.
pub fn collect(ctx: &KernelContext<'_>, session: Option<&str>) -> EventsReport {
    let mut rows = Vec::new();
    let warnings = stream(ctx, session, &mut |r| {
        rows.push(r);
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
    emit: &mut dyn FnMut(EventRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    stream_from(ctx, EtwSource::open(ctx, session), emit)
}

/// [`stream`] over the units of `src` (e.g. [`EtwSource::open_carved`]: the buffers that
/// nothing leads to any more).
pub fn stream_from(
    ctx: &KernelContext<'_>,
    src: EtwSource<'_, '_>,
    emit: &mut dyn FnMut(EventRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    let mut sink = Sink { emit, err: None };
    let res = Resolver::new(ctx);
    let pointer_size = ctx.space.arch().pointer_size() as usize;
    let mut warnings = src.warnings().to_vec();
    let sessions: &[crate::etw::loggers::Session] = src.memory().map_or(&[], |l| &l.sessions);
    let facts = src
        .clock_facts()
        .cloned()
        .unwrap_or_else(|| ClockFacts::gather(ctx, sessions));
    // Per (logger, origin): the converted times that cannot be right.
    let mut flagged: BTreeMap<(Option<u64>, &'static str), Flagged> = BTreeMap::new();
    for u in src.units() {
        let Some(data) = src.bytes(u) else {
            continue;
        };
        let conv = src.converter(u);
        let bc = BufferCtx {
            logger_id: u.logger_id,
            source: u.origin,
            buffer: u.address.map(|a| a.to_string()),
            file_base: u.file_offset,
            cpu: u.cpu,
            conv,
            pointer_size,
            facts: Some(&facts),
        };
        let fl = flagged.entry((u.logger_id, u.origin)).or_default();
        fl.how.get_or_insert_with(|| {
            conv.how()
                .unwrap_or("FILETIME timestamps (system-time clock)")
                .to_string()
        });
        let walk = push_rows(
            &mut sink,
            &res,
            &bc,
            fl,
            &data,
            (u.first_record, u.valid, u.shift),
        );
        sink.check()?;
        if let (Some(torn), "secondary_data", Some(id), Some(off)) =
            (walk.torn, u.origin, u.logger_id, u.file_offset)
        {
            warnings.push(
                Warning::new(
                    WarningKind::Decode,
                    format!(
                        "logger {id}: buffer at file offset {off:#x}: records stop at +{:#x}: {}",
                        torn.offset, torn.reason
                    ),
                )
                .logger(id),
            );
        }
    }
    for ((logger, origin), f) in flagged {
        if f.flags.any() {
            let whose = match logger {
                Some(id) => format!("logger {id} ({origin})"),
                None => format!("records ({origin})"),
            };
            let mut w = Warning::new(
                WarningKind::Time,
                format!(
                    "{whose}: {} of {} record times fall after the dump's SystemTime and {} before boot (e.g. {}); converted with {}: the clock facts or the anchor do not fit these timestamps, or the records run into memory that no longer holds this buffer",
                    f.flags.after,
                    f.rows,
                    f.flags.before,
                    f.flags.example.unwrap_or_default(),
                    f.how.unwrap_or_default()
                ),
            );
            w.logger_id = logger;
            warnings.push(w);
        }
    }
    Ok(warnings)
}

/// The converter of an .etl file's timestamps, from its TRACE_LOGFILE_HEADER, as its readers
/// date them (Microsoft's WNODE_HEADER rule, which dissect.etl follows): system time
/// (ReservedFlags 2, and 0 in a pre-6.0 file) is already a FILETIME; QPC (1) and CPU cycles (3)
/// are `StartTime + (TimeStamp − the header event's TimeStamp) × scale`, the scale 10⁷ /
/// PerfFreq or 10 / CpuSpeedInMHz. Where the header lacks a fact the conversion needs, no
/// time is given and the converter says why (the raw clock 0 cannot be converted at all).
pub fn etl_converter(h: &LogfileInfo) -> Converter {
    let clock = match h.clock_type {
        0 if (1..6).contains(&h.os_major) => 2,
        c => c,
    };
    let (num, den, rate) = match clock {
        2 => return Converter::FileTime,
        0 => {
            return Converter::Unknown(
                "the header's ReservedFlags is 0, the raw clock (EVENT_TRACE_CLOCK_RAW): its timestamps cannot be converted".into(),
            )
        }
        1 => (10_000_000, h.perf_freq, format!("PerfFreq {} Hz", h.perf_freq)),
        3 => (
            10,
            u64::from(h.cpu_speed_mhz),
            format!("CpuSpeedInMHz {}", h.cpu_speed_mhz),
        ),
        c => {
            return Converter::Unknown(format!(
                "the header's ReservedFlags {c} is no known clock type"
            ))
        }
    };
    let missing = if den == 0 {
        Some(format!(
            "its {} is 0",
            rate.split(' ').next().unwrap_or("rate")
        ))
    } else if h.start_time == 0 {
        Some("its StartTime is 0".to_string())
    } else if h.header_timestamp == 0 {
        Some("the header event's TimeStamp is 0".to_string())
    } else {
        None
    };
    if let Some(why) = missing {
        return Converter::Unknown(format!(
            "clock type {clock} ({}), but {why}: no anchor or rate to convert with",
            if clock == 1 { "QPC" } else { "CPU cycles" }
        ));
    }
    Converter::Scaled {
        start: h.start_time,
        raw_start: h.header_timestamp,
        num,
        den,
        how: format!(
            "the file's header (StartTime {} at the header event's TimeStamp {}, {rate})",
            filetime_to_iso8601(h.start_time),
            h.header_timestamp
        ),
    }
}

/// An .etl file that cannot be read as one: an error of kind `InvalidData` saying why.
fn not_an_etl(why: String) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("not an ETL file: {why}"),
    )
}

/// The clock of the .etl file whose header buffer is `buf`: its converter, pointer size and,
/// when the times cannot be converted, the warning that says why.
pub(crate) fn etl_clock(
    name: &str,
    buf: &[u8],
) -> std::io::Result<(Converter, usize, Option<Warning>)> {
    let f = crate::etl::reader::read(buf);
    if let Some(why) = crate::etl::reader::not_an_etl(buf, &f) {
        return Err(not_an_etl(why));
    }
    let (conv, pointer_size) = match crate::etl::logfile::parse(buf) {
        Ok(h) => (etl_converter(&h), h.pointer_size as usize),
        Err(why) => (Converter::Unknown(why), 8),
    };
    let warning = conv.problem().map(|why| {
        Warning::new(
            WarningKind::Time,
            format!("{name}: record times are not converted: {why}"),
        )
    });
    Ok((conv, pointer_size, warning))
}

/// Stream one row per record of the .etl file read from `file` (`len` bytes; `name` as given,
/// in warnings): buffers in file order, records in buffer order, source `etl_file`, times from
/// the file's own header ([`etl_converter`]). One buffer in memory at a time, each at most
/// what is left of the file; a buffer that does not fit ends the walk with a warning, as for
/// `etl`. An error of kind `InvalidData` when the file is not an .etl file at all.
pub fn stream_etl(
    name: &str,
    file: &mut dyn std::io::Read,
    len: u64,
    emit: &mut dyn FnMut(EventRow) -> std::io::Result<()>,
) -> std::io::Result<Vec<Warning>> {
    use crate::etl::header::{BufferHeader, BUFFER_HEADER_SIZE, FLAG_PROCESSOR_INDEX};
    let mut sink = Sink { emit, err: None };
    let res = Resolver::none();
    let mut warnings = Vec::new();
    let mut clock: Option<(Converter, usize)> = None;
    let mut flagged = Flagged::default();
    let mut buf = Vec::new();
    let mut off = 0u64;
    if len == 0 {
        return Err(not_an_etl("the file is empty".into()));
    }
    while off < len {
        if let Err(why) = crate::etl::reader::read_buffer(file, off, len, &mut buf)? {
            if off == 0 {
                return Err(not_an_etl(why));
            }
            warnings.push(Warning::new(
                WarningKind::Bound,
                format!("{name}: records stop: {why}"),
            ));
            break;
        }
        let size = buf.len() as u64;
        if clock.is_none() {
            let (conv, pointer_size, w) = etl_clock(name, &buf)?;
            warnings.extend(w);
            clock = Some((conv, pointer_size));
        }
        let Some((conv, pointer_size)) = clock.as_ref() else {
            break;
        };
        let h = BufferHeader::from_bytes(&buf);
        let saved = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
        let bc = BufferCtx {
            logger_id: h.map(|h| h.logger_id),
            source: "etl_file",
            buffer: Some(format!("{off:#x}")),
            file_base: Some(off),
            cpu: h.map(|h| {
                if h.buffer_flag & u64::from(FLAG_PROCESSOR_INDEX) != 0 {
                    h.processor_index
                } else {
                    h.processor_index & 0xFF
                }
            }),
            conv,
            pointer_size: *pointer_size,
            facts: None,
        };
        let valid = saved.min(buf.len());
        let walk = push_rows(
            &mut sink,
            &res,
            &bc,
            &mut flagged,
            &buf,
            (BUFFER_HEADER_SIZE, valid, 0),
        );
        sink.check()?;
        if let Some(torn) = walk.torn {
            warnings.push(Warning::new(
                WarningKind::Decode,
                format!(
                    "{name}: buffer at file offset {off:#x}: records stop at +{:#x}: {}",
                    torn.offset, torn.reason
                ),
            ));
        }
        off += size;
    }
    Ok(warnings)
}
