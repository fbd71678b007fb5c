//! Errors that name a next step (issue 31 item 3): each suggested command is run and does
//! what the message says. One row per error: the failing command, what its one-line error must
//! say, and the command the error suggests, which must then succeed.

mod common;
use common::etwdump;

const DUMP: &str = "tests/data/sample-x64-etw.dmp";
const PDB: &str = "tests/fixtures/x64-19041/ntkrnlmp.pdb";

/// The one error line of a failed run (exit 2), checked for the text it must contain.
fn fails_with(args: &[&str], must: &str) -> String {
    let r = etwdump(args);
    assert_eq!(r.status.code(), Some(2), "{args:?} should fail");
    let err = String::from_utf8_lossy(&r.stderr).into_owned();
    let line = err
        .lines()
        .find(|l| l.starts_with("etwdump: error:"))
        .unwrap_or_else(|| panic!("{args:?}: no error line in {err}"))
        .to_string();
    assert!(line.contains(must), "{args:?}: {line}");
    line
}

#[test]
fn extract_into_existing_output_suggests_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("out");
    let o = o.to_str().unwrap();
    let args = ["extract", DUMP, "--pdb", PDB, "-o", o];
    assert!(etwdump(&args).status.success());
    fails_with(&args, "already exists (give --overwrite to replace it)");
    // The suggestion works, and replaces the files.
    let r = etwdump(&[&args[..], &["--overwrite"]].concat());
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

#[test]
fn mismatched_symbols_suggest_force() {
    let other = "tests/fixtures/x64-17763/ntkrnlmp.pdb";
    let args = ["sessions", DUMP, "--pdb", other, "--format", "json"];
    fails_with(&args, "(use --force to use them anyway)");
    let r = etwdump(&[&args[..], &["--force"]].concat());
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let j: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert!(j["records"].is_array());
}

