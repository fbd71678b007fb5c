//! Unit tests of ETW buffers with data ([`EtwSpec::with_buffers`]): every x64 1607+ fixture is
//! forged and read back from the FILE BYTES with the tests' own page walker: GlobalList, the
//! per-CPU routes, queues, the dirty chain, CurrentBuffer and CompressionTarget, and every
//! buffer's records walked by the rules of etw-internals.md §2.6 and §5 (an independent walker,
//! not the forge's layout code).

use std::collections::{BTreeMap, BTreeSet};

use super::{fixture_dirs, Walk};
use crate::etw::buffers::BufferSpec;
use crate::etw::wmi_buffer::{align8, lay_out, Offsets, RecSpec, Tail};
use crate::kernel::types_h::TypesH;
use crate::util::{get_u32, get_u64, Rng};
use crate::{forge, Config, EtwSpec, ExpectedBuffer, ExpectedSession, Forged};

const CTX: &str = "_WMI_LOGGER_CONTEXT";

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

/// §5 walk of `buf[0x48..valid)`: (complete records, end of the last one (aligned), by key).
fn walk_records(buf: &[u8], valid: usize) -> (u32, usize, BTreeMap<String, u32>) {
    let mut off = 0x48;
    let mut n = 0;
    let mut keys = BTreeMap::new();
    while off + 4 <= valid {
        let b3 = buf[off + 3];
        let b2 = buf[off + 2];
        if b3 & 0x80 == 0 {
            break;
        }
        let (size, key) = if b3 == 0xC0 {
            match b2 {
                1..=4 | 0x10 | 0x11 => {
                    if off + 8 > valid {
                        break;
                    }
                    (
                        u16_at(buf, off + 4) as usize,
                        format!("0x{:04x}", u16_at(buf, off + 6)),
                    )
                }
                0x0A | 0x14 => (u16_at(buf, off) as usize, "full_header".into()),
                0x0B | 0x15 => (u16_at(buf, off) as usize, "instance".into()),
                0x12 | 0x13 => (u16_at(buf, off) as usize, "event_header".into()),
                _ => break,
            }
        } else if b3 == 0x90 {
            (u16_at(buf, off) as usize, "message".into())
        } else {
            break;
        };
        if size == 0 || off + size > valid {
            break;
        }
        n += 1;
        *keys.entry(key).or_insert(0) += 1;
        off += align8(size);
    }
    (n, off.min(valid), keys)
}

struct R<'a> {
    w: Walk<'a>,
    t: TypesH,
}

impl R<'_> {
    fn off(&self, agg: &str, f: &str) -> u64 {
        self.t
            .offset_of(agg, f)
            .unwrap_or_else(|| panic!("{agg}.{f}"))
    }
    fn u64(&self, va: u64) -> u64 {
        get_u64(&self.w.read(va, 8).expect("readable"), 0)
    }
    fn u32(&self, va: u64) -> u32 {
        get_u32(&self.w.read(va, 4).expect("readable"), 0)
    }
}

fn buffers_fixtures() -> Vec<Config> {
    fixture_dirs()
        .iter()
        .map(|d| Config::from_fixture(d))
        .filter(|c| c.arch.is_x64() && c.build >= 14393)
        .collect()
}

fn forge_buffers(c: &Config) -> Forged {
    forge(
        &c.clone()
            .with_etw(EtwSpec::standard(c.build).with_buffers(c.build)),
    )
}

/// The per-CPU current-buffer value (EX_FAST_REF) of logger `id` on `cpu`, by the route of
/// the fixture: later Win11 `(*(KPRCB.EtwSupport + 0x140))[id]` (host ProcessorBlocks NULL),
/// 1709+ `ProcessorBlocks[cpu].ProcessorBuffers[id]`, 1607 `*(EtwSupport + 0x40 + 8*id)`.
fn per_cpu_current(r: &R, etw: &crate::ForgedEtw, prcb: u64, cpu: u64, id: u64, what: &str) -> u64 {
    let es_off = r.off("_KPRCB", "EtwSupport");
    if crate::late_win11_etw_support(true, es_off) {
        if let Some(silo) = etw.silo_state_va {
            let pb = r.u64(silo + r.off("_ETW_SILODRIVERSTATE", "ProcessorBlocks"));
            assert_eq!(pb, 0, "{what}: host ProcessorBlocks");
        }
        let es = r.u64(prcb + es_off);
        let arr = r.u64(es + crate::LATE_WIN11_BUFFERS_OFFSET);
        r.u64(arr + 8 * id)
    } else if let Some(silo) = etw
        .silo_state_va
        .filter(|_| r.t.has_field("_ETW_SILODRIVERSTATE", "ProcessorBlocks"))
    {
        let blocks = r.u64(silo + r.off("_ETW_SILODRIVERSTATE", "ProcessorBlocks"));
        let pb = r.u64(blocks + cpu * 0x40);
        r.u64(pb + 8 * id)
    } else {
        let es = r.u64(prcb + es_off);
        r.u64(es + 0x40 + 8 * id)
    }
}

