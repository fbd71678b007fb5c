//! Phase 2 of the scan scenarios: put phase 1's items into physical memory (pages mapped at
//! consecutive VAs but physically scattered, or physically contiguous; pages no longer
//! mapped get a zero PTE in an existing page table) and resolve every expectation's physical
//! addresses through the forge's own record of what it mapped.

use super::*;
use crate::dump::paging::{Leaf, Pager, VirtMap};
use crate::dump::phys::PhysMem;
use crate::util::PAGE_SIZE;

/// Where each item's pages went.
struct Placed<'a> {
    items: &'a [PhysItem],
    pfns: Vec<Vec<u64>>,
    vmap: &'a VirtMap,
}

impl Placed<'_> {
    /// (physical address, virtual address if mapped) of `loc`.
    fn resolve(&self, loc: Loc) -> (Option<u64>, Option<u64>) {
        match loc {
            Loc::Va(va) => (self.vmap.translate(va), Some(va)),
            Loc::Item(i, off) => {
                let page = (off / PAGE_SIZE) as usize;
                let Some(&pfn) = self.pfns[i].get(page) else {
                    return (None, None);
                };
                let item = &self.items[i];
                let mapped = !matches!(item.pages[page], PageFate::Unmapped(_));
                let va = item.va.filter(|_| mapped).map(|v| v + off);
                (Some(pfn * PAGE_SIZE + off % PAGE_SIZE), va)
            }
        }
    }

    /// Physical address of byte `i * 0x1000` of the object at `loc`, for every page of
    /// `size` bytes; None where it has no translation (mapped items: an unmapped page).
    fn pages(&self, loc: Loc, size: u32) -> Vec<Option<u64>> {
        let n = u64::from(size).div_ceil(PAGE_SIZE);
        (0..n)
            .map(|i| {
                let at = match loc {
                    Loc::Va(va) => Loc::Va(va + i * PAGE_SIZE),
                    Loc::Item(k, off) => Loc::Item(k, off + i * PAGE_SIZE),
                };
                let (pa, va) = self.resolve(at);
                match loc {
                    Loc::Item(k, _) if self.items[k].va.is_some() && va.is_none() => None,
                    _ => pa,
                }
            })
            .collect()
    }
}

/// A PFN for the next page of a scattered item: never adjacent to the previous one.
fn scattered_pfn(pm: &mut PhysMem, prev: Option<u64>) -> u64 {
    loop {
        let p = pm.alloc();
        if prev.is_none_or(|q| p != q + 1 && p + 1 != q) {
            return p;
        }
    }
}

/// Store and map every item; return each item's PFNs.
fn place_items(
    items: &[PhysItem],
    pm: &mut PhysMem,
    pager: &Pager,
    vmap: &mut VirtMap,
) -> Vec<Vec<u64>> {
    let mut all = Vec::with_capacity(items.len());
    for item in items {
        let n = item.pages.len();
        let pfns: Vec<u64> = if item.contiguous {
            let base = pm.alloc_contiguous(n as u64);
            (base..base + n as u64).collect()
        } else {
            let mut v: Vec<u64> = Vec::with_capacity(n);
            for _ in 0..n {
                let p = scattered_pfn(pm, v.last().copied());
                v.push(p);
            }
            v
        };
        for (i, (fate, &pfn)) in item.pages.iter().zip(&pfns).enumerate() {
            let mut page = fate.bytes().to_vec();
            page.resize(PAGE_SIZE as usize, 0);
            pm.set_page(pfn, &page);
            let Some(va) = item.va.map(|v| v + i as u64 * PAGE_SIZE) else {
                continue;
            };
            match fate {
                PageFate::Data(_) | PageFate::Overwritten(_) => {
                    pager.set_pte(pm, va, pager.mode.leaf(pfn, Leaf::KernelData));
                    vmap.insert(va, PAGE_SIZE, pfn * PAGE_SIZE);
                }
                PageFate::Unmapped(_) => pager.ensure_pt(pm, va),
            }
        }
        all.push(pfns);
    }
    all
}

/// Phase 2: place `sb`'s items after the ETW pages and resolve the expectations.
pub(crate) fn place(
    sb: ScanBuild,
    pm: &mut PhysMem,
    pager: &Pager,
    vmap: &mut VirtMap,
) -> ForgedScan {
    let pfns = place_items(&sb.items, pm, pager, vmap);
    let p = Placed {
        items: &sb.items,
        pfns,
        vmap,
    };
    let must = |loc: Loc, what: &str| -> (u64, Option<u64>) {
        let (pa, va) = p.resolve(loc);
        (
            pa.unwrap_or_else(|| panic!("scan: {what} at {loc:?} has no physical address")),
            va,
        )
    };
    let mut objects: Vec<ScanObject> = sb
        .objects
        .iter()
        .map(|o| {
            let (pa, va) = must(o.loc, o.kind.name());
            let buffer = o.buffer.clone().map(|mut b| {
                b.pages = p.pages(o.loc, b.buffer_size);
                let used = u64::from(b.intact_bytes).div_ceil(PAGE_SIZE) as usize;
                b.physically_contiguous = b.pages[..used]
                    .windows(2)
                    .all(|w| matches!(w, [Some(a), Some(c)] if *c == a + PAGE_SIZE))
                    && b.pages[..used].iter().all(Option::is_some);
                b.copy_of = o.copy_of.map(|l| must(l, "original").0);
                b
            });
            ScanObject {
                kind: o.kind,
                class: o.class,
                pa,
                va,
                group: o.group,
                buffer,
                pending: o.pending.clone(),
                context: o.context.clone(),
            }
        })
        .collect();
    objects.sort_by_key(|o| (o.kind, o.pa));
    let groups = sb
        .groups
        .iter()
        .map(|g| {
            let mut out = g.group.clone();
            out.context_pa = g.context.map(|l| must(l, "context").0);
            out
        })
        .collect();
    let lost = sb
        .lost
        .iter()
        .map(|(kind, group, logger_id, seq, loc, why)| {
            let (pa, va) = must(*loc, "lost object");
            ScanLost {
                kind: *kind,
                group: *group,
                logger_id: *logger_id,
                sequence_number: *seq,
                va: va.expect("lost objects were mapped"),
                pa,
                why: why.clone(),
            }
        })
        .collect();
    let decoys = sb
        .decoys
        .iter()
        .map(|(what, loc, why)| {
            let (pa, va) = must(*loc, what);
            ScanDecoy {
                what: what.clone(),
                pa,
                va,
                why: why.clone(),
            }
        })
        .collect();
    ForgedScan {
        objects,
        groups,
        lost,
        decoys,
        free_slot_value: sb.free_slot_value,
    }
}
