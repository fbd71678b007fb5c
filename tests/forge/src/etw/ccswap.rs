//! Encoder for compact context-switch batches (PERFINFO_LOG_TYPE_CONTEXTSWAP_BATCH, 0x0525) and
//! for the plain CSwitch payload (0x0524, WMI_CONTEXTSWAP), derived only from
//! `shared/reference/etw-internals.md` §4.2, §4.3 and §5.2 (and the Chappell pages
//! `perfinfo_ccswap_buffer*.txt`, `wmi_contextswap.txt`, `cswitch_class.txt`).
//!
//! Packet forms (§4.3, little-endian bit fields, LSB first; DataType in bits 0–1):
//!
//! | DataType | form | bytes | fields |
//! |---|---|---|---|
//! | 0 | idle_short | 2 | TimeDelta:14 (bits 2–15) |
//! | 1 | idle | 4 | TimeDelta:30 (bits 2–31) |
//! | 2 | lite | 4 | Index:4 (2–5), PriInc:3 (6–8), StateWr:6 (9–14), TimeDelta:17 (15–31) |
//! | 3 | full | 8 | dword0: TimeDelta:30 (2–31); dword1: Index:4 (0–3), StateWr:6 (4–9), Priority:5 (10–14), NewThreadWaitTime:17 (15–31) |
//!
//! Choice (as the kernel's encoder): old thread idle (TID 0) → idle_short if delta < 0x4000,
//! else idle. Otherwise lite if 0 ≤ priority − base ≤ 7, wait time ≤ 1 and delta < 0x20000,
//! else full. Delta of switch i = time_i − time_{i−1}, and for the first switch
//! time_0 − FirstTimeStamp (the kernel's LastTimeStamp equals FirstTimeStamp at batch start, so
//! in kernel-made batches the first delta is 0; [`known_batches`] always starts that way).
//!
//! StateWr = wait reason if State == Waiting (5), else State + MaximumWaitReason.

/// KTHREAD_STATE Waiting.
pub const STATE_WAITING: u8 = 5;
/// Size of the pending block (§4.2).
pub const PENDING_BLOCK_SIZE: usize = 0x400;
/// Size of PERFINFO_CCSWAP_BUFFER.
pub const CCSWAP_BUFFER_SIZE: usize = 0x58;
/// Offset of PERFINFO_CCSWAP_BUFFER in the pending block.
pub const PENDING_HEADER_SIZE: usize = 0x10;
/// UsedBytes of an open batch with no packets (0x10 + 0x58).
pub const EMPTY_USED_BYTES: u32 = 0x68;
/// Largest TimeDelta of the idle and full forms (30 bits).
pub const MAX_DELTA: u64 = 0x3FFF_FFFF;
/// Cap of NewThreadWaitTime (17 bits).
pub const MAX_WAIT_TIME: u32 = 0x1FFFF;

/// One context switch as the encoder takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Absolute, session clock units; non-decreasing within a batch (and ≥ `first_time`).
    pub time: u64,
    /// 0 = the idle thread (encoded as an idle packet; the other fields are ignored).
    pub old_tid: u32,
    /// Absolute priority 0..=31.
    pub old_priority: u8,
    /// KTHREAD_STATE; 5 = Waiting.
    pub old_state: u8,
    /// KWAIT_REASON, used when `old_state == 5` (must be < MaximumWaitReason).
    pub old_wait_reason: u8,
    /// Ticks (≤ 0x1FFFF: the kernel caps it).
    pub new_thread_wait_time: u32,
}

/// One batch: the PERFINFO_CCSWAP_BUFFER header plus the switches after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// FirstTimeStamp.
    pub first_time: u64,
    /// TidTable order (≤ 16, distinct, non-zero); every non-idle `old_tid` must be in it.
    pub tids: Vec<u32>,
    /// ThreadBasePriority per table entry (same length as `tids`).
    pub base_priorities: Vec<i8>,
    pub switches: Vec<Switch>,
}

impl Batch {
    /// LastTimeStamp of the pending block: the time of the last switch, or `first_time`.
    pub fn last_time(&self) -> u64 {
        self.switches.last().map_or(self.first_time, |s| s.time)
    }
}

/// The packet chosen for one switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Packet {
    IdleShort { delta: u64 },
    Idle { delta: u64 },
    Lite { idx: u32, inc: u32, delta: u64 },
    Full { idx: u32, delta: u64 },
}

impl Packet {
    fn kind(&self) -> &'static str {
        match self {
            Packet::IdleShort { .. } => "idle_short",
            Packet::Idle { .. } => "idle",
            Packet::Lite { .. } => "lite",
            Packet::Full { .. } => "full",
        }
    }

    fn size(&self) -> usize {
        packet_size(self.kind())
    }
}