/// Everything a reader can check from the dump bytes, for one session.
fn check_session(f: &Forged, r: &R, s: &ExpectedSession) {
    let fx = f.config.fixture.as_ref().unwrap();
    let ctx = s.context_va;
    let what = format!("{} session {}", fx.name, s.logger_id);
    let exp: BTreeMap<u64, &ExpectedBuffer> =
        s.buffer_details.iter().map(|b| (b.address, b)).collect();

    // GlobalList, capped at NumberOfBuffers.
    let head = ctx + r.off(CTX, "GlobalList");
    let ge = r.off("_WMI_BUFFER_HEADER", "GlobalEntry");
    let mut cur = r.u64(head);
    let mut gl = Vec::new();
    while cur != head && gl.len() < s.number_of_buffers as usize {
        gl.push(cur - ge);
        cur = r.u64(cur);
    }
    assert_eq!(gl, s.buffers, "{what}: GlobalList");
    assert_eq!(
        gl.iter().copied().collect::<BTreeSet<_>>(),
        exp.keys().copied().collect(),
        "{what}: buffers"
    );

    let mut lists: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for &b in &gl {
        lists.entry(b).or_default().insert("global_list".into());
    }
    // Queues through SlistEntry (+0x20).
    let q = "_ETW_BUFFER_QUEUE";
    for (field, name) in [
        ("BufferQueue", "buffer_queue"),
        ("OverflowQueue", "overflow_queue"),
    ] {
        let qva = ctx + r.off(CTX, field);
        let mut e = r.u64(qva + r.off(q, "QueueEntry"));
        let mut last = qva + r.off(q, "QueueEntry");
        let mut n = 0;
        while e != 0 && n < 64 {
            lists.entry(e - 0x20).or_default().insert(name.into());
            last = e;
            e = r.u64(e);
            n += 1;
        }
        assert_eq!(
            r.u64(qva + r.off(q, "QueueTail")),
            last,
            "{what}: {field}.QueueTail"
        );
    }
    // Current buffers: CurrentBuffer (NO_PER_PROCESSOR_BUFFERING) or the per-CPU route.
    let mut current = Vec::new();
    if s.logger_mode & 0x1000_0000 != 0 {
        let v = r.u64(ctx + r.off(CTX, "CurrentBuffer"));
        if v & !0xF != 0 {
            current.push((v & !0xF, "current_buffer"));
        }
    }
    let id = u64::from(s.logger_id);
    let etw = f.etw.as_ref().unwrap();
    for (cpu, &prcb) in f.kprcbs.iter().enumerate() {
        let v = per_cpu_current(r, etw, prcb, cpu as u64, id, &what);
        if v & !0xF != 0 {
            current.push((v & !0xF, "per_cpu"));
            let b = &exp[&(v & !0xF)];
            assert_eq!(b.processor as usize, cpu, "{what}: per-CPU processor");
        }
    }
    for &(c, name) in &current {
        lists.entry(c).or_default().insert(name.into());
        // The dirty chain through +0x20 (NextBuffer).
        let mut n = r.u64(c + 0x20);
        let mut seen = BTreeSet::new();
        while n != 0 && seen.insert(n) {
            lists.entry(n).or_default().insert("dirty_chain".into());
            n = r.u64(n + 0x20);
        }
    }
    if let Some(o) = r.t.offset_of(CTX, "CompressionTarget") {
        let v = r.u64(ctx + o);
        if v != 0 {
            lists
                .entry(v & !0xF)
                .or_default()
                .insert("compression_target".into());
        }
    }

    for (&va, b) in &exp {
        let got: Vec<String> = lists
            .get(&va)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .collect();
        assert_eq!(got, b.lists, "{what}: lists of {va:#x}");
        let buf =
            r.w.read(va, b.buffer_size as usize)
                .expect("buffer readable");
        let bt = "_WMI_BUFFER_HEADER";
        let o = |f: &str| r.off(bt, f) as usize;
        assert_eq!(get_u32(&buf, o("BufferSize")), b.buffer_size);
        assert_eq!(get_u32(&buf, o("State")), b.state, "{what}: state");
        assert_eq!(u16_at(&buf, o("BufferFlag")), b.buffer_flag);
        assert_eq!(u16_at(&buf, o("BufferType")), b.buffer_type);
        assert_eq!(get_u64(&buf, o("SequenceNumber")), b.sequence_number);
        let cc = o("ClientContext");
        assert_eq!(u32::from(u16_at(&buf, cc) & 0x7FF), b.processor);
        assert_eq!(u64::from(u16_at(&buf, cc + 2)), id, "{what}: LoggerId");
        let cur_off = get_u32(&buf, o("CurrentOffset"));
        let saved = get_u32(&buf, o("SavedOffset"));
        let valid = if cur_off <= b.buffer_size {
            cur_off
        } else {
            saved
        };
        assert_eq!(valid, b.valid_bytes, "{what}: valid bytes of {va:#x}");
        if b.compressed {
            assert_eq!(b.state, 5);
            assert_eq!(b.buffer_flag & 0x40, 0x40);
            continue;
        }
        let (n, end, keys) = walk_records(&buf, valid as usize);
        assert_eq!(n, b.record_count, "{what}: records of {va:#x}");
        assert_eq!(
            valid as usize - end,
            b.trimmed_bytes as usize,
            "{what}: trimmed"
        );
        assert_eq!(keys, b.records_by_key, "{what}: keys of {va:#x}");
    }
    let _ = r.u32(ctx);
}

