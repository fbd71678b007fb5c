//! The forge's one ETW buffer writer, used by every dump kind: `_WMI_BUFFER_HEADER`
//! (etw-internals.md §2.1) and the event records after it (§5). Full and bitmap dumps write the
//! header through the fixture's types.h offsets ([`super::Layouts`]); triage dumps through the
//! 19041 x64 offsets ([`X64_HEADER`], the real ISF's). What goes *into* the buffers is decided
//! elsewhere: [`super::buffers`] (plans of the full dumps), [`super::variation`] (drawn
//! records) and `crate::triage::gen` (D1-like logger-2 and event buffers).
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
//! | MESSAGE | 0x90, 0x00 | `Message`: 8 + GUID + ThreadId/ProcessId (OptionFlags 0x22) = 0x20; `TraceMessage`: 8 + the fields its OptionFlags select (`super::message`) | u16 @+0 |
//! | EVENT_HEADER32/64 | 0xC0, 0x12/0x13 | 0x50 + extended items (8-aligned) | u16 @+0 |
//!
//! Record keys ([`RecSpec::key`]): `"0x%04x"` of the HookId for SYSTEM, COMPACT and PERFINFO;
//! `"full_header"`, `"instance"`, `"message"`, `"event_header"` for the others.

use std::collections::BTreeMap;

use super::buffers::BufferSpec;
pub use super::message::MessageSpec;
use super::Layouts;
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

// ------------------------------------------------------------------------------------------
// The header

/// The `_WMI_BUFFER_HEADER` fields the forge writes (and `ClientContext`'s
/// `_ETW_BUFFER_CONTEXT` members).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum HeaderField {
    BufferSize,
    SavedOffset,
    CurrentOffset,
    ReferenceCount,
    TimeStamp,
    SequenceNumber,
    /// +0x20: NextBuffer / SlistEntry (a pointer).
    NextBuffer,
    /// ClientContext.ProcessorNumber (UCHAR).
    ProcessorNumber,
    /// ClientContext.Alignment (UCHAR).
    Alignment,
    /// ClientContext.LoggerId (USHORT).
    LoggerId,
    State,
    Offset,
    BufferFlag,
    BufferType,
    /// GlobalEntry.Flink (a pointer).
    GlobalFlink,
    /// GlobalEntry.Blink (a pointer).
    GlobalBlink,
}

/// Where a layout keeps each [`HeaderField`].
pub(crate) trait HeaderLayout {
    /// Write `value` (little-endian, truncated to the field's size) into the header `h`.
    fn put(&self, h: &mut [u8], field: HeaderField, value: u64);
}

