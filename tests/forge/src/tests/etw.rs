//! Unit tests of the ETW logger state: every fixture with [`EtwSpec::standard`] is forged and
//! read back from the FILE BYTES with the tests' own page walker (`Walk`), at the offsets of the
//! fixture's types.h; a few of those offsets are also checked against the hard-coded table of
//! tests/fixtures/README.md so that the types.h parser cannot drift silently.

use std::collections::BTreeSet;

use super::{check_probes, fixture_dir, fixture_dirs, Walk};
use crate::kernel::types_h::TypesH;
use crate::util::{get_u32, get_u64};
use crate::{
    forge, BitmapSig, Config, EtwRoute, EtwSpec, ExpectedSession, ExpectedSlot, Forged, Layout,
    SlotSpec, EVENT_TRACE_REAL_TIME_MODE,
};

const CTX: &str = "_WMI_LOGGER_CONTEXT";

struct Reader<'a> {
    w: Walk<'a>,
    t: TypesH,
    x64: bool,
}

impl Reader<'_> {
    fn ptr(&self, va: u64) -> Option<u64> {
        let b = self.w.read(va, if self.x64 { 8 } else { 4 }).ok()?;
        Some(if self.x64 {
            get_u64(&b, 0)
        } else {
            get_u32(&b, 0) as u64
        })
    }

    fn u32(&self, va: u64) -> Option<u32> {
        self.w.read(va, 4).ok().map(|b| get_u32(&b, 0))
    }

    fn u64(&self, va: u64) -> Option<u64> {
        self.w.read(va, 8).ok().map(|b| get_u64(&b, 0))
    }

    fn off(&self, agg: &str, field: &str) -> u64 {
        self.t
            .offset_of(agg, field)
            .unwrap_or_else(|| panic!("{agg}.{field}"))
    }

    fn field32(&self, ctx: u64, field: &str) -> u32 {
        self.u32(ctx + self.off(CTX, field)).expect(field)
    }

    /// UNICODE_STRING at `va`: (Length, MaximumLength, Buffer, text if readable).
    fn unicode(&self, va: u64) -> (u16, u16, u64, Option<String>) {
        let u = "_UNICODE_STRING";
        let b = self.w.read(va, 4).unwrap();
        let len = u16::from_le_bytes([b[0], b[1]]);
        let max = u16::from_le_bytes([b[2], b[3]]);
        assert_eq!(self.off(u, "MaximumLength"), 2);
        let buf = self.ptr(va + self.off(u, "Buffer")).unwrap();
        let text = self.w.read(buf, len as usize).ok().map(|raw| {
            let units: Vec<u16> = raw
                .chunks(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).unwrap()
        });
        (len, max, buf, text)
    }
}

fn standard_etw_dumps() -> Vec<Config> {
    let mut v: Vec<Config> = fixture_dirs()
        .iter()
        .map(|d| Config::from_fixture(d).with_standard_etw())
        .collect();
    let d19041 = fixture_dir("x64-19041");
    v.push(Config::from_fixture(&d19041).with_etw(EtwSpec::standard_with_max_loggers(19041, 0x50)));
    v
}

