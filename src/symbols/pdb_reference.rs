//! The reference PDB loader: the `pdb` crate's reading of layouts and global symbols, as
//! etwdump loaded PDBs before its own reader (`super::pdb`). Kept as the oracle the tests,
//! the benchmark and the `pdb_diff` fuzz target compare the crate-free loader with: both give
//! the same [`PdbContents`] wherever this one does not fail. Not used by the tool itself.
//!
//! The type stream is walked once to index every defined structure and union by name
//! (members usually reference forward declarations, which are resolved by name); then the
//! requested structures, and those they embed by value, are converted into the layout model.
//! Global addresses come from the publics (S_PUB32, what Microsoft's public PDBs have) and
//! global data records (S_GDATA32), mapped to RVAs through the PDB's section map.

use super::layout::{Field, LayoutSource, StructLayout, TypeRef, TypeStore};
use super::{PdbIdentity, SymbolError};
use pdb::{FallibleIterator, PrimitiveKind, TypeData, TypeFinder, TypeIndex};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::path::Path;

/// Most structures converted for one request (a kernel's `_KPRCB` closure is a few hundred).
const MAX_TYPES: usize = 20_000;
/// Deepest type-reference chain followed (pointer to array of modifier of ...).
const MAX_DEPTH: u32 = 32;

pub use super::pdb::PdbContents;

