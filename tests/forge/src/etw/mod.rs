//! ETW logger state in fixture dumps: the logger-context pointer array where the fixture's
//! kernel keeps it, `_WMI_LOGGER_CONTEXT`s in pool with their names, log-file names and
//! `GlobalList` buffer headers, and the anomalies a reader must survive.
//!
//! Facts from shared/reference/etw-internals.md (§1 array location and free slots, §1.3
//! validation, §2 WMI_BUFFER_HEADER, §3.1 context fields, §7 clock types) and anchors.md
//! (EtwpDebuggerData + 0x10); every offset and size from the fixture's `types.h`
//! ([`crate::kernel::types_h`]). Nothing comes from etwdump.
//!
//! | era (fixture) | route | array |
//! |---|---|---|
//! | 6.1, 6.3 (x64-7601, x64-9600) | [`EtwRoute::Global`] | the global `WmipLoggerContext[64]` in .data |
//! | 1607 (x64-14393, x86-14393) | [`EtwRoute::Inline`] | `EtwpHostSiloState` -> `_ETW_SILODRIVERSTATE` (pool) with the inline `WmipLoggerContext[64]` |
//! | 1809+ (x64-17763, x64-17763b, x64-19041) | [`EtwRoute::Pointer`] | `EtwpHostSiloState` -> silo state, `EtwpLoggerContext` -> a separate pool array of `MaxLoggers` pointers |
//!
//! Wherever the fixture has them: `PspHostSiloGlobals.EtwSiloState` = the silo state, the
//! silo state's `SiloGlobals` = `&PspHostSiloGlobals` and `MaxLoggers`, each context's
//! `SiloState`; and in every era `*(EtwpDebuggerData + 0x10)` = the array (KDBG.EtwpDebuggerData
//! points at EtwpDebuggerData, so the array is reachable without symbols; a 32-bit pointer on
//! x86, whose offset there is not confirmed by the references).

pub(crate) mod buffers;
pub mod ccswap;
pub mod variation;
pub(crate) mod wmi_buffer;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::config::Config;
use crate::etw::buffers::{BufferSpec, ExpectedBuffer, QueueKind};
use crate::etw::wmi_buffer::{lay_out, BufferHeader, LaidOut};
use crate::kernel::objects::pool_header;
use crate::kernel::pe::KernelImage;
use crate::kernel::types_h::TypesH;
use crate::util::{align_up, guid_to_string, put_u64, utf16le, Rng, PAGE_SIZE};

// ---- logging modes (learn.microsoft.com "Logging Mode Constants", evntrace.h) ----
pub const EVENT_TRACE_FILE_MODE_SEQUENTIAL: u32 = 0x0000_0001;
pub const EVENT_TRACE_FILE_MODE_CIRCULAR: u32 = 0x0000_0002;
pub const EVENT_TRACE_REAL_TIME_MODE: u32 = 0x0000_0100;
pub const EVENT_TRACE_BUFFERING_MODE: u32 = 0x0000_0400;
pub const EVENT_TRACE_USE_PAGED_MEMORY: u32 = 0x0100_0000;
pub const EVENT_TRACE_SYSTEM_LOGGER_MODE: u32 = 0x0200_0000;

/// `_POOL_TYPE` values (types.h `enum _POOL_TYPE`): NonPagedPool 0, PagedPool 1,
/// NonPagedPoolNx 0x200 (6.2+).
pub const NON_PAGED_POOL: u32 = 0;
pub const PAGED_POOL: u32 = 1;
pub const NON_PAGED_POOL_NX: u32 = 0x200;

/// How the forged kernel reaches its logger array (etw-internals.md §1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EtwRoute {
    /// The global `WmipLoggerContext[64]` (5.1 - 10.0; the 7601 and 9600 fixtures).
    Global,
    /// `EtwpHostSiloState` -> `_ETW_SILODRIVERSTATE.WmipLoggerContext[64]` (1511 - 1703).
    Inline,
    /// `EtwpHostSiloState` -> `_ETW_SILODRIVERSTATE.EtwpLoggerContext` -> a pool array of
    /// `MaxLoggers` pointers (1709+).
    Pointer,
}

impl EtwRoute {
    /// "global", "inline" or "pointer" (manifest.json).
    pub fn name(self) -> &'static str {
        match self {
            EtwRoute::Global => "global",
            EtwRoute::Inline => "inline",
            EtwRoute::Pointer => "pointer",
        }
    }
}

/// How a session's `GlobalList` (LIST_ENTRY of `_WMI_BUFFER_HEADER.GlobalEntry`) is linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GlobalListSpec {
    /// head -> buffer 0 -> ... -> buffer n-1 -> head, Blinks consistent.
    Ring,
    /// As `Ring`, but the last buffer's Flink points back to the previous buffer's GlobalEntry:
    /// a walk never returns to the head (needs `number_of_buffers >= 2`).
    Cyclic,
}

/// One session (`_WMI_LOGGER_CONTEXT`) to forge. Its LoggerId is the slot index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSpec {
    pub name: String,
    /// `LogFileName`; None: an empty UNICODE_STRING (Length 0, Buffer NULL).
    pub log_file: Option<String>,
    pub logger_mode: u32,
    /// Written where the layout has `ClockType` (6.0+; every fixture).
    pub clock_type: u32,
    pub buffer_size: u32,
    pub minimum_buffers: u32,
    pub maximum_buffers: u32,
    /// Also the number of buffer headers the forge puts on `GlobalList`.
    pub number_of_buffers: u32,
    pub buffers_written: u32,
    pub events_lost: u32,
    pub log_buffers_lost: u32,
    pub real_time_buffers_lost: u32,
    /// FILETIME; must lie before the dump's SystemTime.
    pub start_time: u64,
    pub pool_type: u32,
    /// On-disk GUID bytes (see [`crate::guid_to_string`]).
    pub instance_guid: [u8; 16],
    /// The page holding the LoggerName characters is mapped (valid PTE) but not in the dump.
    pub name_unreadable: bool,
    pub global_list: GlobalListSpec,
    /// Names of `_WMI_LOGGER_CONTEXT.Flags` bits to set where the layout has them
    /// (e.g. "RealTime", "KernelTrace", "AutoLogger").
    pub flag_bits: Vec<String>,
}

/// What one slot of the logger array holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotSpec {
    Session(SessionSpec),
    /// A free slot holding this raw value: 1 (the 10.0+ free marker, bit 0 set) or 0 (NULL).
    Free(u64),
    /// A kernel pointer into a mapped page of pseudo-random bytes (LoggerId there != slot).
    Garbage,
    /// A kernel pointer to an address whose PTE is zero.
    Unmapped,
    /// A complete, plausible context whose LoggerId is `logger_id` != the slot (a stale copy).
    WrongId {
        logger_id: u32,
        session: SessionSpec,
    },
    /// A free slot whose value is a real, complete context pointer (LoggerId = slot) with bit 0
    /// set: free by the kernel's own test (`ctx & 1`), etw-internals.md §1.2.
    FreeTagged(SessionSpec),
}

/// ETW logger state of a fixture dump ([`Config::etw`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtwSpec {
    /// `_ETW_SILODRIVERSTATE.MaxLoggers` and the array's capacity on the pointer route (1709+
    /// layouts; 32..=256). The global and inline arrays always have 64 entries: then this
    /// must be 64.
    pub max_loggers: u32,
    /// Slot index -> content; slots not listed hold 1 (free).
    pub slots: BTreeMap<u32, SlotSpec>,
    /// Slot index -> the session's buffers with data (x64 1607+ fixtures; see
    /// [`EtwSpec::with_buffers`]). A session slot not listed gets `NumberOfBuffers` bare
    /// 0x48-byte headers on GlobalList (the original behaviour); a listed one gets exactly
    /// these buffers (`number_of_buffers` must equal their count), all on GlobalList.
    pub buffers: BTreeMap<u32, Vec<BufferSpec>>,
    /// Pending compact context-switch blocks ('CCsw', etw-internals.md §4): see
    /// [`EtwSpec::with_pending_ccswap`]. Off in every standard spec.
    pub pending_ccswap: bool,
    /// The seeded variation mode ([`crate::Config::with_variation`], [`EtwSpec::varied`]):
    /// `None` in every other spec (their dumps stay byte-identical).
    pub variation: Option<Box<crate::etw::variation::Variation>>,
}

/// One slot of the logger array as a correct reader must classify it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpectedSlot {
    /// Skipped silently: NULL or bit 0 set (`value` is the raw slot value).
    Free { value: u64 },
    /// A kernel pointer that does not lead to a valid context of this slot (`va` = the slot
    /// value; `why` says which check of etw-internals.md §1.3 fails).
    Invalid { va: u64, why: String },
    /// A session a reader must list.
    Session(Box<ExpectedSession>),
}

/// A session as a reader must report it (values as written to the `_WMI_LOGGER_CONTEXT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedSession {
    pub logger_id: u32,
    /// None: LoggerName is a valid UNICODE_STRING but its characters are not in the dump.
    pub name: Option<String>,
    pub log_file: Option<String>,
    pub logger_mode: u32,
    /// None where the layout has no ClockType (no current fixture).
    pub clock_type: Option<u32>,
    pub buffer_size: u32,
    pub minimum_buffers: u32,
    pub maximum_buffers: u32,
    pub number_of_buffers: u32,
    pub buffers_written: u32,
    pub events_lost: u32,
    pub log_buffers_lost: u32,
    pub real_time_buffers_lost: u32,
    /// FILETIME (100 ns since 1601-01-01 UTC).
    pub start_time: u64,
    pub pool_type: u32,
    /// "XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX" (uppercase).
    pub instance_guid: String,
    /// VA of the `_WMI_LOGGER_CONTEXT` (the slot value).
    pub context_va: u64,
    // ---- extras ----
    /// BufferSize - sizeof(_WMI_BUFFER_HEADER).
    pub maximum_event_size: u32,
    /// `Flags` as written (None where the layout has no Flags).
    pub flags: Option<u32>,
    /// LoggerName.Buffer (the characters' VA; unreadable when `name` is None).
    pub name_va: u64,
    /// VAs of the `_WMI_BUFFER_HEADER`s on GlobalList, in Flink order, each once. Only the
    /// 0x48-byte headers are forged, not the buffers' data.
    pub buffers: Vec<u64>,
    /// Cyclic GlobalList: the GlobalEntry VA the last buffer's Flink points back to (a buffer
    /// already visited, not the head). None: the list returns to the head.
    pub global_list_cycle_to: Option<u64>,
    /// Buffers with data ([`EtwSpec::buffers`]): what a reader must report for each, in
    /// GlobalList order. Empty for header-only sessions.
    pub buffer_details: Vec<ExpectedBuffer>,
    /// Names of the `_WMI_LOGGER_CONTEXT` fields that hold values a real kernel may show
    /// mid-update or after limits changed (variation mode): "NumberOfBuffers" (MaximumBuffers
    /// plus 1, or 0xFFFFFFFF; `buffers` is still the real list), "MinimumBuffers" (> MaximumBuffers),
    /// "EventsLost", "BuffersWritten" (wild values). Empty otherwise.
    pub odd_fields: Vec<String>,
    /// `ReferenceTime` as written (where the layout has it).
    pub reference_time: Option<crate::etw::variation::RefClock>,
}

