//! The layouts of a fixture kernel, read from its `types.h` (`tests/fixtures/<name>/types.h`):
//! the C declarations the fixture PDB was compiled from, generated from the real layouts, with a
//! `_Static_assert` on the size of every aggregate and enum and on the offset of every
//! non-bitfield member:
//!
//! ```c
//! _Static_assert(sizeof(struct _WMI_LOGGER_CONTEXT) == 0x550, "sizeof _WMI_LOGGER_CONTEXT");
//! _Static_assert(__builtin_offsetof(struct _WMI_LOGGER_CONTEXT, LoggerName) == 0x98, "");
//! ```
//!
//! Offsets and sizes come from those asserts; member types, bitfields and enum constants from
//! the declarations. Members of the anonymous unions/structs that gen_c.py emits as file-scope
//! helper aggregates (`union _WMI_LOGGER_CONTEXT__u3;` inside the parent) are flattened into
//! the parent, as in the PDB. A bitfield's storage unit is the helper union that embeds its
//! helper struct; its byte offset is that of the union's named non-bitfield member (e.g.
//! `Flags` for `RealTime`), its bit position the sum of the widths declared before it.
//!
//! Nothing here comes from etwdump.

use std::collections::BTreeMap;
use std::path::Path;

/// One member line of an aggregate declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    /// Declared type: `unsigned long`, `struct _LIST_ENTRY`, `struct _ETHREAD *`, `fnptr`, ...
    pub ty: String,
    /// None for an unnamed bitfield or an embedded helper aggregate.
    pub name: Option<String>,
    /// Width of a bitfield.
    pub bits: Option<u32>,
    /// Element count of an array member.
    pub count: Option<u64>,
    /// `union X;` / `struct X;`: an anonymous helper aggregate flattened into the parent.
    pub embedded: bool,
}

/// A `struct X { ... };` or `union X { ... };` declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Aggregate {
    pub is_union: bool,
    pub members: Vec<Member>,
}

/// A bitfield located in its parent: byte offset of the storage unit, bit position, width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BitField {
    pub offset: u64,
    pub position: u32,
    pub width: u32,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct TypesH {
    /// Pointer size from the header comment (`Pointer size: 8`).
    pub pointer_size: u64,
    /// `struct _X` / `union _X` / `enum _X` -> sizeof.
    sizes: BTreeMap<String, u64>,
    /// (aggregate name without keyword, member) -> offset.
    offsets: BTreeMap<(String, String), u64>,
    /// aggregate name without keyword -> declaration.
    decls: BTreeMap<String, Aggregate>,
    /// enum name -> (constant -> value).
    enums: BTreeMap<String, BTreeMap<String, i64>>,
}

fn parse_int(s: &str) -> Option<i64> {
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => i64::from_str_radix(h, 16).ok()?,
        None => t.parse::<i64>().ok()?,
    };
    Some(if neg { -v } else { v })
}

/// `struct _X` -> `_X` (also for `union` / `enum`).
fn strip_keyword(s: &str) -> &str {
    let s = s.trim();
    for k in ["struct ", "union ", "enum "] {
        if let Some(r) = s.strip_prefix(k) {
            return r.trim();
        }
    }
    s
}

fn parse_member(line: &str) -> Option<Member> {
    let l = line.trim().strip_suffix(';')?.trim();
    if l.is_empty() {
        return None;
    }
    // Bitfield: `TYPE NAME : W` or `TYPE : W`.
    if let Some((left, width)) = l.rsplit_once(':') {
        let bits = u32::try_from(parse_int(width)?).ok()?;
        let left = left.trim();
        let toks: Vec<&str> = left.split_whitespace().collect();
        let is_type_word = |t: &str| {
            matches!(
                t,
                "unsigned" | "signed" | "char" | "short" | "int" | "long" | "__int64"
            )
        };
        let (ty, name) = match toks.last() {
            Some(last) if !is_type_word(last) && toks.len() > 1 => {
                (toks[..toks.len() - 1].join(" "), Some(last.to_string()))
            }
            _ => (toks.join(" "), None),
        };
        return Some(Member {
            ty,
            name,
            bits: Some(bits),
            count: None,
            embedded: false,
        });
    }
    // Function pointer: `RET (*NAME)(ARGS)`.
    if let Some(at) = l.find("(*") {
        let rest = &l[at + 2..];
        let end = rest.find(')')?;
        return Some(Member {
            ty: "fnptr".to_string(),
            name: Some(rest[..end].trim().to_string()),
            bits: None,
            count: None,
            embedded: false,
        });
    }
    let toks: Vec<&str> = l.split_whitespace().collect();
    if toks.len() == 2 && (toks[0] == "struct" || toks[0] == "union") {
        return Some(Member {
            ty: l.to_string(),
            name: None,
            bits: None,
            count: None,
            embedded: true,
        });
    }
    // `TYPE [*...]NAME[[N]]`
    let (decl, count) = match l.strip_suffix(']') {
        Some(r) => {
            let open = r.rfind('[')?;
            (
                r[..open].trim(),
                Some(u64::try_from(parse_int(&r[open + 1..])?).ok()?),
            )
        }
        None => (l, None),
    };
    let split = decl.rfind(|c: char| c.is_whitespace() || c == '*')?;
    let name = decl[split + 1..].trim().to_string();
    let ty = decl[..=split].trim().to_string();
    Some(Member {
        ty,
        name: Some(name),
        bits: None,
        count,
        embedded: false,
    })
}

