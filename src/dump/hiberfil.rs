//! Windows 8 … 11 hibernation files (`hiberfil.sys`, issue 32): the kernel's memory as it was
//! written at hibernation or at a Fast Startup shutdown, in Xpress-compressed page sets.
//!
//! The facts and their sources are in `shared/reference/hibernation-format.md` (the
//! `PO_MEMORY_IMAGE` type of the kernel PDBs; volatility3's `layers/hib.py`, MemProcFS's
//! `device_hibr.c` and Hibr2Bin for the restore and compression sets; [MS-XCA] for the
//! codecs, [`super::xpress`]). What this reader takes as given and what it confirms (x86
//! files the same way, with MemProcFS's x86 offsets and 4-byte fields):
//!
//! * **Header** (`PO_MEMORY_IMAGE` at offset 0, x64): the signature (`HIBR`, `WAKE` once the
//!   resume started, `RSTR`; upper or lower case), `LengthSelf` (0xC) choosing the layout,
//!   `PageSize` (0x18, must be 4096), `SystemTime` (0x20, when the image was written),
//!   `NumPagesForLoader` (0x58), `FirstBootRestorePage`, `FirstKernelRestorePage`,
//!   `PerfInfo.KernelPagesProcessed`, `HighestPhysicalPage` and `Hiberboot` at the offsets of
//!   [`LAYOUTS`] (from the PDB types of 9600, 14393, 17763 … 19041, public PDB-derived headers
//!   of 10240/10586 and 22000, and MemProcFS's table for 15063 … 17134 and 26100). An unknown `LengthSelf` is not refused: the restore pages are taken from
//!   the offsets every Windows 10+ layout shares (0x68/0x70), or Windows 8's (0x60/0x68),
//!   whichever pair points at valid compression sets, and the kernel set is read until its
//!   chain ends — a warning says the layout is unconfirmed and what that means.
//! * **Restore sets** (boot: `NumPagesForLoader` pages from `FirstBootRestorePage`; kernel:
//!   `KernelPagesProcessed` pages from `FirstKernelRestorePage`): chains of compression sets,
//!   one after another, until the set's page count is reached. A chain that ends early (a
//!   header that is not a compression set, the file's end) is a warning naming the offset;
//!   the pages read so far are used.
//! * **Compression sets**: a u32 (bits 0–7 descriptor count, 8–29 data size, 30–31 method),
//!   u64 descriptors `(PFN << 4) | (pages − 1)`, then the data. Data of exactly pages × 4096
//!   bytes is stored as it is (read straight from the file); else methods 0/1 are Plain LZ77
//!   and 2/3 LZ77+Huffman (Hibr2Bin, volatility3; MemProcFS reads any method bit as
//!   Huffman): a set that does not decode with its method's codec is tried with the other,
//!   and a success is used and said (the method bits are then not what the readers agree).
//!   A set decodes to exactly its page count, never to a fixed 64 KiB.
//! * **Wiped header** (the first page zeroed after a resume): the sets are still in the file.
//!   They are found by their structure — a chain of compression sets starting on a page
//!   boundary whose first set decodes exactly — and read; the version, time and variant are
//!   then unknown and said so.
//!
//! Bounds: descriptors ≤ [`MAX_DESCRIPTORS`] (12 bytes of index each), pages per set ≤ 256,
//! the decompressed sets kept in a cache of [`CACHE_BYTES`]. Decompression is lazy: opening
//! reads the header and the set headers, not the data; a page is decoded when read.

use super::container::{Container, Storage};
use super::format::{Format, Input, Opened};
use super::xpress::{self, XpressError};
use super::{DumpError, PageLookup, PageRef};
use crate::addr::{Pfn, PAGE_SIZE};
use crate::bytes::LeBytes;
use crate::warning::{Warning, WarningKind};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The most page descriptors indexed (8,388,608: at least 32 GiB of memory; 12 bytes each once
/// open, 28 while the index is sorted: 224 MiB at the bound); more is a warning, and the pages
/// of the rest read as not in the file.
pub const MAX_DESCRIPTORS: usize = 1 << 23;
/// Decompressed sets kept (bytes of page data).
pub const CACHE_BYTES: usize = 32 << 20;
/// The most pages one compression set may hold (16 descriptors × 16 pages; Windows writes at
/// most 16; more than 16 is a warning).
const MAX_SET_PAGES: u64 = 256;
/// Pages Windows puts in one compression set at most (Hibr2Bin, MemProcFS).
const WINDOWS_SET_PAGES: u64 = 16;
/// Pages searched for the start of a chain when the header is wiped (the probe) and, after a
/// chain ends, for the next one.
const CARVE_PROBE_PAGES: u64 = 1024;
const CARVE_GAP_PAGES: u64 = 4096;
/// Largest physical page number accepted in a descriptor (52-bit physical addresses).
const MAX_PFN: u64 = 1 << 40;

/// One `PO_MEMORY_IMAGE` layout: the offsets this reader uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HiberLayout {
    /// `LengthSelf`: the size of the structure, which names the layout.
    pub length_self: u32,
    /// The Windows releases that write it.
    pub windows: &'static str,
    /// A 32-bit (x86) layout: `PageSize` at 0x14, `SystemTime` at 0x18, `NumPagesForLoader` at
    /// 0x48, restore pages, `HighestPhysicalPage` and page descriptors of 4 bytes.
    pub x86: bool,
    pub first_boot_restore_page: usize,
    pub first_kernel_restore_page: usize,
    /// `PerfInfo.KernelPagesProcessed`.
    pub kernel_pages_processed: usize,
    pub highest_physical_page: Option<usize>,
    /// `Hiberboot` (a BOOLEAN: a Fast Startup, "hybrid shutdown", image).
    pub hiberboot: Option<usize>,
    /// Where the offsets come from.
    pub source: &'static str,
}

