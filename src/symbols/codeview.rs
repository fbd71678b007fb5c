//! CodeView type records of a PDB's type stream (TPI), read for the layouts etwdump needs.
//!
//! Records are found one of two ways; [`read_pdb_types`] chooses.
//!
//! - **Through the hash stream** the TPI header names ([`TypeStream::index_hashed`]), as a
//!   debugger finds a type by name: each record's stored hash (the name's `hash_v1` modulo the
//!   bucket count, for a definition), chained by hash, and a record offset every few kilobytes
//!   (the index offset buffer), the stretch after it walked when a record in it is first asked
//!   for. Only the records of the wanted structures, what they embed and the wanted
//!   enumerations are read: about 130 KB of the 6.6 MB type stream of an 11 MB PDB.
//!   What is read is checked against the hash stream: each stretch's record lengths must lead
//!   exactly to the next offset, each definition read must be filed under its name's hash, a
//!   forward reference met in a layout must lead to a definition, and at least one wanted
//!   structure must be found by name (evidence that the file hashes as looked up). Anything
//!   else, and the whole stream is walked instead. What this cannot see: a wanted structure
//!   that nothing read embeds, filed under another hash (a damaged or crafted hash value), is
//!   not found, so it is reported unavailable rather than read (debuggers, which look types up
//!   the same way, would not find it either).
//! - **By a walk** ([`TypeStream::index`]) when there is no usable hash stream: one pass over
//!   the stream reading only each record's length (the position of every eighth record, for
//!   lookups by type index) and kind, and, for the named structure, union and enumeration
//!   definitions (not forward references), their head (name): the first definition of each
//!   structure by name, and the field lists of the wanted enumerations.
//!
//! Either way, nothing else is parsed until [`read_types`] converts the requested structures
//! and what they embed, and both give the same layouts for a PDB whose hash stream is as its
//! linker wrote it (tests: every fixture, the large generated PDB, 2,400 damaged copies).
//!
//! The records are parsed as the `pdb` crate 0.8 parsed them (the reference,
//! `super::pdb_reference`): a record the crate refused is refused here, a field list's entries
//! are stepped over by the same grammar (so the same members are found), numeric leaves and
//! names are read the same way. Where the crate failed the whole load (a damaged record a
//! layout needs), this reader fails too, or gives a result; it never panics, and every count
//! and offset from the file is bounded by the record or stream holding it.

use super::layout::{Field, LayoutSource, StructLayout, TypeRef, TypeStore};
use crate::text::Untrusted;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;

/// Most structures converted for one request (a kernel's `_KPRCB` closure is a few hundred).
const MAX_TYPES: usize = 20_000;
/// Deepest type-reference chain followed (pointer to array of modifier of ...).
const MAX_DEPTH: u32 = 32;
/// Field-list continuations followed for one enumeration.
const MAX_ENUM_LISTS: usize = 64;

// CodeView leaf kinds (cvinfo.h).
const LF_MODIFIER: u16 = 0x1001;
const LF_POINTER: u16 = 0x1002;
const LF_ARRAY_ST: u16 = 0x1003;
const LF_CLASS_ST: u16 = 0x1004;
const LF_STRUCTURE_ST: u16 = 0x1005;
const LF_UNION_ST: u16 = 0x1006;
const LF_ENUM_ST: u16 = 0x1007;
const LF_PROCEDURE: u16 = 0x1008;
const LF_MFUNCTION: u16 = 0x1009;
const LF_ARGLIST: u16 = 0x1201;
const LF_FIELDLIST: u16 = 0x1203;
const LF_BITFIELD: u16 = 0x1205;
const LF_METHODLIST: u16 = 0x1206;
const LF_BCLASS: u16 = 0x1400;
const LF_VBCLASS: u16 = 0x1401;
const LF_IVBCLASS: u16 = 0x1402;
const LF_ENUMERATE_ST: u16 = 0x0403;
const LF_INDEX: u16 = 0x1404;
const LF_MEMBER_ST: u16 = 0x1405;
const LF_STMEMBER_ST: u16 = 0x1406;
const LF_METHOD_ST: u16 = 0x1407;
const LF_NESTTYPE_ST: u16 = 0x1408;
const LF_VFUNCTAB: u16 = 0x1409;
const LF_ONEMETHOD_ST: u16 = 0x140b;
const LF_NESTTYPEEX_ST: u16 = 0x140d;
/// Kinds up to this carry length-prefixed names; later ones NUL-terminated names.
const LF_ST_MAX: u16 = 0x1500;
const LF_ENUMERATE: u16 = 0x1502;
const LF_ARRAY: u16 = 0x1503;
const LF_CLASS: u16 = 0x1504;
const LF_STRUCTURE: u16 = 0x1505;
const LF_UNION: u16 = 0x1506;
const LF_ENUM: u16 = 0x1507;
const LF_MEMBER: u16 = 0x150d;
const LF_STMEMBER: u16 = 0x150e;
const LF_METHOD: u16 = 0x150f;
const LF_NESTTYPE: u16 = 0x1510;
const LF_ONEMETHOD: u16 = 0x1511;
const LF_NESTTYPEEX: u16 = 0x1512;
const LF_STRIDED_ARRAY: u16 = 0x1516;
const LF_INTERFACE: u16 = 0x1519;
const LF_BINTERFACE: u16 = 0x151a;
const LF_STRUCTURE19: u16 = 0x1609;
// Numeric leaves.
const LF_NUMERIC: u16 = 0x8000;
const LF_CHAR: u16 = 0x8000;
const LF_SHORT: u16 = 0x8001;
const LF_USHORT: u16 = 0x8002;
const LF_LONG: u16 = 0x8003;
const LF_ULONG: u16 = 0x8004;
const LF_QUADWORD: u16 = 0x8009;
const LF_UQUADWORD: u16 = 0x800a;

/// Property bits of a structure, union or enumeration (CV_prop_t).
const PROP_FORWARD_REF: u16 = 0x0080;
const PROP_UNIQUE_NAME: u16 = 0x0200;

/// A record that does not parse (as the `pdb` crate would have refused it).
#[derive(Debug)]
struct Damaged;

type Parse<T> = Result<T, Damaged>;

/// A little-endian reader over one record's bytes.
struct Buf<'t> {
    b: &'t [u8],
    pos: usize,
}

impl<'t> Buf<'t> {
    fn new(b: &'t [u8]) -> Self {
        Buf { b, pos: 0 }
    }
    fn is_empty(&self) -> bool {
        self.pos >= self.b.len()
    }
    fn take(&mut self, n: usize) -> Parse<&'t [u8]> {
        let end = self.pos.checked_add(n).ok_or(Damaged)?;
        let s = self.b.get(self.pos..end).ok_or(Damaged)?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Parse<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Parse<u16> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Parse<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Parse<u64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
    fn peek_u8(&self) -> Parse<u8> {
        self.b.get(self.pos).copied().ok_or(Damaged)
    }
    fn peek_u16(&self) -> Parse<u16> {
        let s = self.b.get(self.pos..self.pos + 2).ok_or(Damaged)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    /// A name: length-prefixed for the old (`_ST`) kinds, NUL-terminated otherwise.
    fn name(&mut self, leaf: u16) -> Parse<&'t [u8]> {
        let rest = self.b.get(self.pos..).ok_or(Damaged)?;
        let (name, used) = split_name(rest, leaf <= LF_ST_MAX).ok_or(Damaged)?;
        self.pos += used;
        Ok(name)
    }
    /// An unsigned numeric leaf (a size or offset).
    fn unsigned(&mut self) -> Parse<u64> {
        let leaf = self.u16()?;
        if leaf < LF_NUMERIC {
            return Ok(u64::from(leaf));
        }
        match leaf {
            LF_CHAR => Ok(u64::from(self.u8()?)),
            LF_USHORT => Ok(u64::from(self.u16()?)),
            LF_ULONG => Ok(u64::from(self.u32()?)),
            LF_UQUADWORD => self.u64(),
            _ => Err(Damaged),
        }
    }
    /// A numeric leaf of any kind (an enumerator's value), as i64 (unsigned 64-bit values
    /// wrap, as etwdump always converted them).
    fn variant(&mut self) -> Parse<i64> {
        let leaf = self.u16()?;
        if leaf < LF_NUMERIC {
            return Ok(i64::from(leaf));
        }
        Ok(match leaf {
            LF_CHAR => i64::from(self.u8()?),
            LF_SHORT => i64::from(self.u16()? as i16),
            LF_LONG => i64::from(self.u32()? as i32),
            LF_QUADWORD => self.u64()? as i64,
            LF_USHORT => i64::from(self.u16()?),
            LF_ULONG => i64::from(self.u32()?),
            LF_UQUADWORD => self.u64()? as i64,
            _ => return Err(Damaged),
        })
    }
    /// Padding bytes (0xF0-0xFF) between field-list entries.
    fn padding(&mut self) -> Parse<()> {
        while !self.is_empty() && self.peek_u8()? >= 0xf0 {
            let p = self.u8()?;
            if p > 0xf0 {
                self.take(usize::from(p & 0x0f) - 1)?;
            }
        }
        Ok(())
    }
}

