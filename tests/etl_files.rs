//! The record walker on the real ETL files in ../shared/data/etl (written by Windows 10;
//! skipped when absent): every buffer's valid bytes are consumed by complete records.

use std::path::PathBuf;

fn shared_etl(name: &str) -> Option<Vec<u8>> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/etl")
        .join(name);
    match std::fs::read(&p) {
        Ok(b) => Some(b),
        Err(_) => {
            eprintln!("SKIPPED: {} is not present", p.display());
            None
        }
    }
}

#[test]
fn real_etl_files_walk_completely() {
    for (name, buffers) in [
        ("lxcore_kernel.etl", 3usize),
        ("AMSITrace.etl", 6),
        ("ShutdownPerfDiagLogger.etl", 49),
    ] {
        let Some(b) = shared_etl(name) else { continue };
        let f = etwdump::etl::reader::read(&b);
        assert!(f.problem.is_none(), "{name}: {:?}", f.problem);
        eprintln!(
            "{name}: {} buffers, {} records",
            f.buffers.len(),
            f.buffers.iter().map(|x| x.records).sum::<usize>()
        );
        for (i, x) in f.buffers.iter().enumerate() {
            assert!(x.torn.is_none(), "{name} buffer {i}: {:?}", x.torn);
            assert_eq!(x.trimmed_bytes, 0, "{name} buffer {i}");
            assert_eq!(x.walk.end, x.saved_offset as usize, "{name} buffer {i}");
        }
        // Buffer 0 is the header buffer: BufferType 4, first record the SYSTEM header (hook 0).
        let h = &f.buffers[0];
        assert_eq!(h.buffer_type, 4, "{name}");
        let r0 = h.walk.first.unwrap();
        assert_eq!(r0.hook, Some(0x0000), "{name}");
        // etw-internals.md §6.1: 3, 6 and 49 buffers; TRACE_LOGFILE_HEADER.BuffersWritten
        // (+0x24 after the 0x20-byte SYSTEM header) counts them all, header buffer included.
        assert_eq!(f.buffers.len(), buffers, "{name}");
        let tlh = 0x48 + 0x20;
        let written = u32::from_le_bytes(b[tlh + 0x24..tlh + 0x28].try_into().unwrap());
        assert_eq!(written as usize, buffers, "{name}");
    }
}
