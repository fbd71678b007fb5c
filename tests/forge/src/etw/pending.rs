//! Pending compact context-switch blocks (etw-internals.md §4.1-§4.3) of the standard
//! dumps (`EtwSpec::with_pending_ccswap`), and the session clocks (§7) their times and the
//! buffers' records follow.

use super::placement::ETW_SUPPORT_BLOCK_SIZE;
use super::*;

/// Pool tag of the pending blocks ('CCsw' = 43 43 73 77).
pub(crate) const CCSW_TAG: &[u8; 4] = b"CCsw";
/// 1607 x64: the pending pointers at KPRCB.EtwSupport + 0xB20 + 8*clock (§4.1).
pub(crate) const CCSWAP_1607_OFFSET: u64 = 0xB20;
/// Later Win11 x64 (etw-internals.md §4.1, the build with KPRCB.EtwSupport at +0x8BE8): the
/// pending pointers at KPRCB.EtwSupport + 0x198 + 8*clock.
pub const CCSWAP_LATE_WIN11_OFFSET: u64 = 0x198;
/// Later Win11 x64 (§3.3): the host's per-CPU current buffers at
/// `(*(KPRCB.EtwSupport + 0x140))[LoggerId]` (ProcessorBlocks NULL in the host silo state).
pub const LATE_WIN11_BUFFERS_OFFSET: u64 = 0x140;
/// Size of the forged EtwSupport block of that layout (the pointers end at 0x1B8).
pub(crate) const ETW_SUPPORT_BLOCK_SIZE_LATE_WIN11: usize = 0x1000;

/// Whether an x64 KPRCB.EtwSupport offset names the later-Win11 EtwSupport block of §3.3 /
/// §4.1 (buffer array at +0x140, pending pointers at +0x198). The reference saw that block in
/// a build with KPRCB.EtwSupport at 0x8BE8; the public 24H2 layouts (x64-26100) put
/// KPRCB.EtwSupport at 0x8BA8. Decision: the block-internal offsets are the reference's, the
/// KPRCB offset the layouts' (a fixture takes it from its types.h), and both KPRCB offsets
/// select this block. Every other fixture keeps its route.
pub fn late_win11_etw_support(x64: bool, etw_support_offset: u64) -> bool {
    x64 && matches!(etw_support_offset, 0x8BA8 | 0x8BE8)
}

/// Unknown-offset route (1709+): where the forge puts the clock-1 pointer, and the decoys.
pub(crate) const CCSWAP_SEARCH_OFFSET: u64 = 0x2A8;
const CCSWAP_DECOY_TAG_OFFSET: u64 = 0x2B0;
const CCSWAP_DECOY_USED_OFFSET: u64 = 0x2B8;
/// Size of the EtwSupport block mapped on the pointer route for this option.
const ETW_SUPPORT_BLOCK_SIZE_SEARCH: usize = 0x1000;

/// MaximumWaitReason (the last `_KWAIT_REASON` constant) of `build` (§4.3 table).
pub(crate) fn max_wait_reason(build: u32) -> u8 {
    match build {
        0..=7601 => 37,
        7602..=14393 => 39,
        14394..=20348 => 40,
        _ => 41,
    }
}

/// The CPU speed of the standard dumps' cycle clock (3 GHz), written to every KPRCB.MHz.
pub const STANDARD_CPU_MHZ: u32 = 3000;

/// "Now" in the units of session clock `clock` (§7): 1 QPC at 10 MHz since boot, 2 system
/// time (FILETIME), 3 a 3 GHz cycle counter since boot.
pub(crate) fn clock_now(cfg: &Config, clock: u32) -> u64 {
    match clock {
        1 => cfg.system_up_time,
        2 => cfg.system_time,
        3 => cfg.system_up_time * 300,
        _ => panic!("clock type {clock}"),
    }
}

/// The value of session clock `clock` at boot (0 for the counters, the boot FILETIME for
/// system time).
pub(crate) fn clock_boot(cfg: &Config, clock: u32) -> u64 {
    match clock {
        2 => cfg.system_time - cfg.system_up_time,
        _ => 0,
    }
}

/// A session-clock time as 100 ns units since boot.
fn clock_to_uptime(cfg: &Config, clock: u32, v: u64) -> u64 {
    match clock {
        1 => v,
        2 => v - (cfg.system_time - cfg.system_up_time),
        3 => v / 300,
        _ => panic!("clock type {clock}"),
    }
}