/// What the forge put in a dump for [`Config::etw`] ([`crate::Forged::etw`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForgedEtw {
    pub route: EtwRoute,
    /// VA of the first pointer of the logger array.
    pub array_va: u64,
    /// Number of slots (64, or MaxLoggers on the pointer route).
    pub capacity: u32,
    /// The `_ETW_SILODRIVERSTATE` (inline and pointer routes).
    pub silo_state_va: Option<u64>,
    /// `PspHostSiloGlobals` (where the fixture has it); its `EtwSiloState` = the silo state.
    pub host_silo_globals_va: Option<u64>,
    /// `EtwpDebuggerData + 0x10`, which holds `array_va`.
    pub debugger_data_array_ptr_va: u64,
    /// One entry per slot (`capacity` entries).
    pub slots: Vec<ExpectedSlot>,
    /// Pending compact context-switch blocks a reader must find ([`EtwSpec::with_pending_ccswap`]),
    /// by (cpu, clock / pointer_va). Empty when the option is off.
    pub pending: Vec<ExpectedPending>,
    /// Pointers next to the pending ones that a validating reader must reject (unknown-offset
    /// route only).
    pub pending_decoys: Vec<ExpectedPendingDecoy>,
    // ---- variation mode (empty / None otherwise) ----
    /// Every context switch the forge wrote (pending blocks, 0x0525 batches and 0x0524 events
    /// in buffers), with its true time under [`ForgedEtw::clock_model`].
    pub switches: Vec<crate::etw::variation::ExpectedSwitch>,
    /// The dump's clock model (boot, SystemTime, QPC frequency, CPU MHz, EtwCPUSpeedInMHz).
    pub clock_model: Option<crate::etw::variation::ClockModel>,
    /// Where the per-CPU KPRCB.EtwSupport blocks and the pointer groups inside them are.
    pub etw_support: Option<crate::etw::variation::ExpectedEtwSupport>,
    /// The variation seed.
    pub seed: Option<u64>,
}

/// One pending compact context-switch block (etw-internals.md §4.1-§4.3): a 0x400-byte
/// NonPagedPoolNx allocation with a 16-byte x64 POOL_HEADER (PoolTag 'CCsw' at header + 4)
/// right before `block_va`, pointed to by the QWORD at `pointer_va` inside the CPU's
/// KPRCB.EtwSupport block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedPending {
    pub cpu: u32,
    /// Some(clock type) on the known-offset route (1607: `pointer_va` = EtwSupport + 0xB20 +
    /// 8*clock); None where the offset is not known (1709+: EtwSupport + 0x2A8, to be found by
    /// a validated search).
    pub clock: Option<u32>,
    pub block_va: u64,
    pub pointer_va: u64,
    /// UsedBytes at block + 0: 0 (no batch open) or 0x68..=0x400.
    pub used_bytes: u32,
    /// StartTick at block + 4 (0 when UsedBytes is 0).
    pub start_tick: u32,
    /// The encoder input (`ccswap::encode_pending_block(batch, start_tick, max_wait_reason)`
    /// is the block); None when UsedBytes is 0 (the block is all zero).
    pub batch: Option<crate::etw::ccswap::Batch>,
    /// The build's MaximumWaitReason (39 on 14393, 40 on 17763-20348).
    pub max_wait_reason: u8,
    /// The clock slot (0..=3) the block really belongs to (also where `clock` is None).
    pub true_clock: u32,
    /// `pointer_va` is at an offset etw-internals.md §4.1 documents for this build.
    pub documented_offset: bool,
    /// Offset of the 4-pointer group (clock 0's pointer) inside the EtwSupport block:
    /// `pointer_va = EtwSupport + group_offset + ptr_size * true_clock`.
    pub group_offset: u64,
}

/// A pointer in the EtwSupport block next to the pending ones that does not lead to a valid
/// pending block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedPendingDecoy {
    pub cpu: u32,
    pub pointer_va: u64,
    pub block_va: u64,
    /// Why a reader must reject it ("pool tag 'Etwp'", "UsedBytes 0x50").
    pub why: String,
}

impl ForgedEtw {
    /// The sessions a reader must list, in slot order.
    pub fn sessions(&self) -> impl Iterator<Item = &ExpectedSession> {
        self.slots.iter().filter_map(|s| match s {
            ExpectedSlot::Session(x) => Some(&**x),
            _ => None,
        })
    }
}

/// Deterministic, version-4-looking GUID bytes for a session.
fn session_guid(build: u32, slot: u32) -> [u8; 16] {
    let mut rng = Rng::new(0x45_5457_4755_4944 ^ (u64::from(build) << 16) ^ u64::from(slot));
    let mut g = [0u8; 16];
    rng.fill(&mut g);
    g[7] = (g[7] & 0x0F) | 0x40; // Data3 high nibble: version 4
    g[8] = (g[8] & 0x3F) | 0x80; // variant
    g
}

impl EtwSpec {
    /// The standard set for a fixture of `build` with a 64-entry array; see
    /// [`EtwSpec::standard_with_max_loggers`].
    pub fn standard(build: u32) -> EtwSpec {
        Self::standard_with_max_loggers(build, 64)
    }

    /// The standard set (README "ETW logger state"): sessions in slots 0 (NT Kernel Logger,
    /// file mode, CPU-cycle clock), 2 (Circular Kernel Context Logger, buffering mode, QPC),
    /// 3 (EventLog-System, real-time, paged pool, system time), 4 (WdiContextLog, raw clock),
    /// 5 (LwtNetLog, circular file, cyclic GlobalList), 6 (UBPM, LoggerName page missing);
    /// anomalies in 7 (garbage page), 8 (stale context with LoggerId 0x21), 9 (unmapped),
    /// 63 (NULL); every other slot holds 1. With `max_loggers` > 64 (pointer route only), a
    /// session in slot `max_loggers - 6` (SleepStudyTraceSession) that a 64-entry reader misses.
    /// Start times lie between the boot and the SystemTime of [`Config::x64`].
    pub fn standard_with_max_loggers(build: u32, max_loggers: u32) -> EtwSpec {
        let base = Config::x64();
        let boot = base.system_time - base.system_up_time;
        let win8 = build >= 9200;
        let nonpaged = if win8 {
            NON_PAGED_POOL_NX
        } else {
            NON_PAGED_POOL
        };
        let system_logger = if win8 {
            EVENT_TRACE_SYSTEM_LOGGER_MODE
        } else {
            0
        };
        let flags = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // counts: [MinimumBuffers, MaximumBuffers, NumberOfBuffers];
        // lost: [BuffersWritten, EventsLost, LogBuffersLost, RealTimeBuffersLost].
        let s = |slot: u32,
                 name: &str,
                 log_file: Option<&str>,
                 logger_mode: u32,
                 clock_type: u32,
                 buffer_size: u32,
                 counts: [u32; 3],
                 lost: [u32; 4],
                 start: u64,
                 pool_type: u32,
                 flag_bits: Vec<String>| SessionSpec {
            name: name.to_string(),
            log_file: log_file.map(str::to_string),
            logger_mode,
            clock_type,
            buffer_size,
            minimum_buffers: counts[0],
            maximum_buffers: counts[1],
            number_of_buffers: counts[2],
            buffers_written: lost[0],
            events_lost: lost[1],
            log_buffers_lost: lost[2],
            real_time_buffers_lost: lost[3],
            start_time: boot + start,
            pool_type,
            instance_guid: session_guid(build, slot),
            name_unreadable: false,
            global_list: GlobalListSpec::Ring,
            flag_bits,
        };
        let mut slots = BTreeMap::new();
        slots.insert(
            0,
            SlotSpec::Session(s(
                0,
                "NT Kernel Logger",
                Some("C:\\Windows\\Temp\\kernel.etl"),
                EVENT_TRACE_FILE_MODE_SEQUENTIAL,
                3,
                0x2_0000,
                [4, 20, 6],
                [419, 17, 2, 0],
                31_234_567,
                nonpaged,
                flags(&["KernelTrace"]),
            )),
        );
        slots.insert(
            2,
            SlotSpec::Session(s(
                2,
                "Circular Kernel Context Logger",
                None,
                EVENT_TRACE_BUFFERING_MODE | system_logger,
                1,
                0x1_0000,
                [2, 8, 4],
                [0, 0, 0, 0],
                4_567_891,
                nonpaged,
                flags(&["KernelTrace", "AutoLogger"]),
            )),
        );
        slots.insert(
            3,
            SlotSpec::Session(s(
                3,
                "EventLog-System",
                None,
                EVENT_TRACE_REAL_TIME_MODE | EVENT_TRACE_USE_PAGED_MEMORY,
                2,
                0x8000,
                [2, 12, 3],
                [57, 1, 0, 3],
                12_345_678,
                PAGED_POOL,
                flags(&["RealTime", "AutoLogger"]),
            )),
        );
        slots.insert(
            4,
            SlotSpec::Session(s(
                4,
                "WdiContextLog",
                None,
                EVENT_TRACE_BUFFERING_MODE,
                0,
                0x4000,
                [2, 6, 2],
                [0, 4, 0, 0],
                9_876_543,
                nonpaged,
                flags(&["AutoLogger"]),
            )),
        );
        let mut lwt = s(
            5,
            "LwtNetLog",
            Some("C:\\Windows\\System32\\LogFiles\\WMI\\LwtNetLog.etl"),
            EVENT_TRACE_FILE_MODE_CIRCULAR,
            1,
            0x4_0000,
            [3, 9, 3],
            [88, 0, 5, 0],
            14_141_414,
            nonpaged,
            flags(&["AutoLogger"]),
        );
        lwt.global_list = GlobalListSpec::Cyclic;
        slots.insert(5, SlotSpec::Session(lwt));
        let mut ubpm = s(
            6,
            "UBPM",
            None,
            EVENT_TRACE_REAL_TIME_MODE,
            2,
            0x2000,
            [2, 4, 2],
            [7, 0, 0, 1],
            6_543_210,
            nonpaged,
            flags(&["RealTime", "AutoLogger"]),
        );
        ubpm.name_unreadable = true;
        slots.insert(6, SlotSpec::Session(ubpm));
        slots.insert(7, SlotSpec::Garbage);
        slots.insert(
            8,
            SlotSpec::WrongId {
                logger_id: 0x21,
                session: s(
                    0x21,
                    "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace",
                    None,
                    EVENT_TRACE_REAL_TIME_MODE,
                    1,
                    0x3000,
                    [2, 4, 2],
                    [0, 0, 0, 0],
                    1_111_111,
                    nonpaged,
                    flags(&["RealTime"]),
                ),
            },
        );
        slots.insert(9, SlotSpec::Unmapped);
        slots.insert(63, SlotSpec::Free(0));
        if max_loggers > 64 {
            let slot = max_loggers - 6;
            slots.insert(
                slot,
                SlotSpec::Session(s(
                    slot,
                    "SleepStudyTraceSession",
                    Some("C:\\Windows\\System32\\SleepStudy\\UserNotPresentSession.etl"),
                    EVENT_TRACE_FILE_MODE_SEQUENTIAL,
                    1,
                    0x1000,
                    [1, 3, 1],
                    [3, 0, 0, 0],
                    27_182_818,
                    nonpaged,
                    Vec::new(),
                )),
            );
        }
        EtwSpec {
            max_loggers,
            slots,
            buffers: BTreeMap::new(),
            pending_ccswap: false,
            variation: None,
        }
    }
}