/// The name at the start of `b` and the bytes it takes: `pascal`, a length byte then the
/// name; otherwise up to a NUL (which must be there).
fn split_name(b: &[u8], pascal: bool) -> Option<(&[u8], usize)> {
    if pascal {
        let n = usize::from(*b.first()?);
        Some((b.get(1..1 + n)?, 1 + n))
    } else {
        let end = nul_at(b)?;
        Some((&b[..end], end + 1))
    }
}

/// Where the first NUL of `b` is: eight bytes at a time, inline (the names of type and symbol
/// records are a few dozen bytes: a call to `memchr` cost more than the search; issue 30 item 4).
#[inline]
fn nul_at(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = b.chunks_exact(8);
    let mut at = 0;
    for w in &mut words {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        // A zero byte's lowest occurrence sets the lowest flagged bit (borrows only come from
        // a zero byte below, so the first flag is exact).
        let zero = v.wrapping_sub(ONES) & !v & HIGH;
        if zero != 0 {
            return Some(at + (zero.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&c| c == 0)
        .map(|i| at + i)
}

/// The little-endian u16 at `o`, if `b` holds it.
pub(crate) fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    b.get(o..o.checked_add(2)?)
        .map(|x| u16::from_le_bytes([x[0], x[1]]))
}

/// The little-endian u32 at `o`, if `b` holds it.
pub(crate) fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    b.get(o..o.checked_add(4)?)
        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

/// A symbol record's name (see [`split_name`]).
pub(crate) fn record_name(b: &[u8], pascal: bool) -> Option<&[u8]> {
    split_name(b, pascal).map(|(n, _)| n)
}

/// A type, as far as the layouts need it.
enum Ty<'t> {
    /// A primitive type index: (name, size, signed) of the base type (None: void), and
    /// whether the index is a pointer to it.
    Primitive {
        base: Option<(&'static str, u64, bool)>,
        size: u64,
        indirect: bool,
    },
    /// A structure, class, interface or union.
    Aggregate(Aggregate<'t>),
    Enum {
        name: &'t [u8],
        underlying: u32,
    },
    Pointer {
        underlying: u32,
        size: u8,
    },
    Modifier(u32),
    Array {
        element: u32,
        dims: Vec<u32>,
    },
    Bitfield {
        underlying: u32,
        length: u8,
        position: u8,
    },
    Function,
    FieldList(FieldList<'t>),
    /// A kind the layouts do not use.
    Other,
}

struct Aggregate<'t> {
    is_union: bool,
    fwd: bool,
    size: u64,
    name: &'t [u8],
    /// A structure's field list (None for 0 and 0xFFFF); a union's, always.
    fields: Option<u32>,
}

#[derive(Default)]
struct FieldList<'t> {
    members: Vec<(&'t [u8], u32, u64)>,
    enumerates: Vec<(&'t [u8], i64)>,
    continuation: Option<u32>,
}

/// What one field-list entry was.
enum Entry<'t> {
    Member(&'t [u8], u32, u64),
    Enumerate(&'t [u8], i64),
    /// A nested field list: the rest of the buffer belongs to it.
    NestedList,
    Other,
}

fn optional_index(i: u32) -> Option<u32> {
    (i != 0 && i != 0xffff).then_some(i)
}

/// A structure, class or interface record's body (after its kind).
fn parse_class<'t>(buf: &mut Buf<'t>, leaf: u16) -> Parse<Aggregate<'t>> {
    let (props, fields) = if leaf == LF_STRUCTURE19 {
        let props = buf.u32()? as u16;
        let fields = buf.u32()?;
        buf.u32()?; // derived from
        buf.u32()?; // vtable shape
        buf.u16()?; // member count
        (props, fields)
    } else {
        buf.u16()?; // member count
        let props = buf.u16()?;
        let fields = buf.u32()?;
        buf.u32()?;
        buf.u32()?;
        (props, fields)
    };
    let size = buf.unsigned()?;
    let name = buf.name(leaf)?;
    if props & PROP_UNIQUE_NAME != 0 {
        buf.name(leaf)?;
    }
    Ok(Aggregate {
        is_union: false,
        fwd: props & PROP_FORWARD_REF != 0,
        size,
        name,
        fields: optional_index(fields),
    })
}

fn parse_union<'t>(buf: &mut Buf<'t>, leaf: u16) -> Parse<Aggregate<'t>> {
    buf.u16()?;
    let props = buf.u16()?;
    let fields = buf.u32()?;
    let size = buf.unsigned()?;
    let name = buf.name(leaf)?;
    if props & PROP_UNIQUE_NAME != 0 {
        buf.name(leaf)?;
    }
    Ok(Aggregate {
        is_union: true,
        fwd: props & PROP_FORWARD_REF != 0,
        size,
        name,
        fields: Some(fields),
    })
}

fn parse_enum<'t>(buf: &mut Buf<'t>, leaf: u16) -> Parse<Ty<'t>> {
    buf.u16()?;
    let props = buf.u16()?;
    let underlying = buf.u32()?;
    buf.u32()?; // field list (the index pass keeps the wanted enumerations')
    let name = buf.name(leaf)?;
    if props & PROP_UNIQUE_NAME != 0 {
        buf.name(leaf)?;
    }
    Ok(Ty::Enum { name, underlying })
}

fn parse_array<'t>(buf: &mut Buf<'t>, leaf: u16) -> Parse<Ty<'t>> {
    let element = buf.u32()?;
    buf.u32()?; // indexing type
    if leaf == LF_STRIDED_ARRAY {
        buf.u32()?;
    }
    let mut dims = Vec::new();
    loop {
        let d = buf.unsigned()?;
        dims.push(u32::try_from(d).map_err(|_| Damaged)?);
        if buf.is_empty() {
            return Err(Damaged);
        }
        if buf.peek_u8()? == 0 {
            buf.u8()?;
            break;
        }
    }
    buf.padding()?;
    // The array must end its buffer (the crate asserted it).
    if !buf.is_empty() {
        return Err(Damaged);
    }
    Ok(Ty::Array { element, dims })
}

/// One entry of a field list (any record kind may stand there; each is stepped over by its
/// own grammar, as the crate's parser did).
fn parse_entry<'t>(buf: &mut Buf<'t>) -> Parse<Entry<'t>> {
    let leaf = buf.u16()?;
    match leaf {
        LF_MEMBER | LF_MEMBER_ST => {
            buf.u16()?;
            let ty = buf.u32()?;
            let offset = buf.unsigned()?;
            let name = buf.name(leaf)?;
            Ok(Entry::Member(name, ty, offset))
        }
        LF_ENUMERATE | LF_ENUMERATE_ST => {
            buf.u16()?;
            let v = buf.variant()?;
            let name = buf.name(leaf)?;
            Ok(Entry::Enumerate(name, v))
        }
        LF_FIELDLIST => Ok(Entry::NestedList),
        _ => {
            parse_other(buf, leaf)?;
            Ok(Entry::Other)
        }
    }
}