#[test]
fn unknown_session_lists_the_sessions_that_work() {
    let line = fails_with(
        &["events", DUMP, "--pdb", PDB, "--session", "nope"],
        "no such session (by logger id or exact name); the sessions are: 0 NT Kernel Logger, ",
    );
    // Every listed id selects its session.
    let list = line.split("the sessions are: ").nth(1).unwrap();
    let ids: Vec<&str> = list
        .split(", ")
        .map(|s| s.split(' ').next().unwrap())
        .filter(|s| *s != "?")
        .collect();
    assert!(ids.len() >= 5, "{ids:?}");
    for id in ids {
        let r = etwdump(&[
            "events",
            DUMP,
            "--pdb",
            PDB,
            "--session",
            id,
            "--format",
            "csv",
        ]);
        assert!(
            r.status.success(),
            "--session {id}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
}

/// The logger array without a route: without symbols the warning suggests --pdb, which then
/// finds it; with symbols given it does not suggest them again, it says what they lack.
#[test]
fn no_route_suggests_symbols_only_when_none_were_given() {
    let dir = tempfile::tempdir().unwrap();
    // The sample with its KDBG's OwnerTag broken: no KDBG, so no symbol-less route.
    let mut b = std::fs::read(DUMP).unwrap();
    let at = b.windows(4).position(|w| w == b"KDBG").unwrap();
    b[at..at + 4].copy_from_slice(b"XXXX");
    let d = dir.path().join("nokdbg.dmp");
    std::fs::write(&d, b).unwrap();
    let d = d.to_str().unwrap();
    let warns = |args: &[&str]| {
        let r = etwdump(args);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let j: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
        let sessions = j["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "session")
            .count();
        let w: Vec<String> = j["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["message"].as_str().unwrap().to_string())
            .collect();
        (sessions, w)
    };
    let (n, w) = warns(&["sessions", d, "--format", "json"]);
    assert_eq!(n, 0);
    assert!(
        w.iter()
            .any(|m| m.contains("no route (give symbols with --pdb")),
        "{w:?}"
    );
    // The suggestion works.
    let (n, _) = warns(&["sessions", d, "--pdb", PDB, "--format", "json"]);
    assert_eq!(n, 6);
    // Symbols that name none of the routes' globals: no suggestion to give symbols.
    let isf = dir.path().join("empty.json");
    std::fs::write(&isf, br#"{"metadata": {}, "base_types": {}, "user_types": {"_LIST_ENTRY": {"kind": "struct", "size": 16, "fields": {}}}, "enums": {}, "symbols": {}}"#).unwrap();
    let (n, w) = warns(&[
        "sessions",
        d,
        "--isf",
        isf.to_str().unwrap(),
        "--force",
        "--format",
        "json",
    ]);
    assert_eq!(n, 0);
    assert!(!w.iter().any(|m| m.contains("give symbols")), "{w:?}");
    assert!(
        w.iter()
            .any(|m| m.contains("no route (the isf names none of EtwpHostSiloState")),
        "{w:?}"
    );
}

/// A directory given as the dump says so (it said "No such device (os error 19)").
#[test]
fn a_directory_is_not_a_dump() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for cmd in ["info", "sessions", "events"] {
        fails_with(
            &[cmd, d],
            "a directory, not a dump: give the dump or memory image file itself",
        );
    }
}

/// A symbol store without the PDB: the error says the built-in layouts serve without the
/// option, and the same command without it succeeds.
#[test]
fn missing_symbols_suggest_the_builtin_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_str().unwrap();
    fails_with(
        &["sessions", DUMP, "--symbols", store],
        "in the symbol store (searched",
    );
    let line = fails_with(
        &["sessions", DUMP, "--symbols", store],
        "run without --symbols",
    );
    assert!(line.contains("built-in layouts"), "{line}");
    let r = etwdump(&["sessions", DUMP, "--format", "json"]);
    assert!(r.status.success());
    let j: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let n = j["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "session")
        .count();
    assert_eq!(n, 6);
}

/// `cswitch --cpu N` for a CPU the machine does not have is an error naming the valid range,
/// and each CPU of that range is accepted.
#[test]
fn a_cpu_the_machine_lacks_is_an_error() {
    let line = fails_with(
        &["cswitch", DUMP, "--pdb", PDB, "--cpu", "99"],
        "--cpu 99: the machine has ",
    );
    let n: u64 = line
        .split("the machine has ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(
        line.ends_with(&format!("give --cpu 0 to {}", n - 1)),
        "{line}"
    );
    for cpu in 0..n {
        let r = etwdump(&[
            "cswitch",
            DUMP,
            "--pdb",
            PDB,
            "--cpu",
            &cpu.to_string(),
            "--format",
            "csv",
        ]);
        assert!(r.status.success(), "--cpu {cpu}");
    }
    fails_with(
        &["cswitch", DUMP, "--pdb", PDB, "--cpu", &n.to_string()],
        &format!("--cpu {n}: the machine has {n} processors"),
    );
}

/// `scan -o` into an output that exists suggests --overwrite too, which then works.
#[test]
fn scan_into_existing_output_suggests_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("carved");
    let o = o.to_str().unwrap();
    let args = ["scan", DUMP, "--pdb", PDB, "-o", o, "--threads", "1"];
    assert!(etwdump(&args).status.success());
    fails_with(&args, "already exists (give --overwrite to replace it)");
    let r = etwdump(&[&args[..], &["--overwrite"]].concat());
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

/// A dump cut short before the kernel's image: with the PDB given, the warning says why the
/// symbols cannot lead to the array (the kernel base is unknown), not to give symbols.
#[test]
fn truncated_dump_does_not_ask_for_the_symbols_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.dmp");
    std::fs::write(&cut, &std::fs::read(DUMP).unwrap()[..100_000]).unwrap();
    let r = etwdump(&["sessions", cut.to_str().unwrap(), "--pdb", PDB]);
    let out = String::from_utf8_lossy(&r.stdout);
    let line = out
        .lines()
        .chain(String::from_utf8_lossy(&r.stderr).lines())
        .find(|l| l.contains("could not be located"))
        .map(str::to_string)
        .expect("the no-route warning");
    assert!(!line.contains("give symbols"), "{line}");
    assert!(
        line.contains("the kernel's base address is unknown"),
        "{line}"
    );
}
