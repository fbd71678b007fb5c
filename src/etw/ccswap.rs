//! Pending compact context-switch batches (etw-internals.md §4.1-§4.2): one 0x400-byte block
//! (pool tag 'CCsw') per CPU per clock type, its pointer in the CPU's KPRCB.EtwSupport block.
//! Known offsets, by the build's KPRCB.EtwSupport offset (§4.1): 0x5FD8 (10.0-1607) +0xB20 +
//! 8·clock, 0x60D0 (1703) +0x6D8 + 8·clock, 0x8BE8 (a Windows 11 build) +0x198 + 8·clock. Other builds: a
//! validated search of the EtwSupport block for pointers to 'CCsw'-tagged allocations whose
//! contents validate. Each block says which method found it.

use crate::addr::VirtAddr;
use crate::decode::ccswap::{decode_pending, PendingBlock, PENDING_BLOCK_SIZE};
use crate::decode::names::maximum_wait_reason;
use crate::kernel::context::KernelContext;
use serde::Serialize;

/// Bytes of the EtwSupport block searched when no offset is known.
const SEARCH_BYTES: u64 = 0x1000;
/// x64 POOL_HEADER size and the PoolTag's offset in it.
const POOL_HEADER: u64 = 0x10;
const POOL_TAG_OFFSET: u64 = 4;
const TAG_CCSW: u32 = u32::from_le_bytes(*b"CCsw");
const MAX_CPUS: u64 = 2048;

/// How a block was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum FoundBy {
    /// A documented offset for this build; the slot gives the clock type.
    KnownOffset { offset: u64 },
    /// The validated search: a pointer at this offset of EtwSupport to a 'CCsw' allocation.
    Search { offset: u64 },
}

/// One pending block.
#[derive(Clone, Debug)]
pub struct PendingFound {
    pub cpu: u64,
    /// The clock type (slot index) when found at a known offset.
    pub clock: Option<u64>,
    pub block: VirtAddr,
    pub pointer: VirtAddr,
    pub found_by: FoundBy,
    pub decoded: PendingBlock,
}

/// Everything found, and the problems met.
#[derive(Clone, Debug, Default)]
pub struct PendingList {
    pub blocks: Vec<PendingFound>,
    pub warnings: Vec<String>,
}

/// The documented offset of the clock-0 pointer in the EtwSupport block (x64), identified as
/// the reference identifies it: by the build's `_KPRCB.EtwSupport` offset; else by build number.
pub fn known_offset(build: u32, etw_support_offset: u64) -> Option<u64> {
    match etw_support_offset {
        0x5FD8 => Some(0xB20),
        0x60D0 => Some(0x6D8),
        0x8BE8 => Some(0x198),
        _ => match build {
            10240..=14393 => Some(0xB20),
            15063 => Some(0x6D8),
            _ => None,
        },
    }
}

/// The build's `MaximumWaitReason` (the CCSWAP state bias, etw-internals.md §4.3): the
/// `_KWAIT_REASON` enum of the symbols when they have it, else the per-build table. The second
/// value says where it came from.
pub fn maximum_wait_reason_of(ctx: &KernelContext<'_>) -> (Option<u8>, &'static str) {
    if let Some(v) = ctx
        .symbols
        .enum_value("_KWAIT_REASON", "MaximumWaitReason")
        .and_then(|v| u8::try_from(v).ok())
    {
        return (Some(v), "symbols (_KWAIT_REASON.MaximumWaitReason)");
    }
    match maximum_wait_reason(ctx.build) {
        Some(v) => (Some(v), "built-in per-build table"),
        None => (None, "unknown for this build"),
    }
}

