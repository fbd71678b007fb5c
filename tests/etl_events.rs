//! `etwdump etl FILE... --events` (issue 29 item 4): the records of .etl files as `events`
//! rows, dated with each file's own TRACE_LOGFILE_HEADER. On the real files of
//! ../shared/data/etl (written by Windows 10; skipped when absent) and on the files `extract`
//! writes from the shipped sample, compared with what `events` lists from memory.

mod common;
use common::{etwdump, listing_json};
use etwdump::etl::logfile;
use etwdump::etw::clock::Converter;
use etwdump::report::events::{etl_converter, stream_etl, EventRow};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn shared_etl(name: &str) -> Option<(PathBuf, Vec<u8>)> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/etl")
        .join(name);
    match std::fs::read(&p) {
        Ok(b) => Some((p, b)),
        Err(_) => {
            eprintln!("SKIPPED: {} is not present", p.display());
            None
        }
    }
}

/// Every row of `bytes` as an .etl file, and the warnings.
fn rows_of(bytes: &[u8]) -> std::io::Result<(Vec<EventRow>, Vec<String>)> {
    let mut rows = Vec::new();
    let w = stream_etl("f.etl", &mut &bytes[..], bytes.len() as u64, &mut |r| {
        rows.push(r);
        Ok(())
    })?;
    Ok((rows, w.into_iter().map(|w| w.message).collect()))
}

/// The real files: as many rows as the `etl` walk has records, in the walk's buffers; every
/// time converted (QPC clocks, the header's PerfFreq) and between the header's StartTime and
/// EndTime; the classic kernel events (tests/mof_real.rs) and the TraceLogging events decoded
/// with no problem.
#[test]
fn real_files_list_every_record_with_its_time() {
    // (file, records, decoded payloads, clock type, PerfFreq)
    for (name, records, decoded) in [
        // Every record but the log file header (0x0000) and the partition record (0x0050).
        ("ShutdownPerfDiagLogger.etl", 17_078usize, 17_076usize),
        ("AMSITrace.etl", 21, 19),
        ("lxcore_kernel.etl", 4, 2),
    ] {
        let Some((_, b)) = shared_etl(name) else {
            continue;
        };
        let walk = etwdump::etl::reader::read(&b);
        let walked: usize = walk.buffers.iter().map(|x| x.records).sum();
        let (rows, warnings) = rows_of(&b).unwrap();
        assert!(warnings.is_empty(), "{name}: {warnings:?}");
        assert_eq!(rows.len(), walked, "{name}");
        assert_eq!(rows.len(), records, "{name}");
        // Per buffer: the walk's count, at the buffer's file offset.
        let mut per_buffer: BTreeMap<String, usize> = BTreeMap::new();
        for r in &rows {
            assert_eq!(r.source, "etl_file");
            let base = u64::from_str_radix(&r.buffer.as_ref().unwrap()[2..], 16).unwrap();
            assert_eq!(r.file_offset, Some(base + r.offset as u64), "{name}");
            *per_buffer.entry(r.buffer.clone().unwrap()).or_default() += 1;
        }
        for x in &walk.buffers {
            let key = format!("{:#x}", x.offset);
            assert_eq!(
                per_buffer.get(&key).copied().unwrap_or(0),
                x.records,
                "{name} {key}"
            );
        }
        let h = logfile::parse(&b).unwrap();
        assert_eq!(
            (h.clock_type, h.perf_freq, h.pointer_size),
            (1, 10_000_000, 8),
            "{name}"
        );
        assert!(
            matches!(etl_converter(&h), Converter::Scaled { .. }),
            "{name}"
        );
        for r in &rows {
            let ft = r
                .filetime
                .unwrap_or_else(|| panic!("{name}: {r:?} has no time"));
            assert!(
                (h.start_time..=h.end_time).contains(&ft),
                "{name}: {} outside {}..{}",
                r.time.as_deref().unwrap(),
                etwdump::time::filetime_to_iso8601(h.start_time),
                etwdump::time::filetime_to_iso8601(h.end_time)
            );
            assert!(r.time.as_deref().unwrap().ends_with('Z'));
        }
        // The header event itself is dated StartTime exactly.
        assert_eq!(rows[0].hook.as_deref(), Some("0x0000"));
        assert_eq!(rows[0].filetime, Some(h.start_time), "{name}");
        // Every record has a payload: decoded, or raw with why (never null for a whole record).
        assert!(rows.iter().all(|r| r.payload.is_some()), "{name}");
        let with_payload: Vec<_> = rows
            .iter()
            .filter_map(|r| r.payload.as_ref())
            .filter(|p| p.class != "raw")
            .collect();
        assert_eq!(with_payload.len(), decoded, "{name}");
        assert!(
            with_payload.iter().all(|p| p.problem.is_none()),
            "{name}: a payload with a problem"
        );
        // The others are raw: the last `size` bytes of the record in the file, as hex.
        let mut raw = 0;
        for r in &rows {
            let p = r.payload.as_ref().unwrap();
            if p.class != "raw" {
                continue;
            }
            raw += 1;
            let n = p.number("size").unwrap() as usize;
            let end = r.file_offset.unwrap() as usize + r.size;
            let want: String = b[end - n..end].iter().map(|x| format!("{x:02x}")).collect();
            assert_eq!(p.get("hex").unwrap().to_string(), want, "{name} {r:?}");
            assert!(p.problem.as_deref().unwrap().starts_with("not decoded: "));
        }
        assert_eq!(raw, records - decoded, "{name}");
        eprintln!(
            "{name}: {} rows, {} decoded, {} .. {}",
            rows.len(),
            decoded,
            rows.iter().filter_map(|r| r.time.clone()).min().unwrap(),
            rows.iter().filter_map(|r| r.time.clone()).max().unwrap()
        );
    }
}