/// Walk the route the way a reader with the fixture's symbols and types.h would, and compare
/// every slot with the forge's expectations.
fn check_etw_dump(f: &Forged) {
    let fx = f.config.fixture.as_ref().unwrap();
    let etw = f.etw.as_ref().expect("Forged::etw");
    let bytes = f.to_bytes();
    let r = Reader {
        w: Walk::new(&bytes),
        t: TypesH::load(&fx.dir).unwrap(),
        x64: f.config.arch.is_x64(),
    };
    let p: u64 = if r.x64 { 8 } else { 4 };
    let silo_t = "_ETW_SILODRIVERSTATE";
    let what = format!("{} ({:?})", fx.name, etw.route);

    // 1. The route, from the symbols.
    let (array, capacity, silo) = if let Some(&g) = f.symbols.get("WmipLoggerContext") {
        assert_eq!(etw.route, EtwRoute::Global, "{what}");
        (g, 64, None)
    } else {
        let silo = r.ptr(f.symbols["EtwpHostSiloState"]).unwrap();
        assert_ne!(silo, 0, "{what}: EtwpHostSiloState");
        // PspHostSiloGlobals where the fixture has it (x86-19569's source has no
        // _ESERVERSILO_GLOBALS, so neither the type nor the global).
        let globals = f.symbols.get("PspHostSiloGlobals").copied().unwrap_or(0);
        if globals != 0 {
            let via_globals = r
                .ptr(globals + r.off("_ESERVERSILO_GLOBALS", "EtwSiloState"))
                .unwrap();
            assert_eq!(via_globals, silo, "{what}: PspHostSiloGlobals.EtwSiloState");
        } else {
            assert_eq!(
                r.t.size_of("_ESERVERSILO_GLOBALS"),
                None,
                "{what}: no PspHostSiloGlobals"
            );
        }
        if r.t.has_field(silo_t, "EtwpLoggerContext") {
            assert_eq!(etw.route, EtwRoute::Pointer, "{what}");
            let array = r.ptr(silo + r.off(silo_t, "EtwpLoggerContext")).unwrap();
            let max = r.u32(silo + r.off(silo_t, "MaxLoggers")).unwrap();
            assert_eq!(
                r.ptr(silo + r.off(silo_t, "SiloGlobals")).unwrap(),
                globals,
                "{what}: SiloGlobals"
            );
            assert_eq!(r.ptr(silo + r.off(silo_t, "Silo")).unwrap(), 0, "{what}");
            (array, max, Some(silo))
        } else {
            assert_eq!(etw.route, EtwRoute::Inline, "{what}");
            (silo + r.off(silo_t, "WmipLoggerContext"), 64, Some(silo))
        }
    };
    assert_eq!(array, etw.array_va, "{what}: array");
    assert_eq!(capacity, etw.capacity, "{what}: capacity");
    assert_eq!(etw.slots.len(), capacity as usize, "{what}");
    assert_eq!(silo, etw.silo_state_va, "{what}: silo state");
    // The symbol-less route: KDBG.EtwpDebuggerData -> EtwpDebuggerData; +0x10 -> the array.
    let kdbg = f.kdbg_va;
    let dd = r.u64(kdbg + 0x330).unwrap();
    let dd = if r.x64 { dd } else { dd & 0xFFFF_FFFF };
    assert_eq!(dd, f.symbols["EtwpDebuggerData"], "{what}");
    assert_eq!(dd + 0x10, etw.debugger_data_array_ptr_va, "{what}");
    assert_eq!(
        r.ptr(dd + 0x10).unwrap(),
        array,
        "{what}: EtwpDebuggerData+0x10"
    );
    // The fixture's signature bytes are kept.
    assert_eq!(
        r.w.read(dd, 5).unwrap(),
        [0x2c, 0x08, 0x04, 0x38, 0x0c],
        "{what}"
    );

    // 2. Every slot.
    let ctx_size = r.t.size_of(CTX).unwrap() as usize;
    let (mut sessions, mut free, mut invalid) = (0, 0, 0);
    for (slot, exp) in etw.slots.iter().enumerate() {
        let value = r.ptr(array + slot as u64 * p).unwrap();
        let w = format!("{what} slot {slot}");
        match exp {
            ExpectedSlot::Free { value: v } => {
                free += 1;
                assert_eq!(value, *v, "{w}");
                assert!(value == 0 || value & 1 == 1, "{w}");
            }
            ExpectedSlot::Invalid { va, why } => {
                invalid += 1;
                assert_eq!(value, *va, "{w}");
                assert_eq!(value & 1, 0, "{w}: an invalid slot is not a free marker");
                match r.w.read(value, ctx_size) {
                    Err(_) => assert!(why.contains("not mapped"), "{w}: {why}"),
                    Ok(c) => {
                        let id = get_u32(&c, r.off(CTX, "LoggerId") as usize);
                        assert_ne!(id, slot as u32, "{w}: {why}");
                        assert!(why.contains(&format!("{id:#x}")), "{w}: {why}");
                    }
                }
            }
            ExpectedSlot::Session(s) => {
                sessions += 1;
                assert_eq!(value, s.context_va, "{w}");
                check_session(&r, s, slot as u32, silo, &w);
            }
        }
    }
    assert!(sessions >= 5 && free >= 50 && invalid == 3, "{what}");
    let names: BTreeSet<_> = etw.sessions().filter_map(|s| s.name.clone()).collect();
    for n in [
        "NT Kernel Logger",
        "Circular Kernel Context Logger",
        "EventLog-System",
    ] {
        assert!(names.contains(n), "{what}: {n}");
    }
    let clocks: BTreeSet<_> = etw.sessions().filter_map(|s| s.clock_type).collect();
    assert_eq!(clocks, (0..4).collect(), "{what}: every ClockType");
    assert_eq!(
        etw.sessions()
            .find(|s| s.name.as_deref() == Some("Circular Kernel Context Logger"))
            .unwrap()
            .logger_id,
        2
    );

    // 3. The ETW probes read back like every other probe.
    check_probes(f, &bytes);
    assert!(f.probe("etw_logger_array").is_some());
}

