//! TRACE_MESSAGE (WPP / `TraceMessage`) records: `MESSAGE_TRACE_HEADER` and the optional fields
//! its OptionFlags select, for every dump kind (full / bitmap buffers through
//! [`super::wmi_buffer::RecSpec::TraceMessage`], triage buffers through `crate::triage::gen`).
//!
//! Sources (public; never etwdump's reader):
//! * evntrace.h / ntwmi.h `MESSAGE_TRACE_HEADER`: +0 USHORT Size (the whole record, unpadded),
//!   +2 UCHAR Reserved, +3 UCHAR Version = 0x90 (TRACE_HEADER_FLAG 0x80 | TRACE_MESSAGE 0x10),
//!   +4 `WMI_TRACE_MESSAGE_PACKET` {USHORT MessageNumber; USHORT OptionFlags}
//!   (etw-internals.md §5 "0x0F MESSAGE ... top byte 0x90").
//! * evntrace.h flag values: TRACE_MESSAGE_SEQUENCE 1, _GUID 2, _COMPONENTID 4 ("Message has no
//!   GUID, Component ID instead"), _TIMESTAMP 8, _PERFORMANCE_TIMESTAMP 16 ("*Obsolete* Clock
//!   type is controlled by the logger"), _SYSTEMINFO 32 (TID, PID), and the Vista "flags set by
//!   system to indicate provider pointer size" _POINTER32 0x40 / _POINTER64 0x80.
//! * The consumer's parse order, public NT5 source `sdktools/trace/traceprt/traceprt.cpp`
//!   (MaskerPRC/WinNT5_src): "[First Entry] Sequence Number" ULONG; "[Second Entry] GUID ? or
//!   ComponentID ?": `if (COMPONENTID) ULONG else if (GUID) GUID // Can't have both`; "[Third
//!   Entry] Timestamp?" 8 bytes, read only for TRACE_MESSAGE_TIMESTAMP; "[Fourth Entry] System
//!   Information?" ULONG ThreadId then ULONG ProcessId; the payload (MofData) follows.
//! * Measured on the real ARM64 triage dump (`triage_arm64.dmp`, WiFiSession and CldFltLog
//!   buffers of the ETW blob, first at file 0xBC2B8): all 4630 messages have Reserved 0,
//!   Version 0x90, OptionFlags 0xAA (GUID | TIMESTAMP | SYSTEMINFO | POINTER64), Size 0x28
//!   (no payload) .. 0x140, 8-byte aligned relative to the buffer start.
//!
//! **Choices** where the sources leave room:
//! * GUID and COMPONENTID both set: the kernel never writes both. The forge keeps both bits
//!   in OptionFlags and writes **only the ComponentId** (4 bytes), which is what the consumer
//!   above reads; no GUID bytes follow. (The NT5 *writer* sizes both fields; a reader that
//!   does so would misplace every later field: the forge's scenarios catch that.)
//! * PERFORMANCE_TIMESTAMP (0x10) adds no field: the consumer reads a timestamp only for 0x08.
//!   (The NT5 writer's size expression counts 8 bytes for `TIMESTAMP | PERFORMANCE_TIMESTAMP`;
//!   the forge follows the consumer and the flag's "obsolete" comment.)
//! * POINTER32 and POINTER64 add no field; the forge never sets both.

use crate::util::{guid_to_string, put_u16, put_u32, put_u64};

/// TRACE_MESSAGE_SEQUENCE: a ULONG sequence number.
pub const TRACE_MESSAGE_SEQUENCE: u16 = 0x0001;
/// TRACE_MESSAGE_GUID: a 16-byte message GUID.
pub const TRACE_MESSAGE_GUID: u16 = 0x0002;
/// TRACE_MESSAGE_COMPONENTID: a ULONG component id instead of the GUID.
pub const TRACE_MESSAGE_COMPONENTID: u16 = 0x0004;
/// TRACE_MESSAGE_TIMESTAMP: an 8-byte timestamp in the session clock.
pub const TRACE_MESSAGE_TIMESTAMP: u16 = 0x0008;
/// TRACE_MESSAGE_PERFORMANCE_TIMESTAMP: obsolete, no field.
pub const TRACE_MESSAGE_PERFORMANCE_TIMESTAMP: u16 = 0x0010;
/// TRACE_MESSAGE_SYSTEMINFO: ULONG ThreadId, ULONG ProcessId.
pub const TRACE_MESSAGE_SYSTEMINFO: u16 = 0x0020;
/// TRACE_MESSAGE_POINTER32: logged by a 32-bit provider, no field.
pub const TRACE_MESSAGE_POINTER32: u16 = 0x0040;
/// TRACE_MESSAGE_POINTER64: logged by a 64-bit provider, no field.
pub const TRACE_MESSAGE_POINTER64: u16 = 0x0080;