/// `EVENT_TRACE_NO_PER_PROCESSOR_BUFFERING` (evntrace.h): one CurrentBuffer for the logger.
pub const EVENT_TRACE_NO_PER_PROCESSOR_BUFFERING: u32 = 0x1000_0000;

/// Slot of the benchmark session of [`EtwSpec::with_large_buffers`].
pub const LARGE_SESSION_SLOT: u32 = 10;

impl EtwSpec {
    /// This spec with buffers holding data for the standard sessions (BUFFERS.md): slots 0
    /// (NT Kernel Logger), 2 (CKCL), 3 (EventLog-System), 4 (WdiContextLog), 5 (LwtNetLog),
    /// 6 (UBPM, which becomes NO_PER_PROCESSOR_BUFFERING so that its buffer is the context's
    /// CurrentBuffer). Each session's `number_of_buffers` becomes its buffer count (the
    /// standard counts already match). For x64 fixtures of 1607+ (per-CPU current buffers:
    /// KPRCB.EtwSupport + 0x40 + 8*LoggerId on 1607, `_ETW_SILODRIVERSTATE.ProcessorBlocks`
    /// on 1709+).
    pub fn with_buffers(mut self, build: u32) -> EtwSpec {
        for (&slot, content) in self.slots.iter_mut() {
            let SlotSpec::Session(s) = content else {
                continue;
            };
            let Some(plan) = crate::etw::buffers::standard_plan(build, slot) else {
                continue;
            };
            s.number_of_buffers = plan.len() as u32;
            assert!(s.number_of_buffers <= s.maximum_buffers);
            if plan.iter().any(|b| b.current_buffer) {
                s.logger_mode |= EVENT_TRACE_NO_PER_PROCESSOR_BUFFERING;
            }
            self.buffers.insert(slot, plan);
        }
        self
    }

    /// [`EtwSpec::with_buffers`] plus a benchmark session in slot [`LARGE_SESSION_SLOT`]
    /// ("EtwdumpBench", file mode): `count` flushed buffers of `buffer_size` bytes, all on
    /// GlobalList and full of kernel records (4096 x 64 KiB = 256 MiB for the large dump).
    pub fn with_large_buffers(self, build: u32, count: u32, buffer_size: u32) -> EtwSpec {
        let mut spec = self.with_buffers(build);
        let base = Config::x64();
        let boot = base.system_time - base.system_up_time;
        let session = SessionSpec {
            name: "EtwdumpBench".to_string(),
            log_file: Some("C:\\Windows\\Temp\\bench.etl".to_string()),
            logger_mode: EVENT_TRACE_FILE_MODE_SEQUENTIAL,
            clock_type: 1,
            buffer_size,
            minimum_buffers: count,
            maximum_buffers: count,
            number_of_buffers: count,
            buffers_written: 12,
            events_lost: 0,
            log_buffers_lost: 0,
            real_time_buffers_lost: 0,
            start_time: boot + 20_000_000,
            pool_type: NON_PAGED_POOL_NX,
            instance_guid: session_guid(build, LARGE_SESSION_SLOT),
            name_unreadable: false,
            global_list: GlobalListSpec::Ring,
            flag_bits: Vec::new(),
        };
        spec.slots
            .insert(LARGE_SESSION_SLOT, SlotSpec::Session(session));
        spec.buffers.insert(
            LARGE_SESSION_SLOT,
            crate::etw::buffers::large_plan(build, count as usize, buffer_size),
        );
        spec
    }
}

impl EtwSpec {
    /// This spec with pending compact context-switch blocks ('CCsw', etw-internals.md §4) for
    /// x64 fixtures of 1607+ (panics at forge time otherwise):
    ///
    /// * 1607 (the inline route, KPRCB.EtwSupport known): *(EtwSupport + 0xB20 + 8*clock) =
    ///   a 0x400-byte 'CCsw' block: CPU0 clock 1 partial, CPU1 clock 1 nearly full (UsedBytes
    ///   0x3F8), CPU2 clock 1 empty and open (0x68), CPU3 clock 3 partial, CPU0 clock 2 closed
    ///   (UsedBytes 0); every other (cpu, clock) slot NULL. MaximumWaitReason 39. The EtwSupport
    ///   blocks (0xC00 bytes) are mapped even without [`EtwSpec::with_buffers`].
    /// * 1709+ (the pointer route, offset unknown): each CPU's KPRCB.EtwSupport -> a 0x1000-byte
    ///   block (mapped for this option) with a clock-1 pending pointer at +0x2A8 (CPU0 partial,
    ///   CPU1 full to UsedBytes 0x400, CPU2 empty and open, CPU3 partial, others closed), and
    ///   decoys at +0x2B0 (a plausible block tagged 'Etwp') and +0x2B8 (a 'CCsw' block with
    ///   UsedBytes 0x50). MaximumWaitReason 40.
    ///
    /// Batch times lie before the dump in the clock's units (QPC 10 MHz since boot, system time,
    /// or a 3 GHz cycle counter); StartTick is the KUSER_SHARED_DATA tick of FirstTimeStamp.
    /// [`ForgedEtw::pending`] lists what a reader must find.
    pub fn with_pending_ccswap(mut self) -> EtwSpec {
        self.pending_ccswap = true;
        self
    }
}

// ------------------------------------------------------------------------------------------
// Building

/// Fixed VAs of the ETW pool area: normal allocations from `base`, then special pages.
struct EtwVaPlan {
    base: u64,
    /// Normal allocations must end before this offset.
    limit: u64,
    garbage_page: u64,
    missing_page: u64,
    unmapped: u64,
}

impl EtwVaPlan {
    fn new(x64: bool) -> Self {
        let base = if x64 {
            0xFFFF_A08D_5140_0000
        } else {
            0x8740_0000
        };
        EtwVaPlan {
            base,
            limit: 0x8_0000,
            garbage_page: base + 0x8_0000,
            missing_page: base + 0x8_1000,
            unmapped: base + 0x9_0000 + 0x2A0,
        }
    }
}

/// A page of the ETW area and how to map it.
pub(crate) enum EtwPage {
    /// Valid PTE, page stored with this content.
    Stored(u64, Vec<u8>),
    /// Valid PTE to a physical page that is not in the dump.
    NotInDump(u64),
    /// The page table exists but the PTE is zero.
    ZeroPte(u64),
}

/// Everything `machine::build` needs to place the ETW state.
pub(crate) struct EtwBuild {
    pub pages: Vec<EtwPage>,
    pub expected: ForgedEtw,
    /// (probe name, va, len) of probes on the ETW objects.
    pub probes: Vec<(String, u64, usize)>,
    /// Bytes to write into the (otherwise zero) KPRCB pages: (va, bytes).
    pub kprcb_writes: Vec<(u64, Vec<u8>)>,
    /// Image pages (RVA, page aligned) to map with a valid PTE but leave out of the dump
    /// (variation mode: EtwCPUSpeedInMHz "not in the dump").
    pub unstored_image_pages: Vec<u32>,
}

/// Bump allocator over the contiguous ETW pool area (content kept in one buffer).
pub(crate) struct Pool {
    x64: bool,
    base: u64,
    buf: Vec<u8>,
    cursor: usize,
    limit: usize,
}

impl Pool {
    pub(crate) fn header_size(&self) -> usize {
        if self.x64 {
            0x10
        } else {
            8
        }
    }

    /// A small-pool allocation (POOL_HEADER before it) or, above ~4 KiB, a page-aligned
    /// big-pool allocation (no header). Returns the VA of the data.
    pub(crate) fn alloc(&mut self, size: usize, tag: &[u8; 4]) -> u64 {
        let hdr = self.header_size();
        let start = if size + hdr > 0xFF0 {
            align_up(self.cursor as u64, PAGE_SIZE) as usize
        } else {
            let s = align_up(self.cursor as u64, hdr as u64) as usize;
            // Keep small allocations inside one page, as the pool does.
            if s / PAGE_SIZE as usize != (s + hdr + size - 1) / PAGE_SIZE as usize {
                align_up(s as u64, PAGE_SIZE) as usize
            } else {
                s
            }
        };
        let data = if size + hdr > 0xFF0 {
            start
        } else {
            start + hdr
        };
        let end = data + size;
        assert!(end <= self.limit, "ETW pool area full");
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        if data != start {
            let arch = if self.x64 {
                crate::config::Arch::X64
            } else {
                crate::config::Arch::X86Pae
            };
            pool_header(arch, &mut self.buf, start, size, tag);
        }
        self.cursor = end;
        self.base + data as u64
    }

    pub(crate) fn slice_mut(&mut self, va: u64, len: usize) -> &mut [u8] {
        let off = (va - self.base) as usize;
        &mut self.buf[off..off + len]
    }
}

/// Typed writes at types.h offsets, checking each field's declared size.
struct Layouts<'a> {
    t: &'a TypesH,
    ptr: usize,
}

