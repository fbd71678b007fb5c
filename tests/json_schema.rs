//! One contract (issue 31 item 5): every JSON document etwdump writes is described by a JSON
//! Schema (draft 2020-12) in docs/schema, and this test validates every one it can make
//! against it: the real binary on the committed sample dumps, forge dumps (memory, triage,
//! carved, tampered, real-time, images, a truncated file, a hostile name), the .etl files
//! `extract` writes from them, and the real dumps and .etl files of ../shared when present.
//! Every command and format that writes JSON is covered (the list is checked against
//! `--help`): `--format json` documents, `--format jsonl` rows on stdout and warnings on
//! stderr, the manifest.json of `extract -o` and `scan -o`, and `collect -o`'s collect.json,
//! warnings.jsonl and every JSON file of its other artefacts. The schemas are themselves
//! validated against the 2020-12 meta-schema, their enums against the models' variants, and
//! every schema family is shown to reject a document with a key removed, a value of the
//! wrong type or a key added.

mod common;

use common::{etwdump, fixture, pdb_of};
use etwdump_forge::{
    forge, forge_triage, providers_config, scan_scenarios, Config, ImageKind, TamperKind,
    TamperSpec, TriageSpec,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const SCHEMA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/schema");
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sample-x64-etw.dmp");
const PLAIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sample-x64.dmp");
/// The schema files have no `$id`: a reference names the file beside it, as tools that load
/// schemas by path resolve it. Here they are registered under this base.
const BASE: &str = "file:///etwdump/docs/schema/";
/// Files of definitions the others reference; they describe no document of their own.
const LIBRARIES: &[&str] = &["defs.schema.json", "timesketch.schema.json"];

/// Every JSON output etwdump writes, and the schema that describes it: one document on stdout
/// (`--format json`), one row per line on stdout (`--format jsonl`, whose stderr lines are
/// `warning.schema.json`), or a file written in DIR: the manifest.json of `extract` and `scan`,
/// `collect`'s collect.json and the lines of its warnings.jsonl (its other JSON files are
/// the other commands' outputs, validated as theirs).
const OUTPUTS: &[(&str, &str)] = &[
    ("overview --format json", "overview.schema.json"),
    ("info --format json", "info.schema.json"),
    ("sessions --format json", "sessions.schema.json"),
    ("buffers --format json", "buffers.schema.json"),
    ("buffers --format jsonl", "buffers-row.schema.json"),
    ("providers --format json", "providers.schema.json"),
    ("providers --format jsonl", "providers-row.schema.json"),
    ("check --format json", "check.schema.json"),
    ("check --format jsonl", "check-row.schema.json"),
    ("extract -o DIR", "manifest.schema.json"),
    ("scan --format json", "scan.schema.json"),
    ("scan --format jsonl", "scan-row.schema.json"),
    ("scan -o DIR", "manifest.schema.json"),
    ("cswitch --format json", "cswitch.schema.json"),
    ("cswitch --format jsonl", "cswitch-row.schema.json"),
    ("events --format json", "events.schema.json"),
    ("events --format jsonl", "events-row.schema.json"),
    ("etl --format json", "etl.schema.json"),
    ("etl --events --format json", "etl-events.schema.json"),
    ("etl --events --format jsonl", "events-row.schema.json"),
    ("etl --cswitch --format json", "etl-cswitch.schema.json"),
    ("etl --cswitch --format jsonl", "cswitch-row.schema.json"),
    ("symbols --format json", "symbols.schema.json"),
    ("read --format json", "read.schema.json"),
    ("collect -o DIR", "collect.schema.json"),
    (
        "collect -o DIR warnings.jsonl",
        "collect-warning.schema.json",
    ),
];

/// The commands that write no JSON.
const NO_JSON: &[&str] = &["completions", "manpage"];

// ---------------------------------------------------------------------------------------------
// The schemas.

struct Schemas {
    /// Every file of docs/schema, by name.
    files: BTreeMap<String, Value>,
    /// A validator per document schema (every file but the libraries).
    validators: BTreeMap<String, jsonschema::Validator>,
}

fn schemas() -> &'static Schemas {
    static S: OnceLock<Schemas> = OnceLock::new();
    S.get_or_init(|| {
        let mut files = BTreeMap::new();
        for e in std::fs::read_dir(SCHEMA_DIR).expect("docs/schema") {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            if name.ends_with(".json") {
                assert!(
                    name.ends_with(".schema.json"),
                    "{name}: not a *.schema.json"
                );
                let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                files.insert(name, v);
            }
        }
        let registry = jsonschema::Registry::new()
            .extend(files.iter().map(|(n, v)| (format!("{BASE}{n}"), v.clone())))
            .unwrap()
            .prepare()
            .unwrap_or_else(|e| panic!("docs/schema: {e}"));
        let validators = files
            .iter()
            .filter(|(n, _)| !LIBRARIES.contains(&n.as_str()))
            .map(|(n, v)| {
                let val = jsonschema::options()
                    .with_registry(&registry)
                    .with_base_uri(format!("{BASE}{n}"))
                    .build(v)
                    .unwrap_or_else(|e| panic!("{n}: {e}"));
                (n.clone(), val)
            })
            .collect();
        Schemas { files, validators }
    })
}

/// The first errors of `v` against `schema` (empty: valid).
fn errors(schema: &str, v: &Value) -> Vec<String> {
    let val = schemas()
        .validators
        .get(schema)
        .unwrap_or_else(|| panic!("no schema {schema}"));
    val.iter_errors(v)
        .take(4)
        .map(|e| format!("{} ({}): {e}", e.instance_path(), e.schema_path()))
        .collect()
}

fn assert_valid(schema: &str, v: &Value, what: &str) {
    let e = errors(schema, v);
    assert!(
        e.is_empty(),
        "{what} does not fit docs/schema/{schema}:\n  {}\n{}",
        e.join("\n  "),
        excerpt(v)
    );
}

fn excerpt(v: &Value) -> String {
    let t = v.to_string();
    t.chars().take(600).collect()
}

// ---------------------------------------------------------------------------------------------
// Running the binary and validating what it writes.

/// What a run validated: documents or lines per schema file, and the outputs covered.
#[derive(Default)]
struct Seen {
    per_schema: BTreeMap<String, usize>,
    /// OUTPUTS keys validated, with the documents or stdout lines of each.
    outputs: BTreeMap<&'static str, usize>,
    /// Warnings read from the stderr of JSON Lines runs.
    stderr_warnings: usize,
    /// Records, sessions and warnings inside the documents validated.
    inner: usize,
    /// One valid example per schema, cut to its first record and warning (what the negative
    /// test breaks): the first one found with both, else with records.
    examples: BTreeMap<String, Value>,
}

/// The arrays of a document whose elements the negative test breaks.
const LISTS: &[&str] = &["records", "sessions", "buffers", "warnings"];

/// A document's records (or manifest sessions, or .etl buffers) and warnings, as counts.
fn filled(v: &Value) -> (usize, usize) {
    let n = |k: &str| v.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    (n("records") + n("sessions") + n("buffers"), n("warnings"))
}

/// `v` with each list cut to its first element.
fn cut(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        for k in LISTS {
            if let Some(Value::Array(a)) = o.get_mut(*k) {
                a.truncate(1);
            }
        }
    }
    v
}

fn schema_of(output: &str) -> &'static str {
    OUTPUTS
        .iter()
        .find(|(o, _)| *o == output)
        .unwrap_or_else(|| panic!("{output}: not in OUTPUTS"))
        .1
}

