//! The one entry point `report::events` calls for an event's payload: whichever decoder knows
//! the record's kind decodes it into [`Payload`].

use super::payload::Payload;
use crate::etl::records::Record;

/// The payload of `r`, decoded by whichever decoder knows its kind: a kernel event whose
/// class and version have a known layout ([`super::mof`]; CSwitch, 0x0524, by
/// [`super::cswitch`]), an EVENT_HEADER event that carries
/// its TraceLogging metadata ([`super::tracelogging`]), an EVENT_HEADER event of a
/// manifest-based provider whose (GUID, id, version) the schema table knows
/// ([`super::manifest`]); any other record's event data raw, with why it is not decoded
/// ([`super::raw`]). None only when `buf` does not hold the record.
///
/// TraceLogging before the table: an event that carries its own metadata is described by it,
/// whatever a table says of its provider GUID and id (the manifest decoder also refuses a
/// record with an EVENT_SCHEMA_TL item, so the order is a safeguard, not a tie-break).
pub fn decode(buf: &[u8], r: &Record) -> Option<Payload> {
    super::mof::decode(buf, r)
        .or_else(|| super::cswitch::payload(buf, r))
        .or_else(|| super::tracelogging::decode(buf, r))
        .or_else(|| super::manifest::decode(buf, r))
        .or_else(|| super::raw::decode(buf, r))
}
