//! Finding the machine in a memory image that has no header (issue 14): the kernel's
//! page-table root and paging mode, then (in [`KernelContext`](super::context)) the kernel
//! image by its CodeView record.
//!
//! **DTB.** Windows maps its paging structures through a self-referencing entry
//! (tooling-notes.md, volatility3's `WindowsIntelStacker`; MemProcFS `vmmwininit.c`):
//! * x64: one PML4 entry in the kernel half (index 0x100-0x1FF; randomised since 1607, 0x1ED
//!   before) points at the PML4's own page. A page with exactly one such entry is a candidate.
//! * x86 PAE: entry 3 of the page directory for 0xC0000000 points at itself (entries 0-2 at
//!   the other three directories); the DTB is the 32-byte PDPT holding the four directories,
//!   found by looking for it.
//! * x86 non-PAE: page-directory entry 0x300 points at the directory itself.
//!
//! Every physical page is looked at once, in address order; a candidate is accepted when
//! KUSER_SHARED_DATA read through it looks right (NtMajorVersion 5, 6 or 10, NtMinorVersion at
//! most 3). The first accepted candidate is used; other accepted roots seen in the next
//! `TIE_WINDOW` pages (other processes' page tables map the same kernel) are reported.
//!
//! **Kernel base.** The kernel-image region (x64 0xFFFFF800'00000000-0xFFFFF80F'FFFFFFFF,
//! x86 0x80000000-0xBFFFFFFF) is walked page by page through the page tables, skipping every
//! range an absent table entry leaves unmapped; the first page that starts a PE image whose
//! CodeView record names ntkrnlmp.pdb, ntoskrnl.pdb, ntkrnlpa.pdb or ntkrpamp.pdb is the kernel.

use super::kuser::KUserSharedData;
use super::pe::KernelImage;
use crate::addr::{VirtAddr, PAGE_SIZE};
use crate::dump::{Arch, DumpError, DumpFile, OpenOptions, PageLookup, PageRef};
use crate::mem::{
    entry_large, entry_pfn, entry_present, is_self_ref, table_entry, AddressSpace, Machine,
    MemError, Memory, PagingLevel, PagingMode,
};
use crate::warning::{Warning, WarningKind};
use std::path::Path;

/// Pages looked at after the first accepted root for other accepted roots (16 MiB).
pub(crate) const TIE_WINDOW: u64 = 4096;
/// Most accepted roots reported.
const MAX_OTHERS: usize = 16;
/// Most pages the kernel-base walk looks at (1 GiB of mapped pages; a real kernel-image
/// region maps a few hundred MB). Crafted tables that map the whole region are cut here
/// (fuzz finding 7: 4 Mi steps took 35-70 s under the sanitizer).
const MAX_KERNEL_STEPS: u64 = 1 << 18;
/// Most PAE candidates for which the PDPT is looked for (each look is a pass over memory).
const MAX_PAE_SEARCHES: usize = 4;
/// The kernel image's file names (their CodeView PDB names).
pub(crate) const KERNEL_PDB_NAMES: [&str; 4] = [
    "ntkrnlmp.pdb",
    "ntoskrnl.pdb",
    "ntkrnlpa.pdb",
    "ntkrpamp.pdb",
];

/// The machine found in an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MachineFound {
    pub arch: Arch,
    /// The DTB (x64/non-PAE: the root page; PAE: the PDPT).
    pub dtb: u64,
    /// How it was found, for `info`.
    pub how: String,
    /// Other accepted roots seen (other processes' page tables).
    pub others: Vec<u64>,
}

/// A page-table root a page suggests, before it is tested.
#[derive(Clone, Copy, Debug)]
enum Candidate {
    X64 {
        dtb: u64,
        index: usize,
    },
    /// The PAE directory for 0xC0000000 and the four directories' pages.
    Pae {
        pds: [u64; 4],
    },
    NonPae {
        dtb: u64,
    },
}

/// What `page` (at `pfn`) suggests as a root.
fn candidates(page: &[u8], pfn: u64, out: &mut Vec<Candidate>) {
    let selfs: Vec<usize> = (0x100..0x200)
        .filter(|&i| is_self_ref(PagingMode::X64, page, pfn, i))
        .collect();
    if let [index] = selfs[..] {
        out.push(Candidate::X64 {
            dtb: pfn * PAGE_SIZE,
            index,
        });
    }
    if is_self_ref(PagingMode::Pae, page, pfn, 3) {
        let e = |i| table_entry(PagingMode::Pae, page, i).unwrap_or(0);
        let pds = [0, 1, 2, 3].map(|i| entry_pfn(PagingMode::Pae, e(i)));
        let distinct = pds[..3].iter().all(|&p| p != pfn) && pds[0] != pds[1] && pds[1] != pds[2];
        if (0..3).all(|i| entry_present(e(i))) && distinct {
            out.push(Candidate::Pae { pds });
        }
    }
    if is_self_ref(PagingMode::NonPae, page, pfn, 0x300) {
        out.push(Candidate::NonPae {
            dtb: pfn * PAGE_SIZE,
        });
    }
}

