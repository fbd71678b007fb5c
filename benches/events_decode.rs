//! Benchmark (issue 29 item 6): decoded events per second against the undecoded path, one
//! core, on the real ShutdownPerfDiagLogger.etl (../shared/data/etl; 17,078 records of the
//! classic kernel classes: process, thread and image rundown and their starts and ends; the
//! benchmark says SKIPPED and stops when the file is absent).
//!
//! * `walk`: the record walker alone (`etl::records::walk_from` over every buffer): what
//!   `events` costs per record before any payload is looked at;
//! * `walk + decode`: the same walk with every record's payload decoded
//!   (`decode::dispatch::decode`: MOF classes, CSwitch, TraceLogging, the manifest table, raw).
//!
//! Run: `cargo bench --bench events_decode`

use criterion::{Criterion, Throughput};
use etwdump::decode::dispatch;
use etwdump::etl::header::BUFFER_HEADER_SIZE;
use etwdump::etl::records;

/// The file's buffers: (bytes, SavedOffset).
fn buffers(file: &[u8]) -> Vec<(&[u8], usize)> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + 8 <= file.len() {
        let size = u32::from_le_bytes(file[off..off + 4].try_into().unwrap()) as usize;
        let saved = u32::from_le_bytes(file[off + 4..off + 8].try_into().unwrap()) as usize;
        if size < BUFFER_HEADER_SIZE || off + size > file.len() {
            break;
        }
        out.push((&file[off..off + size], saved.min(size)));
        off += size;
    }
    out
}

fn main() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/etl/ShutdownPerfDiagLogger.etl");
    let Ok(file) = std::fs::read(&path) else {
        eprintln!("SKIPPED: {} is not present", path.display());
        return;
    };
    let bufs = buffers(&file);
    let mut n = 0u64;
    let mut decoded = 0u64;
    for (b, valid) in &bufs {
        records::walk_from(b, BUFFER_HEADER_SIZE, *valid, |r| {
            n += 1;
            if dispatch::decode(b, r).is_some_and(|p| p.class != etwdump::decode::raw::CLASS) {
                decoded += 1;
            }
        });
    }
    eprintln!(
        "{} buffers, {n} records, {decoded} decoded (not raw)",
        bufs.len()
    );
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("events");
    g.throughput(Throughput::Elements(n));
    g.bench_function("walk", |x| {
        x.iter(|| {
            let mut acc = 0u64;
            for (b, valid) in &bufs {
                records::walk_from(b, BUFFER_HEADER_SIZE, *valid, |r| {
                    acc = acc.wrapping_add(r.offset as u64 ^ u64::from(r.hook.unwrap_or(0)))
                });
            }
            acc
        })
    });
    g.bench_function("walk + decode", |x| {
        x.iter(|| {
            let mut acc = 0usize;
            for (b, valid) in &bufs {
                records::walk_from(b, BUFFER_HEADER_SIZE, *valid, |r| {
                    acc += dispatch::decode(b, r).map_or(0, |p| p.fields.len())
                });
            }
            acc
        })
    });
    g.finish();
    c.final_summary();
}
