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
//!
//! Every context's `GetCpuClock` holds what a clean kernel stores for its ClockType (the clock
//! routine's address, or from 19041 on an index: `cpu_clock.rs`). Opt-in on top: providers
//! ([`EtwSpec::with_providers`]: the GUID hash table, `_ETW_GUID_ENTRY`s, `_ETW_REG_ENTRY`s and
//! the `Etw*RegHandle` globals, `providers.rs`) and tampered variants with the findings a checker
//! must report ([`EtwSpec::with_tampering`], `tamper.rs`).

pub(crate) mod buffers;
pub mod ccswap;
pub(crate) mod cpu_clock;
mod duplicates;
mod loggers;
mod pending;
mod placement;
pub(crate) mod provider_guids;
pub mod providers;
pub mod realtime;
pub mod scan;
pub mod tamper;
pub mod variation;

pub(crate) use loggers::build;
pub(crate) use pending::*;
pub(crate) mod message;
pub mod payloads;
pub use pending::{late_win11_etw_support, CCSWAP_LATE_WIN11_OFFSET, LATE_WIN11_BUFFERS_OFFSET};
pub(crate) mod wmi_buffer;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::config::Config;
use crate::etw::buffers::{BufferSpec, ExpectedBuffer, QueueKind};
use crate::etw::wmi_buffer::{lay_out, LaidOut};
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
    /// The processes (by PID, among [`crate::Config::with_processes`]'s) consuming the session
    /// in real time: one `_ETW_REALTIME_CONSUMER` each on the context's `Consumers` list, where
    /// the fixture's types.h has the structure.
    pub consumers: Vec<u64>,
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
#[derive(Clone, PartialEq, Eq)]
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
    /// Scan scenarios (stopped sessions, stale copies, orphaned 'CCsw' blocks, decoys; see
    /// [`EtwSpec::with_stopped_sessions`] and [`crate::ForgedScan`]). `None` in every other spec:
    /// nothing is added, and `Debug` leaves the field out (golden hashes unchanged).
    pub scan: Option<scan::ScanSpec>,
    /// Providers and registrations (the GUID table, `_ETW_GUID_ENTRY`s, `_ETW_REG_ENTRY`s, the
    /// `Etw*RegHandle` globals; [`EtwSpec::with_providers`]). `None` in every standard spec:
    /// the GUID table stays zero, every handle NULL, and `Debug` leaves the field out.
    pub providers: Option<providers::ProvidersSpec>,
    /// Tampered state a checker must report ([`EtwSpec::with_tampering`],
    /// [`crate::ExpectedFinding`]). `None` in every other spec (and left out of `Debug`).
    pub tampering: Option<tamper::TamperSpec>,
    /// Buffers queued for the real-time consumers in their processes' own address spaces
    /// ([`EtwSpec::with_realtime_buffers`], `realtime.rs`). `None` in every other spec: nothing
    /// is drawn or allocated, and `Debug` leaves the field out.
    pub realtime: Option<realtime::RealtimeBuffers>,
}

impl std::fmt::Debug for EtwSpec {
    /// The derived rendering, with `scan` appended only when it is set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("EtwSpec");
        d.field("max_loggers", &self.max_loggers)
            .field("slots", &self.slots)
            .field("buffers", &self.buffers)
            .field("pending_ccswap", &self.pending_ccswap)
            .field("variation", &self.variation);
        if let Some(s) = &self.scan {
            d.field("scan", s);
        }
        if let Some(p) = &self.providers {
            d.field("providers", p);
        }
        if let Some(t) = &self.tampering {
            d.field("tampering", t);
        }
        if let Some(r) = &self.realtime {
            d.field("realtime", r);
        }
        d.finish()
    }
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
    /// The real-time consumers placed on `Consumers` ([`SessionSpec::consumers`]), in list
    /// order.
    pub consumers: Vec<ExpectedConsumer>,
    /// `GetCpuClock` as written (None where the layout has no such field): the address of the
    /// clock routine of the session's ClockType (function-pointer layouts, up to 18362), or a
    /// small index (19041+); see `cpu_clock.rs`. A tampered dump ([`crate::TamperKind::ClockHook`])
    /// holds the hook here.
    pub get_cpu_clock: Option<u64>,
    /// The routine `get_cpu_clock` points at ("EtwpGetPerfCounter", "EtwpGetSystemTime",
    /// "EtwpGetCycleCount"); None for an index or a hook.
    pub clock_routine: Option<String>,
}