fn json_rows(args: &[&str]) -> (Vec<Value>, Vec<String>) {
    listing_json(args)
}

/// The `events` filters apply to a file's rows: `--hook 0x0303` keeps the 94 process rundown
/// records of ShutdownPerfDiagLogger.etl; `--pid 4` the rows of pid 4 only; several files in one
/// listing; CSV and JSON Lines as for `events`.
#[test]
fn filters_and_formats_apply_to_file_rows() {
    let Some((p, _)) = shared_etl("ShutdownPerfDiagLogger.etl") else {
        return;
    };
    let f = p.to_str().unwrap();
    let (rows, _) = json_rows(&["etl", f, "--events", "--hook", "0x0303", "--format", "json"]);
    assert_eq!(rows.len(), 94);
    assert!(rows.iter().all(|r| r["hook"] == "0x0303"
        && r["payload"]["class"] == "Process_V4_TypeGroup1"
        && r["payload"]["problem"].is_null()));
    let (all, _) = json_rows(&["etl", f, "--events", "--format", "json"]);
    let (pid4, w) = json_rows(&["etl", f, "--events", "--pid", "4", "--format", "json"]);
    let expect = all.iter().filter(|r| r["pid"] == 4).count();
    assert!(expect > 0);
    assert_eq!(pid4.len(), expect);
    let no_pid = all.iter().filter(|r| r["pid"].is_null()).count();
    assert!(
        w.iter()
            .any(|w| w.starts_with(&format!("{no_pid} records left out by --pid"))),
        "{w:?}"
    );
    if let Some((q, _)) = shared_etl("lxcore_kernel.etl") {
        let (two, _) = json_rows(&[
            "etl",
            f,
            q.to_str().unwrap(),
            "--events",
            "--format",
            "json",
        ]);
        assert_eq!(two.len(), all.len() + 4);
    }
    let j: Value =
        serde_json::from_slice(&etwdump(&["etl", f, "--events", "--format", "json"]).stdout)
            .unwrap();
    assert_eq!(j["command"], "etl");
    let csv = etwdump(&["etl", f, "--events", "--hook", "0x0303", "--format", "csv"]);
    assert_eq!(String::from_utf8(csv.stdout).unwrap().lines().count(), 95);
    let jsonl = etwdump(&["etl", f, "--events", "--format", "jsonl"]);
    let lines = String::from_utf8(jsonl.stdout).unwrap();
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert!(first["datetime"]
        .as_str()
        .unwrap()
        .starts_with("2020-02-28T09:03:47"));
    assert_eq!(lines.lines().count(), all.len());
}

