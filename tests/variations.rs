//! Memory etwdump was never built against (issue 11): forge dumps that vary what the reference
//! leaves open (tests/forge src/variation.rs, written from the reference, not from the
//! reader): session counts one past their maxima or wild, free-slot encodings (NULL, 1,
//! ptr|1), each session's clock, EtwCPUSpeedInMHz absent with KPRCB.MHz present, raw counters
//! that do not start at 0 at boot, pending-block pointer groups at undocumented EtwSupport
//! offsets (x64 and x86), per-CPU current buffers reachable only by search.
//!
//! For every fixture kernel (every major build of the layout corpus, and x86) and many seeds:
//! every session is listed and every invalid slot rejected, every buffer found, every switch
//! decoded with the forge's values, and every switch whose clock is knowable timed to exactly
//! the forge's UTC time. `VARIATION_SEEDS=N` runs N seeds per fixture (default 20); the per-build
//! figures are printed (`--nocapture`).

mod common;
use common::{fixture, pdb_of};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::buffers::find_buffers;
use etwdump::etw::loggers::list_sessions;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config, ExpectedSlot, ExpectedSwitch, Forged};
use std::collections::{BTreeMap, HashMap};

use common::FIXTURES;

fn seeds() -> u64 {
    std::env::var("VARIATION_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// Counts per build: (expected, recovered).
#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    sessions: (usize, usize),
    rejected: (usize, usize),
    buffers: (usize, usize),
    /// Per-CPU current buffers found as such.
    per_cpu: (usize, usize),
    switches: (usize, usize),
    /// Switches whose clock is knowable, and those timed exactly.
    timed: (usize, usize),
    /// Pending blocks found by search whose clock was inferred right (decidable ones).
    inferred: (usize, usize),
    /// Search-found blocks whose clock cannot be decided from the dump (a raw-clock kernel
    /// session, or a rival clock whose rate is unknown): left unknown, and so reported.
    undecidable: usize,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        let f = |a: &mut (usize, usize), b: (usize, usize)| {
            a.0 += b.0;
            a.1 += b.1;
        };
        f(&mut self.sessions, o.sessions);
        f(&mut self.rejected, o.rejected);
        f(&mut self.buffers, o.buffers);
        f(&mut self.per_cpu, o.per_cpu);
        f(&mut self.switches, o.switches);
        f(&mut self.timed, o.timed);
        f(&mut self.inferred, o.inferred);
        self.undecidable += o.undecidable;
    }
}

/// Whether the forge's clock facts let a reader know the rate of `clock` (the documented
/// sources: KUSER_SHARED_DATA.QpcFrequency or two QPC sessions with ReferenceTimes ≥ 1 s apart;
/// KPRCB.MHz, which the variation forge always sets).
fn rate_knowable(f: &Forged, clock: u32) -> bool {
    let etw = f.etw.as_ref().unwrap();
    let m = etw.clock_model.as_ref().unwrap();
    match clock {
        0 => false,
        2 | 3 => true,
        1 => {
            if m.kuser_qpc_frequency {
                return true;
            }
            let mut starts: Vec<u64> = etw
                .sessions()
                .filter(|s| s.clock_type == Some(1))
                .filter_map(|s| s.reference_time.as_ref().map(|r| r.start_time))
                .collect();
            starts.sort_unstable();
            starts.len() >= 2 && starts[starts.len() - 1] - starts[0] >= 10_000_000
        }
        _ => false,
    }
}

