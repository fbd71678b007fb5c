//! `scan` (issue 15): one pass over all physical memory finds every trace buffer, pending
//! block and logger context. On forge dumps whose ETW state is all live, it must find exactly
//! the buffers `buffers` lists (those that give records: a compressed buffer or one without a
//! complete record has no chain to recognise it by), at the physical addresses their virtual
//! addresses translate to, with the same record counts, every session's context and every
//! pending block, all live; and the same on the dump's memory images.

mod common;

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::carve::{scan, Class, Progress, ScanReport};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump::kernel::discover;
use etwdump_forge::{forge, Config, EtwSpec, ImageKind};
use std::collections::BTreeMap;

/// The fixture kernel of a scan scenario.
fn fixture_of(scenario: &str) -> &'static str {
    if let Some(f) = FIXTURES_SCANNED.iter().find(|f| scenario.contains(*f)) {
        f
    } else if scenario.contains("x86") {
        "x86-14393"
    } else {
        "x64-19041"
    }
}

fn run(d: &DumpFile, fixture: &str) -> (ScanReport, BTreeMap<u64, usize>, usize, usize) {
    let opts = SymbolOptions {
        pdb: Some(common::pdb_of(fixture)),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(d, &opts).unwrap();
    let rep = scan(&ctx, 2, &Progress::default());
    // What `buffers` lists, by the physical address of each header.
    let b = etwdump::report::buffers::analyse(&ctx, None);
    let mut want = BTreeMap::new();
    for r in b
        .rows
        .iter()
        .filter(|r| !r.compressed && r.record_count > 0)
    {
        let va = u64::from_str_radix(r.address.as_deref().unwrap().trim_start_matches("0x"), 16)
            .unwrap();
        let pa = ctx
            .space
            .translate(etwdump::addr::VirtAddr::new(va))
            .unwrap()
            .pa
            .get();
        want.insert(pa, r.record_count);
    }
    let sessions = etwdump::etw::loggers::list_sessions(&ctx).sessions.len();
    let pending = etwdump::etw::ccswap::find_pending(&ctx)
        .blocks
        .iter()
        .filter(|p| p.decoded.used_bytes != 0)
        .count();
    (rep, want, sessions, pending)
}

fn check(
    rep: &ScanReport,
    want: &BTreeMap<u64, usize>,
    sessions: usize,
    all_live: bool,
    what: &str,
) {
    let live: BTreeMap<u64, usize> = rep
        .buffers
        .iter()
        .filter(|b| b.class == Class::Live)
        .map(|b| (b.physical_address.get(), b.records))
        .collect();
    assert_eq!(&live, want, "{what}: live buffers and their records");
    let live_ctx = rep
        .contexts
        .iter()
        .filter(|c| c.class == Class::Live)
        .count();
    assert_eq!(live_ctx, sessions, "{what}: every session's context, live");
    if !all_live {
        return;
    }
    assert!(
        rep.buffers.iter().all(|b| b.class == Class::Live
            && b.recovered_bytes == b.valid_bytes
            && b.complete == (b.chain_end == b.valid_bytes)
            && b.virtual_address.is_some()),
        "{what}: {:?}",
        rep.buffers
            .iter()
            .filter(|b| b.class != Class::Live)
            .collect::<Vec<_>>()
    );
    // A context the array points to from a slot that rejected it is reported with that note.
    for c in rep.contexts.iter().filter(|c| c.class != Class::Live) {
        assert!(
            c.note.is_some(),
            "{what}: an unexplained orphaned context {c:?}"
        );
    }
}

#[test]
fn scan_finds_exactly_the_live_state_of_forge_dumps() {
    // x64: the standard ETW state with buffers and pending batches (all of it live); x86 PAE:
    // the variation mode (the forge's only x86 buffers), whose decoys may be carved too.
    for fx in ["x64-14393", "x64-19041", "x86-14393"] {
        let x64 = fx.starts_with("x64");
        let mut c = Config::from_fixture(&common::fixture(fx));
        if x64 {
            c.etw = Some(
                EtwSpec::standard(c.build)
                    .with_buffers(c.build)
                    .with_pending_ccswap(),
            );
        } else {
            c = c.with_variation(5);
        }
        let f = forge(&c);
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let (rep, want, sessions, pending) = run(&d, fx);
        assert!(want.len() > 5, "{fx}: {} buffers", want.len());
        check(&rep, &want, sessions, x64, fx);
        let live_blocks = rep.blocks.iter().filter(|b| b.class == Class::Live).count();
        assert!(
            live_blocks >= pending,
            "{fx}: {live_blocks} live pending blocks, {pending} open batches"
        );
        if x64 {
            assert!(rep.blocks.iter().all(|b| b.class == Class::Live), "{fx}");
            assert!(rep.groups.is_empty(), "{fx}: {:?}", rep.groups);
        }
        assert!(rep.pages_scanned > 100, "{fx}");
        // The same memory as every image kind (raw, .vmem + .vmss, .vmsn, ELF core): the same
        // findings at the same places.
        let dir = tempfile::tempdir().unwrap();
        for kind in ImageKind::ALL {
            let files = f
                .write_image(&dir.path().join(format!("i-{}", kind.name())), kind)
                .unwrap();
            let img = discover::open(&files[0], OpenOptions::default()).unwrap();
            let (r2, want2, s2, _) = run(&img, fx);
            assert_eq!(want2, want, "{fx} {}", kind.name());
            check(&r2, &want2, s2, x64, &format!("{fx} {}", kind.name()));
            let pas = |r: &ScanReport| -> Vec<u64> {
                r.buffers
                    .iter()
                    .map(|b| b.physical_address.get())
                    .chain(r.blocks.iter().map(|b| b.physical_address.get()))
                    .chain(r.contexts.iter().map(|c| c.physical_address.get()))
                    .collect()
            };
            assert_eq!(pas(&r2), pas(&rep), "{fx} {}", kind.name());
        }
    }
}

/// Does `va` translate to physical address `pa`?
fn maps(
    space: &etwdump::mem::AddressSpace<'_>,
    va: Option<etwdump::addr::VirtAddr>,
    pa: u64,
) -> bool {
    va.and_then(|v| space.translate(v).ok())
        .is_some_and(|t| t.pa.get() == pa)
}

/// The forge's scan scenarios (tests/forge/src/etw/scan: stopped sessions left in freed
/// pool, buffers lost, partly overwritten or partly unmapped, stale copies, orphaned pending
/// blocks, decoys; written from the reference by a separate author): every buffer the forge
/// planted with data is found at its physical address with its class, the records and chain
/// end it can still give and whether all of it was recovered; every orphaned pending block and
/// context is found; no decoy and nothing unplanted is reported as a buffer; the orphans of a
/// stopped session form one group.
#[test]
fn scan_finds_what_the_forge_planted_and_nothing_else() {
    let root = common::fixture("x64-19041").parent().unwrap().to_path_buf();
    let scenarios = etwdump_forge::scan_scenarios(&root);
    assert!(scenarios.len() >= 3, "{} scenarios", scenarios.len());
    let mut unmapped_named = 0;
    for (name, c) in scenarios {
        unmapped_named += check_planted(&name, &c, true);
    }
    assert!(
        unmapped_named >= 2,
        "{unmapped_named} contexts named from physical bytes alone"
    );
}

/// [`scan_finds_what_the_forge_planted_and_nothing_else`] over many random variations (issue
/// 26, item 9: the forge varies what the reference leaves open): x64 19041 and x86 14393 in
/// variation mode, seeds 1..=`SCAN_SEEDS` (default 12), each with three stopped sessions (one
/// context kept, one lost, one surviving only physically) and the extras (reused pages,
/// single-page buffers, decoys); every seed must be exact. `SCAN_COLLECT=1` reports every
/// failing seed instead of stopping at the first.
#[test]
fn scan_exact_over_many_variations() {
    let seeds: u64 = std::env::var("SCAN_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let root = common::fixture("x64-19041").parent().unwrap().to_path_buf();
    let mut n = 0;
    for fx in FIXTURES_SCANNED {
        if !root.join(fx).join("symbols.json").exists() {
            continue;
        }
        for seed in 1..=seeds {
            let c = Config::from_fixture(&root.join(fx))
                .with_variation(seed)
                .with_stopped_sessions(3)
                .with_scan_extras();
            let c = if seed % 2 == 0 {
                c.with_reused_slot()
            } else {
                c
            };
            let name = format!("scan-{fx}-var{seed}");
            if std::env::var("SCAN_COLLECT").is_ok() {
                if let Err(e) = std::panic::catch_unwind(|| check_planted(&name, &c, false)) {
                    let m = e.downcast_ref::<String>().cloned().unwrap_or_default();
                    eprintln!("FAIL {name}: {}", &m[..m.len().min(400)]);
                }
            } else {
                check_planted(&name, &c, false);
            }
            n += 1;
        }
    }
    assert_eq!(
        n,
        FIXTURES_SCANNED.len() * seeds as usize,
        "every fixture ran"
    );
}

/// The fixtures [`scan_exact_over_many_variations`] runs.
const FIXTURES_SCANNED: [&str; 5] = [
    "x64-19041",
    "x86-14393",
    "x64-26100",
    "x86-19569",
    "x64-17763",
];

/// Check one scan scenario against what the forge planted (see
/// [`scan_finds_what_the_forge_planted_and_nothing_else`]); with `images`, also every memory
/// image kind. Returns the physical-only contexts named with no virtual address.
fn check_planted(name: &str, c: &Config, images: bool) -> usize {
    use etwdump_forge::{ScanClass, ScanKind};
    let mut unmapped_named = 0;
    let f = forge(c);
    let want = f.scan.as_ref().expect("scan expectations");
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let fx = fixture_of(name);
    let (rep, _, _, _) = run(&d, fx);
    let space = etwdump::mem::AddressSpace::kernel(&d);
    let cls = |c: ScanClass| match c {
        ScanClass::Live => Class::Live,
        ScanClass::Orphaned => Class::Orphaned,
        ScanClass::StaleCopy => Class::StaleCopy,
    };
    let found: BTreeMap<u64, &etwdump::etw::carve::CarvedBuffer> = rep
        .buffers
        .iter()
        .map(|b| (b.physical_address.get(), b))
        .collect();
    let mut expected = BTreeMap::new();
    for o in want.objects.iter().filter(|o| o.kind == ScanKind::Buffer) {
        let b = o.buffer.as_ref().unwrap();
        if b.header_only || b.compressed || b.recoverable_records == 0 {
            continue; // no record to recognise it by
        }
        expected.insert(o.pa, o);
        let g = found
            .get(&o.pa)
            .unwrap_or_else(|| panic!("{name}: {:?} buffer at {:#x} not found", o.class, o.pa));
        // A context in a slot that rejected it is the forge's stale copy; its buffers, not
        // led to by any live session, are orphans to both.
        assert_eq!(g.class, cls(o.class), "{name}: buffer {:#x} class", o.pa);
        assert_eq!(g.sequence_number, b.sequence_number, "{name}: {:#x}", o.pa);
        if b.overwritten_pages.is_empty() {
            assert_eq!(
                g.chain_end,
                u64::from(b.recoverable_bytes),
                "{name}: {:#x} chain end ({g:?}; forge: {b:?})",
                o.pa
            );
            assert_eq!(
                g.records, b.recoverable_records as usize,
                "{name}: {:#x} records",
                o.pa
            );
        } else {
            // A later page overwritten: the record that runs into it is framed by its
            // header (in an intact page) and counted; its tail cannot be told from the
            // buffer's own bytes. At most that one record more than the intact part holds.
            let want = b.recoverable_records as usize;
            assert!(
                (want..=want + 1).contains(&g.records)
                    && g.chain_end >= u64::from(b.recoverable_bytes),
                "{name}: {:#x}: {} records to {:#x}, the intact part {want} to {:#x}",
                o.pa,
                g.records,
                g.chain_end,
                b.recoverable_bytes
            );
        }
        // Complete: every valid byte is the buffer's own (no page lost or reused by another
        // allocation) and the record chain reaches the valid end (nothing torn).
        assert_eq!(
            g.complete,
            b.complete && b.recoverable_bytes == b.valid_bytes,
            "{name}: {:#x} complete ({:?})",
            o.pa,
            g.chain_break
        );
        // A page reused while still mapped: the chain stops before it, and says so.
        if b.pages.iter().all(|p| p.is_some()) && !b.overwritten_pages.is_empty() {
            let k = u64::from(b.overwritten_pages[0]);
            if k * 0x1000 < u64::from(b.valid_bytes) {
                let br = g.chain_break.expect("chain break reported");
                assert!(
                    br.offset <= k * 0x1000 + 0x1000,
                    "{name}: {:#x}: {br}",
                    o.pa
                );
                assert!(!g.complete);
            }
        }
        // Every object whose first byte is mapped carries a virtual address that maps it
        // (its own; one the forge left unmapped may still be reached through another
        // mapping, e.g. the probe area's 1 GiB page over low physical memory).
        assert_eq!(
            g.virtual_address.is_some(),
            o.va.is_some() || maps(&space, g.virtual_address, o.pa),
            "{name}: {:#x} virtual address {:?} (forge: {:?})",
            o.pa,
            g.virtual_address,
            o.va
        );
        if let Some(v) = g.virtual_address {
            assert!(maps(&space, Some(v), o.pa), "{name}: {v} maps {:#x}", o.pa);
        }
    }
    for (pa, b) in &found {
        assert!(
            expected.contains_key(pa),
            "{name}: a buffer nobody planted at {pa:#x}: {b:?}"
        );
    }
    for dcy in &want.decoys {
        assert!(
            !found.contains_key(&dcy.pa),
            "{name}: decoy {} at {:#x} reported",
            dcy.what,
            dcy.pa
        );
    }
    // A stopped session's context that survives only physically (its page unmapped, its
    // name's string pool still mapped) is found and named.
    let physical_only: Vec<_> = want
        .objects
        .iter()
        .filter(|o| o.kind == ScanKind::LoggerContext && o.va.is_none())
        .filter_map(|o| Some((o.pa, o.context.as_ref()?.name.clone()?)))
        .collect();
    assert!(
        !physical_only.is_empty(),
        "{name}: no physical-only context planted"
    );
    for (pa, want_name) in &physical_only {
        let c = rep
            .contexts
            .iter()
            .find(|c| c.physical_address.get() == *pa)
            .unwrap_or_else(|| panic!("{name}: physical-only context {pa:#x} not found"));
        assert_eq!(
            c.name.as_ref().map(|n| n.raw()),
            Some(want_name.as_str()),
            "{name}: {pa:#x}"
        );
        // Named from its physical bytes alone where nothing maps it (x86: no 1 GiB page
        // over low memory in the probe area).
        unmapped_named += usize::from(c.virtual_address.is_none());
    }
    // Orphaned pending blocks and contexts are found as orphans (or stale copies).
    for o in want.objects.iter().filter(|o| o.class != ScanClass::Live) {
        let hit = match o.kind {
            ScanKind::PendingBlock => rep
                .blocks
                .iter()
                .any(|b| b.physical_address.get() == o.pa && b.class != Class::Live),
            ScanKind::LoggerContext => rep.contexts.iter().any(|c| {
                c.physical_address.get() == o.pa
                    && c.class != Class::Live
                    // Its name wherever the forge left LoggerName's characters in the
                    // dump (read through the descriptor in the context's own bytes, so
                    // also when the context is found only physically), and its VA.
                    && o.context.as_ref().is_none_or(|x| {
                        x.name.is_none() || c.name.as_ref().map(|n| n.raw()) == x.name.as_deref()
                    })
                    && (c.virtual_address.is_some() >= o.va.is_some())
                    && (c.virtual_address.is_none() || maps(&space, c.virtual_address, o.pa))
            }),
            ScanKind::Buffer => true,
        };
        assert!(
            hit,
            "{name}: {:?} {:?} at {:#x} not found",
            o.class, o.kind, o.pa
        );
    }
    // One group per stopped session: its found buffers share one group, no other session's
    // buffers are in it (sessions that reused a LoggerId and BufferSize are apart), and a
    // surviving context names it.
    let mut owner: BTreeMap<usize, u32> = BTreeMap::new();
    let mut sessions_checked = 0;
    for g in want.groups.iter() {
        let ours: std::collections::BTreeSet<Option<usize>> = want
            .objects
            .iter()
            .filter(|o| o.kind == ScanKind::Buffer && o.group == Some(g.group))
            .filter_map(|o| found.get(&o.pa))
            .filter(|b| b.class == Class::Orphaned)
            .map(|b| b.group)
            .collect();
        assert!(
            ours.len() <= 1 && !ours.contains(&None),
            "{name}: group {} split: {ours:?}",
            g.group
        );
        let Some(&Some(ours)) = ours.iter().next() else {
            continue;
        };
        sessions_checked += 1;
        if let Some(other) = owner.insert(ours, g.group) {
            panic!(
                "{name}: forge groups {other} and {} merged into group {ours}",
                g.group
            );
        }
        let rg = rep.groups.iter().find(|x| x.group == ours).unwrap();
        if let Some(cpa) = g.context_pa {
            assert_eq!(
                rg.context.map(|p| p.get()),
                Some(cpa),
                "{name}: group {} ({}) named by another context",
                g.group,
                rg.evidence
            );
        }
    }
    assert!(
        sessions_checked >= 3,
        "{name}: {sessions_checked} groups checked"
    );
    // The same scenario as every image kind: the same objects, classes and groups.
    let dir = tempfile::tempdir().unwrap();
    let key = |r: &ScanReport| -> Vec<(u64, Class, Option<usize>, usize)> {
        r.buffers
            .iter()
            .map(|b| (b.physical_address.get(), b.class, b.group, b.records))
            .chain(
                r.blocks
                    .iter()
                    .map(|b| (b.physical_address.get(), b.class, None, b.switches)),
            )
            .chain(
                r.contexts
                    .iter()
                    .map(|c| (c.physical_address.get(), c.class, None, 0)),
            )
            .collect()
    };
    for kind in ImageKind::ALL.into_iter().filter(|_| images) {
        let files = f
            .write_image(&dir.path().join(format!("s-{}", kind.name())), kind)
            .unwrap();
        let img = discover::open(&files[0], OpenOptions::default()).unwrap();
        let (r2, _, _, _) = run(&img, fx);
        assert!(
            key(&r2) == key(&rep),
            "{name} {}: other findings than on the dump",
            kind.name()
        );
    }
    eprintln!(
        "{name}: {} buffers ({} orphaned, {} stale), {} blocks, {} contexts, {} groups",
        rep.buffers.len(),
        rep.buffers
            .iter()
            .filter(|b| b.class == Class::Orphaned)
            .count(),
        rep.buffers
            .iter()
            .filter(|b| b.class == Class::StaleCopy)
            .count(),
        rep.blocks.len(),
        rep.contexts.len(),
        rep.groups.len()
    );
    unmapped_named
}

/// A record's raw timestamp, converted FILETIME and time flag.
type Timed = (u64, Option<u64>, Option<&'static str>);

/// `events --carved` on the scan scenarios: every stopped session's records get UTC times by
/// the evidence that survives: its logger context's clock and ReferenceTime, or, where the
/// context's memory was reused, the one clock type its buffers' timestamps fit (the forge's
/// lost contexts are those of system-time sessions). The clock reading at the start of the
/// forge's window converts to the window's UTC start (within the converter's slack); every
/// record time lies in the window, except at most one record per buffer with an overwritten
/// later page (its header runs into the foreign page), which is flagged `after_dump` or
/// `before_boot`, never given as a plain time.
#[test]
fn carved_records_get_the_times_of_their_sessions() {
    use etwdump::etw::source::EtwSource;
    use etwdump_forge::ScanKind;
    let root = common::fixture("x64-19041").parent().unwrap().to_path_buf();
    let mut inferred = 0;
    let mut flagged_total = 0;
    for (name, c) in etwdump_forge::scan_scenarios(&root) {
        let f = forge(&c);
        let want = f.scan.as_ref().expect("scan expectations");
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let fx = fixture_of(&name);
        let opts = SymbolOptions {
            pdb: Some(common::pdb_of(fx)),
            ..SymbolOptions::default()
        };
        let ctx = KernelContext::open(&d, &opts).unwrap();
        let src = EtwSource::open_carved(&ctx, 2);
        // The forge group of each orphaned buffer, by its virtual address (sessions that
        // reused a LoggerId are told apart by it).
        let group_of: BTreeMap<u64, u32> = want
            .objects
            .iter()
            .filter(|o| o.kind == ScanKind::Buffer)
            .filter_map(|o| Some((o.va?, o.group?)))
            .collect();
        let va_group = |va: Option<u64>| va.and_then(|v| group_of.get(&v).copied());
        // The converter of each carved session.
        let mut conv = BTreeMap::new();
        for u in src.units() {
            if let Some(g) = va_group(u.address.map(|a| a.get())) {
                conv.entry(g).or_insert_with(|| src.converter(u).clone());
            }
        }
        let src_warnings = src.warnings().to_vec();
        let mut rows: BTreeMap<u32, Vec<Timed>> = BTreeMap::new();
        let w = etwdump::report::events::stream_from(&ctx, src, &mut |r| {
            let va = r
                .buffer
                .as_deref()
                .and_then(|b| u64::from_str_radix(b.trim_start_matches("0x"), 16).ok());
            let Some(g) = va_group(va) else {
                return Ok(());
            };
            rows.entry(g)
                .or_default()
                .push((r.timestamp.unwrap(), r.filetime, r.time_flag));
            Ok(())
        })
        .unwrap();
        for g in want.groups.iter().filter(|g| g.timestamp_window.is_some()) {
            let (lo, hi) = g.timestamp_window.unwrap();
            let (u0, u1) = g.utc_window.unwrap();
            let id = u64::from(g.logger_id);
            let cv = conv
                .get(&g.group)
                .unwrap_or_else(|| panic!("{name}: group {} (logger {id}): no unit", g.group));
            assert!(
                cv.problem().is_none(),
                "{name}: logger {id}: {:?}",
                cv.problem()
            );
            // The anchor: the window's first clock reading is its UTC start.
            let at = cv.to_filetime(lo).unwrap();
            assert!(
                at.abs_diff(u0) <= cv.slack(u0),
                "{name}: logger {id} (clock {}): {lo} -> {at}, forge {u0}",
                g.clock_type
            );
            if g.context_pa.is_none() {
                inferred += 1;
                assert!(
                    src_warnings
                        .iter()
                        .any(|w| w.logger_id == Some(id) && w.message.contains("inferred")),
                    "{name}: logger {id}: no warning says the clock was inferred"
                );
            }
            let rs = &rows[&g.group];
            let mut flagged = 0;
            for &(ts, ft, flag) in rs {
                let ft = ft.unwrap_or_else(|| panic!("{name}: logger {id}: {ts} not converted"));
                if flag.is_some() {
                    flagged += 1;
                    continue;
                }
                assert!(
                    (lo..=hi).contains(&ts) && ft + cv.slack(ft) >= u0 && ft <= u1 + cv.slack(ft),
                    "{name}: logger {id}: record {ts} at {ft} outside {lo}..{hi} / {u0}..{u1}"
                );
            }
            let overwritten = want
                .objects
                .iter()
                .filter(|o| o.kind == ScanKind::Buffer && o.group == Some(g.group))
                .filter(|o| !o.buffer.as_ref().unwrap().overwritten_pages.is_empty())
                .count();
            assert!(
                flagged <= overwritten,
                "{name}: logger {id}: {flagged} flagged times, {overwritten} buffers with overwritten pages"
            );
            if flagged > 0 {
                assert!(
                    w.iter().any(|w| w.logger_id == Some(id)
                        && w.message.contains("record times fall after")),
                    "{name}: logger {id}: flagged times without a warning"
                );
            }
            flagged_total += flagged;
        }
    }
    assert!(
        inferred >= 3,
        "only {inferred} groups had their clock inferred"
    );
    println!("clocks inferred for {inferred} groups; {flagged_total} record times flagged");
}

/// On a raw image without symbols the logger array cannot be located (no KDBG route, and the
/// forge kernels are in no symbol corpus), so whether a buffer or context belongs to a running
/// session cannot be known: nothing may be called orphaned. Every object the symbol-aided scan
/// calls orphaned is `unknown` instead, a warning says why, and the groups are still formed on
/// the same evidence.
#[test]
fn without_the_live_state_nothing_is_called_orphaned() {
    let root = common::fixture("x64-19041").parent().unwrap().to_path_buf();
    let (name, c) = etwdump_forge::scan_scenarios(&root)
        .into_iter()
        .find(|(n, _)| n.contains("x64"))
        .unwrap();
    let f = forge(&c);
    let dir = tempfile::tempdir().unwrap();
    let files = f
        .write_image(&dir.path().join("raw"), ImageKind::Raw)
        .unwrap();
    let d = discover::open(&files[0], OpenOptions::default()).unwrap();
    let (with, _, _, _) = run(&d, "x64-19041");
    let bare = KernelContext::open(&d, &SymbolOptions::default()).unwrap();
    let without = scan(&bare, 2, &Progress::default());
    assert!(
        without.warnings.iter().any(|w| w
            .message
            .starts_with("live and orphaned buffers and logger contexts cannot be told apart")),
        "{name}: {:?}",
        without.warnings
    );
    let class_of = |r: &ScanReport| -> BTreeMap<u64, Class> {
        r.buffers
            .iter()
            .map(|b| (b.physical_address.get(), b.class))
            .chain(
                r.contexts
                    .iter()
                    .map(|c| (c.physical_address.get(), c.class)),
            )
            .collect()
    };
    let (a, b) = (class_of(&with), class_of(&without));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{name}: the same objects"
    );
    let orphans = a.values().filter(|&&c| c == Class::Orphaned).count();
    assert!(orphans >= 10, "{name}: {orphans} orphans");
    for (pa, &ca) in &a {
        let cb = b[pa];
        assert!(
            cb != Class::Orphaned && (cb == ca || cb == Class::Unknown),
            "{name}: {pa:#x}: {ca:?} with symbols, {cb:?} without"
        );
    }
    // Without the live state, live sessions' buffers are candidates too: at least as many
    // groups, and every symbol-aided group's buffers are grouped together.
    assert!(without.groups.len() >= with.groups.len());
    for g in &with.groups {
        let members: Vec<u64> = with
            .buffers
            .iter()
            .filter(|b| b.group == Some(g.group))
            .map(|b| b.physical_address.get())
            .collect();
        let theirs: std::collections::BTreeSet<Option<usize>> = without
            .buffers
            .iter()
            .filter(|b| members.contains(&b.physical_address.get()))
            .map(|b| b.group)
            .collect();
        assert_eq!(
            theirs.len(),
            1,
            "{name}: group {} split without symbols",
            g.group
        );
        assert!(theirs.iter().all(|g| g.is_some()));
    }
}
