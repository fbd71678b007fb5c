//! [`SymbolMap`]: global symbol names and their RVAs, the names held in one buffer.
//!
//! A kernel PDB has tens of thousands of globals (issue 30 item 4): one `String` each, in a
//! `HashMap<String, u64>`, cost an allocation per name and a table of 40-byte entries. Here
//! the names are appended to one `String`, each entry is its span and RVA, and the table holds
//! only entry numbers (4 bytes), hashed with foldhash (seeded per process, so a crafted symbol
//! file cannot choose colliding names).

use hashbrown::HashTable;
use std::hash::BuildHasher;

/// A name [`SymbolMap::absent`] did not find: its hash.
pub(crate) struct Absent(u64);

/// Global symbol name → RVA (names unique). Iteration is in insertion order.
#[derive(Clone, Default)]
pub struct SymbolMap {
    /// Every name, one after the other.
    names: String,
    /// (start of the name in `names`, its length, RVA), in insertion order (16 bytes: the
    /// names buffer is kept under 4 GiB).
    entries: Vec<(u32, u32, u64)>,
    /// Indexes into `entries`, by the hash of their name.
    table: HashTable<u32>,
    hasher: foldhash::quality::RandomState,
}

impl SymbolMap {
    /// An empty map with room for `n` names of `bytes` bytes in all.
    pub fn with_capacity(n: usize, bytes: usize) -> SymbolMap {
        SymbolMap {
            names: String::with_capacity(bytes),
            entries: Vec::with_capacity(n),
            table: HashTable::with_capacity(n),
            hasher: Default::default(),
        }
    }

    fn name(&self, entry: u32) -> &str {
        span(&self.names, self.entries[entry as usize])
    }

    /// The entry number of `name` (its bytes: hashed and compared as bytes), with its hash.
    fn find(&self, name: &[u8]) -> (u64, Option<u32>) {
        let hash = self.hasher.hash_one(name);
        let found = self
            .table
            .find(hash, |&e| self.name(e).as_bytes() == name)
            .copied();
        (hash, found)
    }

    /// Add `name` at `rva` unless the map has it already (the first one given wins); whether it
    /// was added. Names past 4 GiB of names in all are not added.
    pub fn insert_first(&mut self, name: &str, rva: u64) -> bool {
        let (hash, found) = self.find(name.as_bytes());
        if found.is_some() {
            return false;
        }
        self.push(hash, name, rva)
    }

    /// Set `name` to `rva` (the last one given wins, as `HashMap::insert`); the RVA it had.
    pub fn insert(&mut self, name: &str, rva: u64) -> Option<u64> {
        match self.find(name.as_bytes()) {
            (_, Some(e)) => {
                let old = &mut self.entries[e as usize].2;
                Some(std::mem::replace(old, rva))
            }
            (hash, None) => {
                self.push(hash, name, rva);
                None
            }
        }
    }

    fn push(&mut self, hash: u64, name: &str, rva: u64) -> bool {
        let (Ok(e), Ok(start), Ok(len)) = (
            u32::try_from(self.entries.len()),
            u32::try_from(self.names.len()),
            u32::try_from(name.len()),
        ) else {
            return false;
        };
        if start.checked_add(len).is_none() {
            return false;
        }
        self.entries.push((start, len, rva));
        self.names.push_str(name);
        let (names, entries, hasher) = (&self.names, &self.entries, &self.hasher);
        self.table.insert_unique(hash, e, |&x| {
            hasher.hash_one(span(names, entries[x as usize]).as_bytes())
        });
        true
    }

    /// The RVA of `name`.
    pub fn get(&self, name: &str) -> Option<&u64> {
        let e = self.find(name.as_bytes()).1?;
        Some(&self.entries[e as usize].2)
    }

    /// Whether the map has `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name.as_bytes()).1.is_some()
    }

    /// None if the map has a name of these bytes (which are then valid UTF-8); else what [`insert_absent`](Self::insert_absent)
    /// adds it with (its hash: one lookup for the two).
    pub(crate) fn absent(&self, name: &[u8]) -> Option<Absent> {
        match self.find(name) {
            (_, Some(_)) => None,
            (hash, None) => Some(Absent(hash)),
        }
    }

    /// Add `name`, which [`absent`](Self::absent) found absent (`a`, for the same bytes), at
    /// `rva`; whether it was added (see [`insert_first`](Self::insert_first)).
    pub(crate) fn insert_absent(&mut self, a: Absent, name: &str, rva: u64) -> bool {
        debug_assert_eq!(a.0, self.hasher.hash_one(name.as_bytes()));
        self.push(a.0, name, rva)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.names.clear();
        self.entries.clear();
        self.table.clear();
    }

    /// Every name and its RVA, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &u64)> + '_ {
        self.entries.iter().map(|e| (span(&self.names, *e), &e.2))
    }
}

/// The name an entry spans in `names`.
fn span(names: &str, (start, len, _): (u32, u32, u64)) -> &str {
    let start = start as usize;
    &names[start..start + len as usize]
}

impl<'a> IntoIterator for &'a SymbolMap {
    type Item = (&'a str, &'a u64);
    type IntoIter = Box<dyn Iterator<Item = (&'a str, &'a u64)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl<S: AsRef<str>> FromIterator<(S, u64)> for SymbolMap {
    /// The last RVA given for a name wins, as for a `HashMap`.
    fn from_iter<I: IntoIterator<Item = (S, u64)>>(iter: I) -> SymbolMap {
        let mut m = SymbolMap::default();
        for (k, v) in iter {
            m.insert(k.as_ref(), v);
        }
        m
    }
}

/// Equal when they map the same names to the same RVAs (in any order).
impl PartialEq for SymbolMap {
    fn eq(&self, other: &SymbolMap) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl std::fmt::Debug for SymbolMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::SymbolMap;

    #[test]
    fn first_or_last_wins_and_lookups() {
        let mut m = SymbolMap::with_capacity(2, 8);
        assert!(m.insert_first("a", 1));
        assert!(!m.insert_first("a", 2));
        assert!(m.insert_first("bc", 3));
        assert_eq!(
            (m.get("a"), m.get("bc"), m.get("b")),
            (Some(&1), Some(&3), None)
        );
        assert_eq!(m.insert("bc", 4), Some(3));
        assert_eq!(m.insert("", 5), None);
        assert_eq!(m.get(""), Some(&5));
        assert!(m.contains_key("a") && !m.contains_key("ab"));
        assert!(m.absent(b"a").is_none() && m.absent(b"b\xff").is_some());
        let a = m.absent(b"d").unwrap();
        assert!(m.insert_absent(a, "d", 6) && m.get("d") == Some(&6));
        m.insert("d", 6);
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [("a", &1), ("bc", &4), ("", &5), ("d", &6)]
        );
        // Many names: the table grows and rehashes from the names buffer.
        let many: SymbolMap = (0..5000u64).map(|i| (format!("n{i}"), i)).collect();
        assert_eq!(many.len(), 5000);
        assert!((0..5000u64).all(|i| many.get(&format!("n{i}")) == Some(&i)));
        let reversed: SymbolMap = (0..5000u64).rev().map(|i| (format!("n{i}"), i)).collect();
        assert_eq!(many, reversed);
        assert_ne!(many, m);
        let mut c = many.clone();
        c.insert("n7", 8);
        assert_ne!(many, c);
        c.clear();
        assert!(c.is_empty() && c.get("n1").is_none());
        assert_eq!(format!("{m:?}"), r#"{"a": 1, "bc": 4, "": 5, "d": 6}"#);
    }
}
