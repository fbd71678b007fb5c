//! The seeded variation mode: per dump, values a real kernel may hold but the reference
//! (shared/reference/etw-internals.md §1, §3, §4, §5, §7) does not pin down.
//!
//! ```no_run
//! use etwdump_forge::{forge, Config};
//! let dir = etwdump_forge::default_fixtures_root().join("x64-19041");
//! let f = forge(&Config::from_fixture(&dir).with_variation(7));
//! let e = f.etw.as_ref().unwrap();
//! let clock = e.clock_model.as_ref().unwrap();
//! for s in &e.switches {
//!     assert_eq!(s.filetime, clock.filetime(s.clock_type, s.raw_timestamp));
//! }
//! ```
//!
//! [`Config::with_variation`] is the entry point: it draws the CPU count and the clock model,
//! sets the header / KUSER_SHARED_DATA times from it and puts [`EtwSpec::varied`] into
//! `Config::etw`. [`EtwSpec::varied`] draws what needs only the build (sessions, slots, odd
//! counts, clocks); the forge then draws, from the same seed, what needs the config (buffers
//! with context switches per CPU, EtwSupport layout, pending blocks, decoys). Same seed, same
//! fixture: the same bytes. Everything is laid out from the fixture's types.h (never from
//! etwdump). See the README section "Variation mode" for what is drawn and why.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::Config;
use crate::etw::buffers::BufferSpec;
use crate::etw::ccswap::{self, Batch, Switch, PENDING_BLOCK_SIZE};
use crate::etw::wmi_buffer::{
    cswitch_version, Offsets, RecSpec, HOOK_COMPCS, HOOK_CSWITCH, STATE_FLUSH,
    STATE_GENERAL_LOGGING, WMI_BUFFER_HEADER_SIZE,
};
use crate::etw::{
    max_wait_reason, EtwRoute, EtwSpec, ExpectedPending, ExpectedPendingDecoy, ForgedEtw,
    GlobalListSpec, Pool, SessionSpec, SlotSpec, EVENT_TRACE_BUFFERING_MODE,
    EVENT_TRACE_FILE_MODE_CIRCULAR, EVENT_TRACE_FILE_MODE_SEQUENTIAL, EVENT_TRACE_REAL_TIME_MODE,
    EVENT_TRACE_SYSTEM_LOGGER_MODE, EVENT_TRACE_USE_PAGED_MEMORY, NON_PAGED_POOL,
    NON_PAGED_POOL_NX, PAGED_POOL,
};
use crate::kernel::pe::KernelImage;
use crate::kernel::types_h::TypesH;

// ------------------------------------------------------------------------------------------
// PRNG

/// SplitMix64, seeded per purpose (`seed ^ salt`), so that every seed is reproducible.
#[derive(Clone, Debug)]
pub struct VarRng(u64);

impl VarRng {
    pub fn new(seed: u64) -> Self {
        VarRng(seed ^ 0x5641_5249_4154_494F)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next_u64() % n
    }

    /// lo..=hi.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(hi >= lo, "empty range {lo:#x}..={hi:#x}");
        if hi - lo == u64::MAX {
            return self.next_u64();
        }
        lo + self.below(hi - lo + 1)
    }

    /// true with `percent` % probability.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Clone>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize].clone()
    }
}

const SALT_SPEC: u64 = 0;
const SALT_CFG: u64 = 0x0C0F_1600_0000_0001;
const SALT_MAT: u64 = 0x0B0F_0000_0000_0002;
const SALT_CPU: u64 = 0x0C0C_5A00_0000_0003;

// ------------------------------------------------------------------------------------------
// Clock model (§7)

/// 100 ns units per second.
pub const FILETIME_PER_SEC: u64 = 10_000_000;
/// KUSER_SHARED_DATA tick (15.625 ms) in 100 ns units.
pub const TICK_100NS: u64 = 156_250;

/// What the global `EtwCPUSpeedInMHz` holds in a variation dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuSpeedGlobal {
    /// Holds the CPU MHz.
    Present,
    /// Holds 0.
    Zero,
    /// The variable's page has a valid PTE but is not in the dump.
    NotInDump,
    /// The fixture has no such public (every current fixture).
    Absent,
}

impl CpuSpeedGlobal {
    /// "present", "zero", "not_in_dump" or "absent".
    pub fn name(self) -> &'static str {
        match self {
            CpuSpeedGlobal::Present => "present",
            CpuSpeedGlobal::Zero => "zero",
            CpuSpeedGlobal::NotInDump => "not_in_dump",
            CpuSpeedGlobal::Absent => "absent",
        }
    }
}

/// One dump's clocks. Raw clock values: QPC = `qpc_at_boot` + ticks since boot at
/// `qpc_frequency`; CPU cycles = `cycles_at_boot` + cycles since boot at `mhz`; system time =
/// FILETIME. ClockType 0 (raw) sessions get QPC values (the reference gives no conversion for
/// 0; [`ClockModel::filetime`] returns None for it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockModel {
    /// FILETIME of boot (= system_time - SystemUpTime).
    pub boot_filetime: u64,
    /// The dump's SystemTime (header and KUSER_SHARED_DATA.SystemTime).
    pub system_time: u64,
    /// QPC frequency (Hz); KUSER_SHARED_DATA.QpcFrequency where the build has the field.
    pub qpc_frequency: u64,
    /// Raw QPC value at boot (0, or a counter that started before boot).
    pub qpc_at_boot: u64,
    /// CPU speed: every KPRCB.MHz (and EtwCPUSpeedInMHz when `Present`).
    pub mhz: u32,
    /// Raw cycle counter at boot (0, or a TSC counting from reset; triage-etw.md).
    pub cycles_at_boot: u64,
    /// What the global EtwCPUSpeedInMHz holds (in the spec: the drawn wish; in
    /// [`ForgedEtw::clock_model`]: what was placed, `Absent` where the fixture has no public).
    pub etw_cpu_speed_global: CpuSpeedGlobal,
    /// KUSER_SHARED_DATA.QpcFrequency was written (the build's layout has the field).
    pub kuser_qpc_frequency: bool,
}

fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    (u128::from(a) * u128::from(b) / u128::from(c)) as u64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl ClockModel {
    /// SystemUpTime at the dump (100 ns).
    pub fn up_time(&self) -> u64 {
        self.system_time - self.boot_filetime
    }

    /// The raw value of `clock` at `uptime` (100 ns since boot), rounded down.
    pub fn raw_at(&self, clock: u32, uptime: u64) -> u64 {
        match clock {
            0 | 1 => self.qpc_at_boot + mul_div(uptime, self.qpc_frequency, FILETIME_PER_SEC),
            2 => self.boot_filetime + uptime,
            3 => self.cycles_at_boot + mul_div(uptime, u64::from(self.mhz), 10),
            _ => panic!("clock type {clock}"),
        }
    }

    /// 100 ns since boot of a raw value of `clock` (rounded down).
    pub fn uptime_of(&self, clock: u32, raw: u64) -> u64 {
        match clock {
            0 | 1 => mul_div(raw - self.qpc_at_boot, FILETIME_PER_SEC, self.qpc_frequency),
            2 => raw - self.boot_filetime,
            3 => mul_div(raw - self.cycles_at_boot, 10, u64::from(self.mhz)),
            _ => panic!("clock type {clock}"),
        }
    }

    /// The true UTC FILETIME of a raw value (clock 0 counted as QPC).
    pub fn true_filetime(&self, clock: u32, raw: u64) -> u64 {
        self.boot_filetime + self.uptime_of(clock, raw)
    }

    /// The FILETIME a reader must compute for a raw value of `clock` (1 QPC: scale 1e7 /
    /// frequency; 2: as is; 3: scale 10 / MHz; rounded down); None for 0 (raw).
    pub fn filetime(&self, clock: u32, raw: u64) -> Option<u64> {
        (clock != 0).then(|| self.true_filetime(clock, raw))
    }

    /// Granularity (100 ns) of the instants at which QPC and cycle values convert exactly both
    /// ways; session reference instants are multiples of it.
    pub fn exact_step(&self) -> u64 {
        let q = FILETIME_PER_SEC / gcd(self.qpc_frequency, FILETIME_PER_SEC);
        let c = 10 / gcd(u64::from(self.mhz), 10);
        q / gcd(q, c) * c
    }

    fn draw(rng: &mut VarRng) -> ClockModel {
        // 2016-01-01 .. 2025-06 as FILETIME.
        let system_time = rng.range(131_000_000_000_000_000, 133_900_000_000_000_000);
        let min = 60 * FILETIME_PER_SEC;
        let up_time = match rng.below(3) {
            0 => rng.range(3 * min, 60 * min),
            1 => rng.range(60 * min, 48 * 60 * min),
            _ => rng.range(48 * 60 * min, 40 * 24 * 60 * min),
        };
        let qpc_frequency = match rng.below(6) {
            0..=1 => 10_000_000,
            2 => 3_579_545,
            3 => 14_318_180,
            4 => 2_441_406,
            _ => rng.range(1_000_000, 30_000_000),
        };
        let qpc_at_boot = if rng.chance(50) {
            0
        } else {
            rng.range(1, 3 * qpc_frequency)
        };
        let mhz = rng.range(1800, 4200) as u32;
        let cycles_at_boot = if rng.chance(50) {
            0
        } else {
            rng.range(1, 20 * 1_000_000 * u64::from(mhz))
        };
        let etw_cpu_speed_global = rng.pick(&[
            CpuSpeedGlobal::Present,
            CpuSpeedGlobal::Present,
            CpuSpeedGlobal::Zero,
            CpuSpeedGlobal::NotInDump,
        ]);
        ClockModel {
            boot_filetime: system_time - up_time,
            system_time,
            qpc_frequency,
            qpc_at_boot,
            mhz,
            cycles_at_boot,
            etw_cpu_speed_global,
            kuser_qpc_frequency: false,
        }
    }
}