fn run_ok(args: &[&str]) -> std::process::Output {
    let out = etwdump(args);
    assert!(
        out.status.success(),
        "etwdump {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The document begins with `format_version` (the contract's) and `command`.
fn assert_head(v: &Value, command: &str, what: &str) {
    let o = v
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object"));
    let keys: Vec<&str> = o.keys().take(2).map(String::as_str).collect();
    assert_eq!(keys, ["format_version", "command"], "{what}");
    assert_eq!(o["command"], command, "{what}");
}

impl Seen {
    fn count(&mut self, output: &'static str, schema: &str, n: usize) {
        *self.per_schema.entry(schema.to_string()).or_default() += n;
        *self.outputs.entry(output).or_default() += n;
    }

    /// Keep `v` as the example of `schema` if it shows more than the one kept.
    fn example(&mut self, schema: &str, v: &Value) {
        let score = |v: &Value| {
            let (r, w) = filled(v);
            2 * usize::from(r > 0) + usize::from(w > 0)
        };
        match self.examples.get(schema) {
            Some(old) if score(old) >= score(v) => {}
            _ => {
                self.examples.insert(schema.to_string(), cut(v));
            }
        }
    }

    /// A whole document: `text` as `output` writes it.
    fn document(&mut self, output: &'static str, text: &[u8], what: &str) -> Value {
        let schema = schema_of(output);
        let v: Value =
            serde_json::from_slice(text).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
        // The command that wrote it (the manifest's too: `extract` or `scan`).
        assert_head(&v, output.split_whitespace().next().unwrap(), what);
        assert_valid(schema, &v, what);
        self.count(output, schema, 1);
        let (r, w) = filled(&v);
        self.inner += r + w;
        self.example(schema, &v);
        v
    }

    /// `etwdump ARGS` with `--format json`: one document on stdout.
    fn json(&mut self, output: &'static str, args: &[&str]) -> Value {
        assert!(output.ends_with("--format json"), "{output}");
        let mut a = args.to_vec();
        a.extend(["--format", "json"]);
        let out = run_ok(&a);
        self.document(output, &out.stdout, &format!("etwdump {}", a.join(" ")))
    }

    /// JSON Lines `text` as `output` writes them: every line one value of its schema.
    fn lines(&mut self, output: &'static str, text: &[u8], what: &str) -> Vec<Value> {
        let schema = schema_of(output);
        let mut rows = Vec::new();
        for (i, line) in std::str::from_utf8(text).unwrap().lines().enumerate() {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{what} line {}: {e}: {line}", i + 1));
            assert_valid(schema, &v, &format!("{what} line {}", i + 1));
            self.example(schema, &v);
            rows.push(v);
        }
        self.count(output, schema, rows.len());
        rows
    }

    /// `etwdump ARGS` with `--format jsonl`: every stdout line a row, every stderr line a
    /// warning. Returns the rows and the warnings.
    fn jsonl(&mut self, output: &'static str, args: &[&str]) -> (Vec<Value>, Vec<Value>) {
        assert!(output.ends_with("--format jsonl"), "{output}");
        let mut a = args.to_vec();
        a.extend(["--format", "jsonl"]);
        let out = run_ok(&a);
        let what = format!("etwdump {}", a.join(" "));
        let rows = self.lines(output, &out.stdout, &format!("{what}: stdout"));
        let stderr = String::from_utf8(out.stderr).unwrap();
        let mut warnings = Vec::new();
        for (i, line) in stderr.lines().enumerate() {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!(
                    "{what}: stderr line {} is no JSON warning ({e}): {line}",
                    i + 1
                )
            });
            assert_valid(
                "warning.schema.json",
                &v,
                &format!("{what}: stderr line {}", i + 1),
            );
            self.stderr_warnings += 1;
            *self
                .per_schema
                .entry("warning.schema.json".into())
                .or_default() += 1;
            self.example("warning.schema.json", &v);
            warnings.push(v);
        }
        (rows, warnings)
    }

    /// A listing in both JSON formats.
    fn listing(&mut self, command: &'static str, args: &[&str]) -> Value {
        let (json, jsonl) = match command {
            "buffers" => ("buffers --format json", "buffers --format jsonl"),
            "providers" => ("providers --format json", "providers --format jsonl"),
            "check" => ("check --format json", "check --format jsonl"),
            "scan" => ("scan --format json", "scan --format jsonl"),
            "cswitch" => ("cswitch --format json", "cswitch --format jsonl"),
            "events" => ("events --format json", "events --format jsonl"),
            "etl --events" => ("etl --events --format json", "etl --events --format jsonl"),
            "etl --cswitch" => (
                "etl --cswitch --format json",
                "etl --cswitch --format jsonl",
            ),
            c => panic!("{c}: no listing"),
        };
        let doc = self.json(json, args);
        let (rows, _) = self.jsonl(jsonl, args);
        // The JSON Lines are the envelope's records (those with a time, for timeline rows)
        // with the Timesketch fields.
        assert!(rows.len() <= records(&doc).len(), "{command} {args:?}");
        doc
    }

    /// `manifest.json` in `dir`, written by `output`.
    fn manifest(&mut self, output: &'static str, dir: &Path) -> Value {
        let p = dir.join("manifest.json");
        let text = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        self.document(output, &text, &p.display().to_string())
    }

    fn merge(&mut self, o: Seen) {
        for (k, n) in o.per_schema {
            *self.per_schema.entry(k).or_default() += n;
        }
        for (k, n) in o.outputs {
            *self.outputs.entry(k).or_default() += n;
        }
        self.stderr_warnings += o.stderr_warnings;
        self.inner += o.inner;
        for (k, v) in o.examples {
            self.example(&k, &v);
        }
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A listing's records.
fn records(doc: &Value) -> &[Value] {
    doc["records"].as_array().expect("records")
}

/// The dump commands on `dump` (with `extra`, e.g. symbols), every JSON form.
fn dump_commands(seen: &mut Seen, dump: &str, extra: &[&str]) {
    let with = |c: &'static str| -> Vec<&str> {
        let mut a = vec![c, dump];
        a.extend(extra);
        a
    };
    seen.json("info --format json", &with("info"));
    seen.json("overview --format json", &with("overview"));
    seen.json("sessions --format json", &with("sessions"));
    for c in ["buffers", "providers", "check", "scan", "cswitch", "events"] {
        seen.listing(c, &with(c));
    }
}

/// `extract -o` into `dir`, then `etl` on every file it wrote.
fn extract_and_etl(seen: &mut Seen, dump: &str, extra: &[&str], dir: &Path) -> Value {
    let mut a = vec!["extract", dump, "-o", s(dir)];
    a.extend(extra);
    run_ok(&a);
    let m = seen.manifest("extract -o DIR", dir);
    etl_on_written(seen, &m, dir);
    m
}

/// `etl` on every .etl file manifest `m` lists in `dir`: each file's buffers, and all files'
/// records and switches.
fn etl_on_written(seen: &mut Seen, m: &Value, dir: &Path) {
    let files: Vec<String> = m["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| s(&dir.join(x["file"].as_str().unwrap())).to_string())
        .collect();
    for f in &files {
        seen.json("etl --format json", &["etl", f]);
    }
    if files.is_empty() {
        return;
    }
    let mut a: Vec<&str> = vec!["etl"];
    a.extend(files.iter().map(String::as_str));
    for (mode, listing) in [("--events", "etl --events"), ("--cswitch", "etl --cswitch")] {
        let mut b = a.clone();
        b.push(mode);
        seen.listing(listing, &b);
    }
    // Rows without a time kept (datetime and timestamp null).
    a.extend(["--events", "--keep-untimed"]);
    seen.jsonl("etl --events --format jsonl", &a);
}

/// The JSON files of `collect -o DIR` other than collect.json, and the output each is
/// (the same bytes as that command writes: tests/collect.rs); `true`: JSON Lines.
const COLLECTED: &[(&str, &str, bool)] = &[
    ("info.json", "info --format json", false),
    ("sessions.json", "sessions --format json", false),
    ("buffers.jsonl", "buffers --format jsonl", true),
    ("providers.json", "providers --format json", false),
    ("check.json", "check --format json", false),
    ("etl/manifest.json", "extract -o DIR", false),
    ("cswitch.jsonl", "cswitch --format jsonl", true),
    ("events.jsonl", "events --format jsonl", true),
    ("scan.json", "scan --format json", false),
    ("scan/manifest.json", "scan -o DIR", false),
    ("warnings.jsonl", "collect -o DIR warnings.jsonl", true),
];

/// `collect DUMP EXTRA -o DIR` (DIR as the caller left it; `ok`: the exit status is 0, else 1,
/// some artefacts failed): collect.json, and every JSON and JSON Lines file in DIR against the
/// schema of the output it is (those of failed artefacts may be missing). collect.json lists
/// files that exist, its artefacts are the schema's, its warnings are warnings.jsonl's lines.
fn collect_dir(seen: &mut Seen, dump: &str, extra: &[&str], dir: &Path, ok: bool) -> Value {
    let mut a = vec![
        "collect",
        dump,
        "-o",
        s(dir),
        "--overwrite",
        "--threads",
        "1",
    ];
    a.extend(extra);
    let out = etwdump(&a);
    assert_eq!(
        out.status.code(),
        Some(if ok { 0 } else { 1 }),
        "etwdump {a:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = dir.join("collect.json");
    let c = seen.document("collect -o DIR", &std::fs::read(&p).unwrap(), s(&p));
    let artefacts = c["artefacts"].as_array().unwrap();
    let names: Vec<Value> = artefacts.iter().map(|a| a["name"].clone()).collect();
    assert_eq!(
        names,
        schema_enum("collect.schema.json", "/$defs/artefact_name/enum")
    );
    for f in artefacts
        .iter()
        .flat_map(|a| a["files"].as_array().unwrap())
    {
        let path = f["path"].as_str().unwrap();
        assert!(
            dir.join(path).is_file(),
            "collect.json lists {path}: not in DIR"
        );
    }
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "json" || x == "jsonl") {
                let rel = p.strip_prefix(dir).unwrap().to_str().unwrap();
                files.push(rel.replace('\\', "/"));
            }
        }
    }
    for rel in files.iter().filter(|f| *f != "collect.json") {
        let (_, output, lines) = COLLECTED
            .iter()
            .find(|(f, _, _)| f == rel)
            .unwrap_or_else(|| panic!("collect wrote {rel}: not in COLLECTED"));
        let text = std::fs::read(dir.join(rel)).unwrap();
        let what = dir.join(rel).display().to_string();
        if *lines {
            let rows = seen.lines(output, &text, &what);
            if *rel == "warnings.jsonl" {
                assert_eq!(&rows, c["warnings"].as_array().unwrap(), "{what}");
            }
        } else {
            seen.document(output, &text, &what);
        }
    }
    if ok {
        assert_eq!(files.len(), COLLECTED.len() + 1, "{files:?}");
    }
    c
}