/// The known layouts (x64), by `LengthSelf`.
pub const LAYOUTS: &[HiberLayout] = &[
    HiberLayout {
        length_self: 0x360,
        windows: "Windows 8 / 8.1 (9200/9600)",
        x86: false,
        first_boot_restore_page: 0x60,
        first_kernel_restore_page: 0x68,
        kernel_pages_processed: 0x1C8,
        highest_physical_page: Some(0x330),
        hiberboot: Some(0x2FC),
        source: "PO_MEMORY_IMAGE of the 9600 kernel PDB",
    },
    HiberLayout {
        length_self: 0x3B0,
        windows: "Windows 10 1507 / 1511 (10240/10586)",
        x86: false,
        first_boot_restore_page: 0x68,
        first_kernel_restore_page: 0x70,
        kernel_pages_processed: 0x218,
        highest_physical_page: Some(0x380),
        hiberboot: Some(0x34C),
        source: "PO_MEMORY_IMAGE of size 0x3B0 in two public PDB-derived header sets (Vergilius-style and a PDB type dump); MemProcFS's table (10240/10586) and volatility3's KernelPagesProcessed for 1507-1511 agree",
    },
    HiberLayout {
        length_self: 0x3C8,
        windows: "Windows 10 1607 (14393)",
        x86: false,
        first_boot_restore_page: 0x68,
        first_kernel_restore_page: 0x70,
        kernel_pages_processed: 0x220,
        highest_physical_page: Some(0x388),
        hiberboot: Some(0x354),
        source: "PO_MEMORY_IMAGE of the 14393 kernel PDB",
    },
    HiberLayout {
        length_self: 0x3D8,
        windows: "Windows 10 1703 / 1709 / 1803 (15063/16299/17134)",
        x86: false,
        first_boot_restore_page: 0x68,
        first_kernel_restore_page: 0x70,
        kernel_pages_processed: 0x230,
        highest_physical_page: Some(0x398),
        hiberboot: None,
        source: "MemProcFS's table (LeechCore device_hibr.c: 15063, 16299, 17134)",
    },
    HiberLayout {
        length_self: 0x3E0,
        windows: "Windows 10 1809 … 22H2",
        x86: false,
        first_boot_restore_page: 0x68,
        first_kernel_restore_page: 0x70,
        kernel_pages_processed: 0x230,
        highest_physical_page: Some(0x398),
        hiberboot: Some(0x364),
        source: "PO_MEMORY_IMAGE of the 17763 … 19041 kernel PDBs",
    },
    HiberLayout {
        length_self: 0x448,
        windows: "Windows Server 2022 / Windows 11 21H2, 22H2 (20348/22000/22621)",
        x86: false,
        first_boot_restore_page: 0x68,
        first_kernel_restore_page: 0x70,
        kernel_pages_processed: 0x230,
        highest_physical_page: Some(0x400),
        hiberboot: Some(0x3CC),
        source: "a public Vergilius-style header of PO_MEMORY_IMAGE (size 0x448) and MemProcFS's table (20348, 22000, 22621)",
    },
    HiberLayout {
        length_self: 0x4D8,
        windows: "Windows 11 24H2 (26100)",
        x86: false,
        first_boot_restore_page: 0x68,
        first_kernel_restore_page: 0x70,
        kernel_pages_processed: 0x238,
        highest_physical_page: Some(0x498),
        hiberboot: None,
        source: "MemProcFS's table for 26100 (shared/reference/hibernation-format.md)",
    },
    x86_layout(0x2C8, "Windows 8 / 8.1 x86 (9200/9600)", 0x1B0, 0x2B0),
    x86_layout(0x310, "Windows 10 1507 / 1511 x86 (10240/10586)", 0x1F8, 0x2F8),
    x86_layout(0x328, "Windows 10 1607 x86 (14393)", 0x200, 0x300),
    x86_layout(0x338, "Windows 10 1703 … 1803 x86 (15063 … 17134)", 0x210, 0x310),
    x86_layout(0x340, "Windows 10 1809 … 22H2 x86 (17763 … 19041)", 0x210, 0x310),
];

/// An x86 layout of MemProcFS's table (LeechCore `device_hibr.c`): restore pages at 0x50/0x54
/// (4 bytes each), `Hiberboot` not known.
const fn x86_layout(
    length_self: u32,
    windows: &'static str,
    kernel_pages_processed: usize,
    highest_physical_page: usize,
) -> HiberLayout {
    HiberLayout {
        length_self,
        windows,
        x86: true,
        first_boot_restore_page: 0x50,
        first_kernel_restore_page: 0x54,
        kernel_pages_processed,
        highest_physical_page: Some(highest_physical_page),
        hiberboot: None,
        source: "MemProcFS's table (LeechCore device_hibr.c), x86",
    }
}

/// The fields at the same offset in every layout of one architecture (PDB types; MemProcFS's
/// table for x86): where `PageSize`, `SystemTime` and `NumPagesForLoader` are, and the size of
/// a restore-page field and of a page descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fixed {
    page_size_at: usize,
    system_time_at: usize,
    loader_pages_at: usize,
    word: usize,
}

impl Fixed {
    const X64: Fixed = Fixed {
        page_size_at: 0x18,
        system_time_at: 0x20,
        loader_pages_at: 0x58,
        word: 8,
    };
    const X86: Fixed = Fixed {
        page_size_at: 0x14,
        system_time_at: 0x18,
        loader_pages_at: 0x48,
        word: 4,
    };

