//! Physical memory images that are not crash dumps (issue 14), each reduced to one table of
//! physical ranges over the file: raw images, ELF cores, VMware .vmem/.vmss/.vmsn, and the
//! page ranges of RDMP crash dumps (DumpType 8, 9, 0xA). Detected by content, never by the
//! file name's extension (a sibling .vmss/.vmem is looked for by name, then checked by content).
//!
//! * **Raw** (winpmem, Magnet RAM Capture, FTK Imager, DumpIt, ...): file offset = physical
//!   address, from 0; what the file holds is present (a tool's zero-filled holes read as zeros,
//!   which no format can tell apart); a trailing partial page is absent.
//! * **ELF core** (QEMU `dump-guest-memory`, VirtualBox `debugvm dumpvmcore`): every PT_LOAD
//!   segment holds `p_filesz` bytes of guest physical memory at `p_paddr` (ELF64 and ELF32, little
//!   endian); `p_memsz` beyond `p_filesz` is absent, not zero.
//! * **VMware** (volatility3 `layers/vmware.py`): a .vmss/.vmsn starts with one of four magics,
//!   a group count, then 80-byte group entries (64-byte name, u64 offset of the group's tags);
//!   the "memory" group's tags `regionsCount`, `regionPPN[i]`, `regionPageNum[i]` and
//!   `regionSize[i]` place the .vmem's pages (page `regionPageNum` of the .vmem is physical page
//!   `regionPPN`, for `regionSize` pages); without regions the .vmem is flat. A snapshot file
//!   whose memory group holds the memory itself (tag `Memory`) is read without a .vmem.
//! * **RDMP** (crash-dump-format.md §1.2b): at 0x2000 a Marker 0x40, `RDMP`, `DUMP`,
//!   MetadataSize and FirstPageOffset; {Pfn, PageCount} ranges at 0x2030 (8/9: filling
//!   MetadataSize; 0xA: until TotalNumberOfPages), pages stored back to back from
//!   FirstPageOffset; a range with Pfn 0 ends the list.
//!
//! Every count, offset and size read here is bounded before it is used.

use super::error::ImageError;
use super::format::{Format, Input, Opened};
use super::DumpError;
use crate::addr::{Pfn, PAGE_SIZE};
use crate::bytes::LeBytes;
use crate::warning::{Warning, WarningKind};

/// Most ranges accepted from any table (ELF program headers, VMware regions, RDMP ranges).
pub(crate) const MAX_RANGES: usize = 1 << 16;
/// Most VMware tags walked in one group.
const MAX_TAGS: usize = 1 << 20;
/// Highest physical address accepted (52-bit physical addressing).
const MAX_PHYS: u64 = 1 << 52;

/// The VMware state-file magics (volatility3 `layers/vmware.py`).
pub(crate) const VMWARE_MAGICS: [[u8; 4]; 4] = [
    [0xD0, 0xBE, 0xD2, 0xBE],
    [0xD1, 0xBA, 0xD1, 0xBA],
    [0xD2, 0xBE, 0xD2, 0xBE],
    [0xD3, 0xBE, 0xD3, 0xBE],
];

/// One run of physical memory stored contiguously in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PhysRange {
    /// Physical address of the first byte (page aligned).
    pub start: u64,
    /// Length in bytes (whole pages).
    pub size: u64,
    /// Where the first byte is in the file.
    pub file_offset: u64,
}

/// The container format of a memory image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    Raw,
    ElfCore,
    /// A .vmem placed by the region table of its .vmss/.vmsn (or flat without one).
    VmwareVmem,
    /// A .vmss/.vmsn that holds the memory itself.
    VmwareEmbedded,
    /// DumpType 8, 9 or 0xA.
    Rdmp,
    /// Placed by a layout a host framework handed over (`--layout`, [`super::layout`]).
    Hosted,
}

impl ImageFormat {
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Raw => "raw",
            ImageFormat::ElfCore => "elf_core",
            ImageFormat::VmwareVmem => "vmware_vmem",
            ImageFormat::VmwareEmbedded => "vmware_snapshot",
            ImageFormat::Rdmp => "rdmp",
            ImageFormat::Hosted => "hosted",
        }
    }
}

/// A memory image: physical ranges over the file, sorted by address, not overlapping.
#[derive(Clone, Debug)]
pub struct PhysImage {
    pub format: ImageFormat,
    ranges: Vec<PhysRange>,
    /// ELF machine (EM_X86_64 = 62, EM_386 = 3), when the container says.
    pub elf_machine: Option<u16>,
    /// The VMware metadata file the layout came from.
    pub metadata: Option<crate::text::Untrusted>,
}

