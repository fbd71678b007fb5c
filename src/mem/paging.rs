//! Page-table walks: x64 4-level (1 GiB and 2 MiB large pages), x86 PAE (2 MiB large pages,
//! CR3 32-byte aligned) and x86 non-PAE (4 MiB large pages). Transition PTEs (Valid 0,
//! Transition 1, Prototype 0) are accepted at the last level only
//! (crash-dump-format.md §1.5; kdmp-parser-rs, volatility3).

use super::error::{MemError, PagingLevel};
use crate::addr::{PhysAddr, VirtAddr};
use crate::bytes::LeBytes;
use crate::dump::{DumpFile, PageLookup};

/// Paging mode of an address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagingMode {
    X64,
    Pae,
    NonPae,
}

/// The result of translating one virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    pub va: VirtAddr,
    pub pa: PhysAddr,
    /// Size of the page that maps `va` (4 KiB, 2 MiB, 4 MiB or 1 GiB).
    pub page_size: u64,
    /// The last-level entry was a transition PTE (page on the standby/modified list).
    pub transition: bool,
}

const PRESENT: u64 = 1;
const LARGE: u64 = 1 << 7;
const PROTOTYPE: u64 = 1 << 10;
const TRANSITION: u64 = 1 << 11;
/// Physical address bits 12..51 of an 8-byte entry (NX and software bits 52..63 cleared).
const ADDR_MASK_64: u64 = 0x000F_FFFF_FFFF_F000;
const ADDR_MASK_1G: u64 = 0x000F_FFFF_C000_0000;
const ADDR_MASK_2M: u64 = 0x000F_FFFF_FFE0_0000;
const ADDR_MASK_32: u64 = 0xFFFF_F000;
const ADDR_MASK_4M: u64 = 0xFFC0_0000;

/// A last-level entry maps a page if it is valid, or a transition PTE.
fn last_level_maps(e: u64) -> (bool, bool) {
    if e & PRESENT != 0 {
        (true, false)
    } else if e & TRANSITION != 0 && e & PROTOTYPE == 0 {
        (true, true)
    } else {
        (false, false)
    }
}

/// Read one page-table entry of `size` bytes at physical `entry_pa`.
fn entry(
    dump: &DumpFile,
    va: VirtAddr,
    level: PagingLevel,
    entry_pa: PhysAddr,
    size: usize,
) -> Result<u64, MemError> {
    match dump.page(entry_pa.pfn()) {
        PageLookup::Present(p) => {
            let o = entry_pa.page_offset() as usize;
            let v = if size == 8 {
                p.u64_at(o)
            } else {
                p.u32_at(o).map(u64::from)
            };
            // Entries are naturally aligned, so they never straddle a page.
            v.ok_or(MemError::TableMissing {
                va,
                level,
                table_pa: entry_pa,
            })
        }
        PageLookup::NotInDump | PageLookup::BeyondEof { .. } => Err(MemError::TableMissing {
            va,
            level,
            table_pa: PhysAddr::new(entry_pa.get() & !0xFFF),
        }),
    }
}

fn not_present(va: VirtAddr, level: PagingLevel, e: u64, entry_pa: PhysAddr) -> MemError {
    MemError::NotPresent {
        va,
        level,
        entry: e,
        entry_pa,
    }
}

/// Translate `va` with the tables rooted at `dtb` (a physical address already masked).
pub fn translate(
    dump: &DumpFile,
    mode: PagingMode,
    dtb: PhysAddr,
    va: VirtAddr,
) -> Result<Translation, MemError> {
    match mode {
        PagingMode::X64 => translate_x64(dump, dtb, va),
        PagingMode::Pae => translate_pae(dump, dtb, va),
        PagingMode::NonPae => translate_nonpae(dump, dtb, va),
    }
}

fn done(va: VirtAddr, pa: u64, page_size: u64, transition: bool) -> Translation {
    Translation {
        va,
        pa: PhysAddr::new(pa),
        page_size,
        transition,
    }
}

