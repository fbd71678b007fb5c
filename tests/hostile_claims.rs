//! Claims about size are checked against the file (issue 27, F9): a run of 2^36 pages in a
//! 16 MiB dump, an ELF segment whose p_filesz is 2^44, a layout range of 2^44 bytes and a
//! bitmap whose every bit is set are trimmed to the pages the file holds, with one warning,
//! so `scan` costs time in proportion to the file, not to the claim.

mod common;
use common::etwdump;
use etwdump::dump::{DumpFile, OpenOptions};
use etwdump_forge::{forge, BitmapSig, Config, ImageKind, Layout};
use std::path::Path;
use std::time::{Duration, Instant};

const PAGE: u64 = 4096;

fn opts() -> OpenOptions {
    OpenOptions {
        allow_truncated: true,
    }
}

/// The one warning that says a pass covers only what the file holds.
fn one_trim_warning(d: &DumpFile) {
    let n = d
        .warnings()
        .iter()
        .filter(|w| w.message.contains("cover only the pages the file holds"))
        .count();
    assert_eq!(n, 1, "{:?}", d.warnings());
}

/// Pages a pass over all memory reads.
fn pass_pages(d: &DumpFile) -> u64 {
    d.physical_runs().iter().map(|r| r.1).sum()
}

/// x64 DUMP_HEADER64: PhysicalMemoryBlock at 0x88 (NumberOfRuns u32, NumberOfPages u64 at
/// 0x90, runs of (BasePage, PageCount) u64 pairs from 0x98).
fn patch_last_run(bytes: &mut [u8], count: u64) -> (u64, u64) {
    let nruns = u32::from_le_bytes(bytes[0x88..0x8C].try_into().unwrap()) as usize;
    assert!(nruns >= 1);
    let at = 0x98 + (nruns - 1) * 16;
    let base = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let old = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap());
    bytes[at + 8..at + 16].copy_from_slice(&count.to_le_bytes());
    (base, old)
}

