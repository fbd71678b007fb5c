//! One row per context switch, in UTC order per CPU (issue 26, items 7 and 9).
//!
//! On the forge's duplicate-switch dumps (`with_variation(seed).with_duplicate_switches()`:
//! the NT Kernel Logger's compact batches and pending blocks, and CKCL CSwitch events that
//! mirror some of those switches in the CKCL's own clock, plus lookalikes: the same threads
//! 1-20 ms away) for every fixture kernel and many seeds (`CSWITCH_SEEDS=N`, default 8):
//!
//! * `--per-record` gives one row per record the forge wrote (the old count);
//! * the default gives one row per distinct switch: the per-record count minus one per
//!   duplicate the rule can prove (both records timed, of a clock fine enough, unambiguous),
//!   and every such duplicate is one row whose `sources` are exactly its two records;
//! * no row merges records the forge wrote as distinct switches (lookalikes included);
//! * rows are non-decreasing in UTC time per CPU, untimed rows after the timed ones;
//! * `overview`'s last N switches of each CPU are the N latest timed rows of `cswitch`.
//!
//! The expected merges are worked out here from the forge's truth (its UTC times, threads and
//! recorders) with the rule of docs/reference.md "Context switches", over all records at once (the
//! reader decides in a sliding window).

mod common;
use common::{fixture, pdb_of, FIXTURES};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::report::cswitch::SwitchRow;
use etwdump_forge::{forge, ClockModel, Config, ExpectedSwitch, Forged};
use std::collections::{BTreeMap, BTreeSet, HashMap};

fn seeds() -> u64 {
    std::env::var("CSWITCH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8)
}

/// The resolution (100 ns) of `clock` as the README rule states it; None: never merged.
fn resolution(m: &ClockModel, clock: u32, build: u32) -> Option<u64> {
    match clock {
        1 => Some(10_000_000u64.div_ceil(m.qpc_frequency)),
        3 => Some(10u64.div_ceil(u64::from(m.mhz))),
        2 => (build >= 10240).then_some(1),
        _ => None,
    }
}

/// Who recorded a switch: a logger, or one pending block.
fn recorder(e: &ExpectedSwitch) -> (u64, u64) {
    match e.logger_id {
        Some(id) if e.source != "pending" => (0, u64::from(id)),
        _ => (1, e.container_va),
    }
}

/// A record's identity: (source, CPU, raw time, old thread, buffer or block, index: the
/// switch's in its batch or block, an event's record index in its buffer).
type RecKey = (String, u64, u64, u32, u64, u32);

fn truth_key(e: &ExpectedSwitch) -> RecKey {
    (
        e.source.clone(),
        u64::from(e.cpu),
        e.raw_timestamp,
        e.old_tid,
        e.container_va,
        if e.source == "batch" {
            e.index & 0xFFFF
        } else {
            e.index
        },
    )
}

/// (buffer, offset) → the record's index in its buffer, for the events of `rows` (the
/// variation forge's event buffers hold nothing but CSwitch events).
fn event_ranks(rows: &[SwitchRow]) -> HashMap<(u64, u64), u32> {
    let mut per: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for s in rows.iter().flat_map(|r| &r.sources) {
        if s.source == "event" {
            per.entry(s.buffer.unwrap().get())
                .or_default()
                .push(s.offset.unwrap());
        }
    }
    let mut out = HashMap::new();
    for (b, mut v) in per {
        v.sort();
        for (i, o) in v.into_iter().enumerate() {
            out.insert((b, o), i as u32);
        }
    }
    out
}

/// The records of a row.
fn source_keys(r: &SwitchRow, ranks: &HashMap<(u64, u64), u32>) -> Vec<RecKey> {
    r.sources
        .iter()
        .map(|s| {
            let place = s.buffer.or(s.block).map_or(0, |a| a.get());
            let index = match s.source {
                "event" => ranks[&(place, s.offset.unwrap())],
                _ => s.index.unwrap(),
            };
            (
                s.source.to_string(),
                r.cpu.unwrap(),
                s.raw_timestamp,
                r.old_tid,
                place,
                index,
            )
        })
        .collect()
}

/// Per-record rows matched to the forge's switches: index of the switch → the row.
fn match_rows<'r>(
    f: &Forged,
    rows: &'r [SwitchRow],
    ranks: &HashMap<(u64, u64), u32>,
    w: &str,
) -> Vec<&'r SwitchRow> {
    let etw = f.etw.as_ref().unwrap();
    let mut by_key: HashMap<RecKey, &SwitchRow> = HashMap::new();
    for r in rows {
        let k = source_keys(r, ranks).remove(0);
        assert!(by_key.insert(k.clone(), r).is_none(), "{w}: two rows {k:?}");
    }
    etw.switches
        .iter()
        .map(|e| {
            *by_key
                .get(&truth_key(e))
                .unwrap_or_else(|| panic!("{w}: no row for {e:?}"))
        })
        .collect()
}

