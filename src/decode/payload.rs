//! The decoded payload of one event, whatever decoded it: the classic kernel (MOF) layouts of
//! [`super::mof`] or the event's own TraceLogging metadata ([`super::tracelogging`]). One
//! model, one JSON shape ([`super::dispatch::decode`] picks the decoder).
//!
//! JSON: `{"class", "fields": {name: value, ...} in wire order, "problem"}`, plus `"event"`
//! and `"provider"` (names read from the record) for TraceLogging events only, so a MOF
//! payload's JSON is what it was before TraceLogging decoding existed.

use crate::bytes::LeBytes;
use crate::text::Untrusted;
use serde::Serialize;
use std::fmt;

/// A floating-point value (TraceLogging FLOAT / DOUBLE), compared bit for bit so a payload
/// stays `Eq`; a FLOAT keeps its single precision in JSON (`0.1`, not `0.10000000149…`).
#[derive(Clone, Copy, Debug)]
pub struct Float {
    pub value: f64,
    /// Written as a 32-bit FLOAT.
    pub single: bool,
}

impl PartialEq for Float {
    fn eq(&self, o: &Float) -> bool {
        self.value.to_bits() == o.value.to_bits() && self.single == o.single
    }
}
impl Eq for Float {}

impl Serialize for Float {
    /// A number; NaN and the infinities (which JSON has no number for) as text.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.value.is_finite() {
            return s.serialize_str(&self.value.to_string());
        }
        if self.single {
            s.serialize_f32(self.value as f32)
        } else {
            s.serialize_f64(self.value)
        }
    }
}

impl fmt::Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.single {
            write!(f, "{}", self.value as f32)
        } else {
            write!(f, "{}", self.value)
        }
    }
}

/// Named values in order: a payload's fields, a structure's members. In JSON an object whose
/// keys keep the wire order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields(pub Vec<(Untrusted, Value)>);

impl Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Pairs(&self.0).serialize(s)
    }
}

/// Named values serialized as one JSON object, keys in order.
struct Pairs<'a>(&'a [(Untrusted, Value)]);

impl Serialize for Pairs<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// [`Value::Address`] as its text (`0x` and lower-case hex digits, no padding).
fn hex_text<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(crate::addr::hex_str(*v, &mut [0; 18]))
}

/// A decoded value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// Unsigned integers.
    Number(u64),
    /// Signed integers (TraceLogging INT8..INT64).
    Signed(i64),
    /// FLOAT, DOUBLE.
    Float(Float),
    /// BOOL32 (any non-zero value is true).
    Bool(bool),
    /// Pointers and hexadecimal integers, written as `0x…` text like every address etwdump
    /// prints (kept as the number: millions of these in a listing).
    #[serde(serialize_with = "hex_text")]
    Address(u64),
    /// Strings from the record: untrusted text.
    Text(Untrusted),
    /// Text etwdump composes from binary data: a GUID, an ISO-8601 UTC time, a SID, bytes as
    /// hex digits.
    Formatted(String),
    /// Arrays, in order.
    Array(Vec<Value>),
    /// Structures: their members in order (a JSON object).
    Struct(Fields),
}

/// How many array items or structure members [`Value`]'s Display shows before `…`.
const SHOWN_ITEMS: usize = 4;

