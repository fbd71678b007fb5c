//! The one list walker: every linked structure the tool follows through memory (LIST_ENTRY
//! lists, SINGLE_LIST_ENTRY chains, NextBuffer chains) goes through [`ListWalk`], which is
//! bounded (a count fixed by the caller, never one read from memory) and cycle-safe (an entry
//! seen twice ends the walk), and says why it stopped early ([`ListStop`]).
//!
//! The walk yields link addresses: for a LIST_ENTRY list, the address of each entry's
//! LIST_ENTRY (the caller subtracts the field's offset, CONTAINING_RECORD); for a chain whose
//! links point at records (NextBuffer), the records themselves.

use super::{AddressSpace, MemError};
use crate::addr::VirtAddr;
use std::collections::HashSet;
use thiserror::Error;

/// Why a walk ended before the list's own end (the head again, or NULL).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ListStop {
    #[error("stopped after {after} entries (the bound)")]
    Bound { after: u64 },
    #[error("entry {entry} is visited twice (a cycle); stopped")]
    Cycle { entry: VirtAddr },
    #[error("the link of entry {entry} is unreadable: {source}")]
    Unreadable { entry: VirtAddr, source: MemError },
}

impl ListStop {
    /// The warning kind of a walk that stopped this way.
    pub fn kind(&self) -> crate::warning::WarningKind {
        use crate::warning::WarningKind;
        match self {
            ListStop::Bound { .. } | ListStop::Cycle { .. } => WarningKind::Bound,
            ListStop::Unreadable { .. } => WarningKind::Unreadable,
        }
    }
}

/// A bounded, cycle-safe walk; `next` reads the link that follows an entry.
pub struct ListWalk<F> {
    next: F,
    cur: Option<VirtAddr>,
    /// The value that ends the list: the head (circular lists) or NULL (chains).
    end: VirtAddr,
    seen: HashSet<VirtAddr>,
    count: u64,
    bound: u64,
    stop: Option<ListStop>,
}

impl<F: FnMut(VirtAddr) -> Result<VirtAddr, MemError>> ListWalk<F> {
    /// A walk from `first` (already read) to `end`, following `next`.
    pub fn new(first: VirtAddr, end: VirtAddr, bound: u64, next: F) -> ListWalk<F> {
        ListWalk {
            next,
            cur: Some(first),
            end,
            seen: HashSet::new(),
            count: 0,
            bound,
            stop: None,
        }
    }

    /// Why the walk stopped early; `None` while it runs and when the list ended normally.
    pub fn stopped(&self) -> Option<&ListStop> {
        self.stop.as_ref()
    }

    /// Entries yielded so far.
    pub fn count(&self) -> u64 {
        self.count
    }
}

impl<F: FnMut(VirtAddr) -> Result<VirtAddr, MemError>> Iterator for ListWalk<F> {
    type Item = VirtAddr;

    fn next(&mut self) -> Option<VirtAddr> {
        let cur = self.cur.take()?;
        if cur == self.end {
            return None;
        }
        if self.count >= self.bound {
            self.stop = Some(ListStop::Bound { after: self.count });
            return None;
        }
        if !self.seen.insert(cur) {
            self.stop = Some(ListStop::Cycle { entry: cur });
            return None;
        }
        self.count += 1;
        match (self.next)(cur) {
            Ok(n) => self.cur = Some(n),
            Err(source) => self.stop = Some(ListStop::Unreadable { entry: cur, source }),
        }
        Some(cur)
    }
}

impl<'d> AddressSpace<'d> {
    /// A LIST_ENTRY list: Flink from `head` until it comes back to `head`, at most `bound`
    /// entries. Err when the head itself is unreadable. Links are normalized (x86 values
    /// sign-extended to 64 bits become 32-bit).
    pub(crate) fn list_entries(
        &self,
        head: VirtAddr,
        bound: u64,
    ) -> Result<ListWalk<impl FnMut(VirtAddr) -> Result<VirtAddr, MemError> + '_>, MemError> {
        let head = self.normalize(head)?;
        let first = self.normalize(self.read_ptr(head)?)?;
        Ok(ListWalk::new(first, head, bound, move |e| {
            self.read_ptr(e).and_then(|p| self.normalize(p))
        }))
    }

    /// A NULL-terminated chain from `first` whose link sits `link_offset` bytes into each
    /// entry (0 for SINGLE_LIST_ENTRY.Next), at most `bound` entries.
    pub fn chain(
        &self,
        first: VirtAddr,
        link_offset: u64,
        bound: u64,
    ) -> ListWalk<impl FnMut(VirtAddr) -> Result<VirtAddr, MemError> + '_> {
        ListWalk::new(first, VirtAddr::new(0), bound, move |e| {
            self.read_ptr(e.offset(link_offset))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn walk(
        mem: &HashMap<u64, u64>,
        first: u64,
        end: u64,
        bound: u64,
    ) -> (Vec<u64>, Option<ListStop>) {
        let mut w = ListWalk::new(
            VirtAddr::new(first),
            VirtAddr::new(end),
            bound,
            |a: VirtAddr| {
                mem.get(&a.get())
                    .map(|&v| VirtAddr::new(v))
                    .ok_or(MemError::PhysMissing {
                        pa: crate::addr::PhysAddr::new(a.get()),
                    })
            },
        );
        let v: Vec<u64> = w.by_ref().map(|a| a.get()).collect();
        (v, w.stopped().cloned())
    }

    #[test]
    fn walks_to_the_end_and_stops_on_cycles_bounds_and_holes() {
        let mem: HashMap<u64, u64> = [(0x1000, 0x2000), (0x2000, 0x3000), (0x3000, 0)].into();
        assert_eq!(
            walk(&mem, 0x1000, 0, 10),
            (vec![0x1000, 0x2000, 0x3000], None)
        );
        assert_eq!(walk(&mem, 0, 0, 10), (vec![], None));
        // Circular: the head (0x3000 here) ends the walk without being yielded.
        assert_eq!(walk(&mem, 0x1000, 0x3000, 10), (vec![0x1000, 0x2000], None));
        let cyc: HashMap<u64, u64> = [(0x1000, 0x2000), (0x2000, 0x1000)].into();
        let (v, stop) = walk(&cyc, 0x1000, 0, 10);
        assert_eq!(v, vec![0x1000, 0x2000]);
        assert_eq!(
            stop,
            Some(ListStop::Cycle {
                entry: VirtAddr::new(0x1000)
            })
        );
        assert!(stop
            .unwrap()
            .to_string()
            .contains("0x1000 is visited twice"));
        let (v, stop) = walk(&mem, 0x1000, 0, 2);
        assert_eq!(v, vec![0x1000, 0x2000]);
        assert_eq!(stop, Some(ListStop::Bound { after: 2 }));
        assert!(stop.unwrap().to_string().contains("after 2 entries"));
        let hole: HashMap<u64, u64> = [(0x1000, 0x2000)].into();
        let (v, stop) = walk(&hole, 0x1000, 0, 10);
        assert_eq!(v, vec![0x1000, 0x2000]);
        assert!(matches!(
            stop,
            Some(ListStop::Unreadable { entry, .. }) if entry == VirtAddr::new(0x2000)
        ));
        assert!(stop.unwrap().to_string().contains("0x2000 is unreadable"));
    }
}
