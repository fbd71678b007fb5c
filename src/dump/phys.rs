//! Physical memory as a container gives it (issue 28, step 1): the one interface the memory
//! layer reads pages through, whatever holds them. After memflow's `PhysicalMemory` (a
//! connector answers reads of physical addresses and describes its extent), narrowed to what
//! a read-only forensic container offers: a page by its number, the runs of pages it stores,
//! and an identity for caches. A crash dump, a raw/ELF/VMware image and a host framework's
//! layout are [`crate::dump::DumpFile`]s today; a compressed container (a hibernation file)
//! implements the same trait (docs/memory-stack.md).

use super::PageLookup;
use crate::addr::{Pfn, PhysAddr};

/// Physical memory, page by page.
pub trait PhysicalMemory: Sync {
    /// The page `pfn` as the container holds it: present (its 4096 bytes), not held, or
    /// claimed past the end of a truncated file.
    fn page(&self, pfn: Pfn) -> PageLookup<'_>;

    /// The stored pages as runs (first PFN, count), in PFN order, each page once and only
    /// pages the container really holds: what a pass over all physical memory reads.
    fn physical_runs(&self) -> Vec<(u64, u64)>;

    /// Unique among the containers this process opened (caches keyed by it never mix them).
    fn memory_id(&self) -> u64;

    /// Copy `out.len()` bytes at `pa` (within one page) without going through [`Self::page`]
    /// when the container has a cheaper way (a crash dump's positioned reads:
    /// [`crate::dump::DumpFile`]); false, nothing copied, otherwise.
    fn copy_small(&self, pa: PhysAddr, out: &mut [u8]) -> bool {
        let _ = (pa, out);
        false
    }

    /// Copy page `pfn` whole into `out` (4 KiB) the same way; false, nothing copied, when
    /// the container has no cheaper way than [`Self::page`].
    fn copy_page(&self, pfn: Pfn, out: &mut [u8]) -> bool {
        let _ = (pfn, out);
        false
    }
}

impl PhysicalMemory for super::DumpFile {
    fn page(&self, pfn: Pfn) -> PageLookup<'_> {
        super::DumpFile::page(self, pfn)
    }

    fn physical_runs(&self) -> Vec<(u64, u64)> {
        super::DumpFile::physical_runs(self)
    }

    fn memory_id(&self) -> u64 {
        self.id()
    }

    fn copy_small(&self, pa: PhysAddr, out: &mut [u8]) -> bool {
        super::DumpFile::copy_small(self, pa, out)
    }

    fn copy_page(&self, pfn: Pfn, out: &mut [u8]) -> bool {
        self.read_page_direct(pfn, out)
    }
}
