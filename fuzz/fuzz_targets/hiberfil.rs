//! Hibernation files (`dump::hiberfil`, issue 32): the header, the restore sets' chains of
//! compression sets, the PFN index and the lazy decompression of the sets, on mutated
//! hibernation files (seeds: the forge's `write_hiberfil`, every format version and codec, a
//! wiped header).
//!
//! Oracle: an open that succeeds describes itself consistently — the stored pages are the
//! runs' pages, and the restore sets' pages are the stored pages plus those stored twice
//! (unless the index stopped at its bound); every page of a run is present (4096 bytes, the
//! same bytes when read again, the file's own bytes where the container says it is stored as
//! it is) or damaged (then one read warning names its set, unless more than
//! `MAX_READ_NOTES` were noted: then a summary counts them); a page outside the runs is not in
//! the image; at most one read warning per compression set, and at most `MAX_READ_NOTES` + 1.
#![no_main]

extern crate etwdump_fuzz;

use etwdump::addr::Pfn;
use etwdump::dump::hiberfil::Hiberfil;
use etwdump::dump::{DumpFile, OpenOptions, PageLookup};
use etwdump::warning::WarningKind;
use libfuzzer_sys::fuzz_target;

/// Pages read per input (the first and last of each run, then every page of the first runs).
const MAX_READS: usize = 512;

fuzz_target!(|data: &[u8]| {
    let Ok(d) = DumpFile::from_bytes(data.to_vec(), OpenOptions::default()) else {
        return;
    };
    let Some(h) = d.container::<Hiberfil>() else {
        return;
    };
    let info = h.info();
    let runs = d.physical_runs();
    let stored: u64 = runs.iter().map(|r| r.1).sum();
    assert_eq!(stored, d.stored_pages());
    let bound = d.warnings().iter().any(|w| w.kind == WarningKind::Bound);
    let read: u64 = info.restore_sets.iter().map(|s| s.pages_read).sum();
    if !bound {
        assert_eq!(read, stored + info.duplicate_pages);
    }
    let sets = info.sets_stored + info.sets_lz77 + info.sets_huffman;
    assert_eq!(
        sets,
        info.restore_sets.iter().map(|s| s.compression_sets).sum::<u64>()
    );
    let mut reads = 0;
    let mut damaged = std::collections::BTreeSet::new();
    let pfns = runs
        .iter()
        .flat_map(|&(first, n)| [first, first + n - 1])
        .chain(runs.iter().flat_map(|&(first, n)| first..first + n));
    for pfn in pfns {
        if reads >= MAX_READS {
            break;
        }
        reads += 1;
        match d.page(Pfn::new(pfn)) {
            PageLookup::Present(p) => {
                assert_eq!(p.len(), 4096);
                if let Some(o) = d.page_file_offset(Pfn::new(pfn)) {
                    assert_eq!(Some(&p[..]), d.file_bytes(o, 4096));
                }
                match d.page(Pfn::new(pfn)) {
                    PageLookup::Present(q) => assert_eq!(&p[..], &q[..]),
                    other => panic!("PFN {pfn:#x} read again: {other:?}"),
                }
            }
            PageLookup::Damaged { file_offset } => {
                damaged.insert(file_offset);
            }
            other => panic!("PFN {pfn:#x} of a run: {other:?}"),
        }
    }
    // Pages just outside the runs are not in the image.
    for &(first, n) in runs.iter().take(64) {
        for pfn in [first.checked_sub(1), first.checked_add(n)].into_iter().flatten() {
            if !runs.iter().any(|&(f, c)| pfn >= f && pfn < f + c) {
                assert_eq!(d.page(Pfn::new(pfn)), PageLookup::NotInDump);
            }
        }
    }
    let notes = d.read_warnings();
    assert!(notes.len() as u64 <= sets);
    assert!(notes.len() <= etwdump::dump::hiberfil::MAX_READ_NOTES + 1);
    // Beyond the listed ones, damaged sets are counted in the summary.
    let summary = notes.len() > etwdump::dump::hiberfil::MAX_READ_NOTES;
    for off in damaged.into_iter().filter(|_| !summary) {
        let needle = format!("data starts at file offset {off:#x}");
        assert!(
            notes
                .iter()
                .any(|w| w.kind == WarningKind::Decode && w.message.contains(&needle)),
            "no read warning for the damaged set at {off:#x}"
        );
    }
});
