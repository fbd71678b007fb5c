//! Tests of the variation mode ([`Config::with_variation`]): for many seeds per fixture, the
//! forge's own consistency. Contexts, pointer groups and blocks are read back through the
//! forge's mappings (`Forged::expected_read`; the first seed of each fixture from the FILE BYTES
//! with the tests' page walker), and every packet / record is decoded here by hand (bit layouts
//! of etw-internals.md §4.3 and §5.2), independently of the encoder.

use std::collections::{BTreeMap, BTreeSet};

use super::{fixture_dirs, Walk};
use crate::etw::variation::ExpectedEtwSupport;
use crate::etw::variation::{documented_ccswap_offset, ClockModel, ExpectedSwitch};
use crate::kernel::types_h::TypesH;
use crate::util::{get_u32, get_u64};
use crate::{
    forge, Config, Expect, ExpectedBuffer, ExpectedPending, ExpectedSession, ExpectedSlot, Forged,
    ForgedEtw,
};

const SEEDS: u64 = 30;

/// Reads through the forge's own mappings, or the file bytes.
struct Reader<'a> {
    f: &'a Forged,
    walk: Option<Walk<'a>>,
}

impl Reader<'_> {
    fn read(&self, va: u64, len: usize) -> Option<Vec<u8>> {
        match &self.walk {
            Some(w) => w.read(va, len).ok(),
            None => match self.f.expected_read(va, len) {
                Expect::Bytes(b) => Some(b),
                Expect::Unreadable { .. } => None,
            },
        }
    }

    fn bytes(&self, va: u64, len: usize) -> Vec<u8> {
        self.read(va, len)
            .unwrap_or_else(|| panic!("{va:#x}+{len:#x} unreadable"))
    }

    fn ptr(&self, va: u64) -> u64 {
        let p = self.f.config.arch.ptr_size();
        let b = self.bytes(va, p);
        if p == 8 {
            get_u64(&b, 0)
        } else {
            u64::from(get_u32(&b, 0))
        }
    }

    fn u32(&self, va: u64) -> u32 {
        get_u32(&self.bytes(va, 4), 0)
    }

    fn u64(&self, va: u64) -> u64 {
        get_u64(&self.bytes(va, 8), 0)
    }
}

fn field(t: &TypesH, agg: &str, f: &str) -> u64 {
    t.offset_of(agg, f)
        .unwrap_or_else(|| panic!("types.h has no {agg}.{f}"))
}

/// A decoded packet: (time, old_tid, priority, state, wait reason, wait time).
type Packet = (u64, u32, u8, u8, u8, u32);

/// A decoded pending block or 0x0525 payload (FirstTimeStamp onwards): (time, old_tid,
/// priority, state, wait reason, wait time) per packet. Priority / state / reason / wait are 0
/// for idle packets.
fn decode_batch(body: &[u8], mwr: u8) -> Vec<Packet> {
    let first = get_u64(body, 0);
    let tid = |i: u32| get_u32(body, 8 + 4 * i as usize);
    let base = |i: u32| body[0x48 + i as usize] as i8;
    let state = |wr: u32| -> (u8, u8) {
        if wr < u32::from(mwr) {
            (5, wr as u8)
        } else {
            ((wr - u32::from(mwr)) as u8, 0)
        }
    };
    let mut out = Vec::new();
    let mut t = first;
    let mut o = 0x58;
    while o < body.len() {
        let b0 = body[o];
        match b0 & 3 {
            0 => {
                let v = u16::from_le_bytes([body[o], body[o + 1]]);
                t += u64::from(v >> 2);
                out.push((t, 0, 0, 0, 0, 0));
                o += 2;
            }
            1 => {
                t += u64::from(get_u32(body, o) >> 2);
                out.push((t, 0, 0, 0, 0, 0));
                o += 4;
            }
            2 => {
                let v = get_u32(body, o);
                let idx = (v >> 2) & 0xF;
                let inc = (v >> 6) & 7;
                let (st, wr) = state((v >> 9) & 0x3F);
                t += u64::from(v >> 15);
                let prio = (i32::from(base(idx)) + inc as i32) as u8;
                out.push((t, tid(idx), prio, st, wr, 0));
                o += 4;
            }
            _ => {
                let d0 = get_u32(body, o);
                let d1 = get_u32(body, o + 4);
                t += u64::from(d0 >> 2);
                let idx = d1 & 0xF;
                let (st, wr) = state((d1 >> 4) & 0x3F);
                let prio = ((d1 >> 10) & 0x1F) as u8;
                out.push((t, tid(idx), prio, st, wr, d1 >> 15));
                o += 8;
            }
        }
    }
    out
}

