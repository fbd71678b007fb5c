//! What the full and bitmap dumps put in their ETW buffers: [`BufferSpec`] (state, offsets,
//! records, the lists of etw-internals.md §3 a buffer hangs on), the standard and benchmark
//! plans, and what a reader must report per buffer ([`ExpectedBuffer`]). The bytes are written
//! by [`super::wmi_buffer`].

use std::collections::BTreeMap;

use super::wmi_buffer::*;
use crate::util::Rng;

/// Which `ETW_BUFFER_QUEUE` of the context a buffer is on (linked through +0x20, in the order
/// of the session's buffer list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    BufferQueue,
    OverflowQueue,
}

/// One buffer of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferSpec {
    pub state: u32,
    pub buffer_type: u16,
    pub buffer_flag: u16,
    /// ClientContext.ProcessorNumber (Alignment = 8, so ProcessorIndex = 0x800 | processor).
    pub processor: u32,
    pub sequence_number: u64,
    pub records: Vec<RecSpec>,
    pub tail: Tail,
    pub offsets: Offsets,
    /// Bytes [valid, BufferSize) are 0xFF (a flushed buffer) instead of zero.
    pub fill_ff: bool,
    /// Some(n): a compressed buffer: n pseudo-random bytes after the header, valid = 0x48 + n
    /// (8-aligned), not parsed.
    pub compressed_len: Option<usize>,
    /// The current buffer of this CPU (ProcessorBuffers[LoggerId] / EtwSupport slot).
    pub per_cpu: Option<u32>,
    /// `_WMI_LOGGER_CONTEXT.CurrentBuffer` (EX_FAST_REF) points here.
    pub current_buffer: bool,
    /// Low 4 bits of the EX_FAST_REF values pointing here (a reference count, §2.7).
    pub fast_ref_tag: u8,
    /// +0x20 (NextBuffer) = this buffer of the same session (the dirty chain, §3.4).
    pub next_buffer: Option<usize>,
    pub queue: Option<QueueKind>,
    /// `_WMI_LOGGER_CONTEXT.CompressionTarget` points here.
    pub compression_target: bool,
    /// The header's TimeStamp (logger clock units); None: the standard choice (a flushed
    /// buffer gets a synthetic value, others 0).
    pub header_timestamp: Option<u64>,
}

impl BufferSpec {
    pub(crate) fn new(state: u32, processor: u32, seq: u64, records: Vec<RecSpec>) -> BufferSpec {
        BufferSpec {
            state,
            buffer_type: BUFFER_TYPE_GENERIC,
            buffer_flag: 0,
            processor,
            sequence_number: seq,
            records,
            tail: Tail::None,
            offsets: if state == STATE_FLUSH {
                Offsets::Flushed
            } else {
                Offsets::Live
            },
            fill_ff: false,
            compressed_len: None,
            per_cpu: None,
            current_buffer: false,
            fast_ref_tag: 0,
            next_buffer: None,
            queue: None,
            compression_target: false,
            header_timestamp: None,
        }
    }
}

/// A buffer as a reader must report it (`etwdump buffers --format json`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedBuffer {
    pub session_id: u32,
    pub address: u64,
    /// Sorted: "global_list", "current_buffer", "per_cpu", "buffer_queue", "overflow_queue",
    /// "dirty_chain", "batched_buffer_list", "compression_target".
    pub lists: Vec<String>,
    pub state: u32,
    pub buffer_type: u16,
    pub buffer_flag: u16,
    /// ClientContext.ProcessorIndex & 0x7FF (= ProcessorNumber here).
    pub processor: u32,
    pub sequence_number: u64,
    pub buffer_size: u32,
    /// §2.6: CurrentOffset if <= BufferSize, else SavedOffset.
    pub valid_bytes: u32,
    /// valid_bytes - (offset of the last complete record + ALIGN8(its Size)); for a buffer
    /// without a complete record, valid_bytes - 0x48. 0 for compressed buffers.
    pub trimmed_bytes: u32,
    /// Complete records (0 for compressed buffers: not parsed).
    pub record_count: u32,
    pub records_by_key: BTreeMap<String, u32>,
    pub compressed: bool,
    // ---- raw header values, for diagnostics ----
    pub current_offset: u32,
    pub saved_offset: u32,
    pub offset: u32,
}

impl ExpectedBuffer {
    /// Whether etwdump's `extract` writes this buffer: not compressed and at least one
    /// complete record.
    pub fn extractable(&self) -> bool {
        !self.compressed && self.record_count > 0
    }
}

