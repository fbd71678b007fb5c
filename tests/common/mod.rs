//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

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

/// Run the etwdump binary.
pub fn etwdump(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_etwdump"))
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
