//! The probe area: virtual pages mapped in every way a reader must get right (§1.5), each
//! paired with a read whose result is known by construction.
//!
//! Layout (x64 base 0xFFFFA08D5E000000, x86 base 0x8C000000; `span` = bytes per PDE, 2 MiB or
//! 4 MiB):
//!
//! | region | VA | what |
//! |---|---|---|
//! | A | base .. base+span | one page table of 4 KiB pages, see `PAGE_*` below |
//! | B | base+span | a 2 MiB (x64, PAE) or 4 MiB (non-PAE) large page |
//! | C | B+span | PDE with Valid 0 and Transition 1 (not last level), pointing to a decoy PT |
//! | D | C+span | zero PDE |
//! | E | D+span | not-present, non-zero PDE (pagefile format) pointing to the same decoy PT |
//! | huge | x64 0xFFFFA08E00000000 | a 1 GiB page (PDPTE.PS) |

use crate::dump::paging::{
    Leaf, Mode, Pager, VirtMap, A, D, G, NX, P, PROTOTYPE, PROT_RW, RW, SW10, SW11, SW9, TRANSITION,
};
use crate::dump::phys::PhysMem;
use crate::util::PAGE_SIZE;

/// Page numbers inside region A.
const PAGE_PLAIN: u64 = 0x10;
const PAGE_CROSS: u64 = 0x21; // and 0x22
const PAGE_TRANSITION: u64 = 0x30;
const PAGE_PROTOTYPE: u64 = 0x31;
const PAGE_PROTOTYPE_BIT11: u64 = 0x32;
const PAGE_ZERO_PTE: u64 = 0x33;
const PAGE_UNSTORED: u64 = 0x34;
const PAGE_MEMORY_HOLE: u64 = 0x35;
const PAGE_FLAG_BITS: u64 = 0x40;
const PAGE_INTO_ZERO: u64 = 0x50; // 0x51 has a zero PTE
const PAGE_INTO_UNSTORED: u64 = 0x60; // 0x61 is valid but not stored

/// Legacy VGA text buffer: a PFN in the hole between run 0 and run 1, never stored.
const VGA_PFN: u64 = 0xB8;

/// A probe before its expectation is computed: (name, va, len).
pub(crate) type ProbeSpec = (String, u64, usize);

pub(crate) struct ProbeArea {
    pub base: u64,
    /// x64 only: VA of the 1 GiB page.
    pub huge_va: Option<u64>,
    /// First PFN of the naturally aligned block backing the large page (reserved early).
    pub large_block_pfn: u64,
}

struct Ctx<'a> {
    pm: &'a mut PhysMem,
    pager: &'a Pager,
    vmap: &'a mut VirtMap,
    probes: Vec<ProbeSpec>,
    /// Region A's first page.
    base: u64,
}

impl Ctx<'_> {
    fn mode(&self) -> Mode {
        self.pager.mode
    }

    /// Map `va` (4 KiB) to a fresh pattern page with a valid PTE of `kind`.
    fn map_pattern(&mut self, va: u64) -> u64 {
        let pfn = self.pm.alloc();
        self.pm.set_pattern(pfn);
        self.map_pfn(va, pfn, self.mode().leaf(pfn, Leaf::KernelData));
        pfn
    }

    /// Write a PTE that a correct reader follows to `pfn` and record it.
    fn map_pfn(&mut self, va: u64, pfn: u64, pte: u64) {
        self.pager.set_pte(self.pm, va, pte);
        self.vmap.insert(va, PAGE_SIZE, pfn << 12);
    }

    /// Write a PTE that a correct reader must not follow.
    fn set_unreadable_pte(&mut self, va: u64, pte: u64) {
        self.pager.set_pte(self.pm, va, pte);
    }

    fn probe(&mut self, name: &str, va: u64, len: usize) {
        self.probes.push((name.to_string(), va, len));
    }
}

pub(crate) fn build(
    pm: &mut PhysMem,
    pager: &Pager,
    vmap: &mut VirtMap,
    area: &ProbeArea,
) -> Vec<ProbeSpec> {
    let mut cx = Ctx {
        pm,
        pager,
        vmap,
        probes: Vec::new(),
        base: area.base,
    };
    let span = pager.mode.pde_span();
    assert_eq!(area.base % span, 0);
    pager.ensure_pt(cx.pm, area.base);
    // Region A, page by page.
    let plain_pfn = cx.place_readable_pages();
    cx.place_unreadable_ptes(plain_pfn);
    cx.place_odd_valid_ptes();
    cx.place_reads_into_unreadable();
    // Regions B to E, one PDE span each.
    let large_va = area.base + span;
    cx.place_large_page(large_va, area.large_block_pfn);
    cx.place_decoy_pdes(large_va + span);
    if let Some(huge_va) = area.huge_va {
        cx.place_huge_page(huge_va);
    }
    cx.probes
}