fn as_tuple(s: &ExpectedSwitch) -> Packet {
    (
        s.raw_timestamp,
        s.old_tid,
        s.old_priority,
        s.old_state,
        s.old_wait_reason,
        s.new_thread_wait_time,
    )
}

/// Coverage counters over all seeds and fixtures.
#[derive(Default)]
struct Seen {
    ntkl_clocks: BTreeSet<u32>,
    odd: BTreeSet<String>,
    free_values: BTreeSet<&'static str>,
    pending_documented: usize,
    pending_search: usize,
    decoys: usize,
    sources: BTreeMap<String, usize>,
    per_cpu_routes: BTreeSet<String>,
    qpc: BTreeSet<u64>,
}

/// What every check of one forged dump needs.
struct Ctx<'a> {
    f: &'a Forged,
    r: Reader<'a>,
    t: TypesH,
    e: &'a ForgedEtw,
    cm: &'a ClockModel,
    x64: bool,
    ptr: u64,
    /// The POOL_HEADER size in front of a pool block.
    hdr: u64,
    what: String,
}

const CTX: &str = "_WMI_LOGGER_CONTEXT";

impl Ctx<'_> {
    /// The field's offset in `_WMI_LOGGER_CONTEXT`.
    fn ctx(&self, f: &str) -> u64 {
        field(&self.t, CTX, f)
    }

    /// The 4-byte pool tag of the block at `va`.
    fn tag(&self, va: u64) -> Vec<u8> {
        self.r.bytes(va - self.hdr + 4, 4)
    }
}

fn check(f: &Forged, from_file: bool, seen: &mut Seen) {
    let fx = f.config.fixture.as_ref().unwrap();
    let file;
    let walk = if from_file {
        file = f.to_bytes();
        Some(Walk::new(&file))
    } else {
        None
    };
    let r = Reader { f, walk };
    let t = TypesH::load(&fx.dir).unwrap();
    let e = f.etw.as_ref().expect("etw");
    let cm: &ClockModel = e.clock_model.as_ref().expect("clock model");
    let x64 = f.config.arch.is_x64();
    let c = Ctx {
        f,
        r,
        t,
        e,
        cm,
        x64,
        ptr: f.config.arch.ptr_size() as u64,
        hdr: if x64 { 0x10 } else { 8 },
        what: format!("{} seed {:?}", fx.name, e.seed),
    };
    seen.qpc.insert(cm.qpc_frequency);
    check_clock_model(&c);
    check_slots(&c, seen);
    for s in e.sessions() {
        check_session(&c, s, seen);
    }
    check_switch_times(&c, seen);
    let mwr = crate::etw::max_wait_reason(f.config.build);
    let es = e.etw_support.as_ref().expect("etw support");
    seen.per_cpu_routes.insert(es.per_cpu_route.clone());
    check_etw_support_blocks(&c, es);
    check_pending_blocks(&c, es, mwr, seen);
    check_pending_decoys(&c, seen);
    for s in e.sessions() {
        for b in &s.buffer_details {
            check_buffer_switches(&c, es, s, b, mwr);
        }
    }
}

/// Clock model vs header / KUSER_SHARED_DATA, and KPRCB.MHz on every CPU.
fn check_clock_model(c: &Ctx) {
    let (f, cm, what) = (c.f, c.cm, &c.what);
    let fx = f.config.fixture.as_ref().unwrap();
    assert_eq!(f.config.system_time, cm.system_time, "{what}");
    assert_eq!(cm.boot_filetime + f.config.system_up_time, cm.system_time);
    let ks = c.r.bytes(f.kuser_va, 0x400);
    assert_eq!(
        u64::from(get_u32(&ks, 0x14)) | u64::from(get_u32(&ks, 0x18)) << 32,
        cm.system_time
    );
    match c.t.offset_of("_KUSER_SHARED_DATA", "QpcFrequency") {
        Some(o) => {
            assert!(cm.kuser_qpc_frequency);
            assert_eq!(
                get_u64(&ks, o as usize),
                cm.qpc_frequency,
                "{what}: QpcFrequency"
            );
        }
        None => assert!(!cm.kuser_qpc_frequency),
    }
    assert!((1800..=4200).contains(&cm.mhz));
    if fx.symbol("EtwCPUSpeedInMHz").is_none() {
        assert_eq!(cm.etw_cpu_speed_global, crate::CpuSpeedGlobal::Absent);
    }
    let mhz = field(&c.t, "_KPRCB", "MHz");
    for &p in &f.kprcbs {
        assert_eq!(c.r.u32(p + mhz), cm.mhz, "{what}: KPRCB.MHz");
    }
}