/// Records filling about `bytes` bytes: CSwitch PERFINFO records (with and without PEBS/PMC),
/// sampled-profile and syscall PERFINFO records, thread/process SYSTEM records.
pub fn filler(build: u32, bytes: usize, seed: u64) -> Vec<RecSpec> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut used = 0;
    while used < bytes {
        let r = match rng.next_u64() % 8 {
            0..=2 => RecSpec::cswitch(build, 0, false),
            3 => RecSpec::cswitch(build, 2, true),
            4 => RecSpec::PerfInfo {
                x64: true,
                hook: HOOK_SAMPLED_PROFILE,
                version: 2,
                pmc: 0,
                pebs: false,
                data: 0x10,
            },
            5 => RecSpec::PerfInfo {
                x64: true,
                hook: HOOK_SYSCALL_ENTER,
                version: 2,
                pmc: 0,
                pebs: false,
                data: 8,
            },
            6 => RecSpec::System {
                x64: true,
                hook: HOOK_THREAD_DCSTART,
                version: 3,
                data: 0x48 + (rng.next_u64() % 0x20) as usize,
            },
            _ => RecSpec::Compact {
                x64: true,
                hook: HOOK_DPC,
                version: 2,
                data: 0x18,
            },
        };
        used += align8(r.size());
        out.push(r);
    }
    out
}

/// Every header type of §5 (and odd sizes) once or more, for one buffer.
pub fn every_header_type(build: u32) -> Vec<RecSpec> {
    vec![
        RecSpec::System {
            x64: true,
            hook: HOOK_PROCESS_START,
            version: 4,
            data: 0x60,
        },
        RecSpec::System {
            x64: false,
            hook: HOOK_THREAD_DCSTART,
            version: 2,
            data: 0x2C,
        },
        RecSpec::Compact {
            x64: true,
            hook: HOOK_DPC,
            version: 2,
            data: 0x18,
        },
        RecSpec::Compact {
            x64: false,
            hook: HOOK_DPC,
            version: 2,
            data: 0x0C,
        },
        RecSpec::cswitch(build, 0, false),
        RecSpec::cswitch(build, 0, true),
        RecSpec::cswitch(build, 3, false),
        RecSpec::cswitch(build, 2, true),
        RecSpec::PerfInfo {
            x64: false,
            hook: HOOK_SAMPLED_PROFILE,
            version: 2,
            pmc: 0,
            pebs: false,
            data: 0x0C,
        },
        RecSpec::PerfInfo {
            x64: true,
            hook: HOOK_COMPCS,
            version: 2,
            pmc: 0,
            pebs: false,
            data: 0x6B,
        },
        // Odd size: 0x30 + 0x2B = 0x5B.
        RecSpec::Full {
            x64: true,
            data: 0x2B,
        },
        RecSpec::Full {
            x64: false,
            data: 0x10,
        },
        RecSpec::Message { data: 0x1D },
        RecSpec::EventHeader {
            x64: true,
            ext: vec![],
            data: 0x22,
        },
        RecSpec::EventHeader {
            x64: true,
            ext: vec![(1, 16), (6, 8 + 8 * 5), (3, 4)],
            data: 0x13,
        },
        RecSpec::EventHeader {
            x64: false,
            ext: vec![(12, 8)],
            data: 0x08,
        },
        RecSpec::cswitch(build, 0, false),
        RecSpec::PerfInfo {
            x64: true,
            hook: HOOK_DISK_READ,
            version: 3,
            pmc: 1,
            pebs: false,
            data: 0x31,
        },
        RecSpec::EventHeader {
            x64: false,
            ext: vec![],
            data: 0x0B,
        },
    ]
}

/// Buffers of one standard-set slot (see [`crate::EtwSpec::with_buffers`]); None: headers only.
pub(crate) fn standard_plan(build: u32, slot: u32) -> Option<Vec<BufferSpec>> {
    Some(match slot {
        0 => ntkl_plan(build),
        2 => ckcl_plan(build),
        3 => eventlog_system_plan(),
        4 => wdi_context_plan(),
        5 => lwt_net_log_plan(build),
        6 => ubpm_plan(),
        _ => return None,
    })
}

/// Filler records of about `b` bytes for a standard buffer (seeded per build).
fn fl(build: u32, b: usize, seed: u64) -> Vec<RecSpec> {
    filler(build, b, seed ^ u64::from(build))
}