/// Bytes of a packet form ("idle_short" 2, "idle" 4, "lite" 4, "full" 8).
pub fn packet_size(kind: &str) -> usize {
    match kind {
        "idle_short" => 2,
        "idle" | "lite" => 4,
        "full" => 8,
        _ => panic!("unknown packet kind {kind:?}"),
    }
}

/// Validate the batch (panics on anything the kernel could not have produced that the encoder
/// can check) and choose a packet per switch.
fn plan(b: &Batch) -> Vec<Packet> {
    assert!(b.tids.len() <= 16, "TidTable holds at most 16 entries");
    assert_eq!(
        b.tids.len(),
        b.base_priorities.len(),
        "one base priority per TidTable entry"
    );
    for (i, &t) in b.tids.iter().enumerate() {
        assert_ne!(t, 0, "the idle thread is never in the TidTable");
        assert!(!b.tids[..i].contains(&t), "duplicate TID {t} in TidTable");
    }
    let mut prev = b.first_time;
    let mut used = EMPTY_USED_BYTES as usize;
    let mut out = Vec::with_capacity(b.switches.len());
    for (n, s) in b.switches.iter().enumerate() {
        assert!(s.time >= prev, "switch {n}: time goes backwards");
        let delta = s.time - prev;
        assert!(
            delta <= MAX_DELTA,
            "switch {n}: delta {delta:#x} > 0x3FFFFFFF"
        );
        // Flush rule: the kernel flushes before adding a switch when UsedBytes + 8 > 0x400.
        assert!(
            used + 8 <= PENDING_BLOCK_SIZE,
            "switch {n}: the kernel would have flushed (UsedBytes {used:#x})"
        );
        prev = s.time;
        let p = if s.old_tid == 0 {
            if delta < 0x4000 {
                Packet::IdleShort { delta }
            } else {
                Packet::Idle { delta }
            }
        } else {
            let idx = b
                .tids
                .iter()
                .position(|&t| t == s.old_tid)
                .unwrap_or_else(|| panic!("switch {n}: TID {} not in TidTable", s.old_tid));
            assert!(s.old_priority <= 31, "switch {n}: priority > 31");
            assert!(
                s.new_thread_wait_time <= MAX_WAIT_TIME,
                "switch {n}: wait time > 0x1FFFF"
            );
            let inc = i32::from(s.old_priority) - i32::from(b.base_priorities[idx]);
            if (0..=7).contains(&inc) && s.new_thread_wait_time <= 1 && delta < 0x20000 {
                Packet::Lite {
                    idx: idx as u32,
                    inc: inc as u32,
                    delta,
                }
            } else {
                Packet::Full {
                    idx: idx as u32,
                    delta,
                }
            }
        };
        used += p.size();
        out.push(p);
    }
    out
}

/// OldThreadStateWr (6 bits).
fn state_wr(s: &Switch, max_wait_reason: u8) -> u32 {
    let v = if s.old_state == STATE_WAITING {
        assert!(
            s.old_wait_reason < max_wait_reason,
            "wait reason {} ≥ MaximumWaitReason {max_wait_reason}",
            s.old_wait_reason
        );
        u32::from(s.old_wait_reason)
    } else {
        u32::from(s.old_state) + u32::from(max_wait_reason)
    };
    assert!(v < 64, "OldThreadStateWr {v} does not fit 6 bits");
    v
}

/// The packets alone (no header), packed with no alignment.
fn encode_packets(b: &Batch, max_wait_reason: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for (s, p) in b.switches.iter().zip(plan(b)) {
        match p {
            Packet::IdleShort { delta } => {
                let v = (delta as u16) << 2;
                out.extend_from_slice(&v.to_le_bytes());
            }
            Packet::Idle { delta } => {
                let v = 1 | (delta as u32) << 2;
                out.extend_from_slice(&v.to_le_bytes());
            }
            Packet::Lite { idx, inc, delta } => {
                let v = 2
                    | idx << 2
                    | inc << 6
                    | state_wr(s, max_wait_reason) << 9
                    | (delta as u32) << 15;
                out.extend_from_slice(&v.to_le_bytes());
            }
            Packet::Full { idx, delta } => {
                let d0 = 3 | (delta as u32) << 2;
                let d1 = idx
                    | state_wr(s, max_wait_reason) << 4
                    | u32::from(s.old_priority) << 10
                    | s.new_thread_wait_time << 15;
                out.extend_from_slice(&d0.to_le_bytes());
                out.extend_from_slice(&d1.to_le_bytes());
            }
        }
    }
    out
}

