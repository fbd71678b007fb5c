//! Synthetic x64 and ARM64 **triage dumps** (kernel minidumps, DumpType 4) carrying the ETW
//! data Windows saves at bug check, with the values a correct reader must recover.
//!
//! Derived only from `shared/reference/triage-etw.md`, `crash-dump-format.md` (§1.1 DUMP_HEADER64,
//! §1.3 triage header and DumpBlob, §1.4 KDBG) and `etw-internals.md` (§2 WMI_BUFFER_HEADER,
//! §5 record headers), plus facts measured on the real dump D1 (`triage_x64.dmp`, 19041.804) and
//! its ISF, copied as constants (see `triage/consts.rs`). Never from etwdump's reader.
//!
//! ```no_run
//! use etwdump_forge::{forge_triage, TriageSpec};
//! let f = forge_triage(&TriageSpec::standard());
//! std::fs::write("/tmp/triage.dmp", &f.bytes).unwrap();
//! std::fs::write("/tmp/triage.isf.json", &f.isf_json).unwrap();
//! println!("{}", serde_json::to_string_pretty(&f.expected).unwrap());
//! ```
//!
//! # File layout
//!
//! | part | where |
//! |---|---|
//! | DUMP_HEADER64 (`PAGEDU64`, DumpType 4, `PAGE` fill, PhysicalMemoryBlock unused) | 0 |
//! | TRIAGE_DUMP header | 0x2000 |
//! | Mm info (0x50), unloaded drivers (1 entry) | 0x2080, 0x20D0 |
//! | KPRCB copy of the crashing CPU (0xAF00, = its data block) | PrcbOffset (0x2110) |
//! | EPROCESS (0xA40) / ETHREAD (0x898) copies (zero), call stack (0x200) | |
//! | decoded KDDEBUGGER_DATA64 (0x380) | DebuggerDataOffset |
//! | driver list (0x90-byte entries) and string pool (`{u32 chars; UTF-16; NUL}`, 8-aligned) | |
//! | data-block table (16-byte `{u64 VA; u32 FileOffset; u32 Size}`) and the blocks' bytes, back to back as in D1 | DataBlocksOffset |
//! | zero pad, `TRGD` at ValidOffset, SizeOfDump = ValidOffset + 4 | |
//! | `DumpBlob` secondary data: `DumpBlob`, u32 0x10, u32 0xF0000000\|build, then blobs `{u32 0x20; GUID; DataSize; PrePad; PostPad}` + PrePad + data + PostPad | SizeOfDump |
//!
//! Data blocks, in order: every CPU's KPRCB (0xAF00 each; ARM64 0x9680), KiProcessorBlock,
//! NtBuildLabEx, then per saved window (logger 2, then the error-log session) the three blocks
//! of KiSaveCurrentEtwTraceBuffer `[window][Ki*BufferBase][Ki*BufferOffset]` (in that call
//! order wherever `TriageSpec::globals` puts the two globals: End 8 above Base, 8 below, or
//! elsewhere), then ErrorLogSessionOpened and a decoy block (marker-like dwords that are not
//! records).
//!
//! ARM64 (`TriageArch::Arm64`, measured on `triage_arm64.dmp`): MachineImageType 0xAA64, an
//! ARM64_NT_CONTEXT (0x390 bytes) at 0x348, BootId at 0x1054, the KPRCB / EPROCESS / ETHREAD /
//! call-stack sizes 0x9680 / 0xC80 / 0x910 / 0xB60; see the README's issue-33 section for
//! every source. Blob buffers may hold TRACE_MESSAGE records (`BlobBufferSpec::Messages`,
//! `crate::etw::message`).
//!

mod build;
mod consts;
mod gen;
mod isf;
mod isf_types;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How the ETW blob stores a session's LoggerName after the 0x30-byte session header
/// (triage-etw.md §1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NameConvention {
    /// 19041: the name part is 2 × Length bytes (the name, then Length zero bytes).
    #[serde(rename = "x2")]
    Doubled,
    /// Later builds: the name part is Length bytes.
    #[serde(rename = "x1")]
    Single,
}

/// The machine of the forged triage dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TriageArch {
    /// AMD64 (MachineImageType 0x8664, AMD64 CONTEXT): D1, `triage_x64.dmp`.
    #[serde(rename = "x64")]
    X64,
    /// ARM64 (MachineImageType 0xAA64, ARM64_NT_CONTEXT 0x390 bytes at 0x348, the measured
    /// sizes of `triage_arm64.dmp`: KPRCB 0x9680, EPROCESS 0xC80, ETHREAD 0x910, call stack
    /// 0xB60).
    #[serde(rename = "arm64")]
    Arm64,
}

/// Where KiSaveCurrentEtwTraceBuffer's two 8-byte globals of each saved window lie relative to
/// each other (a property of the kernel image's data layout; the blocks are always added in
/// call order `[window][Base][End]`, triage-etw.md §1.2 (K1)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GlobalsOrder {
    /// `Ki*BufferOffset` 8 bytes above `Ki*BufferBase` (x64 19041, D1: 0xC31450 / 0xC31458,
    /// errlog 0xC31440 / 0xC31448; triage-etw.md §1.2).
    #[serde(rename = "rising")]
    Rising,
    /// `Ki*BufferOffset` 8 bytes below `Ki*BufferBase` (ARM64 22000, measured on
    /// `triage_arm64.dmp` blocks #26 / #27: Base nt+0xC36AD0, End nt+0xC36AC8).
    #[serde(rename = "end_below_base")]
    EndBelowBase,
    /// Not adjacent: End = Base + delta (a multiple of 8, |delta| in 0x10..=0x800, not
    /// overlapping another symbol: the forge refuses such a spec), per window. A choice to
    /// test readers that assume adjacency.
    #[serde(rename = "spaced")]
    Spaced { etw_delta: i32, errlog_delta: i32 },
}

impl GlobalsOrder {
    /// Every kind, drawn from `seed`: Rising, EndBelowBase, Spaced (with deltas drawn from the
    /// seed, either sign) in turn.
    pub fn drawn(seed: u64) -> GlobalsOrder {
        let mut rng = crate::util::Rng::new(seed ^ 0x6C0B_A150_0DE2);
        let mut delta = || {
            let m = 2 + rng.range(0, 0xFF) as i32; // 2..=0x100 pointers
            if rng.range(0, 2) == 0 {
                8 * m
            } else {
                -8 * m
            }
        };
        match seed % 3 {
            0 => GlobalsOrder::Rising,
            1 => GlobalsOrder::EndBelowBase,
            _ => loop {
                // Redrawn until no End overlaps another symbol on either architecture.
                let o = GlobalsOrder::Spaced {
                    etw_delta: delta(),
                    errlog_delta: delta(),
                };
                if [TriageArch::X64, TriageArch::Arm64]
                    .iter()
                    .all(|a| build::globals_symbols(*a, o).is_some())
                {
                    break o;
                }
            },
        }
    }

