//! Memory images (issue 14): the forge writes each scenario as a crash dump and as a raw image,
//! a VMware .vmem + .vmss pair, a .vmsn holding the memory and an ELF core (written by the
//! forge from the format definitions, not from etwdump's reader). On every image etwdump must
//! find the page-table root the forge built (x64 with the self-map index varied, x86 PAE) and
//! the kernel, and give the same `sessions`, `buffers`, `cswitch` and `events` records as on
//! the crash dump of the same memory.

mod common;

use etwdump::dump::{Arch, DumpFile, OpenOptions};
use etwdump::kernel::context::{KernelBaseSource, KernelContext, SymbolOptions};
use etwdump::kernel::discover;
use etwdump::mem::Memory;
use etwdump_forge::{forge, Config, Forged, ImageKind};
use serde_json::Value;

/// The records of the four ETW listings on `d`, as JSON (warnings left out: a crash dump
/// warns of what its header says, an image of how it was read).
fn listings(d: &DumpFile, opts: &SymbolOptions) -> [Value; 4] {
    let ctx = KernelContext::open(d, opts).unwrap();
    let sessions =
        serde_json::to_value(etwdump::report::sessions::Sessions::open(&ctx).records()).unwrap();
    let buffers = serde_json::to_value(etwdump::report::buffers::analyse(&ctx, None).rows).unwrap();
    let cswitch = serde_json::to_value(etwdump::report::cswitch::collect(&ctx, None).rows).unwrap();
    let events = serde_json::to_value(etwdump::report::events::collect(&ctx, None).rows).unwrap();
    [sessions, buffers, cswitch, events]
}

fn arch_of(a: etwdump_forge::Arch) -> Arch {
    match a {
        etwdump_forge::Arch::X64 => Arch::X64,
        etwdump_forge::Arch::X86Pae => Arch::X86 { pae: true },
        etwdump_forge::Arch::X86NonPae => Arch::X86 { pae: false },
    }
}

fn count(v: &Value) -> usize {
    v.as_array().map_or(0, |a| a.len())
}

/// Forge `c`, write the dump and every image, and compare them.
fn check(c: &Config, fixture: &str, what: &str) -> usize {
    let f = forge(c);
    let dir = tempfile::tempdir().unwrap();
    let dump_path = dir.path().join("m.dmp");
    f.write_to(&dump_path).unwrap();
    let opts = SymbolOptions {
        pdb: Some(common::pdb_of(fixture)),
        ..SymbolOptions::default()
    };
    let dump = discover::open(&dump_path, OpenOptions::default()).unwrap();
    let want = listings(&dump, &opts);
    assert!(
        count(&want[0]) > 0 && count(&want[1]) > 0,
        "{what}: no ETW data"
    );
    eprintln!(
        "{what}: {} session records, {} buffers, {} switches, {} events on the dump",
        count(&want[0]),
        count(&want[1]),
        count(&want[2]),
        count(&want[3])
    );
    let mut checked = 0;
    for kind in ImageKind::ALL {
        let files = f
            .write_image(&dir.path().join(format!("m-{}", kind.name())), kind)
            .unwrap();
        // Open every file the image has (a .vmem or its .vmss: the same memory).
        for file in &files {
            let label = format!("{what} {}: {}", kind.name(), file.display());
            let d = discover::open(file, OpenOptions::default())
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            check_machine(&f, &d, &label);
            let got = listings(&d, &opts);
            if kind == ImageKind::Raw {
                // A raw image holds zeros where the dump stores no page (no format can tell
                // an absent page from a zero one): a field the dump cannot read may read as
                // zeros there. The same sessions and buffers are found, at the same places.
                for (i, keys) in [
                    (0, ["kind", "logger_id", "address"]),
                    (1, ["session_id", "source", "address"]),
                ] {
                    let project = |v: &Value| -> Vec<Vec<Value>> {
                        v.as_array()
                            .unwrap()
                            .iter()
                            .map(|r| keys.iter().map(|k| r[*k].clone()).collect())
                            .collect()
                    };
                    assert_eq!(project(&got[i]), project(&want[i]), "{label}: listing {i}");
                }
                checked += 1;
                continue;
            }
            for (i, name) in ["sessions", "buffers", "cswitch", "events"]
                .iter()
                .enumerate()
            {
                assert_eq!(
                    count(&got[i]),
                    count(&want[i]),
                    "{label}: {name} count differs"
                );
                if got[i] != want[i] {
                    let (g, w) = (got[i].as_array().unwrap(), want[i].as_array().unwrap());
                    let k = g.iter().zip(w).position(|(a, b)| a != b).unwrap_or(0);
                    panic!(
                        "{label}: {name} records differ, first at {k}:\n image {}\n dump  {}",
                        g[k], w[k]
                    );
                }
            }
            checked += 1;
        }
    }
    checked
}

