//! Buffers with data in a full or bitmap dump: their VA area, where each one hangs (GlobalList,
//! queues, per-CPU and current buffers, the dirty chain, CompressionTarget), their headers
//! (through [`super::wmi_buffer`]) and record timelines, and what a reader must report.

use super::*;
use crate::etw::wmi_buffer::BufferHeader;

/// sizeof(_ETW_SILO_TRACING_BLOCK) of the pointer-based form (etw-internals.md §3.3).
pub(super) const SILO_TRACING_BLOCK_SIZE: usize = 0x40;
/// Size of the forged KPRCB.EtwSupport block (1607): the per-logger slots end at 0x440, the
/// CCSwap pointers at 0xB40.
pub(super) const ETW_SUPPORT_BLOCK_SIZE: usize = 0xC00;

/// Page-aligned VA area for buffers (big-pool allocations).
pub(super) struct BufArea {
    next: u64,
    end: u64,
}

impl BufArea {
    pub(super) fn new(x64: bool) -> Self {
        let base = if x64 {
            0xFFFF_A08D_8000_0000
        } else {
            0xA000_0000
        };
        BufArea {
            next: base,
            // x64: 4 GiB (the stream benchmark places 1 GiB of buffers besides the others).
            end: base + if x64 { 0x1_0000_0000 } else { 0x4000_0000 },
        }
    }

    pub(super) fn alloc(&mut self, size: u32) -> u64 {
        let va = self.next;
        self.next = align_up(va + u64::from(size), PAGE_SIZE);
        assert!(self.next <= self.end, "ETW buffer area full");
        va
    }
}

/// Laid-out buffers by content, so that identical plans (the benchmark session) are encoded
/// once.
pub(super) type LayoutCache =
    HashMap<(Vec<crate::etw::wmi_buffer::RecSpec>, u32, u64, String), std::rc::Rc<LaidOut>>;

/// What the context must point at for a session's buffers.
#[derive(Default)]
pub(super) struct CtxLinks {
    /// (first SlistEntry, last SlistEntry) of BufferQueue / OverflowQueue.
    pub(super) buffer_queue: Option<(u64, u64)>,
    pub(super) overflow_queue: Option<(u64, u64)>,
    /// EX_FAST_REF value of CurrentBuffer.
    pub(super) current_buffer: Option<u64>,
    pub(super) compression_target: Option<u64>,
    /// (cpu, EX_FAST_REF value).
    pub(super) per_cpu: Vec<(u32, u64)>,
}

impl CtxLinks {
    pub(super) fn write(&self, lay: &Layouts, c: &mut [u8], ctx: u64) {
        self.write_queues(lay, c, ctx);
        if let Some(v) = self.current_buffer {
            lay.put_ptr_at(c, lay.off(CTX, "CurrentBuffer") as usize, v);
        }
        if let Some(v) = self.compression_target {
            lay.put(c, CTX, "CompressionTarget", v);
        }
    }

    /// BufferQueue / OverflowQueue (`_ETW_BUFFER_QUEUE`, 6.2+). 6.1 layouts (NBQHead) have
    /// none: a session there must not put buffers on queues.
    fn write_queues(&self, lay: &Layouts, c: &mut [u8], ctx: u64) {
        if !lay.t.has_field(CTX, "BufferQueue") {
            assert!(
                self.buffer_queue.is_none() && self.overflow_queue.is_none(),
                "this layout has no _ETW_BUFFER_QUEUE"
            );
            return;
        }
        let q = "_ETW_BUFFER_QUEUE";
        let tail_off = lay.off(q, "QueueTail");
        let entry_off = lay.off(q, "QueueEntry");
        for (field, v) in [
            ("BufferQueue", self.buffer_queue),
            ("OverflowQueue", self.overflow_queue),
        ] {
            let off = lay.off(CTX, field);
            let (first, last) = v.unwrap_or((0, ctx + off + entry_off));
            lay.put_ptr_at(c, (off + tail_off) as usize, last);
            lay.put_ptr_at(c, (off + entry_off) as usize, first);
        }
    }
}

pub(super) struct BufferPlacement<'a> {
    pub(super) lay: &'a Layouts<'a>,
    pub(super) plan: &'a [BufferSpec],
    pub(super) bufs: &'a [u64],
    pub(super) entries: &'a [u64],
    pub(super) head: u64,
    pub(super) cycle_to: Option<u64>,
    pub(super) buffer_size: u32,
    pub(super) logger_id: u32,
    pub(super) timeline: Timeline,
}

/// Where a session's record timestamps lie, in its clock's units (§7; clock 0 counted as QPC):
/// from 10% of the uptime after boot to 1% of it before the dump, so every record is between
/// boot and the dump's SystemTime whatever its clock. Buffer `seq` starts at
/// `base + seq * 7919`; records step by 1..=`step_max`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timeline {
    base: u64,
    step_max: u64,
    end: u64,
}