// ---------------------------------------------------------------------------------------------
// The inputs.

/// The committed ETW sample with its fixture PDB: every command and form.
fn the_sample(tmp: &Path) -> Seen {
    let mut seen = Seen::default();
    let pdb = s(&pdb_of("x64-19041")).to_string();
    let p = ["--pdb", pdb.as_str()];
    dump_commands(&mut seen, SAMPLE, &p);
    // Variants: built-in layouts, one row per record, rows without a time kept, the carved
    // buffers (none here), providers no session enables.
    seen.json("info --format json", &["info", SAMPLE]);
    seen.json("sessions --format json", &["sessions", SAMPLE]);
    seen.json(
        "cswitch --format json",
        &["cswitch", SAMPLE, "--per-record"],
    );
    seen.jsonl(
        "events --format jsonl",
        &["events", SAMPLE, "--pdb", &pdb, "--keep-untimed"],
    );
    seen.jsonl(
        "cswitch --format jsonl",
        &["cswitch", SAMPLE, "--pdb", &pdb, "--keep-untimed"],
    );
    seen.json("events --format json", &["events", SAMPLE, "--carved"]);
    seen.json(
        "providers --format json",
        &["providers", SAMPLE, "--pdb", &pdb, "--all"],
    );
    // symbols: of the dump, of a PDB, of the built-in tables of a build (x64, x86).
    seen.json("symbols --format json", &["symbols", SAMPLE, "--pdb", &pdb]);
    seen.json(
        "symbols --format json",
        &["symbols", "--pdb", &pdb, "--all-symbols"],
    );
    seen.json("symbols --format json", &["symbols", "--build", "19041"]);
    seen.json(
        "symbols --format json",
        &["symbols", "--build", "14393", "--x86"],
    );
    // read: the kernel image's first bytes, and the page-table root by physical address.
    let info = seen.json("info --format json", &["info", SAMPLE]);
    let base = info["kernel_base"]["address"].as_str().unwrap().to_string();
    let dtb = info["dtb"].as_str().unwrap().to_string();
    seen.json("read --format json", &["read", SAMPLE, &base, "64"]);
    seen.json(
        "read --format json",
        &["read", SAMPLE, &dtb, "16", "--physical"],
    );
    seen.json("read --format json", &["read", SAMPLE, &base, "0"]);
    // extract, then etl on its files; scan -o (nothing orphaned: an empty manifest).
    let dir = tmp.join("sample-extract");
    let m = extract_and_etl(&mut seen, SAMPLE, &p, &dir);
    assert!(!m["sessions"].as_array().unwrap().is_empty());
    let dir = tmp.join("sample-scan");
    run_ok(&["scan", SAMPLE, "-o", s(&dir)]);
    seen.manifest("scan -o DIR", &dir);
    // collect: every artefact; then again where a file stands in the way of scan/ (the scan
    // fails after writing scan.json: its figures null, its error said).
    let dir = tmp.join("sample-collect");
    collect_dir(&mut seen, SAMPLE, &p, &dir, true);
    let dir = tmp.join("sample-collect-failed");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("scan"), "not a directory").unwrap();
    let c = collect_dir(&mut seen, SAMPLE, &p, &dir, false);
    assert_eq!(c["artefacts"][9]["status"], "failed");
    assert!(c["summary"]["scan_objects"].is_null());
    seen
}