impl fmt::Display for Value {
    /// One line: text from the record escaped (its Display), arrays and structures cut after
    /// a few items.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number(n) => write!(f, "{n}"),
            Value::Signed(n) => write!(f, "{n}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Address(v) => f.write_str(crate::addr::hex_str(*v, &mut [0; 18])),
            Value::Formatted(s) => f.write_str(s),
            Value::Text(t) => write!(f, "{t}"),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().take(SHOWN_ITEMS).enumerate() {
                    write!(f, "{}{v}", if i > 0 { ", " } else { "" })?;
                }
                if items.len() > SHOWN_ITEMS {
                    write!(f, ", … {} items", items.len())?;
                }
                f.write_str("]")
            }
            Value::Struct(m) => {
                f.write_str("{")?;
                for (i, (k, v)) in m.0.iter().take(SHOWN_ITEMS).enumerate() {
                    write!(f, "{}{k}: {v}", if i > 0 { ", " } else { "" })?;
                }
                if m.0.len() > SHOWN_ITEMS {
                    f.write_str(", …")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// A record's payload, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Payload {
    /// How it was decoded: the MOF class whose layout was used (`Process_V4_TypeGroup1`, …),
    /// or `TraceLogging` for an event decoded from its own metadata. A name etwdump knows,
    /// never text from the record.
    pub class: &'static str,
    /// TraceLogging: the event's name, from its metadata (untrusted).
    pub event: Option<Untrusted>,
    /// TraceLogging: the provider's name, from the record's provider traits (untrusted).
    pub provider: Option<Untrusted>,
    /// The fields in wire order, as far as the payload holds them.
    pub fields: Vec<(Untrusted, Value)>,
    /// Why decoding stopped before the last field, or what follows it (None: exactly the
    /// described fields).
    pub problem: Option<String>,
    /// How the layout was decided when the schema alone did not say it (a manifest event
    /// whose schema has ambiguous types: which reading, and that it is the only one that fits
    /// the payload); in JSON only when present.
    pub how: Option<String>,
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let n = 3
            + usize::from(self.event.is_some())
            + usize::from(self.provider.is_some())
            + usize::from(self.how.is_some());
        let mut m = s.serialize_map(Some(n))?;
        m.serialize_entry("class", self.class)?;
        if let Some(e) = &self.event {
            m.serialize_entry("event", e)?;
        }
        if let Some(p) = &self.provider {
            m.serialize_entry("provider", p)?;
        }
        m.serialize_entry("fields", &Pairs(&self.fields))?;
        m.serialize_entry("problem", &self.problem)?;
        if let Some(h) = &self.how {
            m.serialize_entry("how", h)?;
        }
        m.end()
    }
}

impl Payload {
    /// The value of field `name`, if decoded.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|(n, _)| n.raw() == name)
            .map(|(_, v)| v)
    }

    /// An integer field.
    pub fn number(&self, name: &str) -> Option<u64> {
        match self.get(name)? {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// A string field.
    pub fn text(&self, name: &str) -> Option<&Untrusted> {
        match self.get(name)? {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// Bytes as lower-case hex digits, two per byte.
pub(crate) fn hex_digits(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * b.len());
    for &x in b {
        s.push(char::from(DIGITS[usize::from(x >> 4)]));
        s.push(char::from(DIGITS[usize::from(x & 15)]));
    }
    s
}

/// A SID at `p[at..]` in its binary form (revision 1, at most 15 sub-authorities) as
/// `S-1-…` text, and its size.
pub(crate) fn sid(p: &[u8], at: usize) -> Result<(String, usize), String> {
    let rev = p.u8_at(at).ok_or("no SID before the end of the record")?;
    let count = p
        .u8_at(at.saturating_add(1))
        .ok_or("no SID before the end of the record")?;
    if rev != 1 || count > 15 {
        return Err(format!(
            "not a SID (revision {rev}, {count} sub-authorities; a SID has revision 1 and at most 15)"
        ));
    }
    let size = 8 + 4 * usize::from(count);
    let b = p
        .bytes_at(at, size)
        .ok_or_else(|| format!("a SID of {size} bytes runs past the end of the record"))?;
    let authority = b[2..8].iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
    let mut s = format!("S-1-{authority}");
    for i in 0..usize::from(count) {
        s.push_str(&format!("-{}", b.u32_at(8 + 4 * i).unwrap_or(0)));
    }
    Ok((s, size))
}

/// A NUL-terminated UTF-16LE string at `p[at..]` (the terminator a whole 16-bit unit at an even
/// distance from `at`), as text without the NUL, and its size with the NUL.
pub(crate) fn utf16_z(p: &[u8], at: usize) -> Result<(Untrusted, usize), &'static str> {
    let rest = p.get(at..).unwrap_or_default();
    let units = rest
        .chunks_exact(2)
        .position(|u| u == [0, 0])
        .ok_or("no terminating NUL (UTF-16) before the end of the record")?;
    Ok((Untrusted::from_utf16le_z(&rest[..2 * units]), 2 * units + 2))
}

/// A NUL-terminated 8-bit string at `p[at..]`, as text without the NUL (UTF-8, invalid bytes
/// replaced), and its size with the NUL.
pub(crate) fn ansi_z(p: &[u8], at: usize) -> Result<(Untrusted, usize), &'static str> {
    let rest = p.get(at..).unwrap_or_default();
    let end = rest
        .iter()
        .position(|&c| c == 0)
        .ok_or("no terminating NUL before the end of the record")?;
    Ok((Untrusted::from_utf8_lossy(&rest[..end]), end + 1))
}