/// Find every CPU's pending blocks.
pub fn find_pending(ctx: &KernelContext<'_>) -> PendingList {
    let mut out = PendingList::default();
    let space = &ctx.space;
    if !space.arch().is_64bit() {
        out.warnings
            .push("pending CCSWAP blocks: the x86 EtwSupport offsets are unknown".into());
        return out;
    }
    let Some(es_off) = ctx
        .symbols
        .layout("_KPRCB")
        .and_then(|l| l.field("EtwSupport"))
        .map(|f| f.offset)
    else {
        out.warnings.push(format!(
            "no _KPRCB.EtwSupport layout for build {}",
            ctx.build
        ));
        return out;
    };
    let Some(kpb) = ctx
        .global("KiProcessorBlock")
        .or_else(|| ctx.kdbg().and_then(|k| k.ki_processor_block()))
    else {
        out.warnings
            .push("KiProcessorBlock is unknown (no symbols and no KDBG)".into());
        return out;
    };
    let (mwr, _) = maximum_wait_reason_of(ctx);
    let cpus = u64::from(ctx.dump.header().number_processors).clamp(1, MAX_CPUS);
    for cpu in 0..cpus {
        let es = match space
            .read_ptr(kpb.offset(cpu * 8))
            .and_then(|prcb| space.read_ptr(prcb.offset(es_off)))
        {
            Ok(p) if p.0 != 0 => p,
            Ok(_) => continue,
            Err(e) => {
                out.warnings
                    .push(format!("CPU {cpu}: KPRCB.EtwSupport: {e}"));
                continue;
            }
        };
        match known_offset(ctx.build, es_off) {
            Some(base) => {
                for clock in 0..4u64 {
                    let pointer = es.offset(base + 8 * clock);
                    let block = match space.read_ptr(pointer) {
                        Ok(p) if p.0 != 0 => p,
                        Ok(_) => continue,
                        Err(e) => {
                            out.warnings.push(format!(
                                "CPU {cpu} clock {clock}: pointer at {pointer}: {e}"
                            ));
                            continue;
                        }
                    };
                    match read_block(ctx, block, mwr) {
                        Ok(decoded) => out.blocks.push(PendingFound {
                            cpu,
                            clock: Some(clock),
                            block,
                            pointer,
                            found_by: FoundBy::KnownOffset {
                                offset: base + 8 * clock,
                            },
                            decoded,
                        }),
                        Err(why) => out
                            .warnings
                            .push(format!("CPU {cpu} clock {clock}: block at {block}: {why}")),
                    }
                }
            }
            None => search(ctx, cpu, es, mwr, &mut out),
        }
    }
    out
}

fn read_block(
    ctx: &KernelContext<'_>,
    block: VirtAddr,
    mwr: Option<u8>,
) -> Result<PendingBlock, String> {
    let bytes = ctx
        .space
        .read_vec(block, PENDING_BLOCK_SIZE)
        .map_err(|e| e.to_string())?;
    decode_pending(&bytes, mwr)
}

fn pool_tag(ctx: &KernelContext<'_>, block: VirtAddr) -> Option<u32> {
    ctx.space
        .read_u32(VirtAddr(block.0.checked_sub(POOL_HEADER)?).offset(POOL_TAG_OFFSET))
        .ok()
}

fn search(ctx: &KernelContext<'_>, cpu: u64, es: VirtAddr, mwr: Option<u8>, out: &mut PendingList) {
    let mut area = vec![0u8; SEARCH_BYTES as usize];
    let n = ctx.space.read_prefix(es, &mut area);
    for off in (0..n.saturating_sub(7)).step_by(8) {
        let v = VirtAddr(u64::from_le_bytes(
            area[off..off + 8].try_into().unwrap_or([0; 8]),
        ));
        if v.0 < 0xFFFF_8000_0000_0000 || v.0 % 16 != 0 {
            continue;
        }
        if pool_tag(ctx, v) != Some(TAG_CCSW) {
            continue;
        }
        let pointer = es.offset(off as u64);
        match read_block(ctx, v, mwr) {
            Ok(decoded) => out.blocks.push(PendingFound {
                cpu,
                clock: None,
                block: v,
                pointer,
                found_by: FoundBy::Search { offset: off as u64 },
                decoded,
            }),
            Err(why) => out.warnings.push(format!(
                "CPU {cpu}: 'CCsw' block at {v} (pointer at EtwSupport+{off:#x}) fails validation: {why}"
            )),
        }
    }
}
