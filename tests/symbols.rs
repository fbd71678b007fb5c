//! The symbols layer: PDB and ISF readers, symbol stores, matching symbols to a dump.
//! Fixture PDBs (tests/fixtures, built with clang + lld-link from real layouts) are committed;
//! the real ISF files live in ../shared/isf (tests needing them skip with a message).

mod common;
use common::etwdump;
use etwdump::symbols::{Symbols, TypeRef, WANTED_TYPES};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

fn fixture_meta(name: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture(name).join("symbols.json")).unwrap()).unwrap()
}

fn shared_isf(file: &str) -> Option<PathBuf> {
    let p = root().join("../shared/isf").join(file);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("SKIPPED: reference ISF {} is not present", p.display());
        None
    }
}

const X64_FIXTURES: &[&str] = &[
    "x64-7601",
    "x64-9600",
    "x64-14393",
    "x64-17763",
    "x64-17763b",
    "x64-19041",
];

/// Compare two type references by shape: kinds, sizes, counts, bit positions; aggregate
/// names unless one side is an anonymous type.
fn same_shape(a: &TypeRef, b: &TypeRef) -> Result<(), String> {
    let anon = |n: &str| {
        n.starts_with("__anonymous") || n.starts_with("<unnamed") || n.starts_with("__unnamed")
    };
    match (a, b) {
        (TypeRef::Base { size: x, .. }, TypeRef::Base { size: y, .. }) if x == y => Ok(()),
        (TypeRef::Enum { size: x, .. }, TypeRef::Enum { size: y, .. }) if x == y => Ok(()),
        (TypeRef::Pointer { .. }, TypeRef::Pointer { .. }) => Ok(()),
        (TypeRef::Void, TypeRef::Void) | (TypeRef::Function, TypeRef::Function) => Ok(()),
        (
            TypeRef::Array {
                element: e1,
                count: c1,
            },
            TypeRef::Array {
                element: e2,
                count: c2,
            },
        ) if c1 == c2 => same_shape(e1, e2),
        (TypeRef::Struct { name: x }, TypeRef::Struct { name: y })
        | (TypeRef::Union { name: x }, TypeRef::Union { name: y })
            if x == y || anon(x.raw()) || anon(y.raw()) =>
        {
            Ok(())
        }
        (
            TypeRef::Bitfield {
                base: b1,
                position: p1,
                length: l1,
            },
            TypeRef::Bitfield {
                base: b2,
                position: p2,
                length: l2,
            },
        ) if p1 == p2 && l1 == l2 => same_shape(b1, b2),
        _ => Err(format!("{a:?} vs {b:?}")),
    }
}