/// Every slot of the logger array: free (NULL, 1, tagged context), invalid or a session.
fn check_slots(c: &Ctx, seen: &mut Seen) {
    let (r, e, what) = (&c.r, c.e, &c.what);
    let id_off = c.ctx("LoggerId");
    for (slot, s) in e.slots.iter().enumerate() {
        let raw = r.ptr(e.array_va + c.ptr * slot as u64);
        match s {
            ExpectedSlot::Free { value } => {
                assert_eq!(raw, *value, "{what}: slot {slot}");
                if *value == 0 {
                    seen.free_values.insert("null");
                } else if *value == 1 {
                    seen.free_values.insert("one");
                } else {
                    assert_eq!(value & 1, 1);
                    let ctx = value & !1;
                    assert_eq!(
                        r.u32(ctx + id_off),
                        slot as u32,
                        "{what}: tagged context id"
                    );
                    assert_eq!(&c.tag(ctx), b"EtwL");
                    seen.free_values.insert("tagged");
                }
            }
            ExpectedSlot::Invalid { va, .. } => {
                assert_eq!(raw, *va);
                if let Some(b) = r.read(va + id_off, 4) {
                    assert_ne!(get_u32(&b, 0), slot as u32, "{what}: invalid slot {slot}");
                }
            }
            ExpectedSlot::Session(x) => assert_eq!(raw, x.context_va),
        }
    }
}

/// One session: the context bytes at the types.h offsets.
fn check_session(c: &Ctx, s: &ExpectedSession, seen: &mut Seen) {
    let w = format!("{} session {} ({:?})", c.what, s.logger_id, s.name);
    let (r, ctx) = (&c.r, s.context_va);
    assert_eq!(ctx % if c.x64 { 16 } else { 8 }, 0);
    assert_eq!(&c.tag(ctx), b"EtwL", "{w}: pool tag");
    assert_eq!(r.u32(ctx + c.ctx("LoggerId")), s.logger_id, "{w}");
    assert_eq!(r.u32(ctx + c.ctx("BufferSize")), s.buffer_size, "{w}");
    assert!(s.buffer_size.is_multiple_of(0x1000) && (0x1000..=0x10_0000).contains(&s.buffer_size));
    assert_eq!(r.u32(ctx + c.ctx("LoggerMode")), s.logger_mode, "{w}");
    assert_eq!(Some(r.u32(ctx + c.ctx("ClockType"))), s.clock_type, "{w}");
    check_session_counts(c, s, &w, seen);
    if s.logger_id == 0 && s.name.as_deref() == Some("NT Kernel Logger") {
        seen.ntkl_clocks.insert(s.clock_type.unwrap());
    }
    check_session_times(c, s, &w);
    check_logger_name(c, s, &w);
    check_global_list(c, s, &w);
}

/// The buffer counts and the odd values the session announces.
fn check_session_counts(c: &Ctx, s: &ExpectedSession, w: &str, seen: &mut Seen) {
    let (r, ctx) = (&c.r, s.context_va);
    let mn = r.u32(ctx + c.ctx("MinimumBuffers"));
    let mx = r.u32(ctx + c.ctx("MaximumBuffers"));
    let nb = r.u32(ctx + c.ctx("NumberOfBuffers"));
    assert_eq!(
        (mn, mx, nb),
        (s.minimum_buffers, s.maximum_buffers, s.number_of_buffers),
        "{w}"
    );
    let bw = r.u32(ctx + c.ctx("BuffersWritten"));
    let el = r.u32(ctx + c.ctx("EventsLost"));
    assert_eq!((bw, el), (s.buffers_written, s.events_lost), "{w}");
    for o in &s.odd_fields {
        seen.odd.insert(format!(
            "{o}{}",
            match (o.as_str(), nb) {
                ("NumberOfBuffers", u32::MAX) => "=0xFFFFFFFF",
                ("NumberOfBuffers", _) => "=Max+1",
                _ => "",
            }
        ));
        let ok = match o.as_str() {
            "NumberOfBuffers" => nb == u32::MAX || nb == mx + 1,
            "MinimumBuffers" => mn > mx,
            "EventsLost" => el >= 0x8000_0000,
            "BuffersWritten" => bw >= 0x8000_0000,
            other => panic!("{w}: odd field {other}"),
        };
        assert!(ok, "{w}: odd {o} not present");
    }
    if s.odd_fields.is_empty() {
        assert!(nb <= mx && mn <= mx, "{w}: counts");
    }
}