#[derive(Default, Debug)]
struct Tally {
    dumps: usize,
    records: usize,
    rows: usize,
    /// Same-switch pairs the forge placed; of them provable (both timed, fine clocks,
    /// unambiguous) and merged.
    pairs: usize,
    provable: usize,
    merged: usize,
    /// Pairs left apart because a record has no UTC time / a coarse clock / ambiguity.
    untimed: usize,
    coarse: usize,
    ambiguous: usize,
    lookalikes: usize,
    /// Pending switches among each CPU's last 5 in `overview`.
    overview_pending: usize,
    /// The untimed records of the untimed pairs, by source and clock.
    untimed_by: BTreeMap<String, usize>,
}

/// The rule over the truth: groups of switch indices that must be one row.
fn expected_groups(
    f: &Forged,
    timed: &[Option<u64>],
    build: u32,
    t: &mut Tally,
) -> (Vec<Vec<usize>>, BTreeSet<[usize; 2]>) {
    let etw = f.etw.as_ref().unwrap();
    let m = etw.clock_model.as_ref().unwrap();
    let sw = &etw.switches;
    let res: Vec<Option<u64>> = sw
        .iter()
        .map(|e| resolution(m, e.clock_type, build))
        .collect();
    let matches = |a: usize, b: usize| -> bool {
        let (x, y) = (&sw[a], &sw[b]);
        let (Some(fa), Some(fb), Some(ra), Some(rb)) = (timed[a], timed[b], res[a], res[b]) else {
            return false;
        };
        recorder(x) != recorder(y)
            && x.cpu == y.cpu
            && x.old_tid == y.old_tid
            && x.new_tid.is_some()
            && x.new_tid == y.new_tid
            && fa.abs_diff(fb) <= ra + rb
    };
    // Components of the match graph, per CPU and thread pair (cheap enough here).
    let mut by_pair: BTreeMap<(u32, u32, Option<u32>), Vec<usize>> = BTreeMap::new();
    for (i, e) in sw.iter().enumerate() {
        by_pair
            .entry((e.cpu, e.old_tid, e.new_tid))
            .or_default()
            .push(i);
    }
    let mut parent: Vec<usize> = (0..sw.len()).collect();
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            x = p[x];
        }
        x
    }
    for v in by_pair.values() {
        for (k, &a) in v.iter().enumerate() {
            for &b in &v[k + 1..] {
                if matches(a, b) {
                    let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                    parent[ra.max(rb)] = ra.min(rb);
                }
            }
        }
    }
    let mut comps: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..sw.len() {
        let r = root(&mut parent, i);
        comps.entry(r).or_default().push(i);
    }
    let mut groups = Vec::new();
    let mut ambiguous: BTreeSet<usize> = BTreeSet::new();
    for c in comps.into_values() {
        let clique = c
            .iter()
            .enumerate()
            .all(|(k, &a)| c[k + 1..].iter().all(|&b| matches(a, b)));
        if clique {
            groups.push(c);
        } else {
            ambiguous.extend(c.iter().copied());
            groups.extend(c.into_iter().map(|i| vec![i]));
        }
    }
    // The forge's pairs: which the rule can prove.
    let mut provable = BTreeSet::new();
    for &[a, b] in &etw.same_switch {
        t.pairs += 1;
        if timed[a].is_none() || timed[b].is_none() {
            t.untimed += 1;
            for i in [a, b].into_iter().filter(|&i| timed[i].is_none()) {
                let e = &sw[i];
                *t.untimed_by
                    .entry(format!("{} clock {}", e.source, e.clock_type))
                    .or_default() += 1;
            }
        } else if res[a].is_none() || res[b].is_none() {
            t.coarse += 1;
        } else if ambiguous.contains(&a) || ambiguous.contains(&b) {
            t.ambiguous += 1;
        } else {
            t.provable += 1;
            provable.insert([a.min(b), a.max(b)]);
        }
    }
    (groups, provable)
}

