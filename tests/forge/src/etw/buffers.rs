//! ETW trace buffers with data: event records of every header type of etw-internals.md §5, the
//! buffer states and offsets of §2.4–§2.6, and the lists of §3 they hang on. [`crate::etw`]
//! places them (header fields at the fixture's types.h offsets); this module only lays out the
//! bytes after the 0x48-byte `_WMI_BUFFER_HEADER` and says what a reader must find.
//!
//! Record formats (§5): every record starts on an 8-byte boundary of the buffer; `Size` is the
//! unpadded length and the next record starts at `offset + ALIGN8(Size)`.
//!
//! | kind | marker (byte 3, byte 2) | header bytes | Size |
//! |---|---|---|---|
//! | SYSTEM32/64 | 0xC0, 0x01/0x02 | 0x20 | u16 @+4 (HookId @+6) |
//! | COMPACT32/64 | 0xC0, 0x03/0x04 | 0x18 | u16 @+4 |
//! | PERFINFO32/64 | 0xC0, 0x10/0x11; PMC count in bits 8..10, PEBS flag 0x8000 | 0x10 (+8 PEBS index, +8 per PMC counter) | u16 @+4 |
//! | FULL_HEADER32/64 | 0xC0, 0x0A/0x14 | 0x30 (EVENT_TRACE_HEADER) | u16 @+0 |
//! | INSTANCE32/64 | 0xC0, 0x0B/0x15 | 0x48 (EVENT_INSTANCE_GUID_HEADER) | u16 @+0 |
//! | MESSAGE | 0x90, 0x00 | 8 + GUID + ThreadId/ProcessId (OptionFlags 0x22) = 0x20 | u16 @+0 |
//! | EVENT_HEADER32/64 | 0xC0, 0x12/0x13 | 0x50 + extended items (8-aligned) | u16 @+0 |
//!
//! Record keys ([`RecSpec::key`]): `"0x%04x"` of the HookId for SYSTEM, COMPACT and PERFINFO;
//! `"full_header"`, `"instance"`, `"message"`, `"event_header"` for the others.

use std::collections::BTreeMap;

use crate::util::{put_u16, put_u32, put_u64, Rng};

/// sizeof(_WMI_BUFFER_HEADER) (§2: 0x48 in every version).
pub const WMI_BUFFER_HEADER_SIZE: usize = 0x48;

// ETW_BUFFER_STATE (§2.4).
pub const STATE_FREE: u32 = 0;
pub const STATE_GENERAL_LOGGING: u32 = 1;
pub const STATE_FLUSH: u32 = 3;
pub const STATE_COMPRESSED: u32 = 5;
// BufferFlag / BufferType (§2.5).
pub const BUFFER_FLAG_EVENTS_LOST: u16 = 0x0002;
pub const BUFFER_FLAG_COMPRESSED: u16 = 0x0040;
pub const BUFFER_TYPE_GENERIC: u16 = 0;
pub const BUFFER_TYPE_RUNDOWN: u16 = 1;
pub const BUFFER_TYPE_CTX_SWAP: u16 = 2;

// Hook ids (§5.1 and the kernel groups: 0x01 IO, 0x03 process, 0x05 thread, 0x0F perfinfo).
pub const HOOK_CSWITCH: u16 = 0x0524;
pub const HOOK_COMPCS: u16 = 0x0525;
pub const HOOK_THREAD_DCSTART: u16 = 0x0503;
pub const HOOK_PROCESS_START: u16 = 0x0301;
pub const HOOK_DISK_READ: u16 = 0x010A;
pub const HOOK_SAMPLED_PROFILE: u16 = 0x0F2E;
pub const HOOK_SYSCALL_ENTER: u16 = 0x0F33;
pub const HOOK_DPC: u16 = 0x0F42;

/// One event record of a buffer. `data` is the payload length after the header (and after the
/// extended items); the record's Size is [`RecSpec::size`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RecSpec {
    System {
        x64: bool,
        hook: u16,
        version: u8,
        data: usize,
    },
    Compact {
        x64: bool,
        hook: u16,
        version: u8,
        data: usize,
    },
    /// `pmc`: number of ULONG64 PMC counters (0..=7); `pebs`: a ULONG64 PebsIndex.
    PerfInfo {
        x64: bool,
        hook: u16,
        version: u8,
        pmc: u8,
        pebs: bool,
        data: usize,
    },
    Full {
        x64: bool,
        data: usize,
    },
    Instance {
        x64: bool,
        data: usize,
    },
    Message {
        data: usize,
    },
    /// `ext`: extended data items (ExtType, DataSize).
    EventHeader {
        x64: bool,
        ext: Vec<(u16, usize)>,
        data: usize,
    },
    /// A complete record made elsewhere (variation mode: CSwitch events and 0x0525 batches
    /// with ground truth); `key` is its `records_by_key` key.
    Raw {
        key: String,
        bytes: Vec<u8>,
    },
}