/// StartTime, ReferenceTime (StartPerfClock is that clock's raw value at StartTime) and
/// SiloState.
fn check_session_times(c: &Ctx, s: &ExpectedSession, w: &str) {
    let (r, ctx, cm) = (&c.r, s.context_va, c.cm);
    assert_eq!(r.u64(ctx + c.ctx("StartTime")), s.start_time, "{w}");
    assert!(s.start_time > cm.boot_filetime && s.start_time < cm.system_time);
    let rc = s.reference_time.as_ref().expect("ReferenceTime");
    let rt = ctx + c.ctx("ReferenceTime");
    assert_eq!(
        r.u64(rt + field(&c.t, "_ETW_REF_CLOCK", "StartTime")),
        rc.start_time
    );
    assert_eq!(
        r.u64(rt + field(&c.t, "_ETW_REF_CLOCK", "StartPerfClock")),
        rc.start_perf_clock
    );
    let ck = s.clock_type.unwrap();
    assert_eq!(
        cm.true_filetime(ck, rc.start_perf_clock),
        rc.start_time,
        "{w}: exact RT"
    );
    if let Some(o) = c.t.offset_of(CTX, "SiloState") {
        assert_eq!(r.ptr(ctx + o), c.e.silo_state_va.unwrap(), "{w}: SiloState");
    }
}

/// The LoggerName descriptor and its characters.
fn check_logger_name(c: &Ctx, s: &ExpectedSession, w: &str) {
    let r = &c.r;
    let ln = s.context_va + c.ctx("LoggerName");
    let len = u16::from_le_bytes(r.bytes(ln, 2).try_into().unwrap());
    let max = u16::from_le_bytes(r.bytes(ln + 2, 2).try_into().unwrap());
    let buf = r.ptr(ln + field(&c.t, "_UNICODE_STRING", "Buffer"));
    assert!(len > 0 && len % 2 == 0 && len <= max, "{w}: LoggerName");
    assert_eq!(buf, s.name_va);
    if let Some(n) = &s.name {
        let b = r.bytes(buf, len as usize);
        let u: Vec<u16> = b
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(&String::from_utf16(&u).unwrap(), n, "{w}");
    }
}

/// GlobalList: a Flink walk bounded by the real list.
fn check_global_list(c: &Ctx, s: &ExpectedSession, w: &str) {
    let gl = c.ctx("GlobalList");
    let ge = field(&c.t, "_WMI_BUFFER_HEADER", "GlobalEntry");
    let mut cur = c.r.ptr(s.context_va + gl);
    let mut got = Vec::new();
    for _ in 0..s.buffers.len() {
        got.push(cur - ge);
        cur = c.r.ptr(cur);
    }
    assert_eq!(got, s.buffers, "{w}: GlobalList");
    match s.global_list_cycle_to {
        None => assert_eq!(cur, s.context_va + gl, "{w}: list returns to the head"),
        Some(to) => assert_eq!(cur, to),
    }
}

/// Switches: time model and order.
fn check_switch_times(c: &Ctx, seen: &mut Seen) {
    let (cm, what) = (c.cm, &c.what);
    let mut by_container: BTreeMap<(u64, u32), Vec<&ExpectedSwitch>> = BTreeMap::new();
    for s in &c.e.switches {
        *seen.sources.entry(s.source.clone()).or_default() += 1;
        let w = format!("{what}: switch {s:?}");
        assert_eq!(
            s.filetime,
            cm.filetime(s.clock_type, s.raw_timestamp),
            "{w}"
        );
        assert_eq!(s.filetime.is_none(), s.clock_type == 0);
        assert!(
            s.true_filetime > cm.boot_filetime && s.true_filetime < cm.system_time,
            "{w}"
        );
        // Independent float check of the conversion.
        let up = match s.clock_type {
            0 | 1 => (s.raw_timestamp - cm.qpc_at_boot) as f64 * 1e7 / cm.qpc_frequency as f64,
            2 => (s.raw_timestamp - cm.boot_filetime) as f64,
            _ => (s.raw_timestamp - cm.cycles_at_boot) as f64 * 10.0 / f64::from(cm.mhz),
        };
        let d = up - (s.true_filetime - cm.boot_filetime) as f64;
        assert!((-1.0..=1.5).contains(&d), "{w}: conversion off by {d}");
        let group = if s.source == "batch" {
            s.index >> 16
        } else {
            0
        };
        by_container
            .entry((s.container_va, group))
            .or_default()
            .push(s);
    }
    for v in by_container.values() {
        for p in v.windows(2) {
            assert!(p[0].raw_timestamp <= p[1].raw_timestamp, "{what}: order");
        }
    }
}

