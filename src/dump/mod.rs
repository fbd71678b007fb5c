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
mod container;
mod error;
mod format;
mod header;
pub mod hiberfil;
pub mod image;
pub mod layout;
mod phys;
mod registry;
mod runs;
mod triage;
pub mod xpress;

pub use bitmap::Bitmap;
pub use blobs::{Blob, SecondaryData};
pub use container::{Container, Storage};
pub use error::{DumpError, ImageError, LayoutError};
pub use header::{Arch, DumpHeader, DumpType, MACHINE_AMD64, MACHINE_ARM64, MACHINE_I386};
pub use image::{ImageFormat, PhysImage, PhysRange};
pub use phys::PhysicalMemory;
pub use runs::{Run, RunList};
pub use triage::{DataBlock, Segment, SegmentSource, Triage, TriageDriver, TriageView};

use crate::addr::{Pfn, PhysAddr, PAGE_SIZE};
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
    /// The file holds the page in a compressed block that cannot be decoded (starting at
    /// `file_offset`; the container's read warnings say why).
    Damaged { file_offset: u64 },
    /// The header says the page is stored at `file_offset`, but the file ends before it.
    BeyondEof { file_offset: u64 },
}

pub(crate) enum Backing {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    pub(crate) fn bytes(&self) -> &[u8] {
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
    /// The format's container ([`registry`] chose it) and the format's name.
    container: Box<dyn Container>,
    format: &'static str,
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
    /// Open and validate a dump file: the first format of the detection registry
    /// (`registry`) whose probe takes it opens it.
    ///
    /// The file is mapped read-only. Every extent is checked against the file's length at
    /// open; if the file is truncated *while* mapped, reads may fault (memmap2 #13): do not
    /// analyse a dump that another process is still writing.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<DumpFile, DumpError> {
        let (map, file) = map_file(path)?;
        let input = format::Input::new(Backing::Map(map), Some(file), Some(path), opts);
        registry::open(input).map(Self::from_opened)
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
        let input = format::Input::new(Backing::Map(map), Some(file), Some(path), opts);
        layout::open_hosted(input, layout).map(Self::from_opened)
    }

    /// Parse a dump held in memory (detected like [`Self::open`], without a file name).
    pub fn from_bytes(bytes: Vec<u8>, opts: OpenOptions) -> Result<DumpFile, DumpError> {
        let input = format::Input::new(Backing::Owned(bytes), None, None, opts);
        registry::open(input).map(Self::from_opened)
    }

    fn from_opened(o: format::Opened) -> DumpFile {
        DumpFile {
            backing: o.backing,
            header: o.header,
            container: o.container,
            format: o.format,
            warnings: o.warnings,
            pages_read: Default::default(),
            id: next_id(),
            file: o.file,
        }
    }

