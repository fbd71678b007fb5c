//! TraceLogging (self-describing) events (issue 29 item 1): an EVENT_HEADER record that
//! carries its own metadata in an extended data item, decoded field by field from it into the
//! [`Payload`] model the MOF decoder uses. `class` is `CLASS` (`TraceLogging`), `event` the
//! event name from the metadata and `provider` the provider name from the provider traits:
//! names read from the record are untrusted text, so they are not the class (a name etwdump
//! knows) but fields beside it.
//!
//! Format, and where each fact comes from:
//! - The record: the 0x50-byte EVENT_HEADER; Flags (u16 at +4) bit 0x0001
//!   (EVENT_HEADER_FLAG_EXTENDED_INFO) announces extended data items right after it
//!   (etl-parser 1.0.1 `etl/event.py` `EventRecord`; shared/reference/chappell
//!   api_etw_tracelog_event_header.txt).
//! - An extended item: `{u16 Size, u16 ExtType, u16 Linkage, u16 DataSize}` + DataSize bytes;
//!   each item starts 8-aligned; Linkage bit 0 says another item follows; the event data
//!   starts at the next 8-aligned offset after the last item (etl-parser `etl/event.py`:
//!   `Aligned(8, EventHeaderExtendedDataItem)` repeated until `not reserved2 & 0x1`; dissect.etl
//!   3.14 `dissect/etl/headers/event.py` and `c_etl.py` read the first u16 as `Size`, the
//!   item's size padded to 8, which etl-parser calls `reserved1`). The real AMSITrace.etl of
//!   shared/data confirms it: items of DataSize 12 and 43 have Size 24 and 56, and the
//!   payload starts at +0xa0 = align8(+0x68 + 8 + 43).
//! - ExtType 11 is EVENT_SCHEMA_TL, 12 PROV_TRAITS (dissect.etl `ExtType`: `EVENT_SCHEMA_TL =
//!   0xB`, `PROV_TRAITS = 0xC`; etl-parser `etl/parsers/tracelogging.py` takes item type 11).
//! - Provider traits: `UINT16 Size` (the whole structure), the provider name as NUL-terminated
//!   UTF-8, then traits (microsoft/tracelogging `etw/cpp/traceloggingdynamic/
//!   TraceLoggingDynamic.h`, `ProviderMetadataBuilder`; dissect.etl `read_provider_traits`).
//! - Event metadata (TraceLoggingDynamic.h, `EventMetadataBuilder`): `UINT16 Size` (the whole
//!   structure, Size included); tag bytes, read until one without the high bit; the event name,
//!   NUL-terminated UTF-8; then fields to the end: name (NUL-terminated UTF-8), InMeta byte
//!   (low 5 bits the InType; `& 0x60`: 0 scalar, 0x20 constant count, 0x40 variable count,
//!   0x60 custom schema; 0x80: an OutMeta byte follows), OutMeta (low 7 bits the OutType;
//!   0x80: tag bytes follow, chained likewise), then a `UINT16` count for a constant-count
//!   array, or `UINT16 CbSchema` + schema for a custom one.
//! - InTypes (TraceLoggingDynamic.h `enum InType`; etl-parser `TagIn` agrees): 1 UNICODESTRING
//!   (NUL-terminated UTF-16), 2 ANSISTRING (NUL-terminated 8-bit), 3..10 INT8, UINT8, INT16,
//!   UINT16, INT32, UINT32, INT64, UINT64, 11 FLOAT, 12 DOUBLE, 13 BOOL32, 14 BINARY (`UINT16`
//!   byte count + bytes; arrays of it "not supported"), 15 GUID, 16 pointer of unstated size
//!   ("not supported"), 17 FILETIME, 18 SYSTEMTIME, 19 SID ("size is determined from the
//!   number of subauthorities"), 20 HEXINT32, 21 HEXINT64, 22 COUNTEDSTRING (`UINT16` byte
//!   count + UTF-16), 23 COUNTEDANSISTRING (`UINT16` byte count + bytes), 24 STRUCT (no value of
//!   its own: the next OutType fields are its members; an array of it repeats the group),
//!   25 COUNTEDBINARY (as BINARY; arrays allowed).
//! - Data: values in field order, unaligned; a variable-count array is a `UINT16` element
//!   count then the elements (TraceLoggingDynamic.h `AddArrayCount`, `AddBinary`,
//!   `AddCountedString`, `AddString`; etl-parser `read_array_field`). SYSTEMTIME is eight
//!   16-bit words: year, month, day of week, day, hour, minute, second, milliseconds
//!   (etl-parser `etl/utils.py` `SystemTime`).
//! - OutType String (0x02) on an INT8/UINT8 or UINT16 array makes it text: the Windows SDK's
//!   TraceLoggingProvider.h writes `TraceLoggingCharArray` as `TlgInUINT8` + `TlgOutSTRING`
//!   and `TraceLoggingChar16Array` / `TraceLoggingWCharArray` as `TlgInUINT16` +
//!   `TlgOutSTRING` (the header as found by public code search). AMSITrace.etl's
//!   `Raw Script` is such a UINT16 array.
//!
//! Values: integers as numbers (OutType Hex, NTStatus or CodePointer on an unsigned integer,
//! and HEXINT32/64, as `0x…` text), FLOAT/DOUBLE as numbers, BOOL32 as a boolean, GUIDs as
//! text, FILETIME as ISO-8601 UTC, SYSTEMTIME as `YYYY-MM-DDTHH:MM:SS.mmm` (with `Z` when the
//! OutType says UTC), SIDs as `S-1-…`, binary as hex digits, strings as untrusted text, arrays
//! as arrays, structures as objects.
//!
//! Hostile input: every size and count is checked against the record; a field that does not
//! fit, an unknown InType, a custom-schema field, metadata that does not parse, structures
//! nested deeper than `MAX_DEPTH` or more than `MAX_VALUES` values stop the decoding with
//! a `problem`, keeping the fields decoded so far; nothing reads past the record.

