//! The other scan objects (`EtwSpec::with_scan_extras`): stale copies of live buffers,
//! orphaned 'CCsw' blocks with valid batches, and the decoys of the module documentation
//! (each says which rule it breaks). Plus the "unrelated data" that reused pages hold.

use super::stopped::{complete_buffer, raw_at};
use super::*;
use crate::config::Arch;
use crate::etw::ccswap::{encode_pending_block, Batch, PENDING_BLOCK_SIZE};
use crate::etw::loggers::LoggerBuilder;
use crate::etw::wmi_buffer::{align8, BufferHeader, RecSpec, WMI_BUFFER_HEADER_SIZE};
use crate::etw::{max_wait_reason, EtwPage, CCSW_TAG};
use crate::kernel::objects::pool_header;
use crate::util::{put_u32, Rng, PAGE_SIZE};

/// Tags of the unrelated small allocations that reuse freed pages.
const UNRELATED_TAGS: [&[u8; 4]; 8] = [
    b"NtFs", b"File", b"MmSt", b"Irp ", b"Vad ", b"ObNm", b"Toke", b"Ntfx",
];

/// A page that some other allocation reused: small pool blocks (POOL_HEADER of the arch, an
/// unrelated tag, pseudo-random contents) from offset 0 to the end of the page.
pub(super) fn unrelated_page(x64: bool, seed: u64) -> Vec<u8> {
    let arch = if x64 { Arch::X64 } else { Arch::X86Pae };
    let hdr = if x64 { 0x10 } else { 8 };
    let mut rng = Rng::new(seed ^ 0x0BAD_F00D_0000_0000);
    let mut page = vec![0u8; PAGE_SIZE as usize];
    rng.fill(&mut page);
    let mut off = 0usize;
    while off + hdr + 0x40 <= PAGE_SIZE as usize {
        let size = ((rng.range(0x30, 0x300) as usize) & !0xF).min(PAGE_SIZE as usize - off - hdr);
        let tag = UNRELATED_TAGS[(rng.next_u64() % UNRELATED_TAGS.len() as u64) as usize];
        pool_header(arch, &mut page, off, size, tag);
        off += hdr + size;
    }
    page
}

/// Stale copies, orphaned blocks and decoys. `windows`: each stopped session's (clock type,
/// first raw time, end raw time).
pub(super) fn plant(b: &mut LoggerBuilder, windows: &[(u32, u64, u64)], out: &mut ScanBuild) {
    stale_copies(b, out);
    orphan_blocks(b, windows, out);
    decoys(b, out);
}

/// Two copies of live buffers with data: the smallest multi-page one in unmapped, physically
/// contiguous pages; the largest other one in freed big pool that is still mapped (scattered
/// pages).
fn stale_copies(b: &mut LoggerBuilder, out: &mut ScanBuild) {
    let live: Vec<ExpectedBuffer> = b
        .placed
        .iter()
        .filter(|p| p.kind == PlacedKind::Live)
        .flat_map(|p| p.details.iter().cloned())
        .filter(|d| !d.compressed && d.record_count > 0)
        .collect();
    // The contiguous copy: the smallest multi-page buffer (contiguous free pages are scarce);
    // the mapped one: the largest other.
    let Some(first) = live
        .iter()
        .filter(|d| u64::from(d.buffer_size) > PAGE_SIZE)
        .min_by_key(|d| (d.buffer_size, d.address))
        .or(live.first())
        .cloned()
    else {
        return;
    };
    let second = live
        .iter()
        .filter(|d| d.address != first.address)
        .max_by_key(|d| (d.buffer_size, std::cmp::Reverse(d.address)))
        .cloned();
    let by_va: std::collections::HashMap<u64, &Vec<u8>> = b
        .buffer_pages
        .iter()
        .filter_map(|p| match p {
            EtwPage::Stored(va, c) => Some((*va, c)),
            _ => None,
        })
        .collect();
    let pages_of = |d: &ExpectedBuffer| -> Vec<PageFate> {
        let n = u64::from(d.buffer_size).div_ceil(PAGE_SIZE);
        (0..n)
            .map(|i| PageFate::Data(by_va[&(d.address + i * PAGE_SIZE)].clone()))
            .collect()
    };
    let mut copies = vec![(first.clone(), None, pages_of(&first))];
    if let Some(s) = second {
        let pages = pages_of(&s);
        copies.push((s, Some(()), pages));
    }
    for (d, mapped, pages) in copies {
        let va = mapped.map(|()| b.barea.alloc(d.buffer_size));
        let item = out.items.len();
        out.items.push(PhysItem {
            va,
            pages,
            contiguous: va.is_none(),
        });
        let mut sb = complete_buffer(&d);
        sb.physically_contiguous = va.is_none();
        out.objects.push(PendingObject {
            loc: Loc::Item(item, 0),
            kind: ScanKind::Buffer,
            class: ScanClass::StaleCopy,
            group: None,
            buffer: Some(sb),
            pending: None,
            context: None,
            copy_of: Some(Loc::Va(d.address)),
        });
    }
}

