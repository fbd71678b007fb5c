//! Reading Volatility 3 ISF (Intermediate Symbol Format) files, plain `.json` or `.json.xz`.

use super::layout::{Field, LayoutSource, StructLayout, TypeRef, TypeStore};
use super::{PdbIdentity, SymbolError};
use serde::Deserialize;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::path::Path;

/// Largest decompressed ISF accepted (real kernel ISFs are 6-10 MB).
const MAX_JSON: u64 = 512 << 20;
const MAX_DEPTH: u32 = 32;

#[derive(Deserialize)]
struct Isf {
    metadata: Metadata,
    #[serde(default)]
    base_types: HashMap<String, BaseType>,
    #[serde(default)]
    user_types: HashMap<String, UserType>,
    #[serde(default)]
    enums: HashMap<String, EnumType>,
    #[serde(default)]
    symbols: HashMap<String, IsfSymbol>,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    windows: Option<WindowsMeta>,
}

#[derive(Deserialize)]
struct WindowsMeta {
    pdb: Option<PdbMeta>,
}

#[derive(Deserialize)]
struct PdbMeta {
    #[serde(rename = "GUID")]
    guid: String,
    age: u32,
    database: String,
    machine_type: Option<u32>,
}

#[derive(Deserialize)]
struct BaseType {
    size: u64,
    #[serde(default)]
    signed: bool,
}

#[derive(Deserialize)]
struct UserType {
    kind: String,
    size: u64,
    #[serde(default)]
    fields: HashMap<String, IsfField>,
}

#[derive(Deserialize)]
struct IsfField {
    offset: u64,
    #[serde(rename = "type")]
    ty: IsfType,
}

#[derive(Deserialize)]
struct IsfType {
    kind: String,
    name: Option<String>,
    subtype: Option<Box<IsfType>>,
    count: Option<u64>,
    bit_position: Option<u32>,
    bit_length: Option<u32>,
    #[serde(rename = "type")]
    inner: Option<Box<IsfType>>,
}

#[derive(Deserialize)]
struct EnumType {
    size: u64,
    #[serde(default)]
    constants: HashMap<String, i64>,
}

#[derive(Deserialize)]
struct IsfSymbol {
    address: u64,
}

/// What an ISF gave.
#[derive(Debug)]
pub struct IsfContents {
    pub identity: Option<PdbIdentity>,
    pub pointer_size: u64,
    pub machine: Option<u16>,
    pub types: TypeStore,
    pub symbols: super::SymbolMap,
}

/// Read `wanted` structures (and what they embed) and all symbols from an ISF file.
pub fn load(path: &Path, wanted: &[&str]) -> Result<IsfContents, SymbolError> {
    let io = |e: std::io::Error| SymbolError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut json = Vec::new();
    let xz = path.extension().is_some_and(|e| e == "xz");
    let reader: Box<dyn Read> = if xz {
        Box::new(xz2::read::XzDecoder::new(file))
    } else {
        Box::new(file)
    };
    reader
        .take(MAX_JSON + 1)
        .read_to_end(&mut json)
        .map_err(|e| SymbolError::BadIsf {
            path: path.to_path_buf(),
            detail: format!("cannot read{}: {e}", if xz { " (xz)" } else { "" }),
        })?;
    if json.len() as u64 > MAX_JSON {
        return Err(SymbolError::BadIsf {
            path: path.to_path_buf(),
            detail: format!("larger than {MAX_JSON} bytes"),
        });
    }
    from_json(path, &json, wanted)
}

/// Parse ISF JSON text.
pub(crate) fn from_json(
    path: &Path,
    json: &[u8],
    wanted: &[&str],
) -> Result<IsfContents, SymbolError> {
    let isf: Isf = serde_json::from_slice(json).map_err(|e| SymbolError::BadIsf {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let pdb = isf.metadata.windows.as_ref().and_then(|w| w.pdb.as_ref());
    let machine = pdb.and_then(|p| p.machine_type).map(|m| m as u16);
    let pointer_size = isf
        .base_types
        .get("pointer")
        .map(|b| b.size)
        .unwrap_or(match machine {
            Some(0x14C) => 4,
            _ => 8,
        });
    let identity = pdb.and_then(|p| PdbIdentity::from_guid_text(&p.database, &p.guid, p.age));
    let mut types = TypeStore::default();
    let mut queue: VecDeque<String> = wanted.iter().map(|s| s.to_string()).collect();
    let mut done = HashSet::new();
    while let Some(name) = queue.pop_front() {
        if !done.insert(name.clone()) {
            continue;
        }
        let Some(ut) = isf.user_types.get(&name) else {
            continue;
        };
        let mut layout = StructLayout::new(&name, ut.size, LayoutSource::Isf);
        layout.is_union = ut.kind == "union";
        for (fname, f) in &ut.fields {
            let ty = convert(&isf, &f.ty, 0, &mut queue);
            layout.fields.push(Field {
                name: fname.as_str().into(),
                offset: f.offset,
                ty,
            });
        }
        types.insert(layout);
    }
    for name in super::WANTED_ENUMS {
        if let Some(e) = isf.enums.get(*name) {
            let mut constants: Vec<(String, i64)> =
                e.constants.iter().map(|(k, v)| (k.clone(), *v)).collect();
            constants.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
            types.insert_enum(name, constants);
        }
    }
    let symbols = isf
        .symbols
        .iter()
        .map(|(k, v)| (k.clone(), v.address))
        .collect();
    Ok(IsfContents {
        identity,
        pointer_size,
        machine,
        types,
        symbols,
    })
}

fn convert(isf: &Isf, t: &IsfType, depth: u32, embedded: &mut VecDeque<String>) -> TypeRef {
    if depth > MAX_DEPTH {
        return TypeRef::Void;
    }
    let name = || t.name.clone().unwrap_or_default();
    match t.kind.as_str() {
        "base" => {
            let n = name();
            if n == "void" {
                return TypeRef::Void;
            }
            let b = isf.base_types.get(&n);
            TypeRef::Base {
                size: b.map_or(0, |b| b.size),
                signed: b.is_some_and(|b| b.signed),
                name: n.into(),
            }
        }
        "pointer" => {
            // Pointees are not queued: a pointer does not need their layout.
            let mut ignore = VecDeque::new();
            TypeRef::Pointer {
                target: Box::new(
                    t.subtype
                        .as_deref()
                        .map_or(TypeRef::Void, |s| convert(isf, s, depth + 1, &mut ignore)),
                ),
            }
        }
        "array" => TypeRef::Array {
            element: Box::new(
                t.subtype
                    .as_deref()
                    .map_or(TypeRef::Void, |s| convert(isf, s, depth + 1, embedded)),
            ),
            count: t.count.unwrap_or(0),
        },
        "struct" | "class" => {
            embedded.push_back(name());
            TypeRef::Struct {
                name: name().into(),
            }
        }
        "union" => {
            embedded.push_back(name());
            TypeRef::Union {
                name: name().into(),
            }
        }
        "enum" => TypeRef::Enum {
            size: isf.enums.get(&name()).map_or(4, |e| e.size),
            name: name().into(),
        },
        "bitfield" => TypeRef::Bitfield {
            base: Box::new(
                t.inner
                    .as_deref()
                    .map_or(TypeRef::Void, |s| convert(isf, s, depth + 1, embedded)),
            ),
            position: t.bit_position.unwrap_or(0),
            length: t.bit_length.unwrap_or(0),
        },
        "function" => TypeRef::Function,
        _ => TypeRef::Void,
    }
}