fn check(name: &str, seed: u64) -> Tally {
    let mut t = Tally::default();
    let c = Config::from_fixture(&fixture(name)).with_variation(seed);
    let f = forge(&c);
    let w = format!("{name} seed {seed}");
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(pdb_of(name)),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let etw = f.etw.as_ref().unwrap();

    // Sessions, free and rejected slots.
    let list = list_sessions(&ctx);
    let array = list
        .array
        .clone()
        .unwrap_or_else(|| panic!("{w}: no logger array: {:?}", list.warnings));
    for (slot, e) in etw.slots.iter().enumerate() {
        let slot = slot as u64;
        let listed = list.sessions.iter().find(|s| s.logger_id == slot);
        let rejected = list.rejected.iter().find(|r| r.slot == slot);
        match e {
            ExpectedSlot::Free { value } => {
                assert!(
                    listed.is_none() && rejected.is_none(),
                    "{w}: free slot {slot} ({value:#x}) listed or rejected"
                );
            }
            ExpectedSlot::Invalid { va, why } => {
                t.rejected.0 += 1;
                assert!(listed.is_none(), "{w}: invalid slot {slot} ({why}) listed");
                if rejected.is_some_and(|r| r.value.get() == *va) {
                    t.rejected.1 += 1;
                }
            }
            ExpectedSlot::Session(s) => {
                t.sessions.0 += 1;
                let Some(g) = listed else {
                    panic!(
                        "{w}: session {slot} {:?} (odd: {:?}) not listed: {:?}",
                        s.name, s.odd_fields, rejected
                    );
                };
                t.sessions.1 += 1;
                assert_eq!(g.address.get(), s.context_va, "{w}: logger {slot}");
                assert_eq!(
                    g.name.as_ref().map(|n| n.raw()),
                    s.name.as_deref(),
                    "{w}: logger {slot}"
                );
                assert_eq!(g.clock_type, s.clock_type.map(u64::from), "{w}: {slot}");
                assert_eq!(
                    g.number_of_buffers,
                    Some(u64::from(s.number_of_buffers)),
                    "{w}: {slot}"
                );
                for odd in &s.odd_fields {
                    if odd == "NumberOfBuffers" || odd == "MinimumBuffers" {
                        assert!(
                            g.anomalies.iter().any(|a| a.field == odd.as_str()),
                            "{w}: logger {slot}: no anomaly for {odd}: {:?}",
                            g.anomalies
                        );
                    }
                }
                // Buffers: every buffer the forge linked is found.
                let found = find_buffers(&ctx, &array, g);
                let got: std::collections::HashSet<u64> =
                    found.buffers.iter().map(|b| b.address.get()).collect();
                // Per-CPU current buffers (reachable only by search on most builds): found
                // as the current buffer of the CPU the forge put them on.
                for d in s
                    .buffer_details
                    .iter()
                    .filter(|d| d.lists.iter().any(|l| l == "per_cpu"))
                {
                    t.per_cpu.0 += 1;
                    let fb = found.buffers.iter().find(|b| b.address.get() == d.address);
                    if fb.is_some_and(|b| {
                        b.lists.contains(&etwdump::etw::buffers::BufferList::PerCpu)
                            && b.cpu == Some(u64::from(d.processor))
                    }) {
                        t.per_cpu.1 += 1;
                    } else {
                        panic!(
                            "{w}: logger {slot}: per-CPU buffer {:#x} of CPU {} not found as such: {:?}; {:?}",
                            d.address,
                            d.processor,
                            fb.map(|b| (&b.lists, b.cpu)),
                            found.warnings
                        );
                    }
                }
                for b in &s.buffers {
                    t.buffers.0 += 1;
                    if got.contains(b) {
                        t.buffers.1 += 1;
                    } else {
                        panic!(
                            "{w}: logger {slot}: buffer {b:#x} not found: {:?}",
                            found.warnings
                        );
                    }
                }
            }
        }
    }
    assert_eq!(t.rejected.0, t.rejected.1, "{w}: {:?}", list.rejected);

    // Pending blocks: the clock of every search-found block is inferred right.
    let facts = etwdump::etw::clock::ClockFacts::gather(&ctx, &list.sessions);
    let mut pending = etwdump::etw::ccswap::find_pending(&ctx);
    etwdump::etw::ccswap::infer_clocks(&ctx, &facts, &list.sessions, &mut pending);
    // The clock a block may have: those of the kernel sessions (logger 0 / NT Kernel Logger /
    // SYSTEM_LOGGER_MODE). A block's timestamps exclude a candidate only when its rate is
    // knowable; a raw (0) candidate can never be excluded.
    let kernel_clocks: std::collections::BTreeSet<u32> = etw
        .sessions()
        .filter(|s| {
            s.logger_id == 0
                || s.name.as_deref() == Some("NT Kernel Logger")
                || s.logger_mode & 0x0200_0000 != 0
        })
        .filter_map(|s| s.clock_type)
        .collect();
    let mut undecidable = std::collections::HashSet::new();
    for e in &etw.pending {
        let g = pending
            .blocks
            .iter()
            .find(|b| b.block.get() == e.block_va)
            .unwrap_or_else(|| {
                panic!(
                    "{w}: pending block {:#x} (CPU {}) not found: {:?}",
                    e.block_va, e.cpu, pending.warnings
                )
            });
        assert_eq!(g.pointer.get(), e.pointer_va, "{w}");
        if !e.documented_offset && e.batch.is_some() {
            t.inferred.0 += 1;
            if g.clock == Some(u64::from(e.true_clock)) {
                t.inferred.1 += 1;
            } else {
                assert_eq!(
                    g.clock, None,
                    "{w}: block {:#x} (CPU {}, clock {}) given a WRONG clock: {}",
                    e.block_va, e.cpu, e.true_clock, g.clock_how
                );
                // Unknown is right only when another candidate cannot be excluded.
                let rival = kernel_clocks.iter().any(|&c| {
                    c != e.true_clock && (c == 0 || e.true_clock == 0 || !rate_knowable(&f, c))
                });
                assert!(
                    rival,
                    "{w}: block {:#x} (CPU {}, clock {}, kernel clocks {kernel_clocks:?}): clock not inferred: {}",
                    e.block_va, e.cpu, e.true_clock, g.clock_how
                );
                undecidable.insert(e.block_va);
                t.inferred.0 -= 1;
                t.undecidable += 1;
            }
        }
    }

    // Switches: every one decoded, and timed exactly when its clock is knowable.
    let rep = etwdump::report::cswitch::collect(&ctx, None);
    let mut rows: HashMap<(&str, u64, u64, u32), Vec<&etwdump::report::cswitch::SwitchRow>> =
        HashMap::new();
    for r in &rep.rows {
        rows.entry((r.source, r.cpu.unwrap_or(u64::MAX), r.timestamp, r.old_tid))
            .or_default()
            .push(r);
    }
    let mut used: HashMap<(&str, u64, u64, u32), usize> = HashMap::new();
    for e in &etw.switches {
        t.switches.0 += 1;
        let key = (
            e.source.as_str(),
            u64::from(e.cpu),
            e.raw_timestamp,
            e.old_tid,
        );
        let n = used.entry(key).or_default();
        let Some(r) = rows.get(&key).and_then(|v| v.get(*n)) else {
            panic!("{w}: switch not recovered: {e:?}");
        };
        *n += 1;
        t.switches.1 += 1;
        check_fields(&w, e, r);
        let knowable = e.filetime.is_some()
            && rate_knowable(&f, e.clock_type)
            && (e.source != "pending"
                || (etw.sessions().any(|s| s.clock_type == Some(e.clock_type))
                    && !undecidable.contains(&e.container_va)));
        if knowable {
            t.timed.0 += 1;
            assert_eq!(
                r.filetime, e.filetime,
                "{w}: {} switch on CPU {} clock {} ts {:#x}: time {:?}, warnings {:?}",
                e.source, e.cpu, e.clock_type, e.raw_timestamp, r.time, rep.warnings
            );
            assert_eq!(r.time_flag, None, "{w}");
            t.timed.1 += 1;
        } else if let Some(ft) = r.filetime {
            // Timed although the test thinks it cannot be: it must still be right.
            assert_eq!(Some(ft), e.filetime, "{w}: {e:?}");
        }
    }
    t
}

