//! The 0x0524 CSwitch payload (WMI_CONTEXTSWAP, etw-internals.md §5.2): 16 bytes in version 1,
//! 24 from version 2; the version is the PERFINFO marker's low byte.

/// One decoded CSwitch event payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CSwitch {
    pub new_tid: u32,
    pub old_tid: u32,
    pub new_priority: i8,
    pub old_priority: i8,
    /// v2+: PreviousCState (old thread idle) / OldThreadRank; v1: NewThreadQuantum.
    pub byte_0a: u8,
    /// v2+: NewThreadPriorityDecrement / spare; v1: OldThreadQuantum.
    pub byte_0b: i8,
    pub old_wait_reason: u8,
    /// v1/v2: the wait mode; v3+: flags whose bit 0 is the wait mode.
    pub old_wait_mode: u8,
    pub old_state: u8,
    pub old_ideal_processor: u8,
    /// v2+ (ticks).
    pub new_thread_wait_time: Option<u32>,
    /// v2+.
    pub old_remaining_quantum: Option<i32>,
}

/// Decode a payload of the given version; `None` if it is too short.
pub fn decode(payload: &[u8], version: u8) -> Option<CSwitch> {
    let need = if version <= 1 { 16 } else { 24 };
    let p = payload.get(..need)?;
    let u32_at = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
    let v2 = version >= 2;
    Some(CSwitch {
        new_tid: u32_at(0),
        old_tid: u32_at(4),
        new_priority: p[8] as i8,
        old_priority: p[9] as i8,
        byte_0a: p[0x0A],
        byte_0b: p[0x0B] as i8,
        old_wait_reason: p[0x0C],
        old_wait_mode: if version >= 3 { p[0x0D] & 1 } else { p[0x0D] },
        old_state: p[0x0E],
        old_ideal_processor: p[0x0F],
        new_thread_wait_time: v2.then(|| u32_at(0x10)),
        old_remaining_quantum: v2.then(|| u32_at(0x14) as i32),
    })
}

/// The 0x0524 record `r` of `buf` as an event payload (class `CSwitch`): the layout of its
/// version (1 to 4, etw-internals.md §5.2; others are not decoded), fields named and typed as
/// Microsoft's kernel schema names them (the Thread/CSwitch templates of versions 2 and 3 in
/// the manifest of the kernel's MOF classes that dissect.etl 3.14 ships, provider
/// 3d6fa8d1-fe05-11d0-9dda-00c04fd7ba7c: `OldThreadWaitIdealProcessor`, `Reserved` for the
/// remaining quantum); version 1's quantum bytes as §5.2 names them. The byte at +0x0D is
/// `OldThreadWaitMode` in versions 1 and 2 and `ThreadFlags` (bit 0 the wait mode) from
/// version 3, given as it is.
pub fn payload(buf: &[u8], r: &crate::etl::records::Record) -> Option<super::payload::Payload> {
    use super::payload::{Payload, Value};
    use crate::text::Untrusted;
    if r.hook != Some(0x0524) || !(1..=4).contains(&r.version) {
        return None;
    }
    let (p, _) = super::mof::kernel_payload(buf, r)?;
    let v = r.version;
    let need = if v == 1 { 0x10 } else { 0x18 };
    let mut out = Payload {
        class: "CSwitch",
        // Twelve fields at most: one allocation per row, not one per doubling.
        fields: Vec::with_capacity(12),
        ..Payload::default()
    };
    let Some(c) = decode(p, v) else {
        out.problem = Some(format!(
            "a version {v} CSwitch payload has {need:#x} bytes, this one {:#x}",
            p.len()
        ));
        return Some(out);
    };
    let mut f =
        |name: &'static str, value: Value| out.fields.push((Untrusted::from_static(name), value));
    let n = |x: u64| Value::Number(x);
    let s = |x: i8| Value::Signed(i64::from(x));
    f("NewThreadId", n(u64::from(c.new_tid)));
    f("OldThreadId", n(u64::from(c.old_tid)));
    f("NewThreadPriority", s(c.new_priority));
    f("OldThreadPriority", s(c.old_priority));
    if v == 1 {
        f("NewThreadQuantum", s(c.byte_0a as i8));
        f("OldThreadQuantum", s(c.byte_0b));
    } else {
        f("PreviousCState", n(u64::from(c.byte_0a)));
        f("SpareByte", s(c.byte_0b));
    }
    f("OldThreadWaitReason", s(c.old_wait_reason as i8));
    if v <= 2 {
        f("OldThreadWaitMode", s(p[0x0D] as i8));
    } else {
        f("ThreadFlags", s(p[0x0D] as i8));
    }
    f("OldThreadState", s(c.old_state as i8));
    f(
        "OldThreadWaitIdealProcessor",
        s(c.old_ideal_processor as i8),
    );
    if let (Some(w), Some(q)) = (c.new_thread_wait_time, c.old_remaining_quantum) {
        f("NewThreadWaitTime", n(u64::from(w)));
        f("Reserved", n(u64::from(q as u32)));
    }
    if p.len() > need {
        out.problem = Some(format!(
            "{} bytes after the last field ({})",
            p.len() - need,
            if v == 1 {
                "OldThreadWaitIdealProcessor"
            } else {
                "Reserved"
            }
        ));
    }
    Some(out)
}