#[test]
fn buffers_read_back_from_the_file() {
    let cfgs = buffers_fixtures();
    assert!(cfgs.len() >= 4, "x64 fixtures 14393, 17763, 17763b, 19041");
    for c in cfgs {
        let f = forge_buffers(&c);
        let bytes = f.to_bytes();
        let fx = c.fixture.as_ref().unwrap();
        let r = R {
            w: Walk::new(&bytes),
            t: TypesH::load(&fx.dir).unwrap(),
        };
        let etw = f.etw.as_ref().unwrap();
        let mut with = 0;
        for s in etw.sessions() {
            if s.buffer_details.is_empty() {
                continue;
            }
            with += 1;
            check_session(&f, &r, s);
        }
        assert_eq!(with, 6, "{}: sessions with buffers", fx.name);
    }
}

#[test]
fn buffer_set_covers_every_case() {
    let c = buffers_fixtures()
        .into_iter()
        .find(|c| c.build == 19041)
        .unwrap();
    let f = forge_buffers(&c);
    let all: Vec<&ExpectedBuffer> = f
        .etw
        .as_ref()
        .unwrap()
        .sessions()
        .flat_map(|s| &s.buffer_details)
        .collect();
    let lists: BTreeSet<&str> = all
        .iter()
        .flat_map(|b| b.lists.iter().map(String::as_str))
        .collect();
    for l in [
        "global_list",
        "current_buffer",
        "per_cpu",
        "buffer_queue",
        "overflow_queue",
        "dirty_chain",
        "compression_target",
    ] {
        assert!(lists.contains(l), "no buffer on {l}");
    }
    let states: BTreeSet<u32> = all.iter().map(|b| b.state).collect();
    assert_eq!(states, BTreeSet::from([0, 1, 3, 5]));
    let keys: BTreeSet<&str> = all
        .iter()
        .flat_map(|b| b.records_by_key.keys().map(String::as_str))
        .collect();
    for k in [
        "0x0524",
        "0x0525",
        "0x0301",
        "0x0503",
        "0x0f42",
        "event_header",
        "full_header",
        "instance",
        "message",
    ] {
        assert!(keys.contains(k), "no record {k}");
    }
    assert!(all.iter().any(|b| b.current_offset > b.buffer_size));
    assert!(all
        .iter()
        .any(|b| b.trimmed_bytes > 0 && b.record_count > 0));
    assert!(all.iter().any(|b| b.compressed && !b.extractable()));
    assert!(all.iter().any(|b| b.record_count == 0 && !b.compressed));
    assert!(all.iter().filter(|b| b.lists.len() >= 2).count() >= 10);
    // Every page of every buffer is in the dump.
    for b in &all {
        let e = f.expected_read(b.address, b.buffer_size as usize);
        assert!(matches!(e, crate::Expect::Bytes(_)), "{:#x}", b.address);
    }
}

