//! Benchmark: the buffers queued for real-time consumers, on the 19041 fixture kernel with
//! the sample's sessions and three consumers each holding 16 queued copies (the forge's
//! maximum) in their own address spaces: one a list of descriptors with a 17-slot reserved
//! region to search, one of embedded SlistEntry links, one of descriptors without a reserved
//! region. Measures `find_buffers` for the consumed sessions (kernel lists, per-CPU routes and
//! the consumers' lists, reserved regions and the copy check against kernel buffers).
//!
//! The same file's second group: `etw-write-patch` (ntdll's EtwEventWrite family in every
//! process with user memory, through each process's page tables and ntdll's export table)
//! on the 19041 providers configuration with user images.
//!
//! Run: `cargo bench --bench realtime`

use criterion::Criterion;
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::etw::buffers::find_buffers;
use etwdump::etw::loggers::list_sessions;
use etwdump::etw::tamper::CheckId;
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{forge, Config, HeadShape, NodeShape, RealtimeSpec};
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fx = root.join("tests/fixtures/x64-19041");
    let mut cfg = Config::sample_etw();
    let embedded = RealtimeSpec {
        node: NodeShape::Embedded,
        head: HeadShape::SeparateHead,
        reserved: None,
        ..RealtimeSpec::new(16)
    };
    let no_region = RealtimeSpec {
        node: NodeShape::Descriptor { ptr_offset: 0x18 },
        reserved: None,
        ..RealtimeSpec::new(16)
    };
    cfg.etw = cfg.etw.take().map(|e| {
        e.with_realtime_consumer(3, 0x44C, RealtimeSpec::new(16))
            .with_realtime_consumer(6, 0x44C, embedded)
            .with_realtime_consumer(6, 0x12E4, no_region)
    });
    let d = DumpFile::from_bytes(forge(&cfg).to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let l = list_sessions(&ctx);
    let array = l.array.clone().unwrap();
    let consumed: Vec<_> = l
        .sessions
        .iter()
        .filter(|s| !s.consumers.is_empty())
        .cloned()
        .collect();
    let queued: usize = consumed
        .iter()
        .map(|s| {
            find_buffers(&ctx, &array, s)
                .buffers
                .iter()
                .filter(|b| b.owner.is_some())
                .count()
        })
        .sum();
    println!(
        "realtime: {} consumed sessions, {queued} queued consumer buffers",
        consumed.len()
    );
    assert_eq!(queued, 48);
    let mut c = Criterion::default().sample_size(20).configure_from_args();
    let mut g = c.benchmark_group("realtime");
    g.bench_function(
        "find_buffers of the 2 consumed sessions (48 queued copies)",
        |b| {
            b.iter(|| {
                consumed
                    .iter()
                    .map(|s| find_buffers(&ctx, &array, s).buffers.len())
                    .sum::<usize>()
            })
        },
    );
    g.finish();

    // etw-write-patch over every process with user memory.
    let pcfg = etwdump_forge::providers_config(&fx);
    let f = forge(&pcfg);
    let procs = f.ntdll.as_ref().map_or(0, |n| n.processes.len());
    let d = DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).unwrap();
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let mut r = etwdump::etw::tamper::TamperReport::default();
    etwdump::etw::userpatch::check(&ctx, &mut r);
    let run = r.runs.last().unwrap();
    println!(
        "{}: {} processes examined of {procs} with user memory, {} findings, limit {:?}",
        CheckId::EtwWritePatch,
        run.examined,
        run.findings,
        run.limit
    );
    assert_eq!(run.examined as usize, procs);
    let mut g = c.benchmark_group(CheckId::EtwWritePatch.as_str());
    g.bench_function(format!("check {procs} processes"), |b| {
        b.iter(|| {
            let mut r = etwdump::etw::tamper::TamperReport::default();
            etwdump::etw::userpatch::check(&ctx, &mut r);
            r.findings.len()
        })
    });
    g.finish();
    c.final_summary();
}