/// Every stored physical page of an image, in address order (a range is cut where the file
/// ends, so a truncated or lying layout costs no more than the file's pages).
fn pages(dump: &DumpFile) -> impl Iterator<Item = (u64, PageRef<'_>)> + '_ {
    let runs = if dump.headerless() {
        dump.physical_runs()
    } else {
        Vec::new()
    };
    runs.into_iter().flat_map(move |(first, n)| {
        (first..first + n).filter_map(move |pfn| {
            dump.note_read(1);
            match dump.page(crate::addr::Pfn::new(pfn)) {
                PageLookup::Present(p) => Some((pfn, p)),
                _ => None,
            }
        })
    })
}

/// The PAE PDPT that holds the four directories `pds`: a 32-byte-aligned group of four
/// present entries naming them in order.
fn find_pdpt(dump: &DumpFile, pds: [u64; 4]) -> Option<u64> {
    for (pfn, page) in pages(dump) {
        for slot in 0..PAGE_SIZE as usize / 32 {
            let hit = (0..4).all(|i| {
                table_entry(PagingMode::Pae, &page, slot * 4 + i)
                    .is_some_and(|e| entry_present(e) && entry_pfn(PagingMode::Pae, e) == pds[i])
            });
            if hit {
                return Some(pfn * PAGE_SIZE + slot as u64 * 32);
            }
        }
    }
    None
}

/// The root a candidate names, tested through KUSER_SHARED_DATA (`pae_searches` counts the
/// passes made to find PAE PDPTs).
fn test(dump: &DumpFile, c: Candidate, pae_searches: &mut usize) -> Option<(Arch, u64, String)> {
    let (arch, dtb, what) = match c {
        Candidate::X64 { dtb, index } => (
            Arch::X64,
            dtb,
            format!("x64 PML4 at physical {dtb:#x}, self-reference at index {index:#x}"),
        ),
        Candidate::NonPae { dtb } => (
            Arch::X86 { pae: false },
            dtb,
            format!("x86 page directory at physical {dtb:#x}, self-reference at index 0x300"),
        ),
        Candidate::Pae { pds } => {
            if *pae_searches >= MAX_PAE_SEARCHES {
                return None;
            }
            *pae_searches += 1;
            let pdpt = find_pdpt(dump, pds)?;
            (
                Arch::X86 { pae: true },
                pdpt,
                format!(
                    "x86 PAE PDPT at physical {pdpt:#x} (its page directory for 0xC0000000 at {:#x} references itself at index 3)",
                    pds[3] * PAGE_SIZE
                ),
            )
        }
    };
    let space = AddressSpace::with_arch_dtb(dump, arch, dtb);
    let (major, minor) = KUserSharedData::plausible_at(&space)?;
    Some((
        arch,
        dtb,
        format!("{what}; KUSER_SHARED_DATA through it says Windows {major}.{minor}"),
    ))
}

/// Find the kernel's page-table root in an image (None when the dump has a header).
pub(crate) fn find_machine(dump: &DumpFile) -> Option<Result<MachineFound, String>> {
    if !dump.headerless() {
        return None;
    }
    let mut found: Option<(MachineFound, u64)> = None;
    let mut looked = 0u64;
    let mut cands = Vec::new();
    let mut pae_searches = 0;
    for (pfn, page) in pages(dump) {
        looked += 1;
        if let Some((_, first)) = &found {
            if pfn > first + TIE_WINDOW
                || found
                    .as_ref()
                    .is_some_and(|(f, _)| f.others.len() >= MAX_OTHERS)
            {
                break;
            }
        }
        cands.clear();
        candidates(&page, pfn, &mut cands);
        for &c in &cands {
            let Some((arch, dtb, how)) = test(dump, c, &mut pae_searches) else {
                continue;
            };
            match &mut found {
                None => {
                    found = Some((
                        MachineFound {
                            arch,
                            dtb,
                            how: format!("found by scanning physical memory: {how}"),
                            others: Vec::new(),
                        },
                        pfn,
                    ))
                }
                Some((f, _)) if f.arch == arch && f.dtb != dtb => f.others.push(dtb),
                Some(_) => {}
            }
        }
    }
    Some(match found {
        Some((mut f, _)) => {
            if !f.others.is_empty() {
                f.how.push_str(&format!(
                    "; {} other page-table roots also pass within {TIE_WINDOW} pages ({}): other processes' tables map the same kernel, the first in physical order is used",
                    f.others.len(),
                    f.others.iter().map(|d| format!("{d:#x}")).collect::<Vec<_>>().join(", ")
                ));
            }
            Ok(f)
        }
        None => Err(format!(
            "no x64 or x86 kernel page tables found in its {looked:#x} pages ({} runs): not the memory of a Windows machine, or not a format etwdump knows",
            dump.physical_runs().len()
        )),
    })
}

/// The machine whose memory `dump` holds: a crash dump's header; for an image, its
/// architecture and DTB found by the page-table self-reference, or why they cannot be (an
/// error: not Windows memory).
pub fn machine(dump: &DumpFile) -> Result<Machine, DumpError> {
    let format = match dump.image() {
        Some(i) => i.format.name(),
        None if dump.headerless() => dump.format(),
        None => "memory",
    };
    match find_machine(dump) {
        None => Ok(Machine::of_container(dump)),
        Some(Ok(m)) => {
            let mut found = Machine::found(m.arch, m.dtb, m.how);
            found
                .warnings
                .extend(tables_past_the_end(dump, m.arch, m.dtb).map(anomaly));
            Ok(found)
        }
        Some(Err(reason)) if format == "raw" => Err(DumpError::NotMemory {
            signature: crate::bytes::tag_text(dump.signature()),
            reason,
        }),
        Some(Err(reason)) => Err(DumpError::NoWindows { format, reason }),
    }
}

/// Paging-structure pages (PDPTs and page directories, always RAM) that the kernel's upper
/// tables name beyond the image's last stored page: memory the image does not hold where
/// its layout puts it. A raw image that skipped the PCI hole (RAM above it moved down) looks
/// so: its layout cannot be told from the file, and reads there would be wrong; said, never
/// guessed.
/// What discovery notices about the memory is an anomaly of the image.
fn anomaly(message: String) -> Warning {
    Warning::new(WarningKind::Anomaly, message)
}

fn tables_past_the_end(dump: &DumpFile, arch: Arch, dtb: u64) -> Option<String> {
    if !dump.headerless() {
        return None;
    }
    let end_pfn = dump
        .physical_runs()
        .iter()
        .map(|&(first, n)| first + n)
        .max()
        .unwrap_or(0);
    let page_of = |pfn: u64| match dump.page(crate::addr::Pfn::new(pfn)) {
        PageLookup::Present(p) => Some(p),
        _ => None,
    };
    // (mode, table pfn, entries to look at) of the upper levels whose entries name tables.
    let (mode, roots): (PagingMode, Vec<(u64, std::ops::Range<usize>)>) = match arch {
        Arch::X64 => (PagingMode::X64, vec![(dtb / PAGE_SIZE, 0x100..0x200)]),
        Arch::X86 { pae: true } => (PagingMode::Pae, Vec::new()),
        Arch::X86 { pae: false } => (PagingMode::NonPae, vec![(dtb / PAGE_SIZE, 0x200..0x400)]),
        Arch::Arm64 => return None,
    };
    let (mut beyond, mut looked, mut first) = (0u64, 0u64, None);
    let mut note = |pfn: u64, what: &'static str| {
        looked += 1;
        if pfn >= end_pfn {
            beyond += 1;
            first.get_or_insert((pfn, what));
        }
    };
    if mode == PagingMode::Pae {
        // The PDPT's four entries name the page directories.
        if let Some(page) = page_of(dtb / PAGE_SIZE) {
            let at = (dtb % PAGE_SIZE) as usize / 8;
            for i in at..at + 4 {
                if let Some(e) = table_entry(mode, &page, i).filter(|&e| entry_present(e)) {
                    note(entry_pfn(mode, e), "page directory");
                }
            }
        }
    }
    for (table, range) in roots {
        let Some(page) = page_of(table) else { continue };
        for i in range {
            let Some(e) = table_entry(mode, &page, i).filter(|&e| entry_present(e)) else {
                continue;
            };
            let next = entry_pfn(mode, e);
            if next == table {
                continue; // the self-reference
            }
            note(
                next,
                if mode == PagingMode::X64 {
                    "PDPT"
                } else {
                    "page table"
                },
            );
            // x64: the PDPT's entries name page directories (unless 1 GiB pages).
            if mode == PagingMode::X64 {
                if let Some(pdpt) = page_of(next) {
                    for j in 0..512 {
                        if let Some(e2) = table_entry(mode, &pdpt, j)
                            .filter(|&e| entry_present(e) && !entry_large(e))
                        {
                            note(entry_pfn(mode, e2), "page directory");
                        }
                    }
                }
            }
        }
    }
    let (pfn, what) = first?;
    Some(format!(
        "{beyond} of the {looked} paging structures the kernel's upper page tables name lie beyond the image's last page {:#x} (e.g. a {what} at physical {:#x}): this image does not hold memory where its layout puts it; a raw image that skipped the PCI hole (the RAM above it written lower down) looks so, and its layout cannot be told from the file: reads of such memory fail or are wrong",
        end_pfn * PAGE_SIZE,
        pfn * PAGE_SIZE
    ))
}