use super::payload::{hex_digits, sid, Fields, Float, Payload, Value};
use crate::bytes::{guid_text, LeBytes};
use crate::etl::records::{align8, Record, RecordKind};
use crate::text::Untrusted;
use crate::time::filetime_text;

/// The `class` of every payload this module decodes.
pub(crate) const CLASS: &str = "TraceLogging";
/// EVENT_HEADER size.
const HEADER: usize = 0x50;
/// EVENT_HEADER_FLAG_EXTENDED_INFO.
const FLAG_EXTENDED_INFO: u16 = 0x0001;
const EXT_SCHEMA_TL: u16 = 11;
const EXT_PROV_TRAITS: u16 = 12;
/// Structures nested deeper than this are not decoded.
pub(crate) const MAX_DEPTH: usize = 8;
/// Values decoded from one record at most (a constant-count array of structures whose members
/// take no byte could otherwise multiply without bound).
pub(crate) const MAX_VALUES: usize = 65_536;

const IN_STRUCT: u8 = 24;
const OUT_STRING: u8 = 0x02;

/// How many values a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Count {
    Scalar,
    /// Constant count, from the metadata.
    Fixed(u16),
    /// A `UINT16` count in the data before the elements.
    Variable,
    /// A custom schema (not decoded).
    Custom,
}

/// One field of the metadata.
#[derive(Clone, Debug)]
struct FieldMeta {
    name: Untrusted,
    in_type: u8,
    out_type: u8,
    count: Count,
}

/// What the extended items hold.
pub(crate) struct Extended<'a> {
    /// EVENT_SCHEMA_TL data: the record carries its TraceLogging metadata.
    pub(crate) schema: Option<&'a [u8]>,
    traits: Option<&'a [u8]>,
    /// Where the event data starts (record-relative), or why it cannot be found.
    pub(crate) payload_at: Result<usize, String>,
}

/// Where the event data of the EVENT_HEADER record `rec` starts (record-relative): after the
/// 0x50-byte header and the extended items its Flags announce.
pub(crate) fn data_at(rec: &[u8]) -> Result<usize, String> {
    match rec.u16_at(4) {
        Some(flags) if flags & FLAG_EXTENDED_INFO != 0 => extended(rec).payload_at,
        Some(_) if rec.len() >= HEADER => Ok(HEADER),
        _ => Err("the record is shorter than its 0x50-byte header".into()),
    }
}

/// The extended data items after the header of `rec` (whose Flags announce them).
pub(crate) fn extended(rec: &[u8]) -> Extended<'_> {
    let mut out = Extended {
        schema: None,
        traits: None,
        payload_at: Err(String::new()),
    };
    let mut at = HEADER;
    // Every item takes at least 8 bytes: the record bounds the count.
    for _ in 0..rec.len() / 8 {
        let (Some(ext_type), Some(linkage), Some(size)) =
            (rec.u16_at(at + 2), rec.u16_at(at + 4), rec.u16_at(at + 6))
        else {
            out.payload_at = Err(format!(
                "the extended item at +{at:#x} runs past the record"
            ));
            return out;
        };
        let Some(data) = rec.bytes_at(at + 8, usize::from(size)) else {
            out.payload_at = Err(format!(
                "the extended item at +{at:#x} ({size} bytes of data) runs past the record"
            ));
            return out;
        };
        match ext_type {
            EXT_SCHEMA_TL => out.schema = Some(data),
            EXT_PROV_TRAITS => out.traits = Some(data),
            _ => {}
        }
        at = align8(at + 8 + usize::from(size));
        if linkage & 1 == 0 {
            out.payload_at = if at <= rec.len() {
                Ok(at)
            } else {
                Err("the extended items end past the record".into())
            };
            return out;
        }
    }
    out.payload_at = Err("the extended items do not end inside the record".into());
    out
}