pub(crate) fn align8(v: usize) -> usize {
    (v + 7) & !7
}

impl RecSpec {
    /// A CSwitch (0x0524) PERFINFO record: 0x18 bytes of WMI_CONTEXTSWAP (§5.2), version 2
    /// (6.0–1607) or 4 (1709+).
    pub fn cswitch(build: u32, pmc: u8, pebs: bool) -> RecSpec {
        RecSpec::PerfInfo {
            x64: true,
            hook: HOOK_CSWITCH,
            version: cswitch_version(build),
            pmc,
            pebs,
            data: 0x18,
        }
    }

    /// Size field value (unpadded length of the whole record).
    pub fn size(&self) -> usize {
        match self {
            RecSpec::System { data, .. } => 0x20 + data,
            RecSpec::Compact { data, .. } => 0x18 + data,
            RecSpec::PerfInfo {
                pmc, pebs, data, ..
            } => 0x10 + 8 * usize::from(*pebs) + 8 * usize::from(*pmc) + data,
            RecSpec::Full { data, .. } => 0x30 + data,
            RecSpec::Instance { data, .. } => 0x48 + data,
            RecSpec::Message { data } => 0x20 + data,
            RecSpec::EventHeader { ext, data, .. } => {
                0x50 + ext.iter().map(|&(_, n)| align8(8 + n)).sum::<usize>() + data
            }
            RecSpec::Raw { bytes, .. } => bytes.len(),
        }
    }

    /// Key of `records_by_key` / etwdump's `records_by_hook`.
    pub fn key(&self) -> String {
        match self {
            RecSpec::System { hook, .. }
            | RecSpec::Compact { hook, .. }
            | RecSpec::PerfInfo { hook, .. } => format!("0x{hook:04x}"),
            RecSpec::Full { .. } => "full_header".to_string(),
            RecSpec::Instance { .. } => "instance".to_string(),
            RecSpec::Message { .. } => "message".to_string(),
            RecSpec::EventHeader { .. } => "event_header".to_string(),
            RecSpec::Raw { key, .. } => key.clone(),
        }
    }

