//! Compact context-switch batches (hook 0x0525; etw-internals.md §4.2-§4.3).
//!
//! A batch is a PERFINFO_CCSWAP_BUFFER header (FirstTimeStamp, TidTable\[16\],
//! ThreadBasePriority\[16\]; 0x58 bytes) followed by packets packed with no alignment. Packet
//! form = bits 0-1: 0 idle-short (2 bytes, TimeDelta:14), 1 idle (4, TimeDelta:30), 2 lite (4:
//! OldThreadIdIndex:4, OldThreadPriInc:3, OldThreadStateWr:6, TimeDelta:17), 3 full (8: dword0
//! TimeDelta:30; dword1 OldThreadIdIndex:4, OldThreadStateWr:6, OldThreadPriority:5,
//! NewThreadWaitTime:17). Times chain from FirstTimeStamp; the new thread of switch i is the
//! old thread of switch i+1.

/// Size of PERFINFO_CCSWAP_BUFFER.
pub(crate) const HEADER_SIZE: usize = 0x58;
/// Size of a pending block (pool tag 'CCsw').
pub const PENDING_BLOCK_SIZE: usize = 0x400;
/// Offset of PERFINFO_CCSWAP_BUFFER in a pending block.
pub(crate) const PENDING_HEADER: usize = 0x10;

/// The packet form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    IdleShort,
    Idle,
    Lite,
    Full,
}

impl Packet {
    /// The name as the output shows it.
    pub fn name(self) -> &'static str {
        match self {
            Packet::IdleShort => "idle_short",
            Packet::Idle => "idle",
            Packet::Lite => "lite",
            Packet::Full => "full",
        }
    }
}

/// One decoded switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactSwitch {
    /// Offset of the packet in the batch (from the PERFINFO_CCSWAP_BUFFER start).
    pub offset: usize,
    pub packet: Packet,
    /// Session clock units.
    pub time: u64,
    /// 0 for the idle thread.
    pub old_tid: u32,
    /// Absolute priority (lite: base + increment); `None` for idle packets.
    pub old_priority: Option<i8>,
    /// OldThreadStateWr as packed (lite and full packets): a KWAIT_REASON below the build's
    /// MaximumWaitReason, else MaximumWaitReason + KTHREAD_STATE.
    pub old_state_wr: Option<u8>,
    /// KTHREAD_STATE; `None` for idle packets, and when the build's MaximumWaitReason is not
    /// known (then only `old_state_wr` is given).
    pub old_state: Option<u8>,
    /// KWAIT_REASON, only when the old thread was waiting.
    pub old_wait_reason: Option<u8>,
    /// Ticks, full packets only (lite packets mean "at most 1 tick").
    pub new_thread_wait_time: Option<u32>,
    /// The next switch's old thread; `None` for the last switch of a batch.
    pub new_tid: Option<u32>,
}

/// A decoded batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub first_time: u64,
    pub tids: [u32; 16],
    pub base_priorities: [i8; 16],
    pub switches: Vec<CompactSwitch>,
    /// Problems met (the batch is kept up to there).
    pub warnings: Vec<String>,
}

/// Decode a batch (`bytes` = PERFINFO_CCSWAP_BUFFER + packets). `max_wait_reason` is the
/// build's MaximumWaitReason; `None` reports OldThreadStateWr raw as a state when it cannot be
/// split (with a warning).
pub fn decode(bytes: &[u8], max_wait_reason: Option<u8>) -> Batch {
    let mut switches = Vec::with_capacity(bytes.len().saturating_sub(HEADER_SIZE) / 4);
    let mut b = decode_each(bytes, max_wait_reason, |s| switches.push(s));
    b.switches = switches;
    b
}

