//! `etwdump collect` (issue 31 item 6): every artefact in one run, each the same bytes its own
//! command writes for the same dump; collect.json lists every file with its true size, rows
//! and SHA-256; index.html links them all and shows the input's text escaped only; nothing is
//! written outside DIR; a DIR that is not empty is refused; one artefact failing leaves the
//! others written, and the run exits 1.

mod common;
use common::collect::{
    artefact, collect, hostile_dump, json, links, listed, pdb, resolve, root, tree, ARTEFACTS,
    HOSTILE_LOG, HOSTILE_SESSION, SAMPLE,
};
use common::etwdump;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

fn sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// On the sample: every artefact is the same bytes its command writes (the listings, the
/// documents, the SVG, the extraction's and the scan's directories file for file);
/// collect.json lists every file in DIR with its size, rows and SHA-256 and nothing else is
/// there; the summary's figures; warnings.jsonl holds each command's warnings; index.html
/// links every file and only files in DIR; a second run gives the same bytes.
#[test]
fn every_artefact_is_what_its_command_writes() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("case");
    let dump = root().join(SAMPLE);
    let (code, out, err) = collect(&dump, &dir, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with(&format!("{}\n", dir.join("index.html").display())),
        "{out}"
    );
    let files = tree(&dir);
    assert_eq!(
        out.lines().next().unwrap(),
        format!(
            "info      info.json ({} bytes), info.txt ({} bytes)",
            files["info.json"].len(),
            files["info.txt"].len()
        )
    );
    let d = dump.to_str().unwrap();
    let p = pdb();
    // The files each command writes on its own (stdout, --svg, -o DIR).
    let ind = t.path().join("ind");
    std::fs::create_dir(&ind).unwrap();
    let (svg, etl, scan) = (ind.join("cswitch.svg"), ind.join("etl"), ind.join("scan"));
    let svg_s = svg.to_str().unwrap().to_string();
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("info.json", vec!["info", d, "--format", "json"]),
        ("info.txt", vec!["info", d]),
        ("overview.txt", vec!["overview", d]),
        ("sessions.json", vec!["sessions", d, "--format", "json"]),
        ("sessions.csv", vec!["sessions", d, "--format", "csv"]),
        ("buffers.jsonl", vec!["buffers", d, "--format", "jsonl"]),
        (
            "providers.json",
            vec!["providers", d, "--all", "--format", "json"],
        ),
        ("check.json", vec!["check", d, "--format", "json"]),
        ("cswitch.jsonl", vec!["cswitch", d, "--format", "jsonl"]),
        (
            "cswitch.csv",
            vec!["cswitch", d, "--format", "csv", "--svg", &svg_s],
        ),
        ("events.jsonl", vec!["events", d, "--format", "jsonl"]),
        (
            "scan.json",
            vec!["scan", d, "--format", "json", "--threads", "1"],
        ),
    ];
    let mut command_warnings: Vec<(&str, Value)> = Vec::new();
    for (file, mut args) in runs {
        args.extend(["--pdb", &p]);
        let r = etwdump(&args);
        assert!(r.status.success(), "{args:?}");
        assert!(
            files[file] == r.stdout,
            "{file} differs from `etwdump {}`",
            args.join(" ")
        );
        // The warnings each command gives (JSON envelope, or JSON lines on stderr).
        let name = file.split('.').next().unwrap();
        if file.ends_with(".json") {
            if let Some(w) = json(&r.stdout)["warnings"].as_array() {
                command_warnings.extend(w.iter().map(|w| (name, w.clone())));
            }
        } else if file.ends_with(".jsonl") {
            for l in String::from_utf8_lossy(&r.stderr).lines() {
                command_warnings.push((name, serde_json::from_str(l).unwrap()));
            }
        }
    }
    assert_eq!(files["cswitch.svg"], std::fs::read(&svg).unwrap());
    for (sub, args) in [
        ("etl", vec!["extract", d, "-o", etl.to_str().unwrap()]),
        ("scan", vec!["scan", d, "-o", scan.to_str().unwrap()]),
    ] {
        let mut args = args;
        args.extend(["--pdb", &p]);
        assert!(etwdump(&args).status.success());
        let theirs = tree(&ind.join(sub));
        let ours: BTreeMap<String, Vec<u8>> = files
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&format!("{sub}/"))?.to_string(), v.clone())))
            .collect();
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>(),
            "{sub}/"
        );
        assert!(ours == theirs, "{sub}/ differs from `etwdump {}`", args[0]);
    }

    // collect.json: every file in DIR but itself, with its true size and hash.
    let c = json(&files["collect.json"]);
    assert_eq!(c["format_version"], 3);
    assert_eq!(c["command"], "collect");
    assert_eq!(c["dump"], d);
    let names: Vec<&str> = c["artefacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ARTEFACTS);
    assert!(c["artefacts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["status"] == "ok" && a["error"].is_null()));
    let list = listed(&c);
    let on_disk: Vec<&String> = files.keys().filter(|k| *k != "collect.json").collect();
    assert_eq!(list.keys().collect::<Vec<_>>(), on_disk);
    for (path, (bytes, _, hash)) in &list {
        assert_eq!(*bytes, files[path].len() as u64, "{path}");
        assert_eq!(*hash, sha256(&files[path]), "{path}");
    }
    // Rows: what each file holds.
    let rows = |p: &str| list[p].1;
    let lines = |p: &str| String::from_utf8_lossy(&files[p]).lines().count() as u64;
    let records = |p: &str| json(&files[p])["records"].as_array().unwrap().len() as u64;
    assert_eq!(
        (rows("sessions.json"), records("sessions.json")),
        (Some(9), 9)
    );
    assert_eq!((rows("sessions.csv"), lines("sessions.csv")), (Some(9), 10));
    assert_eq!(
        (rows("buffers.jsonl"), lines("buffers.jsonl")),
        (Some(20), 20)
    );
    assert_eq!(
        (rows("providers.json"), records("providers.json")),
        (Some(19), 19)
    );
    assert_eq!((rows("check.json"), records("check.json")), (Some(0), 0));
    assert_eq!(
        (rows("cswitch.jsonl"), lines("cswitch.jsonl")),
        (Some(1435), 1435)
    );
    assert_eq!(
        (rows("cswitch.csv"), lines("cswitch.csv")),
        (Some(1435), 1436)
    );
    assert_eq!(
        String::from_utf8_lossy(&files["cswitch.svg"])
            .matches("<title>")
            .count() as u64,
        rows("cswitch.svg").unwrap(),
        "one title per span drawn"
    );
    assert_eq!(
        (rows("events.jsonl"), lines("events.jsonl")),
        (Some(2849), 2849)
    );
    assert_eq!((rows("scan.json"), records("scan.json")), (Some(28), 28));
    assert_eq!(rows("cswitch.svg"), Some(1435));
    assert_eq!(rows("info.json"), None);
    let manifest = json(&files["etl/manifest.json"]);
    let etl_rows: Vec<(String, u64)> = manifest["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let f = format!("etl/{}", s["file"].as_str().unwrap());
            assert_eq!(rows(&f), s["records"].as_u64());
            (f, s["records"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        etl_rows.iter().map(|(_, r)| *r).collect::<Vec<_>>(),
        [1497, 633, 192, 75, 546, 29]
    );
    assert_eq!(etl_rows[0].0, "etl/00-NT Kernel Logger.etl");
    assert_eq!(list["etl/00-NT Kernel Logger.etl"].0, 131072);

    // The summary.
    let s = &c["summary"];
    for (k, v) in [
        ("sessions", 6),
        ("buffers", 20),
        ("etl_files", 6),
        ("etl_records", 2972),
        ("switches", 1435),
        ("events", 2925),
        ("providers", 19),
        ("findings", 0),
        ("scan_objects", 28),
        ("carved_files", 0),
        ("artefacts", 11),
        ("failed", 0),
        ("warnings", 15),
        ("notes", 3),
    ] {
        assert_eq!(s[k], v, "summary.{k}");
    }
    assert_eq!(s["dump"]["build"], 19041);
    assert_eq!(s["dump"]["symbols"], "pdb, matched by GUID and age");
    assert_eq!(s["symbols_path"], p);

    // warnings.jsonl: collect.json's warnings, one per line, and each warning every command
    // gave, under that command's artefact.
    let wl: Vec<Value> = String::from_utf8_lossy(&files["warnings.jsonl"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&wl, c["warnings"].as_array().unwrap());
    assert_eq!(wl.len(), 18);
    for (cmd, w) in &command_warnings {
        let found = wl.iter().any(|x| {
            x["message"] == w["message"]
                && x["kind"] == w["kind"]
                && x["artefacts"].as_array().unwrap().iter().any(|a| a == cmd)
        });
        assert!(found, "{cmd}: {w} not in warnings.jsonl");
    }
    assert!(command_warnings.len() >= 20, "{}", command_warnings.len());

    // index.html: every link names a file of DIR; every file (but collect.json's own list) is
    // linked from it; the summary's figures are the same.
    let page = String::from_utf8(files["index.html"].clone()).unwrap();
    let mut linked = std::collections::BTreeSet::new();
    for l in links(&page) {
        let p = resolve(&dir, &l).unwrap_or_else(|| panic!("link {l} leaves DIR"));
        assert!(p.is_file(), "link {l}: {} does not exist", p.display());
        linked.insert(
            p.strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/"),
        );
    }
    let want: std::collections::BTreeSet<String> = files
        .keys()
        .filter(|k| *k != "index.html")
        .cloned()
        .collect();
    assert_eq!(linked, want);
    for (id, v) in [
        ("sessions", "6"),
        ("buffers", "20"),
        ("switches", "1435"),
        ("events", "2925"),
        ("etl-files", "6"),
        ("build", "19041"),
        ("artefacts", "11 (0 failed)"),
        ("warnings", "15 warnings, 3 notes"),
    ] {
        let cell = format!("<td id=\"sum-{id}\">{v}</td>");
        assert!(page.contains(&cell), "{cell}");
    }
    assert!(!page.contains("<script"));
    assert!(page.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'none';"));

    // The same dump again (into a directory of the same name): the same bytes.
    let again = t.path().join("again");
    std::fs::create_dir(&again).unwrap();
    let moved = again.join("case");
    std::fs::rename(&dir, &moved).unwrap();
    let (code, _, err) = collect(&dump, &dir, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(tree(&dir) == tree(&moved), "a second run gives other bytes");
}

/// `-o DIR` that exists and is not empty is refused before anything is written (the message
/// of `extract`); an empty one is used; `--overwrite` writes over an earlier collection and
/// leaves other files alone.
#[test]
fn a_directory_that_is_not_empty_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let dump = root().join(SAMPLE);
    let dir = t.path().join("case");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let (code, out, err) = collect(&dump, &dir, &[]);
    assert_eq!(code, 2);
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!(
            "etwdump: error: {} already exists (give --overwrite to replace it)\n",
            dir.display()
        )
    );
    assert_eq!(tree(&dir).keys().collect::<Vec<_>>(), ["notes.txt"]);
    // --overwrite: written, notes.txt kept and not listed.
    let (code, _, err) = collect(&dump, &dir, &["--overwrite"]);
    assert_eq!(code, 0, "{err}");
    let first = tree(&dir);
    assert_eq!(first["notes.txt"], b"mine");
    let c = json(&first["collect.json"]);
    assert!(!listed(&c).contains_key("notes.txt"));
    assert_eq!(listed(&c).len() + 2, first.len());
    // A finished collection is not empty either; --overwrite writes the same files again.
    let (code, _, _) = collect(&dump, &dir, &[]);
    assert_eq!(code, 2);
    let (code, _, err) = collect(&dump, &dir, &["--overwrite"]);
    assert_eq!(code, 0, "{err}");
    assert!(tree(&dir) == first);
    // An empty directory is used as it is.
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, _, err) = collect(&dump, &empty, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(tree(&empty).len(), first.len() - 1);
}

/// Where `etl` and `scan` are to go stand a link to a directory outside DIR and a file: the
/// two artefacts fail with why (no link is followed: the outside directory stays empty), the
/// nine others are written as on a clean run, collect.json and index.html say which failed,
/// and the run exits 1.
#[cfg(unix)]
#[test]
fn a_failed_artefact_is_reported_and_the_others_written() {
    let t = tempfile::tempdir().unwrap();
    let dump = root().join(SAMPLE);
    let clean = t.path().join("clean");
    let (code, _, _) = collect(&dump, &clean, &[]);
    assert_eq!(code, 0);
    let clean_c = json(&std::fs::read(clean.join("collect.json")).unwrap());
    let dir = t.path().join("case");
    let outside = t.path().join("outside");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("etl")).unwrap();
    std::fs::write(dir.join("scan"), "not a directory").unwrap();
    let (code, out, err) = collect(&dump, &dir, &["--overwrite"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.ends_with(&format!(
            "etwdump: error: 2 of 11 artefacts failed (etl, scan); the others are written: {}/index.html and collect.json say why\n",
            dir.display()
        )),
        "{err}"
    );
    assert!(out.contains("etl       FAILED: "), "{out}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    let c = json(&std::fs::read(dir.join("collect.json")).unwrap());
    let why = "exists and is not a directory (a symbolic link is not followed)";
    for (name, files) in [("etl", vec![]), ("scan", vec!["scan.json"])] {
        let a = artefact(&c, name);
        assert_eq!(a["status"], "failed");
        assert_eq!(
            a["error"],
            format!("{}: {why}", dir.join(name).display()),
            "{name}"
        );
        let paths: Vec<&str> = a["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(paths, files);
    }
    // The others: the same files as the clean run's, byte for byte (same hashes).
    for a in c["artefacts"].as_array().unwrap() {
        let name = a["name"].as_str().unwrap();
        if name == "etl" || name == "scan" || name == "warnings" {
            continue;
        }
        assert_eq!(a["status"], "ok", "{name}");
        assert_eq!(a["files"], artefact(&clean_c, name)["files"], "{name}");
    }
    assert_eq!(c["summary"]["failed"], 2);
    assert_eq!(c["summary"]["etl_files"], Value::Null);
    assert_eq!(c["summary"]["carved_files"], Value::Null);
    assert_eq!(c["summary"]["switches"], 1435);
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(page.contains(&format!(
        "<span class=\"failed\">failed</span>: {}/etl: {why}",
        dir.display()
    )));
    assert!(page.contains("<td id=\"sum-etl-files\">-</td>"));
    assert!(page.contains("<td id=\"sum-artefacts\">11 (2 failed)</td>"));
    // No session's .etl link on a page whose extraction failed.
    assert!(!page.contains("href=\"etl/"));
}

/// A session name and log file and a process name holding markup, quotes, `../`, control and
/// bidi characters: index.html shows them escaped only (no tag, attribute or entity of
/// theirs, no raw control character), the .etl file's name is made safe, and nothing is
/// written outside DIR.
#[test]
fn hostile_names_are_escaped_on_the_page() {
    let t = tempfile::tempdir().unwrap();
    let dump = hostile_dump(t.path());
    let dir = t.path().join("case");
    let (code, _, err) = collect(&dump, &dir, &[]);
    assert_eq!(code, 0, "{err}");
    // Nothing but the dump and DIR in the temporary directory.
    let mut top: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    top.sort();
    assert_eq!(top, ["case", "h.dmp"]);
    let files = tree(&dir);
    for k in files.keys() {
        assert!(
            k.chars()
                .all(|c| c.is_ascii_alphanumeric() || " ._-/".contains(c))
                && !k.contains(".."),
            "{k}"
        );
    }
    assert!(
        files.contains_key("etl/04-_script_alert_1___script_______x_amp___31m__.etl"),
        "{:?}",
        files.keys()
    );
    let page = String::from_utf8(files["index.html"].clone()).unwrap();
    assert!(!page
        .chars()
        .any(|c| c != '\n' && etwdump::text::needs_escape(c)));
    for raw in [
        "<script",
        "<s>",
        "<img src=x",
        "x&amp;\\u{1b}",
        "onerror=alert(2)>",
    ] {
        assert!(!page.contains(raw), "{raw} reached the page raw");
    }
    let session_shown =
        "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;../../x&amp;amp;\\u{1b}[31m\\u{202e}\\u{7}";
    let log_shown = "..\\..\\&lt;img src=x onerror=alert(2)&gt;\\u{d}\\u{a}\\u{9b}";
    let process_shown = "&lt;s&gt;&quot;../\\u{1b}\\u{202e} (1100) tid";
    for s in [session_shown, log_shown, process_shown] {
        assert!(page.contains(s), "{s} not on the page");
    }
    assert_eq!(page.matches("<img ").count(), 1, "the chart only");
    assert_eq!(page.matches("<a href=").count(), links(&page).len() - 1);
    for l in links(&page) {
        assert!(resolve(&dir, &l).is_some_and(|p| p.is_file()), "{l}");
    }
    // The JSON keeps the exact text.
    let s = json(&files["sessions.json"]);
    assert!(s["records"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == HOSTILE_SESSION && r["log_file"] == HOSTILE_LOG));
}

/// A dump where no ETW state can be found (the sample without ETW, built-in layouts): every
/// artefact is still written, empty, and the warnings say why — no logger array, no CPU's
/// EtwSupport, nothing for the chart to draw.
#[test]
fn a_dump_without_etw_gives_empty_artefacts_and_says_why() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("case");
    let dump = root().join("tests/data/sample-x64.dmp");
    let r = etwdump(&[
        "collect",
        dump.to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
        "--threads",
        "1",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let c = json(&std::fs::read(dir.join("collect.json")).unwrap());
    assert!(c["artefacts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["status"] == "ok"));
    let s = &c["summary"];
    for k in [
        "sessions",
        "buffers",
        "etl_files",
        "switches",
        "events",
        "providers",
    ] {
        assert_eq!(s[k], 0, "summary.{k}");
    }
    assert_eq!(s["dump"]["symbols"], "none, built-in layouts");
    assert_eq!(s["symbols_path"], Value::Null);
    let files = tree(&dir);
    for f in ["buffers.jsonl", "cswitch.jsonl", "events.jsonl"] {
        assert!(files[f].is_empty(), "{f}");
    }
    assert_eq!(
        listed(&c)["cswitch.csv"].1,
        Some(0),
        "the CSV header, no row"
    );
    let said = |artefact: &str, text: &str| {
        c["warnings"].as_array().unwrap().iter().any(|w| {
            w["message"].as_str().unwrap().contains(text)
                && w["artefacts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a == artefact)
        })
    };
    assert!(said(
        "sessions",
        "the logger-context array could not be located"
    ));
    assert!(said("buffers", "no logger array found: no buffers to list"));
    assert!(said("cswitch", "CPU 0: KPRCB.EtwSupport"));
    assert!(said(
        "cswitch",
        "cswitch.svg: no context switch with a UTC time that fits the dump to draw (0 switches listed)"
    ));
    let page = String::from_utf8(files["index.html"].clone()).unwrap();
    assert!(page.contains("<h2 id=\"sessions\">ETW sessions (0)</h2>"));
    assert!(page.contains("<p id=\"switches-none\">None found"));
    assert!(
        !page.contains("<img "),
        "no chart shown when it has nothing to draw"
    );
}
