//! TRACE_MESSAGE records (`etw/message.rs`), read back with a parser written from the public
//! consumer order (NT5 traceprt.cpp: sequence, component id else GUID, timestamp, TID + PID,
//! payload) and evntrace.h's MESSAGE_TRACE_HEADER, not from the writer.

use crate::etw::buffers::BufferSpec;
use crate::etw::message::*;
use crate::etw::wmi_buffer::{lay_out, RecSpec};
use crate::util::Rng;

/// The fields of a message record at `p`, parsed independently.
pub(crate) fn parse_message(b: &[u8], p: usize) -> ExpectedMessage {
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let size = usize::from(u16_at(p));
    assert_eq!(b[p + 3], 0x90, "TRACE_HEADER_FLAG | TRACE_MESSAGE");
    assert_eq!(b[p + 2], 0, "Reserved");
    let number = u16_at(p + 4);
    let flags = u16_at(p + 6);
    let mut q = p + 8;
    let mut take = |n: usize| {
        let at = q;
        q += n;
        at
    };
    let sequence = (flags & 1 != 0).then(|| u32_at(take(4)));
    let (component_id, guid) = if flags & 4 != 0 {
        (Some(u32_at(take(4))), None)
    } else if flags & 2 != 0 {
        let at = take(16);
        let g: [u8; 16] = b[at..at + 16].try_into().unwrap();
        (None, Some(crate::util::guid_to_string(&g).to_lowercase()))
    } else {
        (None, None)
    };
    let timestamp = (flags & 8 != 0).then(|| {
        let at = take(8);
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    });
    let (tid, pid) = if flags & 0x20 != 0 {
        let at = take(8);
        (Some(u32_at(at)), Some(u32_at(at + 4)))
    } else {
        (None, None)
    };
    let payload_offset = q - p;
    assert!(payload_offset <= size, "fields overrun Size");
    ExpectedMessage {
        flags,
        message_number: number,
        sequence,
        guid,
        component_id,
        timestamp,
        tid,
        pid,
        payload_len: (size - payload_offset) as u32,
        payload_offset: payload_offset as u32,
        pointer_size: match flags & 0xC0 {
            0x80 => Some(8),
            0x40 => Some(4),
            _ => None,
        },
    }
}

#[test]
fn every_flag_combination_is_offered_once() {
    let all = all_message_flag_combinations();
    assert_eq!(all.len(), 192);
    let set: std::collections::BTreeSet<u16> = all.iter().copied().collect();
    assert_eq!(set.len(), 192);
    assert!(all.iter().all(|f| f & 0xC0 != 0xC0 && *f <= 0xFF));
    // Every meaningful bit appears both set and clear.
    for bit in MESSAGE_FLAG_BITS {
        assert!(all.iter().any(|f| f & bit != 0) && all.iter().any(|f| f & bit == 0));
    }
}

/// Field sizes per flag, from the header comments of evntrace.h and the consumer order.
#[test]
fn sizes_follow_the_flags() {
    let mut rng = Rng::new(7);
    for flags in all_message_flag_combinations() {
        let m = MessageSpec::drawn(flags, 0x1234_5678_9ABC, 9, &mut rng);
        let mut want = 8 + m.payload.len();
        if flags & 1 != 0 {
            want += 4;
        }
        want += match flags & 6 {
            0 => 0,
            2 => 16,
            _ => 4, // COMPONENTID (alone or with GUID: the GUID is not written)
        };
        if flags & 8 != 0 {
            want += 8;
        }
        if flags & 0x20 != 0 {
            want += 8;
        }
        assert_eq!(m.size(), want, "flags {flags:#x}");
        assert_eq!(m.encode().len(), want);
    }
}