/// The committed sample without ETW state, and a truncated copy of the ETW sample.
fn the_plain_and_truncated_samples(tmp: &Path) -> Seen {
    let mut seen = Seen::default();
    dump_commands(&mut seen, PLAIN, &[]);
    let cut = tmp.join("truncated.dmp");
    let bytes = std::fs::read(SAMPLE).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let cut = s(&cut);
    seen.json("info --format json", &["info", cut]);
    seen.json("sessions --format json", &["sessions", cut]);
    // The dump-level warning (TRUNCATED DUMP) is a JSON line on stderr too.
    seen.json("buffers --format json", &["buffers", cut]);
    let (_, warnings) = seen.jsonl("buffers --format jsonl", &["buffers", cut]);
    let truncated = warnings
        .iter()
        .filter(|w| {
            w["message"]
                .as_str()
                .unwrap()
                .starts_with("TRUNCATED DUMP (")
        })
        .count();
    assert_eq!(truncated, 1, "{warnings:?}");
    seen.listing("events", &["events", cut]);
    seen
}

/// Forge triage dumps (x64 and ARM64) with their ISF: saved sessions, windows, secondary
/// data.
fn triage_dumps(tmp: &Path) -> Seen {
    let mut seen = Seen::default();
    for (name, spec) in [
        ("x64", TriageSpec::standard()),
        ("arm64", TriageSpec::arm64()),
    ] {
        let f = forge_triage(&spec);
        let dump = tmp.join(format!("triage-{name}.dmp"));
        std::fs::write(&dump, &f.bytes).unwrap();
        let isf = tmp.join(format!("triage-{name}.json"));
        std::fs::write(&isf, &f.isf_json).unwrap();
        let d = s(&dump);
        dump_commands(&mut seen, d, &["--isf", s(&isf)]);
        seen.json("info --format json", &["info", d]);
        seen.json("symbols --format json", &["symbols", "--isf", s(&isf)]);
        let sessions = seen.json("sessions --format json", &["sessions", d]);
        assert!(
            records(&sessions)
                .iter()
                .any(|r| r["kind"] == "saved_session"),
            "{name}: no saved session"
        );
        extract_and_etl(
            &mut seen,
            d,
            &["--isf", s(&isf)],
            &tmp.join(format!("triage-{name}-extract")),
        );
    }
    seen
}

/// A scan scenario: stopped sessions' buffers, stale copies, orphaned blocks, carved .etl.
fn carved(tmp: &Path) -> Seen {
    let mut seen = Seen::default();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let (name, c) = scan_scenarios(&root)
        .into_iter()
        .next()
        .expect("a scan scenario");
    let dump = tmp.join(format!("{name}.dmp"));
    forge(&c).write_to(&dump).unwrap();
    let pdb = pdb_of("x64-19041");
    let (d, p) = (s(&dump), ["--pdb", s(&pdb)]);
    let scan = seen.listing("scan", &["scan", d, p[0], p[1]]);
    assert!(
        records(&scan).iter().any(|r| r["kind"] == "orphan_group"),
        "{name}: no orphan group"
    );
    let dir = tmp.join("carved");
    run_ok(&["scan", d, p[0], p[1], "-o", s(&dir)]);
    let m = seen.manifest("scan -o DIR", &dir);
    assert!(!m["sessions"].as_array().unwrap().is_empty(), "{name}");
    // The scan -o run with JSON Lines: stderr keeps only JSON warnings.
    let dir2 = tmp.join("carved-jsonl");
    seen.jsonl(
        "scan --format jsonl",
        &["scan", d, p[0], p[1], "-o", s(&dir2)],
    );
    seen.manifest("scan -o DIR", &dir2);
    seen.listing("events", &["events", d, p[0], p[1], "--carved"]);
    seen.listing("cswitch", &["cswitch", d, p[0], p[1], "--carved"]);
    etl_on_written(&mut seen, &m, &dir);
    // collect: the carved files in scan/.
    let c = collect_dir(&mut seen, d, &p, &tmp.join("carved-collect"), true);
    assert!(c["summary"]["carved_files"].as_u64() > Some(0), "{name}");
    seen
}

/// Forge memory dumps: every tamper finding, real-time consumers' queued buffers, a hostile
/// session name, an x86 kernel, and memory images (raw, VMware, ELF core) of the ETW sample.
fn forge_dumps(tmp: &Path) -> Seen {
    let mut seen = Seen::default();
    let pdb19041 = pdb_of("x64-19041");
    let p = ["--pdb", s(&pdb19041)];

    // Tampered: every check finds something.
    let mut c = providers_config(&fixture("x64-19041"));
    let kinds: Vec<TamperKind> = TamperKind::ALL
        .into_iter()
        .chain([TamperKind::WRITE_PATCHES[0]])
        .filter(|k| k.applies_to(&c))
        .collect();
    c.etw = c.etw.map(|e| e.with_tampering(TamperSpec { kinds }));
    let dump = tmp.join("tampered.dmp");
    forge(&c).write_to(&dump).unwrap();
    let check = seen.listing("check", &["check", s(&dump), p[0], p[1]]);
    let found: BTreeSet<&str> = records(&check)
        .iter()
        .map(|r| r["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        found.len(),
        etwdump_check_ids::CheckId::ALL.len(),
        "tampered dump: findings of {found:?}"
    );
    seen.listing("providers", &["providers", s(&dump), p[0], p[1]]);

    // Real-time consumers with buffers queued in their processes.
    let dump = tmp.join("realtime.dmp");
    forge(&Config::sample_realtime()).write_to(&dump).unwrap();
    let d = s(&dump);
    let buffers = seen.listing("buffers", &["buffers", d, p[0], p[1]]);
    assert!(
        records(&buffers).iter().any(|r| !r["found_via"].is_null()),
        "no consumer's buffer"
    );
    seen.json("sessions --format json", &["sessions", d, p[0], p[1]]);
    extract_and_etl(&mut seen, d, &p, &tmp.join("realtime-extract"));
    // Without hashing: every sha256 null, the rest as before.
    let mut bare = p.to_vec();
    bare.push("--no-hash");
    let m = extract_and_etl(&mut seen, d, &bare, &tmp.join("realtime-extract-bare"));
    assert!(m["sessions"]
        .as_array()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|x| x["sha256"].is_null())));

    // Hostile text in memory: names with control characters and formula prefixes.
    let dump = tmp.join("hostile.dmp");
    forge(&Config::hostile_etw()).write_to(&dump).unwrap();
    let d = s(&dump);
    seen.json("sessions --format json", &["sessions", d, p[0], p[1]]);
    seen.listing("events", &["events", d, p[0], p[1]]);
    seen.json("overview --format json", &["overview", d, p[0], p[1]]);

    // An x86 kernel with ETW state.
    let dump = tmp.join("x86.dmp");
    forge(&Config::from_fixture(&fixture("x86-14393")).with_standard_etw())
        .write_to(&dump)
        .unwrap();
    let pdb = pdb_of("x86-14393");
    dump_commands(&mut seen, s(&dump), &["--pdb", s(&pdb)]);

    // Memory images of the ETW sample's machine.
    let f = forge(&Config::sample_etw());
    for (kind, stem) in [
        (ImageKind::Raw, "image.raw"),
        (ImageKind::Vmware, "image.vmem"),
        (ImageKind::Elf, "image.elf"),
    ] {
        let files = f.write_image(&tmp.join(stem), kind).unwrap();
        let img = s(&files[0]);
        let info = seen.json("info --format json", &["info", img]);
        assert!(info["memory"]["format"].is_string(), "{stem}");
        seen.json("sessions --format json", &["sessions", img, p[0], p[1]]);
        seen.json("overview --format json", &["overview", img, p[0], p[1]]);
    }
    seen.listing("scan", &["scan", s(&tmp.join("image.raw")), p[0], p[1]]);
    // Hibernation files of the same machine: a Fast Startup file with a header, a wiped one.
    for (spec, name) in [
        (
            etwdump_forge::HiberSpec {
                variant: etwdump_forge::HiberVariant::FastStartup,
                ..etwdump_forge::HiberSpec::new(
                    etwdump_forge::HiberVersion::Win10_1809,
                    etwdump_forge::HiberCodec::Huffman,
                    1,
                )
            },
            "hiberfil.sys",
        ),
        (
            etwdump_forge::HiberSpec {
                signature: etwdump_forge::HiberSignature::Wiped,
                ..etwdump_forge::HiberSpec::new(
                    etwdump_forge::HiberVersion::Win8,
                    etwdump_forge::HiberCodec::Lz77,
                    2,
                )
            },
            "wiped.sys",
        ),
    ] {
        let path = tmp.join(name);
        f.write_hiberfil(&path, &spec).unwrap();
        let info = seen.json("info --format json", &["info", s(&path)]);
        assert!(info["memory"]["hibernation"].is_object(), "{name}");
        seen.json(
            "sessions --format json",
            &["sessions", s(&path), p[0], p[1]],
        );
        seen.listing("buffers", &["buffers", s(&path), p[0], p[1]]);
    }
    seen
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// Every input above, run once for the tests that read what was validated (each group of
/// inputs on its own thread).
fn collected() -> &'static Seen {
    static C: OnceLock<Seen> = OnceLock::new();
    C.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let groups: [fn(&Path) -> Seen; 5] = [
            the_sample,
            the_plain_and_truncated_samples,
            triage_dumps,
            carved,
            forge_dumps,
        ];
        let mut seen = Seen::default();
        std::thread::scope(|sc| {
            let handles: Vec<_> = groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let dir = tmp.path().join(format!("g{i}"));
                    std::fs::create_dir_all(&dir).unwrap();
                    sc.spawn(move || g(&dir))
                })
                .collect();
            for h in handles {
                seen.merge(h.join().expect("a group of inputs failed"));
            }
        });
        seen
    })
}

