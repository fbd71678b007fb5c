//! Bad input: every malformed dump gives one clear line naming the problem, exit code 2, and
//! no panic. Offsets are those of the reference (crash-dump-format.md §1.1-§1.3).

mod common;
use common::etwdump;
use etwdump::addr::{Pfn, VirtAddr};
use etwdump::dump::{DumpError, DumpFile, OpenOptions, PageLookup, RunList};
use etwdump::mem::{AddressSpace, MemError};
use etwdump_forge::{forge, BitmapSig, Config, Expect, Layout};

/// Write `bytes` to a temp file, run `etwdump info` on it and check the failure shape.
fn cli_fails(bytes: &[u8], phrase: &str) {
    cli_fails_with(bytes, phrase, &[]);
}

fn cli_fails_with(bytes: &[u8], phrase: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.dmp");
    std::fs::write(&p, bytes).unwrap();
    let mut args = vec!["info", p.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = etwdump(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(err.lines().count(), 1, "one line expected, got: {err}");
    assert!(err.starts_with("etwdump: error: "), "{err}");
    assert!(err.contains(phrase), "expected {phrase:?} in: {err}");
}

fn open(bytes: Vec<u8>) -> Result<DumpFile, DumpError> {
    DumpFile::from_bytes(bytes, OpenOptions::default())
}

fn x64_full() -> Vec<u8> {
    forge(&Config::x64()).to_bytes()
}

fn x64_bitmap() -> Vec<u8> {
    let mut c = Config::x64();
    c.layout = Layout::Bitmap {
        sig: BitmapSig::Sdmp,
        dump_type: 5,
    };
    forge(&c).to_bytes()
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn empty_file() {
    cli_fails(&[], "the file is empty");
    assert!(matches!(open(vec![]), Err(DumpError::Empty)));
}

#[test]
fn not_a_dump() {
    cli_fails(
        b"hello, this is a text file\n",
        "signature at offset 0 is \"hell\"",
    );
    // ELF magic: read as an ELF core (issue 14), too short for its header.
    cli_fails(
        b"\x7fELF",
        "corrupt ELF core image: only 4 bytes long: too short for an ELF header",
    );
    let mut mdmp = b"MDMP".to_vec();
    mdmp.resize(0x1000, 0);
    cli_fails(&mdmp, "user-mode minidump");
}

#[test]
fn wrong_signature() {
    let mut b = x64_full();
    b[4..8].copy_from_slice(b"DU65");
    cli_fails(&b, "ValidDump at offset 4 is \"DU65\"");
    let mut b = x64_full();
    b[0..4].copy_from_slice(b"PAGF");
    // At least 1 MiB without a signature: also tried as a raw image, which it is not.
    cli_fails(&b, "signature at offset 0 is \"PAGF\"");
    cli_fails(&b, "read as a raw physical memory image, Windows memory: no x64 or x86 kernel page tables found");
}

#[test]
fn truncated_header() {
    let b = x64_full();
    cli_fails(
        &b[..0x1234],
        "truncated header: the DUMP_HEADER64 header needs 0x2000 bytes but the file has 0x1234",
    );
    let b = forge(&Config::x86_pae()).to_bytes();
    cli_fails(&b[..0x800], "the DUMP_HEADER32 header needs 0x1000 bytes");
}

#[test]
fn truncated_body_full() {
    let f = forge(&Config::x64());
    let mut b = f.to_bytes();
    let cut = b.len() - 0x3000;
    b.truncate(cut);
    cli_fails_with(
        &b,
        &format!("but the file has only {cut:#x} bytes"),
        &["--strict"],
    );
    cli_reads_truncated(&b, &format!("the file has only {cut:#x} bytes"));
    assert!(
        matches!(open(b.clone()), Err(DumpError::Truncated { file_len, .. }) if file_len == cut as u64)
    );

    // With allow_truncated the dump opens, says so, and pages past the end read as missing.
    let d = DumpFile::from_bytes(
        b,
        OpenOptions {
            allow_truncated: true,
        },
    )
    .unwrap();
    assert!(d
        .warnings()
        .iter()
        .any(|w| w.kind == etwdump::dump::TRUNCATION && w.message.starts_with("truncated dump")));
    // The last stored page lies past the cut: BeyondEof at its declared file offset.
    let Some(runs) = d.container::<RunList>() else {
        panic!("full dump")
    };
    let last_run = runs.runs().iter().max_by_key(|r| r.file_page).unwrap();
    let last_pfn = Pfn::new(last_run.base.get() + last_run.count - 1);
    let want_off = 0x2000 + (runs.total_pages() - 1) * 0x1000;
    assert_eq!(
        d.page(last_pfn),
        PageLookup::BeyondEof {
            file_offset: want_off
        }
    );
    assert!(want_off >= cut as u64);
    // Every probe still reads as forged, or fails as "missing" (never wrong bytes).
    let space = AddressSpace::kernel(&d);
    for p in &f.probes {
        let mut buf = vec![0u8; p.len];
        match (&p.expect, space.read(VirtAddr::new(p.va), &mut buf)) {
            (Expect::Bytes(e), Ok(())) => assert_eq!(&buf, e, "probe {}", p.name),
            (_, Err(e)) => assert!(e.is_missing(), "{}: {e}", p.name),
            (Expect::Unreadable { .. }, Ok(())) => panic!("probe {} must be unreadable", p.name),
        }
    }
    // A physical read of the cut page says which address is missing.
    let e = space
        .read_phys(last_pfn.addr(), &mut [0u8; 16])
        .unwrap_err();
    assert_eq!(
        e,
        MemError::PhysMissing {
            pa: last_pfn.addr()
        }
    );
}

#[test]
fn truncated_body_bitmap() {
    let mut b = x64_bitmap();
    let cut = b.len() - 0x1000;
    b.truncate(cut);
    cli_fails_with(&b, "bitmap pages ends at file offset", &["--strict"]);
    cli_reads_truncated(&b, "bitmap pages ends at file offset");
}

/// By default a truncated dump is read (as WinDbg does): every command says so once, on one
/// prominent line, and still gives its output; `--allow-truncated` is still accepted.
fn cli_reads_truncated(bytes: &[u8], phrase: &str) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.dmp");
    std::fs::write(&p, bytes).unwrap();
    for args in [
        vec!["info", p.to_str().unwrap()],
        vec!["info", p.to_str().unwrap(), "--allow-truncated"],
        vec!["sessions", p.to_str().unwrap(), "--format", "json"],
    ] {
        let out = etwdump(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!out.stdout.is_empty(), "{args:?}");
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("TRUNCATED DUMP"))
            .collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(phrase), "{}", lines[0]);
    }
}