impl Layouts<'_> {
    fn off(&self, agg: &str, field: &str) -> u64 {
        self.t
            .offset_of(agg, field)
            .unwrap_or_else(|| panic!("types.h has no {agg}.{field}"))
    }

    fn size(&self, agg: &str) -> usize {
        self.t
            .size_of(agg)
            .unwrap_or_else(|| panic!("types.h has no sizeof {agg}")) as usize
    }

    /// Write `value` (little-endian, truncated to the field's declared size) into the object
    /// of type `agg` whose first byte is `obj[0]`.
    fn put(&self, obj: &mut [u8], agg: &str, field: &str, value: u64) {
        let off = self.off(agg, field) as usize;
        let size = self
            .t
            .field_size(agg, field)
            .unwrap_or_else(|| panic!("types.h: no declaration of {agg}.{field}"))
            as usize;
        assert!(
            matches!(size, 1 | 2 | 4 | 8),
            "{agg}.{field} is {size} bytes, not a scalar"
        );
        obj[off..off + size].copy_from_slice(&value.to_le_bytes()[..size]);
    }

    /// `put` if the layout has the field; returns whether it did.
    fn put_opt(&self, obj: &mut [u8], agg: &str, field: &str, value: u64) -> bool {
        if self.t.has_field(agg, field) {
            self.put(obj, agg, field, value);
            true
        } else {
            false
        }
    }

    fn put_bytes(&self, obj: &mut [u8], agg: &str, field: &str, bytes: &[u8]) {
        let off = self.off(agg, field) as usize;
        let size = self.t.field_size(agg, field).unwrap_or(0) as usize;
        assert_eq!(size, bytes.len(), "{agg}.{field} is {size} bytes");
        obj[off..off + size].copy_from_slice(bytes);
    }

    /// A pointer-sized value at byte offset `off`.
    fn put_ptr_at(&self, obj: &mut [u8], off: usize, v: u64) {
        obj[off..off + self.ptr].copy_from_slice(&v.to_le_bytes()[..self.ptr]);
    }

    /// LIST_ENTRY {Flink, Blink} at `off`.
    fn put_list(&self, obj: &mut [u8], off: usize, flink: u64, blink: u64) {
        let fo = self.off("_LIST_ENTRY", "Flink") as usize;
        let bo = self.off("_LIST_ENTRY", "Blink") as usize;
        self.put_ptr_at(obj, off + fo, flink);
        self.put_ptr_at(obj, off + bo, blink);
    }

    /// UNICODE_STRING at `off`.
    fn put_unicode(&self, obj: &mut [u8], off: usize, len: u16, max: u16, buffer: u64) {
        let u = "_UNICODE_STRING";
        obj[off + self.off(u, "Length") as usize..][..2].copy_from_slice(&len.to_le_bytes());
        obj[off + self.off(u, "MaximumLength") as usize..][..2].copy_from_slice(&max.to_le_bytes());
        self.put_ptr_at(obj, off + self.off(u, "Buffer") as usize, buffer);
    }
}

const CTX: &str = "_WMI_LOGGER_CONTEXT";
const BUF: &str = "_WMI_BUFFER_HEADER";
const SILO: &str = "_ETW_SILODRIVERSTATE";
const GLOBALS: &str = "_ESERVERSILO_GLOBALS";

/// Which route the fixture's layouts and symbols call for.
pub(crate) fn route_of(
    t: &TypesH,
    fx: &crate::kernel::fixture::Fixture,
) -> Result<EtwRoute, String> {
    if fx.symbol("WmipLoggerContext").is_some() {
        Ok(EtwRoute::Global)
    } else if fx.symbol("EtwpHostSiloState").is_some() && t.has_field(SILO, "EtwpLoggerContext") {
        Ok(EtwRoute::Pointer)
    } else if fx.symbol("EtwpHostSiloState").is_some() && t.has_field(SILO, "WmipLoggerContext") {
        Ok(EtwRoute::Inline)
    } else {
        Err(format!(
            "fixture {}: no WmipLoggerContext global and no EtwpHostSiloState with a logger array",
            fx.name
        ))
    }
}

/// Write `data` at `rva + off` of the fixture variable `name`, inside its storage.
pub(crate) fn write_var(
    img: &mut KernelImage,
    fx: &crate::kernel::fixture::Fixture,
    name: &str,
    off: u64,
    data: &[u8],
) {
    let rva = fx
        .symbol(name)
        .unwrap_or_else(|| panic!("fixture {} has no {name}", fx.name));
    let len = fx.storage_len(name).unwrap_or(0) as u64;
    assert!(
        off + data.len() as u64 <= len,
        "fixture {}: {name} has {len:#x} bytes, the forge writes {:#x} at +{off:#x}",
        fx.name,
        data.len()
    );
    img.write(rva + off as u32, data);
}

fn ptr_bytes(ptr: usize, v: u64) -> Vec<u8> {
    v.to_le_bytes()[..ptr].to_vec()
}