    /// The record's bytes (unpadded, `size()` long).
    pub(crate) fn encode(&self, ts: u64, rng: &mut Rng) -> Vec<u8> {
        let size = self.size();
        assert!(size <= 0xFFFF, "record size {size:#x}");
        if let RecSpec::Raw { bytes, .. } = self {
            return bytes.clone();
        }
        let mut r = vec![0u8; size];
        rng.fill(&mut r);
        let tid = 0x1000 + (rng.next_u64() % 0x4000) as u32 * 4;
        let pid = 4 + (rng.next_u64() % 0x2000) as u32 * 4;
        // Typed headers with the size in the first USHORT: byte 2 = type, byte 3 = 0xC0.
        let sized_marker = |r: &mut [u8], ty: u8| {
            put_u16(r, 0, size as u16);
            r[2] = ty;
            r[3] = 0xC0;
        };
        match self {
            RecSpec::System {
                x64, hook, version, ..
            }
            | RecSpec::Compact {
                x64, hook, version, ..
            } => {
                let compact = matches!(self, RecSpec::Compact { .. });
                let ty: u32 = match (compact, *x64) {
                    (false, false) => 1,
                    (false, true) => 2,
                    (true, false) => 3,
                    (true, true) => 4,
                };
                put_u32(&mut r, 0, 0xC000_0000 | (ty << 16) | u32::from(*version));
                put_u16(&mut r, 4, size as u16);
                put_u16(&mut r, 6, *hook);
                put_u32(&mut r, 8, tid);
                put_u32(&mut r, 0xC, pid);
                put_u64(&mut r, 0x10, ts);
                if !compact {
                    put_u32(&mut r, 0x18, (rng.next_u64() % 5000) as u32);
                    put_u32(&mut r, 0x1C, (rng.next_u64() % 5000) as u32);
                }
            }
            RecSpec::PerfInfo {
                x64,
                hook,
                version,
                pmc,
                pebs,
                data,
            } => {
                assert!(*pmc <= 7, "at most 7 PMC counters");
                let ty: u32 = if *x64 { 0x11 } else { 0x10 };
                let marker = 0xC000_0000
                    | (ty << 16)
                    | (u32::from(*pebs) << 15)
                    | (u32::from(*pmc) << 8)
                    | u32::from(*version);
                put_u32(&mut r, 0, marker);
                put_u16(&mut r, 4, size as u16);
                put_u16(&mut r, 6, *hook);
                put_u64(&mut r, 8, ts);
                if *hook == HOOK_CSWITCH && *data == 0x18 {
                    let d = size - 0x18;
                    put_u32(&mut r, d, tid);
                    put_u32(&mut r, d + 4, tid + 4);
                    r[d + 8] = 8 + (rng.next_u64() % 8) as u8; // NewThreadPriority
                    r[d + 9] = 8 + (rng.next_u64() % 8) as u8; // OldThreadPriority
                    r[d + 0xC] = (rng.next_u64() % 0x27) as u8; // OldThreadWaitReason
                    r[d + 0xD] = 0; // WaitMode / flags
                    r[d + 0xE] = 5; // OldThreadState: Waiting
                    r[d + 0xF] = (rng.next_u64() % 4) as u8;
                    put_u32(&mut r, d + 0x10, (rng.next_u64() % 300) as u32);
                    put_u32(&mut r, d + 0x14, 0x10_0000);
                }
                if *hook == HOOK_COMPCS && size >= 0x10 + 0x58 {
                    // A compact batch whose times are the record's: PERFINFO_CCSWAP_BUFFER
                    // FirstTimeStamp = ts, then zero bytes (idle-short packets with delta 0, so
                    // every switch is at ts) instead of random packets, whose deltas would put
                    // switch times anywhere (etw-internals.md §4.2-§4.3).
                    let d = 0x10;
                    put_u64(&mut r, d, ts);
                    for b in &mut r[d + 0x58..] {
                        *b = 0;
                    }
                }
            }
            RecSpec::Full { x64, .. } | RecSpec::Instance { x64, .. } => {
                let inst = matches!(self, RecSpec::Instance { .. });
                let ty = match (inst, *x64) {
                    (false, false) => 0x0A,
                    (false, true) => 0x14,
                    (true, false) => 0x0B,
                    (true, true) => 0x15,
                };
                sized_marker(&mut r, ty);
                // Class {Type, Level, Version}.
                r[4] = 1 + (rng.next_u64() % 0x40) as u8;
                r[5] = 4;
                put_u16(&mut r, 6, 2);
                put_u32(&mut r, 8, tid);
                put_u32(&mut r, 0xC, pid);
                put_u64(&mut r, 0x10, ts);
                // Guid @0x18 (random), ProcessorTime @0x28.
                put_u64(&mut r, 0x28, rng.next_u64() % 100_000);
                if inst {
                    put_u32(&mut r, 0x30, 7); // InstanceId
                    put_u32(&mut r, 0x34, 0); // ParentInstanceId
                }
            }
            RecSpec::Message { .. } => {
                put_u16(&mut r, 0, size as u16);
                r[2] = 0; // Reserved
                r[3] = 0x90; // TRACE_HEADER_FLAG | TRACE_MESSAGE
                put_u16(&mut r, 4, 10 + (rng.next_u64() % 40) as u16); // MessageNumber
                put_u16(&mut r, 6, 0x0022); // OptionFlags: GUID | SYSTEMINFO
                put_u32(&mut r, 0x18, tid);
                put_u32(&mut r, 0x1C, pid);
            }
            RecSpec::EventHeader { x64, ext, .. } => {
                sized_marker(&mut r, if *x64 { 0x13 } else { 0x12 });
                let mut flags: u16 = if *x64 { 0x0040 } else { 0x0020 };
                if !ext.is_empty() {
                    flags |= 0x0001; // EXTENDED_INFO
                }
                put_u16(&mut r, 4, flags);
                put_u16(&mut r, 6, 0); // EventProperty
                put_u32(&mut r, 8, tid);
                put_u32(&mut r, 0xC, pid);
                put_u64(&mut r, 0x10, ts);
                // ProviderId @0x18 (random); EVENT_DESCRIPTOR @0x28.
                put_u16(&mut r, 0x28, 1 + (rng.next_u64() % 300) as u16);
                r[0x2A] = 0; // Version
                r[0x2B] = 0x10; // Channel
                r[0x2C] = 4; // Level
                r[0x2D] = 0; // Opcode
                put_u64(&mut r, 0x38, rng.next_u64() % 100_000); // ProcessorTime
                let mut off = 0x50;
                for (i, &(ty, n)) in ext.iter().enumerate() {
                    put_u16(&mut r, off, 0);
                    put_u16(&mut r, off + 2, ty);
                    put_u16(&mut r, off + 4, u16::from(i + 1 < ext.len()));
                    put_u16(&mut r, off + 6, n as u16);
                    let end = off + align8(8 + n);
                    for b in &mut r[off + 8 + n..end] {
                        *b = 0;
                    }
                    off = end;
                }
            }
            RecSpec::Raw { .. } => unreachable!("returned above"),
        }
        r
    }
}

