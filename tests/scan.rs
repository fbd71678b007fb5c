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
        // The same memory as an ELF core and a .vmem: the same findings at the same places.
        let dir = tempfile::tempdir().unwrap();
        for kind in [ImageKind::Elf, ImageKind::Vmware] {
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
