//! Manifest-based events (issue 29 item 1): an EVENT_HEADER record of a provider whose
//! (provider GUID, event id, version) the schema table of `manifest_schemas` knows,
//! decoded field by field from that table into the [`Payload`] model the MOF and TraceLogging
//! decoders use. `class` is `manifest` for every event (the row already names the
//! provider, the event id and the version); `event` and `provider` stay empty, so the JSON is
//! `{"class": "manifest", "fields": {...}, "problem": ...}`.
//!
//! The table is generated from airbus-cert/etl-parser 1.0.1 (Apache-2.0) by
//! `tools/manifest_schemas/generate.py`. Two of etl-parser's types stand for two wire formats
//! each, and the table says so: `Int8ul` is `u8|bool` (a 1-byte win:UInt8 or a 4-byte
//! win:Boolean) and `Bytes(this.Field)`, but for the Event Log's `__binLength`, is
//! `bytes|wchars(Field)` (that many bytes, or that many UTF-16 characters). An event with such
//! fields (4,959 of 35,971, every Threat-Intelligence event and AMSI's among them) is decoded
//! only by the one reading that consumes its payload exactly: every reading (each ambiguous
//! field one way or the other; at most `MAX_AMBIGUOUS` fields, 4,096 readings) is measured
//! against the payload, and if exactly one fits, and its values are of its types (a Boolean 0
//! or 1; characters that are text: no NUL but a last one, no lone surrogate), the payload is
//! decoded with it and its `how` ([`Payload::how`]) says which reading it is and that it is
//! the only one of the N that fits the payload's M bytes; none, several, or more fields than the bound:
//! given raw ([`super::raw`]) with why (the fields and the count of fitting readings).
//! Measured against dissect.etl's manifests, the reading so found is the manifest's type for
//! all 227 ambiguous fields of the real triage dumps' payloads decoded this way
//! (tools/manifest_schemas/README.md). Each provider's block of the table is compressed on its own
//! (.lzma) and decompressed and parsed once, on the first lookup of that provider, so a dump
//! pays for the few providers it has events of (about a millisecond each at most), not for all
//! 794.
//!
//! What is decoded, and what is not:
//! - Only EVENT_HEADER records (header types 0x12 / 0x13) whose Flags say neither
//!   STRING_ONLY (0x0004), TRACE_MESSAGE (0x0008) nor CLASSIC_HEADER (0x0100), and which carry
//!   no EVENT_SCHEMA_TL item (a TraceLogging event describes itself: [`super::tracelogging`]).
//! - The table is looked up by the exact (GUID, id, version): a known id of another version is
//!   not decoded with that version's fields (payload null), as the MOF decoder does.
//! - etl-parser writes win:Pointer as `Int64ul`, which is 4 bytes in a 32-bit event: an event
//!   whose fields include a `u64` is not decoded from a 32-bit record (header type 0x12 or
//!   Flags EVENT_HEADER_FLAG_32_BIT_HEADER 0x0020).
//! - The user data starts after the extended data items (the layout [`super::tracelogging`]
//!   reads) or right after the 0x50-byte header.
//!
//! Values: `u8`..`u64` as numbers, a win:Boolean as `true`/`false`, characters as text (up to
//! a last NUL), `i8`..`i64` as signed numbers (etl-parser keeps no hex or
//! pointer out-type: a pointer is a number), `f32`/`f64` as numbers, `wstr` (NUL-terminated
//! UTF-16LE) and `cstr` (NUL-terminated 8-bit, as UTF-8 with invalid bytes replaced) as
//! untrusted text without the NUL, `guid` as `xxxxxxxx-…` text, `systime` as
//! `YYYY-MM-DDTHH:MM:SS.mmm` (no zone: the manifest does not say), `sid` as `S-1-…`, `bytes`
//! as lower-case hex digits.
//!
//! Hostile input: every length is checked against the record before anything is read or
//! allocated; trying the readings takes readings × fields steps, each in constant time (the
//! table bounds both; the strings' terminators are found once per payload, two `u32` per
//! byte); a field that does not fit (payload too short, a string without its terminator, a
//! length past the end, a SID that is not one) stops the decoding there with a `problem`
//! naming the field and its offset, keeping the fields before it; bytes after the last field
//! are reported (`N bytes after the last field (Name); the schema does not cover them: …`):
//! etl-parser's schemas leave out some fields (fixed-size binary such as MAC addresses, arrays
//! of more than one element), and one left out before the end shifts the fields after it, so
//! such a payload's values are to be read with that in mind. Nothing reads past the record.

use std::io::Read;
use std::sync::OnceLock;

use super::manifest_schemas as schemas;
use super::payload::hex_digits;
use super::payload::{ansi_z, sid, utf16_z, Float, Payload, Value};
use super::tracelogging::{extended, system_time};
use crate::bytes::{guid_text, LeBytes};
use crate::etl::records::{Record, RecordKind};
use crate::text::Untrusted;

/// The `class` of every payload this module decodes.
pub const CLASS: &str = "manifest";
/// EVENT_HEADER size.
const HEADER: usize = 0x50;
const FLAG_EXTENDED_INFO: u16 = 0x0001;
const FLAG_STRING_ONLY: u16 = 0x0004;
const FLAG_TRACE_MESSAGE: u16 = 0x0008;
const FLAG_32_BIT_HEADER: u16 = 0x0020;
const FLAG_CLASSIC_HEADER: u16 = 0x0100;

/// What a payload with bytes after the last field is told: etl-parser's schemas leave out some
/// fields (fixed-size binary such as MAC addresses, arrays), and a field left out before the
/// end shifts every field after it (tools/manifest_schemas/README.md, "Fidelity").
const UNCOVERED: &str =
    "the schema does not cover them: a field it lacks shifts the fields after it";

/// A field's wire type (the table's type names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    I8,
    /// 1 byte (an etl-parser `Int8ul` that a later field's length names: a win:UInt8).
    U8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
    /// NUL-terminated UTF-16LE.
    WStr,
    /// NUL-terminated 8-bit.
    CStr,
    Guid,
    SystemTime,
    Sid,
    /// A fixed number of bytes.
    Bytes(u16),
    /// As many bytes as the earlier integer field at this index says (`twice`: two bytes per
    /// unit).
    BytesOf {
        field: u16,
        twice: bool,
    },
    /// etl-parser's `Int8ul` (`u8|bool`): a 1-byte win:UInt8 or a 4-byte win:Boolean, which
    /// of the two the payload's size decides ([`readings`]).
    U8OrBool,
    /// etl-parser's `Bytes(this.F)` (`bytes|wchars(F)`): as many bytes as the earlier integer
    /// field F says, or as many UTF-16 characters (twice as many bytes); the payload's size
    /// decides.
    BytesOrWChars {
        field: u16,
    },
    /// A reading of [`Ty::U8OrBool`] (never in the table): a 4-byte win:Boolean.
    Bool,
    /// A reading of [`Ty::BytesOrWChars`] (never in the table): as many UTF-16 characters as
    /// the earlier integer field says, as text.
    WChars {
        field: u16,
    },
}

impl Ty {
    fn parse(t: &str, earlier: &[Field], text: &str) -> Option<Ty> {
        Some(match t {
            "i8" => Ty::I8,
            "u8" => Ty::U8,
            "u8|bool" => Ty::U8OrBool,
            "u16" => Ty::U16,
            "i16" => Ty::I16,
            "u32" => Ty::U32,
            "i32" => Ty::I32,
            "u64" => Ty::U64,
            "i64" => Ty::I64,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "wstr" => Ty::WStr,
            "cstr" => Ty::CStr,
            "guid" => Ty::Guid,
            "systime" => Ty::SystemTime,
            "sid" => Ty::Sid,
            _ => {
                let length = |name: &str| {
                    let i = earlier
                        .iter()
                        .position(|f| f.name(text) == name && f.ty.is_integer())?;
                    u16::try_from(i).ok()
                };
                if let Some(arg) = t
                    .strip_prefix("bytes|wchars(")
                    .and_then(|a| a.strip_suffix(')'))
                {
                    return Some(Ty::BytesOrWChars {
                        field: length(arg)?,
                    });
                }
                let arg = t.strip_prefix("bytes(")?.strip_suffix(')')?;
                if let Ok(n) = arg.parse::<u16>() {
                    return Some(Ty::Bytes(n));
                }
                let (name, twice) = match arg.strip_prefix("2*") {
                    Some(n) => (n, true),
                    None => (arg, false),
                };
                Ty::BytesOf {
                    field: length(name)?,
                    twice,
                }
            }
        })
    }

    /// An integer a later field's length may name (not an ambiguous `u8|bool`: a Boolean is
    /// no length, and the generator writes an `Int8ul` named as a length as `u8`).
    fn is_integer(self) -> bool {
        matches!(
            self,
            Ty::I8 | Ty::U8 | Ty::U16 | Ty::I16 | Ty::U32 | Ty::I32 | Ty::U64 | Ty::I64
        )
    }

    fn is_ambiguous(self) -> bool {
        matches!(self, Ty::U8OrBool | Ty::BytesOrWChars { .. })
    }

    /// This type in a reading: an ambiguous type read the narrow way (`other` false: win:UInt8,
    /// bytes, etl-parser's own reading) or the other (win:Boolean, UTF-16 characters); any
    /// other type as it is.
    fn read_as(self, other: bool) -> Ty {
        match (self, other) {
            (Ty::U8OrBool, false) => Ty::U8,
            (Ty::U8OrBool, true) => Ty::Bool,
            (Ty::BytesOrWChars { field }, false) => Ty::BytesOf {
                field,
                twice: false,
            },
            (Ty::BytesOrWChars { field }, true) => Ty::WChars { field },
            (t, _) => t,
        }
    }
}

/// One field of a list: its name (a range of the table text) and type.
#[derive(Clone, Copy, Debug)]
struct Field {
    start: u32,
    end: u32,
    ty: Ty,
}

