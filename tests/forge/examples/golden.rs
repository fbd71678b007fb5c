//! Golden check of the forge's output: forges every scenario the crate offers and prints one
//! line per scenario with a SHA-256 of the dump bytes and of a Debug rendering of the ground
//! truth (every public field of `Forged` / `ForgedTriage`). A refactoring of the forge must
//! leave this output unchanged:
//!
//! ```sh
//! cargo run --release -p etwdump-forge --example golden > /tmp/before.txt
//! # ... change the forge ...
//! cargo run --release -p etwdump-forge --example golden > /tmp/after.txt
//! diff /tmp/before.txt /tmp/after.txt && echo identical
//! ```
//!
//! `--triage` hashes only the triage scenarios.
//! `--sha256 FILE` prints the SHA-256 of FILE (to check the hash against `sha256sum`).
//! `--quick` skips the 16 GiB and large-buffer dumps, the variation seeds 10..30 and the varied
//! provider seeds 2..6.

use std::fmt::Write as _;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};

use etwdump_forge::{
    fixture_dirs, forge, forge_triage, triage_scenarios, Arch, BitmapSig, Config, EtwSpec, Forged,
    Layout,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, path] = args.as_slice() {
        if flag == "--sha256" {
            // Self-check of the hash against sha256sum.
            println!("{}", sha256_hex(&std::fs::read(path).expect("read")));
            return;
        }
    }
    let quick = args.iter().any(|a| a == "--quick");
    // Refused configs panic; their message is hashed, not printed.
    std::panic::set_hook(Box::new(|_| {}));
    let mut n = 0usize;
    let mut emit = |name: &str, line: String| {
        println!("{name} {line}");
        n += 1;
    };
    // `--triage`: only the triage scenarios (a few seconds).
    if !args.iter().any(|a| a == "--triage") {
        for (name, cfg) in scenarios(quick) {
            emit(&name, forged_line(&cfg));
        }
    }
    for spec in triage_scenarios() {
        let line = match catch_unwind(|| forge_triage(&spec)) {
            Ok(f) => format!(
                "dump={} isf={} truth={} spec={}",
                sha256_hex(&f.bytes),
                sha256_hex(f.isf_json.as_bytes()),
                sha256_hex(format!("{:?}", f.expected).as_bytes()),
                sha256_hex(format!("{spec:?}").as_bytes()),
            ),
            Err(e) => format!("panic={}", panic_text(&e)),
        };
        emit(&format!("triage/{}", spec.name), line);
    }
    eprintln!("{n} scenarios hashed");
}

fn bitmap(cfg: Config, sig: BitmapSig, dump_type: u32) -> Config {
    Config {
        layout: Layout::Bitmap { sig, dump_type },
        ..cfg
    }
}