/// Where the upper levels of an x64 walk end: a large page, or the leaf table (PT) and the
/// physical address of `va`'s PTE in it.
enum X64Upper {
    Mapped(Translation),
    Pte(PhysAddr),
}

/// The PML4, PDPT and PD levels of an x64 walk.
fn x64_upper(dump: &DumpFile, dtb: PhysAddr, va: VirtAddr) -> Result<X64Upper, MemError> {
    let v = va.get();
    // Canonical: bits 63..47 all equal.
    let top = v >> 47;
    if top != 0 && top != 0x1_FFFF {
        return Err(MemError::NonCanonical { va });
    }
    let idx = |shift: u32| (v >> shift) & 0x1FF;
    let pml4e_pa = PhysAddr::new((dtb.get() & ADDR_MASK_64) + idx(39) * 8);
    let pml4e = entry(dump, va, PagingLevel::Pml4, pml4e_pa, 8)?;
    if pml4e & PRESENT == 0 {
        return Err(not_present(va, PagingLevel::Pml4, pml4e, pml4e_pa));
    }
    let pdpte_pa = PhysAddr::new((pml4e & ADDR_MASK_64) + idx(30) * 8);
    let pdpte = entry(dump, va, PagingLevel::Pdpt, pdpte_pa, 8)?;
    if pdpte & PRESENT == 0 {
        return Err(not_present(va, PagingLevel::Pdpt, pdpte, pdpte_pa));
    }
    if pdpte & LARGE != 0 {
        return Ok(X64Upper::Mapped(done(
            va,
            (pdpte & ADDR_MASK_1G) | (v & 0x3FFF_FFFF),
            1 << 30,
            false,
        )));
    }
    let pde_pa = PhysAddr::new((pdpte & ADDR_MASK_64) + idx(21) * 8);
    let pde = entry(dump, va, PagingLevel::Pd, pde_pa, 8)?;
    if pde & PRESENT == 0 {
        return Err(not_present(va, PagingLevel::Pd, pde, pde_pa));
    }
    if pde & LARGE != 0 {
        return Ok(X64Upper::Mapped(done(
            va,
            (pde & ADDR_MASK_2M) | (v & 0x1F_FFFF),
            1 << 21,
            false,
        )));
    }
    Ok(X64Upper::Pte(PhysAddr::new(
        (pde & ADDR_MASK_64) + idx(12) * 8,
    )))
}

fn translate_x64(dump: &DumpFile, dtb: PhysAddr, va: VirtAddr) -> Result<Translation, MemError> {
    let pte_pa = match x64_upper(dump, dtb, va)? {
        X64Upper::Mapped(t) => return Ok(t),
        X64Upper::Pte(pa) => pa,
    };
    let pte = entry(dump, va, PagingLevel::Pt, pte_pa, 8)?;
    match last_level_maps(pte) {
        (true, transition) => Ok(done(
            va,
            (pte & ADDR_MASK_64) | (va.get() & 0xFFF),
            1 << 12,
            transition,
        )),
        _ => Err(not_present(va, PagingLevel::Pt, pte, pte_pa)),
    }
}

/// x64: the leaf page table (PT) that maps `va`'s 2 MiB region, as the dump stores it, when
/// the walk down to it succeeds and the region is not a large page. Lets multi-page reads look
/// the following PTEs up directly (their entries decide exactly as [`translate`] would).
pub fn leaf_table_x64(dump: &DumpFile, dtb: PhysAddr, va: VirtAddr) -> Option<&[u8]> {
    match x64_upper(dump, dtb, va).ok()? {
        X64Upper::Pte(pa) => match dump.page(pa.pfn()) {
            PageLookup::Present(p) => Some(p),
            _ => None,
        },
        X64Upper::Mapped(_) => None,
    }
}

/// The physical address a leaf PTE maps (present, or transition at the last level), as
/// [`translate`] decides it; None otherwise.
pub fn pte_maps(pte: u64) -> Option<PhysAddr> {
    last_level_maps(pte)
        .0
        .then_some(PhysAddr::new(pte & ADDR_MASK_64))
}

