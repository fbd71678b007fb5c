//! ETW data in triage dumps (triage-etw.md): the saved windows (KiCurrentEtwBuffer* and
//! KiCurrentErrLogBuffer*), the ETW secondary-data blob, record counts and clocks. Regression
//! values from triage-etw.md §4.2, measured on the real dump (skipped when ../shared is absent).

mod common;

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::triage::{self, WindowKind};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use std::path::PathBuf;

fn real_isf() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/isf/5278AFF86C341677D7D7835C85B7B844-1.json.xz");
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("SKIPPED: {} is absent", p.display());
        None
    }
}

/// The real x64 triage dump, opened, and the options naming its ISF (None, with a message,
/// when ../shared is absent).
fn real_dump() -> Option<(DumpFile, SymbolOptions)> {
    let (Some(dump), Some(isf)) = (common::shared_dump("triage_x64.dmp"), real_isf()) else {
        return None;
    };
    let d = DumpFile::open(&dump, OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        isf: Some(isf),
        ..SymbolOptions::default()
    };
    Some((d, opts))
}

#[test]
fn real_triage_windows_and_blob() {
    let Some((d, opts)) = real_dump() else {
        return;
    };
    let t = d.triage().unwrap();
    assert_eq!(t.blocks.len(), 1831);
    assert_eq!(
        (t.blocks[56].va, t.blocks[56].file_offset, t.blocks[56].size),
        (0xFFFFC08BDE2F7000, 0xE0208, 0xE18)
    );
    for with_symbols in [true, false] {
        let ctx = if with_symbols {
            KernelContext::open(&d, &opts).unwrap()
        } else {
            KernelContext::without_symbols(&d)
        };
        let r = triage::read(&ctx);
        let tag = if with_symbols { "symbols" } else { "pattern" };
        assert_eq!(r.windows.len(), 2, "{tag}: {:?}", r.warnings);
        let w = &r.windows[0];
        assert_eq!(w.kind, WindowKind::CurrentBuffer);
        assert_eq!(
            (w.base.get(), w.end.get(), w.valid),
            (0xFFFFC08BDE2F7000, 0xFFFFC08BDE2F7E18, 0xE18)
        );
        assert!(w.starts_at_base);
        assert_eq!(
            (w.file_offset, w.block_index),
            (Some(0xE0208), Some(56)),
            "{tag}"
        );
        let h = w.header.as_ref().unwrap();
        assert_eq!(
            (h.logger_id, h.processor_index, h.buffer_size),
            (2, 0, 0x1000)
        );
        assert_eq!(
            (h.current_offset, h.sequence_number, h.state),
            (0xE18, 0x9E, 1)
        );
        assert_eq!(w.first_record, Some(0x48));
        let e = &r.windows[1];
        assert_eq!(e.kind, WindowKind::ErrlogTail);
        assert_eq!(
            (e.base.get(), e.end.get(), e.valid),
            (0xFFFFC08BDEA12000, 0xFFFFC08BDEA1B110, 0x9110)
        );
        assert_eq!(e.start.get(), 0xFFFFC08BDEA1A110);
        assert_eq!((e.file_offset, e.block_index), (Some(0xE1030), Some(59)));
        assert!(!e.starts_at_base);
        // First whole record at window +0xD0 (file 0xE1100).
        assert_eq!(
            (e.first_record, e.partial_bytes),
            (Some(0xD0), 0xD0),
            "{tag}"
        );
        // It repeats the end of the blob's EventLog-System buffer #1 (logger 10).
        let dup = e.duplicate_of.unwrap();
        assert_eq!((dup.session, dup.buffer), (0, 0));
        assert_eq!(e.logger_id, Some(10));
        let b = r.blob.as_ref().unwrap();
        assert_eq!(
            (b.file_offset, b.size, b.parsed),
            (0x156594, 0xA51C, 0xA51C)
        );
        let bh = b.header.unwrap();
        assert_eq!(
            (bh.maximum_increment, bh.build_number, bh.cpu_speed_mhz),
            (156250, 0xF0004A61, 3593)
        );
        assert_eq!(
            (bh.boot_time, bh.perf_freq),
            (0x01D707F23BA702C0, 10_000_000)
        );
        let ids: Vec<_> = b
            .sessions
            .iter()
            .map(|s| {
                (
                    s.logger_id,
                    s.name.raw(),
                    s.buffers.len(),
                    s.name_convention,
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                (10, "EventLog-System", 2, "x2"),
                (12, "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace", 32, "x2"),
                (18, "WiFiSession", 32, "x2")
            ]
        );
        let s = &b.sessions[0];
        assert_eq!(
            (s.logger_mode, s.clock_type, s.buffer_size),
            (0x98800180, 2, 0x10000)
        );
        assert_eq!(
            (s.buffers[0].file_offset, s.buffers[0].valid),
            (0x156620, 0x9110)
        );
        assert_eq!(b.sessions[1].clock_type, 1);
        assert_eq!(b.sessions[1].reference_perf_clock, 0x5D85F3);
        assert!(b.warnings.is_empty(), "{:?}", b.warnings);
        let cpu = r.crash_cpu.unwrap_or_else(|| panic!("{tag}: crash CPU"));
        if with_symbols {
            assert_eq!(cpu.number, Some(0));
            assert_eq!(cpu.mhz, Some(3593));
            assert_eq!(cpu.start_cycles, Some(0xD9D6525C4));
        }
    }
}

/// `events` on the real triage dump: 92 logger-2 PERFINFO records + 107 EventLog-System
/// records (the 18 of the error-log tail are the blob's last 18: listed once), hooks, routines
/// and providers as triage-etw.md §2 measured them; clocks as §2.4.
#[test]
fn real_triage_events() {
    let Some((d, opts)) = real_dump() else {
        return;
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let rep = etwdump::report::events::collect(&ctx, None);
    let count = |f: &dyn Fn(&etwdump::report::events::EventRow) -> bool| {
        rep.rows.iter().filter(|r| f(r)).count()
    };
    assert_eq!(rep.rows.len(), 92 + 107);
    assert_eq!(count(&|r| r.source == "current_buffer"), 92);
    assert_eq!(count(&|r| r.source == "secondary_data"), 107);
    assert_eq!(count(&|r| r.source == "errlog_tail"), 0);
    assert!(rep
        .warnings
        .iter()
        .any(|w| w.message.contains("errlog_tail: the window")
            && w.message
                .contains("repeats the last 0x1000 bytes of logger 10's buffer 0")));
    for (hook, name, n) in [
        ("0x0f32", "MSI_INTERRUPT", 73),
        ("0x0f43", "INTERRUPT", 1),
        ("0x0f44", "DPC", 10),
        ("0x0f45", "TIMERDPC", 8),
    ] {
        assert_eq!(count(&|r| r.hook.as_deref() == Some(hook)), n, "{hook}");
        assert_eq!(count(&|r| r.hook_name == Some(name)), n, "{name}");
    }
    for (sym, n) in [
        ("storport.sys+0xdf70", 73),
        ("Wdf01000.sys+0x3c30", 1),
        ("nt!PpmCheckPeriodicStart", 4),
        ("storahci.sys+0x3ec0", 4),
        ("Wdf01000.sys+0x3850", 1),
        ("ACPI.sys+0x598e0", 1),
        ("nt!AnFwpProgressIndicatorTimer", 6),
        ("nt!PopPepIdleTimeoutDpcRoutine", 1),
        ("nt!PopFxResidentTimeoutDpcRoutine", 1),
    ] {
        assert_eq!(
            count(&|r| r.routine_symbol.as_deref() == Some(sym)),
            n,
            "{sym}"
        );
    }
    let l2: Vec<_> = rep
        .rows
        .iter()
        .filter(|r| r.source == "current_buffer")
        .collect();
    assert_eq!(l2[0].timestamp, Some(57_795_467_616));
    assert_eq!(l2[0].file_offset, Some(0xE0250));
    assert_eq!(l2[91].timestamp, Some(58_475_226_312));
    // Buffer offset 0xDF8 (it ends at 0xE18 = valid), i.e. file 0xE0208 + 0xDF8 = 0xE1000.
    // triage-etw.md §4.2 prints "@0xE1DF8", outside block #56 (0xE0208-0xE1020): a slip there.
    assert_eq!(l2[91].offset, 0xDF8);
    assert_eq!(l2[91].file_offset, Some(0xE1000));
    assert!(l2
        .iter()
        .all(|r| r.cpu == Some(0) && r.logger_id == Some(2) && r.tid.is_none()));
    // Cycles anchored at StartCycles 0xD9D6525C4 (252 cycles after the last record) and the
    // dump's SystemTime 132583451029877657: the last record is 0.07 µs before the dump.
    assert_eq!(l2[91].time.as_deref(), Some("2021-02-21T01:38:22.9877657Z"));
    // The first, 679,758,696 cycles earlier (189.19 ms at 3593 MHz).
    let span = (0xD9D6525C4u64 - 57_795_467_616) * 10 / 3593;
    assert_eq!(l2[0].filetime, Some(132_583_451_029_877_657 - span));
    // A hand-decoded record: the first PERFINFO64 header at file 0xE0250.
    let raw = d.file_bytes(0xE0250, 0x20).unwrap();
    assert_eq!(
        u32::from_le_bytes(raw[0..4].try_into().unwrap()),
        0xC011_0002
    );
    assert_eq!(
        u16::from_le_bytes(raw[4..6].try_into().unwrap()) as usize,
        l2[0].size
    );
    assert_eq!(u16::from_le_bytes(raw[6..8].try_into().unwrap()), 0x0F32);
    assert_eq!(
        u64::from_le_bytes(raw[8..16].try_into().unwrap()),
        l2[0].timestamp.unwrap()
    );
    let routine = u64::from_le_bytes(raw[0x18..0x20].try_into().unwrap());
    assert_eq!(l2[0].routine, Some(format!("{routine:#x}")));
    // EventLog-System: FILETIMEs 132583450998617254 .. 132583451029879549, first at 0x156668.
    let el: Vec<_> = rep
        .rows
        .iter()
        .filter(|r| r.source == "secondary_data")
        .collect();
    assert_eq!(el[0].file_offset, Some(0x156668));
    assert_eq!(el[106].file_offset, Some(0x15F690));
    assert_eq!(el[0].timestamp, Some(132_583_450_998_617_254));
    assert_eq!(el[106].timestamp, Some(132_583_451_029_879_549));
    assert_eq!(
        el[106].time.as_deref(),
        Some("2021-02-21T01:38:22.9879549Z")
    );
    assert!(el
        .iter()
        .all(|r| r.header_type == "event_header64" && r.cpu.is_none()));
    for (provider, n) in [
        ("67fe2216", 29),
        ("c4636a1e", 21),
        ("15ca44ff", 14),
        ("0bf2fb94", 10),
        ("f3c5e28e", 5),
        ("3ff37a1c", 5),
        ("2d9f3a42", 4),
        ("a68ca8b7", 2),
        ("331c3b3a", 1),
    ] {
        assert_eq!(
            count(&|r| r
                .provider
                .as_deref()
                .is_some_and(|p| p.starts_with(provider))),
            n,
            "{provider}"
        );
    }
    // The Kernel-General event 12 carries the build (19041.804).
    let kg = el
        .iter()
        .find(|r| {
            r.provider
                .as_deref()
                .is_some_and(|p| p.starts_with("a68ca8b7"))
        })
        .unwrap();
    assert_eq!((kg.event_id, kg.pid, kg.tid), (Some(12), Some(4), Some(8)));
    // No context switches in this dump.
    assert_eq!(
        count(&|r| matches!(r.hook.as_deref(), Some("0x0524" | "0x0525"))),
        0
    );
}

/// `sessions`, `buffers` and `extract` on the real triage dump: the sessions of the ETW blob
/// plus logger 2, the buffers with the duplicate error-log tail recognised, and ETL files whose
/// records (read back by the project's ETL reader; etl-parser in the interop script) are the
/// 107 EventLog-System and 92 logger-2 records.
#[test]
fn real_triage_sessions_buffers_extract() {
    let Some((d, opts)) = real_dump() else {
        return;
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let rep = etwdump::report::sessions::Sessions::open(&ctx);
    let s = rep.saved();
    let ids: Vec<_> = s
        .iter()
        .map(|x| (x.logger_id.expect("logger id"), x.source, x.buffers))
        .collect();
    assert_eq!(
        ids,
        [
            (10, "secondary_data", 2),
            (12, "secondary_data", 32),
            (18, "secondary_data", 32),
            (2, "current_buffer", 1)
        ]
    );
    assert_eq!(s[0].clock_type, Some(2));
    assert!(rep
        .warnings
        .iter()
        .any(|w| w.message.contains("EVENT_TRACE_ADDTO_TRIAGE_DUMP")));
    let rows = etwdump::report::buffers::analyse(&ctx, None).rows;
    assert_eq!(rows.len(), 2 + 2 + 32 + 32);
    let tail = rows.iter().find(|r| r.source == "errlog_tail").unwrap();
    assert_eq!(
        (tail.record_count, tail.partial_bytes, tail.window_offset),
        (18, 0xD0, 0x8110)
    );
    assert_eq!(
        tail.duplicate_of.as_deref(),
        Some("logger 10 buffer 0 of the secondary data")
    );
    let total: usize = rows
        .iter()
        .filter(|r| r.duplicate_of.is_none())
        .map(|r| r.record_count)
        .sum();
    assert_eq!(total, 92 + 107);
    let only10 = etwdump::report::buffers::analyse(&ctx, Some("EventLog-System")).rows;
    assert_eq!(only10.len(), 3);
    let dir = tempfile::tempdir().unwrap();
    let m = etwdump::report::extract::extract(&ctx, "t.dmp", dir.path(), None, false).unwrap();
    let got: Vec<_> = m
        .sessions
        .iter()
        .map(|s| (s.logger_id, s.buffers, s.records))
        .collect();
    assert_eq!(got, [(10, 1, 107), (2, 1, 92)]);
    for s in &m.sessions {
        let bytes = std::fs::read(dir.path().join(&s.file)).unwrap();
        let etl = etwdump::etl::reader::read(&bytes);
        assert!(etl.problem.is_none(), "{:?}", etl.problem);
        let recs: Vec<usize> = etl.buffers.iter().map(|b| b.records).collect();
        // The header buffer: the header event and the 0x0050 partition record.
        assert_eq!(recs, [2, s.records], "logger {}", s.logger_id);
        assert_eq!(bytes.len() as u64, s.bytes);
    }
    let l2 = &m.sessions[1];
    assert_eq!(l2.records_by_hook.get("0x0f32"), Some(&73));
    assert_eq!(l2.buffer_list[1].cpu, Some(0));
    assert_eq!(l2.buffer_list[1].sequence_number, 0x9E);
    // Each file's header carries the clock anchors `events` converts with (issue 26 item 8),
    // so a reader's time = StartTime + (ts − header TimeStamp) × scale is `events`' time.
    let events = etwdump::report::events::collect(&ctx, None);
    for (s, want) in m.sessions.iter().zip([
        // EventLog-System: system time, StartTime = the header event's TimeStamp.
        (2u32, None, None),
        // Logger 2: CPU cycles at 3593 MHz, anchored at the crashing CPU's StartCycles.
        (3, Some(0xD_9D65_25C4u64), Some(3593u32)),
    ]) {
        let b = std::fs::read(dir.path().join(&s.file)).unwrap();
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        // The header event (SYSTEM_TRACE_HEADER at 0x48) and TRACE_LOGFILE_HEADER (0x68, x64).
        let (hts, tlh) = (u64_at(0x48 + 0x10), 0x68);
        let (mhz, freq, start, clock) = (
            u32_at(tlh + 0x34),
            u64_at(tlh + 0x100),
            u64_at(tlh + 0x108),
            u32_at(tlh + 0x110),
        );
        assert_eq!(clock, want.0, "logger {}", s.logger_id);
        match want.1 {
            Some(raw) => {
                assert_eq!((hts, mhz), (raw, want.2.unwrap()));
                assert_eq!(start, d.header().system_time);
            }
            None => assert_eq!(start, hts),
        }
        let mut n = 0;
        for r in events
            .rows
            .iter()
            .filter(|r| r.logger_id == Some(s.logger_id))
        {
            let (Some(ts), Some(ft)) = (r.timestamp, r.filetime) else {
                continue;
            };
            let d = i128::from(ts) - i128::from(hts);
            let got = i128::from(start)
                + match clock {
                    2 => d,
                    1 => d * 10_000_000 / i128::from(freq),
                    _ => d * 10 / i128::from(mhz),
                };
            assert_eq!(
                got,
                i128::from(ft),
                "logger {} +{:#x}",
                s.logger_id,
                r.offset
            );
            n += 1;
        }
        assert_eq!(n, s.records, "logger {}: every record dated", s.logger_id);
    }
    // Existing files are kept without --force.
    assert!(etwdump::report::extract::extract(&ctx, "t.dmp", dir.path(), None, false).is_err());
}

/// The real ARM64 triage dump (Windows 11 22000), without symbols: the sessions of the ETW
/// secondary data and, found by what its data blocks hold, logger 2's saved window, whose
/// pointer globals lie the other way round from the x64 dump's (the end global 8 bytes below
/// the base global). Values decoded independently, byte by byte (issue 33).
#[test]
fn real_arm64_triage_blob() {
    let Some(dump) = common::shared_dump("triage_arm64.dmp") else {
        return;
    };
    let d = DumpFile::open(&dump, OpenOptions::default()).unwrap();
    let ctx = KernelContext::without_symbols(&d);
    let s = etwdump::report::sessions::Sessions::open(&ctx).saved();
    // The secondary data's four sessions, then logger 2 (known from its saved window only).
    assert_eq!(s.len(), 5);
    assert_eq!(
        (s[4].logger_id, s[4].source, s[4].name.is_none()),
        (Some(2), "current_buffer", true)
    );
    let ids: Vec<_> = s[..4]
        .iter()
        .map(|x| {
            (
                x.logger_id.expect("logger id"),
                x.name.as_ref().unwrap().raw().to_string(),
                x.buffers,
                x.clock_type,
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            (11, "EventLog-System".to_string(), 2, Some(2)),
            (
                19,
                "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace".to_string(),
                16,
                Some(1)
            ),
            (35, "WiFiSession".to_string(), 16, Some(1)),
            (40, "CldFltLog".to_string(), 2, Some(2)),
        ]
    );
    let rep = etwdump::report::events::collect(&ctx, Some("11"));
    assert_eq!(rep.rows.len(), 23);
    assert_eq!(rep.rows[0].timestamp, Some(132_760_615_122_441_836));
    assert_eq!(rep.rows[0].file_offset, Some(766_208));
    assert_eq!(
        rep.rows[0].time.as_deref(),
        Some("2021-09-14T02:51:52.2441836Z")
    );

    // The saved window: data blocks #25 (the window), #26 (base) and #27 (end).
    let t = triage::read(&ctx);
    assert_eq!(t.windows.len(), 1, "{:?}", t.warnings);
    let w = &t.windows[0];
    assert_eq!(w.kind, WindowKind::CurrentBuffer);
    assert_eq!(w.base.get(), 0xFFFF_BB8E_B5AA_E000);
    assert_eq!(w.end.get(), 0xFFFF_BB8E_B5AA_E8B8);
    assert_eq!(w.valid, 0x8B8);
    assert!(w.starts_at_base);
    assert_eq!(w.block_index, Some(25));
    assert_eq!(w.file_offset, Some(0x780CC));
    assert_eq!(w.evidence.found_by, "block pattern");
    assert_eq!(w.evidence.base_global.get(), 0xFFFF_F803_F3A3_6AD0);
    assert_eq!(w.evidence.end_global.get(), 0xFFFF_F803_F3A3_6AC8);
    assert_eq!(w.evidence.global_order, triage::GlobalOrder::EndBeforeBase);
    let h = w.header.as_ref().expect("the window's buffer header");
    assert_eq!(
        (
            h.logger_id,
            h.processor_index,
            h.buffer_size,
            h.sequence_number
        ),
        (2, 0, 0x1000, 14232)
    );
    assert!(!t
        .warnings
        .iter()
        .any(|w| w.message.contains("no saved ETW window")));

    // Every record: 5,537 from the secondary data plus logger 2's 62.
    let all = etwdump::report::events::collect(&ctx, None);
    assert_eq!(all.rows.len(), 5599);
    let l2: Vec<_> = all
        .rows
        .iter()
        .filter(|r| r.source == "current_buffer")
        .collect();
    assert_eq!(l2.len(), 62);
    let hooks = |h: &str| l2.iter().filter(|r| r.hook.as_deref() == Some(h)).count();
    assert_eq!(
        (hooks("0x0f44"), hooks("0x0f43"), hooks("0x0f45")),
        (38, 22, 2)
    );
    assert!(l2
        .iter()
        .all(|r| r.logger_id == Some(2) && r.cpu == Some(0)));
    assert_eq!(l2[0].timestamp, Some(240_099_693_053));
    assert_eq!(l2[0].file_offset, Some(0x780CC + 0x48));
    // Logger 2's clock cannot be established on this dump (no ARM64 _KPRCB layout for
    // StartCycles; as QPC its times would fall hours after the dump): no time is printed,
    // and the warning says why.
    assert!(l2.iter().all(|r| r.time.is_none()));
    assert!(all.warnings.iter().any(|w| w.message.contains(
        "current_buffer: times not converted: logger 2's clock type is not in the dump"
    ) && w.message.contains("QPC: rejected")));

    // Every message record carries its time, GUID, PID and TID (flags 0xAA: GUID, timestamp,
    // system information, 64-bit pointers).
    let msgs: Vec<_> = all
        .rows
        .iter()
        .filter(|r| r.header_type == "message")
        .collect();
    assert_eq!(msgs.len(), 4630);
    assert!(msgs.iter().all(|r| r.time.is_some()
        && r.provider.is_some()
        && r.pid.is_some()
        && r.tid.is_some()
        && r.message_flags.as_deref() == Some("0x00aa")));
    let m = msgs[0];
    assert_eq!(m.logger_id, Some(35));
    assert_eq!(m.file_offset, Some(770_744));
    assert_eq!(
        m.provider.as_deref(),
        Some("f168f093-124c-32f1-04bd-77cd5dc26ded")
    );
    assert_eq!(m.event_id, Some(10));
    assert_eq!(
        (m.timestamp, m.pid, m.tid),
        (Some(275_443_116), Some(4), Some(672))
    );
    assert_eq!(m.time.as_deref(), Some("2021-09-14T02:38:54.3794675Z"));
    // WiFiSession's records span 275,443,116 .. 15,297,415,968 (QPC).
    let ts: Vec<u64> = all
        .rows
        .iter()
        .filter(|r| r.logger_id == Some(35))
        .filter_map(|r| r.timestamp)
        .collect();
    assert_eq!(
        (ts.iter().min(), ts.iter().max()),
        (Some(&275_443_116), Some(&15_297_415_968))
    );
}