fn bad(path: &Path, e: impl std::fmt::Display) -> SymbolError {
    SymbolError::BadPdb {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// Read `wanted` structures (and what they embed) and all global symbols from a PDB.
///
/// The `pdb` crate trusts the sizes in the file and can panic on a damaged type record, so the
/// container is checked first (`msf::check`) and a panic inside the crate is contained
/// here and reported as a bad PDB naming the file (its message is not printed).
pub fn load(path: &Path, wanted: &[&str]) -> Result<PdbContents, SymbolError> {
    let io = |e| SymbolError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    super::msf::check(&mut file, len).map_err(|why| bad(path, why))?;
    load_contained(path, file, wanted)
}

/// [`load`] on the bytes of a PDB held in memory (same checks, same containment, same
/// result); `name` stands for the file: in errors, and its file name in the identity.
pub fn load_bytes(name: &Path, bytes: &[u8], wanted: &[&str]) -> Result<PdbContents, SymbolError> {
    let mut source = std::io::Cursor::new(bytes);
    super::msf::check(&mut source, bytes.len() as u64).map_err(|why| bad(name, why))?;
    load_contained(name, source, wanted)
}

/// The `pdb` crate's part of [`load`] / [`load_bytes`], its panics contained.
fn load_contained<'s, S: pdb::Source<'s> + 's>(
    path: &Path,
    source: S,
    wanted: &[&str],
) -> Result<PdbContents, SymbolError> {
    match contained(|| load_checked(path, source, wanted)) {
        Ok(r) => r,
        Err(msg) => Err(bad(
            path,
            format!("the pdb crate failed on this file ({msg}); the PDB is damaged"),
        )),
    }
}

use super::pdb::contained;

fn load_checked<'s, S: pdb::Source<'s> + 's>(
    path: &Path,
    source: S,
    wanted: &[&str],
) -> Result<PdbContents, SymbolError> {
    let mut pdb = pdb::PDB::open(source).map_err(|e| bad(path, e))?;
    let info = pdb.pdb_information().map_err(|e| bad(path, e))?;
    let dbi = pdb.debug_information().map_err(|e| bad(path, e))?;
    let machine = dbi.machine_type().ok().map(|m| m as u16);
    // The DBI age is the one the image's CodeView record carries.
    let age = dbi.age().unwrap_or(info.age);
    let name = crate::text::Untrusted::new(
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let identity = PdbIdentity::from_guid_bytes(name, info.guid.as_bytes(), age, true);
    let pointer_size = match machine {
        Some(0x14C) | Some(0x1C4) => 4,
        _ => 8,
    };

    let types = read_types(path, &mut pdb, wanted, pointer_size)?;
    let symbols = read_symbols(path, &mut pdb, pointer_size == 4)?;
    Ok(PdbContents {
        identity,
        pointer_size,
        machine,
        types,
        symbols,
    })
}

/// Leaf kinds of the records the scan parses (pdb crate `tpi::constants`): LF_CLASS,
/// LF_CLASS_ST, LF_STRUCTURE, LF_STRUCTURE_ST, LF_INTERFACE, LF_STRUCTURE19, LF_UNION,
/// LF_UNION_ST, LF_ENUM, LF_ENUM_ST.
const NAMED_TYPE_KINDS: &[u16] = &[
    pdb_kinds::LF_CLASS,
    pdb_kinds::LF_CLASS_ST,
    pdb_kinds::LF_STRUCTURE,
    pdb_kinds::LF_STRUCTURE_ST,
    pdb_kinds::LF_INTERFACE,
    pdb_kinds::LF_STRUCTURE19,
    pdb_kinds::LF_UNION,
    pdb_kinds::LF_UNION_ST,
    pdb_kinds::LF_ENUM,
    pdb_kinds::LF_ENUM_ST,
];

/// CodeView leaf kinds (cvinfo.h).
mod pdb_kinds {
    pub(crate) const LF_ARGLIST: u16 = 0x1201;
    pub(crate) const LF_CLASS: u16 = 0x1504;
    pub(crate) const LF_STRUCTURE: u16 = 0x1505;
    pub(crate) const LF_UNION: u16 = 0x1506;
    pub const LF_ENUM: u16 = 0x1507;
    pub(crate) const LF_INTERFACE: u16 = 0x1519;
    pub(crate) const LF_CLASS_ST: u16 = 0x1004;
    pub(crate) const LF_STRUCTURE_ST: u16 = 0x1005;
    pub(crate) const LF_UNION_ST: u16 = 0x1006;
    pub(crate) const LF_ENUM_ST: u16 = 0x1007;
    pub(crate) const LF_STRUCTURE19: u16 = 0x1609;
}

fn read_types<'s, S: pdb::Source<'s> + 's>(
    path: &Path,
    pdb: &mut pdb::PDB<'s, S>,
    wanted: &[&str],
    pointer_size: u64,
) -> Result<TypeStore, SymbolError> {
    let ti = pdb.type_information().map_err(|e| bad(path, e))?;
    let mut finder = ti.finder();
    // Names as the type stream holds them (no copy per record), hashed with foldhash: a large
    // PDB has tens of thousands of structures, and SipHash and a String per name were a quarter
    // of the load (issue 30 item 4). foldhash's quality hasher is seeded per process, so a
    // crafted PDB cannot choose colliding names.
    // Sized for the type stream (about one record in four is a named aggregate), bounded: the
    // count is the file's word.
    let mut defs: Defs<'_> =
        Defs::with_capacity_and_hasher((ti.len() / 4).min(1 << 18), Default::default());
    // Wanted enumeration name -> its field list.
    let mut enum_lists: HashMap<String, TypeIndex> = HashMap::new();
    let mut iter = ti.iter();
    while let Some(t) = iter.next().map_err(|e| bad(path, e))? {
        finder.update(&iter);
        // Only structures, unions and enumerations are parsed in this scan: other records
        // (argument lists above all) can make the `pdb` crate reserve memory for a count taken
        // from the file before reading anything (fuzz finding 4: one dword, 16 GiB).
        if !NAMED_TYPE_KINDS.contains(&t.raw_kind()) {
            continue;
        }
        let (name, fwd) = match t.parse() {
            Ok(TypeData::Class(c)) => (c.name, c.properties.forward_reference()),
            Ok(TypeData::Union(u)) => (u.name, u.properties.forward_reference()),
            Ok(TypeData::Enumeration(e)) => {
                let n = e.name.to_string();
                if !e.properties.forward_reference() && super::WANTED_ENUMS.contains(&&*n) {
                    enum_lists.entry(n.into_owned()).or_insert(e.fields);
                }
                continue;
            }
            _ => continue,
        };
        if !fwd {
            defs.entry(name.as_bytes()).or_insert(t.index());
        }
    }
    let mut conv = Converter {
        finder: &finder,
        defs: &defs,
        pointer_size,
        anonymous: HashMap::new(),
    };
    let mut store = TypeStore::default();
    let mut queue: VecDeque<(String, TypeIndex)> = wanted
        .iter()
        .filter_map(|w| defs.get(w.as_bytes()).map(|&i| (w.to_string(), i)))
        .collect();
    let mut done = HashSet::new();
    while let Some((name, idx)) = queue.pop_front() {
        if !done.insert(name.clone()) || done.len() > MAX_TYPES {
            continue;
        }
        let (layout, embedded) = conv.structure(&name, idx).map_err(|e| bad(path, e))?;
        store.insert(layout);
        queue.extend(embedded);
    }
    for (name, fields) in enum_lists {
        let constants = enum_constants(&finder, fields).map_err(|e| bad(path, e))?;
        store.insert_enum(&name, constants);
    }
    Ok(store)
}