fn check_fields(w: &str, e: &ExpectedSwitch, r: &etwdump::report::cswitch::SwitchRow) {
    let w = format!(
        "{w}: {} switch CPU {} ts {:#x}",
        e.source, e.cpu, e.raw_timestamp
    );
    if let (Some(a), Some(b)) = (e.new_tid, r.new_tid) {
        assert_eq!(a, b, "{w}: new tid");
    }
    if e.new_tid.is_some() {
        assert!(r.new_tid.is_some(), "{w}: new tid missing");
    }
    assert_eq!(r.logger_id, e.logger_id.map(u64::from), "{w}: logger");
    if e.old_tid != 0 {
        assert_eq!(r.old_priority, Some(e.old_priority as i8), "{w}: priority");
        // A lite compact packet carries no wait time (it means "at most one tick"): None.
        if let Some(wt) = r.new_thread_wait_time {
            assert_eq!(wt, e.new_thread_wait_time, "{w}: wait time");
        } else {
            assert_ne!(e.source, "event", "{w}: wait time missing");
        }
    }
}

#[test]
fn every_session_buffer_and_switch_on_varied_memory() {
    let n = seeds();
    let mut per_build: BTreeMap<&str, Tally> = BTreeMap::new();
    for &name in FIXTURES {
        for seed in 0..n {
            let t = check(name, seed);
            per_build.entry(name).or_default().add(&t);
        }
    }
    println!("variation forge, {n} seeds per fixture (expected / recovered):");
    println!(
        "{:<11} {:>13} {:>13} {:>13} {:>11} {:>15} {:>15} {:>15} {:>12}",
        "fixture",
        "sessions",
        "rejected",
        "buffers",
        "per-CPU",
        "switches",
        "timed",
        "clock inferred",
        "undecidable"
    );
    for (name, t) in &per_build {
        let p = |x: (usize, usize)| format!("{}/{}", x.1, x.0);
        println!(
            "{:<11} {:>13} {:>13} {:>13} {:>11} {:>15} {:>15} {:>15} {:>12}",
            name,
            p(t.sessions),
            p(t.rejected),
            p(t.buffers),
            p(t.per_cpu),
            p(t.switches),
            p(t.timed),
            p(t.inferred),
            t.undecidable
        );
    }
    let total = per_build.values().fold(Tally::default(), |mut a, t| {
        a.add(t);
        a
    });
    assert_eq!(total.inferred.0, total.inferred.1, "{total:?}");
    assert!(total.switches.0 > 1000 && total.timed.0 > 1000, "{total:?}");
}