/// `_ETW_REF_CLOCK` as written: StartTime (FILETIME) and StartPerfClock (the session clock's
/// raw value at the same instant).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefClock {
    pub start_time: u64,
    pub start_perf_clock: u64,
}

// ------------------------------------------------------------------------------------------
// Ground truth types

/// One context switch the forge wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedSwitch {
    /// "pending" (an open 'CCsw' block), "batch" (a 0x0525 event in a buffer) or "event"
    /// (a 0x0524 CSwitch event in a buffer).
    pub source: String,
    pub cpu: u32,
    /// The session whose buffer holds it; None for pending blocks (a block belongs to a clock
    /// type, not to a logger).
    pub logger_id: Option<u32>,
    pub clock_type: u32,
    pub raw_timestamp: u64,
    /// [`ClockModel::filetime`] of `raw_timestamp` (None for clock 0).
    pub filetime: Option<u64>,
    /// The forge's instant (clock 0 counted as QPC).
    pub true_filetime: u64,
    /// 0: the idle thread.
    pub old_tid: u32,
    /// Events: NewThreadId. Batches / pending blocks: the next switch's old thread; the last
    /// switch of a pending block: the CPU's KPRCB.CurrentThread TID (x64 fixtures with the
    /// process list), else None.
    pub new_tid: Option<u32>,
    /// Idle packets carry no priority / state / wait reason / wait time: 0.
    pub old_priority: u8,
    pub old_state: u8,
    /// Meaningful when `old_state` is 5 (Waiting), else 0.
    pub old_wait_reason: u8,
    pub new_thread_wait_time: u32,
    /// The pending block's VA, or the buffer's VA.
    pub container_va: u64,
    /// Index inside its block / batch (0-based) or, for events, inside the buffer.
    pub index: u32,
}

/// The per-CPU KPRCB.EtwSupport blocks of a variation dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedEtwSupport {
    /// Offset of `_KPRCB.EtwSupport` (types.h).
    pub kprcb_offset: u64,
    /// Per CPU, the block KPRCB.EtwSupport points to (pool tag 'Etwp').
    pub blocks: Vec<u64>,
    pub block_size: u32,
    /// The 4-pointer CCSwap group (clock 0..3); None when no pending block was forged.
    pub ccswap_group_offset: Option<u64>,
    /// The group is where §4.1 documents it (x64 EtwSupport at 0x5FD8 / 0x60D0 / 0x8BE8).
    pub ccswap_documented: bool,
    /// The per-CPU current-buffer pointers (EX_FAST_REF, indexed by LoggerId) inside this
    /// block; None when they live elsewhere (`ProcessorBlocks`) or there are none.
    pub per_cpu_group_offset: Option<u64>,
    /// "etw_support_documented" (1607 x64: +0x40), "etw_support_search" (random offset),
    /// "processor_blocks" (1709+: `_ETW_SILODRIVERSTATE.ProcessorBlocks`) or "none".
    pub per_cpu_route: String,
    /// KPRCB.MHz on every CPU.
    pub mhz: u32,
}

/// What the variation mode drew for one session-like slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionVariation {
    /// Buffers really linked on GlobalList (NumberOfBuffers may hold an odd value).
    pub linked_buffers: u32,
    pub odd_fields: Vec<String>,
    pub reference_time: RefClock,
}

/// The variation part of an [`EtwSpec`] ([`EtwSpec::varied`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Variation {
    pub seed: u64,
    pub clock: ClockModel,
    /// Slot -> the drawn extras of every session-like slot (sessions, stale and tagged-free
    /// contexts).
    pub sessions: BTreeMap<u32, SessionVariation>,
    /// Slots of the kernel sessions whose mode gets compact context switches (pending blocks
    /// per CPU per their clock types, 0x0525 batches in their buffers).
    pub compact_cswitch: Vec<u32>,
    /// Slots whose buffers get data with context switches (NT Kernel Logger, CKCL).
    pub switch_sessions: Vec<u32>,
    /// Add decoy pointers next to the pending ones.
    pub decoys: bool,
    /// The same context switches recorded by two sessions
    /// ([`Config::with_duplicate_switches`], `duplicates.rs`). False unless asked; `Debug`
    /// leaves it out then (golden hashes of every other variation dump unchanged).
    pub duplicates: bool,
}

impl std::fmt::Debug for Variation {
    /// The derived rendering, with `duplicates` appended only when it is set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Variation");
        d.field("seed", &self.seed)
            .field("clock", &self.clock)
            .field("sessions", &self.sessions)
            .field("compact_cswitch", &self.compact_cswitch)
            .field("switch_sessions", &self.switch_sessions)
            .field("decoys", &self.decoys);
        if self.duplicates {
            d.field("duplicates", &self.duplicates);
        }
        d.finish()
    }
}

// ------------------------------------------------------------------------------------------
// Drawing the spec

const OTHER_NAMES: &[&str] = &[
    "EventLog-System",
    "EventLog-Application",
    "EventLog-Security",
    "WdiContextLog",
    "LwtNetLog",
    "UBPM",
    "DiagLog",
    "NetCore",
    "RadioMgr",
    "WiFiSession",
    "ReadyBoot",
    "DefenderApiLogger",
    "DefenderAuditLogger",
    "Diagtrack-Listener",
    "SleepStudyTraceSession",
    "ScreenOnPowerStudyTraceSession",
    "NtfsLog",
    "Audio",
    "MSDTC_TRACE_SESSION",
    "SgrmEtwSession",
    "PerfDiag Logger",
    "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace",
    "Mesure de la télémétrie",
    "Sitzung-Überwachung",
    "WindowsUpdate_trace_log_with_a_rather_long_session_name_that_keeps_going_past_sixty_four_characters",
];

pub(crate) const NTKL: &str = "NT Kernel Logger";
pub(crate) const CKCL: &str = "Circular Kernel Context Logger";

pub(crate) fn draw_guid(rng: &mut VarRng) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    g[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
    g[7] = (g[7] & 0x0F) | 0x40;
    g[8] = (g[8] & 0x3F) | 0x80;
    g
}

/// A session-like spec and its variation extras.
fn draw_session(
    rng: &mut VarRng,
    build: u32,
    clock: &ClockModel,
    name: &str,
    clock_type: u32,
    data: bool,
) -> (SessionSpec, SessionVariation) {
    let win8 = build >= 9200;
    let is_ntkl = name == NTKL;
    let is_ckcl = name == CKCL;
    let (mode, paged) = draw_logger_mode(rng, win8, name, data);
    let file = mode & (EVENT_TRACE_FILE_MODE_SEQUENTIAL | EVENT_TRACE_FILE_MODE_CIRCULAR) != 0;
    let log_file = file.then(|| draw_log_file(rng, name));
    let buffer_size = draw_buffer_size(rng, data);
    let minimum = rng.range(1, 8) as u32;
    let maximum = rng.range(u64::from(minimum) + 2, u64::from(minimum) + 120) as u32;
    let number = rng.range(u64::from(minimum), u64::from(maximum.min(minimum + 16))) as u32;
    let mut s = SessionSpec {
        name: name.to_string(),
        log_file,
        logger_mode: mode,
        clock_type,
        buffer_size,
        minimum_buffers: minimum,
        maximum_buffers: maximum,
        number_of_buffers: number,
        buffers_written: if file {
            rng.range(0, 200_000) as u32
        } else {
            0
        },
        events_lost: if rng.chance(70) {
            0
        } else {
            rng.range(1, 5000) as u32
        },
        log_buffers_lost: if rng.chance(80) {
            0
        } else {
            rng.range(1, 50) as u32
        },
        real_time_buffers_lost: if mode & EVENT_TRACE_REAL_TIME_MODE != 0 && rng.chance(30) {
            rng.range(1, 30) as u32
        } else {
            0
        },
        start_time: 0,
        pool_type: if paged {
            PAGED_POOL
        } else if win8 {
            NON_PAGED_POOL_NX
        } else {
            NON_PAGED_POOL
        },
        instance_guid: draw_guid(rng),
        name_unreadable: !is_ntkl && !is_ckcl && !data && rng.chance(8),
        global_list: GlobalListSpec::Ring,
        flag_bits: Vec::new(),
        consumers: Vec::new(),
    };
    s.flag_bits = draw_flag_bits(rng, name, mode);
    let (linked, odd_fields) = draw_odd_counts(rng, &mut s, data);
    if !data && linked >= 2 && rng.chance(8) {
        s.global_list = GlobalListSpec::Cyclic;
    }
    let reference_time = draw_start_time(rng, clock, clock_type, data, &mut s);
    (
        s,
        SessionVariation {
            linked_buffers: linked,
            odd_fields,
            reference_time,
        },
    )
}

