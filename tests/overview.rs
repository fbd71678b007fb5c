//! The first minute (issue 16): the committed ETW sample is the forge's, and `overview` on it
//! gives what `sessions`, `buffers` and `cswitch` give, in one screen.

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sample() -> PathBuf {
    repo().join("tests/data/sample-x64-etw.dmp")
}

fn pdb() -> PathBuf {
    repo().join("tests/fixtures/x64-19041/ntkrnlmp.pdb")
}

/// The committed sample is exactly `forge --sample-etw` (regenerate it when the forge changes).
#[test]
fn committed_etw_sample_is_the_forge_sample() {
    let committed = std::fs::read(sample()).unwrap();
    let f = forge(&Config::sample_etw());
    assert!(
        committed == f.to_bytes(),
        "tests/data/sample-x64-etw.dmp differs from `forge --sample-etw`: regenerate it"
    );
    // What the first README command must have to show: sessions, buffers, pending batches,
    // processes.
    let etw = f.etw.as_ref().unwrap();
    assert!(
        etw.pending.len() >= 3,
        "{} pending blocks",
        etw.pending.len()
    );
    assert!(f.processes.len() >= 4);
    assert!(committed.len() < 1 << 20, "{} bytes", committed.len());
}

/// `overview` = the other commands' facts: the sessions (ids, names, clocks, BufferSize,
/// events lost, start) of `sessions`, the buffers per session of `buffers`, the switch count
/// by source and each CPU's last switches of `cswitch`; the CLI prints them with the dump line.
#[test]
fn overview_is_what_the_other_commands_say() {
    let d = DumpFile::open(&sample(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb()),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let o = etwdump::report::overview::Overview::build(&ctx, 5).unwrap();
    // Sessions.
    let list = etwdump::etw::loggers::list_sessions(&ctx);
    assert_eq!(o.sessions.len(), list.sessions.len());
    assert_eq!(o.sessions.len(), 6);
    let buffers = etwdump::report::buffers::analyse(&ctx, None);
    for (a, b) in o.sessions.iter().zip(&list.sessions) {
        assert_eq!(a.logger_id, Some(b.logger_id));
        assert_eq!(a.name, b.name);
        assert_eq!(a.clock.as_deref(), b.clock_type_name);
        assert_eq!(a.buffer_size, b.buffer_size);
        assert_eq!(a.events_lost, b.events_lost);
        assert_eq!(a.start_time, b.start_time);
        let n = buffers
            .rows
            .iter()
            .filter(|r| r.session_id == Some(b.logger_id))
            .count();
        assert_eq!(a.buffers_found, n, "logger {}", b.logger_id);
    }
    assert_eq!(
        o.sessions[0].name.as_ref().map(|n| n.raw()),
        Some("NT Kernel Logger")
    );
    // Switches.
    let all = etwdump::report::cswitch::collect(&ctx, None);
    assert_eq!(o.switches, all.rows.len() as u64);
    let mut by_source: BTreeMap<&str, u64> = BTreeMap::new();
    let mut per_cpu: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for r in &all.rows {
        *by_source.entry(r.source).or_default() += 1;
        per_cpu.entry(r.cpu.unwrap()).or_default().push(r.timestamp);
    }
    assert_eq!(
        o.switches_by_source
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect::<BTreeMap<_, _>>(),
        by_source
    );
    assert_eq!(
        by_source.len(),
        3,
        "pending, batch and event: {by_source:?}"
    );
    assert_eq!(o.last_switches.len(), per_cpu.len());
    for (cpu, ts) in &per_cpu {
        let last: Vec<u64> = o.last_switches[cpu].iter().map(|r| r.timestamp).collect();
        assert_eq!(last, ts[ts.len().saturating_sub(5)..].to_vec(), "CPU {cpu}");
        assert!(o.last_switches[cpu].iter().all(|r| r.time.is_some()));
    }
    // The CLI: one screen with the dump line, the sessions and the switches.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_etwdump"))
        .args(["overview"])
        .arg(sample())
        .arg("--pdb")
        .arg(pdb())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(
            "Dump: bitmap full (x64), build 19041, 4 CPUs, taken 2021-02-21T01:38:22.9877657Z"
        ),
        "{text}"
    );
    assert!(text.contains("ETW sessions (6):"), "{text}");
    assert!(text.contains("Circular Kernel Context Logger"), "{text}");
    assert!(
        text.contains(&format!("Context switches: {} (", all.rows.len())),
        "{text}"
    );
    assert!(
        text.lines().count() < 60,
        "one screen: {} lines",
        text.lines().count()
    );
}

mod common;

/// On the real triage dump (skipped when ../shared is absent): the saved sessions, the symbol
/// match by global RVAs (the dump lacks the CodeView page), no switches, said so.
#[test]
fn overview_of_the_real_triage_dump() {
    let Some(dump) = common::shared_dump("triage_x64.dmp") else {
        return;
    };
    let isf = repo().join("../shared/isf/5278AFF86C341677D7D7835C85B7B844-1.json.xz");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_etwdump"))
        .arg("overview")
        .arg(&dump)
        .arg("--isf")
        .arg(&isf)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("Dump: triage (x64), build 19041, 16 CPUs, taken 2021-02-21T01:38:22.9877657Z; symbols: isf, matched by 7 of 7 global RVAs"),
        "{text}"
    );
    assert!(text.contains("ETW sessions (4):"), "{text}");
    for name in [
        "EventLog-System",
        "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace",
        "WiFiSession",
    ] {
        assert!(text.contains(name), "{name}: {text}");
    }
    assert!(text.contains("Context switches: none found"), "{text}");
}

/// `extract` on the ETW sample: each file's header event (SYSTEM_TRACE_HEADER) carries the
/// session's start in its own clock, as the forge wrote the logger's ReferenceTime
/// (StartPerfClock; StartTime for the system-time clock), no longer zero.
#[test]
fn extracted_header_events_carry_the_start_time() {
    use etwdump_forge::ExpectedSlot;
    let f = forge(&Config::sample_etw());
    let etw = f.etw.as_ref().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_etwdump"))
        .arg("extract")
        .arg(sample())
        .arg("--pdb")
        .arg(pdb())
        .arg("-o")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut checked = 0;
    for s in etw.slots.iter().filter_map(|s| match s {
        ExpectedSlot::Session(s) => Some(s),
        _ => None,
    }) {
        let Some(rt) = &s.reference_time else {
            continue;
        };
        let Some(file) = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with(&format!("{:02}-", s.logger_id)) && n.ends_with(".etl")
                })
            })
        else {
            continue;
        };
        let b = std::fs::read(&file).unwrap();
        let ts = u64::from_le_bytes(b[0x48 + 0x10..0x48 + 0x18].try_into().unwrap());
        let want = if s.clock_type == Some(2) {
            rt.start_time
        } else {
            rt.start_perf_clock
        };
        assert_eq!(ts, want, "{}", file.display());
        assert_ne!(ts, 0);
        checked += 1;
    }
    assert!(checked >= 4, "{checked} files checked");
}