#[test]
fn run_list_larger_than_file() {
    let mut b = x64_full();
    // Last run's PageCount: 16 GiB of pages in a small file.
    let n = u32::from_le_bytes(b[0x88..0x8C].try_into().unwrap()) as usize;
    assert!(n >= 2);
    put_u64(&mut b, 0x98 + 16 * (n - 1) + 8, 0x40_0000);
    cli_fails_with(&b, "truncated dump: the page data of", &["--strict"]);
    cli_reads_truncated(&b, "truncated dump: the page data of");
}

#[test]
fn bitmap_larger_than_file() {
    let mut b = x64_bitmap();
    put_u64(&mut b, 0x2030, 1 << 40);
    cli_fails(&b, "the bitmap (0x10000000000 bits");
}

#[test]
fn absurd_run_counts() {
    let mut b = x64_full();
    put_u32(&mut b, 0x88, 0xFFFF);
    cli_fails(
        &b,
        "NumberOfRuns at file offset 0x88 is 65535, but at most 42 runs fit",
    );
    let mut b = x64_full();
    put_u32(&mut b, 0x88, 0x4547_4150); // "PAGE": no run list
    cli_fails(&b, "holds the \"PAGE\" fill");
    let mut b = x64_full();
    put_u64(&mut b, 0x98, u64::MAX - 4);
    cli_fails(&b, "beyond any physical address");
    let mut b = forge(&Config::x86_pae()).to_bytes();
    put_u32(&mut b, 0x64, 1000);
    cli_fails(&b, "at most 86 runs fit");
}

#[test]
fn overlapping_runs() {
    let mut b = x64_full();
    // Make run 1 start inside run 0.
    let base0 = u64::from_le_bytes(b[0x98..0xA0].try_into().unwrap());
    put_u64(&mut b, 0xA8, base0);
    cli_fails(&b, "runs overlap");
}