    /// "rising", "end_below_base" or "spaced".
    pub fn name(&self) -> &'static str {
        match self {
            GlobalsOrder::Rising => "rising",
            GlobalsOrder::EndBelowBase => "end_below_base",
            GlobalsOrder::Spaced { .. } => "spaced",
        }
    }

    /// End - Base of the "etw" or "errlog" globals.
    pub fn delta(&self, which: &str) -> i64 {
        match (self, which) {
            (GlobalsOrder::Rising, _) => 8,
            (GlobalsOrder::EndBelowBase, _) => -8,
            (GlobalsOrder::Spaced { etw_delta, .. }, "etw") => i64::from(*etw_delta),
            (GlobalsOrder::Spaced { errlog_delta, .. }, _) => i64::from(*errlog_delta),
        }
    }
}

/// Which PERFINFO hooks logger 2's buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerfMix {
    /// D1 (triage-etw.md §2.1): ~79 % MSI ISR 0x0F32, one ISR 0x0F43, DPC 0x0F44, timer DPC
    /// 0x0F45.
    D1,
    /// `triage_arm64.dmp` block #25 (measured: 38 DPC 0x0F44, 22 ISR 0x0F43, 2 timer DPC
    /// 0x0F45, no MSI): the same proportions (exactly those counts for 62 records, so the
    /// window is 0x8B8 bytes as measured), in a drawn order.
    Arm64,
}

/// Logger 2's current buffer on the crashing CPU (PERFINFO64 records), saved as the window
/// `[Base+Valid-min(Valid,0x2000), Base+Valid)` (triage-etw.md §1.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentBufferSpec {
    /// Buffer VA (= KiCurrentEtwBufferBase).
    pub va: u64,
    pub buffer_size: u32,
    /// PERFINFO records written from offset 0x48.
    pub records: usize,
    pub sequence_number: u64,
    /// Cycles between the last record and the crash CPU's KPRCB.StartCycles (D1: 252).
    pub last_record_before_start_cycles: u64,
    /// `Some(v)`: the kernel's valid length is `v` (CurrentOffset ran past BufferSize,
    /// SavedOffset = v) and the buffer holds no records; used for windows shorter than a
    /// buffer header.
    pub valid_override: Option<u32>,
    /// Whether the 8-byte KiCurrentEtwBufferBase / KiCurrentEtwBufferOffset blocks are saved.
    pub save_base: bool,
    pub save_end: bool,
    pub mix: PerfMix,
}

/// Where the error-log session's buffer comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrlogSource {
    /// Buffer `buffer` of blob session `session` (the real case: EventLog-System is also in the
    /// ETW blob, so the window duplicates the tail of that blob buffer). Its valid length must
    /// be at least 0x1048.
    BlobBuffer { session: usize, buffer: usize },
    /// A buffer that is not in the blob (EVENT_HEADER records, FILETIME clock).
    Standalone {
        va: u64,
        logger_id: u16,
        buffer_size: u32,
        records: usize,
        /// As [`CurrentBufferSpec::valid_override`] (`Some(0)`: a zero-size window).
        valid_override: Option<u32>,
    },
}

/// The IopErrorLogSession window (limit 0x1000).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrlogSpec {
    pub source: ErrlogSource,
    /// KiCurrentErrLogBufferBase / KiCurrentErrLogBufferOffset blocks saved.
    pub save_base: bool,
    pub save_end: bool,
}

/// A buffer of a blob session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlobBufferSpec {
    /// 0x48 bytes: State 0, BufferFlag 0x100, CurrentOffset = Offset = 0x48 (as in D1).
    Empty,
    /// EVENT_HEADER records; State 1; ProcessorIndex `processor`.
    Events { records: usize, processor: u16 },
    /// TRACE_MESSAGE records (`crate::MessageSpec`) with OptionFlags cycling through `flags`,
    /// and an EVENT_HEADER record after every `event_every` messages (0: none); State 1,
    /// ProcessorIndex `processor`; timestamps in the session clock (as the real ARM64
    /// WiFiSession buffers: messages with flags 0xAA between EVENT_HEADER records).
    Messages {
        records: usize,
        processor: u16,
        flags: Vec<u16>,
        event_every: usize,
    },
}

/// One session of the ETW blob (a logger with EVENT_TRACE_ADDTO_TRIAGE_DUMP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobSessionSpec {
    pub logger_id: u16,
    pub name: String,
    pub logger_mode: u32,
    /// 1 QPC, 2 system time (FILETIME), 3 CPU cycles.
    pub clock_type: u32,
    pub buffer_size: u32,
    /// FILETIME.
    pub start_time: u64,
    /// ReferenceTime {SystemTime (FILETIME), PerfClock (session clock)}.
    pub reference_system_time: u64,
    pub reference_perf_clock: u64,
    /// VA of the first buffer (the others follow at BufferSize steps).
    pub first_buffer_va: u64,
    /// VA of the logger context (GlobalList head = context + 0x60).
    pub context_va: u64,
    /// With the ×2 convention: bytes written at the end of the name part's second half (the
    /// rest is zero). Measured on `triage_arm64.dmp`: RdpIdd's second half ends in 12 stray
    /// bytes (file 0xBBD88); empty elsewhere.
    pub name_pad_tail: Vec<u8>,
    pub buffers: Vec<BlobBufferSpec>,
}

/// The ETW blob `{2B88B710-1C93-4F7C-B06C-655ECC50DECC}` in the secondary data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtwBlobSpec {
    pub name_convention: NameConvention,
    pub sessions: Vec<BlobSessionSpec>,
}

/// Deliberate damage (bad-input scenarios).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Two extra descriptors at the end of the table: one whose FileOffset is past EOF, one
    /// that starts inside the file and ends past EOF.
    BlocksPastEof,
    /// The KiCurrentErrLogBufferOffset descriptor's FileOffset points past EOF (its bytes are
    /// still written where they would have been, but nothing refers to them).
    ErrlogEndPastEof,
    /// Extra descriptors: a VA sub-range of logger 2's window mapped to the same bytes
    /// (consistent), an unrelated VA mapped onto the error-log window's bytes, one onto the
    /// dump header (FileOffset 0), and two different contents for one unrelated VA range.
    OverlappingBlocks,
    /// Cut the file this many bytes into the error-log window block (inside the data blocks).
    TruncateInErrlogWindow(u32),
    /// The ETW blob (the last blob) claims `DataSize` this much larger than what the file holds.
    BlobDataSizeLies(u32),
    /// Session `session`'s header claims this LoggerName.Length (bytes); its name and buffers
    /// are written as for the true length, so the claimed part overruns the blob.
    SessionNameLengthOverrun { session: usize, length: u32 },
}

