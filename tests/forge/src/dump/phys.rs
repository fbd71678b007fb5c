//! The machine's physical memory: its run list (PHYSICAL_MEMORY_DESCRIPTOR), a PFN allocator and
//! the content of every page the forge writes.

use std::collections::{BTreeMap, BTreeSet};

use crate::util::{Rng, PAGE_SIZE};

/// First PFN the allocator hands out: real kernels rarely put pool or page tables below 1 MiB.
const FIRST_ALLOC_PFN: u64 = 0x100;

/// Page content: boxed so that moving maps around stays cheap.
pub(crate) type PageBuf = Box<[u8]>;

#[derive(Clone)]
pub(crate) struct PhysMem {
    /// Number of PFNs covered by the machine (physical_memory_bytes / 4096).
    pub total_pfns: u64,
    /// The machine's memory runs `(BasePage, PageCount)`, sorted, with holes between them.
    pub runs: Vec<(u64, u64)>,
    /// true: only the pages in `pages` are stored (bitmap dump); false: every page of every run.
    bitmap: bool,
    /// Pages with content. In a bitmap dump exactly these pages are stored.
    pages: BTreeMap<u64, PageBuf>,
    /// PFNs handed out (stored or deliberately withheld) or fixed by the forge.
    used: BTreeSet<u64>,
    /// PFN ranges `[start, end)` reserved for large pages.
    reserved: Vec<(u64, u64)>,
    /// Allocation limit (x86 non-PAE can only address 4 GiB).
    alloc_limit: u64,
    rng: Rng,
}

/// Summary only: the page contents would be megabytes of output.
impl std::fmt::Debug for PhysMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhysMem")
            .field("total_pfns", &self.total_pfns)
            .field("runs", &self.runs)
            .field("bitmap", &self.bitmap)
            .field("pages_with_content", &self.pages.len())
            .field("used", &self.used.len())
            .field("reserved", &self.reserved)
            .finish_non_exhaustive()
    }
}

/// The machine's run list for `n` PFNs: realistic holes (legacy VGA/BIOS area 0xA0-0xFF, a small
/// firmware-reserved hole at n/8 and a PCI/MMIO hole of n/64 pages at 3n/4):
/// `[1, 0x9F)`, `[0x100, n/8)`, `[n/8 + 0x20, 3n/4)`, `[3n/4 + n/64, n)`.
pub(crate) fn machine_runs(n: u64) -> Vec<(u64, u64)> {
    let a = n / 8;
    let hs = n / 4 * 3;
    let he = hs + n / 64;
    let bounds = [(1, 0x9F), (0x100, a), (a + 0x20, hs), (he, n)];
    bounds.iter().map(|&(s, e)| (s, e - s)).collect()
}

impl PhysMem {
    pub(crate) fn new(total_pfns: u64, bitmap: bool, alloc_limit: u64, seed: u64) -> Self {
        PhysMem {
            total_pfns,
            runs: machine_runs(total_pfns),
            bitmap,
            pages: BTreeMap::new(),
            used: BTreeSet::new(),
            reserved: Vec::new(),
            alloc_limit: alloc_limit.min(total_pfns),
            rng: Rng::new(seed),
        }
    }

    pub(crate) fn in_run(&self, pfn: u64) -> bool {
        self.runs
            .iter()
            .any(|&(base, count)| pfn >= base && pfn < base + count)
    }

    fn in_reserved(&self, pfn: u64) -> bool {
        self.reserved.iter().any(|&(s, e)| pfn >= s && pfn < e)
    }

    /// Whether the dump file holds the page `pfn`.
    pub(crate) fn is_stored(&self, pfn: u64) -> bool {
        if self.bitmap {
            self.pages.contains_key(&pfn)
        } else {
            self.in_run(pfn)
        }
    }

    /// Claim a fixed PFN (e.g. the PML4 at 0x1AD).
    pub(crate) fn claim(&mut self, pfn: u64) -> u64 {
        assert!(
            self.in_run(pfn),
            "fixed PFN {pfn:#x} is not in a memory run"
        );
        assert!(self.used.insert(pfn), "fixed PFN {pfn:#x} already used");
        pfn
    }

