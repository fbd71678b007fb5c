//! Windows 8+ x64 hibernation files (`hiberfil.sys`) of the forged machine
//! ([`crate::Forged::write_hiberfil`]), written from public descriptions of the format, never
//! from etwdump's reader (`src/dump/hiberfil.rs`):
//!
//! * the header is `PO_MEMORY_IMAGE` at file offset 0, its fields at the offsets of the kernel
//!   PDB types (Volatility ISFs of builds 9600 (size 0x360), 14393 (0x3C8) and 17763/19041
//!   (0x3E0) in `shared/isf/`; the unit tests compare [`HiberVersion::layout`] with them) and,
//!   for the versions no ISF here covers, of ufrisk/LeechCore `leechcore/device_hibr.c`
//!   (`HIBR_OFFSET_PROFILES`: 10240/10586 LengthSelf 0x3B0, 20348/22000/22621 0x448, 26100
//!   0x4D8) and `shared/reference/hibernation-format.md` (Hiberboot of 20348/22000 at 0x3CC);
//! * the two restore sets (boot set: `NumPagesForLoader` pages from page
//!   `FirstBootRestorePage`; kernel set: `PerfInfo.KernelPagesProcessed` pages from page
//!   `FirstKernelRestorePage`) are chains of compression sets, each a u32 header (bits 0–7
//!   descriptor count, 8–29 data size, 30–31 method, Hibr2Bin `_HIBER_COMPRESS_METHOD`:
//!   XpressFast 0, XpressMax 1, XpressHuffFast 2, XpressHuffMax 3), u64 page descriptors
//!   `(PFN << 4) | (pages − 1)`, then the data: the pages in descriptor order, Xpress
//!   compressed ([MS-XCA] Plain LZ77 for methods 0/1, LZ77+Huffman for 2/3) or stored as is
//!   (data size == pages × 4096). Sets follow one another unaligned: volatility3 `layers/hib.py`
//!   (`offset += 4 + size + count * 8`) and LeechCore (`cbo += pbo + pCS->cb`) agree;
//! * at most 16 pages per set (Hibr2Bin `MAX_HIBER_PAGES`, LeechCore warns above 16).
//!
//! Everything the sources leave open varies with [`HiberSpec::seed`]: the set sizes (1–16
//! pages), the descriptor runs (1–16 contiguous PFNs, several per set; a run of the machine may
//! be cut between descriptors and sets), which pages form the boot set, the order of the sets
//! in each restore set (ascending, descending or shuffled), the method bits (one of the
//! codec's two values for the whole file, or mixed per set), sets stored uncompressed (always
//! when compression does not shrink the pages, otherwise one in eight at random), whether the
//! boot or the kernel restore set comes first in the file, the gaps between the header and
//! the restore sets (junk pages), the SystemTime, the harmless header fields (ImageType,
//! CheckSum, InterruptTime, FeatureFlags) and the trailing junk after the last set.
//!
//! Junk (between restore sets and after the last set) always starts with a zero u32: a reader
//! that chains compression sets until an invalid header (Hibr2Bin: descriptor count 0) stops
//! there; readers that count pages (volatility3, LeechCore) never look at it.
//!
//! The file is extended (sparsely) to at least 16 MiB: LeechCore refuses smaller files, and a
//! real `hiberfil.sys` is preallocated far beyond its content.

use std::collections::BTreeSet;
use std::path::Path;

use crate::dump::layout::write_sparse;
use crate::util::{put_bytes, put_u32, put_u64, Rng, PAGE_SIZE};
use crate::xpress::{compress_huffman, compress_lz77};
use crate::Forged;

/// Which `PO_MEMORY_IMAGE` layout a file has (the kernel build that would write it:
/// [`HiberVersion::for_build`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HiberVersion {
    /// Windows 8 / 8.1 (9200 / 9600), LengthSelf 0x360.
    Win8,
    /// Windows 10 1507–1511 (10240 / 10586), LengthSelf 0x3B0 (LeechCore's table; no ISF here).
    Win10_1507,
    /// Windows 10 1607 (14393), LengthSelf 0x3C8.
    Win10_1607,
    /// Windows 10 1703 … 1803 (15063 … 17134), LengthSelf 0x3D8 (LeechCore's table).
    Win10_1703,
    /// Windows 10 1809 … 22H2 (17763 … 19045), LengthSelf 0x3E0.
    Win10_1809,
    /// Windows Server 2022 / Windows 11 21H2–23H2 (20348, 22000 … 22631), LengthSelf 0x448.
    Win11_22000,
    /// Windows 11 24H2 (26100), LengthSelf 0x4D8.
    Win11_26100,
}

