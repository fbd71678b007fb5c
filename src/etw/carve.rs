//! Carving (issue 15): one pass over all physical memory that finds every trace buffer, every
//! 'CCsw' pending block and every 'EtwL' logger context, whether or not anything still points
//! to it, and classifies each as live (what the logger array and the CPUs lead to), orphaned
//! (nothing does: a stopped session's memory left in freed pool) or a stale copy (a live
//! buffer's bytes again elsewhere).
//!
//! **Validity** (identity decides): a trace buffer is a WMI_BUFFER_HEADER at an 8-byte-aligned
//! physical offset whose BufferSize is a multiple of 1 KiB from 1 KiB to 64 MiB, whose valid end
//! (CurrentOffset, else SavedOffset: the kernel's rule) is past the header, which is not
//! compressed (a compressed payload has no record chain to check), whose State is a buffer
//! state (0-7), whose ClientContext LoggerId is below 1024 and whose byte 1 is a processor
//! index's high byte (0-7) or an event alignment (8, 16), whose BufferFlag holds no bit above
//! 0x80, and whose first record at 0x48 is complete (a chain follows it as far as the
//! bytes in hand allow; where it stops is reported, as for a live buffer). A pending
//! block is a 0x400-byte block behind a pool header tagged 'CCsw' whose UsedBytes is 0 or
//! 0x68-0x400 with a batch that decodes. A logger context is a block behind a pool header
//! tagged 'EtwL' whose LoggerId (below 1024), BufferSize (as for buffers) and ClockType (0-3)
//! read sanely through the layout in use.
//!
//! **Pages**: a buffer is contiguous in virtual memory, not in physical memory. Its first
//! page is found by the pass; the rest are read through the page tables: one walk of the
//! kernel's mappings finds the virtual address of every candidate that continues past its
//! first page (only the candidates' pages are kept, so memory stays flat). A buffer whose
//! virtual address is no longer mapped is recovered up to the end of its first page and said
//! to be partial, unless its record chain runs through the physically following pages to
//! exactly its valid end (`physically_contiguous`).
//!
//! **Nesting**: bytes a buffer's record chain runs through are its records' data: a
//! header-like run inside them (an event's payload can look like a WMI_BUFFER_HEADER whose
//! record chain then follows the outer buffer's real records) is not a buffer.
//!
//! **Grouping**: orphaned buffers are grouped by (LoggerId, BufferSize) — the two facts every
//! buffer of a session shares — ordered by SequenceNumber; a surviving orphaned context with
//! that LoggerId and BufferSize names the group.

use crate::addr::{PhysAddr, VirtAddr, PAGE_SIZE};
use crate::bytes::LeBytes;
use crate::decode::ccswap::{decode_pending, PENDING_BLOCK_SIZE};
use crate::dump::{Arch, DumpFile, PageLookup};
use crate::etl::header::{BufferHeader, BUFFER_HEADER_SIZE};
use crate::etl::records::chain_from;
use crate::etw::clock::{self, ClockFacts, Converter};
use crate::etw::loggers::Session;
use crate::etw::source::EtwSource;
use crate::kernel::context::KernelContext;
use crate::warning::{Warning, WarningKind};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Largest LoggerId accepted (MaxLoggers is at most 1024 on any build).
const MAX_LOGGER_ID: u64 = 1024;
/// Largest buffer State (etw-internals.md §2.4: ETW_BUFFER_STATE 0-6, Maximum 7; the 5.x
/// WMI_BUFFER_STATE bits Free 1, InUse 2, Flush 4 combine to at most 7).
const MAX_BUFFER_STATE: u64 = 7;
/// Most candidates of each kind kept (a hostile image cannot make the scan hold more).
pub(crate) const MAX_CANDIDATES: usize = 1 << 20;
/// Pages per work unit handed to a thread.
const CHUNK_PAGES: u64 = 1 << 14;
/// Pages read at once with a positioned read in the pass (1 MiB: a thread's buffer).
const READ_PAGES: u64 = 32;

// The carved buffers' types and bytes are in `carved.rs`, which the ETW source (units of
// origin `carved`) shares.
pub use crate::etw::carved::{buffer_bytes, CarvedBuffer, ChainBreak, Class};

/// A pending compact context-switch block found by the pass.
#[derive(Clone, Debug, Serialize)]
pub struct CarvedBlock {
    pub physical_address: PhysAddr,
    pub virtual_address: Option<VirtAddr>,
    pub class: Class,
    pub used_bytes: u32,
    pub switches: usize,
    pub last_timestamp: u64,
}

/// A logger context found by its pool tag.
#[derive(Clone, Debug, Serialize)]
pub struct CarvedContext {
    pub physical_address: PhysAddr,
    pub virtual_address: Option<VirtAddr>,
    pub class: Class,
    pub logger_id: u64,
    pub buffer_size: u64,
    pub clock_type: u64,
    pub name: Option<crate::text::Untrusted>,
    /// Its ReferenceTime's StartPerfClock (the session clock's reading at start), when mapped.
    pub start_perf_clock: Option<u64>,
    /// A context the logger array still points to, in a slot that rejected it.
    pub note: Option<String>,
}

/// Orphaned buffers that belong together.
#[derive(Clone, Debug, Serialize)]
pub struct OrphanGroup {
    pub group: usize,
    pub logger_id: u64,
    pub buffer_size: u64,
    pub buffers: usize,
    pub complete_buffers: usize,
    pub records: usize,
    pub first_sequence: u64,
    pub last_sequence: u64,
    /// The orphaned context with this LoggerId and BufferSize, when one survives.
    pub context: Option<PhysAddr>,
    pub name: Option<crate::text::Untrusted>,
    /// Why these buffers are taken as one session.
    pub evidence: String,
}

