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
        rep.buffers
            .iter()
            .all(|b| b.class == Class::Live && b.complete),
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

/// The forge's scan scenarios (tests/forge/src/etw/scan: stopped sessions left in freed
/// pool, buffers lost, partly overwritten or partly unmapped, stale copies, orphaned pending
/// blocks, decoys; written from the reference by a separate author): every buffer the forge
/// planted with data is found at its physical address with its class, the records and chain
/// end it can still give and whether all of it was recovered; every orphaned pending block and
/// context is found; no decoy and nothing unplanted is reported as a buffer; the orphans of a
/// stopped session form one group.
#[test]
fn scan_finds_what_the_forge_planted_and_nothing_else() {
    use etwdump_forge::{ScanClass, ScanKind};
    let root = common::fixture("x64-19041").parent().unwrap().to_path_buf();
    let scenarios = etwdump_forge::scan_scenarios(&root);
    assert!(scenarios.len() >= 3, "{} scenarios", scenarios.len());
    for (name, c) in scenarios {
        let f = forge(&c);
        let want = f.scan.as_ref().expect("scan expectations");
        let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
        let fx = if name.contains("x86") {
            "x86-14393"
        } else {
            "x64-19041"
        };
        let (rep, _, _, _) = run(&d, fx);
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
                    "{name}: {:#x} chain end",
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
            assert_eq!(
                g.complete,
                b.pages.iter().all(|p| p.is_some()),
                "{name}: {:#x} complete",
                o.pa
            );
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
        // Orphaned pending blocks and contexts are found as orphans (or stale copies).
        for o in want.objects.iter().filter(|o| o.class != ScanClass::Live) {
            let hit = match o.kind {
                ScanKind::PendingBlock => rep
                    .blocks
                    .iter()
                    .any(|b| b.physical_address.get() == o.pa && b.class != Class::Live),
                ScanKind::LoggerContext => rep
                    .contexts
                    .iter()
                    .any(|c| c.physical_address.get() == o.pa && c.class != Class::Live),
                ScanKind::Buffer => true,
            };
            assert!(
                hit,
                "{name}: {:?} {:?} at {:#x} not found",
                o.class, o.kind, o.pa
            );
        }
        // One group per stopped session: its found buffers share one group.
        for g in want.groups.iter() {
            let ours: std::collections::BTreeSet<Option<usize>> = g
                .buffers
                .iter()
                .filter_map(|pa| found.get(pa))
                .filter(|b| b.class == Class::Orphaned)
                .map(|b| b.group)
                .collect();
            assert!(
                ours.len() <= 1 && !ours.contains(&None),
                "{name}: group {} split: {ours:?}",
                g.group
            );
        }
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
        for kind in ImageKind::ALL {
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
    }
}
