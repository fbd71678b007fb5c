//! The dump-file layer: opens a Windows kernel crash dump or a memory image (raw, ELF core,
//! VMware .vmem/.vmss/.vmsn; [`image`]), validates its header or layout and every extent they
//! declare against the real file length, and answers "where in the file is physical page N"
//! (full, bitmap and RDMP dumps, images) or "where is virtual address V" (triage dumps).
//!
//! The file is memory-mapped; nothing is read until asked for, so opening a 128 GiB dump costs
//! the header and (for bitmap dumps) one pass over the bitmap. An image has no header: its
//! architecture and DTB are found by discovery (`kernel::discover::machine`), which gives a
//! [`crate::mem::Machine`]; the container keeps none of it.

mod bitmap;
mod blobs;
mod error;
mod header;
pub mod image;
pub mod layout;
mod phys;
mod runs;
mod triage;

pub use bitmap::Bitmap;
pub use blobs::{Blob, SecondaryData};
pub use error::{DumpError, ImageError, LayoutError};
pub use header::{Arch, DumpHeader, DumpType, MACHINE_AMD64, MACHINE_ARM64, MACHINE_I386};
pub use image::{ImageFormat, PhysImage, PhysRange};
pub use phys::PhysicalMemory;
pub use runs::{Run, RunList};
pub use triage::{DataBlock, Segment, SegmentSource, Triage, TriageDriver};

use crate::addr::{Pfn, PAGE_SIZE};
use crate::bytes::LeBytes;
use crate::warning::{Warning, WarningKind};
use std::fs::File;
use std::path::Path;

/// How to open a dump.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions {
    /// Accept a dump whose page data is cut short: pages past the end of the file read as
    /// missing instead of failing the open.
    pub allow_truncated: bool,
}

/// What follows the header.
#[derive(Clone, Debug)]
pub enum Contents {
    /// DumpType 1: physical memory runs.
    Runs(RunList),
    /// DumpType 5/6: bitmap of stored physical pages.
    Bitmap(Bitmap),
    /// DumpType 4: virtually addressed blocks.
    Triage(Triage),
    /// A memory image (raw, ELF core, VMware) or an RDMP dump: physical ranges.
    Image(PhysImage),
}

/// A page's bytes: borrowed from the file where the container stores them, or shared from
/// the container's cache where it had to make them (a compressed container decompresses a
/// page once and hands out the same bytes while they stay cached).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageRef<'a> {
    Borrowed(&'a [u8]),
    Shared(std::sync::Arc<[u8]>),
}

impl std::ops::Deref for PageRef<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            PageRef::Borrowed(b) => b,
            PageRef::Shared(a) => a,
        }
    }
}

/// Result of looking a physical page up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageLookup<'a> {
    /// The page's 4096 bytes.
    Present(PageRef<'a>),
    /// The dump does not contain this page (outside every run, bit clear, or a triage dump).
    NotInDump,
    /// The header says the page is stored at `file_offset`, but the file ends before it.
    BeyondEof { file_offset: u64 },
}