/// Every CPU's KPRCB.EtwSupport points to its 'Etwp' (or big-pool) block.
fn check_etw_support_blocks(c: &Ctx, es: &ExpectedEtwSupport) {
    let what = &c.what;
    for (cpu, &p) in c.f.kprcbs.iter().enumerate() {
        assert_eq!(
            c.r.ptr(p + es.kprcb_offset),
            es.blocks[cpu],
            "{what}: EtwSupport"
        );
        if u64::from(es.block_size) + c.hdr <= 0xFF0 {
            assert_eq!(&c.tag(es.blocks[cpu]), b"Etwp", "{what}: block tag");
        } else {
            assert_eq!(es.blocks[cpu] % 0x1000, 0, "{what}: big-pool block");
        }
    }
}

/// The pending 'CCsw' blocks: their group, pointer, header and packets.
fn check_pending_blocks(c: &Ctx, es: &ExpectedEtwSupport, mwr: u8, seen: &mut Seen) {
    let doc = documented_ccswap_offset(c.x64, es.kprcb_offset);
    assert_eq!(es.ccswap_documented, doc.is_some());
    for p in &c.e.pending {
        let w = format!("{}: pending cpu {} clock {}", c.what, p.cpu, p.true_clock);
        check_pending_group(c, es, p, doc, &w, seen);
        check_pending_packets(c, p, mwr, &w);
        // Every pointer of the group that is not a pending block is NULL.
        for k in 0..4u64 {
            let v =
                c.r.ptr(es.blocks[p.cpu as usize] + p.group_offset + c.ptr * k);
            let expected =
                c.e.pending
                    .iter()
                    .find(|q| q.cpu == p.cpu && u64::from(q.true_clock) == k)
                    .map_or(0, |q| q.block_va);
            assert_eq!(v, expected, "{w}: group entry {k}");
        }
    }
}

/// Where a pending block's pointer sits: the documented offset or a searched one.
fn check_pending_group(
    c: &Ctx,
    es: &ExpectedEtwSupport,
    p: &ExpectedPending,
    doc: Option<u64>,
    w: &str,
    seen: &mut Seen,
) {
    let ptr = c.ptr;
    assert_eq!(
        p.pointer_va,
        es.blocks[p.cpu as usize] + p.group_offset + ptr * u64::from(p.true_clock),
        "{w}"
    );
    assert_eq!(Some(p.group_offset), es.ccswap_group_offset);
    assert_eq!(p.documented_offset, doc.is_some());
    if let Some(o) = doc {
        assert_eq!(p.group_offset, o);
        assert_eq!(p.clock, Some(p.true_clock));
        seen.pending_documented += 1;
    } else {
        assert_eq!(p.clock, None);
        assert_eq!(p.group_offset % ptr, 0);
        assert!(p.group_offset + 4 * ptr <= u64::from(es.block_size));
        seen.pending_search += 1;
    }
}

/// A pending block's tag, header and packets, decoded by hand.
fn check_pending_packets(c: &Ctx, p: &ExpectedPending, mwr: u8, w: &str) {
    let f = c.f;
    assert_eq!(c.r.ptr(p.pointer_va), p.block_va, "{w}");
    assert_eq!(&c.tag(p.block_va), b"CCsw", "{w}: tag");
    let blk = c.r.bytes(p.block_va, 0x400);
    let used = get_u32(&blk, 0);
    assert_eq!(used, p.used_bytes);
    let mine: Vec<_> =
        c.e.switches
            .iter()
            .filter(|s| s.source == "pending" && s.container_va == p.block_va)
            .collect();
    if used == 0 {
        assert!(blk.iter().all(|&b| b == 0) && mine.is_empty(), "{w}");
        return;
    }
    assert!((0x68..=0x400).contains(&used), "{w}");
    assert_eq!(get_u32(&blk, 4), p.start_tick);
    let dec = decode_batch(&blk[0x10..used as usize], mwr);
    let want: Vec<_> = mine.iter().map(|s| as_tuple(s)).collect();
    assert_eq!(dec, want, "{w}: decoded packets");
    if let Some(last) = mine.last() {
        assert_eq!(get_u64(&blk, 8), last.raw_timestamp, "{w}: LastTimeStamp");
        let cur = f.current_threads.get(p.cpu as usize).map(|x| x.1 as u32);
        assert_eq!(last.new_tid, cur, "{w}: last new thread = CurrentThread");
        // Before the dump, after boot, within 500 ticks of StartTick.
        let dump_tick = (f.config.system_up_time / crate::etw::variation::TICK_100NS) as u32;
        assert!(dump_tick - p.start_tick <= 500);
    }
}

