//! Memory images of the forged machine that are not crash dumps (issue 14): the physical memory
//! the crash dump stores (`PhysMem`, exactly the pages `PhysMem::is_stored` accepts) rendered as
//!
//! * a raw image ([`ImageKind::Raw`]): file offset = physical address, no header at all, from 0
//!   to the end of the last stored page; pages the dump does not store read as zero;
//! * a VMware suspended state ([`ImageKind::Vmware`]): `<stem>.vmem` (the stored runs back to
//!   back, lowest first) + `<stem>.vmss` (header, group table, a "cpu" and a "memory" group whose
//!   region tags place the runs); see `vmware.rs`;
//! * a VMware snapshot with the memory embedded ([`ImageKind::VmwareEmbedded`]): one `.vmsn`
//!   whose "memory" group carries the runs in its `Memory` tag; see `vmware.rs`;
//! * an ELF core as QEMU's `dump-guest-memory` writes one ([`ImageKind::Elf`]): PT_NOTE, then
//!   one PT_LOAD per stored run addressed by `p_paddr`; see `elf.rs`.
//!
//! The VMware and ELF images hold exactly the stored runs, so a reader of them meets the same
//! holes as a reader of the crash dump ([`crate::Forged::expected_read`] holds for them too); the
//! raw image cannot express a hole, so there a page the dump lacks reads as zeros. Every machine
//! of the forge has holes (`machine_runs`: below 1 MiB, after n/8 and a PCI-like hole at 3n/4;
//! a 16 GiB machine has memory above 4 GiB), and a bitmap config's stored pages form many small
//! runs, so region tables and program headers are exercised, not just a flat copy.
//!
//! Windows 8+ hibernation files of the same memory are in `hiberfil.rs`
//! ([`crate::Forged::write_hiberfil`]).
//!
//! Byte layouts come from public format definitions (named in each file), never from
//! etwdump's readers.

mod elf;
pub(crate) mod hiberfil;
pub(crate) mod random;
mod vmware;

use std::path::{Path, PathBuf};

use crate::config::Arch;
use crate::dump::layout::write_sparse;
use crate::dump::phys::PhysMem;
use crate::util::PAGE_SIZE;
use crate::Forged;

/// Which rendering [`Forged::write_image`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageKind {
    /// A flat file: offset = physical address, holes zero, no header.
    Raw,
    /// `<stem>.vmem` + `<stem>.vmss` (volatility3's VMware layer).
    Vmware,
    /// One `<stem>.vmsn` with the memory in its "memory" group (volatility 2's VMware snapshot
    /// address space; volatility3 reads only the `.vmem` + `.vmss` pair).
    VmwareEmbedded,
    /// An ELF core (ET_CORE) as QEMU `dump-guest-memory` writes it: ELF64 for x64 and for
    /// x86 machines with memory above 4 GiB, else ELF32 (EM_386).
    Elf,
}

impl ImageKind {
    /// Every kind, in the order the forge binary writes them.
    pub const ALL: [ImageKind; 4] = [
        ImageKind::Raw,
        ImageKind::Vmware,
        ImageKind::VmwareEmbedded,
        ImageKind::Elf,
    ];

    /// Short name (manifest `"format"`): "raw", "vmware", "vmware-embedded", "elf".
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Raw => "raw",
            ImageKind::Vmware => "vmware",
            ImageKind::VmwareEmbedded => "vmware-embedded",
            ImageKind::Elf => "elf",
        }
    }

    /// The extension of the file that holds the memory ("raw", "vmem", "vmsn", "elf").
    pub fn memory_extension(self) -> &'static str {
        match self {
            ImageKind::Raw => "raw",
            ImageKind::Vmware => "vmem",
            ImageKind::VmwareEmbedded => "vmsn",
            ImageKind::Elf => "elf",
        }
    }
}

/// One run of physical memory in an image: `size` bytes from physical address `start` are at
/// `file_offset` of the file holding the memory (the raw file, the `.vmem`, the `.vmsn` or
/// the ELF file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageRange {
    pub start: u64,
    pub size: u64,
    pub file_offset: u64,
}

/// The runs `(first PFN, count)` back to back from file offset `base`.
fn back_to_back(runs: &[(u64, u64)], base: u64) -> Vec<ImageRange> {
    let mut off = base;
    runs.iter()
        .map(|&(pfn, count)| {
            let r = ImageRange {
                start: pfn * PAGE_SIZE,
                size: count * PAGE_SIZE,
                file_offset: off,
            };
            off += r.size;
            r
        })
        .collect()
}