fn check_session(r: &Reader, s: &ExpectedSession, slot: u32, silo: Option<u64>, w: &str) {
    let ctx = s.context_va;
    let ctx_size = r.t.size_of(CTX).unwrap() as usize;
    r.w.read(ctx, ctx_size).expect("context readable");
    if r.x64 && silo.is_some() && r.t.has_field("_ETW_SILODRIVERSTATE", "EtwpLoggerContext") {
        assert_eq!(ctx % 16, 0, "{w}: 16-byte aligned");
    }
    assert_eq!(ctx % if r.x64 { 16 } else { 8 }, 0, "{w}");
    assert_eq!(s.logger_id, slot, "{w}");
    assert_eq!(r.field32(ctx, "LoggerId"), slot, "{w}");
    assert_eq!(r.field32(ctx, "BufferSize"), s.buffer_size, "{w}");
    assert_eq!(
        r.field32(ctx, "MaximumEventSize"),
        s.maximum_event_size,
        "{w}"
    );
    assert!(s.maximum_event_size < s.buffer_size && s.buffer_size.is_multiple_of(1024));
    assert_eq!(r.field32(ctx, "LoggerMode"), s.logger_mode, "{w}");
    assert_eq!(Some(r.field32(ctx, "ClockType")), s.clock_type, "{w}");
    assert_eq!(r.field32(ctx, "MinimumBuffers"), s.minimum_buffers, "{w}");
    assert_eq!(r.field32(ctx, "MaximumBuffers"), s.maximum_buffers, "{w}");
    assert_eq!(
        r.field32(ctx, "NumberOfBuffers"),
        s.number_of_buffers,
        "{w}"
    );
    assert!(s.number_of_buffers <= s.maximum_buffers);
    assert_eq!(r.field32(ctx, "BuffersWritten"), s.buffers_written, "{w}");
    assert_eq!(r.field32(ctx, "EventsLost"), s.events_lost, "{w}");
    assert_eq!(r.field32(ctx, "LogBuffersLost"), s.log_buffers_lost, "{w}");
    assert_eq!(
        r.field32(ctx, "RealTimeBuffersLost"),
        s.real_time_buffers_lost,
        "{w}"
    );
    assert_eq!(r.field32(ctx, "PoolType"), s.pool_type, "{w}");
    assert_eq!(
        r.u64(ctx + r.off(CTX, "StartTime")).unwrap(),
        s.start_time,
        "{w}"
    );
    let guid = r.w.read(ctx + r.off(CTX, "InstanceGuid"), 16).unwrap();
    assert_eq!(
        crate::guid_to_string(&guid.try_into().unwrap()),
        s.instance_guid,
        "{w}"
    );
    if r.t.has_field(CTX, "SiloState") {
        assert_eq!(
            r.ptr(ctx + r.off(CTX, "SiloState")),
            Some(silo.unwrap_or(0)),
            "{w}: SiloState"
        );
    }
    // Flags: RealTime set iff the mode says real time.
    let flags = r.field32(ctx, "Flags");
    assert_eq!(Some(flags), s.flags, "{w}");
    let rt = r.t.bitfield(CTX, "RealTime").expect("RealTime bit");
    assert_eq!(rt.offset, r.off(CTX, "Flags"));
    assert_eq!(
        (flags >> rt.position) & 1 == 1,
        s.logger_mode & EVENT_TRACE_REAL_TIME_MODE != 0,
        "{w}: Flags.RealTime"
    );

    // Names.
    let (len, max, buf, text) = r.unicode(ctx + r.off(CTX, "LoggerName"));
    assert!(len % 2 == 0 && len <= max && buf == s.name_va, "{w}");
    assert_eq!(text, s.name, "{w}: LoggerName");
    let (len, _, buf, text) = r.unicode(ctx + r.off(CTX, "LogFileName"));
    match &s.log_file {
        None => assert!(len == 0 && buf == 0, "{w}"),
        Some(l) => assert_eq!(text.as_deref(), Some(l.as_str()), "{w}"),
    }

    // GlobalList: Flink walk with cycle detection, Blinks, buffer headers.
    let head = ctx + r.off(CTX, "GlobalList");
    let ge = r.off("_WMI_BUFFER_HEADER", "GlobalEntry");
    let mut seen = Vec::new();
    let mut cur = r.ptr(head).unwrap();
    let mut prev = head;
    let cycle_to = loop {
        if cur == head {
            break None;
        }
        if seen.contains(&(cur - ge)) {
            break Some(cur);
        }
        let blink = r.ptr(cur + r.off("_LIST_ENTRY", "Blink")).unwrap();
        assert_eq!(blink, prev, "{w}: Blink");
        let b = cur - ge;
        assert_eq!(r.u32(b).unwrap(), s.buffer_size, "{w}: buffer BufferSize");
        let cc = b + r.off("_WMI_BUFFER_HEADER", "ClientContext");
        let id = r.w.read(cc + 2, 2).unwrap();
        assert_eq!(u16::from_le_bytes([id[0], id[1]]) as u32, slot, "{w}");
        seen.push(b);
        prev = cur;
        cur = r.ptr(cur).unwrap();
    };
    assert_eq!(seen, s.buffers, "{w}: GlobalList buffers");
    assert_eq!(seen.len() as u32, s.number_of_buffers, "{w}");
    assert_eq!(cycle_to, s.global_list_cycle_to, "{w}: cycle");
    if cycle_to.is_none() && !seen.is_empty() {
        let last = r.ptr(head + r.off("_LIST_ENTRY", "Blink")).unwrap();
        assert_eq!(last, s.buffers.last().unwrap() + ge, "{w}: head Blink");
    }
    // Other LIST_ENTRY heads are empty (self-pointing).
    for m in r.t.members_of_type(CTX, "struct _LIST_ENTRY") {
        if m != "GlobalList" {
            let at = ctx + r.off(CTX, &m);
            assert_eq!(r.ptr(at), Some(at), "{w}: {m}");
        }
    }
}