/// Open a crash dump or memory image and, for an image, find its architecture and DTB.
pub fn open(path: &Path, opts: OpenOptions) -> Result<Memory, DumpError> {
    let dump = DumpFile::open(path, opts)?;
    let machine = machine(&dump)?;
    Ok(Memory { dump, machine })
}

/// Open `path` as placed by a host framework's layout ([`crate::dump::layout`]). The machine
/// the layout names is used when KUSER_SHARED_DATA read through it looks like Windows;
/// otherwise (or when it names none) the root is searched as for any image, and a warning
/// says why the given one was not used.
pub fn open_with_layout(
    path: &Path,
    layout: &crate::dump::layout::Layout,
    opts: OpenOptions,
) -> Result<Memory, DumpError> {
    let dump = DumpFile::open_layout(path, layout, opts)?;
    let mut refused = None;
    if let Some((arch, dtb)) = layout.machine {
        let space = AddressSpace::with_arch_dtb(&dump, arch, dtb);
        match KUserSharedData::plausible_at(&space) {
            Some((major, minor)) => {
                let how = format!(
                    "{} at physical {dtb:#x}, given by the layout ({}); KUSER_SHARED_DATA through it says Windows {major}.{minor}",
                    match arch {
                        Arch::X64 => "x64 PML4",
                        Arch::X86 { pae: true } => "x86 PAE PDPT",
                        _ => "x86 page directory",
                    },
                    layout.source
                );
                let machine = Machine::found(arch, dtb, how);
                return Ok(Memory { dump, machine });
            }
            None => refused = Some(format!(
                "the layout's page-table root {dtb:#x} ({arch:?}) does not map a plausible KUSER_SHARED_DATA: searching the image for the kernel's root instead"
            )),
        }
    }
    let mut machine = machine(&dump)?;
    machine.warnings.splice(0..0, refused.map(anomaly));
    Ok(Memory { dump, machine })
}

