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
use crate::bytes::LeBytes;
use crate::decode::fields::fields;
use crate::etl::header::{BufferHeader, BUFFER_HEADER_SIZE};
use crate::etl::records::{walk_from, Walk};
use crate::etl::writer::{self, saved_buffer, synthetic_buffer, SyntheticHeader};
use crate::etw::buffers::{find_buffers, read_buffer, space_of, BufferList, FoundBuffer};
use crate::etw::carved::{buffer_bytes, CarvedBuffer};
use crate::etw::ccswap::{find_pending, infer_clocks, PendingList};
use crate::etw::clock::{self, ClockFacts, Converter};
use crate::etw::loggers::{list_sessions, plausible_buffer_size, Session, SessionList};
use crate::etw::mode::{clock_type_name, logger_mode_flags, NO_PER_PROCESSOR_BUFFERING};
/// How a triage window was found (symbols or its data blocks), for the rows that describe it.
pub use crate::etw::triage::WindowEvidence;
use crate::etw::triage::{self, BlobSession, TriageEtw, WindowKind};
use crate::kernel::context::KernelContext;
use crate::mem::MemError;
use crate::time::filetime_to_iso8601;
use crate::warning::{Warning, WarningKind};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use thiserror::Error;

/// Newest logger-2 timestamp accepted as CPU cycles: within this many ms before StartCycles.
const CYCLES_WINDOW_MS: u64 = 10;
/// Newest logger-2 timestamp accepted as QPC: converted, within this many ms of the dump's
/// SystemTime.
const QPC_WINDOW_MS: u64 = 1000;

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

/// What a minidump cannot tell, said once with every command on a triage dump.
pub(crate) const TRIAGE_UNKNOWABLE: &str = "a minidump holds no logger contexts: sessions that were not started with EVENT_TRACE_ADDTO_TRIAGE_DUMP (0x80000000) and whose buffers the kernel did not save at bug check cannot be known from it; nor can the buffer counts, events lost or log files of any session";

/// Where a unit's bytes are.
#[derive(Clone, Debug)]
enum UnitData {
    /// A buffer in memory.
    Memory(Box<FoundBuffer>),
    /// `TriageEtw::windows[i]`.
    Window(usize),
    /// A buffer of the ETW secondary data, `offset` bytes into the blob's data.
    Blob { offset: u64 },
    /// A buffer found by the pass over physical memory that nothing leads to.
    Carved(Box<CarvedBuffer>),
}

/// Why a buffer or window the source found gives no records. Such units are listed by
/// [`EtwSource::all_units`] (so `buffers` shows them and `extract` says why they are not in
/// the file) and left out of [`EtwSource::units`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// A compressed buffer (not decompressed).
    Compressed,
    /// Neither CurrentOffset nor SavedOffset is a valid end for the buffer's size.
    NoValidEnd {
        current_offset: u64,
        saved_offset: u64,
        buffer_size: u64,
    },
    /// A saved window that repeats the last bytes of a secondary-data buffer (its records
    /// are taken from there, once).
    Duplicate { logger_id: u64, buffer: usize },
    /// A saved window in which no complete record chain was found.
    NoRecordChain,
    /// A secondary-data buffer whose bytes are not in the file.
    NotInFile,
    /// A real-time consumer's buffer whose bytes are those of the session's kernel buffer at
    /// this address (its records are taken once, from there).
    CopyOf { address: VirtAddr },
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::Compressed => write!(f, "compressed buffer (not decompressed)"),
            Skip::NoValidEnd {
                current_offset,
                saved_offset,
                buffer_size,
            } => write!(
                f,
                "no valid end: neither CurrentOffset {current_offset:#x} nor SavedOffset {saved_offset:#x} is a valid end for BufferSize {buffer_size:#x}"
            ),
            Skip::Duplicate { logger_id, buffer } => write!(
                f,
                "repeats logger {logger_id} buffer {buffer} of the secondary data"
            ),
            Skip::NoRecordChain => write!(f, "no complete record chain"),
            Skip::NotInFile => write!(f, "its bytes are not in the file"),
            Skip::CopyOf { address } => write!(
                f,
                "a consumer's copy of the kernel buffer at {address} (same SequenceNumber and bytes)"
            ),
        }
    }
}

/// Why a value of an .etl file header is not known (its default is used).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
enum NoHeaderFact {
    #[error("no ETW secondary data")]
    NoSecondaryData,
    #[error("no ETW secondary data and no KPRCB.MHz")]
    NoCpuSpeed,
    #[error("clock facts not gathered")]
    NotGathered,
    #[error("KeMaximumIncrement not available")]
    NoMaximumIncrement,
    #[error("{0}")]
    Rate(clock::RateError),
}