    fn of(x86: bool) -> Fixed {
        if x86 {
            Fixed::X86
        } else {
            Fixed::X64
        }
    }
}

/// The compression method a set's header names (bits 30–31).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Stored as it is (data size = pages × 4096).
    Stored,
    /// Plain LZ77 ([MS-XCA] §2.4).
    Lz77,
    /// LZ77+Huffman ([MS-XCA] §2.2).
    Huffman,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Stored => "stored",
            Codec::Lz77 => "Plain LZ77",
            Codec::Huffman => "LZ77+Huffman",
        }
    }
}

/// One restore set as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreSet {
    /// "boot", "kernel", or "carved" (wiped header).
    pub name: &'static str,
    /// File offset of its first compression set.
    pub file_offset: u64,
    /// Pages the header says it holds (None: not known — a carved chain, an unknown layout's
    /// kernel set).
    pub pages_declared: Option<u64>,
    /// Pages its compression sets hold.
    pub pages_read: u64,
    pub compression_sets: u64,
    /// File offset just past its last compression set.
    pub end_offset: u64,
}

/// What the header and the sets say, for `info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HiberInfo {
    /// The first four bytes as text ("HIBR", "WAKE", "RSTR"; "wiped" when zero).
    pub signature: String,
    /// `LengthSelf` (None: wiped header).
    pub length_self: Option<u32>,
    /// The layout `LengthSelf` names (None: unknown or wiped).
    pub windows: Option<&'static str>,
    /// An x86 file (4-byte restore pages and page descriptors).
    pub x86: bool,
    /// `SystemTime`: when the image was written (FILETIME; None: wiped header).
    pub system_time: Option<u64>,
    /// `Hiberboot`: true for a Fast Startup (kernel-only) image, false for a full hibernation;
    /// None where the layout's offset is unknown or the header is wiped.
    pub fast_startup: Option<bool>,
    pub highest_physical_page: Option<u64>,
    pub restore_sets: Vec<RestoreSet>,
    /// Compression sets by how their data is stored: stored, Plain LZ77, LZ77+Huffman.
    pub sets_stored: u64,
    pub sets_lz77: u64,
    pub sets_huffman: u64,
    /// Pages stored more than once (the copy of the lower-starting descriptor is read).
    pub duplicate_pages: u64,
}

/// One compression set: where its data is and how it is stored.
#[derive(Clone, Copy, Debug)]
struct Set {
    data_offset: u64,
    data_len: u32,
    codec: Codec,
    pages: u16,
}

/// The pages of one decompressed set.
type SetPages = Arc<[Arc<[u8]>]>;

/// Decompressed sets, evicted by CLOCK: the oldest first, unless it was asked for again since
/// it was decoded or last spared (then it is spared once more). A pass over all memory reads
/// each set in one burst, served by the thread's own last set ([`LAST_SET`]), so its sets are
/// never asked for again and go first; sets read over and over (page tables, the logger
/// array's pages) stay.
#[derive(Default, Debug)]
struct Cache {
    /// Set index → its pages and whether it was asked for again.
    sets: HashMap<u32, (SetPages, bool)>,
    order: VecDeque<u32>,
    bytes: usize,
}

thread_local! {
    /// The set this thread read last: (the container's id, set index, its pages).
    static LAST_SET: std::cell::RefCell<Option<(u64, u32, SetPages)>> =
        const { std::cell::RefCell::new(None) };
}

/// The next [`Hiberfil`] id (keys [`LAST_SET`]: a thread never mixes two files' sets).
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A hibernation file's memory.
#[derive(Debug)]
pub struct Hiberfil {
    info: HiberInfo,
    sets: Vec<Set>,
    /// Sorted, non-overlapping: `(first PFN << 8) | pages` of each descriptor (pages 1–16).
    starts: Vec<u64>,
    /// Per entry of `starts`: `(set << 8) | index of its first page in the set`.
    locs: Vec<u32>,
    stored: u64,
    /// Unique in the process (see [`LAST_SET`]).
    id: u64,
    cache: Mutex<Cache>,
    /// Problems met while reading pages (damaged sets, methods that were not the header's),
    /// each once.
    read_notes: Mutex<ReadNotes>,
}

/// Read warnings listed one by one; beyond, they are counted in one summary.
pub const MAX_READ_NOTES: usize = 64;

/// The read warnings: the first [`MAX_READ_NOTES`], the count of the others, and which sets
/// were noted (a bit per set).
#[derive(Debug, Default)]
struct ReadNotes {
    listed: Vec<Warning>,
    more: u64,
    noted: Vec<u64>,
}

/// A compression set's header and descriptors, as parsed at `offset`.
struct ParsedSet {
    descriptors: Vec<(u64, u64)>,
    set: Set,
    /// File offset of the next set.
    next: u64,
}

/// Why the bytes at an offset are not a compression set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    #[error("the file ends inside the set's header")]
    HeaderCut,
    #[error("descriptor count 0 (header {header:#010x})")]
    NoDescriptors { header: u32 },
    #[error("data size 0 (header {header:#010x})")]
    NoData { header: u32 },
    #[error("the file ends inside descriptor {index}")]
    DescriptorCut { index: usize },
    #[error(
        "descriptor {index} ({descriptor:#x}) names PFN {pfn:#x}, past 52-bit physical addresses"
    )]
    PfnTooHigh {
        index: usize,
        descriptor: u64,
        pfn: u64,
    },
    #[error("{pages} pages in one set (more than {MAX_SET_PAGES})")]
    TooManyPages { pages: u64 },
    #[error(
        "its {size:#x} bytes of data end at {end:#x}, past the end of the file ({file_len:#x})"
    )]
    DataPastEnd { size: u32, end: u64, file_len: u64 },
    #[error("stopped at the bound of {max} compression sets")]
    Bound { max: usize },
}

