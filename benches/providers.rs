//! Benchmark: `providers` and `check` on a forge dump of the 19041 fixture kernel whose GUID
//! table holds 384 providers (the forge's 512 KiB ETW pool area holds few more; a busy system has 1,000-3,000, and the cost grows linearly) (two kernel registrations each, every other one enabled by a
//! session): the table walk (64 buckets × 3 lists → GUID entries → registrations), the
//! session listing it names loggers with, and the tamper checks over both.
//!
//! Run: `cargo bench --bench providers`

use criterion::Criterion;
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelContext, SymbolOptions};
use etwdump_forge::{
    forge, Config, EnableSpec, EtwSpec, ProviderSet, ProviderSpec, ProvidersSpec, Registrant,
    RegistrationSpec, ETW_TRACE_GUID_TYPE,
};
use std::path::Path;

const PROVIDERS: u32 = 384;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fx = root.join("tests/fixtures/x64-19041");
    let mut cfg = Config::from_fixture(&fx);
    cfg.physical_memory_bytes = 256 << 20;
    let list = (0..PROVIDERS)
        .map(|i| {
            let mut guid = [0u8; 16];
            guid[..4].copy_from_slice(&i.wrapping_mul(0x9E37_79B9).to_le_bytes());
            guid[4..8].copy_from_slice(&i.to_le_bytes());
            guid[8] = 0xE7;
            ProviderSpec {
                name: format!("Bench-Provider-{i}"),
                guid,
                guid_type: ETW_TRACE_GUID_TYPE,
                registrations: (0..2)
                    .map(|_| RegistrationSpec {
                        registrant: Registrant::Kernel { handle: None },
                        enable_mask: None,
                    })
                    .collect(),
                enables: if i % 2 == 0 {
                    vec![EnableSpec {
                        logger_id: 3,
                        level: 4,
                        match_any: 0x10,
                        match_all: 0,
                        enable_property: 0,
                    }]
                } else {
                    Vec::new()
                },
                bucket: None,
            }
        })
        .collect();
    cfg.etw = Some(
        EtwSpec::standard(cfg.build).with_provider_spec(ProvidersSpec {
            set: ProviderSet::List(list),
            table_shape: None,
        }),
    );
    let d = DumpFile::from_bytes(forge(&cfg).to_bytes(), OpenOptions::default()).unwrap();
    let opts = SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..SymbolOptions::default()
    };
    let ctx = KernelContext::open(&d, &opts).unwrap();
    let (t, _) = etwdump::report::providers::read(&ctx);
    let regs: usize = t.providers.iter().map(|p| p.registrations.len()).sum();
    println!(
        "providers: {} GUID entries, {regs} registrations, {} warnings",
        t.providers.len(),
        t.warnings.len()
    );
    assert_eq!(t.providers.len(), PROVIDERS as usize);
    let mut c = Criterion::default().sample_size(10).configure_from_args();
    let mut g = c.benchmark_group("providers");
    g.bench_function("walk 384 providers", |b| {
        b.iter(|| etwdump::report::providers::read(&ctx))
    });
    g.bench_function("check (sessions, walk, checks)", |b| {
        b.iter(|| etwdump::report::check::run(&ctx))
    });
    g.finish();
    c.final_summary();
}