/// PERFINFO_CCSWAP_BUFFER (0x58 bytes: FirstTimeStamp u64, TidTable[16] u32,
/// ThreadBasePriority[16] i8; unused entries zero) followed by the packets, chosen exactly as
/// the kernel's encoder does (§4.3), packed with no alignment. `max_wait_reason` is the build's
/// MaximumWaitReason (0x27 on 9600/14393, 40 on 17763–20348). This is the 0x0525 event payload.
///
/// Panics on a batch the kernel could not produce (see [`Switch`] and [`Batch`]; also a batch
/// the kernel would have flushed before its last switch: UsedBytes + 8 > 0x400).
pub fn encode_batch(b: &Batch, max_wait_reason: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(CCSWAP_BUFFER_SIZE + 8 * b.switches.len());
    out.extend_from_slice(&b.first_time.to_le_bytes());
    for i in 0..16 {
        let t = b.tids.get(i).copied().unwrap_or(0);
        out.extend_from_slice(&t.to_le_bytes());
    }
    for i in 0..16 {
        let p = b.base_priorities.get(i).copied().unwrap_or(0);
        out.push(p as u8);
    }
    debug_assert_eq!(out.len(), CCSWAP_BUFFER_SIZE);
    out.extend_from_slice(&encode_packets(b, max_wait_reason));
    out
}

/// The 0x400-byte pending block of an open batch: UsedBytes (0x10 + encoded length; 0x68 when
/// `b` has no switches), StartTick, LastTimeStamp (time of the last switch, or `first_time`),
/// then [`encode_batch`]'s bytes; the rest zero. Same as
/// `encode_pending_block_with(b, start_tick, max_wait_reason, true)`.
pub fn encode_pending_block(b: &Batch, start_tick: u32, max_wait_reason: u8) -> Vec<u8> {
    encode_pending_block_with(b, start_tick, max_wait_reason, true)
}

/// As [`encode_pending_block`], with `open`: when `open` is false and `b` has no switches, no
/// batch is open and the whole block is zero (UsedBytes 0, as EtwpCCSwapStart leaves it).
/// `open` is ignored when `b` has switches.
pub fn encode_pending_block_with(
    b: &Batch,
    start_tick: u32,
    max_wait_reason: u8,
    open: bool,
) -> Vec<u8> {
    let mut block = vec![0u8; PENDING_BLOCK_SIZE];
    if b.switches.is_empty() && !open {
        return block;
    }
    let body = encode_batch(b, max_wait_reason);
    let used = PENDING_HEADER_SIZE + body.len();
    assert!(used <= PENDING_BLOCK_SIZE, "batch overflows the block");
    block[0..4].copy_from_slice(&(used as u32).to_le_bytes());
    block[4..8].copy_from_slice(&start_tick.to_le_bytes());
    block[8..0x10].copy_from_slice(&b.last_time().to_le_bytes());
    block[0x10..used].copy_from_slice(&body);
    block
}

/// Which packet form the encoder chose for each switch ("idle_short", "idle", "lite", "full").
pub fn packet_kinds(b: &Batch) -> Vec<&'static str> {
    plan(b).iter().map(Packet::kind).collect()
}

/// A 0x0524 CSwitch payload (WMI_CONTEXTSWAP, §5.2). In version 1, `previous_cstate` and
/// `spare_byte` fill the bytes at 0x0A/0x0B (NewThreadQuantum/OldThreadQuantum there), and
/// `new_thread_wait_time` / `old_remaining_quantum` are not written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CSwitch {
    pub new_tid: u32,
    pub old_tid: u32,
    pub new_priority: i8,
    pub old_priority: i8,
    pub previous_cstate: u8,
    pub spare_byte: i8,
    pub old_wait_reason: u8,
    pub old_wait_mode_or_flags: u8,
    pub old_state: u8,
    pub old_ideal_processor: u8,
    pub new_thread_wait_time: u32,
    pub old_remaining_quantum: i32,
}

