//! Page tables (crash-dump-format.md §1.5) and the forge's own record of what it mapped.
//!
//! * x64: 4 levels of 512 8-byte entries (PML4 [47:39], PDPT [38:30], PD [29:21], PT [20:12]);
//!   PDPTE.PS = 1 GiB page, PDE.PS = 2 MiB page. The PML4 has one self-reference entry at
//!   `Config::self_map_index`: 0x1ED (Windows 7 .. 10 1511, the default) or any other
//!   kernel-half index (Windows 1607+ draws it at boot). No mapping of the forge may use that
//!   PML4 slot (`entry_pa` panics).
//! * x86 PAE: CR3 -> 4-entry PDPT (32-byte aligned, not page aligned) [31:30], PD [29:21],
//!   PT [20:12], 8-byte entries, PDE.PS = 2 MiB page. The four PDs are mapped at 0xC0000000
//!   (PD 3, entries 0..3) as Windows does.
//! * x86 non-PAE: PD [31:22], PT [21:12], 4-byte entries, PDE.PS = 4 MiB page;
//!   self-map at PD[0x300] (0xC0000000).
//!
//! Entries the forge writes are built here; `VirtMap` records the intended translation of every
//! mapping so that probe expectations come from construction, not from re-walking the tables.

use std::collections::BTreeMap;

use crate::dump::phys::PhysMem;
use crate::util::{get_u32, get_u64, put_u32, put_u64, PAGE_SIZE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    X64,
    Pae,
    NonPae,
}

pub(crate) const P: u64 = 1 << 0;
pub(crate) const RW: u64 = 1 << 1;
pub(crate) const US: u64 = 1 << 2;
pub(crate) const PWT: u64 = 1 << 3;
pub(crate) const PCD: u64 = 1 << 4;
pub(crate) const A: u64 = 1 << 5;
pub(crate) const D: u64 = 1 << 6;
pub(crate) const PS: u64 = 1 << 7;
pub(crate) const G: u64 = 1 << 8;
/// Windows software bits in a valid PTE: CopyOnWrite (9), Unused/Prototype position (10),
/// Write (11). Kernel data PTEs of real systems carry bit 11 (e.g. 0x...963).
pub(crate) const SW9: u64 = 1 << 9;
pub(crate) const SW10: u64 = 1 << 10;
pub(crate) const SW11: u64 = 1 << 11;
pub(crate) const NX: u64 = 1 << 63;
/// In a not-valid PTE: bit 10 = Prototype, bit 11 = Transition (§1.5).
pub(crate) const PROTOTYPE: u64 = 1 << 10;
pub(crate) const TRANSITION: u64 = 1 << 11;
/// MM_READWRITE (4) in the Protection field, bits 5..9 of a not-valid PTE.
pub(crate) const PROT_RW: u64 = 4 << 5;

/// Kinds of leaf mappings with realistic Windows flag combinations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leaf {
    /// Kernel read/write data: P|RW|A|D|G + Windows "Write" bit 11, NX (0x8000000000000963).
    KernelData,
    /// Kernel read-only data (.rdata): P|A|G, NX.
    KernelReadOnly,
    /// User-visible read-only page (KUSER_SHARED_DATA at 0x7FFE0000): P|US|A, NX.
    UserReadOnly,
    /// User read/write data (a process's private pages): P|RW|US|A|D + the "Write" bit 11, NX
    /// (0x8000000000000867).
    UserData,
    /// User executable, read-only code (an image's .text, mapped or a private copy): P|US|A,
    /// without NX and RW.
    UserCode,
    /// Device memory (legacy VGA): P|RW|PWT|PCD|A|D|G, NX.
    Device,
}

impl Mode {
    pub(crate) fn entry_size(self) -> u64 {
        match self {
            Mode::NonPae => 4,
            _ => 8,
        }
    }

