//! Walking the records of one ETW buffer (etw-internals.md §5).
//!
//! Records start on 8-byte boundaries relative to the buffer; each begins with a ULONG whose
//! top bit is set. Byte 3 = 0xC0 for typed headers (byte 2 = header type), 0x90 for MESSAGE
//! headers. The size is a USHORT at +4 (SYSTEM, COMPACT, PERFINFO) or +0 (the others) and
//! excludes the alignment padding. The walk stops at the first record that is not complete and
//! valid inside the buffer's valid bytes; what follows is the trimmed (torn) tail.

use serde::Serialize;
use std::collections::BTreeMap;

use super::header::BUFFER_HEADER_SIZE;

/// The header kinds of §5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    System32,
    System64,
    Compact32,
    Compact64,
    Full32,
    Full64,
    Instance32,
    Instance64,
    Message,
    PerfInfo32,
    PerfInfo64,
    EventHeader32,
    EventHeader64,
}

impl RecordKind {
    /// From the marker's bytes 2 and 3.
    fn from_marker(byte2: u8, byte3: u8) -> Option<RecordKind> {
        // MESSAGE_TRACE_HEADER: +2 Reserved, +3 0x90 (TRACE_HEADER_FLAG | TRACE_MESSAGE, the
        // top byte of the marker: etw-internals.md §5; etl-parser's WinTrace requires the top
        // USHORT to be 0x9000). Any other 0x9X byte is not a message header: accepting the
        // whole nibble let one random byte in sixteen start a record in reused memory.
        if byte3 == 0x90 && byte2 == 0 {
            return Some(RecordKind::Message);
        }
        if byte3 != 0xC0 {
            return None;
        }
        Some(match byte2 {
            0x01 => RecordKind::System32,
            0x02 => RecordKind::System64,
            0x03 => RecordKind::Compact32,
            0x04 => RecordKind::Compact64,
            0x0A => RecordKind::Full32,
            0x14 => RecordKind::Full64,
            0x0B => RecordKind::Instance32,
            0x15 => RecordKind::Instance64,
            0x10 => RecordKind::PerfInfo32,
            0x11 => RecordKind::PerfInfo64,
            0x12 => RecordKind::EventHeader32,
            0x13 => RecordKind::EventHeader64,
            _ => return None,
        })
    }

    /// Where the USHORT size is.
    fn size_offset(self) -> usize {
        match self {
            RecordKind::System32
            | RecordKind::System64
            | RecordKind::Compact32
            | RecordKind::Compact64
            | RecordKind::PerfInfo32
            | RecordKind::PerfInfo64 => 4,
            _ => 0,
        }
    }

    /// The smallest size a complete record of this kind can have (its fixed header).
    fn min_size(self) -> usize {
        match self {
            RecordKind::System32 | RecordKind::System64 => 0x20,
            RecordKind::Compact32 | RecordKind::Compact64 => 0x18,
            RecordKind::Full32 | RecordKind::Full64 => 0x30,
            RecordKind::Instance32 | RecordKind::Instance64 => 0x30,
            RecordKind::Message => 0x08,
            RecordKind::PerfInfo32 | RecordKind::PerfInfo64 => 0x10,
            RecordKind::EventHeader32 | RecordKind::EventHeader64 => 0x50,
        }
    }

    /// Kernel-style headers carry a hook id (group << 8 | type) at +6.
    fn has_hook(self) -> bool {
        self.size_offset() == 4
    }

    /// Key for per-kind counts: the hook id ("0x0524") for kernel-style records, else the kind.
    pub fn key(self, hook: Option<u16>) -> String {
        match (hook, self) {
            (Some(h), _) => format!("{h:#06x}"),
            (None, RecordKind::Full32 | RecordKind::Full64) => "full_header".into(),
            (None, RecordKind::Instance32 | RecordKind::Instance64) => "instance".into(),
            (None, RecordKind::Message) => "message".into(),
            (None, RecordKind::EventHeader32 | RecordKind::EventHeader64) => "event_header".into(),
            (None, _) => "unknown".into(),
        }
    }
}

