//! Page-table walks, with the MMU as data (issue 28, after memflow's `ArchMmuSpec`: a paging
//! mode is a table of levels, and one walker serves translation, the mapping walk and the
//! self-reference checks of discovery). The modes: x64 4-level (1 GiB and 2 MiB large
//! pages), x64 5-level (LA57, 57-bit addresses: a PML5 above the PML4), x86 PAE (2 MiB large
//! pages, CR3 32-byte aligned) and x86 non-PAE (4 MiB large pages). Transition PTEs (Valid 0,
//! Transition 1, Prototype 0) are accepted at the last level only (crash-dump-format.md §1.5;
//! kdmp-parser-rs, volatility3). A new architecture is a new [`MmuSpec`] (ARM64 also needs
//! its own descriptor bits: [`Pte`] is the x86 family's).

use super::error::{MemError, PagingLevel};
use crate::addr::{PhysAddr, VirtAddr};
use crate::bytes::LeBytes;
use crate::dump::{Arch, PageLookup, PageRef, PhysicalMemory};

/// Paging mode of an address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagingMode {
    X64,
    /// x64 with 5-level paging (CR4.LA57).
    X64La57,
    Pae,
    NonPae,
}

impl PagingMode {
    /// The mode an architecture's kernel address space uses (None: no walker yet).
    pub fn for_arch(arch: Arch) -> Option<PagingMode> {
        match arch {
            Arch::X64 => Some(PagingMode::X64),
            Arch::X86 { pae: true } => Some(PagingMode::Pae),
            Arch::X86 { pae: false } => Some(PagingMode::NonPae),
            Arch::Arm64 => None,
        }
    }

    /// This mode's table of levels.
    pub fn spec(self) -> &'static MmuSpec {
        match self {
            PagingMode::X64 => &X64,
            PagingMode::X64La57 => &X64_LA57,
            PagingMode::Pae => &PAE,
            PagingMode::NonPae => &NON_PAE,
        }
    }
}

/// One level of a walk, root first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    pub name: PagingLevel,
    /// The lowest virtual-address bit this level's index covers (its entries each map
    /// `1 << shift` bytes).
    pub shift: u32,
    /// Entries in one table of this level.
    pub entries: usize,
    /// Whether an entry of this level with the large-page bit maps a page of `1 << shift`.
    pub large_pages: bool,
}

/// A paging mode as data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmuSpec {
    pub levels: &'static [Level],
    /// Bytes per entry.
    pub entry_size: usize,
    /// The physical-address bits of an entry (the next table or the page frame).
    pub frame_mask: u64,
    /// The bits of the root register (CR3) that give the root table's address.
    pub root_mask: u64,
    /// Addresses must be sign-extended from this bit (None: every address of the width is
    /// valid).
    pub canonical_bit: Option<u32>,
}

/// Physical address bits 12..51 of an 8-byte entry (NX and software bits 52..63 cleared).
const FRAME_64: u64 = 0x000F_FFFF_FFFF_F000;
const FRAME_32: u64 = 0xFFFF_F000;

const fn level(name: PagingLevel, shift: u32, entries: usize, large_pages: bool) -> Level {
    Level {
        name,
        shift,
        entries,
        large_pages,
    }
}

/// The x64 levels below the PML5: PML4 → PDPT (1 GiB pages) → PD (2 MiB pages) → PT.
const X64_LEVELS: [Level; 4] = [
    level(PagingLevel::Pml4, 39, 512, false),
    level(PagingLevel::Pdpt, 30, 512, true),
    level(PagingLevel::Pd, 21, 512, true),
    level(PagingLevel::Pt, 12, 512, false),
];

/// x64, 4 levels.
pub const X64: MmuSpec = MmuSpec {
    levels: &X64_LEVELS,
    entry_size: 8,
    frame_mask: FRAME_64,
    root_mask: FRAME_64,
    canonical_bit: Some(47),
};

/// x64, 5 levels (LA57): a PML5 above the 4-level walk, 57-bit canonical addresses.
pub(crate) const X64_LA57: MmuSpec = MmuSpec {
    levels: &[
        level(PagingLevel::Pml5, 48, 512, false),
        X64_LEVELS[0],
        X64_LEVELS[1],
        X64_LEVELS[2],
        X64_LEVELS[3],
    ],
    canonical_bit: Some(56),
    ..X64
};