/// One `_ETW_REALTIME_CONSUMER` the forge placed.
#[derive(Clone, PartialEq, Eq)]
pub struct ExpectedConsumer {
    /// Its address (`Links` at offset 0).
    pub va: u64,
    /// The consuming process (ProcessObject's UniqueProcessId) and its EPROCESS.
    pub pid: u64,
    pub eprocess: u64,
    /// LoggerId, BuffersLost and EmptyBuffersCount as written.
    pub logger_id: u32,
    pub buffers_lost: u32,
    pub empty_buffers: u32,
    /// The buffers queued for it in its process's address space
    /// ([`EtwSpec::with_realtime_buffers`]): its `UserBufferListHead`, `UserBufferCount`,
    /// reserved space, the process's DirectoryTableBase, the nodes and copies a reader must
    /// find. `None` without the option (the user-mode pointers are NULL).
    pub realtime: Option<realtime::ExpectedRealtime>,
}

impl std::fmt::Debug for ExpectedConsumer {
    /// The derived rendering, with `realtime` appended only when it is set (golden hashes of
    /// the dumps without realtime buffers unchanged).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ExpectedConsumer");
        d.field("va", &self.va)
            .field("pid", &self.pid)
            .field("eprocess", &self.eprocess)
            .field("logger_id", &self.logger_id)
            .field("buffers_lost", &self.buffers_lost)
            .field("empty_buffers", &self.empty_buffers);
        if let Some(r) = &self.realtime {
            d.field("realtime", r);
        }
        d.finish()
    }
}

/// What the forge put in a dump for [`Config::etw`] ([`crate::Forged::etw`]).
#[derive(Clone, PartialEq, Eq)]
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
    // ---- providers ([`EtwSpec::with_providers`]; empty / None otherwise) ----
    /// The GUID hash table: where, its shape, how GUIDs were assigned to buckets.
    pub guid_table: Option<providers::ExpectedGuidTable>,
    /// Every `_ETW_GUID_ENTRY` placed, in placement order.
    pub providers: Vec<providers::ExpectedProvider>,
    /// Every `Etw*RegHandle` global of the fixture (by name) and what it holds.
    pub reg_handles: Vec<providers::ExpectedRegHandle>,
    /// What a checker must report ([`EtwSpec::with_tampering`]); empty for every clean dump.
    pub findings: Vec<tamper::ExpectedFinding>,
    // ---- duplicate switches ([`Config::with_duplicate_switches`]; empty otherwise) ----
    /// Pairs of indices into `switches` that are the same context switch recorded twice: a
    /// 0x0524 CSwitch event of one session and a 0x0525 batch switch or pending-block switch
    /// of another (each in its own session's clock). `Debug` leaves it out when empty.
    pub same_switch: Vec<[usize; 2]>,
    /// Pairs of indices into `switches` that are distinct switches on the same CPU with the
    /// same old and new thread, 1 to 20 ms apart (a reader must not merge them). `Debug`
    /// leaves it out when empty.
    pub lookalikes: Vec<[usize; 2]>,
}

impl std::fmt::Debug for ForgedEtw {
    /// The derived rendering, with `same_switch` and `lookalikes` appended only when set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ForgedEtw");
        d.field("route", &self.route)
            .field("array_va", &self.array_va)
            .field("capacity", &self.capacity)
            .field("silo_state_va", &self.silo_state_va)
            .field("host_silo_globals_va", &self.host_silo_globals_va)
            .field(
                "debugger_data_array_ptr_va",
                &self.debugger_data_array_ptr_va,
            )
            .field("slots", &self.slots)
            .field("pending", &self.pending)
            .field("pending_decoys", &self.pending_decoys)
            .field("switches", &self.switches)
            .field("clock_model", &self.clock_model)
            .field("etw_support", &self.etw_support)
            .field("seed", &self.seed)
            .field("guid_table", &self.guid_table)
            .field("providers", &self.providers)
            .field("reg_handles", &self.reg_handles)
            .field("findings", &self.findings);
        if !self.same_switch.is_empty() {
            d.field("same_switch", &self.same_switch);
        }
        if !self.lookalikes.is_empty() {
            d.field("lookalikes", &self.lookalikes);
        }
        d.finish()
    }
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
        let mut slots = BTreeMap::new();
        for row in STANDARD_SESSIONS {
            slots.insert(row.slot, SlotSpec::Session(row.spec(build)));
        }
        slots.insert(7, SlotSpec::Garbage);
        slots.insert(
            8,
            SlotSpec::WrongId {
                logger_id: 0x21,
                session: STALE_SESSION.spec(build),
            },
        );
        slots.insert(9, SlotSpec::Unmapped);
        slots.insert(63, SlotSpec::Free(0));
        if max_loggers > 64 {
            let slot = max_loggers - 6;
            let row = StandardSession {
                slot,
                ..HIGH_SLOT_SESSION
            };
            slots.insert(slot, SlotSpec::Session(row.spec(build)));
        }
        EtwSpec::with_slots(max_loggers, slots)
    }

    /// A spec with these slots and nothing else (no buffers, pending blocks, variation, scan,
    /// providers or tampering).
    pub(crate) fn with_slots(max_loggers: u32, slots: BTreeMap<u32, SlotSpec>) -> EtwSpec {
        EtwSpec {
            max_loggers,
            slots,
            buffers: BTreeMap::new(),
            pending_ccswap: false,
            variation: None,
            scan: None,
            providers: None,
            tampering: None,
            realtime: None,
        }
    }
}