/// Every config scenario: (name, config).
fn scenarios(quick: bool) -> Vec<(String, Config)> {
    let mut v: Vec<(String, Config)> = vec![
        ("x64-full".into(), Config::x64()),
        (
            "x64-bitmap-sdmp".into(),
            bitmap(Config::x64(), BitmapSig::Sdmp, 5),
        ),
        (
            "x64-bitmap-fdmp-type6".into(),
            bitmap(Config::x64(), BitmapSig::Fdmp, 6),
        ),
        (
            "x64-full-pcid".into(),
            Config {
                dtb_low_bits: 0x2,
                ..Config::x64()
            },
        ),
        ("x86pae-full".into(), Config::x86_pae()),
        ("x86-full".into(), Config::x86_nonpae()),
        (
            "x86pae-bitmap".into(),
            bitmap(Config::x86_pae(), BitmapSig::Sdmp, 5),
        ),
        (
            "x86-bitmap".into(),
            bitmap(Config::x86_nonpae(), BitmapSig::Fdmp, 6),
        ),
        ("sample".into(), Config::sample()),
        ("sample-etw".into(), Config::sample_etw()),
        (
            "x64-encoded-kdbg-nodebugdir".into(),
            Config {
                kdbg_decoded: false,
                omit_debug_directory_page: true,
                ..Config::x64()
            },
        ),
        (
            "x64-2cpus-48m".into(),
            Config {
                cpus: 2,
                physical_memory_bytes: 48 << 20,
                ..Config::x64()
            },
        ),
    ];
    if !quick {
        let big = 16u64 << 30;
        v.push((
            "x64-full-16g".into(),
            Config {
                physical_memory_bytes: big,
                ..Config::x64()
            },
        ));
        v.push((
            "x64-bitmap-16g".into(),
            bitmap(
                Config {
                    physical_memory_bytes: big,
                    ..Config::x64()
                },
                BitmapSig::Sdmp,
                5,
            ),
        ));
    }
    let root = etwdump_forge::default_fixtures_root();
    for dir in fixture_dirs(&root) {
        let cfg = Config::from_fixture(&dir);
        let stem = format!("fixture-{}", cfg.fixture.as_ref().expect("fixture").name);
        let build = cfg.build;
        v.push((stem.clone(), cfg.clone()));
        v.push((
            format!("{stem}-bitmap"),
            bitmap(cfg.clone(), BitmapSig::Sdmp, 5),
        ));
        v.push((format!("{stem}-etw"), cfg.clone().with_standard_etw()));
        v.push((
            format!("{stem}-etw-bitmap"),
            bitmap(cfg.clone().with_standard_etw(), BitmapSig::Fdmp, 6),
        ));
        v.push((
            format!("{stem}-etw-max80"),
            cfg.clone()
                .with_etw(EtwSpec::standard_with_max_loggers(build, 0x50)),
        ));
        if cfg.arch == Arch::X86Pae {
            let np = Config {
                arch: Arch::X86NonPae,
                ..cfg.clone()
            };
            v.push((format!("{stem}-nonpae"), np.clone()));
            v.push((format!("{stem}-nonpae-etw"), np.with_standard_etw()));
        }
        let spec = EtwSpec::standard(build).with_buffers(build);
        v.push((
            format!("{stem}-etw-buffers"),
            cfg.clone().with_etw(spec.clone()),
        ));
        v.push((
            format!("{stem}-etw-ccswap"),
            cfg.clone().with_etw(spec.clone().with_pending_ccswap()),
        ));
        v.push((
            format!("{stem}-etw-ccswap-processes"),
            cfg.clone()
                .with_etw(spec.with_pending_ccswap())
                .with_processes(),
        ));
        v.push((format!("{stem}-processes"), cfg.clone().with_processes()));
        v.push((
            format!("{stem}-etw-large-small"),
            cfg.clone()
                .with_etw(EtwSpec::standard(build).with_large_buffers(build, 8, 0x4000)),
        ));
        if !quick && build == 19041 {
            let mut c = cfg
                .clone()
                .with_etw(EtwSpec::standard(build).with_large_buffers(build, 4096, 0x1_0000));
            c.physical_memory_bytes = 512 << 20;
            v.push((format!("{stem}-etw-large"), c));
        }
        let seeds = if quick { 10 } else { 30 };
        for seed in 0..seeds {
            v.push((
                format!("{stem}-var{seed}"),
                cfg.clone().with_variation(seed),
            ));
        }
        v.push((
            format!("{stem}-var3-bitmap"),
            bitmap(cfg.clone().with_variation(3), BitmapSig::Sdmp, 5),
        ));
        // The same switches recorded by two sessions (CSwitch events mirroring batches and
        // pending blocks).
        for seed in 0..if quick { 1 } else { 3 } {
            v.push((
                format!("{stem}-var{seed}-dups"),
                cfg.clone().with_variation(seed).with_duplicate_switches(),
            ));
        }
        // Providers: varied sets (the standard set and the tampered variants come below).
        for seed in 0..if quick { 2 } else { 6 } {
            v.push((
                format!("{stem}-var{seed}-providers"),
                cfg.clone().with_variation(seed).with_providers(),
            ));
        }
    }
    // The standard providers per fixture and their tampered variants.
    v.extend(etwdump_forge::tamper_scenarios(&root));
    // Buffers queued for real-time consumers in their processes' address spaces.
    v.extend(realtime_and_user_image_scenarios(&root));
    v
}

/// The realtime scenarios and sample, then the user images (`Config::with_user_images`) per
/// x64 fixture and with the realtime sample.
fn realtime_and_user_image_scenarios(root: &std::path::Path) -> Vec<(String, Config)> {
    let mut v = etwdump_forge::realtime_scenarios(root);
    v.push(("sample-realtime".into(), Config::sample_realtime()));
    for dir in fixture_dirs(root) {
        let cfg = Config::from_fixture(&dir);
        if etwdump_forge::user_images_supported(&cfg) {
            let name = &cfg.fixture.as_ref().expect("fixture").name;
            v.push((
                format!("fixture-{name}-user-images"),
                cfg.clone().with_user_images(),
            ));
        }
    }
    v.push((
        "sample-realtime-user-images".into(),
        Config::sample_realtime().with_user_images(),
    ));
    v
}

fn panic_text(e: &Box<dyn std::any::Any + Send>) -> String {
    let s = if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = e.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "?".to_string()
    };
    sha256_hex(s.as_bytes())
}

fn forged_line(cfg: &Config) -> String {
    let f = match catch_unwind(AssertUnwindSafe(|| forge(cfg))) {
        Ok(f) => f,
        Err(e) => return format!("panic={}", panic_text(&e)),
    };
    format!(
        "dump={} len={} truth={}",
        dump_hash(&f),
        f.file_len(),
        sha256_hex(truth(&f).as_bytes())
    )
}