/// No decoy block would pass a reader's validation.
fn check_pending_decoys(c: &Ctx, seen: &mut Seen) {
    for d in &c.e.pending_decoys {
        seen.decoys += 1;
        assert_eq!(c.r.ptr(d.pointer_va), d.block_va);
        let tag = c.tag(d.block_va);
        let used = c.r.u32(d.block_va);
        assert!(
            &tag != b"CCsw" || !(used == 0 || (0x68..=0x400).contains(&used)),
            "{}: decoy {d:?} would validate",
            c.what
        );
    }
}

/// A 0x0524 event as the tests compare it: (time, old tid, new tid, priority, state, wait
/// reason, wait time).
type EventTuple = (u64, u32, Option<u32>, u8, u8, u8, u32);

/// A buffer with switches: its per-CPU pointer, then its records walked by hand.
fn check_buffer_switches(
    c: &Ctx,
    es: &ExpectedEtwSupport,
    s: &ExpectedSession,
    b: &ExpectedBuffer,
    mwr: u8,
) {
    let what = &c.what;
    if b.lists.iter().any(|l| l == "per_cpu") {
        match es.per_cpu_group_offset {
            Some(pc) => {
                let v =
                    c.r.ptr(es.blocks[b.processor as usize] + pc + c.ptr * u64::from(s.logger_id));
                let mask = if c.x64 { !0xF } else { !7 };
                assert_eq!(v & mask, b.address, "{what}: per-CPU pointer");
            }
            None => assert_eq!(es.per_cpu_route, "processor_blocks"),
        }
    }
    let (events, batches) = walk_switch_records(c, b, mwr);
    let mine_ev: Vec<_> =
        c.e.switches
            .iter()
            .filter(|x| x.source == "event" && x.container_va == b.address)
            .map(|x| {
                (
                    x.raw_timestamp,
                    x.old_tid,
                    x.new_tid,
                    x.old_priority,
                    x.old_state,
                    x.old_wait_reason,
                    x.new_thread_wait_time,
                )
            })
            .collect();
    assert_eq!(events, mine_ev, "{what}: events of buffer {:#x}", b.address);
    let mut mine_b: BTreeMap<u32, Vec<_>> = BTreeMap::new();
    for x in
        c.e.switches
            .iter()
            .filter(|x| x.source == "batch" && x.container_va == b.address)
    {
        mine_b.entry(x.index >> 16).or_default().push(as_tuple(x));
    }
    let mine_b: Vec<_> = mine_b.into_values().collect();
    assert_eq!(
        batches, mine_b,
        "{what}: batches of buffer {:#x}",
        b.address
    );
    assert_eq!(
        b.record_count as usize,
        events.len() + batches.len(),
        "{what}: record count"
    );
}

/// The buffer's records decoded by hand: its 0x0524 events and its 0x0525 batches.
fn walk_switch_records(
    c: &Ctx,
    b: &ExpectedBuffer,
    mwr: u8,
) -> (Vec<EventTuple>, Vec<Vec<Packet>>) {
    let what = &c.what;
    let data = c.r.bytes(b.address, b.valid_bytes as usize);
    let mut o = 0x48;
    let mut events = Vec::new();
    let mut batches: Vec<Vec<_>> = Vec::new();
    while o < data.len() {
        let marker = get_u32(&data, o);
        assert_eq!(marker >> 24, 0xC0, "{what}: marker");
        assert_eq!((marker >> 16) & 0xFF, if c.x64 { 0x11 } else { 0x10 });
        let size = u16::from_le_bytes([data[o + 4], data[o + 5]]) as usize;
        let hook = u16::from_le_bytes([data[o + 6], data[o + 7]]);
        let ts = get_u64(&data, o + 8);
        let rec = &data[o..o + size];
        if hook == 0x0524 {
            let p = &rec[size - 0x18..];
            events.push((
                ts,
                get_u32(p, 4),
                Some(get_u32(p, 0)),
                p[9],
                p[0xE],
                if p[0xE] == 5 { p[0xC] } else { 0 },
                get_u32(p, 0x10),
            ));
        } else {
            assert_eq!(hook, 0x0525);
            assert_eq!(marker & 0xFF, 2);
            let dec = decode_batch(&rec[0x10..], mwr);
            assert_eq!(ts, dec.last().unwrap().0, "{what}: 0x0525 timestamp");
            batches.push(dec);
        }
        o += (size + 7) & !7;
    }
    (events, batches)
}