/// x86 PAE: a 4-entry PDPT at a 32-byte-aligned CR3 → PD (2 MiB pages) → PT.
pub const PAE: MmuSpec = MmuSpec {
    levels: &[
        level(PagingLevel::Pdpt, 30, 4, false),
        level(PagingLevel::Pd, 21, 512, true),
        level(PagingLevel::Pt, 12, 512, false),
    ],
    entry_size: 8,
    frame_mask: FRAME_64,
    root_mask: 0xFFFF_FFE0,
    canonical_bit: None,
};

/// x86 without PAE: PD (4 MiB pages) → PT, 4-byte entries.
pub(crate) const NON_PAE: MmuSpec = MmuSpec {
    levels: &[
        level(PagingLevel::Pd, 22, 1024, true),
        level(PagingLevel::Pt, 12, 1024, false),
    ],
    entry_size: 4,
    frame_mask: FRAME_32,
    root_mask: FRAME_32,
    canonical_bit: None,
};

impl MmuSpec {
    /// The entry index of `va` at `level`.
    fn index(&self, l: &Level, va: u64) -> u64 {
        (va >> l.shift) & (l.entries as u64 - 1)
    }

    /// Whether `va` is a valid address of this mode.
    pub(crate) fn is_canonical(&self, va: u64) -> bool {
        match self.canonical_bit {
            Some(b) => {
                let top = va >> b;
                top == 0 || top == (1u64 << (64 - b)) - 1
            }
            None => true,
        }
    }

    /// Sign-extend an address built from table indexes.
    fn canonical(&self, va: u64) -> u64 {
        match self.canonical_bit {
            Some(b) if va & (1 << b) != 0 => va | !((1u64 << b) - 1),
            _ => va,
        }
    }

    /// Bytes one entry of the level named `name` maps (the page size when it is the leaf or
    /// a large page); 4 KiB for a level this mode does not have.
    pub fn span(&self, name: PagingLevel) -> u64 {
        self.levels
            .iter()
            .find(|l| l.name == name)
            .map_or(1 << 12, |l| 1u64 << l.shift)
    }

    /// The raw entry `index` of a paging-structure page.
    pub fn table_entry(&self, table: &[u8], index: usize) -> Option<u64> {
        if self.entry_size == 8 {
            table.u64_at(index * 8)
        } else {
            table.u32_at(index * 4).map(u64::from)
        }
    }
}

/// A page-table entry of the x86 family, its bits by name (Intel SDM vol. 3 §4.5; Windows'
/// software bits: MMPTE_HARDWARE / MMPTE_TRANSITION).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pte(pub u64);

impl Pte {
    /// P: the entry maps something.
    pub(crate) const PRESENT: u64 = 1;
    /// PS: a large page at the PDPT / PD level.
    pub(crate) const LARGE: u64 = 1 << 7;
    /// Windows: a prototype PTE (not a hardware mapping).
    pub const PROTOTYPE: u64 = 1 << 10;
    /// Windows: a transition PTE (the page is on the standby or modified list).
    pub const TRANSITION: u64 = 1 << 11;

