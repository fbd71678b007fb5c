//! Local symbol stores: `DIR/<pdb>/<GUID><AGE>/<pdb>` (the Microsoft symbol-server layout),
//! Volatility's ISF layout `DIR/windows/<pdb>/<GUID>-<age>.json[.xz]`, and the local
//! directories named in `_NT_SYMBOL_PATH`. Never any network.

use super::PdbIdentity;
use std::path::{Path, PathBuf};

/// What was found for an identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    Pdb(PathBuf),
    Isf(PathBuf),
}

/// The local directories of an `_NT_SYMBOL_PATH` value: `srv*DIR*https://...` and
/// `cache*DIR` give DIR; `symsrv*symsrv.dll*DIR*...` gives DIR; plain entries are
/// directories. URLs are ignored (the tool never downloads).
pub(crate) fn nt_symbol_path_dirs(value: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in value.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split('*').collect();
        let first = parts[0].to_ascii_lowercase();
        let candidates: Vec<&str> = match first.as_str() {
            "srv" | "cache" => parts[1..].to_vec(),
            "symsrv" => parts.get(2..).map(<[&str]>::to_vec).unwrap_or_default(),
            _ => vec![entry],
        };
        for c in candidates {
            let lc = c.to_ascii_lowercase();
            if c.is_empty() || lc.starts_with("http://") || lc.starts_with("https://") {
                continue;
            }
            out.push(PathBuf::from(c));
        }
    }
    out
}

/// The symbol servers of an `_NT_SYMBOL_PATH` value: each `srv*[CACHE*...]*URL` entry's URL
/// (http or https) with its first directory as the cache (None for `srv*URL`). Used only when
/// the user asks for downloads (`--fetch-symbols`).
pub(crate) fn nt_symbol_path_servers(value: &str) -> Vec<(Option<PathBuf>, String)> {
    let mut out = Vec::new();
    for entry in value.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split('*').collect();
        if !parts[0].eq_ignore_ascii_case("srv") {
            continue;
        }
        let is_url = |p: &str| {
            let l = p.to_ascii_lowercase();
            l.starts_with("http://") || l.starts_with("https://")
        };
        let Some(url) = parts.iter().rev().find(|p| is_url(p)) else {
            continue;
        };
        let cache = parts[1..]
            .iter()
            .find(|p| !p.is_empty() && !is_url(p))
            .map(PathBuf::from);
        out.push((cache, url.to_string()));
    }
    out
}

/// Names the kernel's PDB may have in a store (the image's RSDS name first).
fn pdb_names(id: &PdbIdentity) -> Vec<String> {
    // The dump's name only as a plain file name (it comes from memory).
    let mut v: Vec<String> = id.file_name().map(str::to_string).into_iter().collect();
    for n in [
        "ntkrnlmp.pdb",
        "ntkrpamp.pdb",
        "ntoskrnl.pdb",
        "ntkrnlpa.pdb",
    ] {
        if !v.iter().any(|x| x.eq_ignore_ascii_case(n)) {
            v.push(n.to_string());
        }
    }
    v
}

/// The candidate paths searched for `id` in `dir`, in order.
pub fn candidates(dir: &Path, id: &PdbIdentity) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    let guid_nodash: String = id.guid.chars().filter(|c| *c != '-').collect();
    for name in pdb_names(id) {
        out.push((dir.join(&name).join(&id.store_key).join(&name), false));
        for ext in ["json.xz", "json"] {
            let f = format!("{guid_nodash}-{}.{ext}", id.age);
            out.push((dir.join("windows").join(&name).join(&f), true));
            out.push((dir.join(&name).join(&f), true));
        }
    }
    out
}

/// Look `id` up in `dirs`; returns the hit and every path tried.
pub fn find(dirs: &[PathBuf], id: &PdbIdentity) -> (Option<Found>, Vec<PathBuf>) {
    let mut tried = Vec::new();
    for d in dirs {
        for (p, isf) in candidates(d, id) {
            if p.is_file() {
                return (Some(if isf { Found::Isf(p) } else { Found::Pdb(p) }), tried);
            }
            tried.push(p);
        }
    }
    (None, tried)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_path_parsing() {
        let v = nt_symbol_path_dirs(
            "srv*C:\\Symbols*https://msdl.microsoft.com/download/symbols; cache*/tmp/c ;/opt/syms;srv*https://x;symsrv*symsrv.dll*/s2*http://y",
        );
        assert_eq!(
            v,
            vec![
                PathBuf::from("C:\\Symbols"),
                PathBuf::from("/tmp/c"),
                PathBuf::from("/opt/syms"),
                PathBuf::from("/s2")
            ]
        );
        assert!(nt_symbol_path_dirs("").is_empty());
        // The servers: each srv entry's URL with its first directory as the cache.
        assert_eq!(
            nt_symbol_path_servers(
                "srv*C:\\Symbols*https://msdl.microsoft.com/download/symbols; cache*/tmp/c ;/opt/syms;srv*https://x;SRV*/a*/b*http://y"
            ),
            vec![
                (
                    Some(PathBuf::from("C:\\Symbols")),
                    "https://msdl.microsoft.com/download/symbols".to_string()
                ),
                (None, "https://x".to_string()),
                (Some(PathBuf::from("/a")), "http://y".to_string()),
            ]
        );
        assert!(nt_symbol_path_servers("srv*/only/a/dir").is_empty());
    }

    #[test]
    fn store_layouts() {
        let id = PdbIdentity::from_guid_text("ntkrnlmp.pdb", "5278AFF86C341677D7D7835C85B7B844", 1)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (hit, tried) = find(&[dir.path().to_path_buf()], &id);
        assert_eq!(hit, None);
        assert_eq!(
            tried[0],
            dir.path()
                .join("ntkrnlmp.pdb/5278AFF86C341677D7D7835C85B7B8441/ntkrnlmp.pdb")
        );
        let isf = dir
            .path()
            .join("windows/ntkrnlmp.pdb/5278AFF86C341677D7D7835C85B7B844-1.json.xz");
        std::fs::create_dir_all(isf.parent().unwrap()).unwrap();
        std::fs::write(&isf, b"x").unwrap();
        assert_eq!(
            find(&[dir.path().to_path_buf()], &id).0,
            Some(Found::Isf(isf))
        );
        let pdb = dir
            .path()
            .join("ntkrnlmp.pdb/5278AFF86C341677D7D7835C85B7B8441/ntkrnlmp.pdb");
        std::fs::create_dir_all(pdb.parent().unwrap()).unwrap();
        std::fs::write(&pdb, b"x").unwrap();
        assert_eq!(
            find(&[dir.path().to_path_buf()], &id).0,
            Some(Found::Pdb(pdb))
        );
    }
}