    /// Read `buf.len()` bytes of the file at `offset` with a positioned read (no mapping, so
    /// nothing to fault in or release: bulk copies of buffers). False when the dump is held
    /// in memory or the read falls short (then read through the mapping).
    fn read_file_at(&self, offset: u64, buf: &mut [u8]) -> bool {
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

    /// Whether pages stored as plain bytes are read with positioned reads of the file (a
    /// mapped file; not a dump held in memory).
    pub(crate) fn positioned_reads(&self) -> bool {
        matches!(self.backing, Backing::Map(_)) && self.file.is_some()
    }

    /// Copy `out.len()` bytes at physical `pa` (within one page) through a per-thread cache
    /// of the 64 pages last read this way, each read with one positioned read of the file
    /// instead of through the mapping: a field or a page-table entry in a page not read before
    /// costs one `pread` of 4 KiB instead of a page fault that maps the whole page-cache folio
    /// around it (up to megabytes, released again later: docs/performance.md "Limits"). False,
    /// with nothing copied, when the page is not stored as plain file bytes (compressed
    /// containers, a dump held in memory): read it with [`Self::page`].
    pub(crate) fn copy_small(&self, pa: PhysAddr, out: &mut [u8]) -> bool {
        small::copy(self, pa.pfn(), pa.page_offset() as usize, out)
    }

    /// Copy stored page `pfn` into `page` (4 KiB) with one positioned read: false when the
    /// page is not stored as plain file bytes or the dump is held in memory (then read it
    /// with [`Self::page`], which says why it cannot be read).
    pub(crate) fn read_page_direct(&self, pfn: Pfn, page: &mut [u8]) -> bool {
        page.len() == PAGE_SIZE as usize
            && self
                .container
                .page_offset(self.backing.bytes(), pfn)
                .is_some_and(|off| self.read_file_at(off, page))
    }

    /// Copy physical memory into `buf` with positioned reads of the file (bulk copies of
    /// trace buffers: no page of the mapping is faulted in and released again). `pieces` are
    /// the physical addresses and lengths of the consecutive parts of `buf` (each inside one
    /// page); pieces stored one after another in the file are read at once. False, before
    /// anything is read, when a piece's page is not stored as plain file bytes; false also
    /// when the dump is held in memory or a read falls short: the caller then reads page by
    /// page, which reports the exact error.
    pub fn read_physical_bulk(&self, pieces: &[(PhysAddr, usize)], buf: &mut [u8]) -> bool {
        let file = self.backing.bytes();
        let mut runs: Vec<(usize, u64, usize)> = Vec::new(); // (buf offset, file offset, len)
        let mut done = 0usize;
        for &(pa, n) in pieces {
            let Some(off) = self
                .container
                .page_offset(file, pa.pfn())
                .and_then(|o| o.checked_add(pa.page_offset()))
            else {
                return false;
            };
            match runs.last_mut() {
                Some((b, f, l)) if *b + *l == done && f.checked_add(*l as u64) == Some(off) => {
                    *l += n
                }
                _ => runs.push((done, off, n)),
            }
            done += n;
        }
        runs.iter().all(|&(b, f, l)| {
            buf.get_mut(b..b + l)
                .is_some_and(|part| self.read_file_at(f, part))
        })
    }

    /// Ask the OS to read the stored pages `pages` ahead (asynchronously; `None` and pages
    /// the file does not store as they are are skipped): pages stored one after another in
    /// the file are asked for at once.
    pub fn prefetch_pages(&self, pages: impl IntoIterator<Item = Option<Pfn>>) {
        let file = self.backing.bytes();
        let offsets: Vec<Option<u64>> = pages
            .into_iter()
            .map(|pfn| pfn.and_then(|p| self.container.page_offset(file, p)))
            .collect();
        // The last page already in the page cache (the file was read before): the rest is
        // taken to be too, and nothing is asked for (one `mincore` instead of a `madvise` per
        // run of pages, each looking up every page). Not the first page: a buffer's header
        // page is in the cache once the header has been read, the rest of it not yet.
        if offsets
            .iter()
            .rev()
            .find_map(|o| *o)
            .is_some_and(|o| self.cached(o))
        {
            return;
        }
        let mut run: Option<(u64, u64)> = None;
        for off in offsets {
            match (run, off) {
                (Some((s, n)), Some(o)) if s.checked_add(n) == Some(o) => {
                    run = Some((s, n + PAGE_SIZE))
                }
                (r, o) => {
                    if let Some((s, n)) = r {
                        self.prefetch_file(s, n);
                    }
                    run = o.map(|o| (o, PAGE_SIZE));
                }
            }
        }
        if let Some((s, n)) = run {
            self.prefetch_file(s, n);
        }
    }

    /// Read the stored pages `pages` from a cold disk in file order, ahead of a reader that
    /// takes them in another order (a session's buffers, whose pages lie apart): the pages'
    /// file offsets sorted, joined into stretches across gaps of at most [`STREAM_GAP`], each
    /// asked for in order in steps of [`STREAM_STEP`] (`MADV_WILLNEED`: the kernel reads them
    /// asynchronously, in large requests), so the disk reads sequentially and the reader
    /// finds its pages in the page cache or on their way instead of waiting for one random
    /// read each. Blocking while the disk's queue is full (run it on a thread of its own); it
    /// stops when `stop` is set. Nothing is
    /// read when it would not pay or could crowd out the page cache: fewer than 256 pages,
    /// more than [`STREAM_MAX_PAGES`], half or more of a sample of the first pages already
    /// cached (a warm file), stretches totalling more than half the memory available (Linux's
    /// MemAvailable; elsewhere never), or a dump not read with positioned reads. Returns the
    /// bytes asked for.
    pub(crate) fn stream_ahead(
        &self,
        pages: impl IntoIterator<Item = Pfn>,
        stop: &std::sync::atomic::AtomicBool,
    ) -> u64 {
        use std::sync::atomic::Ordering;
        if !self.positioned_reads() {
            return 0;
        }
        let file = self.backing.bytes();
        let mut offsets: Vec<u64> = Vec::new();
        for (i, p) in pages.into_iter().enumerate() {
            // Looking the pages up (through the page tables) may take a while too.
            if offsets.len() >= STREAM_MAX_PAGES || i % 4096 == 4095 && stop.load(Ordering::Relaxed)
            {
                return 0;
            }
            if let Some(o) = self.container.page_offset(file, p) {
                offsets.push(o);
                // The first 256 pages (in the reader's order, so from all over the file) tell
                // whether the file is warm, before the rest are looked up.
                if offsets.len() == 256
                    && offsets
                        .iter()
                        .step_by(4)
                        .filter(|&&o| self.cached(o))
                        .count()
                        >= 32
                {
                    return 0;
                }
            }
        }
        if offsets.len() < 256 {
            return 0;
        }
        offsets.sort_unstable();
        offsets.dedup();
        let mut stretches: Vec<(u64, u64)> = Vec::new();
        for o in offsets {
            let end = o.saturating_add(PAGE_SIZE);
            match stretches.last_mut() {
                Some((_, e)) if o <= e.saturating_add(STREAM_GAP) => *e = (*e).max(end),
                _ => stretches.push((o, end)),
            }
        }
        let total: u64 = stretches.iter().map(|(s, e)| e - s).sum();
        if memory_available().is_none_or(|m| total > m / 2) {
            return 0;
        }
        let mut asked = 0u64;
        for (s, e) in stretches {
            let mut at = s;
            while at < e {
                if stop.load(Ordering::Relaxed) {
                    return asked;
                }
                let n = (e - at).min(STREAM_STEP);
                self.prefetch_file(at, n);
                asked += n;
                at += n;
            }
        }
        asked
    }

    /// Read the whole file from a cold disk in file order, in the background, for a reader
    /// that will touch most of it in another order (a command over sessions whose buffers are
    /// a large share of the dump: their headers are found through linked lists, one random
    /// read each, and their pages lie apart). A thread of its own asks for the file in steps
    /// of [`STREAM_STEP`] (`POSIX_FADV_WILLNEED`: the kernel reads them asynchronously, in
    /// large requests) until it reaches the end or the returned [`FileStream`] is dropped.
    /// None, with nothing read, when it would not pay or could crowd out the page cache: a
    /// file of less than [`STREAM_FILE_MIN`] bytes, a warm file (half or more of 64 pages
    /// spread over it already cached), a file longer than half the memory available (Linux's
    /// MemAvailable; elsewhere never), or a dump not read with positioned reads.
    pub(crate) fn stream_file(&self) -> Option<FileStream> {
        self.stream_file_of(STREAM_FILE_MIN)
    }

    /// [`Self::stream_file`] for files of at least `min` bytes.
    fn stream_file_of(&self, min: u64) -> Option<FileStream> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        if !self.positioned_reads() {
            return None;
        }
        let len = self.len();
        if len < min {
            return None;
        }
        let pages = len / PAGE_SIZE;
        let cached = (0..64u64)
            .filter(|i| self.cached(i * pages / 64 * PAGE_SIZE))
            .count();
        if cached >= 32 || memory_available().is_none_or(|m| len > m / 2) {
            return None;
        }
        let file = self.file.as_ref()?.try_clone().ok()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("etwdump-read-ahead".into())
            .spawn(move || {
                let mut at = 0u64;
                while at < len && !stopped.load(Ordering::Relaxed) {
                    let n = (len - at).min(STREAM_STEP);
                    advise_will_need(&file, at, n);
                    at += n;
                }
            })
            .ok()?;
        Some(FileStream { stop })
    }

