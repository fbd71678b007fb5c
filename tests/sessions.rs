//! `sessions` against forge dumps with ETW logger state (tests/forge src/etw.rs, written from
//! the fixtures' types.h independently of the reader): for every fixture kernel, every slot is
//! classified as the forge says and every listed field equals what the forge wrote.

mod common;
use common::etwdump;
use common::{file_offset, fixture, pdb_of, FIXTURES};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::loggers::{list_sessions, SessionList};
use etwdump::etw::routes::Route;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config, EtwRoute, EtwSpec, ExpectedSlot, Forged};
use std::path::Path;

fn forge_etw(name: &str, max_loggers: Option<u32>) -> Forged {
    let mut c = Config::from_fixture(&fixture(name));
    c.etw = Some(match max_loggers {
        Some(m) => EtwSpec::standard_with_max_loggers(c.build, m),
        None => EtwSpec::standard(c.build),
    });
    forge(&c)
}

fn list(f: &Forged, pdb: Option<&Path>) -> SessionList {
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: pdb.map(Path::to_path_buf),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    list_sessions(&ctx)
}

/// Compare a listing with the forge's expectation; `capacity_read` is how many slots the
/// reader could know about.
fn check(name: &str, f: &Forged, l: &SessionList, want_route: Route) {
    let e = f.etw.as_ref().unwrap();
    let a = l
        .array
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: no array; {:?}", l.warnings));
    assert_eq!(a.address.get(), e.array_va, "{name}: array address");
    assert_eq!(a.route, want_route, "{name}: route");
    let read = a.capacity as usize;
    let slots = &e.slots[..read.min(e.slots.len())];
    let want_sessions: Vec<_> = slots
        .iter()
        .filter_map(|s| match s {
            ExpectedSlot::Session(x) => Some(&**x),
            _ => None,
        })
        .collect();
    assert_eq!(
        l.sessions.iter().map(|s| s.logger_id).collect::<Vec<_>>(),
        want_sessions
            .iter()
            .map(|s| u64::from(s.logger_id))
            .collect::<Vec<_>>(),
        "{name}: listed loggers; warnings {:?}",
        l.warnings
    );
    for (got, want) in l.sessions.iter().zip(&want_sessions) {
        let id = want.logger_id;
        assert_eq!(got.address.get(), want.context_va, "{name} logger {id}");
        assert_eq!(
            got.name.as_ref().map(|n| n.raw()),
            want.name.as_deref(),
            "{name} logger {id}"
        );
        if want.name.is_none() {
            let w = got
                .warnings
                .iter()
                .map(|w| w.message.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            assert!(
                w.contains("LoggerName") && w.contains(&format!("{:#x}", want.name_va)),
                "{name} logger {id}: {w}"
            );
        }
        assert_eq!(
            got.log_file.as_ref().map(|n| n.raw()),
            want.log_file.as_deref(),
            "{name} logger {id}"
        );
        assert_eq!(
            got.instance_guid.as_deref(),
            Some(want.instance_guid.to_ascii_lowercase().as_str()),
            "{name} logger {id}"
        );
        assert_eq!(
            got.logger_mode,
            Some(u64::from(want.logger_mode)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.clock_type,
            want.clock_type.map(u64::from),
            "{name} logger {id}"
        );
        assert_eq!(
            got.buffer_size,
            Some(u64::from(want.buffer_size)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.minimum_buffers,
            Some(u64::from(want.minimum_buffers)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.maximum_buffers,
            Some(u64::from(want.maximum_buffers)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.number_of_buffers,
            Some(u64::from(want.number_of_buffers)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.buffers_written,
            Some(u64::from(want.buffers_written)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.events_lost,
            Some(u64::from(want.events_lost)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.log_buffers_lost,
            Some(u64::from(want.log_buffers_lost)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.real_time_buffers_lost,
            Some(u64::from(want.real_time_buffers_lost)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.start_time_raw,
            Some(want.start_time),
            "{name} logger {id}"
        );
        assert_eq!(
            got.start_time.as_deref(),
            Some(etwdump::time::filetime_to_iso8601(want.start_time).as_str()),
            "{name} logger {id}"
        );
        assert_eq!(
            got.pool_type,
            Some(u64::from(want.pool_type)),
            "{name} logger {id}"
        );
        assert_eq!(
            got.maximum_event_size,
            Some(u64::from(want.maximum_event_size)),
            "{name} logger {id}"
        );
    }
    // Every invalid slot is reported with its slot number and address.
    for (i, s) in slots.iter().enumerate() {
        if let ExpectedSlot::Invalid { va, why } = s {
            let needle = format!("slot {i}: {va:#x} is not a logger context");
            assert!(
                l.warnings.iter().any(|w| w.message.starts_with(&needle)),
                "{name}: {needle} ({why}) not reported: {:?}",
                l.warnings
            );
        }
    }
    let free = slots
        .iter()
        .filter(|s| matches!(s, ExpectedSlot::Free { .. }))
        .count() as u64;
    assert_eq!(l.free_slots, free, "{name}: free slots");
    assert!(
        !l.warnings.iter().any(|w| w.message.contains("disagree")),
        "{name}: {:?}",
        l.warnings
    );
}

fn route_of(e: EtwRoute) -> Route {
    match e {
        EtwRoute::Global => Route::GlobalArray,
        EtwRoute::Inline => Route::SiloInline,
        _ => Route::SiloPointer,
    }
}

/// With the fixture's PDB: the array through the era's route, every route agreeing.
#[test]
fn sessions_with_pdb_every_era() {
    for name in FIXTURES {
        let f = forge_etw(name, None);
        let l = list(&f, Some(&pdb_of(name)));
        let want = route_of(f.etw.as_ref().unwrap().route);
        check(name, &f, &l, want);
        // The KDBG route was followed too and agrees.
        assert!(
            l.routes
                .iter()
                .any(|r| r.route == Route::KdbgEtwpDebuggerData
                    && r.address.get() == f.etw.as_ref().unwrap().array_va),
            "{name}: {:?}",
            l.routes
        );
        assert!(l.sessions.iter().all(|s| s.layout_source == "pdb"));
    }
}

/// MaxLoggers 0x50: all 80 slots are read, including the session beyond slot 63.
#[test]
fn max_loggers_0x50() {
    let f = forge_etw("x64-19041", Some(0x50));
    let l = list(&f, Some(&pdb_of("x64-19041")));
    assert_eq!(l.array.as_ref().unwrap().capacity, 0x50);
    check("x64-19041 MaxLoggers 0x50", &f, &l, Route::SiloPointer);
    assert!(l.sessions.iter().any(|s| s.logger_id >= 64));
}

/// Without any symbols: the KDBG route and the built-in layouts give the same sessions for the
/// builds whose built-in tables cover the fields (the fixture layouts are the real ones). The
/// fixtures' PDB GUIDs are made up, so the layouts are the corpus's nearest earlier ones.
/// Every x64 fixture (every major build of the layout corpus: 7601, 9600, 14393, 17763 twice,
/// 18362, 19041, 20348, 22000): without symbols, every session field equals what the fixture's
/// PDB gives (and what the forge wrote).
#[test]
fn sessions_without_symbols() {
    // x86 14393 has no built-in layouts to read without symbols.
    for name in FIXTURES.iter().filter(|n| n.starts_with("x64")) {
        let f = forge_etw(name, None);
        let l = list(&f, None);
        check(
            &format!("{name} (no symbols)"),
            &f,
            &l,
            Route::KdbgEtwpDebuggerData,
        );
        assert!(l
            .sessions
            .iter()
            .all(|s| s.layout_source == "builtin-nearest"));
        let with_pdb = list(&f, Some(&pdb_of(name)));
        assert_eq!(l.sessions.len(), with_pdb.sessions.len(), "{name}");
        for (a, b) in l.sessions.iter().zip(&with_pdb.sessions) {
            let mut a = a.clone();
            a.layout_source = b.layout_source;
            // The PDB run reaches the array through the silo state (SiloState evidence).
            a.identity = b.identity.clone();
            assert_eq!(
                &a, b,
                "{name}: logger {} without symbols vs PDB",
                b.logger_id
            );
        }
    }
}

/// The CLI: JSON keys, CSV columns, warnings on stderr.
#[test]
fn cli_formats() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge_etw("x64-19041", None);
    let p = dir.path().join("d.dmp");
    f.write_to(&p).unwrap();
    let pdb = pdb_of("x64-19041");
    let out = etwdump(&[
        "sessions",
        p.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The envelope (docs/output-contract.md): version, command, records, typed warnings.
    assert_eq!(j["format_version"], 3);
    assert_eq!(j["command"], "sessions");
    let all = j["records"].as_array().unwrap();
    // The rejected slots are also warnings, typed with their slot and address.
    let typed = j["warnings"].as_array().unwrap();
    assert!(typed
        .iter()
        .any(|w| w["kind"] == "anomaly" && w["slot"].is_u64() && w["address"].is_string()));
    // Records: the sessions (kind "session"), then every rejected slot (kind "rejected_slot")
    // with the slot, its raw value and the reason: exactly the forge's invalid slots.
    let arr: Vec<&serde_json::Value> = all.iter().filter(|o| o["kind"] == "session").collect();
    let rejected: Vec<&serde_json::Value> = all
        .iter()
        .filter(|o| o["kind"] == "rejected_slot")
        .collect();
    assert_eq!(arr.len() + rejected.len(), all.len());
    let want: Vec<_> = f.etw.as_ref().unwrap().sessions().collect();
    assert_eq!(arr.len(), want.len());
    let want_rejected: Vec<(u64, String)> = f
        .etw
        .as_ref()
        .unwrap()
        .slots
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            etwdump_forge::ExpectedSlot::Invalid { va, .. } => Some((i as u64, format!("{va:#x}"))),
            _ => None,
        })
        .collect();
    let got_rejected: Vec<(u64, String)> = rejected
        .iter()
        .map(|o| {
            (
                o["slot"].as_u64().unwrap(),
                o["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got_rejected, want_rejected);
    assert_eq!(rejected[0]["field"], "LoggerId");
    assert!(rejected[0]["reason"]
        .as_str()
        .unwrap()
        .contains("not the slot index"));
    let keys = [
        "logger_id",
        "name",
        "log_file",
        "instance_guid",
        "address",
        "logger_mode",
        "logger_mode_flags",
        "clock_type",
        "clock_type_name",
        "buffer_size",
        "minimum_buffers",
        "maximum_buffers",
        "number_of_buffers",
        "buffers_written",
        "events_lost",
        "log_buffers_lost",
        "real_time_buffers_lost",
        "start_time",
        "pool_type",
        "layout_source",
        "identity",
        "anomalies",
    ];
    for o in &arr {
        for k in keys {
            assert!(o.get(k).is_some(), "missing key {k} in {o}");
        }
    }
    let ckcl = arr.iter().find(|o| o["logger_id"] == 2).unwrap();
    assert_eq!(ckcl["name"], "Circular Kernel Context Logger");
    assert!(ckcl["logger_mode_flags"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f == "EVENT_TRACE_BUFFERING_MODE"));
    assert_eq!(ckcl["layout_source"], "pdb");
    let names: Vec<&str> = arr
        .iter()
        .filter_map(|o| o["clock_type_name"].as_str())
        .collect();
    for c in ["Raw", "QPC", "SystemTime", "CPUCycle"] {
        assert!(names.contains(&c), "no session with clock {c}: {names:?}");
    }
    // JSON: the warnings are in the envelope (typed), not on stderr.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.is_empty(), "{err}");
    assert!(
        typed.iter().any(|w| w["message"]
            .as_str()
            .unwrap()
            .contains("is not a logger context")),
        "{typed:?}"
    );
    let out = etwdump(&[
        "sessions",
        p.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("kind,logger_id,name,log_file,instance_guid,address,"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), want.len() + want_rejected.len());
    assert_eq!(
        rows.iter().filter(|r| r.starts_with("session,")).count(),
        want.len()
    );
    for (slot, va) in &want_rejected {
        assert!(
            rows.iter()
                .any(|r| r.starts_with("rejected_slot,") && r.contains(&format!(",{slot},{va},"))),
            "no CSV row for rejected slot {slot} {va}: {rows:?}"
        );
    }
    let out = etwdump(&[
        "sessions",
        p.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("via EtwpHostSiloState -> _ETW_SILODRIVERSTATE.EtwpLoggerContext"),
        "{text}"
    );
    assert!(text.contains("Circular Kernel Context Logger"));
    assert!(
        text.contains(&format!(
            "{} sessions, {} free slots, {} rejected slots",
            want.len(),
            f.etw
                .as_ref()
                .unwrap()
                .slots
                .iter()
                .filter(|s| matches!(s, etwdump_forge::ExpectedSlot::Free { .. }))
                .count(),
            want_rejected.len()
        )),
        "{text}"
    );
}

/// An impossible MaxLoggers is capped (and said so), not trusted.
#[test]
fn impossible_max_loggers_is_capped() {
    let f = forge_etw("x64-19041", None);
    let mut bytes = f.to_bytes();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let silo = f.etw.as_ref().unwrap().silo_state_va.unwrap();
    // _ETW_SILODRIVERSTATE.MaxLoggers is at +0x10 in 19041 (crash-dump-format.md §2.3).
    let off = file_offset(&d, silo + 0x10);
    bytes[off..off + 4].copy_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
    let d = DumpFile::from_bytes(bytes, OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb_of("x64-19041")),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let l = list_sessions(&ctx);
    assert_eq!(l.array.as_ref().unwrap().capacity, 64);
    assert!(
        l.warnings.iter().any(|w| w.message.contains(&format!(
            "MaxLoggers at {:#x} is 4294967295, outside 1-1024; reading 64 slots",
            silo + 0x10
        ))),
        "{:?}",
        l.warnings
    );
    assert_eq!(l.sessions.len(), f.etw.as_ref().unwrap().sessions().count());
}

/// Random corruption of the logger contexts never panics or hangs; whatever is listed still
/// passed validation (LoggerId = slot).
#[test]
fn corrupted_contexts_never_panic() {
    let f = forge_etw("x64-19041", None);
    let base = f.to_bytes();
    let d = DumpFile::from_bytes(base.clone(), OpenOptions::default()).unwrap();
    let ctxs: Vec<usize> = f
        .etw
        .as_ref()
        .unwrap()
        .sessions()
        .map(|s| file_offset(&d, s.context_va))
        .collect();
    let opts = SymbolOptions {
        pdb: Some(pdb_of("x64-19041")),
        ..SymbolOptions::default()
    };
    let mut rng = common::Rng(0x005E_ED0F_E7D0);
    for _ in 0..300 {
        let mut b = base.clone();
        for _ in 0..(1 + rng.next() % 16) {
            let c = ctxs[(rng.next() % ctxs.len() as u64) as usize];
            let pos = c + (rng.next() % 0x600) as usize;
            b[pos] = rng.next() as u8;
        }
        let d = DumpFile::from_bytes(b, OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let l = list_sessions(&ctx);
        let a = l.array.as_ref().unwrap();
        for s in &l.sessions {
            assert!(s.logger_id < a.capacity);
            assert_eq!(s.address.get() % 8, 0, "listed context must be aligned");
        }
        let rep = etwdump::report::sessions::Sessions::open(&ctx);
        assert_eq!(rep.list().map(|x| x.sessions.len()), Some(l.sessions.len()));
        let _ = etwdump::render::sessions::to_table(&rep);
        let _ = etwdump::render::sessions::to_csv(&rep);
    }
}

/// A KDBG route that disagrees with the symbol route is reported (it can mean tampering), and
/// the symbol route is used.
#[test]
fn disagreeing_routes_are_reported() {
    let f = forge_etw("x64-19041", None);
    let e = f.etw.as_ref().unwrap();
    let mut bytes = f.to_bytes();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let off = file_offset(&d, e.debugger_data_array_ptr_va);
    let fake = e.array_va + 0x800;
    bytes[off..off + 8].copy_from_slice(&fake.to_le_bytes());
    let d = DumpFile::from_bytes(bytes, OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb_of("x64-19041")),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let l = list_sessions(&ctx);
    assert_eq!(l.array.as_ref().unwrap().address.get(), e.array_va);
    let want = format!(
        "routes disagree: EtwpHostSiloState -> _ETW_SILODRIVERSTATE.EtwpLoggerContext gives the logger array at {:#x}, KDBG.EtwpDebuggerData + 0x10 gives {fake:#x}",
        e.array_va
    );
    assert!(
        l.warnings.iter().any(|w| w.message.starts_with(&want)),
        "{:?}",
        l.warnings
    );
    assert_eq!(l.sessions.len(), e.sessions().count());
}

/// Windows 2000 is said to be unsupported, not guessed at.
#[test]
fn windows_2000_is_unsupported() {
    let mut c = Config::x86_pae();
    c.build = 2195;
    let f = forge(&c);
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &SymbolOptions::default()).unwrap();
    let l = list_sessions(&ctx);
    assert!(l.array.is_none());
    assert!(
        l.warnings[0]
            .message
            .starts_with("Windows 2000 (build 2195) keeps its 32 logger contexts"),
        "{:?}",
        l.warnings
    );
}

/// Text from memory never reaches a terminal or a spreadsheet as control codes or formulas: a
/// logger named "=HYPERLINK(...)" with an ESC sequence and a BEL, and a log file starting with
/// "@", come out of `sessions --format csv` escaped and neutralised, and out of the table
/// escaped.
#[test]
fn hostile_names_in_csv_and_table() {
    let mut c = Config::from_fixture(&fixture("x64-19041"));
    let mut spec = EtwSpec::standard(c.build);
    let hostile = "=HYPERLINK(\"http://x\")\u{1b}[31m\u{7}";
    if let Some(etwdump_forge::SlotSpec::Session(s)) = spec.slots.get_mut(&4) {
        s.name = hostile.to_string();
        s.log_file = Some("@SUM(A1)\r\nx".to_string());
    } else {
        panic!("slot 4 is a session in the standard spec");
    }
    c.etw = Some(spec);
    let f = forge(&c);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.dmp");
    f.write_to(&p).unwrap();
    let run = |fmt: &str| sessions_cli(&p, fmt);
    for fmt in ["csv", "table"] {
        let text = run(fmt);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{fmt}: raw control character in {text:?}"
        );
        assert!(text.contains("\\u{1b}[31m\\u{7}"), "{fmt}: {text}");
    }
    let csv = run("csv");
    let line = csv.lines().find(|l| l.contains("HYPERLINK")).unwrap();
    assert!(
        line.contains(",\"'=HYPERLINK(\"\"http://x\"\")\\u{1b}[31m\\u{7}\","),
        "{line}"
    );
    assert!(line.contains(",'@SUM(A1)\\u{d}\\u{a}x,"), "{line}");
    // JSON keeps the exact text (escaped by JSON itself).
    let json: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    let s4 = json["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["logger_id"] == 4)
        .unwrap();
    assert_eq!(s4["name"], hostile);
}

/// `--force` (use mismatched symbols) and `--overwrite` (replace extract output) are two
/// options; a `--session` that names no session is an error listing the sessions (issue 12).
#[test]
fn overwrite_and_unknown_session() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge_etw("x64-19041", None);
    let p = dir.path().join("d.dmp");
    f.write_to(&p).unwrap();
    let pdb = pdb_of("x64-19041");
    let (p, pdb) = (p.to_str().unwrap(), pdb.to_str().unwrap());
    let out_dir = dir.path().join("out");
    let o = out_dir.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec!["extract", p, "--pdb", pdb, "-o", o];
        a.extend_from_slice(extra);
        etwdump(&a)
    };
    assert!(run(&[]).status.success());
    let again = run(&[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));
    assert_eq!(
        run(&["--force"]).status.code(),
        Some(2),
        "--force does not overwrite"
    );
    assert!(run(&["--overwrite"]).status.success());
    for cmd in ["buffers", "extract", "events"] {
        let mut a = vec![cmd, p, "--pdb", pdb, "--session", "No Such Logger"];
        if cmd == "extract" {
            a.extend_from_slice(&["-o", o, "--overwrite"]);
        }
        let out = etwdump(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("--session No Such Logger: no such session")
                && err.contains("2 Circular Kernel Context Logger"),
            "{cmd}: {err}"
        );
    }
    let ok = etwdump(&["buffers", p, "--pdb", pdb, "--session", "2"]);
    assert!(ok.status.success());
}

/// `etwdump sessions DUMP --pdb <19041> --format FMT`, which must succeed: its stdout.
fn sessions_cli(dump: &Path, fmt: &str) -> String {
    let pdb = pdb_of("x64-19041");
    let out = etwdump(&[
        "sessions",
        dump.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
        "--format",
        fmt,
    ]);
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The sample's memory as a full dump (so the tests below can patch it by file offset).
fn consumer_dump() -> (Forged, Vec<u8>) {
    let mut c = Config::sample_etw();
    c.layout = etwdump_forge::Layout::Full;
    let f = forge(&c);
    let b = f.to_bytes();
    (f, b)
}

fn sessions_of(bytes: Vec<u8>) -> SessionList {
    let d = DumpFile::from_bytes(bytes, OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(
        &d,
        &SymbolOptions {
            pdb: Some(pdb_of("x64-19041")),
            ..SymbolOptions::default()
        },
    )
    .unwrap();
    list_sessions(&ctx)
}

/// Real-time consumers (issue 17): every session lists the `_ETW_REALTIME_CONSUMER`s on its
/// `Consumers` list as the forge placed them: address, the process (EPROCESS, PID, image
/// name), the handle value, LoggerId, BuffersLost, EmptyBuffersCount; sessions without
/// consumers list none; the table and CSV name them.
#[test]
fn realtime_consumers_are_listed_with_their_processes() {
    let (f, bytes) = consumer_dump();
    let list = sessions_of(bytes.clone());
    let etw = f.etw.as_ref().unwrap();
    let mut seen = 0;
    for want in etw.sessions() {
        let s = list
            .sessions
            .iter()
            .find(|s| s.logger_id == u64::from(want.logger_id))
            .unwrap();
        assert_eq!(
            s.consumers.len(),
            want.consumers.len(),
            "logger {}",
            s.logger_id
        );
        for (g, w) in s.consumers.iter().zip(&want.consumers) {
            let name = f
                .processes
                .iter()
                .find(|p| p.pid == w.pid)
                .unwrap()
                .name
                .clone();
            assert_eq!(g.address.get(), w.va);
            assert_eq!(g.eprocess.map(|e| e.get()), Some(w.eprocess));
            assert_eq!(
                (g.pid, g.process.as_ref().map(|n| n.raw())),
                (Some(w.pid), Some(name.as_str()))
            );
            assert_eq!(g.process_handle, Some(0x1000 + 4 * w.pid));
            assert_eq!(g.logger_id, Some(u64::from(w.logger_id)));
            assert_eq!(g.buffers_lost, Some(u64::from(w.buffers_lost)));
            assert_eq!(g.empty_buffers, Some(u64::from(w.empty_buffers)));
            assert!(g.warnings.is_empty(), "{:?}", g.warnings);
            seen += 1;
        }
    }
    assert_eq!(seen, 3);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.dmp");
    std::fs::write(&p, &bytes).unwrap();
    let run = |fmt: &str| sessions_cli(&p, fmt);
    let table = run("table");
    assert!(
        table.contains("consumer: logger 3: PID 1100 svchost.exe (consumer 0x"),
        "{table}"
    );
    assert_eq!(table.matches("consumer: logger 6: ").count(), 2);
    let csv = run("csv");
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .contains(",warnings,consumers,slot,"));
    assert!(csv.contains("PID 4836 explorer.exe (consumer 0x"));
}

/// Damaged consumers are still reported, with the field and address that is wrong: a
/// LoggerId that is not the session's, a ProcessObject that leads nowhere, NumConsumers that
/// disagrees with the list, and a list that loops (cut, said so).
#[test]
fn damaged_consumers_are_reported_with_what_is_wrong() {
    let (f, bytes) = consumer_dump();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let s6 = f
        .etw
        .as_ref()
        .unwrap()
        .sessions()
        .find(|s| s.logger_id == 6)
        .unwrap()
        .clone();
    let (c0, c1) = (&s6.consumers[0], &s6.consumers[1]);
    // Field offsets from the fixture PDB's layouts.
    let sym = etwdump::symbols::Symbols::from_pdb(
        &pdb_of("x64-19041"),
        &["_ETW_REALTIME_CONSUMER", "_WMI_LOGGER_CONTEXT"],
    )
    .unwrap();
    let off = |t: &str, f: &str| sym.layout(t).unwrap().field(f).unwrap().offset;
    let rc = "_ETW_REALTIME_CONSUMER";
    let mut b = bytes.clone();
    let at = file_offset(&d, c0.va + off(rc, "LoggerId"));
    b[at..at + 2].copy_from_slice(&9u16.to_le_bytes());
    let at = file_offset(&d, c1.va + off(rc, "ProcessObject"));
    b[at..at + 8].copy_from_slice(&0xFFFF_A08D_7777_0000u64.to_le_bytes());
    let at = file_offset(
        &d,
        s6.context_va + off("_WMI_LOGGER_CONTEXT", "NumConsumers"),
    );
    b[at..at + 4].copy_from_slice(&5u32.to_le_bytes());
    let list = sessions_of(b);
    let s = list.sessions.iter().find(|s| s.logger_id == 6).unwrap();
    assert_eq!(s.consumers.len(), 2);
    assert!(s.consumers[0].warnings[0].message.contains(&format!(
        "_ETW_REALTIME_CONSUMER.LoggerId at {:#x} is 9, not the session's 6",
        c0.va
    )));
    assert_eq!(s.consumers[0].pid, Some(c0.pid));
    assert_eq!(
        s.consumers[1].eprocess.map(|e| e.get()),
        Some(0xFFFF_A08D_7777_0000)
    );
    assert_eq!(s.consumers[1].pid, None);
    assert!(
        s.consumers[1].warnings[0].message.contains("its process"),
        "{:?}",
        s.consumers[1].warnings
    );
    assert!(s.warnings.iter().any(|w| w
        .message
        .contains("NumConsumers is 5 but the Consumers list holds 2")));
    // A loop: the second consumer's Flink back to the first.
    let mut b = bytes;
    let at = file_offset(&d, c1.va + off(rc, "Links"));
    b[at..at + 8].copy_from_slice(&c0.va.to_le_bytes());
    let list = sessions_of(b);
    let s = list.sessions.iter().find(|s| s.logger_id == 6).unwrap();
    assert_eq!(s.consumers.len(), 2);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.message.contains("Consumers") && w.message.contains("cycle")),
        "{:?}",
        s.warnings
    );
}

/// Consumers on every kernel the forge writes processes for (1607, 1809 in two layouts,
/// 2004): the same reading through each build's layouts.
#[test]
fn realtime_consumers_in_every_era_with_processes() {
    for fx in ["x64-14393", "x64-17763", "x64-17763b", "x64-19041"] {
        let mut c = Config::from_fixture(&fixture(fx)).with_processes();
        let mut spec = EtwSpec::standard(c.build);
        if let Some(etwdump_forge::SlotSpec::Session(s)) = spec.slots.get_mut(&3) {
            s.consumers = vec![0x184, 0x12E4];
        }
        c.etw = Some(spec);
        let f = forge(&c);
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(
            &d,
            &SymbolOptions {
                pdb: Some(pdb_of(fx)),
                ..SymbolOptions::default()
            },
        )
        .unwrap();
        let list = list_sessions(&ctx);
        let want = &f
            .etw
            .as_ref()
            .unwrap()
            .sessions()
            .find(|s| s.logger_id == 3)
            .unwrap()
            .consumers;
        assert_eq!(want.len(), 2, "{fx}");
        let s3 = list.sessions.iter().find(|s| s.logger_id == 3).unwrap();
        let got: Vec<(u64, Option<u64>, Option<&str>)> = s3
            .consumers
            .iter()
            .map(|c| (c.address.get(), c.pid, c.process.as_ref().map(|n| n.raw())))
            .collect();
        assert_eq!(
            got,
            vec![
                (want[0].va, Some(0x184), Some("smss.exe")),
                (want[1].va, Some(0x12E4), Some("explorer.exe"))
            ],
            "{fx}"
        );
        assert!(
            list.sessions
                .iter()
                .filter(|s| s.logger_id != 3)
                .all(|s| s.consumers.is_empty()),
            "{fx}"
        );
    }
}