#[test]
fn etw_state_reads_back_from_the_file_in_every_fixture() {
    for cfg in standard_etw_dumps() {
        let f = forge(&cfg);
        check_etw_dump(&f);
    }
}

#[test]
fn etw_state_in_a_bitmap_dump() {
    let d = fixture_dirs()
        .into_iter()
        .find(|d| d.ends_with("x64-17763b"))
        .unwrap();
    let cfg = Config {
        layout: Layout::Bitmap {
            sig: BitmapSig::Sdmp,
            dump_type: 5,
        },
        ..Config::from_fixture(&d).with_standard_etw()
    };
    check_etw_dump(&forge(&cfg));
}

#[test]
fn etw_state_in_an_x86_non_pae_dump() {
    let d = fixture_dirs()
        .into_iter()
        .find(|d| d.ends_with("x86-14393"))
        .unwrap();
    let cfg = Config {
        arch: crate::Arch::X86NonPae,
        ..Config::from_fixture(&d).with_standard_etw()
    };
    check_etw_dump(&forge(&cfg));
}

#[test]
fn routes_and_anomalies_per_fixture() {
    for cfg in standard_etw_dumps() {
        let fx = cfg.fixture.clone().unwrap();
        let f = forge(&cfg);
        let etw = f.etw.unwrap();
        let want = match fx.name.as_str() {
            "x64-7601" | "x64-9600" => EtwRoute::Global,
            "x64-14393" | "x86-14393" => EtwRoute::Inline,
            _ => EtwRoute::Pointer,
        };
        assert_eq!(etw.route, want, "{}", fx.name);
        let max = cfg.etw.as_ref().unwrap().max_loggers;
        assert_eq!(etw.capacity, max);
        if max == 0x50 {
            let s = match &etw.slots[0x4A] {
                ExpectedSlot::Session(s) => s,
                other => panic!("{other:?}"),
            };
            assert_eq!(s.name.as_deref(), Some("SleepStudyTraceSession"));
        }
        // The unreadable name and the cyclic list are where the standard set puts them.
        let by_slot = |i: usize| match &etw.slots[i] {
            ExpectedSlot::Session(s) => s.clone(),
            other => panic!("{}: slot {i}: {other:?}", fx.name),
        };
        assert_eq!(by_slot(6).name, None);
        assert!(by_slot(5).global_list_cycle_to.is_some());
        assert_eq!(by_slot(0).name.as_deref(), Some("NT Kernel Logger"));
        assert_eq!(
            by_slot(0).log_file.as_deref(),
            Some("C:\\Windows\\Temp\\kernel.etl")
        );
        assert!(by_slot(2).logger_mode & crate::EVENT_TRACE_BUFFERING_MODE != 0);
        assert!(matches!(etw.slots[1], ExpectedSlot::Free { value: 1 }));
        assert!(matches!(etw.slots[63], ExpectedSlot::Free { value: 0 }));
        for (i, why) in [(7, "random"), (8, "stale"), (9, "not mapped")] {
            match &etw.slots[i] {
                ExpectedSlot::Invalid { why: w, .. } => assert!(w.contains(why), "{w}"),
                other => panic!("{}: slot {i}: {other:?}", fx.name),
            }
        }
        for s in etw.sessions() {
            assert!(s.start_time < cfg.system_time);
        }
    }
}