    /// The present bit is set.
    pub fn present(self) -> bool {
        self.0 & Self::PRESENT != 0
    }
    /// The large-page bit (PS) is set.
    pub fn large(self) -> bool {
        self.0 & Self::LARGE != 0
    }
    /// Not present, but its page still holds the data (transition, not prototype).
    pub fn transition(self) -> bool {
        !self.present() && self.0 & Self::TRANSITION != 0 && self.0 & Self::PROTOTYPE == 0
    }
    /// The physical address bits of the entry under `mask`.
    pub fn frame(self, mask: u64) -> u64 {
        self.0 & mask
    }
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

/// Read one page-table entry at physical `entry_pa`.
fn entry(
    mem: &dyn PhysicalMemory,
    spec: &MmuSpec,
    va: VirtAddr,
    level: PagingLevel,
    entry_pa: PhysAddr,
) -> Result<Pte, MemError> {
    // The entry alone, without mapping its page, when the container can (a crash dump's
    // positioned reads through a small per-thread cache: `PhysicalMemory::copy_small`).
    let o = entry_pa.page_offset() as usize;
    let mut e = [0u8; 8];
    let n = 8.min(4096 - o.min(4096));
    if n > 0 && mem.copy_small(entry_pa, &mut e[..n]) {
        return spec
            .table_entry(&e[..n], 0)
            .map(Pte)
            .ok_or(MemError::TableMissing {
                va,
                level,
                table_pa: entry_pa,
            });
    }
    match mem.page(entry_pa.pfn()) {
        PageLookup::Present(p) => {
            // Entries are naturally aligned, so they never straddle a page.
            p.get(o..)
                .and_then(|t| spec.table_entry(t, 0))
                .map(Pte)
                .ok_or(MemError::TableMissing {
                    va,
                    level,
                    table_pa: entry_pa,
                })
        }
        PageLookup::NotInDump | PageLookup::BeyondEof { .. } | PageLookup::Damaged { .. } => {
            Err(MemError::TableMissing {
                va,
                level,
                table_pa: PhysAddr::new(entry_pa.get() & !0xFFF),
            })
        }
    }
}

/// Where a walk stopped above the leaf: a large page, or the leaf table and `va`'s entry in
/// it.
enum Upper {
    Mapped(Translation),
    Leaf(PhysAddr),
}

/// Every level but the last of `va`'s walk.
fn upper(
    mem: &dyn PhysicalMemory,
    spec: &MmuSpec,
    dtb: PhysAddr,
    va: VirtAddr,
) -> Result<Upper, MemError> {
    let v = va.get();
    if !spec.is_canonical(v) {
        return Err(MemError::NonCanonical { va });
    }
    let (last, above) = spec.levels.split_last().expect("a mode has levels");
    let mut table = dtb.get() & spec.root_mask;
    for l in above {
        let entry_pa = PhysAddr::new(table + spec.index(l, v) * spec.entry_size as u64);
        let e = entry(mem, spec, va, l.name, entry_pa)?;
        if !e.present() {
            return Err(not_present(va, l.name, e.0, entry_pa));
        }
        if l.large_pages && e.large() {
            let span = 1u64 << l.shift;
            return Ok(Upper::Mapped(Translation {
                va,
                pa: PhysAddr::new((e.frame(spec.frame_mask) & !(span - 1)) | (v & (span - 1))),
                page_size: span,
                transition: false,
            }));
        }
        table = e.frame(spec.frame_mask);
    }
    Ok(Upper::Leaf(PhysAddr::new(
        table + spec.index(last, v) * spec.entry_size as u64,
    )))
}

fn not_present(va: VirtAddr, level: PagingLevel, e: u64, entry_pa: PhysAddr) -> MemError {
    MemError::NotPresent {
        va,
        level,
        entry: e,
        entry_pa,
    }
}

/// Translate `va` with the tables rooted at `dtb` (CR3; the mode masks it).
pub fn translate(
    mem: &dyn PhysicalMemory,
    mode: PagingMode,
    dtb: PhysAddr,
    va: VirtAddr,
) -> Result<Translation, MemError> {
    let spec = mode.spec();
    let pte_pa = match upper(mem, spec, dtb, va)? {
        Upper::Mapped(t) => return Ok(t),
        Upper::Leaf(pa) => pa,
    };
    let pte = entry(mem, spec, va, PagingLevel::Pt, pte_pa)?;
    match leaf_maps(spec, pte) {
        Some((frame, transition)) => Ok(Translation {
            va,
            pa: PhysAddr::new(frame | (va.get() & 0xFFF)),
            page_size: 1 << 12,
            transition,
        }),
        None => Err(not_present(va, PagingLevel::Pt, pte.0, pte_pa)),
    }
}

/// The page a leaf entry maps (present, or transition) and whether it is a transition PTE.
fn leaf_maps(spec: &MmuSpec, pte: Pte) -> Option<(u64, bool)> {
    (pte.present() || pte.transition()).then(|| (pte.frame(spec.frame_mask), pte.transition()))
}

/// x64: the leaf page table (PT) that maps `va`'s 2 MiB region, as the dump stores it, when
/// the walk down to it succeeds and the region is not a large page. Lets multi-page reads look
/// the following PTEs up directly (their entries decide exactly as [`translate`] would).
pub(crate) fn leaf_table_x64(
    mem: &dyn PhysicalMemory,
    dtb: PhysAddr,
    va: VirtAddr,
) -> Option<PageRef<'_>> {
    match upper(mem, &X64, dtb, va).ok()? {
        Upper::Leaf(pa) => match mem.page(pa.pfn()) {
            PageLookup::Present(p) => Some(p),
            _ => None,
        },
        Upper::Mapped(_) => None,
    }
}