/// One complete record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Offset in the buffer.
    pub offset: usize,
    pub kind: RecordKind,
    /// Size without alignment padding.
    pub size: usize,
    /// Hook id for SYSTEM/COMPACT/PERFINFO records.
    pub hook: Option<u16>,
    /// Marker low byte (the version for kernel-style headers).
    pub version: u8,
    /// PERFINFO: number of PMC counters (marker bits 8-10) and the PEBS flag (bit 15).
    pub pmc_counters: u8,
    pub pebs: bool,
}

impl Record {
    /// PERFINFO records: the event data, after the 0x10-byte header and the extended items
    /// the marker announces (the PEBS index and the PMC counters, 8 bytes each, §5).
    /// `None` for other header kinds or when `buf` does not hold the record.
    pub fn perfinfo_payload<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        if !matches!(self.kind, RecordKind::PerfInfo32 | RecordKind::PerfInfo64) {
            return None;
        }
        let start =
            self.offset + 0x10 + 8 * usize::from(self.pebs) + 8 * usize::from(self.pmc_counters);
        buf.get(start..self.offset + self.size)
    }

    /// PERFINFO records: the TimeStamp (session clock) at +8.
    pub fn perfinfo_timestamp(&self, buf: &[u8]) -> Option<u64> {
        if !matches!(self.kind, RecordKind::PerfInfo32 | RecordKind::PerfInfo64) {
            return None;
        }
        let b = buf.get(self.offset + 8..self.offset + 16)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// MESSAGE records: the decoded header (`None` for other kinds, or when the record is
    /// shorter than the fields its option flags announce).
    pub(crate) fn message_header(&self, buf: &[u8]) -> Option<MessageHeader> {
        if self.kind != RecordKind::Message {
            return None;
        }
        MessageHeader::parse(buf.get(self.offset..self.offset + self.size)?)
    }

    /// The record's timestamp (session clock): PERFINFO at +8, MESSAGE where its option flags
    /// say (TRACE_MESSAGE_TIMESTAMP), every other kind at +0x10 (SYSTEM/COMPACT SystemTime,
    /// EVENT_HEADER and EVENT_TRACE_HEADER TimeStamp, §5). `None` for a MESSAGE record without
    /// a timestamp or when `buf` does not hold it.
    pub fn timestamp(&self, buf: &[u8]) -> Option<u64> {
        let at = match self.kind {
            RecordKind::PerfInfo32 | RecordKind::PerfInfo64 => return self.perfinfo_timestamp(buf),
            RecordKind::Message => return self.message_header(buf)?.timestamp,
            _ => self.offset + 0x10,
        };
        if at + 8 > self.offset + self.size {
            return None;
        }
        let b = buf.get(at..at + 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

/// TRACE_MESSAGE option flags (evntrace.h): which optional fields follow the 8-byte
/// MESSAGE_TRACE_HEADER, in this order (the consumer's parse order, public NT5 source of
/// `EtwpParseTraceEvent`): sequence, component id *or* GUID (component id wins), timestamp,
/// system information (thread id, then process id).
pub mod message_flags {
    /// A sequence number follows.
    pub const SEQUENCE: u16 = 0x0001;
    /// A message GUID follows (unless COMPONENTID is also set).
    pub const GUID: u16 = 0x0002;
    /// A component id follows (it wins over GUID).
    pub const COMPONENTID: u16 = 0x0004;
    /// A timestamp follows.
    pub const TIMESTAMP: u16 = 0x0008;
    /// Obsolete: adds no field (the session's clock decides).
    pub const PERFORMANCE_TIMESTAMP: u16 = 0x0010;
    /// Thread id then process id follow.
    pub const SYSTEMINFO: u16 = 0x0020;
    /// The writer's pointer size; add no field.
    pub const POINTER32: u16 = 0x0040;
    /// Written by a 64-bit writer; adds no field.
    pub const POINTER64: u16 = 0x0080;
}

/// The header of a TRACE_MESSAGE (WPP / TraceMessage) record: +0 USHORT Size, +2 Reserved,
/// +3 0x90 marker byte, +4 USHORT MessageNumber, +6 USHORT OptionFlags, then the optional
/// fields the flags announce (see [`message_flags`]). The payload that follows stays raw: its
/// meaning is in the provider's TMF data, which no dump holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct MessageHeader {
    pub message_number: u16,
    pub option_flags: u16,
    pub sequence: Option<u32>,
    /// The message GUID (the WPP trace GUID of the source file's messages).
    #[serde(skip)]
    pub guid: Option<[u8; 16]>,
    pub component_id: Option<u32>,
    pub timestamp: Option<u64>,
    pub thread_id: Option<u32>,
    pub process_id: Option<u32>,
    /// Offset of the payload from the record's start.
    pub payload_offset: usize,
}

impl MessageHeader {
    /// Decode the header of the message record `rec` (its unpadded bytes). `None` when the
    /// record is shorter than the fields its flags announce.
    pub fn parse(rec: &[u8]) -> Option<MessageHeader> {
        use crate::bytes::LeBytes;
        use message_flags as f;
        let mut h = MessageHeader {
            message_number: rec.u16_at(4)?,
            option_flags: rec.u16_at(6)?,
            ..MessageHeader::default()
        };
        let flags = h.option_flags;
        let mut o = 8usize;
        if flags & f::SEQUENCE != 0 {
            h.sequence = Some(rec.u32_at(o)?);
            o += 4;
        }
        if flags & f::COMPONENTID != 0 {
            h.component_id = Some(rec.u32_at(o)?);
            o += 4;
        } else if flags & f::GUID != 0 {
            h.guid = Some(rec.bytes_at(o, 16)?.try_into().ok()?);
            o += 16;
        }
        if flags & f::TIMESTAMP != 0 {
            h.timestamp = Some(rec.u64_at(o)?);
            o += 8;
        }
        if flags & f::SYSTEMINFO != 0 {
            h.thread_id = Some(rec.u32_at(o)?);
            h.process_id = Some(rec.u32_at(o + 4)?);
            o += 8;
        }
        h.payload_offset = o;
        Some(h)
    }
}

/// The timestamp of the first record of a buffer whose first `prefix.len()` bytes are given
/// (at least the header and the record's first 0x18 bytes), when that record is complete
/// within `valid` and carries one.
pub fn first_record_time(prefix: &[u8], valid: usize) -> Option<u64> {
    if valid <= BUFFER_HEADER_SIZE {
        return None;
    }
    parse_at(prefix, BUFFER_HEADER_SIZE, valid)
        .ok()?
        .timestamp(prefix)
}

/// Why the walk stopped before the valid end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Torn {
    pub offset: usize,
    pub reason: String,
}

/// What a count is kept under: the hook id of kernel-style records (low 16 bits), else the
/// kind (bit 16 set, kind in bits 17..).
type CountKey = u32;

fn count_key(r: &Record) -> CountKey {
    match r.hook {
        Some(h) => u32::from(h),
        None => 0x1_0000 | ((r.kind as u32) << 17),
    }
}

fn kind_of_key(k: CountKey) -> RecordKind {
    const KINDS: [RecordKind; 13] = [
        RecordKind::System32,
        RecordKind::System64,
        RecordKind::Compact32,
        RecordKind::Compact64,
        RecordKind::Full32,
        RecordKind::Full64,
        RecordKind::Instance32,
        RecordKind::Instance64,
        RecordKind::Message,
        RecordKind::PerfInfo32,
        RecordKind::PerfInfo64,
        RecordKind::EventHeader32,
        RecordKind::EventHeader64,
    ];
    KINDS[((k >> 17) as usize).min(KINDS.len() - 1)]
}

/// The result of walking one buffer (records are counted, not stored; see [`records`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    /// Complete records.
    pub count: usize,
    /// The first complete record.
    pub first: Option<Record>,
    /// Counts per key (few distinct keys: a linear list).
    counts: Vec<(CountKey, u64)>,
    /// End of the last complete record including its alignment padding (capped at the valid
    /// end), i.e. the trimmed valid length.
    pub end: usize,
    /// Bytes from `end` to the valid end that do not form complete records.
    pub trimmed: usize,
    pub torn: Option<Torn>,
}