/// Every output of every command, on every input the repository has, fits its schema; every
/// output and every schema file is exercised.
#[test]
fn every_json_output_fits_its_schema() {
    let seen = collected();
    for (output, _) in OUTPUTS {
        let n = seen.outputs.get(output).copied().unwrap_or(0);
        assert!(n > 0, "{output}: no document or row validated");
    }
    assert!(seen.stderr_warnings > 0, "no JSON Lines warning validated");
    for name in schemas().validators.keys() {
        assert!(
            seen.per_schema.get(name).copied().unwrap_or(0) > 0,
            "docs/schema/{name}: no document validated against it"
        );
    }
    let total: usize = seen.per_schema.values().sum();
    eprintln!(
        "json_schema: {total} documents and JSON Lines validated ({} records, sessions and warnings inside the documents): {:?}",
        seen.inner, seen.per_schema
    );
}

/// The keys a warning may leave out (docs/output-contract.md: "keys that do not apply left
/// out").
const WARNING_OPTIONAL: &[&str] = &["logger_id", "slot", "cpu", "address", "field"];

/// A value of another JSON type than `v`'s, valid for no key of any schema.
fn wrong_type(v: &Value) -> Value {
    match v {
        Value::Null => serde_json::json!([null]),
        Value::Bool(b) => serde_json::json!(b.to_string()),
        Value::Number(n) => serde_json::json!(n.to_string()),
        Value::String(_) => serde_json::json!(1),
        Value::Array(_) => serde_json::json!({ "0": v }),
        Value::Object(_) => serde_json::json!([v]),
    }
}

/// The object at `path` (keys and indexes) in `v`.
fn at<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut serde_json::Map<String, Value> {
    let mut cur = v;
    for p in path {
        cur = match p.parse::<usize>() {
            Ok(i) => &mut cur[i],
            Err(_) => &mut cur[*p],
        };
    }
    cur.as_object_mut().expect("an object")
}

/// Every copy of `doc` with one key of the object at `path` removed (unless `optional`), one
/// value replaced by a value of another type, or one key added: each must be rejected.
fn broken_copies(doc: &Value, path: &[&str], optional: &[&str]) -> Vec<(String, Value)> {
    let keys: Vec<String> = at(&mut doc.clone(), path).keys().cloned().collect();
    let mut out = Vec::new();
    let place = path.join("/");
    for k in &keys {
        if !optional.contains(&k.as_str()) {
            let mut d = doc.clone();
            at(&mut d, path).remove(k);
            out.push((format!("/{place}: {k} removed"), d));
        }
        let mut d = doc.clone();
        let o = at(&mut d, path);
        let w = wrong_type(&o[k]);
        o.insert(k.clone(), w);
        out.push((format!("/{place}: {k} of another type"), d));
    }
    let mut d = doc.clone();
    at(&mut d, path).insert("unexpected".into(), Value::from(0));
    out.push((format!("/{place}: a key added"), d));
    out
}

fn assert_rejected(schema: &str, v: &Value, what: &str) {
    assert!(
        !errors(schema, v).is_empty(),
        "docs/schema/{schema} accepts a document with {what}: {}",
        excerpt(v)
    );
}