/// The provider name of PROV_TRAITS data.
fn provider_name(traits: &[u8]) -> Option<Untrusted> {
    let size = usize::from(traits.u16_at(0)?).min(traits.len());
    Some(Untrusted::from_utf8_z(traits.get(2..size)?))
}

/// A NUL-terminated string at `m[*at..]` (UTF-8, lossy), `*at` moved past its NUL.
fn cstr(m: &[u8], at: &mut usize, what: &str) -> Result<Untrusted, String> {
    let rest = m.get(*at..).unwrap_or_default();
    let end = rest
        .iter()
        .position(|&c| c == 0)
        .ok_or_else(|| format!("{what} at metadata +{:#x} has no terminating NUL", *at))?;
    *at += end + 1;
    Ok(Untrusted::from_utf8_lossy(&rest[..end]))
}

/// One byte of the metadata.
fn meta_u8(m: &[u8], at: &mut usize) -> Result<u8, String> {
    let b = m
        .u8_at(*at)
        .ok_or_else(|| format!("the metadata ends inside a field (+{:#x})", *at))?;
    *at += 1;
    Ok(b)
}

/// One `UINT16` of the metadata.
fn meta_u16(m: &[u8], at: &mut usize) -> Result<u16, String> {
    let v = m
        .u16_at(*at)
        .ok_or_else(|| format!("the metadata ends inside a field (+{:#x})", *at))?;
    *at += 2;
    Ok(v)
}

/// Tag bytes: read until one without the high bit.
fn skip_tags(m: &[u8], at: &mut usize) -> Result<(), String> {
    while meta_u8(m, at)? & 0x80 != 0 {}
    Ok(())
}

/// The event name and the fields of EVENT_SCHEMA_TL data; on a problem, the fields read
/// before it and the problem.
fn parse_meta(schema: &[u8]) -> (Option<Untrusted>, Vec<FieldMeta>, Option<String>) {
    let mut fields = Vec::new();
    let size = usize::from(schema.u16_at(0).unwrap_or(0));
    if size < 3 || size > schema.len() {
        let why = format!("Size {size}, its item holds {} bytes", schema.len());
        return (None, fields, Some(why));
    }
    let m = &schema[..size];
    let mut at = 2;
    let name = match skip_tags(m, &mut at).and_then(|()| cstr(m, &mut at, "the event name")) {
        Ok(n) => n,
        Err(why) => return (None, fields, Some(why)),
    };
    while at < m.len() {
        match field_meta(m, &mut at) {
            Ok(f) => fields.push(f),
            Err(why) => return (Some(name), fields, Some(why)),
        }
    }
    (Some(name), fields, None)
}

/// One field's metadata at `m[*at..]`.
fn field_meta(m: &[u8], at: &mut usize) -> Result<FieldMeta, String> {
    let name = cstr(m, at, "a field name")?;
    let in_meta = meta_u8(m, at)?;
    let mut out_type = 0;
    if in_meta & 0x80 != 0 {
        let out_meta = meta_u8(m, at)?;
        out_type = out_meta & 0x7f;
        if out_meta & 0x80 != 0 {
            skip_tags(m, at)?;
        }
    }
    let count = match in_meta & 0x60 {
        0x00 => Count::Scalar,
        0x20 => Count::Fixed(meta_u16(m, at)?),
        0x40 => Count::Variable,
        _ => {
            let cb = usize::from(meta_u16(m, at)?);
            if m.len() - *at < cb {
                return Err(format!(
                    "the custom schema of field {name} runs past the metadata"
                ));
            }
            *at += cb;
            Count::Custom
        }
    };
    Ok(FieldMeta {
        name,
        in_type: in_meta & 0x1f,
        out_type,
        count,
    })
}

/// The index after field `i` of `metas` and, for a structure, its members.
fn span(metas: &[FieldMeta], i: usize, depth: usize) -> Result<usize, String> {
    let f = &metas[i];
    if f.in_type != IN_STRUCT {
        return Ok(i + 1);
    }
    if depth >= MAX_DEPTH {
        return Err(format!(
            "structure {} nested deeper than {MAX_DEPTH} levels",
            f.name
        ));
    }
    let members = usize::from(f.out_type);
    if members == 0 {
        return Err(format!("structure {} has no member", f.name));
    }
    let mut j = i + 1;
    for _ in 0..members {
        if j >= metas.len() {
            return Err(format!(
                "structure {} announces {members} members, the metadata ends before",
                f.name
            ));
        }
        j = span(metas, j, depth + 1)?;
    }
    Ok(j)
}

/// A failure, either where a value could not be read (located by the caller) or already
/// located inside a structure.
enum Fail {
    Here(String),
    Inside(String),
}

/// The event data being read.
struct Reader<'a> {
    p: &'a [u8],
    at: usize,
    values: usize,
}