#[test]
fn unknown_and_unsupported_dump_types() {
    let mut b = x64_full();
    put_u32(&mut b, 0xF98, 0x77);
    cli_fails(&b, "unknown DumpType 0x77 at header offset 0xf98");
    let mut b = x64_full();
    put_u32(&mut b, 0xF98, 2);
    cli_fails(&b, "DumpType 2 (summary) is not supported yet");
    // RDMP dumps (8, 9, 0xA) are read (issue 14): without the RDMP header at 0x2000 they
    // are corrupt, and the message names the field.
    for t in [8, 9, 0xA] {
        let mut b = x64_full();
        put_u32(&mut b, 0xF98, t);
        cli_fails(&b, "corrupt RDMP image: Marker");
    }
    let mut b = forge(&Config::x86_nonpae()).to_bytes();
    put_u32(&mut b, 0xF88, 0x1234);
    cli_fails(&b, "unknown DumpType 0x1234 at header offset 0xf88");
}

#[test]
fn unsupported_architecture() {
    let mut b = x64_full();
    put_u32(&mut b, 0x30, 0x1C4); // ARMNT
    cli_fails(
        &b,
        "unsupported architecture: MachineImageType 0x1c4 in a DUMP_HEADER64 header",
    );
    let mut b = forge(&Config::x86_pae()).to_bytes();
    put_u32(&mut b, 0x20, 0x8664); // x64 machine in a 32-bit header
    cli_fails(&b, "MachineImageType 0x8664 in a DUMP_HEADER32 header");
}

#[test]
fn bad_bitmap_header() {
    let mut b = x64_bitmap();
    b[0x2000..0x2004].copy_from_slice(b"ZDMP");
    cli_fails(
        &b,
        "corrupt bitmap header at file offset 0x2000: signature is \"ZDMP\"",
    );
    let mut b = x64_bitmap();
    put_u64(&mut b, 0x2020, 0x2010); // FirstPage inside the bitmap
    cli_fails(&b, "FirstPage 0x2010 lies inside the bitmap");
}

#[test]
fn bad_triage_header() {
    // A triage dump built from a forge header: DumpType 4 with a block table past the end.
    let mut b = x64_full();
    b.truncate(0x3000);
    put_u32(&mut b, 0xF98, 4);
    put_u32(&mut b, 0x2004, 0x2100); // SizeOfDump
    put_u32(&mut b, 0x2078, 0x2100); // DataBlocksOffset
    put_u32(&mut b, 0x207C, 0x1000_0000); // DataBlocksCount
    cli_fails(&b, "corrupt triage dump: DataBlocksCount: 268435456 blocks");
    put_u32(&mut b, 0x2004, 0x7000_0000);
    cli_fails_with(&b, "the triage data (SizeOfDump 0x70000000)", &["--strict"]);
    // Read as truncated by default: the lying block count is then what stops it.
    cli_fails(&b, "corrupt triage dump: DataBlocksCount: 268435456 blocks");
}

/// `etl` on a file that is not an ETL (empty, text, random bytes, a dump) is an error: exit 2 and
/// one line naming the file and why; an ETL `extract` wrote is read (exit 0).
#[test]
fn etl_on_non_etl_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut x: u64 = 0x1234_5678_9ABC_DEF1;
    let random: Vec<u8> = (0..8192)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    // A buffer-shaped file whose first record is not the logfile header event.
    let mut fake = vec![0u8; 0x1000];
    fake[0..4].copy_from_slice(&0x1000u32.to_le_bytes());
    fake[4..8].copy_from_slice(&0x100u32.to_le_bytes());
    fake[0x48..0x4C].copy_from_slice(&0xC011_0002u32.to_le_bytes());
    fake[0x4E..0x50].copy_from_slice(&0x0524u16.to_le_bytes());
    for (name, bytes, why) in [
        (
            "fake.etl",
            fake,
            "does not start with the logfile header event",
        ),
        ("empty.etl", Vec::new(), "the file is empty"),
        (
            "text.etl",
            b"# not an etl\nhello\n".repeat(200),
            "does not fit the file",
        ),
        ("random.etl", random, "not an ETL file"),
        ("dump.etl", x64_full(), "does not fit the file"),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        let out = etwdump(&["etl", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.contains("not an ETL file") && err.contains(why),
            "{name}: {err}"
        );
    }
}
