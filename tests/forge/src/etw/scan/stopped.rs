//! Phase 1 of the scan scenarios: the live objects the logger state already holds (contexts,
//! their buffers, pending blocks) and the stopped sessions (`EtwSpec::with_stopped_sessions`):
//! a context in freed 'EtwL' pool whose slot holds the free value, and buffers written by the
//! forge's one buffer writer ([`crate::etw::wmi_buffer`] through `BufferPlacement`), some of
//! whose pages were reused. Then [`super::extras`] for stale copies, orphaned 'CCsw' blocks
//! and decoys.

use super::extras::unrelated_page;
use super::*;
use crate::etw::buffers::BufferSpec;
use crate::etw::loggers::{LoggerBuilder, SessionBuffers};
use crate::etw::placement::{BufferPlacement, CtxLinks, Timeline};
use crate::etw::wmi_buffer::{align8, RecSpec, WMI_BUFFER_HEADER_SIZE};
use crate::etw::{
    EtwPage, ExpectedPending, ExpectedPendingDecoy, GlobalListSpec, SessionSpec, BUF, CTX,
};
use crate::etw::{
    EVENT_TRACE_BUFFERING_MODE as BUFFERING, EVENT_TRACE_FILE_MODE_SEQUENTIAL as FILE_SEQUENTIAL,
    EVENT_TRACE_REAL_TIME_MODE as REAL_TIME,
};
use crate::util::{Rng, PAGE_SIZE};

/// The value a freed slot holds (etw-internals.md §1.2): bit 0 set, 1 in practice, on 10.0+;
/// 6.0-6.3 "probably the bit-0 scheme" [U] (the 7601 / 9600 fixtures get it too).
pub(crate) const FREE_SLOT_VALUE: u64 = 1;

/// Spacing of buffer start times (as `Timeline` places buffer `seq` at `base + seq * 7919`).
const SEQ_SPACING: u64 = 7_919;
/// Buffers per stopped session.
const STOPPED_BUFFERS: usize = 5;

/// What became of one stopped-session buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Every page holds its bytes; pages mapped at consecutive VAs, physically scattered.
    Intact,
    /// The header page was reused: not findable.
    Lost,
    /// Page `k` (> 0) was reused; the pages before it are intact.
    Overwritten(usize),
    /// Pages from `m` on are no longer mapped; pages 0..m are physically contiguous.
    UnmappedFrom(usize),
}

/// Per stopped session `j`: (name, BufferSize, ClockType, LoggerMode).
const STOPPED: &[(&str, u32, u32, u32)] = &[
    ("PerfTrack-Diag", 0x4000, 1, REAL_TIME),
    ("WFP-IPsec Trace", 0x8000, 2, BUFFERING),
    ("Setup-Trace", 0x3000, 3, FILE_SEQUENTIAL),
    ("MpWppTracing-Old", 0x5000, 1, REAL_TIME),
];

/// The buffer fates of stopped session `j`: the base list rotated by `j`.
fn fates(j: usize) -> Vec<Fate> {
    let mut v = vec![
        Fate::Intact,
        Fate::Lost,
        Fate::Overwritten(2),
        Fate::Intact,
        Fate::UnmappedFrom(2),
    ];
    v.rotate_left(j % STOPPED_BUFFERS);
    v
}

/// Phase 1 of a scan scenario (called by `loggers::build` after every slot, the per-CPU
/// state and the pending blocks are placed).
pub(in crate::etw) fn plan(
    b: &mut LoggerBuilder,
    pending: &[ExpectedPending],
    pending_decoys: &[ExpectedPendingDecoy],
) -> ScanBuild {
    let scan = b.spec.scan.clone().expect("scan spec");
    let mut out = ScanBuild {
        free_slot_value: FREE_SLOT_VALUE,
        ..ScanBuild::default()
    };
    live_objects(b, pending, pending_decoys, &mut out);
    let slots = free_slots(b, scan.stopped_sessions as usize);
    // With a reused slot, one more session (the last window) in the first one's slot.
    let n = scan.stopped_sessions as usize + usize::from(scan.reused_slot);
    let mut windows = Vec::new();
    for (j, &slot) in slots.iter().enumerate() {
        windows.push(plant_stopped(b, (j, j), slot, n, &mut out));
    }
    if let (true, Some(&first)) = (scan.reused_slot, slots.first()) {
        windows.push(plant_stopped(b, (n - 1, 0), first, n, &mut out));
    }
    odd_context_groups(b, &mut out);
    if scan.extras {
        super::extras::plant(b, &windows, &mut out);
    }
    out
}