/// The duplicate-switch dump of fixture `name` and `seed`, and the dump file.
fn dup_dump(name: &str, seed: u64) -> (Forged, DumpFile) {
    let cfg = Config::from_fixture(&fixture(name))
        .with_variation(seed)
        .with_duplicate_switches();
    let f = forge(&cfg);
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    (f, d)
}

fn context<'d>(d: &'d DumpFile, pdb: std::path::PathBuf) -> KernelContext<'d> {
    let opts = SymbolOptions {
        pdb: Some(pdb),
        ..SymbolOptions::default()
    };
    KernelContext::open(d, &opts).unwrap()
}

fn check(name: &str, seed: u64, t: &mut Tally) {
    let (f, d) = dup_dump(name, seed);
    let build = f.config.build;
    let w = format!("{name} seed {seed}");
    let ctx = context(&d, pdb_of(name));
    let etw = f.etw.as_ref().unwrap();

    // --per-record: one row per record the forge wrote.
    let per = etwdump::report::cswitch::collect_with(&ctx, None, true);
    assert_eq!(per.rows.len(), etw.switches.len(), "{w}: per-record rows");
    assert!(per.rows.iter().all(|r| r.sources.len() == 1), "{w}");
    let ranks = event_ranks(&per.rows);
    let rows_of = match_rows(&f, &per.rows, &ranks, &w);
    let timed: Vec<Option<u64>> = rows_of.iter().map(|r| r.filetime).collect();
    // Timed rows carry the forge's UTC time (tests/variations.rs checks which are knowable).
    for (e, r) in etw.switches.iter().zip(&rows_of) {
        if let Some(ft) = r.filetime {
            assert_eq!(Some(ft), e.filetime, "{w}: {e:?}");
        }
    }

    // The default: one row per switch.
    let merged = etwdump::report::cswitch::collect(&ctx, None);
    let (groups, provable) = expected_groups(&f, &timed, build, t);
    assert_eq!(
        merged.rows.len(),
        groups.len(),
        "{w}: rows vs distinct switches ({} records)",
        per.rows.len()
    );
    let sources: usize = merged.rows.iter().map(|r| r.sources.len()).sum();
    assert_eq!(sources, per.rows.len(), "{w}: every record in one row");
    // Every merged row is one expected group, and every pair the rule proves is one row with
    // both sources.
    let index: HashMap<RecKey, usize> = etw
        .switches
        .iter()
        .enumerate()
        .map(|(i, e)| (truth_key(e), i))
        .collect();
    let same: BTreeSet<[usize; 2]> = etw
        .same_switch
        .iter()
        .map(|&[a, b]| [a.min(b), a.max(b)])
        .collect();
    let want: BTreeSet<Vec<usize>> = groups.iter().filter(|g| g.len() > 1).cloned().collect();
    let mut got = BTreeSet::new();
    for r in merged.rows.iter().filter(|r| r.sources.len() > 1) {
        let mut members: Vec<usize> = source_keys(r, &ranks)
            .into_iter()
            .map(|k| index[&k])
            .collect();
        members.sort();
        // No two distinct switches merged: every two records of a row are a forge pair.
        for (k, &a) in members.iter().enumerate() {
            for &b in &members[k + 1..] {
                assert!(
                    same.contains(&[a, b]),
                    "{w}: merged distinct switches {:?} and {:?}",
                    etw.switches[a],
                    etw.switches[b]
                );
            }
        }
        // The row shows the event's fields (the richest record).
        assert_eq!(r.source, "event", "{w}");
        assert!(r.sources.iter().any(|s| s.source != "event"), "{w}");
        got.insert(members);
    }
    assert_eq!(got, want, "{w}: merged rows");
    for p in &provable {
        assert!(got.contains(p.as_slice()), "{w}: pair {p:?} not merged");
        t.merged += 1;
    }
    for &[a, b] in &etw.lookalikes {
        assert!(!got.iter().any(|g| g.contains(&a) && g.contains(&b)), "{w}");
        t.lookalikes += 1;
    }

    // Time order per CPU: timed rows non-decreasing, untimed rows after them.
    for rows in [&merged.rows, &per.rows] {
        let mut last: BTreeMap<u64, (bool, u64)> = BTreeMap::new();
        for r in rows.iter() {
            let key = match r.filetime {
                Some(ft) => (false, ft),
                None => (true, 0),
            };
            let prev = last.entry(r.cpu.unwrap()).or_insert(key);
            assert!(
                key.0 || !prev.0,
                "{w}: CPU {:?}: a timed row after an untimed one",
                r.cpu
            );
            if !key.0 {
                assert!(key.1 >= prev.1, "{w}: CPU {:?} goes back in time", r.cpu);
            }
            *prev = key;
        }
    }

    // overview: each CPU's last 5 are the 5 latest timed rows.
    let o = etwdump::report::overview::Overview::build(&ctx, 5).unwrap();
    assert_eq!(o.switches, merged.rows.len() as u64, "{w}");
    let mut per_cpu: BTreeMap<u64, Vec<&SwitchRow>> = BTreeMap::new();
    for r in merged
        .rows
        .iter()
        .filter(|r| r.filetime.is_some() && r.time_flag.is_none())
    {
        per_cpu.entry(r.cpu.unwrap()).or_default().push(r);
    }
    for (cpu, rows) in &per_cpu {
        let mut latest: Vec<&SwitchRow> = rows.clone();
        latest.sort_by_key(|r| r.filetime);
        let latest = &latest[latest.len().saturating_sub(5)..];
        let shown: Vec<&SwitchRow> = o.last_switches[cpu].iter().collect();
        assert_eq!(shown, latest.to_vec(), "{w}: CPU {cpu}");
        t.overview_pending += shown.iter().filter(|r| r.source == "pending").count();
    }
    t.dumps += 1;
    t.records += per.rows.len();
    t.rows += merged.rows.len();
}