impl<'a> Reader<'a> {
    /// `n` bytes, consumed.
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let b = self.p.bytes_at(self.at, n).ok_or_else(|| {
            format!(
                "needs {n} bytes, the payload has {}",
                self.p.len().saturating_sub(self.at)
            )
        })?;
        self.at += n;
        Ok(b)
    }

    /// A little-endian unsigned integer of `n` ≤ 8 bytes.
    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .rev()
            .fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    }

    /// A `UINT16` byte count and that many bytes.
    fn counted(&mut self) -> Result<&'a [u8], String> {
        let n = self.uint(2)? as usize;
        self.take(n)
    }

    /// Count one more value against [`MAX_VALUES`].
    fn tally(&mut self) -> Result<(), String> {
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(format!("more than {MAX_VALUES} values in one event"));
        }
        Ok(())
    }
}

/// The fields `metas` read from `rd` in order, pushed to `out`; the first failure, located.
fn decode_list(
    metas: &[FieldMeta],
    rd: &mut Reader<'_>,
    depth: usize,
    out: &mut Vec<(Untrusted, Value)>,
) -> Result<(), String> {
    let mut i = 0;
    while i < metas.len() {
        let m = &metas[i];
        let end = span(metas, i, depth)?;
        let at = rd.at;
        match field_value(m, &metas[i + 1..end], rd, depth) {
            Ok(v) => out.push((m.name.clone(), v)),
            Err(Fail::Here(why)) => return Err(format!("{} at payload +{at:#x}: {why}", m.name)),
            Err(Fail::Inside(why)) => return Err(format!("{}.{why}", m.name)),
        }
        i = end;
    }
    Ok(())
}

/// The value of field `m` (a structure: of its `members`).
fn field_value(
    m: &FieldMeta,
    members: &[FieldMeta],
    rd: &mut Reader<'_>,
    depth: usize,
) -> Result<Value, Fail> {
    let count = match m.count {
        Count::Scalar => None,
        Count::Fixed(n) => Some(n),
        Count::Variable => Some(rd.uint(2).map_err(Fail::Here)? as u16),
        Count::Custom => {
            return Err(Fail::Here(
                "a field with a custom schema (InMeta 0x60) is not decoded".into(),
            ))
        }
    };
    if m.in_type == IN_STRUCT {
        let one = |rd: &mut Reader<'_>| -> Result<Value, Fail> {
            rd.tally().map_err(Fail::Here)?;
            let mut f = Vec::new();
            decode_list(members, rd, depth + 1, &mut f).map_err(Fail::Inside)?;
            Ok(Value::Struct(Fields(f)))
        };
        return match count {
            None => one(rd),
            Some(n) => (0..n)
                .map(|_| one(rd))
                .collect::<Result<_, _>>()
                .map(Value::Array),
        };
    }
    let Some(n) = count else {
        return scalar(m, rd).map_err(Fail::Here);
    };
    let n = usize::from(n);
    let text = m.out_type == OUT_STRING;
    match m.in_type {
        3 | 4 if text => {
            rd.tally().map_err(Fail::Here)?;
            let b = rd.take(n).map_err(Fail::Here)?;
            Ok(Value::Text(Untrusted::from_utf8_lossy(b)))
        }
        6 if text => {
            rd.tally().map_err(Fail::Here)?;
            let b = rd.take(2 * n).map_err(Fail::Here)?;
            Ok(Value::Text(Untrusted::from_utf16le_z(b)))
        }
        14 => Err(Fail::Here(
            "an array of BINARY (InType 14) cannot be decoded (TraceLoggingDynamic.h)".into(),
        )),
        _ => (0..n)
            .map(|_| scalar(m, rd))
            .collect::<Result<_, _>>()
            .map(Value::Array)
            .map_err(Fail::Here),
    }
}