impl Field {
    fn name<'t>(&self, text: &'t str) -> &'t str {
        text.get(self.start as usize..self.end as usize)
            .unwrap_or_default()
    }
}

/// One provider's schemas, parsed from its block of the table.
#[derive(Debug, Default)]
pub(crate) struct Schemas {
    text: String,
    fields: Vec<Field>,
    /// Each field list as a range of `fields`.
    lists: Vec<(u32, u32)>,
    /// (event id, version, field list), strictly increasing.
    events: Vec<(u16, u8, u32)>,
}

impl Schemas {
    /// A provider's block (format: tools/manifest_schemas/generate.py) parsed.
    fn parse(text: String) -> Result<Schemas, String> {
        let mut t = Schemas::default();
        let mut at = 0usize;
        for (n, line) in text.split_inclusive('\n').enumerate() {
            let start = at;
            at += line.len();
            let line = line.strip_suffix('\n').unwrap_or(line);
            let bad = |why: &str| format!("schema line {}: {why}: {line}", n + 1);
            let to32 = |v: usize| u32::try_from(v).map_err(|_| bad("too long"));
            let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
            match tag {
                "F" => {
                    let first = t.fields.len();
                    let mut off = start + 2;
                    for item in rest.split(' ').filter(|s| !s.is_empty()) {
                        let (name, ty) = item.split_once(':').ok_or_else(|| bad("no type"))?;
                        let ty = Ty::parse(ty, &t.fields[first..], &text)
                            .ok_or_else(|| bad("unknown type"))?;
                        t.fields.push(Field {
                            start: to32(off)?,
                            end: to32(off + name.len())?,
                            ty,
                        });
                        off += item.len() + 1;
                    }
                    t.lists.push((to32(first)?, to32(t.fields.len())?));
                }
                "E" => {
                    let mut it = rest.split(' ');
                    let mut num = || it.next().and_then(|v| v.parse::<u32>().ok());
                    let (Some(id), Some(version), Some(list)) = (num(), num(), num()) else {
                        return Err(bad("not three numbers"));
                    };
                    let id = u16::try_from(id).map_err(|_| bad("event id"))?;
                    let version = u8::try_from(version).map_err(|_| bad("version"))?;
                    if list as usize >= t.lists.len() {
                        return Err(bad("a field list not defined before"));
                    }
                    if t.events
                        .last()
                        .is_some_and(|&(i, v, _)| (i, v) >= (id, version))
                    {
                        return Err(bad("events out of order"));
                    }
                    t.events.push((id, version, list));
                }
                _ => return Err(bad("unknown line")),
            }
        }
        t.text = text;
        Ok(t)
    }

    /// The fields of event `id` version `version`, if the provider has exactly that.
    fn event(&self, id: u16, version: u8) -> Option<&[Field]> {
        let i = self
            .events
            .binary_search_by(|&(i, v, _)| (i, v).cmp(&(id, version)))
            .ok()?;
        let &(a, b) = self.lists.get(self.events[i].2 as usize)?;
        self.fields.get(a as usize..b as usize)
    }
}

/// The memory the .lzma decoder may use (the blocks' dictionary is 64 KiB).
const DECODER_MEMLIMIT: u64 = 16 * schemas::DICT_SIZE;

/// The text of provider block `i` of the table.
fn block_text(i: usize) -> Result<String, String> {
    let &(_, start, end, len) = schemas::PROVIDERS.get(i).ok_or("no such block")?;
    let z = schemas::BLOB
        .get(start as usize..end as usize)
        .ok_or("the block is past the table")?;
    let stream = xz2::stream::Stream::new_lzma_decoder(DECODER_MEMLIMIT)
        .map_err(|e| format!("no .lzma decoder: {e}"))?;
    let mut raw = Vec::with_capacity(len as usize);
    xz2::read::XzDecoder::new_stream(z, stream)
        .take(u64::from(len) + 1)
        .read_to_end(&mut raw)
        .map_err(|e| format!("the block does not decompress: {e}"))?;
    if raw.len() != len as usize {
        return Err(format!("the block has {} bytes, {len} expected", raw.len()));
    }
    // The table is etwdump's own data (generated, compiled in), not input.
    std::str::from_utf8(&raw)
        .map(str::to_owned)
        .map_err(|e| format!("the block is not UTF-8: {e}"))
}

/// The schemas of the provider with this GUID (bytes in memory order), decompressed and parsed
/// on first use; None when the table has no such provider (or its block could not be read:
/// the unit tests read every block).
fn provider(guid: &[u8; 16]) -> Option<&'static Schemas> {
    static CACHE: OnceLock<Vec<OnceLock<Option<Schemas>>>> = OnceLock::new();
    let i = schemas::PROVIDERS
        .binary_search_by(|p| p.0.cmp(guid))
        .ok()?;
    let cache = CACHE.get_or_init(|| {
        (0..schemas::PROVIDERS.len())
            .map(|_| OnceLock::new())
            .collect()
    });
    cache
        .get(i)?
        .get_or_init(|| block_text(i).and_then(Schemas::parse).ok())
        .as_ref()
}

/// Decode `r` when it is an EVENT_HEADER record whose (provider, id, version) the table knows
/// (see the module documentation for what is left undecoded); None otherwise.
pub fn decode(buf: &[u8], r: &Record) -> Option<Payload> {
    decode_with(provider, buf, r)
}

fn decode_with<'s>(
    lookup: impl Fn(&[u8; 16]) -> Option<&'s Schemas>,
    buf: &[u8],
    r: &Record,
) -> Option<Payload> {
    let wide = match r.kind {
        RecordKind::EventHeader64 => true,
        RecordKind::EventHeader32 => false,
        _ => return None,
    };
    let rec = buf.get(r.offset..r.offset.checked_add(r.size)?)?;
    let flags = rec.u16_at(4)?;
    if flags & (FLAG_STRING_ONLY | FLAG_TRACE_MESSAGE | FLAG_CLASSIC_HEADER) != 0 {
        return None;
    }
    let guid: &[u8; 16] = rec.bytes_at(0x18, 16)?.try_into().ok()?;
    let s = lookup(guid)?;
    let fields = s.event(rec.u16_at(0x28)?, rec.u8_at(0x2A)?)?;
    let wide = wide && flags & FLAG_32_BIT_HEADER == 0;
    if !wide && fields.iter().any(|f| f.ty == Ty::U64) {
        return None;
    }
    let at = if flags & FLAG_EXTENDED_INFO != 0 {
        let ext = extended(rec);
        if ext.schema.is_some() {
            return None;
        }
        ext.payload_at
    } else {
        Ok(HEADER)
    };
    let user = at.and_then(|at| {
        rec.get(at..)
            .ok_or_else(|| "the user data starts past the record".to_string())
    });
    Some(match user {
        Ok(p) => decode_payload(&s.text, fields, p),
        Err(why) => Payload {
            class: CLASS,
            problem: Some(why),
            ..Payload::default()
        },
    })
}

/// The most fields with an ambiguous type whose readings are tried: 2^12 = 4,096 readings. Of
/// the table's 4,959 events with such fields, 26 have more (CodeIntegrity 16, PersistentMemory-
/// Nvdimm 4, Office-Word2 3, USB-MAUSBHOST 2, Partition 1); Threat-Intelligence's have at most
/// 10, AMSI's 3.
pub(crate) const MAX_AMBIGUOUS: usize = 12;

