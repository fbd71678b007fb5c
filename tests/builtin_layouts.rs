//! The built-in per-version layouts (written from the reference texts) against the real ISF
//! files in ../shared/isf (skipped when absent): for each ISF, one of the built-in variants
//! for its build must equal it on every field the built-in tables give. Every disagreement is
//! printed.

use etwdump::symbols::builtin;
use etwdump::symbols::{StructLayout, Symbols, TypeRef, WANTED_TYPES};
use std::path::PathBuf;

/// The ISFs and their builds (identified by their layouts, crash-dump-format.md §2.3).
const ISFS: &[(&str, u32)] = &[
    ("339E74133576439CBCDF7E0229DA3773-1.json.xz", 7601),
    ("22597D0B40394E23936F6A24C6C52D5B-1.json.xz", 9600),
    ("517E128F7B7C4EA79491DE6B9B9CE190-1.json.xz", 14393),
    ("8B11040A5928757B11390AC78F6B6925-1.json.xz", 17763),
    ("76133B7D5E53E8EF3783A68665142583-1.json.xz", 17763),
    ("35A038B1F6E2E8CAF642111E6EC66F57-1.json.xz", 18362),
    ("5278AFF86C341677D7D7835C85B7B844-1.json.xz", 19041),
    ("733830ECAFA1A3073FFA9CC3A38FE93C-1.json.xz", 19041),
    ("BBED7C2955FBE4522AAA23F4B8677AD9-1.json.xz", 19041),
];

/// Size class of a type for comparison: what a reader needs to agree on.
fn shape(t: &TypeRef, ptr: u64) -> String {
    match t {
        TypeRef::Base { size, .. } | TypeRef::Enum { size, .. } => format!("int{}", size * 8),
        TypeRef::Pointer { .. } => format!("ptr{}", ptr * 8),
        TypeRef::Array { element, count } => format!("{}[{count}]", shape(element, ptr)),
        TypeRef::Struct { name } | TypeRef::Union { name } => {
            // SLIST_HEADER and LARGE_INTEGER are unions in PDBs; compare by name only.
            format!("aggregate {name}")
        }
        TypeRef::Bitfield {
            base,
            position,
            length,
        } => format!("{}:{position}+{length}", shape(base, ptr)),
        TypeRef::Function => "function".into(),
        TypeRef::Void => "void".into(),
    }
}

/// Disagreements of a built-in layout with the ISF's.
fn compare(b: &StructLayout, i: &StructLayout) -> Vec<String> {
    let mut out = Vec::new();
    if b.size != 0 && b.size != i.size {
        out.push(format!("{}: size {:#x}, ISF {:#x}", b.name, b.size, i.size));
    }
    for f in &b.fields {
        match i.field(f.name.raw()) {
            None => out.push(format!(
                "{}.{}: at {:#x} built-in, absent from the ISF",
                b.name, f.name, f.offset
            )),
            Some(g) if g.offset != f.offset => out.push(format!(
                "{}.{}: offset {:#x} built-in, {:#x} in the ISF",
                b.name, f.name, f.offset, g.offset
            )),
            Some(g) => {
                let (x, y) = (shape(&f.ty, 8), shape(&g.ty, 8));
                // A pointer and a function pointer, or an integer GetCpuClock, are told apart
                // by the ISF only by name: compare sizes there.
                let loose = |s: &str| {
                    s.replace("aggregate _SLIST_HEADER", "int128")
                        .replace("function", "ptr64")
                };
                if loose(&x) != loose(&y) && !(x.starts_with("ptr") && y.starts_with("ptr")) {
                    out.push(format!(
                        "{}.{}: type {x} built-in, {y} in the ISF",
                        b.name, f.name
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn builtin_layouts_equal_the_real_isfs() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/isf");
    if !dir.is_dir() {
        eprintln!("SKIPPED: {} is not present", dir.display());
        return;
    }
    let mut failures = Vec::new();
    for &(file, build) in ISFS {
        let p = dir.join(file);
        if !p.is_file() {
            eprintln!("SKIPPED: {} is not present", p.display());
            continue;
        }
        let isf = Symbols::from_isf(&p, WANTED_TYPES).unwrap();
        let variants = builtin::variants(build, etwdump::symbols::TableFamily::X64);
        assert!(!variants.is_empty(), "no built-in layouts for {build}");
        let mut best: Option<(usize, &'static str, Vec<String>)> = None;
        let mut compared = 0;
        for v in &variants {
            let mut dis = Vec::new();
            compared = 0;
            for b in &v.types {
                if b.name == "_KDDEBUGGER_DATA64" {
                    continue; // not a PDB type; checked against the real dump instead
                }
                match isf.own_types().get(b.name.raw()) {
                    Some(i) => {
                        compared += b.fields.len();
                        dis.extend(compare(b, i))
                    }
                    None => dis.push(format!("{}: built-in, absent from the ISF", b.name)),
                }
            }
            if best.as_ref().is_none_or(|(n, _, _)| dis.len() < *n) {
                best = Some((dis.len(), v.variant, dis));
            }
        }
        let (n, variant, dis) = best.unwrap();
        if n == 0 {
            eprintln!("{file} (build {build}): built-in variant \"{variant}\" equals the ISF on all {compared} fields");
        } else {
            for d in &dis {
                eprintln!("{file} (build {build}, closest variant \"{variant}\"): {d}");
            }
            failures.push(format!("{file}: {n} disagreements"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