/// One value of field `m`'s InType.
fn scalar(m: &FieldMeta, rd: &mut Reader<'_>) -> Result<Value, String> {
    rd.tally()?;
    let hex = matches!(m.out_type, 0x04 | 0x0e | 0x25);
    let unsigned = |v: u64| {
        if hex {
            Value::Address(v)
        } else {
            Value::Number(v)
        }
    };
    let signed = |v: u64, bits: u32| Value::Signed(((v << (64 - bits)) as i64) >> (64 - bits));
    Ok(match m.in_type {
        1 => {
            let rest = rd.p.get(rd.at..).unwrap_or_default();
            let end = rest
                .chunks_exact(2)
                .position(|u| u == [0, 0])
                .ok_or("no terminating NUL (UTF-16) before the end of the record")?;
            let s = Untrusted::from_utf16le_z(rd.take(2 * end + 2)?);
            Value::Text(s)
        }
        2 => {
            let rest = rd.p.get(rd.at..).unwrap_or_default();
            let end = rest
                .iter()
                .position(|&c| c == 0)
                .ok_or("no terminating NUL before the end of the record")?;
            Value::Text(Untrusted::from_utf8_lossy(&rd.take(end + 1)?[..end]))
        }
        3 => signed(rd.uint(1)?, 8),
        4 => unsigned(rd.uint(1)?),
        5 => signed(rd.uint(2)?, 16),
        6 => unsigned(rd.uint(2)?),
        7 => signed(rd.uint(4)?, 32),
        8 => unsigned(rd.uint(4)?),
        9 => Value::Signed(rd.uint(8)? as i64),
        10 => unsigned(rd.uint(8)?),
        11 => Value::Float(Float {
            value: f64::from(f32::from_bits(rd.uint(4)? as u32)),
            single: true,
        }),
        12 => Value::Float(Float {
            value: f64::from_bits(rd.uint(8)?),
            single: false,
        }),
        13 => Value::Bool(rd.uint(4)? != 0),
        14 | 25 => Value::Formatted(hex_digits(rd.counted()?)),
        15 => {
            let b: &[u8; 16] = rd.take(16)?.try_into().map_err(|_| "GUID")?;
            Value::Formatted(guid_text(b))
        }
        17 => Value::Formatted(filetime_text(rd.uint(8)?)),
        18 => Value::Formatted(system_time(rd.take(16)?, m.out_type == 0x26)),
        19 => {
            let (s, n) = sid(rd.p, rd.at)?;
            rd.take(n)?;
            Value::Formatted(s)
        }
        20 => Value::Address(rd.uint(4)?),
        21 => Value::Address(rd.uint(8)?),
        22 => Value::Text(Untrusted::from_utf16le_z(rd.counted()?)),
        23 => Value::Text(Untrusted::from_utf8_lossy(rd.counted()?)),
        16 => return Err("InType 16 (a pointer of unstated size) is not decoded".into()),
        t => return Err(format!("unknown InType {t}")),
    })
}

/// A SYSTEMTIME's 16 bytes as `YYYY-MM-DDTHH:MM:SS.mmm`, `Z` appended when `utc`.
pub(crate) fn system_time(b: &[u8], utc: bool) -> String {
    let w = |i: usize| b.u16_at(2 * i).unwrap_or(0);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}{}",
        w(0),
        w(1),
        w(3),
        w(4),
        w(5),
        w(6),
        w(7),
        if utc { "Z" } else { "" }
    )
}