/// Step over a record body of kind `leaf` that the layouts do not use (in a field list, or
/// as a record), failing where the crate's parser failed.
fn parse_other(buf: &mut Buf<'_>, leaf: u16) -> Parse<()> {
    match leaf {
        LF_CLASS | LF_CLASS_ST | LF_STRUCTURE | LF_STRUCTURE_ST | LF_INTERFACE | LF_STRUCTURE19 => {
            parse_class(buf, leaf)?;
        }
        LF_UNION | LF_UNION_ST => {
            parse_union(buf, leaf)?;
        }
        LF_ENUM | LF_ENUM_ST => {
            parse_enum(buf, leaf)?;
        }
        LF_ARRAY | LF_ARRAY_ST | LF_STRIDED_ARRAY => {
            parse_array(buf, leaf)?;
        }
        LF_NESTTYPE | LF_NESTTYPE_ST | LF_NESTTYPEEX | LF_NESTTYPEEX_ST => {
            buf.u16()?;
            buf.u32()?;
            buf.name(leaf)?;
        }
        LF_MFUNCTION => {
            buf.take(4 + 4 + 4 + 2 + 2 + 4 + 4)?;
        }
        LF_METHOD | LF_METHOD_ST | LF_STMEMBER | LF_STMEMBER_ST => {
            buf.u16()?;
            buf.u32()?;
            buf.name(leaf)?;
        }
        LF_ONEMETHOD | LF_ONEMETHOD_ST => {
            let attr = buf.u16()?;
            buf.u32()?;
            if matches!((attr & 0x1c) >> 2, 4 | 6) {
                buf.u32()?;
            }
            buf.name(leaf)?;
        }
        LF_BCLASS | LF_BINTERFACE => {
            buf.u16()?;
            buf.u32()?;
            buf.unsigned()?;
        }
        LF_VFUNCTAB => {
            buf.u16()?;
            buf.u32()?;
        }
        LF_POINTER => {
            buf.u32()?;
            let attr = buf.u32()?;
            if matches!((attr >> 5) & 7, 2 | 3) {
                buf.u32()?;
            }
        }
        LF_PROCEDURE => {
            buf.take(4 + 2 + 2 + 4)?;
        }
        LF_MODIFIER => {
            buf.take(4 + 2)?;
        }
        LF_BITFIELD => {
            buf.take(4 + 1 + 1)?;
        }
        LF_VBCLASS | LF_IVBCLASS => {
            buf.u16()?;
            buf.u32()?;
            buf.u32()?;
            buf.unsigned()?;
            buf.unsigned()?;
        }
        LF_ARGLIST => {
            let n = buf.u32()? as usize;
            buf.take(n.checked_mul(4).ok_or(Damaged)?)?;
        }
        LF_METHODLIST => {
            while !buf.is_empty() {
                let attr = buf.u16()?;
                buf.u16()?;
                buf.u32()?;
                if matches!((attr & 0x1c) >> 2, 4 | 6) {
                    buf.u32()?;
                }
            }
        }
        _ => return Err(Damaged),
    }
    Ok(())
}

/// A field list record's body: its members, enumerators and continuation. A nested field
/// list (the crate parsed it recursively and kept none of its entries) is stepped over.
fn parse_field_list<'t>(buf: &mut Buf<'t>) -> Parse<FieldList<'t>> {
    let mut list = FieldList::default();
    let mut nested = false;
    while !buf.is_empty() {
        if buf.peek_u16()? == LF_INDEX {
            buf.u16()?;
            let next = buf.u32()?;
            if !nested {
                list.continuation = Some(next);
            }
        } else {
            match parse_entry(buf)? {
                Entry::Member(name, ty, offset) if !nested => list.members.push((name, ty, offset)),
                Entry::Enumerate(name, v) if !nested => list.enumerates.push((name, v)),
                Entry::NestedList => nested = true,
                _ => {}
            }
        }
        buf.padding()?;
    }
    Ok(list)
}

/// Parse one type record (its bytes after the length: kind, then body).
fn parse_record(data: &[u8]) -> Parse<Ty<'_>> {
    let mut buf = Buf::new(data);
    let leaf = buf.u16()?;
    Ok(match leaf {
        LF_CLASS | LF_CLASS_ST | LF_STRUCTURE | LF_STRUCTURE_ST | LF_INTERFACE | LF_STRUCTURE19 => {
            Ty::Aggregate(parse_class(&mut buf, leaf)?)
        }
        LF_UNION | LF_UNION_ST => Ty::Aggregate(parse_union(&mut buf, leaf)?),
        LF_ENUM | LF_ENUM_ST => parse_enum(&mut buf, leaf)?,
        LF_POINTER => {
            let underlying = buf.u32()?;
            let attr = buf.u32()?;
            if matches!((attr >> 5) & 7, 2 | 3) {
                buf.u32()?;
            }
            let size = match ((attr >> 13) & 0x3f) as u8 {
                0 => match attr & 0x1f {
                    0x0a | 0x0b => 4,
                    0x0c => 8,
                    _ => 0,
                },
                s => s,
            };
            Ty::Pointer { underlying, size }
        }
        LF_MODIFIER => {
            let underlying = buf.u32()?;
            buf.u16()?;
            Ty::Modifier(underlying)
        }
        LF_ARRAY | LF_ARRAY_ST | LF_STRIDED_ARRAY => parse_array(&mut buf, leaf)?,
        LF_BITFIELD => Ty::Bitfield {
            underlying: buf.u32()?,
            length: buf.u8()?,
            position: buf.u8()?,
        },
        LF_PROCEDURE | LF_MFUNCTION => {
            parse_other(&mut buf, leaf)?;
            Ty::Function
        }
        LF_FIELDLIST => Ty::FieldList(parse_field_list(&mut buf)?),
        _ => Ty::Other,
    })
}

/// A primitive type index (below 0x1000): the crate's `PrimitiveKind`, as etwdump named and
/// sized it. None: not a primitive the crate knew (it failed on those).
fn primitive(index: u32) -> Option<Ty<'static>> {
    let indirect = match index & 0xf00 {
        0x000 => false,
        0x100..=0x700 => true,
        _ => return None,
    };
    let (name, size, signed) = match index & 0xff {
        0x00 | 0x03 => ("", 0, false),
        0x08 => ("HRESULT", 4, true),
        0x10 | 0x70 => ("char", 1, true),
        0x20 | 0x69 => ("unsigned char", 1, false),
        0x68 => ("signed char", 1, true),
        0x71 | 0x7a => ("wchar", 2, false),
        0x7b => ("char32", 4, false),
        0x11 | 0x72 => ("short", 2, true),
        0x21 | 0x73 => ("unsigned short", 2, false),
        0x12 => ("long", 4, true),
        0x22 => ("unsigned long", 4, false),
        0x74 => ("int", 4, true),
        0x75 => ("unsigned int", 4, false),
        0x13 | 0x76 => ("long long", 8, true),
        0x23 | 0x77 => ("unsigned long long", 8, false),
        0x14 | 0x78 => ("__int128", 16, true),
        0x24 | 0x79 => ("unsigned __int128", 16, false),
        0x46 => ("float", 2, true),
        0x40 | 0x45 => ("float", 4, true),
        0x44 => ("float", 6, true),
        0x41 => ("float", 8, true),
        0x42 => ("float", 10, true),
        0x43 => ("float", 16, true),
        0x50 => ("complex", 8, true),
        0x51 => ("complex", 16, true),
        0x52 => ("complex", 20, true),
        0x53 => ("complex", 32, true),
        0x30 => ("bool", 1, false),
        0x31 => ("bool", 2, false),
        0x32 => ("bool", 4, false),
        0x33 => ("bool", 8, false),
        _ => return None,
    };
    Some(Ty::Primitive {
        base: (!name.is_empty()).then_some((name, size, signed)),
        size,
        indirect,
    })
}

