//! Hibernation files (issue 32): the reader (`etwdump::dump::hiberfil`) on files built here
//! from a forged machine's memory, and on every way such a file can be damaged.
//!
//! The builder below is this test's own, small reading of the format (one layout, sets in
//! PFN order), meant for the hostile cases; the forge's writer (`Forged::write_hiberfil`,
//! written from the public descriptions, not from the reader) varies everything the
//! descriptions leave open and is checked by third-party readers (tests/interop).

mod common;

use etwdump::dump::hiberfil::Hiberfil;
use etwdump::dump::{DumpFile, OpenOptions, PageLookup};
use etwdump::kernel::discover;
use etwdump::warning::WarningKind;
use etwdump_forge::{forge, xpress, Config, Forged, ImageKind};

const PAGE: usize = 4096;

/// Stored pages: (PFN, bytes).
type Mem = Vec<(u64, Vec<u8>)>;

/// How the builder stores the sets.
#[derive(Clone, Copy)]
enum Codec {
    Lz77,
    Huffman,
}

/// One compression set: its descriptors (first PFN, pages) and its pages' bytes.
struct SetSpec {
    descs: Vec<(u64, u64)>,
    data: Vec<u8>,
}

/// The stored memory of a forged machine: (PFN, bytes) of every page of its raw image's
/// ranges.
fn memory(f: &Forged, dir: &std::path::Path) -> Vec<(u64, Vec<u8>)> {
    let raw = f
        .write_image(&dir.join("truth"), ImageKind::Raw)
        .unwrap()
        .remove(0);
    let bytes = std::fs::read(&raw).unwrap();
    let mut out = Vec::new();
    for r in f.image_ranges(ImageKind::Raw) {
        for p in 0..r.size / PAGE as u64 {
            let o = (r.file_offset + p * PAGE as u64) as usize;
            let page = bytes.get(o..o + PAGE).map_or(vec![0; PAGE], |b| b.to_vec());
            out.push((r.start / PAGE as u64 + p, page));
        }
    }
    out
}

/// Group pages (in PFN order) into sets of at most `per_set` pages, descriptors covering
/// contiguous runs of at most 16.
fn sets_of(pages: &[(u64, Vec<u8>)], per_set: usize) -> Vec<SetSpec> {
    let mut out = Vec::new();
    for chunk in pages.chunks(per_set) {
        let mut descs: Vec<(u64, u64)> = Vec::new();
        let mut data = Vec::new();
        for (pfn, page) in chunk {
            match descs.last_mut() {
                Some((f, n)) if *f + *n == *pfn && *n < 16 => *n += 1,
                _ => descs.push((*pfn, 1)),
            }
            data.extend_from_slice(page);
        }
        out.push(SetSpec { descs, data });
    }
    out
}

/// One compression set's bytes: header, descriptors, data (compressed unless that does not
/// help, or `stored`).
fn set_bytes(s: &SetSpec, codec: Codec, method_bits: Option<u32>) -> Vec<u8> {
    set_bytes_w(s, codec, method_bits, 8)
}

/// [`set_bytes`] with `word`-byte page descriptors (8 on x64, 4 on x86).
fn set_bytes_w(s: &SetSpec, codec: Codec, method_bits: Option<u32>, word: usize) -> Vec<u8> {
    let packed = match codec {
        Codec::Lz77 => xpress::compress_lz77(&s.data),
        Codec::Huffman => xpress::compress_huffman(&s.data),
    };
    let (data, method) = if packed.len() >= s.data.len() {
        (s.data.clone(), 0)
    } else {
        (
            packed,
            method_bits.unwrap_or(match codec {
                Codec::Lz77 => 0,
                Codec::Huffman => 3,
            }),
        )
    };
    let header = s.descs.len() as u32 | (data.len() as u32) << 8 | method << 30;
    let mut out = header.to_le_bytes().to_vec();
    for &(pfn, n) in &s.descs {
        out.extend_from_slice(&((pfn << 4) | (n - 1)).to_le_bytes()[..word]);
    }
    out.extend_from_slice(&data);
    out
}

/// A Windows 10 1703+ (LengthSelf 0x3E0) hibernation file: header page, boot set from page 1,
/// kernel set from the next page boundary.
struct Built {
    bytes: Vec<u8>,
    boot_offset: usize,
    kernel_offset: usize,
    /// File offset of each set's header, in file order.
    set_offsets: Vec<usize>,
}

fn build(sets: &[SetSpec], boot_sets: usize, codec: Codec, fast_startup: bool) -> Built {
    build_as(sets, boot_sets, codec, fast_startup, &X64_1809)
}

/// The header fields a builder writes: (LengthSelf, PageSize, SystemTime, NumPagesForLoader,
/// FirstBootRestorePage, FirstKernelRestorePage, KernelPagesProcessed, Hiberboot, word).
struct Hdr {
    length_self: u32,
    page_size: usize,
    time: usize,
    loader: usize,
    boot: usize,
    kernel: usize,
    kpp: usize,
    hiberboot: Option<usize>,
    word: usize,
}