/// Decode a batch, handing each switch to `each` (in order, with `new_tid` filled in from the
/// next switch) instead of collecting them; the returned batch has no switches.
pub fn decode_each(
    bytes: &[u8],
    max_wait_reason: Option<u8>,
    mut each: impl FnMut(CompactSwitch),
) -> Batch {
    let mut b = Batch::default();
    if bytes.len() < HEADER_SIZE {
        b.warnings.push(format!(
            "batch of {} bytes is shorter than its {HEADER_SIZE:#x}-byte header",
            bytes.len()
        ));
        return b;
    }
    b.first_time = u64::from_le_bytes(bytes[0..8].try_into().unwrap_or([0; 8]));
    for i in 0..16 {
        let o = 8 + 4 * i;
        b.tids[i] = u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        b.base_priorities[i] = bytes[0x48 + i] as i8;
    }
    if max_wait_reason.is_none() {
        b.warnings.push(
            "MaximumWaitReason unknown for this build: OldThreadStateWr is given raw, not split into state and wait reason".into(),
        );
    }
    let mut pending: Option<CompactSwitch> = None;
    let mut time = b.first_time;
    let mut off = HEADER_SIZE;
    while off < bytes.len() {
        let rest = &bytes[off..];
        let kind = rest[0] & 3;
        let need = match kind {
            0 => 2,
            1 | 2 => 4,
            _ => 8,
        };
        if rest.len() < need {
            b.warnings.push(format!(
                "a {}-byte packet at +{off:#x} is cut off after {} bytes",
                need,
                rest.len()
            ));
            break;
        }
        let d0 = if need >= 4 {
            u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]])
        } else {
            u32::from(u16::from_le_bytes([rest[0], rest[1]]))
        };
        let (packet, delta, idx, state_wr, prio, wait) = match kind {
            0 => (Packet::IdleShort, d0 >> 2, None, None, None, None),
            1 => (Packet::Idle, d0 >> 2, None, None, None, None),
            2 => {
                let idx = ((d0 >> 2) & 0xF) as usize;
                let inc = ((d0 >> 6) & 7) as i8;
                let wr = ((d0 >> 9) & 0x3F) as u8;
                let prio = b.base_priorities[idx].wrapping_add(inc);
                (
                    Packet::Lite,
                    d0 >> 15,
                    Some(idx),
                    Some(wr),
                    Some(prio),
                    None,
                )
            }
            _ => {
                let d1 = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
                let idx = (d1 & 0xF) as usize;
                let wr = ((d1 >> 4) & 0x3F) as u8;
                let prio = ((d1 >> 10) & 0x1F) as i8;
                (
                    Packet::Full,
                    d0 >> 2,
                    Some(idx),
                    Some(wr),
                    Some(prio),
                    Some(d1 >> 15),
                )
            }
        };
        let Some(t) = time.checked_add(u64::from(delta)) else {
            b.warnings.push(format!(
                "the time wraps past 2^64 at the packet at +{off:#x}; stopped"
            ));
            break;
        };
        time = t;
        let old_tid = match idx {
            None => 0,
            Some(i) => {
                let tid = b.tids[i];
                if tid == 0 {
                    b.warnings.push(format!(
                        "the packet at +{off:#x} names TidTable[{i}], which is empty"
                    ));
                }
                tid
            }
        };
        let (old_state, old_wait_reason) = match (state_wr, max_wait_reason) {
            (None, _) => (None, None),
            (Some(wr), Some(max)) if wr < max => (Some(5), Some(wr)),
            (Some(wr), Some(max)) => (Some(wr - max), None),
            // Without the bias the value cannot be split: neither a state nor a wait reason.
            (Some(_), None) => (None, None),
        };
        if let Some(mut prev) = pending.take() {
            prev.new_tid = Some(old_tid);
            each(prev);
        }
        pending = Some(CompactSwitch {
            offset: off,
            packet,
            time,
            old_tid,
            old_priority: prio,
            old_state_wr: state_wr,
            old_state,
            old_wait_reason,
            new_thread_wait_time: wait,
            new_tid: None,
        });
        off += need;
    }
    if let Some(last) = pending {
        each(last);
    }
    b
}

/// A pending (never flushed) block: UsedBytes, StartTick, LastTimeStamp and the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingBlock {
    pub used_bytes: u32,
    pub start_tick: u32,
    pub last_timestamp: u64,
    /// `None` when no batch is open (UsedBytes 0).
    pub batch: Option<Batch>,
}

