//! Benchmark: `info` on a 16 MiB and a 16 GiB full dump (sparse files in a temp dir).
//! `info` must not read the file: open + info time and peak RSS must be the same order for
//! both sizes. Criterion times the library call; the CLI is then run as a child process to
//! measure its wall time and peak RSS (getrusage via wait4).
//!
//! Run: `cargo bench --bench open_info`

use criterion::Criterion;
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump_forge::{forge, Config, Layout};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn make(dir: &Path, name: &str, bytes: u64, layout: Layout) -> PathBuf {
    let mut c = Config::x64();
    c.layout = layout;
    c.physical_memory_bytes = bytes;
    let f = forge(&c);
    let p = dir.join(name);
    f.write_to(&p).expect("write dump");
    p
}

fn dumps(dir: &Path) -> Vec<(String, PathBuf)> {
    vec![
        (
            "full 16 MiB".into(),
            make(dir, "full16m.dmp", 16 << 20, Layout::Full),
        ),
        (
            "full 16 GiB".into(),
            make(dir, "full16g.dmp", 16 << 30, Layout::Full),
        ),
        (
            "bitmap 16 GiB".into(),
            make(
                dir,
                "bmp16g.dmp",
                16 << 30,
                Layout::Bitmap {
                    sig: etwdump_forge::BitmapSig::Sdmp,
                    dump_type: 5,
                },
            ),
        ),
    ]
}

fn bench(c: &mut Criterion, set: &[(String, PathBuf)]) {
    let mut g = c.benchmark_group("open+info");
    for (name, path) in set {
        g.bench_function(name.as_str(), |b| {
            b.iter(|| {
                let d = DumpFile::open(path, OpenOptions::default()).unwrap();
                let r = etwdump::report::info::info(&d);
                assert!(r.kernel_pdb.is_some());
                r
            })
        });
    }
    g.finish();
}

/// Run the CLI once; wall time and peak RSS in KiB.
// The child is reaped by wait4 below (which also gives its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
fn run_cli(path: &Path) -> (Duration, i64) {
    let exe = env!("CARGO_BIN_EXE_etwdump");
    let t = Instant::now();
    let child = std::process::Command::new(exe)
        .args(["info", path.to_str().unwrap(), "--format", "json"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn etwdump");
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: plain wait4 on our own child with valid out-pointers.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let dt = t.elapsed();
    assert_eq!(r, child.id() as i32);
    assert_eq!(status, 0, "etwdump info failed");
    (dt, ru.ru_maxrss)
}

/// `sessions` beyond symbol loading, on the largest forge dump with ETW state: 16 GiB of
/// memory, the 19041 fixture kernel, MaxLoggers 256.
fn bench_sessions(c: &mut Criterion, dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fx = root.join("tests/fixtures/x64-19041");
    let mut cfg = Config::from_fixture(&fx);
    cfg.physical_memory_bytes = 16 << 30;
    cfg.etw = Some(etwdump_forge::EtwSpec::standard_with_max_loggers(
        cfg.build, 256,
    ));
    let p = dir.join("etw16g.dmp");
    forge(&cfg).write_to(&p).expect("write");
    let d = DumpFile::open(&p, OpenOptions::default()).unwrap();
    let opts = etwdump::kernel::context::SymbolOptions {
        pdb: Some(fx.join("ntkrnlmp.pdb")),
        ..Default::default()
    };
    let ctx = etwdump::kernel::context::KernelContext::open(&d, &opts).unwrap();
    let n = etwdump::etw::loggers::list_sessions(&ctx).sessions.len();
    println!(
        "sessions bench: {} bytes, {n} sessions in 256 slots",
        d.len()
    );
    c.bench_function("sessions after symbols (16 GiB dump, 256 slots)", |b| {
        b.iter(|| etwdump::etw::loggers::list_sessions(&ctx))
    });
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let set = dumps(dir.path());
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &set);
    bench_sessions(&mut c, dir.path());
    println!("\nCLI `etwdump info --format json` (child process, 20 runs each):");
    println!(
        "{:<16}{:>14}{:>14}{:>14}{:>16}",
        "dump", "file bytes", "median ms", "max ms", "peak RSS KiB"
    );
    for (name, path) in &set {
        let mut times = Vec::new();
        let mut rss = 0;
        for _ in 0..20 {
            let (t, r) = run_cli(path);
            times.push(t);
            rss = rss.max(r);
        }
        times.sort();
        let len = std::fs::metadata(path).unwrap().len();
        println!(
            "{:<16}{:>14}{:>14.2}{:>14.2}{:>16}",
            name,
            len,
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3,
            rss
        );
    }
    c.final_summary();
}