/// As [`open`], but an image of a known container (ELF core, VMware) in which no Windows is
/// found still opens, its machine unknown with the reason ([`Machine::problem`]): `info`
/// describes its layout. A file without any signature that is not memory is still an error.
pub fn open_container(path: &Path, opts: OpenOptions) -> Result<Memory, DumpError> {
    let dump = DumpFile::open(path, opts)?;
    match machine(&dump) {
        Ok(machine) => Ok(Memory { dump, machine }),
        Err(e @ DumpError::NotMemory { .. }) => Err(e),
        Err(e) => {
            let mut machine = Machine::of_container(&dump);
            machine.source = crate::mem::MachineSource::Unknown(e.to_string());
            Ok(Memory { dump, machine })
        }
    }
}

/// The kernel image in an image's kernel-image region, by its CodeView record.
pub fn find_kernel(space: &AddressSpace<'_>) -> Option<KernelImage> {
    let (start, end) = match space.arch() {
        Arch::X64 => (0xFFFF_F800_0000_0000u64, 0xFFFF_F810_0000_0000u64),
        Arch::X86 { .. } => (0x8000_0000, 0xC000_0000),
        Arch::Arm64 => return None,
    };
    let mut va = start;
    let mut steps = 0u64;
    while va < end && steps < MAX_KERNEL_STEPS {
        steps += 1;
        match space.translate(VirtAddr::new(va)) {
            Ok(_) => {
                let mut mz = [0u8; 2];
                if space.read(VirtAddr::new(va), &mut mz).is_ok() && &mz == b"MZ" {
                    let img = KernelImage::read(space, VirtAddr::new(va));
                    let name = img.pdb.as_ref().map(|p| p.name.raw().to_ascii_lowercase());
                    if name.is_ok_and(|n| KERNEL_PDB_NAMES.contains(&n.as_str())) {
                        return Some(img);
                    }
                }
                va += PAGE_SIZE;
            }
            Err(e) => va = skip_unmapped(space.arch(), va, &e),
        }
    }
    None
}

/// The next address after the range an absent entry leaves unmapped.
fn skip_unmapped(arch: Arch, va: u64, e: &MemError) -> u64 {
    let level = match e {
        MemError::NotPresent { level, .. } | MemError::TableMissing { level, .. } => *level,
        _ => PagingLevel::Pt,
    };
    let span = PagingMode::for_arch(arch).map_or(PAGE_SIZE, |m| m.spec().span(level));
    (va & !(span - 1)).saturating_add(span)
}