/// LoggerMode (and whether the session uses paged memory) by the kind of session.
fn draw_logger_mode(rng: &mut VarRng, win8: bool, name: &str, data: bool) -> (u32, bool) {
    let is_ntkl = name == NTKL;
    let is_ckcl = name == CKCL;
    let system_logger = if win8 {
        EVENT_TRACE_SYSTEM_LOGGER_MODE
    } else {
        0
    };
    let mut mode = if is_ntkl {
        rng.pick(&[
            EVENT_TRACE_FILE_MODE_SEQUENTIAL,
            EVENT_TRACE_FILE_MODE_SEQUENTIAL,
            EVENT_TRACE_REAL_TIME_MODE,
            EVENT_TRACE_BUFFERING_MODE,
            EVENT_TRACE_FILE_MODE_CIRCULAR,
            EVENT_TRACE_FILE_MODE_SEQUENTIAL | EVENT_TRACE_REAL_TIME_MODE,
        ])
    } else if is_ckcl {
        EVENT_TRACE_BUFFERING_MODE | system_logger
    } else {
        let m = rng.pick(&[
            EVENT_TRACE_FILE_MODE_SEQUENTIAL,
            EVENT_TRACE_FILE_MODE_CIRCULAR,
            EVENT_TRACE_REAL_TIME_MODE,
            EVENT_TRACE_BUFFERING_MODE,
            EVENT_TRACE_FILE_MODE_SEQUENTIAL | EVENT_TRACE_REAL_TIME_MODE,
        ]);
        if rng.chance(25) {
            m | system_logger
        } else {
            m
        }
    };
    let paged = !is_ntkl && !is_ckcl && !data && rng.chance(15);
    if paged {
        mode |= EVENT_TRACE_USE_PAGED_MEMORY;
    }
    (mode, paged)
}

/// The log file of a file-mode session.
fn draw_log_file(rng: &mut VarRng, name: &str) -> String {
    if name == NTKL && rng.chance(50) {
        "C:\\Windows\\Temp\\kernel.etl".to_string()
    } else {
        let stem: String = name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        format!("C:\\Windows\\System32\\LogFiles\\WMI\\{stem}.etl")
    }
}

/// BufferSize: a multiple of 4 KiB, at most 64 KiB for sessions with data.
fn draw_buffer_size(rng: &mut VarRng, data: bool) -> u32 {
    if data {
        0x1000 * rng.range(1, 16) as u32
    } else {
        0x1000
            * match rng.below(3) {
                0 => rng.pick(&[1u32, 2, 4, 8, 16, 32, 64, 128, 256]),
                1 => rng.range(1, 32) as u32,
                _ => rng.range(1, 256) as u32,
            }
    }
}

/// The session's flag names.
fn draw_flag_bits(rng: &mut VarRng, name: &str, mode: u32) -> Vec<String> {
    let is_ntkl = name == NTKL;
    let is_ckcl = name == CKCL;
    let mut flags = Vec::new();
    if is_ntkl || is_ckcl {
        flags.push("KernelTrace".to_string());
    }
    if mode & EVENT_TRACE_REAL_TIME_MODE != 0 {
        flags.push("RealTime".to_string());
    }
    if is_ckcl || (!is_ntkl && rng.chance(50)) {
        flags.push("AutoLogger".to_string());
    }
    flags
}

/// Odd counts (a kernel mid-update, or after limits changed), written into `s`. Returns the
/// number of buffers really linked on GlobalList and the odd field names (sorted).
fn draw_odd_counts(rng: &mut VarRng, s: &mut SessionSpec, data: bool) -> (u32, Vec<String>) {
    let mut linked = s.number_of_buffers;
    let mut odd = Vec::new();
    if rng.chance(35) {
        let kinds = rng.range(1, 2);
        for _ in 0..kinds {
            match rng.below(5) {
                0 => {
                    s.number_of_buffers = s.maximum_buffers + 1;
                    if !data && s.number_of_buffers <= 32 {
                        linked = s.number_of_buffers;
                    }
                    odd.push("NumberOfBuffers");
                }
                1 => {
                    s.number_of_buffers = u32::MAX;
                    odd.push("NumberOfBuffers");
                }
                2 => {
                    s.minimum_buffers = s.maximum_buffers + rng.range(1, 64) as u32;
                    odd.push("MinimumBuffers");
                }
                3 => {
                    s.events_lost = if rng.chance(50) {
                        u32::MAX
                    } else {
                        rng.range(0x8000_0000, 0xFFFF_FFFE) as u32
                    };
                    odd.push("EventsLost");
                }
                _ => {
                    s.buffers_written = if rng.chance(50) {
                        u32::MAX
                    } else {
                        rng.range(0x8000_0000, 0xFFFF_FFFE) as u32
                    };
                    odd.push("BuffersWritten");
                }
            }
        }
    }
    let odd_fields: Vec<String> = odd
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(str::to_string)
        .collect();
    (linked, odd_fields)
}

/// StartTime: an exact instant (StartPerfClock converts back exactly); sessions with data
/// start in the first half of the uptime so that their switches fit after it. Sets
/// `s.start_time` and returns the ReferenceTime.
fn draw_start_time(
    rng: &mut VarRng,
    clock: &ClockModel,
    clock_type: u32,
    data: bool,
    s: &mut SessionSpec,
) -> RefClock {
    let step = clock.exact_step();
    let up = clock.up_time();
    let hi = if data {
        up / 2
    } else {
        up - 30 * FILETIME_PER_SEC
    };
    let start_up = (rng.range(FILETIME_PER_SEC, hi) / step).max(1) * step;
    s.start_time = clock.boot_filetime + start_up;
    RefClock {
        start_time: s.start_time,
        start_perf_clock: clock.raw_at(clock_type, start_up),
    }
}