fn configs() -> Vec<Config> {
    fixture_dirs()
        .iter()
        .map(|d| Config::from_fixture(d))
        .collect()
}

#[test]
fn variation_is_consistent_for_many_seeds() {
    let mut seen = Seen::default();
    let mut per_fixture_clocks: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for base in configs() {
        let name = base.fixture.as_ref().unwrap().name.clone();
        for seed in 0..SEEDS {
            let f = forge(&base.clone().with_variation(seed));
            check(&f, seed == 0, &mut seen);
            for s in f.etw.as_ref().unwrap().sessions() {
                if s.logger_id == 0 {
                    per_fixture_clocks
                        .entry(name.clone())
                        .or_default()
                        .extend(s.clock_type);
                }
            }
        }
    }
    assert_eq!(seen.ntkl_clocks, BTreeSet::from([1, 2, 3]));
    for (n, c) in &per_fixture_clocks {
        assert!(
            c.is_superset(&BTreeSet::from([1, 2, 3])),
            "{n}: NTKL clocks {c:?}"
        );
    }
    for o in [
        "NumberOfBuffers=Max+1",
        "NumberOfBuffers=0xFFFFFFFF",
        "MinimumBuffers",
        "EventsLost",
        "BuffersWritten",
    ] {
        assert!(seen.odd.contains(o), "odd {o} never drawn: {:?}", seen.odd);
    }
    assert_eq!(seen.free_values.len(), 3, "{:?}", seen.free_values);
    assert!(seen.pending_documented > 0 && seen.pending_search > 0 && seen.decoys > 0);
    for src in ["pending", "batch", "event"] {
        assert!(
            seen.sources.get(src).copied().unwrap_or(0) > 0,
            "{src}: {:?}",
            seen.sources
        );
    }
    for r in [
        "etw_support_documented",
        "etw_support_search",
        "processor_blocks",
    ] {
        assert!(
            seen.per_cpu_routes.contains(r),
            "{r}: {:?}",
            seen.per_cpu_routes
        );
    }
    assert!(seen.qpc.len() >= 4, "{:?}", seen.qpc);
}

#[test]
fn variation_is_reproducible_and_seed_dependent() {
    for base in configs().into_iter().take(3) {
        let a = forge(&base.clone().with_variation(11)).to_bytes();
        let b = forge(&base.clone().with_variation(11)).to_bytes();
        assert!(a == b, "same seed, different bytes");
        let c = forge(&base.clone().with_variation(12)).to_bytes();
        assert!(a != c, "different seeds, same bytes");
    }
}

#[test]
fn standard_dumps_have_no_variation() {
    for base in configs() {
        let f = forge(&base.with_standard_etw());
        let e = f.etw.unwrap();
        assert!(e.switches.is_empty() && e.clock_model.is_none() && e.seed.is_none());
        assert!(e.sessions().all(|s| s.odd_fields.is_empty()));
    }
}

/// `cargo test -p etwdump-forge variation_summary -- --ignored --nocapture`: what seed 0..3
/// draw per fixture (for eyeballing).
#[test]
#[ignore]
fn variation_summary() {
    for base in configs() {
        for seed in 0..3 {
            let f = forge(&base.clone().with_variation(seed));
            let e = f.etw.as_ref().unwrap();
            let cm = e.clock_model.as_ref().unwrap();
            let es = e.etw_support.as_ref().unwrap();
            let mut src: BTreeMap<&str, usize> = BTreeMap::new();
            for s in &e.switches {
                *src.entry(s.source.as_str()).or_default() += 1;
            }
            println!(
                "{} seed {seed}: cpus {} cap {} qpc {} mhz {} up {}s sessions {:?} pending {} \
                 decoys {} es {:#x}/{} ccsw {:?} pc {:?} {} switches {src:?}",
                base.fixture.as_ref().unwrap().name,
                f.config.cpus,
                e.capacity,
                cm.qpc_frequency,
                cm.mhz,
                cm.up_time() / 10_000_000,
                e.sessions()
                    .map(|s| (
                        s.logger_id,
                        s.name.clone(),
                        s.clock_type,
                        s.odd_fields.clone()
                    ))
                    .collect::<Vec<_>>(),
                e.pending.len(),
                e.pending_decoys.len(),
                es.block_size,
                es.ccswap_documented,
                es.ccswap_group_offset,
                es.per_cpu_group_offset,
                es.per_cpu_route,
            );
        }
    }
}

