//! `etwdump symbols`: the layouts and global symbols a symbol file provides, as the tool
//! reads them (for checking etwdump against other readers of the same file).

use crate::symbols::{PdbIdentity, StructLayout, Symbols, TypeRef};
use crate::text::Untrusted;
use serde::Serialize;
use std::collections::BTreeMap;

/// Where the symbols came from (PDB, ISF, built-in) and the file.
#[derive(Debug, Serialize)]
pub struct SourceInfo {
    pub kind: &'static str,
    pub path: Option<String>,
}

/// A field: its offset and type.
#[derive(Debug, Serialize)]
pub struct FieldInfo {
    pub offset: u64,
    #[serde(rename = "type")]
    pub ty: TypeRef,
}

/// A structure or union as etwdump reads it.
#[derive(Debug, Serialize)]
pub struct TypeInfo {
    pub size: u64,
    pub source: &'static str,
    pub is_union: bool,
    /// Field names as the symbol file gives them (untrusted text).
    pub fields: BTreeMap<Untrusted, FieldInfo>,
}

/// `symbols`: the layouts and global symbols the tool reads from a symbol source.
#[derive(Debug, Serialize)]
pub struct SymbolsReport {
    pub symbol_source: SourceInfo,
    pub pdb: Option<PdbIdentity>,
    pub pointer_size: u64,
    pub types: BTreeMap<String, TypeInfo>,
    /// Types asked for that neither the symbols nor the built-in tables have.
    pub missing_types: Vec<String>,
    /// Global symbol → RVA (names as the symbol file gives them: untrusted text).
    pub symbols: BTreeMap<Untrusted, String>,
}

fn type_info(l: &StructLayout) -> TypeInfo {
    TypeInfo {
        size: l.size,
        source: l.source.name(),
        is_union: l.is_union,
        fields: l
            .fields
            .iter()
            .map(|f| {
                (
                    f.name.clone(),
                    FieldInfo {
                        offset: f.offset,
                        ty: f.ty.clone(),
                    },
                )
            })
            .collect(),
    }
}

/// Build the report for `types` (all global symbols when `all_symbols`, else the ones the
/// tool uses: those [`Globals::Tool`](crate::symbols::Globals::Tool) keeps, so symbols loaded
/// with it give the same report).
pub fn report(sym: &Symbols, types: &[&str], all_symbols: bool) -> SymbolsReport {
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for t in types {
        match sym.layout(t) {
            Some(l) => {
                out.insert(t.to_string(), type_info(l));
            }
            None => missing.push(t.to_string()),
        }
    }
    let symbols = if all_symbols {
        sym.all_symbols()
            .map(|(k, v)| (Untrusted::from(k), format!("{v:#x}")))
            .collect()
    } else {
        crate::symbols::WANTED_SYMBOLS
            .iter()
            .filter_map(|n| sym.rva(n).map(|v| (Untrusted::from(*n), format!("{v:#x}"))))
            .chain(
                sym.all_symbols()
                    .chain(sym.builtin_symbols())
                    .filter(|(k, _)| crate::symbols::is_reg_handle(k))
                    .map(|(k, v)| (Untrusted::from(k), format!("{v:#x}"))),
            )
            .collect()
    };
    SymbolsReport {
        symbol_source: SourceInfo {
            kind: sym.source.kind(),
            path: sym.source.path().map(|p| p.display().to_string()),
        },
        pdb: sym.identity.clone(),
        pointer_size: sym.pointer_size,
        types: out,
        missing_types: missing,
        symbols,
    }
}

/// C-like rendering of a type reference, terminal-safe (the names from the symbol file are
/// shown escaped).
pub(crate) fn type_text(t: &TypeRef) -> String {
    match t {
        TypeRef::Base { name, .. } => name.to_string(),
        TypeRef::Pointer { target } => format!("{}*", type_text(target)),
        TypeRef::Array { element, count } => format!("{}[{count}]", type_text(element)),
        TypeRef::Struct { name } => format!("struct {name}"),
        TypeRef::Union { name } => format!("union {name}"),
        TypeRef::Enum { name, .. } => format!("enum {name}"),
        TypeRef::Bitfield {
            base,
            position,
            length,
        } => format!("{} : {length} (bit {position})", type_text(base)),
        TypeRef::Function => "function".into(),
        TypeRef::Void => "void".into(),
    }
}