/// Without symbols (the built-in corpus layouts, the KDBG route), the same varied dumps give
/// the same sessions (every field but the layout source and the identity evidence, which on
/// the KDBG route lacks the silo state) and the same switches with the same times.
#[test]
fn no_symbols_on_varied_memory_equals_the_pdb() {
    let n = seeds();
    for &name in FIXTURES.iter().filter(|n| n.starts_with("x64")) {
        for seed in 0..n {
            let w = format!("{name} seed {seed}");
            let f = forge(&Config::from_fixture(&fixture(name)).with_variation(seed));
            let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
            let with = KernelContext::open(
                &d,
                &SymbolOptions {
                    pdb: Some(pdb_of(name)),
                    ..SymbolOptions::default()
                },
            )
            .unwrap();
            let without = KernelContext::open(&d, &SymbolOptions::default()).unwrap();
            let (a, b) = (list_sessions(&with), list_sessions(&without));
            assert_eq!(a.sessions.len(), b.sessions.len(), "{w}: {:?}", b.warnings);
            for (x, y) in a.sessions.iter().zip(&b.sessions) {
                let mut y = y.clone();
                y.layout_source = x.layout_source;
                y.identity = x.identity.clone();
                assert_eq!(x, &y, "{w}: logger {}", x.logger_id);
            }
            let key = |r: &etwdump::report::cswitch::SwitchRow| {
                (
                    r.cpu,
                    r.timestamp,
                    r.old_tid,
                    r.new_tid,
                    r.time.clone(),
                    r.source,
                )
            };
            let ra: Vec<_> = etwdump::report::cswitch::collect(&with, None)
                .rows
                .iter()
                .map(key)
                .collect();
            let rb = etwdump::report::cswitch::collect(&without, None);
            let rb_rows: Vec<_> = rb.rows.iter().map(key).collect();
            assert_eq!(ra.len(), rb_rows.len(), "{w}: {:?}", rb.warnings);
            assert!(
                ra == rb_rows,
                "{w}: switches differ without symbols: {:?}",
                rb.warnings
            );
        }
    }
}