/// The physical address an x64 leaf PTE maps (present, or transition at the last level), as
/// [`translate`] decides it; None otherwise.
pub(crate) fn pte_maps(pte: u64) -> Option<PhysAddr> {
    leaf_maps(&X64, Pte(pte)).map(|(f, _)| PhysAddr::new(f))
}

/// Does entry `index` of the paging-structure page `table` (itself at physical page `pfn`)
/// point back at that page, present and not a large page? Windows maps its paging structures
/// through such a self-reference (x64: one PML4 entry at an index randomised since 1607; PAE:
/// entry 3 of the page directory for 0xC0000000; non-PAE: PD entry 0x300).
pub fn is_self_ref(mode: PagingMode, table: &[u8], pfn: u64, index: usize) -> bool {
    match table_entry(mode, table, index).map(Pte) {
        Some(e) => e.present() && !e.large() && entry_pfn(mode, e.0) == pfn,
        None => false,
    }
}

/// The raw entry `index` of a paging-structure page.
pub fn table_entry(mode: PagingMode, table: &[u8], index: usize) -> Option<u64> {
    mode.spec().table_entry(table, index)
}

/// The physical page an entry points to (whether or not it is present).
pub fn entry_pfn(mode: PagingMode, e: u64) -> u64 {
    Pte(e).frame(mode.spec().frame_mask) >> 12
}

/// Is the entry present?
pub fn entry_present(e: u64) -> bool {
    Pte(e).present()
}

/// Is the entry a large page (at a level that has them)?
pub fn entry_large(e: u64) -> bool {
    Pte(e).large()
}

/// Every mapping of the tables rooted at `dtb` whose virtual address lies in `[start, end)`:
/// `f(va, pa, page_size)` per present leaf (4 KiB pages, and 2 MiB / 4 MiB / 1 GiB large
/// pages as one call), in address order. At most `max_tables` tables are read (each a page,
/// the PAE PDPT 32 bytes); the walk stops there. Returns the number of tables read.
pub(crate) fn walk_mappings(
    mem: &dyn PhysicalMemory,
    mode: PagingMode,
    dtb: PhysAddr,
    range: (u64, u64),
    max_tables: u64,
    f: &mut dyn FnMut(u64, u64, u64),
) -> u64 {
    let spec = mode.spec();
    let mut w = MappingWalk {
        mem,
        spec,
        range,
        max_tables,
        tables: 0,
        f,
    };
    w.level(0, dtb.get() & spec.root_mask, 0);
    w.tables
}

/// The state of one [`walk_mappings`].
struct MappingWalk<'a, 'f> {
    mem: &'a dyn PhysicalMemory,
    spec: &'static MmuSpec,
    range: (u64, u64),
    max_tables: u64,
    tables: u64,
    f: &'f mut dyn FnMut(u64, u64, u64),
}

