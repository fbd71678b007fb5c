//! The ETW source (issue 12): one interface for every dump kind. `events` is written once
//! against it, so its rows must come from exactly the source's units, in their order, each
//! unit's records once; `cswitch` reads the same units.

mod common;

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::source::EtwSource;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge_triage, triage_scenarios};

/// The units of `ctx`'s source and the events rows: every run of rows (same origin and
/// buffer) is a unit, in the units' order. Returns the number of units.
fn check(ctx: &KernelContext<'_>, what: &str) -> usize {
    let src = EtwSource::open(ctx, None);
    let ev = etwdump::report::events::collect(ctx, None);
    let mut runs: Vec<(&str, Option<String>)> = Vec::new();
    for r in &ev.rows {
        let k = (r.source, r.buffer.clone());
        if runs.last() != Some(&k) {
            runs.push(k);
        }
    }
    let units: Vec<(&str, Option<String>)> = src
        .units()
        .map(|u| (u.origin, u.address.map(|a| a.to_string())))
        .collect();
    // Units without records (or whose bytes are gone) give no rows.
    let mut i = 0;
    for r in &runs {
        while i < units.len() && &units[i] != r {
            i += 1;
        }
        assert!(
            i < units.len(),
            "{what}: rows of {r:?} come from no unit, or out of order"
        );
    }
    for u in src.units() {
        assert!(u.first_record <= u.valid, "{what}: {u:?}");
    }
    // The warnings of `events` start with the source's.
    assert!(ev.warnings.starts_with(src.warnings()), "{what}");
    check_buffers_and_extract(ctx, &src, &ev.rows, what);
    src.units().count()
}

/// `buffers` lists every unit the source found (skipped ones too), in order, each with the
/// records `events` lists from it; `extract` writes, per logger, exactly the records `events`
/// lists for it (when no unit of the logger was left out for its size or the output bound).
fn check_buffers_and_extract(
    ctx: &KernelContext<'_>,
    src: &EtwSource<'_, '_>,
    rows: &[etwdump::report::events::EventRow],
    what: &str,
) {
    let b = etwdump::report::buffers::analyse(ctx, None);
    assert_eq!(b.rows.len(), src.all_units().len(), "{what}");
    let mut per_unit = std::collections::HashMap::new();
    for r in rows {
        let key = (r.source, r.buffer.clone(), r.logger_id);
        *per_unit.entry(key).or_insert(0usize) += 1;
    }
    for (row, u) in b.rows.iter().zip(src.all_units()) {
        assert_eq!(row.source, u.origin, "{what}");
        assert_eq!(row.address, u.address.map(|a| a.to_string()), "{what}");
        assert_eq!(row.file_offset, u.file_offset, "{what}");
        assert_eq!(row.session_id, u.logger_id, "{what}");
        if u.skip.is_some() {
            assert!(
                row.duplicate_of.is_some() || !row.warnings.is_empty() || row.compressed,
                "{what}: a skipped unit without a reason: {row:?}"
            );
        } else if u.address.is_some() {
            let key = (u.origin, row.address.clone(), u.logger_id);
            assert_eq!(
                per_unit.get(&key).copied().unwrap_or(0),
                row.record_count,
                "{what}: {key:?}"
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let m = etwdump::report::extract::extract(ctx, "t.dmp", dir.path(), None, false).unwrap();
    let mut checked = 0;
    for s in &m.sessions {
        let benign = |r: &str| {
            !(r.contains("BufferSize") || r.contains("bound") || r.contains("does not fit"))
        };
        if !s.skipped.iter().all(|x| benign(&x.reason)) {
            continue;
        }
        let in_file: usize = s
            .buffer_list
            .iter()
            .filter(|e| !matches!(e.source, "pending_ccswap" | "header" | "rundown"))
            .map(|e| e.records)
            .sum();
        let listed = rows
            .iter()
            .filter(|r| r.logger_id == Some(s.logger_id))
            .count();
        assert_eq!(in_file, listed, "{what}: logger {}", s.logger_id);
        let bytes = std::fs::read(dir.path().join(&s.file)).unwrap();
        assert_eq!(bytes.len() as u64, s.bytes, "{what}");
        let etl = etwdump::etl::reader::read(&bytes);
        assert!(etl.problem.is_none(), "{what}: {:?}", etl.problem);
        checked += 1;
    }
    assert_eq!(
        checked > 0,
        !m.sessions.is_empty(),
        "{what}: no session checked"
    );
}

#[test]
fn events_rows_come_from_the_source_units_of_every_dump_kind() {
    // Memory: a varied dump of the 19041 fixture.
    let fx = common::fixture("x64-19041");
    let dir = tempfile::tempdir().unwrap();
    let cfg = etwdump_forge::Config::from_fixture(&fx).with_variation(3);
    let path = dir.path().join("v.dmp");
    etwdump_forge::forge(&cfg).write_to(&path).unwrap();
    let d = DumpFile::open(&path, OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let n = check(&ctx, "memory");
    assert!(n > 0);
    let src = EtwSource::open(&ctx, None);
    assert!(src
        .units()
        .all(|u| u.origin == "memory" && u.address.is_some()));
    assert!(src.memory().is_some());
    // Triage: every forge scenario.
    let mut triage_units = 0;
    for spec in triage_scenarios() {
        let f = forge_triage(&spec);
        let sc = f.expected.scenario.clone();
        let isf = dir.path().join(format!("{sc}.json"));
        std::fs::write(&isf, &f.isf_json).unwrap();
        let d = DumpFile::from_bytes(
            f.bytes.clone(),
            OpenOptions {
                allow_truncated: true,
            },
        )
        .unwrap();
        let ctx = KernelContext::open(
            &d,
            &SymbolOptions {
                isf: Some(isf),
                ..SymbolOptions::default()
            },
        )
        .unwrap();
        triage_units += check(&ctx, &sc);
        let src = EtwSource::open(&ctx, None);
        assert!(src.memory().is_none(), "{sc}");
        for u in src.units() {
            assert!(
                ["current_buffer", "errlog_tail", "secondary_data"].contains(&u.origin),
                "{sc}: {u:?}"
            );
            // Windows keep their buffer address; secondary-data buffers their file offset.
            match u.origin {
                "secondary_data" => assert!(u.address.is_none() && u.file_offset.is_some()),
                _ => assert!(u.address.is_some()),
            }
        }
    }
    assert!(triage_units > 10, "{triage_units}");
}
