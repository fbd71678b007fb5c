//! The GUID table and its registrations, the user-mode walks (PEB, loader lists, ntdll's
//! export directory) and the real-time consumers' queued buffers (issue 27), structure-aware:
//! the forge's `Config::sample_realtime().with_user_images()` (bitmap dump of the 19041
//! fixture: providers with kernel and user registrations, three real-time consumers with
//! buffers queued in their own address spaces, every process's PEB, loader data and the shared
//! ntdll) is built once, and the pages of those structures are listed: the GUID table's
//! buckets, each GUID entry and registration, each consumer object, its user buffer list head,
//! count, nodes, queued buffers and reserved space (translated through the consumer's own
//! DirectoryTableBase), each process's PEB, PEB_LDR_DATA, loader entries and image headers,
//! and ntdll's export directory. The input patches those pages
//! (`etwdump_fuzz::patch_pages`), then `providers` (all rows), `check` (every tamper check,
//! the etw-write-patch user walk included) and `buffers` (the consumers' queued buffers
//! included) run with the fixture's PDB.
//!
//! Oracle: every table line of the three listings is terminal-safe (process, session and
//! module names from memory escaped).
#![no_main]

use etwdump::addr::{Pfn, VirtAddr};
use etwdump::dump::{Arch, DumpFile, OpenOptions};
use etwdump::mem::AddressSpace;
use etwdump::render::rows::Row;
use etwdump::report;
use etwdump_forge::{forge, Config};
use etwdump_fuzz::{assert_terminal_safe, PatchBase};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn base() -> &'static PatchBase {
    static B: OnceLock<PatchBase> = OnceLock::new();
    B.get_or_init(|| {
        let f = forge(&Config::sample_realtime().with_user_images());
        let bytes = f.to_bytes();
        let d = DumpFile::from_bytes(bytes.clone(), OpenOptions::default()).expect("base");
        let kernel_dtb = d.header().directory_table_base;
        // (address space root, VA, length)
        let mut want: Vec<(u64, u64, u64)> = Vec::new();
        let etw = f.etw.as_ref().expect("etw");
        if let Some(gt) = &etw.guid_table {
            want.push((kernel_dtb, gt.va, u64::from(gt.buckets) * gt.stride));
        }
        for p in &etw.providers {
            want.push((kernel_dtb, p.guid_entry_va, 0x100));
            for r in &p.registrations {
                want.push((kernel_dtb, r.va, 0x100));
            }
        }
        for s in etw.sessions() {
            for c in &s.consumers {
                want.push((kernel_dtb, c.va, 0x100));
                if let Some(rt) = &c.realtime {
                    want.push((rt.dtb, rt.user_buffer_list_head, 0x40));
                    want.push((rt.dtb, rt.user_buffer_count_va, 8));
                    if let Some((va, len)) = rt.reserved_space {
                        want.push((rt.dtb, va, u64::from(len).min(0x4000)));
                    }
                    for b in &rt.user_buffers {
                        want.push((rt.dtb, b.node_va, 0x40));
                        want.push((rt.dtb, b.va, 0x1000));
                    }
                }
            }
        }
        if let Some(n) = &f.ntdll {
            for p in &n.processes {
                want.push((p.dtb, p.peb, 0x400));
                want.push((p.dtb, p.ldr, 0x100));
                want.push((p.dtb, p.image_base, 0x1000));
                for m in &p.modules {
                    want.push((p.dtb, m.ldr_entry, 0x100));
                    want.push((p.dtb, m.base, 0x1000));
                }
            }
            if let Some(p) = n.processes.first() {
                let (va, len) = n.export_directory;
                want.push((p.dtb, va, u64::from(len).min(0x4000)));
            }
        }
        let mut pages: Vec<usize> = Vec::new();
        for (dtb, va, len) in want {
            let space = AddressSpace::with_arch_dtb(&d, Arch::X64, dtb);
            let mut p = va & !0xFFF;
            while p <= va.saturating_add(len.max(1) - 1) {
                if let Ok(t) = space.translate(VirtAddr::new(p)) {
                    if let Some(o) = d.page_file_offset(Pfn::new(t.pa.get() >> 12)) {
                        pages.push(o as usize);
                    }
                }
                p += 0x1000;
            }
        }
        pages.sort_unstable();
        pages.dedup();
        assert!(pages.len() > 20, "{} pages", pages.len());
        PatchBase { bytes, pages }
    })
}

fuzz_target!(|data: &[u8]| {
    let b = base();
    b.run(data, |ctx| {
        let _ = report::providers::stream(ctx, true, &mut |r| {
            assert_terminal_safe("providers row", &r.table_line());
            Ok(())
        });
        let c = report::check::run(ctx);
        for f in &c.findings {
            assert_terminal_safe("check row", &f.table_line());
        }
        let _ = report::buffers::stream(ctx, None, &mut |r| {
            assert_terminal_safe("buffers row", &r.table_line());
            Ok(())
        });
    });
});
