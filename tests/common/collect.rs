//! What the `collect` tests share (tests/collect.rs, tests/collect_browser.rs): running it,
//! reading its directory and its page, and the dump with hostile names.

use super::{etwdump, fixture};
use etwdump_forge::{forge, Config, SlotSpec};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The artefacts of a collection, in their order.
pub const ARTEFACTS: [&str; 11] = [
    "info",
    "sessions",
    "buffers",
    "providers",
    "check",
    "etl",
    "overview",
    "cswitch",
    "events",
    "scan",
    "warnings",
];

pub const SAMPLE: &str = "tests/data/sample-x64-etw.dmp";

pub fn pdb() -> String {
    fixture("x64-19041")
        .join("ntkrnlmp.pdb")
        .to_string_lossy()
        .into_owned()
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `etwdump collect DUMP --pdb PDB -o DIR [extra]`: (exit status, stdout, stderr).
pub fn collect(dump: &Path, dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let (d, o, p) = (dump.to_str().unwrap(), dir.to_str().unwrap(), pdb());
    let mut args = vec!["collect", d, "--pdb", &p, "-o", o, "--threads", "2"];
    args.extend_from_slice(extra);
    let r = etwdump(&args);
    (
        r.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&r.stdout).into_owned(),
        String::from_utf8_lossy(&r.stderr).into_owned(),
    )
}

/// Every file under `dir`, relative, `/`-separated, with its bytes.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy();
                out.insert(rel.replace('\\', "/"), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

pub fn json(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap()
}

/// The artefact `name` of a collect.json.
pub fn artefact<'a>(c: &'a Value, name: &str) -> &'a Value {
    c["artefacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no artefact {name}"))
}

/// Each file collect.json lists, by path: (bytes, rows, sha256).
pub fn listed(c: &Value) -> BTreeMap<String, (u64, Option<u64>, String)> {
    let mut out = BTreeMap::new();
    let files = c["artefacts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| a["files"].as_array().unwrap().iter())
        .chain(std::iter::once(&c["index"]));
    for f in files {
        let prev = out.insert(
            f["path"].as_str().unwrap().to_string(),
            (
                f["bytes"].as_u64().unwrap(),
                f["rows"].as_u64(),
                f["sha256"].as_str().unwrap().to_string(),
            ),
        );
        assert!(prev.is_none(), "{} listed twice", f["path"]);
    }
    out
}

/// Every `href` and `src` value of a page.
pub fn links(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "src=\""] {
        for (i, _) in page.match_indices(attr) {
            let rest = &page[i + attr.len()..];
            out.push(rest[..rest.find('"').unwrap()].to_string());
        }
    }
    out
}

/// A link of the page as a path in `dir`: relative, percent-decoded; None when it could
/// leave the directory or names another scheme.
pub fn resolve(dir: &Path, href: &str) -> Option<PathBuf> {
    let href = href.replace("&amp;", "&");
    if href.contains(':') || href.starts_with('/') || href.contains("..") {
        return None;
    }
    Some(dir.join(percent_decoded(&href)?))
}

/// A URL path percent-decoded (None: not UTF-8, or a bad escape).
pub fn percent_decoded(p: &str) -> Option<String> {
    let b = p.as_bytes();
    let mut bytes = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 3 <= b.len() {
            let h = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
            bytes.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            bytes.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).ok()
}

/// The session name and log file of [`hostile_dump`]'s slot 4: markup, quotes, `../`, an
/// entity, control and bidi characters.
pub const HOSTILE_SESSION: &str = "<script>alert(1)</script>\"'../../x&amp;\u{1b}[31m\u{202e}\u{7}";
pub const HOSTILE_LOG: &str = "..\\..\\<img src=x onerror=alert(2)>\r\n\u{9b}";

/// The ETW sample with [`HOSTILE_SESSION`] and [`HOSTILE_LOG`] as session 4's name and log
/// file, and the process `svchost.exe` (pid 1100) named `<s>"../`, ESC, U+202E (11 bytes of
/// EPROCESS.ImageFileName), written to `dir/h.dmp`.
pub fn hostile_dump(dir: &Path) -> PathBuf {
    let mut cfg = Config::sample_etw();
    if let Some(SlotSpec::Session(s)) = cfg.etw.as_mut().and_then(|e| e.slots.get_mut(&4)) {
        s.name = HOSTILE_SESSION.to_string();
        s.log_file = Some(HOSTILE_LOG.to_string());
    } else {
        panic!("slot 4 is a session of the sample");
    }
    let mut bytes = forge(&cfg).to_bytes();
    let hostile = b"<s>\"../\x1b\xe2\x80\xae";
    assert!(
        super::replace_all(
            &mut bytes,
            b"svchost.exe\0",
            &[&hostile[..], b"\0"].concat()
        ) >= 1
    );
    let dump = dir.join("h.dmp");
    std::fs::write(&dump, bytes).unwrap();
    dump
}
