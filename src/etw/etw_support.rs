//! Where `_KPRCB.EtwSupport` is, established from evidence when the layout is not the
//! kernel's own (issue 26: "a layout, offset or enum limit is a hypothesis until the dump
//! confirms it").
//!
//! `KPRCB.EtwSupport` points to each CPU's ETW tracing block (its type is in no public PDB,
//! etw-internals.md §3.3/§4.1), which holds the CPU's current buffer of every per-CPU session
//! (directly, as EX_FAST_REFs, or through one array indexed by LoggerId) and the pointers to its
//! pending compact context-switch blocks ('CCsw'). Those contents are the evidence:
//!
//! * a candidate offset is **plausible** when on every CPU (KiProcessorBlock\[cpu\]) it holds a
//!   kernel address, aligned to the pool's allocation granularity, different from every other
//!   CPU's value and not inside that CPU's KPRCB;
//! * a CPU **testifies** for it when the first `SCAN_BYTES` of the block it points to hold a
//!   pointer (low EX_FAST_REF bits masked) to a WMI_BUFFER_HEADER whose ProcessorIndex is that
//!   CPU (directly or through one array of such pointers), or to a block tagged 'CCsw'.
//!
//! With the kernel's own layout (PDB, ISF, exact built-in match) the offset is used as given.
//! Otherwise (a hand-written era table, the nearest earlier build's layout) the layout's offset
//! is checked; when no CPU testifies for it and another offset has testimony, that offset is
//! used (the layout's is then contradicted, and said so); when nothing testifies anywhere (no
//! per-CPU session and no pending block), the layout's offset is used and said to be
//! unconfirmed. Ties between searched offsets are not broken by guessing: none is used.

use crate::addr::VirtAddr;
use crate::bytes::LeBytes;
use crate::dump::Arch;
use crate::etl::header::{BufferHeader, BUFFER_HEADER_SIZE};
use crate::kernel::context::{KernelContext, Located, LocatedHow};
use crate::symbols::LayoutSource;

/// Bytes of a tracing block read for evidence.
pub(crate) const SCAN_BYTES: usize = 0x1000;
/// Most CPUs examined (the rest are not needed to decide).
const MAX_CPUS: u64 = 64;
/// KPRCB bytes searched when the layout gives no size.
const DEFAULT_KPRCB_BYTES: u64 = 0x10000;
/// Largest KPRCB searched.
const MAX_KPRCB_BYTES: u64 = 0x20000;
/// 'CCsw', the pool tag of pending compact context-switch blocks.
const TAG_CCSW: [u8; 4] = *b"CCsw";

/// Where `_KPRCB.EtwSupport` is (cached in the context: computed once per dump).
pub fn locate(ctx: &KernelContext<'_>) -> Located {
    ctx.etw_support.get_or_init(|| compute(ctx)).clone()
}