/// The compression set at `offset`; page descriptors are `word` (8 on x64, 4 on x86) bytes.
fn parse_set(file: &[u8], offset: u64, word: usize) -> Result<ParsedSet, SetError> {
    let o = usize::try_from(offset).map_err(|_| SetError::HeaderCut)?;
    let header = file.u32_at(o).ok_or(SetError::HeaderCut)?;
    let count = (header & 0xFF) as usize;
    let size = (header >> 8) & 0x3F_FFFF;
    let method = header >> 30;
    if count == 0 {
        return Err(SetError::NoDescriptors { header });
    }
    if size == 0 {
        return Err(SetError::NoData { header });
    }
    let mut descriptors = Vec::with_capacity(count);
    let mut pages = 0u64;
    for index in 0..count {
        let d =
            word_at(file, o + 4 + word * index, word).ok_or(SetError::DescriptorCut { index })?;
        let (pfn, n) = (d >> 4, (d & 0xF) + 1);
        if pfn + n > MAX_PFN {
            return Err(SetError::PfnTooHigh {
                index,
                descriptor: d,
                pfn,
            });
        }
        pages += n;
        descriptors.push((pfn, n));
    }
    if pages > MAX_SET_PAGES {
        return Err(SetError::TooManyPages { pages });
    }
    let data_offset = offset + 4 + (word * count) as u64;
    let end = data_offset + u64::from(size);
    if end > file.len() as u64 {
        return Err(SetError::DataPastEnd {
            size,
            end,
            file_len: file.len() as u64,
        });
    }
    let codec = if u64::from(size) == pages * PAGE_SIZE {
        Codec::Stored
    } else if method < 2 {
        Codec::Lz77
    } else {
        Codec::Huffman
    };
    Ok(ParsedSet {
        descriptors,
        set: Set {
            data_offset,
            data_len: size,
            codec,
            pages: pages as u16,
        },
        next: end,
    })
}

/// Decode `set`'s data into exactly its pages' bytes, with the header's codec or, failing
/// that, the other one. Ok((bytes, codec that worked)).
fn decode_set(file: &[u8], set: &Set) -> Result<(Vec<u8>, Codec), XpressError> {
    let expected = usize::from(set.pages) * PAGE_SIZE as usize;
    let truncated = XpressError::Truncated {
        offset: 0,
        produced: 0,
        expected,
    };
    let data = usize::try_from(set.data_offset)
        .ok()
        .and_then(|o| file.bytes_at(o, set.data_len as usize))
        .ok_or(truncated)?;
    let mut out = Vec::new();
    let (first, second): (Codec, Codec) = match set.codec {
        Codec::Stored => return Ok((data.to_vec(), Codec::Stored)),
        Codec::Lz77 => (Codec::Lz77, Codec::Huffman),
        Codec::Huffman => (Codec::Huffman, Codec::Lz77),
    };
    let run = |c: Codec, out: &mut Vec<u8>| match c {
        Codec::Huffman => xpress::decompress_huffman(data, out, expected),
        _ => xpress::decompress_lz77(data, out, expected),
    };
    match run(first, &mut out) {
        Ok(()) => Ok((out, first)),
        Err(e) => match run(second, &mut out) {
            Ok(()) => Ok((out, second)),
            Err(_) => Err(e),
        },
    }
}

/// Read a chain of compression sets from `offset` until `want` pages (None: until the chain
/// ends), handing each set to `take` as it is parsed (nothing is collected: a chain may be
/// millions of sets); `take` returning false stops the chain at the bound of `max_sets`.
/// Returns the sets read, where the chain stopped and why it stopped early, if it did.
fn read_chain(
    file: &[u8],
    offset: u64,
    word: usize,
    want: Option<u64>,
    max_sets: usize,
    take: &mut dyn FnMut(ParsedSet) -> bool,
) -> (usize, u64, Option<SetError>) {
    let mut count = 0usize;
    let mut at = offset;
    let mut pages = 0u64;
    loop {
        if want.is_some_and(|w| pages >= w) {
            return (count, at, None);
        }
        if count >= max_sets {
            return (count, at, Some(SetError::Bound { max: max_sets }));
        }
        match parse_set(file, at, word) {
            Ok(p) => {
                let next = p.next;
                let n = u64::from(p.set.pages);
                if !take(p) {
                    return (count, at, Some(SetError::Bound { max: count }));
                }
                pages += n;
                at = next;
                count += 1;
            }
            Err(reason) => return (count, at, Some(reason)),
        }
    }
}

/// Decodes the search for chains may try in one open (each ≤ 64 KiB of output: 256 MiB at
/// most), whatever a crafted file puts on its page boundaries.
const MAX_CARVE_DECODES: u32 = 4096;

/// Does a chain start at `offset`: at least `min_sets` compression sets in a row (or the file
/// ends after one or more), each of at most 16 pages, the first decoding exactly? Each decode
/// tried counts against `decodes` ([`MAX_CARVE_DECODES`]; none left: no).
fn chain_starts_at(
    file: &[u8],
    offset: u64,
    word: usize,
    min_sets: usize,
    decodes: &std::cell::Cell<u32>,
) -> bool {
    let mut sets = Vec::new();
    let (_, end, stop) = read_chain(file, offset, word, None, min_sets, &mut |p| {
        sets.push(p);
        true
    });
    if sets.is_empty()
        || sets
            .iter()
            .any(|s| u64::from(s.set.pages) > WINDOWS_SET_PAGES)
    {
        return false;
    }
    let enough = sets.len() >= min_sets || (stop.is_some() && end + 4 > file.len() as u64);
    if !enough || decodes.get() >= MAX_CARVE_DECODES {
        return false;
    }
    decodes.set(decodes.get() + 1);
    decode_set(file, &sets[0].set).is_ok()
}