/// (fixture, sizeof ctx, LoggerName, sizeof silo, array field, its offset, EtwSiloState)
type ReadmeRow = (
    &'static str,
    u64,
    u64,
    Option<u64>,
    &'static str,
    u64,
    Option<u64>,
);

/// The types.h parser agrees with the layout table of tests/fixtures/README.md.
#[test]
fn types_h_offsets_match_the_fixture_readme() {
    let rows: [ReadmeRow; 9] = [
        ("x64-7601", 0x340, 0x78, None, "", 0, None),
        ("x64-9600", 0x390, 0x98, None, "", 0, None),
        (
            "x64-14393",
            0x440,
            0x88,
            Some(0x13A8),
            "WmipLoggerContext",
            0x390,
            Some(0x350),
        ),
        (
            "x64-17763",
            0x520,
            0x98,
            Some(0x11C0),
            "EtwpLoggerContext",
            0x1B0,
            Some(0x360),
        ),
        (
            "x64-17763b",
            0x500,
            0x98,
            Some(0x11E8),
            "EtwpLoggerContext",
            0x1C8,
            Some(0x360),
        ),
        (
            "x64-19041",
            0x550,
            0x98,
            Some(0x1220),
            "EtwpLoggerContext",
            0x1C8,
            Some(0x360),
        ),
        (
            "x86-14393",
            0x2F0,
            0x54,
            Some(0xA80),
            "WmipLoggerContext",
            0x268,
            Some(0x1E8),
        ),
        (
            "x64-26100",
            0x650,
            0x88,
            Some(0x1238),
            "EtwpLoggerContext",
            0x1C8,
            Some(0x340),
        ),
        (
            "x86-19569",
            0x398,
            0x5C,
            Some(0xAA8),
            "EtwpLoggerContext",
            0x18C,
            None,
        ),
    ];
    for (name, ctx, ln, silo, field, off, ess) in rows {
        let dir = crate::default_fixtures_root().join(name);
        let t = TypesH::load(&dir).unwrap();
        assert_eq!(t.size_of(CTX), Some(ctx), "{name}");
        assert_eq!(t.offset_of(CTX, "LoggerName"), Some(ln), "{name}");
        assert_eq!(t.size_of("_ETW_SILODRIVERSTATE"), silo, "{name}");
        if silo.is_some() {
            assert_eq!(
                t.offset_of("_ETW_SILODRIVERSTATE", field),
                Some(off),
                "{name}"
            );
        }
        assert_eq!(
            t.offset_of("_ESERVERSILO_GLOBALS", "EtwSiloState"),
            ess,
            "{name}"
        );
        assert_eq!(t.size_of("_WMI_BUFFER_HEADER"), Some(0x48), "{name}");
        assert_eq!(
            t.offset_of("_WMI_BUFFER_HEADER", "GlobalEntry"),
            Some(0x38),
            "{name}"
        );
        assert_eq!(
            t.field_size(CTX, "LoggerName"),
            Some(if name.starts_with("x86") { 8 } else { 16 })
        );
        // RealTime is bit 3 of Flags in every layout (Persistent, AutoLogger, FsReady, RealTime).
        let rt = t.bitfield(CTX, "RealTime").unwrap();
        assert_eq!((rt.position, rt.width), (3, 1), "{name}");
        assert_eq!(Some(rt.offset), t.offset_of(CTX, "Flags"), "{name}");
        assert_eq!(t.enum_value("_POOL_TYPE", "PagedPool"), Some(1), "{name}");
    }
}

