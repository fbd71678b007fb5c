//! `scan` over mutated physical memory (issue 27): the forge's sample machine
//! (`Config::sample_etw`: a bitmap dump of the 19041 fixture with sessions, buffers, pending
//! CCSWAP blocks, consumers and providers) is built once; the input patches any of its stored
//! pages (`etwdump_fuzz::patch_pages`: bytes, integers, kernel-pointer-like values), then the
//! carving pass runs over all physical memory (`report::scan::Scan::run`, one thread) with the
//! fixture's PDB, and every row is rendered as a table line and as CSV.
//!
//! Oracles: the pass reads no more pages than the file stores; every table line is
//! terminal-safe (names from memory escaped).
#![no_main]

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::carve::Progress;
use etwdump::render::rows::{to_string, Row};
use etwdump::report::scan::{Scan, ScanRow};
use etwdump::report::RowFormat;
use etwdump_forge::{forge, Config};
use etwdump_fuzz::{assert_terminal_safe, PatchBase};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn base() -> &'static PatchBase {
    static B: OnceLock<PatchBase> = OnceLock::new();
    B.get_or_init(|| {
        let bytes = forge(&Config::sample_etw()).to_bytes();
        let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).expect("base");
        let mut pages = Vec::new();
        for (first, n) in d.physical_runs() {
            for pfn in first..first + n {
                if let Some(o) = d.page_file_offset(etwdump::addr::Pfn::new(pfn)) {
                    pages.push(o as usize);
                }
            }
        }
        PatchBase { bytes, pages }
    })
}

fuzz_target!(|data: &[u8]| {
    let b = base();
    b.run(data, |ctx| {
        let progress = Progress::default();
        let scan = Scan::run(ctx, 1, &progress);
        assert!(scan.report.pages_scanned <= b.pages.len() as u64);
        let rows = scan.rows();
        for r in &rows {
            assert_terminal_safe("scan row", &r.table_line());
        }
        let csv = to_string::<ScanRow>(&rows, scan.warnings(), RowFormat::Csv, "scan");
        assert_terminal_safe("scan CSV", &csv);
    });
});