/// Place the ETW state of `spec`: image variables are written into `img`, pool pages are
/// returned for `machine::build` to map. `rng` supplies the garbage page.
pub(crate) fn build(
    cfg: &Config,
    spec: &EtwSpec,
    img: &mut KernelImage,
    prcbs: &[u64],
    rng: &mut Rng,
) -> EtwBuild {
    let fx = cfg
        .fixture
        .as_ref()
        .expect("Config::etw needs a fixture kernel (Config::from_fixture)");
    let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
    let x64 = cfg.arch.is_x64();
    let ptr = cfg.arch.ptr_size();
    assert_eq!(
        t.pointer_size, ptr as u64,
        "fixture {}: types.h pointer size",
        fx.name
    );
    let route = route_of(&t, fx).unwrap_or_else(|e| panic!("{e}"));
    // Variation mode: draw the parts that need the config (CPUs, route); see variation.rs.
    let materialized = spec
        .variation
        .as_ref()
        .map(|_| crate::etw::variation::materialize(cfg, spec, route, &t));
    let spec = materialized.as_ref().map_or(spec, |m| &m.spec);
    let var = spec.variation.as_deref();
    let lay = Layouts { t: &t, ptr };
    let plan = EtwVaPlan::new(x64);
    let mut pool = Pool {
        x64,
        base: plan.base,
        buf: Vec::new(),
        cursor: 0,
        limit: plan.limit as usize,
    };
    let image_base = img.base;
    let va_of = |name: &str| fx.symbol(name).map(|rva| image_base + u64::from(rva));
    let globals_va = va_of("PspHostSiloGlobals").filter(|_| t.has_field(GLOBALS, "EtwSiloState"));

    // The array and (inline / pointer routes) the silo state.
    let capacity = match route {
        EtwRoute::Pointer => spec.max_loggers,
        EtwRoute::Inline => t
            .member(SILO, "WmipLoggerContext")
            .and_then(|m| m.count)
            .expect("WmipLoggerContext[N]") as u32,
        EtwRoute::Global => {
            (fx.storage_len("WmipLoggerContext").unwrap_or(0) as usize / ptr).min(64) as u32
        }
    };
    if route == EtwRoute::Pointer {
        assert!(
            (32..=256).contains(&spec.max_loggers),
            "MaxLoggers {} outside 32..=256",
            spec.max_loggers
        );
    } else {
        assert_eq!(
            spec.max_loggers,
            64,
            "fixture {}: MaxLoggers exists only in 1709+ layouts ({} route has 64 slots)",
            fx.name,
            route.name()
        );
        assert_eq!(capacity, 64, "fixture {}: array of {capacity}", fx.name);
    }
    if let Some((&last, _)) = spec.slots.iter().next_back() {
        assert!(last < capacity, "slot {last} >= capacity {capacity}");
    }
    let silo_va = match route {
        EtwRoute::Global => None,
        _ => Some(pool.alloc(lay.size(SILO), b"EtwS")),
    };
    let array_va = match route {
        EtwRoute::Global => va_of("WmipLoggerContext").expect("checked"),
        EtwRoute::Inline => silo_va.expect("silo") + lay.off(SILO, "WmipLoggerContext"),
        EtwRoute::Pointer => pool.alloc(capacity as usize * ptr, b"EtwL"),
    };

    // Special pages: random bytes; a page mapped but not in the dump (names written there are
    // kept in a scratch copy only).
    let mut garbage = vec![0u8; PAGE_SIZE as usize];
    rng.fill(&mut garbage);
    let mut missing = vec![0u8; PAGE_SIZE as usize];
    let mut missing_cursor = 0x40usize;

    let ctx_size = lay.size(CTX);
    let buf_size = lay.size(BUF);
    let align = if x64 { 16 } else { 8 };
    let mut slot_values = vec![1u64; capacity as usize];
    let mut expected: Vec<ExpectedSlot> = (0..capacity)
        .map(|_| ExpectedSlot::Free { value: 1 })
        .collect();
    let mut probes = Vec::new();
    // Buffers with data (EtwSpec::buffers): their own page-aligned area, the per-CPU current
    // buffer values (cpu, LoggerId, EX_FAST_REF value).
    let mut barea = BufArea::new(x64);
    let mut buffer_pages: Vec<EtwPage> = Vec::new();
    let mut layout_cache: LayoutCache = HashMap::new();
    let mut per_cpu: Vec<(u32, u32, u64)> = Vec::new();
    let mut kprcb_writes: Vec<(u64, Vec<u8>)> = Vec::new();
    // KPRCB.MHz on every CPU (every real KPRCB has it; the field the KDBG names with
    // OffsetPrcbMhz): the speed of the standard dumps' 3 GHz cycle clock (clock_now). The
    // variation draws its own speed.
    if var.is_none() && fx.kprcb_size.is_some() {
        if let Some(mhz_off) = t.offset_of("_KPRCB", "MHz") {
            assert_eq!(t.field_size("_KPRCB", "MHz"), Some(4));
            for &p in prcbs {
                kprcb_writes.push((p + mhz_off, STANDARD_CPU_MHZ.to_le_bytes().to_vec()));
            }
        }
    }
    // Slot -> buffer VAs (GlobalList order), for the variation's switch locations.
    let mut session_bufs: BTreeMap<u32, Vec<u64>> = BTreeMap::new();

    for (&slot, content) in &spec.slots {
        let (value, exp) = match content {
            SlotSpec::Free(v) => {
                assert!(
                    *v == 0 || (*v & 1) == 1,
                    "free slot {slot}: {v:#x} is neither 0 nor bit-0-tagged"
                );
                (*v, ExpectedSlot::Free { value: *v })
            }
            SlotSpec::Garbage => {
                let off = 0x3A0usize;
                let id_off = lay.off(CTX, "LoggerId") as usize;
                let id = u32::from_le_bytes(
                    garbage[off + id_off..off + id_off + 4]
                        .try_into()
                        .expect("4"),
                );
                if id == slot {
                    garbage[off + id_off] ^= 0x5A;
                }
                let id = u32::from_le_bytes(
                    garbage[off + id_off..off + id_off + 4]
                        .try_into()
                        .expect("4"),
                );
                let va = plan.garbage_page + off as u64;
                (
                    va,
                    ExpectedSlot::Invalid {
                        va,
                        why: format!(
                            "points into a page of random bytes: LoggerId {id:#x} != slot {slot}"
                        ),
                    },
                )
            }
            SlotSpec::Unmapped => (
                plan.unmapped,
                ExpectedSlot::Invalid {
                    va: plan.unmapped,
                    why: format!("context at {:#x} is not mapped (zero PTE)", plan.unmapped),
                },
            ),
            SlotSpec::Session(s)
            | SlotSpec::WrongId { session: s, .. }
            | SlotSpec::FreeTagged(s) => {
                let logger_id = match content {
                    SlotSpec::WrongId { logger_id, .. } => *logger_id,
                    _ => slot,
                };
                let sv = var.and_then(|v| v.sessions.get(&slot));
                let odd = sv.is_some_and(|x| !x.odd_fields.is_empty());
                assert!(
                    s.start_time < cfg.system_time,
                    "session {}: StartTime after the dump's SystemTime",
                    s.name
                );
                assert!(
                    odd || s.number_of_buffers <= s.maximum_buffers
                        && s.minimum_buffers <= s.maximum_buffers,
                    "session {}: buffer counts",
                    s.name
                );
                // Buffers really linked on GlobalList (NumberOfBuffers may be an odd value).
                let n = sv.map_or(s.number_of_buffers, |x| x.linked_buffers) as usize;
                assert!(
                    s.buffer_size as usize > buf_size,
                    "session {}: BufferSize",
                    s.name
                );
                assert!(
                    t.enum_name_of("_POOL_TYPE", s.pool_type.into()).is_some(),
                    "session {}: PoolType {:#x} is not a _POOL_TYPE of fixture {}",
                    s.name,
                    s.pool_type,
                    fx.name
                );
                if s.global_list == GlobalListSpec::Cyclic {
                    assert!(n >= 2, "a cyclic GlobalList needs 2 buffers");
                }
                let ctx = pool.alloc(ctx_size, b"EtwL");
                assert_eq!(ctx % align, 0);

                // Strings: the name (in pool, or on the page missing from the dump) and the
                // log file name; NUL-terminated, MaximumLength = Length + 2.
                let name16 = utf16le(&s.name);
                let name_va = if s.name_unreadable {
                    let hdr = pool.header_size();
                    let start = align_up(missing_cursor as u64, hdr as u64) as usize;
                    let arch = if x64 {
                        crate::config::Arch::X64
                    } else {
                        crate::config::Arch::X86Pae
                    };
                    pool_header(arch, &mut missing, start, name16.len() + 2, b"EtwN");
                    missing[start + hdr..start + hdr + name16.len()].copy_from_slice(&name16);
                    missing_cursor = start + hdr + name16.len() + 2;
                    plan.missing_page + (start + hdr) as u64
                } else {
                    let va = pool.alloc(name16.len() + 2, b"EtwN");
                    pool.slice_mut(va, name16.len()).copy_from_slice(&name16);
                    va
                };
                let log16 = s.log_file.as_deref().map(utf16le);
                let log_va = log16.as_ref().map(|l| {
                    let va = pool.alloc(l.len() + 2, b"EtwN");
                    pool.slice_mut(va, l.len()).copy_from_slice(l);
                    va
                });

                // Buffers on GlobalList: bare headers, or (EtwSpec::buffers) buffers with data.
                let plan = match content {
                    SlotSpec::Session(_) => spec.buffers.get(&slot),
                    _ => None,
                };
                let bufs: Vec<u64> = match plan {
                    None => (0..n).map(|_| pool.alloc(buf_size, b"EtwB")).collect(),
                    Some(p) => {
                        assert_eq!(
                            p.len(),
                            n,
                            "session {}: number_of_buffers != buffers planned",
                            s.name
                        );
                        assert!(
                            x64 || var.is_some(),
                            "buffers with data: x64 fixtures only (x86: variation mode)"
                        );
                        p.iter().map(|_| barea.alloc(s.buffer_size)).collect()
                    }
                };
                let ge = lay.off(BUF, "GlobalEntry");
                let head = ctx + lay.off(CTX, "GlobalList");
                let entries: Vec<u64> = bufs.iter().map(|b| b + ge).collect();
                let cycle_to = (s.global_list == GlobalListSpec::Cyclic).then(|| entries[n - 2]);
                let mut links = CtxLinks::default();
                let mut buffer_details = Vec::new();
                if let Some(p) = plan {
                    let placed = BufferPlacement {
                        lay: &lay,
                        plan: p,
                        bufs: &bufs,
                        entries: &entries,
                        head,
                        cycle_to,
                        buffer_size: s.buffer_size,
                        logger_id,
                        ctx,
                        timeline: Timeline::new(cfg, s.clock_type, p),
                    };
                    let (details, l) = placed.place(&mut buffer_pages, &mut layout_cache);
                    buffer_details = details;
                    links = l;
                    for (cpu, v) in &links.per_cpu {
                        assert!(*cpu < cfg.cpus, "per-CPU buffer of CPU {cpu} >= cpus");
                        per_cpu.push((*cpu, logger_id, *v));
                    }
                } else {
                    for (i, &b) in bufs.iter().enumerate() {
                        let mut h = vec![0u8; buf_size];
                        let flink = if i + 1 < n {
                            entries[i + 1]
                        } else {
                            cycle_to.unwrap_or(head)
                        };
                        let blink = if i == 0 { head } else { entries[i - 1] };
                        // State: the first buffer is in use (GeneralLogging 1), the others Free 0.
                        let cpu = (i as u32) % cfg.cpus;
                        BufferHeader {
                            buffer_size: s.buffer_size,
                            saved_offset: buf_size as u32,
                            current_offset: buf_size as u32,
                            offset: buf_size as u32,
                            sequence_number: i as u64,
                            state: u32::from(i == 0),
                            processor_index: BufferHeader::processor_index(cpu),
                            logger_id: logger_id as u16,
                            global_flink: flink,
                            global_blink: blink,
                            ..BufferHeader::default()
                        }
                        .write(&mut h, &lay);
                        pool.slice_mut(b, buf_size).copy_from_slice(&h);
                    }
                }

                // The context.
                let mut c = vec![0u8; ctx_size];
                lay.put(&mut c, CTX, "LoggerId", logger_id.into());
                lay.put(&mut c, CTX, "BufferSize", s.buffer_size.into());
                let max_event = s.buffer_size - buf_size as u32;
                lay.put_opt(&mut c, CTX, "MaximumEventSize", max_event.into());
                lay.put(&mut c, CTX, "LoggerMode", s.logger_mode.into());
                lay.put_opt(&mut c, CTX, "AcceptNewEvents", 1);
                lay.put_opt(&mut c, CTX, "CollectionOn", 1);
                let clock = lay.put_opt(&mut c, CTX, "ClockType", s.clock_type.into());
                lay.put(&mut c, CTX, "MinimumBuffers", s.minimum_buffers.into());
                lay.put(&mut c, CTX, "MaximumBuffers", s.maximum_buffers.into());
                lay.put(&mut c, CTX, "NumberOfBuffers", s.number_of_buffers.into());
                lay.put_opt(
                    &mut c,
                    CTX,
                    "BuffersAvailable",
                    u64::from(s.number_of_buffers.saturating_sub(1)),
                );
                lay.put(&mut c, CTX, "BuffersWritten", s.buffers_written.into());
                lay.put(&mut c, CTX, "EventsLost", s.events_lost.into());
                lay.put(&mut c, CTX, "LogBuffersLost", s.log_buffers_lost.into());
                lay.put(
                    &mut c,
                    CTX,
                    "RealTimeBuffersLost",
                    s.real_time_buffers_lost.into(),
                );
                lay.put_bytes(&mut c, CTX, "InstanceGuid", &s.instance_guid);
                lay.put(&mut c, CTX, "PoolType", s.pool_type.into());
                // StartTime is a LARGE_INTEGER (8 bytes).
                let st = lay.off(CTX, "StartTime") as usize;
                assert_eq!(t.field_size(CTX, "StartTime"), Some(8));
                put_u64(&mut c, st, s.start_time);
                let mut reference_time = None;
                if t.has_field(CTX, "ReferenceTime") {
                    let rt = lay.off(CTX, "ReferenceTime") as usize;
                    let r = "_ETW_REF_CLOCK";
                    let rc = match sv {
                        Some(x) => x.reference_time.clone(),
                        // A QPC value at 10 MHz since boot.
                        None => crate::etw::variation::RefClock {
                            start_time: s.start_time,
                            start_perf_clock: s
                                .start_time
                                .saturating_sub(cfg.system_time - cfg.system_up_time),
                        },
                    };
                    put_u64(&mut c, rt + lay.off(r, "StartTime") as usize, rc.start_time);
                    put_u64(
                        &mut c,
                        rt + lay.off(r, "StartPerfClock") as usize,
                        rc.start_perf_clock,
                    );
                    reference_time = Some(rc);
                }
                if let Some(silo) = silo_va {
                    lay.put_opt(&mut c, CTX, "SiloState", silo);
                }
                let ln = lay.off(CTX, "LoggerName") as usize;
                let nlen = u16::try_from(name16.len()).expect("name length");
                lay.put_unicode(&mut c, ln, nlen, nlen + 2, name_va);
                let lf = lay.off(CTX, "LogFileName") as usize;
                match (&log16, log_va) {
                    (Some(l), Some(va)) => {
                        let len = u16::try_from(l.len()).expect("log file length");
                        lay.put_unicode(&mut c, lf, len, len + 2, va);
                    }
                    _ => lay.put_unicode(&mut c, lf, 0, 0, 0),
                }
                if plan.is_some() {
                    links.write(&lay, &mut c, ctx);
                }
                // Flags bits.
                let mut flags = None;
                if t.has_field(CTX, "Flags") {
                    let mut v = 0u32;
                    for b in &s.flag_bits {
                        if let Some(bf) = t.bitfield(CTX, b) {
                            assert_eq!(bf.offset, lay.off(CTX, "Flags"), "{b} is not in Flags");
                            v |= ((1u32 << bf.width) - 1) << bf.position;
                        }
                    }
                    lay.put(&mut c, CTX, "Flags", v.into());
                    flags = Some(v);
                }
                // Every other LIST_ENTRY of the context is an empty list head; GlobalList is
                // the buffer list.
                for m in t.members_of_type(CTX, "struct _LIST_ENTRY") {
                    let off = lay.off(CTX, &m) as usize;
                    let me = ctx + off as u64;
                    if m == "GlobalList" {
                        if n == 0 {
                            lay.put_list(&mut c, off, me, me);
                        } else {
                            lay.put_list(&mut c, off, entries[0], entries[n - 1]);
                        }
                    } else {
                        lay.put_list(&mut c, off, me, me);
                    }
                }
                pool.slice_mut(ctx, ctx_size).copy_from_slice(&c);

                let probe_len = ctx_size;
                probes.push((format!("etw_logger_context_{slot}"), ctx, probe_len));
                if s.name_unreadable {
                    probes.push((
                        format!("etw_logger_name_unreadable_{slot}"),
                        name_va,
                        name16.len(),
                    ));
                }
                session_bufs.insert(slot, bufs.clone());
                let exp = match content {
                    SlotSpec::WrongId { logger_id, .. } => ExpectedSlot::Invalid {
                        va: ctx,
                        why: format!("LoggerId {logger_id:#x} != slot {slot} (a stale context)"),
                    },
                    SlotSpec::FreeTagged(_) => ExpectedSlot::Free { value: ctx | 1 },
                    _ => ExpectedSlot::Session(Box::new(ExpectedSession {
                        logger_id,
                        name: (!s.name_unreadable).then(|| s.name.clone()),
                        log_file: s.log_file.clone(),
                        logger_mode: s.logger_mode,
                        clock_type: clock.then_some(s.clock_type),
                        buffer_size: s.buffer_size,
                        minimum_buffers: s.minimum_buffers,
                        maximum_buffers: s.maximum_buffers,
                        number_of_buffers: s.number_of_buffers,
                        buffers_written: s.buffers_written,
                        events_lost: s.events_lost,
                        log_buffers_lost: s.log_buffers_lost,
                        real_time_buffers_lost: s.real_time_buffers_lost,
                        start_time: s.start_time,
                        pool_type: s.pool_type,
                        instance_guid: guid_to_string(&s.instance_guid),
                        context_va: ctx,
                        maximum_event_size: max_event,
                        flags,
                        name_va,
                        buffers: bufs.clone(),
                        global_list_cycle_to: cycle_to,
                        buffer_details,
                        odd_fields: sv.map(|x| x.odd_fields.clone()).unwrap_or_default(),
                        reference_time,
                    })),
                };
                let value = match content {
                    SlotSpec::FreeTagged(_) => ctx | 1,
                    _ => ctx,
                };
                (value, exp)
            }
        };
        slot_values[slot as usize] = value;
        expected[slot as usize] = exp;
    }

    // The array itself.
    let mut arr = vec![0u8; capacity as usize * ptr];
    for (i, &v) in slot_values.iter().enumerate() {
        arr[i * ptr..(i + 1) * ptr].copy_from_slice(&ptr_bytes(ptr, v));
    }
    match route {
        EtwRoute::Global => write_var(img, fx, "WmipLoggerContext", 0, &arr),
        EtwRoute::Inline | EtwRoute::Pointer => {
            pool.slice_mut(array_va, arr.len()).copy_from_slice(&arr)
        }
    }

    // Per-CPU current buffers (etw-internals.md §3.3).
    let mut processor_blocks = None;
    // KPRCB.EtwSupport targets (1607, per CPU), when the buffers mapped them.
    let mut es_blocks: Vec<u64> = Vec::new();
    // Variation mode: the per-CPU pointers of the non-pointer routes go into the EtwSupport
    // blocks that variation::place_cpu_state lays out.
    let var_per_cpu = var.is_some() && route != EtwRoute::Pointer;
    if !per_cpu.is_empty() && !var_per_cpu {
        match route {
            EtwRoute::Pointer => {
                // _ETW_SILODRIVERSTATE.ProcessorBlocks -> cpus x 0x40-byte
                // _ETW_SILO_TRACING_BLOCK {EX_FAST_REF *ProcessorBuffers; ULONGLONG
                // *EventsLoggedCount; LONGLONG *QpcDelta; ...}; ProcessorBuffers[LoggerId].
                let blocks = pool.alloc(cfg.cpus as usize * SILO_TRACING_BLOCK_SIZE, b"EtwB");
                for cpu in 0..cfg.cpus {
                    let arr = pool.alloc(capacity as usize * ptr, b"EtwB");
                    let counts = pool.alloc(capacity as usize * 8, b"EtwB");
                    let qpc = pool.alloc(8, b"EtwB");
                    for &(c, id, v) in &per_cpu {
                        if c == cpu {
                            put_u64(pool.slice_mut(arr + u64::from(id) * 8, 8), 0, v);
                            put_u64(
                                pool.slice_mut(counts + u64::from(id) * 8, 8),
                                0,
                                1000 + u64::from(id) * 37 + u64::from(cpu),
                            );
                        }
                    }
                    let b = blocks + u64::from(cpu) * SILO_TRACING_BLOCK_SIZE as u64;
                    let blk = pool.slice_mut(b, 0x18);
                    put_u64(blk, 0, arr);
                    put_u64(blk, 8, counts);
                    put_u64(blk, 0x10, qpc);
                }
                processor_blocks = Some(blocks);
            }
            EtwRoute::Inline => {
                // 10.0-1607 x64: *(KPRCB.EtwSupport + 0x40 + 8*LoggerId), event count at
                // EtwSupport + 0x240 + 8*LoggerId.
                assert!(x64, "EtwSupport offsets are known for x64 only");
                assert!(
                    fx.kprcb_size.is_some(),
                    "fixture {}: per-CPU buffers need mapped KPRCBs",
                    fx.name
                );
                let es_off = t
                    .offset_of("_KPRCB", "EtwSupport")
                    .expect("_KPRCB.EtwSupport");
                for cpu in 0..cfg.cpus {
                    let block = pool.alloc(ETW_SUPPORT_BLOCK_SIZE, b"Etwp");
                    es_blocks.push(block);
                    for &(c, id, v) in &per_cpu {
                        if c == cpu {
                            let o = 0x40 + u64::from(id) * 8;
                            put_u64(pool.slice_mut(block + o, 8), 0, v);
                            let o = 0x240 + u64::from(id) * 8;
                            put_u64(pool.slice_mut(block + o, 8), 0, 500 + u64::from(id));
                        }
                    }
                    kprcb_writes.push((prcbs[cpu as usize] + es_off, block.to_le_bytes().to_vec()));
                }
            }
            EtwRoute::Global => panic!(
                "fixture {}: per-CPU current buffers are not known for this era",
                fx.name
            ),
        }
    }

    // Pending compact context-switch blocks (etw-internals.md §4).
    let (pending, pending_decoys) = if spec.pending_ccswap {
        place_pending(
            &PendingCtx {
                cfg,
                t: &t,
                route,
                prcbs,
            },
            &mut pool,
            &mut es_blocks,
            &mut kprcb_writes,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    // Variation mode: KPRCB.MHz, EtwCPUSpeedInMHz, EtwSupport blocks, pending blocks.
    let var_out = var.map(|v| {
        crate::etw::variation::place_cpu_state(
            &mut crate::etw::variation::CpuCtx {
                cfg,
                t: &t,
                route,
                prcbs,
                pool: &mut pool,
                img,
                kprcb_writes: &mut kprcb_writes,
                per_cpu: if var_per_cpu {
                    per_cpu.clone()
                } else {
                    Vec::new()
                },
            },
            v,
        )
    });
    let (pending, pending_decoys) = match &var_out {
        Some(o) => (o.pending.clone(), o.decoys.clone()),
        None => (pending, pending_decoys),
    };

    // The silo state and the globals that point to it.
    if let Some(silo) = silo_va {
        let size = lay.size(SILO);
        let mut s = vec![0u8; size];
        if route == EtwRoute::Pointer {
            lay.put(&mut s, SILO, "EtwpLoggerContext", array_va);
            lay.put_opt(&mut s, SILO, "MaxLoggers", capacity.into());
        }
        lay.put_opt(&mut s, SILO, "Silo", 0);
        if let Some(g) = globals_va {
            lay.put_opt(&mut s, SILO, "SiloGlobals", g);
        }
        if let Some(b) = processor_blocks {
            lay.put(&mut s, SILO, "ProcessorBlocks", b);
        }
        // The inline array (1511 - 1703) lives inside the silo state.
        if route == EtwRoute::Inline {
            let off = lay.off(SILO, "WmipLoggerContext") as usize;
            s[off..off + arr.len()].copy_from_slice(&arr);
        }
        pool.slice_mut(silo, size).copy_from_slice(&s);
        write_var(img, fx, "EtwpHostSiloState", 0, &ptr_bytes(ptr, silo));
        if globals_va.is_some() {
            write_var(
                img,
                fx,
                "PspHostSiloGlobals",
                lay.off(GLOBALS, "EtwSiloState"),
                &ptr_bytes(ptr, silo),
            );
        }
    }
    // The symbol-less route: EtwpDebuggerData + 0x10 -> the array.
    write_var(img, fx, "EtwpDebuggerData", 0x10, &ptr_bytes(ptr, array_va));
    let debugger_data_array_ptr_va = va_of("EtwpDebuggerData").expect("required symbol") + 0x10;

    probes.insert(
        0,
        (
            "etw_logger_array".to_string(),
            array_va,
            capacity as usize * ptr,
        ),
    );
    probes.push(("etw_unmapped_slot_target".to_string(), plan.unmapped, 0x10));

    // Pages: the normal area, the garbage page, the page missing from the dump, and the
    // zero-PTE page.
    let used = align_up(pool.buf.len() as u64, PAGE_SIZE) as usize;
    pool.buf.resize(used, 0);
    let mut pages: Vec<EtwPage> = pool
        .buf
        .chunks(PAGE_SIZE as usize)
        .enumerate()
        .map(|(i, c)| EtwPage::Stored(plan.base + (i as u64) * PAGE_SIZE, c.to_vec()))
        .collect();
    pages.push(EtwPage::Stored(plan.garbage_page, garbage));
    pages.push(EtwPage::NotInDump(plan.missing_page));
    pages.push(EtwPage::ZeroPte(plan.unmapped & !(PAGE_SIZE - 1)));
    pages.extend(buffer_pages);

    let mut switches = Vec::new();
    if let Some(m) = &materialized {
        switches = crate::etw::variation::locate_buffer_switches(m, &session_bufs);
    }
    if let Some(o) = &var_out {
        switches.extend(o.switches.iter().cloned());
    }
    EtwBuild {
        pages,
        expected: ForgedEtw {
            route,
            array_va,
            capacity,
            silo_state_va: silo_va,
            host_silo_globals_va: if silo_va.is_some() { globals_va } else { None },
            debugger_data_array_ptr_va,
            slots: expected,
            pending,
            pending_decoys,
            switches,
            clock_model: var_out.as_ref().map(|o| o.clock_model.clone()),
            etw_support: var_out.as_ref().and_then(|o| o.etw_support.clone()),
            seed: var.map(|v| v.seed),
        },
        probes,
        kprcb_writes,
        unstored_image_pages: var_out.map(|o| o.unstored_image_pages).unwrap_or_default(),
    }
}

// ------------------------------------------------------------------------------------------
// Buffers with data

/// sizeof(_ETW_SILO_TRACING_BLOCK) of the pointer-based form (etw-internals.md §3.3).
const SILO_TRACING_BLOCK_SIZE: usize = 0x40;
/// Size of the forged KPRCB.EtwSupport block (1607): the per-logger slots end at 0x440, the
/// CCSwap pointers at 0xB40.
const ETW_SUPPORT_BLOCK_SIZE: usize = 0xC00;

/// Page-aligned VA area for buffers (big-pool allocations).
struct BufArea {
    next: u64,
    end: u64,
}

impl BufArea {
    fn new(x64: bool) -> Self {
        let base = if x64 {
            0xFFFF_A08D_8000_0000
        } else {
            0xA000_0000
        };
        BufArea {
            next: base,
            end: base + 0x4000_0000,
        }
    }

    fn alloc(&mut self, size: u32) -> u64 {
        let va = self.next;
        self.next = align_up(va + u64::from(size), PAGE_SIZE);
        assert!(self.next <= self.end, "ETW buffer area full");
        va
    }
}

/// Laid-out buffers by content, so that identical plans (the benchmark session) are encoded
/// once.
type LayoutCache =
    HashMap<(Vec<crate::etw::wmi_buffer::RecSpec>, u32, u64, String), std::rc::Rc<LaidOut>>;

/// What the context must point at for a session's buffers.
#[derive(Default)]
struct CtxLinks {
    /// (first SlistEntry, last SlistEntry) of BufferQueue / OverflowQueue.
    buffer_queue: Option<(u64, u64)>,
    overflow_queue: Option<(u64, u64)>,
    /// EX_FAST_REF value of CurrentBuffer.
    current_buffer: Option<u64>,
    compression_target: Option<u64>,
    /// (cpu, EX_FAST_REF value).
    per_cpu: Vec<(u32, u64)>,
}

impl CtxLinks {
    fn write(&self, lay: &Layouts, c: &mut [u8], ctx: u64) {
        self.write_queues(lay, c, ctx);
        if let Some(v) = self.current_buffer {
            lay.put_ptr_at(c, lay.off(CTX, "CurrentBuffer") as usize, v);
        }
        if let Some(v) = self.compression_target {
            lay.put(c, CTX, "CompressionTarget", v);
        }
    }

    /// BufferQueue / OverflowQueue (`_ETW_BUFFER_QUEUE`, 6.2+). 6.1 layouts (NBQHead) have
    /// none: a session there must not put buffers on queues.
    fn write_queues(&self, lay: &Layouts, c: &mut [u8], ctx: u64) {
        if !lay.t.has_field(CTX, "BufferQueue") {
            assert!(
                self.buffer_queue.is_none() && self.overflow_queue.is_none(),
                "this layout has no _ETW_BUFFER_QUEUE"
            );
            return;
        }
        let q = "_ETW_BUFFER_QUEUE";
        let tail_off = lay.off(q, "QueueTail");
        let entry_off = lay.off(q, "QueueEntry");
        for (field, v) in [
            ("BufferQueue", self.buffer_queue),
            ("OverflowQueue", self.overflow_queue),
        ] {
            let off = lay.off(CTX, field);
            let (first, last) = v.unwrap_or((0, ctx + off + entry_off));
            lay.put_ptr_at(c, (off + tail_off) as usize, last);
            lay.put_ptr_at(c, (off + entry_off) as usize, first);
        }
    }
}

struct BufferPlacement<'a> {
    lay: &'a Layouts<'a>,
    plan: &'a [BufferSpec],
    bufs: &'a [u64],
    entries: &'a [u64],
    head: u64,
    cycle_to: Option<u64>,
    buffer_size: u32,
    logger_id: u32,
    ctx: u64,
    timeline: Timeline,
}

/// Where a session's record timestamps lie, in its clock's units (§7; clock 0 counted as QPC):
/// from 10% of the uptime after boot to 1% of it before the dump, so every record is between
/// boot and the dump's SystemTime whatever its clock. Buffer `seq` starts at
/// `base + seq * 7919`; records step by 1..=`step_max`.
#[derive(Clone, Copy, Debug)]
struct Timeline {
    base: u64,
    step_max: u64,
    end: u64,
}

impl Timeline {
    fn new(cfg: &Config, clock: u32, plan: &[BufferSpec]) -> Timeline {
        let clock = if clock == 0 { 1 } else { clock };
        let now = clock_now(cfg, clock);
        let span = clock_now(cfg, clock) - clock_boot(cfg, clock);
        let base = now - span + span / 10;
        let end = now - span / 100;
        let max_seq = plan.iter().map(|b| b.sequence_number).max().unwrap_or(0);
        let max_records = plan
            .iter()
            .map(|b| b.records.len() as u64 + 2)
            .max()
            .unwrap_or(1);
        let room = (end - base).saturating_sub(max_seq * 7_919 + 10_000_000.min(span / 10));
        Timeline {
            base,
            step_max: (room / max_records.max(1)).clamp(1, 5000),
            end,
        }
    }
}

impl BufferPlacement<'_> {
    /// Write every buffer's pages; return the expectations and the context links.
    fn place(
        &self,
        pages: &mut Vec<EtwPage>,
        cache: &mut LayoutCache,
    ) -> (Vec<ExpectedBuffer>, CtxLinks) {
        let lay = self.lay;
        let n = self.plan.len();
        let link = lay.off(BUF, "NextBuffer") as usize;
        assert_eq!(link, lay.off(BUF, "SlistEntry") as usize);
        let mut links = CtxLinks::default();
        let mut lists: Vec<BTreeSet<&'static str>> = vec![BTreeSet::from(["global_list"]); n];

        // Queues, in plan order, linked through SlistEntry (+0x20).
        let mut next_link: Vec<u64> = vec![0; n];
        for kind in [QueueKind::BufferQueue, QueueKind::OverflowQueue] {
            let members: Vec<usize> = (0..n)
                .filter(|&i| self.plan[i].queue == Some(kind))
                .collect();
            if members.is_empty() {
                continue;
            }
            for w in members.windows(2) {
                next_link[w[0]] = self.bufs[w[1]] + link as u64;
            }
            let first = self.bufs[members[0]] + link as u64;
            let last = self.bufs[*members.last().expect("non-empty")] + link as u64;
            let name = match kind {
                QueueKind::BufferQueue => {
                    links.buffer_queue = Some((first, last));
                    "buffer_queue"
                }
                QueueKind::OverflowQueue => {
                    links.overflow_queue = Some((first, last));
                    "overflow_queue"
                }
            };
            for &i in &members {
                lists[i].insert(name);
            }
        }
        // Current buffers and the dirty chain (+0x20 = the previous buffer's base).
        for (i, b) in self.plan.iter().enumerate() {
            if let Some(j) = b.next_buffer {
                assert!(
                    b.queue.is_none(),
                    "a queued buffer's +0x20 is its queue link"
                );
                next_link[i] = self.bufs[j];
            }
            let tagged = self.bufs[i] | u64::from(b.fast_ref_tag & 0xF);
            if let Some(cpu) = b.per_cpu {
                links.per_cpu.push((cpu, tagged));
                lists[i].insert("per_cpu");
            }
            if b.current_buffer {
                assert!(links.current_buffer.is_none(), "one CurrentBuffer");
                links.current_buffer = Some(tagged);
                lists[i].insert("current_buffer");
            }
            if b.compression_target {
                links.compression_target = Some(self.bufs[i]);
                lists[i].insert("compression_target");
            }
        }
        for (i, b) in self.plan.iter().enumerate() {
            if b.per_cpu.is_none() && !b.current_buffer {
                continue;
            }
            let mut cur = b.next_buffer;
            let mut seen = BTreeSet::new();
            while let Some(j) = cur {
                if !seen.insert(j) || j == i {
                    break;
                }
                lists[j].insert("dirty_chain");
                cur = self.plan[j].next_buffer;
            }
        }

        let mut out = Vec::with_capacity(n);
        for (i, b) in self.plan.iter().enumerate() {
            let key = (
                b.records.clone(),
                self.buffer_size,
                b.compressed_len.unwrap_or(0) as u64,
                format!("{:?}{:?}{}", b.tail, b.offsets, b.fill_ff),
            );
            let seed = 0x00B0_FFE2 ^ (u64::from(self.logger_id) << 32) ^ (i as u64);
            let tl = self.timeline;
            let ts0 = tl.base + b.sequence_number * 7_919;
            let lo = if b.records.len() > 500 {
                cache
                    .entry(key)
                    .or_insert_with(|| {
                        std::rc::Rc::new(lay_out(
                            b,
                            self.buffer_size,
                            (ts0, tl.step_max),
                            &mut Rng::new(seed),
                        ))
                    })
                    .clone()
            } else {
                std::rc::Rc::new(lay_out(
                    b,
                    self.buffer_size,
                    (ts0, tl.step_max),
                    &mut Rng::new(seed),
                ))
            };
            let mut bytes = lo.bytes.clone();
            let flushed = b.state == crate::etw::wmi_buffer::STATE_FLUSH;
            let flink = if i + 1 < n {
                self.entries[i + 1]
            } else {
                self.cycle_to.unwrap_or(self.head)
            };
            let blink = if i == 0 {
                self.head
            } else {
                self.entries[i - 1]
            };
            BufferHeader {
                buffer_size: self.buffer_size,
                saved_offset: lo.saved_offset,
                current_offset: lo.current_offset,
                reference_count: u32::from(b.per_cpu.is_some() || b.current_buffer),
                timestamp: match b.header_timestamp {
                    Some(v) => v,
                    None if flushed => (ts0 + 9_999_999).min(tl.end),
                    None => 0,
                },
                sequence_number: b.sequence_number,
                next: next_link[i],
                processor_index: BufferHeader::processor_index(b.processor),
                logger_id: self.logger_id as u16,
                state: b.state,
                offset: lo.offset,
                buffer_flag: b.buffer_flag,
                buffer_type: b.buffer_type,
                global_flink: flink,
                global_blink: blink,
            }
            .write(&mut bytes, lay);
            for (k, chunk) in bytes.chunks(PAGE_SIZE as usize).enumerate() {
                let mut page = chunk.to_vec();
                page.resize(PAGE_SIZE as usize, 0);
                pages.push(EtwPage::Stored(self.bufs[i] + k as u64 * PAGE_SIZE, page));
            }
            let _ = self.ctx;
            out.push(ExpectedBuffer {
                session_id: self.logger_id,
                address: self.bufs[i],
                lists: lists[i].iter().map(|s| s.to_string()).collect(),
                state: b.state,
                buffer_type: b.buffer_type,
                buffer_flag: b.buffer_flag,
                processor: b.processor,
                sequence_number: b.sequence_number,
                buffer_size: self.buffer_size,
                valid_bytes: lo.valid,
                trimmed_bytes: lo.trimmed,
                record_count: lo.count,
                records_by_key: lo.by_key.clone(),
                compressed: b.compressed_len.is_some(),
                current_offset: lo.current_offset,
                saved_offset: lo.saved_offset,
                offset: lo.offset,
            });
        }
        (out, links)
    }
}