/// Byte offsets of the `PO_MEMORY_IMAGE` fields the forge writes, and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HiberLayout {
    /// sizeof(PO_MEMORY_IMAGE), stored in `LengthSelf` (u32 at 0xC).
    pub length_self: u32,
    /// u64 page number of the boot restore set.
    pub first_boot_restore_page: usize,
    /// u64 page number of the kernel restore set.
    pub first_kernel_restore_page: usize,
    /// u64 `PerfInfo.KernelPagesProcessed` (PerfInfo's offset + the field's offset in
    /// `_PO_HIBER_PERF`): the kernel set's page count.
    pub kernel_pages_processed: usize,
    /// u64 `HighestPhysicalPage`.
    pub highest_physical_page: usize,
    /// u8 `Hiberboot` (set in a Fast Startup image), where a source gives it.
    pub hiberboot: Option<usize>,
}

/// `Signature` (u32 at 0).
pub const HIBER_SIGNATURE_OFFSET: usize = 0x0;
/// `ImageType` (u32).
pub const HIBER_IMAGE_TYPE_OFFSET: usize = 0x4;
/// `CheckSum` (u32).
pub const HIBER_CHECKSUM_OFFSET: usize = 0x8;
/// `LengthSelf` (u32).
pub const HIBER_LENGTH_SELF_OFFSET: usize = 0xC;
/// `PageSize` (u32).
pub const HIBER_PAGE_SIZE_OFFSET: usize = 0x18;
/// `SystemTime` (FILETIME, `_LARGE_INTEGER`).
pub const HIBER_SYSTEM_TIME_OFFSET: usize = 0x20;
/// `InterruptTime` (u64).
pub const HIBER_INTERRUPT_TIME_OFFSET: usize = 0x28;
/// `FeatureFlags` (u64).
pub const HIBER_FEATURE_FLAGS_OFFSET: usize = 0x30;
/// `NumPagesForLoader` (u64): the boot set's page count.
pub const HIBER_NUM_PAGES_FOR_LOADER_OFFSET: usize = 0x58;

impl HiberVersion {
    /// Every version, oldest first.
    pub const ALL: [HiberVersion; 7] = [
        HiberVersion::Win8,
        HiberVersion::Win10_1507,
        HiberVersion::Win10_1607,
        HiberVersion::Win10_1703,
        HiberVersion::Win10_1809,
        HiberVersion::Win11_22000,
        HiberVersion::Win11_26100,
    ];