    /// (shift, index bits) of each level, root first.
    fn levels(self) -> &'static [(u32, u32)] {
        match self {
            Mode::X64 => &[(39, 9), (30, 9), (21, 9), (12, 9)],
            Mode::Pae => &[(30, 2), (21, 9), (12, 9)],
            Mode::NonPae => &[(22, 10), (12, 10)],
        }
    }

    pub(crate) fn depth_count(self) -> usize {
        self.levels().len()
    }

    /// Depth of the page directory (the level whose PS bit means 2/4 MiB pages).
    pub(crate) fn pd_depth(self) -> usize {
        self.depth_count() - 2
    }

    /// Bytes covered by one PDE: 2 MiB (x64, PAE) or 4 MiB (non-PAE).
    pub(crate) fn pde_span(self) -> u64 {
        match self {
            Mode::NonPae => 4 << 20,
            _ => 2 << 20,
        }
    }

    fn addr_mask(self) -> u64 {
        match self {
            Mode::NonPae => 0xFFFF_F000,
            _ => 0x000F_FFFF_FFFF_F000,
        }
    }

    fn is_user(self, va: u64) -> bool {
        match self {
            Mode::X64 => va < 0x0000_8000_0000_0000,
            _ => va < 0x8000_0000,
        }
    }

    /// NX exists in x64 and PAE entries only.
    fn nx(self) -> u64 {
        match self {
            Mode::NonPae => 0,
            _ => NX,
        }
    }

    /// A valid 4 KiB leaf PTE for physical page `pfn`.
    pub(crate) fn leaf(self, pfn: u64, kind: Leaf) -> u64 {
        let flags = match kind {
            Leaf::KernelData => self.nx() | SW11 | G | D | A | RW | P,
            Leaf::KernelReadOnly => self.nx() | G | A | P,
            Leaf::UserReadOnly => self.nx() | A | US | P,
            Leaf::UserData => self.nx() | SW11 | D | A | US | RW | P,
            Leaf::UserCode => A | US | P,
            Leaf::Device => self.nx() | G | D | A | PCD | PWT | RW | P,
        };
        (pfn << 12) | flags
    }

    /// A large-page PDE (2 MiB / 4 MiB) or, on x64, a 1 GiB PDPTE, for physical address `pa`.
    pub(crate) fn large(self, pa: u64) -> u64 {
        pa | self.nx() | G | PS | D | A | RW | P
    }

    /// Flags of an intermediate table entry. Windows uses P|RW|A|D (0x63) for kernel tables,
    /// plus US for user space.
    fn table_flags(self, va: u64) -> u64 {
        let user = if self.is_user(va) { US } else { 0 };
        D | A | RW | P | user
    }
}

/// The page-table tree of the dumped address space.
#[derive(Clone, Debug)]
pub(crate) struct Pager {
    pub mode: Mode,
    /// Physical address of the root: PML4 page, PAE PDPT (32-byte aligned) or non-PAE PD page.
    pub root: u64,
    /// (VA, PA) of one page-table page that the self-map makes visible: the PML4 (x64),
    /// page directory 3 (PAE) or the page directory (non-PAE).
    pub self_map_page: (u64, u64),
    /// x64: the PML4 index of the self-reference entry; `None` on x86 (fixed self-map).
    pub self_ref_index: Option<u64>,
}

/// VA at which the x64 self-reference entry `i` maps the PML4 itself.
pub(crate) fn x64_self_map_va(i: u64) -> u64 {
    let va = (i << 39) | (i << 30) | (i << 21) | (i << 12);
    // Canonical form: sign-extend bit 47.
    if va & (1 << 47) != 0 {
        va | 0xFFFF_0000_0000_0000
    } else {
        va
    }
}

impl Pager {
    /// x64: PML4 in page `pml4_pfn` with the self-reference entry at `self_ref_index`
    /// (0x1ED before 1607, drawn at boot since; real value on Windows 10:
    /// 0x8000000000xxx063, i.e. NX|D|A|RW|P).
    pub(crate) fn new_x64(pm: &mut PhysMem, pml4_pfn: u64, self_ref_index: u64) -> Self {
        assert!((0x100..0x1FF).contains(&self_ref_index));
        let pager = Pager {
            mode: Mode::X64,
            root: pml4_pfn << 12,
            self_map_page: (x64_self_map_va(self_ref_index), pml4_pfn << 12),
            self_ref_index: Some(self_ref_index),
        };
        pm.page_mut(pml4_pfn);
        pager.write(
            pm,
            pager.root + self_ref_index * 8,
            (pml4_pfn << 12) | NX | D | A | RW | P,
        );
        pager
    }