/// What to put in a forged triage dump. Deterministic: the same spec gives the same bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriageSpec {
    /// Scenario name (file stem).
    pub name: String,
    pub arch: TriageArch,
    /// Relative placement of each window's Base / End globals.
    pub globals: GlobalsOrder,
    /// NT build: header MinorVersion, blob NtBuildNumber (| 0xF0000000), NtBuildLabEx.
    pub build: u32,
    /// Revision (QFE) in NtBuildLabEx and the Kernel-General event (D1: 804).
    pub qfe: u32,
    /// PDB identity written to the ISF metadata ("5278AFF8-6C34-1677-D7D7-835C85B7B844").
    pub pdb_guid: String,
    pub pdb_age: u32,
    pub cpus: u32,
    /// The crashing CPU (KPRCB.Number of the PrcbOffset copy; logger 2's ProcessorIndex).
    pub crash_cpu: u32,
    pub kernel_base: u64,
    pub bugcheck_code: u32,
    pub bugcheck_params: [u64; 4],
    /// Header SystemTime (FILETIME) and SystemUpTime (100 ns).
    pub system_time: u64,
    pub system_up_time: u64,
    /// EtwpBootTime (FILETIME).
    pub boot_time: u64,
    /// KPRCB.MHz = EtwCPUSpeedInMHz.
    pub mhz: u32,
    /// EtwPerfFreq.
    pub perf_freq: u64,
    /// KeMaximumIncrement.
    pub max_increment: u32,
    /// The crashing CPU's KPRCB.StartCycles; the other CPUs' are 47-64 µs later.
    pub start_cycles: u64,
    pub current_buffer: Option<CurrentBufferSpec>,
    pub errlog: Option<ErrlogSpec>,
    /// `None`: no ETW blob; `Some` with no sessions: the 0x20-byte header only.
    pub etw_blob: Option<EtwBlobSpec>,
    /// Non-ETW blobs before the ETW blob (other GUIDs, PrePad/PostPad, a zero-size blob).
    pub other_blobs: bool,
    pub faults: Vec<Fault>,
    pub seed: u64,
}

/// EVENT_TRACE_ADDTO_TRIAGE_DUMP | NO_PER_PROCESSOR_BUFFERING | ... of D1's EventLog-System.
pub const EVENTLOG_SYSTEM_MODE: u32 = 0x9880_0180;
/// LoggerMode of D1's two QPC sessions.
pub const QPC_SESSION_MODE: u32 = 0x8080_0002;

/// VA of EventLog-System's first buffer in D1 (= KiCurrentErrLogBufferBase).
const ERRLOG_BUFFER_VA: u64 = 0xFFFF_C08B_DEA1_2000;

impl TriageSpec {
    /// Like D1: 16 CPUs at 3593 MHz, logger 2's 0x1000-byte buffer with 92 PERFINFO records
    /// (valid < 0x2000: saved from its start), EventLog-System (logger 10, FILETIME,
    /// BufferSize 0x10000, 2 buffers: ~107 records then empty) whose tail is the error-log
    /// window, two QPC sessions with 32 empty buffers each, ×2 names, non-ETW blobs.
    pub fn standard() -> Self {
        let system_time = 132_583_451_029_877_657;
        let boot_time = 0x01D7_07F2_3BA7_02C0;
        let reference = 0x01D7_07F2_3BD8_E346;
        TriageSpec {
            name: "standard".into(),
            arch: TriageArch::X64,
            globals: GlobalsOrder::Rising,
            build: 19041,
            qfe: 804,
            pdb_guid: consts::REAL_19041_GUID.into(),
            pdb_age: 1,
            cpus: 16,
            crash_cpu: 0,
            kernel_base: 0xFFFF_F804_7BA0_0000,
            bugcheck_code: 0x1000_007E,
            bugcheck_params: [
                0xFFFF_FFFF_C000_0005,
                0xFFFF_F804_8B58_334C,
                0xFFFF_8504_2989_1EE8,
                0xFFFF_8504_2989_1720,
            ],
            system_time,
            system_up_time: 37_470_697,
            boot_time,
            mhz: 3593,
            perf_freq: 10_000_000,
            max_increment: 156_250,
            start_cycles: 0xD_9D65_25C4,
            current_buffer: Some(CurrentBufferSpec {
                va: 0xFFFF_C08B_DE2F_7000,
                buffer_size: 0x1000,
                records: 92,
                sequence_number: 0x9E,
                last_record_before_start_cycles: 252,
                valid_override: None,
                save_base: true,
                save_end: true,
                mix: PerfMix::D1,
            }),
            errlog: Some(ErrlogSpec {
                source: ErrlogSource::BlobBuffer {
                    session: 0,
                    buffer: 0,
                },
                save_base: true,
                save_end: true,
            }),
            etw_blob: Some(EtwBlobSpec {
                name_convention: NameConvention::Doubled,
                sessions: vec![
                    BlobSessionSpec {
                        logger_id: 10,
                        name: "EventLog-System".into(),
                        logger_mode: EVENTLOG_SYSTEM_MODE,
                        clock_type: 2,
                        buffer_size: 0x10000,
                        start_time: 0x01D7_07F2_3BDC_423B,
                        reference_system_time: reference,
                        reference_perf_clock: reference,
                        first_buffer_va: ERRLOG_BUFFER_VA,
                        context_va: 0xFFFF_C08B_DE9D_5A40,
                        name_pad_tail: Vec::new(),
                        buffers: vec![
                            BlobBufferSpec::Events {
                                records: 107,
                                processor: 0,
                            },
                            BlobBufferSpec::Empty,
                        ],
                    },
                    BlobSessionSpec {
                        logger_id: 12,
                        name: "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace".into(),
                        logger_mode: QPC_SESSION_MODE,
                        clock_type: 1,
                        buffer_size: 0x10000,
                        start_time: 0x01D7_07F2_3BDD_6AE1,
                        reference_system_time: reference,
                        reference_perf_clock: 0x5D_85F3,
                        first_buffer_va: 0xFFFF_C08B_DEC5_2000,
                        context_va: 0xFFFF_C08B_DE9D_4680,
                        name_pad_tail: Vec::new(),
                        buffers: vec![BlobBufferSpec::Empty; 32],
                    },
                    BlobSessionSpec {
                        logger_id: 18,
                        name: "WiFiSession".into(),
                        logger_mode: QPC_SESSION_MODE,
                        clock_type: 1,
                        buffer_size: 0x14000,
                        start_time: 0x01D7_07F2_3BDD_AE00,
                        reference_system_time: reference,
                        reference_perf_clock: 0x5D_85F3,
                        first_buffer_va: 0xFFFF_C08B_DF2E_2000,
                        context_va: 0xFFFF_C08B_DE9D_FA40,
                        name_pad_tail: Vec::new(),
                        buffers: vec![BlobBufferSpec::Empty; 32],
                    },
                ],
            }),
            other_blobs: true,
            faults: Vec::new(),
            seed: 0x0712_1A6E_0001_9041,
        }
    }