/// `b` moved so that its FirstTimeStamp is `first`.
fn shifted(mut b: Batch, first: u64) -> Batch {
    let old = b.first_time;
    b.first_time = first;
    for s in &mut b.switches {
        s.time = s.time - old + first;
    }
    b
}

/// Two 'CCsw' blocks no KPRCB points to, with valid batches in the clock of the first stopped
/// session (QPC without one) near its end: one in freed pool (mapped), one in an unmapped
/// page whose header still looks allocated.
fn orphan_blocks(b: &mut LoggerBuilder, windows: &[(u32, u64, u64)], out: &mut ScanBuild) {
    let mwr = max_wait_reason(b.cfg.build);
    let (clock, _, end) = windows.first().copied().unwrap_or_else(|| {
        let up = b.cfg.system_up_time;
        (1, raw_at(b, 1, up / 2), raw_at(b, 1, up / 2) + 1_000_000)
    });
    let known = crate::etw::ccswap::known_batches();
    let pick = |prefix: &str| {
        known
            .iter()
            .find(|(d, _, _)| d.starts_with(prefix))
            .map(|(_, x, _)| x.clone())
            .expect("known batch")
    };
    let batches = [pick("priority increments"), pick("wait time 0 and 1")];
    let hdr = b.pool.header_size();
    for (i, batch) in batches.into_iter().enumerate() {
        let span = batch.last_time() - batch.first_time;
        let first = end - span - 1000 * (i as u64 + 1);
        let batch = shifted(batch, first);
        let tick = 0x2000 + 0x100 * i as u32;
        let bytes = encode_pending_block(&batch, tick, mwr);
        let facts = ScanPending {
            used_bytes: u32::from_le_bytes(bytes[0..4].try_into().expect("4")),
            start_tick: tick,
            clock_type: clock,
            switches: batch.switches.len() as u32,
            first_time: Some(batch.first_time),
            last_time: Some(batch.last_time()),
            cpu: None,
            pool_freed: i == 0,
        };
        let loc = if i == 0 {
            let va = b.pool.alloc(PENDING_BLOCK_SIZE, CCSW_TAG);
            b.pool
                .slice_mut(va, PENDING_BLOCK_SIZE)
                .copy_from_slice(&bytes);
            b.pool.mark_freed(va);
            Loc::Va(va)
        } else {
            let mut page = vec![0u8; PAGE_SIZE as usize];
            let off = 0x300;
            pool_header(arch(b), &mut page, off - hdr, PENDING_BLOCK_SIZE, CCSW_TAG);
            page[off..off + PENDING_BLOCK_SIZE].copy_from_slice(&bytes);
            Loc::Item(push_page(out, page), off as u64)
        };
        out.objects.push(PendingObject {
            loc,
            kind: ScanKind::PendingBlock,
            class: ScanClass::Orphaned,
            group: None,
            buffer: None,
            pending: Some(facts),
            context: None,
            copy_of: None,
        });
    }
}

