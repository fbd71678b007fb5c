//! Dump-file layer: header, run list, bitmap, triage block table, DumpBlob secondary data and
//! the ETW blob, with and without `allow_truncated`; then the kernel layer without symbols
//! (KDBG, KUSER, module list, PE image) and, on triage dumps, the ETW windows and blob.
#![no_main]

use etwdump::addr::Pfn;
use etwdump::dump::{Contents, DumpFile, OpenOptions, PageLookup, SecondaryData};
use etwdump::etw::triage::{parse_blob, ETW_SECONDARY_DUMP_DATA_GUID};
use etwdump::kernel::context::KernelContext;
use etwdump::mem::AddressSpace;
use libfuzzer_sys::fuzz_target;

fn exercise(d: &DumpFile) {
    let h = d.header();
    let _ = (
        d.len(),
        d.stored_pages(),
        d.warnings().len(),
        d.has_physical_memory(),
    );
    match d.contents() {
        Contents::Runs(r) => {
            for run in r.runs().iter().take(64) {
                let _ = d.page(run.base);
                let _ = d.page(Pfn::new(run.base.get().wrapping_add(run.count).wrapping_sub(1)));
            }
            let _ = r.data_end();
        }
        Contents::Bitmap(b) => {
            for pfn in [
                0,
                1,
                b.bits / 2,
                b.bits.saturating_sub(1),
                b.bits,
                u64::MAX >> 12,
            ] {
                if let PageLookup::Present(p) = d.page(Pfn::new(pfn)) {
                    assert_eq!(p.len(), 4096);
                }
            }
            let _ = b.data_end();
        }
        Contents::Triage(t) => {
            for s in t.segments().iter().take(256) {
                let _ = d.file_bytes(s.file_offset, s.len as usize);
                let _ = t.segment(s.va);
                let _ = t.segment(s.va.wrapping_add(s.len));
            }
            let sec = SecondaryData::parse(d.bytes(), u64::from(t.size_of_dump));
            if let Some(b) = sec.find(ETW_SECONDARY_DUMP_DATA_GUID) {
                if let Some(bytes) = d.file_bytes(b.data_offset, b.data_size as usize) {
                    let _ = parse_blob(bytes, b.data_offset);
                }
            }
        }
    }
    // A few virtual reads through the header's pointers.
    let space = AddressSpace::kernel(d);
    let mut buf = [0u8; 64];
    for va in [
        h.kd_debugger_data_block,
        h.ps_loaded_module_list,
        h.ps_active_process_head,
        h.pfn_database,
    ] {
        let _ = space.translate(va);
        let _ = space.read(va, &mut buf);
    }
    // The kernel layer on top (no symbols), and the triage ETW data.
    let ctx = KernelContext::without_symbols(d);
    if d.triage().is_some() {
        let _ = etwdump::etw::triage::read(&ctx);
    }
}

fuzz_target!(|data: &[u8]| {
    for allow_truncated in [false, true] {
        if let Ok(d) = DumpFile::from_bytes(data.to_vec(), OpenOptions { allow_truncated }) {
            exercise(&d);
        }
    }
});