/// Windows 10 1809 … 22H2 x64 (PO_MEMORY_IMAGE of the 19041 PDB).
const X64_1809: Hdr = Hdr {
    length_self: 0x3E0,
    page_size: 0x18,
    time: 0x20,
    loader: 0x58,
    boot: 0x68,
    kernel: 0x70,
    kpp: 0x230,
    hiberboot: Some(0x364),
    word: 8,
};

fn build_as(
    sets: &[SetSpec],
    boot_sets: usize,
    codec: Codec,
    fast_startup: bool,
    h: &Hdr,
) -> Built {
    let pages = |ss: &[SetSpec]| -> u64 { ss.iter().flat_map(|s| &s.descs).map(|d| d.1).sum() };
    let mut b = vec![0u8; PAGE];
    b[0..4].copy_from_slice(b"HIBR");
    b[0xC..0x10].copy_from_slice(&h.length_self.to_le_bytes());
    b[h.page_size..h.page_size + 4].copy_from_slice(&0x1000u32.to_le_bytes());
    b[h.time..h.time + 8].copy_from_slice(&0x01DC_1234_5678_9ABCu64.to_le_bytes());
    b[h.loader..h.loader + 8].copy_from_slice(&pages(&sets[..boot_sets]).to_le_bytes());
    b[h.kpp..h.kpp + 8].copy_from_slice(&pages(&sets[boot_sets..]).to_le_bytes());
    if let Some(o) = h.hiberboot {
        b[o] = u8::from(fast_startup);
    }
    let mut set_offsets = Vec::new();
    let boot_offset = b.len();
    for s in &sets[..boot_sets] {
        set_offsets.push(b.len());
        b.extend(set_bytes_w(s, codec, None, h.word));
    }
    b.resize(b.len().div_ceil(PAGE) * PAGE, 0);
    let kernel_offset = b.len();
    for s in &sets[boot_sets..] {
        set_offsets.push(b.len());
        b.extend(set_bytes_w(s, codec, None, h.word));
    }
    b.extend_from_slice(&[0u8; 64]);
    let w = h.word;
    b[h.boot..h.boot + w].copy_from_slice(&((boot_offset / PAGE) as u64).to_le_bytes()[..w]);
    b[h.kernel..h.kernel + w].copy_from_slice(&((kernel_offset / PAGE) as u64).to_le_bytes()[..w]);
    Built {
        bytes: b,
        boot_offset,
        kernel_offset,
        set_offsets,
    }
}

fn hib(d: &DumpFile) -> &Hiberfil {
    d.container::<Hiberfil>()
        .expect("opened as a hibernation file")
}

/// Every page of `mem` reads back exactly from the file.
fn pages_equal(d: &DumpFile, mem: &[(u64, Vec<u8>)]) {
    for (pfn, want) in mem {
        match d.page(etwdump::addr::Pfn::new(*pfn)) {
            PageLookup::Present(p) => assert!(p[..] == want[..], "PFN {pfn:#x} differs"),
            other => panic!("PFN {pfn:#x}: {other:?}"),
        }
    }
}

#[test]
fn a_hibernation_file_gives_the_crash_dumps_listings() {
    let (f, dir, opts, want) = common::forged_with_listings("x64-19041", 3);
    assert!(want[0].as_array().unwrap().len() > 3);
    let mem = memory(&f, dir.path());
    for (codec, per_set) in [(Codec::Lz77, 16), (Codec::Huffman, 7)] {
        let sets = sets_of(&mem, per_set);
        let built = build(&sets, sets.len() / 10, codec, false);
        let path = dir.path().join("hiberfil.sys");
        std::fs::write(&path, &built.bytes).unwrap();
        let d = discover::open(&path, OpenOptions::default()).unwrap();
        assert_eq!(d.format(), "hibernation file");
        assert!(d.warnings().is_empty(), "{:?}", d.warnings());
        let h = hib(&d).info();
        assert_eq!(h.signature, "HIBR");
        assert_eq!(h.length_self, Some(0x3E0));
        assert_eq!(h.system_time, Some(0x01DC_1234_5678_9ABC));
        assert_eq!(h.fast_startup, Some(false));
        assert_eq!(h.restore_sets.len(), 2);
        assert_eq!(h.restore_sets[0].file_offset, built.boot_offset as u64);
        assert_eq!(h.restore_sets[1].file_offset, built.kernel_offset as u64);
        assert_eq!(
            h.restore_sets[0].compression_sets + h.restore_sets[1].compression_sets,
            sets.len() as u64
        );
        assert_eq!(d.stored_pages(), mem.len() as u64);
        assert_eq!(d.machine.dtb, f.page_table_root());
        pages_equal(&d, &mem);
        let got = common::etw_listings(&d, &opts);
        for (i, name) in ["sessions", "buffers", "cswitch", "events"]
            .iter()
            .enumerate()
        {
            assert_eq!(got[i], want[i], "{name} differ");
        }
        assert!(d.read_warnings().is_empty());
    }
}