/// A session of the standard set: its slot (its LoggerId, and the seed of its GUID) and
/// context values.
#[derive(Clone, Copy)]
struct StandardSession {
    slot: u32,
    name: &'static str,
    log_file: Option<&'static str>,
    /// LoggerMode, without `EVENT_TRACE_SYSTEM_LOGGER_MODE` (see `system_logger`).
    logger_mode: u32,
    /// Adds `EVENT_TRACE_SYSTEM_LOGGER_MODE` from 9200 on.
    system_logger: bool,
    clock_type: u32,
    buffer_size: u32,
    /// [MinimumBuffers, MaximumBuffers, NumberOfBuffers].
    counts: [u32; 3],
    /// [BuffersWritten, EventsLost, LogBuffersLost, RealTimeBuffersLost].
    lost: [u32; 4],
    /// StartTime, 100 ns after the boot of [`Config::x64`].
    start: u64,
    /// PagedPool, else NonPagedPool(Nx).
    paged: bool,
    flag_bits: &'static [&'static str],
    global_list: GlobalListSpec,
    name_unreadable: bool,
}

impl StandardSession {
    fn spec(&self, build: u32) -> SessionSpec {
        let base = Config::x64();
        let boot = base.system_time - base.system_up_time;
        let win8 = build >= 9200;
        let system_logger = if win8 && self.system_logger {
            EVENT_TRACE_SYSTEM_LOGGER_MODE
        } else {
            0
        };
        let pool_type = if self.paged {
            PAGED_POOL
        } else if win8 {
            NON_PAGED_POOL_NX
        } else {
            NON_PAGED_POOL
        };
        SessionSpec {
            name: self.name.to_string(),
            log_file: self.log_file.map(str::to_string),
            logger_mode: self.logger_mode | system_logger,
            clock_type: self.clock_type,
            buffer_size: self.buffer_size,
            minimum_buffers: self.counts[0],
            maximum_buffers: self.counts[1],
            number_of_buffers: self.counts[2],
            buffers_written: self.lost[0],
            events_lost: self.lost[1],
            log_buffers_lost: self.lost[2],
            real_time_buffers_lost: self.lost[3],
            start_time: boot + self.start,
            pool_type,
            instance_guid: session_guid(build, self.slot),
            name_unreadable: self.name_unreadable,
            global_list: self.global_list,
            flag_bits: self.flag_bits.iter().map(|s| s.to_string()).collect(),
            consumers: Vec::new(),
        }
    }
}

/// The template row: every field is set by each session below.
const ROW: StandardSession = StandardSession {
    slot: 0,
    name: "",
    log_file: None,
    logger_mode: 0,
    system_logger: false,
    clock_type: 0,
    buffer_size: 0,
    counts: [0; 3],
    lost: [0; 4],
    start: 0,
    paged: false,
    flag_bits: &[],
    global_list: GlobalListSpec::Ring,
    name_unreadable: false,
};