/// A CSwitch payload of `version` 1..=4: 16 bytes for v1, 24 otherwise.
pub fn encode_cswitch(version: u8, c: &CSwitch) -> Vec<u8> {
    assert!((1..=4).contains(&version), "CSwitch version {version}");
    let mut out = Vec::with_capacity(0x18);
    out.extend_from_slice(&c.new_tid.to_le_bytes());
    out.extend_from_slice(&c.old_tid.to_le_bytes());
    out.push(c.new_priority as u8);
    out.push(c.old_priority as u8);
    out.push(c.previous_cstate);
    out.push(c.spare_byte as u8);
    out.push(c.old_wait_reason);
    out.push(c.old_wait_mode_or_flags);
    out.push(c.old_state);
    out.push(c.old_ideal_processor);
    if version >= 2 {
        out.extend_from_slice(&c.new_thread_wait_time.to_le_bytes());
        out.extend_from_slice(&c.old_remaining_quantum.to_le_bytes());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Known sequences.

fn sw(time: u64, old_tid: u32, prio: u8, state: u8, wr: u8, wait: u32) -> Switch {
    Switch {
        time,
        old_tid,
        old_priority: prio,
        old_state: state,
        old_wait_reason: wr,
        new_thread_wait_time: wait,
    }
}

fn idle(time: u64) -> Switch {
    sw(time, 0, 0, 0, 0, 0)
}

/// A known sequence: (description, batch, MaximumWaitReason).
type KnownBatch = (&'static str, Batch, u8);

/// The first switch time of every known batch.
const T0: u64 = 0x01D9_0000_1234_5678;

/// A batch starting at [`T0`].
fn batch_at_t0(tids: Vec<u32>, base_priorities: Vec<i8>, switches: Vec<Switch>) -> Batch {
    Batch {
        first_time: T0,
        tids,
        base_priorities,
        switches,
    }
}

/// Known sequences for tests: (description, batch, MaximumWaitReason). Every batch is one the
/// kernel could produce: the first switch is at `first_time` (delta 0), the TidTable lists the
/// non-idle old threads in first-seen order, and no flush rule is violated.
pub fn known_batches() -> Vec<(&'static str, Batch, u8)> {
    vec![
        full_tid_table(),
        priority_increments(),
        wait_times(),
        delta_limits(),
        idle_between_threads(),
        // 6/7. Waiting vs non-waiting old threads, for both MaximumWaitReason values.
        waiting_and_other_states(
            "waiting (several wait reasons) vs states 1, 2, 3, 7; MaximumWaitReason 0x27",
            0x27,
        ),
        waiting_and_other_states(
            "waiting (several wait reasons) vs states 1, 2, 3, 7; MaximumWaitReason 40",
            40,
        ),
        full_packet_maxima(),
        filled_block(),
        // 10. Empty open batch.
        (
            "open batch with no switches",
            batch_at_t0(vec![], vec![], vec![]),
            40,
        ),
    ]
}

/// 1. Full 16-entry TID table, one lite switch per thread, alternating waiting/ready.
fn full_tid_table() -> KnownBatch {
    let t0 = T0;
    let tids: Vec<u32> = (0..16).map(|i| 0x1000 + 4 * i).collect();
    let base: Vec<i8> = (0..16).map(|i| (i % 16) as i8 + 1).collect();
    let switches = (0..16u64)
        .map(|i| {
            let (state, wr) = if i % 2 == 0 {
                (5, (i % 0x25) as u8)
            } else {
                (1, 0)
            };
            sw(
                t0 + 0x10 * i,
                0x1000 + 4 * i as u32,
                base[i as usize] as u8 + (i % 8) as u8,
                state,
                wr,
                (i % 2) as u32,
            )
        })
        .collect();
    (
        "full 16-entry TidTable, lite packets, first delta 0",
        batch_at_t0(tids, base, switches),
        40,
    )
}

/// 2. Priority increments: 0..=7 lite; 8, below base (negative increment) full.
fn priority_increments() -> KnownBatch {
    let t0 = T0;
    let mut switches: Vec<Switch> = (0..8u64)
        .map(|i| sw(t0 + 100 * i, 0x44, 8 + i as u8, 5, 6, 0))
        .collect();
    switches.push(sw(t0 + 900, 0x44, 16, 5, 6, 0)); // inc 8 → full
    switches.push(sw(t0 + 1000, 0x44, 7, 5, 6, 0)); // inc −1 → full
    switches.push(sw(t0 + 1100, 0x48, 0, 1, 0, 0)); // inc −15 → full
    switches.push(sw(t0 + 1200, 0x48, 31, 2, 0, 0)); // inc 16, priority 31 → full
    switches.push(sw(t0 + 1300, 0x48, 22, 2, 0, 1)); // inc 7 → lite
    (
        "priority increments 0..=7 lite; 8 / negative / below base full",
        batch_at_t0(vec![0x44, 0x48], vec![8, 15], switches),
        0x27,
    )
}

/// 3. New-thread wait times: 0, 1 lite; 2, 0x1FFFF full.
fn wait_times() -> KnownBatch {
    let t0 = T0;
    let switches = vec![
        sw(t0, 0x100, 10, 5, 0, 0),
        sw(t0 + 5, 0x100, 10, 5, 0, 1),
        sw(t0 + 10, 0x100, 10, 5, 0, 2),
        sw(t0 + 15, 0x100, 10, 5, 0, 0x1FFFF),
        sw(t0 + 20, 0x100, 10, 5, 0, 0x1000),
    ];
    (
        "wait time 0 and 1 lite, 2 and 0x1FFFF full",
        batch_at_t0(vec![0x100], vec![9], switches),
        40,
    )
}

/// 4. Delta limits.
fn delta_limits() -> KnownBatch {
    let mut t = T0;
    let mut switches = vec![idle(t)]; // first, delta 0 → idle_short
    t += 0x3FFF;
    switches.push(idle(t)); // idle_short (largest)
    t += 0x4000;
    switches.push(idle(t)); // idle (smallest)
    t += MAX_DELTA;
    switches.push(idle(t)); // idle, largest delta
    t += 0x1FFFF;
    switches.push(sw(t, 0x200, 12, 5, 13, 0)); // lite, largest delta
    t += 0x20000;
    switches.push(sw(t, 0x200, 12, 5, 13, 0)); // full, smallest delta forcing it
    t += MAX_DELTA;
    switches.push(sw(t, 0x204, 9, 3, 0, 1)); // full, largest delta
    t += 0;
    switches.push(sw(t, 0x204, 9, 3, 0, 1)); // lite, delta 0
    t += 1;
    switches.push(idle(t)); // idle_short, delta 1
    (
        "delta limits: 0x3FFF/0x4000 idle, 0x1FFFF/0x20000 lite/full, 0x3FFFFFFF",
        batch_at_t0(vec![0x200, 0x204], vec![12, 8], switches),
        0x27,
    )
}

/// 5. Idle switches interleaved with threads; batch starting with the idle thread.
fn idle_between_threads() -> KnownBatch {
    let t0 = T0;
    let switches = vec![
        idle(t0),
        sw(t0 + 0x50, 0x310, 8, 5, 15, 0),
        idle(t0 + 0x60),
        idle(t0 + 0x5060),
        sw(t0 + 0x5070, 0x314, 9, 7, 0, 0),
        idle(t0 + 0x5071),
        sw(t0 + 0x6000, 0x310, 8, 5, 4, 3),
    ];
    (
        "idle switches (short and long) between threads",
        batch_at_t0(vec![0x310, 0x314], vec![8, 9], switches),
        40,
    )
}

/// 6/7. Waiting vs non-waiting old threads for MaximumWaitReason `mwr`, in lite and full
/// packets.
fn waiting_and_other_states(desc: &'static str, mwr: u8) -> KnownBatch {
    let mut switches = Vec::new();
    let mut t = T0;
    let cases: [(u8, u8); 10] = [
        (5, 0),
        (5, 6),
        (5, 13),
        (5, 15),
        (5, 0x24),
        (5, mwr - 1),
        (1, 0),
        (2, 0),
        (3, 0),
        (7, 0),
    ];
    for (k, &(state, wr)) in cases.iter().enumerate() {
        // Lite for thread 0x400, full (wait time 2) for thread 0x404.
        switches.push(sw(t, 0x400, 11, state, wr, 0));
        t += 0x30 + k as u64;
        switches.push(sw(t, 0x404, 13, state, wr, 2));
        t += 0x30;
    }
    (
        desc,
        batch_at_t0(vec![0x400, 0x404], vec![10, 13], switches),
        mwr,
    )
}

/// 8. Bit-field extremes in a full packet: index 15, priority 31, wait 0x1FFFF, state 7.
fn full_packet_maxima() -> KnownBatch {
    let t0 = T0;
    let tids: Vec<u32> = (1..=16).map(|i| i * 8).collect();
    let mut switches: Vec<Switch> = (0..16u64)
        .map(|i| sw(t0 + i, (i as u32 + 1) * 8, 4, 1, 0, 0))
        .collect();
    switches.push(sw(t0 + 15 + MAX_DELTA, 128, 31, 7, 0, 0x1FFFF));
    (
        "full packet with every field at its maximum (index 15, priority 31, state 7)",
        batch_at_t0(tids, vec![4; 16], switches),
        40,
    )
}

/// 9. A batch filled to exactly 0x400 bytes: 228 lite packets (UsedBytes 0x3F8) + 1 full.
fn filled_block() -> KnownBatch {
    let t0 = T0;
    let mut switches: Vec<Switch> = (0..228u64)
        .map(|i| {
            let tid = [0x500, 0x504, 0x508][(i % 3) as usize];
            sw(
                t0 + 7 * i,
                tid,
                10 + (i % 3) as u8,
                5,
                (i % 30) as u8,
                (i % 2) as u32,
            )
        })
        .collect();
    switches.push(sw(t0 + 7 * 228, 0x500, 20, 2, 0, 9));
    (
        "block filled to UsedBytes 0x400 (228 lite + 1 full)",
        batch_at_t0(vec![0x500, 0x504, 0x508], vec![10, 10, 10], switches),
        40,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch1(tids: Vec<u32>, base: Vec<i8>, switches: Vec<Switch>) -> Batch {
        Batch {
            first_time: 1000,
            tids,
            base_priorities: base,
            switches,
        }
    }

    fn packets(b: &Batch, mwr: u8) -> Vec<u8> {
        encode_batch(b, mwr)[CCSWAP_BUFFER_SIZE..].to_vec()
    }

    #[test]
    fn ccswap_lite_packet_by_hand() {
        // idx 3, inc 2, state 5 / wait reason 6, delta 0x100:
        // 2 | 3<<2 | 2<<6 | 6<<9 | 0x100<<15 = 0x2 + 0xC + 0x80 + 0xC00 + 0x800000 = 0x00800C8E
        let b = batch1(
            vec![11, 12, 13, 14],
            vec![8, 8, 8, 8],
            vec![
                sw(1000, 11, 8, 1, 0, 0),
                sw(1100, 12, 8, 1, 0, 0),
                sw(1200, 13, 8, 1, 0, 0),
                sw(1200 + 0x100, 14, 10, 5, 6, 1),
            ],
        );
        let p = packets(&b, 0x27);
        assert_eq!(p.len(), 16);
        // the first three: idx 0/1/2, inc 0, state 1 + 0x27 = 0x28, deltas 0, 100, 100.
        // 2 | 0<<2 | 0x28<<9 = 0x5002
        assert_eq!(&p[0..4], &[0x02, 0x50, 0x00, 0x00]);
        // 2 | 1<<2 | 0x28<<9 | 100<<15 = 0x6 + 0x5000 + 0x320000 = 0x00325006
        assert_eq!(&p[4..8], &[0x06, 0x50, 0x32, 0x00]);
        assert_eq!(&p[12..16], &[0x8E, 0x0C, 0x80, 0x00]);
        assert_eq!(packet_kinds(&b), vec!["lite"; 4]);
    }

    #[test]
    fn ccswap_full_packet_by_hand() {
        // idx 1, waiting / reason 6, priority 9 (base 9, but wait time 2), delta 0x20000:
        // dword0 = 3 | 0x20000<<2 = 0x00080003
        // dword1 = 1 | 6<<4 | 9<<10 | 2<<15 = 0x1 + 0x60 + 0x2400 + 0x10000 = 0x00012461
        let b = batch1(
            vec![0x20, 0x24],
            vec![9, 9],
            vec![
                sw(1000, 0x20, 9, 5, 0, 0),
                sw(1000 + 0x20000, 0x24, 9, 5, 6, 2),
            ],
        );
        let p = packets(&b, 40);
        assert_eq!(packet_kinds(&b), vec!["lite", "full"]);
        assert_eq!(p.len(), 4 + 8);
        assert_eq!(&p[0..4], &[0x02, 0x00, 0x00, 0x00]);
        assert_eq!(&p[4..12], &[0x03, 0x00, 0x08, 0x00, 0x61, 0x24, 0x01, 0x00]);
    }

    #[test]
    fn ccswap_full_packet_all_ones() {
        // idx 15, state 7 + 40 = 47 (0b101111), priority 31, wait 0x1FFFF, delta 0x3FFFFFFF:
        // dword0 = 0xFFFFFFFF; dword1 = 0xF | 0x2F0 | 0x7C00 | 0xFFFF8000 = 0xFFFFFEFF
        let (_, b, mwr) = known_batches()
            .into_iter()
            .find(|(d, _, _)| d.starts_with("full packet with every field"))
            .unwrap();
        let p = packets(&b, mwr);
        assert_eq!(p.len(), 16 * 4 + 8);
        assert_eq!(&p[64..], &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF, 0xFF]);
    }

    #[test]
    fn ccswap_idle_packets_by_hand() {
        let b = batch1(
            vec![],
            vec![],
            vec![
                idle(1000),
                idle(1000 + 0x3FFF),
                idle(1000 + 0x3FFF + 0x4000),
                idle(1000 + 0x3FFF + 0x4000 + 0x1234),
            ],
        );
        assert_eq!(
            packet_kinds(&b),
            vec!["idle_short", "idle_short", "idle", "idle_short"]
        );
        let p = packets(&b, 40);
        // 0<<2 = 0x0000; 0x3FFF<<2 = 0xFFFC; 1 | 0x4000<<2 = 0x00010001; 0x1234<<2 = 0x48D0
        assert_eq!(
            p,
            vec![0x00, 0x00, 0xFC, 0xFF, 0x01, 0x00, 0x01, 0x00, 0xD0, 0x48]
        );
        // largest idle delta: 1 | 0x3FFFFFFF<<2 = 0xFFFFFFFD
        let b = batch1(vec![], vec![], vec![idle(1000), idle(1000 + MAX_DELTA)]);
        assert_eq!(packets(&b, 40), vec![0, 0, 0xFD, 0xFF, 0xFF, 0xFF]);
    }

    #[test]
    fn ccswap_lite_full_delta_boundary() {
        let b = batch1(
            vec![5],
            vec![8],
            vec![
                sw(1000, 5, 8, 2, 0, 0),
                sw(1000 + 0x1FFFF, 5, 8, 2, 0, 0),
                sw(1000 + 0x1FFFF + 0x20000, 5, 8, 2, 0, 0),
            ],
        );
        assert_eq!(packet_kinds(&b), vec!["lite", "lite", "full"]);
        let p = packets(&b, 0x27);
        // lite, delta 0x1FFFF: 2 | (2+0x27)<<9 | 0x1FFFF<<15 = 0x2 + 0x5200 + 0xFFFF8000 = 0xFFFFD202
        assert_eq!(&p[4..8], &[0x02, 0xD2, 0xFF, 0xFF]);
        // full: dword0 = 3 | 0x20000<<2 = 0x00080003; dword1 = 0 | 0x29<<4 | 8<<10 = 0x290 + 0x2000 = 0x00002290
        assert_eq!(&p[8..16], &[0x03, 0x00, 0x08, 0x00, 0x90, 0x22, 0x00, 0x00]);
    }

    #[test]
    fn ccswap_choice_rules() {
        let base = 8i8;
        let b = batch1(
            vec![7],
            vec![base],
            vec![
                sw(1000, 7, 8, 5, 0, 0),  // inc 0
                sw(1000, 7, 15, 5, 0, 1), // inc 7, wait 1
                sw(1000, 7, 16, 5, 0, 0), // inc 8
                sw(1000, 7, 7, 5, 0, 0),  // below base
                sw(1000, 7, 9, 5, 0, 2),  // wait 2
            ],
        );
        assert_eq!(
            packet_kinds(&b),
            vec!["lite", "lite", "full", "full", "full"]
        );
    }

    #[test]
    fn ccswap_packet_sizes() {
        assert_eq!(packet_size("idle_short"), 2);
        assert_eq!(packet_size("idle"), 4);
        assert_eq!(packet_size("lite"), 4);
        assert_eq!(packet_size("full"), 8);
        for (d, b, mwr) in known_batches() {
            let want: usize = packet_kinds(&b).iter().map(|k| packet_size(k)).sum();
            assert_eq!(
                encode_batch(&b, mwr).len(),
                CCSWAP_BUFFER_SIZE + want,
                "{d}"
            );
        }
    }

    #[test]
    fn ccswap_header_0x58() {
        let b = batch1(vec![0x11223344, 0x55], vec![-2, 31], vec![]);
        let e = encode_batch(&b, 40);
        assert_eq!(e.len(), 0x58);
        assert_eq!(&e[0..8], &1000u64.to_le_bytes());
        assert_eq!(&e[8..12], &[0x44, 0x33, 0x22, 0x11]);
        assert_eq!(&e[12..16], &[0x55, 0, 0, 0]);
        assert!(e[16..0x48].iter().all(|&x| x == 0));
        assert_eq!(e[0x48], 0xFE);
        assert_eq!(e[0x49], 31);
        assert!(e[0x4A..0x58].iter().all(|&x| x == 0));
    }

    #[test]
    fn ccswap_pending_blocks() {
        // empty, open
        let empty = batch1(vec![], vec![], vec![]);
        let blk = encode_pending_block(&empty, 0x1234, 40);
        assert_eq!(blk.len(), 0x400);
        assert_eq!(&blk[0..4], &[0x68, 0, 0, 0]);
        assert_eq!(&blk[4..8], &[0x34, 0x12, 0, 0]);
        assert_eq!(&blk[8..16], &1000u64.to_le_bytes());
        assert!(blk[0x68..].iter().all(|&x| x == 0));
        // empty, not open: all zero
        let blk = encode_pending_block_with(&empty, 0x1234, 40, false);
        assert!(blk.iter().all(|&x| x == 0));
        // partial: lite + idle_short + full = 14 bytes
        let b = batch1(
            vec![9],
            vec![8],
            vec![sw(1000, 9, 8, 5, 1, 0), idle(1010), sw(1030, 9, 8, 5, 1, 5)],
        );
        let blk = encode_pending_block(&b, 7, 40);
        assert_eq!(u32::from_le_bytes(blk[0..4].try_into().unwrap()), 0x68 + 14);
        assert_eq!(u64::from_le_bytes(blk[8..16].try_into().unwrap()), 1030);
        assert_eq!(&blk[0x10..0x68 + 14], &encode_batch(&b, 40)[..]);
        assert!(blk[0x68 + 14..].iter().all(|&x| x == 0));
        // filled to exactly 0x400
        let (_, b, mwr) = known_batches()
            .into_iter()
            .find(|(d, _, _)| d.starts_with("block filled"))
            .unwrap();
        let blk = encode_pending_block(&b, 0, mwr);
        assert_eq!(blk.len(), 0x400);
        assert_eq!(u32::from_le_bytes(blk[0..4].try_into().unwrap()), 0x400);
        // every known batch fits
        for (d, b, mwr) in known_batches() {
            let blk = encode_pending_block(&b, 1, mwr);
            let used = u32::from_le_bytes(blk[0..4].try_into().unwrap()) as usize;
            assert!((0x68..=0x400).contains(&used), "{d}");
            assert_eq!(used, 0x10 + encode_batch(&b, mwr).len(), "{d}");
        }
    }

    #[test]
    #[should_panic(expected = "would have flushed")]
    fn ccswap_overfull_batch_panics() {
        let (_, mut b, mwr) = known_batches()
            .into_iter()
            .find(|(d, _, _)| d.starts_with("block filled"))
            .unwrap();
        let last = b.switches.last().unwrap().clone();
        b.switches.push(idle(last.time));
        encode_batch(&b, mwr);
    }

    #[test]
    fn ccswap_state_wr() {
        let s = |state, wr| sw(0, 1, 0, state, wr, 0);
        assert_eq!(state_wr(&s(5, 6), 0x27), 6);
        assert_eq!(state_wr(&s(5, 0x26), 0x27), 0x26);
        assert_eq!(state_wr(&s(1, 6), 0x27), 0x28);
        assert_eq!(state_wr(&s(7, 0), 0x27), 0x2E);
        assert_eq!(state_wr(&s(2, 0), 40), 42);
        assert_eq!(state_wr(&s(0, 0), 40), 40);
    }

    #[test]
    fn ccswap_known_batches_cover_brief() {
        let all = known_batches();
        let mut kinds = std::collections::BTreeSet::new();
        let mut mwrs = std::collections::BTreeSet::new();
        let mut max_table = 0;
        for (_, b, mwr) in &all {
            kinds.extend(packet_kinds(b));
            mwrs.insert(*mwr);
            max_table = max_table.max(b.tids.len());
            if let Some(s) = b.switches.first() {
                assert_eq!(s.time, b.first_time, "first switch has delta 0");
            }
            // TidTable in first-seen order, and complete.
            let mut seen = Vec::new();
            for s in &b.switches {
                if s.old_tid != 0 && !seen.contains(&s.old_tid) {
                    seen.push(s.old_tid);
                }
            }
            assert_eq!(seen, b.tids);
        }
        assert_eq!(kinds.len(), 4);
        assert!(mwrs.contains(&0x27) && mwrs.contains(&40));
        assert_eq!(max_table, 16);
        let (_, b, _) = &all[3];
        assert_eq!(
            packet_kinds(b),
            vec![
                "idle_short",
                "idle_short",
                "idle",
                "idle",
                "lite",
                "full",
                "full",
                "lite",
                "idle_short"
            ]
        );
    }

    #[test]
    fn ccswap_cswitch_payloads() {
        let c = CSwitch {
            new_tid: 0x1234,
            old_tid: 0xABCDEF01,
            new_priority: 15,
            old_priority: -1,
            previous_cstate: 2,
            spare_byte: -3,
            old_wait_reason: 6,
            old_wait_mode_or_flags: 0x0B,
            old_state: 5,
            old_ideal_processor: 0xFE,
            new_thread_wait_time: 0x0001_0002,
            old_remaining_quantum: -2,
        };
        let v1 = encode_cswitch(1, &c);
        assert_eq!(
            v1,
            vec![
                0x34, 0x12, 0x00, 0x00, 0x01, 0xEF, 0xCD, 0xAB, 0x0F, 0xFF, 0x02, 0xFD, 0x06, 0x0B,
                0x05, 0xFE
            ]
        );
        let v4 = encode_cswitch(4, &c);
        assert_eq!(
            v4,
            vec![
                0x34, 0x12, 0x00, 0x00, 0x01, 0xEF, 0xCD, 0xAB, 0x0F, 0xFF, 0x02, 0xFD, 0x06, 0x0B,
                0x05, 0xFE, 0x02, 0x00, 0x01, 0x00, 0xFE, 0xFF, 0xFF, 0xFF
            ]
        );
        assert_eq!(encode_cswitch(2, &c), v4);
        assert_eq!(encode_cswitch(3, &c), v4);
    }
}
