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