/// Why a unit's bytes cannot be read, or the unit cannot be a buffer of an .etl file.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub(crate) enum UnitError {
    #[error("{0}")]
    Memory(MemError),
    #[error("window not found")]
    NoWindow,
    #[error("its bytes are not in the file")]
    NotInFile,
    #[error("its first page is no longer readable")]
    FirstPageGone,
    /// The unit is skipped for this reason.
    #[error("{0}")]
    Skipped(Skip),
    #[error("BufferSize {buffer:#x} differs from the file's {file:#x}")]
    OtherSize { buffer: u64, file: usize },
    #[error("buffer data: {0}")]
    BufferData(MemError),
    #[error("does not fit the file's {0:#x}-byte buffers")]
    WindowTooLarge(usize),
    #[error("valid length exceeds the file's BufferSize {0:#x}")]
    TooLong(usize),
    #[error("no complete record")]
    NoRecord,
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
    /// The lists and routes a memory buffer was found on (empty for triage units).
    pub lists: Vec<BufferList>,
    /// Where the records start in the unit's bytes, and where its valid bytes end (the
    /// unit's length for a window).
    pub first_record: usize,
    pub valid: usize,
    /// The buffer's own valid length (a window: at bug check, beyond what was saved); None
    /// when its header gives no valid end.
    pub buffer_valid: Option<u64>,
    /// Offset in the buffer of the unit's first byte (a window that starts inside a buffer).
    pub shift: usize,
    /// Bytes at a window's start that are the tail of a record cut by the kernel's limit.
    pub partial_bytes: usize,
    /// Why the unit gives no records (None: it does).
    pub skip: Option<Skip>,
    /// The real-time consumer whose address space holds the buffer (None: kernel memory or
    /// a triage unit), and how the buffer was found there.
    pub owner: Option<crate::etw::realtime::BufferOwner>,
    pub via: Option<crate::etw::realtime::FoundVia>,
    /// A triage window: how it was found (symbols or the data blocks) and where its base and
    /// end pointers were read.
    pub window: Option<triage::WindowEvidence>,
    converter: usize,
    data: UnitData,
}

/// A session as the source knows it: from its logger context (memory dumps), or from what
/// the kernel saved at bug check (triage dumps).
#[derive(Clone, Debug)]
pub struct SourceSession {
    /// Null for an error-log tail whose logger cannot be told (no IopErrorLogSession in the
    /// dump and no secondary-data buffer it repeats).
    pub logger_id: Option<u64>,
    /// Where it is known from: `logger_context`, `secondary_data`, `current_buffer` or
    /// `errlog_tail`.
    pub source: &'static str,
    /// What is known of its logger context: all of it for a memory dump; for a triage dump
    /// what was saved (name, mode, clock type, BufferSize, start time; a window: the
    /// BufferSize of its buffer header), the rest unknown. None when the logger is unknown.
    pub context: Option<Session>,
    /// Buffers or windows found for it (skipped ones included).
    pub units: usize,
}

impl SourceSession {
    pub fn name(&self) -> Option<&crate::text::Untrusted> {
        self.context.as_ref().and_then(|c| c.name.as_ref())
    }

    /// Does a `--session` selector (an id, else a name) choose it?
    pub fn selected(&self, sel: Option<&str>) -> bool {
        selects(self.logger_id, self.name().map(|n| n.raw()), sel)
    }
}

/// Clock and machine facts for an .etl file header (TRACE_LOGFILE_HEADER), with where each
/// came from (the manifest's `header_sources`).
pub(crate) struct HeaderFacts {
    pub perf_freq: u64,
    pub cpu_mhz: u32,
    pub timer_resolution: u32,
    pub sources: BTreeMap<&'static str, String>,
}

/// What to work out when opening a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// Units with their clocks (`events`, `cswitch`, `extract`).
    Clocks,
    /// Units without clocks (`buffers`): no clock facts gathered, no time warnings.
    Units,
    /// The sessions only (`sessions`, selector checks).
    Sessions,
}

/// The ETW source of one dump.
pub struct EtwSource<'c, 'd> {
    ctx: &'c KernelContext<'d>,
    /// Memory: the sessions and clock facts; triage: what was saved.
    memory: Option<(SessionList, Option<ClockFacts>)>,
    triage: Option<TriageEtw>,
    sessions: Vec<SourceSession>,
    converters: Vec<Converter>,
    units: Vec<TraceUnit>,
    warnings: Vec<Warning>,
    /// The whole dump being read ahead from a cold disk while the source lives (when the
    /// selected sessions' buffers are a large share of it: [`WHOLE_FILE_SHARE`]).
    read_ahead: Option<crate::dump::FileStream>,
}

/// The dump file is read whole, in file order, from a cold disk when the buffers the
/// selected sessions declare (NumberOfBuffers x BufferSize) are at least 1/`WHOLE_FILE_SHARE`
/// of it: their pages lie all over the file and are found one list entry at a time, so
/// reading up to four times their bytes sequentially costs less than reading them where they
/// lie (docs/performance.md "Limits": `extract` from a cold disk).
const WHOLE_FILE_SHARE: u64 = 4;

impl<'c, 'd> EtwSource<'c, 'd> {
    /// Open the source of `ctx`'s dump, with the units of the sessions `sel` selects (by
    /// logger id or name; all when None) and their clocks.
    pub fn open(ctx: &'c KernelContext<'d>, sel: Option<&str>) -> EtwSource<'c, 'd> {
        Self::open_for(ctx, sel, Need::Clocks)
    }