// ------------------------------------------------------------------------------------------
// Pending compact context-switch blocks (etw-internals.md §4.1-§4.3)

/// Pool tag of the pending blocks ('CCsw' = 43 43 73 77).
pub(crate) const CCSW_TAG: &[u8; 4] = b"CCsw";
/// 1607 x64: the pending pointers at KPRCB.EtwSupport + 0xB20 + 8*clock (§4.1).
pub(crate) const CCSWAP_1607_OFFSET: u64 = 0xB20;
/// Unknown-offset route (1709+): where the forge puts the clock-1 pointer, and the decoys.
pub(crate) const CCSWAP_SEARCH_OFFSET: u64 = 0x2A8;
const CCSWAP_DECOY_TAG_OFFSET: u64 = 0x2B0;
const CCSWAP_DECOY_USED_OFFSET: u64 = 0x2B8;
/// Size of the EtwSupport block mapped on the pointer route for this option.
const ETW_SUPPORT_BLOCK_SIZE_SEARCH: usize = 0x1000;

/// MaximumWaitReason (the last `_KWAIT_REASON` constant) of `build` (§4.3 table).
pub(crate) fn max_wait_reason(build: u32) -> u8 {
    match build {
        0..=7601 => 37,
        7602..=14393 => 39,
        14394..=20348 => 40,
        _ => 41,
    }
}