/// No schema passes vacuously: for each, a real document it accepts is rejected once any key
/// is removed, given a value of another type, or joined by a key the model does not have, at
/// the top and in its first record and warning; and the rules that tie keys together reject
/// documents that break them.
#[test]
fn every_schema_rejects_a_broken_document() {
    let seen = collected();
    let mut broken = 0;
    for name in schemas().validators.keys() {
        let example = seen
            .examples
            .get(name)
            .unwrap_or_else(|| panic!("docs/schema/{name}: no example"));
        assert_valid(name, example, "the example");
        let top_optional = if name == "warning.schema.json" || name == "collect-warning.schema.json"
        {
            WARNING_OPTIONAL
        } else {
            &[]
        };
        let mut copies = broken_copies(example, &[], top_optional);
        let document = example.get("format_version").is_some();
        for list in LISTS.iter().filter(|_| document) {
            if example.get(list).and_then(|a| a.get(0)).is_some() {
                let optional = if *list == "warnings" {
                    WARNING_OPTIONAL
                } else {
                    &[]
                };
                copies.extend(broken_copies(example, &[list, "0"], optional));
            }
        }
        if name == "collect.schema.json" {
            // Its objects: the summary and the dump in it, an artefact, a file, the page's.
            for path in [
                &["summary"][..],
                &["summary", "dump"],
                &["artefacts", "0"],
                &["artefacts", "0", "files", "0"],
                &["index"],
            ] {
                copies.extend(broken_copies(example, path, &[]));
            }
        }
        for (what, d) in &copies {
            assert_rejected(name, d, what);
        }
        broken += copies.len();
        if document {
            for (what, v) in [
                ("format_version 1", Value::from(1)),
                ("another command", Value::from("nope")),
            ] {
                let mut d = example.clone();
                let key = if what.starts_with("format") {
                    "format_version"
                } else {
                    "command"
                };
                d[key] = v;
                assert_rejected(name, &d, what);
            }
        }
    }
    assert!(broken > 500, "{broken} broken copies only");
    eprintln!(
        "json_schema: {broken} broken copies of {} examples rejected",
        seen.examples.len()
    );

    // The rules between keys.
    let ex = |n: &str| seen.examples[n].clone();
    // A payload: `how` only for a manifest payload, `event` and `provider` only for
    // TraceLogging, a raw payload's fields are its size and hex bytes.
    let mut row = ex("events.schema.json")["records"][0].clone();
    let payloads = [
        (
            true,
            serde_json::json!({"class": "manifest", "fields": {"A": 1}, "problem": null, "how": "the only reading"}),
        ),
        (
            true,
            serde_json::json!({"class": "TraceLogging", "event": "E", "provider": "P", "fields": {"s": [1, {"x": true}]}, "problem": null}),
        ),
        (
            true,
            serde_json::json!({"class": "raw", "fields": {"size": 2, "hex": "0a0b"}, "problem": "not decoded: no layout"}),
        ),
        (
            false,
            serde_json::json!({"class": "Image_Load", "fields": {}, "problem": null, "how": "x"}),
        ),
        (
            false,
            serde_json::json!({"class": "CSwitch", "event": "E", "fields": {}, "problem": null}),
        ),
        (
            false,
            serde_json::json!({"class": "raw", "fields": {"size": 2, "hex": "0a0"}, "problem": "not decoded: x"}),
        ),
        (
            false,
            serde_json::json!({"class": "raw", "fields": {"size": 2, "hex": "0a0b"}, "problem": null}),
        ),
        (
            false,
            serde_json::json!({"class": "Image_Load", "fields": {"x": null}, "problem": null}),
        ),
        (
            false,
            serde_json::json!({"class": "Image_Load", "fields": {}}),
        ),
    ];
    for (ok, p) in payloads {
        row["payload"] = p.clone();
        let doc = serde_json::json!({"format_version": 3, "command": "events", "records": [row], "warnings": []});
        assert_eq!(
            errors("events.schema.json", &doc).is_empty(),
            ok,
            "payload {p}"
        );
    }
    // A timeline row: datetime and timestamp are null together.
    let mut line = ex("events-row.schema.json");
    line["datetime"] = Value::Null;
    assert_rejected(
        "events-row.schema.json",
        &line,
        "no datetime but a timestamp",
    );
    line["timestamp"] = Value::Null;
    assert_valid("events-row.schema.json", &line, "a row kept without a time");
    // One value changed against a rule between keys, or a closed set: (schema, place, the
    // value, or the other of two values, what that breaks).
    let other = |schema: &str, place: &str, a: &str, b: &str| {
        Value::from(if ex(schema).pointer(place) == Some(&Value::from(a)) {
            b
        } else {
            a
        })
    };
    let rules = [
        (
            "cswitch-row.schema.json",
            "/timestamp_desc",
            Value::from("ETW event"),
            "another row's timestamp_desc",
        ),
        (
            "scan.schema.json",
            "/records/0/kind",
            other(
                "scan.schema.json",
                "/records/0/kind",
                "orphan_group",
                "buffer",
            ),
            "a row of another kind (its fields are that kind's)",
        ),
        (
            "sessions.schema.json",
            "/records/0/kind",
            other(
                "sessions.schema.json",
                "/records/0/kind",
                "session",
                "saved_session",
            ),
            "a record of another kind",
        ),
        (
            "manifest.schema.json",
            "/command",
            other("manifest.schema.json", "/command", "scan", "extract"),
            "the other command's files (scan's are carved)",
        ),
        (
            "info.schema.json",
            "/system_time_flag",
            Value::from("not_a_filetime"),
            "not_a_filetime with a date",
        ),
        (
            "warning.schema.json",
            "/kind",
            Value::from("fatal"),
            "an unknown kind",
        ),
        (
            "collect.schema.json",
            "/artefacts/0/status",
            Value::from("failed"),
            "a failed artefact without its error",
        ),
        (
            "collect.schema.json",
            "/artefacts/0/error",
            Value::from("why"),
            "an artefact that went well with an error",
        ),
        (
            "collect.schema.json",
            "/artefacts/0/name",
            Value::from("sessions"),
            "the artefacts in another order",
        ),
        (
            "collect.schema.json",
            "/artefacts/0/files/0/path",
            Value::from("events.jsonl"),
            "another artefact's file",
        ),
        (
            "collect.schema.json",
            "/artefacts/5/files/0/path",
            Value::from("etl/../x.etl"),
            "a path out of etl/",
        ),
        (
            "collect.schema.json",
            "/artefacts/1/files/0/rows",
            Value::Null,
            "a listing without its rows",
        ),
        (
            "collect.schema.json",
            "/index/rows",
            Value::from(1),
            "rows for the page",
        ),
        (
            "collect.schema.json",
            "/artefacts",
            Value::from(Vec::<Value>::new()),
            "no artefact",
        ),
        (
            "collect-warning.schema.json",
            "/artefacts",
            Value::from(Vec::<Value>::new()),
            "a warning of no artefact",
        ),
        (
            "collect-warning.schema.json",
            "/artefacts/0",
            Value::from("warnings"),
            "a warning of warnings.jsonl",
        ),
        (
            "warning.schema.json",
            "/level",
            Value::from("error"),
            "an unknown level",
        ),
    ];
    assert!(!ex("manifest.schema.json")["sessions"]
        .as_array()
        .unwrap()
        .is_empty());
    for (schema, place, v, what) in rules {
        let mut d = ex(schema);
        *d.pointer_mut(place)
            .unwrap_or_else(|| panic!("{schema}: {place}")) = v;
        assert_rejected(schema, &d, what);
    }
}

/// `--format` values a command's `--help` lists (`[possible values: …]`, or one `- value`
/// line each when they have help).
fn formats_in_help(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let lines = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--format"));
    for (i, l) in lines.enumerate() {
        let t = l.trim();
        if i > 0 && (t.starts_with('-') && !t.starts_with("- ") || t.starts_with("[default")) {
            break;
        }
        if let Some(v) = t.strip_prefix("- ") {
            out.insert(v.split(':').next().unwrap().trim().to_string());
        }
        if let Some((_, v)) = t.split_once("[possible values: ") {
            out.extend(v.split(']').next().unwrap().split(", ").map(str::to_string));
        }
    }
    out
}