fn arch(b: &LoggerBuilder) -> Arch {
    if b.x64 {
        Arch::X64
    } else {
        Arch::X86Pae
    }
}

/// An unmapped physical page holding `page`; its item index.
fn push_page(out: &mut ScanBuild, page: Vec<u8>) -> usize {
    out.items.push(PhysItem {
        va: None,
        pages: vec![PageFate::Data(page)],
        contiguous: false,
    });
    out.items.len() - 1
}

/// Valid records from `start` to about `end` of `buf` (the arch's record forms); returns where
/// they end.
fn records_into(buf: &mut [u8], x64: bool, start: usize, end: usize, rng: &mut Rng) -> usize {
    let mut off = start;
    let mut ts = 0x1_0000_0000 + rng.next_u64() % 0x1000_0000;
    loop {
        let r = if off.is_multiple_of(3) {
            RecSpec::PerfInfo {
                x64,
                hook: crate::etw::wmi_buffer::HOOK_SAMPLED_PROFILE,
                version: 2,
                pmc: 0,
                pebs: false,
                data: 0x10,
            }
        } else {
            RecSpec::System {
                x64,
                hook: crate::etw::wmi_buffer::HOOK_THREAD_DCSTART,
                version: 2,
                data: 0x30,
            }
        };
        if off + align8(r.size()) > end {
            return off;
        }
        let e = r.encode(ts, rng);
        buf[off..off + e.len()].copy_from_slice(&e);
        off += align8(e.len());
        ts += 1 + rng.next_u64() % 100;
    }
}

/// A decoy buffer of `pages` pages of pseudo-random bytes: a header with these values, valid
/// records in `records` (start, end).
fn decoy_buffer(
    b: &LoggerBuilder,
    h: BufferHeader,
    pages: usize,
    records: (usize, usize),
    rng: &mut Rng,
) -> Vec<u8> {
    let mut buf = vec![0u8; pages * PAGE_SIZE as usize];
    rng.fill(&mut buf);
    records_into(&mut buf, b.x64, records.0, records.1, rng);
    h.write(&mut buf, &b.lay);
    buf
}

/// A buffer header of the decoys: LoggerId 4, State 3 (flush), CPU 0, the given sizes.
fn decoy_header(buffer_size: u32, current: u32, saved: u32, seq: u64) -> BufferHeader {
    BufferHeader {
        buffer_size,
        saved_offset: saved,
        current_offset: current,
        offset: saved,
        sequence_number: seq,
        processor_index: BufferHeader::processor_index(0),
        logger_id: 4,
        state: crate::etw::wmi_buffer::STATE_FLUSH,
        timestamp: 0x1_2345_6789,
        ..BufferHeader::default()
    }
}

/// The header decoys: (what, BufferSize, CurrentOffset, SavedOffset, pages, valid records
/// (start, end), the rule it breaks). "broken_chain" also gets byte 3 bit 7 cleared at +0x48.
type HeaderDecoy = (
    &'static str,
    u32,
    u32,
    u32,
    usize,
    (usize, usize),
    &'static str,
);
const HEADER_DECOYS: [HeaderDecoy; 3] = [
    (
        "broken_chain",
        0x2000,
        0x1F00,
        0x1F00,
        2,
        (0x88, 0x1F00),
        "a valid header whose bytes at +0x48 are not a record (byte 3 bit 7 clear): rule 4",
    ),
    (
        "offsets_past_buffer_size",
        0x2000,
        0x2800,
        0x2800,
        2,
        (0x48, 0x2000),
        "CurrentOffset and SavedOffset 0x2800 > BufferSize 0x2000: rule 2",
    ),
    (
        "valid_below_header",
        0x1000,
        0x30,
        0,
        1,
        (0x48, 0xF00),
        "CurrentOffset 0x30 (valid below the 0x48-byte header), records after it: rule 2",
    ),
];