impl EtwSpec {
    /// A drawn spec for a fixture (or corpus kernel) of `build`, reproducible from `seed`.
    /// Use it through [`Config::with_variation`], which also sets the dump's times from the
    /// drawn clock model (the forge checks that they agree). See the tests/forge/README.md "Variation mode".
    pub fn varied(build: u32, x64: bool, seed: u64) -> EtwSpec {
        let _ = x64; // the per-arch parts are drawn at forge time
        let mut rng = VarRng::new(seed ^ SALT_SPEC ^ (u64::from(build) << 40));
        let clock = ClockModel::draw(&mut rng);
        let max_loggers: u32 = if build >= 16299 {
            rng.pick(&[64, 64, 64, 0x50, 128, 256, 32])
        } else {
            64
        };
        let low = max_loggers.min(64);
        let mut free: BTreeSet<u32> = (1..low).collect();
        let take = |rng: &mut VarRng, free: &mut BTreeSet<u32>| -> u32 {
            let v: Vec<u32> = free.iter().copied().collect();
            let s = rng.pick(&v);
            free.remove(&s);
            s
        };
        let clocks_other = [1u32, 1, 1, 2, 2, 3, 0];
        let ntkl_clock = [1u32, 2, 3][(seed % 3) as usize];
        // (slot, name, clock)
        let mut names: Vec<(u32, String, u32)> = Vec::new();
        if rng.chance(90) {
            names.push((0, NTKL.to_string(), ntkl_clock));
        }
        if rng.chance(75) {
            let slot = if rng.chance(70) && free.contains(&2) {
                free.remove(&2);
                2
            } else {
                take(&mut rng, &mut free)
            };
            let c = rng.pick(&[1u32, 1, 2, 3]);
            names.push((slot, CKCL.to_string(), c));
        }
        let total = rng.range(3, 12) as usize;
        let mut pool: Vec<&str> = OTHER_NAMES.to_vec();
        while names.len() < total {
            let i = rng.below(pool.len() as u64) as usize;
            let name = pool.remove(i);
            let slot = take(&mut rng, &mut free);
            names.push((slot, name.to_string(), rng.pick(&clocks_other)));
        }
        if max_loggers > 64 && rng.chance(50) {
            let slot = rng.range(64, u64::from(max_loggers) - 1) as u32;
            let i = rng.below(pool.len() as u64) as usize;
            names.push((slot, pool.remove(i).to_string(), rng.pick(&clocks_other)));
        }
        let mut slots = BTreeMap::new();
        let mut sessions = BTreeMap::new();
        let mut compact = Vec::new();
        let mut switch_sessions = Vec::new();
        // Before 1703 at most two distinct clock types across system loggers (§7).
        let mut sys_clocks: BTreeSet<u32> = BTreeSet::new();
        for (slot, name, mut c) in names {
            let kernelish = name == NTKL || name == CKCL;
            let data = kernelish;
            let (mut s, mut sv) = draw_session(&mut rng, build, &clock, &name, c, data);
            let system = kernelish || s.logger_mode & EVENT_TRACE_SYSTEM_LOGGER_MODE != 0;
            if system && build < 15063 {
                if !sys_clocks.contains(&c) && sys_clocks.len() >= 2 {
                    c = *sys_clocks.iter().next().expect("non-empty");
                    s.clock_type = c;
                    let up = sv.reference_time.start_time - clock.boot_filetime;
                    sv.reference_time.start_perf_clock = clock.raw_at(c, up);
                }
                sys_clocks.insert(c);
            }
            if name == NTKL && rng.chance(75) {
                compact.push(slot);
            } else if name != NTKL
                && build >= 9200
                && s.logger_mode & EVENT_TRACE_SYSTEM_LOGGER_MODE != 0
                && rng.chance(30)
            {
                // A system logger (a kernel session since 6.2) with compact cswitch in its
                // group mask: [I] (§1.1 SystemLoggerSettings / §4.1).
                compact.push(slot);
            }
            if data {
                switch_sessions.push(slot);
            }
            sessions.insert(slot, sv);
            slots.insert(slot, SlotSpec::Session(s));
        }
        // Free-slot encodings and invalid slots among the remaining low slots.
        let free_kinds = rng.range(0, 3);
        for _ in 0..free_kinds {
            if free.is_empty() {
                break;
            }
            let slot = take(&mut rng, &mut free);
            slots.insert(slot, SlotSpec::Free(0));
        }
        for _ in 0..rng.range(0, 2) {
            if free.is_empty() || pool.is_empty() {
                break;
            }
            let slot = take(&mut rng, &mut free);
            let i = rng.below(pool.len() as u64) as usize;
            let name = pool.remove(i);
            let (s, sv) = draw_session(&mut rng, build, &clock, name, 1, false);
            sessions.insert(slot, sv);
            slots.insert(slot, SlotSpec::FreeTagged(s));
        }
        if rng.chance(50) && !free.is_empty() {
            let slot = take(&mut rng, &mut free);
            slots.insert(slot, SlotSpec::Garbage);
        }
        for _ in 0..rng.range(0, 2) {
            if free.is_empty() || pool.is_empty() {
                break;
            }
            let slot = take(&mut rng, &mut free);
            let mut logger_id = rng.range(0, 0x3F) as u32;
            if logger_id == slot {
                logger_id ^= 0x20;
            }
            let i = rng.below(pool.len() as u64) as usize;
            let name = pool.remove(i);
            let (s, sv) = draw_session(&mut rng, build, &clock, name, 1, false);
            sessions.insert(slot, sv);
            slots.insert(
                slot,
                SlotSpec::WrongId {
                    logger_id,
                    session: s,
                },
            );
        }
        if rng.chance(50) && !free.is_empty() {
            let slot = take(&mut rng, &mut free);
            slots.insert(slot, SlotSpec::Unmapped);
        }
        let decoys = rng.chance(50);
        EtwSpec {
            variation: Some(Box::new(Variation {
                seed,
                clock,
                sessions,
                compact_cswitch: compact,
                switch_sessions,
                decoys,
                duplicates: false,
            })),
            ..EtwSpec::with_slots(max_loggers, slots)
        }
    }
}

/// Whether the fixture's layouts allow the process list (x64, the object types declared and
/// each object inside one page).
pub(crate) fn processes_supported(cfg: &Config, t: &TypesH) -> bool {
    if !cfg.arch.is_x64() {
        return false;
    }
    let fits = |s: &str| t.size_of(s).is_some_and(|n| n + 0x10 <= 0x1000);
    fits("_EPROCESS")
        && fits("_ETHREAD")
        && t.size_of("_CLIENT_ID") == Some(0x10)
        && [
            ("_EPROCESS", "ActiveProcessLinks"),
            ("_EPROCESS", "UniqueProcessId"),
            ("_EPROCESS", "ImageFileName"),
            ("_EPROCESS", "ThreadListHead"),
            ("_ETHREAD", "ThreadListEntry"),
            ("_ETHREAD", "Cid"),
            ("_KPRCB", "CurrentThread"),
        ]
        .iter()
        .all(|(a, f)| t.has_field(a, f))
        && t.offset_of("_EPROCESS", "Pcb") == Some(0)
        && t.offset_of("_ETHREAD", "Tcb") == Some(0)
}

impl Config {
    /// The seeded variation mode (fixture configs): draws the CPU count (1..=8), the clock
    /// model (the header's and KUSER_SHARED_DATA's SystemTime / InterruptTime / TickCount /
    /// QpcFrequency follow it) and [`EtwSpec::varied`]; x64 fixtures whose layouts allow it also
    /// get the process list (KPRCB.CurrentThread, TIDs of the switches). Reproducible per seed.
    pub fn with_variation(self, seed: u64) -> Config {
        let fx = self
            .fixture
            .as_ref()
            .expect("Config::with_variation needs a fixture kernel");
        let t = TypesH::load(&fx.dir).unwrap_or_else(|e| panic!("fixture {}: {e}", fx.name));
        let mut rng = VarRng::new(seed ^ SALT_CFG ^ (u64::from(self.build) << 40));
        let slots =
            fx.storage_len("KiProcessorBlock").unwrap_or(0) as u64 / self.arch.ptr_size() as u64;
        let cpus = rng.range(1, slots.clamp(1, 8)) as u32;
        let spec = EtwSpec::varied(self.build, self.arch.is_x64(), seed);
        let clock = spec.variation.as_ref().expect("varied").clock.clone();
        let processes = processes_supported(&self, &t);
        Config {
            cpus,
            system_time: clock.system_time,
            system_up_time: clock.up_time(),
            processes,
            etw: Some(spec),
            ..self
        }
    }
}

/// Salt of the self-map draw ([`random_self_map_index`]).
const SALT_SELF_MAP: u64 = 0x5E1F_0000_0000_0004;

/// An x64 PML4 self-map index as Windows 1607+ draws one at boot, from `seed`: uniform in
/// 0x100..=0x1FE (every index [`Config::with_self_map_index`] accepts) without the forge's own
/// slots ([`crate::FORGE_PML4_SLOTS`]). 0x1FF is never a self-map: on real systems that slot
/// holds the HAL / loader area at 0xFFFFFF8000000000, and volatility3's DTB scan
/// (`DtbSelfRef64bit`, `range(0x100, 0x1FF)`) never tries it.
pub fn random_self_map_index(seed: u64) -> u64 {
    let mut rng = VarRng::new(seed ^ SALT_SELF_MAP);
    loop {
        let i = rng.range(0x100, 0x1FE);
        if !crate::config::FORGE_PML4_SLOTS.contains(&i) {
            return i;
        }
    }
}

/// The variation of `cfg` (if any).
pub(crate) fn of(cfg: &Config) -> Option<&Variation> {
    cfg.etw.as_ref().and_then(|e| e.variation.as_deref())
}

// ------------------------------------------------------------------------------------------
// Switch generation

/// TIDs of [`crate::STANDARD_PROCESSES`] (the process list of x64 variation dumps).
pub(crate) fn tid_pool() -> Vec<u32> {
    crate::STANDARD_PROCESSES
        .iter()
        .flat_map(|p| p.2.iter().map(|&t| t as u32))
        .collect()
}

/// A state / wait reason pair (KTHREAD_STATE; 5 = Waiting with a KWAIT_REASON).
pub(crate) fn draw_state(rng: &mut VarRng, mwr: u8) -> (u8, u8) {
    if rng.chance(60) {
        (5, rng.below(u64::from(mwr)) as u8)
    } else {
        (rng.pick(&[0u8, 1, 2, 3, 4, 6, 7]), 0)
    }
}

