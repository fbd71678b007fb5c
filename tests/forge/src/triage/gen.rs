//! ETW buffers as the kernel holds them: a `_WMI_BUFFER_HEADER` (etw-internals.md §2.1) followed
//! by PERFINFO64 or EVENT_HEADER records (§5) on 8-byte alignment relative to the buffer start,
//! each record's Size unpadded and the next one at ALIGN8(Size).

use super::consts::*;
pub(crate) use crate::etw::message::MessageSpec;
use crate::etw::wmi_buffer::{
    put_event_descriptor, put_event_header, put_ext_item, put_ids, put_perfinfo_header, X64_HEADER,
};
pub(crate) use crate::etw::wmi_buffer::{resync, BufferHeader};
use crate::util::{guid_from_str, put_bytes, put_u16, put_u32, put_u64, Rng};

/// What a generated record is.
#[derive(Clone, Debug)]
pub(crate) enum GenKind {
    /// PERFINFO64 (0xC0110002), no thread or process id.
    Perf {
        hook: u16,
        initial_time: u64,
        routine: u64,
        target: Routine,
        vector: Option<u16>,
        return_value: Option<u8>,
    },
    /// EVENT_HEADER64 (0xC013xxxx).
    Event {
        provider: String,
        id: u16,
        version: u8,
        channel: u8,
        level: u8,
        opcode: u8,
        task: u16,
        keyword: u64,
        flags: u16,
        property: u16,
        tid: u32,
        pid: u32,
        ext_types: Vec<u16>,
    },
    /// TRACE_MESSAGE (0x90 in byte 3): `crate::etw::message`.
    Message(MessageSpec),
}

/// A record placed in a buffer.
#[derive(Clone, Debug)]
pub(crate) struct GenRecord {
    /// Offset from the buffer start.
    pub offset: u32,
    /// The record's Size field (unpadded).
    pub size: u16,
    pub marker: u32,
    pub timestamp: u64,
    pub kind: GenKind,
}

/// A buffer's content `[0, valid)` and its records.
#[derive(Clone, Debug)]
pub(crate) struct GenBuffer {
    pub va: u64,
    /// The kernel's valid length: `CurrentOffset <= BufferSize ? CurrentOffset : SavedOffset`.
    pub valid: u32,
    /// `[0, max(valid, 0x48))`: the header is always complete here, even when `valid` < 0x48.
    pub bytes: Vec<u8>,
    pub records: Vec<GenRecord>,
    pub header: BufferHeader,
}

/// Write `h` over the buffer's first 0x48 bytes with the 19041 x64 offsets.
pub(crate) fn write_header(buf: &mut [u8], h: &BufferHeader) {
    h.write(buf, &X64_HEADER);
}

pub(crate) fn align8(v: u32) -> u32 {
    (v + 7) & !7
}

/// Where the routines of logger-2 records live.
pub(crate) struct RoutineMap<'a> {
    pub kernel_base: u64,
    /// (base name, DllBase) of every module of the driver list.
    pub modules: &'a [(String, u64)],
}

impl RoutineMap<'_> {
    pub(crate) fn address(&self, r: Routine) -> u64 {
        match r {
            Routine::Kernel(name) => self.kernel_base + rva(name),
            Routine::Module(m, off) => {
                let base = self
                    .modules
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(m))
                    .map(|(_, b)| *b)
                    .unwrap_or_else(|| panic!("module {m} not in the driver list"));
                base + off
            }
        }
    }
}

/// Parameters of logger 2's current buffer (the CKCL-like logger of triage-etw.md §2.1).
pub(crate) struct PerfBufferParams<'a> {
    pub va: u64,
    pub buffer_size: u32,
    pub records: usize,
    pub logger_id: u16,
    pub processor: u16,
    pub sequence_number: u64,
    /// Timestamp of the last record (cycles).
    pub last_timestamp: u64,
    pub mhz: u32,
    pub routines: RoutineMap<'a>,
    /// `Some(v)`: the kernel's valid length is `v` (CurrentOffset overflowed, SavedOffset = v)
    /// and the buffer holds no records.
    pub valid_override: Option<u32>,
    pub mix: super::PerfMix,
}