    /// A random free PFN in `[lo, hi)` that lies in a run.
    pub(crate) fn alloc_in(&mut self, lo: u64, hi: u64) -> u64 {
        let hi = hi.min(self.alloc_limit);
        for _ in 0..100_000 {
            let pfn = self.rng.range(lo, hi);
            if self.in_run(pfn) && !self.in_reserved(pfn) && !self.used.contains(&pfn) {
                self.used.insert(pfn);
                return pfn;
            }
        }
        panic!("no free PFN in {lo:#x}..{hi:#x}");
    }

    /// A random free PFN anywhere in usable memory.
    pub(crate) fn alloc(&mut self) -> u64 {
        self.alloc_in(FIRST_ALLOC_PFN, self.total_pfns)
    }

    /// `count` free, consecutive PFNs inside one run (a random start), all marked used; the
    /// first is returned. For objects that must be physically contiguous (scan scenarios).
    pub(crate) fn alloc_contiguous(&mut self, count: u64) -> u64 {
        let hi = self.alloc_limit;
        for _ in 0..100_000 {
            let base = self.rng.range(
                FIRST_ALLOC_PFN,
                hi.saturating_sub(count).max(FIRST_ALLOC_PFN + 1),
            );
            let free = (base..base + count)
                .all(|p| self.in_run(p) && !self.in_reserved(p) && !self.used.contains(&p));
            if free {
                self.used.extend(base..base + count);
                return base;
            }
        }
        panic!("no {count} contiguous free PFNs");
    }

    /// A PFN that a valid PTE may name but that the dump does not hold: in a bitmap dump a free
    /// in-run PFN whose bit stays clear; in a full dump a PFN in the hole after run 1 (every
    /// in-run page of a full dump is stored).
    pub(crate) fn alloc_unstored(&mut self) -> u64 {
        if self.bitmap {
            self.alloc()
        } else {
            let (s, c) = self.runs[1];
            let (next, _) = self.runs[2];
            let hole = (s + c, next);
            loop {
                let pfn = self.rng.range(hole.0, hole.1);
                if self.used.insert(pfn) {
                    assert!(!self.in_run(pfn));
                    return pfn;
                }
            }
        }
    }

    /// Reserve a naturally aligned block of `count` PFNs that lies entirely inside one run,
    /// searching upwards from `hint`. Returns the first PFN.
    pub(crate) fn reserve_aligned_block(&mut self, count: u64, hint: u64) -> u64 {
        let mut base = hint.div_ceil(count) * count;
        while base + count <= self.alloc_limit {
            let inside = self
                .runs
                .iter()
                .any(|&(s, c)| base >= s && base + count <= s + c);
            let clash = self.used.range(base..base + count).next().is_some()
                || self
                    .reserved
                    .iter()
                    .any(|&(s, e)| base < e && s < base + count);
            if inside && !clash {
                self.reserved.push((base, base + count));
                return base;
            }
            base += count;
        }
        panic!("no aligned block of {count:#x} pages above {hint:#x}");
    }

    /// Mutable content of page `pfn`, created zero-filled (and thus stored) on first use.
    pub(crate) fn page_mut(&mut self, pfn: u64) -> &mut [u8] {
        assert!(
            pfn < self.total_pfns && self.in_run(pfn),
            "PFN {pfn:#x} outside the machine's memory runs"
        );
        self.used.insert(pfn);
        self.pages
            .entry(pfn)
            .or_insert_with(|| vec![0u8; PAGE_SIZE as usize].into_boxed_slice())
    }

    pub(crate) fn set_page(&mut self, pfn: u64, content: &[u8]) {
        assert_eq!(content.len(), PAGE_SIZE as usize);
        self.page_mut(pfn).copy_from_slice(content);
    }

    /// Fill page `pfn` with the distinctive pattern of [`pattern_page`].
    pub(crate) fn set_pattern(&mut self, pfn: u64) {
        self.set_page(pfn, &pattern_page(pfn));
    }