/// A batch starting at `first` (raw units) whose span stays within `window` raw units, with
/// at most `max_switches` switches (0: an open batch with no packets).
pub(crate) fn gen_batch(
    rng: &mut VarRng,
    first: u64,
    window: u64,
    max_switches: usize,
    mwr: u8,
    tids: &[u32],
) -> Batch {
    let ntids = rng.range(1, tids.len().min(16) as u64) as usize;
    let mut table: Vec<u32> = Vec::new();
    let mut pool = tids.to_vec();
    for _ in 0..ntids {
        let i = rng.below(pool.len() as u64) as usize;
        table.push(pool.remove(i));
    }
    let base: Vec<i8> = table.iter().map(|_| rng.range(1, 15) as i8).collect();
    let max_delta = ccswap::MAX_DELTA.min(window / 4).max(1);
    let mut switches = Vec::new();
    let mut t = first;
    let mut used = ccswap::EMPTY_USED_BYTES as usize;
    let mut seen: Vec<u32> = Vec::new();
    while switches.len() < max_switches {
        let delta = if switches.is_empty() {
            0
        } else {
            match rng.below(10) {
                0 => 0,
                1..=3 => rng.range(1, 0x3FFF),
                4..=6 => rng.range(0x4000, 0x1_FFFF),
                _ => rng.range(0x2_0000, 0x2_0000.max(max_delta)),
            }
            .min(max_delta)
        };
        if t + delta - first > window {
            break;
        }
        let idle = rng.chance(25);
        let sw = if idle {
            Switch {
                time: t + delta,
                old_tid: 0,
                old_priority: 0,
                old_state: 0,
                old_wait_reason: 0,
                new_thread_wait_time: 0,
            }
        } else {
            // TidTable order = first-seen order (as the kernel fills it).
            let unseen: Vec<u32> = table
                .iter()
                .copied()
                .filter(|x| !seen.contains(x))
                .collect();
            let tid = if !unseen.is_empty() && (seen.is_empty() || rng.chance(40)) {
                unseen[0]
            } else if seen.is_empty() {
                table[0]
            } else {
                rng.pick(&seen)
            };
            if !seen.contains(&tid) {
                seen.push(tid);
            }
            let idx = table.iter().position(|&x| x == tid).expect("in table");
            let prio = if rng.chance(70) {
                (i64::from(base[idx]) + rng.range(0, 7) as i64).min(31) as u8
            } else {
                rng.range(0, 31) as u8
            };
            let (state, wr) = draw_state(rng, mwr);
            // Wait time 1 would be lost in a lite packet: draw 0 or >= 2.
            let wait = if rng.chance(50) {
                0
            } else {
                rng.range(2, u64::from(ccswap::MAX_WAIT_TIME)) as u32
            };
            Switch {
                time: t + delta,
                old_tid: tid,
                old_priority: prio,
                old_state: state,
                old_wait_reason: wr,
                new_thread_wait_time: wait,
            }
        };
        // Packet size (as the encoder chooses) and the flush rule UsedBytes + 8 <= 0x400.
        if used + 8 > PENDING_BLOCK_SIZE {
            break;
        }
        used += packet_len(&sw, &table, &base, delta);
        t += delta;
        switches.push(sw);
    }
    // The TidTable holds the threads seen, in first-seen order (the kernel adds on first use).
    let tids_seen: Vec<u32> = seen.clone();
    let base_seen: Vec<i8> = seen
        .iter()
        .map(|x| base[table.iter().position(|y| y == x).expect("in table")])
        .collect();
    Batch {
        first_time: first,
        tids: tids_seen,
        base_priorities: base_seen,
        switches,
    }
}

/// Bytes of the packet the encoder chooses (§4.3).
fn packet_len(s: &Switch, table: &[u32], base: &[i8], delta: u64) -> usize {
    if s.old_tid == 0 {
        return if delta < 0x4000 { 2 } else { 4 };
    }
    let idx = table
        .iter()
        .position(|&x| x == s.old_tid)
        .expect("in table");
    let inc = i32::from(s.old_priority) - i32::from(base[idx]);
    if (0..=7).contains(&inc) && s.new_thread_wait_time <= 1 && delta < 0x2_0000 {
        4
    } else {
        8
    }
}

/// Ground truth of a batch's switches. `last_new`: the new thread of the last switch.
#[allow(clippy::too_many_arguments)]
pub(crate) fn batch_truth(
    b: &Batch,
    source: &str,
    cpu: u32,
    logger_id: Option<u32>,
    clock_type: u32,
    clock: &ClockModel,
    container_va: u64,
    last_new: Option<u32>,
) -> Vec<ExpectedSwitch> {
    let n = b.switches.len();
    b.switches
        .iter()
        .enumerate()
        .map(|(i, s)| ExpectedSwitch {
            source: source.to_string(),
            cpu,
            logger_id,
            clock_type,
            raw_timestamp: s.time,
            filetime: clock.filetime(clock_type, s.time),
            true_filetime: clock.true_filetime(clock_type, s.time),
            old_tid: s.old_tid,
            new_tid: if i + 1 < n {
                Some(b.switches[i + 1].old_tid)
            } else {
                last_new
            },
            old_priority: s.old_priority,
            old_state: s.old_state,
            old_wait_reason: if s.old_state == 5 {
                s.old_wait_reason
            } else {
                0
            },
            new_thread_wait_time: s.new_thread_wait_time,
            container_va,
            index: i as u32,
        })
        .collect()
}

/// A PERFINFO header (§5): 32-bit form (0x10) on x86, 64-bit (0x11) on x64.
fn perfinfo(
    x64: bool,
    version: u8,
    hook: u16,
    pmc: u8,
    pebs: bool,
    ts: u64,
    payload: &[u8],
) -> Vec<u8> {
    let ty: u32 = if x64 { 0x11 } else { 0x10 };
    let marker = 0xC000_0000
        | (ty << 16)
        | (u32::from(pebs) << 15)
        | (u32::from(pmc) << 8)
        | u32::from(version);
    let ext = 8 * (usize::from(pebs) + usize::from(pmc));
    let size = 0x10 + ext + payload.len();
    let mut r = Vec::with_capacity(size);
    r.extend_from_slice(&marker.to_le_bytes());
    r.extend_from_slice(&(size as u16).to_le_bytes());
    r.extend_from_slice(&hook.to_le_bytes());
    r.extend_from_slice(&ts.to_le_bytes());
    for i in 0..(usize::from(pebs) + usize::from(pmc)) {
        r.extend_from_slice(&(0x1000 + i as u64 * 0x77).to_le_bytes());
    }
    r.extend_from_slice(payload);
    r
}

// ------------------------------------------------------------------------------------------
// Forge-time: buffers with switches

/// The spec with the config-dependent parts drawn, and the switches in its buffers.
pub(crate) struct Materialized {
    pub spec: EtwSpec,
    /// (slot, buffer index in the slot's plan, switch with container_va 0).
    pub switches: Vec<(u32, usize, ExpectedSwitch)>,
    /// Duplicate mode: the pending blocks drawn ahead (their switches are mirrored in a
    /// session's buffers) and which records are the same switch (`duplicates.rs`).
    pub dup: Option<crate::etw::duplicates::DupPlan>,
}

/// Draw the buffers of the switch sessions (per CPU: sometimes a flushed buffer, then the
/// current buffer) for `cfg`'s CPUs and route.
pub(crate) fn materialize(
    cfg: &Config,
    spec: &EtwSpec,
    route: EtwRoute,
    t: &TypesH,
) -> Materialized {
    let mut spec = spec.clone();
    let mut v = *spec.variation.take().expect("variation");
    assert_eq!(
        (cfg.system_time, cfg.system_up_time),
        (v.clock.system_time, v.clock.up_time()),
        "variation: the config's times are not the spec's clock model (use Config::with_variation)"
    );
    if route != EtwRoute::Pointer {
        spec.max_loggers = 64;
        spec.slots.retain(|&s, _| s < 64);
        v.sessions.retain(|&s, _| s < 64);
        v.compact_cswitch.retain(|&s| s < 64);
        v.switch_sessions.retain(|&s| s < 64);
    }
    let mut rng = VarRng::new(v.seed ^ SALT_MAT ^ u64::from(cfg.cpus));
    let clock = v.clock.clone();
    let d = SwitchDraw {
        x64: cfg.arch.is_x64(),
        build: cfg.build,
        mwr: max_wait_reason(cfg.build),
        version: cswitch_version(cfg.build),
        tids: tid_pool(),
        up: clock.up_time(),
        clock: &clock,
    };
    let mut out = SessionBuffers {
        seq: 0,
        plan: Vec::new(),
        switches: Vec::new(),
    };
    let mut dup = v
        .duplicates
        .then(|| crate::etw::duplicates::DupPlan::new(cfg, &spec, &v, t));
    for &slot in &v.switch_sessions.clone() {
        let Some(SlotSpec::Session(mut s)) = spec.slots.get(&slot).cloned() else {
            continue;
        };
        let sv = v.sessions.get_mut(&slot).expect("drawn");
        let ss = SwitchSession {
            slot,
            clock_type: s.clock_type,
            buffer_size: s.buffer_size,
            compact: v.compact_cswitch.contains(&slot),
            start_up: sv.reference_time.start_time - clock.boot_filetime,
        };
        for cpu in 0..cfg.cpus {
            match dup.as_mut().filter(|p| p.mirrors(&ss)) {
                Some(p) => p.draw_mirror_cpu_buffers(&mut rng, &d, &ss, cpu, &mut out),
                None => draw_cpu_buffers(&mut rng, &d, &ss, cpu, &mut out),
            }
        }
        fit_buffer_counts(&mut s, sv, out.plan.len() as u32);
        spec.slots.insert(slot, SlotSpec::Session(s));
        spec.buffers.insert(slot, std::mem::take(&mut out.plan));
    }
    spec.variation = Some(Box::new(v));
    Materialized {
        spec,
        switches: out.switches,
        dup,
    }
}

/// What drawing switch records needs (the same for every session).
pub(crate) struct SwitchDraw<'a> {
    pub x64: bool,
    pub build: u32,
    pub mwr: u8,
    /// The CSwitch event version of the build.
    pub version: u8,
    pub tids: Vec<u32>,
    /// The uptime at the dump.
    pub up: u64,
    pub clock: &'a ClockModel,
}

/// A session whose buffers get switches.
pub(crate) struct SwitchSession {
    pub slot: u32,
    pub clock_type: u32,
    pub buffer_size: u32,
    /// 0x0525 batches rather than 0x0524 events.
    pub compact: bool,
    /// The session's start, as uptime.
    pub start_up: u64,
}