/// The constants of an enumeration's field list (and its continuations; bounded).
fn enum_constants(finder: &TypeFinder<'_>, fields: TypeIndex) -> pdb::Result<Vec<(String, i64)>> {
    use pdb::Variant;
    let mut out = Vec::new();
    let mut next = Some(fields);
    let mut seen = HashSet::new();
    while let Some(fl) = next.filter(|&i| seen.insert(i) && seen.len() < 64) {
        next = None;
        if let TypeData::FieldList(list) = finder.find(fl)?.parse()? {
            for f in &list.fields {
                if let TypeData::Enumerate(e) = f {
                    let v = match e.value {
                        Variant::U8(v) => i64::from(v),
                        Variant::U16(v) => i64::from(v),
                        Variant::U32(v) => i64::from(v),
                        Variant::U64(v) => v as i64,
                        Variant::I8(v) => i64::from(v),
                        Variant::I16(v) => i64::from(v),
                        Variant::I32(v) => i64::from(v),
                        Variant::I64(v) => v,
                    };
                    out.push((e.name.to_string().into_owned(), v));
                }
            }
            next = list.continuation;
        }
    }
    Ok(out)
}

/// Structure and union definitions by name (the type stream's bytes).
type Defs<'t> = HashMap<&'t [u8], TypeIndex, foldhash::quality::RandomState>;

struct Converter<'a, 't> {
    finder: &'a TypeFinder<'t>,
    defs: &'a Defs<'t>,
    pointer_size: u64,
    /// Unnamed nested types get a synthetic name from their type index.
    anonymous: HashMap<TypeIndex, String>,
}

/// MSVC names anonymous aggregates `<unnamed-tag>` / `<anonymous-tag>` (many types share the
/// name); those get a unique synthetic name. Other names are kept as the PDB has them.
fn is_unnamed(name: &str) -> bool {
    name.is_empty() || name.contains("<unnamed-") || name.contains("<anonymous-")
}

