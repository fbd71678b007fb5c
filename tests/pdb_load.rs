//! The crate-free PDB loader (`etwdump::symbols::pdb`) against the `pdb` crate's loader it
//! replaced (`etwdump::symbols::pdb_reference`, the oracle): identical `PdbContents` (identity,
//! pointer size, machine, every layout and enumeration, every global symbol) on every fixture
//! PDB, the fuzz corpus PDBs and the large generated PDB; and on thousands of damaged copies,
//! no panic, and the same contents wherever the crate read the file.

use etwdump::symbols::pdb::{load, load_bytes, PdbContents};
use etwdump::symbols::pdb_reference;
use etwdump::symbols::{is_tool_global, Globals, WANTED_TYPES};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every PDB under `dir` (recursively), sorted.
fn pdbs_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("pdb")) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn fixtures() -> Vec<PathBuf> {
    let mut v = pdbs_under(&root().join("tests/fixtures"));
    v.extend(pdbs_under(&root().join("fuzz/corpus")));
    v
}

/// Field by field, naming the first difference.
fn assert_same(what: &str, ours: &PdbContents, theirs: &PdbContents) {
    assert_eq!(ours.identity, theirs.identity, "{what}: identity");
    assert_eq!(
        ours.pointer_size, theirs.pointer_size,
        "{what}: pointer size"
    );
    assert_eq!(ours.machine, theirs.machine, "{what}: machine");
    let mut names: Vec<&str> = theirs.types.names().collect();
    names.sort_unstable();
    let mut our_names: Vec<&str> = ours.types.names().collect();
    our_names.sort_unstable();
    assert_eq!(our_names, names, "{what}: structure names");
    for n in &names {
        assert_eq!(ours.types.get(n), theirs.types.get(n), "{what}: layout {n}");
    }
    assert!(ours.types == theirs.types, "{what}: enumerations");
    assert_eq!(
        ours.symbols.len(),
        theirs.symbols.len(),
        "{what}: symbol count"
    );
    for (k, v) in &theirs.symbols {
        assert_eq!(ours.symbols.get(k), Some(v), "{what}: symbol {k}");
    }
}

/// A load keeping the tool's globals ([`Globals::Tool`]) of `bytes`: the full load `all` of
/// the same bytes, its symbols restricted to those the tool reads (each at the address the
/// full load gives it, in the same order), or the same error.
fn assert_tool_load(what: &str, path: &Path, bytes: &[u8], all: &Result<PdbContents, String>) {
    let tool = load_bytes(path, bytes, WANTED_TYPES, Globals::Tool).map_err(|e| e.to_string());
    match (all, &tool) {
        (Ok(all), Ok(tool)) => {
            assert_eq!(tool.identity, all.identity, "{what}: identity");
            assert_eq!(tool.pointer_size, all.pointer_size, "{what}: pointer size");
            assert_eq!(tool.machine, all.machine, "{what}: machine");
            assert_eq!(tool.types, all.types, "{what}: layouts");
            let kept: Vec<(&str, &u64)> = all
                .symbols
                .iter()
                .filter(|(k, _)| is_tool_global(k))
                .collect();
            assert_eq!(
                tool.symbols.iter().collect::<Vec<_>>(),
                kept,
                "{what}: tool's globals"
            );
        }
        (Err(a), Err(t)) => assert_eq!(t, a, "{what}: error"),
        _ => panic!(
            "{what}: full load {:?}, tool's globals {:?}",
            all.as_ref().err(),
            tool.err()
        ),
    }
}

#[test]
fn every_fixture_pdb_loads_as_the_crate_loads_it() {
    let all = fixtures();
    assert!(all.len() >= 12, "{} PDBs found", all.len());
    for p in &all {
        let theirs = pdb_reference::load(p, WANTED_TYPES).unwrap();
        let ours = load(p, WANTED_TYPES, Globals::All).unwrap();
        assert_same(&p.display().to_string(), &ours, &theirs);
        assert!(!ours.symbols.is_empty(), "{}", p.display());
        // And from memory.
        let bytes = std::fs::read(p).unwrap();
        let mem = load_bytes(p, &bytes, WANTED_TYPES, Globals::All).unwrap();
        assert_same(&p.display().to_string(), &mem, &theirs);
        let what = p.display().to_string();
        assert_tool_load(&what, p, &bytes, &Ok(mem));
    }
    println!("{} fixture and corpus PDBs: identical", all.len());
}