#[test]
fn one_row_per_switch_on_duplicate_switch_dumps() {
    let mut per_fixture: BTreeMap<&str, Tally> = BTreeMap::new();
    for &name in FIXTURES {
        let t = per_fixture.entry(name).or_default();
        for seed in 0..seeds() {
            check(name, seed, t);
        }
    }
    println!(
        "{:<11} {:>5} {:>8} {:>6} {:>6} {:>8} {:>7} {:>7} {:>6} {:>9} {:>10} {:>8}",
        "fixture",
        "dumps",
        "records",
        "rows",
        "pairs",
        "provable",
        "merged",
        "untimed",
        "coarse",
        "ambiguous",
        "lookalikes",
        "ovw-pend"
    );
    let mut all = Tally::default();
    for (n, t) in &per_fixture {
        println!(
            "{n:<11} {:>5} {:>8} {:>6} {:>6} {:>8} {:>7} {:>7} {:>6} {:>9} {:>10} {:>8}",
            t.dumps,
            t.records,
            t.rows,
            t.pairs,
            t.provable,
            t.merged,
            t.untimed,
            t.coarse,
            t.ambiguous,
            t.lookalikes,
            t.overview_pending
        );
        all.pairs += t.pairs;
        all.merged += t.merged;
        all.lookalikes += t.lookalikes;
        all.overview_pending += t.overview_pending;
        for (k, v) in &t.untimed_by {
            *all.untimed_by.entry(k.clone()).or_default() += v;
        }
    }
    println!("untimed records of the untimed pairs: {:?}", all.untimed_by);
    // The forge placed duplicates and the reader merged most of them.
    assert!(all.merged > 100, "{all:?}");
    assert!(all.merged * 2 > all.pairs, "{all:?}");
    assert!(all.lookalikes > 10, "{all:?}");
    assert!(all.overview_pending > 0, "{all:?}");
}