/// NT Kernel Logger (0x20000, file mode): four per-CPU current buffers, two flushed ones
/// on the dirty chain of CPU 0's current buffer.
fn ntkl_plan(build: u32) -> Vec<BufferSpec> {
    let mut b0 = BufferSpec::new(STATE_GENERAL_LOGGING, 0, 102, {
        let mut v = every_header_type(build);
        v.extend(fl(build, 0x3000, 1));
        v
    });
    b0.per_cpu = Some(0);
    b0.fast_ref_tag = 0xF;
    b0.next_buffer = Some(4);
    let mut b1 = BufferSpec::new(STATE_GENERAL_LOGGING, 1, 103, fl(build, 0x1_F000, 2));
    b1.per_cpu = Some(1);
    b1.fast_ref_tag = 0x3;
    b1.offsets = Offsets::Overflowed;
    let mut b2 = BufferSpec::new(STATE_GENERAL_LOGGING, 2, 104, fl(build, 0x2400, 3));
    b2.per_cpu = Some(2);
    b2.tail = Tail::HalfWritten;
    let mut b3 = BufferSpec::new(STATE_GENERAL_LOGGING, 3, 105, fl(build, 0x1800, 4));
    b3.per_cpu = Some(3);
    b3.fast_ref_tag = 0x7;
    b3.tail = Tail::UnfinishedMarker;
    let mut b4 = BufferSpec::new(STATE_FLUSH, 0, 101, fl(build, 0x1_E800, 5));
    b4.next_buffer = Some(5);
    b4.offsets = Offsets::Overflowed;
    b4.buffer_flag = BUFFER_FLAG_EVENTS_LOST;
    let mut b5 = BufferSpec::new(STATE_FLUSH, 0, 100, fl(build, 0x1_F800, 6));
    b5.fill_ff = true;
    b5.buffer_type = BUFFER_TYPE_RUNDOWN;
    vec![b0, b1, b2, b3, b4, b5]
}

/// Circular Kernel Context Logger (0x10000, buffering mode): CPU 0's current buffer,
/// the history on BufferQueue (a full one, a free one reset for reuse), a compressed
/// buffer that is the CompressionTarget.
fn ckcl_plan(build: u32) -> Vec<BufferSpec> {
    let compressed_ok = build >= 14393;
    let mut c0 = BufferSpec::new(STATE_GENERAL_LOGGING, 0, 57, {
        let mut v = vec![
            RecSpec::cswitch(build, 0, true),
            RecSpec::cswitch(build, 4, true),
            RecSpec::cswitch(build, 7, false),
        ];
        v.extend(fl(build, 0x6000, 11));
        v
    });
    c0.per_cpu = Some(0);
    c0.fast_ref_tag = 0x1;
    c0.buffer_type = BUFFER_TYPE_CTX_SWAP;
    let mut c1 = BufferSpec::new(STATE_FLUSH, 0, 56, fl(build, 0xF000, 12));
    c1.queue = Some(QueueKind::BufferQueue);
    let mut c2 = BufferSpec::new(STATE_FREE, 1, 12, fl(build, 0x4000, 13));
    c2.queue = Some(QueueKind::BufferQueue);
    c2.offsets = Offsets::Reset;
    let mut c3 = BufferSpec::new(
        if compressed_ok {
            STATE_COMPRESSED
        } else {
            STATE_FLUSH
        },
        2,
        55,
        vec![],
    );
    c3.compressed_len = Some(0x2345);
    c3.buffer_flag = BUFFER_FLAG_COMPRESSED;
    c3.compression_target = true;
    vec![c0, c1, c2, c3]
}

/// EventLog-System (0x8000, real-time): CPU 2's current buffer of manifest events, its
/// flushed predecessor on the dirty chain, a free buffer (stale events, offsets kept) on
/// BufferQueue.
fn eventlog_system_plan() -> Vec<BufferSpec> {
    let ev = |n: usize| -> Vec<RecSpec> {
        (0..n)
            .map(|i| RecSpec::EventHeader {
                x64: true,
                ext: if i % 3 == 0 { vec![(1, 16)] } else { vec![] },
                data: 0x21 + (i * 7) % 0x60,
            })
            .collect()
    };
    let mut e0 = BufferSpec::new(STATE_GENERAL_LOGGING, 2, 31, ev(40));
    e0.per_cpu = Some(2);
    e0.fast_ref_tag = 0x2;
    e0.next_buffer = Some(1);
    let e1 = BufferSpec::new(STATE_FLUSH, 2, 30, ev(150));
    let mut e2 = BufferSpec::new(STATE_FREE, 1, 7, ev(60));
    e2.queue = Some(QueueKind::BufferQueue);
    vec![e0, e1, e2]
}