/// Byte 3 of every message record: TRACE_HEADER_FLAG | TRACE_MESSAGE.
pub const MESSAGE_VERSION_BYTE: u8 = 0x90;

/// The flag bits that select fields or are otherwise meaningful (0xFF).
pub const MESSAGE_FLAG_BITS: [u16; 8] = [
    TRACE_MESSAGE_SEQUENCE,
    TRACE_MESSAGE_GUID,
    TRACE_MESSAGE_COMPONENTID,
    TRACE_MESSAGE_TIMESTAMP,
    TRACE_MESSAGE_PERFORMANCE_TIMESTAMP,
    TRACE_MESSAGE_SYSTEMINFO,
    TRACE_MESSAGE_POINTER32,
    TRACE_MESSAGE_POINTER64,
];

/// One TRACE_MESSAGE record. Every value is kept even when its flag is clear (then it is not
/// written); [`MessageSpec::expected`] says what a reader must recover.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MessageSpec {
    /// OptionFlags as written (0x0000..=0x00FF; POINTER32 and POINTER64 not both).
    pub flags: u16,
    pub message_number: u16,
    pub sequence: u32,
    /// The message GUID (bytes as stored, `guid_from_str` order).
    pub guid: [u8; 16],
    pub component_id: u32,
    /// In the session's clock.
    pub timestamp: u64,
    pub tid: u32,
    pub pid: u32,
    /// The arguments after the optional fields.
    pub payload: Vec<u8>,
}

/// What a reader recovers from a message record (the fields its flags select; None when the
/// flag is clear, or for `guid` when COMPONENTID is also set).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ExpectedMessage {
    pub flags: u16,
    pub message_number: u16,
    pub sequence: Option<u32>,
    /// Lowercase, dashed, no braces.
    pub guid: Option<String>,
    pub component_id: Option<u32>,
    pub timestamp: Option<u64>,
    pub tid: Option<u32>,
    pub pid: Option<u32>,
    /// Bytes after the optional fields (Size - header - fields).
    pub payload_len: u32,
    /// Offset of the payload from the record start.
    pub payload_offset: u32,
    /// 4 (POINTER32), 8 (POINTER64), else None.
    pub pointer_size: Option<u8>,
}