impl PhysImage {
    /// Sort, bound and check `ranges` (page-aligned, inside 2^52, non-overlapping).
    pub fn new(format: ImageFormat, mut ranges: Vec<PhysRange>) -> Result<PhysImage, ImageError> {
        if ranges.len() > MAX_RANGES {
            return Err(ImageError::TooManyRanges {
                count: ranges.len(),
                max: MAX_RANGES,
            });
        }
        ranges.retain(|r| r.size > 0);
        ranges.sort_by_key(|r| r.start);
        for r in &ranges {
            if r.start % PAGE_SIZE != 0 || r.size % PAGE_SIZE != 0 {
                return Err(ImageError::Unaligned {
                    start: r.start,
                    size: r.size,
                });
            }
            if r.start.checked_add(r.size).is_none_or(|e| e > MAX_PHYS) {
                return Err(ImageError::BeyondPhysical {
                    start: r.start,
                    size: r.size,
                });
            }
        }
        for w in ranges.windows(2) {
            if w[0].start + w[0].size > w[1].start {
                return Err(ImageError::Overlap {
                    first: w[0].start,
                    second: w[1].start,
                });
            }
        }
        Ok(PhysImage {
            format,
            ranges,
            elf_machine: None,
            metadata: None,
        })
    }

    pub fn ranges(&self) -> &[PhysRange] {
        &self.ranges
    }

    /// Pages the ranges hold.
    pub fn total_pages(&self) -> u64 {
        self.ranges.iter().map(|r| r.size / PAGE_SIZE).sum()
    }

    /// The file offset of physical page `pfn`, if a range holds it.
    pub fn file_offset(&self, pfn: u64) -> Option<u64> {
        let pa = pfn.checked_mul(PAGE_SIZE)?;
        let i = self.ranges.partition_point(|r| r.start <= pa);
        let r = self.ranges.get(i.checked_sub(1)?)?;
        (pa < r.start + r.size)
            .then(|| r.file_offset.checked_add(pa - r.start))
            .flatten()
    }

    /// Bytes of the file that more than one range places (ranges sorted by file offset; the
    /// overlap of each with the furthest end before it).
    pub(crate) fn aliased_bytes(&self) -> u64 {
        let mut by_file: Vec<(u64, u64)> = self
            .ranges
            .iter()
            .map(|r| (r.file_offset, r.file_offset.saturating_add(r.size)))
            .collect();
        by_file.sort_unstable();
        let mut end = 0u64;
        let mut aliased = 0u64;
        for (s, e) in by_file {
            if s < end {
                aliased = aliased.saturating_add(e.min(end) - s);
            }
            end = end.max(e);
        }
        aliased
    }

    /// The end of the last range's bytes in the file.
    pub fn data_end(&self) -> u64 {
        self.ranges
            .iter()
            .map(|r| r.file_offset.saturating_add(r.size))
            .max()
            .unwrap_or(0)
    }
}

/// A raw image: the file is physical memory from address 0. Returns it and, when the file
/// ends inside a page, how many trailing bytes are left out.
pub fn raw(len: u64) -> (PhysImage, u64) {
    let whole = len - len % PAGE_SIZE;
    let ranges = vec![PhysRange {
        start: 0,
        size: whole,
        file_offset: 0,
    }];
    let img = PhysImage::new(ImageFormat::Raw, ranges).unwrap_or(PhysImage {
        format: ImageFormat::Raw,
        ranges: Vec::new(),
        elf_machine: None,
        metadata: None,
    });
    (img, len % PAGE_SIZE)
}

/// Smallest file taken as a raw image when it has no signature (1 MiB): smaller files are
/// reported as "not a crash dump" instead.
pub(crate) const MIN_RAW: u64 = 1 << 20;

/// Could this be a raw image: no crash-dump, minidump, ELF or VMware signature, and at least
/// `MIN_RAW` bytes? (Whether it is memory is decided by finding page tables in it.)
pub fn is_raw_candidate(file: &[u8]) -> bool {
    file.len() as u64 >= MIN_RAW && has_no_signature(file)
}

/// No crash-dump, minidump, ELF or VMware signature at the start.
pub(crate) fn has_no_signature(file: &[u8]) -> bool {
    !file.starts_with(b"PAGE")
        && !file.starts_with(b"MDMP")
        && !is_elf(file)
        && !is_vmware_state(file)
        && !super::hiberfil::has_signature(file)
}

/// Does the file start like an ELF file?
pub fn is_elf(file: &[u8]) -> bool {
    file.starts_with(b"\x7fELF")
}

/// Does the file start with a VMware state-file magic?
pub fn is_vmware_state(file: &[u8]) -> bool {
    file.len() >= 4 && VMWARE_MAGICS.iter().any(|m| file[..4] == *m)
}