fn compute(ctx: &KernelContext<'_>) -> Located {
    let layout = ctx.symbols.layout("_KPRCB");
    let given = layout.and_then(|l| l.field("EtwSupport").map(|f| (f.offset, l.source)));
    if let Some((off, src)) = given {
        if matches!(
            src,
            LayoutSource::Pdb | LayoutSource::Isf | LayoutSource::BuiltinExact
        ) {
            return Located {
                offset: Some(off),
                how: LocatedHow::Symbols,
                evidence: format!(
                    "_KPRCB.EtwSupport at {off:#x} from the kernel's own layout ({})",
                    src.name()
                ),
            };
        }
    }
    let prcbs = match prcb_copies(ctx, layout.map_or(DEFAULT_KPRCB_BYTES, |l| l.size)) {
        Ok(p) => p,
        Err(why) => {
            return Located {
                offset: given.map(|g| g.0),
                how: LocatedHow::Unconfirmed,
                evidence: format!("the KPRCBs cannot be read to confirm it: {why}"),
            }
        }
    };
    let arch = ctx.space.arch();
    let psize = arch.pointer_size() as usize;
    // The layout's offset first.
    if let Some((off, src)) = given {
        let t = testimony(ctx, &prcbs, off as usize, arch);
        if let Some(n) = t.filter(|&n| n > 0) {
            return Located {
                offset: Some(off),
                how: LocatedHow::Confirmed,
                evidence: format!(
                    "_KPRCB.EtwSupport at {off:#x} ({} layout) confirmed: on {n} of {} CPUs it points to a block holding that CPU's trace buffers or pending blocks",
                    src.name(),
                    prcbs.len()
                ),
            };
        }
    }
    // Search every pointer-aligned offset of the KPRCB.
    let len = prcbs.iter().map(|p| p.1.len()).min().unwrap_or(0);
    let mut best: Vec<(usize, usize)> = Vec::new();
    for off in (0..len.saturating_sub(psize - 1)).step_by(psize) {
        if let Some(n) = testimony(ctx, &prcbs, off, arch).filter(|&n| n > 0) {
            match best.first() {
                Some(&(_, m)) if n < m => {}
                Some(&(_, m)) if n == m => best.push((off, n)),
                _ => best = vec![(off, n)],
            }
        }
    }
    let layout_says = given.map_or("no layout gives it".to_string(), |(o, s)| {
        format!("the {} layout's {o:#x} has no CPU's evidence", s.name())
    });
    match best.as_slice() {
        [(off, n)] => Located {
            offset: Some(*off as u64),
            how: LocatedHow::Searched,
            evidence: format!(
                "_KPRCB.EtwSupport found by search at {off:#x} ({layout_says}): on {n} of {} CPUs the pointer there leads to a block holding that CPU's trace buffers or pending blocks",
                prcbs.len()
            ),
        },
        [] => Located {
            offset: given.map(|g| g.0),
            how: LocatedHow::Unconfirmed,
            evidence: match given {
                Some((o, s)) => format!(
                    "_KPRCB.EtwSupport at {o:#x} ({} layout) is unconfirmed: no offset of the KPRCB leads to a block holding a CPU's trace buffers or pending blocks (no per-CPU session, no pending batch, or the blocks are not in the dump)",
                    s.name()
                ),
                None => "no layout gives _KPRCB.EtwSupport and no offset of the KPRCB leads to a block holding a CPU's trace buffers or pending blocks".into(),
            },
        },
        many => Located {
            offset: None,
            how: LocatedHow::Ambiguous,
            evidence: format!(
                "_KPRCB.EtwSupport not located: {layout_says}, and {} offsets ({}) have the same evidence; none is used",
                many.len(),
                many.iter()
                    .take(8)
                    .map(|(o, _)| format!("{o:#x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    }
}

/// Why the KPRCBs cannot be read.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
enum NoPrcbs {
    /// Where a CPU's KPRCB is cannot be told (the kernel layer's reason).
    #[error("{0}")]
    Address(String),
    #[error("CPU {cpu}'s KPRCB at {prcb} is not in the dump")]
    NotInDump { cpu: u64, prcb: VirtAddr },
}

/// Each CPU's KPRCB address and first `len` bytes.
fn prcb_copies(ctx: &KernelContext<'_>, len: u64) -> Result<Vec<(VirtAddr, Vec<u8>)>, NoPrcbs> {
    let len = len.clamp(0x100, MAX_KPRCB_BYTES) as usize;
    let cpus = u64::from(ctx.processors()).clamp(1, MAX_CPUS);
    let mut out = Vec::new();
    for cpu in 0..cpus {
        let prcb = crate::kernel::processes::prcb(ctx, cpu).map_err(NoPrcbs::Address)?;
        let mut b = vec![0u8; len];
        let n = ctx.space.read_prefix(prcb, &mut b);
        if n == 0 {
            return Err(NoPrcbs::NotInDump { cpu, prcb });
        }
        b.truncate(n);
        out.push((prcb, b));
    }
    Ok(out)
}

/// How many CPUs testify for `off`; `None` when the offset is not plausible on every CPU.
fn testimony(
    ctx: &KernelContext<'_>,
    prcbs: &[(VirtAddr, Vec<u8>)],
    off: usize,
    arch: Arch,
) -> Option<usize> {
    let psize = arch.pointer_size() as usize;
    let align = crate::kernel::pool::header_size(&ctx.space);
    let mut values = Vec::with_capacity(prcbs.len());
    for (prcb, bytes) in prcbs {
        let v = if psize == 8 {
            bytes.u64_at(off)?
        } else {
            u64::from(bytes.u32_at(off)?)
        };
        let v = VirtAddr::new(v);
        let inside = v.get() >= prcb.get() && v.get() < prcb.get() + bytes.len() as u64;
        if !v.is_kernel(arch.width()) || v.get() % align != 0 || inside || values.contains(&v) {
            return None;
        }
        values.push(v);
    }
    Some(
        values
            .iter()
            .enumerate()
            .filter(|(cpu, v)| block_testifies(ctx, **v, *cpu as u64, arch))
            .count(),
    )
}

/// Does the block at `es` hold a pointer to one of `cpu`'s trace buffers (directly or through
/// one array) or to a 'CCsw' block?
fn block_testifies(ctx: &KernelContext<'_>, es: VirtAddr, cpu: u64, arch: Arch) -> bool {
    let psize = arch.pointer_size() as usize;
    let width = arch.width();
    let space = &ctx.space;
    let mut area = vec![0u8; SCAN_BYTES];
    let n = space.read_prefix(es, &mut area);
    let ptr_at = |b: &[u8], o: usize| -> Option<VirtAddr> {
        let v = if psize == 8 {
            b.u64_at(o)?
        } else {
            u64::from(b.u32_at(o)?)
        };
        let v = VirtAddr::new(v).fast_ref_object(width);
        (v.is_kernel(width) && v != es).then_some(v)
    };
    let is_cpu_buffer = |v: VirtAddr| -> bool {
        let mut h = [0u8; BUFFER_HEADER_SIZE];
        space.read_prefix(v, &mut h) == BUFFER_HEADER_SIZE
            && BufferHeader::from_bytes(&h).is_some_and(|h| {
                h.processor_index == cpu
                    && h.logger_id < 1024
                    && (0x400..=64 << 20).contains(&h.buffer_size)
                    && h.buffer_size % 0x400 == 0
            })
    };
    for o in (0..n.saturating_sub(psize - 1)).step_by(psize) {
        let Some(v) = ptr_at(&area[..n], o) else {
            continue;
        };
        if crate::kernel::pool::tag_before(space, v) == Some(TAG_CCSW) || is_cpu_buffer(v) {
            return true;
        }
        // One array of buffer pointers (indexed by LoggerId): its first 64 entries.
        let mut arr = vec![0u8; 64 * psize];
        let m = space.read_prefix(v, &mut arr);
        for a in (0..m.saturating_sub(psize - 1)).step_by(psize) {
            if let Some(w) = ptr_at(&arr[..m], a) {
                if is_cpu_buffer(w) {
                    return true;
                }
            }
        }
    }
    false
}
