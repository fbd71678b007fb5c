//! The memory layer: physical reads and virtual reads over a [`DumpFile`].
//!
//! A read either returns every byte asked for or a [`MemError`] naming the first virtual
//! address that could not be read; it never fills gaps with zeros. `try_` reads turn "not in
//! the dump" into `Ok(None)` for callers that expect holes.

mod error;
mod list;
mod machine;
mod paging;

pub use error::{MemError, PagingLevel};
pub use list::{ListStop, ListWalk};
pub use machine::{Machine, MachineSource, Memory};
pub use paging::{
    entry_large, entry_pfn, entry_present, is_self_ref, table_entry, MmuSpec, PagingMode, Pte,
    Translation,
};

use crate::addr::{PhysAddr, VirtAddr, PAGE_SIZE};
use crate::dump::{Arch, DumpFile, PageLookup, PageRef};

/// A per-thread cache of translations (a software TLB): 512 entries, direct-mapped by virtual
/// page, keyed by (dump id, page-table root, virtual page). Dumps never change under a reader,
/// so an entry stays right; only successful walks are kept, so every error is still reported
/// by the full walk.
mod tlb {
    use std::cell::RefCell;

    type Key = (u64, u64, u64);
    type Value = (u64, u64, bool);
    const SIZE: usize = 512;

    thread_local! {
        static TLB: RefCell<Vec<Option<(Key, Value)>>> = RefCell::new(vec![None; SIZE]);
    }

    fn slot(k: &Key) -> usize {
        (k.2 as usize ^ (k.0 as usize).wrapping_mul(31)) % SIZE
    }

    pub(super) fn get(k: Key) -> Option<Value> {
        TLB.with(|t| match t.borrow()[slot(&k)] {
            Some((key, v)) if key == k => Some(v),
            _ => None,
        })
    }

    pub(super) fn put(k: Key, v: Value) {
        TLB.with(|t| t.borrow_mut()[slot(&k)] = Some((k, v)));
    }
}

/// Largest single read the memory layer accepts; bigger reads are a caller bug or hostile
/// input (a length taken from memory).
pub(crate) const MAX_READ: usize = 256 << 20;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Paged { mode: PagingMode, dtb: PhysAddr },
    Triage,
    Unsupported { arch: &'static str },
}

/// A virtual address space of the dumped machine.
#[derive(Clone, Copy)]
pub struct AddressSpace<'d> {
    dump: &'d DumpFile,
    arch: Arch,
    kind: Kind,
}

impl std::fmt::Debug for AddressSpace<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressSpace")
            .field("arch", &self.arch)
            .field("kind", &self.kind)
            .finish()
    }
}