/// `b` shifted so that its last switch lies `gap` clock units before the dump; and StartTick
/// (the KUSER_SHARED_DATA tick, 15.625 ms, of FirstTimeStamp).
fn retime(
    cfg: &Config,
    clock: u32,
    b: &crate::etw::ccswap::Batch,
    gap: u64,
) -> (crate::etw::ccswap::Batch, u32) {
    let span = b.last_time() - b.first_time;
    let now = clock_now(cfg, clock);
    let boot = clock_now(cfg, clock)
        - match clock {
            3 => cfg.system_up_time * 300,
            _ => cfg.system_up_time,
        };
    assert!(
        boot + span + gap < now,
        "batch of span {span:#x} does not fit clock {clock} before the dump"
    );
    let first = now - gap - span;
    let mut out = b.clone();
    out.first_time = first;
    for s in &mut out.switches {
        s.time = s.time - b.first_time + first;
    }
    let tick = clock_to_uptime(cfg, clock, first) / 156_250;
    (out, tick as u32)
}

/// One known batch by the start of its description.
fn known(prefix: &str) -> crate::etw::ccswap::Batch {
    crate::etw::ccswap::known_batches()
        .into_iter()
        .find(|(d, _, _)| d.starts_with(prefix))
        .unwrap_or_else(|| panic!("no known batch {prefix:?}"))
        .1
}

/// What a pending slot holds.
enum PendingKind {
    /// An open batch (possibly with no switches).
    Open(crate::etw::ccswap::Batch),
    /// UsedBytes 0: an all-zero block.
    Closed,
}

pub(crate) struct PendingCtx<'a> {
    pub(crate) cfg: &'a Config,
    pub(crate) t: &'a TypesH,
    pub(crate) route: EtwRoute,
    pub(crate) prcbs: &'a [u64],
}

/// Allocate a 0x400-byte 'CCsw' block (16-byte POOL_HEADER before it) and fill it.
fn pending_block(
    px: &PendingCtx,
    pool: &mut Pool,
    cpu: u32,
    clock: u32,
    kind: PendingKind,
    mwr: u8,
    gap: u64,
) -> (u64, u32, u32, Option<crate::etw::ccswap::Batch>) {
    use crate::etw::ccswap::{encode_pending_block, encode_pending_block_with, PENDING_BLOCK_SIZE};
    let va = pool.alloc(PENDING_BLOCK_SIZE, CCSW_TAG);
    let (bytes, batch, tick) = match kind {
        PendingKind::Open(b) => {
            let (b, tick) = retime(px.cfg, clock, &b, gap + u64::from(cpu) * 1000);
            (encode_pending_block(&b, tick, mwr), Some(b), tick)
        }
        PendingKind::Closed => {
            let empty = crate::etw::ccswap::Batch {
                first_time: 0,
                tids: Vec::new(),
                base_priorities: Vec::new(),
                switches: Vec::new(),
            };
            (encode_pending_block_with(&empty, 0, mwr, false), None, 0)
        }
    };
    pool.slice_mut(va, PENDING_BLOCK_SIZE)
        .copy_from_slice(&bytes);
    let used = u32::from_le_bytes(bytes[0..4].try_into().expect("4"));
    (va, used, tick, batch)
}

