//! The output contract's identity (docs/output-contract.md): every JSON document etwdump
//! writes starts with `format_version` (the contract's version) and `command` (the command that
//! wrote it) — the listings' envelopes, the documents of `info`, `overview`, `symbols`, `etl`
//! and `read`, and the `manifest.json` of `extract` and `scan -o`.

mod common;

use common::etwdump;
use serde_json::Value;
use std::path::PathBuf;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sample-x64-etw.dmp");

/// The document's first two keys and their values (serde_json keeps the order).
fn head(text: &str, what: &str) -> (Vec<String>, Value, Value) {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    let o = v
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object"));
    let keys: Vec<String> = o.keys().take(2).cloned().collect();
    (keys, o["format_version"].clone(), o["command"].clone())
}

fn assert_identity(text: &str, command: &str, what: &str) {
    let (keys, version, cmd) = head(text, what);
    assert_eq!(keys, ["format_version", "command"], "{what}");
    assert_eq!(version, Value::from(3), "{what}");
    assert_eq!(cmd, Value::from(command), "{what}");
}

fn stdout_of(args: &[&str]) -> String {
    let out = etwdump(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("etwdump-contract-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn every_json_document_names_its_version_and_command() {
    for c in [
        "info",
        "overview",
        "sessions",
        "buffers",
        "providers",
        "check",
        "scan",
        "cswitch",
        "events",
    ] {
        let text = stdout_of(&[c, SAMPLE, "--format", "json"]);
        assert_identity(&text, c, c);
    }
    let text = stdout_of(&["symbols", SAMPLE, "--format", "json"]);
    assert_identity(&text, "symbols", "symbols");
    // `read` of the kernel image's first bytes.
    let info: Value =
        serde_json::from_str(&stdout_of(&["info", SAMPLE, "--format", "json"])).expect("info json");
    let base = info["kernel_base"]["address"]
        .as_str()
        .expect("kernel base")
        .to_string();
    let text = stdout_of(&["read", SAMPLE, &base, "16", "--format", "json"]);
    assert_identity(&text, "read", "read");

    // extract's and scan's manifest.json, and `etl` on a file extract wrote.
    let dir = scratch("extract");
    stdout_of(&["extract", SAMPLE, "-o", dir.to_str().unwrap()]);
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert_identity(&manifest, "extract", "extract manifest.json");
    let m: Value = serde_json::from_str(&manifest).unwrap();
    let file = m["sessions"][0]["file"].as_str().expect("a session file");
    let etl = dir.join(file);
    let text = stdout_of(&["etl", etl.to_str().unwrap(), "--format", "json"]);
    assert_identity(&text, "etl", "etl");
    let text = stdout_of(&["etl", etl.to_str().unwrap(), "--events", "--format", "json"]);
    assert_identity(&text, "etl", "etl --events");
    let _ = std::fs::remove_dir_all(&dir);

    let dir = scratch("scan");
    stdout_of(&["scan", SAMPLE, "-o", dir.to_str().unwrap()]);
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert_identity(&manifest, "scan", "scan manifest.json");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Warning levels: text outputs print warnings and count the notes (`-v` prints them); the
/// JSON envelope and the JSON Lines on stderr keep both, each with its level, and the text's
/// count equals the JSON's notes.
#[test]
fn notes_are_counted_by_default_and_printed_with_v() {
    let json = stdout_of(&["cswitch", SAMPLE, "--format", "json"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    let warnings = v["warnings"].as_array().unwrap();
    let notes: Vec<&Value> = warnings.iter().filter(|w| w["level"] == "note").collect();
    let shown: Vec<&Value> = warnings
        .iter()
        .filter(|w| w["level"] == "warning")
        .collect();
    assert!(!notes.is_empty() && !shown.is_empty(), "{warnings:?}");
    for w in warnings {
        // The level follows the kind: inferred values are notes, the rest warnings.
        let note = w["kind"] == "inferred";
        assert_eq!(w["level"], if note { "note" } else { "warning" }, "{w}");
    }
    let stderr = |args: &[&str]| {
        let out = etwdump(args);
        assert!(out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let quiet = stderr(&["cswitch", SAMPLE, "--format", "csv"]);
    let lines: Vec<&str> = quiet.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("warning: ")).count(),
        shown.len(),
        "{quiet}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("note: "))
            .collect::<Vec<_>>(),
        [&format!(
            "note: {} notes on how etwdump found what it reports not shown (-v shows them)",
            notes.len()
        )
        .as_str()]
    );
    let verbose = stderr(&["cswitch", SAMPLE, "--format", "csv", "-v"]);
    let note_lines: Vec<&str> = verbose
        .lines()
        .filter(|l| l.starts_with("note: "))
        .collect();
    assert_eq!(note_lines.len(), notes.len(), "{verbose}");
    for (line, n) in note_lines.iter().zip(&notes) {
        assert_eq!(
            line.strip_prefix("note: ").unwrap(),
            n["message"].as_str().unwrap()
        );
    }
    // JSON Lines: every warning and note on stderr, one object each.
    let jsonl = stderr(&["cswitch", SAMPLE, "--format", "jsonl"]);
    let objects: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects.len(), warnings.len());
    assert_eq!(
        objects.iter().filter(|w| w["level"] == "note").count(),
        notes.len()
    );
}