/// An ELF core's physical layout: one range per PT_LOAD with file bytes (ELF32 or ELF64,
/// little endian). Errors name the field that is wrong.
pub fn elf(file: &[u8]) -> Result<PhysImage, ImageError> {
    if file.len() < 16 {
        return Err(ImageError::ElfTooShort { len: file.len() });
    }
    let class = file[4];
    if file.get(5) != Some(&1) {
        return Err(ImageError::ElfNotLittleEndian);
    }
    let wide = match class {
        2 => true,
        1 => false,
        c => return Err(ImageError::ElfClass(c)),
    };
    let need = if wide { 64 } else { 52 };
    if file.len() < need {
        return Err(ImageError::ElfHeaderShort {
            len: file.len(),
            need,
        });
    }
    let e_type = file.u16_at(16).unwrap_or(0);
    if e_type != 4 {
        return Err(ImageError::ElfNotCore(e_type));
    }
    let machine = file.u16_at(18).unwrap_or(0);
    let (phoff, phentsize, phnum) = if wide {
        (
            file.u64_at(32).unwrap_or(0),
            usize::from(file.u16_at(54).unwrap_or(0)),
            usize::from(file.u16_at(56).unwrap_or(0)),
        )
    } else {
        (
            u64::from(file.u32_at(28).unwrap_or(0)),
            usize::from(file.u16_at(42).unwrap_or(0)),
            usize::from(file.u16_at(44).unwrap_or(0)),
        )
    };
    let min_ent = if wide { 56 } else { 32 };
    if phnum == 0 {
        return Err(ImageError::ElfNoProgramHeaders);
    }
    if phentsize < min_ent {
        return Err(ImageError::ElfEntrySize {
            size: phentsize,
            min: min_ent,
        });
    }
    let table_end = phoff.saturating_add((phnum * phentsize) as u64);
    if table_end > file.len() as u64 {
        return Err(ImageError::ElfHeadersPastEnd {
            phoff,
            phnum,
            phentsize,
            len: file.len(),
        });
    }
    let mut ranges = Vec::new();
    let mut physical_loads = 0usize;
    for i in 0..phnum {
        let h = &file[phoff as usize + i * phentsize..];
        let (p_type, offset, paddr, filesz) = if wide {
            (
                h.u32_at(0).unwrap_or(0),
                h.u64_at(8).unwrap_or(0),
                h.u64_at(24).unwrap_or(0),
                h.u64_at(32).unwrap_or(0),
            )
        } else {
            (
                h.u32_at(0).unwrap_or(0),
                u64::from(h.u32_at(4).unwrap_or(0)),
                u64::from(h.u32_at(12).unwrap_or(0)),
                u64::from(h.u32_at(16).unwrap_or(0)),
            )
        };
        if p_type != 1 || filesz == 0 {
            continue;
        }
        physical_loads += 1;
        // Reads are page-granular: a segment keeps its whole, page-aligned pages.
        let skip = (PAGE_SIZE - paddr % PAGE_SIZE) % PAGE_SIZE;
        let pages = filesz.saturating_sub(skip) / PAGE_SIZE;
        if pages == 0 {
            continue;
        }
        // A segment at the top of the address space cannot be memory (PhysImage::new
        // refuses anything past 2^52): its start is checked, not wrapped (fuzz finding 6).
        let Some(start) = paddr.checked_add(skip) else {
            return Err(ImageError::ElfPaddr { index: i, paddr });
        };
        ranges.push(PhysRange {
            start,
            size: pages * PAGE_SIZE,
            file_offset: offset.saturating_add(skip),
        });
    }
    if physical_loads == 0 {
        return Err(ImageError::ElfNoMemory);
    }
    if ranges.len() > 1 && ranges.iter().all(|r| r.start == 0) {
        return Err(ImageError::ElfNoAddresses(ranges.len()));
    }
    let mut img = PhysImage::new(ImageFormat::ElfCore, ranges)
        .map_err(|e| ImageError::ElfRanges(Box::new(e)))?;
    img.elf_machine = Some(machine);
    Ok(img)
}

/// One VMware tag's value: a number, or (long data) where its bytes are in the file.
#[derive(Clone, Copy, Debug)]
enum TagValue {
    Num(u64),
    Bytes { offset: u64, len: u64 },
}

/// The tags of the VMware state file's "memory" group: (name, indices) → value.
fn vmware_memory_tags(
    file: &[u8],
) -> Result<Vec<(crate::text::Untrusted, Vec<u32>, TagValue)>, ImageError> {
    let version = file[0] & 0xF;
    let groups = file.u32_at(8).ok_or(ImageError::VmwareGroupCount)? as usize;
    if groups > 4096 {
        return Err(ImageError::VmwareTooManyGroups(groups));
    }
    let mut memory = None;
    for g in 0..groups {
        let at = 12 + g * 80;
        let name = file
            .get(at..at + 64)
            .ok_or(ImageError::VmwareGroupPastEnd { group: g, at })?;
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(64)];
        if name == b"memory" {
            memory = file.u64_at(at + 64);
        }
    }
    let mut off = memory.ok_or(ImageError::VmwareNoMemoryGroup)? as usize;
    let mut tags = Vec::new();
    for _ in 0..MAX_TAGS {
        let flags = *file.get(off).ok_or(ImageError::VmwareTagPastEnd(off))?;
        let name_len = usize::from(*file.get(off + 1).ok_or(ImageError::VmwareTagNameLength)?);
        if flags == 0 && name_len == 0 {
            return Ok(tags);
        }
        let name = file
            .get(off + 2..off + 2 + name_len)
            .ok_or(ImageError::VmwareTagNamePastEnd(off + 2))?;
        let name = crate::text::Untrusted::from_utf8_lossy(name).truncated(64);
        let n_idx = usize::from((flags >> 6) & 3);
        let mut indices = Vec::with_capacity(n_idx);
        let mut p = off + 2 + name_len;
        for _ in 0..n_idx {
            indices.push(file.u32_at(p).ok_or_else(|| ImageError::VmwareTagValue {
                tag: name.clone(),
                what: "index",
            })?);
            p += 4;
        }
        let data_len = usize::from(flags & 0x3F);
        let value;
        if data_len == 62 || data_len == 63 {
            let w = if version == 0 { 4 } else { 8 };
            let size = if w == 4 {
                file.u32_at(p).map(u64::from)
            } else {
                file.u64_at(p)
            }
            .ok_or_else(|| ImageError::VmwareTagValue {
                tag: name.clone(),
                what: "data size",
            })?;
            let data_at = (p + 2 * w + 2) as u64;
            let end = data_at
                .checked_add(size)
                .filter(|&e| e <= file.len() as u64);
            let Some(end) = end else {
                return Err(ImageError::VmwareTagData {
                    tag: name,
                    size,
                    at: data_at,
                    len: file.len(),
                });
            };
            value = TagValue::Bytes {
                offset: data_at,
                len: size,
            };
            off = end as usize;
        } else {
            let v = match data_len {
                4 => file.u32_at(p).map(u64::from),
                8 => file.u64_at(p),
                1 => file.get(p).map(|&b| u64::from(b)),
                2 => file.u16_at(p).map(u64::from),
                _ => Some(0),
            }
            .ok_or_else(|| ImageError::VmwareTagValue {
                tag: name.clone(),
                what: "value",
            })?;
            value = TagValue::Num(v);
            off = p + data_len;
        }
        tags.push((name, indices, value));
    }
    Err(ImageError::VmwareTooManyTags(MAX_TAGS))
}