/// The 19041 x64 header (the real ISF `5278AFF86C341677D7D7835C85B7B844-1`; triage dumps):
/// (field, offset, size).
pub(crate) struct FixedHeaderLayout(pub &'static [(HeaderField, usize, usize)]);

/// The x64 `_WMI_BUFFER_HEADER` of 19041 (etw-internals.md §2.1).
pub(crate) const X64_HEADER: FixedHeaderLayout = FixedHeaderLayout(&[
    (HeaderField::BufferSize, 0x00, 4),
    (HeaderField::SavedOffset, 0x04, 4),
    (HeaderField::CurrentOffset, 0x08, 4),
    (HeaderField::ReferenceCount, 0x0C, 4),
    (HeaderField::TimeStamp, 0x10, 8),
    (HeaderField::SequenceNumber, 0x18, 8),
    (HeaderField::NextBuffer, 0x20, 8),
    (HeaderField::ProcessorNumber, 0x28, 1),
    (HeaderField::Alignment, 0x29, 1),
    (HeaderField::LoggerId, 0x2A, 2),
    (HeaderField::State, 0x2C, 4),
    (HeaderField::Offset, 0x30, 4),
    (HeaderField::BufferFlag, 0x34, 2),
    (HeaderField::BufferType, 0x36, 2),
    (HeaderField::GlobalFlink, 0x38, 8),
    (HeaderField::GlobalBlink, 0x40, 8),
]);

impl HeaderLayout for FixedHeaderLayout {
    fn put(&self, h: &mut [u8], field: HeaderField, value: u64) {
        let &(_, off, size) = self
            .0
            .iter()
            .find(|(f, _, _)| *f == field)
            .unwrap_or_else(|| panic!("no {field:?} in the fixed header layout"));
        h[off..off + size].copy_from_slice(&value.to_le_bytes()[..size]);
    }
}

/// The fixture's types.h layout (full and bitmap dumps): every offset and size from its
/// `_WMI_BUFFER_HEADER`, `_ETW_BUFFER_CONTEXT` and `_LIST_ENTRY`; pointers of its size.
impl HeaderLayout for Layouts<'_> {
    fn put(&self, h: &mut [u8], field: HeaderField, value: u64) {
        const BUF: &str = "_WMI_BUFFER_HEADER";
        const BC: &str = "_ETW_BUFFER_CONTEXT";
        let cc = self.off(BUF, "ClientContext") as usize;
        let list = |name: &str| {
            self.off(BUF, "GlobalEntry") as usize + self.off("_LIST_ENTRY", name) as usize
        };
        let (agg, base, name) = match field {
            HeaderField::NextBuffer => {
                return self.put_ptr_at(h, self.off(BUF, "NextBuffer") as usize, value)
            }
            HeaderField::GlobalFlink => return self.put_ptr_at(h, list("Flink"), value),
            HeaderField::GlobalBlink => return self.put_ptr_at(h, list("Blink"), value),
            HeaderField::ProcessorNumber => (BC, cc, "ProcessorNumber"),
            HeaderField::Alignment => (BC, cc, "Alignment"),
            HeaderField::LoggerId => (BC, cc, "LoggerId"),
            HeaderField::BufferSize => (BUF, 0, "BufferSize"),
            HeaderField::SavedOffset => (BUF, 0, "SavedOffset"),
            HeaderField::CurrentOffset => (BUF, 0, "CurrentOffset"),
            HeaderField::ReferenceCount => (BUF, 0, "ReferenceCount"),
            HeaderField::TimeStamp => (BUF, 0, "TimeStamp"),
            HeaderField::SequenceNumber => (BUF, 0, "SequenceNumber"),
            HeaderField::State => (BUF, 0, "State"),
            HeaderField::Offset => (BUF, 0, "Offset"),
            HeaderField::BufferFlag => (BUF, 0, "BufferFlag"),
            HeaderField::BufferType => (BUF, 0, "BufferType"),
        };
        self.put(&mut h[base..], agg, name, value);
    }
}

/// A `_WMI_BUFFER_HEADER`'s values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BufferHeader {
    pub buffer_size: u32,
    pub saved_offset: u32,
    pub current_offset: u32,
    pub reference_count: u32,
    pub timestamp: u64,
    pub sequence_number: u64,
    /// +0x20 NextBuffer / SlistEntry: the dirty chain, a queue or free-list link.
    pub next: u64,
    /// ClientContext.ProcessorIndex: ProcessorNumber in the low byte, Alignment in the high.
    pub processor_index: u16,
    pub logger_id: u16,
    pub state: u32,
    pub offset: u32,
    pub buffer_flag: u16,
    pub buffer_type: u16,
    pub global_flink: u64,
    pub global_blink: u64,
}

impl BufferHeader {
    /// ProcessorIndex of a buffer of CPU `processor` with Alignment 8 (full dumps).
    pub(crate) fn processor_index(processor: u32) -> u16 {
        (8 << 8) | (processor & 0xFF) as u16
    }