#[test]
fn the_large_pdb_loads_as_the_crate_loads_it() {
    let p = root().join("target/bench-data/big-pdb/ntkrnlmp.pdb");
    if !p.is_file() {
        println!(
            "SKIPPED: {} is absent (generate it with benches/gen_big_pdb.py)",
            p.display()
        );
        return;
    }
    let theirs = pdb_reference::load(&p, WANTED_TYPES).unwrap();
    let ours = load(&p, WANTED_TYPES, Globals::All).unwrap();
    assert_same("large PDB", &ours, &theirs);
    let tool = load(&p, WANTED_TYPES, Globals::Tool).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    assert_tool_load("large PDB", &p, &bytes, &Ok(ours));
    let ours = load(&p, WANTED_TYPES, Globals::All).unwrap();
    assert_eq!(tool.types, ours.types);
    assert!(ours.types.len() > 50 && ours.symbols.len() > 10_000);
    println!(
        "large PDB: {} structures, {} symbols: identical",
        ours.types.len(),
        ours.symbols.len()
    );
}

/// Global names that are not UTF-8: in every third name of the publics and data records of
/// two fixtures and the large PDB (both records of a global alike, x86 publics after their underscore), the second
/// byte becomes 0xFF. Each name is then the crate's lossy text, the data record's duplicate
/// found as such, and the underscore of an x86 public stripped after the conversion: the same
/// contents as the crate's loader.
#[test]
fn names_not_utf8_load_as_the_crate_loads_them() {
    // The large PDB (when generated) names each global by both records.
    let big = "target/bench-data/big-pdb/ntkrnlmp.pdb";
    for (p, x86) in [
        ("tests/fixtures/x64-19041/ntkrnlmp.pdb", false),
        ("tests/fixtures/x86-19569/ntkrpamp.pdb", true),
        (big, false),
    ] {
        let p = root().join(p);
        if p.ends_with(big) && !p.is_file() {
            continue;
        }
        let mut b = std::fs::read(&p).unwrap();
        let l = Layout::of(&b);
        let s = l.symbol_stream(&b);
        let byte = |b: &[u8], o: usize| l.at(s, o).map(|at| b[at]);
        let (mut pos, mut changed) = (0, 0);
        while let (Some(lo), Some(hi)) = (byte(&b, pos), byte(&b, pos + 1)) {
            let len = usize::from(u16::from_le_bytes([lo, hi]));
            let kind = u16::from_le_bytes([byte(&b, pos + 2).unwrap(), byte(&b, pos + 3).unwrap()]);
            if kind == 0x110E || kind == 0x110D {
                let mut name = pos + 14;
                if x86 && kind == 0x110E && byte(&b, name) == Some(b'_') {
                    name += 1;
                }
                let n = (name..pos + 2 + len)
                    .take_while(|&o| byte(&b, o).is_some_and(|c| c != 0))
                    .count();
                if n >= 2 && n % 3 == 0 {
                    let at = l.at(s, name + 1).unwrap();
                    b[at] = 0xFF;
                    changed += 1;
                }
            }
            pos += 2 + len;
        }
        let what = format!("{} with {changed} names not UTF-8", p.display());
        let ours = load_bytes(&p, &b, WANTED_TYPES, Globals::All).unwrap();
        let theirs = pdb_reference::load_bytes(&p, &b, WANTED_TYPES).unwrap();
        assert_same(&what, &ours, &theirs);
        let ours = load_bytes(&p, &b, WANTED_TYPES, Globals::All).map_err(|e| e.to_string());
        assert_tool_load(&what, &p, &b, &ours);
        let ours = ours.unwrap();
        let lossy = ours.symbols.iter().filter(|(k, _)| k.contains('\u{FFFD}'));
        let lossy = lossy.count();
        println!("{what}: {lossy} names with a replacement character");
        assert!(changed >= 5 && lossy >= 3, "{what}: {lossy}");
    }
}

