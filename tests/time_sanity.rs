//! Impossible times are flagged, not passed silently (issue 11): a session whose ReferenceTime
//! was moved one hour ahead converts every one of its switches to after the dump's SystemTime.
//! Each such row carries `time_flag: "after_dump"`, one warning names the session, the count,
//! an example and the anchor and rate used, `--last` leaves the rows out (and says how many),
//! and the SVG chart does not draw them; the other sessions' rows are untouched.

mod common;
use common::file_offset;
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config, EtwSpec};
use std::path::Path;

#[test]
fn times_after_the_dump_are_flagged() {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-19041");
    let mut c = Config::from_fixture(&fx);
    c.etw = Some(EtwSpec::standard(c.build).with_buffers(c.build));
    let f = forge(&c);
    let opts = SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    let bytes = f.to_bytes();
    let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let intact = etwdump::report::cswitch::collect(&ctx, None);
    assert!(intact.rows.iter().all(|r| r.time_flag.is_none()));
    // The CKCL (logger 2, QPC) has CSwitch events; move its ReferenceTime.StartTime 1 h ahead.
    let l = ctx.symbols.layout("_WMI_LOGGER_CONTEXT").unwrap();
    let rt = l.field("ReferenceTime").unwrap().offset;
    let etw = f.etw.as_ref().unwrap();
    let va = etw
        .sessions()
        .find(|s| s.logger_id == 2)
        .unwrap()
        .context_va;
    let off = file_offset(&d, va + rt);
    let mut patched = bytes;
    let st = u64::from_le_bytes(patched[off..off + 8].try_into().unwrap());
    patched[off..off + 8].copy_from_slice(&(st + 36_000_000_000).to_le_bytes());
    let d = DumpFile::from_bytes(patched, OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let mut rep = etwdump::report::cswitch::collect(&ctx, None);
    let of2 = rep.rows.iter().filter(|r| r.logger_id == Some(2)).count();
    assert!(of2 > 100, "{of2}");
    for r in &rep.rows {
        if r.logger_id == Some(2) {
            assert_eq!(r.time_flag, Some("after_dump"), "{r:?}");
        } else {
            assert_eq!(r.time_flag, None, "{r:?}");
        }
    }
    let w: Vec<&String> = rep
        .warnings
        .iter()
        .map(|w| &w.message)
        .filter(|w| w.starts_with("logger 2: "))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", rep.warnings);
    assert!(
        w[0].contains(&format!(
            "{of2} of {of2} switch times fall after the dump's SystemTime"
        )) && w[0].contains("logger 2's ReferenceTime and QPC frequency 10000000 Hz"),
        "{}",
        w[0]
    );
    // The chart draws none of them.
    let svg = etwdump::render::svg::render(
        &rep.rows,
        &etwdump::render::svg::Chart {
            dump_time: d.header().system_time,
            dump: "time-sanity",
        },
    );
    let drawable = rep
        .rows
        .iter()
        .filter(|r| r.time.is_some() && r.time_flag.is_none() && r.cpu.is_some())
        .count();
    assert_eq!(svg.spans, drawable);
    assert_eq!(svg.svg.matches("<rect class=\"span\"").count(), drawable);
    // --last with a window of a day: every unflagged timed row stays, the flagged ones go.
    let keep = rep
        .rows
        .iter()
        .filter(|r| r.time.is_some() && r.time_flag.is_none())
        .count();
    rep.keep_last(864_000_000_000, Some(d.header().system_time));
    assert_eq!(rep.rows.len(), keep);
    assert!(rep
        .warnings
        .iter()
        .any(|w| w.message == format!("--last: {of2} switches whose time falls after the dump or before boot dropped (they cannot be placed in the window)")));
}