/// What a VMware state file says of the memory: the regions (physical address, offset in the
/// memory's bytes, size), and where the memory is when the file holds it.
#[derive(Debug)]
pub(crate) struct VmwareLayout {
    pub regions: Vec<(u64, u64, u64)>,
    pub embedded: Option<(u64, u64)>,
}

/// Parse a VMware .vmss/.vmsn's memory group.
pub(crate) fn vmware_layout(file: &[u8]) -> Result<VmwareLayout, ImageError> {
    if !is_vmware_state(file) {
        return Err(ImageError::VmwareMagic);
    }
    let tags = vmware_memory_tags(file)?;
    let num = |name: &str, idx: &[u32]| {
        tags.iter().find_map(|(n, i, v)| match v {
            TagValue::Num(x) if n == name && i == idx => Some(*x),
            _ => None,
        })
    };
    let count = num("regionsCount", &[]).unwrap_or(0);
    if count > MAX_RANGES as u64 {
        return Err(ImageError::VmwareRegionCount {
            count,
            max: MAX_RANGES,
        });
    }
    let mut regions = Vec::new();
    for i in 0..count as u32 {
        let (Some(ppn), Some(page), Some(size)) = (
            num("regionPPN", &[i]),
            num("regionPageNum", &[i]),
            num("regionSize", &[i]),
        ) else {
            return Err(ImageError::VmwareRegionIncomplete(i));
        };
        let pa = ppn
            .checked_mul(PAGE_SIZE)
            .ok_or(ImageError::VmwareOverflow("regionPPN"))?;
        let at = page
            .checked_mul(PAGE_SIZE)
            .ok_or(ImageError::VmwareOverflow("regionPageNum"))?;
        let len = size
            .checked_mul(PAGE_SIZE)
            .ok_or(ImageError::VmwareOverflow("regionSize"))?;
        regions.push((pa, at, len));
    }
    let embedded = tags.iter().find_map(|(n, _, v)| match v {
        TagValue::Bytes { offset, len } if n == "Memory" => Some((*offset, *len)),
        _ => None,
    });
    Ok(VmwareLayout { regions, embedded })
}

/// The ranges of memory bytes `mem_len` long at file offset `base`, placed by `regions` (flat
/// when there are none), cut to the bytes there are. Returns the image and the bytes the
/// regions claim beyond the memory's end.
pub(crate) fn vmware_ranges(
    format: ImageFormat,
    regions: &[(u64, u64, u64)],
    base: u64,
    mem_len: u64,
) -> Result<(PhysImage, u64), ImageError> {
    let flat = [(0, 0, mem_len - mem_len % PAGE_SIZE)];
    let regions = if regions.is_empty() {
        &flat[..]
    } else {
        regions
    };
    let mut ranges = Vec::new();
    let mut missing = 0u64;
    for &(pa, at, len) in regions {
        let have = mem_len.saturating_sub(at).min(len);
        let have = have - have % PAGE_SIZE;
        missing += len - have;
        ranges.push(PhysRange {
            start: pa,
            size: have,
            file_offset: base.saturating_add(at),
        });
    }
    Ok((PhysImage::new(format, ranges)?, missing))
}