    /// The layout written for this version. Sources:
    /// * Win8: ISF 9600 (`22597D0B…-1`): size 0x360, FirstBootRestorePage 0x60,
    ///   FirstKernelRestorePage 0x68, PerfInfo 0x70 + KernelPagesProcessed 0x158 = 0x1C8,
    ///   Hiberboot 0x2FC, HighestPhysicalPage 0x330 (LeechCore's 9200/9600 row agrees).
    /// * Win10_1507: LeechCore's 10240/10586 rows (size 0x3B0, 0x68, 0x70, 0x218, 0x380;
    ///   volatility3's table has the same 0x70 / 0x218); Hiberboot 0x34C from two public
    ///   PDB-derived listings of the 0x3B0 PO_MEMORY_IMAGE (a Vergilius-style header and a PDB
    ///   type dump: PerfInfo 0x88 + KernelPagesProcessed 0x190 = 0x218 there too).
    /// * Win10_1607: ISF 14393 (`517E128F…-1`): size 0x3C8, 0x68, 0x70, PerfInfo 0x88 + 0x198 =
    ///   0x220, Hiberboot 0x354, HighestPhysicalPage 0x388 (LeechCore agrees).
    /// * Win10_1703: LeechCore's 15063/16299/17134 rows: LengthSelf 0x3D8 with 0x68, 0x70,
    ///   0x230, 0x398; Hiberboot: no source, not written.
    /// * Win10_1809: ISFs 17763 / 19041 and three more 0x3E0 builds: 0x68, 0x70, 0x88 + 0x1A8 =
    ///   0x230, Hiberboot 0x364, HighestPhysicalPage 0x398.
    /// * Win11_22000: LeechCore (20348/22000/22621: 0x448, 0x68, 0x70, 0x230, 0x400), Hiberboot
    ///   0x3CC from the reference map.
    /// * Win11_26100: LeechCore (26100: 0x4D8, 0x68, 0x70, 0x238, 0x498); Hiberboot: no source.
    pub fn layout(self) -> HiberLayout {
        let (length_self, fbrp, fkrp, kpp, hpp, hiberboot) = match self {
            HiberVersion::Win8 => (0x360, 0x60, 0x68, 0x1C8, 0x330, Some(0x2FC)),
            HiberVersion::Win10_1507 => (0x3B0, 0x68, 0x70, 0x218, 0x380, Some(0x34C)),
            HiberVersion::Win10_1607 => (0x3C8, 0x68, 0x70, 0x220, 0x388, Some(0x354)),
            HiberVersion::Win10_1703 => (0x3D8, 0x68, 0x70, 0x230, 0x398, None),
            HiberVersion::Win10_1809 => (0x3E0, 0x68, 0x70, 0x230, 0x398, Some(0x364)),
            HiberVersion::Win11_22000 => (0x448, 0x68, 0x70, 0x230, 0x400, Some(0x3CC)),
            HiberVersion::Win11_26100 => (0x4D8, 0x68, 0x70, 0x238, 0x498, None),
        };
        HiberLayout {
            length_self,
            first_boot_restore_page: fbrp,
            first_kernel_restore_page: fkrp,
            kernel_pages_processed: kpp,
            highest_physical_page: hpp,
            hiberboot,
        }
    }

    /// The version a kernel of `build` writes; `None` before Windows 8 (another format) and
    /// for builds no source places.
    pub fn for_build(build: u32) -> Option<HiberVersion> {
        Some(match build {
            9200..=9600 => HiberVersion::Win8,
            10240..=10586 => HiberVersion::Win10_1507,
            14393 => HiberVersion::Win10_1607,
            15063..=17134 => HiberVersion::Win10_1703,
            17763..=19045 => HiberVersion::Win10_1809,
            20348..=22631 => HiberVersion::Win11_22000,
            26100..=26200 => HiberVersion::Win11_26100,
            _ => return None,
        })
    }

    /// Short name ("win8", "win10-1507", "win10-1607", "win10-1703", "win10-1809",
    /// "win11-22000", "win11-26100").
    pub fn name(self) -> &'static str {
        match self {
            HiberVersion::Win8 => "win8",
            HiberVersion::Win10_1507 => "win10-1507",
            HiberVersion::Win10_1607 => "win10-1607",
            HiberVersion::Win10_1703 => "win10-1703",
            HiberVersion::Win10_1809 => "win10-1809",
            HiberVersion::Win11_22000 => "win11-22000",
            HiberVersion::Win11_26100 => "win11-26100",
        }
    }
}

/// The Xpress codec of the compressed sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HiberCodec {
    /// [MS-XCA] Plain LZ77, method 0 (XpressFast) or 1 (XpressMax).
    Lz77,
    /// [MS-XCA] LZ77+Huffman, method 2 (XpressHuffFast) or 3 (XpressHuffMax).
    Huffman,
}

impl HiberCodec {
    pub const ALL: [HiberCodec; 2] = [HiberCodec::Lz77, HiberCodec::Huffman];

    /// The two method values of this codec.
    pub fn methods(self) -> [u8; 2] {
        match self {
            HiberCodec::Lz77 => [0, 1],
            HiberCodec::Huffman => [2, 3],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HiberCodec::Lz77 => "lz77",
            HiberCodec::Huffman => "huffman",
        }
    }
}

/// Which pages the image holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HiberVariant {
    /// Every stored page of the machine (a hibernation).
    Full,
    /// A Fast Startup (hybrid shutdown) image: `Hiberboot` set (where the version's offset is
    /// known) and kernel memory only: a frame is left out when some process's user half
    /// (VA below 0x800000000000) maps it and no kernel mapping (the kernel's page tables,
    /// 2 MiB pages included; not the forge's 1 GiB probe page, which maps all of physical
    /// 0–1 GiB) maps it. Page tables, PML4s and KUSER_SHARED_DATA stay.
    FastStartup,
}