/// Discovery found what the forge built: the architecture, the root, the self-map index, the
/// kernel base (by its CodeView record) and its PDB identity.
fn check_machine(f: &Forged, d: &Memory, label: &str) {
    let root = f.page_table_root();
    assert_eq!(d.machine.dtb, root, "{label}: DTB");
    assert_eq!(d.machine.arch, arch_of(f.config.arch), "{label}: arch");
    let how = d.machine.found_by().expect("found by discovery");
    match f.self_map_index() {
        Some(i) => assert!(
            how.contains(&format!("self-reference at index {i:#x}")),
            "{label}: {how}"
        ),
        None => assert!(
            how.contains("PAE") || how.contains("0x300"),
            "{label}: {how}"
        ),
    }
    let ctx = KernelContext::without_symbols(d);
    assert_eq!(
        ctx.base_source,
        Some(KernelBaseSource::CodeViewScan),
        "{label}"
    );
    assert_eq!(
        ctx.base.map(|b| b.get()),
        Some(f.config.kernel_base),
        "{label}: kernel base"
    );
    assert!(ctx.kernel_pdb().is_some(), "{label}: CodeView identity");
    assert_eq!(ctx.build, f.config.build, "{label}: build");
}

#[test]
fn every_image_format_gives_the_crash_dumps_listings_x64() {
    let fx = common::fixture("x64-19041");
    let mut n = 0;
    for seed in [3u64, 11] {
        let c = Config::from_fixture(&fx)
            .with_variation(seed)
            .with_random_self_map();
        let i = c.self_map_index;
        n += check(
            &c,
            "x64-19041",
            &format!("x64-19041 seed {seed} self-map {i:#x}"),
        );
    }
    // Raw, .vmem, .vmss, .vmsn and ELF for each.
    assert_eq!(n, 2 * 5);
}

#[test]
fn every_image_format_gives_the_crash_dumps_listings_x86_pae() {
    let fx = common::fixture("x86-14393");
    let c = Config::from_fixture(&fx).with_variation(5);
    assert_eq!(arch_of(c.arch), Arch::X86 { pae: true });
    assert_eq!(check(&c, "x86-14393", "x86-14393 PAE seed 5"), 5);
}