fn translate_pae(dump: &DumpFile, dtb: PhysAddr, va: VirtAddr) -> Result<Translation, MemError> {
    let v = va.get();
    // PAE CR3 holds a 32-byte-aligned PDPT address, not a page-aligned one.
    let pdpte_pa = PhysAddr::new((dtb.get() & 0xFFFF_FFE0) + ((v >> 30) & 3) * 8);
    let pdpte = entry(dump, va, PagingLevel::Pdpt, pdpte_pa, 8)?;
    if pdpte & PRESENT == 0 {
        return Err(not_present(va, PagingLevel::Pdpt, pdpte, pdpte_pa));
    }
    let pde_pa = PhysAddr::new((pdpte & ADDR_MASK_64) + ((v >> 21) & 0x1FF) * 8);
    let pde = entry(dump, va, PagingLevel::Pd, pde_pa, 8)?;
    if pde & PRESENT == 0 {
        return Err(not_present(va, PagingLevel::Pd, pde, pde_pa));
    }
    if pde & LARGE != 0 {
        return Ok(done(
            va,
            (pde & ADDR_MASK_2M) | (v & 0x1F_FFFF),
            1 << 21,
            false,
        ));
    }
    let pte_pa = PhysAddr::new((pde & ADDR_MASK_64) + ((v >> 12) & 0x1FF) * 8);
    let pte = entry(dump, va, PagingLevel::Pt, pte_pa, 8)?;
    match last_level_maps(pte) {
        (true, transition) => Ok(done(
            va,
            (pte & ADDR_MASK_64) | (v & 0xFFF),
            1 << 12,
            transition,
        )),
        _ => Err(not_present(va, PagingLevel::Pt, pte, pte_pa)),
    }
}

fn translate_nonpae(dump: &DumpFile, dtb: PhysAddr, va: VirtAddr) -> Result<Translation, MemError> {
    let v = va.get();
    let pde_pa = PhysAddr::new((dtb.get() & ADDR_MASK_32) + ((v >> 22) & 0x3FF) * 4);
    let pde = entry(dump, va, PagingLevel::Pd, pde_pa, 4)?;
    if pde & PRESENT == 0 {
        return Err(not_present(va, PagingLevel::Pd, pde, pde_pa));
    }
    if pde & LARGE != 0 {
        return Ok(done(
            va,
            (pde & ADDR_MASK_4M) | (v & 0x3F_FFFF),
            1 << 22,
            false,
        ));
    }
    let pte_pa = PhysAddr::new((pde & ADDR_MASK_32) + ((v >> 12) & 0x3FF) * 4);
    let pte = entry(dump, va, PagingLevel::Pt, pte_pa, 4)?;
    match last_level_maps(pte) {
        (true, transition) => Ok(done(
            va,
            (pte & ADDR_MASK_32) | (v & 0xFFF),
            1 << 12,
            transition,
        )),
        _ => Err(not_present(va, PagingLevel::Pt, pte, pte_pa)),
    }
}

/// Does entry `index` of the paging-structure page `table` (itself at physical page `pfn`)
/// point back at that page, present and not a large page? Windows maps its paging structures
/// through such a self-reference (x64: one PML4 entry at an index randomised since 1607; PAE:
/// entry 3 of the page directory for 0xC0000000; non-PAE: PD entry 0x300).
pub fn is_self_ref(mode: PagingMode, table: &[u8], pfn: u64, index: usize) -> bool {
    match table_entry(mode, table, index) {
        Some(e) => e & PRESENT != 0 && e & LARGE == 0 && entry_pfn(mode, e) == pfn,
        None => false,
    }
}

/// The raw entry `index` of a paging-structure page.
pub fn table_entry(mode: PagingMode, table: &[u8], index: usize) -> Option<u64> {
    match mode {
        PagingMode::NonPae => table.u32_at(index * 4).map(u64::from),
        _ => table.u64_at(index * 8),
    }
}