/// Place the pending blocks of [`EtwSpec::with_pending_ccswap`]; map the EtwSupport blocks
/// the route needs (appending to `es_blocks` / `kprcb_writes`).
pub(crate) fn place_pending(
    px: &PendingCtx,
    pool: &mut Pool,
    es_blocks: &mut Vec<u64>,
    kprcb_writes: &mut Vec<(u64, Vec<u8>)>,
) -> (Vec<ExpectedPending>, Vec<ExpectedPendingDecoy>) {
    let cfg = px.cfg;
    let fx = cfg.fixture.as_ref().expect("fixture");
    assert!(
        cfg.arch.is_x64() && px.route != EtwRoute::Global,
        "fixture {}: pending compact cswitch blocks need an x64 1607+ fixture",
        fx.name
    );
    assert!(
        fx.kprcb_size.is_some(),
        "fixture {}: pending compact cswitch blocks need mapped KPRCBs",
        fx.name
    );
    let es_off =
        px.t.offset_of("_KPRCB", "EtwSupport")
            .expect("_KPRCB.EtwSupport");
    let mwr = max_wait_reason(cfg.build);
    let mut pending = Vec::new();
    let mut decoys = Vec::new();
    let late = late_win11_etw_support(cfg.arch.is_x64(), es_off);
    let documented = px.route == EtwRoute::Inline || (px.route == EtwRoute::Pointer && late);
    match px.route {
        _ if documented => {
            let (group, block_size) = if late {
                (CCSWAP_LATE_WIN11_OFFSET, ETW_SUPPORT_BLOCK_SIZE_LATE_WIN11)
            } else {
                (CCSWAP_1607_OFFSET, ETW_SUPPORT_BLOCK_SIZE)
            };
            if es_blocks.is_empty() {
                for cpu in 0..cfg.cpus {
                    let block = pool.alloc(block_size, b"Etwp");
                    es_blocks.push(block);
                    kprcb_writes.push((
                        px.prcbs[cpu as usize] + es_off,
                        block.to_le_bytes().to_vec(),
                    ));
                }
            }
            let mut nearly_full = known("block filled");
            nearly_full.switches.pop(); // UsedBytes 0x3F8
            let plan: Vec<(u32, u32, PendingKind, u64)> = vec![
                (
                    0,
                    1,
                    PendingKind::Open(known("priority increments")),
                    20_000,
                ),
                (1, 1, PendingKind::Open(nearly_full), 3_000),
                (2, 1, PendingKind::Open(known("open batch with no")), 50_000),
                (3, 3, PendingKind::Open(known("delta limits")), 900_000),
                (0, 2, PendingKind::Closed, 0),
            ];
            for (cpu, clock, kind, gap) in plan {
                if cpu >= cfg.cpus {
                    continue;
                }
                let (va, used, tick, batch) = pending_block(px, pool, cpu, clock, kind, mwr, gap);
                let ptr_va = es_blocks[cpu as usize] + group + 8 * u64::from(clock);
                put_u64(pool.slice_mut(ptr_va, 8), 0, va);
                pending.push(ExpectedPending {
                    cpu,
                    clock: Some(clock),
                    block_va: va,
                    pointer_va: ptr_va,
                    used_bytes: used,
                    start_tick: tick,
                    batch,
                    max_wait_reason: mwr,
                    true_clock: clock,
                    documented_offset: true,
                    group_offset: group,
                });
            }
        }
        EtwRoute::Pointer => {
            assert!(
                es_blocks.is_empty(),
                "the pointer route has no forged EtwSupport block"
            );
            for cpu in 0..cfg.cpus {
                let es = pool.alloc(ETW_SUPPORT_BLOCK_SIZE_SEARCH, b"Etwp");
                es_blocks.push(es);
                kprcb_writes.push((px.prcbs[cpu as usize] + es_off, es.to_le_bytes().to_vec()));
                let kind = match cpu {
                    0 => PendingKind::Open(known(
                        "waiting (several wait reasons) vs states 1, 2, 3, 7; MaximumWaitReason 40",
                    )),
                    1 => PendingKind::Open(known("block filled")),
                    2 => PendingKind::Open(known("open batch with no")),
                    3 => PendingKind::Open(known("idle switches")),
                    _ => PendingKind::Closed,
                };
                let (va, used, tick, batch) = pending_block(px, pool, cpu, 1, kind, mwr, 7_000);
                let ptr_va = es + CCSWAP_SEARCH_OFFSET;
                put_u64(pool.slice_mut(ptr_va, 8), 0, va);
                pending.push(ExpectedPending {
                    cpu,
                    clock: None,
                    block_va: va,
                    pointer_va: ptr_va,
                    used_bytes: used,
                    start_tick: tick,
                    batch,
                    max_wait_reason: mwr,
                    true_clock: 1,
                    documented_offset: false,
                    group_offset: CCSWAP_SEARCH_OFFSET - 8,
                });
                // Decoy 1: a plausible pending block with the wrong pool tag.
                let (b, tick) = retime(cfg, 1, &known("wait time 0 and 1"), 9_000);
                let bytes = crate::etw::ccswap::encode_pending_block(&b, tick, mwr);
                let d1 = pool.alloc(bytes.len(), b"Etwp");
                pool.slice_mut(d1, bytes.len()).copy_from_slice(&bytes);
                let p1 = es + CCSWAP_DECOY_TAG_OFFSET;
                put_u64(pool.slice_mut(p1, 8), 0, d1);
                decoys.push(ExpectedPendingDecoy {
                    cpu,
                    pointer_va: p1,
                    block_va: d1,
                    why: "pool tag 'Etwp', not 'CCsw'".to_string(),
                });
                // Decoy 2: 'CCsw' but UsedBytes 0x50 (< 0x68).
                let mut bytes = bytes;
                bytes[0..4].copy_from_slice(&0x50u32.to_le_bytes());
                let d2 = pool.alloc(bytes.len(), CCSW_TAG);
                pool.slice_mut(d2, bytes.len()).copy_from_slice(&bytes);
                let p2 = es + CCSWAP_DECOY_USED_OFFSET;
                put_u64(pool.slice_mut(p2, 8), 0, d2);
                decoys.push(ExpectedPendingDecoy {
                    cpu,
                    pointer_va: p2,
                    block_va: d2,
                    why: "UsedBytes 0x50 (neither 0 nor 0x68..=0x400)".to_string(),
                });
            }
        }
        EtwRoute::Global | EtwRoute::Inline => unreachable!("checked"),
    }
    (pending, decoys)
}