impl MessageSpec {
    fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }

    /// Whether the 16-byte GUID is written (GUID set, COMPONENTID clear).
    pub fn writes_guid(&self) -> bool {
        self.has(TRACE_MESSAGE_GUID) && !self.has(TRACE_MESSAGE_COMPONENTID)
    }

    /// Bytes of the optional fields (between the 8-byte header and the payload).
    pub fn fields_len(&self) -> usize {
        let mut n = 0;
        if self.has(TRACE_MESSAGE_SEQUENCE) {
            n += 4;
        }
        if self.has(TRACE_MESSAGE_COMPONENTID) {
            n += 4;
        } else if self.has(TRACE_MESSAGE_GUID) {
            n += 16;
        }
        if self.has(TRACE_MESSAGE_TIMESTAMP) {
            n += 8;
        }
        if self.has(TRACE_MESSAGE_SYSTEMINFO) {
            n += 8;
        }
        n
    }

    /// The Size field: 8 + fields + payload (unpadded).
    pub fn size(&self) -> usize {
        8 + self.fields_len() + self.payload.len()
    }

    /// The record's bytes, `size()` long (the caller pads to 8).
    pub fn encode(&self) -> Vec<u8> {
        assert!(
            self.flags <= 0xFF,
            "OptionFlags {:#x}: unknown bits",
            self.flags
        );
        assert!(
            !(self.has(TRACE_MESSAGE_POINTER32) && self.has(TRACE_MESSAGE_POINTER64)),
            "POINTER32 and POINTER64 together"
        );
        let size = self.size();
        let size16 = u16::try_from(size).expect("message size fits u16");
        let mut r = vec![0u8; size];
        put_u16(&mut r, 0, size16);
        r[2] = 0; // Reserved (0 in every measured record)
        r[3] = MESSAGE_VERSION_BYTE;
        put_u16(&mut r, 4, self.message_number);
        put_u16(&mut r, 6, self.flags);
        let mut p = 8;
        if self.has(TRACE_MESSAGE_SEQUENCE) {
            put_u32(&mut r, p, self.sequence);
            p += 4;
        }
        if self.has(TRACE_MESSAGE_COMPONENTID) {
            put_u32(&mut r, p, self.component_id);
            p += 4;
        } else if self.has(TRACE_MESSAGE_GUID) {
            r[p..p + 16].copy_from_slice(&self.guid);
            p += 16;
        }
        if self.has(TRACE_MESSAGE_TIMESTAMP) {
            put_u64(&mut r, p, self.timestamp);
            p += 8;
        }
        if self.has(TRACE_MESSAGE_SYSTEMINFO) {
            put_u32(&mut r, p, self.tid);
            put_u32(&mut r, p + 4, self.pid);
            p += 8;
        }
        r[p..].copy_from_slice(&self.payload);
        r
    }

    /// What a reader must recover.
    pub fn expected(&self) -> ExpectedMessage {
        ExpectedMessage {
            flags: self.flags,
            message_number: self.message_number,
            sequence: self.has(TRACE_MESSAGE_SEQUENCE).then_some(self.sequence),
            guid: self
                .writes_guid()
                .then(|| guid_to_string(&self.guid).to_lowercase()),
            component_id: self
                .has(TRACE_MESSAGE_COMPONENTID)
                .then_some(self.component_id),
            timestamp: self.has(TRACE_MESSAGE_TIMESTAMP).then_some(self.timestamp),
            tid: self.has(TRACE_MESSAGE_SYSTEMINFO).then_some(self.tid),
            pid: self.has(TRACE_MESSAGE_SYSTEMINFO).then_some(self.pid),
            payload_len: self.payload.len() as u32,
            payload_offset: (8 + self.fields_len()) as u32,
            pointer_size: if self.has(TRACE_MESSAGE_POINTER64) {
                Some(8)
            } else if self.has(TRACE_MESSAGE_POINTER32) {
                Some(4)
            } else {
                None
            },
        }
    }
}

/// Every OptionFlags value that makes sense: all 2^6 subsets of SEQUENCE, GUID, COMPONENTID,
/// TIMESTAMP, PERFORMANCE_TIMESTAMP, SYSTEMINFO, each with no pointer flag, POINTER32 or
/// POINTER64 (192 values, ascending).
pub fn all_message_flag_combinations() -> Vec<u16> {
    let mut out = Vec::new();
    for ptr in [0, TRACE_MESSAGE_POINTER32, TRACE_MESSAGE_POINTER64] {
        for low in 0u16..0x40 {
            out.push(ptr | low);
        }
    }
    out.sort_unstable();
    out
}

impl MessageSpec {
    /// A message with `flags` and drawn values: MessageNumber 10..0x60, a sequence, a GUID, a
    /// component id, `timestamp`, TID/PID multiples of 4, a payload of 0..=`max_payload` bytes.
    pub(crate) fn drawn(
        flags: u16,
        timestamp: u64,
        max_payload: usize,
        rng: &mut crate::util::Rng,
    ) -> MessageSpec {
        let mut guid = [0u8; 16];
        rng.fill(&mut guid);
        let mut payload = vec![0u8; rng.range(0, max_payload as u64 + 1) as usize];
        rng.fill(&mut payload);
        MessageSpec {
            flags,
            message_number: rng.range(10, 0x60) as u16,
            sequence: rng.next_u64() as u32,
            guid,
            component_id: rng.next_u64() as u32,
            timestamp,
            tid: 4 * rng.range(1, 0x1000) as u32,
            pid: 4 * rng.range(1, 0x800) as u32,
            payload,
        }
    }
}
