//! Processes' own x64 address spaces: one PML4 per process whose user half the forge fills
//! (the realtime consumers' queued buffers, `etw/realtime.rs`; the loader data and mapped
//! images of `kernel/user_images.rs`), built after every kernel mapping of the dump.
//!
//! Each process PML4: entries 0x100..0x1FF copied from the finished kernel PML4 (the kernel
//! half is shared), its own self-reference entry (at `Config::self_map_index`, pointing at the
//! process PML4 itself), KUSER_SHARED_DATA's user alias at 0x7FFE0000 (the kernel's physical
//! page, as in the kernel's tables), then the process's user pages in the order given:
//! [`UserPage::Private`] (a new frame with that content), [`UserPage::Unstored`] (a valid PTE
//! to a frame the dump does not hold) or [`UserPage::Shared`] (an existing frame: an image
//! section page mapped by several processes at one physical address). The PML4's physical
//! address is written into the EPROCESS's `KPROCESS.DirectoryTableBase`.
//!
//! [`apply_late`] re-points pages already mapped at new frames (a private copy of a shared
//! page, or a frame not in the dump); `machine::map_last` calls it after every other page of
//! the dump is mapped (so that every other page keeps its physical address).

use crate::dump::paging::{Leaf, Pager, VirtMap};
use crate::dump::phys::PhysMem;
use crate::util::{put_u64, PAGE_SIZE};

/// The top of x64 user space.
pub(crate) const USER_TOP: u64 = 0x0000_8000_0000_0000;

/// What one user page of a process maps to.
#[derive(Clone, Debug)]
pub(crate) enum UserPage {
    /// A new frame holding this content (stored in the dump).
    Private(Vec<u8>),
    /// A new frame that the dump does not hold (a valid PTE nonetheless).
    Unstored,
    /// An existing frame (its PFN), e.g. an image section page shared by every process.
    Shared(u64),
}

/// One process's user half before it is mapped.
pub(crate) struct SpaceSpec {
    pub(crate) pid: u64,
    /// VA of its `KPROCESS.DirectoryTableBase` (the EPROCESS + the field's offset).
    pub(crate) dtb_field_va: u64,
    /// (VA, page, leaf kind) in mapping order.
    pub(crate) pages: Vec<(u64, UserPage, Leaf)>,
}

/// A page of process `pid` re-pointed at a new frame ([`apply_late`]).
pub(crate) struct LateRemap {
    pub(crate) pid: u64,
    pub(crate) va: u64,
    /// `Private` or `Unstored` (a new frame either way).
    pub(crate) page: UserPage,
    pub(crate) leaf: Leaf,
}

/// A process's own address space as the forge built it.
#[derive(Clone, Debug)]
pub(crate) struct UserSpace {
    pub(crate) pid: u64,
    /// Its PML4's physical address.
    pub(crate) dtb: u64,
    /// Its user-half mappings (KUSER_SHARED_DATA at 0x7FFE0000 and its user pages).
    pub(crate) vmap: VirtMap,
    /// (VA, PA) of its self-map page: its own PML4.
    pub(crate) self_map: (u64, u64),
    /// Its page tables.
    pager: Pager,
}

/// `a`'s and `b`'s specs merged by PID (ascending), a process in both getting `a`'s pages then
/// `b`'s.
pub(crate) fn merge(a: Vec<SpaceSpec>, b: Vec<SpaceSpec>) -> Vec<SpaceSpec> {
    let mut out: Vec<SpaceSpec> = a;
    for s in b {
        match out.iter_mut().find(|x| x.pid == s.pid) {
            Some(x) => {
                assert_eq!(x.dtb_field_va, s.dtb_field_va, "one EPROCESS per PID");
                x.pages.extend(s.pages);
            }
            None => out.push(s),
        }
    }
    out.sort_by_key(|s| s.pid);
    out
}

/// The frame for `page` (allocated now unless shared).
fn frame(pm: &mut PhysMem, page: UserPage) -> u64 {
    match page {
        UserPage::Private(c) => {
            let f = pm.alloc();
            pm.set_page(f, &c);
            f
        }
        UserPage::Unstored => pm.alloc_unstored(),
        UserPage::Shared(f) => f,
    }
}

