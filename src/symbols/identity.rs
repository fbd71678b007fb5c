//! A PDB's identity: name, GUID and age, the key of every symbol store.

use crate::text::Untrusted;
use serde::Serialize;

/// Name, GUID and age of a PDB (or of the PDB an image's CodeView record names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PdbIdentity {
    /// From the dump's CodeView record or a symbol file: untrusted.
    pub name: Untrusted,
    /// `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX`, uppercase.
    pub guid: String,
    pub age: u32,
    /// Symbol-store directory name: GUID without dashes, then the age in hex.
    pub store_key: String,
}

impl PdbIdentity {
    fn new(name: Untrusted, b: [u8; 16], age: u32) -> PdbIdentity {
        let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
        let guid = format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        );
        PdbIdentity {
            name,
            store_key: format!("{hex}{age:X}"),
            guid,
            age,
        }
    }

    /// From the 16 GUID bytes. `big_endian`: the bytes are in textual order (as `uuid`
    /// gives them); otherwise they are the Windows in-memory GUID (Data1..3 little-endian),
    /// as stored in a CodeView RSDS record.
    pub(crate) fn from_guid_bytes(
        name: Untrusted,
        raw: &[u8; 16],
        age: u32,
        big_endian: bool,
    ) -> Self {
        let mut b = *raw;
        if !big_endian {
            b[0..4].reverse();
            b[4..6].reverse();
            b[6..8].reverse();
        }
        Self::new(name, b, age)
    }

    /// From GUID text with or without dashes/braces (e.g. an ISF's `GUID` field).
    pub fn from_guid_text(name: &str, guid: &str, age: u32) -> Option<Self> {
        let hex: String = guid.chars().filter(|c| c.is_ascii_hexdigit()).collect();
        if hex.len() != 32
            || guid
                .chars()
                .any(|c| !c.is_ascii_hexdigit() && !"-{}".contains(c))
        {
            return None;
        }
        let mut b = [0u8; 16];
        for (i, byte) in b.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Self::new(Untrusted::from(name), b, age))
    }

    /// The PDB's file name as a path component may use it (symbol stores, downloads): the
    /// name's last component (after `\\` or `/`: RSDS records may hold a build path), when it
    /// is 1-128 characters of `A-Z a-z 0-9 . _ -`, not `.` or `..`. None otherwise: the name
    /// comes from the dump and never becomes a path unchecked.
    pub fn file_name(&self) -> Option<&str> {
        let n = self.name.raw().rsplit(['\\', '/']).next().unwrap_or("");
        let ok = (1..=128).contains(&n.len())
            && n != "."
            && n != ".."
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        ok.then_some(n)
    }

    /// Same GUID and age (names are compared case-insensitively by callers if at all:
    /// ntkrnlmp/ntkrpamp/ntoskrnl are the same kernel under different names).
    pub(crate) fn same_build(&self, other: &PdbIdentity) -> bool {
        self.guid == other.guid && self.age == other.age
    }
}

impl std::fmt::Display for PdbIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {{{}}} age {}", self.name, self.guid, self.age)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a plain file name of the dump's PDB name reaches a path or a URL.
    #[test]
    fn file_name_is_a_plain_component() {
        let id = |n: &str| {
            PdbIdentity::from_guid_text(n, "5278AFF8-6C34-1677-D7D7-835C85B7B844", 1).unwrap()
        };
        assert_eq!(id("ntkrnlmp.pdb").file_name(), Some("ntkrnlmp.pdb"));
        assert_eq!(
            id("d:\\os\\obj\\ntkrnlmp.pdb").file_name(),
            Some("ntkrnlmp.pdb")
        );
        assert_eq!(id("../../etc/passwd").file_name(), Some("passwd"));
        for bad in [
            "",
            ".",
            "..",
            "a/..",
            "x\u{1b}[31m.pdb",
            "a b.pdb",
            "n\u{0}.pdb",
        ] {
            assert_eq!(id(bad).file_name(), None, "{bad:?}");
        }
        assert_eq!(id(&"a".repeat(129)).file_name(), None);
        assert_eq!(id(&"a".repeat(128)).file_name().map(str::len), Some(128));
    }

    #[test]
    fn rsds_bytes_and_text_agree() {
        // The 19041 kernel of the real triage dump.
        let rsds = [
            0xF8, 0xAF, 0x78, 0x52, 0x34, 0x6C, 0x77, 0x16, 0xD7, 0xD7, 0x83, 0x5C, 0x85, 0xB7,
            0xB8, 0x44,
        ];
        let a = PdbIdentity::from_guid_bytes("ntkrnlmp.pdb".into(), &rsds, 1, false);
        assert_eq!(a.guid, "5278AFF8-6C34-1677-D7D7-835C85B7B844");
        assert_eq!(a.store_key, "5278AFF86C341677D7D7835C85B7B8441");
        let b = PdbIdentity::from_guid_text("ntkrnlmp.pdb", "5278AFF86C341677D7D7835C85B7B844", 1)
            .unwrap();
        assert_eq!(a, b);
        let c = PdbIdentity::from_guid_text("x", "{5278aff8-6c34-1677-d7d7-835c85b7b844}", 0x1A)
            .unwrap();
        assert_eq!(c.store_key, "5278AFF86C341677D7D7835C85B7B8441A");
        assert!(a.same_build(&b) && !a.same_build(&c));
        assert!(PdbIdentity::from_guid_text("x", "5278AFF8", 1).is_none());
        assert!(
            PdbIdentity::from_guid_text("x", "5278AFF8/6C341677D7D7835C85B7B844xx", 1).is_none()
        );
    }
}
