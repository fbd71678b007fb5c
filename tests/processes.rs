//! The process list (PsActiveProcessHead → EPROCESS → ETHREAD) against forge dumps with
//! processes and threads laid out from the fixtures' types.h, and process names in `cswitch`.

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config, EtwSpec};
use std::path::Path;

mod common;

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
            assert_eq!(got.eprocess.get(), want.eprocess_va, "{name}");
            assert_eq!(got.pid, want.pid, "{name}");
            assert_eq!(got.name, want.name, "{name}");
            let threads: Vec<(u64, u64)> = got.threads.iter().map(|(v, t)| (v.get(), *t)).collect();
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
            assert_eq!(
                r.old_process.as_ref().map(|p| p.raw().to_string()),
                want,
                "{name}: tid {:#x}",
                r.old_tid
            );
            named += usize::from(r.old_process.is_some());
        }
        assert!(named > 10, "{name}: {named}");
        // The last switch of each open pending batch: its new thread is KPRCB.CurrentThread
        // (etw-internals.md §4.3); every other new thread is the next switch's old thread.
        assert_eq!(f.current_threads.len(), f.kprcbs.len(), "{name}");
        let etw = f.etw.as_ref().unwrap();
        let mut checked = 0;
        let open = |p: &&etwdump_forge::ExpectedPending| {
            p.batch.as_ref().is_some_and(|b| !b.switches.is_empty())
        };
        for p in etw.pending.iter().filter(open) {
            let rows: Vec<_> = rep
                .rows
                .iter()
                .filter(|r| r.source == "pending" && r.cpu == Some(u64::from(p.cpu)))
                .filter(|r| p.clock.is_none() || r.clock == p.clock.map(u64::from))
                .collect();
            let n = p.batch.as_ref().unwrap().switches.len();
            assert_eq!(rows.len(), n, "{name}: CPU {}", p.cpu);
            let tid = f.current_threads[p.cpu as usize].1;
            assert_eq!(
                rows[n - 1].new_tid,
                Some(tid as u32),
                "{name}: CPU {}",
                p.cpu
            );
            assert_eq!(
                rows[n - 1]
                    .new_process
                    .as_ref()
                    .map(|p| p.raw().to_string()),
                by_tid.get(&tid).map(|(pid, n)| format!("{n} ({pid})")),
                "{name}"
            );
            for w in rows.windows(2) {
                assert_eq!(w[0].new_tid, Some(w[1].old_tid), "{name}");
            }
            checked += 1;
        }
        assert!(checked >= 3, "{name}: {checked}");
    }
}

/// The 14393 fixture with processes, buffers and pending blocks.
fn forge_14393() -> (std::path::PathBuf, Config, etwdump_forge::Forged) {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-14393");
    let mut c = Config::from_fixture(&fx).with_processes();
    c.etw = Some(
        EtwSpec::standard(c.build)
            .with_buffers(c.build)
            .with_pending_ccswap(),
    );
    let f = forge(&c);
    (fx, c, f)
}

/// The lane chart: one lane per CPU with drawn switches, process names as labels/titles, an
/// axis in ms before the dump. Set ETWDUMP_SVG_OUT=FILE to keep the picture.
#[test]
fn cswitch_svg_chart() {
    let (fx, c, f) = forge_14393();
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let rep = etwdump::report::cswitch::collect(&ctx, None);
    let svg = etwdump::render::svg::render(
        &rep.rows,
        &etwdump::render::svg::Chart {
            dump_time: c.system_time,
            dump: "forge-14393.dmp",
        },
    )
    .svg;
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
    // Rows whose time falls after the dump or before boot are flagged and not drawn.
    let drawn = rep
        .rows
        .iter()
        .filter(|r| r.time.is_some() && r.time_flag.is_none() && r.cpu.is_some())
        .count();
    assert_eq!(
        svg.matches("<rect class=\"span\"").count(),
        drawn,
        "one span per drawn switch"
    );
    assert!(
        svg.contains("<title>svchost.exe (1100)</title>")
            || svg.contains("<title>explorer.exe (4836)</title>")
    );
    assert!(
        svg.contains(">forge-14393.dmp: context switches on "),
        "title"
    );
    assert!(svg.contains(">-0</text>"), "axis ends at the dump");
}

/// `cswitch --format jsonl` (Timesketch fields) and `--last DURATION` through the CLI.
#[test]
fn cswitch_jsonl_and_last() {
    let (fx, _, f) = forge_14393();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.dmp");
    std::fs::write(&path, f.to_bytes()).unwrap();
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let pdb = fx.join("ntkrnlmp.pdb");
    let opts = SymbolOptions {
        pdb: Some(pdb.clone()),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let rep = etwdump::report::cswitch::collect(&ctx, None);
    let (p, pdb) = (path.to_str().unwrap(), pdb.to_str().unwrap());
    let run = |extra: &[&str]| -> Vec<serde_json::Value> {
        let mut args = vec!["cswitch", p, "--pdb", pdb, "--format", "jsonl"];
        args.extend_from_slice(extra);
        let out = common::etwdump(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let all = run(&[]);
    assert_eq!(all.len(), rep.rows.len());
    for (j, r) in all.iter().zip(&rep.rows) {
        // The raw clock under raw_timestamp; Timesketch's timestamp: µs since 1970.
        assert_eq!(j["raw_timestamp"], r.timestamp);
        let ft = r.filetime.unwrap();
        assert_eq!(
            j["timestamp"].as_i64(),
            Some((ft as i64 - 116_444_736_000_000_000) / 10)
        );
        assert_eq!(j["old_tid"], r.old_tid);
        assert_eq!(j["datetime"].as_str(), r.time.as_deref());
        assert_eq!(j["timestamp_desc"], "Context switch");
        let m = j["message"].as_str().unwrap();
        let cpu = r.cpu.unwrap();
        assert!(m.starts_with(&format!("CPU {cpu}: ")), "{m}");
        match &r.old_process {
            Some(p) => assert!(m.contains(&format!("{p} tid {}", r.old_tid)), "{m}"),
            None => assert!(m.contains(&format!(": tid {} ->", r.old_tid)), "{m}"),
        }
        assert!(m.ends_with(&format!("[{}]", r.source)), "{m}");
    }
    // --last: the switches no older than the window before the dump's SystemTime.
    // (rows whose time is flagged as after the dump or before boot are left out of --last)
    let mut times: Vec<u64> = rep
        .rows
        .iter()
        .filter(|r| r.time_flag.is_none())
        .filter_map(|r| r.filetime)
        .collect();
    times.sort_unstable();
    assert!(times.len() > 10);
    let end = d.header().system_time;
    let pivot = times[times.len() / 2];
    assert!(pivot <= end);
    let window = end - pivot;
    let want = times.iter().filter(|&&t| t >= pivot).count();
    assert!(want < rep.rows.len() && want > 0);
    let last = run(&["--last", &format!("{}ns", window * 100)]);
    assert_eq!(last.len(), want);
    let last_one = run(&["--last", &format!("{}ns", (window - 1) * 100)]);
    assert_eq!(last_one.len(), times.iter().filter(|&&t| t > pivot).count());
    let bad = common::etwdump(&["cswitch", p, "--pdb", pdb, "--last", "5 parsecs"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown duration unit"));
}