impl Ctx<'_> {
    /// Page `n` of region A.
    fn page(&self, n: u64) -> u64 {
        self.base + n * PAGE_SIZE
    }

    /// A plain page, two pages on non-adjacent PFNs, a transition PTE. Returns the plain
    /// page's PFN.
    fn place_readable_pages(&mut self) -> u64 {
        let mode = self.mode();
        // A plain 4 KiB page, read whole.
        let plain_pfn = self.map_pattern(self.page(PAGE_PLAIN));
        self.probe("plain_page", self.page(PAGE_PLAIN), PAGE_SIZE as usize);

        // Two consecutive virtual pages on non-adjacent physical pages (the second one lower).
        let p1 = self.pm.alloc();
        let mut p2 = self.pm.alloc();
        while p2 + 1 >= p1 && p2 <= p1 + 1 {
            p2 = self.pm.alloc();
        }
        let (lo, hi) = if p1 > p2 { (p2, p1) } else { (p1, p2) };
        for (n, pfn) in [(PAGE_CROSS, hi), (PAGE_CROSS + 1, lo)] {
            self.pm.set_pattern(pfn);
            self.map_pfn(self.page(n), pfn, mode.leaf(pfn, Leaf::KernelData));
        }
        self.probe(
            "cross_page_noncontiguous",
            self.page(PAGE_CROSS + 1) - 0x20,
            0x40,
        );

        // Transition PTE at the last level: Valid 0, Transition (11) 1, Prototype (10) 0 ->
        // the page is on the standby/modified list and its content is valid.
        let t_pfn = self.pm.alloc();
        self.pm.set_pattern(t_pfn);
        self.map_pfn(
            self.page(PAGE_TRANSITION),
            t_pfn,
            (t_pfn << 12) | TRANSITION | PROT_RW | RW,
        );
        self.probe("transition_pte", self.page(PAGE_TRANSITION) + 0x3C0, 0x40);
        plain_pfn
    }

    /// Prototype PTEs and a zero PTE.
    fn place_unreadable_ptes(&mut self, plain_pfn: u64) {
        // Prototype PTEs (Valid 0, bit 10 set): not readable from a kernel dump. Their PFN
        // bits name a stored page, so a reader that ignores bit 10 reads something.
        self.set_unreadable_pte(
            self.page(PAGE_PROTOTYPE),
            (plain_pfn << 12) | PROTOTYPE | PROT_RW,
        );
        self.probe("prototype_pte", self.page(PAGE_PROTOTYPE) + 0x100, 0x40);
        self.set_unreadable_pte(
            self.page(PAGE_PROTOTYPE_BIT11),
            (plain_pfn << 12) | PROTOTYPE | TRANSITION | PROT_RW,
        );
        self.probe(
            "prototype_pte_with_bit11",
            self.page(PAGE_PROTOTYPE_BIT11) + 0x100,
            0x40,
        );

        // A zero PTE inside a present page table.
        self.probe("zero_pte", self.page(PAGE_ZERO_PTE) + 0x80, 0x40);
    }

    /// Valid PTEs to a page not in the dump, to a memory hole, and with flag bits to mask.
    fn place_odd_valid_ptes(&mut self) {
        let mode = self.mode();
        // A valid PTE whose physical page is not in the dump.
        let unstored = self.pm.alloc_unstored();
        self.map_pfn(
            self.page(PAGE_UNSTORED),
            unstored,
            mode.leaf(unstored, Leaf::KernelData),
        );
        self.probe(
            "valid_pte_page_not_in_dump",
            self.page(PAGE_UNSTORED) + 0x200,
            0x40,
        );

        // A valid PTE to device memory in a hole of the memory map (legacy VGA).
        self.map_pfn(
            self.page(PAGE_MEMORY_HOLE),
            VGA_PFN,
            mode.leaf(VGA_PFN, Leaf::Device),
        );
        self.probe(
            "valid_pte_memory_hole",
            self.page(PAGE_MEMORY_HOLE) + 0x10,
            0x40,
        );

        // A valid PTE with NX and software bits that must be masked off.
        let f_pfn = self.pm.alloc();
        self.pm.set_pattern(f_pfn);
        let flags = match mode {
            // NX (63), software/WSLE bits 52..62, software bits 9..11.
            Mode::X64 => NX | (0x7FF << 52) | SW9 | SW10 | SW11 | D | A | RW | P,
            // PAE: bits 52..62 are reserved, so NX and 9..11 only.
            Mode::Pae => NX | SW9 | SW10 | SW11 | D | A | RW | P,
            Mode::NonPae => SW9 | SW10 | SW11 | G | D | A | RW | P,
        };
        self.map_pfn(self.page(PAGE_FLAG_BITS), f_pfn, (f_pfn << 12) | flags);
        self.probe("pte_flag_bits", self.page(PAGE_FLAG_BITS) + 0x7F0, 0x40);
    }

    /// Reads that start in a readable page and run into an unreadable one.
    fn place_reads_into_unreadable(&mut self) {
        let mode = self.mode();
        self.map_pattern(self.page(PAGE_INTO_ZERO));
        self.probe(
            "read_into_zero_pte",
            self.page(PAGE_INTO_ZERO + 1) - 0x80,
            0x100,
        );
        self.map_pattern(self.page(PAGE_INTO_UNSTORED));
        let unstored2 = self.pm.alloc_unstored();
        self.map_pfn(
            self.page(PAGE_INTO_UNSTORED + 1),
            unstored2,
            mode.leaf(unstored2, Leaf::KernelData),
        );
        self.probe(
            "read_into_page_not_in_dump",
            self.page(PAGE_INTO_UNSTORED + 1) - 0x40,
            0x80,
        );
    }

    /// Region B: large page (PDE.PS) at `large_va` on the block at `block`, entered from the
    /// last 4 KiB page of region A.
    fn place_large_page(&mut self, large_va: u64, block: u64) {
        let (mode, pager) = (self.mode(), self.pager);
        let span = mode.pde_span();
        self.map_pattern(large_va - PAGE_SIZE);
        let deep = if mode == Mode::NonPae {
            0x2B_7FE4
        } else {
            0x17_AFE4
        };
        for pfn in [
            block,
            block + deep / PAGE_SIZE,
            block + deep / PAGE_SIZE + 1,
        ] {
            self.pm.set_pattern(pfn);
        }
        pager.set(self.pm, large_va, mode.pd_depth(), mode.large(block << 12));
        self.vmap.insert(large_va, span, block << 12);
        self.probe("cross_into_large_page", large_va - 0x20, 0x40);
        let large_name = if mode == Mode::NonPae {
            "large_page_4m"
        } else {
            "large_page_2m"
        };
        self.probe(large_name, large_va + deep, 0x40);
        // A part of the large page the forge never wrote: zeros in a full dump (every in-run
        // page is stored), not stored in a bitmap dump.
        self.probe(
            "large_page_untouched_part",
            large_va + span / 2 + 0x40,
            0x20,
        );
    }

    /// Regions C, D and E from `c_va`: a transition PDE and a not-present PDE sharing one
    /// decoy page table whose PTE leads to stored content, and a zero PDE between them.
    fn place_decoy_pdes(&mut self, c_va: u64) {
        let (mode, pager) = (self.mode(), self.pager);
        let span = mode.pde_span();
        let d_va = c_va + span;
        let e_va = d_va + span;
        let decoy_pt = self.pm.alloc();
        self.pm.page_mut(decoy_pt);
        let decoy = self.pm.alloc();
        self.pm.set_pattern(decoy);
        let decoy_off = 0x5000;
        pager.write_in_table(
            self.pm,
            decoy_pt,
            pager.pt_index(c_va + decoy_off),
            mode.leaf(decoy, Leaf::KernelData),
        );
        assert_eq!(
            pager.pt_index(c_va + decoy_off),
            pager.pt_index(e_va + decoy_off)
        );
        // C: Valid 0 + Transition 1 at the PDE level: transition only counts at the last level.
        pager.set(
            self.pm,
            c_va,
            mode.pd_depth(),
            (decoy_pt << 12) | TRANSITION | PROT_RW,
        );
        self.probe(
            "transition_pde_not_last_level",
            c_va + decoy_off + 0x100,
            0x40,
        );
        // D: zero PDE.
        self.probe("pde_zero", d_va + 0x3000 + 0x10, 0x40);
        // E: not-present PDE that is not zero (paged-out page table).
        pager.set(self.pm, e_va, mode.pd_depth(), (decoy_pt << 12) | PROT_RW);
        self.probe("pde_not_present", e_va + decoy_off + 0x100, 0x40);
    }

    /// x64: 1 GiB page (PDPTE.PS) at `huge_va`, read deep inside.
    fn place_huge_page(&mut self, huge_va: u64) {
        let (mode, pager) = (self.mode(), self.pager);
        let total = self.pm.total_pfns;
        let gib = 0x4_0000u64; // pages per GiB
        let hbase = if total >= 2 * gib {
            (total / 2) / gib * gib
        } else {
            0
        };
        let hend = (hbase + gib).min(total);
        let target = self.pm.alloc_in(hbase + (hend - hbase) * 5 / 8, hend);
        self.pm.set_pattern(target);
        pager.set(self.pm, huge_va, 1, mode.large(hbase << 12));
        self.vmap.insert(huge_va, 1 << 30, hbase << 12);
        self.probe(
            "huge_page_1g",
            huge_va + ((target - hbase) << 12) + 0x7C8,
            0x40,
        );
    }
}