enum Backing {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

/// The kind of the truncation warning ([`DumpFile::truncation`]): bytes the header declares
/// are not in the file. No other warning given at open has this kind.
pub const TRUNCATION: WarningKind = WarningKind::Unreadable;

/// An opened crash dump.
pub struct DumpFile {
    backing: Backing,
    header: DumpHeader,
    contents: Contents,
    warnings: Vec<Warning>,
    /// Pages read since the resident set was last checked.
    pages_read: std::sync::atomic::AtomicU64,
    /// Unique among the dumps this process opened (caches keyed by it never mix dumps).
    id: u64,
    /// The mapped file, for positioned reads.
    file: Option<File>,
}

/// The next [`DumpFile`] id.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Pages read between two checks of the resident set (see [`DumpFile::note_read`]).
const CHECK_EVERY_PAGES: u64 = 512;
/// Pages the kernel may map per page fault on a file mapping (fault_around_bytes 64 KiB).
const FAULT_AROUND_PAGES: u64 = 16;
/// Resident set above which the mapping's pages are released.
const MAX_RESIDENT: u64 = 64 << 20;

impl std::fmt::Debug for DumpFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DumpFile")
            .field("len", &self.len())
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl DumpFile {
    /// Open and validate a dump file.
    ///
    /// The file is mapped read-only. Every extent is checked against the file's length at
    /// open; if the file is truncated *while* mapped, reads may fault (memmap2 #13): do not
    /// analyse a dump that another process is still writing.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<DumpFile, DumpError> {
        let (map, file) = map_file(path)?;
        let bytes: &[u8] = &map;
        // VMware: a .vmss/.vmsn names the layout; its memory is inside it or in the .vmem
        // beside it. A .vmem (no signature) takes the layout of the .vmss/.vmsn beside it.
        if image::is_vmware_state(bytes) {
            let layout = image::vmware_layout(bytes).map_err(|reason| DumpError::BadImage {
                format: "VMware state",
                reason,
            })?;
            if let Some((at, len)) = layout.embedded {
                let (img, missing) =
                    image::vmware_ranges(ImageFormat::VmwareEmbedded, &layout.regions, at, len)
                        .map_err(|reason| DumpError::BadImage {
                            format: "VMware state",
                            reason,
                        })?;
                return Self::from_image(Backing::Map(map), img, missing, opts)
                    .map(|d| d.with_file(file));
            }
            let vmem = path.with_extension("vmem");
            if !vmem.exists() {
                return Err(DumpError::Missing(format!(
                    "{}: a VMware state file without the memory: its .vmem ({}) is not beside it",
                    path.display(),
                    vmem.display()
                )));
            }
            let (mem, mem_file) = map_file(&vmem)?;
            return Self::vmem((mem, mem_file), &layout, path, opts);
        }
        // Only a file named as VMware names its memory (*.vmem) takes the layout of a state
        // file beside it: a raw image that happens to sit beside one (x.raw, x.vmss) is raw.
        let vmem_named = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("vmem"));
        if vmem_named && image::has_no_signature(bytes) {
            for ext in ["vmss", "vmsn"] {
                let meta = path.with_extension(ext);
                let Ok((m, _)) = map_file(&meta) else {
                    continue;
                };
                if !image::is_vmware_state(&m) {
                    continue;
                }
                let layout = image::vmware_layout(&m).map_err(|reason| DumpError::BadImage {
                    format: "VMware state",
                    reason: ImageError::VmwareAt {
                        path: meta.display().to_string(),
                        error: Box::new(reason),
                    },
                })?;
                return Self::vmem((map, file), &layout, &meta, opts);
            }
        }
        Self::from_backing(Backing::Map(map), opts).map(|d| d.with_file(file))
    }

    /// A file whose physical ranges a host framework gave ([`layout::Layout`]): no
    /// signature is looked for. The machine the layout names is not set here (see
    /// [`crate::kernel::discover::open_with_layout`], which checks it first).
    pub fn open_layout(
        path: &Path,
        layout: &layout::Layout,
        opts: OpenOptions,
    ) -> Result<DumpFile, DumpError> {
        let (map, file) = map_file(path)?;
        let mut img =
            PhysImage::new(ImageFormat::Hosted, layout.ranges.clone()).map_err(|reason| {
                DumpError::BadImage {
                    format: "layout",
                    reason,
                }
            })?;
        img.metadata = Some(layout.source.clone());
        Self::from_image(Backing::Map(map), img, 0, opts).map(|d| d.with_file(file))
    }

    /// A .vmem (mapped, with its file) placed by the layout of the state file `meta`.
    fn vmem(
        (mem, file): (memmap2::Mmap, File),
        layout: &image::VmwareLayout,
        meta: &Path,
        opts: OpenOptions,
    ) -> Result<DumpFile, DumpError> {
        let (mut img, missing) = image::vmware_ranges(
            ImageFormat::VmwareVmem,
            &layout.regions,
            0,
            mem.len() as u64,
        )
        .map_err(|reason| DumpError::BadImage {
            format: "VMware state",
            reason,
        })?;
        img.metadata = Some(meta.display().to_string().into());
        Self::from_image(Backing::Map(mem), img, missing, opts).map(|d| d.with_file(file))
    }

    /// Keep the open file for positioned reads ([`Self::read_file_at`]).
    fn with_file(mut self, file: File) -> Self {
        self.file = Some(file);
        self
    }

    /// Read `buf.len()` bytes of the file at `offset` with a positioned read (no mapping, so
    /// nothing to fault in or release: bulk copies of buffers). False when the dump is held
    /// in memory or the read falls short (then read through the mapping).
    pub fn read_file_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            let in_file = offset
                .checked_add(buf.len() as u64)
                .is_some_and(|e| e <= self.len());
            match &self.file {
                Some(f) if in_file => f.read_exact_at(buf, offset).is_ok(),
                _ => false,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = (offset, buf);
            false
        }
    }

    /// Parse a dump held in memory.
    pub fn from_bytes(bytes: Vec<u8>, opts: OpenOptions) -> Result<DumpFile, DumpError> {
        Self::from_backing(Backing::Owned(bytes), opts)
    }

    /// A memory image over `backing`; `missing` bytes of its ranges lie past the memory's end.
    fn from_image(
        backing: Backing,
        img: PhysImage,
        missing: u64,
        opts: OpenOptions,
    ) -> Result<DumpFile, DumpError> {
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
            check_truncation(what, end, file_len, opts, &mut warnings)?;
        }
        let arch = match img.elf_machine {
            Some(3) => Arch::X86 { pae: true },
            _ => Arch::X64,
        };
        Ok(DumpFile {
            backing,
            header: DumpHeader::none(arch),
            contents: Contents::Image(img),
            warnings,
            pages_read: Default::default(),
            id: next_id(),
            file: None,
        })
    }

    fn from_backing(backing: Backing, opts: OpenOptions) -> Result<DumpFile, DumpError> {
        let file = backing.bytes();
        let file_len = file.len() as u64;
        if image::is_elf(file) {
            let img = image::elf(file).map_err(|reason| DumpError::BadImage {
                format: "ELF core",
                reason,
            })?;
            return Self::from_image(backing, img, 0, opts);
        }
        if image::is_vmware_state(file) {
            let bad = |reason| DumpError::BadImage {
                format: "VMware state",
                reason,
            };
            let layout = image::vmware_layout(file).map_err(bad)?;
            let Some((at, len)) = layout.embedded else {
                return Err(DumpError::Missing(
                    "a VMware state file without the memory: open the .vmss/.vmsn by its path, with its .vmem beside it".into(),
                ));
            };
            let (img, missing) =
                image::vmware_ranges(ImageFormat::VmwareEmbedded, &layout.regions, at, len)
                    .map_err(bad)?;
            return Self::from_image(backing, img, missing, opts);
        }
        if image::is_raw_candidate(file) {
            let (img, partial) = image::raw(file_len);
            let mut d = Self::from_image(backing, img, 0, opts)?;
            if partial > 0 {
                d.warnings.push(Warning::new(WarningKind::Anomaly, format!(
                    "the raw image ends {partial:#x} bytes into a page: that partial page reads as missing"
                )));
            }
            return Ok(d);
        }
        let header = DumpHeader::parse(file)?;
        let mut warnings = Vec::new();
        let dt = header.dump_type;
        let (contents, data_end, what) = match dt {
            DumpType::FULL => {
                let runs = RunList::parse(file, &header)?;
                if runs.declared_pages != runs.total_pages() {
                    warnings.push(Warning::new(WarningKind::Anomaly, format!(
                        "PhysicalMemoryBlock.NumberOfPages is {:#x} but the runs hold {:#x} pages; the runs are used",
                        runs.declared_pages,
                        runs.total_pages()
                    )));
                }
                let end = runs.data_end();
                let what = format!(
                    "the page data of {} runs ({:#x} pages)",
                    runs.runs().len(),
                    runs.total_pages()
                );
                (Contents::Runs(runs), end, what)
            }
            DumpType::BITMAP_FULL | DumpType::BITMAP_KERNEL => {
                let bm = Bitmap::parse(file, header.header_size)?;
                if bm.present != bm.declared_present {
                    warnings.push(Warning::new(WarningKind::Anomaly, format!(
                        "bitmap header TotalPresentPages is {:#x} but {:#x} bits are set; the bitmap is used",
                        bm.declared_present, bm.present
                    )));
                }
                let end = bm.data_end();
                let what = format!("the page data of {:#x} bitmap pages", bm.present);
                (Contents::Bitmap(bm), end, what)
            }
            DumpType::TRIAGE => {
                let t = Triage::parse(file, &header, opts.allow_truncated)?;
                warnings.extend(t.warnings.iter().cloned());
                (Contents::Triage(t), Some(0), String::new())
            }
            DumpType(v @ 8..=0xA) => {
                let img = image::rdmp(file, v).map_err(|reason| DumpError::BadImage {
                    format: "RDMP",
                    reason,
                })?;
                let end = img.data_end();
                let what = format!(
                    "the page data of {} RDMP ranges ({:#x} pages)",
                    img.ranges().len(),
                    img.total_pages()
                );
                (Contents::Image(img), Some(end), what)
            }
            other => {
                return Err(match other.name() {
                    Some(name) => DumpError::UnsupportedDumpType {
                        value: other.0,
                        name,
                    },
                    None => DumpError::UnknownDumpType {
                        value: other.0,
                        offset: header.dump_type_offset(),
                    },
                })
            }
        };
        match data_end {
            Some(end) if end <= file_len => {}
            end => check_truncation(what, end.unwrap_or(u64::MAX), file_len, opts, &mut warnings)?,
        }
        Ok(DumpFile {
            backing,
            header,
            contents,
            warnings,
            pages_read: Default::default(),
            id: next_id(),
            file: None,
        })
    }

    /// This dump's id, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A memory image's container (None for a crash dump with a DUMP_HEADER, RDMP included).
    pub fn image(&self) -> Option<&PhysImage> {
        match &self.contents {
            Contents::Image(i) if i.format != ImageFormat::Rdmp => Some(i),
            _ => None,
        }
    }

    /// When the file was last written (its modification time, a FILETIME); None for a dump
    /// held in memory.
    pub fn written(&self) -> Option<u64> {
        let m = self.file.as_ref()?.metadata().ok()?.modified().ok()?;
        crate::time::filetime_of_system_time(m)
    }

    pub fn header(&self) -> &DumpHeader {
        &self.header
    }

    pub fn contents(&self) -> &Contents {
        &self.contents
    }

    /// The truncation warning, when the file is shorter than what the header declares: the
    /// one open warning of kind [`TRUNCATION`].
    pub fn truncation(&self) -> Option<&Warning> {
        self.warnings.iter().find(|w| w.kind == TRUNCATION)
    }

    /// Problems found at open that did not stop it: the truncation (kind [`TRUNCATION`]),
    /// else [`WarningKind::Anomaly`].
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// File length in bytes.
    pub fn len(&self) -> u64 {
        self.backing.bytes().len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `len` bytes of the file at `offset`, if they are all inside it.
    pub fn file_bytes(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.backing
            .bytes()
            .bytes_at(usize::try_from(offset).ok()?, len)
    }

    /// The whole file (mapped: pages are read only when touched).
    pub fn bytes(&self) -> &[u8] {
        self.backing.bytes()
    }

    /// Say that `pages` pages of the dump were just read. Every 512 pages the process's
    /// resident set is checked, and above 64 MiB the mapping's resident pages are released
    /// (`MADV_DONTNEED`): a command that streams through gigabytes of buffers keeps a flat
    /// resident set instead of holding every page it touched (the kernel maps whole page-cache
    /// folios, often many times the bytes read, when a page is touched). The pages stay in the
    /// page cache; a later read maps them again. Where the resident set cannot be read (not
    /// Linux), the pages are released every 16384 pages read.
    pub fn note_read(&self, pages: u64) {
        use std::sync::atomic::Ordering;
        if !matches!(self.backing, Backing::Map(_)) {
            return;
        }
        // The kernel maps up to 16 pages around each touched one (fault-around): count them.
        let pages = pages.saturating_mul(FAULT_AROUND_PAGES);
        let total = self.pages_read.fetch_add(pages, Ordering::Relaxed) + pages;
        if total < CHECK_EVERY_PAGES {
            return;
        }
        match resident_bytes() {
            Some(r) if r <= MAX_RESIDENT => self.pages_read.store(0, Ordering::Relaxed),
            Some(_) => {
                self.pages_read.store(0, Ordering::Relaxed);
                self.release_resident();
            }
            None if total >= 32 * CHECK_EVERY_PAGES => {
                self.pages_read.store(0, Ordering::Relaxed);
                self.release_resident();
            }
            None => {}
        }
    }

    /// Release the mapping's resident pages now (no effect on a dump held in memory).
    pub fn release_resident(&self) {
        #[cfg(unix)]
        if let Backing::Map(m) = &self.backing {
            // SAFETY: the mapping is private and read-only: after MADV_DONTNEED its pages
            // read the file's contents again, so every slice handed out stays valid and
            // unchanged (the same assumption as the mapping itself: the file is not modified
            // while mapped).
            let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }

    /// The triage part, for DumpType 4.
    pub fn triage(&self) -> Option<&Triage> {
        match &self.contents {
            Contents::Triage(t) => Some(t),
            _ => None,
        }
    }

    /// Whether the dump holds physical memory (full or bitmap).
    pub fn has_physical_memory(&self) -> bool {
        !matches!(self.contents, Contents::Triage(_))
    }

    /// Tell the OS how the file will be read: sequentially (a pass over all memory: large
    /// read-ahead) or at random (the default: no read-ahead for scattered field reads).
    pub fn advise_sequential(&self, sequential: bool) {
        #[cfg(unix)]
        if let Backing::Map(m) = &self.backing {
            let _ = m.advise(if sequential {
                memmap2::Advice::Sequential
            } else {
                memmap2::Advice::Random
            });
        }
        #[cfg(not(unix))]
        let _ = sequential;
    }

    /// The file offset of stored physical page `pfn` (None when the dump does not hold it).
    pub fn page_file_offset(&self, pfn: Pfn) -> Option<u64> {
        match &self.contents {
            Contents::Runs(r) => r.file_offset(pfn),
            Contents::Bitmap(b) => b.file_offset(self.backing.bytes(), pfn),
            Contents::Image(i) => i.file_offset(pfn.get()),
            Contents::Triage(_) => None,
        }
    }

    /// Ask the OS to read `len` bytes of the file at `offset` ahead (asynchronously).
    pub fn prefetch_file(&self, offset: u64, len: u64) {
        #[cfg(unix)]
        if let Backing::Map(m) = &self.backing {
            let end = offset.saturating_add(len).min(m.len() as u64);
            if offset < end {
                let _ = m.advise_range(
                    memmap2::Advice::WillNeed,
                    offset as usize,
                    (end - offset) as usize,
                );
            }
        }
        #[cfg(not(unix))]
        let _ = (offset, len);
    }

    /// Ask the OS to read the stored pages `[first, first + count)` ahead (they are one run of
    /// [`Self::physical_runs`], so one stretch of the file): a pass over all memory reads at
    /// disk speed instead of faulting one page at a time. No effect on an in-memory dump.
    pub fn prefetch(&self, first: u64, count: u64) {
        let Some(off) = (match self.page(Pfn::new(first)) {
            PageLookup::Present(_) | PageLookup::BeyondEof { .. } => match &self.contents {
                Contents::Runs(r) => r.file_offset(Pfn::new(first)),
                Contents::Bitmap(b) => b.file_offset(self.backing.bytes(), Pfn::new(first)),
                Contents::Image(i) => i.file_offset(first),
                Contents::Triage(_) => None,
            },
            PageLookup::NotInDump => None,
        }) else {
            return;
        };
        #[cfg(unix)]
        if let Backing::Map(m) = &self.backing {
            let len = (count * PAGE_SIZE).min(m.len() as u64 - off.min(m.len() as u64));
            let _ = m.advise_range(memmap2::Advice::WillNeed, off as usize, len as usize);
        }
        #[cfg(not(unix))]
        let _ = (off, count);
    }

    /// The stored physical pages as runs (first PFN, count), in PFN order (none for a triage
    /// dump): what a pass over all physical memory reads. Only pages the file holds: a run,
    /// bitmap extent, ELF segment, VMware region or layout range that claims pages past the
    /// end of the file is trimmed to those it holds (the truncation warning says so), so a
    /// pass costs time in proportion to the file, not to what its header claims.
    pub fn physical_runs(&self) -> Vec<(u64, u64)> {
        let len = self.len();
        let held = |offset: Option<u64>, count: u64| match offset {
            Some(o) if o < len => ((len - o) / PAGE_SIZE).min(count),
            _ => 0,
        };
        let mut out = Vec::new();
        match &self.contents {
            Contents::Runs(r) => {
                for run in r.runs() {
                    let n = held(r.run_offset(run), run.count);
                    if n > 0 {
                        out.push((run.base.get(), n));
                    }
                }
            }
            Contents::Bitmap(b) => {
                // Stored in PFN order: the k-th set bit's page is at FirstPage + k pages.
                let mut index = 0u64;
                for (pfn, count) in b.runs(self.backing.bytes()) {
                    let at = index
                        .checked_mul(PAGE_SIZE)
                        .and_then(|o| o.checked_add(b.first_page));
                    let n = held(at, count);
                    if n > 0 {
                        out.push((pfn, n));
                    }
                    if n < count {
                        break; // every later page is further into the file
                    }
                    index += count;
                }
            }
            Contents::Triage(_) => {}
            Contents::Image(i) => {
                // Ranges may place the same file bytes at several physical addresses: the
                // pass reads at most as many pages as the file holds (a warning at open says
                // so), so aliases cannot multiply its cost.
                let mut budget = len / PAGE_SIZE;
                for r in i.ranges() {
                    let n = held(Some(r.file_offset), r.size / PAGE_SIZE).min(budget);
                    if n > 0 {
                        out.push((r.start / PAGE_SIZE, n));
                    }
                    budget -= n;
                }
            }
        }
        out
    }

    /// Number of physical pages the header says are stored.
    pub fn stored_pages(&self) -> u64 {
        match &self.contents {
            Contents::Runs(r) => r.total_pages(),
            Contents::Bitmap(b) => b.present,
            Contents::Triage(_) => 0,
            Contents::Image(i) => i.total_pages(),
        }
    }

    /// Look up one physical page.
    pub fn page(&self, pfn: Pfn) -> PageLookup<'_> {
        let off = match &self.contents {
            Contents::Runs(r) => r.file_offset(pfn),
            Contents::Bitmap(b) => b.file_offset(self.backing.bytes(), pfn),
            Contents::Triage(_) => None,
            Contents::Image(i) => i.file_offset(pfn.get()),
        };
        match off {
            None => PageLookup::NotInDump,
            Some(o) => match self.file_bytes(o, PAGE_SIZE as usize) {
                Some(p) => PageLookup::Present(PageRef::Borrowed(p)),
                None => PageLookup::BeyondEof { file_offset: o },
            },
        }
    }
}

