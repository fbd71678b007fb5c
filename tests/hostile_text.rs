//! Nothing from the input reaches the terminal raw (issue 27, F1-F5, F8; F7's times): C0
//! controls, DEL, C1 controls (UTF-8 `C2 9B`) and bidi controls (U+202E) are injected into
//! each source of text — a process's `EPROCESS.ImageFileName`, the first loaded module's
//! path, the kernel's CodeView PDB name, a session's name and log file, a layout file's
//! `source`, a VMware tag name, (tests/symbol_server.rs: a `file.ptr` line) — and every
//! command's table, CSV, JSON Lines and stderr is checked for raw control characters, and for
//! the escaped form of what was injected. JSON keeps the exact text.

mod common;
use common::{etwdump, fixture, replace_all};
use etwdump::text::needs_escape;
use etwdump_forge::{forge, Config, ImageKind, SlotSpec};
use std::path::Path;

/// ESC [2J (clear screen), BEL, CR, U+009B (C1 CSI), U+202E (right-to-left override).
const PROCESS: &[u8] = b"\x1b[2J\x07\r\xc2\x9b\xe2\x80\xae"; // 11 bytes, as "svchost.exe"
const PROCESS_SHOWN: &str = "\\u{1b}[2J\\u{7}\\u{d}\\u{9b}\\u{202e}";
/// 8 bytes over "ntkrnlmp" in the kernel's RSDS record.
const PDB: &[u8] = b"\x1b]0;\x07\xc2\x9b\n";
const PDB_SHOWN: &str = "\\u{1b}]0;\\u{7}\\u{9b}\\u{a}.pdb";
/// 10 UTF-16 units over "SystemRoot" in the first module's FullDllName.
const MODULE: [u16; 10] = [0x1B, 0x5B, 0x32, 0x4A, 0x07, 0x0D, 0x0A, 0x9B, 0x202E, 0x7F];
const MODULE_SHOWN: &str =
    "\\u{1b}[2J\\u{7}\\u{d}\\u{a}\\u{9b}\\u{202e}\\u{7f}\\system32\\ntoskrnl.exe";
const SESSION: &str = "Sess\u{1b}[31m\u{7}\u{7f}\u{9b}\u{202e}\u{2066}\r\nX";
const SESSION_SHOWN: &str = "Sess\\u{1b}[31m\\u{7}\\u{7f}\\u{9b}\\u{202e}\\u{2066}\\u{d}\\u{a}X";

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