#[test]
fn record_sizes_markers_and_alignment() {
    let mut rng = Rng::new(1);
    let cs = RecSpec::cswitch(19041, 2, true);
    let e = cs.encode(5, &mut rng);
    assert_eq!(e.len(), 0x10 + 8 + 16 + 0x18);
    let marker = get_u32(&e, 0);
    assert_eq!(marker, 0xC011_8204);
    assert_eq!(u16_at(&e, 4) as usize, e.len());
    assert_eq!(u16_at(&e, 6), 0x0524);
    assert_eq!(RecSpec::cswitch(14393, 0, false).encode(0, &mut rng)[0], 2);
    let full = RecSpec::Full {
        x64: true,
        data: 0x2B,
    };
    assert_eq!(full.size(), 0x5B);
    let fe = full.encode(0, &mut rng);
    assert_eq!((fe[2], fe[3], u16_at(&fe, 0)), (0x14, 0xC0, 0x5B));
    let m = RecSpec::Message { data: 3 }.encode(0, &mut rng);
    assert_eq!((m[2], m[3], u16_at(&m, 0)), (0, 0x90, 0x23));
    let ev = RecSpec::EventHeader {
        x64: true,
        ext: vec![(1, 16), (3, 4)],
        data: 1,
    };
    assert_eq!(ev.size(), 0x50 + 0x18 + 0x10 + 1);
    let ee = ev.encode(0, &mut rng);
    assert_eq!(u16_at(&ee, 4) & 1, 1);
    assert_eq!(u16_at(&ee, 0x50 + 4), 1, "first item links to the next");
    assert_eq!(u16_at(&ee, 0x68 + 4), 0);

    // A half-written tail and an unfinished marker are trimmed; Overflowed uses SavedOffset.
    for (tail, len) in [
        (Tail::HalfWritten, 0x40),
        (Tail::UnfinishedMarker, 0x38),
        (Tail::ZeroReservation, 0x60),
    ] {
        let mut b = crate::etw::buffers::standard_plan(19041, 0).unwrap()[2].clone();
        b.tail = tail;
        b.offsets = Offsets::Overflowed;
        let lo = lay_out(&b, 0x20000, (0, 5000), &mut Rng::new(2));
        assert_eq!(lo.trimmed, len);
        assert!(lo.current_offset > 0x20000);
        let (n, end, _) = walk_records(&lo.bytes, lo.valid as usize);
        assert_eq!(n, lo.count);
        assert_eq!(lo.valid as usize - end, len as usize);
    }
    let spec: &BufferSpec = &crate::etw::buffers::standard_plan(19041, 2).unwrap()[2];
    let lo = lay_out(spec, 0x10000, (0, 5000), &mut Rng::new(3));
    assert_eq!((lo.valid, lo.count), (0x48, 0), "a reset free buffer");
}

#[test]
fn large_set_is_big_and_sparse_friendly() {
    let c = buffers_fixtures()
        .into_iter()
        .find(|c| c.build == 19041)
        .unwrap();
    // 64 buffers here (the 4096-buffer dump is `forge --with-large`).
    let spec = EtwSpec::standard(c.build).with_large_buffers(c.build, 64, 0x1_0000);
    let f = forge(&c.with_etw(spec));
    let s = f
        .etw
        .as_ref()
        .unwrap()
        .sessions()
        .find(|s| s.logger_id == crate::LARGE_SESSION_SLOT)
        .unwrap();
    assert_eq!(s.buffer_details.len(), 64);
    assert!(s
        .buffer_details
        .iter()
        .all(|b| b.extractable() && b.valid_bytes > 0xF000 && b.trimmed_bytes == 0));
    let bytes = f.to_bytes();
    let fx = f.config.fixture.as_ref().unwrap();
    let r = R {
        w: Walk::new(&bytes),
        t: TypesH::load(&fx.dir).unwrap(),
    };
    check_session(&f, &r, s);
}
