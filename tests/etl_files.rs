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

/// Issue 29 item 1: every process, thread and image event of the real
/// ShutdownPerfDiagLogger.etl (Windows 10) decodes with its class's layout, exactly: no short
/// payload, no trailing bytes, every SID a SID; values as Windows wrote them.
#[test]
fn real_kernel_events_decode_exactly() {
    use etwdump::decode::mof::{self, Value};
    use etwdump::text::Untrusted;
    use std::collections::BTreeMap;
    let Some(b) = shared_etl("ShutdownPerfDiagLogger.etl") else {
        return;
    };
    let f = etwdump::etl::reader::read(&b);
    let mut by_class: BTreeMap<(String, &str), u64> = BTreeMap::new();
    let mut registry = None;
    let mut ntdll = 0;
    let mut named_threads = 0;
    for buf in &f.buffers {
        let data = &b[buf.offset as usize..(buf.offset + u64::from(buf.buffer_size)) as usize];
        let valid = (buf.saved_offset as usize).min(data.len());
        etwdump::etl::records::walk_each(data, valid, |r| {
            let Some(p) = mof::decode(data, r) else {
                return;
            };
            assert_eq!(
                p.problem,
                None,
                "{:#06x?} at {:#x}: {p:?}",
                r.hook,
                buf.offset as usize + r.offset
            );
            *by_class
                .entry((format!("{:#06x}", r.hook.unwrap()), p.class))
                .or_default() += 1;
            if p.text("ImageFileName") == Some(&Untrusted::from("Registry")) {
                registry = Some(p.clone());
            }
            if p.text("FileName")
                .is_some_and(|n| n.raw().ends_with("\\System32\\ntdll.dll"))
            {
                ntdll += 1;
            }
            if p.text("ThreadName").is_some_and(|n| !n.is_empty()) {
                named_threads += 1;
            }
        });
    }
    let count = |h: &str, c: &str| by_class.get(&(h.to_string(), c)).copied();
    assert_eq!(count("0x0302", "Process_V4_TypeGroup1"), Some(60));
    assert_eq!(count("0x0303", "Process_V4_TypeGroup1"), Some(94));
    assert_eq!(count("0x0304", "Process_V4_TypeGroup1"), Some(37));
    assert_eq!(count("0x0501", "Thread_V3_TypeGroup1"), Some(350));
    assert_eq!(count("0x0502", "Thread_V3_TypeGroup1"), Some(1032));
    assert_eq!(count("0x0503", "Thread_V3_TypeGroup1"), Some(1175));
    assert_eq!(count("0x0504", "Thread_V3_TypeGroup1"), Some(501));
    assert_eq!(count("0x1402", "Image_Load"), Some(4791));
    assert_eq!(count("0x1403", "Image_Load"), Some(6745));
    assert_eq!(count("0x1404", "Image_Load"), Some(2145));
    // The 16,930 above and 146 records of the classes tests/mof_real.rs checks (header
    // extensions, LOAD_IMAGE, terminations, defunct processes, kernel base, hypercall page).
    assert_eq!(by_class.values().sum::<u64>(), 17_076);
    // The Registry process: pid 88, parent System, no session, still running, LocalSystem.
    let r = registry.expect("the Registry process");
    assert_eq!(r.number("ProcessId"), Some(88));
    assert_eq!(r.number("ParentId"), Some(4));
    assert_eq!(r.number("SessionId"), Some(0xFFFF_FFFF));
    assert_eq!(
        r.get("ExitStatus"),
        Some(&etwdump::decode::payload::Value::Signed(259))
    );
    assert_eq!(r.text("UserSID"), Some(&Untrusted::from("S-1-5-18")));
    assert_eq!(
        r.get("UniqueProcessKey"),
        Some(&Value::Address(0xffffca8681ad6080))
    );
    assert!(ntdll > 0);
    assert!(named_threads > 0, "no thread carries a name");
}
