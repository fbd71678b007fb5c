//! Streamed listings (issue 12): `cswitch` and `events` write their rows as they are decoded;
//! what the CLI streams must be exactly what rendering the collected rows gives, in every
//! format, and the CSV columns are the JSON fields.

mod common;

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::render::rows::{columns, to_string};
use etwdump::report::cswitch::SwitchRow;
use etwdump::report::events::EventRow;
use etwdump::report::RowFormat;

const FORMATS: [(&str, RowFormat); 4] = [
    ("table", RowFormat::Table),
    ("csv", RowFormat::Csv),
    ("json", RowFormat::Json),
    ("jsonl", RowFormat::Jsonl),
];

#[test]
fn the_cli_streams_what_the_collected_rows_render_to() {
    let fx = common::fixture("x64-19041");
    let pdb = fx.join("ntkrnlmp.pdb");
    let dir = tempfile::tempdir().unwrap();
    for seed in [1u64, 4] {
        let cfg = etwdump_forge::Config::from_fixture(&fx).with_variation(seed);
        let path = dir.path().join(format!("v{seed}.dmp"));
        etwdump_forge::forge(&cfg).write_to(&path).unwrap();
        let d = DumpFile::open(&path, OpenOptions::default()).unwrap();
        let opts = SymbolOptions {
            pdb: Some(pdb.clone()),
            ..SymbolOptions::default()
        };
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let cs = etwdump::report::cswitch::collect(&ctx, None);
        let ev = etwdump::report::events::collect(&ctx, None);
        assert!(cs.rows.len() > 50 && ev.rows.len() > 50, "seed {seed}");
        // Several CPUs, each in UTC order (the rows without a UTC time after the timed ones;
        // before issue 26 the order was by raw value, whatever the clock).
        let order = |r: &etwdump::report::cswitch::SwitchRow| {
            (r.cpu, r.filetime.is_none(), r.filetime.unwrap_or(0))
        };
        assert!(cs.rows.windows(2).all(|w| order(&w[0]) <= order(&w[1])));
        let (p, pdb_s) = (path.to_str().unwrap(), pdb.to_str().unwrap());
        for (name, fmt) in FORMATS {
            for (cmd, want, warnings) in [
                (
                    "cswitch",
                    to_string(&cs.rows, &cs.warnings, fmt, "cswitch"),
                    &cs.warnings,
                ),
                (
                    "events",
                    to_string(&ev.rows, &ev.warnings, fmt, "events"),
                    &ev.warnings,
                ),
            ] {
                let out = common::etwdump(&[cmd, p, "--pdb", pdb_s, "--format", name]);
                assert!(out.status.success(), "{cmd} {name}");
                let got = String::from_utf8(out.stdout).unwrap();
                assert_eq!(got, want, "seed {seed}: {cmd} --format {name}");
                // Rendered on 0 and on 3 other threads (ETWDUMP_RENDER_THREADS; the default is
                // the CPUs but one): the same bytes.
                for threads in ["0", "3"] {
                    let bin = std::env::var_os("ETWDUMP_TEST_BIN")
                        .unwrap_or_else(|| env!("CARGO_BIN_EXE_etwdump").into());
                    let o = std::process::Command::new(bin)
                        .args([cmd, p, "--pdb", pdb_s, "--format", name])
                        .env("ETWDUMP_RENDER_THREADS", threads)
                        .output()
                        .unwrap();
                    assert_eq!(
                        (o.stdout, o.stderr),
                        (got.clone().into_bytes(), out.stderr.clone()),
                        "seed {seed}: {cmd} --format {name}, {threads} render threads"
                    );
                }
                let err = String::from_utf8(out.stderr).unwrap();
                match fmt {
                    // JSON: the warnings are in the envelope, none on stderr.
                    RowFormat::Json => assert_eq!(err, "", "{cmd}"),
                    // JSON Lines: one JSON object per warning on stderr.
                    RowFormat::Jsonl => {
                        let lines: Vec<serde_json::Value> = err
                            .lines()
                            .map(|l| serde_json::from_str(l).unwrap())
                            .collect();
                        assert_eq!(
                            serde_json::Value::Array(lines),
                            serde_json::to_value(warnings).unwrap(),
                            "{cmd}"
                        );
                    }
                    // Text: one line per warning, the notes counted in one line (`-v` prints
                    // them).
                    _ => {
                        let notes = warnings.iter().filter(|w| w.is_note()).count();
                        assert_eq!(
                            err.lines().count(),
                            warnings.len() - notes + usize::from(notes > 0),
                            "{cmd} {name}: {err}"
                        );
                    }
                }
            }
        }
        // The envelope: version, command, records (the rows' JSON), typed warnings.
        let j: serde_json::Value = serde_json::from_str(&to_string(
            &cs.rows,
            &cs.warnings,
            RowFormat::Json,
            "cswitch",
        ))
        .unwrap();
        assert_eq!(j["format_version"], 3);
        assert_eq!(j["command"], "cswitch");
        assert_eq!(j["records"], serde_json::to_value(&cs.rows).unwrap());
        assert_eq!(j["warnings"], serde_json::to_value(&cs.warnings).unwrap());
        for w in j["warnings"].as_array().unwrap() {
            assert!(w["kind"].is_string() && w["message"].is_string(), "{w}");
        }
    }
}

#[test]
fn csv_columns_are_the_json_fields() {
    let keys =
        |v: serde_json::Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        columns::<SwitchRow>(),
        keys(serde_json::to_value(SwitchRow::default()).unwrap())
    );
    assert_eq!(
        columns::<EventRow>(),
        keys(serde_json::to_value(EventRow::default()).unwrap())
    );
    // found_by was missing from the hand-written CSV (issue 12): it is a column now.
    assert!(columns::<SwitchRow>().contains(&"found_by".to_string()));
    let csv = to_string(&[SwitchRow::default()], &[], RowFormat::Csv, "cswitch");
    assert_eq!(
        csv.lines().next().unwrap(),
        columns::<SwitchRow>().join(",")
    );
}