impl Timeline {
    /// A timeline given directly: buffer `seq` starts at `base + seq * 7919`, records step by
    /// 1..=`step_max`, flushed headers' TimeStamp at most `end` (scan scenarios' stopped
    /// sessions, whose clocks and windows are their own).
    pub(super) fn given(base: u64, step_max: u64, end: u64) -> Timeline {
        Timeline {
            base,
            step_max: step_max.max(1),
            end,
        }
    }

    /// The first record's time of buffer `seq`.
    pub(super) fn first_record(&self, seq: u64) -> u64 {
        self.base + seq * 7_919
    }

    /// Records step by 1..=this.
    pub(super) fn step_max(&self) -> u64 {
        self.step_max
    }

    /// The header TimeStamp of a flushed buffer whose first record is at `ts0` (as
    /// `place_buffer` writes it).
    pub(super) fn flushed_stamp(&self, ts0: u64) -> u64 {
        (ts0 + 9_999_999).min(self.end)
    }

    pub(super) fn new(cfg: &Config, clock: u32, plan: &[BufferSpec]) -> Timeline {
        let clock = if clock == 0 { 1 } else { clock };
        let now = clock_now(cfg, clock);
        let span = clock_now(cfg, clock) - clock_boot(cfg, clock);
        let base = now - span + span / 10;
        let end = now - span / 100;
        let max_seq = plan.iter().map(|b| b.sequence_number).max().unwrap_or(0);
        let max_records = plan
            .iter()
            .map(|b| b.records.len() as u64 + 2)
            .max()
            .unwrap_or(1);
        let room = (end - base).saturating_sub(max_seq * 7_919 + 10_000_000.min(span / 10));
        Timeline {
            base,
            step_max: (room / max_records.max(1)).clamp(1, 5000),
            end,
        }
    }
}

