//! The one entry point `report::events` calls for an event's payload: whichever decoder knows
//! the record's kind decodes it into [`Payload`].

use super::payload::Payload;
use crate::etl::records::Record;

/// The payload of `r`, decoded by whichever decoder knows its kind: a kernel event whose
/// class and version have a known layout ([`super::mof`]), an EVENT_HEADER event that carries
/// its TraceLogging metadata ([`super::tracelogging`]); any other record's event data raw,
/// with why it is not decoded ([`super::raw`]). None only when `buf` does not hold the record.
pub fn decode(buf: &[u8], r: &Record) -> Option<Payload> {
    super::mof::decode(buf, r)
        .or_else(|| super::tracelogging::decode(buf, r))
        .or_else(|| super::raw::decode(buf, r))
}
