//! ETW data in triage dumps (triage-etw.md): the saved windows (KiCurrentEtwBuffer* and
//! KiCurrentErrLogBuffer*), the ETW secondary-data blob, record counts and clocks. Regression
//! values from triage-etw.md §4.2, measured on the real dump (skipped when ../shared is absent).

mod common;

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::triage::{self, WindowKind};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use std::path::PathBuf;

fn real_isf() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/isf/5278AFF86C341677D7D7835C85B7B844-1.json.xz");
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("SKIPPED: {} is absent", p.display());
        None
    }
}

#[test]
fn real_triage_windows_and_blob() {
    let (Some(dump), Some(isf)) = (common::shared_dump("triage_x64.dmp"), real_isf()) else {
        return;
    };
    let d = DumpFile::open(&dump, OpenOptions::default()).unwrap();
    let t = d.triage().unwrap();
    assert_eq!(t.blocks.len(), 1831);
    assert_eq!(
        (t.blocks[56].va, t.blocks[56].file_offset, t.blocks[56].size),
        (0xFFFFC08BDE2F7000, 0xE0208, 0xE18)
    );
    for with_symbols in [true, false] {
        let ctx = if with_symbols {
            let opts = SymbolOptions {
                isf: Some(isf.clone()),
                ..SymbolOptions::default()
            };
            KernelContext::open(&d, &opts).unwrap()
        } else {
            KernelContext::without_symbols(&d)
        };
        let r = triage::read(&ctx);
        let tag = if with_symbols { "symbols" } else { "pattern" };
        assert_eq!(r.windows.len(), 2, "{tag}: {:?}", r.warnings);
        let w = &r.windows[0];
        assert_eq!(w.kind, WindowKind::CurrentBuffer);
        assert_eq!(
            (w.base.0, w.end.0, w.valid),
            (0xFFFFC08BDE2F7000, 0xFFFFC08BDE2F7E18, 0xE18)
        );
        assert!(w.starts_at_base);
        assert_eq!(
            (w.file_offset, w.block_index),
            (Some(0xE0208), Some(56)),
            "{tag}"
        );
        let h = w.header.as_ref().unwrap();
        assert_eq!(
            (h.logger_id, h.processor_index, h.buffer_size),
            (2, 0, 0x1000)
        );
        assert_eq!(
            (h.current_offset, h.sequence_number, h.state),
            (0xE18, 0x9E, 1)
        );
        assert_eq!(w.first_record, Some(0x48));
        let e = &r.windows[1];
        assert_eq!(e.kind, WindowKind::ErrlogTail);
        assert_eq!(
            (e.base.0, e.end.0, e.valid),
            (0xFFFFC08BDEA12000, 0xFFFFC08BDEA1B110, 0x9110)
        );
        assert_eq!(e.start.0, 0xFFFFC08BDEA1A110);
        assert_eq!((e.file_offset, e.block_index), (Some(0xE1030), Some(59)));
        assert!(!e.starts_at_base);
        // First whole record at window +0xD0 (file 0xE1100).
        assert_eq!(
            (e.first_record, e.partial_bytes),
            (Some(0xD0), 0xD0),
            "{tag}"
        );
        // It repeats the end of the blob's EventLog-System buffer #1 (logger 10).
        let dup = e.duplicate_of.unwrap();
        assert_eq!((dup.session, dup.buffer), (0, 0));
        assert_eq!(e.logger_id, Some(10));
        let b = r.blob.as_ref().unwrap();
        assert_eq!(
            (b.file_offset, b.size, b.parsed),
            (0x156594, 0xA51C, 0xA51C)
        );
        let bh = b.header.unwrap();
        assert_eq!(
            (bh.maximum_increment, bh.build_number, bh.cpu_speed_mhz),
            (156250, 0xF0004A61, 3593)
        );
        assert_eq!(
            (bh.boot_time, bh.perf_freq),
            (0x01D707F23BA702C0, 10_000_000)
        );
        let ids: Vec<_> = b
            .sessions
            .iter()
            .map(|s| {
                (
                    s.logger_id,
                    s.name.as_str(),
                    s.buffers.len(),
                    s.name_convention,
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                (10, "EventLog-System", 2, "x2"),
                (12, "Microsoft-Windows-Rdp-Graphics-RdpIdd-Trace", 32, "x2"),
                (18, "WiFiSession", 32, "x2")
            ]
        );
        let s = &b.sessions[0];
        assert_eq!(
            (s.logger_mode, s.clock_type, s.buffer_size),
            (0x98800180, 2, 0x10000)
        );
        assert_eq!(
            (s.buffers[0].file_offset, s.buffers[0].valid),
            (0x156620, 0x9110)
        );
        assert_eq!(b.sessions[1].clock_type, 1);
        assert_eq!(b.sessions[1].reference_perf_clock, 0x5D85F3);
        assert!(b.warnings.is_empty(), "{:?}", b.warnings);
        let cpu = r.crash_cpu.unwrap_or_else(|| panic!("{tag}: crash CPU"));
        if with_symbols {
            assert_eq!(cpu.number, Some(0));
            assert_eq!(cpu.mhz, Some(3593));
            assert_eq!(cpu.start_cycles, Some(0xD9D6525C4));
        }
    }
}