/// The buffers drawn so far: the current session's plan, every session's switches.
pub(crate) struct SessionBuffers {
    /// The next buffer's sequence number (across sessions).
    pub seq: u64,
    pub plan: Vec<BufferSpec>,
    /// (slot, buffer index in the slot's plan, switch with container_va 0).
    pub switches: Vec<(u32, usize, ExpectedSwitch)>,
}

/// One CPU's buffers of a session: sometimes a flushed buffer, then the current buffer, on
/// the CPU's timeline [start + 1 s, dump - 2 s) (the last second is the pending blocks').
fn draw_cpu_buffers(
    rng: &mut VarRng,
    d: &SwitchDraw,
    ss: &SwitchSession,
    cpu: u32,
    out: &mut SessionBuffers,
) {
    let lo = ss.start_up + FILETIME_PER_SEC;
    let hi = d.up - 2 * FILETIME_PER_SEC;
    assert!(
        hi > lo + FILETIME_PER_SEC,
        "uptime too short for the timeline"
    );
    let nbuf = if rng.chance(50) { 2 } else { 1 };
    let mut cursor = rng.range(lo, lo + (hi - lo) / 2);
    for b in 0..nbuf {
        let current = b + 1 == nbuf;
        let (records, truths, last_raw) =
            draw_buffer_records(rng, d, ss, cpu, current, &mut cursor, hi);
        let bs = cpu_buffer(rng, d, cpu, out.seq, current, records, last_raw);
        out.seq += 1;
        let idx = out.plan.len();
        for e in truths {
            out.switches.push((ss.slot, idx, e));
        }
        out.plan.push(bs);
    }
}

/// A per-CPU buffer of switch records: the current one (State 1, per-CPU pointer with a
/// drawn EX_FAST_REF tag) or a flushed one (State 3, 0xFF tail, header TimeStamp = its last
/// raw time).
pub(crate) fn cpu_buffer(
    rng: &mut VarRng,
    d: &SwitchDraw,
    cpu: u32,
    seq: u64,
    current: bool,
    records: Vec<RecSpec>,
    last_raw: u64,
) -> BufferSpec {
    let state = if current {
        STATE_GENERAL_LOGGING
    } else {
        STATE_FLUSH
    };
    let mut bs = BufferSpec::new(state, cpu, seq, records);
    if current {
        bs.per_cpu = Some(cpu);
        bs.fast_ref_tag = rng.range(0, if d.x64 { 15 } else { 7 }) as u8;
    } else {
        bs.offsets = Offsets::Flushed;
        bs.fill_ff = true;
        bs.header_timestamp = Some(last_raw);
    }
    bs
}

/// A switch record as drawn, before it is known to fit.
struct DrawnRecord {
    hook: u16,
    bytes: Vec<u8>,
    truths: Vec<ExpectedSwitch>,
    last_raw: u64,
}

/// The records of one buffer, up to a drawn count, the buffer's capacity or the end of the
/// timeline (`cursor` moves along it): (records, their switches, the last raw time).
fn draw_buffer_records(
    rng: &mut VarRng,
    d: &SwitchDraw,
    ss: &SwitchSession,
    cpu: u32,
    current: bool,
    cursor: &mut u64,
    hi: u64,
) -> (Vec<RecSpec>, Vec<ExpectedSwitch>, u64) {
    let cap = ss.buffer_size as usize - WMI_BUFFER_HEADER_SIZE;
    let mut used = 0usize;
    let mut records = Vec::new();
    let mut truths = Vec::new();
    let target = rng.range(if current { 0 } else { 1 }, 24) as usize;
    let mut last_raw = 0;
    while records.len() < target {
        let span_left = hi.saturating_sub(*cursor);
        if span_left < FILETIME_PER_SEC / 10 {
            break;
        }
        *cursor += rng.range(1, (span_left / 64).max(2));
        let index = records.len() as u32;
        let r = if ss.compact {
            draw_batch_record(rng, d, ss, cpu, *cursor, hi, index)
        } else {
            draw_cswitch_record(rng, d, ss, cpu, *cursor, index)
        };
        if used + crate::etw::wmi_buffer::align8(r.bytes.len()) > cap {
            break;
        }
        used += crate::etw::wmi_buffer::align8(r.bytes.len());
        truths.extend(r.truths);
        last_raw = r.last_raw;
        if ss.compact {
            *cursor = d.clock.uptime_of(ss.clock_type, last_raw) + 1;
        }
        records.push(RecSpec::Raw {
            key: format!("0x{:04x}", r.hook),
            bytes: r.bytes,
        });
    }
    (records, truths, last_raw)
}

/// A 0x0525 record: a compact batch starting at `cursor`, the `index`-th record of its
/// buffer.
fn draw_batch_record(
    rng: &mut VarRng,
    d: &SwitchDraw,
    ss: &SwitchSession,
    cpu: u32,
    cursor: u64,
    hi: u64,
    index: u32,
) -> DrawnRecord {
    let (c, clock) = (ss.clock_type, d.clock);
    let first = clock.raw_at(c, cursor);
    let window = clock.raw_at(c, hi) - first;
    let n = rng.range(1, 40) as usize;
    let batch = gen_batch(rng, first, window / 4, n, d.mwr, &d.tids);
    let body = ccswap::encode_batch(&batch, d.mwr);
    let bytes = perfinfo(d.x64, 2, HOOK_COMPCS, 0, false, batch.last_time(), &body);
    let mut truths = batch_truth(&batch, "batch", cpu, Some(ss.slot), c, clock, 0, None);
    for e in &mut truths {
        e.index += index << 16;
    }
    DrawnRecord {
        hook: HOOK_COMPCS,
        bytes,
        truths,
        last_raw: batch.last_time(),
    }
}

/// A 0x0524 CSwitch event at `cursor`, the `index`-th record of its buffer (PEBS / PMC items
/// sometimes on 1607+).
fn draw_cswitch_record(
    rng: &mut VarRng,
    d: &SwitchDraw,
    ss: &SwitchSession,
    cpu: u32,
    cursor: u64,
    index: u32,
) -> DrawnRecord {
    let (c, clock, tids) = (ss.clock_type, d.clock, &d.tids);
    let raw = clock.raw_at(c, cursor);
    let old_tid = if rng.chance(20) { 0 } else { rng.pick(tids) };
    let new_tid = if rng.chance(20) { 0 } else { rng.pick(tids) };
    let (state, wr) = draw_state(rng, d.mwr);
    let cs = ccswap::CSwitch {
        new_tid,
        old_tid,
        new_priority: rng.range(0, 31) as i8,
        old_priority: rng.range(0, 31) as i8,
        previous_cstate: 0,
        spare_byte: 0,
        old_wait_reason: wr,
        old_wait_mode_or_flags: rng.below(2) as u8,
        old_state: state,
        old_ideal_processor: cpu as u8,
        new_thread_wait_time: rng.range(0, 500) as u32,
        old_remaining_quantum: rng.range(0, 0x10_0000) as i32,
    };
    let (bytes, truth) = cswitch_record(rng, d, ss, cpu, raw, index, &cs);
    DrawnRecord {
        hook: HOOK_CSWITCH,
        bytes,
        truths: vec![truth],
        last_raw: raw,
    }
}

/// The record of CSwitch payload `cs` at `raw` in `ss`'s clock, the `index`-th of its buffer
/// (PEBS / PMC items sometimes on 1607+), and its truth.
pub(crate) fn cswitch_record(
    rng: &mut VarRng,
    d: &SwitchDraw,
    ss: &SwitchSession,
    cpu: u32,
    raw: u64,
    index: u32,
    cs: &ccswap::CSwitch,
) -> (Vec<u8>, ExpectedSwitch) {
    let (c, clock) = (ss.clock_type, d.clock);
    let payload = ccswap::encode_cswitch(d.version, cs);
    let (pmc, pebs) = if d.build >= 14393 && rng.chance(20) {
        (rng.range(0, 2) as u8, rng.chance(50))
    } else {
        (0, false)
    };
    let bytes = perfinfo(d.x64, d.version, HOOK_CSWITCH, pmc, pebs, raw, &payload);
    let truth = ExpectedSwitch {
        source: "event".to_string(),
        cpu,
        logger_id: Some(ss.slot),
        clock_type: c,
        raw_timestamp: raw,
        filetime: clock.filetime(c, raw),
        true_filetime: clock.true_filetime(c, raw),
        old_tid: cs.old_tid,
        new_tid: Some(cs.new_tid),
        old_priority: cs.old_priority as u8,
        old_state: cs.old_state,
        old_wait_reason: if cs.old_state == 5 {
            cs.old_wait_reason
        } else {
            0
        },
        new_thread_wait_time: if d.version >= 2 {
            cs.new_thread_wait_time
        } else {
            0
        },
        container_va: 0,
        index,
    };
    (bytes, truth)
}