/// What the pass found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScanReport {
    pub pages_scanned: u64,
    pub buffers: Vec<CarvedBuffer>,
    pub blocks: Vec<CarvedBlock>,
    pub contexts: Vec<CarvedContext>,
    pub groups: Vec<OrphanGroup>,
    pub warnings: Vec<Warning>,
}

/// A candidate found in one page.
#[derive(Clone, Copy, Debug)]
enum Hit {
    /// A buffer header at this physical address; `rest` = it continues past the page.
    Buffer {
        pa: u64,
        header: BufferHeader,
        timestamp: u64,
        valid: u64,
        records: usize,
        chain_end: u64,
        rest: bool,
    },
    Block {
        pa: u64,
    },
    Context {
        pa: u64,
    },
}

/// Progress of a running scan, for a progress bar: pages done of `total`.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicU64,
    pub total: AtomicU64,
    /// Set to stop the scan early (Ctrl-C): the report then says it is incomplete.
    pub stop: AtomicBool,
}

/// The page's candidates (`pa` = the page's physical address; pool headers on `arch` are
/// 16 bytes and 16-aligned on x64, 8 on x86).
fn page_hits(page: &[u8], pa: u64, arch: Arch, out: &mut Vec<Hit>) {
    let step = crate::kernel::pool::header_size_on(arch) as usize;
    let pool_header = step;
    // The bytes a buffer found earlier in this page claims through its record chain: a
    // header-like run inside a record's payload is that record's data, not a buffer.
    let mut claimed_to = 0usize;
    let mut o = 0usize;
    while o < page.len() {
        // Eight words at a time past those where nothing can start: no BufferSize-like
        // value in a word's low half and no pool tag in its high half (the first tests of
        // `buffer_at` and of the tags below, so the hits are the same).
        if o % 64 == 0 && o + 64 <= page.len() && !maybe_hit(&page[o..o + 64]) {
            o += 64;
            continue;
        }
        if o >= claimed_to {
            if let Some(h) = buffer_at(page, o, pa) {
                if let Hit::Buffer { chain_end, .. } = &h {
                    claimed_to = o + *chain_end as usize;
                }
                out.push(h);
            }
        }
        if o % step == 0 && o + 8 <= page.len() {
            let tag = &page[o + 4..o + 8];
            if tag == b"CCsw" {
                out.push(Hit::Block {
                    pa: pa + (o + pool_header) as u64,
                });
            } else if tag == b"EtwL" {
                out.push(Hit::Context {
                    pa: pa + (o + pool_header) as u64,
                });
            }
        }
        o += 8;
    }
}

/// Whether a buffer header or a pool tag may start in one of the eight words of `b`: a low
/// half that is a plausible BufferSize (`buffer_at`'s first test), or a high half that is
/// `CCsw` or `EtwL`. Without a branch per word.
#[inline]
fn maybe_hit(b: &[u8]) -> bool {
    const CCSW: u32 = u32::from_le_bytes(*b"CCsw");
    const ETWL: u32 = u32::from_le_bytes(*b"EtwL");
    let mut any = false;
    for w in b.chunks_exact(8) {
        let x = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        let (lo, hi) = (x as u32, (x >> 32) as u32);
        let size = (lo & 0x3ff == 0) & (lo.wrapping_sub(0x400) <= (64 << 20) - 0x400);
        any |= size | (hi == CCSW) | (hi == ETWL);
    }
    any
}

/// A buffer header at `o` of `page` that passes the validity rules, as far as the page shows.
fn buffer_at(page: &[u8], o: usize, pa: u64) -> Option<Hit> {
    let size = u64::from(page.u32_at(o)?);
    if !(0x400..=64 << 20).contains(&size) || size % 0x400 != 0 {
        return None;
    }
    let hb = page.get(o..o + BUFFER_HEADER_SIZE)?;
    let header = BufferHeader::from_bytes(hb)?;
    // ETW_BUFFER_STATE is 0-6 (Maximum 4 or 7); 5.1-5.2's WMI_BUFFER_STATE bits are 1, 2, 4.
    if header.logger_id >= MAX_LOGGER_ID || header.state > MAX_BUFFER_STATE || header.compressed() {
        return None;
    }
    // ClientContext byte 1: 6.2+ the high byte of ProcessorIndex (mask 0x7FF: 0-7); up to 6.1
    // the event Alignment (8 by default). BufferFlag: the known flags are 0x01-0x40. A record's
    // timestamp that happens to look like a BufferSize with a record 0x48 bytes on fails here.
    let align = hb[crate::etl::header::offsets::CLIENT_CONTEXT + 1];
    if !(align <= 8 || align == 16) || header.buffer_flag >= 0x100 {
        return None;
    }
    let valid = header.valid_bytes()?;
    if valid <= BUFFER_HEADER_SIZE as u64 {
        return None;
    }
    let here = (page.len() - o) as u64;
    let avail = valid.min(here) as usize;
    let bytes = &page[o..o + avail];
    let (records, chain_end) = chain_from(bytes, BUFFER_HEADER_SIZE, avail);
    if records == 0 {
        return None;
    }
    // A live buffer's last record may be cut (being written when memory was taken): the chain
    // must hold at least one complete record; where it stops is reported, not judged.
    let rest = valid > here;
    Some(Hit::Buffer {
        pa: pa + o as u64,
        header,
        timestamp: hb
            .u64_at(crate::etl::header::offsets::TIME_STAMP)
            .unwrap_or(0),
        valid,
        records,
        chain_end: chain_end as u64,
        rest,
    })
}