/// Bad images: each a clear one-line error or a warning, never a guess presented as fact.
#[test]
fn bad_images_are_refused_or_warned_about() {
    let fx = "x64-19041";
    let c = Config::from_fixture(&common::fixture(fx)).with_variation(3);
    let f = forge(&c);
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    // A .vmss without its .vmem.
    let files = f.write_image(&p("v"), ImageKind::Vmware).unwrap();
    let vmss = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "vmss"))
        .unwrap();
    let vmem = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "vmem"))
        .unwrap();
    std::fs::rename(vmem, p("elsewhere.bin")).unwrap();
    let e = discover::open(vmss, OpenOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("without the memory") && e.contains(".vmem"),
        "{e}"
    );
    // An ELF core whose segments have no physical addresses (p_paddr 0 everywhere).
    let elf = f.write_image(&p("e"), ImageKind::Elf).unwrap().remove(0);
    let mut b = std::fs::read(&elf).unwrap();
    let (phoff, n) = (
        u64::from_le_bytes(b[32..40].try_into().unwrap()) as usize,
        u16::from_le_bytes(b[56..58].try_into().unwrap()) as usize,
    );
    for i in 0..n {
        let h = phoff + i * 56;
        b[h + 24..h + 32].fill(0);
    }
    std::fs::write(p("nophys.elf"), &b).unwrap();
    let e = discover::open(&p("nophys.elf"), OpenOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no physical addresses") || e.contains("overlap"),
        "{e}"
    );
    // A raw image cut in the middle of a page: the partial page is said to be missing, the
    // rest reads as before.
    let raw = f.write_image(&p("r"), ImageKind::Raw).unwrap().remove(0);
    let mut b = std::fs::read(&raw).unwrap();
    b.extend_from_slice(&[0xCC; 0x800]);
    std::fs::write(p("cut.raw"), &b).unwrap();
    let d = discover::open(&p("cut.raw"), OpenOptions::default()).unwrap();
    assert!(
        d.warnings()
            .iter()
            .any(|w| w.message.contains("ends 0x800 bytes into a page")),
        "{:?}",
        d.warnings()
    );
    assert_eq!(d.machine.dtb, f.page_table_root());
    // An ELF core cut short: refused with --strict, warned about and read otherwise.
    let b = std::fs::read(&elf).unwrap();
    std::fs::write(p("short.elf"), &b[..b.len() - 0x1800]).unwrap();
    let strict = discover::open(&p("short.elf"), OpenOptions::default());
    assert!(strict.unwrap_err().to_string().contains("truncated"));
    let d = discover::open(
        &p("short.elf"),
        OpenOptions {
            allow_truncated: true,
        },
    )
    .unwrap();
    assert!(d.truncation().is_some());
    // Several page-table roots: a copy of the PML4 (its self-reference pointed at the copy)
    // in a free page just above the root. The first root in physical order is used; the
    // other is listed, never silently preferred.
    let mut b = std::fs::read(&raw).unwrap();
    let root = f.page_table_root() as usize;
    let idx = f.self_map_index().unwrap() as usize;
    let copy = (root + 0x1000..b.len() - 0x1000)
        .step_by(0x1000)
        .find(|&o| b[o..o + 0x1000].iter().all(|&x| x == 0))
        .expect("a free page");
    let pml4: Vec<u8> = b[root..root + 0x1000].to_vec();
    b[copy..copy + 0x1000].copy_from_slice(&pml4);
    let e = u64::from_le_bytes(pml4[idx * 8..idx * 8 + 8].try_into().unwrap());
    let moved = (e & !0x000F_FFFF_FFFF_F000) | copy as u64;
    b[copy + idx * 8..copy + idx * 8 + 8].copy_from_slice(&moved.to_le_bytes());
    std::fs::write(p("two.raw"), &b).unwrap();
    let d = discover::open(&p("two.raw"), OpenOptions::default()).unwrap();
    assert_eq!(d.machine.dtb, root as u64);
    let how = d.machine.found_by().unwrap();
    assert!(
        how.contains("1 other page-table roots also pass") && how.contains(&format!("{copy:#x}")),
        "{how}"
    );
    // A file of no memory at all: one error naming both readings.
    std::fs::write(p("noise.bin"), vec![0x5Au8; 2 << 20]).unwrap();
    let e = discover::open(&p("noise.bin"), OpenOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not a Windows kernel crash dump")
            && e.contains("no x64 or x86 kernel page tables"),
        "{e}"
    );
}