/// A payload decoded from `fields`, exactly, or given raw with why. A payload its schema does
/// not fit exactly is not decoded: etl-parser's schemas can lack a field (six-byte MAC
/// addresses), and a missing field shifts every field after it, so no value of such a decoding
/// can be trusted. With ambiguous types ([`Ty::U8OrBool`], [`Ty::BytesOrWChars`]), every
/// reading is tried and the payload is decoded only by the one that consumes it exactly,
/// saying so in its `how`; none or several: given raw with why.
fn decode_payload(text: &str, fields: &[Field], p: &[u8]) -> Payload {
    const UNFIT: &str = "the provider's schema (etl-parser's) does not fit the payload";
    let ambiguous: Vec<&Field> = fields.iter().filter(|f| f.ty.is_ambiguous()).collect();
    if ambiguous.is_empty() {
        return match decode_fields(text, fields, p, 0) {
            Payload {
                problem: Some(why), ..
            } => super::raw::of(p, &format!("{UNFIT}: {why}")),
            decoded => decoded,
        };
    }
    let k = ambiguous.len();
    let named = || {
        ambiguous
            .iter()
            .map(|f| format!("{} ({})", f.name(text), etl_parser_type(f.ty, fields, text)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if k > MAX_AMBIGUOUS {
        return super::raw::of(
            p,
            &format!(
                "the provider's schema (etl-parser's) leaves the wire types of {k} fields open \
                 ({}), more than {MAX_AMBIGUOUS}: its readings are not tried",
                named()
            ),
        );
    }
    let total = 1u32 << k;
    let fit = readings(fields, p);
    match fit {
        Fit::One { reading: r, empty } => match decode_fields(text, fields, p, r) {
            Payload {
                problem: Some(why), ..
            } => super::raw::of(
                p,
                &format!(
                    "the provider's schema (etl-parser's) fits the payload's {} bytes in one of \
                     the {total} readings of its ambiguous fields ({}), whose values are not of \
                     its types: {why}",
                    p.len(),
                    named()
                ),
            ),
            mut decoded => {
                decoded.how = Some(how(text, fields, p.len(), r, empty, total));
                decoded
            }
        },
        Fit::None => {
            let why = decode_fields(text, fields, p, 0)
                .problem
                .unwrap_or_default();
            super::raw::of(
                p,
                &format!(
                    "{UNFIT} in any of the {total} readings of its ambiguous fields ({}); \
                     etl-parser's own reading (1-byte Int8ul, byte counts): {why}",
                    named()
                ),
            )
        }
        Fit::Several(n) => super::raw::of(
            p,
            &format!(
                "the provider's schema (etl-parser's) fits the payload's {} bytes in {n} of the \
                 {total} readings of its ambiguous fields ({}): which one is right is not known",
                p.len(),
                named()
            ),
        ),
    }
}

/// etl-parser's type of an ambiguous field, as its module writes it.
fn etl_parser_type(ty: Ty, fields: &[Field], text: &str) -> String {
    match ty {
        Ty::BytesOrWChars { field } => format!(
            "Bytes(this.{})",
            fields.get(usize::from(field)).map_or("?", |f| f.name(text))
        ),
        _ => "Int8ul".into(),
    }
}

/// The `how` of a `size`-byte payload decoded by reading `r`, the only
/// one of `total` that fits (`empty`: its empty `bytes|wchars` fields).
fn how(text: &str, fields: &[Field], size: usize, r: u32, empty: u32, total: u32) -> String {
    let mut groups: [Vec<&str>; 5] = Default::default();
    for (i, f) in fields.iter().filter(|f| f.ty.is_ambiguous()).enumerate() {
        let bit = |m: u32| m.checked_shr(i as u32).unwrap_or(0) & 1 == 1;
        let g = match f.ty {
            Ty::U8OrBool if bit(r) => 0,
            Ty::U8OrBool => 1,
            _ if bit(empty) => 4,
            _ if bit(r) => 2,
            _ => 3,
        };
        groups[g].push(f.name(text));
    }
    const AS: [&str; 5] = [
        "Int8ul read as win:Boolean (4 bytes)",
        "Int8ul read as win:UInt8 (1 byte)",
        "Bytes(this.F) read as UTF-16 characters (2 bytes each)",
        "Bytes(this.F) read as bytes",
        "Bytes(this.F) empty (F is 0: bytes or characters alike)",
    ];
    let said: Vec<String> = groups
        .iter()
        .zip(AS)
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, what)| format!("{what}: {}", g.join(", ")))
        .collect();
    format!(
        "{}; the only one of the {total} readings of etl-parser's ambiguous types that \
         consumes the payload's {size} bytes exactly",
        said.join("; ")
    )
}

/// Which readings of a field list's ambiguous types fit a payload exactly.
#[derive(Debug, PartialEq, Eq)]
enum Fit {
    None,
    /// The one that fits (bit i set: the i-th ambiguous field read the other way), and its
    /// empty `bytes|wchars` fields (their bits are 0 in `reading`).
    One {
        reading: u32,
        empty: u32,
    },
    /// How many fit.
    Several(u32),
}

/// Every reading of `fields`' ambiguous types (at most 2^[`MAX_AMBIGUOUS`]) tried against `p`:
/// those in which every field fits and no byte is left. Readings that differ only in a
/// `bytes|wchars` field whose length is 0 are one (the field is empty either way). Time:
/// readings × fields, each field in constant time (strings' terminators are found once for
/// the whole payload).
fn readings(fields: &[Field], p: &[u8]) -> Fit {
    let k = fields.iter().filter(|f| f.ty.is_ambiguous()).count();
    if k > MAX_AMBIGUOUS {
        return Fit::None;
    }
    let strings = fields.iter().any(|f| matches!(f.ty, Ty::WStr | Ty::CStr));
    let z = strings.then(|| Terminators::new(p));
    let mut ints = Vec::with_capacity(fields.len());
    let (mut fits, mut first) = (0u32, (0u32, 0u32));
    for r in 0..1u32 << k {
        if let Some((size, empty)) = measure(fields, p, r, z.as_ref(), &mut ints) {
            // One reading per layout: an empty field's bit at 0.
            if size == p.len() && r & empty == 0 {
                if fits == 0 {
                    first = (r, empty);
                }
                fits += 1;
            }
        }
    }
    match fits {
        0 => Fit::None,
        1 => Fit::One {
            reading: first.0,
            empty: first.1,
        },
        n => Fit::Several(n),
    }
}

/// Where the NUL-terminated strings that start at each offset of a payload end: `z8[i]` the
/// first NUL byte at or after `i`, `z16[i]` the first NUL 16-bit unit at `i`, `i + 2`, …
/// ([`NONE`]: none before the end). Built in one pass; two `u32` per payload byte.
struct Terminators {
    z8: Vec<u32>,
    z16: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl Terminators {
    fn new(p: &[u8]) -> Terminators {
        let n = p.len();
        let (mut z8, mut z16) = (vec![NONE; n + 2], vec![NONE; n + 2]);
        // Offsets past u32 (not in a record: its size is 16-bit) find no terminator.
        for i in (0..n.min(NONE as usize - 1)).rev() {
            z8[i] = if p[i] == 0 { i as u32 } else { z8[i + 1] };
            z16[i] = if p[i] == 0 && p.get(i + 1) == Some(&0) {
                i as u32
            } else {
                z16[i + 2]
            };
        }
        Terminators { z8, z16 }
    }
}

/// The payload's bytes `fields` read as reading `r` takes (None: a field does not fit), and
/// the reading bits of its `bytes|wchars` fields whose length is 0. The sizes [`read`] reads,
/// without the values; `ints` (cleared) gets the integer fields' values as lengths. Without
/// `z`, a string does not fit.
fn measure(
    fields: &[Field],
    p: &[u8],
    r: u32,
    z: Option<&Terminators>,
    ints: &mut Vec<Option<u64>>,
) -> Option<(usize, u32)> {
    ints.clear();
    let (mut at, mut bit, mut empty) = (0usize, 0u32, 0u32);
    for f in fields {
        let mut other = false;
        if f.ty.is_ambiguous() {
            other = r.checked_shr(bit).unwrap_or(0) & 1 == 1;
            bit += 1;
        }
        let rest = p.len().checked_sub(at)?;
        let fixed = |n: usize| (n <= rest).then_some(n);
        let le = |n: usize| {
            p.bytes_at(at, n)
                .map(|b| b.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
        };
        let sized = |field: u16, unit: u64| {
            let units = ints.get(usize::from(field)).copied().flatten()?;
            let n = usize::try_from(units.checked_mul(unit)?).ok()?;
            (n <= rest).then_some(n)
        };
        let signed = |n: usize| {
            let bits = 8 * n as u32;
            let v = ((le(n)? << (64 - bits)) as i64) >> (64 - bits);
            Some((n, u64::try_from(v).ok()))
        };
        let (n, int) = match f.ty.read_as(other) {
            Ty::I8 => signed(1)?,
            Ty::I16 => signed(2)?,
            Ty::I32 => signed(4)?,
            Ty::I64 => signed(8)?,
            Ty::U8 => (1, Some(le(1)?)),
            Ty::U16 => (2, Some(le(2)?)),
            Ty::U32 => (4, Some(le(4)?)),
            Ty::U64 => (8, Some(le(8)?)),
            Ty::Bool | Ty::F32 => (fixed(4)?, None),
            Ty::F64 => (fixed(8)?, None),
            Ty::Guid | Ty::SystemTime => (fixed(16)?, None),
            Ty::Bytes(n) => (fixed(usize::from(n))?, None),
            Ty::WStr => {
                let end = *z?.z16.get(at)?;
                (usize::try_from(end).ok()?.checked_sub(at)? + 2, None)
            }
            Ty::CStr => {
                let end = *z?.z8.get(at)?;
                (usize::try_from(end).ok()?.checked_sub(at)? + 1, None)
            }
            Ty::Sid => {
                let (rev, count) = (p.u8_at(at)?, p.u8_at(at + 1)?);
                if rev != 1 || count > 15 {
                    return None;
                }
                (fixed(8 + 4 * usize::from(count))?, None)
            }
            Ty::BytesOf { field, twice } => (sized(field, if twice { 2 } else { 1 })?, None),
            Ty::WChars { field } => (sized(field, 2)?, None),
            Ty::U8OrBool | Ty::BytesOrWChars { .. } => return None,
        };
        if let Ty::BytesOrWChars { field } = f.ty {
            if ints.get(usize::from(field)) == Some(&Some(0)) {
                empty |= 1u32.checked_shl(bit - 1).unwrap_or(0);
            }
        }
        ints.push(int);
        at += n;
    }
    Some((at, empty))
}

/// `fields` read from `p` in order, the ambiguous ones as reading `r` says (bit i set: the
/// i-th ambiguous field read the other way: win:Boolean, UTF-16 characters).
fn decode_fields(text: &str, fields: &[Field], p: &[u8], r: u32) -> Payload {
    let mut out = Payload {
        class: CLASS,
        ..Payload::default()
    };
    // The integer fields' values, for the lengths of later fields (None: not an integer, or
    // negative).
    let mut ints: Vec<Option<u64>> = Vec::with_capacity(fields.len());
    let mut at = 0usize;
    let mut bit = 0u32;
    for f in fields {
        let name = f.name(text);
        let mut other = false;
        if f.ty.is_ambiguous() {
            other = r.checked_shr(bit).unwrap_or(0) & 1 == 1;
            bit += 1;
        }
        match read(f.ty.read_as(other), p, at, &ints, fields, text) {
            Ok((v, n, int)) => {
                out.fields.push((Untrusted::from(name), v));
                ints.push(int);
                at += n;
            }
            Err(why) => {
                out.problem = Some(format!("{name} at payload +{at:#x}: {why}"));
                return out;
            }
        }
    }
    if at < p.len() {
        let last = fields
            .last()
            .map_or_else(String::new, |f| format!(" ({})", f.name(text)));
        out.problem = Some(format!(
            "{} bytes after the last field{last}; {UNCOVERED}",
            p.len() - at
        ));
    }
    out
}

/// One value of type `ty` at `p[at..]`: the value, its size on the wire and, for an integer
/// that is not negative, its value as a length.
fn read(
    ty: Ty,
    p: &[u8],
    at: usize,
    ints: &[Option<u64>],
    fields: &[Field],
    text: &str,
) -> Result<(Value, usize, Option<u64>), String> {
    let take = |n: usize| {
        p.bytes_at(at, n).ok_or_else(|| {
            format!(
                "needs {n} bytes, the payload has {}",
                p.len().saturating_sub(at)
            )
        })
    };
    let uint = |n: usize| -> Result<u64, String> {
        Ok(take(n)?
            .iter()
            .rev()
            .fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    };
    let unsigned = |n: usize| uint(n).map(|v| (Value::Number(v), n, Some(v)));
    let signed = |n: usize| {
        let bits = 8 * n as u32;
        let v = ((uint(n)? << (64 - bits)) as i64) >> (64 - bits);
        Ok((Value::Signed(v), n, u64::try_from(v).ok()))
    };
    let text_value = |v: Value, n: usize| Ok((v, n, None));
    // The byte length of a field sized by the earlier integer field `field`, `unit` bytes per
    // unit it counts.
    let sized = |field: u16, unit: u64| {
        let i = usize::from(field);
        let len_name = fields.get(i).map_or("", |f| f.name(text));
        let units = ints
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| format!("its length field {len_name} is negative"))?;
        units
            .checked_mul(unit)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= p.len().saturating_sub(at))
            .ok_or_else(|| {
                format!(
                    "its length field {len_name} says {units}{}, the payload has {} bytes",
                    if unit == 2 { " UTF-16 units" } else { " bytes" },
                    p.len().saturating_sub(at)
                )
            })
    };
    match ty {
        Ty::I8 => signed(1),
        Ty::U8 => unsigned(1),
        // The readings the payload's size alone picked (`Ty::U8OrBool`, `Ty::BytesOrWChars`) must
        // also hold values of their type, or the payload is not decoded.
        Ty::Bool => match uint(4)? {
            v @ (0 | 1) => text_value(Value::Bool(v == 1), 4),
            v => Err(format!(
                "as a win:Boolean its 4 bytes say {v:#x}, and a Boolean is 0 or 1"
            )),
        },
        Ty::U16 => unsigned(2),
        Ty::I16 => signed(2),
        Ty::U32 => unsigned(4),
        Ty::I32 => signed(4),
        Ty::U64 => unsigned(8),
        Ty::I64 => signed(8),
        Ty::F32 => {
            let v = f64::from(f32::from_bits(uint(4)? as u32));
            text_value(
                Value::Float(Float {
                    value: v,
                    single: true,
                }),
                4,
            )
        }
        Ty::F64 => {
            let v = f64::from_bits(uint(8)?);
            text_value(
                Value::Float(Float {
                    value: v,
                    single: false,
                }),
                8,
            )
        }
        Ty::WStr => {
            let (s, n) = utf16_z(p, at)?;
            text_value(Value::Text(s), n)
        }
        Ty::CStr => {
            let (s, n) = ansi_z(p, at)?;
            text_value(Value::Text(s), n)
        }
        Ty::Guid => {
            let b: &[u8; 16] = take(16)?.try_into().map_err(|_| "GUID")?;
            text_value(Value::Formatted(guid_text(b)), 16)
        }
        Ty::SystemTime => text_value(Value::Formatted(system_time(take(16)?, false)), 16),
        Ty::Sid => {
            let (s, n) = sid(p, at)?;
            text_value(Value::Formatted(s), n)
        }
        Ty::Bytes(n) => {
            let n = usize::from(n);
            text_value(Value::Formatted(hex_digits(take(n)?)), n)
        }
        Ty::BytesOf { field, twice } => {
            let n = sized(field, if twice { 2 } else { 1 })?;
            text_value(Value::Formatted(hex_digits(take(n)?)), n)
        }
        Ty::WChars { field } => {
            let n = sized(field, 2)?;
            let b = take(n)?;
            let units: Vec<u16> = b
                .chunks_exact(2)
                .map(|u| u16::from_le_bytes([u[0], u[1]]))
                .collect();
            let text = match units.split_last() {
                Some((0, s)) => s,
                _ => &units[..],
            };
            if let Some(i) = text.iter().position(|&u| u == 0) {
                return Err(format!(
                    "as UTF-16 text its character {i} of {} is NUL (a counted string may end \
                     with one NUL, not hold one)",
                    units.len()
                ));
            }
            let s = Untrusted::from_utf16_exact(text)
                .ok_or_else(|| "as UTF-16 text it holds a lone surrogate (not text)".to_string())?;
            text_value(Value::Text(s), n)
        }
        Ty::U8OrBool | Ty::BytesOrWChars { .. } => Err("its type is ambiguous (no reading)".into()),
    }
}

#[cfg(test)]
mod tests {
    //! Records built by hand from the EVENT_HEADER layout (etw-internals.md §5, etl-parser's
    //! `EventRecord`) and field lists read from etl-parser 1.0.1's modules, not from this
    //! decoder's output.
    use super::*;
    use crate::decode::tracelogging::tests::{fields_json, utf16z};
    use crate::etl::records::{align8, walk_from};
    use serde_json::json;

    /// {22FB2CD6-0E7B-422B-A0C7-2FAD1FD0E716} Microsoft-Windows-Kernel-Process, bytes in memory.
    const KERNEL_PROCESS: [u8; 16] = [
        0xd6, 0x2c, 0xfb, 0x22, 0x7b, 0x0e, 0x2b, 0x42, 0xa0, 0xc7, 0x2f, 0xad, 0x1f, 0xd0, 0xe7,
        0x16,
    ];
    /// A GUID `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` as its bytes in memory order, parsed here
    /// (checked against [`KERNEL_PROCESS`], written out by hand).
    fn guid(text: &str) -> [u8; 16] {
        let hex: Vec<u8> = text
            .split('-')
            .flat_map(|part| {
                (0..part.len() / 2)
                    .map(move |i| u8::from_str_radix(&part[2 * i..2 * i + 2], 16).unwrap())
            })
            .collect();
        let mut b: [u8; 16] = hex.try_into().unwrap();
        b[0..4].reverse();
        b[4..6].reverse();
        b[6..8].reverse();
        b
    }
    /// Service Control Manager.
    const SCM: &str = "555908d1-a6d7-4695-8e1e-26931d2012f4";
    /// Microsoft-Windows-Threat-Intelligence.
    const THREAT_INTELLIGENCE: &str = "f4e1897c-bb5d-5668-f1d8-040f4d8dd344";
    /// Microsoft-Antimalware-Scan-Interface.
    const AMSI: &str = "2a576b87-09a7-520e-c21a-4942f0271d67";
    /// Microsoft-Windows-VolumeSnapshot-Driver.
    const VOLUME_SNAPSHOT: &str = "67fe2216-727a-40cb-94b2-c02211edb34a";
    /// Microsoft-Windows-Kernel-PnP.
    const KERNEL_PNP: &str = "9c205a39-1250-487d-abd7-e831c6290539";

    /// An EVENT_HEADER record (header type `kind`, 0x12 or 0x13) of `guid`, `id`, `version`,
    /// with `flags` and `payload` after the header.
    fn record(
        kind: u8,
        flags: u16,
        guid: [u8; 16],
        id: u16,
        version: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut r = vec![0u8; HEADER];
        r[2..4].copy_from_slice(&[kind, 0xc0]);
        r[4..6].copy_from_slice(&flags.to_le_bytes());
        r[8..12].copy_from_slice(&77u32.to_le_bytes());
        r[12..16].copy_from_slice(&88u32.to_le_bytes());
        r[0x18..0x28].copy_from_slice(&guid);
        r[0x28..0x2a].copy_from_slice(&id.to_le_bytes());
        r[0x2a] = version;
        r.extend_from_slice(payload);
        let n = r.len() as u16;
        r[0..2].copy_from_slice(&n.to_le_bytes());
        r
    }

    /// The record decoded with `lookup`.
    fn run_by<'s>(
        lookup: impl Fn(&[u8; 16]) -> Option<&'s Schemas>,
        rec: &[u8],
    ) -> Option<Payload> {
        let mut buf = rec.to_vec();
        buf.resize(align8(rec.len()), 0);
        let mut got = None;
        let mut walked = 0;
        walk_from(&buf, 0, buf.len(), |r| {
            walked += 1;
            got = decode_with(&lookup, &buf, r);
        });
        assert_eq!(walked, 1, "the record walks");
        got
    }

    /// The record decoded with `t` as the schemas of [`TEST_GUID`] (and no other provider).
    fn run_with(t: &Schemas, rec: &[u8]) -> Option<Payload> {
        run_by(|g| (*g == TEST_GUID).then_some(t), rec)
    }

    /// The record decoded with the embedded table.
    fn run(rec: &[u8]) -> Option<Payload> {
        run_by(provider, rec)
    }

    /// The schemas of a test provider: the given field lists as events 1, 2, ... version 0.
    fn test_table(lists: &[&str]) -> Schemas {
        let mut text = String::new();
        for (i, l) in lists.iter().enumerate() {
            text.push_str(&format!("F {l}\nE {} 0 {i}\n", i + 1));
        }
        Schemas::parse(text).unwrap()
    }
    /// {00000001-0002-0003-0405-060708090A0B}, a provider the table does not have.
    const TEST_GUID: [u8; 16] = [1, 0, 0, 0, 2, 0, 3, 0, 4, 5, 6, 7, 8, 9, 10, 11];

    /// The embedded table: providers sorted by GUID, every block decompresses to the text the
    /// generator wrote (its length and, all blocks in order, its SHA-256, from the generated
    /// header) and parses, to the event and field list counts the generator printed.
    #[test]
    fn embedded_table_loads() {
        assert_eq!(schemas::PROVIDERS.len(), 794);
        assert!(schemas::PROVIDERS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(schemas::PROVIDERS[0].1, 0);
        assert!(schemas::PROVIDERS.windows(2).all(|w| w[0].2 == w[1].1));
        assert_eq!(
            schemas::PROVIDERS.last().unwrap().2 as usize,
            schemas::BLOB.len()
        );
        let mut all = Vec::new();
        let (mut events, mut lists, mut ambiguous) = (0, 0, 0);
        for (i, p) in schemas::PROVIDERS.iter().enumerate() {
            let text = block_text(i).unwrap();
            all.extend_from_slice(text.as_bytes());
            let s = Schemas::parse(text).unwrap();
            assert!(!s.events.is_empty());
            events += s.events.len();
            lists += s.lists.len();
            ambiguous += s
                .events
                .iter()
                .filter(|e| {
                    let (a, b) = s.lists[e.2 as usize];
                    s.fields[a as usize..b as usize]
                        .iter()
                        .any(|f| f.ty.is_ambiguous())
                })
                .count();
            // The lookup finds the same block.
            assert_eq!(provider(&p.0).unwrap().events, s.events);
        }
        assert_eq!(all.len(), schemas::TEXT_LEN);
        let digest = ring::digest::digest(&ring::digest::SHA256, &all);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, schemas::TEXT_SHA256);
        assert_eq!((events, lists), (schemas::EVENTS, schemas::FIELD_LISTS));
        assert_eq!(ambiguous, schemas::AMBIGUOUS_EVENTS);
        // What the generator printed (tools/manifest_schemas/README.md): every class of
        // etl-parser, 4,959 of them with an ambiguous type.
        assert_eq!((events, ambiguous), (35_971, 4_959));
        assert!(provider(&TEST_GUID).is_none());
    }

    /// Field lists as etl-parser 1.0.1 declares them (etl/parsers/etw/*.py, read by hand).
    #[test]
    fn table_holds_etl_parser_field_lists() {
        let list = |g: [u8; 16], id: u16, v: u8| -> Option<Vec<(String, Ty)>> {
            let t = provider(&g)?;
            Some(
                t.event(id, v)?
                    .iter()
                    .map(|f| (f.name(&t.text).to_string(), f.ty))
                    .collect(),
            )
        };
        assert_eq!(guid("22fb2cd6-0e7b-422b-a0c7-2fad1fd0e716"), KERNEL_PROCESS);
        // Microsoft_Windows_Kernel_Process_1_3 (ProcessStart).
        let names: Vec<String> = list(KERNEL_PROCESS, 1, 3)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            [
                "ProcessID",
                "ProcessSequenceNumber",
                "CreateTime",
                "ParentProcessID",
                "ParentProcessSequenceNumber",
                "SessionID",
                "Flags",
                "ProcessTokenElevationType",
                "ProcessTokenIsElevated",
                "MandatoryLabel",
                "ImageName",
                "ImageChecksum",
                "TimeDateStamp",
                "PackageFullName",
                "PackageRelativeAppId"
            ]
        );
        // Service_Control_Manager_7036_0: the Event Log's classic template.
        assert_eq!(
            list(guid(SCM), 7036, 0).unwrap(),
            [
                ("param1".into(), Ty::WStr),
                ("param2".into(), Ty::WStr),
                ("__binLength".into(), Ty::U32),
                (
                    "BinaryData".into(),
                    Ty::BytesOf {
                        field: 2,
                        twice: false
                    }
                )
            ]
        );
        // Microsoft_Windows_Kernel_PnP_218_0: `Bytes(lambda this: 2 * this.DriverNameLength)`.
        let pnp = list(guid(KERNEL_PNP), 218, 0).unwrap();
        assert_eq!(
            pnp[1],
            (
                "DriverName".into(),
                Ty::BytesOf {
                    field: 0,
                    twice: true
                }
            )
        );
        // Versions 0 to 3 of ProcessStart are declared, 4 is not.
        assert!(list(KERNEL_PROCESS, 1, 0).is_some());
        assert!(list(KERNEL_PROCESS, 1, 4).is_none());
        // Every Threat-Intelligence event, with etl-parser's `Int8ul` as `u8|bool` (1 v0:
        // `CallingProcessSignatureLevel` ..., nine of them).
        let ti = list(guid(THREAT_INTELLIGENCE), 1, 0).unwrap();
        assert_eq!(ti.len(), 24);
        assert_eq!(ti[3], ("CallingProcessSignatureLevel".into(), Ty::U8OrBool));
        assert_eq!(ti.iter().filter(|f| f.1 == Ty::U8OrBool).count(), 9);
        assert_eq!(
            provider(&guid(THREAT_INTELLIGENCE)).unwrap().events.len(),
            30
        );
        // AMSI 1101 v0: `Bytes(lambda this: this.contentsize)` as `bytes|wchars(contentsize)`.
        let amsi = list(guid(AMSI), 1101, 0).unwrap();
        assert_eq!(amsi[1], ("scanStatus".into(), Ty::U8OrBool));
        assert_eq!(amsi[7], ("content".into(), Ty::BytesOrWChars { field: 5 }));
        assert_eq!(amsi[9], ("contentFiltered".into(), Ty::U8OrBool));
    }

    /// Every type, with values as the bytes say.
    #[test]
    fn every_type() {
        let t = test_table(&[
            "A:i8 B:u16 C:i16 D:u32 E:i32 F:u64 G:i64 H:f32 I:f64 J:wstr K:cstr L:guid M:systime N:sid O:bytes(3) P:u16 Q:bytes(P) R:u16 S:bytes(2*R)",
        ]);
        let mut d = vec![0xfe];
        d.extend(60000u16.to_le_bytes());
        d.extend((-300i16).to_le_bytes());
        d.extend(4_000_000_000u32.to_le_bytes());
        d.extend((-70000i32).to_le_bytes());
        d.extend(u64::MAX.to_le_bytes());
        d.extend((-5i64).to_le_bytes());
        d.extend(1.5f32.to_le_bytes());
        d.extend((-0.25f64).to_le_bytes());
        d.extend(utf16z("héllo"));
        d.extend(b"abc\0");
        d.extend((1..=16).collect::<Vec<u8>>());
        for w in [2021u16, 2, 0, 21, 1, 38, 22, 987] {
            d.extend(w.to_le_bytes());
        }
        d.extend([1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0]);
        d.extend([0xde, 0xad, 0x01]);
        d.extend(2u16.to_le_bytes());
        d.extend([0xbe, 0xef]);
        d.extend(2u16.to_le_bytes());
        d.extend([b'o', 0, b'k', 0]);
        let p = run_with(&t, &record(0x13, 0, TEST_GUID, 1, 0, &d)).unwrap();
        assert_eq!((p.class, p.problem.as_deref()), ("manifest", None));
        assert_eq!(
            fields_json(&p),
            json!({
                "A": -2, "B": 60000, "C": -300, "D": 4_000_000_000u32, "E": -70000,
                "F": u64::MAX, "G": -5, "H": 1.5, "I": -0.25, "J": "héllo", "K": "abc",
                "L": "04030201-0605-0807-090a-0b0c0d0e0f10", "M": "2021-02-21T01:38:22.987",
                "N": "S-1-5-18", "O": "dead01", "P": 2, "Q": "beef", "R": 2, "S": "6f006b00"
            })
        );
        // The JSON has no event or provider.
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(
            j.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["class", "fields", "problem"]
        );
    }

    /// A short payload, bytes after the last field, strings without terminator, lengths past
    /// the end or negative: a problem naming the field, the fields before it kept.
    #[test]
    fn hostile_payloads_are_reported() {
        let t = test_table(&[
            "A:u32 B:u64",
            "S:wstr T:u32",
            "S:cstr",
            "N:i32 B:bytes(N)",
            "L:u32 B:bytes(2*L) Z:u16",
            "X:sid",
            "",
        ]);
        let one = |id: u16, d: &[u8]| run_with(&t, &record(0x13, 0, TEST_GUID, id, 0, d)).unwrap();
        // A payload the schema does not fit exactly is given raw (its bytes and why): none of
        // its values can be trusted (a field the schema lacks shifts the ones after it).
        let unfit = |id: u16, d: &[u8], why: &str| {
            let p = one(id, d);
            assert_eq!(p.class, super::super::raw::CLASS, "{why}");
            assert_eq!(p.number("size"), Some(d.len() as u64));
            assert_eq!(
                p.get("hex"),
                Some(&Value::Formatted(hex_digits(d))),
                "{why}"
            );
            assert_eq!(
                p.problem.as_deref(),
                Some(
                    format!(
                        "not decoded: the provider's schema (etl-parser's) does not fit the payload: {why}"
                    )
                    .as_str()
                )
            );
        };
        unfit(
            1,
            &[1, 0, 0, 0, 2, 0, 0],
            "B at payload +0x4: needs 8 bytes, the payload has 3",
        );
        unfit(
            1,
            &[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb],
            "2 bytes after the last field (B); the schema does not cover them: a field it lacks shifts the fields after it",
        );
        // UTF-16 without its NUL (an odd byte left, and one NUL byte is not a terminator).
        unfit(
            2,
            &[b'a', 0, b'b', 0, 0],
            "S at payload +0x0: no terminating NUL (UTF-16) before the end of the record",
        );
        // Two zero bytes at an odd offset are not a terminator: units 'a', U+6200, NUL.
        let p = one(2, &[b'a', 0, 0, b'b', 0, 0, 0, 0, 0, 0]);
        assert_eq!(p.text("S").map(|s| s.raw()), Some("a\u{6200}"));
        assert_eq!(p.number("T"), Some(0));
        assert_eq!(p.problem, None);
        unfit(
            3,
            b"abc",
            "S at payload +0x0: no terminating NUL before the end of the record",
        );
        unfit(
            4,
            &[0xff, 0xff, 0xff, 0xff, 1],
            "B at payload +0x4: its length field N is negative",
        );
        unfit(
            4,
            &[5, 0, 0, 0, 1, 2],
            "B at payload +0x4: its length field N says 5 bytes, the payload has 2 bytes",
        );
        // 0xffffffff UTF-16 units: checked against the record before anything is read.
        unfit(
            5,
            &[0xff, 0xff, 0xff, 0xff, 1, 0],
            "B at payload +0x4: its length field L says 4294967295 UTF-16 units, the payload has 2 bytes",
        );
        let p = one(5, &[1, 0, 0, 0, b'x', 0, 7, 0]);
        assert_eq!(fields_json(&p), json!({"L": 1, "B": "7800", "Z": 7}));
        let p = one(6, &[7, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0]);
        assert_eq!(p.class, super::super::raw::CLASS);
        assert!(p.problem.unwrap().starts_with(
            "not decoded: the provider's schema (etl-parser's) does not fit the payload: X at payload +0x0: not a SID (revision 7"
        ));
        unfit(
            6,
            &[1, 2, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0],
            "X at payload +0x0: a SID of 16 bytes runs past the end of the record",
        );
        // No field: an empty payload is exact, anything else is given raw.
        assert_eq!(one(7, &[]).problem, None);
        assert_eq!(one(7, &[]).class, CLASS);
        unfit(
            7,
            &[1],
            "1 bytes after the last field; the schema does not cover them: a field it lacks shifts the fields after it",
        );
    }

    /// What is not decoded: another version of a known id, an unknown event, a 32-bit event
    /// whose fields include a u64 (a pointer may be 4 bytes there), string-only, classic and
    /// trace-message events, a TraceLogging event, a record of another kind.
    #[test]
    fn not_decoded_without_a_faithful_schema() {
        let t = test_table(&["A:u32", "A:u64"]);
        let d = 5u32.to_le_bytes();
        assert!(run_with(&t, &record(0x13, 0, TEST_GUID, 1, 0, &d)).is_some());
        assert_eq!(run_with(&t, &record(0x13, 0, TEST_GUID, 1, 1, &d)), None);
        assert_eq!(run_with(&t, &record(0x13, 0, TEST_GUID, 3, 0, &d)), None);
        assert_eq!(
            run_with(&t, &record(0x13, 0, KERNEL_PROCESS, 1, 0, &d)),
            None
        );
        // 32-bit: u32 decoded, u64 not (header type 0x12, or Flags 32_BIT_HEADER).
        let p = run_with(&t, &record(0x12, 0, TEST_GUID, 1, 0, &d)).unwrap();
        assert_eq!(p.number("A"), Some(5));
        let q = 6u64.to_le_bytes();
        assert_eq!(run_with(&t, &record(0x12, 0, TEST_GUID, 2, 0, &q)), None);
        assert_eq!(run_with(&t, &record(0x13, 0x20, TEST_GUID, 2, 0, &q)), None);
        assert_eq!(
            run_with(&t, &record(0x13, 0x40, TEST_GUID, 2, 0, &q))
                .unwrap()
                .number("A"),
            Some(6)
        );
        for flag in [0x0004, 0x0008, 0x0100] {
            assert_eq!(run_with(&t, &record(0x13, flag, TEST_GUID, 1, 0, &d)), None);
        }
        // Extended items: one item (ExtType 1, 4 bytes of data), then the user data; an
        // EVENT_SCHEMA_TL item (11) makes it a TraceLogging event.
        for (ext_type, decoded) in [(1u16, true), (11, false)] {
            let mut x = vec![16, 0];
            x.extend(ext_type.to_le_bytes());
            x.extend([0, 0, 4, 0, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 0]);
            x.extend(d);
            let got = run_with(&t, &record(0x13, 1, TEST_GUID, 1, 0, &x));
            assert_eq!(got.is_some(), decoded, "ExtType {ext_type}");
            if let Some(p) = got {
                assert_eq!((p.number("A"), p.problem), (Some(5), None));
            }
        }
        // The item says another follows, and the record ends.
        let x = [16, 0, 1, 0, 1, 0, 4, 0, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 0];
        let p = run_with(&t, &record(0x13, 1, TEST_GUID, 1, 0, &x)).unwrap();
        assert!(p.fields.is_empty());
        assert!(p.problem.unwrap().contains("runs past the record"));
    }

    /// Real field lists through the public entry point: Kernel-Process ProcessStart version 3
    /// and the Service Control Manager's 7036 (its binary data sized by `__binLength`).
    #[test]
    fn real_schemas_decode() {
        let mut d = Vec::new();
        d.extend(4312u32.to_le_bytes()); // ProcessID
        d.extend(77u64.to_le_bytes()); // ProcessSequenceNumber
        d.extend(132_583_450_998_617_254u64.to_le_bytes()); // CreateTime
        d.extend(4100u32.to_le_bytes()); // ParentProcessID
        d.extend(55u64.to_le_bytes());
        d.extend(1u32.to_le_bytes()); // SessionID
        d.extend(0u32.to_le_bytes()); // Flags
        d.extend(3u32.to_le_bytes());
        d.extend(0u32.to_le_bytes());
        d.extend([1, 1, 0, 0, 0, 0, 0, 16, 0, 0x20, 0, 0]); // S-1-16-8192
        d.extend(utf16z(
            "\\Device\\HarddiskVolume3\\Windows\\System32\\cmd.exe",
        ));
        d.extend(0x1234u32.to_le_bytes());
        d.extend(0x5f00_0000u32.to_le_bytes());
        d.extend(utf16z(""));
        d.extend(utf16z(""));
        let p = run(&record(0x13, 0x0240, KERNEL_PROCESS, 1, 3, &d)).unwrap();
        assert_eq!(p.problem, None);
        assert_eq!(p.fields.len(), 15);
        assert_eq!(p.number("ProcessID"), Some(4312));
        assert_eq!(p.number("CreateTime"), Some(132_583_450_998_617_254));
        assert_eq!(
            p.get("MandatoryLabel"),
            Some(&Value::Formatted("S-1-16-8192".into()))
        );
        assert_eq!(
            p.text("ImageName").map(|s| s.raw()),
            Some("\\Device\\HarddiskVolume3\\Windows\\System32\\cmd.exe")
        );
        // As a 32-bit event it is not decoded (its u64 fields).
        assert_eq!(run(&record(0x12, 0, KERNEL_PROCESS, 1, 3, &d)), None);

        let mut d = utf16z("Windows Update");
        d.extend(utf16z("running"));
        d.extend(4u32.to_le_bytes());
        d.extend(b"wuau");
        let p = run(&record(0x13, 0, guid(SCM), 7036, 0, &d)).unwrap();
        assert_eq!(
            fields_json(&p),
            json!({"param1": "Windows Update", "param2": "running", "__binLength": 4,
                   "BinaryData": "77756175"})
        );
        assert_eq!(p.problem, None);
    }

    /// Every truncation of a good record, and every byte of it changed: no panic, and never a
    /// value read past the record (a cut record either is not walked or reports a problem).
    #[test]
    fn truncated_and_mutated_records() {
        let t = test_table(&["N:u16 B:bytes(2*N) S:wstr C:cstr X:sid G:guid"]);
        let mut d = 2u16.to_le_bytes().to_vec();
        d.extend([b'h', 0, b'i', 0]);
        d.extend(utf16z("s"));
        d.extend(b"c\0");
        d.extend([1, 1, 0, 0, 0, 0, 0, 5, 18, 0, 0, 0]);
        d.extend([7u8; 16]);
        let good = record(0x13, 0, TEST_GUID, 1, 0, &d);
        assert_eq!(run_with(&t, &good).unwrap().problem, None);
        for n in HEADER..good.len() {
            let mut cut = good[..n].to_vec();
            cut[0..2].copy_from_slice(&(n as u16).to_le_bytes());
            let p = run_with(&t, &cut).unwrap();
            assert!(p.problem.is_some(), "cut at {n}: {p:?}");
        }
        for i in HEADER..good.len() {
            for v in [0u8, 0x7f, 0xff] {
                let mut m = good.clone();
                m[i] = v;
                let _ = run_with(&t, &m);
            }
        }
    }

    /// A block that does not parse is refused with the line.
    #[test]
    fn bad_table_text_is_refused() {
        for (text, why) in [
            ("E 1 0 0\n", "a field list not defined before"),
            ("F A:u9\n", "unknown type"),
            ("F A:bool\n", "unknown type"),
            // A length naming an ambiguous field (the generator writes such a field `u8`).
            ("F A:u8|bool B:bytes|wchars(A)\n", "unknown type"),
            ("F A:u8|bool B:bytes(A)\n", "unknown type"),
            ("F A:bytes|wchars(B)\n", "unknown type"),
            ("F A:wstr B:bytes|wchars(A)\n", "unknown type"),
            ("F A:bytes(B)\n", "unknown type"),
            ("F A:wstr B:bytes(A)\n", "unknown type"),
            ("F A\n", "no type"),
            ("P x\n", "unknown line"),
            ("F A:u32\nE 1 0 0\nE 1 0 0\n", "events out of order"),
            ("F A:u32\nE 2 0 0\nE 1 3 0\n", "events out of order"),
            ("F A:u32\nE 1 256 0\n", "version"),
            ("F A:u32\nE 1 0\n", "not three numbers"),
        ] {
            let e = Schemas::parse(text.to_string()).err().unwrap();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        let s = Schemas::parse("F A:u32 B:bytes(A)\nE 1 0 0\nE 1 1 0\nE 7 0 0\n".into()).unwrap();
        assert_eq!(s.event(1, 1).map(<[Field]>::len), Some(2));
        assert!(s.event(1, 2).is_none() && s.event(7, 0).is_some() && s.event(2, 0).is_none());
    }

    /// The `how` of a payload decoded by its one fitting reading.
    fn how_of(p: &Payload) -> String {
        match &p.how {
            Some(s) => s.clone(),
            None => panic!("no how in {p:?}"),
        }
    }

    /// A payload's fields as JSON, with its `how` (when it has one) under the key `"@how"`
    /// after them: one value to compare in the tests.
    fn fields_and_how(p: &Payload) -> serde_json::Value {
        let mut j = fields_json(p);
        if let (Some(h), Some(m)) = (&p.how, j.as_object_mut()) {
            m.insert("@how".into(), serde_json::Value::String(h.clone()));
        }
        j
    }

    /// The problem of a payload given raw (its class checked).
    fn raw_why(p: &Payload) -> String {
        assert_eq!(p.class, super::super::raw::CLASS, "{p:?}");
        p.problem.clone().unwrap()
    }

    /// `Int8ul` read as win:UInt8, as win:Boolean and both in one event, each the only reading
    /// of its payload's size; two readings that fit: given raw with why.
    #[test]
    fn uint8_and_boolean_by_size() {
        let t = test_table(&[
            "A:u32 B:u8|bool C:u16",
            "A:u8|bool B:u8|bool",
            "A:u8|bool S:wstr B:u8|bool",
        ]);
        let one = |id: u16, d: &[u8]| run_with(&t, &record(0x13, 0, TEST_GUID, id, 0, d)).unwrap();
        // UInt8: 4 + 1 + 2 = 7 bytes (the Boolean reading needs 10).
        let p = one(1, &[7, 0, 0, 0, 5, 9, 0]);
        assert_eq!((p.class, p.problem.as_deref()), (CLASS, None));
        assert_eq!(
            fields_and_how(&p),
            json!({"A": 7, "B": 5, "C": 9, "@how": "Int8ul read as win:UInt8 (1 byte): B; the \
                   only one of the 2 readings of etl-parser's ambiguous types that consumes the \
                   payload's 7 bytes exactly"})
        );
        // Boolean: 4 + 4 + 2 = 10 bytes.
        let p = one(1, &[7, 0, 0, 0, 1, 0, 0, 0, 9, 0]);
        assert_eq!(
            fields_and_how(&p),
            json!({"A": 7, "B": true, "C": 9, "@how": "Int8ul read as win:Boolean (4 bytes): B; \
                   the only one of the 2 readings of etl-parser's ambiguous types that consumes \
                   the payload's 10 bytes exactly"})
        );
        assert_eq!(
            one(1, &[7, 0, 0, 0, 0, 0, 0, 0, 9, 0]).get("B"),
            Some(&Value::Bool(false))
        );
        // Neither: 8 bytes.
        assert_eq!(
            raw_why(&one(1, &[7, 0, 0, 0, 1, 0, 9, 0])),
            "not decoded: the provider's schema (etl-parser's) does not fit the payload in any \
             of the 2 readings of its ambiguous fields (B (Int8ul)); etl-parser's own reading \
             (1-byte Int8ul, byte counts): 1 bytes after the last field (C); the schema does not \
             cover them: a field it lacks shifts the fields after it"
        );
        // A Boolean is 0 or 1: the one reading that fits, with 2 there, is not taken.
        assert_eq!(
            raw_why(&one(1, &[7, 0, 0, 0, 2, 0, 0, 0, 9, 0])),
            "not decoded: the provider's schema (etl-parser's) fits the payload's 10 bytes in one \
             of the 2 readings of its ambiguous fields (B (Int8ul)), whose values are not of its \
             types: B at payload +0x4: as a win:Boolean its 4 bytes say 0x2, and a Boolean is 0 \
             or 1"
        );
        // 5 bytes: a Boolean then a UInt8, or a UInt8 then a Boolean: which is not known.
        assert_eq!(
            raw_why(&one(2, &[1, 0, 0, 0, 1])),
            "not decoded: the provider's schema (etl-parser's) fits the payload's 5 bytes in 2 \
             of the 4 readings of its ambiguous fields (A (Int8ul), B (Int8ul)): which one is \
             right is not known"
        );
        assert_eq!(one(2, &[1, 0, 0, 0, 1]).number("size"), Some(5));
        // 2 and 8 bytes: one reading each.
        assert_eq!(
            fields_json(&one(2, &[3, 4]))
                .as_object()
                .unwrap()
                .iter()
                .take(2)
                .collect::<Vec<_>>(),
            [(&"A".to_string(), &json!(3)), (&"B".to_string(), &json!(4))]
        );
        let p = one(2, &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            (p.get("A"), p.get("B")),
            (Some(&Value::Bool(true)), Some(&Value::Bool(false)))
        );
        // Mixed: a Boolean, a string, a UInt8 (11 bytes). The other readings put the string at
        // +1 (an empty string: the Boolean's zero bytes) and end at 4 or 7.
        let mut d = vec![1, 0, 0, 0];
        d.extend(utf16z("hi"));
        d.push(7);
        let p = one(3, &d);
        assert_eq!(
            fields_and_how(&p),
            json!({"A": true, "S": "hi", "B": 7, "@how": "Int8ul read as win:Boolean (4 bytes): \
                   A; Int8ul read as win:UInt8 (1 byte): B; the only one of the 4 readings of \
                   etl-parser's ambiguous types that consumes the payload's 11 bytes exactly"})
        );
        assert_eq!(p.problem, None);
    }

    /// `Bytes(this.F)` read as bytes or as UTF-16 characters by size; an empty one is either;
    /// characters that are not text (a NUL inside, a lone surrogate) are not taken.
    #[test]
    fn counted_bytes_or_characters_by_size() {
        let t = test_table(&["N:u16 D:bytes|wchars(N) T:u32"]);
        let one = |d: &[u8]| run_with(&t, &record(0x13, 0, TEST_GUID, 1, 0, d)).unwrap();
        let with = |n: u16, data: &[u8]| {
            let mut d = n.to_le_bytes().to_vec();
            d.extend(data);
            d.extend(5u32.to_le_bytes());
            one(&d)
        };
        // 8 characters, 16 bytes (FilterManager 6's DeviceNameLength and DeviceName).
        let name: Vec<u8> = "FileInfo"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        let p = with(8, &name);
        assert_eq!(
            fields_and_how(&p),
            json!({"N": 8, "D": "FileInfo", "T": 5, "@how": "Bytes(this.F) read as UTF-16 \
                   characters (2 bytes each): D; the only one of the 2 readings of etl-parser's \
                   ambiguous types that consumes the payload's 22 bytes exactly"})
        );
        // A trailing NUL is the string's own.
        assert_eq!(
            with(3, &[b'o', 0, b'k', 0, 0, 0])
                .text("D")
                .map(|s| s.raw()),
            Some("ok")
        );
        // 4 bytes.
        let p = with(4, b"abcd");
        assert_eq!(p.get("D"), Some(&Value::Formatted("61626364".into())));
        assert!(how_of(&p).starts_with("Bytes(this.F) read as bytes: D; the only one of the 2"));
        // Empty: both readings are one layout.
        let p = with(0, &[]);
        assert_eq!(fields_json(&p)["D"], json!(""));
        assert_eq!(
            how_of(&p),
            "Bytes(this.F) empty (F is 0: bytes or characters alike): D; the only one of the 2 \
             readings of etl-parser's ambiguous types that consumes the payload's 6 bytes exactly"
        );
        // Not text: a NUL before the last character, a lone surrogate.
        assert!(raw_why(&with(2, &[0, 0, b'A', 0])).ends_with(
            "D at payload +0x2: as UTF-16 text its character 0 of 2 is NUL (a counted string may \
             end with one NUL, not hold one)"
        ));
        assert!(raw_why(&with(2, &[0, 0xd8, b'A', 0]))
            .ends_with("D at payload +0x2: as UTF-16 text it holds a lone surrogate (not text)"));
        // Neither reading: 3 bytes where 2 or 4 are due.
        assert!(raw_why(&with(2, &[1, 2, 3])).contains("in any of the 2 readings"));
    }

    /// At most 12 ambiguous fields (4,096 readings) are tried; more: given raw, saying why.
    #[test]
    fn ambiguous_fields_are_bounded() {
        let list = |k: usize| {
            (0..k)
                .map(|i| format!("F{i}:u8|bool"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let t = test_table(&[&list(MAX_AMBIGUOUS), &list(MAX_AMBIGUOUS + 1)]);
        let one = |id: u16, d: &[u8]| run_with(&t, &record(0x13, 0, TEST_GUID, id, 0, d)).unwrap();
        // 12 Booleans (48 bytes) and 12 UInt8 (12 bytes): one reading each of 4,096.
        let p = one(1, &[1, 0, 0, 0].repeat(12));
        assert!(
            how_of(&p).contains("the only one of the 4096 readings"),
            "{p:?}"
        );
        assert_eq!(p.fields.len(), 12);
        assert_eq!(one(1, &[9; 12]).number("F11"), Some(9));
        // 15 bytes: 1 Boolean and 11 UInt8, 12 ways.
        assert!(raw_why(&one(1, &[0; 15])).contains("in 12 of the 4096 readings"));
        assert_eq!(
            raw_why(&one(2, &[0; 13])),
            format!(
                "not decoded: the provider's schema (etl-parser's) leaves the wire types of 13 \
                 fields open ({}), more than 12: its readings are not tried",
                (0..13)
                    .map(|i| format!("F{i} (Int8ul)"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
    }

    /// Every reading decoded in full by `decode_fields` (independent of `readings`' measuring),
    /// with the values' own checks left out (a Boolean as 4 bytes, characters as twice as
    /// many bytes): the readings that fit the payload's size (no field short, no byte left),
    /// one per distinct decoding (an empty field read either way is one), each with its
    /// reading.
    fn oracle(t: &Schemas, p: &[u8]) -> Vec<u32> {
        let fields = t.event(1, 0).unwrap();
        let k = fields.iter().filter(|f| f.ty.is_ambiguous()).count();
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for r in 0..1u32 << k {
            let mut bit = 0;
            let sized: Vec<Field> = fields
                .iter()
                .map(|f| {
                    let mut other = false;
                    if f.ty.is_ambiguous() {
                        other = r >> bit & 1 == 1;
                        bit += 1;
                    }
                    let ty = match f.ty.read_as(other) {
                        Ty::Bool => Ty::Bytes(4),
                        Ty::WChars { field } => Ty::BytesOf { field, twice: true },
                        ty => ty,
                    };
                    Field { ty, ..*f }
                })
                .collect();
            let d = decode_fields(&t.text, &sized, p, 0);
            if d.problem.is_none() && seen.insert(serde_json::to_string(&d).unwrap()) {
                out.push(r);
            }
        }
        out
    }

    /// Random payloads, every truncation and byte change of good ones: never a panic, and a
    /// payload is decoded only when exactly one reading fits it, with that reading's values.
    #[test]
    fn readings_never_decode_wrongly() {
        let lists = [
            "A:u8|bool S:wstr B:u8|bool",
            "N:u16 D:bytes|wchars(N) F:u8|bool C:cstr",
            "A:u8|bool B:u8|bool C:u8|bool X:sid L:u32 D:bytes|wchars(L) G:guid",
            "L:u8 D:bytes|wchars(L) E:bytes|wchars(L) B:u8|bool",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut decoded, mut several, mut none) = (0, 0, 0);
        for list in lists {
            let t = test_table(&[list]);
            let mut check = |d: &[u8]| {
                let got = run_with(&t, &record(0x13, 0, TEST_GUID, 1, 0, d)).unwrap();
                let fits = oracle(&t, d);
                let fields = t.event(1, 0).unwrap();
                match fits.as_slice() {
                    &[r] if decode_fields(&t.text, fields, d, r).problem.is_none() => {
                        let only = decode_fields(&t.text, fields, d, r);
                        assert_eq!(got.class, CLASS, "{list} {d:?}: {got:?}");
                        assert_eq!(got.fields, only.fields);
                        assert!(got.how.is_some());
                        assert!(got.problem.is_none());
                        decoded += 1;
                    }
                    other => {
                        assert_eq!(got.class, super::super::raw::CLASS, "{list} {d:?}");
                        if other.len() > 1 {
                            let why = got.problem.unwrap();
                            assert!(why.contains(&format!("in {} of the", other.len())), "{why}");
                            several += 1;
                        } else {
                            none += 1;
                        }
                    }
                }
            };
            for _ in 0..3000 {
                let n = (rand() % 48) as usize;
                // Bytes mostly 0 and 1 (Booleans, terminators, small lengths), some random.
                let d: Vec<u8> = (0..n)
                    .map(|_| match rand() % 4 {
                        0 | 1 => 0,
                        2 => 1,
                        _ => rand() as u8,
                    })
                    .collect();
                check(&d);
            }
        }
        // A good mixed record, cut and changed.
        let t = test_table(&[lists[0]]);
        let mut good = vec![1, 0, 0, 0];
        good.extend(utf16z("hi"));
        good.push(7);
        let mut variants: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
        for i in 0..good.len() {
            for v in [0u8, 1, 0xff] {
                let mut m = good.clone();
                m[i] = v;
                variants.push(m);
            }
        }
        // A cut payload may be another one that fits (4 bytes: A 1, S "", B 0); whatever is
        // decoded is the one reading that fits.
        let mut cut_or_changed_decoded = 0;
        for m in variants {
            let got = run_with(&t, &record(0x13, 0, TEST_GUID, 1, 0, &m)).unwrap();
            let fits = oracle(&t, &m);
            if got.class == CLASS {
                assert_eq!(fits.len(), 1);
                let only = decode_fields(&t.text, t.event(1, 0).unwrap(), &m, fits[0]);
                assert_eq!(got.fields, only.fields);
                cut_or_changed_decoded += 1;
            }
        }
        assert!(cut_or_changed_decoded < 30, "{cut_or_changed_decoded}");
        // The random payloads reach all three outcomes.
        assert!(
            decoded > 50 && several > 50 && none > 50,
            "{decoded} {several} {none}"
        );
    }

    /// Real field lists with ambiguous types, payloads as Windows writes them: VolumeSnapshot
    /// 106 (values of the real x64 triage dump's record: `Deleted` and `Visible` 4-byte
    /// Booleans, tests/manifest_events.rs), Threat-Intelligence 1 (signature levels and
    /// protection, 1-byte UInt8), AMSI 1101 (`scanStatus` a UInt8, `content` binary,
    /// `contentFiltered` a BOOL).
    #[test]
    fn real_ambiguous_schemas_decode() {
        let mut d = Vec::new();
        d.extend([0xbb, 0xf8, 0x02, 0x00, 0x80, 0x44, 0x02, 0xa0]);
        d.extend([0x74, 0x1a, 0xd6, 0x01, 0x76, 0xf1, 0x05, 0x00]);
        d.extend([0x61, 0xe0, 0x41, 0xb4, 0x1a, 0x67, 0xeb, 0x11]);
        d.extend([0x86, 0x63, 0xa8, 0x5e, 0x45, 0x1e, 0xa2, 0xa0]);
        d.extend([0; 8]); // Deleted, Visible
        for w in [2021u16, 2, 4, 4, 16, 4, 52, 208] {
            d.extend(w.to_le_bytes());
        }
        d.extend(1u32.to_le_bytes());
        d.extend(20464u16.to_le_bytes());
        d.extend(92u32.to_le_bytes());
        let p = run(&record(0x13, 0, guid(VOLUME_SNAPSHOT), 106, 0, &d)).unwrap();
        assert_eq!(
            fields_and_how(&p),
            json!({"TargetVolumeGuid": "0002f8bb-4480-a002-741a-d60176f10500",
                   "SnapshotGuid": "b441e061-671a-11eb-8663-a85e451ea2a0", "Deleted": false,
                   "Visible": false, "CommitTime": "2021-02-04T16:04:52.208", "SourceFile": 1,
                   "SourceLine": 20464, "SourceTag": 92,
                   "@how": "Int8ul read as win:Boolean (4 bytes): Deleted, Visible; the only one \
                            of the 4 readings of etl-parser's ambiguous types that consumes the \
                            payload's 66 bytes exactly"})
        );

        // Threat-Intelligence 1 v0 (ALLOCVM_REMOTE): 9 signature levels and protections.
        let mut d = Vec::new();
        for (pid, levels) in [
            (4120u32, [12u8, 12, 0x31]),
            (7312, [6, 6, 0]),
            (4120, [12, 12, 0x31]),
        ] {
            d.extend(pid.to_le_bytes());
            d.extend(132_583_450_998_617_254u64.to_le_bytes());
            d.extend(u64::from(pid).to_le_bytes());
            d.extend(levels);
            if pid == 4120 && d.len() < 30 {
                d.extend(5000u32.to_le_bytes()); // CallingThreadId
                d.extend(132_583_450_998_617_300u64.to_le_bytes());
            }
        }
        d.extend(0x1f0000u64.to_le_bytes()); // BaseAddress
        d.extend(0x1000u64.to_le_bytes()); // RegionSize
        d.extend(0x3000u32.to_le_bytes()); // MEM_COMMIT | MEM_RESERVE
        d.extend(0x40u32.to_le_bytes()); // PAGE_EXECUTE_READWRITE
        let p = run(&record(0x13, 0, guid(THREAT_INTELLIGENCE), 1, 0, &d)).unwrap();
        assert_eq!(p.problem, None, "{p:?}");
        assert_eq!(p.number("CallingProcessSignatureLevel"), Some(12));
        assert_eq!(p.number("CallingProcessProtection"), Some(0x31));
        assert_eq!(p.number("TargetProcessId"), Some(7312));
        assert_eq!(p.number("ProtectionMask"), Some(0x40));
        assert!(how_of(&p).starts_with(
            "Int8ul read as win:UInt8 (1 byte): CallingProcessSignatureLevel, \
             CallingProcessSectionSignatureLevel, CallingProcessProtection, \
             TargetProcessSignatureLevel,"
        ));
        assert!(how_of(&p).ends_with("the only one of the 512 readings of etl-parser's ambiguous types that consumes the payload's 105 bytes exactly"));

        // AMSI 1101 v0: a PowerShell scan.
        let script: Vec<u8> = "Write-Host hi"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        let mut d = 0x1234_5678u64.to_le_bytes().to_vec(); // session
        d.push(1); // scanStatus
        d.extend(1u32.to_le_bytes()); // scanResult: AMSI_RESULT_NOT_DETECTED
        d.extend(utf16z(
            "PowerShell_C:\\Windows\\System32\\powershell.exe_10.0.19041.1",
        ));
        d.extend(utf16z(""));
        d.extend((script.len() as u32).to_le_bytes());
        d.extend((script.len() as u32).to_le_bytes());
        d.extend(&script);
        d.extend([0xa5; 16]); // hash
        d.extend(0u32.to_le_bytes()); // contentFiltered
        let p = run(&record(0x13, 0, guid(AMSI), 1101, 0, &d)).unwrap();
        assert_eq!(p.problem, None, "{p:?}");
        assert_eq!(p.number("scanStatus"), Some(1));
        assert_eq!(
            p.get("content"),
            Some(&Value::Formatted(hex_digits(&script)))
        );
        assert_eq!(p.get("contentFiltered"), Some(&Value::Bool(false)));
        assert_eq!(
            how_of(&p),
            "Int8ul read as win:Boolean (4 bytes): contentFiltered; Int8ul read as win:UInt8 (1 \
             byte): scanStatus; Bytes(this.F) read as bytes: content; the only one of the 8 \
             readings of etl-parser's ambiguous types that consumes the payload's 187 bytes \
             exactly"
        );
    }
}