/// A small machine's memory and its hibernation file (LZ77, 16 pages per set, a tenth of the
/// sets in the boot set).
fn small() -> (Forged, Mem, Vec<SetSpec>, tempfile::TempDir) {
    let c = Config::from_fixture(&common::fixture("x64-19041")).with_variation(5);
    let f = forge(&c);
    let dir = tempfile::tempdir().unwrap();
    let mem = memory(&f, dir.path());
    let sets = sets_of(&mem, 16);
    (f, mem, sets, dir)
}

fn open_bytes(b: Vec<u8>) -> Result<DumpFile, etwdump::dump::DumpError> {
    DumpFile::from_bytes(b, OpenOptions::default())
}

fn messages(w: &[etwdump::warning::Warning]) -> String {
    w.iter()
        .map(|w| w.message.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn header_variants_signatures_and_fast_startup() {
    let (_f, mem, sets, _dir) = small();
    let boot = sets.len() / 4;
    for sig in [&b"WAKE"[..], b"RSTR", b"hibr"] {
        let mut b = build(&sets, boot, Codec::Lz77, true).bytes;
        b[..4].copy_from_slice(sig);
        let d = open_bytes(b).unwrap();
        assert_eq!(hib(&d).info().signature, String::from_utf8_lossy(sig));
        assert_eq!(hib(&d).info().fast_startup, Some(true));
        assert_eq!(d.stored_pages(), mem.len() as u64);
    }
    // PageSize other than 4096: refused, naming the field.
    let mut b = build(&sets, boot, Codec::Lz77, false).bytes;
    b[0x18..0x1C].copy_from_slice(&0x2000u32.to_le_bytes());
    let e = open_bytes(b).unwrap_err().to_string();
    assert!(e.contains("PageSize (offset 0x18) is 0x2000"), "{e}");
    // Another known layout (Windows 8: restore pages at 0x60/0x68, KPP at 0x1C8).
    let built = build(&sets, boot, Codec::Lz77, false);
    let mut b = built.bytes.clone();
    let kpp = b[0x230..0x238].to_vec();
    let (bp, kp) = (b[0x68..0x70].to_vec(), b[0x70..0x78].to_vec());
    b[0x58..0x360].fill(0);
    b[0x58..0x60].copy_from_slice(&built_pages(&sets[..boot]).to_le_bytes());
    b[0xC..0x10].copy_from_slice(&0x360u32.to_le_bytes());
    b[0x60..0x68].copy_from_slice(&bp);
    b[0x68..0x70].copy_from_slice(&kp);
    b[0x1C8..0x1D0].copy_from_slice(&kpp);
    b[0x2FC] = 1;
    let d = open_bytes(b).unwrap();
    assert!(d.warnings().is_empty(), "{}", messages(d.warnings()));
    let h = hib(&d).info();
    assert_eq!(h.windows, Some("Windows 8 / 8.1 (9200/9600)"));
    assert_eq!(h.fast_startup, Some(true));
    assert_eq!(h.restore_sets[1].file_offset, built.kernel_offset as u64);
    pages_equal(&d, &mem);
}

fn built_pages(ss: &[SetSpec]) -> u64 {
    ss.iter().flat_map(|s| &s.descs).map(|d| d.1).sum()
}

#[test]
fn an_unknown_layout_is_read_where_the_evidence_points_and_said_unconfirmed() {
    let (_f, mem, sets, _dir) = small();
    let mut b = build(&sets, 3, Codec::Huffman, false).bytes;
    b[0xC..0x10].copy_from_slice(&0x520u32.to_le_bytes());
    let d = open_bytes(b.clone()).unwrap();
    let w = d.warnings();
    assert_eq!(w.len(), 1, "{}", messages(w));
    assert_eq!(w[0].kind, WarningKind::Unconfirmed);
    assert!(w[0].message.contains("LengthSelf 0x520") && w[0].message.contains("0x68/0x70"));
    let h = hib(&d).info();
    assert_eq!(h.windows, None);
    assert_eq!(h.fast_startup, None);
    assert_eq!(h.restore_sets[1].pages_declared, None);
    assert_eq!(d.stored_pages(), mem.len() as u64);
    pages_equal(&d, &mem);
    // Neither offset pair points at compression sets: refused with the reason.
    b[0x68..0x78].fill(0xEE);
    let e = open_bytes(b).unwrap_err().to_string();
    assert!(
        e.contains("unknown x64 header layout (LengthSelf 0x520)"),
        "{e}"
    );
}

#[test]
fn a_damaged_set_is_one_warning_and_the_rest_is_read() {
    let (_f, mem, sets, _dir) = small();
    let built = build(&sets, 2, Codec::Lz77, false);
    // Find a compressed set in the kernel set and spoil its data.
    let k = (2..sets.len())
        .find(|&i| {
            let o = built.set_offsets[i];
            let h = u32::from_le_bytes(built.bytes[o..o + 4].try_into().unwrap());
            let size = (h >> 8) & 0x3F_FFFF;
            size != built_pages(&sets[i..i + 1]) as u32 * 4096 && size > 64
        })
        .unwrap();
    let o = built.set_offsets[k];
    let mut b = built.bytes.clone();
    let n = sets[k].descs.len();
    let data = o + 4 + 8 * n;
    b[data..data + 24].fill(0xFF);
    // Through the CLI: `scan` reads every page; the damaged set is one DAMAGED BLOCK line
    // after the output, naming its offset, and the scan completes.
    let path = _dir.path().join("damaged.sys");
    std::fs::write(&path, &b).unwrap();
    let out = common::etwdump(&["scan", path.to_str().unwrap()]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("DAMAGED BLOCK"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains(&format!("data starts at file offset {data:#x}")),
        "{}",
        lines[0]
    );
    let d = open_bytes(b).unwrap();
    assert!(d.warnings().is_empty(), "{}", messages(d.warnings()));
    let bad: Vec<u64> = sets[k].descs.iter().flat_map(|&(p, n)| p..p + n).collect();
    for (pfn, want) in &mem {
        match d.page(etwdump::addr::Pfn::new(*pfn)) {
            PageLookup::Damaged { file_offset } => {
                assert!(bad.contains(pfn), "{pfn:#x}");
                assert_eq!(file_offset, data as u64);
            }
            PageLookup::Present(p) => {
                assert!(!bad.contains(pfn));
                assert!(p[..] == want[..]);
            }
            other => panic!("{pfn:#x}: {other:?}"),
        }
    }
    let w = d.read_warnings();
    assert_eq!(w.len(), 1, "{}", messages(&w));
    assert_eq!(w[0].kind, WarningKind::Decode);
    assert!(
        w[0].message
            .contains(&format!("data starts at file offset {data:#x}")),
        "{}",
        w[0].message
    );
}

#[test]
fn method_bits_are_confirmed_by_decoding() {
    let (_f, mem, sets, _dir) = small();
    // Every compressed set says Huffman (method 2) but holds Plain LZ77.
    let mut b = build(&sets[..0], 0, Codec::Lz77, false).bytes;
    b.truncate(PAGE);
    b.resize(PAGE, 0);
    b[0x58..0x60].copy_from_slice(&0u64.to_le_bytes());
    b[0x68..0x70].copy_from_slice(&1u64.to_le_bytes());
    b[0x70..0x78].copy_from_slice(&1u64.to_le_bytes());
    b[0x230..0x238].copy_from_slice(&built_pages(&sets).to_le_bytes());
    let mut compressed = 0;
    for s in &sets {
        let bytes = set_bytes(s, Codec::Lz77, Some(2));
        compressed += usize::from(bytes[3] >> 6 == 2);
        b.extend(bytes);
    }
    let d = open_bytes(b).unwrap();
    pages_equal(&d, &mem);
    // One note per set: the first MAX_READ_NOTES listed, the others counted in one summary.
    use etwdump::dump::hiberfil::MAX_READ_NOTES;
    assert!(compressed > MAX_READ_NOTES, "{compressed}");
    let w = d.read_warnings();
    assert_eq!(w.len(), MAX_READ_NOTES + 1);
    assert!(w[..MAX_READ_NOTES]
        .iter()
        .all(|w| w.kind == WarningKind::Anomaly
            && w.message
                .contains("names the LZ77+Huffman method but decodes exactly as Plain LZ77")));
    assert_eq!(w[MAX_READ_NOTES].kind, WarningKind::Decode);
    assert!(
        w[MAX_READ_NOTES].message.starts_with(&format!(
            "{} more compression sets",
            compressed - MAX_READ_NOTES
        )),
        "{}",
        w[MAX_READ_NOTES].message
    );
}

#[test]
fn a_cut_chain_keeps_what_it_read_and_says_where_it_ends() {
    let (_f, mem, sets, _dir) = small();
    let built = build(&sets, 2, Codec::Huffman, false);
    let cut = built.set_offsets[sets.len() / 2] + 10;
    let mut b = built.bytes.clone();
    b.truncate(cut);
    let d = open_bytes(b).unwrap();
    let w = d.warnings();
    assert_eq!(w.len(), 1, "{}", messages(w));
    assert_eq!(w[0].kind, WarningKind::Unreadable);
    let at = built.set_offsets[sets.len() / 2];
    assert!(
        w[0].message.contains(&format!(
            "ends after {} at file offset {at:#x}",
            built_pages(&sets[2..sets.len() / 2])
        )),
        "{}",
        w[0].message
    );
    let kept: u64 = built_pages(&sets[..sets.len() / 2]);
    assert_eq!(d.stored_pages(), kept);
    let mut present = 0;
    for (pfn, want) in &mem {
        if let PageLookup::Present(p) = d.page(etwdump::addr::Pfn::new(*pfn)) {
            assert!(p[..] == want[..]);
            present += 1;
        }
    }
    assert_eq!(present, kept);
}

#[test]
fn a_wiped_header_is_read_by_carving_the_sets() {
    let (f, mem, sets, dir) = small();
    let built = build(&sets, sets.len() / 3, Codec::Huffman, false);
    let mut b = built.bytes.clone();
    b[..PAGE].fill(0);
    let path = dir.path().join("wiped.sys");
    std::fs::write(&path, &b).unwrap();
    let d = discover::open(&path, OpenOptions::default()).unwrap();
    assert_eq!(d.format(), "hibernation file");
    let w = d.warnings();
    assert_eq!(w.len(), 1, "{}", messages(w));
    assert_eq!(w[0].kind, WarningKind::Inferred);
    assert!(w[0].message.contains("2 chains of compression sets"));
    let h = hib(&d).info();
    assert_eq!(h.signature, "wiped");
    assert_eq!(h.system_time, None);
    let offsets: Vec<u64> = h.restore_sets.iter().map(|s| s.file_offset).collect();
    assert_eq!(
        offsets,
        vec![built.boot_offset as u64, built.kernel_offset as u64]
    );
    pages_equal(&d, &mem);
    assert_eq!(d.machine.dtb, f.page_table_root());
    // A raw image whose first page is zero is still a raw image.
    let raw = f
        .write_image(&dir.path().join("r"), ImageKind::Raw)
        .unwrap()
        .remove(0);
    let d = discover::open(&raw, OpenOptions::default()).unwrap();
    assert_eq!(d.format(), "raw");
}

#[test]
fn pages_stored_twice_are_counted_and_one_copy_read() {
    let (_f, mem, mut sets, _dir) = small();
    // The first set's pages again at the end of the kernel set, with other bytes.
    let mut again = SetSpec {
        descs: sets[0].descs.clone(),
        data: sets[0].data.clone(),
    };
    again.data.iter_mut().for_each(|x| *x ^= 0x5A);
    let dup = built_pages(&sets[..1]);
    sets.push(again);
    let d = open_bytes(build(&sets, 1, Codec::Lz77, false).bytes).unwrap();
    let w = d.warnings();
    assert_eq!(w.len(), 1, "{}", messages(w));
    assert!(w[0]
        .message
        .starts_with(&format!("{dup} pages are stored more than once")));
    assert_eq!(hib(&d).info().duplicate_pages, dup);
    assert_eq!(d.stored_pages(), mem.len() as u64);
    // The boot set's copy (equal descriptors: the one read first) is read.
    pages_equal(&d, &mem);
}

/// An x86 (PAE) machine's hibernation file, x86 layout of 14393 (MemProcFS's table:
/// LengthSelf 0x328, 4-byte restore pages and descriptors): the crash dump's listings; with
/// its header wiped, the same pages.
#[test]
fn an_x86_hibernation_file_gives_the_crash_dumps_listings() {
    let (f, dir, opts, want) = common::forged_with_listings("x86-14393", 5);
    assert!(!want[0].as_array().unwrap().is_empty());
    let mem = memory(&f, dir.path());
    let sets = sets_of(&mem, 16);
    let h = Hdr {
        length_self: 0x328,
        page_size: 0x14,
        time: 0x18,
        loader: 0x48,
        boot: 0x50,
        kernel: 0x54,
        kpp: 0x200,
        hiberboot: None,
        word: 4,
    };
    let built = build_as(&sets, sets.len() / 5, Codec::Huffman, false, &h);
    let path = dir.path().join("hiberfil.sys");
    std::fs::write(&path, &built.bytes).unwrap();
    let d = discover::open(&path, OpenOptions::default()).unwrap();
    assert!(d.warnings().is_empty(), "{}", messages(d.warnings()));
    let info = hib(&d).info();
    assert!(info.x86);
    assert_eq!(info.windows, Some("Windows 10 1607 x86 (14393)"));
    assert_eq!(info.fast_startup, None);
    assert_eq!(info.system_time, Some(0x01DC_1234_5678_9ABC));
    assert_eq!(d.machine.dtb, f.page_table_root());
    pages_equal(&d, &mem);
    let got = common::etw_listings(&d, &opts);
    assert_eq!(got, want);
    let mut b = built.bytes.clone();
    b[..PAGE].fill(0);
    let d = open_bytes(b).unwrap();
    assert!(hib(&d).info().x86);
    assert_eq!(hib(&d).info().restore_sets.len(), 2);
    pages_equal(&d, &mem);
}

/// The forge's hibernation files (`Forged::write_hiberfil`, written from the public format
/// descriptions, not from this reader; checked by LeechCore and volatility3 in
/// tests/interop/hiber_check.py): every format version × codec × variant, a WAKE file and a
/// wiped one. etwdump reads exactly the header and sets the forge wrote, every stored page,
/// and gives the four ETW listings of the crash dump of the same pages.
#[test]
fn the_forges_hibernation_files_in_every_version_codec_and_variant() {
    use etwdump_forge::{HiberCodec, HiberSignature, HiberSpec, HiberVariant, HiberVersion};
    // The machine with user-mode provider registrations and processes: a Fast Startup file
    // leaves out pages only user space maps.
    let c = etwdump_forge::providers_config(&common::fixture("x64-19041"));
    let (f, dir, opts, want_full) = common::forged_config_with_listings(&c, "x64-19041");
    let full_dump = discover::open(&dir.path().join("m.dmp"), OpenOptions::default()).unwrap();
    let want_full_p = common::provider_listings(&full_dump, &opts);
    let fast_pfns = f.hiberfil_pfns(HiberVariant::FastStartup);
    let fast_dump = dir.path().join("fast.dmp");
    f.write_dump_of_pages(&fast_dump, &fast_pfns).unwrap();
    let fast_d = discover::open(&fast_dump, OpenOptions::default()).unwrap();
    let want_fast = common::etw_listings(&fast_d, &opts);
    let want_fast_p = common::provider_listings(&fast_d, &opts);
    assert!(fast_pfns.len() < f.hiberfil_pfns(HiberVariant::Full).len());
    assert!(want_full_p[0].as_array().unwrap().len() > 3);
    let mem = memory(&f, dir.path());
    let mut files = 0;
    let mut seed = 100;
    let mut specs = Vec::new();
    for version in HiberVersion::ALL {
        for codec in [HiberCodec::Lz77, HiberCodec::Huffman] {
            for variant in [HiberVariant::Full, HiberVariant::FastStartup] {
                seed += 1;
                specs.push(HiberSpec {
                    variant,
                    ..HiberSpec::new(version, codec, seed)
                });
            }
        }
    }
    for signature in [HiberSignature::Wake, HiberSignature::Wiped] {
        specs.push(HiberSpec {
            signature,
            ..HiberSpec::new(HiberVersion::Win11_22000, HiberCodec::Huffman, 77)
        });
    }
    for spec in &specs {
        let label = format!(
            "{} {} {} {}",
            spec.version.name(),
            spec.codec.name(),
            spec.variant.name(),
            spec.signature.name()
        );
        let path = dir.path().join("hiberfil.sys");
        let truth = f.write_hiberfil(&path, spec).unwrap();
        let d = discover::open(&path, OpenOptions::default())
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let info = hib(&d).info();
        let wiped = spec.signature == HiberSignature::Wiped;
        // The warnings: none, but the wiped header's one note.
        match wiped {
            false => assert!(
                d.warnings().is_empty(),
                "{label}: {}",
                messages(d.warnings())
            ),
            true => {
                assert_eq!(d.warnings().len(), 1, "{label}");
                assert_eq!(d.warnings()[0].kind, WarningKind::Inferred);
            }
        }
        if !wiped {
            assert_eq!(info.length_self, Some(truth.length_self), "{label}");
            assert_eq!(info.system_time, Some(truth.system_time), "{label}");
            assert_eq!(
                info.highest_physical_page,
                Some(truth.highest_physical_page),
                "{label}"
            );
            let hiberboot_known = spec.version.layout().hiberboot.is_some();
            assert_eq!(
                info.fast_startup,
                hiberboot_known.then_some(truth.hiberboot),
                "{label}"
            );
            assert_eq!(
                truth.hiberboot,
                hiberboot_known && spec.variant == HiberVariant::FastStartup
            );
            let sets: Vec<(&str, u64, Option<u64>)> = info
                .restore_sets
                .iter()
                .map(|s| (s.name, s.file_offset, s.pages_declared))
                .collect();
            assert_eq!(
                sets,
                vec![
                    ("boot", truth.boot_set_offset, Some(truth.boot_pages)),
                    ("kernel", truth.kernel_set_offset, Some(truth.kernel_pages)),
                ],
                "{label}"
            );
        }
        for s in &info.restore_sets {
            if let Some(d) = s.pages_declared {
                assert_eq!(s.pages_read, d, "{label}: {} set", s.name);
            }
        }
        let (stored, lz, huff) = truth.sets.iter().fold((0, 0, 0), |(s, l, h), t| {
            match (t.uncompressed, spec.codec) {
                (true, _) => (s + 1, l, h),
                (false, HiberCodec::Lz77) => (s, l + 1, h),
                (false, HiberCodec::Huffman) => (s, l, h + 1),
            }
        });
        assert_eq!(
            (info.sets_stored, info.sets_lz77, info.sets_huffman),
            (stored, lz, huff),
            "{label}: sets by codec"
        );
        // Every stored page, and no other.
        let runs = d.physical_runs();
        let pfns: Vec<u64> = runs.iter().flat_map(|&(p, n)| p..p + n).collect();
        assert_eq!(pfns, truth.pfns, "{label}: stored PFNs");
        let stored: std::collections::BTreeSet<u64> = truth.pfns.iter().copied().collect();
        let kept: Mem = mem
            .iter()
            .filter(|(p, _)| stored.contains(p))
            .cloned()
            .collect();
        assert_eq!(kept.len(), truth.pfns.len(), "{label}");
        pages_equal(&d, &kept);
        let got = common::etw_listings(&d, &opts);
        let want = match spec.variant {
            HiberVariant::Full => &want_full,
            HiberVariant::FastStartup => &want_fast,
        };
        for (i, name) in ["sessions", "buffers", "cswitch", "events"]
            .iter()
            .enumerate()
        {
            assert_eq!(got[i], want[i], "{label}: {name}");
        }
        let got_p = common::provider_listings(&d, &opts);
        let want_p = match spec.variant {
            HiberVariant::Full => &want_full_p,
            HiberVariant::FastStartup => &want_fast_p,
        };
        assert_eq!(got_p[0], want_p[0], "{label}: providers");
        assert_eq!(got_p[1], want_p[1], "{label}: check findings");
        assert!(d.read_warnings().is_empty(), "{label}");
        files += 1;
    }
    assert_eq!(files, 2 * 2 * HiberVersion::ALL.len() + 2);
    eprintln!(
        "{files} forge hibernation files: headers, sets, {} pages each and the crash dump's listings",
        mem.len()
    );
}

/// `extract` and `scan` through the CLI: the .etl files extracted from a hibernation file are
/// the bytes extracted from the crash dump of the same pages, and the scan finds the same
/// buffers, blocks, contexts and groups — in every format version × codec × variant.
#[test]
fn extract_and_scan_of_a_hibernation_file_equal_the_crash_dumps() {
    use etwdump_forge::{HiberCodec, HiberSpec, HiberVariant, HiberVersion};
    let c = etwdump_forge::providers_config(&common::fixture("x64-19041"));
    let (f, dir, _opts, _) = common::forged_config_with_listings(&c, "x64-19041");
    let pdb = common::pdb_of("x64-19041");
    let p = pdb.to_str().unwrap();
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let fast = dir.path().join("fast.dmp");
    f.write_dump_of_pages(&fast, &f.hiberfil_pfns(HiberVariant::FastStartup))
        .unwrap();
    let mut seed = 300;
    let mut files = 0;
    for (version, codec, variant) in HiberVersion::ALL.into_iter().flat_map(|v| {
        [HiberCodec::Lz77, HiberCodec::Huffman]
            .into_iter()
            .flat_map(move |c| {
                [HiberVariant::Full, HiberVariant::FastStartup]
                    .into_iter()
                    .map(move |x| (v, c, x))
            })
    }) {
        seed += 1;
        files += 1;
        let label = format!("{} {} {}", version.name(), codec.name(), variant.name());
        let hib = dir.path().join("hiberfil.sys");
        f.write_hiberfil(
            &hib,
            &HiberSpec {
                variant,
                ..HiberSpec::new(version, codec, seed)
            },
        )
        .unwrap();
        let dump = match variant {
            HiberVariant::Full => dir.path().join("m.dmp"),
            HiberVariant::FastStartup => fast.clone(),
        };
        let mut etl = Vec::new();
        for (src, out) in [(&dump, "from-dump"), (&hib, "from-hib")] {
            let o = dir.path().join(format!("{out}-{files}"));
            let r = common::etwdump(&["extract", &s(src), "--pdb", p, "-o", &s(&o)]);
            assert!(
                r.status.success(),
                "{label}: {}",
                String::from_utf8_lossy(&r.stderr)
            );
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&o)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "etl"))
                .map(|p| {
                    (
                        p.file_name().unwrap().to_string_lossy().into_owned(),
                        std::fs::read(&p).unwrap(),
                    )
                })
                .collect();
            files.sort();
            etl.push(files);
        }
        assert!(etl[0].len() >= 3, "{label}: {} .etl files", etl[0].len());
        assert_eq!(etl[0], etl[1], "{label}: extracted .etl files");
        let (from_dump, _) =
            common::listing_json(&["scan", &s(&dump), "--pdb", p, "--format", "json"]);
        let (from_hib, _) =
            common::listing_json(&["scan", &s(&hib), "--pdb", p, "--format", "json"]);
        assert!(!from_dump.is_empty());
        assert_eq!(from_hib, from_dump, "{label}: scan");
        eprintln!(
            "{label}: {} .etl files, {} scan rows equal",
            etl[0].len(),
            from_dump.len()
        );
    }
    assert_eq!(files, 4 * HiberVersion::ALL.len());
}