/// An RDMP dump (DumpType 8, 9 and 0xA; crash-dump-format.md §1.2b) holding the memory of a
/// forge full dump: its header with the DumpType changed, the RDMP header at 0x2000 with the
/// dump's runs as {Pfn, PageCount} ranges at 0x2030, the pages back to back from
/// FirstPageOffset (MetadataSize − 0x20 = FirstPageOffset − 0x2040). etwdump gives the full
/// dump's listings on each.
#[test]
fn rdmp_dumps_give_the_full_dumps_listings() {
    let fx = "x64-19041";
    let c = Config::from_fixture(&common::fixture(fx)).with_variation(3);
    let f = forge(&c);
    let full = f.to_bytes();
    assert_eq!(
        u32::from_le_bytes(full[0xF98..0xF9C].try_into().unwrap()),
        1,
        "a full dump"
    );
    let dir = tempfile::tempdir().unwrap();
    let opts = SymbolOptions {
        pdb: Some(common::pdb_of(fx)),
        ..SymbolOptions::default()
    };
    let dump_path = dir.path().join("full.dmp");
    std::fs::write(&dump_path, &full).unwrap();
    let want = listings(
        &discover::open(&dump_path, OpenOptions::default()).unwrap(),
        &opts,
    );
    let pages: u64 = f.runs.iter().map(|r| r.1).sum();
    assert!(
        f.runs.iter().all(|r| r.0 != 0),
        "a range at PFN 0 would end the list"
    );
    for dump_type in [8u32, 9, 0xA] {
        let first = 0x3000u64;
        let meta = first - 0x2040 + 0x20;
        let mut b = full[..0x2000].to_vec();
        b[0xF98..0xF9C].copy_from_slice(&dump_type.to_le_bytes());
        b.resize(first as usize, 0);
        let h = 0x2000;
        b[h..h + 4].copy_from_slice(&0x40u32.to_le_bytes());
        b[h + 4..h + 8].copy_from_slice(b"RDMP");
        b[h + 8..h + 12].copy_from_slice(b"DUMP");
        b[h + 0x10..h + 0x18].copy_from_slice(&meta.to_le_bytes());
        b[h + 0x18..h + 0x20].copy_from_slice(&first.to_le_bytes());
        if dump_type == 0xA {
            b[h + 0x20..h + 0x24].copy_from_slice(&(f.runs.len() as u32).to_le_bytes());
            b[h + 0x28..h + 0x30].copy_from_slice(&pages.to_le_bytes());
        }
        for (i, &(pfn, n)) in f.runs.iter().enumerate() {
            let e = h + 0x30 + i * 16;
            b[e..e + 8].copy_from_slice(&pfn.to_le_bytes());
            b[e + 8..e + 16].copy_from_slice(&n.to_le_bytes());
        }
        let data =
            &full[f.first_page_offset as usize..(f.first_page_offset + pages * 0x1000) as usize];
        b.extend_from_slice(data);
        let path = dir.path().join(format!("rdmp-{dump_type}.dmp"));
        std::fs::write(&path, &b).unwrap();
        let d = discover::open(&path, OpenOptions::default()).unwrap();
        assert_eq!(d.stored_pages(), pages, "type {dump_type}");
        assert!(
            d.machine.found_by().is_none(),
            "an RDMP dump has a header: nothing to discover"
        );
        let got = listings(&d, &opts);
        for i in 0..4 {
            assert!(
                got[i] == want[i],
                "RDMP type {dump_type}: listing {i} differs"
            );
        }
    }
}