/// The file's signature: HIBR, WAKE or RSTR in either case.
fn signature(file: &[u8]) -> Option<&[u8]> {
    let s = file.get(..4)?;
    [b"HIBR", b"WAKE", b"RSTR"]
        .iter()
        .any(|k| s.eq_ignore_ascii_case(*k))
        .then_some(s)
}

/// Does the file start with a hibernation file's signature?
pub(crate) fn has_signature(file: &[u8]) -> bool {
    signature(file).is_some()
}

/// A wiped header: a zero first page, and a chain of compression sets (x64 descriptors, else
/// x86) starting on one of the next [`CARVE_PROBE_PAGES`] page boundaries: (offset, word).
fn wiped_chain_start(file: &[u8]) -> Option<(u64, usize)> {
    let first = file.get(..PAGE_SIZE as usize)?;
    if first.iter().any(|&b| b != 0) {
        return None;
    }
    let pages = (file.len() as u64 / PAGE_SIZE).min(CARVE_PROBE_PAGES);
    let decodes = std::cell::Cell::new(0);
    (1..pages).map(|p| p * PAGE_SIZE).find_map(|o| {
        [8, 4]
            .into_iter()
            .find(|&w| chain_starts_at(file, o, w, 3, &decodes))
            .map(|w| (o, w))
    })
}

/// A hibernation file: `HIBR`/`WAKE`/`RSTR` at offset 0, or a wiped first page followed by
/// compression sets.
pub(crate) const HIBERFIL: Format = Format {
    name: "hibernation file",
    probe: |i| {
        let b = i.bytes();
        b.len() as u64 >= 2 * PAGE_SIZE
            && (signature(b).is_some() || wiped_chain_start(b).is_some())
    },
    open: open_hiberfil,
};

fn bad(reason: String) -> DumpError {
    DumpError::BadHiberfil { reason }
}

/// A `word`-byte (8 or 4) field of the header.
fn word_at(file: &[u8], at: usize, word: usize) -> Option<u64> {
    if word == 4 {
        file.u32_at(at).map(u64::from)
    } else {
        file.u64_at(at)
    }
}

/// The restore pages at `boot_at`/`kernel_at` (`word` bytes each), if both point at a chain of
/// compression sets.
fn restore_pair(file: &[u8], boot_at: usize, kernel_at: usize, word: usize) -> Option<(u64, u64)> {
    let boot = word_at(file, boot_at, word)?;
    let kernel = word_at(file, kernel_at, word)?;
    let ok = |p: u64| {
        p.checked_mul(PAGE_SIZE).is_some_and(|o| {
            o < file.len() as u64 && chain_starts_at(file, o, word, 1, &std::cell::Cell::new(0))
        })
    };
    (ok(boot) && ok(kernel)).then_some((boot, kernel))
}

fn open_hiberfil(input: Input<'_>) -> Result<Opened, DumpError> {
    let file = input.bytes();
    let mut warnings = Vec::new();
    let mut builder = Builder::default();
    let info = match signature(file) {
        Some(sig) => open_header(file, sig, &mut builder, &mut warnings)?,
        None => {
            let Some((start, word)) = wiped_chain_start(file) else {
                return Err(bad(
                    "no signature and no compression sets after a zero first page".into(),
                ));
            };
            builder.word = word;
            open_wiped(file, start, &mut builder, &mut warnings)
        }
    };
    let h = builder.finish(info, &mut warnings);
    Ok(Opened {
        format: "",
        backing: input.backing,
        file: input.file,
        header: super::DumpHeader::none(if h.info.x86 {
            super::Arch::X86 { pae: true }
        } else {
            super::Arch::X64
        }),
        container: Box::new(h),
        warnings,
    })
}