    /// As [`open`](Self::open) without the clocks (every unit's converter says so): for
    /// listings of buffers, which show no times.
    pub fn open_units(ctx: &'c KernelContext<'d>, sel: Option<&str>) -> EtwSource<'c, 'd> {
        Self::open_for(ctx, sel, Need::Units)
    }

    /// The sessions only, no units, with `warnings` instead of those met: the start of the
    /// carved buffers' source ([`EtwSource::open_carved`], `etw::carve`).
    pub(super) fn sessions_with(
        ctx: &'c KernelContext<'d>,
        warnings: Vec<Warning>,
    ) -> EtwSource<'c, 'd> {
        let mut src = Self::open_for(ctx, None, Need::Sessions);
        src.units.clear();
        src.warnings = warnings;
        src
    }

    /// Add a warning (in order, after those already met).
    pub(super) fn warn(&mut self, w: Warning) {
        self.warnings.push(w);
    }

    /// Add a carved buffer as a unit of origin `carved`, with the clock `converter` (an index
    /// from [`add_session_clock`](Self::add_session_clock)).
    pub(super) fn push_carved(&mut self, b: &CarvedBuffer, converter: usize) {
        self.units.push(TraceUnit {
            logger_id: Some(b.logger_id),
            origin: "carved",
            address: b.virtual_address,
            file_offset: None,
            cpu: Some(b.processor),
            processor: Some(b.processor),
            header: None,
            lists: Vec::new(),
            first_record: BUFFER_HEADER_SIZE,
            valid: b.recovered_bytes as usize,
            buffer_valid: Some(b.valid_bytes),
            shift: 0,
            partial_bytes: 0,
            skip: None,
            owner: None,
            via: None,
            window: None,
            converter,
            data: UnitData::Carved(Box::new(b.clone())),
        });
    }

    /// The sessions only (no units): for `sessions` and `--session` checks.
    pub fn open_sessions(ctx: &'c KernelContext<'d>) -> EtwSource<'c, 'd> {
        Self::open_for(ctx, None, Need::Sessions)
    }

    fn open_for(ctx: &'c KernelContext<'d>, sel: Option<&str>, need: Need) -> EtwSource<'c, 'd> {
        let mut src = EtwSource {
            ctx,
            memory: None,
            triage: None,
            sessions: Vec::new(),
            converters: Vec::new(),
            units: Vec::new(),
            warnings: Vec::new(),
            read_ahead: None,
        };
        if ctx.dump.triage().is_some() {
            src.open_triage(sel, need);
        } else {
            src.open_memory(sel, need);
        }
        src
    }