/// Without `--events` the command is the buffer walk, as before; the filters and the row-only
/// formats need `--events`, and so do several files.
#[test]
fn without_events_the_buffer_listing_is_unchanged() {
    let Some((p, _)) = shared_etl("lxcore_kernel.etl") else {
        return;
    };
    let f = p.to_str().unwrap();
    let r = etwdump(&["etl", f, "--format", "json"]);
    let j: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(j["buffers"].as_array().unwrap().len(), 3);
    for bad in [
        vec!["etl", f, f],
        vec!["etl", f, "--pid", "4"],
        vec!["etl", f, "--format", "csv"],
    ] {
        let r = etwdump(&bad);
        assert!(!r.status.success(), "{bad:?}");
    }
}

/// Headers that do not allow a conversion give no time and say why; files that are not .etl
/// files, cut short or with a BufferSize past the end are refused or stop with a warning,
/// never a panic.
#[test]
fn unconvertible_and_hostile_files() {
    use etwdump::dump::Arch;
    use etwdump::etl::writer::{header_buffer, LogfileHeader};
    let base = LogfileHeader {
        arch: Arch::X64,
        buffer_size: 0x1000,
        os_version: (10, 0),
        build: 19041,
        processors: 1,
        end_time: 0,
        timer_resolution: 156_250,
        log_file_mode: 0,
        buffers_written: 1,
        events_lost: 0,
        cpu_speed_mhz: 0,
        boot_time: 0,
        perf_freq: 10_000_000,
        start_time: 0x01D6_0000_0000_0000,
        header_event_time: 1_000_000,
        header_event_pid: 4,
        header_event_tid: 8,
        clock_type: 1,
        buffers_lost: 0,
        logger_id: 3,
        logger_name: "x",
        log_file_name: "y",
    };
    let cases: [(LogfileHeader, Option<&str>); 5] = [
        (base.clone(), None),
        (
            LogfileHeader {
                perf_freq: 0,
                ..base.clone()
            },
            Some("PerfFreq is 0"),
        ),
        (
            LogfileHeader {
                clock_type: 3,
                ..base.clone()
            },
            Some("CpuSpeedInMHz is 0"),
        ),
        (
            LogfileHeader {
                clock_type: 0,
                ..base.clone()
            },
            Some("raw clock"),
        ),
        (
            LogfileHeader {
                start_time: 0,
                ..base.clone()
            },
            Some("StartTime is 0"),
        ),
    ];
    for (h, why) in cases {
        let b = header_buffer(&h);
        let (rows, w) = rows_of(&b).unwrap();
        assert_eq!(rows.len(), 2, "{why:?}"); // the header event and the partition info
        match why {
            None => {
                assert!(w.is_empty(), "{w:?}");
                assert_eq!(rows[0].filetime, Some(h.start_time));
                assert_eq!(rows[0].logger_id, Some(3));
                assert_eq!((rows[0].pid, rows[0].tid), (Some(4), Some(8)));
            }
            Some(why) => {
                assert!(rows.iter().all(|r| r.time.is_none()));
                assert!(w.len() == 1 && w[0].contains(why), "{w:?}");
            }
        }
    }
    // The system-time clock: timestamps are FILETIMEs.
    let b = header_buffer(&LogfileHeader {
        clock_type: 2,
        header_event_time: 0x01D6_0000_0000_1000,
        ..base.clone()
    });
    let (rows, _) = rows_of(&b).unwrap();
    assert_eq!(rows[0].filetime, Some(0x01D6_0000_0000_1000));
    // A second buffer cut short, then one whose BufferSize is past the end: rows of the
    // header buffer, then a warning.
    let mut cut = b.clone();
    cut.extend_from_slice(&[0x00, 0x10]);
    let (rows, w) = rows_of(&cut).unwrap();
    assert_eq!((rows.len(), w.len()), (2, 1), "{w:?}");
    let mut big = b.clone();
    big.extend_from_slice(&u32::MAX.to_le_bytes());
    big.extend_from_slice(&[0u8; 0x100]);
    let (rows, w) = rows_of(&big).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(w[0].contains("does not fit the file"), "{w:?}");
    // Not an .etl file at all.
    for bad in [&b"hello world, not a trace"[..], &[], &b[..0x60]] {
        let e = rows_of(bad).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
    }
    // A header event too short for the clock fields: records listed, no time.
    let mut short = b.clone();
    short[0x48 + 4..0x48 + 6].copy_from_slice(&0x40u16.to_le_bytes());
    if let Ok((rows, w)) = rows_of(&short) {
        assert!(rows.iter().all(|r| r.time.is_none()), "{w:?}");
    }
}