/// The shipped sample: 1,435 switch records, none seen twice (its sessions' switches are
/// distinct), so 1,435 rows with and without `--per-record`; every CPU in UTC order (before
/// issue 26 CPUs 0, 1 and 3 each jumped back once, where the QPC pending stream met the
/// cycle-counter and system-time buffers); the pending switches (20, 229 and 7 on CPUs 0, 1,
/// 3) are the last rows of their CPUs and fill `overview`'s last 5 there (before: none).
#[test]
fn sample_in_time_order_with_pending_last() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let d = DumpFile::open(
        &root.join("tests/data/sample-x64-etw.dmp"),
        OpenOptions::default(),
    )
    .unwrap();
    let ctx = context(&d, root.join("tests/fixtures/x64-19041/ntkrnlmp.pdb"));
    let merged = etwdump::report::cswitch::collect(&ctx, None);
    let per = etwdump::report::cswitch::collect_with(&ctx, None, true);
    assert_eq!(per.rows.len(), 1435);
    assert_eq!(merged.rows.len(), 1435);
    assert!(merged.rows.iter().all(|r| r.sources.len() == 1));
    let mut pending: BTreeMap<u64, usize> = BTreeMap::new();
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    let mut by_cpu: BTreeMap<u64, Vec<&SwitchRow>> = BTreeMap::new();
    for r in &merged.rows {
        let (cpu, ft) = (
            r.cpu.unwrap(),
            r.filetime.expect("every sample switch is timed"),
        );
        assert!(ft >= *last.get(&cpu).unwrap_or(&0), "CPU {cpu} goes back");
        last.insert(cpu, ft);
        if r.source == "pending" {
            *pending.entry(cpu).or_default() += 1;
        }
        by_cpu.entry(cpu).or_default().push(r);
    }
    assert_eq!(pending, BTreeMap::from([(0, 20), (1, 229), (3, 7)]));
    for (cpu, n) in &pending {
        let rows = &by_cpu[cpu];
        // The CPU's pending switches are its last rows.
        assert!(
            rows[rows.len() - n..].iter().all(|r| r.source == "pending"),
            "CPU {cpu}"
        );
    }
    let o = etwdump::report::overview::Overview::build(&ctx, 5).unwrap();
    for (cpu, rows) in &o.last_switches {
        let want: Vec<&SwitchRow> = by_cpu[cpu][by_cpu[cpu].len() - 5..].to_vec();
        assert_eq!(rows.iter().collect::<Vec<_>>(), want, "CPU {cpu}");
        let all_pending = rows.iter().all(|r| r.source == "pending");
        assert_eq!(all_pending, pending.contains_key(cpu), "CPU {cpu}");
    }
}

/// Two switches with the same threads far apart are two rows, and a duplicate's row lists
/// both records with their own clocks: one dump looked at closely (x64 19041, seed 1).
#[test]
fn a_duplicate_lists_both_records() {
    let (f, d) = dup_dump("x64-19041", 1);
    let ctx = context(&d, pdb_of("x64-19041"));
    let etw = f.etw.as_ref().unwrap();
    let rows = etwdump::report::cswitch::collect(&ctx, None).rows;
    let [a, b] = etw.same_switch[0];
    let (ev, or) = (&etw.switches[a], &etw.switches[b]);
    let row = rows
        .iter()
        .find(|r| {
            r.sources
                .iter()
                .any(|s| s.source == "event" && s.raw_timestamp == ev.raw_timestamp)
                && r.old_tid == ev.old_tid
        })
        .expect("the event's row");
    assert_eq!(row.sources.len(), 2, "{row:?}");
    let other = row.sources.iter().find(|s| s.source != "event").unwrap();
    assert_eq!(other.source, or.source);
    assert_eq!(other.raw_timestamp, or.raw_timestamp);
    assert_eq!(other.clock, Some(u64::from(or.clock_type)));
    let evs = row.sources.iter().find(|s| s.source == "event").unwrap();
    assert_eq!(evs.clock, Some(u64::from(ev.clock_type)));
    assert_eq!(evs.logger_id, ev.logger_id.map(u64::from));
    assert_eq!(evs.buffer.map(|b| b.get()), Some(ev.container_va));
    assert_eq!(row.new_tid, ev.new_tid);
    // A lookalike of this dump: its own row.
    if let Some(&[x, y]) = etw.lookalikes.first() {
        let n = |e: &ExpectedSwitch| {
            rows.iter()
                .filter(|r| {
                    r.sources
                        .iter()
                        .any(|s| s.source == e.source && s.raw_timestamp == e.raw_timestamp)
                        && r.old_tid == e.old_tid
                })
                .count()
        };
        assert!(n(&etw.switches[x]) >= 1 && n(&etw.switches[y]) >= 1);
        assert!(!rows.iter().any(|r| {
            let has = |e: &ExpectedSwitch| {
                r.sources
                    .iter()
                    .any(|s| s.source == e.source && s.raw_timestamp == e.raw_timestamp)
            };
            has(&etw.switches[x]) && has(&etw.switches[y])
        }));
    }
}