/// Parse the header and read both restore sets.
fn open_header(
    file: &[u8],
    sig: &[u8],
    b: &mut Builder,
    warnings: &mut Vec<Warning>,
) -> Result<HiberInfo, DumpError> {
    let u32_at = |o: usize| file.u32_at(o).unwrap_or(0);
    let u64_at = |o: usize| file.u64_at(o).unwrap_or(0);
    let length_self = u32_at(0xC);
    let layout = LAYOUTS.iter().find(|l| l.length_self == length_self);
    // The layout, or for an unknown LengthSelf what PageSize says: at 0x18 on x64, 0x14 on x86.
    let x86 = match layout {
        Some(l) => l.x86,
        None => u32_at(0x18) != PAGE_SIZE as u32 && u32_at(0x14) == PAGE_SIZE as u32,
    };
    let Fixed {
        page_size_at,
        system_time_at: time_at,
        loader_pages_at: loader_at,
        word,
    } = Fixed::of(x86);
    let page_size = u32_at(page_size_at);
    if page_size != PAGE_SIZE as u32 {
        return Err(bad(format!(
            "PageSize (offset {page_size_at:#x}) is {page_size:#x}, not 0x1000"
        )));
    }
    b.word = word;
    let field = |at: usize| word_at(file, at, word).unwrap_or(0);
    let (boot_page, kernel_page, kernel_declared) = match layout {
        Some(l) => (
            field(l.first_boot_restore_page),
            field(l.first_kernel_restore_page),
            Some(u64_at(l.kernel_pages_processed)),
        ),
        None => {
            let candidates: &[(usize, usize, &str)] = if x86 {
                &[(0x50, 0x54, "0x50/0x54 (every known x86 layout)")]
            } else {
                &[
                    (0x68, 0x70, "0x68/0x70 (every known Windows 10+ layout)"),
                    (0x60, 0x68, "0x60/0x68 (Windows 8's layout)"),
                ]
            };
            let pair = candidates
                .iter()
                .find_map(|&(bo, ko, which)| restore_pair(file, bo, ko, word).map(|p| (p, which)));
            let Some(((boot, kernel), which)) = pair else {
                return Err(bad(format!(
                    "unknown {} header layout (LengthSelf {length_self:#x}) and none of the known restore-page offsets point at compression sets",
                    if x86 { "x86" } else { "x64" }
                )));
            };
            warnings.push(Warning::new(WarningKind::Unconfirmed, format!(
                "unknown hibernation header layout (LengthSelf {length_self:#x}): the restore pages are read at offsets {which}, where both point at compression sets; KernelPagesProcessed's offset is unknown, so the kernel restore set is read until its chain of compression sets ends and its page count is not confirmed; Hiberboot and HighestPhysicalPage are not read"
            )).field("PO_MEMORY_IMAGE.LengthSelf"));
            (boot, kernel, None)
        }
    };
    let loader_pages = u64_at(loader_at);
    let mut sets = Vec::new();
    for (name, page, declared) in [
        ("boot", boot_page, Some(loader_pages)),
        ("kernel", kernel_page, kernel_declared),
    ] {
        let Some(offset) = page
            .checked_mul(PAGE_SIZE)
            .filter(|&o| o < file.len() as u64)
        else {
            warnings.push(Warning::new(WarningKind::Unreadable, format!(
                "the {name} restore set's first page {page:#x} is past the end of the file ({:#x} bytes): its pages are not in the image",
                file.len()
            )).field(if name == "boot" { "PO_MEMORY_IMAGE.FirstBootRestorePage" } else { "PO_MEMORY_IMAGE.FirstKernelRestorePage" }));
            continue;
        };
        sets.push(b.read_restore_set(file, name, offset, declared, warnings));
    }
    let hiberboot = layout.and_then(|l| l.hiberboot).and_then(|o| file.u8_at(o));
    Ok(HiberInfo {
        signature: crate::bytes::tag_text(sig),
        length_self: Some(length_self),
        windows: layout.map(|l| l.windows),
        x86,
        system_time: Some(u64_at(time_at)),
        fast_startup: hiberboot.map(|v| v != 0),
        highest_physical_page: layout.and_then(|l| l.highest_physical_page).map(field),
        restore_sets: sets,
        sets_stored: 0,
        sets_lz77: 0,
        sets_huffman: 0,
        duplicate_pages: 0,
    })
}

/// A wiped header: read every chain found from `start` on.
fn open_wiped(file: &[u8], start: u64, b: &mut Builder, warnings: &mut Vec<Warning>) -> HiberInfo {
    let mut sets = Vec::new();
    let mut at = Some(start);
    let decodes = std::cell::Cell::new(0);
    while let Some(offset) = at {
        let set = b.read_restore_set(file, "carved", offset, None, warnings);
        let from = set.end_offset.div_ceil(PAGE_SIZE);
        let to = (from + CARVE_GAP_PAGES).min(file.len() as u64 / PAGE_SIZE);
        sets.push(set);
        at = (from..to)
            .map(|p| p * PAGE_SIZE)
            .find(|&o| chain_starts_at(file, o, b.word, 3, &decodes));
        if b.full() {
            break;
        }
    }
    if decodes.get() >= MAX_CARVE_DECODES {
        warnings.push(Warning::new(WarningKind::Bound, format!(
            "the search for chains of compression sets stopped after {MAX_CARVE_DECODES} trial decodes (page boundaries that look like set headers but do not decode); pages of chains further on are not in the image"
        )));
    }
    warnings.push(Warning::new(WarningKind::Inferred, format!(
        "the hibernation file's header is wiped (its first page is zero, as Windows leaves it after a resume): {} chains of compression sets were found by their structure (page-aligned, each set's header and descriptors valid, the first set decoding exactly); the Windows version, the time it was written and whether it is a Fast Startup image are unknown, and pages of a chain not found are not in the image",
        sets.len()
    )));
    HiberInfo {
        signature: "wiped".into(),
        length_self: None,
        windows: None,
        x86: b.word == 4,
        system_time: None,
        fast_startup: None,
        highest_physical_page: None,
        restore_sets: sets,
        sets_stored: 0,
        sets_lz77: 0,
        sets_huffman: 0,
        duplicate_pages: 0,
    }
}

/// The index being built.
#[derive(Default)]
struct Builder {
    /// Bytes of a page descriptor: 8 (x64) or 4 (x86).
    word: usize,
    sets: Vec<Set>,
    /// (first PFN, pages, set, first page in set), in file order.
    descs: Vec<(u64, u8, u32, u8)>,
    large_sets: u64,
    bound_hit: bool,
}

impl Builder {
    fn full(&self) -> bool {
        self.bound_hit
    }