/// The CPU speed of the standard dumps' cycle clock (3 GHz), written to every KPRCB.MHz.
pub const STANDARD_CPU_MHZ: u32 = 3000;

/// "Now" in the units of session clock `clock` (§7): 1 QPC at 10 MHz since boot, 2 system
/// time (FILETIME), 3 a 3 GHz cycle counter since boot.
fn clock_now(cfg: &Config, clock: u32) -> u64 {
    match clock {
        1 => cfg.system_up_time,
        2 => cfg.system_time,
        3 => cfg.system_up_time * 300,
        _ => panic!("clock type {clock}"),
    }
}

/// The value of session clock `clock` at boot (0 for the counters, the boot FILETIME for
/// system time).
fn clock_boot(cfg: &Config, clock: u32) -> u64 {
    match clock {
        2 => cfg.system_time - cfg.system_up_time,
        _ => 0,
    }
}

/// A session-clock time as 100 ns units since boot.
fn clock_to_uptime(cfg: &Config, clock: u32, v: u64) -> u64 {
    match clock {
        1 => v,
        2 => v - (cfg.system_time - cfg.system_up_time),
        3 => v / 300,
        _ => panic!("clock type {clock}"),
    }
}

/// `b` shifted so that its last switch lies `gap` clock units before the dump; and StartTick
/// (the KUSER_SHARED_DATA tick, 15.625 ms, of FirstTimeStamp).
fn retime(
    cfg: &Config,
    clock: u32,
    b: &crate::etw::ccswap::Batch,
    gap: u64,
) -> (crate::etw::ccswap::Batch, u32) {
    let span = b.last_time() - b.first_time;
    let now = clock_now(cfg, clock);
    let boot = clock_now(cfg, clock)
        - match clock {
            3 => cfg.system_up_time * 300,
            _ => cfg.system_up_time,
        };
    assert!(
        boot + span + gap < now,
        "batch of span {span:#x} does not fit clock {clock} before the dump"
    );
    let first = now - gap - span;
    let mut out = b.clone();
    out.first_time = first;
    for s in &mut out.switches {
        s.time = s.time - b.first_time + first;
    }
    let tick = clock_to_uptime(cfg, clock, first) / 156_250;
    (out, tick as u32)
}