/// A raw image that skipped a hole (the memory above it written lower down) cannot be placed:
/// the paging structures its kernel tables name then lie beyond its end, which etwdump says
/// instead of reading misplaced memory silently. Built from the forge's .vmem (the stored runs
/// back to back) of a machine whose page tables sit above its first hole.
#[test]
fn a_hole_skipping_raw_image_is_said_to_be_misplaced() {
    let fx = "x64-19041";
    let f = forge(&Config::from_fixture(&common::fixture(fx)).with_variation(3));
    let dir = tempfile::tempdir().unwrap();
    let files = f
        .write_image(&dir.path().join("h"), ImageKind::Vmware)
        .unwrap();
    let vmem = files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "vmem"))
        .unwrap();
    // The zero-padded raw image of the same memory: no warning.
    let raw = f
        .write_image(&dir.path().join("z"), ImageKind::Raw)
        .unwrap()
        .remove(0);
    let d = discover::open(&raw, OpenOptions::default()).unwrap();
    assert!(
        !d.warnings()
            .iter()
            .any(|w| w.message.contains("beyond the image's last page")),
        "{:?}",
        d.warnings()
    );
    // The runs back to back, as one flat file (no .vmss beside it under this name).
    let skipped = dir.path().join("skipped.raw");
    std::fs::copy(vmem, &skipped).unwrap();
    let len = std::fs::metadata(&skipped).unwrap().len();
    if len < (1 << 20) {
        let f2 = std::fs::OpenOptions::new()
            .append(true)
            .open(&skipped)
            .unwrap();
        f2.set_len(1 << 20).unwrap();
    }
    // A PDPT the PML4 names beyond the image's end (as memory moved down by a skipped hole
    // would be): read, with the warning.
    let mut b = std::fs::read(&raw).unwrap();
    let root = f.page_table_root() as usize;
    let (self_idx, kuser_idx) = (
        f.self_map_index().unwrap() as usize,
        (0xFFFF_F780_0000_0000u64 >> 39 & 0x1FF) as usize,
    );
    let i = (0x100..0x200)
        .find(|&i| {
            i != self_idx
                && i != kuser_idx
                && u64::from_le_bytes(b[root + i * 8..root + i * 8 + 8].try_into().unwrap()) & 1
                    == 1
        })
        .expect("another kernel PML4 entry");
    let past = (b.len() as u64 + 0x10_0000) & !0xFFF;
    let e = u64::from_le_bytes(b[root + i * 8..root + i * 8 + 8].try_into().unwrap());
    let moved = (e & !0x000F_FFFF_FFFF_F000) | past;
    b[root + i * 8..root + i * 8 + 8].copy_from_slice(&moved.to_le_bytes());
    std::fs::write(dir.path().join("moved.raw"), &b).unwrap();
    let d = discover::open(&dir.path().join("moved.raw"), OpenOptions::default()).unwrap();
    let w = d
        .machine
        .warnings
        .iter()
        .find(|w| w.message.contains("beyond the image's last page"));
    assert!(
        w.is_some_and(|w| w.message.contains(&format!("a PDPT at physical {past:#x}"))),
        "{:?}",
        d.machine.warnings
    );
    match discover::open(&skipped, OpenOptions::default()) {
        // The root itself moved: no page tables where the file says.
        Err(e) => assert!(
            e.to_string().contains("no x64 or x86 kernel page tables"),
            "{e}"
        ),
        Ok(d) => assert!(
            d.warnings()
                .iter()
                .chain(&d.machine.warnings)
                .any(|w| w.message.contains("beyond the image's last page")
                    || w.message.contains("skipped the PCI hole")),
            "a hole-skipping image read without a word: {:?} {:?}",
            d.warnings(),
            d.machine.warnings
        ),
    }
}