/// The `n` lowest slots no spec entry uses (they hold the free value), below 64 and the
/// capacity.
fn free_slots(b: &LoggerBuilder, n: usize) -> Vec<u32> {
    let top = b.capacity.min(64);
    let v: Vec<u32> = (1..top)
        .filter(|s| !b.spec.slots.contains_key(s))
        .take(n)
        .collect();
    assert_eq!(v.len(), n, "not enough free slots for {n} stopped sessions");
    for &s in &v {
        assert_eq!(b.slot_values[s as usize], FREE_SLOT_VALUE, "slot {s}");
    }
    v
}

/// Live contexts, their buffers (with data, or 0x48-byte headers), the stale and free-tagged
/// contexts, the live pending blocks; the pending decoys and the pointer route's 'EtwL' array.
fn live_objects(
    b: &LoggerBuilder,
    pending: &[ExpectedPending],
    pending_decoys: &[ExpectedPendingDecoy],
    out: &mut ScanBuild,
) {
    for p in &b.placed {
        let class = match p.kind {
            PlacedKind::Live => ScanClass::Live,
            PlacedKind::WrongId => ScanClass::StaleCopy,
            PlacedKind::FreeTagged => ScanClass::Orphaned,
        };
        out.objects
            .push(context_object(p, class, None, false, Loc::Va(p.ctx)));
        if p.kind == PlacedKind::Live {
            for o in buffer_objects(p, ScanClass::Live, None) {
                out.objects.push(o);
            }
        }
    }
    for p in pending {
        let batch = p.batch.as_ref();
        out.objects.push(PendingObject {
            loc: Loc::Va(p.block_va),
            kind: ScanKind::PendingBlock,
            class: ScanClass::Live,
            group: None,
            buffer: None,
            pending: Some(ScanPending {
                used_bytes: p.used_bytes,
                start_tick: p.start_tick,
                clock_type: p.true_clock,
                switches: batch.map_or(0, |x| x.switches.len() as u32),
                first_time: batch.map(|x| x.first_time),
                last_time: batch.map(|x| x.last_time()),
                cpu: Some(p.cpu),
                pool_freed: false,
            }),
            context: None,
            copy_of: None,
        });
    }
    for d in pending_decoys {
        out.decoys.push((
            "pending_decoy".to_string(),
            Loc::Va(d.block_va),
            d.why.clone(),
        ));
    }
    if b.route == crate::etw::EtwRoute::Pointer {
        out.decoys.push((
            "logger_array".to_string(),
            Loc::Va(b.array_va),
            "an 'EtwL' block holding the logger array: its first bytes are a pointer or the \
             free value, not a LoggerId below the capacity with a plausible BufferSize"
                .to_string(),
        ));
    }
}

/// A context object.
fn context_object(
    p: &PlacedContext,
    class: ScanClass,
    group: Option<u32>,
    pool_freed: bool,
    loc: Loc,
) -> PendingObject {
    PendingObject {
        loc,
        kind: ScanKind::LoggerContext,
        class,
        group,
        buffer: None,
        pending: None,
        context: Some(ScanContext {
            logger_id: p.logger_id,
            name: p.name.clone(),
            buffer_size: p.buffer_size,
            clock_type: p.clock_type,
            slot: (p.kind != PlacedKind::Live || class == ScanClass::Live).then_some(p.slot),
            pool_freed,
        }),
        copy_of: None,
    }
}