/// Where each kind puts the stored runs; the raw image at their own addresses.
pub(crate) fn ranges(f: &Forged, kind: ImageKind) -> Vec<ImageRange> {
    let runs = f.pm.stored_runs();
    match kind {
        ImageKind::Raw => runs
            .iter()
            .map(|&(pfn, count)| ImageRange {
                start: pfn * PAGE_SIZE,
                size: count * PAGE_SIZE,
                file_offset: pfn * PAGE_SIZE,
            })
            .collect(),
        ImageKind::Vmware => back_to_back(&runs, 0),
        ImageKind::VmwareEmbedded => {
            let meta = vmware::metadata(&cpu_state(f), &back_to_back(&runs, 0), true);
            back_to_back(&runs, meta.len() as u64)
        }
        ImageKind::Elf => {
            let offset = elf::memory_offset(&f.config, &runs);
            back_to_back(&runs, offset)
        }
    }
}

/// Every stored page with content as (file offset, bytes) under `ranges` (pages of the dump
/// that hold only zeros are absent: the sparse writer leaves them as holes).
fn placed_pages<'a>(
    pm: &'a PhysMem,
    ranges: &'a [ImageRange],
) -> impl Iterator<Item = (u64, &'a [u8])> + 'a {
    let mut k = 0;
    pm.pages().iter().map(move |(&pfn, page)| {
        let pa = pfn * PAGE_SIZE;
        while ranges[k].start + ranges[k].size <= pa {
            k += 1;
        }
        assert!(
            pa >= ranges[k].start,
            "page {pfn:#x} outside the image's runs"
        );
        (ranges[k].file_offset + pa - ranges[k].start, &page[..])
    })
}

/// End of the memory in the file that holds it.
fn memory_end(ranges: &[ImageRange]) -> u64 {
    ranges.last().map_or(0, |r| r.file_offset + r.size)
}

/// `path` with extension `ext`.
fn sibling(path: &Path, ext: &str) -> PathBuf {
    path.with_extension(ext)
}

/// [`Forged::write_image`]: Raw and Elf write `path` itself, Vmware `path` with the extensions
/// `.vmem` and `.vmss`, VmwareEmbedded `path` with `.vmsn`.
pub(crate) fn write(f: &Forged, path: &Path, kind: ImageKind) -> std::io::Result<Vec<PathBuf>> {
    let ranges = ranges(f, kind);
    let pages = placed_pages(&f.pm, &ranges);
    let end = memory_end(&ranges);
    match kind {
        ImageKind::Raw => {
            write_sparse(path, &[], pages, end)?;
            Ok(vec![path.to_path_buf()])
        }
        ImageKind::Vmware => {
            let (vmem, vmss) = (sibling(path, "vmem"), sibling(path, "vmss"));
            write_sparse(&vmem, &[], pages, end)?;
            std::fs::write(&vmss, vmware::metadata(&cpu_state(f), &ranges, false))?;
            Ok(vec![vmem, vmss])
        }
        ImageKind::VmwareEmbedded => {
            let vmsn = sibling(path, "vmsn");
            let relative = back_to_back(&f.pm.stored_runs(), 0);
            let meta = vmware::metadata(&cpu_state(f), &relative, true);
            assert_eq!(meta.len() as u64, ranges[0].file_offset);
            // The group's end-of-tags marker (two zero bytes) follows the memory.
            write_sparse(&vmsn, &meta, pages, end + 2)?;
            Ok(vec![vmsn])
        }
        ImageKind::Elf => {
            let headers = elf::headers(&f.config, &cpu_state(f), &ranges);
            assert_eq!(headers.len() as u64, ranges[0].file_offset);
            write_sparse(path, &headers, pages, end)?;
            Ok(vec![path.to_path_buf()])
        }
    }
}

/// What the image formats record of the processors: the architecture, and per CPU its control
/// registers and the base of the segment that points at its KPCR (x64 GS, x86 FS).
pub(crate) struct CpuState {
    pub arch: Arch,
    /// CR0, CR2, CR3, CR4 as one array indexed by register number (CR1 = 0).
    pub cr: [u64; 5],
    pub kpcr: Vec<u64>,
}

/// CR0 = PG | AM | WP | NE | ET | MP | PE (0x80050033, Windows' usual value); CR3 = the
/// header's DirectoryTableBase (x64 with its low PCID bits); CR4 = DE | PSE | MCE | PGE |
/// OSFXSR | OSXMMEXCPT, plus PAE (x64 and PAE) and OSXSAVE (x64). The KPCR of CPU i is its
/// KPRCB minus 0x180 (x64) / 0x120 (x86), as the forge places them.
pub(crate) fn cpu_state(f: &Forged) -> CpuState {
    let arch = f.config.arch;
    let cr4 = match arch {
        Arch::X64 => 0x406F8,
        Arch::X86Pae => 0x6F8,
        Arch::X86NonPae => 0x6D8,
    };
    let kpcr_off = if arch.is_x64() { 0x180 } else { 0x120 };
    CpuState {
        arch,
        cr: [0x8005_0033, 0, 0, f.dtb, cr4],
        kpcr: f.kprcbs.iter().map(|p| p - kpcr_off).collect(),
    }
}