/// The standard sessions in slots 0 to 6.
const STANDARD_SESSIONS: &[StandardSession] = &[
    StandardSession {
        slot: 0,
        name: "NT Kernel Logger",
        log_file: Some("C:\\Windows\\Temp\\kernel.etl"),
        logger_mode: EVENT_TRACE_FILE_MODE_SEQUENTIAL,
        clock_type: 3,
        buffer_size: 0x2_0000,
        counts: [4, 20, 6],
        lost: [419, 17, 2, 0],
        start: 31_234_567,
        flag_bits: &["KernelTrace"],
        ..ROW
    },
    StandardSession {
        slot: 2,
        name: "Circular Kernel Context Logger",
        logger_mode: EVENT_TRACE_BUFFERING_MODE,
        system_logger: true,
        clock_type: 1,
        buffer_size: 0x1_0000,
        counts: [2, 8, 4],
        lost: [0, 0, 0, 0],
        start: 4_567_891,
        flag_bits: &["KernelTrace", "AutoLogger"],
        ..ROW
    },
    StandardSession {
        slot: 3,
        name: "EventLog-System",
        logger_mode: EVENT_TRACE_REAL_TIME_MODE | EVENT_TRACE_USE_PAGED_MEMORY,
        clock_type: 2,
        buffer_size: 0x8000,
        counts: [2, 12, 3],
        lost: [57, 1, 0, 3],
        start: 12_345_678,
        paged: true,
        flag_bits: &["RealTime", "AutoLogger"],
        ..ROW
    },
    StandardSession {
        slot: 4,
        name: "WdiContextLog",
        logger_mode: EVENT_TRACE_BUFFERING_MODE,
        clock_type: 0,
        buffer_size: 0x4000,
        counts: [2, 6, 2],
        lost: [0, 4, 0, 0],
        start: 9_876_543,
        flag_bits: &["AutoLogger"],
        ..ROW
    },
    StandardSession {
        slot: 5,
        name: "LwtNetLog",
        log_file: Some("C:\\Windows\\System32\\LogFiles\\WMI\\LwtNetLog.etl"),
        logger_mode: EVENT_TRACE_FILE_MODE_CIRCULAR,
        clock_type: 1,
        buffer_size: 0x4_0000,
        counts: [3, 9, 3],
        lost: [88, 0, 5, 0],
        start: 14_141_414,
        flag_bits: &["AutoLogger"],
        global_list: GlobalListSpec::Cyclic,
        ..ROW
    },
    StandardSession {
        slot: 6,
        name: "UBPM",
        logger_mode: EVENT_TRACE_REAL_TIME_MODE,
        clock_type: 2,
        buffer_size: 0x2000,
        counts: [2, 4, 2],
        lost: [7, 0, 0, 1],
        start: 6_543_210,
        flag_bits: &["RealTime", "AutoLogger"],
        name_unreadable: true,
        ..ROW
    },
];

/// The stale context of slot 8 (LoggerId 0x21).
const STALE_SESSION: StandardSession = StandardSession {
    slot: 0x21,
    name: "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace",
    logger_mode: EVENT_TRACE_REAL_TIME_MODE,
    clock_type: 1,
    buffer_size: 0x3000,
    counts: [2, 4, 2],
    lost: [0, 0, 0, 0],
    start: 1_111_111,
    flag_bits: &["RealTime"],
    ..ROW
};