/// The buffers of a placed context: complete, in place.
fn buffer_objects(p: &PlacedContext, class: ScanClass, group: Option<u32>) -> Vec<PendingObject> {
    let one = |va: u64, sb: ScanBuffer| PendingObject {
        loc: Loc::Va(va),
        kind: ScanKind::Buffer,
        class,
        group,
        buffer: Some(sb),
        pending: None,
        context: None,
        copy_of: None,
    };
    if !p.details.is_empty() {
        return p
            .details
            .iter()
            .map(|d| one(d.address, complete_buffer(d)))
            .collect();
    }
    // 0x48-byte headers (loggers::header_only_buffers): SequenceNumber i, State 1 for the
    // first, offsets 0x48.
    let hdr = WMI_BUFFER_HEADER_SIZE as u32;
    p.bufs
        .iter()
        .enumerate()
        .map(|(i, &va)| {
            one(
                va,
                ScanBuffer {
                    logger_id: p.logger_id,
                    buffer_size: p.buffer_size,
                    sequence_number: i as u64,
                    state: u32::from(i == 0),
                    valid_bytes: hdr,
                    record_count: 0,
                    pages: Vec::new(),
                    overwritten_pages: Vec::new(),
                    complete: true,
                    intact_bytes: hdr,
                    recoverable_bytes: hdr,
                    recoverable_records: 0,
                    physically_contiguous: true,
                    header_only: true,
                    compressed: false,
                    copy_of: None,
                },
            )
        })
        .collect()
}

/// A complete buffer with data as `BufferPlacement` reported it.
pub(super) fn complete_buffer(d: &ExpectedBuffer) -> ScanBuffer {
    ScanBuffer {
        logger_id: d.session_id,
        buffer_size: d.buffer_size,
        sequence_number: d.sequence_number,
        state: d.state,
        valid_bytes: d.valid_bytes,
        record_count: d.record_count,
        pages: Vec::new(),
        overwritten_pages: Vec::new(),
        complete: true,
        intact_bytes: d.valid_bytes,
        recoverable_bytes: d.valid_bytes - d.trimmed_bytes,
        recoverable_records: d.record_count,
        physically_contiguous: false,
        header_only: false,
        compressed: d.compressed,
        copy_of: None,
    }
}

/// Groups of the stale (WrongId) and free-tagged contexts: their header-only buffers are
/// orphaned (no validating slot reaches them).
fn odd_context_groups(b: &LoggerBuilder, out: &mut ScanBuild) {
    let mut odd: Vec<&PlacedContext> = b
        .placed
        .iter()
        .filter(|p| p.kind != PlacedKind::Live)
        .collect();
    odd.sort_by_key(|p| p.slot);
    for p in odd {
        let g = out.groups.len() as u32;
        let origin = match p.kind {
            PlacedKind::FreeTagged => GroupOrigin::FreeTagged,
            _ => GroupOrigin::StaleContext,
        };
        if p.kind == PlacedKind::FreeTagged {
            // The context object (pushed by live_objects) belongs to the group.
            for o in &mut out.objects {
                if o.loc == Loc::Va(p.ctx) && o.kind == ScanKind::LoggerContext {
                    o.group = Some(g);
                }
            }
        }
        let bufs = buffer_objects(p, ScanClass::Orphaned, Some(g));
        out.groups.push(PendingGroup {
            group: ScanGroup {
                group: g,
                origin,
                logger_id: p.logger_id,
                slot: p.slot,
                name: p.name.clone().unwrap_or_default(),
                buffer_size: p.buffer_size,
                clock_type: p.clock_type.unwrap_or(0),
                context_pa: None,
                buffers: (0..bufs.len() as u64).collect(),
                lost_buffers: Vec::new(),
                timestamp_window: None,
                utc_window: None,
            },
            context: Some(Loc::Va(p.ctx)),
        });
        out.objects.extend(bufs);
    }
}

/// A clock reading: the variation's clock model, or the standard clocks (§7: 1 QPC at 10 MHz
/// since boot, 2 system time, 3 a 3 GHz cycle counter; 0 counted as QPC).
pub(super) fn raw_at(b: &LoggerBuilder, clock: u32, uptime: u64) -> u64 {
    match b.var {
        Some(v) => v.clock.raw_at(clock, uptime),
        None => match clock {
            2 => b.cfg.system_time - b.cfg.system_up_time + uptime,
            3 => uptime * 300,
            _ => uptime,
        },
    }
}