/// What the index pass keeps of a record: a structure or union definition's name, or an
/// enumeration definition's name and field list.
enum Head<'t> {
    Aggregate(&'t [u8]),
    Enum(&'t [u8], u32),
}

/// Whether [`head`] may give something for `data` (kind, then body): false for kinds other than
/// the structures, unions and enumerations, and for their forward references (the first test
/// of [`head`], inline).
#[inline(always)]
fn may_have_head(data: &[u8]) -> bool {
    let (Some(&k0), Some(&k1)) = (data.first(), data.get(1)) else {
        return false;
    };
    let props_at = match u16::from_le_bytes([k0, k1]) {
        LF_CLASS | LF_CLASS_ST | LF_STRUCTURE | LF_STRUCTURE_ST | LF_INTERFACE | LF_UNION
        | LF_UNION_ST | LF_ENUM | LF_ENUM_ST => 4,
        LF_STRUCTURE19 => 2,
        _ => return false,
    };
    match (data.get(props_at), data.get(props_at + 1)) {
        (Some(&p0), Some(&p1)) => u16::from_le_bytes([p0, p1]) & PROP_FORWARD_REF == 0,
        _ => false,
    }
}

/// A structure, union or enumeration definition (not a forward reference) as far as its
/// name: its kind, properties, name and where the name ends (`data`: kind, then body). None for
/// other kinds, forward references, and records the crate's parser refused before the name.
#[inline]
fn definition_name(data: &[u8]) -> Option<(u16, u16, &[u8], usize)> {
    let kind = u16::from_le_bytes([*data.first()?, *data.get(1)?]);
    // Offsets (from the kind) of the properties, the field list and the size leaf (the name
    // for an enumeration).
    let (props_at, after) = match kind {
        LF_CLASS | LF_CLASS_ST | LF_STRUCTURE | LF_STRUCTURE_ST | LF_INTERFACE => (4, 18),
        LF_STRUCTURE19 => (2, 20),
        LF_UNION | LF_UNION_ST => (4, 10),
        LF_ENUM | LF_ENUM_ST => (4, 14),
        _ => return None,
    };
    let props = u16::from_le_bytes([*data.get(props_at)?, *data.get(props_at + 1)?]);
    if props & PROP_FORWARD_REF != 0 {
        return None;
    }
    let mut buf = Buf::new(data);
    buf.pos = after;
    if !matches!(kind, LF_ENUM | LF_ENUM_ST) {
        buf.unsigned().ok()?;
    }
    let name = buf.name(kind).ok()?;
    Some((kind, props, name, buf.pos))
}

/// The head of a named structure, union or enumeration definition (`data`: kind, then body),
/// read without building the record: None for other kinds, forward references, and records
/// the crate's parser refused (the same conditions as [`parse_class`], [`parse_union`] and
/// [`parse_enum`]; a unique name only has to be there, so it is not walked).
#[inline]
fn head(data: &[u8]) -> Option<Head<'_>> {
    let (kind, props, name, end) = definition_name(data)?;
    let is_enum = matches!(kind, LF_ENUM | LF_ENUM_ST);
    if is_enum && !super::WANTED_ENUMS.iter().any(|w| w.as_bytes() == name) {
        return None;
    }
    if props & PROP_UNIQUE_NAME != 0 {
        let rest = data.get(end..)?;
        let ok = if kind <= LF_ST_MAX {
            rest.len() > usize::from(*rest.first()?)
        } else {
            nul_at(rest).is_some()
        };
        if !ok {
            return None;
        }
    }
    Some(if is_enum {
        Head::Enum(name, u32_at(data, 10)?)
    } else {
        Head::Aggregate(name)
    })
}

/// A primitive type index as the layouts show it: the type, its size and whether the index is
/// a pointer to it (None: not a primitive); for `pdb_reference`'s test against the crate.
#[cfg(test)]
pub(crate) fn primitive_type(index: u32) -> Option<(TypeRef, u64, bool)> {
    match primitive(index)? {
        Ty::Primitive {
            base,
            size,
            indirect,
        } => Some((
            match base {
                None => TypeRef::Void,
                Some((name, size, signed)) => TypeRef::Base {
                    name: name.into(),
                    size,
                    signed,
                },
            },
            size,
            indirect,
        )),
        _ => None,
    }
}

/// Structure and union definitions by name: a table of their type indexes only (4 bytes an
/// entry, where a slice and an index took 24: a kernel's 40,000 definitions then fit a core's
/// cache), the names compared where they lie in the stream (found again through the record's
/// offset, only when the hashes' tags agree). foldhash-hashed: seeded per process, so a
/// crafted PDB cannot choose colliding names.
#[derive(Default)]
struct Defs {
    table: hashbrown::HashTable<u32>,
    hasher: foldhash::quality::RandomState,
}

/// The index pass keeps the offset of every `STRIDE`-th record; a record is found from the
/// offset kept before it by stepping over at most `STRIDE - 1` record lengths (checked by the
/// index pass). A table of every offset took 4 bytes a record (574 KB for a kernel's 143,561
/// records: page faults and stores that cost more than the steps; docs/performance.md).
const STRIDE: usize = 8;

/// Where the index pass's records are: the stream, its first type index, the offset of every
/// `STRIDE`-th record, and how many records there are.
#[derive(Clone, Copy)]
struct Records<'a, 't> {
    stream: &'t [u8],
    min: u32,
    marks: &'a [u32],
    count: usize,
}

impl<'t> Records<'_, 't> {
    /// The bytes of record `idx` after its length (kind, then body).
    fn data(&self, idx: u32) -> Option<&'t [u8]> {
        let i = idx.checked_sub(self.min)? as usize;
        if i >= self.count {
            return None;
        }
        let mut at = *self.marks.get(i / STRIDE)? as usize;
        for _ in 0..i % STRIDE {
            at = at.checked_add(2 + usize::from(u16_at(self.stream, at)?))?;
        }
        record_at(self.stream, at)
    }

    /// The name of definition `idx` (empty if it is none, which [`Defs`] never holds).
    fn def_name(&self, idx: u32) -> &'t [u8] {
        match self.data(idx).and_then(head) {
            Some(Head::Aggregate(name)) => name,
            _ => &[],
        }
    }
}

impl Defs {
    /// Record definition `index` of `name` unless one is known (`index` is the last record
    /// of `records`).
    fn insert_first(&mut self, records: Records<'_, '_>, name: &[u8], index: u32) {
        let hash = self.hasher.hash_one(name);
        let hasher = &self.hasher;
        if let hashbrown::hash_table::Entry::Vacant(v) = self.table.entry(
            hash,
            |&e| records.def_name(e) == name,
            |&e| hasher.hash_one(records.def_name(e)),
        ) {
            v.insert(index);
        }
    }

    fn get(&self, records: Records<'_, '_>, name: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(name);
        self.table
            .find(hash, |&e| records.def_name(e) == name)
            .copied()
    }
}

/// A type stream, indexed: where each record is, the first definition of each structure or
/// union by name, and the wanted enumerations' field lists.
pub(crate) struct TypeStream<'t> {
    stream: &'t [u8],
    min: u32,
    max: u32,
    /// Offset of every `STRIDE`-th record's length field (record `index - min` is found from
    /// entry `(index - min) / STRIDE`).
    marks: Vec<u32>,
    /// How many records the stream holds.
    count: usize,
    defs: Defs,
    /// Wanted enumeration name → its field list (first definition).
    enums: Vec<(&'t str, u32)>,
    /// Records found through the PDB's TPI hash stream instead (`marks`, `count` and `defs`
    /// are then empty: the stream was not walked).
    hashed: Option<HashIndex<'t>>,
}