/// The session above slot 63 when MaxLoggers > 64 (its slot set at `max_loggers - 6`).
const HIGH_SLOT_SESSION: StandardSession = StandardSession {
    slot: 0,
    name: "SleepStudyTraceSession",
    log_file: Some("C:\\Windows\\System32\\SleepStudy\\UserNotPresentSession.etl"),
    logger_mode: EVENT_TRACE_FILE_MODE_SEQUENTIAL,
    clock_type: 1,
    buffer_size: 0x1000,
    counts: [1, 3, 1],
    lost: [3, 0, 0, 0],
    start: 27_182_818,
    flag_bits: &[],
    ..ROW
};

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
    /// on 1709+, `(*(KPRCB.EtwSupport + 0x140))[LoggerId]` on the later-Win11 layout of
    /// [`late_win11_etw_support`] (x64-26100; ProcessorBlocks NULL)).
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
            consumers: Vec::new(),
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
    /// This spec with every session's BufferSize capped at `cap` (a multiple of 1 KiB); each
    /// buffer keeps the records that fit (room is left for the header and a tail record), a
    /// compressed length is cut to the same room. Small dumps with every kind of record: the
    /// sample and the fuzz pipeline's bases.
    pub fn with_buffer_size_cap(mut self, cap: u32) -> EtwSpec {
        let mut sizes = std::collections::BTreeMap::new();
        for (slot, s) in self.slots.iter_mut() {
            if let SlotSpec::Session(s) = s {
                s.buffer_size = s.buffer_size.min(cap);
                sizes.insert(*slot, s.buffer_size as usize);
            }
        }
        for (slot, plan) in self.buffers.iter_mut() {
            // Room for the header (0x48) and a tail record (Tail::HalfWritten etc., < 0x200).
            let size = sizes.get(slot).copied().unwrap_or(cap as usize);
            let room = size.saturating_sub(0x48 + 0x200);
            for b in plan.iter_mut() {
                let mut used = 0;
                b.records.retain(|r| {
                    used += (r.size() + 7) & !7;
                    used <= room
                });
                if let Some(n) = b.compressed_len.as_mut() {
                    *n = (*n).min(room);
                }
            }
        }
        self
    }

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
    /// * later Win11 x64 (KPRCB.EtwSupport at 0x8BA8 as in x64-26100, or the reference's 0x8BE8;
    ///   [`late_win11_etw_support`]): the documented group, *(EtwSupport + 0x198 + 8*clock), with
    ///   the 1607 plan (CPU0 clock 1 partial, CPU1 clock 1 nearly full, CPU2 clock 1 open,
    ///   CPU3 clock 3 partial, CPU0 clock 2 closed); the 0x1000-byte EtwSupport blocks are the
    ///   ones [`EtwSpec::with_buffers`] maps for the per-CPU buffers (+0x140), else mapped for this
    ///   option. MaximumWaitReason as the forge's table gives for the build.
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
pub(crate) struct EtwVaPlan {
    pub(crate) base: u64,
    /// Normal allocations must end before this offset.
    limit: u64,
    garbage_page: u64,
    missing_page: u64,
    unmapped: u64,
    /// Objects mapped last ([`EtwBuild::late_pages`]): the tampered objects.
    pub(crate) late: u64,
    /// The realtime consumers' bitmaps (mapped after the late pages).
    pub(crate) realtime: u64,
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
            late: base + 0xA_0000,
            realtime: base + 0xB_0000,
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
    /// Scan scenarios ([`EtwSpec::scan`]): what `machine::build` places in physical memory after
    /// the ETW pages, and the objects whose addresses it resolves then.
    pub scan: Option<scan::ScanBuild>,
    /// Pages mapped after everything else (after the filler pages), so that they move no other
    /// page: the tampered objects ([`EtwSpec::with_tampering`]). Empty otherwise.
    pub late_pages: Vec<EtwPage>,
    /// The realtime consumers' bitmaps and user pages ([`EtwSpec::with_realtime_buffers`]),
    /// mapped after the late pages, each consumer process in its own PML4.
    pub realtime: Option<realtime::RealtimeBuild>,
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
    /// An empty pool area at `base` of at most `limit` bytes.
    pub(crate) fn new(x64: bool, base: u64, limit: usize) -> Pool {
        Pool {
            x64,
            base,
            buf: Vec::new(),
            cursor: 0,
            limit,
        }
    }

    /// Its pages (page-aligned VA, content), the last one zero-padded.
    pub(crate) fn into_pages(mut self) -> Vec<EtwPage> {
        let used = align_up(self.buf.len() as u64, PAGE_SIZE) as usize;
        self.buf.resize(used, 0);
        self.buf
            .chunks(PAGE_SIZE as usize)
            .enumerate()
            .map(|(i, c)| EtwPage::Stored(self.base + (i as u64) * PAGE_SIZE, c.to_vec()))
            .collect()
    }

    /// Whether `va..va+len` lies in what this pool has handed out.
    pub(crate) fn holds(&self, va: u64, len: usize) -> bool {
        va >= self.base && va + len as u64 <= self.base + self.buf.len() as u64
    }
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

    /// Turn the POOL_HEADER of the small allocation at `va` into a freed block's: the pool
    /// type bits become 0 (x64: the PoolType byte at +3; x86: bits 9..15 of the USHORT at +2),
    /// BlockSize and PoolTag stay. The reference says nothing about freed pool headers: this
    /// is an assumption (pool type 0 marks a free block; freeing leaves the tag in place).
    pub(crate) fn mark_freed(&mut self, va: u64) {
        let hdr = self.header_size() as u64;
        let off = (va - hdr - self.base) as usize;
        if self.x64 {
            self.buf[off + 3] = 0;
        } else {
            self.buf[off + 3] &= 0x01;
        }
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