/// Run the pass over `runs` (first PFN, count) on `threads` threads.
fn pass(
    dump: &DumpFile,
    runs: &[(u64, u64)],
    arch: Arch,
    threads: usize,
    progress: &Progress,
) -> (Vec<Hit>, u64) {
    // Pieces of at most CHUNK_PAGES pages, in the order given; a chunk (a thread's unit of
    // work) is one piece, or consecutive small pieces of at most CHUNK_PAGES pages together
    // (a compressed container's runs in storage order are a few pages each).
    let mut pieces: Vec<(u64, u64)> = Vec::new();
    for &(start, n) in runs {
        let mut s = start;
        while s < start + n {
            let e = (s + CHUNK_PAGES).min(start + n);
            pieces.push((s, e));
            s = e;
        }
    }
    let mut chunks: Vec<std::ops::Range<usize>> = Vec::new();
    let mut in_chunk = 0u64;
    for (i, &(s, e)) in pieces.iter().enumerate() {
        match chunks.last_mut() {
            Some(c) if in_chunk + (e - s) <= CHUNK_PAGES => {
                c.end = i + 1;
                in_chunk += e - s;
            }
            _ => {
                chunks.push(i..i + 1);
                in_chunk = e - s;
            }
        }
    }
    progress
        .total
        .store(runs.iter().map(|r| r.1).sum(), Ordering::Relaxed);
    let next = AtomicU64::new(0);
    dump.advise_sequential(true);
    let results: Vec<(Vec<Hit>, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut hits = Vec::new();
                    let mut pages = 0u64;
                    let mut block = vec![0u8; (READ_PAGES * PAGE_SIZE) as usize];
                    let mut pieces_of_block: Vec<(PhysAddr, usize)> = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(chunk) = chunks.get(i) else { break };
                        if progress.stop.load(Ordering::Relaxed) {
                            break;
                        }
                        // Read this chunk and the next ahead, in large sequential reads.
                        for &(s, e) in &pieces[chunk.clone()] {
                            dump.prefetch(s, e - s);
                        }
                        if let Some(next) = chunks.get(i + threads.max(1)) {
                            for &(s2, e2) in &pieces[next.clone()] {
                                dump.prefetch(s2, e2 - s2);
                            }
                        }
                        for &(s, e) in &pieces[chunk.clone()] {
                            let mut b = s;
                            while b < e {
                                let n = (e - b).min(READ_PAGES);
                                // Pages stored as plain file bytes are copied with positioned
                                // reads (no page of the mapping faulted in and released
                                // again); any other page (compressed, missing, a dump held
                                // in memory) is looked up one at a time.
                                pieces_of_block.clear();
                                pieces_of_block.extend((b..b + n).map(|pfn| {
                                    (PhysAddr::new(pfn * PAGE_SIZE), PAGE_SIZE as usize)
                                }));
                                let buf = &mut block[..(n * PAGE_SIZE) as usize];
                                if dump.read_physical_bulk(&pieces_of_block, buf) {
                                    for (i, p) in buf.chunks_exact(PAGE_SIZE as usize).enumerate() {
                                        if hits.len() < MAX_CANDIDATES {
                                            page_hits(
                                                p,
                                                (b + i as u64) * PAGE_SIZE,
                                                arch,
                                                &mut hits,
                                            );
                                        }
                                    }
                                    pages += n;
                                } else {
                                    for pfn in b..b + n {
                                        if let PageLookup::Present(p) =
                                            dump.page(crate::addr::Pfn::new(pfn))
                                        {
                                            if hits.len() < MAX_CANDIDATES {
                                                page_hits(&p, pfn * PAGE_SIZE, arch, &mut hits);
                                            }
                                            pages += 1;
                                        }
                                    }
                                    dump.note_read(n);
                                }
                                b += n;
                            }
                            progress.done.fetch_add(e - s, Ordering::Relaxed);
                        }
                    }
                    (hits, pages)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    dump.advise_sequential(false);
    let pages = results.iter().map(|r| r.1).sum();
    let mut hits: Vec<Hit> = results.into_iter().flat_map(|r| r.0).collect();
    hits.sort_by_key(|h| match h {
        Hit::Buffer { pa, .. } | Hit::Block { pa } | Hit::Context { pa } => *pa,
    });
    (hits, pages)
}

/// The virtual address of each physical address in `pas` (sorted), through one walk of the
/// kernel half's mappings.
fn reverse_map(ctx: &KernelContext<'_>, pas: &[u64]) -> HashMap<u64, VirtAddr> {
    let mut out = HashMap::new();
    if pas.is_empty() {
        return out;
    }
    let range = if ctx.space.arch().is_64bit() {
        (0xFFFF_8000_0000_0000, u64::MAX)
    } else {
        (0x8000_0000, 0x1_0000_0000)
    };
    ctx.space
        .for_each_mapping(range, 1 << 20, &mut |va, pa, size| {
            let (lo, hi) = (pa.get(), pa.get() + size);
            let i = pas.partition_point(|&p| p < lo);
            for &p in pas[i..].iter().take_while(|&&p| p < hi) {
                out.entry(p).or_insert(va.offset(p - lo));
            }
        });
    out
}

/// The physical address of a live object's virtual address.
fn phys(ctx: &KernelContext<'_>, va: VirtAddr) -> Option<u64> {
    ctx.space.translate(va).ok().map(|t| t.pa.get())
}