impl HiberVariant {
    pub const ALL: [HiberVariant; 2] = [HiberVariant::Full, HiberVariant::FastStartup];

    pub fn name(self) -> &'static str {
        match self {
            HiberVariant::Full => "full",
            HiberVariant::FastStartup => "faststartup",
        }
    }
}

/// The first page's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HiberSignature {
    /// `HIBR`: a valid image.
    Hibr,
    /// `WAKE`: the resume has started (readers agree it is still readable).
    Wake,
    /// The first page zeroed after resume; everything else as written (readers agree it is
    /// not readable).
    Wiped,
}

impl HiberSignature {
    pub fn name(self) -> &'static str {
        match self {
            HiberSignature::Hibr => "hibr",
            HiberSignature::Wake => "wake",
            HiberSignature::Wiped => "wiped",
        }
    }
}

/// What [`crate::Forged::write_hiberfil`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HiberSpec {
    pub version: HiberVersion,
    pub codec: HiberCodec,
    pub variant: HiberVariant,
    pub signature: HiberSignature,
    pub seed: u64,
}

impl HiberSpec {
    /// A valid (`HIBR`) image of every stored page.
    pub fn new(version: HiberVersion, codec: HiberCodec, seed: u64) -> Self {
        HiberSpec {
            version,
            codec,
            variant: HiberVariant::Full,
            signature: HiberSignature::Hibr,
            seed,
        }
    }
}

/// Which restore set a compression set belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RestoreSet {
    /// From `FirstBootRestorePage`, `NumPagesForLoader` pages.
    Boot,
    /// From `FirstKernelRestorePage`, `PerfInfo.KernelPagesProcessed` pages.
    Kernel,
}

/// One compression set as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HiberSetTruth {
    pub restore_set: RestoreSet,
    /// File offset of its u32 header.
    pub offset: u64,
    /// Bits 30–31 of the header.
    pub method: u8,
    /// Its descriptors `(first PFN, page count)`, in file order.
    pub descriptors: Vec<(u64, u64)>,
    /// Bits 8–29 of the header: the size of the data after the descriptors.
    pub compressed_size: u32,
    /// Pages in the set (sum of the descriptors' counts), 1..=16.
    pub pages: u32,
    /// The data is the pages as they are (`compressed_size == pages × 4096`).
    pub uncompressed: bool,
}

impl HiberSetTruth {
    /// File offset of the set's data (after header and descriptors).
    pub fn data_offset(&self) -> u64 {
        self.offset + 4 + 8 * self.descriptors.len() as u64
    }

    /// The PFNs of the set in data order (page i of the data is the i-th).
    pub fn pfns(&self) -> Vec<u64> {
        self.descriptors
            .iter()
            .flat_map(|&(pfn, n)| pfn..pfn + n)
            .collect()
    }
}

/// What a reader of the file must find.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HiberTruth {
    pub version: HiberVersion,
    pub length_self: u32,
    pub codec: HiberCodec,
    pub signature: HiberSignature,
    pub variant: HiberVariant,
    /// FILETIME written at `SystemTime`.
    pub system_time: u64,
    /// `HighestPhysicalPage` as written (the machine's highest PFN).
    pub highest_physical_page: u64,
    /// Whether `Hiberboot` was written as 1 (FastStartup with a known offset).
    pub hiberboot: bool,
    /// Every PFN the file stores, ascending; each is in exactly one set.
    pub pfns: Vec<u64>,
    /// `NumPagesForLoader`.
    pub boot_pages: u64,
    /// `PerfInfo.KernelPagesProcessed`.
    pub kernel_pages: u64,
    /// `FirstBootRestorePage` × 4096.
    pub boot_set_offset: u64,
    /// `FirstKernelRestorePage` × 4096.
    pub kernel_set_offset: u64,
    /// Every compression set in file order.
    pub sets: Vec<HiberSetTruth>,
    /// End of the last set's data (trailing junk follows).
    pub data_end: u64,
    /// The file's length.
    pub file_len: u64,
}

/// A 1 GiB page. The forge maps one (the `huge` probe: physical 0–1 GiB), which covers every
/// frame of a small machine; it is not a kernel use of those frames, so the FastStartup rule
/// ignores kernel mappings of 1 GiB pages.
const HUGE_PAGE: u64 = 1 << 30;