    /// Later-build style: ×1 names, build 22621 (synthetic PDB GUID; symbol RVAs and type
    /// layouts are still those of the forged ISF), 8 CPUs, crash on CPU 2, and the QPC session
    /// WiFiSession has a buffer with records (ProcessorIndex 3).
    pub fn single_names() -> Self {
        let mut s = Self::standard();
        s.name = "names_x1".into();
        s.build = 22621;
        s.qfe = 1265;
        s.pdb_guid = "F0E9D8C7-B6A5-4938-8271-605F4E3D2C1B".into();
        s.cpus = 8;
        s.crash_cpu = 2;
        s.seed ^= 0x2_2621;
        let blob = s.etw_blob.as_mut().expect("standard has a blob");
        blob.name_convention = NameConvention::Single;
        blob.sessions[2].buffers[0] = BlobBufferSpec::Events {
            records: 6,
            processor: 3,
        };
        s
    }

    /// The ETW blob holds its 0x20-byte header and no session; the error-log window comes
    /// from a standalone EventLog-System buffer (nothing to deduplicate).
    pub fn blob_without_sessions() -> Self {
        let mut s = Self::standard();
        s.name = "blob_no_sessions".into();
        s.cpus = 4;
        s.seed ^= 0x3;
        s.etw_blob.as_mut().expect("blob").sessions.clear();
        s.errlog = Some(ErrlogSpec {
            source: ErrlogSource::Standalone {
                va: ERRLOG_BUFFER_VA,
                logger_id: 10,
                buffer_size: 0x10000,
                records: 60,
                valid_override: None,
            },
            save_base: true,
            save_end: true,
        });
        s
    }

    /// Pointer globals missing: logger 2's Base and End blocks are both absent, the error-log
    /// session's Base block is absent (End present). The window blocks are still there, but
    /// per triage-etw.md §4.1 step 3.1 neither session counts as saved.
    pub fn missing_globals() -> Self {
        let mut s = Self::standard();
        s.name = "missing_globals".into();
        s.cpus = 4;
        s.seed ^= 0x4;
        let cb = s.current_buffer.as_mut().expect("cb");
        cb.save_base = false;
        cb.save_end = false;
        s.errlog.as_mut().expect("errlog").save_base = false;
        s
    }

    /// Windows shorter than a buffer header: logger 2's valid length is 0x20 (window
    /// `[Base, Base+0x20)`: a cut header, no records); the error-log session's valid length is 0
    /// (CurrentOffset past BufferSize, SavedOffset 0: a zero-size block, End == Base). The blob
    /// keeps only the two QPC sessions.
    pub fn short_windows() -> Self {
        let mut s = Self::standard();
        s.name = "short_windows".into();
        s.cpus = 4;
        s.seed ^= 0x5;
        s.current_buffer.as_mut().expect("cb").valid_override = Some(0x20);
        s.errlog = Some(ErrlogSpec {
            source: ErrlogSource::Standalone {
                va: ERRLOG_BUFFER_VA,
                logger_id: 10,
                buffer_size: 0x10000,
                records: 0,
                valid_override: Some(0),
            },
            save_base: true,
            save_end: true,
        });
        s.etw_blob.as_mut().expect("blob").sessions.remove(0);
        s
    }

    /// Logger 2's buffer is 0x4000 bytes with ~0x3000 valid: the window is its last 0x2000
    /// bytes, starting mid-record with no header. Crash on CPU 3 of 4.
    pub fn logger2_cut() -> Self {
        let mut s = Self::standard();
        s.name = "logger2_cut".into();
        s.cpus = 4;
        s.crash_cpu = 3;
        s.seed ^= 0x6;
        let cb = s.current_buffer.as_mut().expect("cb");
        cb.buffer_size = 0x4000;
        cb.records = 300;
        s
    }

    /// Data-block descriptors past the end of the file, including the error-log End pointer's
    /// (so that window cannot be recovered).
    pub fn bad_blocks_past_eof() -> Self {
        let mut s = Self::standard();
        s.name = "bad_blocks_past_eof".into();
        s.cpus = 4;
        s.faults = vec![Fault::BlocksPastEof, Fault::ErrlogEndPastEof];
        s
    }

    /// Overlapping data blocks (VA and file ranges); the ETW results are as in `standard`.
    pub fn bad_overlapping_blocks() -> Self {
        let mut s = Self::standard();
        s.name = "bad_overlapping_blocks".into();
        s.cpus = 4;
        s.faults = vec![Fault::OverlappingBlocks];
        s
    }

    /// The file is cut 0x800 bytes into the error-log window block: logger 2's window survives,
    /// the error-log window's pointers and the whole secondary data are gone.
    pub fn bad_truncated() -> Self {
        let mut s = Self::standard();
        s.name = "bad_truncated".into();
        s.cpus = 4;
        s.faults = vec![Fault::TruncateInErrlogWindow(0x800)];
        s
    }

    /// The ETW blob's DataSize claims 1 MiB more than the file holds (its sessions are intact).
    pub fn bad_blob_size() -> Self {
        let mut s = Self::standard();
        s.name = "bad_blob_size".into();
        s.cpus = 4;
        s.faults = vec![Fault::BlobDataSizeLies(0x10_0000)];
        s
    }

    /// The last session's header claims LoggerName.Length 0x7FF0: its part overruns the blob
    /// under both conventions; the sessions before it are intact.
    pub fn bad_session_name() -> Self {
        let mut s = Self::standard();
        s.name = "bad_session_name".into();
        s.cpus = 4;
        s.faults = vec![Fault::SessionNameLengthOverrun {
            session: 2,
            length: 0x7FF0,
        }];
        s
    }
}

impl TriageSpec {
    /// `standard` with the window globals placed per `order` (4 CPUs).
    pub fn with_globals(mut self, order: GlobalsOrder) -> Self {
        self.globals = order;
        self
    }

    /// x64 `standard` with each window's End global 8 bytes *below* its Base global (the
    /// ARM64 kernel's order on an x64 dump).
    pub fn globals_end_below_base() -> Self {
        let mut s = Self::standard().with_globals(GlobalsOrder::EndBelowBase);
        s.name = "globals_end_below_base".into();
        s.cpus = 4;
        s.seed ^= 0x7;
        s
    }