    /// This dump's id, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A memory image's container (None for a crash dump with a DUMP_HEADER, RDMP included).
    pub fn image(&self) -> Option<&PhysImage> {
        self.container::<PhysImage>()
            .filter(|i| i.format != ImageFormat::Rdmp)
    }

    /// The container if it is a `T` (a full dump's [`RunList`], a bitmap dump's [`Bitmap`], a
    /// triage dump's [`Triage`], an image's or RDMP dump's [`PhysImage`], ...).
    pub fn container<T: Container>(&self) -> Option<&T> {
        self.container.as_any().downcast_ref::<T>()
    }

    /// The name of the format that opened the file (the detection registry's entry, e.g.
    /// "full crash dump", "ELF core"; "hosted layout" for a host framework's layout).
    pub fn format(&self) -> &'static str {
        self.format
    }

    /// How the container stores memory (for `info`).
    pub fn storage(&self) -> Storage {
        self.container.storage()
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

    /// `len` bytes of the file at `offset`, if they are all inside it. For the containers,
    /// tests and fuzzing: the analysis above `src/dump/` reads pages, triage blocks and blobs
    /// ([`Self::page`], [`Self::triage_view`]), never file offsets (tests/architecture.rs).
    pub fn file_bytes(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.backing
            .bytes()
            .bytes_at(usize::try_from(offset).ok()?, len)
    }

    /// The whole file (mapped: pages are read only when touched). Like [`Self::file_bytes`],
    /// not for the analysis above `src/dump/`.
    pub fn whole_file(&self) -> &[u8] {
        self.backing.bytes()
    }

    /// The file's first bytes (at most 4): its signature, or what stands where one would.
    pub fn signature(&self) -> &[u8] {
        let b = self.backing.bytes();
        &b[..b.len().min(4)]
    }

    /// Say that `pages` pages of the dump were just read. Every 512 pages the process's
    /// resident set is checked, and above 64 MiB the mapping's resident pages are released
    /// (`MADV_DONTNEED`): a command that streams through gigabytes of buffers keeps a flat
    /// resident set instead of holding every page it touched (the kernel maps whole page-cache
    /// folios, often many times the bytes read, when a page is touched). The pages stay in the
    /// page cache; a later read maps them again. Where the resident set cannot be read (not
    /// Linux), the pages are released every 16384 pages read.
    pub(crate) fn note_read(&self, pages: u64) {
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
    pub(crate) fn release_resident(&self) {
        #[cfg(unix)]
        if let Backing::Map(m) = &self.backing {
            // SAFETY: the mapping is private and read-only: after MADV_DONTNEED its pages
            // read the file's contents again, so every slice handed out stays valid and
            // unchanged (the same assumption as the mapping itself: the file is not modified
            // while mapped).
            let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }

    /// Whether the memory comes without a crash-dump header (a memory image, a hibernation
    /// file): its machine is found by discovery and the kernel's lists by its symbols.
    pub fn headerless(&self) -> bool {
        self.container.headerless()
    }

    /// Problems met while reading pages so far (a damaged compressed block), each once.
    pub fn read_warnings(&self) -> Vec<Warning> {
        self.container.read_warnings()
    }

    /// The triage part, for DumpType 4.
    pub fn triage(&self) -> Option<&Triage> {
        self.container::<Triage>()
    }

    /// The triage dump's memory and saved data (DumpType 4), read in its own terms.
    pub fn triage_view(&self) -> Option<TriageView<'_>> {
        Some(TriageView::new(self.triage()?, self.backing.bytes()))
    }

    /// Whether the dump holds physical memory (full or bitmap).
    pub fn has_physical_memory(&self) -> bool {
        self.container.has_physical_memory()
    }

    /// Tell the OS how the file will be read: sequentially (a pass over all memory: large
    /// read-ahead) or at random (the default: no read-ahead for scattered field reads).
    pub(crate) fn advise_sequential(&self, sequential: bool) {
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

    /// The file offset of stored physical page `pfn` (None when the dump does not hold it as
    /// plain file bytes). Like [`Self::file_bytes`], not for the analysis above `src/dump/`.
    pub fn page_file_offset(&self, pfn: Pfn) -> Option<u64> {
        self.container.page_offset(self.backing.bytes(), pfn)
    }

    /// Whether the file's page at `offset` is in the page cache (false where that cannot be
    /// told: not a mapped file, not Unix).
    fn cached(&self, offset: u64) -> bool {
        #[cfg(unix)]
        if let Backing::Map(m) = &self.backing {
            let page = (offset & !(PAGE_SIZE - 1)) as usize;
            if page >= m.len() {
                return false;
            }
            let mut v = [0u8; 1];
            // SAFETY: a page-aligned address inside the mapping, one page long, and a
            // one-byte vector for its one page.
            let r = unsafe {
                libc::mincore(
                    m.as_ptr().add(page) as *mut libc::c_void,
                    PAGE_SIZE as usize,
                    v.as_mut_ptr(),
                )
            };
            return r == 0 && v[0] & 1 == 1;
        }
        let _ = offset;
        false
    }

    /// Ask the OS to read `len` bytes of the file at `offset` ahead (asynchronously).
    fn prefetch_file(&self, offset: u64, len: u64) {
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
    pub(crate) fn prefetch(&self, first: u64, count: u64) {
        let Some(off) = self.page_file_offset(Pfn::new(first)) else {
            return;
        };
        #[cfg(unix)]
        if let Backing::Map(m) = &self.backing {
            let len = count
                .saturating_mul(PAGE_SIZE)
                .min(m.len() as u64 - off.min(m.len() as u64));
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
        self.container.physical_runs(self.backing.bytes())
    }

    /// [`Self::physical_runs`] in the order they are cheapest to read all of (a hibernation
    /// file's: compression set by compression set); what `scan` reads.
    pub fn runs_in_storage_order(&self) -> Vec<(u64, u64)> {
        self.container.runs_in_storage_order(self.backing.bytes())
    }

    /// Number of physical pages the header says are stored.
    pub fn stored_pages(&self) -> u64 {
        self.container.stored_pages()
    }

    /// Look up one physical page.
    pub fn page(&self, pfn: Pfn) -> PageLookup<'_> {
        self.container.page(self.backing.bytes(), pfn)
    }
}

/// The per-thread cache of [`DumpFile::copy_small`]: the 64 pages last read this way, each
/// with one positioned read of 4 KiB, direct-mapped by page number and keyed by the dump's id
/// and the page (a dump's bytes never change). One page, not a block around it: the reads it
/// serves (fields, page-table entries, buffer headers) lie apart in the file, and a block of
/// 16 pages read around each miss was copied for nothing, 44,177 times (2.9 GB) for 128 MiB of
/// buffers when `extract` read them from a warm cache (docs/performance.md "Limits"); from a
/// cold disk the kernel's read-ahead of the `pread` reads the neighbours as it would for a
/// fault.
mod small {
    use super::DumpFile;
    use crate::addr::{Pfn, PAGE_SIZE};
    use std::cell::RefCell;

    const SLOTS: usize = 64;
    const PAGE: usize = PAGE_SIZE as usize;

    struct Cache {
        /// (dump id, PFN) of the page each slot holds.
        keys: [Option<(u64, u64)>; SLOTS],
        data: Vec<u8>,
    }

    thread_local! {
        static CACHE: RefCell<Cache> = RefCell::new(Cache {
            keys: [None; SLOTS],
            data: vec![0u8; SLOTS * PAGE],
        });
    }

    pub(super) fn copy(dump: &DumpFile, pfn: Pfn, o: usize, out: &mut [u8]) -> bool {
        let Some(end) = o.checked_add(out.len()).filter(|&e| e <= PAGE) else {
            return false;
        };
        let key = (dump.id(), pfn.get());
        let slot = (pfn.get() as usize ^ (dump.id() as usize).wrapping_mul(31)) % SLOTS;
        CACHE.with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return false;
            };
            let c = &mut *c;
            let page = &mut c.data[slot * PAGE..(slot + 1) * PAGE];
            if c.keys[slot] != Some(key) {
                c.keys[slot] = None;
                if !dump.read_page_direct(pfn, page) {
                    return false;
                }
                c.keys[slot] = Some(key);
            }
            out.copy_from_slice(&page[o..end]);
            true
        })
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

/// [`DumpFile::stream_ahead`] reads through gaps of at most this many bytes between the pages
/// asked for (one read instead of a seek: the disk's read-ahead reads them anyway).
const STREAM_GAP: u64 = 32 << 10;
/// The most pages [`DumpFile::stream_ahead`] sorts (their offsets: 32 MiB).
const STREAM_MAX_PAGES: usize = 1 << 22;
/// The bytes [`DumpFile::stream_ahead`] asks for at once.
const STREAM_STEP: u64 = 1 << 20;

/// The smallest file [`DumpFile::stream_file`] reads whole (64 MiB: below, the reads it
/// would save cost less than starting it).
const STREAM_FILE_MIN: u64 = 64 << 20;

/// A read of the whole dump file going on in the background ([`DumpFile::stream_file`]):
/// dropped, it stops at its next step.
pub(crate) struct FileStream {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for FileStream {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Ask the OS to read `len` bytes of `file` at `offset` ahead (asynchronously; blocking only
/// while the disk's queue is full).
fn advise_will_need(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let (Ok(o), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) {
            // SAFETY: a valid descriptor; the advice only reads the file into the page cache.
            unsafe {
                libc::posix_fadvise(file.as_raw_fd(), o, n, libc::POSIX_FADV_WILLNEED);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// The memory available for new page-cache pages without swapping (Linux's MemAvailable), in
/// bytes; None where it cannot be told.
fn memory_available() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    }
    #[cfg(not(target_os = "linux"))]
    None
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

#[cfg(all(test, target_os = "linux"))]
mod stream_tests {
    use super::{DumpFile, OpenOptions, PAGE_SIZE};
    use crate::addr::Pfn;
    use std::sync::atomic::AtomicBool;

    /// Drop the file's pages from the page cache (written back first: only clean pages are
    /// dropped); false when page `probe` is still cached (a tmpfs keeps its pages).
    fn evict(d: &DumpFile, path: &std::path::Path, probe: u64) -> bool {
        let f = std::fs::File::open(path).unwrap();
        f.sync_all().unwrap();
        // SAFETY: a valid descriptor; the advice only drops clean cached pages.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        !d.cached(probe)
    }

    /// The fixture machine's full dump, written to a temporary directory and opened.
    fn forged() -> (tempfile::TempDir, std::path::PathBuf, DumpFile) {
        let fx = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/x64-19041");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("full.dmp");
        etwdump_forge::forge(&etwdump_forge::Config::from_fixture(&fx))
            .write_to(&path)
            .unwrap();
        let d = DumpFile::open(&path, OpenOptions::default()).unwrap();
        (dir, path, d)
    }

    #[test]
    fn stream_ahead_asks_for_the_pages_in_stretches_only_when_cold() {
        let (_dir, path, d) = forged();
        // The longest run of stored pages: consecutive pages one after another in the file.
        let (first, n) = d.physical_runs().into_iter().max_by_key(|r| r.1).unwrap();
        assert!(n >= 90 * 26, "the fixture's longest run is {n} pages");
        let off = |p: u64| d.page_file_offset(Pfn::new(p)).unwrap();
        assert_eq!(off(first + 100), off(first) + 100 * PAGE_SIZE);
        // 90 groups of 3 pages, 26 pages apart: gaps of 23 pages (92 KiB) are not read
        // through, so 90 stretches of 3 pages; in the reader's order, not the file's.
        let apart: Vec<Pfn> = (0..90u64)
            .rev()
            .flat_map(|g| (0..3).map(move |i| Pfn::new(first + g * 26 + i)))
            .collect();
        // 90 groups of 3 pages 4 pages apart: gaps of one page (4 KiB) are read through, so one
        // stretch from the first page to the end of the last.
        let close: Vec<Pfn> = (0..90u64)
            .flat_map(|g| (0..3).map(move |i| Pfn::new(first + g * 4 + i)))
            .collect();
        let go = AtomicBool::new(false);
        let probe = off(first);
        if !evict(&d, &path, probe) {
            eprintln!("SKIPPED: the page cache cannot be emptied of a file here (tmpfs?)");
            return;
        }
        assert_eq!(
            d.stream_ahead(apart.iter().copied(), &go),
            90 * 3 * PAGE_SIZE
        );
        assert!(evict(&d, &path, probe));
        assert_eq!(
            d.stream_ahead(close.iter().copied(), &go),
            (89 * 4 + 3) * PAGE_SIZE
        );
        // Fewer than 256 pages: not worth it.
        assert!(evict(&d, &path, probe));
        assert_eq!(d.stream_ahead(apart[..255].iter().copied(), &go), 0);
        // Stopped before it starts.
        assert_eq!(
            d.stream_ahead(apart.iter().copied(), &AtomicBool::new(true)),
            0
        );
        // Warm: the file read whole first.
        std::fs::read(&path).unwrap();
        assert_eq!(d.stream_ahead(apart.iter().copied(), &go), 0);
    }

    #[test]
    fn stream_file_reads_a_cold_file_whole_and_a_warm_one_not() {
        let (_dir, path, d) = forged();
        let last = (d.len() - 1) / PAGE_SIZE * PAGE_SIZE;
        if !evict(&d, &path, last) {
            eprintln!("SKIPPED: the page cache cannot be emptied of a file here (tmpfs?)");
            return;
        }
        // Smaller than the least worth reading whole.
        assert!(d.stream_file().is_none(), "{} bytes", d.len());
        assert!(!d.cached(last));
        let stream = d.stream_file_of(0).expect("a cold file is read");
        // The reads are asynchronous: the file's last page arrives within seconds.
        let t = std::time::Instant::now();
        while !d.cached(last) && t.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(d.cached(last), "the last page is not read after 20 s");
        assert!(d.cached(0));
        drop(stream);
        // Warm now: nothing to do.
        assert!(d.stream_file_of(0).is_none());
    }
}