#[cfg(test)]
mod payload_tests {
    use super::*;
    use crate::decode::payload::Value;
    use crate::etl::records::walk_from;

    /// A PERFINFO64 0x0524 record of `version` with `data` after its 0x10-byte header.
    fn record(version: u8, data: &[u8]) -> (Vec<u8>, crate::etl::records::Record) {
        let size = 0x10 + data.len();
        let mut buf = vec![0u8; size.next_multiple_of(8)];
        buf[..4].copy_from_slice(&(0xC011_0000u32 | u32::from(version)).to_le_bytes());
        buf[4..6].copy_from_slice(&(size as u16).to_le_bytes());
        buf[6..8].copy_from_slice(&0x0524u16.to_le_bytes());
        buf[0x10..size].copy_from_slice(data);
        let mut rs = Vec::new();
        walk_from(&buf, 0, buf.len(), |r| rs.push(*r));
        assert_eq!(rs.len(), 1);
        (buf, rs[0])
    }

    #[test]
    fn every_field_of_each_version() {
        let mut d = vec![0u8; 0x18];
        d[0..4].copy_from_slice(&1288u32.to_le_bytes());
        d[4..8].copy_from_slice(&1280u32.to_le_bytes());
        d[8] = 10;
        d[9] = 0xfe; // -2
        d[0x0A] = 3;
        d[0x0B] = 0xff; // -1
        d[0x0C] = 15;
        d[0x0D] = 0x0b; // v3+: flags (wait mode 1)
        d[0x0E] = 5;
        d[0x0F] = 2;
        d[0x10..0x14].copy_from_slice(&77u32.to_le_bytes());
        d[0x14..0x18].copy_from_slice(&(-5i32).to_le_bytes());
        let (buf, r) = record(4, &d);
        let p = payload(&buf, &r).unwrap();
        assert_eq!(p.class, "CSwitch");
        assert_eq!(p.problem, None);
        let got: Vec<(String, Value)> = p
            .fields
            .iter()
            .map(|(k, v)| (k.raw().to_string(), v.clone()))
            .collect();
        let want = [
            ("NewThreadId", Value::Number(1288)),
            ("OldThreadId", Value::Number(1280)),
            ("NewThreadPriority", Value::Signed(10)),
            ("OldThreadPriority", Value::Signed(-2)),
            ("PreviousCState", Value::Number(3)),
            ("SpareByte", Value::Signed(-1)),
            ("OldThreadWaitReason", Value::Signed(15)),
            ("ThreadFlags", Value::Signed(0x0b)),
            ("OldThreadState", Value::Signed(5)),
            ("OldThreadWaitIdealProcessor", Value::Signed(2)),
            ("NewThreadWaitTime", Value::Number(77)),
            ("Reserved", Value::Number(0xffff_fffb)),
        ];
        assert_eq!(
            got,
            want.iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<Vec<_>>()
        );
        // Version 2: the wait mode byte as it is.
        let (buf, r) = record(2, &d);
        let p = payload(&buf, &r).unwrap();
        assert_eq!(p.get("OldThreadWaitMode"), Some(&Value::Signed(0x0b)));
        assert_eq!(p.get("ThreadFlags"), None);
        // Version 1: 16 bytes, the quantum bytes; the 8 more are reported.
        let (buf, r) = record(1, &d);
        let p = payload(&buf, &r).unwrap();
        assert_eq!(p.get("NewThreadQuantum"), Some(&Value::Signed(3)));
        assert_eq!(p.get("OldThreadQuantum"), Some(&Value::Signed(-1)));
        assert_eq!(p.get("NewThreadWaitTime"), None);
        assert_eq!(
            p.problem.as_deref(),
            Some("8 bytes after the last field (OldThreadWaitIdealProcessor)")
        );
        // Short: no field, why.
        let (buf, r) = record(3, &d[..0x14]);
        let p = payload(&buf, &r).unwrap();
        assert!(p.fields.is_empty());
        assert_eq!(
            p.problem.as_deref(),
            Some("a version 3 CSwitch payload has 0x18 bytes, this one 0x14")
        );
        // Version 5: not decoded here.
        let (buf, r) = record(5, &d);
        assert_eq!(payload(&buf, &r), None);
    }
}
