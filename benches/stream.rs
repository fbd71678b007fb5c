//! Benchmark (issue 12): `cswitch` and `events` in JSON Lines on a dump with 1 GiB of trace
//! buffers — wall time and peak RSS of the CLI, which streams its rows. The dump: the 19041
//! fixture kernel, a 1.5 GiB machine, the standard sessions plus one session of 16,384
//! buffers × 64 KiB (1 GiB; half the records are CSwitch events), written once to a temp dir.
//!
//! Run: `cargo bench --bench stream` (set ETWDUMP_BENCH_OLD=/path/to/etwdump to time another
//! build of the CLI on the same dump, e.g. the last one that collected rows in memory;
//! ETWDUMP_BENCH_BUFFERS sets the buffer count).

use etwdump_forge::{forge, Config, EtwSpec};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Run `exe args` with stdout counted and discarded; (wall time, peak RSS KiB, stdout lines).
// The child is reaped by wait4 below (which also gives its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
fn run(exe: &Path, args: &[&str]) -> (Duration, i64, u64) {
    use std::io::Read;
    let t = Instant::now();
    let mut child = std::process::Command::new(exe)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn etwdump");
    let mut out = child.stdout.take().expect("stdout");
    let mut buf = vec![0u8; 1 << 20];
    let mut lines = 0u64;
    loop {
        let n = out.read(&mut buf).expect("read stdout");
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: plain wait4 on our own child with valid out-pointers.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let dt = t.elapsed();
    assert_eq!(r, child.id() as i32);
    assert_eq!(status, 0, "{} {args:?} failed", exe.display());
    (dt, ru.ru_maxrss, lines)
}

/// Forge the dump (run in a child process: the forge holds the whole dump in memory, and a
/// process forked from a large parent starts with the parent's resident set, which would
/// count in the children's peak RSS).
fn forge_to(dump: &Path, buffers: u32) {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-19041");
    let mut cfg = Config::from_fixture(&fx);
    cfg.physical_memory_bytes = (u64::from(buffers) << 16) + (512 << 20);
    cfg.etw = Some(EtwSpec::standard(cfg.build).with_large_buffers(cfg.build, buffers, 0x1_0000));
    forge(&cfg).write_to(dump).expect("write dump");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("stream: benchmark");
        return;
    }
    if let [_, flag, path, n] = args.as_slice() {
        if flag == "--forge-to" {
            forge_to(Path::new(path), n.parse().expect("buffer count"));
            return;
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fx = root.join("tests/fixtures/x64-19041");
    let buffers: u32 = std::env::var("ETWDUMP_BENCH_BUFFERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16_384);
    let dir = tempfile::tempdir().expect("temp dir");
    let dump = dir.path().join("large.dmp");
    let t = Instant::now();
    let status = std::process::Command::new(std::env::current_exe().expect("own path"))
        .args(["--forge-to", dump.to_str().unwrap(), &buffers.to_string()])
        .status()
        .expect("forge");
    assert!(status.success(), "forging the dump failed");
    let size = std::fs::metadata(&dump).map(|m| m.len()).unwrap_or(0);
    println!(
        "dump: {} buffers x 64 KiB = {} MiB of buffers, file {} MiB (forged in {:.1} s)",
        buffers,
        u64::from(buffers) * 64 / 1024,
        size >> 20,
        t.elapsed().as_secs_f64()
    );
    let pdb = fx.join("ntkrnlmp.pdb");
    let (d, p) = (dump.to_str().unwrap(), pdb.to_str().unwrap());
    let mut exes: Vec<(String, PathBuf)> = vec![(
        "this build".into(),
        PathBuf::from(env!("CARGO_BIN_EXE_etwdump")),
    )];
    if let Some(old) = std::env::var_os("ETWDUMP_BENCH_OLD") {
        exes.push((format!("{}", PathBuf::from(&old).display()), old.into()));
    }
    println!("| binary | command | rows | wall time | peak RSS |");
    println!("|---|---|---|---|---|");
    for (name, exe) in &exes {
        for cmd in ["cswitch", "events"] {
            let (dt, rss, lines) = run(exe, &[cmd, d, "--pdb", p, "--format", "jsonl"]);
            println!(
                "| {name} | `{cmd} --format jsonl` | {lines} | {:.2} s | {:.0} MiB |",
                dt.as_secs_f64(),
                rss as f64 / 1024.0
            );
        }
    }
}