/// WdiContextLog (0x4000, buffering mode): CPU 3's current buffer with MESSAGE and
/// INSTANCE records; a full buffer on the OverflowQueue.
fn wdi_context_plan() -> Vec<BufferSpec> {
    let mut v = Vec::new();
    for i in 0..12 {
        v.push(RecSpec::Message { data: 0x10 + i * 5 });
        if i % 4 == 0 {
            v.push(RecSpec::Instance {
                x64: i % 8 == 0,
                data: 0x18,
            });
        }
    }
    let mut w0 = BufferSpec::new(STATE_GENERAL_LOGGING, 3, 9, v);
    w0.per_cpu = Some(3);
    w0.fast_ref_tag = 0x5;
    let w1_recs = (0..60)
        .map(|i| RecSpec::Message { data: 0x20 + i % 9 })
        .collect();
    let mut w1 = BufferSpec::new(STATE_FLUSH, 3, 8, w1_recs);
    w1.queue = Some(QueueKind::OverflowQueue);
    vec![w0, w1]
}

/// LwtNetLog (0x40000, circular file; cyclic GlobalList): CPU 1's current buffer of
/// 32-bit-layout records and a zero reservation at its end, its flushed predecessor,
/// an empty free buffer.
fn lwt_net_log_plan(build: u32) -> Vec<BufferSpec> {
    let v32 = |n: usize| -> Vec<RecSpec> {
        (0..n)
            .map(|i| match i % 4 {
                0 => RecSpec::System {
                    x64: false,
                    hook: HOOK_DISK_READ,
                    version: 2,
                    data: 0x28,
                },
                1 => RecSpec::Compact {
                    x64: false,
                    hook: HOOK_DPC,
                    version: 2,
                    data: 0x0C,
                },
                2 => RecSpec::Full {
                    x64: false,
                    data: 0x5 + i % 0x30,
                },
                _ => RecSpec::PerfInfo {
                    x64: false,
                    hook: HOOK_CSWITCH,
                    version: cswitch_version(build),
                    pmc: 0,
                    pebs: false,
                    data: 0x18,
                },
            })
            .collect()
    };
    let mut l0 = BufferSpec::new(STATE_GENERAL_LOGGING, 1, 1001, v32(300));
    l0.per_cpu = Some(1);
    l0.fast_ref_tag = 0xE;
    l0.tail = Tail::ZeroReservation;
    l0.next_buffer = Some(1);
    let l1 = BufferSpec::new(STATE_FLUSH, 1, 1000, v32(2000));
    let l2 = BufferSpec::new(STATE_FREE, 0, 0, vec![]);
    vec![l0, l1, l2]
}

/// UBPM (0x2000, NO_PER_PROCESSOR_BUFFERING): CurrentBuffer and a free buffer whose stale
/// events are still inside CurrentOffset.
fn ubpm_plan() -> Vec<BufferSpec> {
    let ev = |n: usize, d: usize| -> Vec<RecSpec> {
        (0..n)
            .map(|i| RecSpec::EventHeader {
                x64: true,
                ext: vec![],
                data: d + i,
            })
            .collect()
    };
    let mut u0 = BufferSpec::new(STATE_GENERAL_LOGGING, 0, 4, ev(9, 0x0B));
    u0.current_buffer = true;
    u0.fast_ref_tag = 0x9;
    let u1 = BufferSpec::new(STATE_FREE, 0, 3, ev(20, 0x30));
    vec![u0, u1]
}

/// The benchmark session's buffers: `count` flushed buffers of `buffer_size` bytes, full of
/// kernel records (8 record patterns, reused).
pub(crate) fn large_plan(build: u32, count: usize, buffer_size: u32) -> Vec<BufferSpec> {
    (0..count)
        .map(|i| {
            let recs = filler(
                build,
                buffer_size as usize - 0x48 - 0x100,
                0xBE7C_0000 + (i % 8) as u64,
            );
            let mut b = BufferSpec::new(STATE_FLUSH, (i % 4) as u32, 10_000 + i as u64, recs);
            b.fill_ff = i % 2 == 0;
            b
        })
        .collect()
}