impl<'t> Converter<'_, 't> {
    fn parse(&self, idx: TypeIndex) -> pdb::Result<TypeData<'t>> {
        let item = self.finder.find(idx)?;
        // An argument list is never needed, and the `pdb` crate reserves memory for its count
        // before reading it: a member whose type index names one (crafted) would reserve up to
        // 16 GiB (fuzz finding 8; finding 4 was the same record reached by the scan).
        if item.raw_kind() == pdb_kinds::LF_ARGLIST {
            return Err(pdb::Error::UnimplementedTypeKind(pdb_kinds::LF_ARGLIST));
        }
        item.parse()
    }

    /// The definition of a structure or union named like `idx` (which may be a forward
    /// reference).
    fn definition(&self, idx: TypeIndex) -> TypeIndex {
        match self.parse(idx) {
            Ok(TypeData::Class(c)) if c.properties.forward_reference() => {
                self.defs.get(c.name.as_bytes()).copied().unwrap_or(idx)
            }
            Ok(TypeData::Union(u)) if u.properties.forward_reference() => {
                self.defs.get(u.name.as_bytes()).copied().unwrap_or(idx)
            }
            _ => idx,
        }
    }

    /// Convert one structure; also returns the structures it embeds by value.
    fn structure(
        &mut self,
        name: &str,
        idx: TypeIndex,
    ) -> pdb::Result<(StructLayout, Vec<(String, TypeIndex)>)> {
        let (size, is_union, fields_idx) = match self.parse(idx)? {
            TypeData::Class(c) => (c.size, false, c.fields),
            TypeData::Union(u) => (u.size, true, Some(u.fields)),
            _ => (0, false, None),
        };
        let mut layout = StructLayout::new(name, size, LayoutSource::Pdb);
        layout.is_union = is_union;
        let mut embedded = Vec::new();
        let mut next = fields_idx;
        let mut seen_lists = HashSet::new();
        while let Some(fl) = next {
            if !seen_lists.insert(fl) {
                break;
            }
            next = None;
            if let TypeData::FieldList(list) = self.parse(fl)? {
                for f in &list.fields {
                    if let TypeData::Member(m) = f {
                        let ty = self.type_ref(m.field_type, 0, &mut embedded)?;
                        layout.fields.push(Field {
                            name: m.name.to_string().into_owned().into(),
                            offset: m.offset,
                            ty,
                        });
                    }
                }
                next = list.continuation;
            }
        }
        layout.normalize();
        Ok((layout, embedded))
    }

    fn aggregate_name(&mut self, raw: &str, idx: TypeIndex) -> String {
        if is_unnamed(raw) {
            let def = self.definition(idx);
            self.anonymous
                .entry(def)
                .or_insert_with(|| format!("<unnamed-{:#x}>", def.0))
                .clone()
        } else {
            raw.to_string()
        }
    }

    /// Convert a type reference. Structures embedded by value are pushed on `embedded`.
    fn type_ref(
        &mut self,
        idx: TypeIndex,
        depth: u32,
        embedded: &mut Vec<(String, TypeIndex)>,
    ) -> pdb::Result<TypeRef> {
        if depth > MAX_DEPTH {
            return Ok(TypeRef::Void);
        }
        Ok(match self.parse(idx)? {
            TypeData::Primitive(p) => {
                let base = primitive(p.kind);
                if p.indirection.is_some() {
                    TypeRef::Pointer {
                        target: Box::new(base),
                    }
                } else {
                    base
                }
            }
            TypeData::Pointer(p) => {
                // Do not queue the pointee: pointers do not need its layout.
                let mut no_embed = Vec::new();
                TypeRef::Pointer {
                    target: Box::new(self.type_ref(p.underlying_type, depth + 1, &mut no_embed)?),
                }
            }
            TypeData::Modifier(m) => self.type_ref(m.underlying_type, depth + 1, embedded)?,
            TypeData::Array(a) => {
                let element = self.type_ref(a.element_type, depth + 1, embedded)?;
                let elem_size = self.size_of(a.element_type, depth + 1)?.max(1);
                let mut t = element;
                // Dimensions are cumulative byte sizes, innermost first.
                let mut inner = elem_size;
                for &d in &a.dimensions {
                    let count = u64::from(d) / inner.max(1);
                    t = TypeRef::Array {
                        element: Box::new(t),
                        count,
                    };
                    inner = u64::from(d).max(1);
                }
                t
            }
            TypeData::Class(c) => {
                let name = self.aggregate_name(&c.name.to_string(), idx);
                embedded.push((name.clone(), self.definition(idx)));
                TypeRef::Struct { name: name.into() }
            }
            TypeData::Union(u) => {
                let name = self.aggregate_name(&u.name.to_string(), idx);
                embedded.push((name.clone(), self.definition(idx)));
                TypeRef::Union { name: name.into() }
            }
            TypeData::Enumeration(e) => TypeRef::Enum {
                name: e.name.to_string().into_owned().into(),
                size: self.size_of(e.underlying_type, depth + 1)?,
            },
            TypeData::Bitfield(b) => TypeRef::Bitfield {
                base: Box::new(self.type_ref(b.underlying_type, depth + 1, embedded)?),
                position: u32::from(b.position),
                length: u32::from(b.length),
            },
            TypeData::Procedure(_) | TypeData::MemberFunction(_) => TypeRef::Function,
            _ => TypeRef::Void,
        })
    }

    /// Size in bytes of a type.
    fn size_of(&self, idx: TypeIndex, depth: u32) -> pdb::Result<u64> {
        if depth > MAX_DEPTH {
            return Ok(0);
        }
        Ok(match self.parse(idx)? {
            TypeData::Primitive(p) => {
                if p.indirection.is_some() {
                    self.pointer_size
                } else {
                    primitive_size(p.kind)
                }
            }
            TypeData::Pointer(p) => u64::from(p.attributes.size()).max(1),
            TypeData::Modifier(m) => self.size_of(m.underlying_type, depth + 1)?,
            TypeData::Array(a) => a.dimensions.last().map_or(0, |&d| u64::from(d)),
            TypeData::Class(_) | TypeData::Union(_) => match self.parse(self.definition(idx))? {
                TypeData::Class(c) => c.size,
                TypeData::Union(u) => u.size,
                _ => 0,
            },
            TypeData::Enumeration(e) => self.size_of(e.underlying_type, depth + 1)?,
            TypeData::Bitfield(b) => self.size_of(b.underlying_type, depth + 1)?,
            _ => 0,
        })
    }
}

