//! The process list (PsActiveProcessHead → EPROCESS → ETHREAD) against forge dumps with
//! processes and threads laid out from the fixtures' types.h, and process names in `cswitch`.

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config, EtwSpec};
use std::path::Path;

#[test]
fn process_list_and_names_as_forged() {
    for name in ["x64-14393", "x64-17763", "x64-17763b", "x64-19041"] {
        let fx = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        let mut c = Config::from_fixture(&fx).with_processes();
        c.etw = Some(EtwSpec::standard(c.build).with_pending_ccswap());
        let f = forge(&c);
        assert!(f.processes.len() >= 4, "{name}");
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let opts = SymbolOptions {
            pdb: Some(fx.join("ntkrnlmp.pdb")),
            ..SymbolOptions::default()
        };
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let l = etwdump::kernel::processes::walk(&ctx);
        assert!(l.warnings.is_empty(), "{name}: {:?}", l.warnings);
        assert_eq!(l.processes.len(), f.processes.len(), "{name}");
        for (got, want) in l.processes.iter().zip(&f.processes) {
            assert_eq!(got.eprocess.0, want.eprocess_va, "{name}");
            assert_eq!(got.pid, want.pid, "{name}");
            assert_eq!(got.name, want.name, "{name}");
            let threads: Vec<(u64, u64)> = got.threads.iter().map(|(v, t)| (v.0, *t)).collect();
            assert_eq!(threads, want.threads, "{name}: {}", want.name);
        }
        // Every pending switch's old thread is in the list: named "image (pid)" (0 = Idle).
        let rep = etwdump::report::cswitch::collect(&ctx, None);
        let by_tid: std::collections::HashMap<u64, (u64, &str)> = f
            .processes
            .iter()
            .flat_map(|p| {
                p.threads
                    .iter()
                    .map(move |&(_, t)| (t, (p.pid, p.name.as_str())))
            })
            .collect();
        let mut named = 0;
        for r in rep.rows.iter().filter(|r| r.source == "pending") {
            let want = if r.old_tid == 0 {
                Some("Idle".to_string())
            } else {
                by_tid
                    .get(&u64::from(r.old_tid))
                    .map(|(pid, n)| format!("{n} ({pid})"))
            };
            assert_eq!(r.old_process, want, "{name}: tid {:#x}", r.old_tid);
            named += usize::from(r.old_process.is_some());
        }
        assert!(named > 10, "{name}: {named}");
    }
}

/// The lane chart: one lane per CPU with drawn switches, process names as labels/titles, an
/// axis in ms before the dump. Set ETWDUMP_SVG_OUT=FILE to keep the picture.
#[test]
fn cswitch_svg_chart() {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-14393");
    let mut c = Config::from_fixture(&fx).with_processes();
    c.etw = Some(
        EtwSpec::standard(c.build)
            .with_buffers(c.build)
            .with_pending_ccswap(),
    );
    let f = forge(&c);
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let rep = etwdump::report::cswitch::collect(&ctx, None);
    let svg = etwdump::report::svg::render(&rep.rows, c.system_time);
    if let Ok(out) = std::env::var("ETWDUMP_SVG_OUT") {
        std::fs::write(out, &svg).unwrap();
    }
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    let cpus: std::collections::BTreeSet<u64> = rep
        .rows
        .iter()
        .filter(|r| r.time.is_some())
        .filter_map(|r| r.cpu)
        .collect();
    assert!(cpus.len() >= 2);
    for cpu in &cpus {
        assert!(
            svg.contains(&format!(">CPU {cpu}</text>")),
            "lane for CPU {cpu}"
        );
    }
    let drawn = rep
        .rows
        .iter()
        .filter(|r| r.time.is_some() && r.cpu.is_some())
        .count();
    assert_eq!(
        svg.matches("<rect x=").count(),
        drawn,
        "one span per drawn switch"
    );
    assert!(
        svg.contains("<title>svchost.exe (1100)</title>")
            || svg.contains("<title>explorer.exe (4836)</title>")
    );
    assert!(svg.contains(">-0</text>"), "axis ends at the dump");
}
