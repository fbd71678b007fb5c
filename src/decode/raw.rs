//! Records no decoder knows (issue 29: "WPP and unknown events: the raw payload (hex) with
//! its size, never a guessed decoding"): a WPP message (its format lives in the provider's TMF
//! data, which no dump holds), a kernel event whose class and version have no established
//! layout, an EVENT_HEADER event without metadata or schema, a classic (MOF) provider's event.
//!
//! The payload is the record's event data, after the header of its kind (etw-internals.md §5):
//! SYSTEM 0x20, COMPACT 0x18, PERFINFO 0x10 plus its extended items, EVENT_HEADER 0x50 plus
//! its extended items, EVENT_TRACE_HEADER (FULL) 0x30, EVENT_INSTANCE_GUID_HEADER 0x48
//! (evntrace.h: the EVENT_TRACE_HEADER fields, then InstanceId, ParentInstanceId and
//! ParentGuid), MESSAGE after the optional fields its flags announce.
//!
//! JSON: `{"class": "raw", "fields": {"size": N, "hex": "…"}, "problem": "not decoded: why"}`.

use super::payload::{hex_digits, Payload, Value};
use crate::etl::records::{Record, RecordKind};
use crate::text::Untrusted;

/// The class of a payload given raw.
pub const CLASS: &str = "raw";

/// EVENT_TRACE_HEADER's size (FULL records).
const FULL_HEADER: usize = 0x30;
/// EVENT_INSTANCE_GUID_HEADER's size (INSTANCE records).
const INSTANCE_HEADER: usize = 0x48;

/// The event data of `r` and why no decoder decodes it (no fields, only the why, when the
/// data cannot be placed); None when `buf` does not hold the record.
pub fn decode(buf: &[u8], r: &Record) -> Option<Payload> {
    let rec = buf.get(r.offset..r.offset.checked_add(r.size)?)?;
    let (at, why) = match r.kind {
        RecordKind::System32
        | RecordKind::System64
        | RecordKind::Compact32
        | RecordKind::Compact64
        | RecordKind::PerfInfo32
        | RecordKind::PerfInfo64 => {
            let (p, _) = super::mof::kernel_payload(buf, r)?;
            let hook = r.hook.map_or_else(|| "?".into(), |h| format!("{h:#06x}"));
            let why = if r.hook == Some(0x0525) {
                // Its layout is known: a packed batch whose switches `cswitch` lists.
                "a compact context-switch batch (CCSWAP): `etwdump cswitch` lists its switches"
                    .to_string()
            } else {
                format!(
                    "no established layout for hook {hook} version {}",
                    r.version
                )
            };
            (r.size - p.len(), why)
        }
        RecordKind::EventHeader32 | RecordKind::EventHeader64 => match super::tracelogging::data_at(
            rec,
        ) {
            Ok(at) => (
                at,
                "no schema for this provider's event (and no TraceLogging metadata in the record)"
                    .to_string(),
            ),
            Err(why) => return Some(unplaced(why)),
        },
        RecordKind::Full32 | RecordKind::Full64 => (
            FULL_HEADER,
            "a classic provider's event: its layout is in the provider's MOF class".into(),
        ),
        RecordKind::Instance32 | RecordKind::Instance64 => (
            INSTANCE_HEADER,
            "a classic provider's event: its layout is in the provider's MOF class".into(),
        ),
        RecordKind::Message => {
            match r.message_header(buf) {
                Some(h) => (
                    h.payload_offset,
                    "a WPP message: its format is in the provider's TMF data, which no dump holds"
                        .into(),
                ),
                None => return Some(unplaced(
                    "the optional fields the message header's flags announce run past the record"
                        .into(),
                )),
            }
        }
    };
    let Some(data) = rec.get(at..) else {
        return Some(unplaced(format!(
            "the record ({} bytes) is shorter than its {at:#x}-byte header",
            rec.len()
        )));
    };
    Some(of(data, &why))
}

/// `data` given raw, not decoded because of `why`.
pub(crate) fn of(data: &[u8], why: &str) -> Payload {
    Payload {
        class: CLASS,
        fields: vec![
            (
                Untrusted::from_static("size"),
                Value::Number(data.len() as u64),
            ),
            (
                Untrusted::from_static("hex"),
                Value::Formatted(hex_digits(data)),
            ),
        ],
        problem: Some(format!("not decoded: {why}")),
        ..Payload::default()
    }
}