/// Sets whose descriptors interleave PFNs (set 0 holds the even pages of a stretch, set 1 the
/// odd ones): the pages read back; `runs_in_storage_order` (what `scan` reads) gives the
/// descriptors set by set, in file order, and the same pages as `physical_runs`.
#[test]
fn interleaved_sets_read_back_and_scan_reads_them_set_by_set() {
    let (_f, mem, _sets, _dir) = small();
    let stretch: Vec<&(u64, Vec<u8>)> = mem.iter().take(64).collect();
    let mut sets = Vec::new();
    for part in 0..4u64 {
        let mut descs: Vec<(u64, u64)> = Vec::new();
        let mut data = Vec::new();
        for (pfn, page) in stretch
            .iter()
            .map(|(p, b)| (*p, b))
            .filter(|(p, _)| p % 4 == part)
        {
            if descs.len() == 16 {
                sets.push(SetSpec { descs, data });
                descs = Vec::new();
                data = Vec::new();
            }
            descs.push((pfn, 1));
            data.extend_from_slice(page);
        }
        if !descs.is_empty() {
            sets.push(SetSpec { descs, data });
        }
    }
    let rest = sets_of(&mem[64..], 16);
    let n = sets.len();
    sets.extend(rest);
    let d = open_bytes(build(&sets, n, Codec::Huffman, false).bytes).unwrap();
    assert!(d.warnings().is_empty(), "{}", messages(d.warnings()));
    pages_equal(&d, &mem);
    let order = d.runs_in_storage_order();
    let want: Vec<u64> = sets
        .iter()
        .flat_map(|s| s.descs.iter().flat_map(|&(p, k)| p..p + k))
        .collect();
    let got: Vec<u64> = order.iter().flat_map(|&(p, k)| p..p + k).collect();
    assert_eq!(got, want, "set by set, in file order");
    let mut sorted = got.clone();
    sorted.sort_unstable();
    let by_pfn: Vec<u64> = d
        .physical_runs()
        .iter()
        .flat_map(|&(p, k)| p..p + k)
        .collect();
    assert_eq!(sorted, by_pfn);
}