/// Registration handles whose names are not UTF-8 (a byte inside each `Etw...RegHandle` name
/// of a fixture becomes 0xFF, then the bytes "Et" of one of them also, so that it no longer
/// looks like a handle): keeping the tool's globals decodes such names before selecting them,
/// so the handles kept under their lossy names, and those left out, are the full load's.
#[test]
fn tool_globals_not_utf8_are_selected_after_decoding() {
    let p = root().join("tests/fixtures/x64-19041/ntkrnlmp.pdb");
    let mut b = std::fs::read(&p).unwrap();
    let mut changed = 0;
    let mut at = 0;
    while let Some(i) = b[at..].windows(3).position(|w| w == b"Etw").map(|i| at + i) {
        at = i + 3;
        let end = b[i..].iter().position(|&c| c == 0).map_or(i, |n| i + n);
        if b[i..end].ends_with(b"RegHandle") && end - i > 12 {
            b[i + 4] = 0xFF;
            if changed == 0 {
                b[i] = 0xFF;
            }
            changed += 1;
        }
    }
    let all = load_bytes(&p, &b, WANTED_TYPES, Globals::All).unwrap();
    let lossy = all
        .symbols
        .iter()
        .filter(|(k, _)| k.contains('\u{FFFD}') && is_tool_global(k))
        .count();
    assert!(
        changed >= 10 && lossy >= 5,
        "{changed} changed, {lossy} lossy handles"
    );
    assert_tool_load("handles not UTF-8", &p, &b, &Ok(all));
}

/// xorshift64: reproducible damage.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn u32_at(b: &[u8], o: usize) -> usize {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize
}

/// The file offsets of an undamaged PDB's structures: the directory's bytes (file offset of
/// each of its dwords) and each stream's bytes (file offset of each byte, by block).
struct Layout {
    bs: usize,
    /// File offset of the directory's dword `i`.
    dir_dwords: Vec<usize>,
    /// Per stream: its size and its blocks.
    streams: Vec<(usize, Vec<usize>)>,
}

impl Layout {
    fn of(b: &[u8]) -> Layout {
        let bs = u32_at(b, 32);
        let dir_bytes = u32_at(b, 44);
        let map = u32_at(b, 52) * bs;
        let dir_blocks: Vec<usize> = (0..dir_bytes.div_ceil(bs))
            .map(|i| u32_at(b, map + i * 4))
            .collect();
        let dir_dwords: Vec<usize> = (0..dir_bytes / 4)
            .map(|i| dir_blocks[i * 4 / bs] * bs + (i * 4) % bs)
            .collect();
        let dw = |i: usize| u32_at(b, dir_dwords[i]);
        let n = dw(0);
        let mut pos = 1 + n;
        let mut streams = Vec::new();
        for s in 0..n {
            let size = dw(1 + s);
            let size = if size == u32::MAX as usize { 0 } else { size };
            let blocks: Vec<usize> = (0..size.div_ceil(bs)).map(|i| dw(pos + i)).collect();
            pos += blocks.len();
            streams.push((size, blocks));
        }
        Layout {
            bs,
            dir_dwords,
            streams,
        }
    }

    /// File offset of byte `o` of stream `s` (None past its end).
    fn at(&self, s: usize, o: usize) -> Option<usize> {
        let (size, blocks) = self.streams.get(s)?;
        (o < *size).then(|| blocks[o / self.bs] * self.bs + o % self.bs)
    }

    /// The symbol record stream's number (DBI header offset 20).
    fn symbol_stream(&self, b: &[u8]) -> usize {
        let at = self.at(3, 20).unwrap();
        usize::from(u16::from_le_bytes([b[at], b[at + 1]]))
    }
}