/// The layouts etwdump reads from each fixture PDB equal those it reads from the real ISF
/// the fixture was generated from, for every type the tool asks for and what they embed.
#[test]
fn fixture_pdbs_equal_their_isf() {
    for name in X64_FIXTURES {
        let meta = fixture_meta(name);
        let Some(isf_path) = shared_isf(meta["types"]["source"].as_str().unwrap()) else {
            continue;
        };
        let mut fields = 0;
        let mut types = 0;
        // Walk from the roots, pairing embedded types by the field that embeds them (the two
        // sources name anonymous types differently).
        // The roots the fixture was generated from (a subset of what the tool asks for).
        let roots: Vec<String> = meta["types"]["roots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let pdb = Symbols::from_pdb(
            &fixture(name).join("ntkrnlmp.pdb"),
            &roots.iter().map(String::as_str).collect::<Vec<_>>(),
        )
        .unwrap();
        let isf = Symbols::from_isf(
            &isf_path,
            &roots.iter().map(String::as_str).collect::<Vec<_>>(),
        )
        .unwrap();
        let mut todo: Vec<(String, String)> = roots
            .iter()
            .filter(|t| isf.own_types().get(t).is_some())
            .map(|t| (t.to_string(), t.to_string()))
            .collect();
        let mut seen = std::collections::HashSet::new();
        while let Some((it, pt)) = todo.pop() {
            if !seen.insert((it.clone(), pt.clone())) {
                continue;
            }
            let t = &it;
            let i = isf.own_types().get(&it).unwrap();
            let p = pdb
                .own_types()
                .get(&pt)
                .unwrap_or_else(|| panic!("{name}: {pt} (ISF {it}) missing from the PDB"));
            assert_eq!(p.size, i.size, "{name}: sizeof {t}");
            assert_eq!(p.is_union, i.is_union, "{name}: {t} union-ness");
            for f in &i.fields {
                let g = p
                    .field(f.name.raw())
                    .unwrap_or_else(|| panic!("{name}: {t}.{} missing from the PDB", f.name));
                assert_eq!(g.offset, f.offset, "{name}: {t}.{}", f.name);
                if let Err(e) = same_shape(&g.ty, &f.ty) {
                    panic!("{name}: {t}.{}: {e}", f.name);
                }
                let mut a = &f.ty;
                let mut b = &g.ty;
                while let (TypeRef::Array { element: x, .. }, TypeRef::Array { element: y, .. }) =
                    (a, b)
                {
                    a = x;
                    b = y;
                }
                if let (
                    TypeRef::Struct { name: x } | TypeRef::Union { name: x },
                    TypeRef::Struct { name: y } | TypeRef::Union { name: y },
                ) = (a, b)
                {
                    if isf.own_types().get(x.raw()).is_some() {
                        todo.push((x.raw().to_string(), y.raw().to_string()));
                    }
                }
                fields += 1;
            }
            // Anything the PDB has beyond the ISF is the generator's explicit padding.
            for g in &p.fields {
                assert!(
                    i.field(g.name.raw()).is_some() || g.name.raw().starts_with("__pad"),
                    "{name}: {t}.{} only in the PDB",
                    g.name
                );
            }
            types += 1;
        }
        assert!(
            types >= 30 && fields >= 1000,
            "{name}: only {types} types / {fields} fields compared"
        );
        eprintln!("{name}: {types} types, {fields} fields equal");
    }
}