/// Logger 2's current buffer: PERFINFO64 records with the hooks, sizes and payloads of
/// triage-etw.md §2.1 (0x0F32 MSI ISR 0x28, 0x0F43 ISR 0x24, 0x0F44 DPC / 0x0F45 timer DPC
/// 0x20), timestamps in CPU cycles, increasing, 0.2-4 ms apart; InitialTime 0.5-8 µs before.
pub(crate) fn perf_buffer(p: &PerfBufferParams, rng: &mut Rng) -> GenBuffer {
    let n = if p.valid_override.is_some() {
        0
    } else {
        p.records
    };
    // Kinds: one ISR at 85 %, else ~79 % MSI, ~11 % DPC, ~10 % timer DPC.
    let isr_at = n * 85 / 100;
    let mut hooks = Vec::with_capacity(n);
    for i in 0..n {
        let h = match p.mix {
            super::PerfMix::D1 if i == isr_at => HOOK_INTERRUPT,
            super::PerfMix::D1 => match rng.range(0, 100) {
                0..=78 => HOOK_MSI_INTERRUPT,
                79..=89 => HOOK_DPC,
                _ => HOOK_TIMER_DPC,
            },
            // Shuffled below.
            super::PerfMix::Arm64 => match i * 62 / n.max(1) {
                0..=21 => HOOK_INTERRUPT,
                22..=23 => HOOK_TIMER_DPC,
                _ => HOOK_DPC,
            },
        };
        hooks.push(h);
    }
    if p.mix == super::PerfMix::Arm64 {
        // The real block's proportions (22 ISR, 2 timer DPC, 38 DPC of 62) in a drawn order.
        for i in (1..n).rev() {
            hooks.swap(i, rng.range(0, i as u64 + 1) as usize);
        }
    }
    let mhz = u64::from(p.mhz);
    let mut ts = vec![0u64; n];
    if n > 0 {
        ts[n - 1] = p.last_timestamp;
        for i in (0..n - 1).rev() {
            ts[i] = ts[i + 1] - rng.range(mhz * 200, mhz * 4000);
        }
    }
    let mut bytes = vec![0u8; WMI_BUFFER_HEADER_SIZE as usize];
    let mut records = Vec::with_capacity(n);
    let mut off = WMI_BUFFER_HEADER_SIZE;
    for i in 0..n {
        let hook = hooks[i];
        let (size, target, vector, rv): (u16, Routine, Option<u16>, Option<u8>) = match hook {
            HOOK_MSI_INTERRUPT => (0x28, MSI_ROUTINE, Some(MSI_VECTOR), Some(1)),
            HOOK_INTERRUPT => (0x24, ISR_ROUTINE, Some(ISR_VECTOR), Some(1)),
            HOOK_DPC => {
                let r = DPC_ROUTINES[rng.range(0, DPC_ROUTINES.len() as u64) as usize];
                (0x20, r, None, None)
            }
            _ => {
                let r = TIMER_DPC_ROUTINES[rng.range(0, TIMER_DPC_ROUTINES.len() as u64) as usize];
                (0x20, r, None, None)
            }
        };
        let routine = p.routines.address(target);
        let initial_time = ts[i] - rng.range(mhz / 2, mhz * 8);
        let mut rec = vec![0u8; align8(u32::from(size)) as usize];
        put_perfinfo_header(&mut rec, PERFINFO64_MARKER, size, hook, ts[i]);
        put_u64(&mut rec, 0x10, initial_time);
        put_u64(&mut rec, 0x18, routine);
        if let (Some(v), Some(r)) = (vector, rv) {
            // PERFINFO_INTERRUPT_INFORMATION: u8 ReturnValue @0x10, u16 Vector @0x11,
            // u8 Reserved @0x13 of the payload [H3]; MSI adds a u32 (0 in D1).
            rec[0x20] = r;
            put_u16(&mut rec, 0x21, v);
        }
        records.push(GenRecord {
            offset: off,
            size,
            marker: PERFINFO64_MARKER,
            timestamp: ts[i],
            kind: GenKind::Perf {
                hook,
                initial_time,
                routine,
                target,
                vector,
                return_value: rv,
            },
        });
        off += rec.len() as u32;
        bytes.extend_from_slice(&rec);
    }
    assert!(
        off <= p.buffer_size,
        "logger-2 records ({off:#x}) exceed the buffer ({:#x})",
        p.buffer_size
    );
    let (valid, saved, current) = match p.valid_override {
        // CurrentOffset ran past BufferSize; SavedOffset holds the valid length.
        Some(v) => (v, v, p.buffer_size + 0x28),
        None => (off, 0, off),
    };
    let header = BufferHeader {
        buffer_size: p.buffer_size,
        saved_offset: saved,
        current_offset: current,
        reference_count: 0xF,
        // D1: TimeStamp equals the last record's timestamp.
        timestamp: ts.last().copied().unwrap_or(p.last_timestamp),
        sequence_number: p.sequence_number,
        next: 0,
        processor_index: p.processor,
        logger_id: p.logger_id,
        state: 1,
        // D1: Offset 0x48 in logger 2's current buffer.
        offset: WMI_BUFFER_HEADER_SIZE,
        buffer_flag: 0,
        buffer_type: 0,
        global_flink: p.va + u64::from(p.buffer_size) + 0x38,
        global_blink: p.va - u64::from(p.buffer_size) + 0x38,
    };
    write_header(&mut bytes, &header);
    GenBuffer {
        va: p.va,
        valid,
        bytes,
        records,
        header,
    }
}