/// The uptime window (100 ns units) of stopped session `j` of `n`: disjoint windows in the
/// first 90% of the uptime, oldest first.
pub(super) fn window(b: &LoggerBuilder, j: usize, n: usize) -> (u64, u64) {
    let up = b.cfg.system_up_time;
    let n = n.max(1) as u64;
    let start = up / 10 + up * 8 / 10 * j as u64 / n;
    (start, start + up * 6 / 10 / n)
}

/// Records of about `bytes` bytes for a stopped session's buffer: the 64-bit mix of
/// `buffers::filler` on x64, 32-bit forms on x86.
fn stopped_records(x64: bool, build: u32, bytes: usize, seed: u64) -> Vec<RecSpec> {
    if x64 {
        return crate::etw::buffers::filler(build, bytes, seed);
    }
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut used = 0;
    while used < bytes {
        let r = match rng.next_u64() % 4 {
            0 => RecSpec::System {
                x64: false,
                hook: crate::etw::wmi_buffer::HOOK_THREAD_DCSTART,
                version: 2,
                data: 0x28 + (rng.next_u64() % 0x10) as usize,
            },
            1 => RecSpec::PerfInfo {
                x64: false,
                hook: crate::etw::wmi_buffer::HOOK_CSWITCH,
                version: crate::etw::wmi_buffer::cswitch_version(build),
                pmc: 0,
                pebs: false,
                data: 0x18,
            },
            2 => RecSpec::Compact {
                x64: false,
                hook: crate::etw::wmi_buffer::HOOK_DPC,
                version: 2,
                data: 0x0C,
            },
            _ => RecSpec::EventHeader {
                x64: false,
                ext: vec![],
                data: 0x10 + (rng.next_u64() % 0x30) as usize,
            },
        };
        used += align8(r.size());
        out.push(r);
    }
    out
}

/// (records wholly inside the first `intact` bytes, where a chain walk over them ends).
pub(super) fn recoverable(records: &[RecSpec], intact: u32) -> (u32, u32) {
    let mut off = WMI_BUFFER_HEADER_SIZE;
    let (mut n, mut end) = (0u32, off as u32);
    for r in records {
        if off + r.size() > intact as usize {
            break;
        }
        off += align8(r.size());
        n += 1;
        end = off as u32;
    }
    (n, end)
}

/// The session spec of stopped session `j` in `slot`, of kind `like` (an index into
/// [`STOPPED`]: `j` itself, or an earlier session's whose slot it reuses).
fn stopped_spec(
    b: &LoggerBuilder,
    (j, like): (usize, usize),
    slot: u32,
    start_up: u64,
) -> SessionSpec {
    let (name, buffer_size, clock_type, mode) = STOPPED[like % STOPPED.len()];
    let name = if like < STOPPED.len() {
        name.to_string()
    } else {
        format!("{name}-{j}")
    };
    let win8 = b.cfg.build >= 9200;
    let mut guid = [0u8; 16];
    Rng::new(0x5C4E_0000 ^ (u64::from(slot) << 8) ^ j as u64).fill(&mut guid);
    SessionSpec {
        name,
        log_file: (mode == FILE_SEQUENTIAL).then(|| "C:\\Windows\\Panther\\setup.etl".to_string()),
        logger_mode: mode,
        clock_type,
        buffer_size,
        minimum_buffers: 2,
        maximum_buffers: 16,
        number_of_buffers: STOPPED_BUFFERS as u32,
        buffers_written: 3 + j as u32,
        events_lost: 0,
        log_buffers_lost: 0,
        real_time_buffers_lost: 0,
        start_time: b.cfg.system_time - b.cfg.system_up_time + start_up,
        pool_type: if win8 {
            crate::etw::NON_PAGED_POOL_NX
        } else {
            crate::etw::NON_PAGED_POOL
        },
        instance_guid: guid,
        name_unreadable: false,
        global_list: GlobalListSpec::Ring,
        flag_bits: Vec::new(),
        consumers: Vec::new(),
    }
}