/// One known batch by the start of its description.
fn known(prefix: &str) -> crate::etw::ccswap::Batch {
    crate::etw::ccswap::known_batches()
        .into_iter()
        .find(|(d, _, _)| d.starts_with(prefix))
        .unwrap_or_else(|| panic!("no known batch {prefix:?}"))
        .1
}

/// What a pending slot holds.
enum PendingKind {
    /// An open batch (possibly with no switches).
    Open(crate::etw::ccswap::Batch),
    /// UsedBytes 0: an all-zero block.
    Closed,
}

struct PendingCtx<'a> {
    cfg: &'a Config,
    t: &'a TypesH,
    route: EtwRoute,
    prcbs: &'a [u64],
}

/// Allocate a 0x400-byte 'CCsw' block (16-byte POOL_HEADER before it) and fill it.
fn pending_block(
    px: &PendingCtx,
    pool: &mut Pool,
    cpu: u32,
    clock: u32,
    kind: PendingKind,
    mwr: u8,
    gap: u64,
) -> (u64, u32, u32, Option<crate::etw::ccswap::Batch>) {
    use crate::etw::ccswap::{encode_pending_block, encode_pending_block_with, PENDING_BLOCK_SIZE};
    let va = pool.alloc(PENDING_BLOCK_SIZE, CCSW_TAG);
    let (bytes, batch, tick) = match kind {
        PendingKind::Open(b) => {
            let (b, tick) = retime(px.cfg, clock, &b, gap + u64::from(cpu) * 1000);
            (encode_pending_block(&b, tick, mwr), Some(b), tick)
        }
        PendingKind::Closed => {
            let empty = crate::etw::ccswap::Batch {
                first_time: 0,
                tids: Vec::new(),
                base_priorities: Vec::new(),
                switches: Vec::new(),
            };
            (encode_pending_block_with(&empty, 0, mwr, false), None, 0)
        }
    };
    pool.slice_mut(va, PENDING_BLOCK_SIZE)
        .copy_from_slice(&bytes);
    let used = u32::from_le_bytes(bytes[0..4].try_into().expect("4"));
    (va, used, tick, batch)
}

/// Place the pending blocks of [`EtwSpec::with_pending_ccswap`]; map the EtwSupport blocks
/// the route needs (appending to `es_blocks` / `kprcb_writes`).
fn place_pending(
    px: &PendingCtx,
    pool: &mut Pool,
    es_blocks: &mut Vec<u64>,
    kprcb_writes: &mut Vec<(u64, Vec<u8>)>,
) -> (Vec<ExpectedPending>, Vec<ExpectedPendingDecoy>) {
    let cfg = px.cfg;
    let fx = cfg.fixture.as_ref().expect("fixture");
    assert!(
        cfg.arch.is_x64() && px.route != EtwRoute::Global,
        "fixture {}: pending compact cswitch blocks need an x64 1607+ fixture",
        fx.name
    );
    assert!(
        fx.kprcb_size.is_some(),
        "fixture {}: pending compact cswitch blocks need mapped KPRCBs",
        fx.name
    );
    let es_off =
        px.t.offset_of("_KPRCB", "EtwSupport")
            .expect("_KPRCB.EtwSupport");
    let mwr = max_wait_reason(cfg.build);
    let mut pending = Vec::new();
    let mut decoys = Vec::new();
    match px.route {
        EtwRoute::Inline => {
            if es_blocks.is_empty() {
                for cpu in 0..cfg.cpus {
                    let block = pool.alloc(ETW_SUPPORT_BLOCK_SIZE, b"Etwp");
                    es_blocks.push(block);
                    kprcb_writes.push((
                        px.prcbs[cpu as usize] + es_off,
                        block.to_le_bytes().to_vec(),
                    ));
                }
            }
            let mut nearly_full = known("block filled");
            nearly_full.switches.pop(); // UsedBytes 0x3F8
            let plan: Vec<(u32, u32, PendingKind, u64)> = vec![
                (
                    0,
                    1,
                    PendingKind::Open(known("priority increments")),
                    20_000,
                ),
                (1, 1, PendingKind::Open(nearly_full), 3_000),
                (2, 1, PendingKind::Open(known("open batch with no")), 50_000),
                (3, 3, PendingKind::Open(known("delta limits")), 900_000),
                (0, 2, PendingKind::Closed, 0),
            ];
            for (cpu, clock, kind, gap) in plan {
                if cpu >= cfg.cpus {
                    continue;
                }
                let (va, used, tick, batch) = pending_block(px, pool, cpu, clock, kind, mwr, gap);
                let ptr_va = es_blocks[cpu as usize] + CCSWAP_1607_OFFSET + 8 * u64::from(clock);
                put_u64(pool.slice_mut(ptr_va, 8), 0, va);
                pending.push(ExpectedPending {
                    cpu,
                    clock: Some(clock),
                    block_va: va,
                    pointer_va: ptr_va,
                    used_bytes: used,
                    start_tick: tick,
                    batch,
                    max_wait_reason: mwr,
                    true_clock: clock,
                    documented_offset: true,
                    group_offset: CCSWAP_1607_OFFSET,
                });
            }
        }
        EtwRoute::Pointer => {
            assert!(
                es_blocks.is_empty(),
                "the pointer route has no forged EtwSupport block"
            );
            for cpu in 0..cfg.cpus {
                let es = pool.alloc(ETW_SUPPORT_BLOCK_SIZE_SEARCH, b"Etwp");
                es_blocks.push(es);
                kprcb_writes.push((px.prcbs[cpu as usize] + es_off, es.to_le_bytes().to_vec()));
                let kind = match cpu {
                    0 => PendingKind::Open(known(
                        "waiting (several wait reasons) vs states 1, 2, 3, 7; MaximumWaitReason 40",
                    )),
                    1 => PendingKind::Open(known("block filled")),
                    2 => PendingKind::Open(known("open batch with no")),
                    3 => PendingKind::Open(known("idle switches")),
                    _ => PendingKind::Closed,
                };
                let (va, used, tick, batch) = pending_block(px, pool, cpu, 1, kind, mwr, 7_000);
                let ptr_va = es + CCSWAP_SEARCH_OFFSET;
                put_u64(pool.slice_mut(ptr_va, 8), 0, va);
                pending.push(ExpectedPending {
                    cpu,
                    clock: None,
                    block_va: va,
                    pointer_va: ptr_va,
                    used_bytes: used,
                    start_tick: tick,
                    batch,
                    max_wait_reason: mwr,
                    true_clock: 1,
                    documented_offset: false,
                    group_offset: CCSWAP_SEARCH_OFFSET - 8,
                });
                // Decoy 1: a plausible pending block with the wrong pool tag.
                let (b, tick) = retime(cfg, 1, &known("wait time 0 and 1"), 9_000);
                let bytes = crate::etw::ccswap::encode_pending_block(&b, tick, mwr);
                let d1 = pool.alloc(bytes.len(), b"Etwp");
                pool.slice_mut(d1, bytes.len()).copy_from_slice(&bytes);
                let p1 = es + CCSWAP_DECOY_TAG_OFFSET;
                put_u64(pool.slice_mut(p1, 8), 0, d1);
                decoys.push(ExpectedPendingDecoy {
                    cpu,
                    pointer_va: p1,
                    block_va: d1,
                    why: "pool tag 'Etwp', not 'CCsw'".to_string(),
                });
                // Decoy 2: 'CCsw' but UsedBytes 0x50 (< 0x68).
                let mut bytes = bytes;
                bytes[0..4].copy_from_slice(&0x50u32.to_le_bytes());
                let d2 = pool.alloc(bytes.len(), CCSW_TAG);
                pool.slice_mut(d2, bytes.len()).copy_from_slice(&bytes);
                let p2 = es + CCSWAP_DECOY_USED_OFFSET;
                put_u64(pool.slice_mut(p2, 8), 0, d2);
                decoys.push(ExpectedPendingDecoy {
                    cpu,
                    pointer_va: p2,
                    block_va: d2,
                    why: "UsedBytes 0x50 (neither 0 nor 0x68..=0x400)".to_string(),
                });
            }
        }
        EtwRoute::Global => unreachable!("checked"),
    }
    (pending, decoys)
}