/// Parameters of a buffer holding EVENT_HEADER records.
#[derive(Clone)]
pub(crate) struct EventBufferParams {
    pub va: u64,
    pub buffer_size: u32,
    pub records: usize,
    pub logger_id: u16,
    pub processor: u16,
    pub sequence_number: u64,
    pub first_timestamp: u64,
    pub last_timestamp: u64,
    /// Start with D1's Kernel-General event 12 (OS version + boot time payload).
    pub kernel_general_first: Option<KernelGeneral>,
    /// Extra payload bytes on the last record (to move record boundaries).
    pub last_record_extra: u16,
    /// TRACE_MESSAGE records instead of events: (OptionFlags in turn, an event after every
    /// this many messages (0: none)); `records` counts the messages.
    pub messages: Option<(Vec<u16>, usize)>,
    pub global_flink: u64,
    pub global_blink: u64,
    /// `Some(v)`: valid length `v` with CurrentOffset past BufferSize and no records.
    pub valid_override: Option<u32>,
}

/// Payload of Kernel-General event 12 as in D1: {10, 0, build, qfe, 0, u16 0, StartTime}.
#[derive(Clone, Copy)]
pub(crate) struct KernelGeneral {
    pub build: u32,
    pub qfe: u32,
    pub boot_time: u64,
}