const DUMP: &str = "tests/data/sample-x64-etw.dmp";
const PDB: &str = "tests/fixtures/x64-19041/ntkrnlmp.pdb";

/// The flushed and the in-memory parts of a session merge: every record `events` lists from
/// the sample's memory is in the file `extract` writes for its session, with the same hook,
/// provider, pid, tid, raw timestamp and UTC time (the extract writes the clock facts into
/// the file's header); the records the extract adds (header events, rundown) decode with no
/// problem.
#[test]
fn extracted_files_date_records_as_events_does() {
    let dir = std::env::temp_dir().join(format!("etwdump-etl-events-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let r = etwdump(&["extract", DUMP, "--pdb", PDB, "-o", d]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path().to_str().unwrap().to_string())
        .filter(|p| p.ends_with(".etl"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6);
    let mut args = vec!["etl"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--events", "--format", "json"]);
    let (file_rows, warnings) = json_rows(&args);
    let (mem_rows, _) = json_rows_events();
    let key = |r: &Value| {
        format!(
            "{} {} {} {} {} {} {} {}",
            r["logger_id"],
            r["hook"],
            r["provider"],
            r["pid"],
            r["tid"],
            r["raw_timestamp"],
            r["event_id"],
            r["size"]
        )
    };
    let mut in_file: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in &file_rows {
        assert_eq!(r["source"], "etl_file");
        in_file.entry(key(r)).or_default().push(r["time"].clone());
    }
    let mut dated = 0;
    for m in &mem_rows {
        let times = in_file
            .get_mut(&key(m))
            .unwrap_or_else(|| panic!("not in the files: {m}"));
        let i = times
            .iter()
            .position(|t| *t == m["time"])
            .unwrap_or_else(|| panic!("{m}: times in the file {times:?}"));
        times.remove(i);
        dated += usize::from(!m["time"].is_null());
    }
    let extra: Vec<&Value> = file_rows
        .iter()
        .filter(|r| in_file.get(&key(r)).is_some_and(|t| !t.is_empty()))
        .collect();
    assert_eq!(mem_rows.len(), 2925);
    assert_eq!(file_rows.len(), 2984);
    assert!(dated > 2800, "{dated}");
    for r in &extra {
        if !r["payload"].is_null() && r["payload"]["class"] != "raw" {
            assert!(r["payload"]["problem"].is_null(), "{r}");
        }
    }
    // WdiContextLog runs on the raw clock: its file says so, as `events` does.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("04-WdiContextLog.etl") && warnings[0].contains("raw clock"));
    eprintln!(
        "{} records in memory, all in the files ({dated} dated identically); {} added by extract",
        mem_rows.len(),
        file_rows.len() - mem_rows.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn json_rows_events() -> (Vec<Value>, Vec<String>) {
    listing_json(&["events", DUMP, "--pdb", PDB, "--format", "json"])
}