/// A record whose event data cannot be placed: no fields, and why.
fn unplaced(why: String) -> Payload {
    Payload {
        class: CLASS,
        problem: Some(format!("not decoded: {why}")),
        ..Payload::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etl::records::walk_from;

    /// A buffer holding `rec` at offset 0 (8-aligned, the rest zero), walked.
    fn one(rec: &[u8]) -> (Vec<u8>, Record) {
        let mut buf = rec.to_vec();
        buf.resize(rec.len().next_multiple_of(8), 0);
        let mut rs = Vec::new();
        walk_from(&buf, 0, buf.len(), |r| rs.push(*r));
        assert_eq!(rs.len(), 1, "{rs:?}");
        (buf, rs[0])
    }

    fn fields(p: &Payload) -> (u64, String) {
        match (p.get("size"), p.get("hex")) {
            (Some(Value::Number(n)), Some(Value::Formatted(h))) => (*n, h.clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn system_record_after_its_header() {
        // SYSTEM64 marker, Size 0x26, hook 0x0f33 (no layout), then 6 bytes of data.
        let mut rec = vec![0u8; 0x26];
        rec[..4].copy_from_slice(&0xC002_0002u32.to_le_bytes());
        rec[4..6].copy_from_slice(&0x26u16.to_le_bytes());
        rec[6..8].copy_from_slice(&0x0f33u16.to_le_bytes());
        rec[0x20..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0x00, 0x7f]);
        let (buf, r) = one(&rec);
        let p = decode(&buf, &r).unwrap();
        assert_eq!(p.class, "raw");
        assert_eq!(fields(&p), (6, "deadbeef007f".into()));
        assert_eq!(
            p.problem.as_deref(),
            Some("not decoded: no established layout for hook 0x0f33 version 2")
        );
    }

    #[test]
    fn perfinfo_record_skips_its_pmc_counters() {
        // PERFINFO64 v2 with one PMC counter (marker bits 8-10 = 1): header 0x10 + 8, data 4.
        let mut rec = vec![0u8; 0x1c];
        rec[..4].copy_from_slice(&0xC011_0102u32.to_le_bytes());
        rec[4..6].copy_from_slice(&0x1cu16.to_le_bytes());
        rec[6..8].copy_from_slice(&0x0f2eu16.to_le_bytes());
        rec[0x10..0x18].copy_from_slice(&[0x11; 8]);
        rec[0x18..].copy_from_slice(&[1, 2, 3, 4]);
        let (buf, r) = one(&rec);
        assert_eq!(fields(&decode(&buf, &r).unwrap()), (4, "01020304".into()));
    }

    #[test]
    fn message_record_after_its_optional_fields() {
        // MESSAGE: flags SEQUENCE | SYSTEMINFO (4 + 8 bytes after the 8-byte header).
        let mut rec = vec![0u8; 8 + 12 + 3];
        let len = rec.len() as u16;
        rec[..2].copy_from_slice(&len.to_le_bytes());
        rec[3] = 0x90;
        rec[4..6].copy_from_slice(&7u16.to_le_bytes());
        rec[6..8].copy_from_slice(&0x0021u16.to_le_bytes());
        let n = rec.len();
        rec[n - 3..].copy_from_slice(b"abc");
        let (buf, r) = one(&rec);
        let p = decode(&buf, &r).unwrap();
        assert_eq!(fields(&p), (3, "616263".into()));
        assert!(p.problem.unwrap().contains("WPP message"));
    }

    #[test]
    fn event_header_record_after_its_extended_items() {
        // EVENT_HEADER64 with one extended item of 4 bytes (8-aligned: 8 + 8), then 2 bytes.
        let mut rec = vec![0u8; 0x50 + 16 + 2];
        let len = rec.len() as u16;
        rec[..2].copy_from_slice(&len.to_le_bytes());
        rec[2] = 0x13;
        rec[3] = 0xC0;
        rec[4..6].copy_from_slice(&1u16.to_le_bytes()); // EXTENDED_INFO
        rec[0x50 + 2..0x50 + 4].copy_from_slice(&5u16.to_le_bytes()); // ExtType
        rec[0x50 + 6..0x50 + 8].copy_from_slice(&4u16.to_le_bytes()); // DataSize, no linkage
        let n = rec.len();
        rec[n - 2..].copy_from_slice(&[0xab, 0xcd]);
        let (buf, r) = one(&rec);
        assert_eq!(fields(&decode(&buf, &r).unwrap()), (2, "abcd".into()));
        // Extended items that run past the record: no payload can be placed.
        rec[0x50 + 6..0x50 + 8].copy_from_slice(&0x100u16.to_le_bytes());
        let (buf, r) = one(&rec);
        let p = decode(&buf, &r).unwrap();
        assert!(p.fields.is_empty());
        assert_eq!(
            p.problem.as_deref(),
            Some(
                "not decoded: the extended item at +0x50 (256 bytes of data) runs past the record"
            )
        );
    }

    #[test]
    fn hex_digits_are_two_per_byte() {
        let all: Vec<u8> = (0..=255).collect();
        let h = hex_digits(&all);
        assert_eq!(h.len(), 512);
        assert_eq!(&h[..8], "00010203");
        assert_eq!(&h[h.len() - 4..], "feff");
        assert_eq!(
            h,
            all.iter().map(|x| format!("{x:02x}")).collect::<String>()
        );
    }
}
