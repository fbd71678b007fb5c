//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub mod collect;

/// Replace every `needle` in `hay` with `with` (the same length); how many were replaced.
pub fn replace_all(hay: &mut [u8], needle: &[u8], with: &[u8]) -> usize {
    assert_eq!(needle.len(), with.len());
    let mut n = 0;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        if &hay[i..i + needle.len()] == needle {
            hay[i..i + needle.len()].copy_from_slice(with);
            n += 1;
            i += needle.len();
        } else {
            i += 1;
        }
    }
    n
}

/// `../shared/data/dumps/<name>` if present; prints why a test is skipped otherwise.
pub fn shared_dump(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/dumps")
        .join(name);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: reference dump {} is not present (it lives outside the repository)",
            p.display()
        );
        None
    }
}

/// Run the etwdump binary (`ETWDUMP_TEST_BIN` names another build to run the tests against,
/// e.g. an older one, to see a regression test fail on the code before a fix).
pub fn etwdump(args: &[&str]) -> Output {
    Command::new(
        std::env::var_os("ETWDUMP_TEST_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_etwdump").into()),
    )
    .args(args)
    .output()
    .expect("run etwdump")
}

/// Run `etwdump info --format json` and parse the output.
pub fn info_json(path: &std::path::Path) -> serde_json::Value {
    let out = etwdump(&["info", path.to_str().unwrap(), "--format", "json"]);
    assert!(
        out.status.success(),
        "etwdump info failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("info JSON")
}

/// xorshift64*: deterministic pseudo-random numbers without a dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `tests/fixtures/<name>`.
/// Every fixture kernel (tests/fixtures): the x64 eras 7601 to 22000, x86 14393, then those of
/// issue 26: x64 26100 (public 24H2 layouts, no symbol list, no enums) and x86 19569 (ntdiff
/// pdbex headers).
#[allow(dead_code)]
pub const FIXTURES: &[&str] = &[
    "x64-7601",
    "x64-9600",
    "x64-14393",
    "x64-17763",
    "x64-17763b",
    "x64-18362",
    "x64-19041",
    "x64-20348",
    "x64-22000",
    "x86-14393",
    "x64-26100",
    "x86-19569",
];

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The fixture's PDB (its name from symbols.json).
pub fn pdb_of(name: &str) -> PathBuf {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture(name).join("symbols.json")).unwrap())
            .unwrap();
    fixture(name).join(meta["pdb"]["name"].as_str().unwrap())
}

/// File offset of the byte behind a kernel VA in a full forge dump.
pub fn file_offset(d: &etwdump::dump::DumpFile, va: u64) -> usize {
    use etwdump::dump::RunList;
    let t = etwdump::mem::AddressSpace::kernel(d)
        .translate(etwdump::addr::VirtAddr::new(va))
        .unwrap();
    let Some(r) = d.container::<RunList>() else {
        panic!("full dump expected")
    };
    (r.file_offset(t.pa.pfn()).unwrap() + t.pa.page_offset()) as usize
}

/// Run a listing command with `--format json` among `args`: its records and its warnings'
/// messages (the run must succeed).
pub fn listing_json(args: &[&str]) -> (Vec<serde_json::Value>, Vec<String>) {
    let r = etwdump(args);
    assert!(
        r.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let warnings = j["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["message"].as_str().unwrap().to_string())
        .collect();
    (j["records"].as_array().unwrap().clone(), warnings)
}

/// The records of the four ETW listings (sessions, buffers, cswitch, events) on `d`, as JSON
/// (warnings left out: a crash dump warns of what its header says, an image of how it was
/// read).
#[allow(dead_code)]
pub fn etw_listings(
    d: &etwdump::dump::DumpFile,
    opts: &etwdump::kernel::context::SymbolOptions,
) -> [serde_json::Value; 4] {
    use etwdump::report;
    let ctx = etwdump::kernel::context::KernelContext::open(d, opts).unwrap();
    let sessions = serde_json::to_value(report::sessions::Sessions::open(&ctx).records()).unwrap();
    let buffers = serde_json::to_value(report::buffers::analyse(&ctx, None).rows).unwrap();
    let cswitch = serde_json::to_value(report::cswitch::collect(&ctx, None).rows).unwrap();
    let events = serde_json::to_value(report::events::collect(&ctx, None).rows).unwrap();
    [sessions, buffers, cswitch, events]
}

/// The `providers` rows and `check`'s findings on `d`, as JSON (what reads user memory:
/// user-mode registrations, the ETW-write patch check).
#[allow(dead_code)]
pub fn provider_listings(
    d: &etwdump::dump::DumpFile,
    opts: &etwdump::kernel::context::SymbolOptions,
) -> [serde_json::Value; 2] {
    use etwdump::report;
    let ctx = etwdump::kernel::context::KernelContext::open(d, opts).unwrap();
    let mut rows = Vec::new();
    report::providers::stream(&ctx, true, &mut |r| {
        rows.push(serde_json::to_value(r).unwrap());
        Ok(())
    })
    .unwrap();
    let check = report::check::run(&ctx);
    [
        serde_json::Value::Array(rows),
        serde_json::to_value(&check.findings).unwrap(),
    ]
}

/// The forge's machine of fixture `fx` with variation `seed`, its crash dump written in a
/// new directory, the fixture's symbols and the dump's four ETW listings.
#[allow(dead_code)]
pub fn forged_with_listings(
    fx: &str,
    seed: u64,
) -> (
    etwdump_forge::Forged,
    tempfile::TempDir,
    etwdump::kernel::context::SymbolOptions,
    [serde_json::Value; 4],
) {
    let c = etwdump_forge::Config::from_fixture(&fixture(fx)).with_variation(seed);
    forged_config_with_listings(&c, fx)
}

/// [`forged_with_listings`] of the machine `c` (fixture `fx`'s symbols).
#[allow(dead_code)]
pub fn forged_config_with_listings(
    c: &etwdump_forge::Config,
    fx: &str,
) -> (
    etwdump_forge::Forged,
    tempfile::TempDir,
    etwdump::kernel::context::SymbolOptions,
    [serde_json::Value; 4],
) {
    let f = etwdump_forge::forge(c);
    let dir = tempfile::tempdir().unwrap();
    let dump_path = dir.path().join("m.dmp");
    f.write_to(&dump_path).unwrap();
    let opts = etwdump::kernel::context::SymbolOptions {
        pdb: Some(pdb_of(fx)),
        ..Default::default()
    };
    let d = etwdump::kernel::discover::open(&dump_path, Default::default()).unwrap();
    let want = etw_listings(&d, &opts);
    (f, dir, opts, want)
}
