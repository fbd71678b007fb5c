//! `etl FILE… --cswitch` (issue 29 item 4): the context switches of .etl files, with the
//! same merge, names and rows as `cswitch` on a dump.
//!
//! * Round trip: `extract` writes a dump's sessions (and its pending batches, and a rundown of
//!   its processes and threads) as .etl files; `etl --cswitch` on those files gives the rows
//!   `cswitch` gives on the dump, field by field — on the shipped sample and on the forge's
//!   duplicate-switch dumps of several kernels (x64 and x86). The one difference allowed is the
//!   one a file cannot hold: a pending block's last switch, whose new thread the dump reader
//!   takes from the CPU's current thread, has none in the file.
//! * Every row's source names its file and the record's offset in it, and that record is a
//!   0x0524 event or a 0x0525 batch with the row's raw time.
//! * A file given twice is one recorder per file: every switch is one row with two sources
//!   (`--per-record`: two rows).
//! * Filters, a cut file, a file that is not an .etl file, and the real
//!   ShutdownPerfDiagLogger.etl's process and thread names.

mod common;
use common::{etwdump, fixture, pdb_of};
use etwdump_forge::{forge, Config};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `args` with `--format json`: (records, warnings' messages, exit status success).
fn run_json(args: &[&str]) -> (Vec<Value>, Vec<String>) {
    let out = etwdump(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = j["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["message"].as_str().unwrap().to_string())
        .collect();
    (j["records"].as_array().unwrap().clone(), w)
}

/// `extract DUMP --pdb PDB -o DIR`: the .etl files written, sorted.
fn extract(dump: &Path, pdb: &Path, dir: &Path) -> Vec<String> {
    let out = etwdump(&[
        "extract",
        dump.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "extract: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "etl"))
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    files.sort();
    files
}

fn etl_cswitch(files: &[String], extra: &[&str]) -> (Vec<Value>, Vec<String>) {
    let mut args: Vec<&str> = vec!["etl"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--cswitch", "--format", "json"]);
    args.extend(extra);
    run_json(&args)
}

/// The fields a switch row of a dump and of its extracted files share.
const SHARED: &[&str] = &[
    "cpu",
    "raw_timestamp",
    "time",
    "old_tid",
    "old_process",
    "old_pid",
    "new_tid",
    "new_process",
    "new_pid",
    "old_priority",
    "new_priority",
    "old_state",
    "old_wait_reason",
    "old_wait_mode",
    "old_state_wr",
    "new_thread_wait_time",
];

/// The process fields, which a file has only when it holds Process and Thread events.
const NAMES: &[&str] = &["old_process", "old_pid", "new_process", "new_pid"];

/// Check the rows of `etl --cswitch` on `files` against `cswitch` on the dump they came from;
/// returns (rows, rows that differ only by the pending block's last new thread, whether the
/// files named processes). Files without Thread events (`extract` writes the rundown into a
/// kernel session's file only) give no process names: those rows must then have none, except
/// the idle thread's.
fn round_trip(dump: &Path, pdb: &Path, files: &[String]) -> (usize, usize, bool) {
    let (d, _) = run_json(&[
        "cswitch",
        dump.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let (e, w) = etl_cswitch(files, &[]);
    let named = !w.iter().any(|m| m.starts_with("no Thread events"));
    assert_eq!(d.len(), e.len(), "{}: rows", dump.display());
    let mut open_last = 0;
    for (i, (a, b)) in d.iter().zip(&e).enumerate() {
        if !named {
            for (tid, k) in [
                ("old_tid", "old_process"),
                ("old_tid", "old_pid"),
                ("new_tid", "new_process"),
                ("new_tid", "new_pid"),
            ] {
                let want = match (b[tid].as_u64(), k.ends_with("pid")) {
                    (Some(0), true) => serde_json::json!(0),
                    (Some(0), false) => serde_json::json!("Idle"),
                    _ => Value::Null,
                };
                assert_eq!(b[k], want, "row {i}: {b}");
            }
        }
        let differ: Vec<&str> = SHARED
            .iter()
            .copied()
            .filter(|k| named || !NAMES.contains(k))
            .filter(|k| a[*k] != b[*k])
            .collect();
        if differ.is_empty() {
            continue;
        }
        // Only a pending switch whose new thread the dump took from the CPU's current thread:
        // the file's batch leaves it open.
        assert!(
            !differ.is_empty()
                && differ
                    .iter()
                    .all(|k| ["new_tid", "new_process", "new_pid"].contains(k)),
            "{}: row {i}: {differ:?}: {a} / {b}",
            dump.display()
        );
        assert_eq!(a["source"], "pending", "{}: row {i}", dump.display());
        assert!(b["new_tid"].is_null(), "row {i}: {b}");
        open_last += 1;
    }
    // Every etl row's record is where its source says, with the row's raw time for events.
    for r in &e {
        for s in r["sources"].as_array().unwrap() {
            let bytes = std::fs::read(s["file"].as_str().unwrap()).unwrap();
            let off = s["offset"].as_u64().unwrap() as usize;
            let hook = u16::from_le_bytes([bytes[off + 6], bytes[off + 7]]);
            match s["source"].as_str().unwrap() {
                "event" => {
                    assert_eq!(hook, 0x0524);
                    let ts = u64::from_le_bytes(bytes[off + 8..off + 16].try_into().unwrap());
                    assert_eq!(ts, s["raw_timestamp"].as_u64().unwrap());
                }
                "batch" => assert_eq!(hook, 0x0525),
                other => panic!("source {other} in an .etl file"),
            }
            assert!(s["buffer"].is_null() && s["block"].is_null());
        }
    }
    (e.len(), open_last, named)
}

#[test]
fn sample_round_trip_equals_the_dump() {
    let dump = root().join("tests/data/sample-x64-etw.dmp");
    let pdb = root().join("tests/fixtures/x64-19041/ntkrnlmp.pdb");
    let dir = tempfile::tempdir().unwrap();
    let files = extract(&dump, &pdb, dir.path());
    let (rows, open_last, named) = round_trip(&dump, &pdb, &files);
    assert_eq!(rows, 1435);
    assert!(named);
    // One open pending block per CPU with pending switches (CPUs 0, 1 and 3).
    assert_eq!(open_last, 3);
    let (_, w) = etl_cswitch(&files, &[]);
    assert!(
        w.iter().any(|m| m
            == "process names from the files' own Process and Thread events: 14 threads of 4 processes named"),
        "{w:?}"
    );
    assert!(
        w.iter().any(|m| m.contains(
            "compact switches split with MaximumWaitReason 40 of build 19041 (the header's ProviderVersion)"
        )),
        "{w:?}"
    );
}

/// Per record, on a forge dump: every record `cswitch --per-record` lists on the dump is a
/// record of the extracted files with the same fields (a pending switch is a batch record in
/// the file; names only where the files hold Thread events; a pending block's last new thread
/// is the dump's alone), and every other record of the files is a copy of a pending switch:
/// `extract` writes a CPU's pending batch into each kernel session's file of its clock.
fn per_record_round_trip(dump: &Path, pdb: &Path, files: &[String]) -> (usize, usize) {
    let (d, _) = run_json(&[
        "cswitch",
        dump.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
        "--per-record",
        "--format",
        "json",
    ]);
    let (e, w) = etl_cswitch(files, &["--per-record"]);
    let named = !w.iter().any(|m| m.starts_with("no Thread events"));
    type Key = (u64, u64, u64, String);
    let key = |r: &Value| -> Key {
        let kind = match r["source"].as_str().unwrap() {
            "pending" => "batch",
            k => k,
        };
        (
            r["cpu"].as_u64().unwrap_or(u64::MAX),
            r["raw_timestamp"].as_u64().unwrap(),
            r["old_tid"].as_u64().unwrap(),
            kind.to_string(),
        )
    };
    let mut in_files: std::collections::HashMap<Key, Vec<&Value>> = Default::default();
    for r in &e {
        in_files.entry(key(r)).or_default().push(r);
    }
    let pending: std::collections::HashSet<Key> = d
        .iter()
        .filter(|r| r["source"] == "pending")
        .map(key)
        .collect();
    let mut unwritten = 0;
    for a in &d {
        let k = key(a);
        let found = in_files.get_mut(&k).and_then(|v| {
            let i = v.iter().position(|b| {
                SHARED
                    .iter()
                    .filter(|f| named || !NAMES.contains(f))
                    .all(|f| {
                        a[*f] == b[*f]
                            || (a["source"] == "pending"
                                && b["new_tid"].is_null()
                                && ["new_tid", "new_process", "new_pid"].contains(f))
                    })
            })?;
            Some(v.swap_remove(i))
        });
        // A pending block whose clock type is not known is not written (`extract` says so):
        // it is in no session's clock.
        if found.is_none() && a["source"] == "pending" && a["clock"].is_null() {
            unwritten += 1;
            continue;
        }
        assert!(found.is_some(), "{}: not in the files: {a}", dump.display());
    }
    let extra: Vec<&Value> = in_files.values().flatten().copied().collect();
    for r in &extra {
        assert!(
            pending.contains(&key(r)),
            "{}: a record of the files that is no copy of a pending switch: {r}",
            dump.display()
        );
    }
    (d.len() - unwritten, extra.len())
}

#[test]
fn forge_round_trips_on_several_kernels() {
    let mut total = 0;
    for name in [
        "x64-7601",
        "x64-17763",
        "x64-19041",
        "x64-22000",
        "x86-14393",
    ] {
        for seed in [1u64, 7] {
            let cfg = Config::from_fixture(&fixture(name))
                .with_variation(seed)
                .with_duplicate_switches();
            let f = forge(&cfg);
            let dir = tempfile::tempdir().unwrap();
            let dump = dir.path().join("d.dmp");
            std::fs::write(&dump, f.to_bytes()).unwrap();
            let out = dir.path().join("x");
            let files = extract(&dump, &pdb_of(name), &out);
            let (rows, copies) = per_record_round_trip(&dump, &pdb_of(name), &files);
            eprintln!(
                "{name} seed {seed}: {rows} switch records equal, {copies} more copies of pending switches"
            );
            total += rows;
        }
    }
    assert!(total > 5000, "{total}");
}

#[test]
fn a_file_given_twice_is_one_row_per_switch_with_two_sources() {
    let dump = root().join("tests/data/sample-x64-etw.dmp");
    let pdb = root().join("tests/fixtures/x64-19041/ntkrnlmp.pdb");
    let dir = tempfile::tempdir().unwrap();
    let files = extract(&dump, &pdb, dir.path());
    let ckcl: Vec<String> = files
        .iter()
        .filter(|f| f.contains("Circular Kernel Context Logger"))
        .cloned()
        .collect();
    let (one, _) = etl_cswitch(&ckcl, &[]);
    assert!(!one.is_empty());
    let copy = dir.path().join("copy.etl");
    std::fs::copy(&ckcl[0], &copy).unwrap();
    let two_files = vec![ckcl[0].clone(), copy.to_str().unwrap().to_string()];
    let (two, _) = etl_cswitch(&two_files, &[]);
    // Timed switches of a fine clock merge (the file's clock is QPC), except a batch's last
    // switch, whose new thread is not known: never merged.
    let open = one.iter().filter(|r| r["new_tid"].is_null()).count();
    assert_eq!(open, 3);
    assert_eq!(two.len(), one.len() + open);
    let merged: Vec<&Value> = two.iter().filter(|r| !r["new_tid"].is_null()).collect();
    let one_closed: Vec<&Value> = one.iter().filter(|r| !r["new_tid"].is_null()).collect();
    assert_eq!(merged.len(), one_closed.len());
    for (a, b) in one_closed.iter().zip(&merged) {
        let s = b["sources"].as_array().unwrap();
        assert_eq!(s.len(), 2, "{b}");
        assert_ne!(s[0]["file"], s[1]["file"]);
        assert_eq!(s[0]["offset"], s[1]["offset"]);
        assert_eq!(a["raw_timestamp"], b["raw_timestamp"]);
    }
    let (per, _) = etl_cswitch(&two_files, &["--per-record"]);
    assert_eq!(per.len(), 2 * one.len());
}

#[test]
fn filters_cpu_pid_and_errors() {
    let dump = root().join("tests/data/sample-x64-etw.dmp");
    let pdb = root().join("tests/fixtures/x64-19041/ntkrnlmp.pdb");
    let dir = tempfile::tempdir().unwrap();
    let files = extract(&dump, &pdb, dir.path());
    let (all, _) = etl_cswitch(&files, &[]);
    let (cpu1, _) = etl_cswitch(&files, &["--cpu", "1"]);
    let want: Vec<&Value> = all.iter().filter(|r| r["cpu"] == 1).collect();
    assert!(!want.is_empty());
    assert_eq!(cpu1.iter().collect::<Vec<_>>(), want);
    let (pid, _) = etl_cswitch(&files, &["--pid", "4836"]);
    let want: Vec<&Value> = all
        .iter()
        .filter(|r| r["old_pid"] == 4836 || r["new_pid"] == 4836)
        .collect();
    assert!(!want.is_empty());
    assert_eq!(pid.len(), want.len());
    // A record filter does not apply to switches: said, not ignored.
    let mut args: Vec<&str> = vec!["etl", &files[0], "--cswitch", "--hook", "0x0524"];
    let out = etwdump(&args);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--hook selects records"));
    // Not an .etl file.
    let junk = dir.path().join("junk.etl");
    std::fs::write(&junk, b"not an etl file at all, just text").unwrap();
    args = vec!["etl", junk.to_str().unwrap(), "--cswitch"];
    let out = etwdump(&args);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("junk.etl: not an ETL file"), "{err}");
}

#[test]
fn a_cut_file_gives_the_whole_buffers_before_the_cut() {
    let dump = root().join("tests/data/sample-x64-etw.dmp");
    let pdb = root().join("tests/fixtures/x64-19041/ntkrnlmp.pdb");
    let dir = tempfile::tempdir().unwrap();
    let files = extract(&dump, &pdb, dir.path());
    let ckcl = files
        .iter()
        .find(|f| f.contains("Circular Kernel Context Logger"))
        .unwrap();
    let bytes = std::fs::read(ckcl).unwrap();
    let (whole, _) = etl_cswitch(std::slice::from_ref(ckcl), &["--per-record"]);
    // Cut in the middle of the third buffer (the buffers are BufferSize apart).
    let size = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    assert!(bytes.len() >= 3 * size);
    let cut_at = 2 * size + size / 2;
    let cut = dir.path().join("cut.etl");
    std::fs::write(&cut, &bytes[..cut_at]).unwrap();
    let cut_name = cut.to_str().unwrap().to_string();
    let (rows, w) = etl_cswitch(std::slice::from_ref(&cut_name), &["--per-record"]);
    let want = whole
        .iter()
        .filter(|r| r["sources"][0]["offset"].as_u64().unwrap() < 2 * size as u64)
        .count();
    assert_eq!(rows.len(), want);
    assert!(
        w.iter().any(|m| m.starts_with(&format!(
            "{cut_name}: buffers stop: the buffer at file offset {:#x} has BufferSize",
            2 * size
        ))),
        "{w:?}"
    );
}

#[test]
fn real_file_names_threads_from_its_own_events() {
    let p = root().join("../shared/data/etl/ShutdownPerfDiagLogger.etl");
    if !p.is_file() {
        eprintln!("SKIPPED: {} is not present", p.display());
        return;
    }
    let name = p.to_str().unwrap().to_string();
    let (rows, w) = etl_cswitch(std::slice::from_ref(&name), &[]);
    assert!(rows.is_empty(), "the file holds no context switches");
    // The tables, counted independently from `etl --events`: the distinct thread ids of its
    // Thread events whose process has a Process event, and the distinct process ids.
    let (events, _) = run_json(&["etl", &name, "--events", "--format", "json"]);
    let mut threads = std::collections::HashMap::new();
    let mut procs = std::collections::HashMap::new();
    for e in &events {
        let hook = e["hook"].as_str().unwrap_or("");
        let f = &e["payload"]["fields"];
        let ty = u16::from_str_radix(hook.trim_start_matches("0x"), 16).unwrap_or(0);
        if !(1..=4).contains(&(ty & 0xFF)) {
            continue;
        }
        match ty >> 8 {
            0x03 => {
                procs
                    .entry(f["ProcessId"].as_u64().unwrap())
                    .or_insert_with(std::collections::HashSet::new)
                    .insert(f["ImageFileName"].as_str().unwrap().to_string());
            }
            0x05 => {
                threads
                    .entry(f["TThreadId"].as_u64().unwrap())
                    .or_insert_with(std::collections::HashSet::new)
                    .insert(f["ProcessId"].as_u64().unwrap());
            }
            _ => {}
        }
    }
    let named = threads
        .values()
        .filter(|pids| pids.len() == 1)
        .filter(|pids| {
            procs
                .get(pids.iter().next().unwrap())
                .is_some_and(|n| n.len() == 1)
        })
        .count();
    assert_eq!(named, 1532);
    assert_eq!(procs.len(), 97);
    let line = format!(
        "process names from the files' own Process and Thread events: {named} threads of {} processes named",
        procs.len()
    );
    assert!(w.contains(&line), "{w:?}");
}
