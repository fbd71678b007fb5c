//! The common fields of a record's header (etw-internals.md §5): timestamp, thread and process
//! ids, provider and event descriptor, by header kind. Offsets relative to the record start:
//!
//! | kind | fields |
//! |---|---|
//! | SYSTEM (SYSTEM_TRACE_HEADER) / COMPACT | marker (version = low byte), Size u16 @4, HookId u16 @6, ThreadId u32 @8, ProcessId u32 @0xC, timestamp u64 @0x10 |
//! | PERFINFO (PERFINFO_TRACE_HEADER) | marker, Size @4, HookId @6, timestamp u64 @8 (no thread or process id) |
//! | EVENT_HEADER | Size u16 @0, HeaderType @2, Flags @4, EventProperty @6, ThreadId u32 @8, ProcessId u32 @0xC, TimeStamp @0x10, ProviderId GUID @0x18, EventDescriptor {Id u16 @0x28, Version u8 @0x2A, Channel, Level @0x2C, Opcode, Task, Keyword} |
//! | FULL / INSTANCE (EVENT_TRACE_HEADER) | Size @0, Class {Type u8 @4, Level @5, Version u16 @6}, ThreadId @8, ProcessId @0xC, TimeStamp @0x10, Guid @0x18 (FULL) |
//! | MESSAGE (MESSAGE_TRACE_HEADER) | Size u16 @0, 0x90 @3, MessageNumber u16 @4 (as the event id), OptionFlags u16 @6, then by flag: sequence, component id or GUID (as the provider), timestamp, ThreadId, ProcessId (`MessageHeader`) |

use crate::bytes::{guid_text, LeBytes};
use crate::etl::records::{MessageHeader, Record, RecordKind};

/// Header fields of one record (None where the header has no such field).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub timestamp: Option<u64>,
    pub tid: Option<u32>,
    pub pid: Option<u32>,
    /// Provider GUID (EVENT_HEADER) or event GUID (FULL), lower case.
    pub provider: Option<String>,
    /// The provider GUID's bytes, for EVENT_HEADER records only (the one kind whose GUID is
    /// the provider's: FULL records carry an event class GUID, MESSAGE records a message GUID).
    pub provider_id: Option<[u8; 16]>,
    pub event_id: Option<u16>,
    pub version: Option<u16>,
    pub level: Option<u8>,
    /// MESSAGE records: the option flags, sequence number and component id.
    pub message_flags: Option<u16>,
    pub sequence: Option<u32>,
    pub component_id: Option<u32>,
}

/// Read the header fields of `r` in `buf` (the buffer the record was walked in).
pub fn fields(buf: &[u8], r: &Record) -> Fields {
    let Some(h) = buf.get(r.offset..r.offset + r.size) else {
        return Fields::default();
    };
    let guid = |o: usize| {
        h.bytes_at(o, 16)
            .and_then(|g| g.try_into().ok())
            .map(guid_text)
    };
    match r.kind {
        RecordKind::System32
        | RecordKind::System64
        | RecordKind::Compact32
        | RecordKind::Compact64 => Fields {
            timestamp: r.timestamp(buf),
            tid: h.u32_at(8),
            pid: h.u32_at(0xC),
            version: Some(u16::from(r.version)),
            ..Fields::default()
        },
        RecordKind::PerfInfo32 | RecordKind::PerfInfo64 => Fields {
            timestamp: r.timestamp(buf),
            version: Some(u16::from(r.version)),
            ..Fields::default()
        },
        RecordKind::EventHeader32 | RecordKind::EventHeader64 => Fields {
            timestamp: r.timestamp(buf),
            tid: h.u32_at(8),
            pid: h.u32_at(0xC),
            provider: guid(0x18),
            provider_id: h.bytes_at(0x18, 16).and_then(|g| g.try_into().ok()),
            event_id: h.u16_at(0x28),
            version: h.u8_at(0x2A).map(u16::from),
            level: h.u8_at(0x2C),
            ..Fields::default()
        },
        RecordKind::Full32 | RecordKind::Full64 => Fields {
            timestamp: r.timestamp(buf),
            tid: h.u32_at(8),
            pid: h.u32_at(0xC),
            provider: guid(0x18),
            event_id: h.u8_at(4).map(u16::from),
            version: h.u16_at(6),
            level: h.u8_at(5),
            ..Fields::default()
        },
        RecordKind::Instance32 | RecordKind::Instance64 => Fields {
            timestamp: r.timestamp(buf),
            tid: h.u32_at(8),
            pid: h.u32_at(0xC),
            event_id: h.u8_at(4).map(u16::from),
            version: h.u16_at(6),
            level: h.u8_at(5),
            ..Fields::default()
        },
        RecordKind::Message => match MessageHeader::parse(h) {
            Some(m) => Fields {
                timestamp: m.timestamp,
                tid: m.thread_id,
                pid: m.process_id,
                provider: m.guid.as_ref().map(guid_text),
                event_id: Some(m.message_number),
                message_flags: Some(m.option_flags),
                sequence: m.sequence,
                component_id: m.component_id,
                ..Fields::default()
            },
            None => Fields::default(),
        },
    }
}

/// The header kind as text ("perfinfo64", "event_header64", ...).
pub fn kind_name(k: RecordKind) -> &'static str {
    match k {
        RecordKind::System32 => "system32",
        RecordKind::System64 => "system64",
        RecordKind::Compact32 => "compact32",
        RecordKind::Compact64 => "compact64",
        RecordKind::Full32 => "full32",
        RecordKind::Full64 => "full64",
        RecordKind::Instance32 => "instance32",
        RecordKind::Instance64 => "instance64",
        RecordKind::Message => "message",
        RecordKind::PerfInfo32 => "perfinfo32",
        RecordKind::PerfInfo64 => "perfinfo64",
        RecordKind::EventHeader32 => "event_header32",
        RecordKind::EventHeader64 => "event_header64",
    }
}