/// Every decoy, each in its own unmapped, physically scattered pages.
fn decoys(b: &mut LoggerBuilder, out: &mut ScanBuild) {
    let mut rng = Rng::new(0xDEC0_7000 ^ u64::from(b.cfg.build) ^ u64::from(b.x64));
    let hdr = WMI_BUFFER_HEADER_SIZE;
    let mut add = |out: &mut ScanBuild, what: &str, bytes: Vec<u8>, off: u64, why: &str| {
        let pages = bytes
            .chunks(PAGE_SIZE as usize)
            .map(|c| PageFate::Data(c.to_vec()))
            .collect();
        out.items.push(PhysItem {
            va: None,
            pages,
            contiguous: false,
        });
        let loc = Loc::Item(out.items.len() - 1, off);
        out.decoys.push((what.to_string(), loc, why.to_string()));
    };
    for _ in 0..2 {
        let mut page = vec![0u8; PAGE_SIZE as usize];
        rng.fill(&mut page);
        add(
            out,
            "random_page",
            page,
            0,
            "pseudo-random bytes: rule 1 fails",
        );
    }
    let mut page = vec![0u8; PAGE_SIZE as usize];
    records_into(&mut page, b.x64, 0, PAGE_SIZE as usize, &mut rng);
    add(
        out,
        "records_without_header",
        page,
        0,
        "valid records from offset 0, no header: the first record's marker read as \
         BufferSize breaks rule 1",
    );
    for (i, &(what, size, current, saved, pages, records, why)) in HEADER_DECOYS.iter().enumerate()
    {
        let h = decoy_header(size, current, saved, 77 + i as u64);
        let mut buf = decoy_buffer(b, h, pages, records, &mut rng);
        if what == "broken_chain" {
            let v = crate::util::get_u32(&buf, hdr) & 0x7FFF_FFFF;
            put_u32(&mut buf, hdr, v);
        }
        add(out, what, buf, 0, why);
    }
    fake_pool_blocks(b, out, &mut rng, &mut add);
}

/// The fake 'EtwL' block (garbage after the tag, LoggerId >= 0x10000) and the fake 'CCsw'
/// block (a valid batch, UsedBytes 0x1400 > 0x400).
fn fake_pool_blocks(
    b: &LoggerBuilder,
    out: &mut ScanBuild,
    rng: &mut Rng,
    add: &mut impl FnMut(&mut ScanBuild, &str, Vec<u8>, u64, &str),
) {
    let hdr = if b.x64 { 0x10 } else { 8 };
    let mut page = vec![0u8; PAGE_SIZE as usize];
    rng.fill(&mut page);
    let off = 0x200;
    let ctx_size = b.lay.size(crate::etw::CTX);
    pool_header(arch(b), &mut page, off - hdr, ctx_size, b"EtwL");
    let id = 0x1_0000 | (rng.next_u64() as u32 & 0xFFFF_0000);
    put_u32(&mut page, off, id);
    add(
        out,
        "fake_logger_context",
        page,
        off as u64,
        "an 'EtwL' pool tag followed by garbage: LoggerId >= 0x10000 is no slot",
    );
    let mut page = vec![0u8; PAGE_SIZE as usize];
    let batch = crate::etw::ccswap::known_batches()
        .into_iter()
        .find(|(d, _, _)| d.starts_with("idle switches"))
        .map(|(_, x, _)| x)
        .expect("known batch");
    let mut block = encode_pending_block(&batch, 0x1234, max_wait_reason(b.cfg.build));
    put_u32(&mut block, 0, 0x1400);
    let off = 0x600;
    pool_header(arch(b), &mut page, off - hdr, PENDING_BLOCK_SIZE, CCSW_TAG);
    page[off..off + PENDING_BLOCK_SIZE].copy_from_slice(&block);
    add(
        out,
        "fake_pending_block",
        page,
        off as u64,
        "a 'CCsw' block with UsedBytes 0x1400 (neither 0 nor 0x68..=0x400)",
    );
}