impl Walk {
    /// Counts by [`RecordKind::key`].
    pub fn by_key(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for &(k, n) in &self.counts {
            let key = if k & 0x1_0000 == 0 {
                RecordKind::PerfInfo64.key(Some(k as u16))
            } else {
                kind_of_key(k).key(None)
            };
            *m.entry(key).or_insert(0) += n;
        }
        m
    }

    /// Count `r`. `cache` maps a hash of the key to 1 + its index in `counts` (0: empty), so
    /// that a buffer mixing many kinds costs one probe per record, not a scan.
    #[inline(always)]
    fn count(&mut self, r: &Record, cache: &mut [u16; 64]) {
        let key = count_key(r);
        let slot = ((key ^ (key >> 6) ^ (key >> 17)) & 63) as usize;
        let i = usize::from(cache[slot]);
        match self.counts.get_mut(i.wrapping_sub(1)) {
            Some((k, n)) if *k == key => *n += 1,
            _ => match self.counts.iter().position(|(k, _)| *k == key) {
                Some(j) => {
                    self.counts[j].1 += 1;
                    cache[slot] = (j + 1) as u16;
                }
                None => {
                    self.counts.push((key, 1));
                    cache[slot] = self.counts.len().min(usize::from(u16::MAX)) as u16;
                }
            },
        }
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(*r);
        }
    }
}