/// PERFINFO version of a CSwitch record for `build` (§5.2): 2 (6.0–1607), 3 (1703), 4 (1709+).
pub fn cswitch_version(build: u32) -> u8 {
    if build >= 16299 {
        4
    } else if build >= 15063 {
        3
    } else {
        2
    }
}

/// What follows the last complete record inside the valid bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tail {
    /// Nothing: the valid bytes end at the (8-aligned) end of the last record.
    None,
    /// A record header (SYSTEM64, Size 0x1F0) whose Size runs past the valid end; the valid
    /// bytes end 0x40 after its start.
    HalfWritten,
    /// A 0x38-byte reservation whose payload was copied but whose marker lacks 0x80 in byte 3
    /// (0x00020002: the marker is written last).
    UnfinishedMarker,
    /// A 0x60-byte reservation still zero (nothing copied yet).
    ZeroReservation,
}

impl Tail {
    fn len(self) -> usize {
        match self {
            Tail::None => 0,
            Tail::HalfWritten => 0x40,
            Tail::UnfinishedMarker => 0x38,
            Tail::ZeroReservation => 0x60,
        }
    }
}

/// How CurrentOffset / SavedOffset / Offset express the valid length (§2.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Offsets {
    /// In-flight: CurrentOffset = valid, SavedOffset 0, Offset 0.
    Live,
    /// Flushed: CurrentOffset = SavedOffset = Offset = valid.
    Flushed,
    /// CurrentOffset > BufferSize (a reservation overflowed it, or a real-file-like
    /// valid + BufferSize); SavedOffset = Offset = valid.
    Overflowed,
    /// A free buffer reset for reuse: CurrentOffset = 0x48, SavedOffset = Offset = 0; the
    /// records after the header are stale and not valid.
    Reset,
}

/// Which `ETW_BUFFER_QUEUE` of the context a buffer is on (linked through +0x20, in the order
/// of the session's buffer list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    BufferQueue,
    OverflowQueue,
}

/// One buffer of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferSpec {
    pub state: u32,
    pub buffer_type: u16,
    pub buffer_flag: u16,
    /// ClientContext.ProcessorNumber (Alignment = 8, so ProcessorIndex = 0x800 | processor).
    pub processor: u32,
    pub sequence_number: u64,
    pub records: Vec<RecSpec>,
    pub tail: Tail,
    pub offsets: Offsets,
    /// Bytes [valid, BufferSize) are 0xFF (a flushed buffer) instead of zero.
    pub fill_ff: bool,
    /// Some(n): a compressed buffer: n pseudo-random bytes after the header, valid = 0x48 + n
    /// (8-aligned), not parsed.
    pub compressed_len: Option<usize>,
    /// The current buffer of this CPU (ProcessorBuffers[LoggerId] / EtwSupport slot).
    pub per_cpu: Option<u32>,
    /// `_WMI_LOGGER_CONTEXT.CurrentBuffer` (EX_FAST_REF) points here.
    pub current_buffer: bool,
    /// Low 4 bits of the EX_FAST_REF values pointing here (a reference count, §2.7).
    pub fast_ref_tag: u8,
    /// +0x20 (NextBuffer) = this buffer of the same session (the dirty chain, §3.4).
    pub next_buffer: Option<usize>,
    pub queue: Option<QueueKind>,
    /// `_WMI_LOGGER_CONTEXT.CompressionTarget` points here.
    pub compression_target: bool,
    /// The header's TimeStamp (logger clock units); None: the standard choice (a flushed
    /// buffer gets a synthetic value, others 0).
    pub header_timestamp: Option<u64>,
}

impl BufferSpec {
    pub(crate) fn new(state: u32, processor: u32, seq: u64, records: Vec<RecSpec>) -> BufferSpec {
        BufferSpec {
            state,
            buffer_type: BUFFER_TYPE_GENERIC,
            buffer_flag: 0,
            processor,
            sequence_number: seq,
            records,
            tail: Tail::None,
            offsets: if state == STATE_FLUSH {
                Offsets::Flushed
            } else {
                Offsets::Live
            },
            fill_ff: false,
            compressed_len: None,
            per_cpu: None,
            current_buffer: false,
            fast_ref_tag: 0,
            next_buffer: None,
            queue: None,
            compression_target: false,
            header_timestamp: None,
        }
    }
}