    /// What this dump kind cannot tell about the sessions (a triage dump: everything that was
    /// not saved at bug check), said once by the commands that list sessions or write them.
    pub(crate) fn unknowable(&self) -> Option<&'static str> {
        self.triage.as_ref().map(|_| TRIAGE_UNKNOWABLE)
    }

    /// The sessions known, in canonical order (memory: slot order; triage: the secondary
    /// data's, then those known only from a saved window).
    pub fn sessions(&self) -> &[SourceSession] {
        &self.sessions
    }

    /// The units that give records, in canonical order.
    pub fn units(&self) -> impl Iterator<Item = &TraceUnit> {
        self.units.iter().filter(|u| u.skip.is_none())
    }

    /// Every buffer and window found, in canonical order, those that give no records
    /// included (with their [`Skip`] reason).
    pub fn all_units(&self) -> &[TraceUnit] {
        &self.units
    }

    /// Warnings met while finding the sessions and units.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The clock converter of a unit.
    pub fn converter(&self, u: &TraceUnit) -> &Converter {
        &self.converters[u.converter]
    }

    /// Which converter a unit uses (units with the same index share a clock).
    pub(crate) fn converter_index(&self, u: &TraceUnit) -> usize {
        u.converter
    }

    /// Memory dumps: the session list read from the logger array.
    pub fn memory(&self) -> Option<&SessionList> {
        self.memory.as_ref().map(|(l, _)| l)
    }

    /// Memory dumps opened with clocks: the clock facts gathered.
    pub(crate) fn clock_facts(&self) -> Option<&ClockFacts> {
        self.memory.as_ref().and_then(|(_, f)| f.as_ref())
    }

    /// The pending (never flushed) compact context-switch batches, with their clock types
    /// found or inferred (etw-internals.md §4): memory dumps opened with clocks; None for a
    /// triage dump (it saves no KPRCB.EtwSupport) or a source opened without clocks.
    pub fn pending(&self) -> Option<PendingList> {
        let (list, facts) = self.memory.as_ref()?;
        let facts = facts.as_ref()?;
        let mut p = find_pending(self.ctx);
        infer_clocks(self.ctx, facts, &list.sessions, &mut p);
        Some(p)
    }

    /// What the dump says of its machine's clocks, for an .etl file header: a memory dump's
    /// clock facts (QPC frequency, CPU speed) and KeMaximumIncrement; a triage dump's ETW
    /// secondary data header (EtwPerfFreq, EtwCPUSpeedInMHz, KeMaximumIncrement), else the
    /// crashing CPU's KPRCB.MHz; documented defaults where neither is known.
    pub(crate) fn header_facts(&self) -> HeaderFacts {
        let mut sources = BTreeMap::new();
        let (perf_freq, cpu_mhz, timer): (Result<(u64, String), NoHeaderFact>, _, _) =
            if let Some(t) = &self.triage {
                let blob = t.blob.as_ref().and_then(|b| b.header);
                let freq = blob
                    .map(|b| b.perf_freq)
                    .filter(|&f| f > 0)
                    .map(|f| (f, "ETW secondary data: EtwPerfFreq".to_string()))
                    .ok_or(NoHeaderFact::NoSecondaryData);
                let mhz = match (
                    blob.map(|b| b.cpu_speed_mhz).filter(|&m| m > 0),
                    t.crash_cpu.and_then(|c| c.mhz),
                ) {
                    (Some(m), _) => Ok((m, "ETW secondary data: EtwCPUSpeedInMHz".to_string())),
                    (None, Some(m)) => Ok((m as u32, "the crashing CPU's KPRCB.MHz".to_string())),
                    (None, None) => Err(NoHeaderFact::NoCpuSpeed),
                };
                let timer = blob
                    .map(|b| b.maximum_increment)
                    .filter(|&m| m > 0)
                    .map(|v| (v, "ETW secondary data: KeMaximumIncrement".to_string()))
                    .ok_or(NoHeaderFact::NoSecondaryData);
                (freq, mhz, timer)
            } else {
                let facts = self.clock_facts();
                let freq = match facts.map(|f| &f.qpc_frequency) {
                    Some(Ok(r)) => Ok((r.value, r.source.clone())),
                    Some(Err(why)) => Err(NoHeaderFact::Rate(why.clone())),
                    None => Err(NoHeaderFact::NotGathered),
                };
                let mhz = match facts {
                    Some(f) => match &f.cpu_mhz {
                        Ok(r) => Ok((f.cpu_mhz_value(), r.source.clone())),
                        Err(why) => Err(NoHeaderFact::Rate(why.clone())),
                    },
                    None => Err(NoHeaderFact::NotGathered),
                };
                let timer = self
                    .ctx
                    .global_u32("KeMaximumIncrement")
                    .map(|v| (v, "KeMaximumIncrement".to_string()))
                    .ok_or(NoHeaderFact::NoMaximumIncrement);
                (freq, mhz, timer)
            };
        // Each value with where it came from, or its default and why.
        let mut take =
            |key: &'static str, r: Result<(u64, String), NoHeaderFact>, default: u64, how: &str| {
                match r {
                    Ok((v, from)) => {
                        sources.insert(key, from);
                        v
                    }
                    Err(why) => {
                        sources.insert(key, format!("{how} ({why})"));
                        default
                    }
                }
            };
        let widen = |r: Result<(u32, String), NoHeaderFact>| r.map(|(v, f)| (u64::from(v), f));
        let perf_freq = take("perf_freq", perf_freq, 10_000_000, "assumed 10000000");
        let cpu_mhz = take("cpu_speed_mhz", widen(cpu_mhz), 0, "unknown (0)") as u32;
        let timer_resolution =
            take("timer_resolution", widen(timer), 156_250, "assumed 156250") as u32;
        HeaderFacts {
            perf_freq,
            cpu_mhz,
            timer_resolution,
            sources,
        }
    }

    /// The unit's bytes (None when they cannot be read any more).
    pub fn bytes(&self, u: &TraceUnit) -> Option<Cow<'c, [u8]>> {
        self.try_bytes(u).ok()
    }

    /// The unit's bytes, or why they cannot be read.
    pub(crate) fn try_bytes(&self, u: &TraceUnit) -> Result<Cow<'c, [u8]>, UnitError> {
        match &u.data {
            UnitData::Memory(b) => read_buffer(self.ctx, b)
                .map(Cow::Owned)
                .map_err(UnitError::Memory),
            UnitData::Window(i) => {
                let w = self
                    .triage
                    .as_ref()
                    .and_then(|t| t.windows.get(*i))
                    .ok_or(UnitError::NoWindow)?;
                Ok(Cow::Owned(w.data.clone()))
            }
            UnitData::Blob { offset } => self
                .triage
                .as_ref()
                .and_then(|t| self.blob_data(t))
                .and_then(|d| d.bytes_at(usize::try_from(*offset).ok()?, u.valid))
                .map(Cow::Borrowed)
                .ok_or(UnitError::NotInFile),
            UnitData::Carved(b) => buffer_bytes(self.ctx, b)
                .map(|(v, _)| Cow::Owned(v))
                .ok_or(UnitError::FirstPageGone),
        }
    }

    /// Ask the OS to read a memory unit's pages ahead (a pass over many buffers overlaps their
    /// reads with the work on the previous ones); nothing while the whole file is being read
    /// (random reads would only slow that down).
    pub(crate) fn prefetch(&self, u: &TraceUnit) {
        if self.read_ahead.is_some() {
            return;
        }
        if let (UnitData::Memory(b), Some(va)) = (&u.data, u.address) {
            space_of(self.ctx, b).prefetch(va, b.header.buffer_size);
        }
    }

    /// Read the pages of every unit in memory from a cold disk in file order, ahead of a
    /// reader that takes the units in their order ([`DumpFile::stream_ahead`]: blocking, for a
    /// thread of its own, stopped by `stop`; nothing when the file is warm, when it would not
    /// pay, or when the whole file is being read already). Returns the bytes asked for.
    ///
    /// [`DumpFile::stream_ahead`]: crate::dump::DumpFile
    pub(crate) fn stream_ahead(&self, stop: &std::sync::atomic::AtomicBool) -> u64 {
        if self.read_ahead.is_some() {
            return 0;
        }
        let pages = self.units.iter().flat_map(|u| {
            let range = match (&u.data, u.address) {
                (UnitData::Memory(b), Some(va)) => {
                    Some((space_of(self.ctx, b), va, b.header.buffer_size))
                }
                _ => None,
            };
            range.into_iter().flat_map(|(space, va, len)| {
                space.page_frames(va, len).flatten().collect::<Vec<_>>()
            })
        });
        self.ctx.dump.stream_ahead(pages, stop)
    }

    /// Does the unit's first record end inside its valid bytes (reading only its start)?
    /// Exactly when a walk would count a record: what makes a buffer worth a place in a file.
    pub(crate) fn has_record(&self, u: &TraceUnit) -> Result<bool, UnitError> {
        if u.skip.is_some() {
            return Ok(false);
        }
        match &u.data {
            UnitData::Memory(b) => {
                let mut prefix = [0u8; BUFFER_HEADER_SIZE + 8];
                space_of(self.ctx, b)
                    .read(b.address, &mut prefix)
                    .map_err(UnitError::Memory)?;
                Ok(crate::etl::records::first_record_complete(&prefix, u.valid))
            }
            _ => {
                let d = self.bytes(u).ok_or(UnitError::NotInFile)?;
                Ok(walk_from(&d, u.first_record, u.valid, |_| {}).count > 0)
            }
        }
    }

    /// The timestamp (session clock) of the unit's first complete record, when it has one:
    /// an .etl file's buffers are ordered by it (each processor's in time order).
    pub fn first_time(&self, u: &TraceUnit) -> Option<u64> {
        if u.skip.is_some() {
            return None;
        }
        match &u.data {
            UnitData::Memory(b) => {
                let mut prefix = [0u8; BUFFER_HEADER_SIZE + 0x20];
                space_of(self.ctx, b).read(b.address, &mut prefix).ok()?;
                crate::etl::records::first_record_time(&prefix, u.valid)
            }
            _ => {
                let d = self.bytes(u)?;
                let mut t = None;
                walk_from(&d, u.first_record, u.valid, |r| {
                    if t.is_none() {
                        t = Some(r.timestamp(&d));
                    }
                });
                t.flatten()
            }
        }
    }

    /// The unit as one buffer of an .etl file of `size`-byte buffers, fixed up (etw-internals.md
    /// §6.1), with its record walk; `spare` is reused for the bytes. A memory or secondary-data
    /// buffer is kept as it is; a window that holds its buffer's start likewise; a window that
    /// starts inside its buffer gets a synthetic header before its first complete record. Err
    /// says why the unit cannot be such a buffer.
    pub(crate) fn file_buffer(
        &self,
        u: &TraceUnit,
        size: usize,
        mut spare: Vec<u8>,
    ) -> Result<(Vec<u8>, Walk), UnitError> {
        if let Some(why) = &u.skip {
            return Err(UnitError::Skipped(why.clone()));
        }
        if let Some(h) = u.header.filter(|_| !matches!(u.data, UnitData::Window(_))) {
            if h.buffer_size != size as u64 {
                return Err(UnitError::OtherSize {
                    buffer: h.buffer_size,
                    file: size,
                });
            }
        }
        let (bytes, walk) = match &u.data {
            UnitData::Memory(b) => {
                spare.clear();
                spare.resize(size, 0);
                space_of(self.ctx, b)
                    .read_bulk(b.address, &mut spare)
                    .map_err(UnitError::BufferData)?;
                let w = crate::etl::records::walk(&spare, u.valid);
                writer::fix_up(&mut spare, u.processor, w.end);
                (spare, w)
            }
            UnitData::Window(i) => {
                let w = self
                    .triage
                    .as_ref()
                    .and_then(|t| t.windows.get(*i))
                    .ok_or(UnitError::NoWindow)?;
                let made = if w.starts_at_base {
                    saved_buffer(size, u.processor, &w.data)
                } else {
                    let h = SyntheticHeader {
                        size,
                        logger_id: u.logger_id.unwrap_or(0),
                        sequence_number: u.header.map_or(1, |h| h.sequence_number),
                        timestamp: 0,
                        buffer_type: 0,
                        processor: u.processor,
                    };
                    synthetic_buffer(&h, w.data.get(u.first_record..).unwrap_or_default())
                };
                made.ok_or(UnitError::WindowTooLarge(size))?
            }
            UnitData::Blob { .. } | UnitData::Carved(_) => {
                let d = self.bytes(u).ok_or(UnitError::NotInFile)?;
                let d = &d[..u.valid.min(d.len())];
                saved_buffer(size, u.processor, d).ok_or(UnitError::TooLong(size))?
            }
        };
        if walk.count == 0 {
            return Err(UnitError::NoRecord);
        }
        Ok((bytes, walk))
    }

    /// Keep a session's clock (saying when it cannot convert); returns its index.
    pub(super) fn add_session_clock(&mut self, logger_id: u64, conv: Converter) -> usize {
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

    /// A converter for units whose clock was not asked for.
    fn no_clock(&mut self) -> usize {
        if self.converters.is_empty() {
            self.converters.push(Converter::Unknown(
                "clocks not worked out for this listing".into(),
            ));
        }
        0
    }

    fn open_memory(&mut self, sel: Option<&str>, need: Need) {
        let ctx = self.ctx;
        let list = list_sessions(ctx);
        self.sessions = list
            .sessions
            .iter()
            .map(|s| SourceSession {
                logger_id: Some(s.logger_id),
                source: "logger_context",
                context: Some(s.clone()),
                units: 0,
            })
            .collect();
        if need == Need::Sessions {
            self.memory = Some((list, None));
            return;
        }
        let declared = list
            .sessions
            .iter()
            .filter(|s| selects(Some(s.logger_id), s.name.as_ref().map(|n| n.raw()), sel))
            .map(|s| {
                s.number_of_buffers
                    .unwrap_or(0)
                    .saturating_mul(s.buffer_size.unwrap_or(0))
            })
            .fold(0u64, u64::saturating_add);
        if declared.saturating_mul(WHOLE_FILE_SHARE) >= ctx.dump.len() {
            self.read_ahead = ctx.dump.stream_file();
        }
        let facts = (need == Need::Clocks).then(|| ClockFacts::gather(ctx, &list.sessions));
        match list.array.as_ref() {
            None => self.warnings.push(Warning::new(
                WarningKind::NotFound,
                "no logger array found: no buffers to list",
            )),
            Some(array) => {
                for (k, s) in list.sessions.iter().enumerate() {
                    if !selects(Some(s.logger_id), s.name.as_ref().map(|n| n.raw()), sel) {
                        continue;
                    }
                    let converter = match &facts {
                        Some(f) => {
                            self.add_session_clock(s.logger_id, clock::for_session(ctx, f, s))
                        }
                        None => self.no_clock(),
                    };
                    let per_cpu = s.logger_mode.unwrap_or(0) & NO_PER_PROCESSOR_BUFFERING == 0;
                    let found = find_buffers(ctx, array, s);
                    self.warnings
                        .extend(found.warnings.into_iter().map(|w| w.in_logger(s.logger_id)));
                    self.sessions[k].units = found.buffers.len();
                    for b in found.buffers {
                        let valid = b.header.valid_bytes();
                        let skip = if let Some(address) = b.copy_of {
                            Some(Skip::CopyOf { address })
                        } else if b.header.compressed() {
                            Some(Skip::Compressed)
                        } else if valid.is_none() {
                            Some(Skip::NoValidEnd {
                                current_offset: b.header.current_offset,
                                saved_offset: b.header.saved_offset,
                                buffer_size: b.header.buffer_size,
                            })
                        } else {
                            None
                        };
                        self.units.push(TraceUnit {
                            logger_id: Some(s.logger_id),
                            origin: "memory",
                            address: Some(b.address),
                            file_offset: None,
                            cpu: per_cpu.then(|| b.cpu.unwrap_or(b.header.processor_index)),
                            processor: b.cpu.or(Some(b.header.processor_index)),
                            header: Some(b.header),
                            lists: b.lists.iter().copied().collect(),
                            first_record: BUFFER_HEADER_SIZE,
                            valid: valid.unwrap_or(0) as usize,
                            buffer_valid: valid,
                            shift: 0,
                            partial_bytes: 0,
                            skip,
                            owner: b.owner.clone(),
                            via: b.via,
                            window: None,
                            converter,
                            data: UnitData::Memory(Box::new(b)),
                        });
                    }
                }
            }
        }
        self.memory = Some((list, facts));
    }

    /// A triage dump's sessions: the secondary data's, then each logger known only from a
    /// saved window (a window that repeats a secondary-data buffer adds none).
    fn triage_sessions(t: &TriageEtw) -> Vec<SourceSession> {
        let mut out = Vec::new();
        for s in t.blob.as_ref().map_or(&[][..], |b| &b.sessions) {
            let c = Session {
                name: Some(s.name.clone()),
                logger_mode: Some(s.logger_mode),
                logger_mode_flags: logger_mode_flags(s.logger_mode as u32),
                clock_type: Some(s.clock_type),
                clock_type_name: clock_type_name(s.clock_type),
                buffer_size: Some(s.buffer_size),
                start_time: Some(filetime_to_iso8601(s.start_time)),
                start_time_raw: Some(s.start_time),
                ..Session::bare(s.logger_id, VirtAddr::new(0), "triage secondary data")
            };
            out.push(SourceSession {
                logger_id: Some(s.logger_id),
                source: "secondary_data",
                context: Some(c),
                units: s.buffers.len(),
            });
        }
        for w in &t.windows {
            if w.duplicate_of.is_some()
                || w.logger_id
                    .is_some_and(|id| out.iter().any(|s| s.logger_id == Some(id)))
            {
                continue;
            }
            let context = w.logger_id.map(|id| Session {
                buffer_size: w.header.as_ref().map(|h| h.buffer_size),
                ..Session::bare(id, w.base, "triage saved window")
            });
            out.push(SourceSession {
                logger_id: w.logger_id,
                source: w.kind.source(),
                context,
                units: 1,
            });
        }
        out
    }

    fn open_triage(&mut self, sel: Option<&str>, need: Need) {
        let ctx = self.ctx;
        let t = triage::read(ctx);
        self.warnings.extend(t.warnings.iter().cloned());
        self.sessions = Self::triage_sessions(&t);
        if need == Need::Sessions {
            self.triage = Some(t);
            return;
        }
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
                .map(|s| s.name.raw());
            if !selects(w.logger_id, name, sel) {
                continue;
            }
            let cpu = match w.kind {
                WindowKind::CurrentBuffer => w.processor.or(t.crash_cpu.and_then(|c| c.number)),
                WindowKind::ErrlogTail => None,
            };
            let mut skip = None;
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
                skip = Some(Skip::Duplicate {
                    logger_id: s.logger_id,
                    buffer: d.buffer,
                });
            } else if w.first_record.is_none() {
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
                skip = Some(Skip::NoRecordChain);
            } else if w.partial_bytes > 0 {
                self.warnings.push(Warning::new(WarningKind::Decode, format!(
                    "{}: the window starts {:#x} bytes inside a record (the tail of a record cut by the kernel's {:#x}-byte limit); skipped",
                    w.kind.source(),
                    w.partial_bytes,
                    w.kind.limit()
                )));
            }
            let converter = if skip.is_some() || need != Need::Clocks {
                self.no_clock()
            } else {
                let (conv, inferred) = match w.kind {
                    WindowKind::CurrentBuffer => {
                        current_buffer_clock(ctx, &t, w, mhz, blob_sessions, perf_freq)
                    }
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
                self.converters.len() - 1
            };
            self.units.push(TraceUnit {
                logger_id: w.logger_id,
                origin: w.kind.source(),
                address: Some(w.base),
                file_offset: w.file_offset,
                cpu,
                processor: cpu,
                header: w.header,
                lists: Vec::new(),
                first_record: w.first_record.unwrap_or(w.data.len()),
                valid: w.data.len(),
                buffer_valid: Some(w.valid),
                // Offsets in rows are buffer offsets: window offset + (start − base).
                shift: (w.start.get() - w.base.get()) as usize,
                partial_bytes: w.partial_bytes,
                skip,
                owner: None,
                via: None,
                window: Some(w.evidence),
                converter,
                data: UnitData::Window(i),
            });
        }
        self.blob_units(&t, sel, need, (perf_freq, mhz));
        self.triage = Some(t);
    }

    /// The units of the ETW secondary data's buffers (triage dumps), for the sessions `sel`
    /// selects.
    fn blob_units(
        &mut self,
        t: &TriageEtw,
        sel: Option<&str>,
        need: Need,
        (perf_freq, mhz): (u64, u64),
    ) {
        let blob_sessions: &[BlobSession] = t.blob.as_ref().map_or(&[], |b| &b.sessions);
        let blob_data = self.blob_data(t);
        for s in blob_sessions {
            if !selects(Some(s.logger_id), Some(s.name.raw()), sel) {
                continue;
            }
            let converter = match need {
                Need::Clocks => {
                    self.add_session_clock(s.logger_id, blob_converter(s, perf_freq, mhz))
                }
                _ => self.no_clock(),
            };
            let per_cpu = s.logger_mode & NO_PER_PROCESSOR_BUFFERING == 0;
            for b in &s.buffers {
                let in_file = blob_data
                    .and_then(|d| d.bytes_at(usize::try_from(b.offset).ok()?, b.valid as usize))
                    .is_some();
                self.units.push(TraceUnit {
                    logger_id: Some(s.logger_id),
                    origin: "secondary_data",
                    address: None,
                    file_offset: Some(b.file_offset),
                    cpu: per_cpu.then_some(b.header.processor_index),
                    processor: Some(b.header.processor_index),
                    header: Some(b.header),
                    lists: Vec::new(),
                    first_record: BUFFER_HEADER_SIZE,
                    valid: b.valid as usize,
                    buffer_valid: Some(b.valid),
                    shift: 0,
                    partial_bytes: 0,
                    skip: (!in_file).then_some(Skip::NotInFile),
                    owner: None,
                    via: None,
                    window: None,
                    converter,
                    data: UnitData::Blob { offset: b.offset },
                });
            }
        }
    }

    /// The bytes of the secondary-data blob the ETW blob of `t` was parsed from.
    fn blob_data(&self, t: &TriageEtw) -> Option<&'c [u8]> {
        let stored = t.blob.as_ref()?.stored.as_ref()?;
        self.ctx.dump.triage_view()?.blob(stored)
    }
}