/// Every public field of `f`, plus where each probe's first byte is mapped.
fn truth(f: &Forged) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{:?}|{:#x}|{:#x}|{:#x}|{:#x}|{:#x}|{:#x}|{:?}|{:?}|{:?}|{}",
        f.config,
        f.dtb,
        f.kdbg_va,
        f.kuser_va,
        f.ps_loaded_module_list,
        f.ps_active_process_head,
        f.pfn_database,
        f.nt_build_lab,
        f.modules,
        f.probes,
        f.stored_pages
    );
    let _ = write!(
        s,
        "|{:?}|{}|{}|{:#x}|{:#x}|{:#x}|{:#x}|{:?}|{:#x}|{:#x}|{:#x}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        f.runs,
        f.header_size,
        f.first_page_offset,
        f.kuser_user_va,
        f.nt_build_lab_va,
        f.debug_directory_va,
        f.rsds_va,
        f.ldr_entries,
        f.ki_processor_block,
        f.etwp_debugger_data,
        f.mm_pfn_database_value,
        f.symbols,
        f.kprcbs,
        f.kprcb_size,
        f.etw,
        f.processes,
        f.current_threads,
        f.dump_type()
    );
    for p in &f.probes {
        let _ = write!(s, "|{}:{:?}", p.name, f.physical_address(p.va));
    }
    // The consumer processes' own address spaces (realtime buffers only).
    let spaces = f.user_address_spaces();
    if !spaces.is_empty() {
        let _ = write!(s, "|spaces:{spaces:?}");
    }
    // The user images (Config::with_user_images only).
    if let Some(n) = &f.ntdll {
        let _ = write!(s, "|ntdll:{n:?}");
    }
    s
}

/// SHA-256 of the dump file. Files up to 1 GiB are hashed whole (`to_bytes`); larger ones are
/// written sparsely to a temporary file and hashed as (offset, page) for every non-zero 4 KiB
/// page plus the length, which determines the content as well.
fn dump_hash(f: &Forged) -> String {
    if f.file_len() <= 1 << 30 {
        let b = f.to_bytes();
        assert_eq!(b.len() as u64, f.file_len());
        return sha256_hex(&b);
    }
    let path = std::env::temp_dir().join(format!("forge-golden-{}.dmp", std::process::id()));
    f.write_to(&path).expect("write");
    let mut file = std::fs::File::open(&path).expect("open");
    let mut h = Sha256::new();
    let mut chunk = vec![0u8; 1 << 20];
    let mut off = 0u64;
    loop {
        let mut got = 0;
        while got < chunk.len() {
            let n = file.read(&mut chunk[got..]).expect("read");
            if n == 0 {
                break;
            }
            got += n;
        }
        for (i, page) in chunk[..got].chunks(4096).enumerate() {
            if page.iter().any(|&b| b != 0) {
                h.update(&(off + i as u64 * 4096).to_le_bytes());
                h.update(page);
            }
        }
        off += got as u64;
        if got < chunk.len() {
            break;
        }
    }
    h.update(&off.to_le_bytes());
    let _ = std::fs::remove_file(&path);
    hex(&h.finish())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(data);
    hex(&h.finish())
}

/// A small SHA-256 (FIPS 180-4), so that the forge needs no extra dependency.
struct Sha256 {
    state: [u32; 8],
    buf: Vec<u8>,
    len: u64,
}

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

impl Sha256 {
    fn new() -> Self {
        Sha256 {
            state: [
                0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
                0x5be0cd19,
            ],
            buf: Vec::with_capacity(64),
            len: 0,
        }
    }

    fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if !self.buf.is_empty() {
            let take = (64 - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == 64 {
                let block: [u8; 64] = self.buf[..].try_into().expect("64");
                self.block(&block);
                self.buf.clear();
            }
        }
        let mut chunks = data.chunks_exact(64);
        for c in &mut chunks {
            self.block(c.try_into().expect("64"));
        }
        self.buf.extend_from_slice(chunks.remainder());
    }

    fn block(&mut self, b: &[u8; 64]) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(b[4 * i..4 * i + 4].try_into().expect("4"));
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b2, mut c, mut d, mut e, mut f, mut g, mut h] = self.state;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = h
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b2) ^ (a & c) ^ (b2 & c);
            let t2 = s0.wrapping_add(maj);
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b2;
            b2 = a;
            a = t1.wrapping_add(t2);
        }
        for (s, v) in self.state.iter_mut().zip([a, b2, c, d, e, f, g, h]) {
            *s = s.wrapping_add(v);
        }
    }

    fn finish(mut self) -> [u8; 32] {
        let bits = self.len.wrapping_mul(8);
        let mut pad = vec![0x80u8];
        let rem = (self.len + 1) % 64;
        let zeros = if rem <= 56 { 56 - rem } else { 120 - rem };
        pad.extend(std::iter::repeat_n(0u8, zeros as usize));
        pad.extend_from_slice(&bits.to_be_bytes());
        let len = self.len;
        self.update(&pad);
        self.len = len;
        debug_assert!(self.buf.is_empty());
        let mut out = [0u8; 32];
        for (i, s) in self.state.iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&s.to_be_bytes());
        }
        out
    }
}