/// A buffer as a reader must report it (`etwdump buffers --format json`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedBuffer {
    pub session_id: u32,
    pub address: u64,
    /// Sorted: "global_list", "current_buffer", "per_cpu", "buffer_queue", "overflow_queue",
    /// "dirty_chain", "batched_buffer_list", "compression_target".
    pub lists: Vec<String>,
    pub state: u32,
    pub buffer_type: u16,
    pub buffer_flag: u16,
    /// ClientContext.ProcessorIndex & 0x7FF (= ProcessorNumber here).
    pub processor: u32,
    pub sequence_number: u64,
    pub buffer_size: u32,
    /// §2.6: CurrentOffset if <= BufferSize, else SavedOffset.
    pub valid_bytes: u32,
    /// valid_bytes - (offset of the last complete record + ALIGN8(its Size)); for a buffer
    /// without a complete record, valid_bytes - 0x48. 0 for compressed buffers.
    pub trimmed_bytes: u32,
    /// Complete records (0 for compressed buffers: not parsed).
    pub record_count: u32,
    pub records_by_key: BTreeMap<String, u32>,
    pub compressed: bool,
    // ---- raw header values, for diagnostics ----
    pub current_offset: u32,
    pub saved_offset: u32,
    pub offset: u32,
}

impl ExpectedBuffer {
    /// Whether etwdump's `extract` writes this buffer: not compressed and at least one
    /// complete record.
    pub fn extractable(&self) -> bool {
        !self.compressed && self.record_count > 0
    }
}

/// The data part of a buffer (bytes from 0; the caller writes the header fields over [0, 0x48)).
pub(crate) struct LaidOut {
    pub bytes: Vec<u8>,
    pub current_offset: u32,
    pub saved_offset: u32,
    pub offset: u32,
    pub valid: u32,
    pub trimmed: u32,
    pub count: u32,
    pub by_key: BTreeMap<String, u32>,
}

/// Lay out `spec`'s records in a `buffer_size` buffer.
/// Record timestamps start at `ts.0` and step by 1..=`ts.1`.
pub(crate) fn lay_out(
    spec: &BufferSpec,
    buffer_size: u32,
    ts: (u64, u64),
    rng: &mut Rng,
) -> LaidOut {
    let (ts0, step_max) = ts;
    let bsize = buffer_size as usize;
    let mut bytes = vec![0u8; bsize];
    let mut off = WMI_BUFFER_HEADER_SIZE;
    let mut by_key = BTreeMap::new();
    let mut ts = ts0;
    if let Some(n) = spec.compressed_len {
        assert!(
            spec.records.is_empty(),
            "a compressed buffer has no records"
        );
        rng.fill(&mut bytes[off..off + n]);
        off = align8(off + n);
    }
    for r in &spec.records {
        let e = r.encode(ts, rng);
        ts += 1 + rng.next_u64() % step_max.max(1);
        assert!(
            off + align8(e.len()) <= bsize,
            "records overflow a {bsize:#x} buffer"
        );
        bytes[off..off + e.len()].copy_from_slice(&e);
        off += align8(e.len());
        *by_key.entry(r.key()).or_insert(0u32) += 1;
    }
    let end_complete = off;
    match spec.tail {
        Tail::None => {}
        Tail::HalfWritten => {
            let r = RecSpec::System {
                x64: true,
                hook: HOOK_PROCESS_START,
                version: 4,
                data: 0x1D0,
            };
            let e = r.encode(ts, rng);
            let n = Tail::HalfWritten.len();
            assert!(off + e.len() <= bsize && e.len() > n);
            bytes[off..off + n].copy_from_slice(&e[..n]);
        }
        Tail::UnfinishedMarker => {
            let r = RecSpec::System {
                x64: true,
                hook: HOOK_THREAD_DCSTART,
                version: 2,
                data: 0x18,
            };
            let mut e = r.encode(ts, rng);
            assert_eq!(align8(e.len()), Tail::UnfinishedMarker.len());
            put_u32(&mut e, 0, 0x0002_0002);
            bytes[off..off + e.len()].copy_from_slice(&e);
        }
        Tail::ZeroReservation => {}
    }
    let valid = off + spec.tail.len();
    assert!(valid <= bsize);
    if spec.fill_ff {
        for b in &mut bytes[valid..] {
            *b = 0xFF;
        }
    }
    let valid = valid as u32;
    let (current_offset, saved_offset, offset, valid) = match spec.offsets {
        Offsets::Live => (valid, 0, 0, valid),
        Offsets::Flushed => (valid, valid, valid, valid),
        Offsets::Overflowed => (valid + buffer_size, valid, valid, valid),
        Offsets::Reset => (WMI_BUFFER_HEADER_SIZE as u32, 0, 0, 0x48),
    };
    // §2.6, as a reader computes it.
    let rule = if current_offset <= buffer_size {
        current_offset
    } else {
        saved_offset
    };
    assert_eq!(rule, valid);
    let (count, by_key, trimmed) =
        if spec.offsets == Offsets::Reset || spec.compressed_len.is_some() {
            (0, BTreeMap::new(), 0)
        } else {
            (
                spec.records.len() as u32,
                by_key,
                valid - end_complete as u32,
            )
        };
    LaidOut {
        bytes,
        current_offset,
        saved_offset,
        offset,
        valid,
        trimmed,
        count,
        by_key,
    }
}