/// Stopped session `j` (of `n`) in `slot`: its context (freed pool, or reused), its buffers
/// and their fates, its group. Returns its (clock type, raw time window) for the extras.
fn plant_stopped(
    b: &mut LoggerBuilder,
    (j, like): (usize, usize),
    slot: u32,
    n: usize,
    out: &mut ScanBuild,
) -> (u32, u64, u64) {
    let (up0, up1) = window(b, j, n);
    // FILETIME of boot in this dump's clock model (the system-time clock at uptime 0).
    let boot = raw_at(b, 2, 0);
    let s = stopped_spec(b, (j, like), slot, up0);
    let (bs, clock) = (s.buffer_size, s.clock_type);
    let base = raw_at(b, clock, up0);
    // A session in a reused slot has a new context: its sequence starts where the kind's does.
    let first_seq = 20 + 40 * like as u64;
    let k = STOPPED_BUFFERS as u64;
    let end = base + k * SEQ_SPACING;
    assert!(
        end <= raw_at(b, clock, up1) && base >= first_seq * SEQ_SPACING,
        "stopped session {j}: window"
    );
    // Buffers: flushed, SequenceNumbers in order, CPUs in turn.
    let fill = bs as usize * 9 / 10 - WMI_BUFFER_HEADER_SIZE;
    let plan: Vec<BufferSpec> = (0..k)
        .map(|i| {
            let seq = first_seq + i;
            // (A reusing session's records differ from the first one's of the same number.)
            let seed = 0x5709 ^ (seq << 16) ^ (((j - like) as u64) << 40);
            let recs = stopped_records(b.x64, b.cfg.build, fill, seed);
            let mut bsp = BufferSpec::new(
                crate::etw::wmi_buffer::STATE_FLUSH,
                (i as u32) % b.cfg.cpus,
                seq,
                recs,
            );
            bsp.fill_ff = i % 2 == 0;
            bsp.header_timestamp = Some(base + i * SEQ_SPACING + SEQ_SPACING - 1);
            bsp
        })
        .collect();
    let max_records = plan
        .iter()
        .map(|p| p.records.len() as u64)
        .max()
        .unwrap_or(1);
    let timeline = Timeline::given(
        base - first_seq * SEQ_SPACING,
        (SEQ_SPACING - 1) / (max_records + 1),
        end,
    );
    // Every third stopped session's context is lost (its pool block reused); the one after
    // survives only physically (its page unmapped from the pool, the frame not yet reused)
    // while the freed string pool that holds its name is still mapped.
    let fate = match j % 3 {
        1 => CtxFate::Lost,
        2 => CtxFate::PhysicalOnly,
        _ => CtxFate::Kept,
    };
    let ctx = stopped_context(b, &s, slot, &plan, timeline, fate, out);
    let group = out.groups.len() as u32;
    let fates = fates(j);
    let mut seqs = (Vec::new(), Vec::new());
    for (i, (bsp, fate)) in plan.iter().zip(&fates).enumerate() {
        let (va, pages, detail) = &ctx.buffers[i];
        place_orphan_buffer(b, group, slot, bsp, *fate, (*va, pages, detail), out);
        match fate {
            Fate::Lost => seqs.1.push(bsp.sequence_number),
            _ => seqs.0.push(bsp.sequence_number),
        }
    }
    out.groups.push(PendingGroup {
        group: ScanGroup {
            group,
            origin: GroupOrigin::Stopped,
            logger_id: slot,
            slot,
            name: s.name.clone(),
            buffer_size: bs,
            clock_type: clock,
            context_pa: None,
            buffers: seqs.0,
            lost_buffers: seqs.1,
            timestamp_window: Some((base, end)),
            utc_window: Some((boot + up0, boot + up1)),
        },
        context: ctx.loc,
    });
    (clock, base, end)
}

/// What became of a stopped session's context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CtxFate {
    /// Freed 'EtwL' pool, still mapped.
    Kept,
    /// Its pool block reused by an unrelated allocation.
    Lost,
    /// Its bytes survive only in a physical page no longer mapped (the pool VA now holds an
    /// unrelated allocation); LoggerName.Buffer still points to the mapped, freed 'EtwN' string.
    PhysicalOnly,
}

/// A stopped session's context and its buffers' bytes (not yet placed).
struct StoppedContext {
    /// Where the surviving context is (None: lost).
    loc: Option<Loc>,
    /// Per buffer: (VA, its pages' bytes, what BufferPlacement reported).
    buffers: Vec<(u64, Vec<Vec<u8>>, ExpectedBuffer)>,
}