pub(crate) fn primitive_size(k: PrimitiveKind) -> u64 {
    use PrimitiveKind::*;
    match k {
        Char | UChar | RChar | I8 | U8 | Bool8 => 1,
        WChar | RChar16 | Short | UShort | I16 | U16 | Bool16 | F16 => 2,
        RChar32 | Long | ULong | I32 | U32 | Bool32 | F32 | F32PP | HRESULT => 4,
        Quad | UQuad | I64 | U64 | Bool64 | F64 | Complex32 => 8,
        F48 => 6,
        F80 => 10,
        Octa | UOcta | I128 | U128 | F128 | Complex64 => 16,
        Complex80 => 20,
        Complex128 => 32,
        _ => 0,
    }
}

pub(crate) fn primitive(k: PrimitiveKind) -> TypeRef {
    use PrimitiveKind::*;
    let (name, signed) = match k {
        NoType | Void => return TypeRef::Void,
        Char | RChar => ("char", true),
        UChar => ("unsigned char", false),
        WChar | RChar16 => ("wchar", false),
        RChar32 => ("char32", false),
        I8 => ("signed char", true),
        U8 => ("unsigned char", false),
        Short | I16 => ("short", true),
        UShort | U16 => ("unsigned short", false),
        Long => ("long", true),
        ULong => ("unsigned long", false),
        I32 => ("int", true),
        U32 => ("unsigned int", false),
        Quad | I64 => ("long long", true),
        UQuad | U64 => ("unsigned long long", false),
        Octa | I128 => ("__int128", true),
        UOcta | U128 => ("unsigned __int128", false),
        F16 | F32 | F32PP | F48 | F64 | F80 | F128 => ("float", true),
        Bool8 | Bool16 | Bool32 | Bool64 => ("bool", false),
        HRESULT => ("HRESULT", true),
        _ => ("complex", true),
    };
    TypeRef::Base {
        name: name.into(),
        size: primitive_size(k),
        signed,
    }
}

fn read_symbols<'s, S: pdb::Source<'s> + 's>(
    path: &Path,
    pdb: &mut pdb::PDB<'s, S>,
    x86: bool,
) -> Result<super::SymbolMap, SymbolError> {
    let map = pdb.address_map().map_err(|e| bad(path, e))?;
    let globals = pdb.global_symbols().map_err(|e| bad(path, e))?;
    let mut out = super::SymbolMap::default();
    let mut it = globals.iter();
    while let Some(sym) = it.next().map_err(|e| bad(path, e))? {
        let (name, offset, public) = match sym.parse() {
            Ok(pdb::SymbolData::Public(p)) => (p.name, p.offset, true),
            Ok(pdb::SymbolData::Data(d)) => (d.name, d.offset, false),
            _ => continue,
        };
        let Some(rva) = offset.to_rva(&map) else {
            continue;
        };
        let mut name = name.to_string().into_owned();
        // x86 publics carry the C decoration (a leading underscore); S_GDATA32 names do not.
        if x86 && public {
            if let Some(stripped) = name.strip_prefix('_') {
                name = stripped.to_string();
            }
        }
        out.insert_first(&name, u64::from(rva.0));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use pdb::FallibleIterator;

    /// Every primitive type index (below 0x1000) is named, sized and signed by etwdump's
    /// reader (`codeview`) as the `pdb` crate's `PrimitiveType` was by this loader, and
    /// refused where the crate refused it.
    #[test]
    fn primitives_match_the_crate() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/x64-19041/ntkrnlmp.pdb"
        );
        let mut pdb = pdb::PDB::open(std::fs::File::open(path).unwrap()).unwrap();
        let ti = pdb.type_information().unwrap();
        let mut finder = ti.finder();
        let mut it = ti.iter();
        while it.next().unwrap().is_some() {
            finder.update(&it);
        }
        let mut known = 0;
        for i in 0..0x1000u32 {
            let theirs = finder.find(pdb::TypeIndex(i)).unwrap().parse();
            match (theirs, super::super::codeview::primitive_type(i)) {
                (Ok(pdb::TypeData::Primitive(p)), Some((ty, size, indirect))) => {
                    assert_eq!(super::primitive(p.kind), ty, "{i:#x}");
                    assert_eq!(super::primitive_size(p.kind), size, "{i:#x}");
                    assert_eq!(p.indirection.is_some(), indirect, "{i:#x}");
                    known += 1;
                }
                (Err(_), None) => {}
                (t, o) => panic!("{i:#x}: the crate gave {t:?}, etwdump {o:?}"),
            }
        }
        assert!(known > 300, "{known}");
    }
}