    /// x64 `standard` with non-adjacent globals (End 0x1A8 below / 0x2E0 above Base).
    pub fn globals_spaced() -> Self {
        let mut s = Self::standard().with_globals(GlobalsOrder::Spaced {
            etw_delta: -0x1A8,
            errlog_delta: 0x2E0,
        });
        s.name = "globals_spaced".into();
        s.cpus = 4;
        s.seed ^= 0x8;
        s
    }

    /// x64 `single_names` whose WiFiSession buffer holds TRACE_MESSAGE records with every
    /// OptionFlags combination ([`crate::all_message_flag_combinations`], each twice) and an
    /// EVENT_HEADER record after every 16 messages.
    pub fn messages_all_flags() -> Self {
        let mut s = Self::single_names();
        s.name = "messages_all_flags".into();
        s.cpus = 4;
        s.crash_cpu = 1;
        s.seed ^= 0x9;
        let blob = s.etw_blob.as_mut().expect("blob");
        let flags = crate::etw::message::all_message_flag_combinations();
        blob.sessions[2].buffers[0] = BlobBufferSpec::Messages {
            records: 2 * flags.len(),
            processor: 3,
            flags,
            event_every: 16,
        };
        s
    }

    /// Mirrors the real ARM64 triage dump `triage_arm64.dmp` (Windows 11 22000, measured):
    /// 8 CPUs, bug check 0x1C8 (0x1B58, nt+0xC20860, 0, 0), 1516 MHz, EtwPerfFreq 19.2 MHz;
    /// logger 2's 0x1000-byte buffer at 0xFFFFBB8EB5AAE000 with 62 PERFINFO records (DPC,
    /// ISR, timer DPC; valid 0x8B8 < 0x2000, so the window starts at the base), its End global
    /// 8 bytes *below* its Base global (nt+0xC36AC8 / nt+0xC36AD0), no error-log window; the
    /// ETW blob (2 × Length names, as measured: part lengths 0x3C / 0xAC / 0x2C / 0x24 for
    /// Lengths 30 / 86 / 22 / 18) with sessions 11 EventLog-System (FILETIME, 2 buffers of
    /// events), 19 RdpIdd (QPC, 16 empty), 35 WiFiSession (QPC, 4 buffers of messages with
    /// flags 0xAA between events, ProcessorIndex 6 / 3 / 2 / 4, then 6 empty), 40 CldFltLog
    /// (FILETIME, one message, then an empty buffer).
    pub fn arm64() -> Self {
        let kb = 0xFFFF_F803_F2E0_0000;
        let reference = 0x01D7_A911_A1C6_8D08;
        let qpc_ref = 0x2C1_124E;
        let session =
            |logger_id: u16, name: &str, mode: u32, clock: u32, size: u32| BlobSessionSpec {
                logger_id,
                name: name.into(),
                logger_mode: mode,
                clock_type: clock,
                buffer_size: size,
                start_time: 0,
                reference_system_time: reference,
                reference_perf_clock: if clock == 1 { qpc_ref } else { reference },
                first_buffer_va: 0,
                context_va: 0,
                name_pad_tail: Vec::new(),
                buffers: Vec::new(),
            };
        let msgs = |records: usize, processor: u16, event_every: usize| BlobBufferSpec::Messages {
            records,
            processor,
            flags: vec![0xAA],
            event_every,
        };
        let mut evl = session(11, "EventLog-System", EVENTLOG_SYSTEM_MODE, 2, 0x10000);
        evl.start_time = 0x01D7_A911_A1E5_48E7;
        evl.first_buffer_va = 0xFFFF_BB8E_B1A9_8000;
        evl.context_va = 0xFFFF_BB8E_B1A3_1A40;
        evl.buffers = vec![
            BlobBufferSpec::Events {
                records: 21,
                processor: 0,
            },
            BlobBufferSpec::Events {
                records: 2,
                processor: 0,
            },
        ];
        let mut rdp = session(
            19,
            "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace",
            QPC_SESSION_MODE,
            1,
            0x10000,
        );
        rdp.start_time = 0x01D7_A911_A1EB_78F7;
        rdp.first_buffer_va = 0xFFFF_BB8E_B3C2_0000;
        rdp.context_va = 0xFFFF_BB8E_B1A3_4680;
        rdp.buffers = vec![BlobBufferSpec::Empty; 16];
        rdp.name_pad_tail = vec![
            0xDA, 0x1C, 0x53, 0xB9, 0xD6, 0x9F, 0x71, 0xBF, 0xD9, 0, 0, 0,
        ];
        let mut wifi = session(35, "WiFiSession", QPC_SESSION_MODE, 1, 0x14000);
        wifi.start_time = 0x01D7_A911_A1ED_BDB9;
        wifi.first_buffer_va = 0xFFFF_BB8E_B4E0_0000;
        wifi.context_va = 0xFFFF_BB8E_B1A3_FA40;
        wifi.buffers = vec![
            msgs(120, 6, 6),
            msgs(90, 3, 5),
            msgs(100, 2, 4),
            msgs(40, 4, 3),
        ];
        wifi.buffers.extend(vec![BlobBufferSpec::Empty; 6]);
        let mut cld = session(40, "CldFltLog", 0x9080_0002, 2, 0x1000);
        cld.start_time = 0x01D7_A911_AA01_AC69;
        cld.reference_system_time = 0x01D7_A911_AA01_AC9D;
        cld.reference_perf_clock = 0x01D7_A911_AA01_AC9D;
        cld.first_buffer_va = 0xFFFF_BB8E_B5F0_0000;
        cld.context_va = 0xFFFF_BB8E_B1A4_2A40;
        cld.buffers = vec![msgs(1, 0, 0), BlobBufferSpec::Empty];
        TriageSpec {
            name: "arm64".into(),
            arch: TriageArch::Arm64,
            globals: GlobalsOrder::EndBelowBase,
            build: 22000,
            // Choice: the dump does not say its revision.
            qfe: 194,
            pdb_guid: "A64A6400-2200-4000-8000-0000000A64A6".into(),
            pdb_age: 1,
            cpus: 8,
            crash_cpu: 0,
            kernel_base: kb,
            bugcheck_code: 0x1C8,
            bugcheck_params: [0x1B58, kb + 0xC2_0860, 0, 0],
            system_time: 0x01D7_A913_7C0D_BDD7,
            system_up_time: 0x1_DADF_9678,
            boot_time: 0x01D7_A911_A0C2_DC8C,
            mhz: 1516,
            perf_freq: 19_200_000,
            max_increment: 156_250,
            start_cycles: 240_108_998_870,
            current_buffer: Some(CurrentBufferSpec {
                va: 0xFFFF_BB8E_B5AA_E000,
                buffer_size: 0x1000,
                records: 62,
                sequence_number: 14232,
                last_record_before_start_cycles: 252,
                valid_override: None,
                save_base: true,
                save_end: true,
                mix: PerfMix::Arm64,
            }),
            errlog: None,
            etw_blob: Some(EtwBlobSpec {
                name_convention: NameConvention::Doubled,
                sessions: vec![evl, rdp, wifi, cld],
            }),
            other_blobs: true,
            faults: Vec::new(),
            seed: 0xAA64_0000_0002_2000,
        }
    }