/// The 100 ns units one raw value of `clock` spans (at least 1).
fn resolution(m: &ClockModel, clock: u32) -> u64 {
    match clock {
        0 | 1 => 10_000_000u64.div_ceil(m.qpc_frequency),
        3 => 10u64.div_ceil(u64::from(m.mhz)),
        _ => 1,
    }
}

/// `with_duplicate_switches`: every dump passes the variation checks (every record decoded
/// from memory); every same-switch pair is a CSwitch event and a batch or pending switch of
/// another session on the same CPU with the same threads, at the same instant within the
/// event clock's resolution; every lookalike pair has the same threads 1 to 20 ms apart.
#[test]
fn duplicate_switches_are_consistent() {
    let mut seen = Seen::default();
    let (mut pairs, mut alike, mut with_dups, mut dumps) = (0, 0, 0, 0);
    let mut kinds: BTreeMap<(String, u32, u32), usize> = BTreeMap::new();
    for base in configs() {
        for seed in 0..10 {
            let cfg = base.clone().with_variation(seed).with_duplicate_switches();
            let f = forge(&cfg);
            dumps += 1;
            check(&f, seed == 0, &mut seen);
            let e = f.etw.as_ref().unwrap();
            let m = e.clock_model.as_ref().unwrap();
            with_dups += usize::from(!e.same_switch.is_empty());
            for &[a, b] in &e.same_switch {
                let (ev, or) = (&e.switches[a], &e.switches[b]);
                assert_eq!(ev.source, "event");
                assert!(or.source == "batch" || or.source == "pending", "{or:?}");
                assert_ne!(ev.logger_id, or.logger_id);
                assert_eq!(
                    (ev.cpu, ev.old_tid, ev.new_tid),
                    (or.cpu, or.old_tid, or.new_tid)
                );
                assert!(or.new_tid.is_some());
                let d = or.true_filetime - ev.true_filetime;
                assert!(d <= resolution(m, ev.clock_type), "{d} {ev:?} {or:?}");
                assert_eq!(
                    (ev.old_priority, ev.old_state, ev.old_wait_reason),
                    (or.old_priority, or.old_state, or.old_wait_reason)
                );
                *kinds
                    .entry((or.source.clone(), or.clock_type, ev.clock_type))
                    .or_default() += 1;
                pairs += 1;
            }
            for &[a, b] in &e.lookalikes {
                let (ev, or) = (&e.switches[a], &e.switches[b]);
                assert_eq!(
                    (ev.cpu, ev.old_tid, ev.new_tid),
                    (or.cpu, or.old_tid, or.new_tid)
                );
                let d = ev.true_filetime.abs_diff(or.true_filetime);
                assert!((9_000..=200_000).contains(&d), "{d}");
                alike += 1;
            }
            // Same bytes without the option when nothing was forced, and reproducible.
            assert!(forge(&cfg).to_bytes() == f.to_bytes());
        }
    }
    assert!(
        with_dups * 2 >= dumps,
        "{with_dups} of {dumps} dumps with duplicates"
    );
    assert!(
        pairs > 200 && alike > 20,
        "{pairs} pairs, {alike} lookalikes"
    );
    for src in ["batch", "pending"] {
        assert!(kinds.keys().any(|k| k.0 == src), "{kinds:?}");
    }
    let event_clocks: BTreeSet<u32> = kinds.keys().map(|k| k.2).collect();
    assert!(event_clocks.len() >= 3, "{kinds:?}");
}

/// The option changes nothing in the rendering of dumps that do not use it.
#[test]
fn duplicate_switches_are_opt_in() {
    let base = configs().remove(0);
    let plain = base.clone().with_variation(4);
    assert!(!format!("{plain:?}").contains("duplicates"));
    let f = forge(&plain);
    let e = f.etw.as_ref().unwrap();
    assert!(e.same_switch.is_empty() && e.lookalikes.is_empty());
    assert!(!format!("{e:?}").contains("same_switch"));
}