/// Decode a 0x400-byte pending block. Err when UsedBytes is neither 0 nor 0x68-0x400.
pub fn decode_pending(block: &[u8], max_wait_reason: Option<u8>) -> Result<PendingBlock, String> {
    if block.len() < PENDING_HEADER {
        return Err(format!("block of {} bytes is too short", block.len()));
    }
    let used = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
    let start_tick = u32::from_le_bytes([block[4], block[5], block[6], block[7]]);
    let last = u64::from_le_bytes(block[8..16].try_into().unwrap_or([0; 8]));
    let lo = (PENDING_HEADER + HEADER_SIZE) as u32;
    let batch = match used {
        0 => None,
        u if (lo..=PENDING_BLOCK_SIZE as u32).contains(&u) && (u as usize) <= block.len() => {
            Some(decode(&block[PENDING_HEADER..u as usize], max_wait_reason))
        }
        u => {
            return Err(format!(
                "UsedBytes {u:#x} is neither 0 nor within {lo:#x}-{PENDING_BLOCK_SIZE:#x}"
            ))
        }
    };
    Ok(PendingBlock {
        used_bytes: used,
        start_tick,
        last_timestamp: last,
        batch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(first: u64, tids: &[u32], base: &[i8]) -> Vec<u8> {
        let mut h = first.to_le_bytes().to_vec();
        for i in 0..16 {
            h.extend_from_slice(&tids.get(i).copied().unwrap_or(0).to_le_bytes());
        }
        for i in 0..16 {
            h.push(base.get(i).copied().unwrap_or(0) as u8);
        }
        h
    }

    #[test]
    fn decodes_each_packet_form_by_hand() {
        let mut b = header(1000, &[0x111, 0x222, 0x333, 0x444], &[8, 9, 10, 11]);
        // lite: idx 3, inc 2, state_wr 6 (waiting, UserRequest), delta 0x100
        let lite: u32 = 2 | (3 << 2) | (2 << 6) | (6 << 9) | (0x100 << 15);
        b.extend_from_slice(&lite.to_le_bytes());
        // idle short: delta 0x3FFF
        b.extend_from_slice(&(0x3FFFu16 << 2).to_le_bytes()); // DataType 0
                                                              // full: delta 0x20000; idx 1, state_wr 40 + 2 (Running), priority 15, wait 0x1FFFF
        let d0: u32 = 3 | (0x20000 << 2);
        let d1: u32 = 1 | (42 << 4) | (15 << 10) | (0x1FFFF << 15);
        b.extend_from_slice(&d0.to_le_bytes());
        b.extend_from_slice(&d1.to_le_bytes());
        // idle: delta 0x3FFFFFFF
        b.extend_from_slice(&((0x3FFF_FFFFu32 << 2) | 1).to_le_bytes());
        let x = decode(&b, Some(40));
        assert!(x.warnings.is_empty(), "{:?}", x.warnings);
        let s = &x.switches;
        assert_eq!(s.len(), 4);
        assert_eq!(
            (s[0].packet, s[0].time, s[0].old_tid),
            (Packet::Lite, 1000 + 0x100, 0x444)
        );
        assert_eq!(
            (s[0].old_priority, s[0].old_state, s[0].old_wait_reason),
            (Some(13), Some(5), Some(6))
        );
        assert_eq!(s[0].new_tid, Some(0));
        assert_eq!(
            (s[1].packet, s[1].time, s[1].old_tid),
            (Packet::IdleShort, 1000 + 0x100 + 0x3FFF, 0)
        );
        assert_eq!(s[1].new_tid, Some(0x222));
        assert_eq!(s[2].packet, Packet::Full);
        assert_eq!(s[2].time, 1000 + 0x100 + 0x3FFF + 0x20000);
        assert_eq!(
            (s[2].old_priority, s[2].old_state, s[2].old_wait_reason),
            (Some(15), Some(2), None)
        );
        assert_eq!(s[2].new_thread_wait_time, Some(0x1FFFF));
        assert_eq!(
            (s[3].packet, s[3].time, s[3].new_tid),
            (
                Packet::Idle,
                1000 + 0x100 + 0x3FFF + 0x20000 + 0x3FFF_FFFF,
                None
            )
        );
        assert_eq!(s[3].offset, HEADER_SIZE + 4 + 2 + 8);
        assert_eq!((s[0].old_state_wr, s[2].old_state_wr), (Some(6), Some(42)));
        // Without the build's MaximumWaitReason nothing is split: neither a state nor a wait
        // reason is made up, the packed value is kept, and the batch says why.
        let y = decode(&b, None);
        assert_eq!(y.warnings.len(), 1);
        assert!(y.warnings[0].contains("given raw"));
        for (a, z) in x.switches.iter().zip(&y.switches) {
            assert_eq!((z.old_state, z.old_wait_reason), (None, None));
            assert_eq!(z.old_state_wr, a.old_state_wr);
            assert_eq!(
                (z.time, z.old_tid, z.new_tid),
                (a.time, a.old_tid, a.new_tid)
            );
        }
    }

    #[test]
    fn bad_input_is_reported() {
        let mut b = header(u64::MAX - 5, &[7], &[1]);
        b.extend_from_slice(&(10u16 << 2).to_le_bytes()); // DataType 0
        let x = decode(&b, Some(39));
        assert_eq!(x.switches.len(), 0);
        assert!(x.warnings[0].contains("wraps"));
        let mut b = header(0, &[7], &[1]);
        b.extend_from_slice(&[3, 0, 0]); // a full packet cut off
        let x = decode(&b, Some(39));
        assert!(x.warnings[0].contains("cut off"));
        // TID index past the used table.
        let mut b = header(0, &[7], &[1]);
        b.extend_from_slice(&(2u32 | (9 << 2)).to_le_bytes());
        let x = decode(&b, Some(39));
        assert_eq!(x.switches[0].old_tid, 0);
        assert!(x.warnings[0].contains("TidTable[9]"));
        assert!(decode(&[0u8; 10], Some(39)).warnings[0].contains("shorter"));
        // Pending blocks.
        let mut blk = vec![0u8; PENDING_BLOCK_SIZE];
        assert_eq!(decode_pending(&blk, Some(39)).unwrap().batch, None);
        blk[0..4].copy_from_slice(&0x401u32.to_le_bytes());
        assert!(decode_pending(&blk, Some(39))
            .unwrap_err()
            .contains("UsedBytes 0x401"));
        blk[0..4].copy_from_slice(&0x67u32.to_le_bytes());
        assert!(decode_pending(&blk, Some(39)).is_err());
        blk[0..4].copy_from_slice(&0x68u32.to_le_bytes());
        let p = decode_pending(&blk, Some(39)).unwrap();
        assert_eq!(p.batch.unwrap().switches.len(), 0);
    }
}
