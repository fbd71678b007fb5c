//! Benchmark (issue 32, "Fast"): `scan` of a hibernation file against decompressing the same
//! file with the fastest independent Xpress decoder that runs here, side by side, same run.
//!
//! The memory: the forge's 19041 machine of `benches/stream.rs` (512 MiB plus
//! ETWDUMP_BENCH_BUFFERS × 64 KiB of trace buffers, default 2048: 640 MiB), written once to a
//! work directory as a raw image and as two Windows 10 1809 hibernation files (Plain LZ77 and
//! LZ77+Huffman, full hibernation, seed 1) with the forge's list of their compression sets.
//!
//! Measured, each ETWDUMP_BENCH_RUNS times (default 5; medians and ranges):
//! * `etwdump scan FILE --pdb P` (every core, then `--threads 1`) on each hibernation file,
//!   and on the raw image of the same memory (the pass without decompression);
//! * `benches/hiber_decode.py`: every compression set decompressed by xpress_lz77 1.0.1 (PyPI,
//!   Rust through pyo3: the fastest independent decoder installable here) and, with
//!   ETWDUMP_BENCH_DISSECT=1, by dissect.util 3.24 (pure Python: once), from the forge's set
//!   list — the decode loop's own time, the file already mapped and in the page cache.
//!
//! Run: `cargo bench --bench hiberfil` (Python: ETWDUMP_BENCH_PYTHON, default the interop
//! venv `tests/interop/.venv/bin/python` with xpress_lz77 and dissect.util; a decoder that is
//! not installed is skipped with a message).
use etwdump_forge::{forge, Config, EtwSpec, HiberCodec, HiberSpec, HiberVersion, ImageKind};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn forge_to(dir: &Path, buffers: u32) {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-19041");
    let mut cfg = Config::from_fixture(&fx);
    cfg.physical_memory_bytes = (u64::from(buffers) << 16) + (512 << 20);
    cfg.etw = Some(EtwSpec::standard(cfg.build).with_large_buffers(cfg.build, buffers, 0x1_0000));
    let f = forge(&cfg);
    f.write_image(&dir.join("memory.raw"), ImageKind::Raw)
        .expect("raw image");
    for codec in [HiberCodec::Lz77, HiberCodec::Huffman] {
        let name = codec.name();
        let truth = f
            .write_hiberfil(
                &dir.join(format!("hiber-{name}.sys")),
                &HiberSpec::new(HiberVersion::Win10_1809, codec, 1),
            )
            .expect("hibernation file");
        let sets: Vec<serde_json::Value> = truth
            .sets
            .iter()
            .map(|s| {
                serde_json::json!({
                    "offset": s.offset,
                    "data_offset": s.data_offset(),
                    "compressed_size": s.compressed_size,
                    "pages": s.pages,
                    "method": s.method,
                    "stored": s.uncompressed,
                })
            })
            .collect();
        std::fs::write(
            dir.join(format!("hiber-{name}.json")),
            serde_json::to_vec(&serde_json::json!({ "sets": sets })).unwrap(),
        )
        .unwrap();
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Wall seconds of `exe args` (output discarded).
fn wall(exe: &Path, args: &[&str]) -> f64 {
    let t = Instant::now();
    let out = Command::new(exe)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("spawn");
    assert!(out.success(), "{} {args:?} failed", exe.display());
    t.elapsed().as_secs_f64()
}

fn row(what: &str, mut v: Vec<f64>, bytes: u64) {
    let (lo, hi) = (
        v.iter().cloned().fold(f64::MAX, f64::min),
        v.iter().cloned().fold(0.0, f64::max),
    );
    let m = median(&mut v);
    println!(
        "| {what} | {m:.3} s | {lo:.3}–{hi:.3} s | {:.0} MiB/s |",
        bytes as f64 / m / (1 << 20) as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("hiberfil: benchmark");
        return;
    }
    if let [_, flag, dir, n] = args.as_slice() {
        if flag == "--forge-to" {
            forge_to(Path::new(dir), n.parse().expect("buffer count"));
            return;
        }
    }
    let buffers: u32 = std::env::var("ETWDUMP_BENCH_BUFFERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2048);
    let runs: usize = std::env::var("ETWDUMP_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("etwdump-bench-hiberfil-{buffers}"));
    if !dir.join("hiber-huffman.json").is_file() {
        std::fs::create_dir_all(&dir).unwrap();
        // In a child: the forge holds the whole machine in memory.
        let t = Instant::now();
        let ok = Command::new(std::env::current_exe().unwrap())
            .args(["--forge-to", dir.to_str().unwrap(), &buffers.to_string()])
            .status()
            .expect("forge")
            .success();
        assert!(ok, "forging failed");
        println!("forged in {:.1} s", t.elapsed().as_secs_f64());
    }
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_etwdump"));
    let pdb = root.join("tests/fixtures/x64-19041/ntkrnlmp.pdb");
    let p = pdb.to_str().unwrap();
    let python = std::env::var_os("ETWDUMP_BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("tests/interop/.venv/bin/python"));
    let raw = dir.join("memory.raw");
    let mem_bytes = std::fs::metadata(&raw).unwrap().len();
    println!(
        "memory: {} MiB ({} buffers x 64 KiB of trace buffers); {} runs each; machine: {} cores",
        mem_bytes >> 20,
        buffers,
        runs,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("| what | median | range | memory decoded per second |");
    println!("|---|---|---|---|");
    let r = raw.to_str().unwrap();
    let mut v: Vec<f64> = (0..runs)
        .map(|_| wall(&exe, &["scan", r, "--pdb", p]))
        .collect();
    row(
        "`scan` raw image (no decompression)",
        std::mem::take(&mut v),
        mem_bytes,
    );
    for codec in ["lz77", "huffman"] {
        let file = dir.join(format!("hiber-{codec}.sys"));
        let sets = dir.join(format!("hiber-{codec}.json"));
        let (f, s) = (file.to_str().unwrap(), sets.to_str().unwrap());
        let size = std::fs::metadata(&file).unwrap().len();
        println!("| **{codec}** hibernation file: {} MiB | | | |", size >> 20);
        // Warm the page cache once.
        wall(&exe, &["info", f]);
        let v: Vec<f64> = (0..runs)
            .map(|_| wall(&exe, &["scan", f, "--pdb", p]))
            .collect();
        row(&format!("`scan` {codec} (every core)"), v, mem_bytes);
        let v: Vec<f64> = (0..runs)
            .map(|_| wall(&exe, &["scan", f, "--pdb", p, "--threads", "1"]))
            .collect();
        row(&format!("`scan --threads 1` {codec}"), v, mem_bytes);
        // dissect.util is pure Python (about 1 MB/s): once, and only when asked for.
        let dissect = std::env::var_os("ETWDUMP_BENCH_DISSECT").is_some();
        for decoder in ["xpress_lz77", "dissect"] {
            if decoder == "dissect" && !dissect {
                continue;
            }
            let n = if decoder == "dissect" { 1 } else { runs };
            let mut times = Vec::new();
            let mut bytes = 0;
            for _ in 0..n {
                let out = Command::new(&python)
                    .args([
                        root.join("benches/hiber_decode.py").to_str().unwrap(),
                        s,
                        f,
                        decoder,
                    ])
                    .output();
                let Some(out) = out.ok().filter(|o| o.status.success()) else {
                    println!(
                        "| {decoder} {codec} | SKIPPED: not runnable with {} | | |",
                        python.display()
                    );
                    break;
                };
                let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                times.push(j["seconds"].as_f64().unwrap());
                bytes = j["bytes_out"].as_u64().unwrap();
            }
            if !times.is_empty() {
                row(
                    &format!("{decoder} decode loop, {codec} ({n} run(s))"),
                    times,
                    bytes,
                );
            }
        }
    }
}