    /// PAE: the PDPT lives at `pdpt_pfn * 0x1000 + pdpt_offset` (32-byte aligned, not page
    /// aligned). Other "processes'" PDPTs share the page (at the 32-byte slots before it) and
    /// point to an empty decoy PD, so a reader that page-aligns CR3 finds nothing.
    pub(crate) fn new_pae(pm: &mut PhysMem, pdpt_pfn: u64, pdpt_offset: u64) -> Self {
        assert!(pdpt_offset.is_multiple_of(32) && pdpt_offset != 0 && pdpt_offset < PAGE_SIZE);
        let pds: Vec<u64> = (0..4).map(|_| pm.alloc()).collect();
        let pager = Pager {
            mode: Mode::Pae,
            root: (pdpt_pfn << 12) + pdpt_offset,
            // PD3[3] maps PD3 as a page table, so PD i appears at 0xC0600000 + i * 0x1000.
            self_map_page: (0xC060_3000, pds[3] << 12),
            self_ref_index: None,
        };
        pm.page_mut(pdpt_pfn);
        let decoy_pd = pm.alloc();
        pm.page_mut(decoy_pd);
        for slot in (0..pdpt_offset).step_by(32) {
            for i in 0..4 {
                // PAE PDPTEs carry only P (and PWT/PCD); RW/US are reserved there.
                pager.write(pm, (pdpt_pfn << 12) + slot + i * 8, (decoy_pd << 12) | P);
            }
        }
        for (i, &pd) in pds.iter().enumerate() {
            pm.page_mut(pd);
            pager.write(pm, pager.root + i as u64 * 8, (pd << 12) | P);
        }
        // Self-map: VA 0xC0000000 + i * 2 MiB maps page directory i (PD 3, entries 0..3).
        for (i, &pd) in pds.iter().enumerate() {
            pager.write(
                pm,
                (pds[3] << 12) + i as u64 * 8,
                (pd << 12) | D | A | RW | P,
            );
        }
        pager
    }

    /// Non-PAE: page directory in page `pd_pfn`, self-map entry PD[0x300] (VA 0xC0000000).
    pub(crate) fn new_nonpae(pm: &mut PhysMem, pd_pfn: u64) -> Self {
        let pager = Pager {
            mode: Mode::NonPae,
            root: pd_pfn << 12,
            // PD[0x300] maps the PD as a page table; entry 0x300 of it maps the PD itself.
            self_map_page: (0xC030_0000, pd_pfn << 12),
            self_ref_index: None,
        };
        pm.page_mut(pd_pfn);
        pager.write(pm, pager.root + 0x300 * 4, (pd_pfn << 12) | D | A | RW | P);
        pager
    }

    pub(crate) fn read(&self, pm: &PhysMem, pa: u64) -> u64 {
        let page = &pm.pages()[&(pa / PAGE_SIZE)];
        let off = (pa % PAGE_SIZE) as usize;
        match self.mode {
            Mode::NonPae => get_u32(page, off) as u64,
            _ => get_u64(page, off),
        }
    }

    fn write(&self, pm: &mut PhysMem, pa: u64, value: u64) {
        let page = pm.page_mut(pa / PAGE_SIZE);
        let off = (pa % PAGE_SIZE) as usize;
        match self.mode {
            Mode::NonPae => {
                put_u32(page, off, u32::try_from(value).expect("32-bit entry"));
            }
            _ => put_u64(page, off, value),
        }
    }

    fn index(&self, va: u64, depth: usize) -> u64 {
        let (shift, bits) = self.mode.levels()[depth];
        (va >> shift) & ((1 << bits) - 1)
    }

    /// Physical address of the entry at `depth` (0 = root) that translates `va`, creating the
    /// intermediate tables above it. Panics if an existing entry on the way is not a table
    /// pointer (a layout clash inside the forge).
    pub(crate) fn entry_pa(&self, pm: &mut PhysMem, va: u64, depth: usize) -> u64 {
        if let Some(i) = self.self_ref_index {
            assert_ne!(
                self.index(va, 0),
                i,
                "forge layout clash: {va:#x} lies in the self-map slot PML4[{i:#x}]"
            );
        }
        let mut table = self.root;
        for d in 0..depth {
            let epa = table + self.index(va, d) * self.mode.entry_size();
            let mut e = self.read(pm, epa);
            if e & P == 0 {
                assert_eq!(
                    e, 0,
                    "forge layout clash: non-present entry above {va:#x} at depth {d}"
                );
                assert!(
                    !(self.mode == Mode::Pae && d == 0),
                    "PAE PDPT entries are fixed"
                );
                let pfn = pm.alloc();
                pm.page_mut(pfn);
                e = (pfn << 12) | self.mode.table_flags(va);
                self.write(pm, epa, e);
            } else {
                let large_possible = !(self.mode == Mode::Pae && d == 0);
                assert!(
                    !(large_possible && e & PS != 0),
                    "forge layout clash: large page above {va:#x} at depth {d}"
                );
            }
            table = e & self.mode.addr_mask();
        }
        table + self.index(va, depth) * self.mode.entry_size()
    }

