//! `symbols` as a table.

use super::json::{Error as JsonError, Pretty};
use crate::report::symbols::{type_text, SymbolsReport};
use crate::report::RowFormat;
use crate::symbols::TypeRef;
use std::fmt::Write as _;

impl SymbolsReport {
    /// The table form.
    pub fn to_table(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "Symbol source: {}{}",
            self.symbol_source.kind,
            self.symbol_source
                .path
                .as_ref()
                .map(|p| format!(" {p}"))
                .unwrap_or_default()
        );
        if let Some(p) = &self.pdb {
            let _ = writeln!(o, "PDB: {p}");
        }
        for (name, t) in &self.types {
            let _ = writeln!(
                o,
                "\n{} {name} (size {:#x}, from {})",
                if t.is_union { "union" } else { "struct" },
                t.size,
                t.source
            );
            let mut fields: Vec<_> = t.fields.iter().collect();
            fields.sort_by_key(|&(n, f)| (f.offset, n));
            for (n, f) in fields {
                let _ = writeln!(o, "  +{:#06x} {n:<32} {}", f.offset, type_text(&f.ty));
            }
        }
        if !self.missing_types.is_empty() {
            let _ = writeln!(o, "\nNot available: {}", self.missing_types.join(", "));
        }
        if !self.symbols.is_empty() {
            let _ = writeln!(o, "\nSymbols (RVA):");
            for (n, v) in &self.symbols {
                let _ = writeln!(o, "  {v:>10} {n}");
            }
        }
        o
    }
}

impl super::output::Render for SymbolsReport {
    fn render(&self, out: &mut dyn std::io::Write, format: RowFormat) -> std::io::Result<()> {
        match format {
            RowFormat::Json => {
                #[cfg(debug_assertions)]
                {
                    // The hand-written text is the serde form's, byte for byte (every report
                    // the debug-built tests render is checked).
                    let (mut ours, mut serde_form) = (Vec::new(), Vec::new());
                    self.write_json(&mut ours)?;
                    super::output::json(
                        &mut serde_form,
                        &crate::report::Document::new("symbols", self),
                    )?;
                    assert_eq!(
                        String::from_utf8_lossy(&ours),
                        String::from_utf8_lossy(&serde_form),
                        "SymbolsReport::write_json differs from the serde form"
                    );
                }
                self.write_json(out)
            }
            _ => super::output::table(out, &self.to_table()),
        }
    }
}

impl SymbolsReport {
    /// The JSON document (`Document::new("symbols", self)`'s pretty serde form, and a line
    /// break) written field by field: the layouts of a large PDB are a few hundred kilobytes
    /// of text, which the generic serializer took a quarter of the command's instructions to
    /// write (docs/performance.md, "Symbols round, second part").
    pub(crate) fn write_json(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut p = Pretty::new(out);
        p.open(b'{');
        p.key_int("format_version", crate::report::FORMAT_VERSION);
        p.key_str("command", "symbols");
        p.key("symbol_source");
        p.open(b'{');
        p.key_str("kind", self.symbol_source.kind);
        p.key("path");
        match &self.symbol_source.path {
            Some(path) => p.str(path),
            None => p.null(),
        }
        p.close(b'}');
        p.key("pdb");
        match &self.pdb {
            Some(id) => {
                p.open(b'{');
                p.key("name");
                p.value(&id.name)?;
                p.key_str("guid", &id.guid);
                p.key_int("age", id.age);
                p.key_str("store_key", &id.store_key);
                p.close(b'}');
            }
            None => p.null(),
        }
        p.key_int("pointer_size", self.pointer_size);
        p.key("types");
        p.open(b'{');
        for (name, t) in &self.types {
            p.object_under(name)?;
            p.key_int("size", t.size);
            p.key_str("source", t.source);
            p.key("is_union");
            p.bool(t.is_union);
            p.key("fields");
            p.open(b'{');
            for (field, f) in &t.fields {
                p.object_under(field)?;
                p.key_int("offset", f.offset);
                p.key("type");
                type_ref(&mut p, &f.ty)?;
                p.close(b'}');
                p.flush_if_full()?;
            }
            p.close(b'}');
            p.close(b'}');
        }
        p.close(b'}');
        p.key("missing_types");
        p.open(b'[');
        for m in &self.missing_types {
            p.element();
            p.str(m);
        }
        p.close(b']');
        p.key("symbols");
        p.open(b'{');
        for (name, rva) in &self.symbols {
            p.key_of(name)?;
            p.str(rva);
            p.flush_if_full()?;
        }
        p.close(b'}');
        p.close(b'}');
        p.finish_line()
    }
}