#[test]
fn etw_dumps_are_deterministic_and_none_changes_nothing() {
    let d = fixture_dirs()
        .into_iter()
        .find(|d| d.ends_with("x64-14393"))
        .unwrap();
    let cfg = Config::from_fixture(&d).with_standard_etw();
    assert_eq!(forge(&cfg).to_bytes(), forge(&cfg).to_bytes());
    let plain = Config::from_fixture(&d);
    assert!(plain.etw.is_none());
    assert!(forge(&plain).etw.is_none());
    assert_ne!(forge(&plain).to_bytes(), forge(&cfg).to_bytes());
    // The committed sample is still what `forge --sample` writes.
    let sample = crate::default_fixtures_root().join("../data/sample-x64.dmp");
    assert_eq!(
        std::fs::read(sample).unwrap(),
        forge(&Config::sample()).to_bytes(),
        "tests/data/sample-x64.dmp"
    );
}

#[test]
#[should_panic(expected = "needs a fixture kernel")]
fn etw_needs_a_fixture() {
    forge(&Config::x64().with_etw(EtwSpec::standard(19041)));
}

#[test]
#[should_panic(expected = "MaxLoggers exists only in 1709+ layouts")]
fn max_loggers_needs_the_pointer_route() {
    let d = fixture_dirs()
        .into_iter()
        .find(|d| d.ends_with("x64-14393"))
        .unwrap();
    forge(&Config::from_fixture(&d).with_etw(EtwSpec::standard_with_max_loggers(14393, 0x50)));
}

#[test]
fn a_custom_spec_places_only_what_it_lists() {
    let d = fixture_dir("x64-19041");
    let mut spec = EtwSpec::standard(19041);
    spec.slots.retain(|&k, _| k == 2);
    spec.slots.insert(40, SlotSpec::Unmapped);
    let f = forge(&Config::from_fixture(&d).with_etw(spec));
    let etw = f.etw.as_ref().unwrap();
    assert_eq!(etw.sessions().count(), 1);
    assert!(matches!(etw.slots[40], ExpectedSlot::Invalid { .. }));
    assert_eq!(
        etw.slots
            .iter()
            .filter(|s| matches!(s, ExpectedSlot::Free { value: 1 }))
            .count(),
        62
    );
    check_etw_dump_minimal(&f);
}

/// Only the slot values (for specs without the standard anomalies).
fn check_etw_dump_minimal(f: &Forged) {
    let etw = f.etw.as_ref().unwrap();
    let bytes = f.to_bytes();
    let w = Walk::new(&bytes);
    for (i, s) in etw.slots.iter().enumerate() {
        let v = get_u64(&w.read(etw.array_va + 8 * i as u64, 8).unwrap(), 0);
        match s {
            ExpectedSlot::Free { value } => assert_eq!(v, *value),
            ExpectedSlot::Invalid { va, .. } => assert_eq!(v, *va),
            ExpectedSlot::Session(x) => assert_eq!(v, x.context_va),
        }
    }
    check_probes(f, &bytes);
}