/// Records filling about `bytes` bytes: CSwitch PERFINFO records (with and without PEBS/PMC),
/// sampled-profile and syscall PERFINFO records, thread/process SYSTEM records.
pub fn filler(build: u32, bytes: usize, seed: u64) -> Vec<RecSpec> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut used = 0;
    while used < bytes {
        let r = match rng.next_u64() % 8 {
            0..=2 => RecSpec::cswitch(build, 0, false),
            3 => RecSpec::cswitch(build, 2, true),
            4 => RecSpec::PerfInfo {
                x64: true,
                hook: HOOK_SAMPLED_PROFILE,
                version: 2,
                pmc: 0,
                pebs: false,
                data: 0x10,
            },
            5 => RecSpec::PerfInfo {
                x64: true,
                hook: HOOK_SYSCALL_ENTER,
                version: 2,
                pmc: 0,
                pebs: false,
                data: 8,
            },
            6 => RecSpec::System {
                x64: true,
                hook: HOOK_THREAD_DCSTART,
                version: 3,
                data: 0x48 + (rng.next_u64() % 0x20) as usize,
            },
            _ => RecSpec::Compact {
                x64: true,
                hook: HOOK_DPC,
                version: 2,
                data: 0x18,
            },
        };
        used += align8(r.size());
        out.push(r);
    }
    out
}

/// Every header type of §5 (and odd sizes) once or more, for one buffer.
pub fn every_header_type(build: u32) -> Vec<RecSpec> {
    vec![
        RecSpec::System {
            x64: true,
            hook: HOOK_PROCESS_START,
            version: 4,
            data: 0x60,
        },
        RecSpec::System {
            x64: false,
            hook: HOOK_THREAD_DCSTART,
            version: 2,
            data: 0x2C,
        },
        RecSpec::Compact {
            x64: true,
            hook: HOOK_DPC,
            version: 2,
            data: 0x18,
        },
        RecSpec::Compact {
            x64: false,
            hook: HOOK_DPC,
            version: 2,
            data: 0x0C,
        },
        RecSpec::cswitch(build, 0, false),
        RecSpec::cswitch(build, 0, true),
        RecSpec::cswitch(build, 3, false),
        RecSpec::cswitch(build, 2, true),
        RecSpec::PerfInfo {
            x64: false,
            hook: HOOK_SAMPLED_PROFILE,
            version: 2,
            pmc: 0,
            pebs: false,
            data: 0x0C,
        },
        RecSpec::PerfInfo {
            x64: true,
            hook: HOOK_COMPCS,
            version: 2,
            pmc: 0,
            pebs: false,
            data: 0x6B,
        },
        // Odd size: 0x30 + 0x2B = 0x5B.
        RecSpec::Full {
            x64: true,
            data: 0x2B,
        },
        RecSpec::Full {
            x64: false,
            data: 0x10,
        },
        RecSpec::Message { data: 0x1D },
        RecSpec::EventHeader {
            x64: true,
            ext: vec![],
            data: 0x22,
        },
        RecSpec::EventHeader {
            x64: true,
            ext: vec![(1, 16), (6, 8 + 8 * 5), (3, 4)],
            data: 0x13,
        },
        RecSpec::EventHeader {
            x64: false,
            ext: vec![(12, 8)],
            data: 0x08,
        },
        RecSpec::cswitch(build, 0, false),
        RecSpec::PerfInfo {
            x64: true,
            hook: HOOK_DISK_READ,
            version: 3,
            pmc: 1,
            pebs: false,
            data: 0x31,
        },
        RecSpec::EventHeader {
            x64: false,
            ext: vec![],
            data: 0x0B,
        },
    ]
}