/// The session's buffer counts against the `n` buffers drawn, keeping its odd values odd.
fn fit_buffer_counts(s: &mut SessionSpec, sv: &mut SessionVariation, n: u32) {
    sv.linked_buffers = n;
    if !sv.odd_fields.iter().any(|f| f == "NumberOfBuffers") {
        s.number_of_buffers = n;
    }
    if !sv.odd_fields.iter().any(|f| f == "MinimumBuffers") {
        s.minimum_buffers = s.minimum_buffers.min(n);
    }
    s.maximum_buffers = s.maximum_buffers.max(n);
    // Keep the odd values odd against the new MaximumBuffers.
    let odd = |f: &str| sv.odd_fields.iter().any(|x| x == f);
    if odd("NumberOfBuffers") && s.number_of_buffers != u32::MAX {
        s.number_of_buffers = s.maximum_buffers + 1;
    }
    if odd("MinimumBuffers") && s.minimum_buffers <= s.maximum_buffers {
        s.minimum_buffers = s.maximum_buffers + 1;
    }
}

/// The buffer switches with their buffer VAs.
pub(crate) fn locate_buffer_switches(
    m: &Materialized,
    session_bufs: &BTreeMap<u32, Vec<u64>>,
) -> Vec<ExpectedSwitch> {
    m.switches
        .iter()
        .map(|(slot, idx, e)| {
            let mut e = e.clone();
            e.container_va = session_bufs[slot][*idx];
            e
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// Forge-time: KPRCB.MHz, EtwCPUSpeedInMHz, EtwSupport blocks, pending blocks

pub(crate) struct CpuCtx<'a> {
    pub cfg: &'a Config,
    pub t: &'a TypesH,
    pub route: EtwRoute,
    pub prcbs: &'a [u64],
    pub pool: &'a mut Pool,
    pub img: &'a mut KernelImage,
    pub kprcb_writes: &'a mut Vec<(u64, Vec<u8>)>,
    /// (cpu, LoggerId, EX_FAST_REF value) to put into the EtwSupport blocks (non-pointer
    /// routes).
    pub per_cpu: Vec<(u32, u32, u64)>,
    /// Duplicate mode: the pending blocks drawn ahead, by (cpu, clock).
    pub predrawn: Option<&'a crate::etw::duplicates::Predrawn>,
}

pub(crate) struct CpuOut {
    pub pending: Vec<ExpectedPending>,
    pub decoys: Vec<ExpectedPendingDecoy>,
    pub switches: Vec<ExpectedSwitch>,
    pub clock_model: ClockModel,
    pub etw_support: Option<ExpectedEtwSupport>,
    pub unstored_image_pages: Vec<u32>,
}

/// §4.1: the documented CCSwap pointer group for an x64 KPRCB.EtwSupport offset.
pub fn documented_ccswap_offset(x64: bool, etw_support_offset: u64) -> Option<u64> {
    match (x64, etw_support_offset) {
        (true, 0x5FD8) => Some(0xB20),
        (true, 0x60D0) => Some(0x6D8),
        // The public 24H2 layouts (x64-26100) put the same block at 0x8BA8
        // (`pending::late_win11_etw_support`).
        (true, 0x8BE8) | (true, 0x8BA8) => Some(0x198),
        _ => None,
    }
}

fn put_ptr(buf: &mut [u8], ptr: usize, v: u64) {
    buf[..ptr].copy_from_slice(&v.to_le_bytes()[..ptr]);
}

/// A free aligned offset for `len` bytes in `0x40..size` not overlapping `taken`.
fn free_offset(rng: &mut VarRng, size: u64, len: u64, align: u64, taken: &[(u64, u64)]) -> u64 {
    for _ in 0..1000 {
        let o = rng.range(0x40 / align, (size - len) / align) * align;
        if taken.iter().all(|&(a, l)| o + len <= a || a + l <= o) {
            return o;
        }
    }
    panic!("no free offset for {len:#x} bytes in a {size:#x} block");
}

pub(crate) fn place_cpu_state(cx: &mut CpuCtx, v: &Variation) -> CpuOut {
    let cfg = cx.cfg;
    let t = cx.t;
    let mut rng = VarRng::new(v.seed ^ SALT_CPU ^ u64::from(cfg.cpus));
    let mut clock = v.clock.clone();
    clock.kuser_qpc_frequency = t.has_field("_KUSER_SHARED_DATA", "QpcFrequency");
    let mut unstored_image_pages = Vec::new();
    clock.etw_cpu_speed_global = place_cpu_speed_global(cx, &clock, &mut unstored_image_pages);
    let mut out = CpuOut {
        pending: Vec::new(),
        decoys: Vec::new(),
        switches: Vec::new(),
        clock_model: clock.clone(),
        etw_support: None,
        unstored_image_pages,
    };

    let fx = cfg.fixture.as_ref().expect("fixture");
    if fx.kprcb_size.is_none() {
        assert!(cx.per_cpu.is_empty(), "per-CPU buffers need mapped KPRCBs");
        return out;
    }
    // KPRCB.MHz on every CPU.
    let mhz_off = t.offset_of("_KPRCB", "MHz").expect("_KPRCB.MHz");
    assert_eq!(t.field_size("_KPRCB", "MHz"), Some(4));
    for &p in cx.prcbs {
        cx.kprcb_writes
            .push((p + mhz_off, clock.mhz.to_le_bytes().to_vec()));
    }
    let Some(es_off) = t.offset_of("_KPRCB", "EtwSupport") else {
        return out;
    };

    let lay = draw_block_layout(cx, v, &mut rng, es_off);
    let compact_clocks: BTreeSet<u32> = v
        .compact_cswitch
        .iter()
        .filter_map(|s| cx_slot_clock(cfg, s))
        .collect();
    let d = PendingDraw {
        mwr: max_wait_reason(cfg.build),
        tids: tid_pool(),
        up: clock.up_time(),
        clock: &clock,
    };
    let mut blocks = Vec::new();
    for cpu in 0..cfg.cpus {
        let es = place_etw_support_block(cx, &mut rng, &lay, cpu);
        blocks.push(es);
        // Pending blocks, one per clock type in use by a compact-cswitch session.
        for &c in &compact_clocks {
            place_pending_block(cx, &mut rng, &lay, &d, es, cpu, c, &mut out);
        }
        // Decoys next to the group.
        for &o in &lay.decoy_offs {
            place_pending_decoy(cx, &mut rng, &d, es + o, cpu, &mut out);
        }
    }
    out.etw_support = Some(ExpectedEtwSupport {
        kprcb_offset: es_off,
        blocks,
        block_size: lay.size as u32,
        ccswap_group_offset: (!compact_clocks.is_empty()).then_some(lay.ccswap_off),
        ccswap_documented: lay.documented.is_some(),
        per_cpu_group_offset: lay.pc_off,
        per_cpu_route: lay.per_cpu_route(cx.route).to_string(),
        mhz: clock.mhz,
    });
    out
}

/// EtwCPUSpeedInMHz (where the fixture has the public): written with the clock's MHz, or 0,
/// or on a page left out of the dump when no other public shares it. Returns what the global
/// became.
fn place_cpu_speed_global(
    cx: &mut CpuCtx,
    clock: &ClockModel,
    unstored_image_pages: &mut Vec<u32>,
) -> CpuSpeedGlobal {
    let fx = cx.cfg.fixture.as_ref().expect("fixture");
    let Some(rva) = fx.symbol("EtwCPUSpeedInMHz") else {
        return CpuSpeedGlobal::Absent;
    };
    let mut speed = clock.etw_cpu_speed_global;
    if speed == CpuSpeedGlobal::NotInDump {
        let page = rva & !0xFFF;
        let alone = fx
            .symbols
            .iter()
            .all(|(n, &r)| n == "EtwCPUSpeedInMHz" || r & !0xFFF != page);
        if alone {
            unstored_image_pages.push(page);
        } else {
            speed = CpuSpeedGlobal::Present;
        }
    }
    let val = match speed {
        CpuSpeedGlobal::Zero => 0,
        _ => clock.mhz,
    };
    crate::etw::write_var(cx.img, fx, "EtwCPUSpeedInMHz", 0, &val.to_le_bytes());
    speed
}

/// The EtwSupport block layout, the same on every CPU.
struct BlockLayout {
    /// KPRCB.EtwSupport's offset.
    es_off: u64,
    size: u64,
    /// The pointer size.
    align: u64,
    /// The documented CCSwap group offset (§4.1), if the KPRCB offset has one.
    documented: Option<u64>,
    /// 1607 x64: the per-CPU buffers at the documented +0x40 + 8*LoggerId.
    pc_documented: bool,
    ccswap_off: u64,
    pc_off: Option<u64>,
    decoy_offs: Vec<u64>,
    /// (offset, length) of the parts small counters must not overwrite.
    taken: Vec<(u64, u64)>,
}

impl BlockLayout {
    fn per_cpu_route(&self, route: EtwRoute) -> &'static str {
        if self.pc_documented {
            "etw_support_documented"
        } else if self.pc_off.is_some() {
            "etw_support_search"
        } else if route == EtwRoute::Pointer {
            "processor_blocks"
        } else {
            "none"
        }
    }
}

/// Draws the block size, the CCSwap group offset, the per-CPU group offset and the decoy
/// pointers' offsets.
fn draw_block_layout(cx: &CpuCtx, v: &Variation, rng: &mut VarRng, es_off: u64) -> BlockLayout {
    let x64 = cx.cfg.arch.is_x64();
    let documented = documented_ccswap_offset(x64, es_off);
    let pc_documented = x64 && es_off == 0x5FD8 && cx.route == EtwRoute::Inline;
    let size: u64 = if pc_documented {
        0xC00
    } else {
        rng.range(0x800 / 0x10, 0x1000 / 0x10) * 0x10
    };
    let align = cx.cfg.arch.ptr_size() as u64;
    let mut taken: Vec<(u64, u64)> = Vec::new();
    let ccswap_off = match documented {
        Some(o) => o,
        None => free_offset(rng, size, 4 * align, align, &taken),
    };
    taken.push((ccswap_off.saturating_sub(8), 4 * align + 8));
    let need_pc = !cx.per_cpu.is_empty();
    let pc_off = if pc_documented {
        taken.push((0x40, 0x400));
        Some(0x40)
    } else if need_pc {
        let o = free_offset(rng, size, 64 * align, align, &taken);
        taken.push((o, 64 * align));
        Some(o)
    } else {
        None
    };
    let decoy_offs: Vec<u64> = if v.decoys {
        (0..rng.range(1, 2))
            .map(|_| {
                let o = free_offset(rng, size, align, align, &taken);
                taken.push((o, align));
                o
            })
            .collect()
    } else {
        Vec::new()
    };
    BlockLayout {
        es_off,
        size,
        align,
        documented,
        pc_documented,
        ccswap_off,
        pc_off,
        decoy_offs,
        taken,
    }
}

/// A CPU's 'Etwp' block: KPRCB.EtwSupport points to it; small counters here and there; the
/// per-CPU current buffers in its group. Returns its VA.
fn place_etw_support_block(cx: &mut CpuCtx, rng: &mut VarRng, lay: &BlockLayout, cpu: u32) -> u64 {
    let ptr = cx.cfg.arch.ptr_size();
    let align = lay.align;
    let es = cx.pool.alloc(lay.size as usize, b"Etwp");
    cx.kprcb_writes.push((
        cx.prcbs[cpu as usize] + lay.es_off,
        es.to_le_bytes()[..ptr].to_vec(),
    ));
    // Small counters elsewhere in the block (never kernel pointers).
    for _ in 0..rng.range(0, 8) {
        let o = rng.range(0, lay.size / align - 1) * align;
        if lay.taken.iter().all(|&(a, l)| o + align <= a || a + l <= o) {
            let val = rng.range(1, 0xFFFF);
            put_ptr(cx.pool.slice_mut(es + o, ptr), ptr, val);
        }
    }
    // Per-CPU current buffers.
    if let Some(pc) = lay.pc_off {
        for &(c, id, val) in &cx.per_cpu {
            if c == cpu {
                assert!(id < 64, "per-CPU group holds LoggerIds 0..63");
                put_ptr(
                    cx.pool.slice_mut(es + pc + align * u64::from(id), ptr),
                    ptr,
                    val,
                );
                if lay.pc_documented {
                    let o = 0x240 + 8 * u64::from(id);
                    put_ptr(cx.pool.slice_mut(es + o, 8), 8, 500 + u64::from(id));
                }
            }
        }
    }
    es
}

/// What drawing pending batches needs.
pub(crate) struct PendingDraw<'a> {
    pub mwr: u8,
    pub tids: Vec<u32>,
    /// The uptime at the dump.
    pub up: u64,
    pub clock: &'a ClockModel,
}