impl<'t> TypeStream<'t> {
    /// Index the type stream `stream` (header and records). Fails where a record's length
    /// breaks the chain (the crate's walk failed there too).
    pub(crate) fn index(stream: &'t [u8]) -> Result<TypeStream<'t>, String> {
        if stream.is_empty() {
            return Ok(TypeStream {
                stream,
                min: 0,
                max: 0,
                marks: Vec::new(),
                count: 0,
                defs: Defs::default(),
                enums: Vec::new(),
                hashed: None,
            });
        }
        let (header_size, min, max) = tpi_header(stream)?;
        // At most one record per 4 bytes (a length and a kind).
        let claimed = ((max - min) as usize).min(stream.len() / 4);
        let mut marks = Vec::with_capacity(claimed / STRIDE + 1);
        let mut count = 0usize;
        // About one definition per 3.5 records in a kernel PDB: room for one per 3 (no
        // rehash, which would find every name again).
        let mut defs = Defs {
            table: hashbrown::HashTable::with_capacity(claimed / 3),
            hasher: Default::default(),
        };
        let mut enums: Vec<(&'t str, u32)> = Vec::new();
        let mut pos = header_size;
        let mut index = min;
        while pos < stream.len() {
            let len = u16_at(stream, pos).ok_or("the type records end inside a record's length")?
                as usize;
            if len < 2 {
                return Err(format!("type record {index:#x} of {len} bytes"));
            }
            let data = stream
                .get(pos + 2..pos + 2 + len)
                .ok_or_else(|| format!("type record {index:#x} runs past the stream's end"))?;
            if count % STRIDE == 0 {
                marks.push(pos as u32);
            }
            count += 1;
            pos += 2 + len;
            // Most records are not named definitions: their kind (and a forward reference's
            // properties) are looked at here, before `head` is called.
            match may_have_head(data).then(|| head(data)).flatten() {
                Some(Head::Aggregate(name)) => {
                    let records = Records {
                        stream,
                        min,
                        marks: &marks,
                        count,
                    };
                    defs.insert_first(records, name, index);
                }
                Some(Head::Enum(name, fields)) => {
                    if let Some(w) = super::WANTED_ENUMS.iter().find(|w| w.as_bytes() == name) {
                        if !enums.iter().any(|(n, _)| n == w) {
                            enums.push((w, fields));
                        }
                    }
                }
                None => {}
            }
            // Past u32::MAX the crate's index wrapped (and its debug build failed): stop.
            index = index
                .checked_add(1)
                .ok_or("more type records than type indices")?;
        }
        Ok(TypeStream {
            stream,
            min,
            max,
            marks,
            count,
            defs,
            enums,
            hashed: None,
        })
    }

    /// The record of type index `idx` (primitives below the stream's first index).
    fn parse(&self, idx: u32) -> Parse<Ty<'t>> {
        if idx < self.min {
            // The crate parsed the two bytes FF FF (no such kind) above 0x1000.
            return if idx < 0x1000 {
                primitive(idx).ok_or(Damaged)
            } else {
                Err(Damaged)
            };
        }
        if idx > self.max {
            return Err(Damaged);
        }
        let data = match &self.hashed {
            Some(h) => h.data(self.stream, idx - self.min).ok_or(Damaged)?,
            None => self.records().data(idx).ok_or(Damaged)?,
        };
        parse_record(data)
    }

    fn records(&self) -> Records<'_, 't> {
        Records {
            stream: self.stream,
            min: self.min,
            marks: &self.marks,
            count: self.count,
        }
    }

    /// The first definition of the structure or union `name`.
    fn definition_of(&self, name: &[u8]) -> Option<u32> {
        match &self.hashed {
            Some(h) => h
                .first(
                    self.stream,
                    name,
                    |d| matches!(head(d), Some(Head::Aggregate(n)) if n == name),
                )
                .map(|r| r + self.min),
            None => self.defs.get(self.records(), name),
        }
    }

    /// [`definition_of`](Self::definition_of) for a forward reference met in a layout: through
    /// the hash stream, none found contradicts it (a compiler refers by value only to a
    /// structure it has defined, and a pointer's target is not looked up), so the whole stream
    /// is walked instead.
    fn definition_of_forward(&self, name: &[u8]) -> Option<u32> {
        let found = self.definition_of(name);
        if let (None, Some(h)) = (found, &self.hashed) {
            h.contradicted.set(true);
        }
        found
    }

    /// Index the type stream `stream` through its hash stream `hash` (the TPI header's hash
    /// value and index offset buffers): no record is read until asked for. None when the hash
    /// stream is absent or not what the header describes, or the header is refused (then
    /// [`index`](Self::index) is the way, with its errors).
    pub(crate) fn index_hashed(stream: &'t [u8], hash: &'t [u8]) -> Option<TypeStream<'t>> {
        let (header_size, min, max) = tpi_header(stream).ok()?;
        let hashed = HashIndex::new(stream, header_size, (max - min) as usize, hash)?;
        let mut ts = TypeStream {
            stream,
            min,
            max,
            marks: Vec::new(),
            count: 0,
            defs: Defs::default(),
            enums: Vec::new(),
            hashed: Some(hashed),
        };
        let h = ts.hashed.as_ref()?;
        for &w in super::WANTED_ENUMS {
            let mut fields = None;
            h.first(stream, w.as_bytes(), |d| match head(d) {
                Some(Head::Enum(n, f)) if n == w.as_bytes() => {
                    fields = Some(f);
                    true
                }
                _ => false,
            });
            if let Some(f) = fields {
                ts.enums.push((w, f));
            }
        }
        Some(ts)
    }

    /// Whether the records read so far agree with the hash stream they were found by (always
    /// true for a walked stream). When false, what was read through it must be read again
    /// from a walk of the whole stream.
    pub(crate) fn consistent(&self) -> bool {
        self.hashed.as_ref().is_none_or(|h| !h.contradicted.get())
    }
}

/// The bytes (kind, then body) of the record whose length field is at `at` of `stream`.
fn record_at(stream: &[u8], at: usize) -> Option<&[u8]> {
    let len = usize::from(u16_at(stream, at)?);
    stream.get(at.checked_add(2)?..at.checked_add(2 + len)?)
}

/// The TPI header's size and type-index range, refused as the crate refused them.
fn tpi_header(stream: &[u8]) -> Result<(usize, u32, u32), String> {
    let u32_at = |o| u32_at(stream, o).unwrap_or(0);
    if stream.len() < 56 {
        return Err(format!("TPI stream of {} bytes", stream.len()));
    }
    let (header_size, min, max) = (u32_at(4) as usize, u32_at(8), u32_at(12));
    if !(56..=1024).contains(&header_size) || header_size > stream.len() {
        return Err(format!("TPI HeaderSize {header_size}"));
    }
    if min < 0x1000 || max < min {
        return Err(format!("TPI type indices {min:#x}..{max:#x}"));
    }
    Ok((header_size, min, max))
}

/// Most hash buckets a TPI header may claim (LLVM's `MaxTpiHashBuckets`; Microsoft's linker
/// and lld write 0x3FFFF).
const MAX_HASH_BUCKETS: u32 = 0x40000;
/// Most records of a type stream read through its hash stream (the chains take 4 bytes a
/// record; a kernel PDB has about 150,000, the largest PDBs a few million); a larger stream is
/// walked instead.
const MAX_HASHED_RECORDS: usize = 1 << 24;
/// Most records of one stored hash read for a lookup (a kernel PDB's largest is a few: a
/// name's forward references and definition, and other records in its bucket).
const MAX_CANDIDATES: usize = 1024;
/// CV_prop_t: a scoped (function-local or nested) definition, hashed by its unique name.
const PROP_SCOPED: u16 = 0x0100;

/// The name hash of a PDB's hash tables (Microsoft's `LHashPbCb`, LLVM's `hashStringV1`):
/// the name's little-endian 32-bit words XORed, then a 16-bit and an 8-bit tail, folded with
/// a case-insensitive mask. A type record's hash is this modulo the header's bucket count.
pub(crate) fn hash_v1(name: &[u8]) -> u32 {
    let mut words = name.chunks_exact(4);
    let mut h = 0u32;
    for w in &mut words {
        h ^= u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
    }
    let rest = words.remainder();
    let mut tail = rest;
    if tail.len() >= 2 {
        h ^= u32::from(u16::from_le_bytes([tail[0], tail[1]]));
        tail = &tail[2..];
    }
    if let Some(&b) = tail.first() {
        h ^= u32::from(b);
    }
    h |= 0x2020_2020;
    h ^= h >> 11;
    h ^ (h >> 16)
}

/// Whether a definition's hash is that of its name (Microsoft's tpi.cpp `hashPrec`, LLVM's
/// `getHashForUdt`): not scoped, and not anonymous with a unique name (those are hashed by
/// their unique name or whole record, so no lookup by name finds them).
fn hashed_by_name(props: u16, name: &[u8]) -> bool {
    let anonymous = [&b"<unnamed-tag>"[..], b"__unnamed"].iter().any(|a| {
        name == *a || (name.ends_with(a) && name[..name.len() - a.len()].ends_with(b"::"))
    });
    props & PROP_SCOPED == 0 && !(props & PROP_UNIQUE_NAME != 0 && anonymous)
}

/// A type stream's records found through its hash stream, as a debugger finds them: each
/// record's hash (one 32-bit value per record, the hash value buffer) chained by bucket, and
/// the offset of a record every few kilobytes (the index offset buffer). A stretch between two
/// such offsets is walked (its record lengths must lead from one to the next) the first time a
/// record in it is asked for; every definition read is checked against its stored hash. Any
/// disagreement sets `contradicted`, and the caller walks the whole stream instead.
struct HashIndex<'t> {
    values: &'t [u8],
    buckets: u32,
    /// Per chain (a power of two of them, chosen by a stored hash's low bits): 1 + its first
    /// record in stream order; 0: none.
    first: Vec<u32>,
    /// Per record: 1 + the next record of its chain; 0: none.
    next: Vec<u32>,
    /// Where each stretch starts: (record number, offset in the stream), both increasing; the
    /// first is (0, the header's size), the last ends at the stream's end.
    stretches: Vec<(u32, u32)>,
    /// Each stretch's record offsets once walked (None: its lengths do not lead to the next).
    walked: Vec<std::cell::OnceCell<Option<Box<[u32]>>>>,
    count: usize,
    contradicted: std::cell::Cell<bool>,
}