    fn read_restore_set(
        &mut self,
        file: &[u8],
        name: &'static str,
        offset: u64,
        declared: Option<u64>,
        warnings: &mut Vec<Warning>,
    ) -> RestoreSet {
        let room = ((u32::MAX >> 8) as usize).saturating_sub(self.sets.len());
        let mut pages = 0u64;
        let (count, end, stop) = read_chain(file, offset, self.word, declared, room, &mut |p| {
            if self.descs.len() + p.descriptors.len() > MAX_DESCRIPTORS {
                self.bound_hit = true;
                return false;
            }
            let set = self.sets.len() as u32;
            let mut first = 0u64;
            for &(pfn, n) in &p.descriptors {
                self.descs.push((pfn, n as u8, set, first as u8));
                first += n;
            }
            if u64::from(p.set.pages) > WINDOWS_SET_PAGES {
                self.large_sets += 1;
            }
            pages += u64::from(p.set.pages);
            self.sets.push(p.set);
            true
        });
        let count = count as u64;
        // The index's bound is its own warning (below), not the chain's end.
        let stop = stop.filter(|_| !self.bound_hit);
        if self.bound_hit {
            warnings.push(Warning::new(WarningKind::Bound, format!(
                "the {name} restore set at file offset {offset:#x}: the index stopped at {MAX_DESCRIPTORS} page descriptors; the pages of later descriptors read as not in the image"
            )));
        }
        match (stop, declared) {
            (Some(reason), Some(d)) => warnings.push(Warning::new(WarningKind::Unreadable, format!(
                "the {name} restore set (file offset {offset:#x}) declares {d} pages but its chain of compression sets ends after {pages} at file offset {end:#x}: {reason}; the pages read are used, the rest are not in the image"
            ))),
            (None, Some(d)) if pages > d => warnings.push(Warning::new(WarningKind::Anomaly, format!(
                "the {name} restore set (file offset {offset:#x}) declares {d} pages; its last compression set ends {} pages past that (sets are not split)",
                pages - d
            ))),
            _ => {}
        }
        RestoreSet {
            name,
            file_offset: offset,
            pages_declared: declared,
            pages_read: pages,
            compression_sets: count,
            end_offset: end,
        }
    }

    fn finish(mut self, mut info: HiberInfo, warnings: &mut Vec<Warning>) -> Hiberfil {
        for s in &self.sets {
            match s.codec {
                Codec::Stored => info.sets_stored += 1,
                Codec::Lz77 => info.sets_lz77 += 1,
                Codec::Huffman => info.sets_huffman += 1,
            }
        }
        if self.large_sets > 0 {
            warnings.push(Warning::new(WarningKind::Anomaly, format!(
                "{} compression sets hold more than {WINDOWS_SET_PAGES} pages (Windows writes at most {WINDOWS_SET_PAGES}); they are read",
                self.large_sets
            )));
        }
        // Sort by first PFN, then read order (the set index: the boot set, then the kernel set,
        // each in file order); a
        // descriptor starting inside pages already covered loses those pages (the copy of the
        // lower-starting descriptor is read). In place: no permutation vector.
        self.descs
            .sort_unstable_by_key(|&(pfn, _, set, first)| (pfn, set, first));
        let mut starts = Vec::with_capacity(self.descs.len());
        let mut locs = Vec::with_capacity(self.descs.len());
        let (mut covered, mut duplicates, mut stored) = (0u64, 0u64, 0u64);
        let mut first_dup = None;
        for &(pfn, n, set, first) in &self.descs {
            let end = pfn + u64::from(n);
            if end <= covered {
                duplicates += u64::from(n);
                first_dup.get_or_insert(pfn);
                continue;
            }
            let skip = covered.saturating_sub(pfn);
            if skip > 0 {
                duplicates += skip;
                first_dup.get_or_insert(pfn);
            }
            let (pfn, n, first) = (pfn + skip, u64::from(n) - skip, u64::from(first) + skip);
            starts.push((pfn << 8) | n);
            locs.push((set << 8) | first as u32);
            stored += n;
            covered = end;
        }
        self.descs = Vec::new();
        if duplicates > 0 {
            warnings.push(Warning::new(WarningKind::Anomaly, format!(
                "{duplicates} pages are stored more than once (the first at PFN {:#x}); the copy of the descriptor with the lowest first PFN is read (ties: the one read first, the boot restore set before the kernel set, each in file order)",
                first_dup.unwrap_or(0)
            )));
        }
        info.duplicate_pages = duplicates;
        Hiberfil {
            info,
            sets: self.sets,
            starts,
            locs,
            stored,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cache: Mutex::new(Cache::default()),
            read_notes: Mutex::new(Default::default()),
        }
    }
}

impl Hiberfil {
    /// What the header and the sets say.
    pub fn info(&self) -> &HiberInfo {
        &self.info
    }

    /// Problems met while reading pages so far (damaged compression sets, methods that were
    /// not the header's), each once.
    /// At most [`MAX_READ_NOTES`] are listed, then one summary counts the others (a file of
    /// many damaged sets does not flood the output).
    pub fn read_warnings(&self) -> Vec<Warning> {
        let Ok(n) = self.read_notes.lock() else {
            return Vec::new();
        };
        let mut out = n.listed.clone();
        if n.more > 0 {
            out.push(Warning::new(WarningKind::Decode, format!(
                "{} more compression sets could not be decompressed or were read with the other codec than their method bits name (the first {MAX_READ_NOTES} are listed); their pages are not in the image, or were read as said",
                n.more
            )));
        }
        out
    }

    /// The compression set holding `pfn` and the page's index in it.
    fn locate(&self, pfn: u64) -> Option<(u32, usize)> {
        let k = self
            .starts
            .partition_point(|&s| s >> 8 <= pfn)
            .checked_sub(1)?;
        let (start, n) = (self.starts[k] >> 8, self.starts[k] & 0xFF);
        if pfn >= start + n {
            return None;
        }
        let loc = self.locs[k];
        Some((loc >> 8, (loc & 0xFF) as usize + (pfn - start) as usize))
    }

    fn note(&self, set: u32, w: Warning) {
        let Ok(mut n) = self.read_notes.lock() else {
            return;
        };
        let (word, bit) = (set as usize / 64, 1u64 << (set % 64));
        if n.noted.len() <= word {
            n.noted
                .resize(self.sets.len().div_ceil(64).max(word + 1), 0);
        }
        if n.noted[word] & bit != 0 {
            return;
        }
        n.noted[word] |= bit;
        if n.listed.len() < MAX_READ_NOTES {
            n.listed.push(w);
        } else {
            n.more += 1;
        }
    }