/// The context of a stopped session in freed 'EtwL' pool (its strings in freed 'EtwN'
/// pool), GlobalList still linking its buffers; or, when `lost`, a pool block reused by an
/// unrelated allocation. Lays out the buffers (through `BufferPlacement`).
fn stopped_context(
    b: &mut LoggerBuilder,
    s: &SessionSpec,
    slot: u32,
    plan: &[BufferSpec],
    timeline: Timeline,
    fate: CtxFate,
    out: &mut ScanBuild,
) -> StoppedContext {
    let ctx_size = b.lay.size(CTX);
    let ctx = b.pool.alloc(ctx_size, b"EtwL");
    let strings = b.session_strings(s);
    b.pool.mark_freed(strings.name_va);
    if let Some(va) = strings.log_va {
        b.pool.mark_freed(va);
    }
    let bufs: Vec<u64> = plan.iter().map(|_| b.barea.alloc(s.buffer_size)).collect();
    let ge = b.lay.off(BUF, "GlobalEntry");
    let entries: Vec<u64> = bufs.iter().map(|v| v + ge).collect();
    let mut pages = Vec::new();
    let (details, links) = BufferPlacement {
        lay: &b.lay,
        plan,
        bufs: &bufs,
        entries: &entries,
        head: ctx + b.lay.off(CTX, "GlobalList"),
        cycle_to: None,
        buffer_size: s.buffer_size,
        logger_id: slot,
        timeline,
    }
    .place(&mut pages, &mut b.layout_cache);
    assert!(links.per_cpu.is_empty() && links.current_buffer.is_none());
    let sb = SessionBuffers {
        bufs: bufs.clone(),
        entries,
        cycle_to: None,
        links: CtxLinks::default(),
        details: details.clone(),
        with_data: true,
    };
    // ReferenceTime: StartTime and the session clock's reading at the same instant.
    let up0 = s.start_time - (b.cfg.system_time - b.cfg.system_up_time);
    let sv = crate::etw::variation::SessionVariation {
        linked_buffers: plan.len() as u32,
        odd_fields: Vec::new(),
        reference_time: crate::etw::variation::RefClock {
            start_time: s.start_time,
            start_perf_clock: raw_at(b, s.clock_type, up0),
        },
    };
    b.write_context(s, Some(&sv), ctx, slot, &strings, &sb);
    let mut loc = Some(Loc::Va(ctx));
    if fate == CtxFate::PhysicalOnly {
        // The context with its POOL_HEADER, copied into an unmapped physical page at the same
        // page offset; the pool VA then reused by unrelated data.
        let hdr = b.pool.header_size() as u64;
        let len = ctx_size + hdr as usize;
        let in_page = ((ctx - hdr) % PAGE_SIZE) as usize;
        let at = if in_page + len <= PAGE_SIZE as usize {
            in_page
        } else {
            0
        };
        let mut page = vec![0u8; PAGE_SIZE as usize];
        page[at..at + len].copy_from_slice(b.pool.slice_mut(ctx - hdr, len));
        let junk = unrelated_page(b.x64, 0x9A6E ^ u64::from(slot));
        let blk = b.pool.slice_mut(ctx - hdr, len);
        blk.copy_from_slice(&junk[..len]);
        out.items.push(PhysItem {
            va: None,
            pages: vec![PageFate::Data(page)],
            contiguous: false,
        });
        let item = out.items.len() - 1;
        let here = Loc::Item(item, at as u64 + hdr);
        push_stopped_context(s, slot, ctx, false, here, out);
        loc = Some(here);
    } else if fate == CtxFate::Lost {
        loc = None;
        // Reused: an unrelated allocation over the whole block.
        let hdr = b.pool.header_size() as u64;
        let page = unrelated_page(b.x64, 0xC7A5 ^ u64::from(slot));
        let blk = b.pool.slice_mut(ctx - hdr, ctx_size + hdr as usize);
        blk.copy_from_slice(&page[..blk.len()]);
        out.lost.push((
            ScanKind::LoggerContext,
            out.groups.len() as u32,
            slot,
            None,
            Loc::Va(ctx),
            "its pool block was reused by unrelated allocations".to_string(),
        ));
    } else {
        b.pool.mark_freed(ctx);
        push_stopped_context(s, slot, ctx, true, Loc::Va(ctx), out);
    }
    let by_va: std::collections::HashMap<u64, Vec<u8>> = pages
        .into_iter()
        .map(|p| match p {
            EtwPage::Stored(va, c) => (va, c),
            _ => unreachable!("buffer pages are stored"),
        })
        .collect();
    let buffers = bufs
        .iter()
        .zip(details)
        .map(|(&va, d)| {
            let n = (u64::from(s.buffer_size)).div_ceil(PAGE_SIZE);
            let pg = (0..n)
                .map(|i| by_va[&(va + i * PAGE_SIZE)].clone())
                .collect();
            (va, pg, d)
        })
        .collect();
    StoppedContext { loc, buffers }
}