impl<'t> HashIndex<'t> {
    /// The hash stream `hash` of type stream `stream` (records from `header_size`, `count` of
    /// them), checked as far as it can be without reading the records.
    fn new(stream: &'t [u8], header_size: usize, count: usize, hash: &'t [u8]) -> Option<Self> {
        let field = |o| u32_at(stream, o);
        let (key_size, buckets) = (field(24)?, field(28)?);
        let span = |o: usize| -> Option<&'t [u8]> {
            let (at, len) = (field(o)? as usize, field(o + 4)? as usize);
            hash.get(at..at.checked_add(len)?)
        };
        let (values, offsets) = (span(32)?, span(40)?);
        if key_size != 4
            || !(1..=MAX_HASH_BUCKETS).contains(&buckets)
            || values.len() != count.checked_mul(4)?
            || count > stream.len() / 4
            || count > MAX_HASHED_RECORDS
            || offsets.len() % 8 != 0
        {
            return None;
        }
        let record_bytes = stream.len() - header_size;
        let mut stretches = vec![(0u32, header_size as u32)];
        for pair in offsets.chunks_exact(8) {
            let (ti, off) = (u32_at(pair, 0)?, u32_at(pair, 4)? as usize);
            let (rec, at) = (ti.checked_sub(field(8)?)?, header_size.checked_add(off)?);
            if rec == 0 && off == 0 {
                continue;
            }
            let &(last_rec, last_at) = stretches.last()?;
            if rec <= last_rec
                || at <= last_at as usize
                || rec as usize >= count
                || off >= record_bytes
            {
                return None;
            }
            stretches.push((rec, u32::try_from(at).ok()?));
        }
        // Chains by the stored hash's low bits (a table of about one entry per 8 records, so
        // it stays in a core's cache; a chain's records are told apart by their stored hash).
        // Both tables are written before they are read (`resize`, not `vec![0; n]`): memory
        // the allocator takes fresh from the system would otherwise be read first, mapping the
        // shared zero page, then written, each page faulting twice and its TLB entry flushed
        // on every CPU running the process (the global symbols' thread: an interrupt to it a
        // page).
        #[allow(clippy::slow_vector_initialization)] // the write is the point (above)
        let zeroed = |n: usize| {
            let mut v = Vec::with_capacity(n);
            v.resize(n, 0u32);
            v
        };
        let mut first = zeroed((count / 8).next_power_of_two());
        let mask = first.len() - 1;
        let mut next = zeroed(count);
        for (r, v) in values.chunks_exact(4).enumerate().rev() {
            let b = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
            if b >= buckets {
                return None;
            }
            let slot = &mut first[b as usize & mask];
            next[r] = *slot;
            *slot = r as u32 + 1;
        }
        let walked = stretches.iter().map(|_| Default::default()).collect();
        Some(HashIndex {
            values,
            buckets,
            first,
            next,
            stretches,
            walked,
            count,
            contradicted: Default::default(),
        })
    }

    /// The record offsets of stretch `k`, walked once (None: its lengths do not lead exactly
    /// to the next stretch, or the stream's end).
    fn stretch(&self, stream: &[u8], k: usize) -> Option<&[u32]> {
        let walked = self.walked.get(k)?.get_or_init(|| {
            let (rec, at) = self.stretches[k];
            let (end_rec, end_at) = match self.stretches.get(k + 1) {
                Some(&(r, a)) => (r as usize, a as usize),
                None => (self.count, stream.len()),
            };
            let n = end_rec - rec as usize;
            let mut at = at as usize;
            if n > (end_at - at) / 4 {
                return None;
            }
            let mut offsets = Vec::with_capacity(n);
            for _ in 0..n {
                let len = usize::from(u16_at(stream, at)?);
                if len < 2 || at + 2 + len > end_at {
                    return None;
                }
                offsets.push(at as u32);
                at += 2 + len;
            }
            (at == end_at).then(|| offsets.into_boxed_slice())
        });
        if walked.is_none() {
            self.contradicted.set(true);
        }
        walked.as_deref()
    }

    /// The bytes of record `r` (kind, then body); a definition among them is checked against
    /// its stored hash.
    fn data(&self, stream: &'t [u8], r: u32) -> Option<&'t [u8]> {
        if r as usize >= self.count {
            return None;
        }
        let k = self.stretches.partition_point(|&(first, _)| first <= r) - 1;
        let at = *self
            .stretch(stream, k)?
            .get((r - self.stretches[k].0) as usize)? as usize;
        let data = record_at(stream, at)?;
        if let Some((_, props, name, _)) =
            may_have_head(data).then(|| definition_name(data)).flatten()
        {
            if hashed_by_name(props, name)
                && u32_at(self.values, r as usize * 4) != Some(hash_v1(name) % self.buckets)
            {
                self.contradicted.set(true);
            }
        }
        Some(data)
    }

    /// The first record (in stream order) of those hashed like `name` that `is` accepts. A name
    /// no definition is hashed by (an anonymous one) cannot be looked up: that contradicts.
    fn first(
        &self,
        stream: &'t [u8],
        name: &[u8],
        mut is: impl FnMut(&[u8]) -> bool,
    ) -> Option<u32> {
        if !hashed_by_name(PROP_UNIQUE_NAME, name) {
            self.contradicted.set(true);
            return None;
        }
        let h = hash_v1(name) % self.buckets;
        let mut at = self.first[h as usize & (self.first.len() - 1)];
        let mut candidates = 0;
        while let Some(r) = at.checked_sub(1) {
            if u32_at(self.values, r as usize * 4) == Some(h) {
                candidates += 1;
                if candidates > MAX_CANDIDATES {
                    // Not a hash table's spread: every lookup would read as many records.
                    self.contradicted.set(true);
                    return None;
                }
                if self.data(stream, r).is_some_and(&mut is) {
                    return Some(r);
                }
            }
            at = self.next[r as usize];
        }
        None
    }
}

/// The layouts of the `wanted` structures (and those they embed by value) and the wanted
/// enumerations' constants from type stream `tpi`: through its hash stream `hash` when there is
/// one and the records read agree with it, else from a walk of the whole stream.
pub(crate) fn read_pdb_types(
    tpi: &[u8],
    hash: Option<&[u8]>,
    wanted: &[&str],
    pointer_size: u64,
) -> Result<TypeStore, String> {
    if let Some(ts) = hash.and_then(|h| TypeStream::index_hashed(tpi, h)) {
        let types = read_types(&ts, wanted, pointer_size);
        // A structure found by its name's hash shows the file's hash function is the one
        // looked up with; none found (a writer's other function, or values left zero) says
        // nothing of what is there.
        let found = types
            .as_ref()
            .is_ok_and(|t| wanted.iter().any(|w| t.get(w).is_some()));
        if ts.consistent() && found {
            return types;
        }
    }
    TypeStream::index(tpi).and_then(|ts| read_types(&ts, wanted, pointer_size))
}

/// Convert the `wanted` structures (and those they embed by value) and the wanted
/// enumerations' constants.
pub(crate) fn read_types(
    ts: &TypeStream<'_>,
    wanted: &[&str],
    pointer_size: u64,
) -> Result<TypeStore, String> {
    let damaged = |what: &str| format!("a type record of {what} is damaged");
    let mut conv = Converter {
        ts,
        pointer_size,
        anonymous: HashMap::new(),
    };
    let mut store = TypeStore::default();
    let mut queue: VecDeque<(String, u32)> = wanted
        .iter()
        .filter_map(|w| ts.definition_of(w.as_bytes()).map(|i| (w.to_string(), i)))
        .collect();
    let mut done = HashSet::new();
    while let Some((name, idx)) = queue.pop_front() {
        if !done.insert(name.clone()) || done.len() > MAX_TYPES {
            continue;
        }
        let (layout, embedded) = conv.structure(&name, idx).map_err(|_| damaged(&name))?;
        store.insert(layout);
        queue.extend(embedded);
    }
    for &(name, fields) in &ts.enums {
        let constants = enum_constants(ts, fields).map_err(|_| damaged(name))?;
        store.insert_enum(name, constants);
    }
    Ok(store)
}

/// The constants of an enumeration's field list (and its continuations; bounded).
fn enum_constants(ts: &TypeStream<'_>, fields: u32) -> Parse<Vec<(String, i64)>> {
    let mut out = Vec::new();
    let mut next = Some(fields);
    let mut seen = HashSet::new();
    while let Some(fl) = next.filter(|&i| seen.insert(i) && seen.len() < MAX_ENUM_LISTS) {
        next = None;
        if let Ty::FieldList(list) = ts.parse(fl)? {
            for (name, v) in list.enumerates {
                out.push((lossy(name), v));
            }
            next = list.continuation;
        }
    }
    Ok(out)
}

struct Converter<'a, 't> {
    ts: &'a TypeStream<'t>,
    pointer_size: u64,
    /// Unnamed nested types get a synthetic name from their type index.
    anonymous: HashMap<u32, String>,
}

/// MSVC names anonymous aggregates `<unnamed-tag>` / `<anonymous-tag>` (many types share the
/// name); those get a unique synthetic name. Other names are kept as the PDB has them.
fn is_unnamed(name: &str) -> bool {
    name.is_empty() || name.contains("<unnamed-") || name.contains("<anonymous-")
}

fn lossy(b: &[u8]) -> String {
    Untrusted::from_utf8_lossy(b).into_raw()
}