/// The physical page an entry points to (whether or not it is present).
pub fn entry_pfn(mode: PagingMode, e: u64) -> u64 {
    match mode {
        PagingMode::NonPae => (e & ADDR_MASK_32) >> 12,
        _ => (e & ADDR_MASK_64) >> 12,
    }
}

/// Is the entry present?
pub fn entry_present(e: u64) -> bool {
    e & PRESENT != 0
}

/// Every mapping of the tables rooted at `dtb` whose virtual address lies in `[start, end)`:
/// `f(va, pa, page_size)` per present leaf (4 KiB pages, and 2 MiB / 4 MiB / 1 GiB large
/// pages as one call), in address order. At most `max_tables` tables are read (each a page,
/// the PAE PDPT 32 bytes); the walk stops there. Returns the number of tables read.
pub fn walk_mappings(
    dump: &DumpFile,
    mode: PagingMode,
    dtb: PhysAddr,
    (start, end): (u64, u64),
    max_tables: u64,
    f: &mut dyn FnMut(u64, u64, u64),
) -> u64 {
    // (shift, entry size, entries) per level, root first.
    let levels: &[(u32, usize, usize)] = match mode {
        PagingMode::X64 => &[(39, 8, 512), (30, 8, 512), (21, 8, 512), (12, 8, 512)],
        PagingMode::Pae => &[(30, 8, 4), (21, 8, 512), (12, 8, 512)],
        PagingMode::NonPae => &[(22, 4, 1024), (12, 4, 1024)],
    };
    let mut tables = 0u64;
    walk_level(
        dump,
        mode,
        levels,
        0,
        dtb.get(),
        0,
        (start, end),
        max_tables,
        &mut tables,
        f,
    );
    tables
}

/// Sign-extend a 48-bit x64 address.
fn canonical(mode: PagingMode, va: u64) -> u64 {
    if mode == PagingMode::X64 && va & (1 << 47) != 0 {
        va | 0xFFFF_0000_0000_0000
    } else {
        va
    }
}

#[allow(clippy::too_many_arguments)]
fn walk_level(
    dump: &DumpFile,
    mode: PagingMode,
    levels: &[(u32, usize, usize)],
    depth: usize,
    table_pa: u64,
    va_base: u64,
    (start, end): (u64, u64),
    max_tables: u64,
    tables: &mut u64,
    f: &mut dyn FnMut(u64, u64, u64),
) {
    if *tables >= max_tables {
        return;
    }
    *tables += 1;
    let (shift, esize, n) = levels[depth];
    let PageLookup::Present(page) = dump.page(PhysAddr::new(table_pa).pfn()) else {
        return;
    };
    let at = (table_pa & 0xFFF) as usize;
    let span = 1u64 << shift;
    let last = depth + 1 == levels.len();
    for i in 0..n {
        let va = canonical(mode, va_base + (i as u64) * span);
        if va.saturating_add(span) <= start || va >= end {
            continue;
        }
        let e = if esize == 8 {
            page.u64_at(at + i * 8)
        } else {
            page.u32_at(at + i * 4).map(u64::from)
        };
        let Some(e) = e.filter(|&e| e & PRESENT != 0) else {
            continue;
        };
        let mask = if esize == 8 {
            ADDR_MASK_64
        } else {
            ADDR_MASK_32
        };
        if e & mask == table_pa & !0xFFF && !last {
            continue; // the self-map: page tables seen as data, not mappings
        }
        let large = !last && depth > 0 && e & LARGE != 0
            || (mode == PagingMode::NonPae && depth == 0 && e & LARGE != 0);
        if last || large {
            let pa = e & mask & !(span - 1);
            f(va, pa, span);
        } else {
            walk_level(
                dump,
                mode,
                levels,
                depth + 1,
                e & mask,
                va,
                (start, end),
                max_tables,
                tables,
                f,
            );
        }
        if *tables >= max_tables {
            return;
        }
    }
}