/// A pending block of clock `c` for `cpu` and its pointer in the CCSwap group of the block
/// `es`.
#[allow(clippy::too_many_arguments)]
fn place_pending_block(
    cx: &mut CpuCtx,
    rng: &mut VarRng,
    lay: &BlockLayout,
    d: &PendingDraw,
    es: u64,
    cpu: u32,
    c: u32,
    out: &mut CpuOut,
) {
    let ptr = cx.cfg.arch.ptr_size();
    let va = cx.pool.alloc(PENDING_BLOCK_SIZE, crate::etw::CCSW_TAG);
    let (bytes, batch, tick) = match cx.predrawn.and_then(|p| p.get(&(cpu, c))) {
        Some(drawn) => drawn.clone(),
        None => draw_pending_block(rng, d, c),
    };
    cx.pool
        .slice_mut(va, PENDING_BLOCK_SIZE)
        .copy_from_slice(&bytes);
    let ptr_va = es + lay.ccswap_off + lay.align * u64::from(c);
    put_ptr(cx.pool.slice_mut(ptr_va, ptr), ptr, va);
    if let Some(b) = &batch {
        out.switches
            .extend(batch_truth(b, "pending", cpu, None, c, d.clock, va, None));
    }
    out.pending.push(ExpectedPending {
        cpu,
        clock: lay.documented.map(|_| c),
        block_va: va,
        pointer_va: ptr_va,
        used_bytes: u32::from_le_bytes(bytes[0..4].try_into().expect("4")),
        start_tick: tick,
        batch,
        max_wait_reason: d.mwr,
        true_clock: c,
        documented_offset: lay.documented.is_some(),
        group_offset: lay.ccswap_off,
    });
}

/// A pending block's bytes, batch and StartTick: closed (all zero), open with no packets,
/// partial, or filled to the flush limit; within the last second before the dump.
pub(crate) fn draw_pending_block(
    rng: &mut VarRng,
    d: &PendingDraw,
    c: u32,
) -> (Vec<u8>, Option<Batch>, u32) {
    let kind = rng.below(100);
    if kind < 15 {
        return (vec![0u8; PENDING_BLOCK_SIZE], None, 0);
    }
    let max = if kind < 25 {
        0
    } else if kind < 80 {
        rng.range(1, 60) as usize
    } else {
        usize::MAX
    };
    let (clock, up) = (d.clock, d.up);
    let win_lo = up - FILETIME_PER_SEC;
    let start_up = rng.range(win_lo, win_lo + FILETIME_PER_SEC / 2);
    let first = clock.raw_at(c, start_up);
    let end = clock.raw_at(c, up) - 1;
    let b = gen_batch(rng, first, end - first, max, d.mwr, &d.tids);
    let tick = (clock.uptime_of(c, first) / TICK_100NS) as u32;
    (ccswap::encode_pending_block(&b, tick, d.mwr), Some(b), tick)
}

/// A decoy pointed to from `pointer_va`: a 'CCsw' block that fails validation, or a
/// valid-looking block with another tag.
fn place_pending_decoy(
    cx: &mut CpuCtx,
    rng: &mut VarRng,
    d: &PendingDraw,
    pointer_va: u64,
    cpu: u32,
    out: &mut CpuOut,
) {
    let ptr = cx.cfg.arch.ptr_size();
    let good = {
        let first = d.clock.raw_at(1, d.up - FILETIME_PER_SEC);
        let b = gen_batch(rng, first, FILETIME_PER_SEC / 2, 8, d.mwr, &d.tids);
        ccswap::encode_pending_block(&b, 1, d.mwr)
    };
    let (tag, bytes, why) = if rng.chance(50) {
        let tag = rng.pick(&[*b"Etwp", *b"CCsx", *b"EtwB"]);
        (
            tag,
            good,
            format!("pool tag '{}', not 'CCsw'", String::from_utf8_lossy(&tag)),
        )
    } else {
        let used = rng.pick(&[0x50u32, 0x20, 0x408, 0x1000, 0x67]);
        let mut b = good;
        b[0..4].copy_from_slice(&used.to_le_bytes());
        (
            *crate::etw::CCSW_TAG,
            b,
            format!("UsedBytes {used:#x} (neither 0 nor 0x68..=0x400)"),
        )
    };
    let block_va = cx.pool.alloc(bytes.len(), &tag);
    cx.pool
        .slice_mut(block_va, bytes.len())
        .copy_from_slice(&bytes);
    put_ptr(cx.pool.slice_mut(pointer_va, ptr), ptr, block_va);
    out.decoys.push(ExpectedPendingDecoy {
        cpu,
        pointer_va,
        block_va,
        why,
    });
}

/// The clock type of the session in `slot` of `cfg`'s spec.
pub(crate) fn cx_slot_clock(cfg: &Config, slot: &u32) -> Option<u32> {
    match cfg.etw.as_ref()?.slots.get(slot)? {
        SlotSpec::Session(s) => Some(s.clock_type),
        _ => None,
    }
}

/// After the process list: the new thread of each pending block's last switch is the CPU's
/// KPRCB.CurrentThread.
pub(crate) fn fill_current_threads(e: &mut ForgedEtw, current: &[(u64, u64)]) {
    if current.is_empty() {
        return;
    }
    for p in &e.pending {
        let last = e
            .switches
            .iter_mut()
            .filter(|s| s.source == "pending" && s.container_va == p.block_va)
            .max_by_key(|s| s.index);
        if let Some(s) = last {
            s.new_tid = Some(current[p.cpu as usize].1 as u32);
        }
    }
}