impl Converter<'_, '_> {
    /// The definition of a structure or union named like `idx` (which may be a forward
    /// reference).
    fn definition(&self, idx: u32) -> u32 {
        match self.ts.parse(idx) {
            Ok(Ty::Aggregate(a)) if a.fwd => self.ts.definition_of_forward(a.name).unwrap_or(idx),
            _ => idx,
        }
    }

    /// Convert one structure; also returns the structures it embeds by value.
    fn structure(&mut self, name: &str, idx: u32) -> Parse<(StructLayout, Vec<(String, u32)>)> {
        let (size, is_union, fields) = match self.ts.parse(idx)? {
            Ty::Aggregate(a) => (a.size, a.is_union, a.fields),
            _ => (0, false, None),
        };
        let mut layout = StructLayout::new(name, size, LayoutSource::Pdb);
        layout.is_union = is_union;
        let mut embedded = Vec::new();
        let mut next = fields;
        let mut seen_lists = HashSet::new();
        while let Some(fl) = next {
            if !seen_lists.insert(fl) {
                break;
            }
            next = None;
            if let Ty::FieldList(list) = self.ts.parse(fl)? {
                for (field, ty, offset) in list.members {
                    let ty = self.type_ref(ty, 0, Some(&mut embedded))?;
                    layout.fields.push(Field {
                        name: Untrusted::from_utf8_lossy(field),
                        offset,
                        ty,
                    });
                }
                next = list.continuation;
            }
        }
        layout.normalize();
        Ok((layout, embedded))
    }

    fn aggregate_name(&mut self, raw: &[u8], idx: u32) -> String {
        let raw = lossy(raw);
        if is_unnamed(&raw) {
            let def = self.definition(idx);
            self.anonymous
                .entry(def)
                .or_insert_with(|| format!("<unnamed-{def:#x}>"))
                .clone()
        } else {
            raw
        }
    }

    /// Convert a type reference. Structures embedded by value are pushed on `embedded` (None
    /// behind a pointer: a pointee's layout is not needed, nor its definition looked up).
    fn type_ref(
        &mut self,
        idx: u32,
        depth: u32,
        mut embedded: Option<&mut Vec<(String, u32)>>,
    ) -> Parse<TypeRef> {
        if depth > MAX_DEPTH {
            return Ok(TypeRef::Void);
        }
        Ok(match self.ts.parse(idx)? {
            Ty::Primitive { base, indirect, .. } => {
                let base = match base {
                    None => TypeRef::Void,
                    Some((name, size, signed)) => TypeRef::Base {
                        name: name.into(),
                        size,
                        signed,
                    },
                };
                if indirect {
                    TypeRef::Pointer {
                        target: Box::new(base),
                    }
                } else {
                    base
                }
            }
            Ty::Pointer { underlying, .. } => {
                // Do not queue the pointee: pointers do not need its layout.
                TypeRef::Pointer {
                    target: Box::new(self.type_ref(underlying, depth + 1, None)?),
                }
            }
            Ty::Modifier(underlying) => self.type_ref(underlying, depth + 1, embedded)?,
            Ty::Array { element, dims } => {
                let mut t = self.type_ref(element, depth + 1, embedded.as_deref_mut())?;
                let elem_size = self.size_of(element, depth + 1)?.max(1);
                // Dimensions are cumulative byte sizes, innermost first.
                let mut inner = elem_size;
                for d in dims {
                    let count = u64::from(d) / inner.max(1);
                    t = TypeRef::Array {
                        element: Box::new(t),
                        count,
                    };
                    inner = u64::from(d).max(1);
                }
                t
            }
            Ty::Aggregate(a) => {
                let name = self.aggregate_name(a.name, idx);
                if let Some(embedded) = embedded {
                    embedded.push((name.clone(), self.definition(idx)));
                }
                if a.is_union {
                    TypeRef::Union { name: name.into() }
                } else {
                    TypeRef::Struct { name: name.into() }
                }
            }
            Ty::Enum {
                name, underlying, ..
            } => TypeRef::Enum {
                name: lossy(name).into(),
                size: self.size_of(underlying, depth + 1)?,
            },
            Ty::Bitfield {
                underlying,
                length,
                position,
            } => TypeRef::Bitfield {
                base: Box::new(self.type_ref(underlying, depth + 1, embedded)?),
                position: u32::from(position),
                length: u32::from(length),
            },
            Ty::Function => TypeRef::Function,
            Ty::FieldList(_) | Ty::Other => TypeRef::Void,
        })
    }