/// A buffer of EVENT_HEADER records (etw-internals.md §5; D1 triage-etw.md §2.3): Size u16,
/// HeaderType u16 (0xC013), Flags u16, EventProperty u16, ThreadId, ProcessId, TimeStamp,
/// ProviderId, EVENT_DESCRIPTOR, ProcessorTime, ActivityId (0x50 bytes), then the extended
/// items {u16 item size, u16 ExtType, u16 more-flag, u16 DataSize} + data, 8-aligned, then the
/// user payload.
pub(crate) fn event_buffer(p: &EventBufferParams, rng: &mut Rng) -> GenBuffer {
    let n = match (&p.valid_override, &p.messages) {
        (Some(_), _) => 0,
        // Messages plus one event after every `event_every` of them.
        (None, Some((_, e))) if *e > 0 => p.records + p.records / e,
        _ => p.records,
    };
    let ts = event_timestamps(p, n, rng);
    let mut bytes = vec![0u8; WMI_BUFFER_HEADER_SIZE as usize];
    let mut records = Vec::with_capacity(n);
    let mut off = WMI_BUFFER_HEADER_SIZE;
    let mut tpl_index = 0usize;
    for (i, &t) in ts.iter().enumerate() {
        if let Some((flags, event_every)) = &p.messages {
            if *event_every > 0 && i % (event_every + 1) == *event_every {
                let (tpl, payload) = draw_event_template(rng, i, n, &mut tpl_index);
                // Every 8th event between messages is an EVENT_HEADER32 (0xC012), as the real
                // ARM64 dump's WiFiSession holds two (file 0xC46A0, 0xC4788).
                let k = i / (event_every + 1);
                let (rec, record) = encode_event(tpl, &payload, t, off, k % 8 != 7, rng);
                records.push(record);
                off += rec.len() as u32;
                bytes.extend_from_slice(&rec);
                continue;
            }
            let k = records
                .iter()
                .filter(|r: &&GenRecord| matches!(r.kind, GenKind::Message(_)))
                .count();
            let m = MessageSpec::drawn(flags[k % flags.len()], t, 0x38, rng);
            let rec = m.encode();
            let marker = u32::from_le_bytes(rec[0..4].try_into().expect("4"));
            records.push(GenRecord {
                offset: off,
                size: rec.len() as u16,
                marker,
                timestamp: t,
                kind: GenKind::Message(m),
            });
            let padded = align8(rec.len() as u32) as usize;
            off += padded as u32;
            bytes.extend_from_slice(&rec);
            bytes.resize(bytes.len() + padded - rec.len(), 0);
            continue;
        }
        let (tpl, mut payload) = match (i, p.kernel_general_first) {
            (0, Some(kg)) => (&KERNEL_GENERAL_12, kernel_general_payload(kg)),
            _ => draw_event_template(rng, i, n, &mut tpl_index),
        };
        if i + 1 == n {
            payload.extend(std::iter::repeat_n(0x5A, usize::from(p.last_record_extra)));
        }
        let (rec, record) = encode_event(tpl, &payload, t, off, true, rng);
        records.push(record);
        off += rec.len() as u32;
        bytes.extend_from_slice(&rec);
    }
    assert!(
        off <= p.buffer_size,
        "event records ({off:#x}) exceed the buffer ({:#x})",
        p.buffer_size
    );
    let (valid, saved, current) = match p.valid_override {
        Some(v) => (v, v, p.buffer_size + 0x90),
        None => (off, 0, off),
    };
    let header = BufferHeader {
        buffer_size: p.buffer_size,
        saved_offset: saved,
        current_offset: current,
        reference_count: 0xF,
        timestamp: 0,
        sequence_number: p.sequence_number,
        next: 0,
        processor_index: p.processor,
        logger_id: p.logger_id,
        state: 1,
        offset: valid,
        buffer_flag: 0,
        buffer_type: 0,
        global_flink: p.global_flink,
        global_blink: p.global_blink,
    };
    write_header(&mut bytes, &header);
    GenBuffer {
        va: p.va,
        valid,
        bytes,
        records,
        header,
    }
}

/// `n` timestamps from `first_timestamp` to `last_timestamp`, evenly spread with jitter
/// (the first and last exact).
fn event_timestamps(p: &EventBufferParams, n: usize, rng: &mut Rng) -> Vec<u64> {
    let mut ts = Vec::with_capacity(n);
    if n == 1 {
        ts.push(p.last_timestamp);
    } else if n > 1 {
        let span = p.last_timestamp - p.first_timestamp;
        let step = span / (n as u64 - 1);
        for i in 0..n {
            let base = p.first_timestamp + span * i as u64 / (n as u64 - 1);
            let jitter = if i == 0 || i == n - 1 || step < 4 {
                0
            } else {
                rng.range(0, step / 2)
            };
            ts.push(base + jitter);
        }
    }
    ts
}

/// D1's Kernel-General event 12 (its payload: [`kernel_general_payload`]).
const KERNEL_GENERAL_12: EventTemplate = EventTemplate {
    provider: KERNEL_GENERAL,
    id: 12,
    version: 0,
    channel: 8,
    level: 4,
    opcode: 0,
    task: 1,
    keyword: 0x8000_0000_0000_0080,
    ext: 1,
    property: 0,
    tid: 8,
    pid: 4,
    payload: 0x1E,
};

/// Kernel-General event 12's payload: {10, 0, build, qfe, 0, u16 0, StartTime}.
fn kernel_general_payload(kg: KernelGeneral) -> Vec<u8> {
    let mut payload = vec![0u8; 0x1E];
    put_u32(&mut payload, 0, 10);
    put_u32(&mut payload, 4, 0);
    put_u32(&mut payload, 8, kg.build);
    put_u32(&mut payload, 12, kg.qfe);
    put_u64(&mut payload, 0x16, kg.boot_time);
    payload
}

