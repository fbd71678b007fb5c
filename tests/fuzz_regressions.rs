//! Every reproducer the fuzzing campaign found (fuzz/regressions/<target>/*, see
//! fuzz/README.md) runs cleanly through the code its target exercises: no panic (the tests run
//! with overflow checks), no abort, a bounded result.

use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::KernelContext;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, remembering the largest single request (the pdb_load findings were
/// multi-GiB reservations that an overcommitting OS grants without a sign).
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LARGEST.fetch_max(n, Ordering::Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Largest = Largest;

/// pdb_load: loading each reproducer as a PDB ends (Ok or an error) with no allocation of a
/// GiB or more (findings 4 and 8: an argument list's count reserved 16 GiB).
#[test]
fn pdb_load_reproducers() {
    let all = reproducers("pdb_load");
    for (name, bytes) in &all {
        LARGEST.store(0, Ordering::Relaxed);
        let _ = etwdump::symbols::Symbols::from_pdb_bytes(
            std::path::Path::new(name),
            bytes,
            etwdump::symbols::WANTED_TYPES,
        );
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(largest < 1 << 30, "{name}: a {largest}-byte allocation");
    }
    println!("pdb_load: {} reproducers", all.len());
}

mod common;

fn reproducers(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<(String, Vec<u8>)> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// dump_open: the dump layer with and without truncation allowed, the kernel layer without
/// symbols, the logger listing, and `info` through the CLI (exit 0 or 2, one error line).
#[test]
fn dump_open_reproducers() {
    let all = reproducers("dump_open");
    for (name, bytes) in &all {
        for allow_truncated in [false, true] {
            if let Ok(d) = DumpFile::from_bytes(bytes.clone(), OpenOptions { allow_truncated }) {
                // Memory images: discovery of the architecture and DTB first (finding 6).
                let ctx = KernelContext::without_symbols(&d);
                let _ = etwdump::etw::loggers::list_sessions(&ctx);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = common::etwdump(&["info", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0) | Some(2)),
            "{name}: {:?} {err}",
            out.status
        );
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
    println!("dump_open: {} reproducers", all.len());
}

/// images (issue 27): each reproducer as the target reads it (first byte: 0 an image from
/// bytes, 1 a `.vmss` of u16 length beside a `.vmem`, 2 a layout over a 64 KiB raw file); a
/// pass over all memory reads no more pages than the file holds (finding 10: two layout
/// ranges placing the same file bytes made it read 24 pages of a 16-page file).
#[test]
fn images_reproducers() {
    let all = reproducers("images");
    let lenient = OpenOptions {
        allow_truncated: true,
    };
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("layout.raw");
    let b: Vec<u8> = (0..65536u32)
        .map(|i| (i / 4096) as u8 ^ (i as u8))
        .collect();
    std::fs::write(&raw, &b).unwrap();
    let check = |name: &str, d: Result<DumpFile, etwdump::dump::DumpError>, len: u64| {
        if let Ok(d) = d {
            let pages: u64 = d.physical_runs().iter().map(|r| r.1).sum();
            assert!(
                pages <= len / 4096,
                "{name}: {pages} pages of a {len}-byte file"
            );
        }
    };
    for (name, data) in &all {
        let Some((&mode, rest)) = data.split_first() else {
            continue;
        };
        match mode % 3 {
            0 => check(
                name,
                DumpFile::from_bytes(rest.to_vec(), lenient),
                rest.len() as u64,
            ),
            1 => {
                let n = rest.len().min(
                    usize::from(u16::from_le_bytes([
                        rest.first().copied().unwrap_or(0),
                        rest.get(1).copied().unwrap_or(0),
                    ])) + 2,
                );
                let (vmss, vmem) = rest.split_at(n);
                let (s, m) = (dir.path().join("x.vmss"), dir.path().join("x.vmem"));
                std::fs::write(&s, vmss.get(2..).unwrap_or_default()).unwrap();
                std::fs::write(&m, vmem).unwrap();
                let len = vmem.len().max(vmss.len()) as u64;
                check(name, DumpFile::open(&s, lenient), len);
            }
            _ => {
                if let Ok(l) = etwdump::dump::layout::Layout::parse(rest) {
                    let d = DumpFile::open_layout(&raw, &l, lenient);
                    if let (Ok(d), true) = (&d, name.contains("alias")) {
                        assert!(
                            d.warnings()
                                .iter()
                                .any(|w| w.message.contains("at more than one physical address")),
                            "{name}: {:?}",
                            d.warnings()
                        );
                    }
                    check(name, d, 65536);
                }
            }
        }
    }
    assert!(!all.is_empty());
    println!("images: {} reproducers", all.len());
}

/// records: the walker on the reproducer's buffer (input: valid u16 | start u16 | phase u8 |
/// bytes): `records()` and `walk()` agree, every record lies inside the valid bytes, and
/// `first_record_complete` agrees with the walk whenever `valid` is within the buffer.
#[test]
fn records_reproducers() {
    use etwdump::etl::records;
    let all = reproducers("records");
    for (name, data) in &all {
        if data.len() < 5 {
            continue;
        }
        let valid = usize::from(u16::from_le_bytes([data[0], data[1]]));
        let buf = &data[5..];
        let w = records::walk(buf, valid);
        let recs = records::records(buf, valid);
        assert_eq!(recs.len(), w.count, "{name}");
        for r in &recs {
            assert!(r.offset + r.size <= valid.min(buf.len()), "{name}: {r:?}");
        }
        if valid <= buf.len() {
            let prefix = &buf[..buf.len().min(etwdump::etl::header::BUFFER_HEADER_SIZE + 8)];
            assert_eq!(
                records::first_record_complete(prefix, valid),
                w.count > 0,
                "{name}"
            );
        }
    }
    println!("records: {} reproducers", all.len());
}

/// symsrv: an HTTP answer (inputs whose selector byte is 2: the rest is the whole response)
/// served once per request on 127.0.0.1 to `fetch`, which must end — a PDB, or an error whose
/// text is terminal-safe — without a panic (finding 12: a `343` status with a Location made
/// ureq 3.5.2 panic in `consume_redirect_body`, "remote to have signaled redirect").
#[test]
fn symsrv_reproducers() {
    use etwdump::symbols::server::{fetch, Server};
    use std::io::{BufRead, BufReader, Write};
    let all = reproducers("symsrv");
    let id = etwdump::symbols::PdbIdentity::from_guid_text(
        "ntkrnlmp.pdb",
        "5278AFF8-6C34-1677-D7D7-835C85B7B844",
        1,
    )
    .unwrap();
    let mut ran = 0;
    for (name, bytes) in &all {
        if bytes.first() != Some(&2) {
            continue;
        }
        let answer = bytes[1..].to_vec();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut rd = BufReader::new(c.try_clone().unwrap());
                for _ in 0..64 {
                    let mut line = String::new();
                    if rd.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                let _ = c.write_all(&answer);
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
        });
        let cache = tempfile::tempdir().unwrap();
        let mut srv = Server::new(&format!("http://127.0.0.1:{port}"), cache.path().into());
        srv.timeout = std::time::Duration::from_secs(2);
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fetch(&srv, &id)));
        let r = got.unwrap_or_else(|_| panic!("{name}: fetch panicked"));
        if let Err(e) = r {
            let text = e.to_string();
            assert!(
                !text.chars().any(etwdump::text::needs_escape),
                "{name}: {text:?}"
            );
        }
        ran += 1;
    }
    assert!(ran >= 1, "no symsrv HTTP reproducer");
    println!("symsrv: {ran} HTTP reproducers");
}