/// A wiped file followed by thousands of page boundaries that look like chains of sets but do
/// not decode: the search for chains stops at its bound with a warning, quickly, and the real
/// chains are read.
#[test]
fn carving_a_wiped_file_is_bounded_on_lookalike_pages() {
    let (_f, mem, sets, _dir) = small();
    let mut b = build(&sets, sets.len() / 3, Codec::Lz77, false).bytes;
    b[..PAGE].fill(0);
    b.resize(b.len().div_ceil(PAGE) * PAGE, 0);
    for i in 0..5000u64 {
        let mut page = vec![0u8; PAGE];
        let mut o = 0;
        for k in 0..3u64 {
            let header: u32 = 1 | (64 << 8);
            page[o..o + 4].copy_from_slice(&header.to_le_bytes());
            let d = ((0x10_0000 + i * 4 + k) << 4).to_le_bytes();
            page[o + 4..o + 12].copy_from_slice(&d);
            page[o + 12..o + 76].fill(0xFF);
            o += 76;
        }
        b.extend_from_slice(&page);
    }
    let t = std::time::Instant::now();
    let d = open_bytes(b).unwrap();
    let took = t.elapsed();
    let w = d.warnings();
    assert!(
        w.iter().any(|w| w.kind == WarningKind::Bound
            && w.message.contains("stopped after 4096 trial decodes")),
        "{}",
        messages(w)
    );
    pages_equal(&d, &mem);
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
}