/// A layout handed over by a host framework (`--layout`, the Volatility 3 plugins): the
/// stored runs placed in reverse order behind a header and gaps of a file no format names.
/// With the forge's architecture and root the listings equal the dump's and the machine is
/// the given one; with a wrong root a warning says so and the search finds the right one.
#[test]
fn a_hosted_layout_places_memory_anywhere_in_a_file() {
    use etwdump::dump::layout::Layout;
    let (f, dir, opts, want) = common::forged_with_listings("x64-19041", 3);
    // The raw image gives each run's bytes; they go into the hosted file last run first.
    let raw = f
        .write_image(&dir.path().join("m"), ImageKind::Raw)
        .unwrap();
    let mem = std::fs::read(&raw[0]).unwrap();
    let runs = f.image_ranges(ImageKind::Elf);
    assert!(runs.len() > 1, "{} runs", runs.len());
    let mut file = vec![0xA5u8; 0x3000];
    let mut ranges = Vec::new();
    for r in runs.iter().rev() {
        ranges.push(format!(
            r#"{{"start":{},"size":{},"file_offset":{}}}"#,
            r.start,
            r.size,
            file.len()
        ));
        file.extend_from_slice(&mem[r.start as usize..(r.start + r.size) as usize]);
        file.extend_from_slice(&[0x5Au8; 0x1000]);
    }
    let hosted = dir.path().join("hosted.bin");
    std::fs::write(&hosted, &file).unwrap();
    let root = f.page_table_root();
    let layout = |dtb: u64| {
        Layout::parse(
            format!(
                r#"{{"etwdump_layout":1,"source":"test host","ranges":[{}],"arch":"x64","dtb":{dtb}}}"#,
                ranges.join(",")
            )
            .as_bytes(),
        )
        .unwrap()
    };
    let d = discover::open_with_layout(&hosted, &layout(root), OpenOptions::default()).unwrap();
    assert_eq!(d.machine.dtb, root);
    let how = d.machine.found_by().unwrap();
    assert!(how.contains("given by the layout (test host)"), "{how}");
    assert!(
        d.warnings().is_empty() && d.machine.warnings.is_empty(),
        "{:?} {:?}",
        d.warnings(),
        d.machine.warnings
    );
    assert_eq!(listings(&d, &opts), want);
    // A root that maps no KUSER_SHARED_DATA (the first stored page): warned, then searched.
    let d = discover::open_with_layout(&hosted, &layout(runs[0].start), OpenOptions::default())
        .unwrap();
    assert_eq!(d.machine.dtb, root);
    assert!(d.machine.found_by().unwrap().contains("self-reference"));
    assert!(
        d.machine.warnings[0].message.contains(&format!(
            "page-table root {:#x} (X64) does not map a plausible KUSER_SHARED_DATA",
            runs[0].start
        )),
        "{:?}",
        d.warnings()
    );
    assert_eq!(listings(&d, &opts), want);
    // A range past the end of the file: the data that is there is read, the rest missing.
    let mut l = layout(root);
    let last = l.ranges.iter_mut().max_by_key(|r| r.file_offset).unwrap();
    last.size += 0x4000;
    let e = discover::open_with_layout(&hosted, &l, OpenOptions::default()).unwrap_err();
    assert!(
        matches!(e, etwdump::dump::DumpError::Truncated { .. }),
        "{e}"
    );
    let lenient = OpenOptions {
        allow_truncated: true,
    };
    let d = discover::open_with_layout(&hosted, &l, lenient).unwrap();
    assert!(d.truncation().is_some(), "{:?}", d.warnings());
    assert_eq!(listings(&d, &opts), want);
}

/// Hosted layouts varied (the reference leaves the container open): for 8 seeds, the stored
/// runs are split at random pages into 1-8 pieces each, the pieces placed in the file in a
/// random order behind a random-length header with random gaps (file offsets page aligned,
/// as the layout requires), half of them with the machine given and half searched: every
/// listing equals the crash dump's.
#[test]
fn hosted_layouts_varied_give_the_dumps_listings() {
    use etwdump::dump::layout::Layout;
    let fx = "x64-19041";
    let c = Config::from_fixture(&common::fixture(fx)).with_variation(5);
    let f = forge(&c);
    let dir = tempfile::tempdir().unwrap();
    let dump_path = dir.path().join("m.dmp");
    f.write_to(&dump_path).unwrap();
    let opts = SymbolOptions {
        pdb: Some(common::pdb_of(fx)),
        ..SymbolOptions::default()
    };
    let want = listings(
        &discover::open(&dump_path, OpenOptions::default()).unwrap(),
        &opts,
    );
    let raw = f
        .write_image(&dir.path().join("m"), ImageKind::Raw)
        .unwrap();
    let mem = std::fs::read(&raw[0]).unwrap();
    let runs = f.image_ranges(ImageKind::Elf);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n.max(1)
    };
    for seed in 0..8u64 {
        // Pieces: (physical start, size).
        let mut pieces = Vec::new();
        for r in &runs {
            let pages = r.size / 0x1000;
            let mut cuts: Vec<u64> = (0..next(8)).map(|_| next(pages)).collect();
            cuts.push(0);
            cuts.push(pages);
            cuts.sort_unstable();
            cuts.dedup();
            for w in cuts.windows(2) {
                pieces.push((r.start + w[0] * 0x1000, (w[1] - w[0]) * 0x1000));
            }
        }
        // Shuffle (Fisher-Yates).
        for i in (1..pieces.len()).rev() {
            let j = next(i as u64 + 1) as usize;
            pieces.swap(i, j);
        }
        let mut file = vec![0xCCu8; (1 + next(4) as usize) * 0x1000];
        let mut ranges = Vec::new();
        for &(start, size) in &pieces {
            ranges.push(format!(
                r#"{{"start":{start},"size":{size},"file_offset":{}}}"#,
                file.len()
            ));
            file.extend_from_slice(&mem[start as usize..(start + size) as usize]);
            file.extend(std::iter::repeat_n(0x33u8, next(3) as usize * 0x1000));
        }
        let machine = if seed % 2 == 0 {
            format!(r#","arch":"x64","dtb":{}"#, f.page_table_root())
        } else {
            String::new()
        };
        let layout = Layout::parse(
            format!(
                r#"{{"etwdump_layout":1,"ranges":[{}]{machine}}}"#,
                ranges.join(",")
            )
            .as_bytes(),
        )
        .unwrap();
        let path = dir.path().join(format!("hosted-{seed}.bin"));
        std::fs::write(&path, &file).unwrap();
        let d = discover::open_with_layout(&path, &layout, OpenOptions::default())
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(d.machine.dtb, f.page_table_root(), "seed {seed}");
        assert_eq!(
            d.machine
                .found_by()
                .unwrap()
                .contains("given by the layout"),
            seed % 2 == 0,
            "seed {seed}"
        );
        assert_eq!(
            listings(&d, &opts),
            want,
            "seed {seed}: {} pieces",
            pieces.len()
        );
    }
}