    /// `arm64` with the ×1 name convention (the later Win11 build of triage-etw.md §1.3 K3b).
    pub fn arm64_names_x1() -> Self {
        let mut s = Self::arm64();
        s.name = "arm64_names_x1".into();
        s.seed ^= 0x1;
        s.etw_blob.as_mut().expect("blob").name_convention = NameConvention::Single;
        s
    }

    /// `arm64` plus an error-log window (a standalone EventLog-System-like buffer, logger 11)
    /// with the globals placed per `order`.
    pub fn arm64_with_errlog(name: &str, order: GlobalsOrder) -> Self {
        let mut s = Self::arm64().with_globals(order);
        s.name = name.into();
        s.seed ^= (0x10 + order.delta("etw")) as u64;
        s.errlog = Some(ErrlogSpec {
            source: ErrlogSource::Standalone {
                va: 0xFFFF_BB8E_B200_0000,
                logger_id: 11,
                buffer_size: 0x10000,
                records: 50,
                valid_override: None,
            },
            save_base: true,
            save_end: true,
        });
        s
    }

    /// `arm64` whose WiFiSession buffers hold every OptionFlags combination.
    pub fn arm64_messages_all_flags() -> Self {
        let mut s = Self::arm64();
        s.name = "arm64_messages_all_flags".into();
        s.seed ^= 0x20;
        let flags = crate::etw::message::all_message_flag_combinations();
        let wifi = &mut s.etw_blob.as_mut().expect("blob").sessions[2];
        wifi.buffers[0] = BlobBufferSpec::Messages {
            records: flags.len(),
            processor: 6,
            flags: flags.clone(),
            event_every: 0,
        };
        wifi.buffers[1] = BlobBufferSpec::Messages {
            records: flags.len(),
            processor: 3,
            flags: flags.into_iter().rev().collect(),
            event_every: 7,
        };
        s
    }

    /// The ARM64 scenarios.
    pub fn arm64_scenarios() -> Vec<TriageSpec> {
        vec![
            Self::arm64(),
            Self::arm64_names_x1(),
            Self::arm64_with_errlog("arm64_errlog_end_below_base", GlobalsOrder::EndBelowBase),
            Self::arm64_with_errlog("arm64_errlog_rising", GlobalsOrder::Rising),
            Self::arm64_with_errlog(
                "arm64_errlog_spaced",
                GlobalsOrder::Spaced {
                    etw_delta: 0x120,
                    errlog_delta: -0x3F8,
                },
            ),
            Self::arm64_messages_all_flags(),
        ]
    }
}

/// Every scenario, `standard` first.
pub fn triage_scenarios() -> Vec<TriageSpec> {
    vec![
        TriageSpec::standard(),
        TriageSpec::single_names(),
        TriageSpec::blob_without_sessions(),
        TriageSpec::missing_globals(),
        TriageSpec::short_windows(),
        TriageSpec::logger2_cut(),
        TriageSpec::bad_blocks_past_eof(),
        TriageSpec::bad_overlapping_blocks(),
        TriageSpec::bad_truncated(),
        TriageSpec::bad_blob_size(),
        TriageSpec::bad_session_name(),
        TriageSpec::globals_end_below_base(),
        TriageSpec::globals_spaced(),
        TriageSpec::messages_all_flags(),
    ]
    .into_iter()
    .chain(TriageSpec::arm64_scenarios())
    .collect()
}

/// A forged triage dump.
#[derive(Clone, Debug)]
pub struct ForgedTriage {
    /// The .dmp file.
    pub bytes: Vec<u8>,
    /// A minimal Volatility 3 ISF for the synthetic kernel: metadata (PDB GUID/age,
    /// ntkrnlmp.pdb), the real ISF's base types, `_KPRCB` (subset), `_KTHREAD` (stub),
    /// `_WMI_BUFFER_HEADER` and its dependencies, `_ETW_BUFFER_STATE`, and every symbol the dump
    /// refers to (real 19041 RVAs).
    pub isf_json: String,
    pub expected: ExpectedTriage,
}

/// Build the dump for `spec`.
pub fn forge_triage(spec: &TriageSpec) -> ForgedTriage {
    build::build(spec)
}

// ------------------------------------------------------------------------------------------
// Expected values. All addresses and offsets are plain integers (u64 in JSON); GUIDs are
// lowercase, dashed, without braces; buffer offsets are relative to the buffer start.
// ------------------------------------------------------------------------------------------

/// What a correct reader recovers from a forged triage dump.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedTriage {
    pub scenario: String,
    pub arch: TriageArch,
    /// The spec's placement of the window globals (the windows say where each one is).
    pub globals_order: GlobalsOrder,
    pub file_len: u64,
    /// DUMP_HEADER64 MinorVersion.
    pub build: u32,
    pub machine_image_type: u32,
    pub number_processors: u32,
    pub bugcheck_code: u32,
    pub bugcheck_params: [u64; 4],
    pub system_time: u64,
    pub system_up_time: u64,
    pub directory_table_base: u64,
    /// ARM64 only: the ARM64_NT_CONTEXT at ContextOffset (0x348).
    pub arm64_context: Option<ExpectedArm64Context>,
    /// KDBG+0x18 = driver-list entry 0 DllBase.
    pub kern_base: u64,
    /// Header KdDebuggerDataBlock (= KernBase + ISF RVA).
    pub kdbg_va: u64,
    pub ps_loaded_module_list: u64,
    pub ps_active_process_head: u64,
    pub pdb_guid: String,
    pub pdb_age: u32,
    pub triage: ExpectedTriageHeader,
    /// The descriptor table as written (every entry, in order).
    pub data_blocks: Vec<ExpectedBlock>,
    /// Pairs of descriptors (lower index first) whose VA or file ranges intersect.
    pub overlaps: Vec<ExpectedOverlap>,
    pub drivers: Vec<ExpectedDriver>,
    /// From the KPRCB copy at PrcbOffset.
    pub crash_cpu: ExpectedCpu,
    /// Every CPU's KPRCB data block, by CPU number.
    pub cpus: Vec<ExpectedCpu>,
    /// Name -> VA of every symbol in the ISF.
    pub symbols: BTreeMap<String, u64>,
    /// The value of ErrorLogSessionOpened (its data block is always present).
    pub error_log_session_opened: bool,
    /// Windows whose Base and End pointers are both readable, logger 2 ("etw") first.
    pub windows: Vec<ExpectedWindow>,
    /// Window blocks that were saved but whose pointers are missing or unreadable: not
    /// recoverable as sessions (triage-etw.md §4.1 step 3.1).
    pub orphan_window_blocks: Vec<ExpectedOrphan>,
    /// The DumpBlob region (None when the file ends before it).
    pub secondary: Option<ExpectedSecondary>,
    pub etw_blob: Option<ExpectedEtwBlob>,
    /// Every recoverable record: current_buffer, then errlog_tail, then secondary_data.
    pub records: Vec<ExpectedRecord>,
    /// Error-log tail records that are byte-identical copies of ETW-blob records.
    pub duplicates: Vec<ExpectedDuplicate>,
    /// Record counts by source.
    pub record_counts: BTreeMap<String, usize>,
}