/// Build each process's PML4 (see the module documentation) and write its physical address
/// into the EPROCESS. `kuser`: KUSER_SHARED_DATA's user VA and physical address.
pub(crate) fn build(
    specs: Vec<SpaceSpec>,
    self_ref: u64,
    pm: &mut PhysMem,
    kernel: &Pager,
    kvmap: &VirtMap,
    kuser: (u64, Option<u64>),
) -> Vec<UserSpace> {
    let mut out = Vec::new();
    for sp in specs {
        let pfn = pm.alloc();
        let p = Pager::new_x64(pm, pfn, self_ref);
        for i in 0x100..0x200 {
            let e = kernel.read(pm, kernel.root + i * 8);
            if i != self_ref && e != 0 {
                p.write_in_table(pm, pfn, i, e);
            }
        }
        let mut vmap = VirtMap::default();
        if let (va, Some(pa)) = kuser {
            p.set_pte(pm, va, p.mode.leaf(pa >> 12, Leaf::UserReadOnly));
            vmap.insert(va, PAGE_SIZE, pa);
        }
        for (va, page, leaf) in sp.pages {
            assert!(va < USER_TOP && va % PAGE_SIZE == 0, "user page {va:#x}");
            let f = frame(pm, page);
            p.set_pte(pm, va, p.mode.leaf(f, leaf));
            vmap.insert(va, PAGE_SIZE, f << 12);
        }
        let pa = kvmap
            .translate(sp.dtb_field_va)
            .expect("user space: the EPROCESS is mapped");
        put_u64(pm.page_mut(pa >> 12), (pa & 0xFFF) as usize, p.root);
        out.push(UserSpace {
            pid: sp.pid,
            dtb: p.root,
            vmap,
            self_map: p.self_map_page,
            pager: p,
        });
    }
    out
}

/// Re-point each page of `late` at a new frame (allocated in order) in its process.
pub(crate) fn apply_late(spaces: &mut [UserSpace], late: Vec<LateRemap>, pm: &mut PhysMem) {
    for r in late {
        let s = spaces
            .iter_mut()
            .find(|s| s.pid == r.pid)
            .unwrap_or_else(|| panic!("late remap: no address space for PID {:#x}", r.pid));
        assert!(
            s.vmap.translate(r.va).is_some(),
            "late remap: {:#x} is not mapped in PID {:#x}",
            r.va,
            r.pid
        );
        let f = frame(pm, r.page);
        s.pager.replace_pte(pm, r.va, s.pager.mode.leaf(f, r.leaf));
        s.vmap.remap_page(r.va, f << 12);
    }
}

/// Every process's `directory_table_base` from `spaces`.
pub(crate) fn fill_process_dtbs(procs: &mut [crate::ExpectedProcess], spaces: &[UserSpace]) {
    for p in procs.iter_mut() {
        if let Some(u) = spaces.iter().find(|u| u.pid == p.pid) {
            p.directory_table_base = u.dtb;
        }
    }
}

/// `va`'s physical address in `space` (user half: its pages; its self-map page: its PML4;
/// otherwise the kernel's mapping, shared through the copied kernel half).
pub(crate) fn translate(space: &UserSpace, kvmap: &VirtMap, va: u64) -> Option<u64> {
    if va < USER_TOP {
        space.vmap.translate(va)
    } else if (space.self_map.0..space.self_map.0 + PAGE_SIZE).contains(&va) {
        Some(space.self_map.1 + (va - space.self_map.0))
    } else {
        kvmap.translate(va)
    }
}

/// `len` bytes at `va` of `space` as a correct reader must return them, or the first
/// unreadable VA.
pub(crate) fn read(
    space: &UserSpace,
    kvmap: &VirtMap,
    pm: &PhysMem,
    va: u64,
    len: usize,
) -> Result<Vec<u8>, u64> {
    let mut out = Vec::with_capacity(len);
    let end = va + len as u64;
    let mut cur = va;
    while cur < end {
        let n = (PAGE_SIZE - cur % PAGE_SIZE).min(end - cur);
        match translate(space, kvmap, cur) {
            Some(pa) if pm.is_stored(pa / PAGE_SIZE) => out.extend(pm.read(pa, n as usize)),
            _ => return Err(cur),
        }
        cur += n;
    }
    Ok(out)
}