fn damage(b: &mut Vec<u8>, l: &Layout, rng: &mut Rng) -> &'static str {
    let put32 = |b: &mut Vec<u8>, at: usize, v: u32| {
        if at + 4 <= b.len() {
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
    };
    let value = |rng: &mut Rng| -> u32 {
        match rng.below(5) {
            0 => 0,
            1 => u32::MAX,
            2 => rng.below(0x20) as u32,
            3 => rng.next() as u32 & 0xFFFF,
            _ => rng.next() as u32,
        }
    };
    // A byte of stream `s` (somewhere in its first `limit` bytes).
    let in_stream = |rng: &mut Rng, s: usize| -> Option<usize> {
        let size = l.streams.get(s)?.0;
        l.at(s, rng.below(size))
    };
    match rng.below(8) {
        0 => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            "bits flipped"
        }
        1 => {
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(b.len() / 4) * 4;
                let v = value(rng);
                put32(b, at, v);
            }
            "dwords overwritten"
        }
        2 => {
            let n = rng.below(b.len());
            b.truncate(n);
            "truncated"
        }
        3 => {
            // A stream size (dwords 1..=n of the directory) or a block number after them.
            let n = l.streams.len();
            let i = if rng.below(2) == 0 {
                1 + rng.below(n)
            } else {
                1 + n + rng.below(l.dir_dwords.len() - 1 - n)
            };
            let v = match rng.below(3) {
                0 => value(rng),
                1 => (u32_at(b, l.dir_dwords[i]) as u32).wrapping_add(1 + rng.below(8) as u32),
                _ => (u32_at(b, l.dir_dwords[i]) as u32).wrapping_sub(1 + rng.below(8) as u32),
            };
            put32(b, l.dir_dwords[i], v);
            "stream directory"
        }
        4 => {
            // TPI: a header field, or two bytes anywhere (record lengths and kinds).
            if rng.below(4) == 0 {
                let at = l.at(2, rng.below(14) * 4).unwrap();
                let v = value(rng);
                put32(b, at, v);
            } else {
                for _ in 0..1 + rng.below(4) {
                    if let Some(at) = in_stream(rng, 2) {
                        let v = value(rng) as u16;
                        b[at] = v as u8;
                        if at + 1 < b.len() {
                            b[at + 1] = (v >> 8) as u8;
                        }
                    }
                }
            }
            "type stream"
        }
        5 => {
            let s = l.symbol_stream(b);
            for _ in 0..1 + rng.below(4) {
                if let Some(at) = in_stream(rng, s) {
                    b[at] = rng.next() as u8;
                }
            }
            "symbol records"
        }
        6 => {
            // DBI header and optional debug header, PDB information stream.
            let s = if rng.below(3) == 0 { 1 } else { 3 };
            let size = l.streams[s].0;
            let at = l.at(s, rng.below(size.min(96) / 2) * 2).unwrap();
            let v = value(rng) as u16;
            b[at..at + 2].copy_from_slice(&v.to_le_bytes());
            "DBI / info header"
        }
        _ => {
            // Several blocks of random bytes.
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(b.len());
                let n = (1 + rng.below(64)).min(b.len() - at);
                for x in &mut b[at..at + n] {
                    *x = rng.next() as u8;
                }
            }
            "random bytes"
        }
    }
}

/// Damaged copies of every fixture and corpus PDB: the new loader never panics, and wherever
/// the crate's loader reads a copy, the new loader gives the same contents.
#[test]
fn damaged_copies_load_as_the_crate_loads_them_or_the_crate_fails() {
    let files: Vec<(PathBuf, Vec<u8>)> = fixtures()
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    let copies: usize = std::env::var("PDB_DAMAGED_COPIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2400);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut same_ok, mut both_failed, mut only_crate_failed) = (0, 0, 0);
    for i in 0..copies {
        let (path, src) = &files[i % files.len()];
        let l = Layout::of(src);
        let mut b = src.clone();
        let how = damage(&mut b, &l, &mut rng);
        let what = format!("copy {i} of {} ({how})", path.display());
        let ours = std::panic::catch_unwind(|| load_bytes(path, &b, WANTED_TYPES, Globals::All))
            .unwrap_or_else(|_| panic!("{what}: the new loader panicked"));
        let theirs = pdb_reference::load_bytes(path, &b, WANTED_TYPES);
        let all = load_bytes(path, &b, WANTED_TYPES, Globals::All).map_err(|e| e.to_string());
        assert_tool_load(&what, path, &b, &all);
        match (ours, theirs) {
            (Ok(o), Ok(t)) => {
                assert_same(&what, &o, &t);
                same_ok += 1;
            }
            (Ok(_), Err(_)) => only_crate_failed += 1,
            (Err(e), Err(_)) => {
                assert!(e.to_string().contains("not a readable PDB"), "{what}: {e}");
                both_failed += 1;
            }
            (Err(e), Ok(_)) => {
                panic!("{what}: the crate read it, the new loader refused it: {e}");
            }
        }
    }
    println!(
        "{copies} damaged copies: {same_ok} identical, {both_failed} refused by both, \
         {only_crate_failed} read only by the new loader, none refused only by it"
    );
    assert!(same_ok > copies / 10 && both_failed > copies / 20);
}
