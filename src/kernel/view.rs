//! Typed views: a structure layout laid over kernel memory. Every read names the structure,
//! the field and the address, so a failure says exactly what could not be read.

use crate::addr::VirtAddr;
use crate::mem::{AddressSpace, MemError};
use crate::symbols::{Field, StructLayout, TypeRef};
use crate::text::Untrusted;
use crate::warning::{Warning, WarningKind};
use thiserror::Error;

/// Why a field could not be read through a [`View`]: named by structure and field.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ViewError {
    #[error("{ty} has no field {field} in the layout in use")]
    MissingField { ty: Untrusted, field: String },
    #[error("{ty}.{field} at {va}: {source}")]
    Memory {
        ty: Untrusted,
        field: String,
        va: VirtAddr,
        source: MemError,
    },
    #[error("{ty}.{field} is a {found}, not {wanted}")]
    Shape {
        ty: Untrusted,
        field: String,
        found: String,
        wanted: &'static str,
    },
}

impl ViewError {
    /// The underlying failure is "not in the dump".
    pub fn is_missing(&self) -> bool {
        matches!(self, ViewError::Memory { source, .. } if source.is_missing())
    }

    /// The warning that a field could not be read: unreadable memory, or a field the layout
    /// does not give (not found); with the field, and the address where it was read.
    pub fn warning(&self) -> Warning {
        let (kind, ty, field) = match self {
            ViewError::Memory { ty, field, .. } => (WarningKind::Unreadable, ty, field),
            ViewError::MissingField { ty, field } | ViewError::Shape { ty, field, .. } => {
                (WarningKind::NotFound, ty, field)
            }
        };
        let w = Warning::new(kind, self.to_string()).field(format!("{ty}.{field}"));
        match self {
            ViewError::Memory { va, .. } => w.at(*va),
            _ => w,
        }
    }
}

/// A structure at a virtual address.
#[derive(Clone, Copy, Debug)]
pub struct View<'a, 'd> {
    pub space: &'a AddressSpace<'d>,
    pub layout: &'a StructLayout,
    pub va: VirtAddr,
}

impl<'a, 'd> View<'a, 'd> {
    /// The structure `layout` at `va`.
    pub fn new(space: &'a AddressSpace<'d>, layout: &'a StructLayout, va: VirtAddr) -> Self {
        View { space, layout, va }
    }

    /// The field `name` of the layout, or why not.
    pub fn field(&self, name: &str) -> Result<&'a Field, ViewError> {
        self.layout
            .field(name)
            .ok_or_else(|| ViewError::MissingField {
                ty: self.layout.name.clone(),
                field: name.to_string(),
            })
    }

    /// The layout has the field `name`.
    pub fn has(&self, name: &str) -> bool {
        self.layout.field(name).is_some()
    }

    /// Address of a field.
    pub(crate) fn field_va(&self, name: &str) -> Result<VirtAddr, ViewError> {
        Ok(self.va.offset(self.field(name)?.offset))
    }

    fn mem(&self, field: &str, va: VirtAddr, source: MemError) -> ViewError {
        ViewError::Memory {
            ty: self.layout.name.clone(),
            field: field.to_string(),
            va,
            source,
        }
    }

    fn shape(&self, field: &str, f: &Field, wanted: &'static str) -> ViewError {
        ViewError::Shape {
            ty: self.layout.name.clone(),
            field: field.to_string(),
            found: format!("{:?}", f.ty),
            wanted,
        }
    }

    /// An unsigned integer field of any size 1-8 (enums included), or a bitfield's value.
    pub fn uint(&self, name: &str) -> Result<u64, ViewError> {
        let f = self.field(name)?;
        let va = self.va.offset(f.offset);
        let (size, bits) = match &f.ty {
            TypeRef::Base { size, .. } | TypeRef::Enum { size, .. } => (*size, None),
            TypeRef::Pointer { .. } => (self.space.arch().pointer_size(), None),
            TypeRef::Bitfield {
                base,
                position,
                length,
            } => match base.as_ref() {
                TypeRef::Base { size, .. } | TypeRef::Enum { size, .. } => {
                    (*size, Some((*position, *length)))
                }
                _ => return Err(self.shape(name, f, "an integer")),
            },
            // LARGE_INTEGER and friends: read as a 64-bit integer.
            TypeRef::Union { name: u } if u == "_LARGE_INTEGER" || u == "_ULARGE_INTEGER" => {
                (8, None)
            }
            _ => return Err(self.shape(name, f, "an integer")),
        };
        if !(1..=8).contains(&size) {
            return Err(self.shape(name, f, "an integer of at most 8 bytes"));
        }
        // A bit-field must lie inside its integer (the values come from a symbol file).
        if let Some((pos, len)) = bits {
            if len == 0 || u64::from(pos) + u64::from(len) > size * 8 {
                return Err(self.shape(name, f, "a bit-field inside its integer"));
            }
        }
        let mut b = [0u8; 8];
        self.space
            .read(va, &mut b[..size as usize])
            .map_err(|e| self.mem(name, va, e))?;
        let v = u64::from_le_bytes(b);
        Ok(match bits {
            Some((pos, len)) if len < 64 => (v >> pos) & ((1u64 << len) - 1),
            Some((pos, _)) => v >> pos,
            None => v,
        })
    }

    /// A pointer field (or an integer field used as an address, e.g. EX_FAST_REF's Value).
    pub fn ptr(&self, name: &str) -> Result<VirtAddr, ViewError> {
        let f = self.field(name)?;
        let va = self.va.offset(f.offset);
        self.space.read_ptr(va).map_err(|e| self.mem(name, va, e))
    }

    /// A view of an embedded structure field with `layout`.
    pub fn sub(&self, name: &str, layout: &'a StructLayout) -> Result<View<'a, 'd>, ViewError> {
        Ok(View::new(self.space, layout, self.field_va(name)?))
    }

    /// Raw bytes of a field (`len` bytes from its start).
    pub fn bytes(&self, name: &str, len: usize) -> Result<Vec<u8>, ViewError> {
        let va = self.field_va(name)?;
        self.space
            .read_vec(va, len)
            .map_err(|e| self.mem(name, va, e))
    }
}