/// The command line has no JSON output the list above misses: its commands are those of
/// `etwdump --help`; each command's JSON formats (`--format json`, `jsonl`) and
/// manifest.json are those listed, and the flags they are listed with exist.
#[test]
fn every_command_that_writes_json_is_covered() {
    let out = run_ok(&["--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    let commands: BTreeSet<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap())
        .filter(|c| *c != "help")
        .collect();
    let listed: BTreeSet<&str> = OUTPUTS
        .iter()
        .map(|(o, _)| o.split_whitespace().next().unwrap())
        .chain(NO_JSON.iter().copied())
        .collect();
    assert_eq!(commands, listed, "etwdump --help lists other commands");
    for c in &commands {
        let h = String::from_utf8(run_ok(&[c, "--help"]).stdout).unwrap();
        let offered: BTreeSet<String> = formats_in_help(&h)
            .into_iter()
            .filter(|f| f == "json" || f == "jsonl")
            .collect();
        let mine: Vec<&str> = OUTPUTS
            .iter()
            .map(|(o, _)| *o)
            .filter(|o| o.split_whitespace().next() == Some(c))
            .collect();
        let tested: BTreeSet<String> = mine
            .iter()
            .filter_map(|o| o.split("--format ").nth(1))
            .map(str::to_string)
            .collect();
        assert_eq!(offered, tested, "{c}: JSON formats of --help vs OUTPUTS");
        // extract's and scan's; collect's directory has its own (collect.json).
        let manifest = mine
            .iter()
            .any(|o| o.ends_with("-o DIR") && schema_of(o) == "manifest.schema.json");
        assert_eq!(
            h.contains("manifest.json"),
            manifest,
            "{c}: manifest.json in --help vs OUTPUTS"
        );
        for o in &mine {
            for flag in o.split_whitespace().filter(|w| w.starts_with('-')) {
                assert!(
                    h.lines()
                        .any(|l| l.trim_start().split([',', ' ']).any(|w| w == flag)),
                    "{o}: {c} --help has no {flag}"
                );
            }
        }
    }
}

/// Every file of docs/schema is a valid draft 2020-12 schema (the meta-schema); every `$ref`
/// names a file and a place in it that exist; every definition is referenced; every file is a
/// document's schema or referenced by one; docs/schema/README.md names every file and the
/// output contract links it.
#[test]
fn the_schemas_are_valid_and_documented() {
    let files = &schemas().files;
    let mut refs: BTreeSet<(String, String)> = BTreeSet::new();
    fn collect(v: &Value, file: &str, out: &mut BTreeSet<(String, String)>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    let (f, p) = r.split_once('#').unwrap_or((r, ""));
                    let f = if f.is_empty() { file } else { f };
                    out.insert((f.to_string(), p.to_string()));
                }
                o.values().for_each(|x| collect(x, file, out));
            }
            Value::Array(a) => a.iter().for_each(|x| collect(x, file, out)),
            _ => {}
        }
    }
    for (name, v) in files {
        assert_eq!(
            v["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        if let Err(e) = jsonschema::meta::validate(v) {
            panic!(
                "{name} is not a valid JSON Schema: {e} at {}",
                e.instance_path()
            );
        }
        assert!(
            v["title"].is_string() && v["description"].is_string(),
            "{name}: title, description"
        );
        collect(v, name, &mut refs);
    }
    for (f, p) in &refs {
        let target = files
            .get(f)
            .unwrap_or_else(|| panic!("$ref to {f}: no such file in docs/schema"));
        assert!(target.pointer(p).is_some(), "$ref {f}#{p}: no such place");
    }
    for (name, v) in files {
        if let Some(Value::Object(defs)) = v.get("$defs") {
            for d in defs.keys() {
                assert!(
                    refs.contains(&(name.clone(), format!("/$defs/{d}"))),
                    "{name}: $defs/{d} is referenced nowhere"
                );
            }
        }
        if LIBRARIES.contains(&name.as_str()) {
            assert!(
                refs.iter().any(|(f, _)| f == name),
                "{name}: referenced nowhere"
            );
        } else {
            assert!(
                OUTPUTS.iter().any(|(_, s)| s == name) || name == "warning.schema.json",
                "{name}: describes no output"
            );
        }
    }
    let readme = std::fs::read_to_string(format!("{SCHEMA_DIR}/README.md")).unwrap();
    for name in files.keys() {
        assert!(
            readme.contains(&format!("`{name}`")),
            "docs/schema/README.md does not name {name}"
        );
    }
    let contract = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/output-contract.md"
    ))
    .unwrap();
    assert!(
        contract.contains("(schema/README.md)"),
        "docs/output-contract.md links docs/schema"
    );
}

/// The JSON values of `items` (unit variants serialize as their names).
fn names<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .map(|x| serde_json::to_value(x).unwrap())
        .collect()
}

/// The enum at `pointer` in `file`, null left out.
fn schema_enum(file: &str, pointer: &str) -> Vec<Value> {
    let v = schemas().files[file]
        .pointer(pointer)
        .unwrap_or_else(|| panic!("{file}#{pointer}"));
    v.as_array()
        .unwrap_or_else(|| panic!("{file}#{pointer}: not an enum"))
        .iter()
        .filter(|x| !x.is_null())
        .cloned()
        .collect()
}

fn assert_same_set(schema: Vec<Value>, model: Vec<Value>, what: &str) {
    let a: BTreeSet<String> = schema.iter().map(Value::to_string).collect();
    let b: BTreeSet<String> = model.iter().map(Value::to_string).collect();
    assert_eq!(
        a, b,
        "{what}: the schema's enum and the model's values differ"
    );
}

/// Every variant of enum `$e` (imported by that name), with the given fields: an exhaustive
/// `match` over them makes a variant added to the model a compile error here until it is
/// listed (and then the test below fails until the schema has it).
macro_rules! every {
    ($e:ident :: { $($v:ident $({ $($f:ident: $x:expr),* })?),+ $(,)? }) => {{
        #[allow(unreachable_patterns, dead_code)]
        fn complete(x: &$e) {
            match x {
                $($e::$v { .. } => {})+
            }
        }
        [$($e::$v $({ $($f: $x),* })?),+]
    }};
}