/// `x` rounded up to a multiple of 8 (records are 8-byte aligned).
pub fn align8(x: usize) -> usize {
    (x + 7) & !7
}

/// Walk the records in `buf[BUFFER_HEADER_SIZE..valid]` (`valid` is clamped to the buffer).
pub fn walk(buf: &[u8], valid: usize) -> Walk {
    walk_each(buf, valid, |_| {})
}

/// Every complete record of a buffer.
pub fn records(buf: &[u8], valid: usize) -> Vec<Record> {
    let mut v = Vec::new();
    walk_each(buf, valid, |r| v.push(*r));
    v
}

/// Walk, calling `each` for every complete record.
pub fn walk_each(buf: &[u8], valid: usize, each: impl FnMut(&Record)) -> Walk {
    walk_from(buf, BUFFER_HEADER_SIZE, valid, each)
}

/// Walk the records of `buf[start..valid]` (a window of a buffer, or a buffer without header),
/// calling `each` for every complete record. Record offsets are relative to `buf`.
pub fn walk_from(buf: &[u8], start: usize, valid: usize, mut each: impl FnMut(&Record)) -> Walk {
    let valid = valid.min(buf.len());
    let mut w = Walk::default();
    let mut cache = [0u16; 64];
    let (end, stop) = chain(buf, start, valid, |rec| {
        w.count(rec, &mut cache);
        each(rec);
    });
    if stop < valid {
        // Slow path, only once per buffer: say why.
        let reason = parse_at(buf, stop, valid).err().unwrap_or_default();
        w.torn = Some(Torn {
            offset: stop,
            reason,
        });
    }
    w.end = end;
    w.trimmed = valid.saturating_sub(w.end);
    w
}

/// The record chain of `buf[start..valid]` as [`walk_from`] finds it, without the counts by
/// kind or the first record: (complete records, end of the last one with its padding, capped
/// at the valid end), i.e. `walk_from`'s `count` and `end`. For passes that only judge a
/// chain (carving reads every buffer in memory this way).
pub fn chain_from(buf: &[u8], start: usize, valid: usize) -> (usize, usize) {
    let mut count = 0usize;
    let (end, _) = chain(buf, start, valid.min(buf.len()), |_| count += 1);
    (count, end)
}