/// The same hand-off for an x86 PAE kernel: the layout names `x86-pae` and the PDPT (32-byte
/// aligned, not page aligned); the listings equal the crash dump's, and a layout that calls
/// the PAE root `x64` is warned about and searched.
#[test]
fn a_hosted_layout_for_x86_pae() {
    use etwdump::dump::layout::Layout;
    let fx = "x86-14393";
    let c = Config::from_fixture(&common::fixture(fx)).with_variation(5);
    let f = forge(&c);
    assert_eq!(arch_of(c.arch), Arch::X86 { pae: true });
    let dir = tempfile::tempdir().unwrap();
    let dump_path = dir.path().join("m.dmp");
    f.write_to(&dump_path).unwrap();
    let opts = SymbolOptions {
        pdb: Some(common::pdb_of(fx)),
        ..SymbolOptions::default()
    };
    let want = listings(
        &discover::open(&dump_path, OpenOptions::default()).unwrap(),
        &opts,
    );
    let raw = f
        .write_image(&dir.path().join("m"), ImageKind::Raw)
        .unwrap();
    let mem = std::fs::read(&raw[0]).unwrap();
    let mut file = vec![0u8; 0x2000];
    let mut ranges = Vec::new();
    for r in f.image_ranges(ImageKind::Elf).iter().rev() {
        ranges.push(format!(
            r#"{{"start":{},"size":{},"file_offset":{}}}"#,
            r.start,
            r.size,
            file.len()
        ));
        file.extend_from_slice(&mem[r.start as usize..(r.start + r.size) as usize]);
    }
    let path = dir.path().join("hosted.bin");
    std::fs::write(&path, &file).unwrap();
    let root = f.page_table_root();
    assert_ne!(
        root % 0x1000,
        0,
        "the forge's PDPT is not page aligned: {root:#x}"
    );
    let layout = |arch: &str| {
        Layout::parse(
            format!(
                r#"{{"etwdump_layout":1,"ranges":[{}],"arch":"{arch}","dtb":{}}}"#,
                ranges.join(","),
                if arch == "x64" { root & !0xFFF } else { root }
            )
            .as_bytes(),
        )
        .unwrap()
    };
    let d = discover::open_with_layout(&path, &layout("x86-pae"), OpenOptions::default()).unwrap();
    assert_eq!(d.machine.arch, Arch::X86 { pae: true });
    assert_eq!(d.machine.dtb, root);
    assert!(d.machine.found_by().unwrap().contains("x86 PAE PDPT"));
    assert_eq!(listings(&d, &opts), want);
    let d = discover::open_with_layout(&path, &layout("x64"), OpenOptions::default()).unwrap();
    assert!(d.machine.warnings[0]
        .message
        .contains("does not map a plausible KUSER_SHARED_DATA"));
    assert_eq!(d.machine.arch, Arch::X86 { pae: true });
    assert_eq!(d.machine.dtb, root);
}