/// Data that ends at file offset `end` past the file's length: an error, or (allow_truncated)
/// one warning; pages past the end then read as missing.
fn check_truncation(
    what: String,
    end: u64,
    file_len: u64,
    opts: OpenOptions,
    warnings: &mut Vec<Warning>,
) -> Result<(), DumpError> {
    if !opts.allow_truncated {
        return Err(DumpError::Truncated {
            what,
            end,
            file_len,
        });
    }
    warnings.push(Warning::new(TRUNCATION, format!(
        "truncated dump: {what} ends at file offset {end:#x} but the file has only {file_len:#x} bytes; pages past the end read as missing, and passes over all memory (scan) cover only the pages the file holds"
    )));
    Ok(())
}

/// Map a file read-only (random access).
fn map_file(path: &Path) -> Result<(memmap2::Mmap, File), DumpError> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Err(DumpError::Empty);
    }
    // SAFETY: the mapping is read-only and every access is bounds-checked against the
    // length at open; see `DumpFile::open` about files shrinking underneath us.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    #[cfg(unix)]
    {
        // Random access: don't let the kernel read ahead megabytes per touched page.
        let _ = map.advise(memmap2::Advice::Random);
    }
    Ok((map, file))
}

/// The process's resident set in bytes (Linux: /proc/self/statm), None elsewhere.
fn resident_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages * PAGE_SIZE)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