/// The one walk of a record chain: `each` complete record of `buf[start..valid]` (`valid` at
/// most `buf.len()`) in order; returns (the end of the last one with its alignment padding,
/// capped at `valid`: `start` when there is none; where the walk stopped: at or past `valid`
/// when the chain reached it, else the offset of the record that is not complete).
#[inline(always)]
fn chain(buf: &[u8], start: usize, valid: usize, mut each: impl FnMut(&Record)) -> (usize, usize) {
    let mut end = start.min(valid);
    let mut off = start;
    while off < valid {
        let Some(rec) = quick_parse(buf, off, valid) else {
            break;
        };
        each(&rec);
        // The record's alignment padding belongs to it (the kernel reserves aligned sizes).
        let next = off + align8(rec.size);
        end = next.min(valid);
        off = next;
    }
    (end, off)
}

/// Re-synchronise on a window that starts inside a buffer (triage-etw.md §4.1 step 3.4): the
/// smallest offset `p` ≥ `phase`, `p ≡ phase (mod 8)` (records are 8-aligned relative to the
/// buffer, so `phase` is the window's distance to the next 8-aligned buffer offset), from which
/// a chain of complete records ends exactly at `window.len()`. `None` when no such chain exists.
/// Bounded: at most `window.len() / 8` candidate starts, each a linear walk.
pub fn resync(window: &[u8], phase: usize) -> Option<usize> {
    let n = window.len();
    let mut p = phase % 8;
    while p < n {
        let w = walk_from(window, p, n, |_| {});
        if w.count > 0 && w.torn.is_none() && w.end == n {
            return Some(p);
        }
        p += 8;
    }
    None
}

/// The same checks as [`parse_at`] without building an error message.
#[inline(always)]
fn quick_parse(buf: &[u8], off: usize, valid: usize) -> Option<Record> {
    if off + 4 > valid {
        return None;
    }
    let head: &[u8; 8] = buf.get(off..off + 8)?.try_into().ok()?;
    let kind = RecordKind::from_marker(head[2], head[3])?;
    let so = kind.size_offset();
    let size = usize::from(u16::from_le_bytes([head[so], head[so + 1]]));
    if size < kind.min_size() || off + size > valid {
        return None;
    }
    let marker = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let is_perf = matches!(kind, RecordKind::PerfInfo32 | RecordKind::PerfInfo64);
    Some(Record {
        offset: off,
        kind,
        size,
        hook: kind
            .has_hook()
            .then(|| u16::from_le_bytes([head[6], head[7]])),
        version: head[0],
        pmc_counters: if is_perf {
            ((marker >> 8) & 7) as u8
        } else {
            0
        },
        pebs: is_perf && marker & 0x8000 != 0,
    })
}

/// The record at `off`, if it is complete and valid inside `valid` bytes. Only the record's
/// first 8 bytes are read, so `buf` may be a prefix of the buffer.
fn parse_at(buf: &[u8], off: usize, valid: usize) -> Result<Record, String> {
    // One bounds check for the 8 bytes every header starts with.
    let head: [u8; 8] = match buf.get(off..off + 8) {
        Some(h) if off + 4 <= valid => h.try_into().unwrap_or([0; 8]),
        _ => return Err("the record's marker runs past the valid end".into()),
    };
    let marker = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let b = marker.to_le_bytes();
    if b[3] & 0x80 == 0 {
        return Err(format!("marker {marker:#010x} lacks the header flag"));
    }
    let Some(kind) = RecordKind::from_marker(b[2], b[3]) else {
        return Err(format!("marker {marker:#010x} is not a known header type"));
    };
    let so = kind.size_offset();
    let size = usize::from(u16::from_le_bytes([head[so], head[so + 1]]));
    if size < kind.min_size() {
        return Err(format!(
            "{kind:?} record of size {size:#x}, smaller than its {:#x}-byte header",
            kind.min_size()
        ));
    }
    if off + size > valid {
        return Err(format!(
            "{kind:?} record of size {size:#x} runs past the valid end {valid:#x}"
        ));
    }
    let hook = kind
        .has_hook()
        .then(|| u16::from_le_bytes([head[6], head[7]]));
    let is_perf = matches!(kind, RecordKind::PerfInfo32 | RecordKind::PerfInfo64);
    Ok(Record {
        offset: off,
        kind,
        size,
        hook,
        version: b[0],
        pmc_counters: if is_perf {
            ((marker >> 8) & 7) as u8
        } else {
            0
        },
        pebs: is_perf && marker & 0x8000 != 0,
    })
}