impl<'d> AddressSpace<'d> {
    /// The kernel address space of `machine` over `dump`'s memory: paged from the machine's
    /// root, the triage blocks of a triage dump, or none when the machine is unknown.
    pub fn new(dump: &'d DumpFile, machine: &Machine) -> AddressSpace<'d> {
        if dump.triage().is_none() && !machine.is_known() {
            return AddressSpace {
                dump,
                arch: machine.arch,
                kind: Kind::Unsupported {
                    arch: "this memory image (no Windows page tables were found in it)",
                },
            };
        }
        Self::with_arch_dtb(dump, machine.arch, machine.dtb)
    }

    /// The kernel address space a crash dump's header states (for a memory image, whose
    /// header states no machine, none: see [`Memory::space`]).
    pub fn kernel(dump: &'d DumpFile) -> AddressSpace<'d> {
        Self::new(dump, &Machine::of_container(dump))
    }

    /// The same machine's address space rooted at `dtb` (a process's DirectoryTableBase; CR3
    /// as the OS stores it, PCID/low bits masked as the architecture requires).
    pub fn with_root(&self, dtb: u64) -> AddressSpace<'d> {
        Self::with_arch_dtb(self.dump, self.arch, dtb)
    }

    /// An address space of architecture `arch` rooted at `dtb` (discovery tries candidates
    /// before the image's architecture is known).
    pub fn with_arch_dtb(dump: &'d DumpFile, arch: Arch, dtb: u64) -> AddressSpace<'d> {
        let kind = if dump.triage().is_some() {
            Kind::Triage
        } else {
            match PagingMode::for_arch(arch) {
                Some(mode) => Kind::Paged {
                    mode,
                    dtb: PhysAddr::new(dtb & mode.spec().root_mask),
                },
                None => Kind::Unsupported { arch: "ARM64" },
            }
        };
        AddressSpace { dump, arch, kind }
    }

    pub fn dump(&self) -> &'d DumpFile {
        self.dump
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Is `va` a (non-NULL) user-mode address of this architecture (the lower half: below
    /// 0x0000_8000_0000_0000 on x64, 0x8000_0000 on x86)?
    pub fn is_user(&self, va: VirtAddr) -> bool {
        let v = va.get();
        v != 0
            && if self.arch.is_64bit() {
                v < 0x0000_8000_0000_0000
            } else {
                v < 0x8000_0000
            }
    }

    /// Every present mapping with a virtual address in `[start, end)`: `f(va, pa, size)` per
    /// leaf, in address order, reading at most `max_tables` tables (none for triage dumps).
    pub(crate) fn for_each_mapping(
        &self,
        (start, end): (u64, u64),
        max_tables: u64,
        f: &mut dyn FnMut(VirtAddr, PhysAddr, u64),
    ) -> u64 {
        match self.kind {
            Kind::Paged { mode, dtb } => paging::walk_mappings(
                self.dump,
                mode,
                dtb,
                (start, end),
                max_tables,
                &mut |va, pa, size| f(VirtAddr::new(va), PhysAddr::new(pa), size),
            ),
            _ => 0,
        }
    }

    /// Read `buf.len()` bytes at `va` like [`Self::read`], copying from the container with
    /// positioned reads of each run of pages that lie one after another in the file
    /// ([`DumpFile::read_physical_bulk`]: bulk copies of trace buffers, no page of the mapping
    /// faulted in and released again). Anything but mapped pages stored as they are takes
    /// [`Self::read`], which reports the exact error.
    pub(crate) fn read_bulk(&self, va: VirtAddr, buf: &mut [u8]) -> Result<(), MemError> {
        if buf.len() < 2 * PAGE_SIZE as usize || !matches!(self.kind, Kind::Paged { .. }) {
            return self.read(va, buf);
        }
        let start = self.normalize(va)?;
        let mut pieces: Vec<(PhysAddr, usize)> = Vec::new();
        let mut done = 0usize;
        while done < buf.len() {
            let cur = start.offset(done as u64);
            let n = ((PAGE_SIZE - cur.page_offset()) as usize).min(buf.len() - done);
            let Ok(t) = self.translate(cur) else {
                return self.read(va, buf);
            };
            pieces.push((t.pa, n));
            done += n;
        }
        if !self.dump.read_physical_bulk(&pieces, buf) {
            return self.read(va, buf);
        }
        Ok(())
    }

    /// Ask the OS to read the pages behind `[va, va + len)` ahead (asynchronously; what is not
    /// mapped is skipped): pages stored one after another are asked for at once
    /// ([`DumpFile::prefetch_pages`]).
    pub(crate) fn prefetch(&self, va: VirtAddr, len: u64) {
        self.dump.prefetch_pages(self.page_frames(va, len));
    }

    /// The physical page of each virtual page of `[va, va + len)` (None where it does not
    /// translate); at most `MAX_READ` bytes' worth (`len` may come from memory: a buffer's
    /// BufferSize, and callers hold the pages at once).
    pub(crate) fn page_frames(
        &self,
        va: VirtAddr,
        len: u64,
    ) -> impl Iterator<Item = Option<crate::addr::Pfn>> + '_ {
        let first = va.get() & !(PAGE_SIZE - 1);
        let end = va.get().saturating_add(len.min(MAX_READ as u64));
        (0u64..)
            .map(move |i| first.saturating_add(i.saturating_mul(PAGE_SIZE)))
            .take_while(move |&page| page < end)
            .map(|page| self.translate(VirtAddr::new(page)).ok().map(|t| t.pa.pfn()))
    }

    /// The page-table root in use (None for triage dumps).
    pub fn dtb(&self) -> Option<PhysAddr> {
        match self.kind {
            Kind::Paged { dtb, .. } => Some(dtb),
            _ => None,
        }
    }

    /// Whether virtual reads can work at all (false for ARM64 full/bitmap dumps).
    pub(crate) fn translation_supported(&self) -> bool {
        !matches!(self.kind, Kind::Unsupported { .. })
    }

    /// Bring an address to the form the architecture uses: on x86, 64-bit values that hold
    /// a sign-extended 32-bit pointer (as KDDEBUGGER_DATA64 stores them) become 32-bit.
    pub fn normalize(&self, va: VirtAddr) -> Result<VirtAddr, MemError> {
        match self.arch {
            Arch::X86 { .. } => match va.get() >> 32 {
                0 | 0xFFFF_FFFF => Ok(VirtAddr::new(va.get() & 0xFFFF_FFFF)),
                _ => Err(MemError::NonCanonical { va }),
            },
            _ => Ok(va),
        }
    }

    /// Translate one virtual address to a physical one (full and bitmap dumps).
    pub fn translate(&self, va: VirtAddr) -> Result<Translation, MemError> {
        let va = self.normalize(va)?;
        match self.kind {
            Kind::Paged { mode, dtb } => {
                let key = (self.dump.id(), dtb.get(), va.get() >> 12);
                if let Some((pa_page, page_size, transition)) = tlb::get(key) {
                    return Ok(Translation {
                        va,
                        pa: PhysAddr::new(pa_page | (va.get() & (PAGE_SIZE - 1))),
                        page_size,
                        transition,
                    });
                }
                let t = paging::translate(self.dump, mode, dtb, va)?;
                tlb::put(
                    key,
                    (t.pa.get() & !(PAGE_SIZE - 1), t.page_size, t.transition),
                );
                Ok(t)
            }
            Kind::Triage => Err(MemError::Unsupported {
                arch: "triage dumps (no page tables; memory is addressed by virtual address)",
            }),
            Kind::Unsupported { arch } => Err(MemError::Unsupported { arch }),
        }
    }

    /// Read `buf.len()` bytes at `va`, across any number of pages.
    pub fn read(&self, va: VirtAddr, buf: &mut [u8]) -> Result<(), MemError> {
        let start = self.normalize(va)?;
        let len = buf.len() as u64;
        self.dump.note_read(pages_spanned(start, len));
        let top = if self.arch.is_64bit() {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        if len > 0 && top - start.get() < len - 1 {
            return Err(MemError::Wraps { va: start, len });
        }
        let mut done = 0usize;
        // x64 reads of several pages: after the first page of a 2 MiB region, its leaf table
        // is kept and the next pages' PTEs are read from it directly. Anything but a mapped
        // PTE and a stored page takes the full walk, which reports the exact error.
        let fast = matches!(
            self.kind,
            Kind::Paged {
                mode: PagingMode::X64,
                ..
            }
        ) && buf.len() > PAGE_SIZE as usize
            // A dump read with positioned reads takes its pages one by one through
            // `copy_small` instead of touching the mapping.
            && !self.dump.positioned_reads();
        let mut table: Option<(u64, PageRef<'_>)> = None;
        while done < buf.len() {
            let cur = start.offset(done as u64);
            if fast && cur.page_offset() == 0 {
                if let Some(n) = self.read_page_cached(cur, &mut buf[done..], &mut table) {
                    done += n;
                    continue;
                }
            }
            let n = self.read_chunk(cur, &mut buf[done..])?;
            done += n;
        }
        Ok(())
    }

    /// One page-aligned page of an x64 read through the cached leaf table of its 2 MiB region
    /// (loaded on first use). None: take the full walk.
    fn read_page_cached<'t>(
        &self,
        va: VirtAddr,
        out: &mut [u8],
        table: &mut Option<(u64, PageRef<'t>)>,
    ) -> Option<usize>
    where
        'd: 't,
    {
        let Kind::Paged { dtb, .. } = self.kind else {
            return None;
        };
        if !paging::X64.is_canonical(va.get()) {
            return None; // non-canonical: the full walk says so
        }
        let region = va.get() >> 21;
        if !matches!(table, Some((r, _)) if *r == region) {
            *table = Some((region, paging::leaf_table_x64(self.dump, dtb, va)?));
        }
        let pt = &table.as_ref()?.1;
        let i = ((va.get() >> 12) & 0x1FF) as usize * 8;
        let pte = u64::from_le_bytes(pt.get(i..i + 8)?.try_into().ok()?);
        let pa = paging::pte_maps(pte)?;
        match self.dump.page(pa.pfn()) {
            PageLookup::Present(p) => {
                let n = (PAGE_SIZE as usize).min(out.len());
                out[..n].copy_from_slice(&p[..n]);
                Some(n)
            }
            _ => None,
        }
    }

    /// Copy as much as one contiguous piece (a page, or a triage segment) holds.
    fn read_chunk(&self, va: VirtAddr, out: &mut [u8]) -> Result<usize, MemError> {
        match self.kind {
            Kind::Triage => {
                let src = self
                    .dump
                    .triage_view()
                    .and_then(|t| t.bytes_at(va.get(), out.len()))
                    .ok_or(MemError::NotInTriage { va })?;
                let n = src.len();
                out[..n].copy_from_slice(src);
                Ok(n)
            }
            _ => {
                let t = self.translate(va)?;
                let n = ((PAGE_SIZE - va.page_offset()) as usize).min(out.len());
                if self.dump.copy_small(t.pa, &mut out[..n]) {
                    return Ok(n);
                }
                match self.dump.page(t.pa.pfn()) {
                    PageLookup::Present(p) => {
                        let o = t.pa.page_offset() as usize;
                        out[..n].copy_from_slice(&p[o..o + n]);
                        Ok(n)
                    }
                    PageLookup::NotInDump => Err(MemError::PageMissing { va, pa: t.pa }),
                    PageLookup::BeyondEof { .. } => Err(MemError::PageBeyondEof { va, pa: t.pa }),
                    PageLookup::Damaged { file_offset } => Err(MemError::PageDamaged {
                        va,
                        pa: t.pa,
                        file_offset,
                    }),
                }
            }
        }
    }

    /// Read as many leading bytes of `buf` as the dump holds contiguously from `va`; returns
    /// how many were read (0 when the first byte is missing).
    pub fn read_prefix(&self, va: VirtAddr, buf: &mut [u8]) -> usize {
        let Ok(start) = self.normalize(va) else {
            return 0;
        };
        // Bulk: the pages the tables map, copied with positioned reads when every one of them
        // is stored as plain file bytes (a carved buffer of 64 KiB: no page of the mapping
        // faulted in and released again); anything else page by page below, which stops at
        // the first byte the dump does not hold.
        if buf.len() >= 2 * PAGE_SIZE as usize && matches!(self.kind, Kind::Paged { .. }) {
            let mut pieces: Vec<(PhysAddr, usize)> = Vec::new();
            let mut done = 0usize;
            while done < buf.len() {
                let cur = start.offset(done as u64);
                let n = ((PAGE_SIZE - cur.page_offset()) as usize).min(buf.len() - done);
                let Ok(t) = self.translate(cur) else { break };
                pieces.push((t.pa, n));
                done += n;
            }
            if done > 0 && self.dump.read_physical_bulk(&pieces, &mut buf[..done]) {
                return done;
            }
        }
        self.dump.note_read(pages_spanned(start, buf.len() as u64));
        let mut done = 0usize;
        while done < buf.len() {
            match self.read_chunk(start.offset(done as u64), &mut buf[done..]) {
                Ok(n) => done += n,
                Err(_) => break,
            }
        }
        done
    }

    /// Like [`read`](Self::read), but bytes that are not in the dump give `Ok(None)`.
    pub fn try_read(&self, va: VirtAddr, buf: &mut [u8]) -> Result<Option<()>, MemError> {
        match self.read(va, buf) {
            Ok(()) => Ok(Some(())),
            Err(e) if e.is_missing() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read `len` bytes into a new vector (bounded by `MAX_READ`).
    pub fn read_vec(&self, va: VirtAddr, len: usize) -> Result<Vec<u8>, MemError> {
        if len > MAX_READ {
            return Err(MemError::TooLarge {
                what: "read",
                va,
                reason: format!("{len:#x} bytes is more than the {MAX_READ:#x}-byte limit"),
            });
        }
        let mut v = vec![0u8; len];
        self.read(va, &mut v)?;
        Ok(v)
    }

    pub fn read_u16(&self, va: VirtAddr) -> Result<u16, MemError> {
        let mut b = [0u8; 2];
        self.read(va, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    pub fn read_u32(&self, va: VirtAddr) -> Result<u32, MemError> {
        let mut b = [0u8; 4];
        self.read(va, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn read_u64(&self, va: VirtAddr) -> Result<u64, MemError> {
        let mut b = [0u8; 8];
        self.read(va, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Read a pointer of the architecture's size.
    pub fn read_ptr(&self, va: VirtAddr) -> Result<VirtAddr, MemError> {
        Ok(VirtAddr::new(if self.arch.is_64bit() {
            self.read_u64(va)?
        } else {
            u64::from(self.read_u32(va)?)
        }))
    }

    /// Read physical memory (full and bitmap dumps).
    pub fn read_phys(&self, pa: PhysAddr, buf: &mut [u8]) -> Result<(), MemError> {
        let mut done = 0usize;
        while done < buf.len() {
            let cur = pa.offset(done as u64);
            let n = ((PAGE_SIZE - cur.page_offset()) as usize).min(buf.len() - done);
            match self.dump.page(cur.pfn()) {
                PageLookup::Present(p) => {
                    let o = cur.page_offset() as usize;
                    buf[done..done + n].copy_from_slice(&p[o..o + n]);
                }
                _ => return Err(MemError::PhysMissing { pa: cur }),
            }
            done += n;
        }
        Ok(())
    }
}

/// Pages a read of `len` bytes at `va` touches.
fn pages_spanned(va: VirtAddr, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (va.page_offset() + len).div_ceil(PAGE_SIZE)
}