impl MappingWalk<'_, '_> {
    fn level(&mut self, depth: usize, table_pa: u64, va_base: u64) {
        if self.tables >= self.max_tables {
            return;
        }
        self.tables += 1;
        let spec = self.spec;
        let l = spec.levels[depth];
        // The table copied with a positioned read where the container can (no page of the
        // mapping faulted in), else as the container holds it.
        let mut copy = [0u8; 4096];
        let pfn = PhysAddr::new(table_pa).pfn();
        let held;
        let page: &[u8] = if self.mem.copy_page(pfn, &mut copy) {
            &copy
        } else {
            let PageLookup::Present(p) = self.mem.page(pfn) else {
                return;
            };
            held = p;
            &held
        };
        let at = (table_pa & 0xFFF) as usize;
        let span = 1u64 << l.shift;
        let last = depth + 1 == spec.levels.len();
        let (start, end) = self.range;
        for i in 0..l.entries {
            let va = spec.canonical(va_base + (i as u64) * span);
            if va.saturating_add(span) <= start || va >= end {
                continue;
            }
            let Some(e) = page
                .get(at..)
                .and_then(|t| spec.table_entry(t, i))
                .map(Pte)
                .filter(|e| e.present())
            else {
                continue;
            };
            let frame = e.frame(spec.frame_mask);
            if frame == table_pa & !0xFFF && !last {
                continue; // the self-map: page tables seen as data, not mappings
            }
            if last || (l.large_pages && e.large()) {
                (self.f)(va, frame & !(span - 1), span);
            } else {
                self.level(depth + 1, frame, va);
            }
            if self.tables >= self.max_tables {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Pfn;

    /// Physical memory that is not a file: pages held in a map and handed out as shared,
    /// owned pages, as a decompressing container hands out its cache's pages. The walker
    /// needs nothing else.
    struct Pages(std::collections::BTreeMap<u64, std::sync::Arc<[u8]>>);

    impl PhysicalMemory for Pages {
        fn page(&self, pfn: Pfn) -> PageLookup<'_> {
            match self.0.get(&pfn.get()) {
                Some(p) => PageLookup::Present(PageRef::Shared(p.clone())),
                None => PageLookup::NotInDump,
            }
        }
        fn physical_runs(&self) -> Vec<(u64, u64)> {
            self.0.keys().map(|&k| (k, 1)).collect()
        }
        fn memory_id(&self) -> u64 {
            u64::MAX
        }
    }

    /// Pages 0..`pages` with 8-byte entries written at (page, index, value).
    fn image(pages: usize, entries: &[(u64, usize, u64)]) -> Pages {
        let mut m: std::collections::BTreeMap<u64, Vec<u8>> =
            (0..pages as u64).map(|p| (p, vec![0u8; 4096])).collect();
        for &(page, i, v) in entries {
            m.get_mut(&page).unwrap()[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        Pages(m.into_iter().map(|(k, v)| (k, v.into())).collect())
    }

    /// LA57: a PML5 entry over the 4-level walk; the same tables without it are a 4-level
    /// walk of the same address's low 48 bits.
    #[test]
    fn five_level_walk() {
        // pages: 1 PML5, 2 PML4, 3 PDPT, 4 PD, 5 PT, 6 the data page.
        let va: u64 = 0xFF12_3456_789A_B123; // sign-extended from bit 56
        let spec = &X64_LA57;
        assert!(spec.is_canonical(va));
        let idx = |s: u32| ((va >> s) & 0x1FF) as usize;
        let e = |pfn: u64| pfn << 12 | 0x63;
        let d = image(
            8,
            &[
                (1, idx(48), e(2)),
                (2, idx(39), e(3)),
                (3, idx(30), e(4)),
                (4, idx(21), e(5)),
                (5, idx(12), e(6)),
            ],
        );
        let t = translate(
            &d,
            PagingMode::X64La57,
            PhysAddr::new(0x1000),
            VirtAddr::new(va),
        )
        .expect("maps");
        assert_eq!(t.pa.get(), 0x6000 + 0x123);
        assert_eq!(t.page_size, 4096);
        // The PML5 entry cleared: not present at the PML5.
        let d2 = image(8, &[(2, idx(39), e(3))]);
        match translate(
            &d2,
            PagingMode::X64La57,
            PhysAddr::new(0x1000),
            VirtAddr::new(va),
        ) {
            Err(MemError::NotPresent { level, .. }) => assert_eq!(level, PagingLevel::Pml5),
            other => panic!("{other:?}"),
        }
        // Not canonical for 57 bits.
        assert!(matches!(
            translate(
                &d,
                PagingMode::X64La57,
                PhysAddr::new(0x1000),
                VirtAddr::new(0x0100_0000_0000_0000)
            ),
            Err(MemError::NonCanonical { .. })
        ));
        // The mapping walk finds the one page, at its sign-extended address.
        let mut seen = Vec::new();
        walk_mappings(
            &d,
            PagingMode::X64La57,
            PhysAddr::new(0x1000),
            (0, u64::MAX),
            64,
            &mut |v, p, s| seen.push((v, p, s)),
        );
        assert_eq!(seen, [(va & !0xFFF, 0x6000, 4096)]);
    }

    #[test]
    fn pte_bits_by_name() {
        assert!(Pte(0x1).present());
        assert!(Pte(0x80 | 1).large());
        assert!(Pte(1 << 11).transition());
        assert!(!Pte((1 << 11) | (1 << 10)).transition(), "a prototype PTE");
        assert!(!Pte((1 << 11) | 1).transition(), "present, not transition");
        assert_eq!(X64.span(PagingLevel::Pdpt), 1 << 30);
        assert_eq!(NON_PAE.span(PagingLevel::Pd), 1 << 22);
        assert_eq!(PAE.span(PagingLevel::Pd), 1 << 21);
    }
}