/// The schemas' closed sets are exactly the models' values (their serde names, or the names
/// the models print).
#[test]
fn schema_enums_are_the_models_values() {
    use etwdump::dump::{Arch, ImageFormat as F};
    use etwdump::etl::records::RecordKind as R;
    use etwdump::etw::buffers::BufferList as B;
    use etwdump::etw::carved::Class as C;
    use etwdump::etw::findings::Severity as S;
    use etwdump::etw::providers::RegKind as Reg;
    use etwdump::etw::triage::GlobalOrder as G;
    use etwdump::kernel::context::{KernelBaseSource as KB, LocatedHow as H};
    use etwdump::report::collect::Status;
    use etwdump::symbols::builtin::corpus::CorpusMatch as M;
    use etwdump::symbols::layout::LayoutSource as L;
    use etwdump::warning::{Level, WarningKind as K};

    let printed = |v: &[&str]| v.iter().map(|x| Value::from(*x)).collect::<Vec<_>>();
    let layout_sources = every!(L::{Pdb, Isf, Builtin, BuiltinExact, BuiltinNearest});
    // serde's names are the ones `name()` prints (sessions' layout_source, symbols' source).
    assert_eq!(
        names(&layout_sources),
        printed(&layout_sources.map(|l| l.name()))
    );
    let mut dump_types: Vec<&str> = (0..=0xFFu32)
        .filter_map(|t| etwdump::dump::DumpType(t).name())
        .collect();
    dump_types.push("unknown");
    dump_types.extend(etwdump::report::info::NO_HEADER_DUMP_TYPES);
    let record = "/$defs/record/properties";
    let sets: Vec<(&str, String, Vec<Value>)> = vec![
        ("warning", "/$defs/warning/properties/kind/enum".into(), names(&every!(K::{
            Unreadable, Anomaly, NotFound, Bound, Conflict, Time, Decode, Inferred, Unconfirmed,
            Unknowable, Unsupported, OutputBound, Other,
        }))),
        ("warning", "/$defs/warning/properties/level/enum".into(), names(&every!(Level::{Warning, Note}))),
        ("collect", "/$defs/artefact/properties/status/enum".into(), names(&every!(Status::{Ok, Failed}))),
        ("buffers", format!("{record}/lists/items/enum"), names(&every!(B::{
            GlobalList, CurrentBuffer, PerCpu, BufferQueue, OverflowQueue, DirtyChain,
            BatchedBufferList, CompressionTarget, ScratchArray, UserBufferList,
            ReservedBufferSpace,
        }))),
        (
            "buffers",
            format!("{record}/window/anyOf/0/properties/global_order/enum"),
            names(&every!(G::{EndAfterBase, EndBeforeBase, Apart})),
        ),
        ("scan", format!("{record}/class/enum"), names(&every!(C::{Live, Orphaned, StaleCopy, Unknown}))),
        ("defs", "/$defs/located_how/enum".into(), names(&every!(H::{
            Symbols, Confirmed, Searched, Unconfirmed, Ambiguous, Contradicted,
        }))),
        ("defs", "/$defs/layout_source/enum".into(), names(&layout_sources)),
        (
            "check",
            format!("{record}/check/enum"),
            printed(&etwdump_check_ids::CheckId::ALL.map(|c| c.as_str())),
        ),
        (
            "check",
            "/$defs/check_run/properties/check/enum".into(),
            printed(&etwdump_check_ids::CheckId::ALL.map(|c| c.as_str())),
        ),
        ("check", format!("{record}/severity/enum"), names(&every!(S::{Alert, Notice}))),
        (
            "providers",
            format!("{record}/kind/enum"),
            printed(&every!(Reg::{Kernel, User, Unknown}).map(|r| r.name())),
        ),
        ("events", format!("{record}/header_type/enum"), printed(&every!(R::{
            System32, System64, Compact32, Compact64, Full32, Full64, Instance32, Instance64,
            Message, PerfInfo32, PerfInfo64, EventHeader32, EventHeader64,
        }).map(etwdump::decode::fields::kind_name))),
        (
            "info",
            "/properties/kernel_base/properties/source/enum".into(),
            names(&every!(KB::{ModuleList, TriageDriverList, Kdbg, CodeViewScan})),
        ),
        (
            "info",
            "/properties/memory/properties/format/enum".into(),
            printed(&every!(F::{Raw, ElfCore, VmwareVmem, VmwareEmbedded, Rdmp, Hosted}).map(|f| f.name())),
        ),
        (
            "info",
            "/properties/arch/enum".into(),
            printed(&every!(Arch::{X86 { pae: true }, X86 { pae: false }, X64, Arm64}).map(|a| a.name())),
        ),
        ("info", "/properties/dump_type/properties/name/enum".into(), printed(&dump_types)),
        ("info", "/$defs/corpus_use/properties/match/enum".into(), names(&every!(M::{Exact, Nearest}))),
        (
            "defs",
            "/$defs/clock_type_name/enum".into(),
            (0..=0xFFu64)
                .filter_map(etwdump::etw::mode::clock_type_name)
                .map(Value::from)
                .collect(),
        ),
    ];
    for (file, pointer, model) in sets {
        let file = format!("{file}.schema.json");
        assert_same_set(
            schema_enum(&file, &pointer),
            model,
            &format!("{file}#{pointer}"),
        );
    }

    // Tagged enums: the tag of each variant is one branch of the schema's oneOf, and each
    // variant as serde writes it is valid there.
    let tags = |file: &str, pointer: &str, tag: &str| -> Vec<Value> {
        schemas().files[file]
            .pointer(pointer)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["properties"][tag]["const"].clone())
            .collect()
    };
    let tagged = |all: Vec<Value>, tag: &str| all.iter().map(|v| v[tag].clone()).collect();
    {
        use etwdump::etw::ccswap::FoundBy;
        let all = names(&every!(FoundBy::{KnownOffset { offset: 0 }, Search { offset: 0 }}));
        assert_same_set(
            tags("defs.schema.json", "/$defs/found_by/oneOf", "method"),
            tagged(all.clone(), "method"),
            "found_by",
        );
        for v in all {
            let mut row = collected().examples["cswitch-row.schema.json"].clone();
            row["found_by"] = v;
            assert_valid(
                "cswitch-row.schema.json",
                &row,
                "a switch row with found_by",
            );
        }
    }
    {
        use etwdump::kernel::context::SymbolMatch;
        let all = names(&every!(SymbolMatch::{
            NoSymbols,
            Rsds,
            SymbolOffsets { checks: vec![] },
            Unverified { reason: "r".into() },
        }));
        assert_same_set(
            tags("info.schema.json", "/$defs/symbol_match/oneOf", "method"),
            tagged(all.clone(), "method"),
            "symbol match",
        );
        let mut info = collected().examples["info.schema.json"].clone();
        for v in all {
            info["symbols"]["match"] = v;
            assert_valid("info.schema.json", &info, "info with each symbol match");
        }
    }
    {
        use etwdump::symbols::layout::TypeRef;
        let void = || Box::new(TypeRef::Void);
        let all = names(&every!(TypeRef::{
            Base { name: "int".into(), size: 4, signed: true },
            Pointer { target: void() },
            Array { element: void(), count: 2 },
            Struct { name: "_S".into() },
            Union { name: "_U".into() },
            Enum { name: "_E".into(), size: 4 },
            Bitfield { base: void(), position: 1, length: 2 },
            Function,
            Void,
        }));
        assert_same_set(
            tags("symbols.schema.json", "/$defs/type/oneOf", "kind"),
            tagged(all.clone(), "kind"),
            "type kind",
        );
        let mut doc = collected().examples["symbols.schema.json"].clone();
        let fields: serde_json::Map<String, Value> = all
            .into_iter()
            .enumerate()
            .map(|(i, t)| (format!("f{i}"), serde_json::json!({"offset": i, "type": t})))
            .collect();
        doc["types"]["_T"] =
            serde_json::json!({"size": 8, "source": "pdb", "is_union": false, "fields": fields});
        assert_valid(
            "symbols.schema.json",
            &doc,
            "a type with a field of each kind",
        );
    }
}

// ---------------------------------------------------------------------------------------------
// ../shared: the real triage dumps and .etl files (never committed; skipped when absent).

/// The real triage dumps (with and without their kernel's ISF) and .etl files of ../shared
/// (TraceLogging and manifest payloads, real buffers and windows) fit the schemas too.
#[test]
fn real_dumps_and_etl_files_fit_their_schemas() {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    let mut seen = Seen::default();
    let tmp = tempfile::tempdir().unwrap();
    for name in ["triage_x64.dmp", "triage_arm64.dmp"] {
        let Some(p) = common::shared_dump(name) else {
            continue;
        };
        let d = s(&p);
        dump_commands(&mut seen, d, &[]);
        extract_and_etl(&mut seen, d, &[], &tmp.path().join(name));
    }
    let isf = shared.join("isf/5278AFF86C341677D7D7835C85B7B844-1.json.xz");
    match (common::shared_dump("triage_x64.dmp"), isf.is_file()) {
        (Some(p), true) => dump_commands(&mut seen, s(&p), &["--isf", s(&isf)]),
        (Some(_), false) => eprintln!("SKIPPED: {} is not present", isf.display()),
        _ => {}
    }
    let etl = shared.join("data/etl");
    let files: Vec<String> = [
        "AMSITrace.etl",
        "ShutdownPerfDiagLogger.etl",
        "lxcore_kernel.etl",
    ]
    .iter()
    .map(|f| etl.join(f))
    .filter(|p| {
        let there = p.is_file();
        if !there {
            eprintln!("SKIPPED: {} is not present", p.display());
        }
        there
    })
    .map(|p| s(&p).to_string())
    .collect();
    for f in &files {
        seen.json("etl --format json", &["etl", f]);
        seen.listing("etl --events", &["etl", f, "--events"]);
        seen.listing("etl --cswitch", &["etl", f, "--cswitch"]);
    }
    let total: usize = seen.per_schema.values().sum();
    eprintln!("json_schema (../shared): {total} documents and JSON Lines validated");
}