/// `extract` writes the CPU speed and the QPC frequency it found into every ETL header
/// (TRACE_LOGFILE_HEADER after the 0x48-byte buffer header and the 0x20-byte event header:
/// CpuSpeedInMHz at +0x34, PerfFreq at +0xF8/+0xF0 + 8; etw-internals.md §6.1), whatever
/// source they came from: KPRCB.MHz when EtwCPUSpeedInMHz is absent (every fixture), the
/// QPC frequency from KUSER_SHARED_DATA or two sessions' ReferenceTimes.
#[test]
fn etl_headers_carry_the_clock_rates() {
    let mut cycle_files = 0;
    for &name in FIXTURES {
        for seed in 0..seeds().min(5) {
            let w = format!("{name} seed {seed}");
            let f = forge(&Config::from_fixture(&fixture(name)).with_variation(seed));
            let m = f.etw.as_ref().unwrap().clock_model.clone().unwrap();
            let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
            let opts = SymbolOptions {
                pdb: Some(pdb_of(name)),
                ..SymbolOptions::default()
            };
            let ctx = KernelContext::open(&d, &opts).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let man =
                etwdump::report::extract::extract(&ctx, "d.dmp", dir.path(), None, false).unwrap();
            let x64 = name.starts_with("x64");
            let list = list_sessions(&ctx);
            for s in &man.sessions {
                let b = std::fs::read(dir.path().join(&s.file)).unwrap();
                let tlh = 0x48 + 0x20;
                let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
                let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
                assert_eq!(
                    u32_at(tlh + 0x34),
                    m.mhz,
                    "{w}: logger {}: CpuSpeedInMHz",
                    s.logger_id
                );
                let perf = u64_at(tlh + if x64 { 0xF8 } else { 0xF0 } + 8);
                if rate_knowable(&f, 1) {
                    assert_eq!(
                        perf, m.qpc_frequency,
                        "{w}: logger {}: PerfFreq",
                        s.logger_id
                    );
                }
                let clock = list
                    .sessions
                    .iter()
                    .find(|x| x.logger_id == s.logger_id)
                    .and_then(|x| x.clock_type);
                if clock == Some(3) {
                    cycle_files += 1;
                    assert!(
                        s.header_sources["cpu_speed_mhz"].contains("KPRCB.MHz"),
                        "{w}: {:?}",
                        s.header_sources
                    );
                }
            }
        }
    }
    assert!(
        cycle_files > 10,
        "{cycle_files} cycle-clock ETL files checked"
    );
}

/// The CPU speed without symbols on x86 (whose built-in KPRCB layout has no MHz): KPRCB.MHz at
/// the KDBG's OffsetPrcbMhz, said so; cycle-clock switches are then timed as with the PDB.
#[test]
fn cpu_speed_from_the_kdbg_offset_without_symbols() {
    let name = "x86-14393";
    let mut checked = 0;
    for seed in 0..seeds().min(8) {
        let f = forge(&Config::from_fixture(&fixture(name)).with_variation(seed));
        let m = f.etw.as_ref().unwrap().clock_model.clone().unwrap();
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let ctx = KernelContext::open(&d, &SymbolOptions::default()).unwrap();
        let list = list_sessions(&ctx);
        let facts = etwdump::etw::clock::ClockFacts::gather(&ctx, &list.sessions);
        let r = facts.cpu_mhz.as_ref().expect("CPU speed");
        assert_eq!(r.value, u64::from(m.mhz), "seed {seed}: {}", r.source);
        assert!(
            r.source.contains("OffsetPrcbMhz"),
            "seed {seed}: {}",
            r.source
        );
        checked += 1;
    }
    assert!(checked > 0);
}