/// The size of the buffers of a session's .etl file (every buffer of a file has one size,
/// etw-internals.md §6.1): the session's BufferSize when plausible, else the first of its
/// units' own plausible BufferSize (an anomaly the Warning says), else the smallest 4 KiB
/// multiple that holds each window with a header.
pub(crate) fn file_buffer_size(s: &SourceSession, units: &[&TraceUnit]) -> (u64, Option<Warning>) {
    let own = s.context.as_ref().and_then(|c| c.buffer_size);
    if let Some(b) = own.filter(|&b| plausible_buffer_size(b)) {
        return (b, None);
    }
    if let Some(size) = units
        .iter()
        .filter_map(|u| u.header.map(|h| h.buffer_size))
        .find(|&b| plausible_buffer_size(b))
    {
        let w = own.map(|b| {
            Warning::new(
                WarningKind::Anomaly,
                format!(
                    "logger {}: its BufferSize {b:#x} is not plausible: the file uses the recovered buffers' {size:#x}",
                    s.logger_id.unwrap_or(0)
                ),
            )
            .field("_WMI_LOGGER_CONTEXT.BufferSize")
        });
        let w = w.map(|w| match s.logger_id {
            Some(id) => w.logger(id),
            None => w,
        });
        return (size, w);
    }
    let need = units
        .iter()
        .map(|u| u.valid.saturating_sub(u.first_record) + BUFFER_HEADER_SIZE)
        .max()
        .unwrap_or(BUFFER_HEADER_SIZE);
    ((need as u64).next_multiple_of(0x1000), None)
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

/// Logger 2's window. Its logger context is not in a triage dump, so its clock type is not
/// known; two hypotheses are tested against anchors in the same dump (triage-etw.md §2.4), and
/// the clock stays unknown when neither holds:
///
/// * **CPU cycles**: the newest timestamp lies at most [`CYCLES_WINDOW_MS`] before the crashing
///   CPU's `KPRCB.StartCycles` (needs a `_KPRCB` layout for the dump's kernel);
/// * **QPC**: converted through the ReferenceTime of a QPC session saved in the ETW secondary
///   data and the blob's EtwPerfFreq, the newest timestamp falls within
///   [`QPC_WINDOW_MS`] of the dump's SystemTime (the buffer is the crashing CPU's current one).
fn current_buffer_clock(
    ctx: &KernelContext<'_>,
    t: &TriageEtw,
    w: &triage::SavedWindow,
    mhz: u64,
    sessions: &[BlobSession],
    perf_freq: u64,
) -> WindowClock {
    let Some(newest) = window_timestamps(w).into_iter().max() else {
        let why = "logger 2's clock type is not in the dump (no logger context) and the window has no timestamp to test a clock against";
        return (Converter::Unknown(why.into()), None);
    };
    let mut tried: Vec<String> = Vec::new();
    // CPU cycles, anchored at the crashing CPU's StartCycles.
    match t.crash_cpu.and_then(|c| c.start_cycles) {
        None => tried.push("CPU cycles: not testable, the crashing CPU's KPRCB.StartCycles is unknown (no _KPRCB layout for this kernel)".into()),
        Some(_) if mhz == 0 => tried.push("CPU cycles: not testable, the CPU speed (KPRCB.MHz, EtwCPUSpeedInMHz) is unknown".into()),
        Some(sc) => {
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
                return (conv, Some(how));
            }
            tried.push(format!(
                "CPU cycles: rejected, the newest timestamp {newest:#x} is not within {CYCLES_WINDOW_MS} ms before KPRCB.StartCycles {sc:#x}"
            ));
        }
    }
    // QPC, through a QPC session's reference.
    let dump_time = ctx.dump.header().system_time;
    let qpc = sessions
        .iter()
        .find(|s| s.clock_type == 1 && s.reference_system_time != 0);
    match qpc {
        _ if perf_freq == 0 => tried.push("QPC: not testable, EtwPerfFreq is unknown".into()),
        None => tried.push(
            "QPC: not testable, no QPC session with a ReferenceTime in the ETW secondary data"
                .into(),
        ),
        Some(s) => {
            let conv = blob_converter(s, perf_freq, mhz);
            let at = conv.to_filetime(newest);
            let tolerance = QPC_WINDOW_MS * 10_000;
            match at {
                Some(ft) if ft.abs_diff(dump_time) <= tolerance => {
                    let how = format!(
                        "clock inferred as QPC: through logger {}'s ReferenceTime and EtwPerfFreq {perf_freq}, the newest timestamp {newest:#x} falls {:.3} ms {} the dump's SystemTime (within {QPC_WINDOW_MS} ms)",
                        s.logger_id,
                        ft.abs_diff(dump_time) as f64 / 10_000.0,
                        if ft <= dump_time { "before" } else { "after" }
                    );
                    return (conv, Some(how));
                }
                Some(ft) => tried.push(format!(
                    "QPC: rejected, through logger {}'s ReferenceTime and EtwPerfFreq {perf_freq} the newest timestamp {newest:#x} would be {:.3} s {} the dump's SystemTime",
                    s.logger_id,
                    ft.abs_diff(dump_time) as f64 / 1e7,
                    if ft <= dump_time { "before" } else { "after" }
                )),
                None => tried.push(format!(
                    "QPC: rejected, the newest timestamp {newest:#x} does not convert through logger {}'s ReferenceTime",
                    s.logger_id
                )),
            }
        }
    }
    (
        Converter::Unknown(format!(
            "logger 2's clock type is not in the dump (no logger context) and no hypothesis holds: {}",
            tried.join("; ")
        )),
        None,
    )
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