impl TypesH {
    pub(crate) fn load(dir: &Path) -> Result<TypesH, String> {
        let path = dir.join("types.h");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self::parse(&text))
    }

    pub(crate) fn parse(text: &str) -> TypesH {
        let mut t = TypesH::default();
        let mut current: Option<(String, Aggregate)> = None;
        let mut current_enum: Option<(String, BTreeMap<String, i64>)> = None;
        for raw in text.lines() {
            let line = raw.trim();
            if let Some(r) = line.strip_prefix("* Pointer size:") {
                t.pointer_size = parse_int(r).unwrap_or(0) as u64;
                continue;
            }
            if let Some(rest) = line.strip_prefix("_Static_assert(") {
                if let Some(r) = rest.strip_prefix("sizeof(") {
                    if let (Some(close), Some(eq)) = (r.find(')'), r.find("==")) {
                        let name = r[..close].trim().to_string();
                        let val = r[eq + 2..].split(',').next().and_then(parse_int);
                        if let Some(v) = val {
                            t.sizes.insert(name, v as u64);
                        }
                    }
                } else if let Some(r) = rest.strip_prefix("__builtin_offsetof(") {
                    if let (Some(comma), Some(close), Some(eq)) =
                        (r.find(','), r.find(')'), r.find("=="))
                    {
                        let agg = strip_keyword(&r[..comma]).to_string();
                        let field = r[comma + 1..close].trim().to_string();
                        if let Some(v) = r[eq + 2..].split(',').next().and_then(parse_int) {
                            t.offsets.insert((agg, field), v as u64);
                        }
                    }
                }
                continue;
            }
            if raw.starts_with("};") {
                if let Some((name, agg)) = current.take() {
                    t.decls.insert(name, agg);
                }
                if let Some((name, consts)) = current_enum.take() {
                    t.enums.insert(name, consts);
                }
                continue;
            }
            if let Some(head) = line.strip_suffix('{') {
                let head = head.trim();
                let is_union = head.starts_with("union ");
                if head.starts_with("struct ") || is_union {
                    current = Some((
                        strip_keyword(head).to_string(),
                        Aggregate {
                            is_union,
                            members: Vec::new(),
                        },
                    ));
                } else if let Some(e) = head.strip_prefix("enum ") {
                    let name = e.split(':').next().unwrap_or("").trim().to_string();
                    current_enum = Some((name, BTreeMap::new()));
                }
                continue;
            }
            if let Some((_, agg)) = current.as_mut() {
                if let Some(m) = parse_member(line) {
                    agg.members.push(m);
                }
            } else if let Some((_, consts)) = current_enum.as_mut() {
                if let Some((k, v)) = line.trim_end_matches(',').split_once('=') {
                    if let Some(v) = parse_int(v) {
                        consts.insert(k.trim().to_string(), v);
                    }
                }
            }
        }
        t
    }

    /// sizeof(struct/union `name`) (name without keyword).
    pub(crate) fn size_of(&self, name: &str) -> Option<u64> {
        ["struct ", "union ", "enum "]
            .iter()
            .find_map(|k| self.sizes.get(&format!("{k}{name}")).copied())
    }

    /// Offset of the (non-bitfield) member `field` of aggregate `agg`.
    pub(crate) fn offset_of(&self, agg: &str, field: &str) -> Option<u64> {
        self.offsets
            .get(&(agg.to_string(), field.to_string()))
            .copied()
    }

    pub(crate) fn has_field(&self, agg: &str, field: &str) -> bool {
        self.offset_of(agg, field).is_some()
    }

    /// The declaration of `field` in `agg` (looking through embedded helper aggregates).
    pub(crate) fn member(&self, agg: &str, field: &str) -> Option<&Member> {
        let decl = self.decls.get(agg)?;
        for m in &decl.members {
            if m.name.as_deref() == Some(field) {
                return Some(m);
            }
            if m.embedded {
                if let Some(found) = self.member(strip_keyword(&m.ty), field) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Size in bytes of a declared member type (`unsigned long`, `struct _GUID`, pointers,
    /// enums; times the array count).
    pub(crate) fn member_size(&self, m: &Member) -> Option<u64> {
        let ty = m.ty.trim();
        let one = if ty.ends_with('*') || ty == "fnptr" {
            self.pointer_size
        } else {
            match ty {
                "char" | "unsigned char" | "signed char" => 1,
                "short" | "unsigned short" | "wchar" | "__wchar_t" => 2,
                "long" | "unsigned long" | "int" | "unsigned int" | "HRESULT" => 4,
                "long long" | "unsigned long long" => 8,
                _ => *self.sizes.get(ty)?,
            }
        };
        Some(one * m.count.unwrap_or(1))
    }

    /// Size of the member `field` of `agg` from its declaration.
    pub(crate) fn field_size(&self, agg: &str, field: &str) -> Option<u64> {
        self.member(agg, field).and_then(|m| self.member_size(m))
    }

    /// Names of the top-level members of `agg` whose declared type is `ty` (e.g. every
    /// `struct _LIST_ENTRY`), in declaration order.
    pub(crate) fn members_of_type(&self, agg: &str, ty: &str) -> Vec<String> {
        self.decls
            .get(agg)
            .map(|d| {
                d.members
                    .iter()
                    .filter(|m| m.ty == ty && m.bits.is_none() && m.count.is_none())
                    .filter_map(|m| m.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Locate the bitfield `field` of `agg`: it lives in a helper struct of bitfields that a
    /// helper union embeds; that union is embedded in `agg` and has a named non-bitfield
    /// member whose offset in `agg` is asserted.
    pub(crate) fn bitfield(&self, agg: &str, field: &str) -> Option<BitField> {
        let (holder, position, width) = self.decls.iter().find_map(|(name, d)| {
            let mut pos = 0u32;
            for m in &d.members {
                let w = m.bits?;
                if m.name.as_deref() == Some(field) {
                    return Some((name.clone(), pos, w));
                }
                pos += w;
            }
            None
        })?;
        // The union that embeds `holder`, and its named member with an asserted offset.
        let offset = self.decls.values().find_map(|u| {
            let embeds = u
                .members
                .iter()
                .any(|m| m.embedded && strip_keyword(&m.ty) == holder);
            if !embeds {
                return None;
            }
            u.members
                .iter()
                .filter(|m| !m.embedded && m.bits.is_none())
                .find_map(|m| self.offset_of(agg, m.name.as_deref()?))
        })?;
        Some(BitField {
            offset,
            position,
            width,
        })
    }

    /// The first constant of `enum_name` whose value is `value`.
    pub(crate) fn enum_name_of(&self, enum_name: &str, value: i64) -> Option<&str> {
        self.enums
            .get(enum_name)?
            .iter()
            .find(|(_, &v)| v == value)
            .map(|(k, _)| k.as_str())
    }

    /// Value of the enum constant `name` of `enum_name`.
    #[cfg(test)]
    pub(crate) fn enum_value(&self, enum_name: &str, name: &str) -> Option<i64> {
        self.enums.get(enum_name)?.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"/* Generated
 * Pointer size: 8
 */
enum _POOL_TYPE : int {
    NonPagedPool = 0,
    PagedPool = 1,
    NonPagedPoolNx = 512,
};
_Static_assert(sizeof(enum _POOL_TYPE) == 4, "sizeof _POOL_TYPE");
struct _T__s1 {
    unsigned long A : 1;
    unsigned long B : 2;
    unsigned long : 29;
};
union _T__u1 {
    struct _T__s1;
    unsigned long Flags;
};
struct _T {
    unsigned long Id;
    unsigned char __pad1[0x4];
    struct _LIST_ENTRY List;
    void (*Fn)(void);
    struct _X *Ptr;
    unsigned long Arr[0x3];
    union _T__u1;
    enum _POOL_TYPE Pool;
};
_Static_assert(sizeof(struct _T) == 0x38, "sizeof _T");
_Static_assert(__builtin_offsetof(struct _T, Id) == 0x0, "");
_Static_assert(__builtin_offsetof(struct _T, List) == 0x8, "");
_Static_assert(__builtin_offsetof(struct _T, Flags) == 0x30, "");
_Static_assert(sizeof(struct _LIST_ENTRY) == 0x10, "sizeof _LIST_ENTRY");
"#;

    #[test]
    fn parses_asserts_declarations_bitfields_enums() {
        let t = TypesH::parse(SAMPLE);
        assert_eq!(t.pointer_size, 8);
        assert_eq!(t.size_of("_T"), Some(0x38));
        assert_eq!(t.offset_of("_T", "List"), Some(8));
        assert_eq!(t.field_size("_T", "List"), Some(0x10));
        assert_eq!(t.field_size("_T", "Fn"), Some(8));
        assert_eq!(t.field_size("_T", "Ptr"), Some(8));
        assert_eq!(t.field_size("_T", "Arr"), Some(12));
        assert_eq!(t.field_size("_T", "Pool"), Some(4));
        assert_eq!(t.field_size("_T", "Flags"), Some(4));
        assert_eq!(
            t.bitfield("_T", "B"),
            Some(BitField {
                offset: 0x30,
                position: 1,
                width: 2
            })
        );
        assert_eq!(t.members_of_type("_T", "struct _LIST_ENTRY"), vec!["List"]);
        assert_eq!(t.enum_value("_POOL_TYPE", "NonPagedPoolNx"), Some(512));
    }
}