    /// Write the header over `h[..0x48]` (zeroed first). Zero fields are left zero, so a
    /// layout without a field the header does not use (6.1: no BufferFlag, ...) is fine.
    pub(crate) fn write(&self, h: &mut [u8], layout: &dyn HeaderLayout) {
        h[..WMI_BUFFER_HEADER_SIZE].fill(0);
        let fields = [
            (HeaderField::BufferSize, u64::from(self.buffer_size)),
            (HeaderField::SavedOffset, u64::from(self.saved_offset)),
            (HeaderField::CurrentOffset, u64::from(self.current_offset)),
            (HeaderField::ReferenceCount, u64::from(self.reference_count)),
            (HeaderField::TimeStamp, self.timestamp),
            (HeaderField::SequenceNumber, self.sequence_number),
            (HeaderField::NextBuffer, self.next),
            (
                HeaderField::ProcessorNumber,
                u64::from(self.processor_index & 0xFF),
            ),
            (HeaderField::Alignment, u64::from(self.processor_index >> 8)),
            (HeaderField::LoggerId, u64::from(self.logger_id)),
            (HeaderField::State, u64::from(self.state)),
            (HeaderField::Offset, u64::from(self.offset)),
            (HeaderField::BufferFlag, u64::from(self.buffer_flag)),
            (HeaderField::BufferType, u64::from(self.buffer_type)),
            (HeaderField::GlobalFlink, self.global_flink),
            (HeaderField::GlobalBlink, self.global_blink),
        ];
        for (field, value) in fields {
            if value != 0 {
                layout.put(h, field, value);
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// Records

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
    /// A TRACE_MESSAGE record with any OptionFlags ([`MessageSpec`]); key "message".
    TraceMessage(MessageSpec),
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
    /// A SYSTEM or PERFINFO record with a realistic payload and its truth
    /// ([`super::payloads`]); key `"0x%04x"` of its hook. The header's timestamp is the
    /// record's time in the buffer, its ThreadId / ProcessId the record's.
    Payload(Box<super::payloads::PayloadRec>),
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
            RecSpec::TraceMessage(m) => m.size(),
            RecSpec::EventHeader { ext, data, .. } => {
                0x50 + ext.iter().map(|&(_, n)| align8(8 + n)).sum::<usize>() + data
            }
            RecSpec::Raw { bytes, .. } => bytes.len(),
            RecSpec::Payload(p) => p.size(),
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
            RecSpec::Message { .. } | RecSpec::TraceMessage(_) => "message".to_string(),
            RecSpec::EventHeader { .. } => "event_header".to_string(),
            RecSpec::Raw { key, .. } => key.clone(),
            RecSpec::Payload(p) => format!("0x{:04x}", p.hook),
        }
    }

    /// The record's bytes (unpadded, `size()` long): pseudo-random content under a valid
    /// header of its kind.
    pub(crate) fn encode(&self, ts: u64, rng: &mut Rng) -> Vec<u8> {
        let size = self.size();
        assert!(size <= 0xFFFF, "record size {size:#x}");
        match self {
            RecSpec::Raw { bytes, .. } => return bytes.clone(),
            RecSpec::TraceMessage(m) => return m.encode(),
            RecSpec::Payload(p) => return encode_payload(p, ts, rng),
            _ => {}
        }
        let mut r = vec![0u8; size];
        rng.fill(&mut r);
        let tid = 0x1000 + (rng.next_u64() % 0x4000) as u32 * 4;
        let pid = 4 + (rng.next_u64() % 0x2000) as u32 * 4;
        let ids = (tid, pid, ts);
        match self {
            RecSpec::System {
                x64, hook, version, ..
            } => encode_system(&mut r, false, *x64, *hook, *version, ids, rng),
            RecSpec::Compact {
                x64, hook, version, ..
            } => encode_system(&mut r, true, *x64, *hook, *version, ids, rng),
            RecSpec::PerfInfo {
                x64,
                hook,
                version,
                pmc,
                pebs,
                data,
            } => {
                assert!(*pmc <= 7, "at most 7 PMC counters");
                let marker = perfinfo_marker(*x64, *version, *pmc, *pebs);
                put_perfinfo_header(&mut r, marker, size as u16, *hook, ts);
                fill_perfinfo_payload(&mut r, *hook, *data, tid, ts, rng);
            }
            RecSpec::Full { x64, .. } => encode_trace_header(&mut r, false, *x64, ids, rng),
            RecSpec::Instance { x64, .. } => encode_trace_header(&mut r, true, *x64, ids, rng),
            RecSpec::Message { .. } => encode_message(&mut r, tid, pid, rng),
            RecSpec::EventHeader { x64, ext, .. } => encode_event(&mut r, *x64, ext, ids, rng),
            RecSpec::Raw { .. } | RecSpec::TraceMessage(_) | RecSpec::Payload(_) => {
                unreachable!("returned above")
            }
        }
        r
    }
}

/// A PERFINFO32/64 marker (§5): 0xC0, type 0x10 / 0x11, PEBS flag 0x8000, the PMC count in bits
/// 8..10, the version in the low byte.
pub(crate) const fn perfinfo_marker(x64: bool, version: u8, pmc: u8, pebs: bool) -> u32 {
    let ty: u32 = if x64 { 0x11 } else { 0x10 };
    0xC000_0000 | (ty << 16) | ((pebs as u32) << 15) | ((pmc as u32) << 8) | version as u32
}

/// The PERFINFO header of a record: marker, Size @+4, HookId @+6, TimeStamp @+8.
pub(crate) fn put_perfinfo_header(r: &mut [u8], marker: u32, size: u16, hook: u16, ts: u64) {
    put_u32(r, 0, marker);
    put_u16(r, 4, size);
    put_u16(r, 6, hook);
    put_u64(r, 8, ts);
}

/// The first 0x18 bytes of an EVENT_HEADER32/64 record: Size, HeaderType 0xC012 / 0xC013,
/// Flags, EventProperty, ThreadId, ProcessId, TimeStamp.
pub(crate) fn put_event_header(r: &mut [u8], size: u16, x64: bool, flags: u16, property: u16) {
    put_u16(r, 0, size);
    put_u16(r, 2, if x64 { 0xC013 } else { 0xC012 });
    put_u16(r, 4, flags);
    put_u16(r, 6, property);
}

/// ThreadId @+8, ProcessId @+0xC, TimeStamp @+0x10 (SYSTEM, COMPACT, FULL, INSTANCE and
/// EVENT_HEADER records).
pub(crate) fn put_ids(r: &mut [u8], (tid, pid, ts): (u32, u32, u64)) {
    put_u32(r, 8, tid);
    put_u32(r, 0xC, pid);
    put_u64(r, 0x10, ts);
}

/// EVENT_DESCRIPTOR @+0x28 of an EVENT_HEADER record: Id, Version, Channel, Level, Opcode.
pub(crate) fn put_event_descriptor(
    r: &mut [u8],
    id: u16,
    version: u8,
    channel: u8,
    level: u8,
    opcode: u8,
) {
    put_u16(r, 0x28, id);
    r[0x2A] = version;
    r[0x2B] = channel;
    r[0x2C] = level;
    r[0x2D] = opcode;
}

/// An EVENT_HEADER_EXTENDED_DATA_ITEM header at `off`: Reserved1, ExtType, Linkage (more
/// items follow), DataSize.
pub(crate) fn put_ext_item(
    r: &mut [u8],
    off: usize,
    reserved1: u16,
    ty: u16,
    more: bool,
    len: u16,
) {
    put_u16(r, off, reserved1);
    put_u16(r, off + 2, ty);
    put_u16(r, off + 4, u16::from(more));
    put_u16(r, off + 6, len);
}

/// SYSTEM32/64 (0x20 bytes of header) or COMPACT32/64 (0x18) header.
fn encode_system(
    r: &mut [u8],
    compact: bool,
    x64: bool,
    hook: u16,
    version: u8,
    ids: (u32, u32, u64),
    rng: &mut Rng,
) {
    let ty: u32 = match (compact, x64) {
        (false, false) => 1,
        (false, true) => 2,
        (true, false) => 3,
        (true, true) => 4,
    };
    put_u32(r, 0, 0xC000_0000 | (ty << 16) | u32::from(version));
    put_u16(r, 4, r.len() as u16);
    put_u16(r, 6, hook);
    put_ids(r, ids);
    if !compact {
        put_u32(r, 0x18, (rng.next_u64() % 5000) as u32);
        put_u32(r, 0x1C, (rng.next_u64() % 5000) as u32);
    }
}

/// A record of [`RecSpec::Payload`]: its SYSTEM32/64 header (marker with the class version,
/// Size, HookId, ThreadId, ProcessId, SystemTime = `ts`, KernelTime, UserTime) or PERFINFO32/64
/// header (marker, Size, HookId, TimeStamp = `ts`), then the payload's bytes.
fn encode_payload(p: &super::payloads::PayloadRec, ts: u64, rng: &mut Rng) -> Vec<u8> {
    use super::payloads::PayloadHeader;
    let size = p.size();
    assert!(size <= 0xFFFF, "record size {size:#x}");
    let mut r = vec![0u8; size];
    let hdr = match p.header {
        PayloadHeader::System => {
            let ty: u32 = if p.x64 { 2 } else { 1 };
            put_u32(&mut r, 0, 0xC000_0000 | (ty << 16) | u32::from(p.version));
            put_u16(&mut r, 4, size as u16);
            put_u16(&mut r, 6, p.hook);
            put_ids(&mut r, (p.tid, p.pid, ts));
            put_u32(&mut r, 0x18, (rng.next_u64() % 5000) as u32);
            put_u32(&mut r, 0x1C, (rng.next_u64() % 5000) as u32);
            0x20
        }
        PayloadHeader::PerfInfo => {
            let marker = perfinfo_marker(p.x64, p.version, 0, false);
            put_perfinfo_header(&mut r, marker, size as u16, p.hook, ts);
            0x10
        }
    };
    r[hdr..].copy_from_slice(&p.data);
    r
}

/// A PERFINFO payload with meaning: a CSwitch's WMI_CONTEXTSWAP (§5.2), or a 0x0525 batch
/// whose switches all lie at the record's time.
fn fill_perfinfo_payload(r: &mut [u8], hook: u16, data: usize, tid: u32, ts: u64, rng: &mut Rng) {
    let size = r.len();
    if hook == HOOK_CSWITCH && data == 0x18 {
        let d = size - 0x18;
        put_u32(r, d, tid);
        put_u32(r, d + 4, tid + 4);
        r[d + 8] = 8 + (rng.next_u64() % 8) as u8; // NewThreadPriority
        r[d + 9] = 8 + (rng.next_u64() % 8) as u8; // OldThreadPriority
        r[d + 0xC] = (rng.next_u64() % 0x27) as u8; // OldThreadWaitReason
        r[d + 0xD] = 0; // WaitMode / flags
        r[d + 0xE] = 5; // OldThreadState: Waiting
        r[d + 0xF] = (rng.next_u64() % 4) as u8;
        put_u32(r, d + 0x10, (rng.next_u64() % 300) as u32);
        put_u32(r, d + 0x14, 0x10_0000);
    }
    if hook == HOOK_COMPCS && size >= 0x10 + 0x58 {
        // A compact batch whose times are the record's: PERFINFO_CCSWAP_BUFFER
        // FirstTimeStamp = ts, then zero bytes (idle-short packets with delta 0, so
        // every switch is at ts) instead of random packets, whose deltas would put
        // switch times anywhere (etw-internals.md §4.2-§4.3).
        let d = 0x10;
        put_u64(r, d, ts);
        r[d + 0x58..].fill(0);
    }
}

/// FULL_HEADER32/64 (EVENT_TRACE_HEADER, 0x30 bytes) or INSTANCE32/64
/// (EVENT_INSTANCE_GUID_HEADER, 0x48 bytes).
fn encode_trace_header(r: &mut [u8], inst: bool, x64: bool, ids: (u32, u32, u64), rng: &mut Rng) {
    let ty = match (inst, x64) {
        (false, false) => 0x0A,
        (false, true) => 0x14,
        (true, false) => 0x0B,
        (true, true) => 0x15,
    };
    put_u16(r, 0, r.len() as u16);
    r[2] = ty;
    r[3] = 0xC0;
    // Class {Type, Level, Version}.
    r[4] = 1 + (rng.next_u64() % 0x40) as u8;
    r[5] = 4;
    put_u16(r, 6, 2);
    put_ids(r, ids);
    // Guid @0x18 (random), ProcessorTime @0x28.
    put_u64(r, 0x28, rng.next_u64() % 100_000);
    if inst {
        put_u32(r, 0x30, 7); // InstanceId
        put_u32(r, 0x34, 0); // ParentInstanceId
    }
}

/// MESSAGE (TRACE_MESSAGE): OptionFlags GUID | SYSTEMINFO, ThreadId / ProcessId at 0x18.
fn encode_message(r: &mut [u8], tid: u32, pid: u32, rng: &mut Rng) {
    put_u16(r, 0, r.len() as u16);
    r[2] = 0; // Reserved
    r[3] = 0x90; // TRACE_HEADER_FLAG | TRACE_MESSAGE
    put_u16(r, 4, 10 + (rng.next_u64() % 40) as u16); // MessageNumber
    put_u16(r, 6, 0x0022); // OptionFlags: GUID | SYSTEMINFO
    put_u32(r, 0x18, tid);
    put_u32(r, 0x1C, pid);
}

/// EVENT_HEADER32/64 with its extended items (random ProviderId and payload).
fn encode_event(
    r: &mut [u8],
    x64: bool,
    ext: &[(u16, usize)],
    ids: (u32, u32, u64),
    rng: &mut Rng,
) {
    let mut flags: u16 = if x64 { 0x0040 } else { 0x0020 };
    if !ext.is_empty() {
        flags |= 0x0001; // EXTENDED_INFO
    }
    put_event_header(r, r.len() as u16, x64, flags, 0);
    put_ids(r, ids);
    // ProviderId @0x18 (random); EVENT_DESCRIPTOR @0x28.
    let id = 1 + (rng.next_u64() % 300) as u16;
    put_event_descriptor(r, id, 0, 0x10, 4, 0);
    put_u64(r, 0x38, rng.next_u64() % 100_000); // ProcessorTime
    let mut off = 0x50;
    for (i, &(ty, n)) in ext.iter().enumerate() {
        put_ext_item(r, off, 0, ty, i + 1 < ext.len(), n as u16);
        let end = off + align8(8 + n);
        r[off + 8 + n..end].fill(0);
        off = end;
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

// ------------------------------------------------------------------------------------------
// A buffer's data

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

// ------------------------------------------------------------------------------------------
// Record chains: the check the triage generator needs to pick windows a reader can resync in
// (triage-etw.md §4.1 step 3.4). Not a reader of the forge's output for its tests.

/// Header types a permissive resync accepts, and where their Size is.
fn size_at(bytes: &[u8], p: usize) -> Option<usize> {
    if p + 8 > bytes.len() {
        return None;
    }
    // Any header with TRACE_HEADER_FLAG (byte 3 bit 7).
    if bytes[p + 3] & 0x80 == 0 {
        return None;
    }
    let ty = bytes[p + 2];
    let size = match ty {
        0x01..=0x04 | 0x10 | 0x11 => u16::from_le_bytes([bytes[p + 4], bytes[p + 5]]),
        _ => u16::from_le_bytes([bytes[p], bytes[p + 1]]),
    };
    (size >= 8).then_some(usize::from(size))
}

/// Whether a chain of records (each at ALIGN8(Size) from the previous one) starting at `p`
/// ends exactly at `valid` (permissive about header types: see `size_at`).
pub(crate) fn chain_ends_at_valid(bytes: &[u8], mut p: usize, valid: usize) -> bool {
    while p < valid {
        match size_at(bytes, p) {
            Some(s) if p + s <= valid => p += (s + 7) & !7,
            _ => return false,
        }
    }
    p == valid
}

/// The resync of triage-etw.md §4.1 step 3.4 over a buffer's bytes: the smallest offset
/// `p >= start` (8-aligned relative to the buffer base) from which a chain ends exactly at
/// `valid`.
pub(crate) fn resync(bytes: &[u8], start: usize, valid: usize) -> Option<usize> {
    let first = (start + 7) & !7;
    (first..valid)
        .step_by(8)
        .find(|&p| chain_ends_at_valid(bytes, p, valid))
}