/// The raw control characters of `text` (line breaks of our own output excepted).
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c != '\n' && needs_escape(c))
        .collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The sample machine (processes, user images, consumers, providers, buffers, pending
/// switches) with hostile text in each source, written to `dir/h.dmp`.
fn hostile_dump(dir: &Path) -> std::path::PathBuf {
    let mut c = Config::sample_etw();
    if let Some(SlotSpec::Session(s)) = c.etw.as_mut().and_then(|e| e.slots.get_mut(&4)) {
        s.name = SESSION.to_string();
        s.log_file = Some(SESSION.to_string());
    }
    let f = forge(&c);
    assert!(f.processes.iter().any(|p| p.name == "svchost.exe"));
    let mut b = f.to_bytes();
    assert!(replace_all(&mut b, b"svchost.exe\0", &[PROCESS, b"\0"].concat()) >= 1);
    assert!(replace_all(&mut b, b"ntkrnlmp.pdb\0", &[PDB, b".pdb\0"].concat()) >= 1);
    let module: Vec<u8> = MODULE.iter().flat_map(|u| u.to_le_bytes()).collect();
    assert_eq!(
        replace_all(
            &mut b,
            &utf16("SystemRoot\\system32\\ntoskrnl.exe"),
            &[module, utf16("\\system32\\ntoskrnl.exe")].concat()
        ),
        1
    );
    let p = dir.join("h.dmp");
    std::fs::write(&p, b).unwrap();
    p
}

/// Every command, every terminal format: no raw control character on stdout or stderr; the
/// escaped forms are where they belong (F1: cswitch's process names; F2: info's first
/// module; F5: info's PDB name).
#[test]
fn every_command_escapes_every_source() {
    let dir = tempfile::tempdir().unwrap();
    let dump = hostile_dump(dir.path());
    let d = dump.to_str().unwrap();
    let pdb = fixture("x64-19041").join("ntkrnlmp.pdb");
    let pdb = pdb.to_str().unwrap();
    let out_dir = dir.path().join("out");
    let o = out_dir.to_str().unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["overview", d, "--pdb", pdb],
        vec!["info", d, "--pdb", pdb],
        vec!["info", d],
        vec!["sessions", d, "--pdb", pdb],
        vec!["sessions", d, "--pdb", pdb, "--format", "csv"],
        vec!["buffers", d, "--pdb", pdb],
        vec!["buffers", d, "--pdb", pdb, "--format", "csv"],
        vec!["buffers", d, "--pdb", pdb, "--format", "jsonl"],
        vec!["providers", d, "--pdb", pdb, "--all"],
        vec!["providers", d, "--pdb", pdb, "--all", "--format", "csv"],
        vec!["providers", d, "--pdb", pdb, "--all", "--format", "jsonl"],
        vec!["check", d, "--pdb", pdb],
        vec!["check", d, "--pdb", pdb, "--format", "csv"],
        vec!["cswitch", d, "--pdb", pdb],
        vec!["cswitch", d, "--pdb", pdb, "--format", "csv"],
        vec!["cswitch", d, "--pdb", pdb, "--format", "jsonl"],
        vec!["events", d, "--pdb", pdb],
        vec!["events", d, "--pdb", pdb, "--format", "csv"],
        vec!["events", d, "--pdb", pdb, "--format", "jsonl"],
        vec!["scan", d, "--pdb", pdb, "--threads", "1"],
        vec!["extract", d, "--pdb", pdb, "-o", o],
        vec!["sessions", d, "--pdb", pdb, "--session", "nope"],
        // F5: the PDB name at the start of a symbol error.
        vec!["sessions", d, "--symbols", o],
    ];
    let mut shown = String::new();
    let mut bad = Vec::new();
    for args in &runs {
        let r = etwdump(args);
        let (out, err) = (text(&r.stdout), text(&r.stderr));
        for (what, t) in [("stdout", &out), ("stderr", &err)] {
            if !raw_controls(t).is_empty() {
                bad.push(format!("{} {what}: {:?}", args[0], raw_controls(t)));
            }
        }
        shown.push_str(&out);
        shown.push_str(&err);
        let all = format!("{out}{err}");
        let mut want = |ok: bool, what: &str| {
            if !ok {
                bad.push(format!("{args:?}: {what} not shown escaped"));
            }
        };
        match (args[0], args.get(2).copied().unwrap_or("")) {
            ("cswitch", "--pdb") if args.len() == 4 => want(
                all.contains(&format!("{PROCESS_SHOWN} (")),
                "F1 process name",
            ),
            ("info", _) => {
                want(all.contains(MODULE_SHOWN), "F2 first module");
                want(all.contains(PDB_SHOWN), "F5 PDB name");
            }
            ("sessions", "--pdb") if args.len() == 4 => {
                want(all.contains(SESSION_SHOWN), "session name")
            }
            ("sessions", "--symbols") => {
                want(all.contains(PDB_SHOWN), "F5 PDB name (symbol error)")
            }
            _ => {}
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // Each source came out somewhere (escaped).
    for s in [PROCESS_SHOWN, PDB_SHOWN, MODULE_SHOWN, SESSION_SHOWN] {
        assert!(shown.contains(s), "{s} never shown");
    }
    // JSON keeps the exact text.
    let j: serde_json::Value =
        serde_json::from_slice(&etwdump(&["info", d, "--format", "json"]).stdout).unwrap();
    let module: String = String::from_utf16(&MODULE).unwrap() + "\\system32\\ntoskrnl.exe";
    assert_eq!(j["loaded_modules"]["first"], format!("\\{module}"));
    assert_eq!(
        j["kernel_pdb"]["name"],
        String::from_utf8(PDB.to_vec()).unwrap() + ".pdb"
    );
    let j: serde_json::Value =
        serde_json::from_slice(&etwdump(&["cswitch", d, "--pdb", pdb, "--format", "json"]).stdout)
            .unwrap();
    let name = String::from_utf8(PROCESS.to_vec()).unwrap();
    assert!(j["records"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["old_process"]
            .as_str()
            .is_some_and(|p| p.starts_with(&format!("{name} (")))));
}

/// F8: a `--layout` file's `source` is shown escaped (info's DTB and image format rows),
/// kept exactly in JSON.
#[test]
fn layout_source_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge(&Config::x64());
    let files = f
        .write_image(&dir.path().join("m"), ImageKind::Raw)
        .unwrap();
    let raw = files[0].to_str().unwrap();
    let len = std::fs::metadata(raw).unwrap().len();
    let source = "vol\u{1b}]2;pwned\u{7}\r\n\u{9b}31m\u{202e}\u{0}";
    let layout = dir.path().join("l.json");
    std::fs::write(
        &layout,
        serde_json::json!({
            "etwdump_layout": 1,
            "source": source,
            "ranges": [{"start": 0, "size": len, "file_offset": 0}],
            "arch": "x64",
            "dtb": f.dtb,
        })
        .to_string(),
    )
    .unwrap();
    let l = layout.to_str().unwrap();
    let r = etwdump(&["info", raw, "--layout", l]);
    let (out, err) = (text(&r.stdout), text(&r.stderr));
    assert!(r.status.success(), "{err}");
    assert!(raw_controls(&out).is_empty(), "{:?}", raw_controls(&out));
    assert!(raw_controls(&err).is_empty(), "{:?}", raw_controls(&err));
    let shown = "vol\\u{1b}]2;pwned\\u{7}\\u{d}\\u{a}\\u{9b}31m\\u{202e}\\u{0}";
    let dtb_row = out.lines().find(|l| l.starts_with("DTB")).unwrap();
    assert!(dtb_row.contains(shown), "{dtb_row}");
    let fmt_row = out.lines().find(|l| l.starts_with("Image format")).unwrap();
    assert!(fmt_row.contains(shown), "{fmt_row}");
    let j: serde_json::Value =
        serde_json::from_slice(&etwdump(&["info", raw, "--layout", l, "--format", "json"]).stdout)
            .unwrap();
    assert_eq!(j["memory"]["metadata_file"], source);
}

/// F3: a corrupt VMware tag name (255 bytes with NUL, CR/LF, ESC, C1) in the error: one
/// line, escaped, the name cut to 64 characters.
#[test]
fn vmware_tag_names_in_errors_are_escaped() {
    let mut b = vec![0u8; 12];
    b[..4].copy_from_slice(&[0xD2, 0xBE, 0xD2, 0xBE]);
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    let mut group = [0u8; 80];
    group[..6].copy_from_slice(b"memory");
    group[64..72].copy_from_slice(&92u64.to_le_bytes());
    b.extend_from_slice(&group);
    assert_eq!(b.len(), 92);
    // One tag: long data (flags 62), a 255-byte name, a data size past the file end.
    let mut name = b"\0\r\n\x1b[2J\x07\xc2\x9b".to_vec();
    name.resize(255, b'A');
    b.push(62);
    b.push(255);
    b.extend_from_slice(&name);
    b.extend_from_slice(&u64::MAX.to_le_bytes());
    b.extend_from_slice(&[0u8; 32]);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.vmsn");
    std::fs::write(&p, &b).unwrap();
    let r = etwdump(&["info", p.to_str().unwrap()]);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(raw_controls(&err).is_empty(), "{:?}", raw_controls(&err));
    // 9 characters of controls and 55 of the As: 64.
    let shown = format!(
        "tag \\u{{0}}\\u{{d}}\\u{{a}}\\u{{1b}}[2J\\u{{7}}\\u{{9b}}{}:",
        "A".repeat(55)
    );
    assert!(err.contains(&shown), "{err}");
}

/// F7: a SystemTime of 2^63 is not a date (year 45173): shown as its raw value, flagged,
/// warned about; times before the kernel's build existed or after the file was written are
/// flagged too.
#[test]
fn impossible_dump_times_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read(common_sample()).unwrap();
    for (ft, flag, shown) in [
        (
            1u64 << 63,
            "not_a_filetime",
            "not a valid FILETIME (raw 0x8000000000000000)".to_string(),
        ),
        // 2010-01-01 for a 19041 kernel (first built in 2019).
        (
            129_067_776_000_000_000,
            "before_build",
            "2010-01-01T00:00:00.0000000Z (before_build: raw 0x1ca8a755c6e0000)".to_string(),
        ),
        // 2100-01-01: after the file was written.
        (
            157_469_184_000_000_000,
            "after_file_written",
            "2100-01-01T00:00:00.0000000Z (after_file_written: raw 0x22f716377640000)".to_string(),
        ),
    ] {
        let mut b = sample.clone();
        b[0xFA8..0xFB0].copy_from_slice(&ft.to_le_bytes());
        let p = dir.path().join(format!("{flag}.dmp"));
        std::fs::write(&p, &b).unwrap();
        let r = etwdump(&["info", p.to_str().unwrap()]);
        let out = text(&r.stdout);
        let row = out.lines().find(|l| l.starts_with("System time")).unwrap();
        assert_eq!(row, format!("System time (UTC)         {shown}"), "{flag}");
        assert!(
            out.contains("Warning                   the dump's SystemTime cannot be right: "),
            "{flag}: {out}"
        );
        let j: serde_json::Value = serde_json::from_slice(
            &etwdump(&["info", p.to_str().unwrap(), "--format", "json"]).stdout,
        )
        .unwrap();
        assert_eq!(j["system_time_flag"], flag);
        assert_eq!(j["system_time_raw"], ft);
        let w = j["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["field"] == "SystemTime")
            .unwrap();
        assert_eq!(w["kind"], "time");
    }
    // The sample itself: 2021-02-21 on build 19041, a plausible time, no flag.
    let j: serde_json::Value = serde_json::from_slice(
        &etwdump(&[
            "info",
            common_sample().to_str().unwrap(),
            "--format",
            "json",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(j["system_time_flag"], serde_json::Value::Null);
    assert_eq!(j["system_time"], "2021-02-21T01:38:22.9877657Z");
}

fn common_sample() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sample-x64.dmp")
}

/// Type, field and symbol names of a symbol file are input too: `symbols` shows them escaped
/// in its table (the type text of a field and the global symbol list included) and exactly in
/// JSON.
#[test]
fn symbol_file_names_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    // JSON escapes for ESC, BEL, CR, U+009B, U+202E.
    let bad = r"\u001b[2J\u0007\r\u009b\u202e";
    let isf = format!(
        r#"{{"metadata": {{}},
            "base_types": {{"unsigned long{bad}": {{"kind": "int", "size": 4, "signed": false, "endian": "little"}}}},
            "user_types": {{
              "_LIST_ENTRY": {{"kind": "struct", "size": 16, "fields": {{
                "Flink{bad}": {{"offset": 0, "type": {{"kind": "pointer", "subtype": {{"kind": "struct", "name": "_X{bad}"}}}}}},
                "Count": {{"offset": 8, "type": {{"kind": "base", "name": "unsigned long{bad}"}}}}}}}},
              "_X{bad}": {{"kind": "struct", "size": 8, "fields": {{}}}}}},
            "enums": {{}},
            "symbols": {{"Sym{bad}": {{"address": 4096}}}}}}"#
    );
    let p = dir.path().join("hostile.json");
    std::fs::write(&p, isf).unwrap();
    let p = p.to_str().unwrap();
    let shown = "\\u{1b}[2J\\u{7}\\u{d}\\u{9b}\\u{202e}";
    let args = [
        "symbols",
        "--isf",
        p,
        "--types",
        "_LIST_ENTRY",
        "--all-symbols",
    ];
    let r = etwdump(&args);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let out = text(&r.stdout);
    assert_eq!(raw_controls(&out), Vec::<char>::new(), "{out}");
    assert!(out.contains(&format!("Flink{shown}")), "{out}");
    assert!(out.contains(&format!("struct _X{shown}*")), "{out}");
    assert!(out.contains(&format!("unsigned long{shown}")), "{out}");
    assert!(out.contains(&format!("0x1000 Sym{shown}")), "{out}");
    // JSON: the exact names.
    let r = etwdump(&[&args[..], &["--format", "json"]].concat());
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert_eq!(raw_controls(&text(&r.stdout)), Vec::<char>::new());
    let j: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let exact = "\u{1b}[2J\u{7}\r\u{9b}\u{202e}";
    let fields = &j["types"]["_LIST_ENTRY"]["fields"];
    assert_eq!(
        fields[format!("Flink{exact}")]["type"]["target"]["name"],
        format!("_X{exact}")
    );
    assert_eq!(
        fields["Count"]["type"]["name"],
        format!("unsigned long{exact}")
    );
    assert_eq!(j["symbols"][format!("Sym{exact}")], "0x1000");
}