    /// Fill a fresh page with pseudo-random bytes (stored filler nobody references).
    pub(crate) fn add_random_page(&mut self) -> u64 {
        let pfn = self.alloc();
        let mut buf = vec![0u8; PAGE_SIZE as usize];
        self.rng.fill(&mut buf);
        self.set_page(pfn, &buf);
        pfn
    }

    pub(crate) fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// Bytes at physical address `pa` as the dump holds them (zero for a stored page the forge
    /// never wrote). Panics if any byte is not stored.
    pub(crate) fn read(&self, pa: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut cur = pa;
        let end = pa + len as u64;
        while cur < end {
            let pfn = cur / PAGE_SIZE;
            let off = (cur % PAGE_SIZE) as usize;
            let n = ((PAGE_SIZE as usize - off) as u64).min(end - cur) as usize;
            assert!(self.is_stored(pfn), "PFN {pfn:#x} is not stored");
            match self.pages.get(&pfn) {
                Some(p) => out.extend_from_slice(&p[off..off + n]),
                None => out.resize(out.len() + n, 0),
            }
            cur += n as u64;
        }
        out
    }

    /// This memory as a bitmap store of exactly `pfns` (each in a memory run): their
    /// contents, zero pages where the forge wrote none.
    pub(crate) fn restricted_to(&self, pfns: &[u64]) -> PhysMem {
        let mut out = self.clone();
        out.bitmap = true;
        out.pages = pfns
            .iter()
            .map(|&pfn| {
                assert!(self.in_run(pfn), "PFN {pfn:#x} is not in a memory run");
                let page = self.pages.get(&pfn).cloned();
                (
                    pfn,
                    page.unwrap_or_else(|| vec![0u8; PAGE_SIZE as usize].into()),
                )
            })
            .collect();
        out
    }

    pub(crate) fn pages(&self) -> &BTreeMap<u64, PageBuf> {
        &self.pages
    }

    /// The stored pages as maximal runs `(first PFN, page count)`, ascending: a full dump's
    /// memory runs, or a bitmap dump's stored pages coalesced (exactly the pages
    /// [`PhysMem::is_stored`] accepts).
    pub(crate) fn stored_runs(&self) -> Vec<(u64, u64)> {
        if !self.bitmap {
            return self.runs.clone();
        }
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &pfn in self.pages.keys() {
            match out.last_mut() {
                Some((base, count)) if *base + *count == pfn => *count += 1,
                _ => out.push((pfn, 1)),
            }
        }
        out
    }
}

/// Distinctive, non-zero content of a probe page: 256 cells of 16 ASCII bytes
/// `PFN` + 8 hex digits of the PFN + `@` + 3 hex digits of the offset + `|`,
/// e.g. `PFN000003A7@120|`. A reader that lands on a wrong page or offset reads different bytes.
pub(crate) fn pattern_page(pfn: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(PAGE_SIZE as usize);
    for off in (0..PAGE_SIZE).step_by(16) {
        out.extend_from_slice(format!("PFN{:08X}@{:03X}|", pfn & 0xFFFF_FFFF, off).as_bytes());
    }
    debug_assert_eq!(out.len(), PAGE_SIZE as usize);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_have_holes_and_stay_below_memory_size() {
        for n in [0x1000u64, 0x40_0000] {
            let runs = machine_runs(n);
            assert_eq!(runs[0], (1, 0x9E));
            assert_eq!(runs[1].0, 0x100);
            for w in runs.windows(2) {
                assert!(w[0].0 + w[0].1 < w[1].0, "hole between runs");
            }
            let last = runs.last().unwrap();
            assert_eq!(last.0 + last.1, n);
        }
    }

    #[test]
    fn pattern_is_distinct_and_nonzero() {
        let a = pattern_page(0x3A7);
        let b = pattern_page(0x3A8);
        assert_ne!(a, b);
        assert!(a.iter().all(|&x| x != 0));
        assert_eq!(&a[0x120..0x130], b"PFN000003A7@120|");
    }
}
