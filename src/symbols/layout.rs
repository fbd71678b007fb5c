//! The layout model: structures as the kernel's symbols describe them.
//!
//! A [`StructLayout`] lists its fields with byte offsets; members of anonymous unions and
//! structures are flattened into the parent, as Windows PDBs present them, so fields may
//! overlap. Field types are [`TypeRef`]s; nested structures are referenced by name and
//! resolved in the [`TypeStore`].

use crate::text::Untrusted;
use serde::Serialize;
use std::collections::HashMap;

/// Where a layout came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayoutSource {
    /// The type records of a PDB.
    Pdb,
    /// A Volatility 3 ISF file.
    Isf,
    /// The tool's hand-written per-version tables.
    Builtin,
    /// The built-in corpus table, for exactly this kernel (its PDB GUID and age).
    #[serde(rename = "builtin-exact")]
    BuiltinExact,
    /// The built-in corpus table, the nearest earlier build's layout (not this kernel's).
    #[serde(rename = "builtin-nearest")]
    BuiltinNearest,
}

impl LayoutSource {
    /// The name as the output shows it.
    pub fn name(self) -> &'static str {
        match self {
            LayoutSource::Pdb => "pdb",
            LayoutSource::Isf => "isf",
            LayoutSource::Builtin => "builtin",
            LayoutSource::BuiltinExact => "builtin-exact",
            LayoutSource::BuiltinNearest => "builtin-nearest",
        }
    }
}

/// The type of a field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TypeRef {
    /// An integer, character, float or other primitive of `size` bytes.
    Base {
        name: Untrusted,
        size: u64,
        signed: bool,
    },
    /// A pointer (size from the architecture); `target` is what it points to.
    Pointer {
        target: Box<TypeRef>,
    },
    /// `count` elements.
    Array {
        element: Box<TypeRef>,
        count: u64,
    },
    Struct {
        name: Untrusted,
    },
    Union {
        name: Untrusted,
    },
    Enum {
        name: Untrusted,
        size: u64,
    },
    /// `length` bits at bit `position` of an integer of `base`'s size.
    Bitfield {
        base: Box<TypeRef>,
        position: u32,
        length: u32,
    },
    Function,
    Void,
}

impl TypeRef {
    /// Shorthand for an unsigned integer of `size` bytes.
    pub fn uint(size: u64) -> TypeRef {
        let name = match size {
            1 => "unsigned char",
            2 => "unsigned short",
            4 => "unsigned long",
            8 => "unsigned long long",
            _ => "unsigned",
        };
        TypeRef::Base {
            name: name.into(),
            size,
            signed: false,
        }
    }

    /// Shorthand for a signed integer of `size` bytes.
    pub fn int(size: u64) -> TypeRef {
        let name = match size {
            1 => "char",
            2 => "short",
            4 => "long",
            8 => "long long",
            _ => "int",
        };
        TypeRef::Base {
            name: name.into(),
            size,
            signed: true,
        }
    }

    /// Shorthand for a pointer to a named structure.
    pub(crate) fn ptr_to(name: &str) -> TypeRef {
        TypeRef::Pointer {
            target: Box::new(TypeRef::Struct { name: name.into() }),
        }
    }

    /// Shorthand for `void *`.
    pub(crate) fn void_ptr() -> TypeRef {
        TypeRef::Pointer {
            target: Box::new(TypeRef::Void),
        }
    }

    /// Shorthand for a named structure.
    pub fn strukt(name: &str) -> TypeRef {
        TypeRef::Struct { name: name.into() }
    }

    /// Size in bytes, given the pointer size and a way to look up aggregate sizes.
    pub fn size(&self, pointer_size: u64, store: &TypeStore) -> Option<u64> {
        match self {
            TypeRef::Base { size, .. } | TypeRef::Enum { size, .. } => Some(*size),
            TypeRef::Pointer { .. } => Some(pointer_size),
            TypeRef::Array { element, count } => {
                element.size(pointer_size, store)?.checked_mul(*count)
            }
            TypeRef::Struct { name } | TypeRef::Union { name } => {
                store.get(name.raw()).map(|s| s.size)
            }
            TypeRef::Bitfield { base, .. } => base.size(pointer_size, store),
            TypeRef::Function | TypeRef::Void => None,
        }
    }

    /// True for pointers.
    pub fn is_pointer(&self) -> bool {
        matches!(self, TypeRef::Pointer { .. })
    }
}

/// One field of a structure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Field {
    pub name: Untrusted,
    pub offset: u64,
    #[serde(rename = "type")]
    pub ty: TypeRef,
}

/// A structure or union.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StructLayout {
    pub name: Untrusted,
    pub size: u64,
    pub is_union: bool,
    /// Sorted by offset (then by name); anonymous members flattened.
    pub fields: Vec<Field>,
    pub source: LayoutSource,
}

impl StructLayout {
    /// An empty structure of `size` bytes.
    pub fn new(name: &str, size: u64, source: LayoutSource) -> StructLayout {
        StructLayout {
            name: name.into(),
            size,
            is_union: false,
            fields: Vec::new(),
            source,
        }
    }

    /// Builder: add a field.
    pub fn with(mut self, name: &str, offset: u64, ty: TypeRef) -> StructLayout {
        self.fields.push(Field {
            name: name.into(),
            offset,
            ty,
        });
        self
    }

    /// The field `name`, if the layout has it.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Sort the fields by offset, then name.
    pub fn normalize(&mut self) {
        self.fields
            .sort_by(|a, b| a.offset.cmp(&b.offset).then_with(|| a.name.cmp(&b.name)));
    }
}

/// Layouts by structure name, and the constants of the wanted enumerations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeStore {
    types: HashMap<String, StructLayout>,
    enums: HashMap<String, Vec<(String, i64)>>,
}

impl TypeStore {
    /// Add (or replace) a structure, its fields sorted.
    pub fn insert(&mut self, mut s: StructLayout) {
        s.normalize();
        self.types.insert(s.name.raw().to_string(), s);
    }

    /// The structure `name`.
    pub fn get(&self, name: &str) -> Option<&StructLayout> {
        self.types.get(name)
    }

    /// Number of structures.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// No structure.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// The structures' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.types.keys().map(String::as_str)
    }

    /// Record an enumeration's constants (name, value), in declaration order.
    pub(crate) fn insert_enum(&mut self, name: &str, constants: Vec<(String, i64)>) {
        self.enums.insert(name.to_string(), constants);
    }

    /// The value of constant `constant` of enumeration `name`.
    pub fn enum_value(&self, name: &str, constant: &str) -> Option<i64> {
        self.enums
            .get(name)?
            .iter()
            .find(|(n, _)| n == constant)
            .map(|(_, v)| *v)
    }

    /// The name of the first constant of enumeration `name` whose value is `value`.
    pub fn enum_name(&self, name: &str, value: i64) -> Option<&str> {
        self.enums
            .get(name)?
            .iter()
            .find(|(_, v)| *v == value)
            .map(|(n, _)| n.as_str())
    }

    /// Whether every structure and enumeration here is in `other`, identical (a PDB read
    /// through its hash stream gives a subset of what a walk gives when a wanted structure is
    /// filed under another hash: `symbols::codeview`).
    pub fn is_subset_of(&self, other: &TypeStore) -> bool {
        self.types
            .iter()
            .all(|(n, t)| other.types.get(n) == Some(t))
            && self
                .enums
                .iter()
                .all(|(n, e)| other.enums.get(n) == Some(e))
    }

    /// Whether enumeration `name` is known.
    pub(crate) fn has_enum(&self, name: &str) -> bool {
        self.enums.contains_key(name)
    }
}