/// The page ranges of an RDMP dump (DumpType 8, 9, 0xA) in `file`, its header at 0x2000.
pub fn rdmp(file: &[u8], dump_type: u32) -> Result<PhysImage, ImageError> {
    const AT: usize = 0x2000;
    let h = file
        .get(AT..AT + 0x30)
        .ok_or(ImageError::RdmpHeaderPastEnd)?;
    if h.u32_at(0) != Some(0x40) {
        return Err(ImageError::RdmpMarker(h.u32_at(0).unwrap_or(0)));
    }
    if &h[4..8] != b"RDMP" || &h[8..12] != b"DUMP" {
        return Err(ImageError::RdmpSignature);
    }
    let meta = h.u64_at(0x10).unwrap_or(0);
    let first = h.u64_at(0x18).unwrap_or(0);
    if meta.checked_sub(0x20) != first.checked_sub(0x2040) {
        return Err(ImageError::RdmpSizes { meta, first });
    }
    let table = AT + 0x30;
    let (max_entries, total) = if dump_type == 0xA {
        (usize::MAX, Some(h.u64_at(0x28).unwrap_or(0)))
    } else {
        (meta.saturating_sub(0x30) as usize / 16, None)
    };
    let mut ranges = Vec::new();
    let mut consumed = 0u64;
    let mut at_file = first;
    for i in 0..MAX_RANGES.min(max_entries) {
        if total.is_some_and(|t| consumed >= t) {
            break;
        }
        let Some(e) = file.get(table + i * 16..table + i * 16 + 16) else {
            break;
        };
        let (pfn, count) = (e.u64_at(0).unwrap_or(0), e.u64_at(8).unwrap_or(0));
        if pfn == 0 {
            break;
        }
        let size = count
            .checked_mul(PAGE_SIZE)
            .ok_or(ImageError::RdmpOverflow {
                index: i,
                field: "PageCount",
                value: count,
            })?;
        let start = pfn.checked_mul(PAGE_SIZE).ok_or(ImageError::RdmpOverflow {
            index: i,
            field: "Pfn",
            value: pfn,
        })?;
        ranges.push(PhysRange {
            start,
            size,
            file_offset: at_file,
        });
        at_file = at_file.saturating_add(size);
        consumed = consumed.saturating_add(count);
    }
    PhysImage::new(ImageFormat::Rdmp, ranges)
}

impl super::Container for PhysImage {
    fn page_offset(&self, _file: &[u8], pfn: Pfn) -> Option<u64> {
        self.file_offset(pfn.get())
    }

    fn physical_runs(&self, file: &[u8]) -> Vec<(u64, u64)> {
        // Ranges may place the same file bytes at several physical addresses: the pass reads
        // at most as many pages as the file holds (a warning at open says so), so aliases
        // cannot multiply its cost.
        let len = file.len() as u64;
        let mut budget = len / PAGE_SIZE;
        let mut out = Vec::new();
        for r in self.ranges() {
            let n =
                super::container::held(len, Some(r.file_offset), r.size / PAGE_SIZE).min(budget);
            if n > 0 {
                out.push((r.start / PAGE_SIZE, n));
            }
            budget -= n;
        }
        out
    }

    fn stored_pages(&self) -> u64 {
        self.total_pages()
    }

    fn storage(&self) -> super::Storage {
        super::Storage {
            kind: "physical (ranges)",
            runs: Some(self.ranges().len()),
            ..Default::default()
        }
    }