/// The frames a FastStartup image leaves out (see [`HiberVariant::FastStartup`]).
fn user_only_frames(f: &Forged) -> BTreeSet<u64> {
    let mut kernel: Vec<(u64, u64)> = f
        .vmap
        .mapped()
        .filter(|&(_, size, _)| size < HUGE_PAGE)
        .map(|(_, size, pa)| (pa / PAGE_SIZE, (pa + size).div_ceil(PAGE_SIZE)))
        .collect();
    kernel.sort_unstable();
    // Merged into disjoint intervals for a binary search.
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in kernel {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let kernel_maps = |pfn: u64| {
        let i = merged.partition_point(|&(s, _)| s <= pfn);
        i > 0 && pfn < merged[i - 1].1
    };
    let mut out = BTreeSet::new();
    for space in &f.user_spaces {
        for (va, size, pa) in space.vmap.mapped() {
            if va >= crate::dump::user_space::USER_TOP {
                continue;
            }
            for pfn in pa / PAGE_SIZE..(pa + size).div_ceil(PAGE_SIZE) {
                if !kernel_maps(pfn) {
                    out.insert(pfn);
                }
            }
        }
    }
    out
}

/// The PFNs a hibernation file of `variant` stores: every stored page of the machine, less the
/// user-only frames for FastStartup.
pub(crate) fn stored_pfns(f: &Forged, variant: HiberVariant) -> Vec<u64> {
    let all =
        f.pm.stored_runs()
            .into_iter()
            .flat_map(|(base, count)| base..base + count);
    match variant {
        HiberVariant::Full => all.collect(),
        HiberVariant::FastStartup => {
            let user = user_only_frames(f);
            all.filter(|p| !user.contains(p)).collect()
        }
    }
}

/// A random FILETIME between 2013-01-01 and 2026-01-01.
fn random_filetime(rng: &mut Rng) -> u64 {
    const FT_2013: u64 = 130_015_008_000_000_000;
    const FT_2026: u64 = 134_117_280_000_000_000;
    rng.range(FT_2013, FT_2026)
}

/// `n` random bytes whose first u32 is zero (so that a chaining reader stops there).
fn junk(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill(&mut v);
    v[..n.min(4)].fill(0);
    v
}

/// Split `pfns` (ascending, one restore set) into compression sets: descriptor runs of 1–16
/// contiguous PFNs grouped into sets of 1–16 pages; returns each set's descriptors.
fn plan_sets(rng: &mut Rng, pfns: &[u64]) -> Vec<Vec<(u64, u64)>> {
    // Descriptor runs: maximal contiguous runs cut at random lengths.
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut i = 0;
    while i < pfns.len() {
        let max = rng.range(1, 17);
        let mut n = 1;
        while i + (n as usize) < pfns.len() && n < max && pfns[i + n as usize] == pfns[i] + n {
            n += 1;
        }
        runs.push((pfns[i], n));
        i += n as usize;
    }
    // Sets: 1..=16 pages each; a run that does not fit is split between two sets.
    let mut sets = Vec::new();
    let mut cur: Vec<(u64, u64)> = Vec::new();
    let mut room = rng.range(1, 17);
    for (mut pfn, mut n) in runs {
        while n > 0 {
            let take = n.min(room);
            cur.push((pfn, take));
            pfn += take;
            n -= take;
            room -= take;
            if room == 0 {
                sets.push(std::mem::take(&mut cur));
                room = rng.range(1, 17);
            }
        }
    }
    if !cur.is_empty() {
        sets.push(cur);
    }
    // Set order: ascending, descending or shuffled; descriptors sometimes shuffled in a set.
    match rng.range(0, 3) {
        0 => {}
        1 => sets.reverse(),
        _ => shuffle(rng, &mut sets),
    }
    if rng.range(0, 2) == 0 {
        for s in &mut sets {
            if rng.range(0, 4) == 0 {
                shuffle(rng, s);
            }
        }
    }
    sets
}

fn shuffle<T>(rng: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rng.range(0, i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// Choose `NumPagesForLoader` PFNs for the boot set: random stretches of the stored PFNs
/// (1–64 pages each) until 1 … a quarter of the pages are chosen.
fn choose_boot(rng: &mut Rng, pfns: &[u64]) -> BTreeSet<u64> {
    let mut boot = BTreeSet::new();
    if pfns.is_empty() {
        return boot;
    }
    let target = rng.range(1, (pfns.len() as u64 / 4).max(1) + 1) as usize;
    while boot.len() < target {
        let start = rng.range(0, pfns.len() as u64) as usize;
        let len = rng.range(1, 65) as usize;
        for &p in pfns[start..].iter().take(len) {
            if boot.len() == target {
                break;
            }
            boot.insert(p);
        }
    }
    boot
}

/// One restore set encoded: its bytes (sets back to back from offset 0) and the sets' truths
/// (offsets relative to the restore set's start).
fn encode_restore_set(
    f: &Forged,
    rng: &mut Rng,
    which: RestoreSet,
    pfns: &[u64],
    codec: HiberCodec,
) -> (Vec<u8>, Vec<HiberSetTruth>) {
    let methods = codec.methods();
    let policy = rng.range(0, 3);
    let zero = vec![0u8; PAGE_SIZE as usize];
    let mut out = Vec::new();
    let mut truths = Vec::new();
    for descriptors in plan_sets(rng, pfns) {
        let pages: u64 = descriptors.iter().map(|d| d.1).sum();
        let mut data = Vec::with_capacity((pages * PAGE_SIZE) as usize);
        for &(pfn, n) in &descriptors {
            for p in pfn..pfn + n {
                data.extend_from_slice(f.pm.pages().get(&p).map_or(&zero[..], |b| &b[..]));
            }
        }
        let method = match policy {
            0 => methods[0],
            1 => methods[1],
            _ => methods[rng.range(0, 2) as usize],
        };
        let compressed = match codec {
            HiberCodec::Lz77 => compress_lz77(&data),
            HiberCodec::Huffman => compress_huffman(&data),
        };
        // Stored as is when compression does not shrink it (a compressed size equal to
        // pages × 4096 would read as uncompressed) and one set in eight at random.
        let uncompressed = compressed.len() >= data.len() || rng.range(0, 8) == 0;
        let body = if uncompressed { data } else { compressed };
        let header = descriptors.len() as u32 | (body.len() as u32) << 8 | u32::from(method) << 30;
        truths.push(HiberSetTruth {
            restore_set: which,
            offset: out.len() as u64,
            method,
            descriptors: descriptors.clone(),
            compressed_size: body.len() as u32,
            pages: pages as u32,
            uncompressed,
        });
        out.extend_from_slice(&header.to_le_bytes());
        for &(pfn, n) in &descriptors {
            out.extend_from_slice(&((pfn << 4) | (n - 1)).to_le_bytes());
        }
        out.extend_from_slice(&body);
    }
    (out, truths)
}

/// Smallest file written (LeechCore refuses files below 16 MiB).
const MIN_FILE_LEN: u64 = 16 << 20;

/// [`crate::Forged::write_hiberfil`].
pub(crate) fn write(f: &Forged, path: &Path, spec: &HiberSpec) -> std::io::Result<HiberTruth> {
    if !f.config.arch.is_x64() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "hibernation files are forged for x64 machines only (no public x86 PO_MEMORY_IMAGE here)",
        ));
    }
    let layout = spec.version.layout();
    let mut rng = Rng::new(spec.seed ^ 0x4849_4252_5345_4544);
    let pfns = stored_pfns(f, spec.variant);
    let boot = choose_boot(&mut rng, &pfns);
    let kernel: Vec<u64> = pfns.iter().copied().filter(|p| !boot.contains(p)).collect();
    let boot: Vec<u64> = boot.into_iter().collect();

    let (boot_bytes, boot_sets) =
        encode_restore_set(f, &mut rng, RestoreSet::Boot, &boot, spec.codec);
    let (kernel_bytes, kernel_sets) =
        encode_restore_set(f, &mut rng, RestoreSet::Kernel, &kernel, spec.codec);

    // File: header page, 0–3 junk pages, the first restore set, junk to the next page plus
    // 0–2 junk pages, the second restore set, 0–8 KiB of trailing junk.
    let kernel_first = rng.range(0, 4) == 0;
    let first_page = 1 + rng.range(0, 4);
    let (a, b) = if kernel_first {
        (&kernel_bytes, &boot_bytes)
    } else {
        (&boot_bytes, &kernel_bytes)
    };
    let a_start = first_page * PAGE_SIZE;
    let a_end = a_start + a.len() as u64;
    let b_start = a_end.div_ceil(PAGE_SIZE) * PAGE_SIZE + rng.range(0, 3) * PAGE_SIZE;
    let b_end = b_start + b.len() as u64;
    let trailing = rng.range(0, 8193) as usize;
    let (boot_off, kernel_off) = if kernel_first {
        (b_start, a_start)
    } else {
        (a_start, b_start)
    };

    let system_time = random_filetime(&mut rng);
    let highest =
        f.pm.runs
            .last()
            .map_or(0, |&(base, count)| base + count - 1);
    let mut header = vec![0u8; PAGE_SIZE as usize];
    match spec.signature {
        HiberSignature::Hibr | HiberSignature::Wiped => {
            put_bytes(&mut header, HIBER_SIGNATURE_OFFSET, b"HIBR")
        }
        HiberSignature::Wake => put_bytes(&mut header, HIBER_SIGNATURE_OFFSET, b"WAKE"),
    }
    // Harmless fields no reader uses: ImageType, CheckSum, InterruptTime, FeatureFlags.
    put_u32(&mut header, HIBER_IMAGE_TYPE_OFFSET, rng.range(0, 3) as u32);
    put_u32(&mut header, HIBER_CHECKSUM_OFFSET, rng.next_u64() as u32);
    put_u32(&mut header, HIBER_LENGTH_SELF_OFFSET, layout.length_self);
    put_u32(&mut header, HIBER_PAGE_SIZE_OFFSET, PAGE_SIZE as u32);
    put_u64(&mut header, HIBER_SYSTEM_TIME_OFFSET, system_time);
    put_u64(
        &mut header,
        HIBER_INTERRUPT_TIME_OFFSET,
        rng.range(1 << 30, 1 << 44),
    );
    put_u64(
        &mut header,
        HIBER_FEATURE_FLAGS_OFFSET,
        rng.next_u64() & 0xFF,
    );
    put_u64(
        &mut header,
        HIBER_NUM_PAGES_FOR_LOADER_OFFSET,
        boot.len() as u64,
    );
    put_u64(
        &mut header,
        layout.first_boot_restore_page,
        boot_off / PAGE_SIZE,
    );
    put_u64(
        &mut header,
        layout.first_kernel_restore_page,
        kernel_off / PAGE_SIZE,
    );
    put_u64(
        &mut header,
        layout.kernel_pages_processed,
        kernel.len() as u64,
    );
    put_u64(&mut header, layout.highest_physical_page, highest);
    let hiberboot = spec.variant == HiberVariant::FastStartup && layout.hiberboot.is_some();
    if let (true, Some(off)) = (hiberboot, layout.hiberboot) {
        header[off] = 1;
    }
    if spec.signature == HiberSignature::Wiped {
        header.fill(0);
    }

    let data_end = b_end;
    let file_len = (data_end + trailing as u64).max(MIN_FILE_LEN);
    let mut body = header;
    body.extend(junk(&mut rng, (a_start - PAGE_SIZE) as usize));
    body.extend_from_slice(a);
    body.extend(junk(&mut rng, (b_start - a_end) as usize));
    body.extend_from_slice(b);
    body.extend(junk(&mut rng, trailing));
    write_sparse(path, &body, std::iter::empty(), file_len)?;

    let rebase = |sets: Vec<HiberSetTruth>, base: u64| {
        sets.into_iter().map(move |mut s| {
            s.offset += base;
            s
        })
    };
    let mut sets: Vec<HiberSetTruth> = rebase(boot_sets, boot_off)
        .chain(rebase(kernel_sets, kernel_off))
        .collect();
    sets.sort_by_key(|s| s.offset);
    Ok(HiberTruth {
        version: spec.version,
        length_self: layout.length_self,
        codec: spec.codec,
        signature: spec.signature,
        variant: spec.variant,
        system_time,
        highest_physical_page: highest,
        hiberboot,
        pfns,
        boot_pages: boot.len() as u64,
        kernel_pages: kernel.len() as u64,
        boot_set_offset: boot_off,
        kernel_set_offset: kernel_off,
        sets,
        data_end,
        file_len,
    })
}