fn scan_time(path: &Path) -> (Duration, String) {
    let t = Instant::now();
    let out = etwdump(&["scan", path.to_str().unwrap(), "--threads", "1"]);
    let el = t.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (el, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_run_of_2_36_pages_costs_what_the_file_holds() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge(&Config::x64());
    let bytes = f.to_bytes();
    let plain = dir.path().join("plain.dmp");
    std::fs::write(&plain, &bytes).unwrap();
    let mut patched = bytes.clone();
    let (base, old) = patch_last_run(&mut patched, 1 << 36);
    assert!(base + (1 << 36) <= 1 << 52);
    let claim = dir.path().join("claim.dmp");
    std::fs::write(&claim, &patched).unwrap();

    // The pass covers exactly the pages both files hold.
    let a = DumpFile::open(&plain, opts()).unwrap();
    let b = DumpFile::open(&claim, opts()).unwrap();
    let held = pass_pages(&a);
    assert_eq!(held, a.stored_pages());
    assert_eq!(pass_pages(&b), held);
    assert_eq!(b.stored_pages(), a.stored_pages() - old + (1 << 36));
    let w: Vec<_> = b
        .warnings()
        .iter()
        .filter(|w| w.kind == etwdump::dump::TRUNCATION)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", b.warnings());
    assert!(
        w[0].message.contains("cover only the pages the file holds"),
        "{}",
        w[0]
    );

    // And `scan` takes about as long (2x, with a 2 s floor for a busy machine).
    let (t_plain, _) = scan_time(&plain);
    let (t_claim, err) = scan_time(&claim);
    eprintln!("scan: plain {t_plain:?}, 2^36-page claim {t_claim:?}");
    assert!(
        t_claim <= 2 * t_plain + Duration::from_secs(2),
        "plain {t_plain:?}, claim {t_claim:?}"
    );
    assert_eq!(
        err.matches("warning: TRUNCATED DUMP").count(),
        1,
        "one warning: {err}"
    );
    assert!(err.contains("cover only the pages the file holds"), "{err}");
}

#[test]
fn a_bitmap_with_every_bit_set_is_trimmed_to_the_file() {
    let mut c = Config::x64();
    c.layout = Layout::Bitmap {
        sig: BitmapSig::Sdmp,
        dump_type: 5,
    };
    let mut bytes = forge(&c).to_bytes();
    let d = DumpFile::from_bytes(bytes.clone(), opts()).unwrap();
    let held = pass_pages(&d);
    assert!(d.warnings().is_empty(), "{:?}", d.warnings());
    // The summary header follows the 0x2000-byte DUMP_HEADER64: bitmap at 0x2038, Pages u64
    // at 0x2030; set every bit.
    let bits = u64::from_le_bytes(bytes[0x2030..0x2038].try_into().unwrap());
    let n = bits.div_ceil(8) as usize;
    bytes[0x2038..0x2038 + n].fill(0xFF);
    let len = bytes.len() as u64;
    let d = DumpFile::from_bytes(bytes, opts()).unwrap();
    let first = u64::from_le_bytes(d.whole_file()[0x2020..0x2028].try_into().unwrap());
    assert_eq!(d.stored_pages(), bits);
    assert_eq!(pass_pages(&d), (len - first) / PAGE);
    assert!(pass_pages(&d) >= held);
    one_trim_warning(&d);
}

#[test]
fn an_elf_segment_of_2_44_bytes_is_trimmed_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge(&Config::x64());
    let files = f
        .write_image(&dir.path().join("m"), ImageKind::Elf)
        .unwrap();
    let path = &files[0];
    let plain = DumpFile::open(path, opts()).unwrap();
    let held = pass_pages(&plain);
    assert_eq!(held, plain.stored_pages());
    let mut b = std::fs::read(path).unwrap();
    // ELF64: e_phoff at 0x20, e_phentsize at 0x36, e_phnum at 0x38; the last PT_LOAD's
    // p_filesz (0x20) and p_memsz (0x28) claim 2^44 bytes.
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let size = u16::from_le_bytes(b[0x36..0x38].try_into().unwrap()) as usize;
    let num = u16::from_le_bytes(b[0x38..0x3A].try_into().unwrap()) as usize;
    let last = (0..num)
        .map(|i| phoff + i * size)
        .rfind(|&p| u32::from_le_bytes(b[p..p + 4].try_into().unwrap()) == 1)
        .unwrap();
    let old = u64::from_le_bytes(b[last + 0x20..last + 0x28].try_into().unwrap());
    for at in [last + 0x20, last + 0x28] {
        b[at..at + 8].copy_from_slice(&(1u64 << 44).to_le_bytes());
    }
    let claim = dir.path().join("claim.elf");
    std::fs::write(&claim, &b).unwrap();
    let d = DumpFile::open(&claim, opts()).unwrap();
    assert_eq!(d.stored_pages(), held - old / PAGE + (1 << 32));
    assert_eq!(pass_pages(&d), held);
    one_trim_warning(&d);
}

#[test]
fn a_layout_range_of_2_44_bytes_is_trimmed_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = forge(&Config::x64());
    let files = f
        .write_image(&dir.path().join("m"), ImageKind::Raw)
        .unwrap();
    let raw = &files[0];
    let len = std::fs::metadata(raw).unwrap().len();
    let layout = etwdump::dump::layout::Layout::parse(
        format!(
            r#"{{"etwdump_layout": 1, "ranges": [{{"start": 0, "size": {}, "file_offset": 0}}]}}"#,
            1u64 << 44
        )
        .as_bytes(),
    )
    .unwrap();
    let d = DumpFile::open_layout(raw, &layout, opts()).unwrap();
    assert_eq!(d.stored_pages(), 1 << 32);
    assert_eq!(pass_pages(&d), len / PAGE);
    one_trim_warning(&d);
}