/// A kernel restore set of more page descriptors than the index holds (2^23, 12 bytes each):
/// the index stops at its bound with one warning, the pages of the descriptors indexed are
/// there and the rest are not in the image; the chain is not collected in memory first.
#[test]
fn the_descriptor_index_stops_at_its_bound() {
    use etwdump::dump::hiberfil::MAX_DESCRIPTORS;
    let per_set = 255usize;
    let sets_needed = MAX_DESCRIPTORS / per_set + 2;
    let mut b = vec![0u8; PAGE];
    b[0..4].copy_from_slice(b"HIBR");
    b[0xC..0x10].copy_from_slice(&0x3E0u32.to_le_bytes());
    b[0x18..0x1C].copy_from_slice(&0x1000u32.to_le_bytes());
    b[0x58..0x60].copy_from_slice(&0u64.to_le_bytes());
    b[0x68..0x70].copy_from_slice(&1u64.to_le_bytes());
    b[0x70..0x78].copy_from_slice(&1u64.to_le_bytes());
    let total = (sets_needed * per_set) as u64;
    b[0x230..0x238].copy_from_slice(&total.to_le_bytes());
    b.reserve(sets_needed * (4 + 8 * per_set + 1));
    let mut pfn = 0u64;
    for _ in 0..sets_needed {
        b.extend_from_slice(&(per_set as u32 | 1 << 8).to_le_bytes());
        for _ in 0..per_set {
            b.extend_from_slice(&(pfn << 4).to_le_bytes());
            pfn += 2;
        }
        b.push(0);
    }
    let d = open_bytes(b).unwrap();
    let w: Vec<_> = d
        .warnings()
        .iter()
        .filter(|w| w.kind == WarningKind::Bound)
        .collect();
    assert_eq!(w.len(), 1, "{}", messages(d.warnings()));
    assert!(w[0]
        .message
        .contains("the index stopped at 8388608 page descriptors"));
    let indexed = (MAX_DESCRIPTORS / per_set * per_set) as u64;
    assert_eq!(d.stored_pages(), indexed);
    assert!(matches!(
        d.page(etwdump::addr::Pfn::new((indexed - 1) * 2)),
        PageLookup::Damaged { .. }
    ));
    assert_eq!(
        d.page(etwdump::addr::Pfn::new(indexed * 2)),
        PageLookup::NotInDump
    );
}