/// Record `i` of `n`: one long Kernel-WHEA record a third of the way in (D1 has a 5476-byte
/// one: "the clusters are only gaps caused by long payloads"), else mostly the rotation,
/// sometimes a random template; with a random payload of the template's length (+ 0, 6 or
/// 12 bytes).
fn draw_event_template(
    rng: &mut Rng,
    i: usize,
    n: usize,
    tpl_index: &mut usize,
) -> (&'static EventTemplate, Vec<u8>) {
    let t = if n >= 30 && i == n / 3 {
        &WHEA_LONG
    } else if rng.range(0, 4) == 0 {
        &EVENT_TEMPLATES[rng.range(0, EVENT_TEMPLATES.len() as u64) as usize]
    } else {
        *tpl_index += 1;
        &EVENT_TEMPLATES[*tpl_index % EVENT_TEMPLATES.len()]
    };
    let extra = rng.range(0, 3) as usize * 6;
    let mut payload = vec![0u8; usize::from(t.payload) + extra];
    rng.fill(&mut payload);
    (t, payload)
}

/// The extended items of a template's `ext` (0 none, 1 SID, 2 SID + provider traits): their
/// bytes and types.
fn ext_items(ext: u8) -> (Vec<u8>, Vec<u16>) {
    let mut ext_bytes = Vec::new();
    let mut ext_types = Vec::new();
    let items: &[(u16, &[u8])] = match ext {
        0 => &[],
        1 => &[(EXT_SID, &SID_LOCAL_SYSTEM)],
        _ => &[
            (EXT_SID, &SID_LOCAL_SYSTEM),
            (EXT_PROV_TRAITS, &PROVIDER_TRAITS),
        ],
    };
    for (k, (ty, data)) in items.iter().enumerate() {
        let item_size = 8 + align8(data.len() as u32) as usize;
        let mut item = vec![0u8; item_size];
        let more = k + 1 < items.len();
        put_ext_item(&mut item, 0, item_size as u16, *ty, more, data.len() as u16);
        put_bytes(&mut item, 8, data);
        ext_bytes.extend_from_slice(&item);
        ext_types.push(*ty);
    }
    (ext_bytes, ext_types)
}

/// An EVENT_HEADER record of template `t` at time `t_stamp` and buffer offset `off` (padded to
/// 8 bytes) and what it is.
fn encode_event(
    t: &EventTemplate,
    payload: &[u8],
    t_stamp: u64,
    off: u32,
    x64: bool,
    rng: &mut Rng,
) -> (Vec<u8>, GenRecord) {
    let (ext_bytes, ext_types) = ext_items(t.ext);
    let flags: u16 = if t.ext > 0 { 0x0001 } else { 0 };
    let size = 0x50 + ext_bytes.len() + payload.len();
    let size16 = u16::try_from(size).expect("event size fits u16");
    let mut rec = vec![0u8; align8(size as u32) as usize];
    put_event_header(&mut rec, size16, x64, flags, t.property);
    put_ids(&mut rec, (t.tid, t.pid, t_stamp));
    put_bytes(&mut rec, 0x18, &guid_from_str(t.provider));
    put_event_descriptor(&mut rec, t.id, t.version, t.channel, t.level, t.opcode);
    put_u16(&mut rec, 0x2E, t.task);
    put_u64(&mut rec, 0x30, t.keyword);
    put_u64(&mut rec, 0x38, rng.range(0, 0x60)); // ProcessorTime
    put_bytes(&mut rec, 0x50, &ext_bytes);
    put_bytes(&mut rec, 0x50 + ext_bytes.len(), payload);
    let marker = u32::from_le_bytes(rec[0..4].try_into().expect("4"));
    let record = GenRecord {
        offset: off,
        size: size16,
        marker,
        timestamp: t_stamp,
        kind: GenKind::Event {
            provider: t.provider.to_string(),
            id: t.id,
            version: t.version,
            channel: t.channel,
            level: t.level,
            opcode: t.opcode,
            task: t.task,
            keyword: t.keyword,
            flags,
            property: t.property,
            tid: t.tid,
            pid: t.pid,
            ext_types,
        },
    };
    (rec, record)
}

/// An empty buffer as in D1's blob: 0x48 bytes, CurrentOffset 0x48, State 0 (free), BufferFlag
/// 0x100, Offset 0x48.
pub(crate) fn empty_buffer(h: BufferHeader, va: u64) -> GenBuffer {
    let mut bytes = vec![0u8; WMI_BUFFER_HEADER_SIZE as usize];
    write_header(&mut bytes, &h);
    GenBuffer {
        va,
        valid: WMI_BUFFER_HEADER_SIZE,
        bytes,
        records: Vec::new(),
        header: h,
    }
}
