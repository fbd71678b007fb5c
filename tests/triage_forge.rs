//! Triage dumps built by the forge (tests/forge/src/triage*, written from triage-etw.md by a
//! separate author): every scenario (the real dump's shape, ×1 names, a blob without sessions,
//! missing pointer globals, windows shorter than a header, a logger-2 window cut at 0x2000,
//! descriptors past EOF, overlapping blocks, a truncated file, a blob whose DataSize lies, a
//! name length that overruns; the pointer globals in each order — rising, end below base,
//! spaced — on x64 and ARM64; message records of every option-flag combination) read by
//! `etw::triage` and `report::events`, compared with the forge's expectations: windows (and
//! where their base and end pointers were read), blob sessions and buffers, and every record
//! with every header field; and read again without symbols, where the windows are found by what
//! the data blocks hold.

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::triage;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge_triage, triage_scenarios};

#[test]
fn forged_triage_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    let mut scenarios = 0;
    let (mut messages, mut flag_sets) = (0, std::collections::BTreeSet::new());
    let mut orders = std::collections::BTreeSet::new();
    for spec in triage_scenarios() {
        let f = forge_triage(&spec);
        let e = &f.expected;
        let sc = e.scenario.clone();
        let isf = dir.path().join(format!("{sc}.json"));
        std::fs::write(&isf, &f.isf_json).unwrap();
        let opts = OpenOptions {
            allow_truncated: sc == "bad_truncated",
        };
        let d = match DumpFile::from_bytes(f.bytes.clone(), opts) {
            Ok(d) => d,
            Err(err) => panic!("{sc}: {err}"),
        };
        let sopts = SymbolOptions {
            isf: Some(isf),
            ..SymbolOptions::default()
        };
        let ctx = KernelContext::open(&d, &sopts).unwrap_or_else(|err| panic!("{sc}: {err}"));
        let r = triage::read(&ctx);
        // Windows.
        assert_eq!(r.windows.len(), e.windows.len(), "{sc}: {:?}", r.warnings);
        for (g, w) in r.windows.iter().zip(&e.windows) {
            let t = format!("{sc}: {} window", w.which);
            assert_eq!(
                g.kind.source(),
                if w.which == "etw" {
                    "current_buffer"
                } else {
                    "errlog_tail"
                },
                "{t}"
            );
            assert_eq!(
                (g.base.get(), g.end.get(), g.valid),
                (w.base, w.end, w.valid),
                "{t}"
            );
            assert_eq!(g.start.get(), w.start_va, "{t}");
            assert_eq!(g.data.len() as u64, w.size, "{t}");
            assert_eq!(g.starts_at_base, w.starts_at_base, "{t}");
            if w.size > 0 {
                assert_eq!(g.file_offset, Some(w.file_offset), "{t}");
                assert_eq!(g.block_index, Some(w.block_index), "{t}");
            }
            assert_eq!(g.logger_id, w.logger_id.map(u64::from), "{t}");
            assert_eq!(g.processor, w.processor_index.map(u64::from), "{t}");
            let shift = g.start.get() - g.base.get();
            assert_eq!(
                g.first_record.map(|x| x as u64 + shift),
                w.first_record_offset,
                "{t}"
            );
            assert_eq!(g.partial_bytes as u64, w.partial_bytes, "{t}");
            assert_eq!(
                g.duplicate_of.map(|x| (x.session, x.buffer)),
                w.duplicate_of
                    .as_ref()
                    .map(|x| (x.session_index, x.buffer_index)),
                "{t}"
            );
            if let (Some(gh), Some(wh)) = (&g.header, &w.header) {
                assert_eq!(gh.sequence_number, wh.sequence_number, "{t}");
                assert_eq!(gh.current_offset, u64::from(wh.current_offset), "{t}");
            }
            // Where the two pointers were read, and how the globals lie.
            assert_eq!(g.evidence.found_by, "symbols", "{t}");
            assert_eq!(
                (g.evidence.base_global.get(), g.evidence.end_global.get()),
                (w.base_global_va, w.end_global_va),
                "{t}"
            );
            assert_eq!(order_name(g.evidence.global_order), w.globals_order, "{t}");
        }
        // Without symbols: the same windows, found by what the data blocks hold.
        let bare = KernelContext::without_symbols(&d);
        let r0 = triage::read(&bare);
        let found: Vec<_> = r0
            .windows
            .iter()
            .map(|g| {
                (
                    g.kind.source(),
                    g.base.get(),
                    g.end.get(),
                    g.evidence.base_global.get(),
                    g.evidence.end_global.get(),
                    g.evidence.found_by,
                )
            })
            .collect();
        let want: Vec<_> = e
            .windows
            .iter()
            .filter(|w| w.size > 0 && patterned(&sc))
            .map(|w| {
                (
                    if w.which == "etw" {
                        "current_buffer"
                    } else {
                        "errlog_tail"
                    },
                    w.base,
                    w.end,
                    w.base_global_va,
                    w.end_global_va,
                    "block pattern",
                )
            })
            .collect();
        if patterned(&sc) {
            assert_eq!(found, want, "{sc}: without symbols: {:?}", r0.warnings);
        }
        // The ETW blob.
        match (&r.blob, &e.etw_blob) {
            (Some(g), Some(w)) => {
                assert_eq!(g.file_offset, w.data_offset, "{sc}");
                let h = g.header.unwrap();
                assert_eq!(
                    (
                        h.cpu_speed_mhz,
                        h.perf_freq,
                        h.boot_time,
                        h.maximum_increment
                    ),
                    (w.cpu_speed_mhz, w.perf_freq, w.boot_time, w.max_increment),
                    "{sc}"
                );
                assert_eq!(g.sessions.len(), w.sessions.len(), "{sc}: {:?}", g.warnings);
                for (gs, ws) in g.sessions.iter().zip(&w.sessions) {
                    let t = format!("{sc}: session {}", ws.logger_id);
                    assert_eq!(gs.header_offset, ws.file_offset, "{t}");
                    assert_eq!(gs.logger_id, u64::from(ws.logger_id), "{t}");
                    assert_eq!(gs.clock_type, u64::from(ws.clock_type), "{t}");
                    assert_eq!(gs.logger_mode, u64::from(ws.logger_mode), "{t}");
                    assert_eq!(gs.buffer_size, u64::from(ws.buffer_size), "{t}");
                    if ws.complete {
                        assert_eq!(Some(gs.name.raw()), ws.name.as_deref(), "{t}");
                        let conv = format!("{:?}", ws.name_convention).to_lowercase();
                        let want = if conv.contains("doubled") || conv == "x2" {
                            "x2"
                        } else {
                            "x1"
                        };
                        assert_eq!(gs.name_convention, want, "{t}");
                        assert_eq!(
                            (gs.start_time, gs.reference_perf_clock),
                            (ws.start_time, ws.reference_perf_clock),
                            "{t}"
                        );
                    }
                    let gb: Vec<(u64, u64)> = gs
                        .buffers
                        .iter()
                        .map(|b| (b.file_offset, b.valid))
                        .collect();
                    let wb: Vec<(u64, u64)> = ws
                        .buffers
                        .iter()
                        .map(|b| (b.file_offset, u64::from(b.valid)))
                        .collect();
                    assert_eq!(gb, wb, "{t}");
                }
                if w.complete {
                    assert!(g.warnings.is_empty(), "{sc}: {:?}", g.warnings);
                    assert_eq!(g.parsed, g.size, "{sc}");
                } else {
                    assert!(
                        !g.warnings.is_empty()
                            || r.warnings.iter().any(|w| w.message.contains("blob")),
                        "{sc}: a lying blob must be reported: {:?}",
                        r.warnings
                    );
                }
            }
            (None, None) => {}
            (g, w) => panic!("{sc}: blob {:?} vs expected {:?}", g.is_some(), w.is_some()),
        }
        // Records: every expected one except the error-log copies of blob records.
        let rep = etwdump::report::events::collect(&ctx, None);
        let want: Vec<_> = e
            .records
            .iter()
            .filter(|x| x.duplicate_of.is_none())
            .collect();
        assert_eq!(rep.rows.len(), want.len(), "{sc}: {:?}", rep.warnings);
        for (g, w) in rep.rows.iter().zip(&want) {
            let t = format!("{sc}: record {} ({})", w.index, w.source);
            assert_eq!(g.source, w.source, "{t}");
            assert_eq!(g.logger_id, w.logger_id.map(u64::from), "{t}");
            assert_eq!(g.file_offset, Some(w.file_offset), "{t}");
            assert_eq!(g.offset as u64, w.buffer_offset, "{t}");
            assert!(g.header_type.starts_with(&w.header_type), "{t}");
            assert_eq!(g.size, usize::from(w.size), "{t}");
            match &w.message {
                // A message: every field its option flags carry, none it does not.
                Some(m) => {
                    assert_eq!(g.header_type, "message", "{t}");
                    assert_eq!(g.timestamp, m.timestamp, "{t}");
                    assert_eq!((g.pid, g.tid), (m.pid, m.tid), "{t}");
                    assert_eq!(g.provider, m.guid, "{t}");
                    assert_eq!(g.event_id, Some(m.message_number), "{t}");
                    assert_eq!(g.message_flags, Some(format!("{:#06x}", m.flags)), "{t}");
                    assert_eq!(
                        (g.sequence, g.component_id),
                        (m.sequence, m.component_id),
                        "{t}"
                    );
                    messages += 1;
                    flag_sets.insert(m.flags);
                }
                None => {
                    assert_eq!(g.timestamp, Some(w.timestamp), "{t}");
                    assert_eq!((g.pid, g.tid), (w.pid, w.tid), "{t}");
                }
            }
            assert_eq!(g.cpu, w.cpu.map(u64::from), "{t}");
            assert_eq!(g.hook, w.hook_id.map(|h| format!("{h:#06x}")), "{t}");
            if w.message.is_none() {
                assert_eq!(g.provider, w.provider, "{t}");
                assert_eq!(g.event_id, w.event_id, "{t}");
            }
            assert_eq!(g.routine, w.routine.map(|r| format!("{r:#x}")), "{t}");
            match (&w.routine_symbol, &w.routine_module) {
                (Some(s), _) => assert_eq!(g.routine_symbol, Some(format!("nt!{s}")), "{t}"),
                (None, Some(m)) => assert_eq!(
                    g.routine_symbol,
                    Some(format!("{m}+{:#x}", w.routine_offset.unwrap())),
                    "{t}"
                ),
                (None, None) => assert_eq!(g.routine_symbol, None, "{t}"),
            }
            // Clocks: FILETIME records as is; logger 2's cycles anchored at the crash.
            match w.clock.as_deref() {
                Some("filetime") if w.message.as_ref().is_some_and(|m| m.timestamp.is_none()) => {
                    assert_eq!(g.filetime, None, "{t}: no timestamp, no time")
                }
                Some("filetime") => assert_eq!(g.filetime, Some(w.timestamp), "{t}"),
                Some("cycles") => {
                    let before = w.cycles_before_crash.unwrap();
                    let mhz = u64::from(e.crash_cpu.mhz);
                    assert_eq!(g.filetime, Some(e.system_time - before * 10 / mhz), "{t}");
                }
                _ => {}
            }
        }
        for w in &e.windows {
            orders.insert((format!("{:?}", e.arch), w.globals_order.clone()));
        }
        scenarios += 1;
    }
    assert_eq!(scenarios, 20);
    // Every option-flag combination the forge writes (64 field subsets x 3 pointer sizes),
    // every globals order on both architectures.
    assert_eq!(flag_sets.len(), 192, "{messages} messages");
    for arch in ["X64", "Arm64"] {
        for o in ["rising", "end_below_base", "spaced"] {
            assert!(
                orders.contains(&(arch.to_string(), o.to_string())),
                "{arch} {o}: {orders:?}"
            );
        }
    }
}

fn order_name(o: triage::GlobalOrder) -> &'static str {
    match o {
        triage::GlobalOrder::EndAfterBase => "rising",
        triage::GlobalOrder::EndBeforeBase => "end_below_base",
        triage::GlobalOrder::Apart => "spaced",
    }
}

/// Scenarios whose data-block table keeps every window's three blocks readable and in the
/// kernel's call order, so that the symbol-less search must find exactly the windows the
/// symbols give (the damaged ones are checked with symbols only).
fn patterned(sc: &str) -> bool {
    !matches!(
        sc,
        "missing_globals"
            | "short_windows"
            | "bad_blocks_past_eof"
            | "bad_overlapping_blocks"
            | "bad_truncated"
    )
}