    /// Size in bytes of a type.
    fn size_of(&self, idx: u32, depth: u32) -> Parse<u64> {
        if depth > MAX_DEPTH {
            return Ok(0);
        }
        Ok(match self.ts.parse(idx)? {
            Ty::Primitive { size, indirect, .. } => {
                if indirect {
                    self.pointer_size
                } else {
                    size
                }
            }
            Ty::Pointer { size, .. } => u64::from(size).max(1),
            Ty::Modifier(underlying) => self.size_of(underlying, depth + 1)?,
            Ty::Array { dims, .. } => dims.last().map_or(0, |&d| u64::from(d)),
            Ty::Aggregate(_) => match self.ts.parse(self.definition(idx))? {
                Ty::Aggregate(a) => a.size,
                _ => 0,
            },
            Ty::Enum { underlying, .. } => self.size_of(underlying, depth + 1)?,
            Ty::Bitfield { underlying, .. } => self.size_of(underlying, depth + 1)?,
            _ => 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nul_at` is the first NUL, for every position and neighbouring bytes that borrow.
    #[test]
    fn nul_at_is_the_first_nul() {
        for len in 0..=20usize {
            for pos in 0..=len {
                for fill in [0x01u8, 0x80, 0xff, b'a'] {
                    let mut v = vec![fill; len];
                    if pos < len {
                        v[pos] = 0;
                        if pos + 1 < len {
                            v[pos + 1] = 0;
                        }
                    }
                    assert_eq!(nul_at(&v), v.iter().position(|&c| c == 0), "{v:?}");
                }
            }
        }
    }

    /// A fixture PDB's type stream and hash stream (copied out of their blocks).
    fn streams_of(path: &str) -> (Vec<u8>, Vec<u8>) {
        let file = std::fs::read(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let streams = super::super::msf::Streams::open(&file).unwrap();
        let tpi = streams.get(2).unwrap().unwrap().into_owned();
        let n = usize::from(u16_at(&tpi, 20).unwrap());
        let hash = streams.get(n).unwrap().unwrap().into_owned();
        (tpi, hash)
    }

    const FIXTURES: &[&str] = &[
        "tests/fixtures/x64-7601/ntkrnlmp.pdb",
        "tests/fixtures/x64-19041/ntkrnlmp.pdb",
        "tests/fixtures/x64-26100/ntkrnlmp.pdb",
        "tests/fixtures/x86-14393/ntkrpamp.pdb",
    ];

    /// The linker's stored hash of every definition hashed by name is `hash_v1` of the name
    /// modulo the bucket count: the rule `HashIndex` looks definitions up by, on PDBs a real
    /// linker wrote (hundreds of definitions each).
    #[test]
    fn stored_hashes_are_hash_v1_of_the_names() {
        for path in FIXTURES {
            let (tpi, hash) = streams_of(path);
            let ts = TypeStream::index(&tpi).unwrap();
            let buckets = u32_at(&tpi, 28).unwrap();
            let values = &hash[u32_at(&tpi, 32).unwrap() as usize..];
            let mut checked = 0;
            for r in 0..ts.count as u32 {
                let data = ts.records().data(ts.min + r).unwrap();
                if let Some((_, props, name, _)) = definition_name(data) {
                    if hashed_by_name(props, name) {
                        assert_eq!(
                            u32_at(values, r as usize * 4),
                            Some(hash_v1(name) % buckets),
                            "{path}: {}",
                            String::from_utf8_lossy(name)
                        );
                        checked += 1;
                    }
                }
            }
            assert!(checked > 70, "{path}: {checked}");
        }
        // Known values (the word, half-word and byte tails; the case mask).
        let h = |x: u32| {
            let x = x | 0x2020_2020;
            let x = x ^ (x >> 11);
            x ^ (x >> 16)
        };
        assert_eq!(hash_v1(b""), h(0));
        assert_eq!(h(0), 0x2024_0400);
        assert_eq!(hash_v1(b"a"), h(0x61));
        assert_eq!(hash_v1(b"abc"), h(0x6261 ^ 0x63));
        assert_eq!(hash_v1(b"abcdef"), h(0x6463_6261 ^ 0x6665));
        assert_eq!(hash_v1(b"ABCD"), hash_v1(b"abcd"));
    }

    /// Read through the hash stream, every fixture gives the layouts and enumerations a walk
    /// of the whole stream gives, without falling back to the walk; with the index offsets or
    /// a stored hash of a definition it reads damaged, it notices and the walk gives them.
    #[test]
    fn hashed_lookups_match_the_walk_and_fall_back_on_contradiction() {
        let wanted = super::super::WANTED_TYPES;
        for path in FIXTURES {
            let (tpi, hash) = streams_of(path);
            let walked = read_types(&TypeStream::index(&tpi).unwrap(), wanted, 8).unwrap();
            assert!(walked.names().count() > 20, "{path}");
            let ts = TypeStream::index_hashed(&tpi, &hash).unwrap();
            assert_eq!(ts.count, 0, "{path}: the stream was walked");
            assert_eq!(ts.enums, TypeStream::index(&tpi).unwrap().enums, "{path}");
            let hashed = read_types(&ts, wanted, 8).unwrap();
            assert!(ts.consistent(), "{path}");
            assert!(hashed == walked, "{path}");
            let touched = ts.hashed.as_ref().unwrap().walked.iter();
            let touched = touched.filter(|w| w.get().is_some()).count();
            println!(
                "{path}: {touched} of {} stretches walked",
                ts.hashed.as_ref().unwrap().walked.len()
            );

            // `bad` (a damaged hash stream) contradicts what is read, and the walk gives the
            // layouts.
            let falls_back = |bad: &[u8], what: &str| {
                let ts = TypeStream::index_hashed(&tpi, bad).unwrap();
                let _ = read_types(&ts, wanted, 8);
                assert!(!ts.consistent(), "{path}: {what}");
                let types = read_pdb_types(&tpi, Some(bad), wanted, 8).unwrap();
                assert!(types == walked, "{path}: {what}");
            };
            // An index offset moved by two bytes: its stretch's lengths no longer lead to it.
            let mut bad = hash.clone();
            let io = u32_at(&tpi, 40).unwrap() as usize;
            let off = u32_at(&bad, io + 12).unwrap();
            bad[io + 12..io + 16].copy_from_slice(&(off + 2).to_le_bytes());
            falls_back(&bad, "moved offset");

            // A stored hash of a definition changed: a wanted structure another embeds by value.
            // Its name's chain no longer leads to it, and reading the member (through a
            // forward reference found nowhere, or the definition itself, whose stored hash is
            // checked) contradicts the hash stream: the walk gives the layouts.
            let values = u32_at(&tpi, 32).unwrap() as usize;
            let buckets = u32_at(&tpi, 28).unwrap();
            let w = TypeStream::index(&tpi).unwrap();
            let damaged = |name: &[u8]| {
                let def = w.definition_of(name).unwrap() - w.min;
                let mut bad = hash.clone();
                let at = values + def as usize * 4;
                let other = (u32_at(&bad, at).unwrap() + 1) % buckets;
                bad[at..at + 4].copy_from_slice(&other.to_le_bytes());
                bad
            };
            let inner = walked
                .names()
                .flat_map(|n| &walked.get(n).unwrap().fields)
                .find_map(|f| match &f.ty {
                    TypeRef::Struct { name } if wanted.contains(&name.raw()) => Some(name.raw()),
                    _ => None,
                })
                .unwrap();
            falls_back(&damaged(inner.as_bytes()), inner);
            // One that nothing read embeds (the logger context) is not found by its name, as a
            // debugger looking it up by name would not find it (nor what only it embeds): every
            // layout given is the walk's.
            let bad = damaged(b"_WMI_LOGGER_CONTEXT");
            let ts = TypeStream::index_hashed(&tpi, &bad).unwrap();
            let types = read_types(&ts, wanted, 8).unwrap();
            assert!(ts.consistent(), "{path}");
            assert!(types.get("_WMI_LOGGER_CONTEXT").is_none(), "{path}");
            assert!(types.get("_KPRCB").is_some(), "{path}");
            for n in types.names() {
                assert_eq!(types.get(n), walked.get(n), "{path}: {n}");
            }
            // Hash values all zero (a writer that does not hash): nothing is found by name, so
            // the walk gives the layouts; two thousand records under one hash: the walk too.
            let mut bad = hash.clone();
            let n = w.count;
            bad[values..values + n * 4].fill(0);
            let ts = TypeStream::index_hashed(&tpi, &bad).unwrap();
            assert!(
                read_types(&ts, wanted, 8).unwrap().names().count() == 0,
                "{path}"
            );
            assert!(
                read_pdb_types(&tpi, Some(&bad), wanted, 8).unwrap() == walked,
                "{path}"
            );
            let h = hash_v1(b"_KPRCB") % buckets;
            for v in bad[values..values + n * 4].chunks_exact_mut(4) {
                v.copy_from_slice(&h.to_le_bytes());
            }
            falls_back(&bad, "one hash for all");
            // Hash values out of range, a key size other than 4, a short value buffer: the
            // hash stream is not used.
            let mut bad = hash.clone();
            bad[values..values + 4].copy_from_slice(&buckets.to_le_bytes());
            assert!(TypeStream::index_hashed(&tpi, &bad).is_none(), "{path}");
            let mut t = tpi.clone();
            t[24] = 2;
            assert!(TypeStream::index_hashed(&t, &hash).is_none(), "{path}");
            assert!(
                TypeStream::index_hashed(&tpi, &hash[..values + 8]).is_none(),
                "{path}"
            );
            assert!(
                read_pdb_types(&t, Some(&hash), wanted, 8).unwrap() == walked,
                "{path}"
            );
        }
    }

    /// A lookup reads at most `MAX_CANDIDATES` records of its name's hash: a stream of 2,000
    /// records (none a definition) all filed under one name's hash is not read through.
    #[test]
    fn a_lookup_reads_a_bounded_number_of_records() {
        let n = 2000u32;
        let mut tpi = vec![0u8; 56];
        for (at, v) in [
            (0, 20040203),
            (4, 56),
            (8, 0x1000),
            (12, 0x1000 + n),
            (16, n * 4),
        ] {
            tpi[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        for (at, v) in [
            (24, 4u32),
            (28, 0x3FFFF),
            (32, 0),
            (36, n * 4),
            (40, n * 4),
            (44, 0),
        ] {
            tpi[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        for _ in 0..n {
            tpi.extend_from_slice(&[2, 0, 0x01, 0x12]); // LF_ARGLIST, empty
        }
        let h = hash_v1(b"_KPRCB") % 0x3FFFF;
        let hash: Vec<u8> = (0..n).flat_map(|_| h.to_le_bytes()).collect();
        let ts = TypeStream::index_hashed(&tpi, &hash).unwrap();
        assert_eq!(ts.definition_of(b"_KPRCB"), None);
        assert!(!ts.consistent());
        // Under the bound, the same records are all read and the answer stands.
        let few = MAX_CANDIDATES as u32 - 1;
        let mut t = tpi[..56 + few as usize * 4].to_vec();
        t[12..16].copy_from_slice(&(0x1000 + few).to_le_bytes());
        t[36..40].copy_from_slice(&(few * 4).to_le_bytes());
        t[40..44].copy_from_slice(&(few * 4).to_le_bytes());
        let ts = TypeStream::index_hashed(&t, &hash[..few as usize * 4]).unwrap();
        assert_eq!(ts.definition_of(b"_KPRCB"), None);
        assert!(ts.consistent());
    }

    #[test]
    fn names_and_numeric_leaves() {
        assert_eq!(split_name(b"ab\0c", false), Some((&b"ab"[..], 3)));
        assert_eq!(split_name(b"ab", false), None);
        assert_eq!(split_name(b"\x02abc", true), Some((&b"ab"[..], 3)));
        assert_eq!(split_name(b"\x05ab", true), None);
        assert_eq!(
            Buf::new(&[0x04, 0x80, 1, 2, 3, 4]).unsigned().unwrap(),
            0x0403_0201
        );
        assert!(Buf::new(&[0x01, 0x80, 1, 2]).unsigned().is_err());
        assert_eq!(Buf::new(&[0x01, 0x80, 0xFE, 0xFF]).variant().unwrap(), -2);
        assert_eq!(Buf::new(&[0x00, 0x80, 0xFE]).variant().unwrap(), 0xFE);
        let mut b = Buf::new(&[0xF3, 0, 0, 7]);
        b.padding().unwrap();
        assert_eq!(b.pos, 3);
        assert!(Buf::new(&[0xF3]).padding().is_err());
    }
}