/// Whether the buffer's first record is complete inside `valid` bytes; `prefix` needs only
/// the buffer's first `BUFFER_HEADER_SIZE + 8` bytes. A walk of the whole buffer counts at
/// least one record exactly when this holds, provided `valid` is at most the buffer's length
/// (the walk clamps `valid` to it; a caller such as `extract` passes a valid end that
/// `BufferHeader::valid_bytes` already bounded by BufferSize; the `records` fuzz target checks
/// this contract).
pub fn first_record_complete(prefix: &[u8], valid: usize) -> bool {
    valid > BUFFER_HEADER_SIZE && parse_at(prefix, BUFFER_HEADER_SIZE, valid).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(records: &[Vec<u8>], pad_to: usize) -> (Vec<u8>, usize) {
        let mut b = vec![0u8; BUFFER_HEADER_SIZE];
        for r in records {
            b.extend_from_slice(r);
            while b.len() % 8 != 0 {
                b.push(0);
            }
        }
        let valid = b.len();
        b.resize(pad_to.max(valid), 0xFF);
        (b, valid)
    }

    fn perfinfo(hook: u16, payload: usize, extra_marker: u32) -> Vec<u8> {
        let size = 0x10 + payload;
        let mut r = (0xC011_0002u32 | extra_marker).to_le_bytes().to_vec();
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.extend_from_slice(&hook.to_le_bytes());
        r.extend_from_slice(&0x1234_5678u64.to_le_bytes());
        r.resize(size, 0xAB);
        r
    }

    fn system64(hook: u16, size: usize) -> Vec<u8> {
        let mut r = 0xC002_0002u32.to_le_bytes().to_vec();
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.extend_from_slice(&hook.to_le_bytes());
        r.resize(size, 0x11);
        r
    }

    fn event_header(size: usize) -> Vec<u8> {
        let mut r = (size as u16).to_le_bytes().to_vec();
        r.push(0x13);
        r.push(0xC0);
        r.resize(size, 0x22);
        r
    }

    fn message(size: usize) -> Vec<u8> {
        let mut r = (size as u16).to_le_bytes().to_vec();
        r.push(0);
        r.push(0x90);
        r.resize(size, 0x33);
        r
    }

    #[test]
    fn walks_every_kind_with_alignment() {
        // CSwitch with PEBS (0x10 + 8 + 0x18 = 0x30), odd-size event header (0x5B), message.
        let recs = vec![
            system64(0x0000, 0x20 + 0x118),
            perfinfo(0x0524, 8 + 0x18, 0x8000),
            perfinfo(0x0524, 2 * 8 + 0x18, 0x0200),
            event_header(0x5B),
            message(0x1D),
        ];
        let (b, valid) = buffer(&recs, 0x1000);
        let w = walk(&b, valid);
        let rs = records(&b, valid);
        assert_eq!(w.count, 5);
        assert_eq!(rs.len(), 5);
        assert_eq!(w.first, Some(rs[0]));
        assert_eq!(w.torn, None);
        assert_eq!(w.end, valid);
        assert_eq!(w.trimmed, 0);
        assert_eq!(rs[1].hook, Some(0x0524));
        assert!(rs[1].pebs);
        assert_eq!(rs[2].pmc_counters, 2);
        assert_eq!(rs[3].size, 0x5B);
        assert_eq!(rs[4].offset, rs[3].offset + 0x60);
        // PERFINFO payloads start after the extended items; timestamps at +8.
        assert_eq!(rs[1].perfinfo_payload(&b).map(<[u8]>::len), Some(0x18));
        assert_eq!(rs[2].perfinfo_payload(&b).map(<[u8]>::len), Some(0x18));
        assert_eq!(rs[1].perfinfo_timestamp(&b), Some(0x1234_5678));
        assert_eq!(rs[0].perfinfo_payload(&b), None);
        assert_eq!(rs[3].perfinfo_timestamp(&b), None);
        let k = w.by_key();
        assert_eq!(k["0x0524"], 2);
        assert_eq!(k["0x0000"], 1);
        assert_eq!(k["event_header"], 1);
        assert_eq!(k["message"], 1);
    }

    #[test]
    fn stops_at_a_torn_record() {
        let recs = vec![perfinfo(0x0524, 0x18, 0), perfinfo(0x0524, 0x18, 0)];
        let (b, valid) = buffer(&recs, 0x1000);
        // Cut the second record in half.
        let cut = valid - 0x10;
        let w = walk(&b, cut);
        assert_eq!(w.count, 1);
        assert_eq!(w.end, BUFFER_HEADER_SIZE + 0x28);
        assert_eq!(w.trimmed, cut - w.end);
        assert!(w
            .torn
            .as_ref()
            .unwrap()
            .reason
            .contains("runs past the valid end"));
        // A zeroed (unwritten) reservation.
        let mut b2 = b.clone();
        b2[BUFFER_HEADER_SIZE + 0x28..valid].fill(0);
        let w = walk(&b2, valid);
        assert_eq!(w.count, 1);
        assert_eq!(w.trimmed, valid - (BUFFER_HEADER_SIZE + 0x28));
        assert!(w.torn.unwrap().reason.contains("lacks the header flag"));
        // Valid beyond the buffer: clamped.
        let w = walk(&b[..0x60], 0x10_0000);
        assert!(w.end <= 0x60);
        // An empty buffer.
        let w = walk(&b, BUFFER_HEADER_SIZE);
        assert!(w.count == 0 && w.first.is_none() && w.trimmed == 0 && w.torn.is_none());
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;
    use proptest::prelude::*;

    /// A record of `kind` (0 PerfInfo64, 1 System64, 2 event header, 3 message) of `size`
    /// bytes (at least its kind's minimum).
    fn record(kind: u8, size: usize) -> Vec<u8> {
        let (marker, so, min) = match kind % 4 {
            0 => (0xC011_0002u32, 4, 0x10),
            1 => (0xC002_0002, 4, 0x20),
            2 => (0xC013_0000, 0, 0x50),
            _ => (0x9000_0000, 0, 0x08),
        };
        let size = size.max(min);
        let mut r = marker.to_le_bytes().to_vec();
        r.resize(size, 0x5A);
        r[so..so + 2].copy_from_slice(&(size as u16).to_le_bytes());
        r
    }

    proptest! {
        /// `chain_from` counts and ends where `walk_from` does: on chains of every record
        /// kind, cut at any valid end, with any bytes overwritten (torn and garbage chains).
        #[test]
        fn chain_from_agrees_with_walk_from(
            recs in proptest::collection::vec((0u8..4, 0usize..0x300), 0..40),
            cut in 0usize..0x4000,
            damage in proptest::collection::vec((0usize..0x4000, any::<u8>()), 0..4),
            start in prop_oneof![Just(BUFFER_HEADER_SIZE), 0usize..0x100],
        ) {
            let mut b = vec![0u8; BUFFER_HEADER_SIZE];
            for (k, n) in recs {
                b.extend_from_slice(&record(k, n));
                while b.len() % 8 != 0 {
                    b.push(0);
                }
            }
            for (at, v) in damage {
                if let Some(x) = b.get_mut(at) {
                    *x = v;
                }
            }
            let valid = cut.min(b.len() + 8);
            let w = walk_from(&b, start, valid, |_| {});
            prop_assert_eq!(chain_from(&b, start, valid), (w.count, w.end));
        }
    }
}

#[cfg(test)]
mod message_tests {
    use super::message_flags as f;
    use super::*;

    /// A message record written field by field as the flags say (the writer's order: sequence,
    /// component id or GUID, timestamp, TID, PID), with `payload` bytes after.
    fn message(flags: u16, number: u16, payload: usize) -> (Vec<u8>, usize) {
        let mut r = vec![0u8, 0, 0, 0x90];
        r.extend_from_slice(&number.to_le_bytes());
        r.extend_from_slice(&flags.to_le_bytes());
        if flags & f::SEQUENCE != 0 {
            r.extend_from_slice(&0x0102_0304u32.to_le_bytes());
        }
        if flags & f::COMPONENTID != 0 {
            r.extend_from_slice(&0x0A0B_0C0Du32.to_le_bytes());
        } else if flags & f::GUID != 0 {
            r.extend_from_slice(&(0x10u8..0x20).collect::<Vec<u8>>());
        }
        if flags & f::TIMESTAMP != 0 {
            r.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        }
        if flags & f::SYSTEMINFO != 0 {
            r.extend_from_slice(&672u32.to_le_bytes());
            r.extend_from_slice(&4u32.to_le_bytes());
        }
        let header = r.len();
        r.resize(header + payload, 0xEE);
        let size = r.len() as u16;
        r[..2].copy_from_slice(&size.to_le_bytes());
        (r, header)
    }

    /// Every combination of the eight option flags is decoded into the fields it carries, and
    /// the walker steps over each record by its Size.
    #[test]
    fn every_flag_combination() {
        for flags in 0u16..=0xFF {
            for payload in [0usize, 1, 12] {
                let (rec, header) = message(flags, 0x2A, payload);
                let h = MessageHeader::parse(&rec).expect("complete record");
                assert_eq!(h.message_number, 0x2A);
                assert_eq!(h.option_flags, flags);
                assert_eq!(h.payload_offset, header, "flags {flags:#x}");
                assert_eq!(
                    h.sequence,
                    (flags & f::SEQUENCE != 0).then_some(0x0102_0304)
                );
                assert_eq!(
                    h.component_id,
                    (flags & f::COMPONENTID != 0).then_some(0x0A0B_0C0D)
                );
                let guid: [u8; 16] = core::array::from_fn(|i| 0x10 + i as u8);
                assert_eq!(
                    h.guid,
                    (flags & f::GUID != 0 && flags & f::COMPONENTID == 0).then_some(guid)
                );
                assert_eq!(
                    h.timestamp,
                    (flags & f::TIMESTAMP != 0).then_some(0x1122_3344_5566_7788)
                );
                let sys = flags & f::SYSTEMINFO != 0;
                assert_eq!(h.thread_id, sys.then_some(672));
                assert_eq!(h.process_id, sys.then_some(4));
                // In a buffer: walked, and the timestamp is the record's.
                let mut buf = vec![0u8; BUFFER_HEADER_SIZE];
                buf.extend_from_slice(&rec);
                while buf.len() % 8 != 0 {
                    buf.push(0);
                }
                buf.extend_from_slice(&rec);
                let valid = buf.len();
                let mut seen = Vec::new();
                let w = walk_from(&buf, BUFFER_HEADER_SIZE, valid, |r| {
                    seen.push((r.kind, r.size, r.timestamp(&buf)))
                });
                assert_eq!(w.torn, None, "flags {flags:#x} payload {payload}");
                assert_eq!(seen.len(), 2);
                assert_eq!(seen[0], (RecordKind::Message, rec.len(), h.timestamp));
            }
        }
    }

    /// A record shorter than the fields its flags announce gives no header (no field is read
    /// from the next record's bytes).
    #[test]
    fn short_records_give_no_header() {
        let (rec, header) = message(0xAA, 1, 0);
        assert_eq!(header, 8 + 16 + 8 + 8);
        for cut in 0..header {
            assert_eq!(MessageHeader::parse(&rec[..cut]), None, "cut at {cut}");
        }
        assert!(MessageHeader::parse(&rec).is_some());
    }
}