    fn headerless(&self) -> bool {
        self.format != ImageFormat::Rdmp
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The VMware state-file error of `reason`.
fn bad_vmware(reason: ImageError) -> DumpError {
    DumpError::BadImage {
        format: "VMware state",
        reason,
    }
}

/// A .vmss/.vmsn (by content). Opened by its path, its memory is inside it or in the .vmem
/// beside it; held in memory, only the memory inside it can be read.
pub(crate) const VMWARE_STATE: Format = Format {
    name: "VMware state (.vmss/.vmsn)",
    probe: |i| is_vmware_state(i.bytes()),
    open: open_vmware_state,
};

fn open_vmware_state(input: Input<'_>) -> Result<Opened, DumpError> {
    let layout = vmware_layout(input.bytes()).map_err(bad_vmware)?;
    if let Some((at, len)) = layout.embedded {
        let (img, missing) = vmware_ranges(ImageFormat::VmwareEmbedded, &layout.regions, at, len)
            .map_err(bad_vmware)?;
        return opened(input.backing, input.file, img, missing, input.opts);
    }
    let Some(path) = input.path else {
        return Err(DumpError::Missing(
            "a VMware state file without the memory: open the .vmss/.vmsn by its path, with its .vmem beside it".into(),
        ));
    };
    let vmem = path.with_extension("vmem");
    if !vmem.exists() {
        return Err(DumpError::Missing(format!(
            "{}: a VMware state file without the memory: its .vmem ({}) is not beside it",
            path.display(),
            vmem.display()
        )));
    }
    let (mem, mem_file) = super::map_file(&vmem)?;
    vmem_placed(mem, mem_file, &layout, path, input.opts)
}

/// A file named as VMware names its memory (*.vmem), with no signature, beside a
/// .vmss/.vmsn: placed by that state file's layout. (A raw image that happens to sit beside
/// one, x.raw beside x.vmss, is raw.)
pub(crate) const VMWARE_VMEM: Format = Format {
    name: "VMware memory (.vmem)",
    probe: |i| {
        i.path.is_some_and(|p| {
            p.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("vmem"))
                && has_no_signature(i.bytes())
                && vmware_state_beside(p).is_some()
        })
    },
    open: open_vmem,
};

/// The first of `path`'s .vmss and .vmsn that exists and starts with a VMware magic.
fn vmware_state_beside(path: &std::path::Path) -> Option<(std::path::PathBuf, memmap2::Mmap)> {
    ["vmss", "vmsn"].into_iter().find_map(|ext| {
        let meta = path.with_extension(ext);
        let (m, _) = super::map_file(&meta).ok()?;
        is_vmware_state(&m).then_some((meta, m))
    })
}

fn open_vmem(input: Input<'_>) -> Result<Opened, DumpError> {
    let Some((meta, m)) = input.path.and_then(vmware_state_beside) else {
        return Err(DumpError::Missing(
            "a .vmem without its VMware state file beside it".into(),
        ));
    };
    let layout = vmware_layout(&m).map_err(|reason| {
        bad_vmware(ImageError::VmwareAt {
            path: meta.display().to_string(),
            error: Box::new(reason),
        })
    })?;
    let super::Backing::Map(mem) = input.backing else {
        return Err(DumpError::Missing(
            "a .vmem held in memory: open it by its path".into(),
        ));
    };
    let Some(file) = input.file else {
        return Err(DumpError::Missing("a .vmem without its open file".into()));
    };
    vmem_placed(mem, file, &layout, &meta, input.opts)
}

/// A .vmem (mapped, with its file) placed by the layout of the state file `meta`.
fn vmem_placed(
    mem: memmap2::Mmap,
    file: std::fs::File,
    layout: &VmwareLayout,
    meta: &std::path::Path,
    opts: super::OpenOptions,
) -> Result<Opened, DumpError> {
    let (mut img, missing) = vmware_ranges(
        ImageFormat::VmwareVmem,
        &layout.regions,
        0,
        mem.len() as u64,
    )
    .map_err(bad_vmware)?;
    img.metadata = Some(meta.display().to_string().into());
    opened(super::Backing::Map(mem), Some(file), img, missing, opts)
}

/// An ELF core (by its magic).
pub(crate) const ELF_CORE: Format = Format {
    name: "ELF core",
    probe: |i| is_elf(i.bytes()),
    open: |input| {
        let img = elf(input.bytes()).map_err(|reason| DumpError::BadImage {
            format: "ELF core",
            reason,
        })?;
        opened(input.backing, input.file, img, 0, input.opts)
    },
};

/// A raw image: no signature and at least [`MIN_RAW`] bytes.
pub(crate) const RAW: Format = Format {
    name: "raw",
    probe: |i| is_raw_candidate(i.bytes()),
    open: |input| {
        let (img, partial) = raw(input.bytes().len() as u64);
        let mut o = opened(input.backing, input.file, img, 0, input.opts)?;
        if partial > 0 {
            o.warnings.push(Warning::new(WarningKind::Anomaly, format!(
                "the raw image ends {partial:#x} bytes into a page: that partial page reads as missing"
            )));
        }
        Ok(o)
    },
};

/// A crash dump of DumpType 8, 9 or 0xA: page ranges after an RDMP header.
pub(crate) const RDMP_DUMP: Format = Format {
    name: "RDMP crash dump",
    probe: |i| i.dump_type().is_some_and(|t| (8..=0xA).contains(&t.0)),
    open: |input| {
        let header = super::format::dump_header(&input)?;
        let img =
            rdmp(input.bytes(), header.dump_type.0).map_err(|reason| DumpError::BadImage {
                format: "RDMP",
                reason,
            })?;
        let end = img.data_end();
        let what = format!(
            "the page data of {} RDMP ranges ({:#x} pages)",
            img.ranges().len(),
            img.total_pages()
        );
        super::format::crash_dump(input, header, Box::new(img), Some(end), what, Vec::new())
    },
};

/// A memory image over `backing`; `missing` bytes of its ranges lie past the memory's end.
pub(super) fn opened(
    backing: super::Backing,
    file: Option<std::fs::File>,
    img: PhysImage,
    missing: u64,
    opts: super::OpenOptions,
) -> Result<Opened, DumpError> {
    let file_len = backing.bytes().len() as u64;
    let mut warnings = Vec::new();
    if missing > 0 {
        warnings.push(Warning::new(WarningKind::Anomaly, format!(
            "the {} layout places {missing:#x} bytes of memory past the end of the memory data; they read as missing",
            img.format.name()
        )));
    }
    let aliased = img.aliased_bytes();
    if aliased > 0 {
        warnings.push(Warning::new(WarningKind::Anomaly, format!(
            "the {} image's ranges place {aliased:#x} bytes of the file at more than one physical address; a pass over all memory (scan) reads at most the file's {:#x} pages",
            img.format.name(),
            file_len / PAGE_SIZE
        )));
    }
    let end = img.data_end();
    if end > file_len {
        let what = format!(
            "the data of the {} image's {} ranges",
            img.format.name(),
            img.ranges().len()
        );
        super::check_truncation(what, end, file_len, opts, &mut warnings)?;
    }
    let arch = match img.elf_machine {
        Some(3) => super::Arch::X86 { pae: true },
        _ => super::Arch::X64,
    };
    Ok(Opened {
        format: "hosted layout",
        backing,
        file,
        header: super::DumpHeader::none(arch),
        container: Box::new(img),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF64 core with a PT_NOTE and the given PT_LOADs (paddr, filesz), data after the
    /// headers, page aligned, as QEMU's dump-guest-memory lays it out.
    fn elf64(loads: &[(u64, u64)], e_type: u16) -> Vec<u8> {
        let phnum = loads.len() + 1;
        let mut f = vec![0u8; 64 + 56 * phnum];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[6] = 1;
        f[16..18].copy_from_slice(&e_type.to_le_bytes());
        f[18..20].copy_from_slice(&62u16.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&(phnum as u16).to_le_bytes());
        let mut data_at = (f.len() as u64).next_multiple_of(PAGE_SIZE);
        // PT_NOTE first.
        f[64..68].copy_from_slice(&4u32.to_le_bytes());
        for (i, &(paddr, size)) in loads.iter().enumerate() {
            let h = 64 + 56 * (i + 1);
            f[h..h + 4].copy_from_slice(&1u32.to_le_bytes());
            f[h + 8..h + 16].copy_from_slice(&data_at.to_le_bytes());
            f[h + 24..h + 32].copy_from_slice(&paddr.to_le_bytes());
            f[h + 32..h + 40].copy_from_slice(&size.to_le_bytes());
            f[h + 40..h + 48].copy_from_slice(&size.to_le_bytes());
            data_at += size;
        }
        f.resize(data_at as usize, 0xAB);
        f
    }

    #[test]
    fn elf_core_ranges_are_its_physical_loads() {
        let f = elf64(
            &[(0, 0xA0000), (0x100000, 0x300000), (0x1_0000_0000, 0x2000)],
            4,
        );
        let img = elf(&f).unwrap();
        assert_eq!(img.format, ImageFormat::ElfCore);
        assert_eq!(img.elf_machine, Some(62));
        let r: Vec<_> = img
            .ranges()
            .iter()
            .map(|r| (r.start, r.size, r.file_offset))
            .collect();
        assert_eq!(
            r,
            [
                (0, 0xA0000, 0x1000),
                (0x100000, 0x300000, 0xA1000),
                (0x1_0000_0000, 0x2000, 0x3A1000)
            ]
        );
        // Page lookups: inside, in the hole, past the last range.
        assert_eq!(img.file_offset(0x101), Some(0xA1000 + 0x1000));
        assert_eq!(img.file_offset(0xA0), None);
        assert_eq!(img.file_offset(0x0010_0002), None);
        assert_eq!(img.data_end(), 0x3A3000);
    }

    #[test]
    fn bad_elf_cores_say_what_is_wrong() {
        assert_eq!(
            elf(&elf64(&[(0, 0x1000)], 2)).unwrap_err(),
            ImageError::ElfNotCore(2)
        );
        let no_loads = elf64(&[], 4);
        assert_eq!(elf(&no_loads).unwrap_err(), ImageError::ElfNoMemory);
        let unplaced = elf64(&[(0, 0x1000), (0, 0x1000)], 4);
        assert_eq!(elf(&unplaced).unwrap_err(), ImageError::ElfNoAddresses(2));
        let overlap = elf64(&[(0, 0x2000), (0x1000, 0x1000)], 4);
        assert_eq!(
            elf(&overlap).unwrap_err(),
            ImageError::ElfRanges(Box::new(ImageError::Overlap {
                first: 0,
                second: 0x1000
            }))
        );
        assert_eq!(
            elf(&overlap).unwrap_err().to_string(),
            "PT_LOAD: ranges at physical 0x0 and 0x1000 overlap"
        );
        let mut short = elf64(&[(0, 0x1000)], 4);
        short[56..58].copy_from_slice(&0xFFFFu16.to_le_bytes());
        assert!(matches!(
            elf(&short).unwrap_err(),
            ImageError::ElfHeadersPastEnd { phnum: 0xFFFF, .. }
        ));
        assert!(elf(b"\x7fELF").is_err());
    }

    /// A VMware state file (version `v`): one "memory" group with these tags.
    fn vmss(v: u8, tags: &[(&str, &[u32], Vec<u8>)]) -> Vec<u8> {
        let mut f = VMWARE_MAGICS[usize::from(v)].to_vec();
        f.extend_from_slice(&[0, 0, 0, 0]);
        f.extend_from_slice(&2u32.to_le_bytes());
        let groups_at = f.len();
        f.resize(groups_at + 160, 0);
        f[groups_at..groups_at + 8].copy_from_slice(b"cpustate");
        f[groups_at + 80..groups_at + 86].copy_from_slice(b"memory");
        let tags_at = f.len() as u64;
        f[groups_at + 80 + 64..groups_at + 80 + 72].copy_from_slice(&tags_at.to_le_bytes());
        for (name, idx, data) in tags {
            let long = data.len() != 4 && data.len() != 8;
            let len_bits = if long { 62 } else { data.len() as u8 };
            f.push(((idx.len() as u8) << 6) | len_bits);
            f.push(name.len() as u8);
            f.extend_from_slice(name.as_bytes());
            for i in *idx {
                f.extend_from_slice(&i.to_le_bytes());
            }
            if long {
                let w = if v == 0 { 4 } else { 8 };
                f.extend_from_slice(&(data.len() as u64).to_le_bytes()[..w]);
                f.extend_from_slice(&(data.len() as u64).to_le_bytes()[..w]);
                f.extend_from_slice(&[0, 0]);
            }
            f.extend_from_slice(data);
        }
        f.extend_from_slice(&[0, 0]);
        f
    }

    fn n32(v: u32) -> Vec<u8> {
        v.to_le_bytes().to_vec()
    }

    #[test]
    fn vmware_regions_place_the_vmem() {
        // Two regions: 3 GiB at 0, then 1 GiB of the .vmem at 4 GiB (above the PCI hole).
        let f = vmss(
            1,
            &[
                ("regionsCount", &[], n32(2)),
                ("regionPPN", &[0], n32(0)),
                ("regionPageNum", &[0], n32(0)),
                ("regionSize", &[0], n32(0xC0000)),
                ("regionPPN", &[1], n32(0x100000)),
                ("regionPageNum", &[1], n32(0xC0000)),
                ("regionSize", &[1], n32(0x40000)),
            ],
        );
        let l = vmware_layout(&f).unwrap();
        assert!(l.embedded.is_none());
        assert_eq!(
            l.regions,
            [
                (0, 0, 0xC000_0000),
                (0x1_0000_0000, 0xC000_0000, 0x4000_0000)
            ]
        );
        let (img, missing) =
            vmware_ranges(ImageFormat::VmwareVmem, &l.regions, 0, 0x1_0000_0000).unwrap();
        assert_eq!(missing, 0);
        assert_eq!(img.file_offset(0x100000), Some(0xC000_0000));
        assert_eq!(img.file_offset(0xC0000), None, "the PCI hole is absent");
        // A .vmem shorter than the regions: what is missing is said, not read as zeros.
        let (img, missing) =
            vmware_ranges(ImageFormat::VmwareVmem, &l.regions, 0, 0xC000_0000).unwrap();
        assert_eq!(missing, 0x4000_0000);
        assert_eq!(img.file_offset(0x100000), None);
    }

    #[test]
    fn vmware_embedded_memory_and_bad_tags() {
        let mem = vec![0x5Au8; 0x3000];
        let f = vmss(
            0,
            &[("regionsCount", &[], n32(0)), ("Memory", &[0, 0], mem)],
        );
        let l = vmware_layout(&f).unwrap();
        let (at, len) = l.embedded.unwrap();
        assert_eq!(len, 0x3000);
        assert_eq!(&f[at as usize..at as usize + 4], &[0x5A; 4]);
        let (img, _) = vmware_ranges(ImageFormat::VmwareEmbedded, &l.regions, at, len).unwrap();
        assert_eq!(img.file_offset(2), Some(at + 0x2000));
        // A region tag missing, a count beyond the bound, no memory group.
        let f = vmss(
            1,
            &[("regionsCount", &[], n32(1)), ("regionPPN", &[0], n32(0))],
        );
        assert_eq!(
            vmware_layout(&f).unwrap_err(),
            ImageError::VmwareRegionIncomplete(0)
        );
        let f = vmss(1, &[("regionsCount", &[], n32(1 << 30))]);
        assert!(matches!(
            vmware_layout(&f).unwrap_err(),
            ImageError::VmwareRegionCount {
                count: 0x4000_0000,
                ..
            }
        ));
        let mut f = vmss(1, &[]);
        f[12 + 80..12 + 86].copy_from_slice(b"nomemo");
        assert_eq!(
            vmware_layout(&f).unwrap_err(),
            ImageError::VmwareNoMemoryGroup
        );
        // A long tag whose size runs past the end.
        let mut f = vmss(1, &[("Memory", &[0, 0], vec![0; 0x10])]);
        let n = f.len();
        f.truncate(n - 8);
        assert!(vmware_layout(&f).is_err());
    }

    #[test]
    fn rdmp_ranges() {
        let mut f = vec![0u8; 0x2000 + 0x30 + 3 * 16];
        let h = 0x2000;
        f[h..h + 4].copy_from_slice(&0x40u32.to_le_bytes());
        f[h + 4..h + 8].copy_from_slice(b"RDMP");
        f[h + 8..h + 12].copy_from_slice(b"DUMP");
        let meta = 0x30 + 2 * 16u64;
        f[h + 0x10..h + 0x18].copy_from_slice(&meta.to_le_bytes());
        let first = meta - 0x20 + 0x2040;
        f[h + 0x18..h + 0x20].copy_from_slice(&first.to_le_bytes());
        for (i, (pfn, n)) in [(0x10u64, 2u64), (0x40, 1)].iter().enumerate() {
            let e = h + 0x30 + i * 16;
            f[e..e + 8].copy_from_slice(&pfn.to_le_bytes());
            f[e + 8..e + 16].copy_from_slice(&n.to_le_bytes());
        }
        let img = rdmp(&f, 8).unwrap();
        let r: Vec<_> = img
            .ranges()
            .iter()
            .map(|r| (r.start, r.size, r.file_offset))
            .collect();
        assert_eq!(
            r,
            [(0x10000, 0x2000, first), (0x40000, 0x1000, first + 0x2000)]
        );
        f[h + 0x18] ^= 0x10;
        assert!(matches!(
            rdmp(&f, 8).unwrap_err(),
            ImageError::RdmpSizes { .. }
        ));
    }

    #[test]
    fn raw_keeps_whole_pages_only() {
        let (img, partial) = raw(0x10_0800);
        assert_eq!(partial, 0x800);
        assert_eq!(img.total_pages(), 0x100);
        assert_eq!(img.file_offset(0xFF), Some(0xFF000));
        assert_eq!(img.file_offset(0x100), None);
    }
}