/// Buffers of one standard-set slot (see [`crate::EtwSpec::with_buffers`]); None: headers only.
pub(crate) fn standard_plan(build: u32, slot: u32) -> Option<Vec<BufferSpec>> {
    let fl = |b: usize, seed: u64| filler(build, b, seed ^ u64::from(build));
    let compressed_ok = build >= 14393;
    let plan = match slot {
        // NT Kernel Logger (0x20000, file mode): four per-CPU current buffers, two flushed ones
        // on the dirty chain of CPU 0's current buffer.
        0 => {
            let mut b0 = BufferSpec::new(STATE_GENERAL_LOGGING, 0, 102, {
                let mut v = every_header_type(build);
                v.extend(fl(0x3000, 1));
                v
            });
            b0.per_cpu = Some(0);
            b0.fast_ref_tag = 0xF;
            b0.next_buffer = Some(4);
            let mut b1 = BufferSpec::new(STATE_GENERAL_LOGGING, 1, 103, fl(0x1_F000, 2));
            b1.per_cpu = Some(1);
            b1.fast_ref_tag = 0x3;
            b1.offsets = Offsets::Overflowed;
            let mut b2 = BufferSpec::new(STATE_GENERAL_LOGGING, 2, 104, fl(0x2400, 3));
            b2.per_cpu = Some(2);
            b2.tail = Tail::HalfWritten;
            let mut b3 = BufferSpec::new(STATE_GENERAL_LOGGING, 3, 105, fl(0x1800, 4));
            b3.per_cpu = Some(3);
            b3.fast_ref_tag = 0x7;
            b3.tail = Tail::UnfinishedMarker;
            let mut b4 = BufferSpec::new(STATE_FLUSH, 0, 101, fl(0x1_E800, 5));
            b4.next_buffer = Some(5);
            b4.offsets = Offsets::Overflowed;
            b4.buffer_flag = BUFFER_FLAG_EVENTS_LOST;
            let mut b5 = BufferSpec::new(STATE_FLUSH, 0, 100, fl(0x1_F800, 6));
            b5.fill_ff = true;
            b5.buffer_type = BUFFER_TYPE_RUNDOWN;
            vec![b0, b1, b2, b3, b4, b5]
        }
        // Circular Kernel Context Logger (0x10000, buffering mode): CPU 0's current buffer,
        // the history on BufferQueue (a full one, a free one reset for reuse), a compressed
        // buffer that is the CompressionTarget.
        2 => {
            let mut c0 = BufferSpec::new(STATE_GENERAL_LOGGING, 0, 57, {
                let mut v = vec![
                    RecSpec::cswitch(build, 0, true),
                    RecSpec::cswitch(build, 4, true),
                    RecSpec::cswitch(build, 7, false),
                ];
                v.extend(fl(0x6000, 11));
                v
            });
            c0.per_cpu = Some(0);
            c0.fast_ref_tag = 0x1;
            c0.buffer_type = BUFFER_TYPE_CTX_SWAP;
            let mut c1 = BufferSpec::new(STATE_FLUSH, 0, 56, fl(0xF000, 12));
            c1.queue = Some(QueueKind::BufferQueue);
            let mut c2 = BufferSpec::new(STATE_FREE, 1, 12, fl(0x4000, 13));
            c2.queue = Some(QueueKind::BufferQueue);
            c2.offsets = Offsets::Reset;
            let mut c3 = BufferSpec::new(
                if compressed_ok {
                    STATE_COMPRESSED
                } else {
                    STATE_FLUSH
                },
                2,
                55,
                vec![],
            );
            c3.compressed_len = Some(0x2345);
            c3.buffer_flag = BUFFER_FLAG_COMPRESSED;
            c3.compression_target = true;
            vec![c0, c1, c2, c3]
        }
        // EventLog-System (0x8000, real-time): CPU 2's current buffer of manifest events, its
        // flushed predecessor on the dirty chain, a free buffer (stale events, offsets kept) on
        // BufferQueue.
        3 => {
            let ev = |n: usize| -> Vec<RecSpec> {
                (0..n)
                    .map(|i| RecSpec::EventHeader {
                        x64: true,
                        ext: if i % 3 == 0 { vec![(1, 16)] } else { vec![] },
                        data: 0x21 + (i * 7) % 0x60,
                    })
                    .collect()
            };
            let mut e0 = BufferSpec::new(STATE_GENERAL_LOGGING, 2, 31, ev(40));
            e0.per_cpu = Some(2);
            e0.fast_ref_tag = 0x2;
            e0.next_buffer = Some(1);
            let e1 = BufferSpec::new(STATE_FLUSH, 2, 30, ev(150));
            let mut e2 = BufferSpec::new(STATE_FREE, 1, 7, ev(60));
            e2.queue = Some(QueueKind::BufferQueue);
            vec![e0, e1, e2]
        }
        // WdiContextLog (0x4000, buffering mode): CPU 3's current buffer with MESSAGE and
        // INSTANCE records; a full buffer on the OverflowQueue.
        4 => {
            let mut v = Vec::new();
            for i in 0..12 {
                v.push(RecSpec::Message { data: 0x10 + i * 5 });
                if i % 4 == 0 {
                    v.push(RecSpec::Instance {
                        x64: i % 8 == 0,
                        data: 0x18,
                    });
                }
            }
            let mut w0 = BufferSpec::new(STATE_GENERAL_LOGGING, 3, 9, v);
            w0.per_cpu = Some(3);
            w0.fast_ref_tag = 0x5;
            let w1_recs = (0..60)
                .map(|i| RecSpec::Message { data: 0x20 + i % 9 })
                .collect();
            let mut w1 = BufferSpec::new(STATE_FLUSH, 3, 8, w1_recs);
            w1.queue = Some(QueueKind::OverflowQueue);
            vec![w0, w1]
        }
        // LwtNetLog (0x40000, circular file; cyclic GlobalList): CPU 1's current buffer of
        // 32-bit-layout records and a zero reservation at its end, its flushed predecessor,
        // an empty free buffer.
        5 => {
            let v32 = |n: usize| -> Vec<RecSpec> {
                (0..n)
                    .map(|i| match i % 4 {
                        0 => RecSpec::System {
                            x64: false,
                            hook: HOOK_DISK_READ,
                            version: 2,
                            data: 0x28,
                        },
                        1 => RecSpec::Compact {
                            x64: false,
                            hook: HOOK_DPC,
                            version: 2,
                            data: 0x0C,
                        },
                        2 => RecSpec::Full {
                            x64: false,
                            data: 0x5 + i % 0x30,
                        },
                        _ => RecSpec::PerfInfo {
                            x64: false,
                            hook: HOOK_CSWITCH,
                            version: cswitch_version(build),
                            pmc: 0,
                            pebs: false,
                            data: 0x18,
                        },
                    })
                    .collect()
            };
            let mut l0 = BufferSpec::new(STATE_GENERAL_LOGGING, 1, 1001, v32(300));
            l0.per_cpu = Some(1);
            l0.fast_ref_tag = 0xE;
            l0.tail = Tail::ZeroReservation;
            l0.next_buffer = Some(1);
            let l1 = BufferSpec::new(STATE_FLUSH, 1, 1000, v32(2000));
            let l2 = BufferSpec::new(STATE_FREE, 0, 0, vec![]);
            vec![l0, l1, l2]
        }
        // UBPM (0x2000, NO_PER_PROCESSOR_BUFFERING): CurrentBuffer and a free buffer whose stale
        // events are still inside CurrentOffset.
        6 => {
            let ev = |n: usize, d: usize| -> Vec<RecSpec> {
                (0..n)
                    .map(|i| RecSpec::EventHeader {
                        x64: true,
                        ext: vec![],
                        data: d + i,
                    })
                    .collect()
            };
            let mut u0 = BufferSpec::new(STATE_GENERAL_LOGGING, 0, 4, ev(9, 0x0B));
            u0.current_buffer = true;
            u0.fast_ref_tag = 0x9;
            let u1 = BufferSpec::new(STATE_FREE, 0, 3, ev(20, 0x30));
            vec![u0, u1]
        }
        _ => return None,
    };
    Some(plan)
}

/// The benchmark session's buffers: `count` flushed buffers of `buffer_size` bytes, full of
/// kernel records (8 record patterns, reused).
pub(crate) fn large_plan(build: u32, count: usize, buffer_size: u32) -> Vec<BufferSpec> {
    (0..count)
        .map(|i| {
            let recs = filler(
                build,
                buffer_size as usize - 0x48 - 0x100,
                0xBE7C_0000 + (i % 8) as u64,
            );
            let mut b = BufferSpec::new(STATE_FLUSH, (i % 4) as u32, 10_000 + i as u64, recs);
            b.fill_ff = i % 2 == 0;
            b
        })
        .collect()
}
