//! Benchmark: extraction throughput on a forge dump with 256 MiB of buffers (4096 buffers of
//! 64 KiB in one session, the 19041 fixture kernel). `extract` = find, read and walk every
//! buffer, then read each again, fix it up, write it and hash it.
//!
//! Run: `cargo bench --bench extract`

use criterion::{BatchSize, Criterion, Throughput};
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config, EtwSpec};
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fx = root.join("tests/fixtures/x64-19041");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = Config::from_fixture(&fx);
    cfg.physical_memory_bytes = 512 << 20;
    cfg.etw = Some(EtwSpec::standard(cfg.build).with_large_buffers(cfg.build, 4096, 0x10000));
    let p = dir.path().join("large.dmp");
    forge(&cfg).write_to(&p).expect("write dump");
    let d = DumpFile::open(&p, OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let out = dir.path().join("out");
    let m =
        etwdump::report::extract::extract(&ctx, "bench", &out, Some("EtwdumpBench"), true).unwrap();
    let bytes: u64 = m.sessions.iter().map(|s| s.bytes).sum();
    let buffers: usize = m.sessions.iter().map(|s| s.buffers).sum();
    let records: usize = m.sessions.iter().map(|s| s.records).sum();
    println!("extract: {buffers} buffers, {records} records, {bytes} bytes written");
    let mut c = Criterion::default().sample_size(10).configure_from_args();
    let mut g = c.benchmark_group("extract");
    g.throughput(Throughput::Bytes(bytes));
    // Each iteration extracts into an empty directory, as a user does: overwriting the previous
    // 256 MiB file would also time the file system freeing it (~0.2 s here), which is not
    // extraction work. The removal happens in the untimed setup.
    g.bench_function("256 MiB of buffers", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_dir_all(&out);
            },
            |()| {
                etwdump::report::extract::extract(&ctx, "bench", &out, Some("EtwdumpBench"), false)
                    .unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    c.final_summary();
}