/// Offsets stated by the reference (crash-dump-format.md §2.3), read from the committed
/// fixture PDBs (no ../shared needed).
#[test]
fn fixture_pdb_offsets_match_the_reference() {
    // (fixture, _WMI_LOGGER_CONTEXT size, BufferQueue, GlobalList, CurrentBuffer, LoggerName, LogFileName, InstanceGuid)
    type Row = (&'static str, u64, Option<u64>, u64, u64, u64, u64, u64);
    let rows: &[Row] = &[
        ("x64-7601", 0x340, None, 0x60, 0x70, 0x78, 0x88, 0x10C),
        ("x64-9600", 0x390, Some(0x40), 0x70, 0x90, 0x98, 0xA8, 0x124),
        (
            "x64-14393",
            0x440,
            Some(0x40),
            0x60,
            0x80,
            0x88,
            0x98,
            0x114,
        ),
        (
            "x64-17763",
            0x520,
            Some(0x40),
            0x60,
            0x90,
            0x98,
            0xA8,
            0x124,
        ),
        (
            "x64-19041",
            0x550,
            Some(0x40),
            0x60,
            0x90,
            0x98,
            0xA8,
            0x124,
        ),
    ];
    for &(name, size, bq, gl, cb, ln, lf, ig) in rows {
        let s = Symbols::from_pdb(&fixture(name).join("ntkrnlmp.pdb"), WANTED_TYPES).unwrap();
        let l = s.layout("_WMI_LOGGER_CONTEXT").unwrap();
        assert_eq!(l.size, size, "{name}");
        let off = |f: &str| l.field(f).map(|f| f.offset);
        assert_eq!(off("LoggerId"), Some(0), "{name}");
        assert_eq!(off("BufferSize"), Some(4), "{name}");
        assert_eq!(off("BufferQueue"), bq, "{name}");
        assert_eq!(off("GlobalList"), Some(gl), "{name}");
        assert_eq!(off("CurrentBuffer"), Some(cb), "{name}");
        assert_eq!(off("LoggerName"), Some(ln), "{name}");
        assert_eq!(off("LogFileName"), Some(lf), "{name}");
        assert_eq!(off("InstanceGuid"), Some(ig), "{name}");
        assert_eq!(
            l.field("LoggerName").unwrap().ty,
            TypeRef::strukt("_UNICODE_STRING")
        );
        let b = s.layout("_WMI_BUFFER_HEADER").unwrap();
        assert_eq!(b.size, 0x48, "{name}");
        for (f, o) in [
            ("SavedOffset", 4),
            ("CurrentOffset", 8),
            ("TimeStamp", 0x10),
            ("SequenceNumber", 0x18),
            ("ClientContext", 0x28),
            ("State", 0x2C),
            ("Offset", 0x30),
            ("BufferFlag", 0x34),
            ("BufferType", 0x36),
        ] {
            assert_eq!(
                b.field(f).map(|x| x.offset),
                Some(o),
                "{name} _WMI_BUFFER_HEADER.{f}"
            );
        }
        // The bitfield ClockType:3 / Frequency:61 of 6.2+ (7601 has no ClockType there).
        if name != "x64-7601" {
            match &b.field("ClockType").unwrap().ty {
                TypeRef::Bitfield {
                    position: 0,
                    length: 3,
                    base,
                } => {
                    assert!(matches!(**base, TypeRef::Base { size: 8, .. }))
                }
                t => panic!("{name}: ClockType is {t:?}"),
            }
        }
    }
    // The silo state of the modern builds (§2.3).
    for (name, size, max, ctx, blocks) in [
        ("x64-17763", 0x11C0, 0x10, 0x1B0, 0x1010),
        ("x64-17763b", 0x11E8, 0x10, 0x1C8, 0x1028),
        ("x64-19041", 0x1220, 0x10, 0x1C8, 0x1028),
    ] {
        let s = Symbols::from_pdb(&fixture(name).join("ntkrnlmp.pdb"), WANTED_TYPES).unwrap();
        let l = s.layout("_ETW_SILODRIVERSTATE").unwrap();
        assert_eq!(l.size, size, "{name}");
        assert_eq!(l.field("MaxLoggers").unwrap().offset, max, "{name}");
        let f = l.field("EtwpLoggerContext").unwrap();
        assert_eq!(f.offset, ctx, "{name}");
        assert!(f.ty.is_pointer(), "{name}");
        assert_eq!(l.field("ProcessorBlocks").unwrap().offset, blocks, "{name}");
    }
    let s = Symbols::from_pdb(&fixture("x64-14393").join("ntkrnlmp.pdb"), WANTED_TYPES).unwrap();
    let f = s
        .layout("_ETW_SILODRIVERSTATE")
        .unwrap()
        .field("WmipLoggerContext")
        .unwrap();
    assert_eq!(f.offset, 0x390);
    assert!(matches!(&f.ty, TypeRef::Array { count: 64, element } if element.is_pointer()));
    // KPRCB.EtwSupport (§2.3).
    for (name, size, etw) in [
        ("x64-7601", 0x6F00, 0x51F0),
        ("x64-9600", 0x7EC0, 0x5F18),
        ("x64-14393", 0x7EC0, 0x5FD8),
        ("x64-17763", 0x7EC0, 0x6028),
        ("x64-19041", 0xAF00, 0x8328),
    ] {
        let s = Symbols::from_pdb(&fixture(name).join("ntkrnlmp.pdb"), WANTED_TYPES).unwrap();
        let k = s.layout("_KPRCB").unwrap();
        assert_eq!(k.size, size, "{name}");
        assert_eq!(k.field("EtwSupport").unwrap().offset, etw, "{name}");
    }
}

/// Publics: globals resolve to the RVAs the fixture build recorded; x86 names lose their
/// leading underscore.
#[test]
fn fixture_public_symbols() {
    for name in X64_FIXTURES.iter().copied().chain(["x86-14393"]) {
        let meta = fixture_meta(name);
        let pdb_name = meta["pdb"]["name"].as_str().unwrap();
        let s = Symbols::from_pdb(&fixture(name).join(pdb_name), WANTED_TYPES).unwrap();
        assert_eq!(
            s.pointer_size,
            if name.starts_with("x86") { 4 } else { 8 },
            "{name}"
        );
        let id = s.identity.as_ref().unwrap();
        assert_eq!(id.guid, meta["pdb"]["guid"].as_str().unwrap(), "{name}");
        assert_eq!(
            u64::from(id.age),
            meta["pdb"]["age"].as_u64().unwrap(),
            "{name}"
        );
        let syms = meta["symbols"].as_object().unwrap();
        assert!(syms.len() >= 8, "{name}");
        for (sym, rva) in syms {
            let want =
                u64::from_str_radix(rva.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
            assert_eq!(s.rva(sym), Some(want), "{name}: {sym}");
        }
    }
    let s = Symbols::from_pdb(&fixture("x86-14393").join("ntkrpamp.pdb"), WANTED_TYPES).unwrap();
    assert!(s.rva("_EtwpHostSiloState").is_none());
    let l = s.layout("_WMI_LOGGER_CONTEXT").unwrap();
    assert_eq!(l.size, 0x2F0);
    assert_eq!(l.field("LoggerName").unwrap().offset, 0x54);
    assert_eq!(
        s.layout("_KPRCB")
            .unwrap()
            .field("EtwSupport")
            .unwrap()
            .offset,
        0x3FD4
    );
    let silo = s.layout("_ETW_SILODRIVERSTATE").unwrap();
    assert_eq!(silo.size, 0xA80);
    assert_eq!(silo.field("WmipLoggerContext").unwrap().offset, 0x268);
}

/// Real ISFs: the offsets of crash-dump-format.md §2.3.
#[test]
fn real_isf_offsets() {
    let rows = [
        (
            "339E74133576439CBCDF7E0229DA3773-1.json.xz",
            0x340,
            0x78,
            0x51F0,
        ),
        (
            "22597D0B40394E23936F6A24C6C52D5B-1.json.xz",
            0x390,
            0x98,
            0x5F18,
        ),
        (
            "517E128F7B7C4EA79491DE6B9B9CE190-1.json.xz",
            0x440,
            0x88,
            0x5FD8,
        ),
        (
            "5278AFF86C341677D7D7835C85B7B844-1.json.xz",
            0x550,
            0x98,
            0x8328,
        ),
    ];
    for (file, size, name_off, etw) in rows {
        let Some(p) = shared_isf(file) else { continue };
        let s = Symbols::from_isf(&p, WANTED_TYPES).unwrap();
        let l = s.layout("_WMI_LOGGER_CONTEXT").unwrap();
        assert_eq!(l.size, size, "{file}");
        assert_eq!(l.field("LoggerName").unwrap().offset, name_off, "{file}");
        assert_eq!(
            s.layout("_KPRCB")
                .unwrap()
                .field("EtwSupport")
                .unwrap()
                .offset,
            etw,
            "{file}"
        );
        let id = s.identity.as_ref().unwrap();
        assert_eq!(id.guid.replace('-', ""), file[..32]);
    }
    if let Some(p) = shared_isf("5278AFF86C341677D7D7835C85B7B844-1.json.xz") {
        let s = Symbols::from_isf(&p, WANTED_TYPES).unwrap();
        // §2.2: the RVAs that matched the real triage dump.
        for (sym, rva) in [
            ("PsLoadedModuleList", 0xC2A390),
            ("PsActiveProcessHead", 0xC1E200),
            ("KdDebuggerDataBlock", 0xC00B20),
            ("KiProcessorBlock", 0xCFDC80),
            ("EtwpDebuggerData", 0xC10D58),
            ("EtwpHostSiloState", 0xCFB008),
        ] {
            assert_eq!(s.rva(sym), Some(rva), "{sym}");
        }
        // The registration-handle globals `check` examines: the 14 `Etw*RegHandle` of this
        // build and EtwpRegTraceHandle (Kernel-Registry), whose name breaks the pattern.
        let r = etwdump::report::symbols::report(&s, WANTED_TYPES, false);
        let handles: Vec<&etwdump::text::Untrusted> = r
            .symbols
            .keys()
            .filter(|k| etwdump::symbols::is_reg_handle(k.raw()))
            .collect();
        assert_eq!(handles.len(), 15, "{handles:?}");
        assert_eq!(
            r.symbols
                .get(&etwdump::text::Untrusted::from("EtwpRegTraceHandle"))
                .map(String::as_str),
            Some("0xd2c018")
        );
    }
}

fn write_forge(dir: &Path, c: &etwdump_forge::Config) -> PathBuf {
    let p = dir.join("d.dmp");
    etwdump_forge::forge(c).write_to(&p).unwrap();
    p
}

/// A PDB of another kernel is refused, naming both identities; --force uses it anyway and
/// says it is not verified.
#[test]
fn mismatched_pdb_is_an_error_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    // The default x64 forge kernel carries the real 19041 kernel's GUID, not the fixture's.
    let dump = write_forge(dir.path(), &etwdump_forge::Config::x64());
    let pdb = fixture("x64-19041").join("ntkrnlmp.pdb");
    let out = etwdump(&[
        "info",
        dump.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("symbol mismatch: the dump's kernel is ntkrnlmp.pdb {5278AFF8-6C34-1677-D7D7-835C85B7B844} age 1, but the PDB is ntkrnlmp.pdb {E7D0F1C7-0064-0001-0000-000000019041} age 1"), "{err}");
    let out = etwdump(&[
        "info",
        dump.to_str().unwrap(),
        "--pdb",
        pdb.to_str().unwrap(),
        "--force",
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["symbols"]["source"], "pdb");
    assert_eq!(j["symbols"]["match"]["method"], "unverified");
    assert!(j["symbols"]["match"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("forced"));
    assert_eq!(j["symbols"]["layouts"]["_WMI_LOGGER_CONTEXT"], "pdb");
}

/// A symbol store is searched by the kernel's GUID/age; Volatility's ISF layout is accepted.
#[test]
fn symbol_store_lookup() {
    let Some(isf) = shared_isf("5278AFF86C341677D7D7835C85B7B844-1.json.xz") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dump = write_forge(dir.path(), &etwdump_forge::Config::x64());
    let store = dir.path().join("store");
    // Empty store: a clear error naming the identity and the first path searched.
    std::fs::create_dir_all(&store).unwrap();
    let out = etwdump(&[
        "info",
        dump.to_str().unwrap(),
        "--symbols",
        store.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no symbols for ntkrnlmp.pdb {5278AFF8-6C34-1677-D7D7-835C85B7B844} age 1 in the symbol store"), "{err}");
    assert!(
        err.contains("ntkrnlmp.pdb/5278AFF86C341677D7D7835C85B7B8441/ntkrnlmp.pdb"),
        "{err}"
    );
    // Volatility layout: windows/ntkrnlmp.pdb/<GUID>-<age>.json.xz (copied at test time only).
    let target = store.join("windows/ntkrnlmp.pdb/5278AFF86C341677D7D7835C85B7B844-1.json.xz");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(&isf, &target).unwrap();
    let out = etwdump(&[
        "info",
        dump.to_str().unwrap(),
        "--symbols",
        store.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["symbols"]["source"], "isf");
    assert_eq!(j["symbols"]["match"]["method"], "rsds");
    assert_eq!(j["symbols"]["path"], target.to_str().unwrap());
    assert_eq!(j["symbols"]["layouts"]["_ETW_SILODRIVERSTATE"], "isf");
    // The forge places EtwpHostSiloState's storage at the real RVA; the root is found.
    let roots = j["etw_roots"].as_array().unwrap();
    let silo = roots
        .iter()
        .find(|r| r["name"] == "EtwpHostSiloState")
        .unwrap();
    assert_eq!(silo["address"], "0xfffff8047c6fb008");
}

#[test]
fn bad_symbol_files() {
    let dir = tempfile::tempdir().unwrap();
    let dump = write_forge(dir.path(), &etwdump_forge::Config::x64());
    let d = dump.to_str().unwrap();
    let fail = |args: &[&str], phrase: &str| {
        let out = etwdump(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(phrase), "expected {phrase:?} in {err}");
    };
    // Truncated PDB.
    let pdb = std::fs::read(fixture("x64-19041").join("ntkrnlmp.pdb")).unwrap();
    let t = dir.path().join("trunc.pdb");
    std::fs::write(&t, &pdb[..pdb.len() / 3]).unwrap();
    fail(
        &["info", d, "--pdb", t.to_str().unwrap()],
        "not a readable PDB",
    );
    // Not a PDB at all.
    let t = dir.path().join("junk.pdb");
    std::fs::write(&t, b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0garbage").unwrap();
    fail(
        &["info", d, "--pdb", t.to_str().unwrap()],
        "not a readable PDB",
    );
    // Missing file.
    fail(
        &["info", d, "--pdb", "/nonexistent/ntkrnlmp.pdb"],
        "/nonexistent/ntkrnlmp.pdb",
    );
    // ISF: invalid JSON, truncated xz.
    let t = dir.path().join("bad.json");
    std::fs::write(&t, b"{\"metadata\": ").unwrap();
    fail(
        &["info", d, "--isf", t.to_str().unwrap()],
        "not a readable ISF file",
    );
    let t = dir.path().join("bad.json.xz");
    std::fs::write(&t, b"\xfd7zXZ\0garbage").unwrap();
    fail(
        &["info", d, "--isf", t.to_str().unwrap()],
        "not a readable ISF file: cannot read (xz)",
    );
    // An ISF without the types: accepted (with --force, since it has no identity to match),
    // the layouts fall back to built-in, and info says so.
    let t = dir.path().join("empty.json");
    std::fs::write(&t, br#"{"metadata": {}, "base_types": {}, "user_types": {"_LIST_ENTRY": {"kind": "struct", "size": 16, "fields": {}}}, "enums": {}, "symbols": {}}"#).unwrap();
    let out = etwdump(&["info", d, "--isf", t.to_str().unwrap(), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["symbols"]["match"]["method"], "unverified");
    assert_ne!(j["symbols"]["layouts"]["_WMI_LOGGER_CONTEXT"], "isf");
}

/// The real triage dump with the real ISF: matched by symbol offsets (its RSDS page is
/// absent), and the ETW roots are reported as not in the dump (crash-dump-format.md §2.1).
#[test]
fn triage_dump_with_real_isf() {
    let Some(dump) = common::shared_dump("triage_x64.dmp") else {
        return;
    };
    let Some(isf) = shared_isf("5278AFF86C341677D7D7835C85B7B844-1.json.xz") else {
        return;
    };
    let out = etwdump(&[
        "info",
        dump.to_str().unwrap(),
        "--isf",
        isf.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &j["symbols"]["match"];
    assert_eq!(m["method"], "symbol_offsets");
    let checks = m["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 7);
    assert!(checks.iter().all(|c| c["agrees"] == true));
    let c = checks
        .iter()
        .find(|c| c["symbol"] == "KiProcessorBlock")
        .unwrap();
    assert_eq!(c["dump_rva"], "0xcfdc80");
    let roots = j["etw_roots"].as_array().unwrap();
    let silo = roots
        .iter()
        .find(|r| r["name"] == "EtwpHostSiloState")
        .unwrap();
    assert_eq!(silo["address"], "0xfffff8047c6fb008"); // RVA 0xCFB008
    assert_eq!(silo["present"], false);
    let dbg = roots
        .iter()
        .find(|r| {
            r["name"]
                .as_str()
                .unwrap()
                .starts_with("KDBG.EtwpDebuggerData")
        })
        .unwrap();
    assert_eq!(dbg["address"], "0xfffff8047c610d58");
    assert_eq!(dbg["present"], false);
    let arr = roots.iter().find(|r| r["name"] == "logger array").unwrap();
    assert_eq!(arr["present"], false);
    // A different ISF (the 14393 kernel) is refused by the offset check.
    if let Some(other) = shared_isf("517E128F7B7C4EA79491DE6B9B9CE190-1.json.xz") {
        let out = etwdump(&[
            "info",
            dump.to_str().unwrap(),
            "--isf",
            other.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("symbol mismatch: the dump's kernel is a kernel with PsLoadedModuleList at RVA 0xc2a390"), "{err}");
    }
}

/// A build without its own corpus entry: the nearest earlier layouts (26100's public ones), said so;
/// a build no built-in table covers (x86 26100): nothing is guessed.
#[test]
fn unknown_build_has_no_builtin_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = etwdump_forge::Config::x64();
    c.build = 26100;
    c.pdb_guid = [0x26; 16]; // not a corpus kernel (the default is the real 19041.804 one)
    let dump = write_forge(dir.path(), &c);
    let j = common::info_json(&dump);
    assert_eq!(j["windows"]["build"], 26100);
    assert!(j["symbols"]["builtin_era"].is_null());
    let corpus = &j["symbols"]["builtin_corpus"];
    assert_eq!(corpus["match"], "nearest");
    // 26100's own public layouts (no PDB identity: never exact, no RVAs).
    assert_eq!(corpus["version"], "10.0.26100.0");
    assert_eq!(corpus["source"], "ntoskrnlib");
    assert!(corpus["guid"].is_null() && corpus["age"].is_null());
    assert_eq!(corpus["rvas"], false);
    assert_eq!(
        corpus["description"],
        "built-in nearest earlier layout: 10.0.26100.0 (Windows 11 24H2 line, revision \
         unknown, public layouts from ntoskrnlib; not an exact match)"
    );
    assert_eq!(
        j["symbols"]["layouts"]["_WMI_LOGGER_CONTEXT"],
        "builtin-nearest"
    );
    // The KDBG layout is public and fixed: still read.
    assert_eq!(j["kd_debugger_data_block"]["decoded"], true);
    let symbols = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["symbols"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--types", "_WMI_LOGGER_CONTEXT", "--format", "json"]);
        let out = etwdump(&a);
        assert!(out.status.success(), "{args:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let j = symbols(&["--build", "26100", "--x86"]);
    assert_eq!(
        j["missing_types"],
        serde_json::json!(["_WMI_LOGGER_CONTEXT"])
    );
    let j = symbols(&["--build", "26100"]);
    let l = &j["types"]["_WMI_LOGGER_CONTEXT"];
    assert_eq!(l["source"], "builtin-nearest");
    assert_eq!(l["fields"]["LoggerName"]["offset"], 0x88);
    assert_eq!(l["size"], 0x650); // 26100's own public layout, not 22000's 0x540
                                  // A build whose hand-written era is newer than the nearest corpus major (9200 > 7601):
                                  // the hand-written table, with its source named.
    let j = symbols(&["--build", "9200"]);
    let l = &j["types"]["_WMI_LOGGER_CONTEXT"];
    assert_eq!(l["source"], "builtin");
    assert_eq!(l["fields"]["LoggerName"]["offset"], 0x98);
    let j = symbols(&["--build", "19041"]);
    assert_eq!(
        j["types"]["_WMI_LOGGER_CONTEXT"]["source"],
        "builtin-nearest"
    );
    let out = etwdump(&["symbols"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("give --pdb FILE, --isf FILE, --build N, or a dump"));
}

/// Enumeration constants (WANTED_ENUMS) from real ISFs: `_KWAIT_REASON.MaximumWaitReason`, the
/// CCSWAP state bias, per build (etw-internals.md §4.3), and names.
#[test]
fn real_isf_enums() {
    let rows = [
        ("339E74133576439CBCDF7E0229DA3773-1.json.xz", 37), // 7601
        ("22597D0B40394E23936F6A24C6C52D5B-1.json.xz", 39), // 9600
        ("517E128F7B7C4EA79491DE6B9B9CE190-1.json.xz", 39), // 14393
        ("5278AFF86C341677D7D7835C85B7B844-1.json.xz", 40), // 19041
    ];
    let mut seen = 0;
    for (file, mwr) in rows {
        let Some(p) = shared_isf(file) else { continue };
        seen += 1;
        let s = Symbols::from_isf(&p, WANTED_TYPES).unwrap();
        assert_eq!(
            s.enum_value("_KWAIT_REASON", "MaximumWaitReason"),
            Some(mwr),
            "{file}"
        );
        assert_eq!(s.enum_name("_KWAIT_REASON", 15), Some("WrQueue"), "{file}");
        assert_eq!(s.enum_value("_KWAIT_REASON", "NoSuchReason"), None);
        assert_eq!(s.enum_value("_NO_SUCH_ENUM", "X"), None);
    }
    if let Some(p) = shared_isf("5278AFF86C341677D7D7835C85B7B844-1.json.xz") {
        let s = Symbols::from_isf(&p, WANTED_TYPES).unwrap();
        assert_eq!(s.enum_name("_KTHREAD_STATE", 5), Some("Waiting"));
        assert_eq!(
            s.enum_name("_KTHREAD_STATE", 9),
            Some("WaitingForProcessInSwap")
        );
        assert_eq!(s.enum_name("_KWAIT_REASON", 37), Some("WrAlertByThreadId"));
    }
    if seen == 0 {
        eprintln!("SKIP real_isf_enums: ../shared/isf is absent");
    }
}

/// The PDB reader reads enumerations (LF_ENUM field lists): the fixture PDB's
/// `_ETW_BUFFER_STATE` (emitted from the real 19041 layout) has the documented constants.
#[test]
fn fixture_pdb_enum_constants() {
    let s = Symbols::from_pdb(&fixture("x64-19041").join("ntkrnlmp.pdb"), WANTED_TYPES).unwrap();
    for (name, v) in [
        ("EtwBufferStateFree", 0),
        ("EtwBufferStateGeneralLogging", 1),
        ("EtwBufferStateCSwitch", 2),
        ("EtwBufferStateFlush", 3),
        ("EtwBufferStatePendingCompression", 4),
        ("EtwBufferStateCompressed", 5),
        ("EtwBufferStatePlaceholder", 6),
        ("EtwBufferStateMaximum", 7),
    ] {
        assert_eq!(s.enum_value("_ETW_BUFFER_STATE", name), Some(v), "{name}");
        assert_eq!(s.enum_name("_ETW_BUFFER_STATE", v), Some(name));
    }
    // Not in the fixture's types.h, so not in its PDB.
    assert_eq!(s.enum_value("_KWAIT_REASON", "MaximumWaitReason"), None);
}

/// Damaged PDBs never take the tool down (issue 13): one random dword of the fixture PDB's type
/// records (or of its headers) overwritten with random or extreme values, 400 times; every load
/// ends in layouts or in a "not a readable PDB" error naming the file — never a panic (the
/// `pdb` crate's own panics are contained) or an abort (sizes it would trust are checked).
#[test]
fn damaged_pdbs_never_panic() {
    let src = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-19041/ntkrnlmp.pdb"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("damaged.pdb");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..400 {
        let mut b = src.clone();
        for _ in 0..1 + next() % 3 {
            let off = (next() as usize % (b.len() / 4)) * 4;
            let v: u32 = match next() % 4 {
                0 => u32::MAX,
                1 => 0,
                2 => 0x8000_0000,
                _ => next() as u32,
            };
            b[off..off + 4].copy_from_slice(&v.to_le_bytes());
        }
        std::fs::write(&p, &b).unwrap();
        match etwdump::symbols::Symbols::from_pdb(&p, etwdump::symbols::WANTED_TYPES) {
            Ok(_) => ok += 1,
            Err(e) => {
                let m = e.to_string();
                assert!(m.contains("damaged.pdb"), "{m}");
                refused += 1;
            }
        }
    }
    assert_eq!(ok + refused, 400);
    println!("damaged PDBs: {ok} loaded, {refused} refused");
}