/// The ARM64 CONTEXT (winnt.h ARM64_NT_CONTEXT, 0x390 bytes) at file 0x348.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedArm64Context {
    pub file_offset: u64,
    pub size: u32,
    pub context_flags: u32,
    pub cpsr: u32,
    /// X0..X28.
    pub x: Vec<u64>,
    pub fp: u64,
    pub lr: u64,
    pub sp: u64,
    pub pc: u64,
    pub fpcr: u32,
    pub fpsr: u32,
    /// The header's EXCEPTION_RECORD64.ExceptionAddress (= pc).
    pub exception_address: u64,
    /// DUMP_HEADER64 BootId (+0x1054).
    pub boot_id: u32,
}

/// TRIAGE_DUMP header fields (crash-dump-format.md §1.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedTriageHeader {
    pub size_of_dump: u32,
    pub valid_offset: u32,
    pub prcb_offset: u32,
    pub process_offset: u32,
    pub thread_offset: u32,
    pub driver_list_offset: u32,
    pub driver_count: u32,
    pub string_pool_offset: u32,
    pub string_pool_size: u32,
    pub debugger_data_offset: u32,
    pub debugger_data_size: u32,
    pub data_blocks_offset: u32,
    pub data_blocks_count: u32,
}

/// One data-block descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedBlock {
    pub index: usize,
    pub va: u64,
    pub file_offset: u32,
    pub size: u32,
    /// The whole range `[file_offset, file_offset+size)` is inside the file.
    pub in_file: bool,
    /// What the forge put there: "kprcb", "ki_processor_block", "nt_build_lab", "etw_window",
    /// "etw_base", "etw_end", "errlog_window", "errlog_base", "errlog_end",
    /// "error_log_session_opened", "decoy", "bad_past_eof", "bad_overlap".
    pub role: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedOverlap {
    pub a: usize,
    pub b: usize,
    /// "va" or "file".
    pub kind: String,
}

/// A triage driver-list entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedDriver {
    pub index: usize,
    pub full_name: String,
    /// Last path component, as used for module+offset.
    pub base_name: String,
    pub base: u64,
    pub size: u32,
    pub checksum: u32,
    pub timestamp: u32,
}

/// KPRCB values (19041 offsets: Number +0x24, MHz +0x44, StartCycles +0x7EC0, CurrentThread
/// +0x8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedCpu {
    pub number: u32,
    pub mhz: u32,
    pub start_cycles: u64,
    pub current_thread: u64,
    /// The KPRCB VA (KiProcessorBlock entry).
    pub prcb_va: u64,
}

/// The `_WMI_BUFFER_HEADER` fields of a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedBufferHeader {
    pub buffer_size: u32,
    pub saved_offset: u32,
    pub current_offset: u32,
    pub timestamp: u64,
    pub sequence_number: u64,
    pub processor_index: u16,
    pub logger_id: u16,
    pub state: u32,
    pub offset: u32,
    pub buffer_flag: u16,
    pub buffer_type: u16,
}

/// A saved window (KiSaveCurrentEtwTraceBuffer, triage-etw.md §1.2 and §4.1 step 3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedWindow {
    /// "etw" (logger 2's current buffer) or "errlog" (IopErrorLogSession).
    pub which: String,
    /// 0x2000 or 0x1000.
    pub limit: u32,
    /// Ki*BufferBase value.
    pub base: u64,
    /// Ki*BufferOffset value (an end pointer).
    pub end: u64,
    /// end - base.
    pub valid: u64,
    /// base + valid - min(valid, limit).
    pub start_va: u64,
    pub file_offset: u64,
    /// end - start_va (the block's size).
    pub size: u64,
    pub block_index: usize,
    pub base_block_index: usize,
    pub end_block_index: usize,
    /// VAs of the Ki*BufferBase / Ki*BufferOffset globals (= those blocks' VAs).
    pub base_global_va: u64,
    pub end_global_va: u64,
    /// end_global_va - base_global_va: 8 ("rising"), -8 ("end_below_base"), else "spaced".
    pub end_global_delta: i64,
    /// "rising", "end_below_base" or "spaced" (from the two VAs).
    pub globals_order: String,
    /// The CPU whose buffer this is: "etw" the crash CPU (KiSaveCurrentEtwTraceBuffer
    /// takes KeGetCurrentPrcb()->Number); "errlog" None.
    pub cpu: Option<u32>,
    pub starts_at_base: bool,
    /// Present when the window starts at the base and holds at least 0x48 bytes.
    pub header: Option<ExpectedBufferHeader>,
    /// "etw": always 2 (KiSaveCurrentEtwTraceBuffer saves logger 2, triage-etw.md §1.2 (K1)),
    /// header or not; "errlog": the LoggerId of the blob buffer it duplicates (the
    /// IopErrorLogSession variable is not in the dump), else None.
    pub logger_id: Option<u16>,
    /// The header's ProcessorIndex; None without a header (the records' `cpu` is still the
    /// crash CPU for "etw").
    pub processor_index: Option<u16>,
    /// Offset (from the buffer base) of the first whole record; None when there is none.
    pub first_record_offset: Option<u64>,
    /// Bytes of a cut record at the start of the window, skipped before the first whole
    /// record: 0 when the window starts at the base (the header is not a cut record); the
    /// window size when it starts mid-buffer and holds no whole record.
    pub partial_bytes: u64,
    pub record_count: usize,
    /// Indexes in `ExpectedTriage::records` of the window's whole records, in order.
    pub record_indexes: Vec<usize>,
    /// `Some` when the window's bytes equal the tail `[valid-size, valid)` of a blob buffer.
    pub duplicate_of: Option<ExpectedBufferRef>,
}