/// Every combination, for many seeds and payload lengths, written into buffers by the one
/// buffer writer (8-aligned records, Size unpadded) and read back by walking the chain.
#[test]
fn every_flag_combination_round_trips_through_a_buffer() {
    let all = all_message_flag_combinations();
    let mut checked = 0;
    for seed in 0..12u64 {
        let mut rng = Rng::new(0x3E55_A9E0 ^ seed);
        let specs: Vec<MessageSpec> = all
            .iter()
            .enumerate()
            .map(|(i, &f)| MessageSpec::drawn(f, 0x10_0000 + i as u64 * 977, 23, &mut rng))
            .collect();
        let recs: Vec<RecSpec> = specs.iter().cloned().map(RecSpec::TraceMessage).collect();
        let bs = BufferSpec::new(1, 0, 1, recs);
        let lo = lay_out(&bs, 0x4000, (1, 1), &mut rng);
        assert_eq!(lo.count as usize, specs.len());
        assert_eq!(lo.by_key.get("message").copied(), Some(specs.len() as u32));
        let mut p = 0x48usize;
        for m in &specs {
            assert_eq!(p % 8, 0, "8-aligned relative to the buffer start");
            let size = usize::from(u16::from_le_bytes([lo.bytes[p], lo.bytes[p + 1]]));
            assert_eq!(size, m.size(), "Size excludes padding");
            let got = parse_message(&lo.bytes, p);
            assert_eq!(got, m.expected(), "seed {seed} flags {:#x}", m.flags);
            let at = p + got.payload_offset as usize;
            assert_eq!(&lo.bytes[at..at + m.payload.len()], &m.payload[..]);
            p += (size + 7) & !7;
            checked += 1;
        }
        assert_eq!(p as u32, lo.valid, "the chain ends at valid");
    }
    assert_eq!(checked, 12 * 192);
}

/// GUID and COMPONENTID together: only the component id is written (the consumer's choice),
/// the GUID bit stays in OptionFlags.
#[test]
fn component_id_wins_over_guid() {
    let mut rng = Rng::new(1);
    let m = MessageSpec::drawn(0x06, 5, 0, &mut rng);
    let b = m.encode();
    assert_eq!(u16::from_le_bytes([b[6], b[7]]), 0x06);
    assert_eq!(b.len(), 8 + 4 + m.payload.len());
    assert_eq!(
        u32::from_le_bytes(b[8..12].try_into().unwrap()),
        m.component_id
    );
    let e = m.expected();
    assert_eq!((e.guid, e.component_id), (None, Some(m.component_id)));
}

/// The first WiFiSession message of the real ARM64 dump (file 0xBC2B8, measured): Size 0x2C,
/// MessageNumber 0x0A, flags 0xAA, GUID, QPC timestamp 0x106AEDAC, TID 0x2A0, PID 4, a 4-byte
/// payload. The writer reproduces its bytes exactly.
#[test]
fn the_real_dumps_message_shape() {
    let real: [u8; 0x2C] = [
        0x2c, 0x00, 0x00, 0x90, 0x0a, 0x00, 0xaa, 0x00, 0x93, 0xf0, 0x68, 0xf1, 0x4c, 0x12, 0xf1,
        0x32, 0x04, 0xbd, 0x77, 0xcd, 0x5d, 0xc2, 0x6d, 0xed, 0xac, 0xed, 0x6a, 0x10, 0x00, 0x00,
        0x00, 0x00, 0xa0, 0x02, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x0c, 0x01, 0x01, 0x00,
    ];
    let e = parse_message(&real, 0);
    assert_eq!(e.flags, 0xAA);
    assert_eq!(e.message_number, 0x0A);
    assert_eq!(
        e.guid.as_deref(),
        Some("f168f093-124c-32f1-04bd-77cd5dc26ded")
    );
    assert_eq!(e.timestamp, Some(0x106A_EDAC));
    assert_eq!((e.tid, e.pid, e.payload_len), (Some(0x2A0), Some(4), 4));
    assert_eq!(e.pointer_size, Some(8));
    let m = MessageSpec {
        flags: 0xAA,
        message_number: 0x0A,
        sequence: 0,
        guid: real[8..24].try_into().unwrap(),
        component_id: 0,
        timestamp: 0x106A_EDAC,
        tid: 0x2A0,
        pid: 4,
        payload: real[0x28..].to_vec(),
    };
    assert_eq!(m.encode(), real.to_vec());
    assert_eq!(m.expected(), e);
}