/// A field's type as its serde form (`{"kind": ..., ...}`, the variant's fields in order).
fn type_ref(p: &mut Pretty<'_>, t: &TypeRef) -> Result<(), JsonError> {
    p.open(b'{');
    p.key("kind");
    match t {
        TypeRef::Base { name, size, signed } => {
            p.str("base");
            p.key("name");
            p.value(name)?;
            p.key_int("size", *size);
            p.key("signed");
            p.bool(*signed);
        }
        TypeRef::Pointer { target } => {
            p.str("pointer");
            p.key("target");
            type_ref(p, target)?;
        }
        TypeRef::Array { element, count } => {
            p.str("array");
            p.key("element");
            type_ref(p, element)?;
            p.key_int("count", *count);
        }
        TypeRef::Struct { name } | TypeRef::Union { name } => {
            p.str(if matches!(t, TypeRef::Struct { .. }) {
                "struct"
            } else {
                "union"
            });
            p.key("name");
            p.value(name)?;
        }
        TypeRef::Enum { name, size } => {
            p.str("enum");
            p.key("name");
            p.value(name)?;
            p.key_int("size", *size);
        }
        TypeRef::Bitfield {
            base,
            position,
            length,
        } => {
            p.str("bitfield");
            p.key("base");
            type_ref(p, base)?;
            p.key_int("position", *position);
            p.key_int("length", *length);
        }
        TypeRef::Function => p.str("function"),
        TypeRef::Void => p.str("void"),
    }
    p.close(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::symbols::{FieldInfo, SourceInfo, TypeInfo};
    use crate::symbols::PdbIdentity;
    use crate::text::Untrusted;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// serde's pretty text of the report's document, made terminal-safe, and a line break
    /// (what `symbols --format json` wrote before the hand-written form).
    fn serde_form(r: &SymbolsReport) -> String {
        let mut t = Vec::new();
        crate::render::output::json(&mut t, &crate::report::Document::new("symbols", r)).unwrap();
        String::from_utf8(t).unwrap()
    }

    fn ours(r: &SymbolsReport) -> String {
        let mut t = Vec::new();
        r.write_json(&mut t).unwrap();
        String::from_utf8(t).unwrap()
    }

    /// Text with what a hostile symbol file may put in a name: controls (C0, DEL, C1), bidi
    /// and line separators, quotes and backslashes, any character.
    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                4 => any::<char>(),
                1 => prop::sample::select(vec![
                    '\u{1b}', '\u{0}', '\n', '\u{7f}', '\u{9b}', '\u{202e}', '\u{2028}', '"',
                    '\\', 'a', ' '
                ]),
            ],
            0..10,
        )
        .prop_map(String::from_iter)
    }

    fn type_ref() -> impl Strategy<Value = TypeRef> {
        let leaf = prop_oneof![
            (text(), any::<u64>(), any::<bool>()).prop_map(|(n, size, signed)| TypeRef::Base {
                name: Untrusted::new(n),
                size,
                signed
            }),
            text().prop_map(|n| TypeRef::Struct {
                name: Untrusted::new(n)
            }),
            text().prop_map(|n| TypeRef::Union {
                name: Untrusted::new(n)
            }),
            (text(), any::<u64>()).prop_map(|(n, size)| TypeRef::Enum {
                name: Untrusted::new(n),
                size
            }),
            Just(TypeRef::Function),
            Just(TypeRef::Void),
        ];
        leaf.prop_recursive(6, 24, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|t| TypeRef::Pointer {
                    target: Box::new(t)
                }),
                (inner.clone(), any::<u64>()).prop_map(|(t, count)| TypeRef::Array {
                    element: Box::new(t),
                    count
                }),
                (inner, any::<u32>(), any::<u32>()).prop_map(|(t, position, length)| {
                    TypeRef::Bitfield {
                        base: Box::new(t),
                        position,
                        length,
                    }
                }),
            ]
        })
    }

    fn type_info() -> impl Strategy<Value = TypeInfo> {
        (
            any::<u64>(),
            prop::sample::select(vec!["pdb", "isf", "builtin", "builtin-exact"]),
            any::<bool>(),
            prop::collection::btree_map(
                text().prop_map(Untrusted::new),
                (any::<u64>(), type_ref()).prop_map(|(offset, ty)| FieldInfo { offset, ty }),
                0..5,
            ),
        )
            .prop_map(|(size, source, is_union, fields)| TypeInfo {
                size,
                source,
                is_union,
                fields,
            })
    }

    fn report() -> impl Strategy<Value = SymbolsReport> {
        (
            (
                prop::sample::select(vec!["pdb", "isf", "builtin"]),
                prop::option::of(text()),
                prop::option::of((text(), text(), any::<u32>(), text())),
                any::<u64>(),
            ),
            prop::collection::btree_map(text(), type_info(), 0..4),
            prop::collection::vec(text(), 0..3),
            prop::collection::btree_map(text().prop_map(Untrusted::new), text(), 0..4),
        )
            .prop_map(
                |((kind, path, pdb, pointer_size), types, missing_types, symbols)| SymbolsReport {
                    symbol_source: SourceInfo { kind, path },
                    pdb: pdb.map(|(name, guid, age, store_key)| PdbIdentity {
                        name: Untrusted::new(name),
                        guid,
                        age,
                        store_key,
                    }),
                    pointer_size,
                    types,
                    missing_types,
                    symbols,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// The hand-written document is the serde form, byte for byte, on random reports
        /// (hostile names, every kind of type, empty and missing parts).
        #[test]
        fn write_json_is_the_serde_form(r in report()) {
            prop_assert_eq!(ours(&r), serde_form(&r));
        }
    }

    /// Types nested deeper than one piece of indentation holds (pointers 70 deep: 146 levels
    /// of indentation), and a report with nothing in it.
    #[test]
    fn deep_types_and_an_empty_report() {
        let mut ty = TypeRef::Void;
        for i in 0..70 {
            ty = if i % 3 == 0 {
                TypeRef::Array {
                    element: Box::new(ty),
                    count: i,
                }
            } else {
                TypeRef::Pointer {
                    target: Box::new(ty),
                }
            };
        }
        let field = FieldInfo { offset: 8, ty };
        let mut r = SymbolsReport {
            symbol_source: SourceInfo {
                kind: "builtin",
                path: None,
            },
            pdb: None,
            pointer_size: 8,
            types: BTreeMap::new(),
            missing_types: Vec::new(),
            symbols: BTreeMap::new(),
        };
        let empty = ours(&r);
        assert_eq!(empty, serde_form(&r));
        assert!(empty.contains("\"types\": {},\n  \"missing_types\": [],\n  \"symbols\": {}\n}\n"));
        r.types.insert(
            "_DEEP".into(),
            TypeInfo {
                size: 16,
                source: "pdb",
                is_union: false,
                fields: BTreeMap::from([(Untrusted::new("F"), field)]),
            },
        );
        let deep = ours(&r);
        assert_eq!(deep, serde_form(&r));
        assert!(deep.contains(&format!("\n{}\"kind\": \"void\"\n", " ".repeat(2 * 76))));
    }

    /// A document longer than the writer's 64 KiB buffer comes out whole and in order.
    #[test]
    fn a_document_over_the_buffer() {
        let fields: BTreeMap<Untrusted, FieldInfo> = (0..3000u64)
            .map(|i| {
                (
                    Untrusted::new(format!("Field{i:05}")),
                    FieldInfo {
                        offset: i * 8,
                        ty: TypeRef::uint(8),
                    },
                )
            })
            .collect();
        let r = SymbolsReport {
            symbol_source: SourceInfo {
                kind: "pdb",
                path: Some("x.pdb".into()),
            },
            pdb: None,
            pointer_size: 8,
            types: BTreeMap::from([(
                "_BIG".to_string(),
                TypeInfo {
                    size: 24000,
                    source: "pdb",
                    is_union: false,
                    fields,
                },
            )]),
            missing_types: vec!["_GONE".into()],
            symbols: BTreeMap::new(),
        };
        let text = ours(&r);
        assert!(text.len() > 3 * (1 << 16), "{}", text.len());
        assert_eq!(text, serde_form(&r));
    }
}