/// A buffer of the ETW blob, by position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedBufferRef {
    pub session_index: usize,
    pub buffer_index: usize,
    pub logger_id: u16,
    /// File offset of that buffer's header in the blob.
    pub file_offset: u64,
}

/// A window block that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedOrphan {
    pub which: String,
    pub block_index: usize,
    /// Whether the Base / End pointer blocks exist and lie inside the file.
    pub base_readable: bool,
    pub end_readable: bool,
    /// Where the globals are in the kernel (whether or not their blocks were saved).
    pub base_global_va: u64,
    pub end_global_va: u64,
}

/// The DumpBlob region after SizeOfDump (crash-dump-format.md §1.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedSecondary {
    pub file_offset: u64,
    pub header_size: u32,
    /// 0xF0000000 | build.
    pub build_number: u32,
    pub blobs: Vec<ExpectedBlobEntry>,
}

/// One blob. Data at `header_offset + header_size + pre_pad`; the next blob at
/// `data_offset + data_size + post_pad` (the forge's reading of `_DUMP_BLOB_HEADER`; D1 only
/// has PrePad 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedBlobEntry {
    pub index: usize,
    pub header_offset: u64,
    pub header_size: u32,
    pub guid: String,
    pub data_offset: u64,
    /// As written (may lie).
    pub data_size: u32,
    pub pre_pad: u32,
    pub post_pad: u32,
    /// Bytes of the data that are inside the file.
    pub data_in_file: u32,
}

/// The ETW blob (triage-etw.md §1.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedEtwBlob {
    pub blob_index: usize,
    pub data_offset: u64,
    pub data_size: u32,
    pub data_in_file: u32,
    pub max_increment: u32,
    pub nt_build_number: u32,
    pub cpu_speed_mhz: u32,
    pub boot_time: u64,
    pub perf_freq: u64,
    pub name_convention: NameConvention,
    pub sessions: Vec<ExpectedBlobSession>,
    /// Blob-relative offset where a correct walk stops.
    pub parse_end: u64,
    /// The walk consumed exactly `data_size` bytes.
    pub complete: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedBlobSession {
    pub index: usize,
    /// File offset of the 0x01EBAFE1 signature.
    pub file_offset: u64,
    pub logger_id: u32,
    pub logger_mode: u32,
    pub clock_type: u32,
    pub buffer_size: u32,
    /// LoggerName.Length as written.
    pub name_length: u32,
    /// None when the part cannot be read (`complete` false).
    pub name: Option<String>,
    pub name_convention: NameConvention,
    pub start_time: u64,
    pub reference_system_time: u64,
    pub reference_perf_clock: u64,
    /// 0x30 + name part.
    pub part_length: u64,
    pub buffers: Vec<ExpectedBlobBuffer>,
    /// False when the header is readable but its name part overruns the blob.
    pub complete: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedBlobBuffer {
    pub index: usize,
    pub file_offset: u64,
    /// `CurrentOffset <= BufferSize ? CurrentOffset : SavedOffset` (= the header's Offset).
    pub valid: u32,
    pub header: ExpectedBufferHeader,
    pub record_count: usize,
    /// The buffer's kernel VA (informational: not stored in the buffer itself; its
    /// neighbours' GlobalEntry links point at VA + 0x38).
    pub va: u64,
}

/// One trace record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRecord {
    pub index: usize,
    /// "current_buffer", "errlog_tail" or "secondary_data".
    pub source: String,
    /// Logger 2 for current_buffer; the session's id for secondary_data; for errlog_tail the
    /// id of the blob buffer it duplicates, else None.
    pub logger_id: Option<u16>,
    /// secondary_data: the session and buffer index in the blob.
    pub session_index: Option<usize>,
    pub buffer_index: Option<usize>,
    pub file_offset: u64,
    /// Offset from the buffer start (its base, not the window start).
    pub buffer_offset: u64,
    /// "perfinfo64", "event_header" (0xC013), "event_header32" (0xC012: the same 0x50-byte
    /// header, as in the real ARM64 dump's WiFiSession) or "message".
    pub header_type: String,
    pub marker: u32,
    /// The record's Size field.
    pub size: u16,
    /// Raw timestamp (cycles, QPC or FILETIME per clock).
    pub timestamp: u64,
    /// Clock: "cycles" (logger 2, inferred per triage-etw.md §2.4), "qpc", "filetime", or
    /// None for an error-log tail without a duplicate.
    pub clock: Option<String>,
    /// current_buffer: the crash CPU; per-processor blob sessions: the buffer's
    /// ProcessorIndex; NO_PER_PROCESSOR_BUFFERING sessions and error-log tails: None.
    pub cpu: Option<u32>,
    /// EVENT_HEADER only (PERFINFO64 records have no thread/process ids).
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    // PERFINFO64
    pub hook_id: Option<u16>,
    pub initial_time: Option<u64>,
    pub routine: Option<u64>,
    /// Base name of the driver-list module holding `routine` ("ntoskrnl.exe" for the kernel).
    pub routine_module: Option<String>,
    pub routine_offset: Option<u64>,
    /// ISF symbol at exactly `routine` (kernel routines only).
    pub routine_symbol: Option<String>,
    pub vector: Option<u16>,
    pub return_value: Option<u8>,
    /// StartCycles of the crash CPU minus the timestamp (current_buffer only).
    pub cycles_before_crash: Option<u64>,
    // EVENT_HEADER
    pub provider: Option<String>,
    pub event_id: Option<u16>,
    pub version: Option<u8>,
    pub channel: Option<u8>,
    pub level: Option<u8>,
    pub opcode: Option<u8>,
    pub task: Option<u16>,
    pub keyword: Option<u64>,
    pub flags: Option<u16>,
    pub event_property: Option<u16>,
    /// Extended-data item types in order (2 = SID, 12 = provider traits).
    pub ext_types: Vec<u16>,
    /// TRACE_MESSAGE records (`header_type` "message"): every field its OptionFlags select.
    /// For a message `timestamp` is the TIMESTAMP field (0 without it), `tid` / `pid` the
    /// SYSTEMINFO fields (None without it).
    pub message: Option<crate::etw::message::ExpectedMessage>,
    /// errlog_tail: index of the identical secondary_data record.
    pub duplicate_of: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedDuplicate {
    /// Index (in `records`) of the error-log tail record.
    pub errlog_record: usize,
    /// Index of the identical record in the ETW blob.
    pub blob_record: usize,
}