impl BufferPlacement<'_> {
    /// Write every buffer's pages; return the expectations and the context links.
    pub(super) fn place(
        &self,
        pages: &mut Vec<EtwPage>,
        cache: &mut LayoutCache,
    ) -> (Vec<ExpectedBuffer>, CtxLinks) {
        let lay = self.lay;
        let n = self.plan.len();
        let link = lay.off(BUF, "NextBuffer") as usize;
        assert_eq!(link, lay.off(BUF, "SlistEntry") as usize);
        let mut links = CtxLinks::default();
        let mut lists: Vec<BTreeSet<&'static str>> = vec![BTreeSet::from(["global_list"]); n];
        // Each buffer's +0x20 (NextBuffer / SlistEntry).
        let mut next_link: Vec<u64> = vec![0; n];
        self.link_queues(link as u64, &mut links, &mut lists, &mut next_link);
        self.link_current_buffers(&mut links, &mut lists, &mut next_link);
        self.mark_dirty_chains(&mut lists);

        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(self.place_buffer(i, next_link[i], &lists[i], pages, cache));
        }
        (out, links)
    }

    /// Queues, in plan order, linked through SlistEntry (+0x20 = `link`).
    fn link_queues(
        &self,
        link: u64,
        links: &mut CtxLinks,
        lists: &mut [BTreeSet<&'static str>],
        next_link: &mut [u64],
    ) {
        let n = self.plan.len();
        for kind in [QueueKind::BufferQueue, QueueKind::OverflowQueue] {
            let members: Vec<usize> = (0..n)
                .filter(|&i| self.plan[i].queue == Some(kind))
                .collect();
            if members.is_empty() {
                continue;
            }
            for w in members.windows(2) {
                next_link[w[0]] = self.bufs[w[1]] + link;
            }
            let first = self.bufs[members[0]] + link;
            let last = self.bufs[*members.last().expect("non-empty")] + link;
            let name = match kind {
                QueueKind::BufferQueue => {
                    links.buffer_queue = Some((first, last));
                    "buffer_queue"
                }
                QueueKind::OverflowQueue => {
                    links.overflow_queue = Some((first, last));
                    "overflow_queue"
                }
            };
            for &i in &members {
                lists[i].insert(name);
            }
        }
    }

    /// Per-CPU and current buffers, CompressionTarget, and the dirty chain's links (+0x20 =
    /// the previous buffer's base).
    fn link_current_buffers(
        &self,
        links: &mut CtxLinks,
        lists: &mut [BTreeSet<&'static str>],
        next_link: &mut [u64],
    ) {
        for (i, b) in self.plan.iter().enumerate() {
            if let Some(j) = b.next_buffer {
                assert!(
                    b.queue.is_none(),
                    "a queued buffer's +0x20 is its queue link"
                );
                next_link[i] = self.bufs[j];
            }
            let tagged = self.bufs[i] | u64::from(b.fast_ref_tag & 0xF);
            if let Some(cpu) = b.per_cpu {
                links.per_cpu.push((cpu, tagged));
                lists[i].insert("per_cpu");
            }
            if b.current_buffer {
                assert!(links.current_buffer.is_none(), "one CurrentBuffer");
                links.current_buffer = Some(tagged);
                lists[i].insert("current_buffer");
            }
            if b.compression_target {
                links.compression_target = Some(self.bufs[i]);
                lists[i].insert("compression_target");
            }
        }
    }

    /// The buffers on a dirty chain from a per-CPU or current buffer.
    fn mark_dirty_chains(&self, lists: &mut [BTreeSet<&'static str>]) {
        for (i, b) in self.plan.iter().enumerate() {
            if b.per_cpu.is_none() && !b.current_buffer {
                continue;
            }
            let mut cur = b.next_buffer;
            let mut seen = BTreeSet::new();
            while let Some(j) = cur {
                if !seen.insert(j) || j == i {
                    break;
                }
                lists[j].insert("dirty_chain");
                cur = self.plan[j].next_buffer;
            }
        }
    }

    /// Buffer `i`'s data (through the cache for large plans), header and pages; its
    /// expectation.
    fn place_buffer(
        &self,
        i: usize,
        next_link: u64,
        lists: &BTreeSet<&'static str>,
        pages: &mut Vec<EtwPage>,
        cache: &mut LayoutCache,
    ) -> ExpectedBuffer {
        let b = &self.plan[i];
        let tl = self.timeline;
        let ts0 = tl.first_record(b.sequence_number);
        let lo = self.laid_out(i, ts0, cache);
        let mut bytes = lo.bytes.clone();
        let flushed = b.state == crate::etw::wmi_buffer::STATE_FLUSH;
        let flink = if i + 1 < self.plan.len() {
            self.entries[i + 1]
        } else {
            self.cycle_to.unwrap_or(self.head)
        };
        let blink = if i == 0 {
            self.head
        } else {
            self.entries[i - 1]
        };
        BufferHeader {
            buffer_size: self.buffer_size,
            saved_offset: lo.saved_offset,
            current_offset: lo.current_offset,
            reference_count: u32::from(b.per_cpu.is_some() || b.current_buffer),
            timestamp: match b.header_timestamp {
                Some(v) => v,
                None if flushed => tl.flushed_stamp(ts0),
                None => 0,
            },
            sequence_number: b.sequence_number,
            next: next_link,
            processor_index: BufferHeader::processor_index(b.processor),
            logger_id: self.logger_id as u16,
            state: b.state,
            offset: lo.offset,
            buffer_flag: b.buffer_flag,
            buffer_type: b.buffer_type,
            global_flink: flink,
            global_blink: blink,
        }
        .write(&mut bytes, self.lay);
        for (k, chunk) in bytes.chunks(PAGE_SIZE as usize).enumerate() {
            let mut page = chunk.to_vec();
            page.resize(PAGE_SIZE as usize, 0);
            pages.push(EtwPage::Stored(self.bufs[i] + k as u64 * PAGE_SIZE, page));
        }
        ExpectedBuffer {
            session_id: self.logger_id,
            address: self.bufs[i],
            lists: lists.iter().map(|s| s.to_string()).collect(),
            state: b.state,
            buffer_type: b.buffer_type,
            buffer_flag: b.buffer_flag,
            processor: b.processor,
            sequence_number: b.sequence_number,
            buffer_size: self.buffer_size,
            valid_bytes: lo.valid,
            trimmed_bytes: lo.trimmed,
            record_count: lo.count,
            records_by_key: lo.by_key.clone(),
            compressed: b.compressed_len.is_some(),
            current_offset: lo.current_offset,
            saved_offset: lo.saved_offset,
            offset: lo.offset,
        }
    }

    /// Buffer `i`'s data laid out from time `ts0`; buffers of more than 500 records through
    /// the cache (identical plans are encoded once).
    fn laid_out(&self, i: usize, ts0: u64, cache: &mut LayoutCache) -> std::rc::Rc<LaidOut> {
        let b = &self.plan[i];
        let key = (
            b.records.clone(),
            self.buffer_size,
            b.compressed_len.unwrap_or(0) as u64,
            format!("{:?}{:?}{}", b.tail, b.offsets, b.fill_ff),
        );
        let seed = 0x00B0_FFE2 ^ (u64::from(self.logger_id) << 32) ^ (i as u64);
        let step_max = self.timeline.step_max;
        if b.records.len() > 500 {
            cache
                .entry(key)
                .or_insert_with(|| {
                    std::rc::Rc::new(lay_out(
                        b,
                        self.buffer_size,
                        (ts0, step_max),
                        &mut Rng::new(seed),
                    ))
                })
                .clone()
        } else {
            std::rc::Rc::new(lay_out(
                b,
                self.buffer_size,
                (ts0, step_max),
                &mut Rng::new(seed),
            ))
        }
    }
}