/// Scan all physical memory of `ctx`'s dump (`threads` threads; `progress` is updated and
/// may stop it).
pub fn scan(ctx: &KernelContext<'_>, threads: usize, progress: &Progress) -> ScanReport {
    let mut rep = ScanReport::default();
    // In the order the container reads cheapest (a hibernation file: set by set).
    let runs = ctx.dump.runs_in_storage_order();
    if runs.is_empty() {
        rep.warnings.push(Warning::new(
            WarningKind::Unsupported,
            "this dump holds no physical memory (a triage dump's blocks are addressed by virtual address): nothing to scan",
        ));
        return rep;
    }
    let (hits, pages) = pass(ctx.dump, &runs, ctx.space.arch(), threads, progress);
    rep.pages_scanned = pages;
    if progress.stop.load(Ordering::Relaxed) {
        rep.warnings.push(Warning::new(
            WarningKind::Bound,
            format!("scan stopped after {pages} pages: the report is incomplete"),
        ));
    }
    if hits.len() >= MAX_CANDIDATES {
        rep.warnings.push(Warning::new(
            WarningKind::Bound,
            format!("more than {MAX_CANDIDATES} candidates: the rest were not kept"),
        ));
    }
    // Virtual addresses of every candidate still mapped (those that continue past their first
    // page are read through it; every one reports it).
    let mut need: Vec<u64> = hits
        .iter()
        .map(|h| match *h {
            Hit::Buffer { pa, .. } | Hit::Context { pa } | Hit::Block { pa } => pa,
        })
        .collect();
    need.sort_unstable();
    need.dedup();
    let vas = reverse_map(ctx, &need);
    let live = LiveSet::of(ctx);
    let (mwr, _) = crate::etw::ccswap::maximum_wait_reason_of(ctx);
    // Each candidate is carved on its own (a buffer that runs past its first page is read
    // again through the page tables: its pages lie apart): the candidates in `threads`
    // consecutive shares, each share's objects in its order, the shares in theirs.
    let share = hits.len().div_ceil(threads.max(1)).max(1);
    let carved: Vec<Carved> = std::thread::scope(|scope| {
        let (vas, live) = (&vas, &live);
        let handles: Vec<_> = hits
            .chunks(share)
            .map(|part| {
                scope.spawn(move || {
                    let mut out = Carved::default();
                    for h in part {
                        carve_hit(ctx, h, vas, live, mwr, &mut out);
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for c in carved {
        rep.buffers.extend(c.buffers);
        rep.blocks.extend(c.blocks);
        rep.contexts.extend(c.contexts);
    }
    for (why, kind) in [
        (&live.sessions_unknown, "buffers and logger contexts"),
        (&live.blocks_unknown, "pending blocks"),
    ] {
        if let Some(why) = why {
            rep.warnings.push(Warning::new(
                WarningKind::NotFound,
                format!(
                    "live and orphaned {kind} cannot be told apart: {why}; those nothing found leads to are class `unknown` (they may belong to running sessions) and are grouped on the same evidence as orphans"
                ),
            ));
        }
    }
    group_orphans(&mut rep);
    rep
}

/// The objects carved from a share of the candidates, in the candidates' order.
#[derive(Default)]
struct Carved {
    buffers: Vec<CarvedBuffer>,
    blocks: Vec<CarvedBlock>,
    contexts: Vec<CarvedContext>,
    /// The bytes of the buffer being carved (one allocation per thread).
    scratch: Vec<u8>,
}

/// Carve candidate `h` into `out` (`vas`: the candidates' virtual addresses still mapped).
fn carve_hit(
    ctx: &KernelContext<'_>,
    h: &Hit,
    vas: &HashMap<u64, VirtAddr>,
    live: &LiveSet,
    mwr: Option<u8>,
    out: &mut Carved,
) {
    match *h {
        Hit::Buffer {
            pa,
            header,
            timestamp,
            valid,
            records,
            chain_end,
            rest,
        } => {
            let mut b = carve_buffer(
                ctx,
                pa,
                header,
                (valid, records, chain_end, rest),
                vas.get(&pa).copied(),
                live,
                &mut out.scratch,
            );
            b.timestamp = timestamp;
            out.buffers.push(b);
        }
        Hit::Block { pa } => {
            if let Some(b) = carve_block(ctx, pa, vas.get(&pa).copied(), mwr, live) {
                out.blocks.push(b);
            }
        }
        Hit::Context { pa } => {
            if let Some(c) = carve_context(ctx, pa, vas.get(&pa).copied(), live) {
                out.contexts.push(c);
            }
        }
    }
}

/// What the logger array and the CPUs lead to, by physical address, and the identities of the
/// live buffers (for stale copies).
struct LiveSet {
    /// Why the sessions' objects could not be established (no logger array located): objects
    /// nothing leads to are then [`Class::Unknown`], not orphaned.
    sessions_unknown: Option<String>,
    /// Why the CPUs' pending blocks could not be established.
    blocks_unknown: Option<String>,
    buffers: HashSet<u64>,
    identities: HashSet<(u64, u64, u64)>,
    blocks: HashSet<u64>,
    contexts: HashSet<u64>,
    /// Physical address of each rejected slot's pointer, with why it was rejected.
    rejected: HashMap<u64, String>,
}

impl LiveSet {
    fn of(ctx: &KernelContext<'_>) -> LiveSet {
        let src = EtwSource::open(ctx, None);
        let why_no_array = |warnings: &[Warning]| {
            warnings
                .iter()
                .find(|w| w.kind == WarningKind::NotFound)
                .map_or_else(
                    || "the logger-context array could not be located".to_string(),
                    |w| w.message.clone(),
                )
        };
        let sessions_unknown = match src.memory() {
            Some(list) if list.array.is_some() => None,
            Some(list) => Some(why_no_array(&list.warnings)),
            None => Some(why_no_array(src.warnings())),
        };
        let blocks_unknown = match src.pending() {
            Some(_) => None,
            None => Some("the CPUs' pending blocks could not be listed".to_string()),
        };
        let mut set = LiveSet {
            sessions_unknown,
            blocks_unknown,
            buffers: HashSet::new(),
            identities: HashSet::new(),
            blocks: HashSet::new(),
            contexts: HashSet::new(),
            rejected: HashMap::new(),
        };
        for u in src.all_units() {
            if let (Some(va), Some(h)) = (u.address, u.header) {
                if let Some(pa) = phys(ctx, va) {
                    set.buffers.insert(pa);
                }
                set.identities
                    .insert((h.logger_id, h.sequence_number, h.buffer_size));
            }
        }
        if let Some(list) = src.memory() {
            for s in &list.sessions {
                if let Some(pa) = phys(ctx, s.address) {
                    set.contexts.insert(pa);
                }
            }
            for r in &list.rejected {
                if let Some(pa) = phys(ctx, r.value) {
                    set.rejected.insert(
                        pa,
                        format!("slot {} points here and was rejected: {}", r.slot, r.reason),
                    );
                }
            }
        }
        if let Some(p) = src.pending() {
            for b in &p.blocks {
                if let Some(pa) = phys(ctx, b.block) {
                    set.blocks.insert(pa);
                }
            }
        }
        set
    }
}

/// The carved buffers as an ETW source (`extract --carved` and the like): defined here, where
/// the pass is, so that the source (`etw::source`) needs only the carved buffers' types.
impl<'c, 'd> EtwSource<'c, 'd> {
    /// The orphaned and stale-copy buffers a pass over all physical memory finds
    /// ([`scan`] on `threads` threads), as units of origin `carved`, in
    /// (group, SequenceNumber) order; a group's clock is its surviving context's ClockType,
    /// else unknown (said).
    pub fn open_carved(ctx: &'c KernelContext<'d>, threads: usize) -> EtwSource<'c, 'd> {
        let rep = scan(ctx, threads, &Progress::default());
        let mut src = EtwSource::sessions_with(ctx, rep.warnings.clone());
        let sessions: Vec<Session> = src.memory().map_or_else(Vec::new, |l| l.sessions.clone());
        let facts = ClockFacts::gather(ctx, &sessions);
        let mut bufs: Vec<&CarvedBuffer> = rep
            .buffers
            .iter()
            .filter(|b| b.class != Class::Live)
            .collect();
        bufs.sort_by_key(|b| (b.group, b.sequence_number, b.physical_address));
        // One clock per orphan group (sessions that reused a LoggerId are separate groups);
        // stale copies (no group) per LoggerId and BufferSize.
        let mut conv_of: BTreeMap<(u64, u64, Option<usize>), usize> = BTreeMap::new();
        for b in bufs {
            let key = (b.logger_id, b.buffer_size, b.group);
            let converter = match conv_of.get(&key) {
                Some(&c) => c,
                None => {
                    let context = match b.group {
                        Some(g) => rep
                            .groups
                            .iter()
                            .find(|x| x.group == g)
                            .and_then(|x| x.context)
                            .and_then(|pa| rep.contexts.iter().find(|c| c.physical_address == pa)),
                        None => rep
                            .contexts
                            .iter()
                            .find(|c| c.logger_id == b.logger_id && c.buffer_size == b.buffer_size),
                    };
                    let live_session = sessions.iter().find(|s| s.logger_id == b.logger_id);
                    // The surviving context's own ClockType and ReferenceTime (as for a live
                    // session); without its address, a live session's of that clock type. A
                    // stale copy of a live session's buffer: that session's clock.
                    let copy_of = live_session.filter(|_| b.group.is_none());
                    let conv = match (context, copy_of) {
                        (_, Some(s)) => clock::for_session(ctx, &facts, s),
                        (Some(c), None) => match c.virtual_address {
                            Some(va) => {
                                let mut sess = Session::bare(c.logger_id, va, "carved");
                                sess.clock_type = Some(c.clock_type);
                                clock::for_session(ctx, &facts, &sess)
                            }
                            None => clock::for_clock(ctx, &facts, &sessions, c.clock_type),
                        },
                        // No context left: the clock type their timestamps fit, alone.
                        (None, None) => {
                            let ts = rep
                                .buffers
                                .iter()
                                .filter(|o| o.class != Class::Live)
                                .filter(|o| (o.logger_id, o.buffer_size, o.group) == key)
                                .map(|o| o.timestamp);
                            let (lo, hi) = ts.fold((u64::MAX, 0), |(l, h), t| (l.min(t), h.max(t)));
                            match clock::infer_clock(ctx, &facts, &sessions, (lo, hi)) {
                                Ok((c, conv)) => {
                                    src.warn(
                                        Warning::new(
                                            WarningKind::Inferred,
                                            format!(
                                                "logger {} (carved): no surviving logger context gives the clock type; {} ({c}) inferred: the only clock type that puts its buffers' timestamps {lo}..{hi} between boot and the dump's SystemTime",
                                                b.logger_id,
                                                crate::etw::mode::clock_type_name(c).unwrap_or("?"),
                                            ),
                                        )
                                        .logger(b.logger_id),
                                    );
                                    conv
                                }
                                Err(why) => Converter::Unknown(format!(
                                    "carved buffers of logger {}: no surviving logger context gives their clock type, and it cannot be inferred: {why}",
                                    b.logger_id
                                )),
                            }
                        }
                    };
                    let i = src.add_session_clock(b.logger_id, conv);
                    conv_of.insert(key, i);
                    i
                }
            };
            src.push_carved(b, converter);
        }
        src
    }
}

/// A carved buffer from its first page's findings `(valid, records, chain end, continues)`.
fn carve_buffer(
    ctx: &KernelContext<'_>,
    pa: u64,
    header: BufferHeader,
    (valid, first_records, first_chain_end, rest): (u64, usize, u64, bool),
    va: Option<VirtAddr>,
    live: &LiveSet,
    scratch: &mut Vec<u8>,
) -> CarvedBuffer {
    let class = if live.buffers.contains(&pa) {
        Class::Live
    } else if live.identities.contains(&(
        header.logger_id,
        header.sequence_number,
        header.buffer_size,
    )) {
        Class::StaleCopy
    } else if live.sessions_unknown.is_some() {
        Class::Unknown
    } else {
        Class::Orphaned
    };
    let in_page = (PAGE_SIZE - pa % PAGE_SIZE).min(valid);
    let mut contiguous = false;
    // Through the page tables as far as they still map it; else its first physical page, or
    // the physically following pages where its record chain runs through them to the end.
    let (recovered, records, chain_end) = match (rest, va) {
        (false, _) => (valid, first_records, first_chain_end),
        (true, Some(va)) => {
            // Only the bytes read are looked at: the buffer is not zeroed first (64 KiB a
            // buffer: a tenth of `scan`'s instructions on the 2,048-buffer benchmark dump).
            if scratch.len() < valid as usize {
                scratch.resize(valid as usize, 0);
            }
            let scratch = &mut scratch[..valid as usize];
            let n = (ctx.space.read_prefix(va, scratch) as u64).max(in_page);
            if n > in_page {
                let (count, end) =
                    chain_from(&scratch[..n as usize], BUFFER_HEADER_SIZE, n as usize);
                (n, count, end as u64)
            } else {
                (in_page, first_records, first_chain_end)
            }
        }
        (true, None) => match physical_continuation(ctx, pa, valid) {
            Some((records, end)) => {
                contiguous = true;
                (valid, records, end)
            }
            None => (in_page, first_records, first_chain_end),
        },
    };
    // Complete: every valid byte read from the buffer's own pages, as the record chain shows
    // by reaching the valid end. A chain that stops short is said where; when it stops in a
    // later page than the first, that page may now hold another allocation.
    let complete = recovered == valid && chain_end == valid;
    let chain_break = (chain_end < recovered).then(|| {
        let page = (pa % PAGE_SIZE + chain_end) / PAGE_SIZE;
        let at_va = va.map(|v| v.offset(chain_end));
        let page_pa = match (page, at_va) {
            (0, _) => Some(pa + chain_end),
            (_, Some(v)) => phys(ctx, v),
            _ => None,
        };
        ChainBreak {
            offset: chain_end,
            page: page as u32,
            physical_address: page_pa.map(PhysAddr::new),
            page_boundary: (pa + chain_end) % PAGE_SIZE == 0,
        }
    });
    CarvedBuffer {
        physical_address: PhysAddr::new(pa),
        virtual_address: va,
        class,
        logger_id: header.logger_id,
        buffer_size: header.buffer_size,
        sequence_number: header.sequence_number,
        timestamp: 0,
        processor: header.processor_index,
        valid_bytes: valid,
        recovered_bytes: recovered,
        records,
        chain_end,
        complete,
        chain_break,
        physically_contiguous: contiguous,
        group: None,
    }
}

/// An unmapped buffer that continues past its first page: its bytes from the physically
/// following pages, kept only when the record chain runs through them from 0x48 to exactly
/// the valid end (a page of another allocation breaks the chain). Returns (records, end).
fn physical_continuation(ctx: &KernelContext<'_>, pa: u64, valid: u64) -> Option<(usize, u64)> {
    let mut b: Vec<u8> = Vec::with_capacity(valid as usize);
    let mut at = pa;
    while (b.len() as u64) < valid {
        let PageLookup::Present(p) = ctx.dump.page(PhysAddr::new(at).pfn()) else {
            return None;
        };
        let o = (at % PAGE_SIZE) as usize;
        let take = (p.len().saturating_sub(o) as u64).min(valid - b.len() as u64) as usize;
        if take == 0 {
            return None;
        }
        b.extend_from_slice(&p[o..o + take]);
        at += take as u64;
    }
    let (count, end) = chain_from(&b, BUFFER_HEADER_SIZE, b.len());
    (end as u64 == valid).then_some((count, valid))
}

/// Read `len` bytes of a carved object: through its virtual address, else from its physical
/// page (and only as far as that page goes).
fn object_bytes(
    ctx: &KernelContext<'_>,
    pa: u64,
    va: Option<VirtAddr>,
    len: usize,
) -> Option<Vec<u8>> {
    if let Some(b) = va.and_then(|va| ctx.space.read_vec(va, len).ok()) {
        return Some(b);
    }
    let PageLookup::Present(p) = ctx.dump.page(PhysAddr::new(pa).pfn()) else {
        return None;
    };
    let o = (pa % PAGE_SIZE) as usize;
    Some(p[o..(o + len).min(p.len())].to_vec())
}

fn carve_block(
    ctx: &KernelContext<'_>,
    pa: u64,
    va: Option<VirtAddr>,
    mwr: Option<u8>,
    live: &LiveSet,
) -> Option<CarvedBlock> {
    let b = object_bytes(ctx, pa, va, PENDING_BLOCK_SIZE)?;
    let d = decode_pending(&b, mwr).ok()?;
    if d.used_bytes != 0 && d.batch.is_none() {
        return None;
    }
    Some(CarvedBlock {
        physical_address: PhysAddr::new(pa),
        virtual_address: va,
        class: if live.blocks.contains(&pa) {
            Class::Live
        } else if live.blocks_unknown.is_some() {
            Class::Unknown
        } else {
            Class::Orphaned
        },
        used_bytes: d.used_bytes,
        switches: d.batch.as_ref().map_or(0, |b| b.switches.len()),
        last_timestamp: d.last_timestamp,
    })
}

fn carve_context(
    ctx: &KernelContext<'_>,
    pa: u64,
    va: Option<VirtAddr>,
    live: &LiveSet,
) -> Option<CarvedContext> {
    let l = ctx.symbols.layout("_WMI_LOGGER_CONTEXT")?;
    let off = |n: &str| l.field(n).map(|f| f.offset as usize);
    let len = (l.size as usize).min(0x2000);
    let b = object_bytes(ctx, pa, va, len)?;
    let u32f = |n: &str| off(n).and_then(|o| b.u32_at(o)).map(u64::from);
    let logger_id = u32f("LoggerId")?;
    let buffer_size = u32f("BufferSize")?;
    let clock = u32f("ClockType").unwrap_or(0);
    if logger_id >= MAX_LOGGER_ID
        || !(0x400..=64 << 20).contains(&buffer_size)
        || buffer_size % 0x400 != 0
        || clock > 3
    {
        return None;
    }
    // The name: the UNICODE_STRING in the context's own bytes (read through its VA, else from
    // its physical page), whose Buffer may still be mapped although the context is not.
    let name = off("LoggerName")
        .and_then(|o| crate::kernel::UnicodeString::from_bytes(&b, o, ctx.space.arch()))
        .filter(|u| u.length > 0 && !u.buffer.is_null())
        .and_then(|u| u.text(&ctx.space).ok());
    Some(CarvedContext {
        physical_address: PhysAddr::new(pa),
        virtual_address: va,
        class: if live.contexts.contains(&pa) {
            Class::Live
        } else if live.sessions_unknown.is_some() {
            Class::Unknown
        } else {
            Class::Orphaned
        },
        logger_id,
        buffer_size,
        clock_type: clock,
        name,
        // ReferenceTime.StartPerfClock, from the context's own bytes (mapped or not).
        start_perf_clock: off("ReferenceTime").and_then(|rt| {
            let sp = ctx
                .symbols
                .layout("_ETW_REF_CLOCK")
                .and_then(|r| r.field("StartPerfClock"))
                .map_or(8, |f| f.offset as usize);
            b.u64_at(rt + sp)
        }),
        note: live.rejected.get(&pa).cloned(),
    })
}

/// Group the orphaned buffers (and those of unknown class) by (LoggerId, BufferSize).
fn group_orphans(rep: &mut ScanReport) {
    let unlinked = |c: Class| matches!(c, Class::Orphaned | Class::Unknown);
    let mut groups: BTreeMap<(u64, u64), Vec<usize>> = BTreeMap::new();
    for (i, b) in rep.buffers.iter().enumerate() {
        if unlinked(b.class) {
            groups
                .entry((b.logger_id, b.buffer_size))
                .or_default()
                .push(i);
        }
    }
    let mut g = 0;
    for ((logger_id, buffer_size), idx) in groups {
        let parts = split_sessions(&rep.buffers, idx);
        let several = parts.len() > 1;
        for (mut idx, split) in parts {
            idx.sort_by_key(|&i| {
                (
                    rep.buffers[i].sequence_number,
                    rep.buffers[i].physical_address,
                )
            });
            for &i in &idx {
                rep.buffers[i].group = Some(g);
            }
            let first_ts = idx.iter().map(|&i| rep.buffers[i].timestamp).min();
            let mut ctxs: Vec<&CarvedContext> = rep
                .contexts
                .iter()
                .filter(|c| {
                    unlinked(c.class) && c.logger_id == logger_id && c.buffer_size == buffer_size
                })
                .collect();
            if several {
                // Sessions in turn: the context that started last before this one's first
                // buffer (its ReferenceTime's StartPerfClock), else none can be told.
                let before = |c: &&CarvedContext| {
                    c.start_perf_clock
                        .zip(first_ts)
                        .is_some_and(|(sp, ts)| sp <= ts)
                };
                ctxs.retain(before);
                ctxs.sort_by_key(|c| std::cmp::Reverse(c.start_perf_clock));
            }
            let bufs: Vec<&CarvedBuffer> = idx.iter().map(|&i| &rep.buffers[i]).collect();
            let what = |c: Class| match c {
                Class::Unknown => "unclassified",
                _ => "orphaned",
            };
            let mut evidence = format!(
                "{} {} buffers share LoggerId {logger_id} and BufferSize {buffer_size:#x}",
                bufs.len(),
                if bufs.iter().all(|b| b.class == Class::Orphaned) {
                    "orphaned"
                } else {
                    "unclassified"
                }
            );
            if let Some(c) = ctxs.first() {
                evidence.push_str(&format!(
                    "; an {} logger context at physical {} has the same LoggerId and BufferSize{}",
                    what(c.class),
                    c.physical_address,
                    if several {
                        " and started last before these buffers"
                    } else {
                        ""
                    }
                ));
            }
            if let Some(why) = split {
                evidence.push_str("; ");
                evidence.push_str(&why);
            }
            rep.groups.push(OrphanGroup {
                group: g,
                logger_id,
                buffer_size,
                buffers: bufs.len(),
                complete_buffers: bufs.iter().filter(|b| b.complete).count(),
                records: bufs.iter().map(|b| b.records).sum(),
                first_sequence: bufs.first().map_or(0, |b| b.sequence_number),
                last_sequence: bufs.last().map_or(0, |b| b.sequence_number),
                context: ctxs.first().map(|c| c.physical_address),
                name: ctxs.first().and_then(|c| c.name.clone()),
                evidence,
            });
            g += 1;
        }
    }
}

/// The buffers `idx` (one LoggerId and BufferSize) split into the sessions that used that
/// LoggerId in turn, each with what told it apart (None for the first). A logger id hosts one
/// session at a time and each session's context numbers its buffers afresh
/// (etw-internals.md §2.1: SequenceNumber from the context's BufferSequenceNumber), so one
/// SequenceNumber at two different TimeStamps means two sessions; the later one begins, in
/// TimeStamp order, after the earlier twin and by the later one: at the widest TimeStamp gap
/// between them. Copies (the same SequenceNumber and TimeStamp) stay together. Sessions whose
/// numbers do not collide cannot be told apart this way and stay one group.
fn split_sessions(
    buffers: &[CarvedBuffer],
    mut idx: Vec<usize>,
) -> Vec<(Vec<usize>, Option<String>)> {
    idx.sort_by_key(|&i| {
        (
            buffers[i].timestamp,
            buffers[i].sequence_number,
            buffers[i].physical_address,
        )
    });
    let ts = |p: usize| buffers[idx[p]].timestamp;
    let mut out = Vec::new();
    let (mut start, mut why) = (0usize, None);
    // SequenceNumber -> (TimeStamp, position) in the current part.
    let mut seen: HashMap<u64, (u64, usize)> = HashMap::new();
    let mut p = 0;
    while p < idx.len() {
        let b = &buffers[idx[p]];
        match seen.get(&b.sequence_number) {
            Some(&(t, q)) if t != b.timestamp => {
                let k = (q + 1..=p)
                    .max_by_key(|&k| (ts(k) - ts(k - 1), std::cmp::Reverse(k)))
                    .unwrap_or(p);
                out.push((idx[start..k].to_vec(), why.take()));
                why = Some(format!(
                    "a new session: SequenceNumber {} appears at TimeStamps {t} and {} (LoggerId reused); split at the widest TimeStamp gap between them ({}..{})",
                    b.sequence_number,
                    b.timestamp,
                    ts(k - 1),
                    ts(k)
                ));
                start = k;
                seen.clear();
                for r in k..=p {
                    seen.insert(buffers[idx[r]].sequence_number, (ts(r), r));
                }
            }
            Some(_) => {}
            None => {
                seen.insert(b.sequence_number, (b.timestamp, p));
            }
        }
        p += 1;
    }
    out.push((idx[start..].to_vec(), why));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etl::writer::{synthetic_buffer, SyntheticHeader};

    /// Real buffers pass the identity rules: every buffer of the real ETL files
    /// (../shared/data/etl; State 3, ProcessorIndex high byte 0, BufferFlag 0x20/0x21, the
    /// header buffer of BufferType 4 included) is a buffer to `buffer_at`.
    #[test]
    fn real_etl_buffers_pass_the_rules() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/etl");
        let Ok(rd) = std::fs::read_dir(&dir) else {
            println!(
                "SKIP real_etl_buffers_pass_the_rules: {} absent",
                dir.display()
            );
            return;
        };
        let mut n = 0;
        for e in rd.flatten() {
            let b = std::fs::read(e.path()).unwrap();
            let mut o = 0;
            while let Some(size) = b.u32_at(o).map(|v| v as usize) {
                if size < 0x400 || o + size > b.len() {
                    break;
                }
                assert!(
                    matches!(buffer_at(&b[o..o + size], 0, 0), Some(Hit::Buffer { .. })),
                    "{}: buffer at {o:#x} rejected",
                    e.path().display()
                );
                n += 1;
                o += size;
            }
        }
        assert!(n > 0);
        println!("{n} real buffers pass");
    }

    /// A page holding one 0x1000-byte buffer of logger 3 with `n` 0x20-byte PERFINFO records.
    fn buffer_page(n: usize) -> Vec<u8> {
        let mut recs = Vec::new();
        for i in 0..n {
            recs.extend_from_slice(&0xC011_0002u32.to_le_bytes());
            recs.extend_from_slice(&0x20u16.to_le_bytes());
            recs.extend_from_slice(&0x0524u16.to_le_bytes());
            recs.extend_from_slice(&(1000 + i as u64).to_le_bytes());
            recs.extend_from_slice(&[0u8; 16]);
        }
        let h = SyntheticHeader {
            size: 0x1000,
            logger_id: 3,
            sequence_number: 7,
            timestamp: 1,
            buffer_type: 0,
            processor: Some(1),
        };
        synthetic_buffer(&h, &recs).unwrap().0
    }

    fn buffers(page: &[u8]) -> Vec<(u64, usize)> {
        let mut hits = Vec::new();
        page_hits(page, 0x5000, Arch::X64, &mut hits);
        hits.iter()
            .filter_map(|h| match h {
                Hit::Buffer { pa, records, .. } => Some((*pa, *records)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_buffer_is_found_and_decoys_are_not() {
        let page = buffer_page(5);
        assert_eq!(buffers(&page), [(0x5000, 5)]);
        // The chain broken right after the header.
        let mut broken = page.clone();
        broken[0x48..0x50].fill(0x11);
        assert!(buffers(&broken).is_empty());
        // Records without a header.
        let mut headless = page.clone();
        headless[..0x48].fill(0);
        assert!(buffers(&headless).is_empty());
        // Offsets inconsistent with the size.
        let mut odd = page.clone();
        odd[8..12].copy_from_slice(&0x5000u32.to_le_bytes());
        odd[4..8].copy_from_slice(&0x5000u32.to_le_bytes());
        assert!(buffers(&odd).is_empty());
        // A size that is not a multiple of 1 KiB.
        let mut size = page.clone();
        size[..4].copy_from_slice(&0x1010u32.to_le_bytes());
        assert!(buffers(&size).is_empty());
    }

    #[test]
    fn no_buffer_in_random_pages() {
        // 64 MiB of xorshift bytes (docs/performance.md's 1 GiB figure is the release run of
        // `random_gib`, ignored here for its time in debug builds).
        assert_eq!(hits_in_random(64 << 20), (0, 0));
    }

    #[test]
    #[ignore = "1 GiB of random data: run with --release --ignored (docs/performance.md figure)"]
    fn random_gib() {
        assert_eq!(hits_in_random(1 << 30), (0, 0));
    }

    /// (buffers, pending blocks with a decodable batch) found in `len` random bytes.
    fn hits_in_random(len: usize) -> (usize, usize) {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut page = vec![0u8; PAGE_SIZE as usize];
        let (mut bufs, mut blocks) = (0, 0);
        let mut hits = Vec::new();
        for p in 0..len / PAGE_SIZE as usize {
            for c in page.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_le_bytes());
            }
            hits.clear();
            page_hits(&page, p as u64 * PAGE_SIZE, Arch::X64, &mut hits);
            for h in &hits {
                match h {
                    Hit::Buffer { .. } => bufs += 1,
                    Hit::Block { pa } => {
                        let o = (pa % PAGE_SIZE) as usize;
                        if decode_pending(&page[o..], None).is_ok_and(|d| d.batch.is_some()) {
                            blocks += 1;
                        }
                    }
                    Hit::Context { .. } => {}
                }
            }
        }
        (bufs, blocks)
    }
}