/// Decode `r` when it is an EVENT_HEADER record carrying TraceLogging metadata (an
/// EVENT_SCHEMA_TL extended item); None for any other record.
pub fn decode(buf: &[u8], r: &Record) -> Option<Payload> {
    if !matches!(
        r.kind,
        RecordKind::EventHeader32 | RecordKind::EventHeader64
    ) {
        return None;
    }
    let rec = buf.get(r.offset..r.offset.checked_add(r.size)?)?;
    if rec.u16_at(4)? & FLAG_EXTENDED_INFO == 0 {
        return None;
    }
    let ext = extended(rec);
    let schema = ext.schema?;
    let mut out = Payload {
        class: CLASS,
        provider: ext.traits.and_then(provider_name),
        ..Payload::default()
    };
    let (name, metas, meta_problem) = parse_meta(schema);
    out.event = name;
    let at = match ext.payload_at {
        Ok(at) => at,
        Err(why) => {
            out.problem = Some(why);
            return Some(out);
        }
    };
    let mut rd = Reader {
        p: &rec[at..],
        at: 0,
        values: 0,
    };
    let decoded = decode_list(&metas, &mut rd, 0, &mut out.fields);
    out.problem = match (meta_problem, decoded) {
        (Some(why), _) => Some(format!("metadata: {why}")),
        (None, Err(why)) => Some(why),
        (None, Ok(())) if rd.at < rd.p.len() => Some(format!(
            "{} bytes after the last field{}",
            rd.p.len() - rd.at,
            metas
                .last()
                .map_or_else(String::new, |m| format!(" ({})", m.name))
        )),
        (None, Ok(())) => None,
    };
    Some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    //! Records built by hand from the format above (TraceLoggingDynamic.h, etl-parser's
    //! `EventRecord`), not from this decoder's output.
    use super::*;
    use crate::etl::records::walk_from;
    use serde_json::json;

    /// An EVENT_HEADER64 record: Flags EXTENDED_INFO, the extended `items` (ExtType, data),
    /// each 8-aligned with its padded size first, Linkage set on all but the last, then
    /// `payload`.
    fn record(items: &[(u16, Vec<u8>)], payload: &[u8]) -> Vec<u8> {
        let mut r = vec![0u8; HEADER];
        r[2..4].copy_from_slice(&[0x13, 0xc0]);
        r[4..6].copy_from_slice(&1u16.to_le_bytes());
        r[8..12].copy_from_slice(&77u32.to_le_bytes());
        r[12..16].copy_from_slice(&88u32.to_le_bytes());
        for (i, (ext_type, data)) in items.iter().enumerate() {
            let padded = align8(8 + data.len()) as u16;
            r.extend_from_slice(&padded.to_le_bytes());
            r.extend_from_slice(&ext_type.to_le_bytes());
            r.extend_from_slice(&u16::from(i + 1 < items.len()).to_le_bytes());
            r.extend_from_slice(&(data.len() as u16).to_le_bytes());
            r.extend_from_slice(data);
            r.resize(align8(r.len()), 0);
        }
        r.extend_from_slice(payload);
        let n = r.len() as u16;
        r[0..2].copy_from_slice(&n.to_le_bytes());
        r
    }

    /// EVENT_SCHEMA_TL data: Size, one tag byte 0, the event name, then each field's name
    /// and its InMeta/OutMeta/count bytes.
    fn schema(event: &str, fields: &[(&str, &[u8])]) -> Vec<u8> {
        let mut m = vec![0, 0, 0];
        m.extend_from_slice(event.as_bytes());
        m.push(0);
        for (name, info) in fields {
            m.extend_from_slice(name.as_bytes());
            m.push(0);
            m.extend_from_slice(info);
        }
        let n = m.len() as u16;
        m[0..2].copy_from_slice(&n.to_le_bytes());
        m
    }

    /// PROV_TRAITS data naming the provider.
    fn traits(name: &str) -> Vec<u8> {
        let mut t = vec![0, 0];
        t.extend_from_slice(name.as_bytes());
        t.push(0);
        let n = t.len() as u16;
        t[0..2].copy_from_slice(&n.to_le_bytes());
        t
    }

    fn run(rec: &[u8]) -> Option<Payload> {
        let mut buf = rec.to_vec();
        buf.resize(align8(rec.len()), 0);
        let mut got = None;
        walk_from(&buf, 0, buf.len(), |r| got = decode(&buf, r));
        got
    }

    fn one(fields: &[(&str, &[u8])], payload: &[u8]) -> Payload {
        let rec = record(&[(12, traits("Prov")), (11, schema("Ev", fields))], payload);
        run(&rec).expect("a TraceLogging payload")
    }

    /// `s` as UTF-16LE with its NUL.
    pub(crate) fn utf16z(s: &str) -> Vec<u8> {
        s.encode_utf16()
            .chain([0])
            .flat_map(u16::to_le_bytes)
            .collect()
    }

    /// A payload's `fields` as JSON.
    pub(crate) fn fields_json(p: &Payload) -> serde_json::Value {
        serde_json::to_value(p).unwrap()["fields"].clone()
    }

    /// Every scalar InType TraceLoggingDynamic.h defines (but 16), with its data encoding.
    #[test]
    fn every_scalar_in_type() {
        let guid: Vec<u8> = (1..=16).collect();
        let mut d = Vec::new();
        d.extend(utf16z("héllo"));
        d.extend(b"abc\0");
        d.push(0xfe); // INT8 -2
        d.push(200); // UINT8
        d.extend((-300i16).to_le_bytes());
        d.extend(60000u16.to_le_bytes());
        d.extend((-70000i32).to_le_bytes());
        d.extend(4_000_000_000u32.to_le_bytes());
        d.extend((-5i64).to_le_bytes());
        d.extend(u64::MAX.to_le_bytes());
        d.extend(1.5f32.to_le_bytes());
        d.extend((-0.25f64).to_le_bytes());
        d.extend(2u32.to_le_bytes()); // BOOL32 true
        d.extend([2, 0, 0xde, 0xad]); // BINARY
        d.extend(&guid);
        d.extend(116_444_736_000_000_000u64.to_le_bytes()); // FILETIME 1970-01-01
        for w in [2020u16, 2, 1, 17, 12, 48, 57, 751] {
            d.extend(w.to_le_bytes()); // SYSTEMTIME
        }
        d.extend([1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0]); // S-1-5-18
        d.extend(0xdead_beefu32.to_le_bytes());
        d.extend(0x1122_3344_5566_7788u64.to_le_bytes());
        d.extend([6, 0, b'x', 0, b'y', 0, b'z', 0]); // COUNTEDSTRING
        d.extend([2, 0, b'h', b'i']); // COUNTEDANSISTRING
        d.extend([1, 0, 0xff]); // COUNTEDBINARY
        d.extend(0x2au32.to_le_bytes()); // UINT32, OutType Hex
        let p = one(
            &[
                ("U", &[1]),
                ("A", &[2]),
                ("I8", &[3]),
                ("U8", &[4]),
                ("I16", &[5]),
                ("U16", &[6]),
                ("I32", &[7]),
                ("U32", &[8]),
                ("I64", &[9]),
                ("U64", &[10]),
                ("F", &[11]),
                ("D", &[12]),
                ("B", &[13]),
                ("Bin", &[14]),
                ("G", &[15]),
                ("FT", &[17]),
                ("ST", &[0x80 | 18, 0x26]),
                ("Sid", &[19]),
                ("H32", &[20]),
                ("H64", &[21]),
                ("CS", &[22]),
                ("CA", &[23]),
                ("CB", &[25]),
                ("Hex", &[0x80 | 8, 0x04]),
            ],
            &d,
        );
        assert_eq!(p.problem, None);
        assert_eq!(
            (p.class, p.event.clone(), p.provider.clone()),
            ("TraceLogging", Some("Ev".into()), Some("Prov".into()))
        );
        assert_eq!(
            fields_json(&p),
            json!({
                "U": "héllo", "A": "abc", "I8": -2, "U8": 200, "I16": -300, "U16": 60000,
                "I32": -70000, "U32": 4_000_000_000u32, "I64": -5, "U64": u64::MAX,
                "F": 1.5, "D": -0.25, "B": true, "Bin": "dead",
                "G": "04030201-0605-0807-090a-0b0c0d0e0f10",
                "FT": "1970-01-01T00:00:00.0000000Z", "ST": "2020-02-17T12:48:57.751Z",
                "Sid": "S-1-5-18", "H32": "0xdeadbeef", "H64": "0x1122334455667788",
                "CS": "xyz", "CA": "hi", "CB": "ff", "Hex": "0x2a"
            })
        );
    }

    /// Arrays (variable count in the data, constant count in the metadata), character
    /// arrays as text, structures and arrays of structures, tag bytes skipped.
    #[test]
    fn arrays_structs_and_tags() {
        let mut d = Vec::new();
        d.extend([3, 0, 1, 0, 2, 0, 3, 0]); // V: UINT16[3]
        d.extend([0xff, 0x01]); // C: INT8[2] (constant count 2)
        d.extend([2, 0, b'o', 0, b'k', 0]); // W: UINT16[2] OutType String
        d.extend(b"ab"); // N: UINT8[2] OutType String (constant count)
        d.extend([2, 0, 1, 0, 0xaa, 0, 0]); // CB: COUNTEDBINARY[2]
        d.extend([7, b'q', 0]); // S {X: UINT8, Y: ANSISTRING}
        d.extend([2, 0, 5, 0, 6, 0]); // SA: struct[2] {Z: UINT16}
        d.extend(9u32.to_le_bytes()); // T: UINT32 with OutType chained to tags
        let p = one(
            &[
                ("V", &[0x40 | 6]),
                ("C", &[0x20 | 3, 2, 0]),
                ("W", &[0x80 | 0x40 | 6, 0x02]),
                ("N", &[0x80 | 0x20 | 4, 0x02, 2, 0]),
                ("CB", &[0x40 | 25]),
                ("S", &[0x80 | 24, 2]),
                ("X", &[4]),
                ("Y", &[2]),
                ("SA", &[0x80 | 0x40 | 24, 1]),
                ("Z", &[6]),
                ("T", &[0x80 | 8, 0x80, 0x81, 0x00]),
            ],
            &d,
        );
        assert_eq!(p.problem, None);
        assert_eq!(
            fields_json(&p),
            json!({
                "V": [1, 2, 3], "C": [-1, 1], "W": "ok", "N": "ab", "CB": ["aa", ""],
                "S": {"X": 7, "Y": "q"}, "SA": [{"Z": 5}, {"Z": 6}], "T": 9
            })
        );
        // Event tags chained by 0x80 before the name.
        let mut m = schema("Ev", &[("A", &[4])]);
        m.splice(2..3, [0x81, 0x82, 0x03]);
        let n = m.len() as u16;
        m[0..2].copy_from_slice(&n.to_le_bytes());
        let p = run(&record(&[(11, m)], &[5])).unwrap();
        assert_eq!(
            (p.event.clone(), p.problem.clone()),
            (Some("Ev".into()), None)
        );
        assert_eq!(p.provider, None);
        assert_eq!(fields_json(&p), json!({"A": 5}));
    }

    /// Hostile records: a short payload, unknown or undecodable InTypes, broken metadata,
    /// structures too deep, too many values, extended items past the record, and every
    /// truncation of a good record: a problem with the fields decoded so far, never a panic.
    #[test]
    fn hostile_records_are_reported() {
        let short = one(&[("A", &[4]), ("B", &[8])], &[1, 2, 3]);
        assert_eq!(short.fields.len(), 1);
        assert_eq!(
            short.problem.as_deref(),
            Some("B at payload +0x1: needs 4 bytes, the payload has 2")
        );
        let p = one(&[("A", &[4]), ("Q", &[26])], &[1, 2]);
        assert_eq!(
            p.problem.as_deref(),
            Some("Q at payload +0x1: unknown InType 26")
        );
        let p = one(&[("P", &[16])], &[0; 8]);
        assert!(p.problem.unwrap().contains("InType 16"));
        let p = one(&[("C", &[0x60 | 8, 1, 0, 0xee])], &[0; 4]);
        assert!(p.problem.unwrap().contains("custom schema"));
        let p = one(&[("B", &[0x40 | 14])], &[1, 0, 0, 0]);
        assert!(p.problem.unwrap().contains("array of BINARY"));
        let p = one(&[("A", &[4])], &[1, 2, 3]);
        assert_eq!(
            p.problem.as_deref(),
            Some("2 bytes after the last field (A)")
        );
        let p = one(&[("S", &[0x80 | 24, 0])], &[0]);
        assert!(p.problem.unwrap().contains("structure S has no member"));
        let p = one(&[("S", &[0x80 | 24, 3]), ("A", &[4])], &[0]);
        assert!(p.problem.unwrap().contains("announces 3 members"));
        let p = one(
            &[("S", &[0x80 | 24, 1]), ("I", &[0x80 | 24, 1]), ("A", &[4])],
            &[1, 0],
        );
        assert_eq!(
            p.problem.as_deref(),
            Some("1 bytes after the last field (A)")
        );
        assert_eq!(fields_json(&p), json!({"S": {"I": {"A": 1}}}));
        // Ten nested structures.
        let mut deep: Vec<(&str, &[u8])> = vec![("S", &[0x80 | 24, 1]); 10];
        deep.push(("A", &[4]));
        assert!(one(&deep, &[1])
            .problem
            .unwrap()
            .contains("nested deeper than 8"));
        // 65535 × 65535 structures of empty arrays: stopped by the value budget.
        let p = one(
            &[
                ("S", &[0x80 | 0x20 | 24, 1, 0xff, 0xff]),
                ("T", &[0x80 | 0x20 | 24, 1, 0xff, 0xff]),
                ("E", &[0x20 | 4, 0, 0]),
            ],
            &[],
        );
        assert!(p.problem.unwrap().contains("more than 65536 values"));
        // A field that does not fit inside a nested structure: located by its path.
        let p = one(&[("S", &[0x80 | 24, 1]), ("W", &[8])], &[1]);
        assert_eq!(
            p.problem.as_deref(),
            Some("S.W at payload +0x0: needs 4 bytes, the payload has 1")
        );
        // Metadata: a Size past its item, a name without NUL, a field cut after its name.
        let mut m = schema("Ev", &[("A", &[4])]);
        m[0] = 0xff;
        let p = run(&record(&[(11, m)], &[1])).unwrap();
        assert!(p
            .problem
            .unwrap()
            .starts_with("metadata: Size 255, its item holds"));
        let m = vec![6, 0, 0, b'E', b'v', b'x'];
        let p = run(&record(&[(11, m)], &[1])).unwrap();
        assert!(p
            .problem
            .unwrap()
            .contains("event name at metadata +0x3 has no terminating NUL"));
        let mut m = schema("Ev", &[("A", &[4])]);
        m.pop();
        m[0] -= 1;
        let p = run(&record(&[(11, m)], &[1])).unwrap();
        assert!(p
            .problem
            .unwrap()
            .starts_with("metadata: the metadata ends inside a field"));
        // No EXTENDED_INFO flag, or no schema item: not a TraceLogging event.
        let mut plain = record(&[(11, schema("Ev", &[("A", &[4])]))], &[1]);
        plain[4] = 0;
        assert_eq!(run(&plain), None);
        assert_eq!(run(&record(&[(12, traits("P"))], &[1])), None);
        // The schema item says another item follows, and the record ends.
        let mut open = record(&[(11, schema("Ev", &[("A", &[4])]))], &[]);
        open[HEADER + 4] = 1;
        let p = run(&open).unwrap();
        assert!(p.problem.unwrap().contains("runs past the record"));
        // Every truncation of a good record (Size adjusted): no panic, nothing past the record.
        let mut d = utf16z("text");
        d.extend([2, 0, 1, 0, 2, 0, 9, b'z', 0]);
        let good = record(
            &[
                (12, traits("Prov")),
                (
                    11,
                    schema(
                        "Ev",
                        &[
                            ("U", &[1]),
                            ("V", &[0x40 | 6]),
                            ("S", &[0x80 | 24, 2]),
                            ("X", &[4]),
                            ("Y", &[2]),
                        ],
                    ),
                ),
            ],
            &d,
        );
        assert_eq!(run(&good).unwrap().problem, None);
        for n in HEADER..good.len() {
            let mut cut = good[..n].to_vec();
            cut[0..2].copy_from_slice(&(n as u16).to_le_bytes());
            if let Some(p) = run(&cut) {
                assert!(p.problem.is_some(), "cut at {n}: {p:?}");
            }
        }
    }

    /// A MOF payload's JSON has no `event` or `provider`; a TraceLogging one has both, and
    /// its values show on one line, escaped, arrays cut.
    #[test]
    fn json_and_display() {
        let mof = Payload {
            class: "Image_Load",
            fields: vec![("ProcessId".into(), Value::Number(4))],
            ..Payload::default()
        };
        assert_eq!(
            serde_json::to_string(&mof).unwrap(),
            r#"{"class":"Image_Load","fields":{"ProcessId":4},"problem":null}"#
        );
        let v = Value::Array((1..=6).map(Value::Number).collect());
        assert_eq!(v.to_string(), "[1, 2, 3, 4, … 6 items]");
        let t = Value::Struct(Fields(vec![("a\u{1b}".into(), Value::Text("x\ny".into()))]));
        assert_eq!(t.to_string(), "{a\\u{1b}: x\\u{a}y}");
    }
}