/// The expectation of a stopped session's surviving context (orphaned, in the group about to
/// be pushed), at `at`; `pool_freed`: its pool header still marks a freed block.
fn push_stopped_context(
    s: &SessionSpec,
    slot: u32,
    ctx: u64,
    pool_freed: bool,
    at: Loc,
    out: &mut ScanBuild,
) {
    let placed = PlacedContext {
        slot,
        logger_id: slot,
        kind: PlacedKind::Live,
        ctx,
        name: Some(s.name.clone()),
        buffer_size: s.buffer_size,
        clock_type: Some(s.clock_type),
        bufs: Vec::new(),
        details: Vec::new(),
    };
    let g = Some(out.groups.len() as u32);
    out.objects.push(context_object(
        &placed,
        ScanClass::Orphaned,
        g,
        pool_freed,
        at,
    ));
}

/// One stopped-session buffer's pages with its fate applied, and its expectation (or its
/// entry in the lost list).
fn place_orphan_buffer(
    b: &LoggerBuilder,
    group: u32,
    slot: u32,
    bsp: &BufferSpec,
    fate: Fate,
    (va, pages, d): (u64, &[Vec<u8>], &ExpectedBuffer),
    out: &mut ScanBuild,
) {
    let n = pages.len();
    let seed = 0x0FF5_E700 ^ (va >> 12);
    let junk = |i: usize| unrelated_page(b.x64, seed ^ i as u64);
    let fate = match fate {
        Fate::Overwritten(k) | Fate::UnmappedFrom(k) if k >= n => Fate::Intact,
        f => f,
    };
    let paged: Vec<PageFate> = (0..n)
        .map(|i| match fate {
            Fate::Lost if i == 0 => PageFate::Overwritten(junk(i)),
            Fate::Overwritten(k) if i == k => PageFate::Overwritten(junk(i)),
            Fate::UnmappedFrom(m) if i >= m => PageFate::Unmapped(junk(i)),
            _ => PageFate::Data(pages[i].clone()),
        })
        .collect();
    let item = out.items.len();
    out.items.push(PhysItem {
        va: Some(va),
        pages: paged,
        contiguous: matches!(fate, Fate::UnmappedFrom(_)),
    });
    if fate == Fate::Lost {
        out.lost.push((
            ScanKind::Buffer,
            group,
            slot,
            Some(bsp.sequence_number),
            Loc::Item(item, 0),
            "its header page was reused by unrelated data".to_string(),
        ));
        return;
    }
    let mut sb = complete_buffer(d);
    let cut = match fate {
        Fate::Overwritten(k) => {
            sb.overwritten_pages = vec![k as u32];
            Some(k)
        }
        Fate::UnmappedFrom(m) => Some(m),
        _ => None,
    };
    if let Some(c) = cut {
        let intact = ((c as u64 * PAGE_SIZE) as u32).min(d.valid_bytes);
        let (count, end) = recoverable(&bsp.records, intact);
        sb.complete = intact == d.valid_bytes;
        sb.intact_bytes = intact;
        sb.recoverable_records = count;
        sb.recoverable_bytes = end;
    }
    out.objects.push(PendingObject {
        loc: Loc::Item(item, 0),
        kind: ScanKind::Buffer,
        class: ScanClass::Orphaned,
        group: Some(group),
        buffer: Some(sb),
        pending: None,
        context: None,
        copy_of: None,
    });
}