    /// Write `value` as the entry at `depth` for `va` (creating upper tables as needed).
    pub(crate) fn set(&self, pm: &mut PhysMem, va: u64, depth: usize, value: u64) {
        let epa = self.entry_pa(pm, va, depth);
        let old = self.read(pm, epa);
        assert_eq!(old, 0, "forge layout clash: entry for {va:#x} already set");
        self.write(pm, epa, value);
    }

    /// Write a last-level PTE for the 4 KiB page at `va`.
    pub(crate) fn set_pte(&self, pm: &mut PhysMem, va: u64, value: u64) {
        self.set(pm, va, self.mode.depth_count() - 1, value);
    }

    /// Replace the last-level PTE of the 4 KiB page at `va`, which must be set already.
    pub(crate) fn replace_pte(&self, pm: &mut PhysMem, va: u64, value: u64) {
        let epa = self.entry_pa(pm, va, self.mode.depth_count() - 1);
        assert_ne!(self.read(pm, epa), 0, "replace_pte: {va:#x} is not mapped");
        self.write(pm, epa, value);
    }

    /// Make sure the page table that holds the PTE of `va` exists (so that a zero PTE there is a
    /// genuine "zero PTE" and not a missing table).
    pub(crate) fn ensure_pt(&self, pm: &mut PhysMem, va: u64) {
        self.entry_pa(pm, va, self.mode.depth_count() - 1);
    }

    /// Write a raw entry into a page table page that is not (yet) linked into the tree.
    pub(crate) fn write_in_table(&self, pm: &mut PhysMem, table_pfn: u64, index: u64, value: u64) {
        self.write(
            pm,
            (table_pfn << 12) + index * self.mode.entry_size(),
            value,
        );
    }

    /// Index of `va` in its last-level table.
    pub(crate) fn pt_index(&self, va: u64) -> u64 {
        self.index(va, self.mode.depth_count() - 1)
    }
}

/// The translation the forge intends: virtual ranges -> physical ranges. Virtual addresses not
/// in the map are not mapped (or mapped by a not-valid entry). A mapped page is readable iff
/// its physical page is stored in the dump.
#[derive(Clone, Debug, Default)]
pub(crate) struct VirtMap {
    /// va start -> (size, pa start); ranges never overlap.
    ranges: BTreeMap<u64, (u64, u64)>,
}

impl VirtMap {
    pub(crate) fn insert(&mut self, va: u64, size: u64, pa: u64) {
        if let Some((&s, &(sz, _))) = self.ranges.range(..va + size).next_back() {
            assert!(s + sz <= va, "VirtMap overlap at {va:#x}");
        }
        self.ranges.insert(va, (size, pa));
    }

    /// Every mapped range as (VA, size, PA), ascending by VA.
    pub(crate) fn mapped(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.ranges.iter().map(|(&va, &(size, pa))| (va, size, pa))
    }

    /// Re-point the one-page range that starts at `va` at `pa`.
    pub(crate) fn remap_page(&mut self, va: u64, pa: u64) {
        let r = self.ranges.get_mut(&va).expect("remap_page: a mapped page");
        assert_eq!(r.0, PAGE_SIZE, "remap_page: a one-page range");
        r.1 = pa;
    }

    /// Every mapped range (va, size), ascending.
    #[cfg(test)]
    pub(crate) fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&va, &(size, _))| (va, size))
    }

    pub(crate) fn translate(&self, va: u64) -> Option<u64> {
        let (&s, &(sz, pa)) = self.ranges.range(..=va).next_back()?;
        (va < s + sz).then(|| pa + (va - s))
    }

    /// Bytes at `va..va+len` as a correct reader must return them, or the first virtual address
    /// that cannot be read (the start itself if the first byte is unreadable).
    pub(crate) fn read(&self, pm: &PhysMem, va: u64, len: usize) -> Result<Vec<u8>, u64> {
        let mut out = Vec::with_capacity(len);
        let mut cur = va;
        let end = va + len as u64;
        while cur < end {
            let n = (PAGE_SIZE - cur % PAGE_SIZE).min(end - cur);
            match self.translate(cur) {
                Some(pa) if pm.is_stored(pa / PAGE_SIZE) => {
                    out.extend_from_slice(&pm.read(pa, n as usize));
                }
                _ => return Err(cur),
            }
            cur += n;
        }
        Ok(out)
    }
}