    /// The decompressed pages of set `idx` (cached), or why they cannot be had.
    fn set_pages(&self, file: &[u8], idx: u32) -> Result<SetPages, ()> {
        let last = LAST_SET.with(|l| {
            l.borrow()
                .as_ref()
                .filter(|(id, set, _)| *id == self.id && *set == idx)
                .map(|(_, _, p)| p.clone())
        });
        if let Some(p) = last {
            return Ok(p);
        }
        let cached = self.cache.lock().ok().and_then(|mut c| {
            c.sets.get_mut(&idx).map(|(p, again)| {
                *again = true;
                p.clone()
            })
        });
        let pages = match cached {
            Some(p) => p,
            None => self.decode(file, idx)?,
        };
        LAST_SET.with(|l| *l.borrow_mut() = Some((self.id, idx, pages.clone())));
        Ok(pages)
    }

    /// Decode set `idx` and keep it in the cache.
    fn decode(&self, file: &[u8], idx: u32) -> Result<SetPages, ()> {
        let set = self.sets[idx as usize];
        let (bytes, used) = match decode_set(file, &set) {
            Ok(r) => r,
            Err(e) => {
                self.note(idx, Warning::new(WarningKind::Decode, format!(
                    "the {} compression set whose data starts at file offset {:#x} ({} pages) cannot be decompressed: {e}; its pages are not in the image",
                    set.codec.name(), set.data_offset, set.pages
                )));
                return Err(());
            }
        };
        if used != set.codec {
            self.note(idx, Warning::new(WarningKind::Anomaly, format!(
                "the compression set whose data starts at file offset {:#x} names the {} method but decodes exactly as {}: read so",
                set.data_offset, set.codec.name(), used.name()
            )));
        }
        let pages: SetPages = bytes
            .chunks_exact(PAGE_SIZE as usize)
            .map(Arc::from)
            .collect();
        if let Ok(mut c) = self.cache.lock() {
            let size = bytes.len();
            // CLOCK: each set in the queue is looked at most twice per insertion.
            let mut budget = 2 * c.order.len();
            while c.bytes + size > CACHE_BYTES && budget > 0 {
                budget -= 1;
                let Some(old) = c.order.pop_front() else {
                    break;
                };
                match c.sets.get_mut(&old) {
                    Some((_, again)) if *again => {
                        *again = false;
                        c.order.push_back(old);
                    }
                    Some(_) => {
                        if let Some((p, _)) = c.sets.remove(&old) {
                            c.bytes -= p.len() * PAGE_SIZE as usize;
                        }
                    }
                    None => {}
                }
            }
            if c.bytes + size <= CACHE_BYTES && !c.sets.contains_key(&idx) {
                c.sets.insert(idx, (pages.clone(), false));
                c.order.push_back(idx);
                c.bytes += size;
            }
        }
        Ok(pages)
    }
}

impl Container for Hiberfil {
    /// A page of a set stored as it is is plain file bytes; a compressed one is not.
    fn page_offset(&self, _file: &[u8], pfn: Pfn) -> Option<u64> {
        let (idx, i) = self.locate(pfn.get())?;
        let set = &self.sets[idx as usize];
        (set.codec == Codec::Stored).then(|| set.data_offset + i as u64 * PAGE_SIZE)
    }

    fn page<'a>(&'a self, file: &'a [u8], pfn: Pfn) -> PageLookup<'a> {
        let Some((idx, i)) = self.locate(pfn.get()) else {
            return PageLookup::NotInDump;
        };
        let set = &self.sets[idx as usize];
        if set.codec == Codec::Stored {
            let o = set.data_offset + i as u64 * PAGE_SIZE;
            return match usize::try_from(o)
                .ok()
                .and_then(|o| file.bytes_at(o, PAGE_SIZE as usize))
            {
                Some(p) => PageLookup::Present(PageRef::Borrowed(p)),
                None => PageLookup::BeyondEof { file_offset: o },
            };
        }
        match self.set_pages(file, idx) {
            Ok(p) => PageLookup::Present(PageRef::Shared(p[i].clone())),
            Err(()) => PageLookup::Damaged {
                file_offset: set.data_offset,
            },
        }
    }

    fn physical_runs(&self, _file: &[u8]) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &s in &self.starts {
            let (pfn, n) = (s >> 8, s & 0xFF);
            match out.last_mut() {
                Some((f, c)) if *f + *c == pfn => *c += n,
                _ => out.push((pfn, n)),
            }
        }
        out
    }

    /// The index's runs in set order (file order within each restore set): each set's
    /// descriptors one after another, so a pass decodes each set once.
    fn runs_in_storage_order(&self, _file: &[u8]) -> Vec<(u64, u64)> {
        let mut order: Vec<u32> = (0..self.starts.len() as u32).collect();
        order.sort_unstable_by_key(|&k| self.locs[k as usize]);
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(order.len());
        for k in order {
            let s = self.starts[k as usize];
            let (pfn, n) = (s >> 8, s & 0xFF);
            match out.last_mut() {
                Some((f, c)) if *f + *c == pfn => *c += n,
                _ => out.push((pfn, n)),
            }
        }
        out
    }

    fn stored_pages(&self) -> u64 {
        self.stored
    }

    fn storage(&self) -> Storage {
        Storage {
            kind: "physical (hibernation compression sets)",
            runs: Some(self.physical_runs(&[]).len()),
            ..Default::default()
        }
    }

    fn headerless(&self) -> bool {
        true
    }

    fn read_warnings(&self) -> Vec<Warning> {
        Hiberfil::read_warnings(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
