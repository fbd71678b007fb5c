//! Tests of the memory images ([`Forged::write_image`]). Each file is read back by a reader
//! written here from the format definitions, not with the forge's writers: ELF through the
//! goblin crate, the VMware group / tag format (volatility3 `layers/vmware.py`, volatility 2
//! `addrspaces/vmware.py`) and the raw layout by hand. The crash dump is read with the tests'
//! own dump reader (`Walk`). Checked: the runs an image declares are the dump's stored pages,
//! every stored page holds the dump's bytes in every image, the raw image is zero elsewhere,
//! the CPU state names the dump's DTB, and every probe reads through the image as through the
//! dump (the raw image: every readable probe).

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use goblin::elf::program_header::{PT_LOAD, PT_NOTE};
use goblin::elf::Elf;

use super::{all_small_configs, fixture_dir, temp_path, Walk};
use crate::util::{get_u32, get_u64};
use crate::{forge, Arch, BitmapSig, Config, Expect, Forged, ImageKind, ImageRange, Layout};

const PAGE: u64 = 0x1000;

fn read_at(path: &Path, off: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    File::open(path)
        .and_then(|f| f.read_exact_at(&mut buf, off))
        .unwrap_or_else(|e| panic!("{} @{off:#x}+{len:#x}: {e}", path.display()));
    buf
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("metadata").len()
}

/// An image as the test's readers understand it: the file holding the memory, its runs
/// (physical start, size, file offset), and the CR3 of CPU 0 where the format records one.
struct Parsed {
    memory: PathBuf,
    runs: Vec<ImageRange>,
    cr3: Option<u64>,
}

// ---------------------------------------------------------------------------------- VMware

/// One tag: its indices and where its data lies in the file.
struct Tag {
    name: String,
    indices: Vec<u32>,
    at: u64,
    len: u64,
}

/// Groups of a .vmss / .vmsn: name -> tags. Header `<4sII` (magic, unknown, group count),
/// groups `64sQQ`, tags: flags (indices << 6 | data length), name length, name, u32 indices,
/// data; data length 62/63: two sizes (u32 in version 0, else u64), a u16 padding length,
/// the data after the padding.
fn vmware_groups(path: &Path) -> HashMap<String, Vec<Tag>> {
    let head = read_at(path, 0, 12);
    let magic = &head[0..4];
    assert!(
        [
            b"\xd0\xbe\xd2\xbe",
            b"\xd1\xba\xd1\xba",
            b"\xd2\xbe\xd2\xbe",
            b"\xd3\xbe\xd3\xbe"
        ]
        .iter()
        .any(|m| &m[..] == magic),
        "magic {magic:02x?}"
    );
    let size_len = if magic[0] & 0xF == 0 { 4 } else { 8 };
    let count = get_u32(&head, 8) as u64;
    let mut groups = HashMap::new();
    for g in 0..count {
        let e = read_at(path, 12 + g * 80, 80);
        let name = String::from_utf8_lossy(&e[..64])
            .trim_end_matches('\0')
            .to_string();
        let mut off = get_u64(&e, 64);
        let mut tags = Vec::new();
        loop {
            let h = read_at(path, off, 2);
            if h == [0, 0] {
                break;
            }
            let (flags, name_len) = (h[0], h[1] as u64);
            let n_idx = (flags >> 6) as u64;
            let tag_name = String::from_utf8(read_at(path, off + 2, name_len as usize)).unwrap();
            let raw_idx = read_at(path, off + 2 + name_len, (n_idx * 4) as usize);
            let indices = (0..n_idx as usize)
                .map(|i| get_u32(&raw_idx, i * 4))
                .collect();
            let data_at = off + 2 + name_len + n_idx * 4;
            let (at, len) = match flags & 0x3F {
                62 | 63 => {
                    let s = read_at(path, data_at, 2 * size_len + 2);
                    let disk = if size_len == 4 {
                        get_u32(&s, 0) as u64
                    } else {
                        get_u64(&s, 0)
                    };
                    let pad = u16::from_le_bytes([s[2 * size_len], s[2 * size_len + 1]]) as u64;
                    (data_at + 2 * size_len as u64 + 2 + pad, disk)
                }
                n => (data_at, n as u64),
            };
            tags.push(Tag {
                name: tag_name,
                indices,
                at,
                len,
            });
            off = at + len;
        }
        groups.insert(name, tags);
    }
    groups
}

fn tag_value(path: &Path, tags: &[Tag], name: &str, indices: &[u32]) -> u64 {
    let t = tags
        .iter()
        .find(|t| t.name == name && t.indices == indices)
        .unwrap_or_else(|| panic!("tag {name}{indices:?} missing"));
    let b = read_at(path, t.at, t.len as usize);
    match t.len {
        4 => get_u32(&b, 0) as u64,
        8 => get_u64(&b, 0),
        n => panic!("tag {name}: {n} bytes"),
    }
}

/// The .vmss / .vmsn regions; `memory`: the .vmem, or None for memory embedded in `meta`'s
/// `Memory[0][0]` tag (regions relative to its data).
fn parse_vmware(meta: &Path, memory: Option<&Path>, x64: bool) -> Parsed {
    let groups = vmware_groups(meta);
    let mem = &groups["memory"];
    let count = tag_value(meta, mem, "regionsCount", &[]);
    assert!(count > 0, "volatility3 needs regions");
    let base = match memory {
        Some(_) => 0,
        None => {
            let t = mem
                .iter()
                .find(|t| t.name == "Memory" && t.indices == [0, 0])
                .expect("Memory[0][0]");
            assert_eq!(t.at % PAGE, 0, "embedded memory page aligned");
            t.at
        }
    };
    let runs = (0..count as u32)
        .map(|i| ImageRange {
            start: tag_value(meta, mem, "regionPPN", &[i]) * PAGE,
            size: tag_value(meta, mem, "regionSize", &[i]) * PAGE,
            file_offset: base + tag_value(meta, mem, "regionPageNum", &[i]) * PAGE,
        })
        .collect();
    let cr = if x64 { "CR64" } else { "CR" };
    Parsed {
        memory: memory.unwrap_or(meta).to_path_buf(),
        runs,
        cr3: Some(tag_value(meta, &groups["cpu"], cr, &[0, 3])),
    }
}

// ------------------------------------------------------------------------------------- ELF

/// Program headers through goblin: PT_NOTE first, then PT_LOADs (p_paddr, p_offset page
/// aligned, p_filesz = p_memsz, p_vaddr 0); CR3 from CPU 0's "QEMU" note (cr[3] at +416).
fn parse_elf(path: &Path, f: &Forged) -> Parsed {
    let head = read_at(path, 0, file_len(path).min(32 << 20) as usize);
    let elf = Elf::parse(&head).expect("goblin parses the core");
    let h = &elf.header;
    assert_eq!(h.e_type, goblin::elf::header::ET_CORE);
    let top = f
        .image_ranges(ImageKind::Elf)
        .last()
        .map(|r| r.start + r.size);
    let (machine, wide) = match f.config.arch {
        Arch::X64 => (goblin::elf::header::EM_X86_64, true),
        _ => (goblin::elf::header::EM_386, top > Some(0xFFFF_FFFF)),
    };
    assert_eq!((h.e_machine, elf.is_64), (machine, wide));
    assert_eq!(elf.program_headers[0].p_type, PT_NOTE);
    let mut runs = Vec::new();
    for ph in &elf.program_headers[1..] {
        assert_eq!(ph.p_type, PT_LOAD);
        assert_eq!((ph.p_filesz, ph.p_vaddr), (ph.p_memsz, 0));
        assert_eq!(ph.p_offset % PAGE, 0, "page-aligned contents");
        runs.push(ImageRange {
            start: ph.p_paddr,
            size: ph.p_filesz,
            file_offset: ph.p_offset,
        });
    }
    let notes: Vec<_> = elf
        .iter_note_headers(&head)
        .expect("notes")
        .map(|n| n.expect("note"))
        .collect();
    let cpus = f.config.cpus as usize;
    assert_eq!(notes.len(), 2 * cpus);
    assert!(notes[..cpus]
        .iter()
        .all(|n| n.name == "CORE" && n.n_type == goblin::elf::note::NT_PRSTATUS));
    let q = &notes[cpus];
    assert_eq!((q.name, q.desc.len()), ("QEMU", 432));
    Parsed {
        memory: path.to_path_buf(),
        runs,
        cr3: Some(get_u64(q.desc, 416)),
    }
}

// ------------------------------------------------------------------------------ the checks

/// The dump's stored pages (its own reader), coalesced into runs.
fn dump_runs(walk: &Walk) -> Vec<ImageRange> {
    let mut pfns: Vec<u64> = walk.pages.keys().copied().collect();
    pfns.sort_unstable();
    let mut runs: Vec<ImageRange> = Vec::new();
    for pfn in pfns {
        match runs.last_mut() {
            Some(r) if r.start + r.size == pfn * PAGE => r.size += PAGE,
            _ => runs.push(ImageRange {
                start: pfn * PAGE,
                size: PAGE,
                file_offset: 0,
            }),
        }
    }
    runs
}

fn parse(f: &Forged, kind: ImageKind, files: &[PathBuf]) -> Parsed {
    let x64 = f.config.arch.is_x64();
    match kind {
        ImageKind::Raw => Parsed {
            memory: files[0].clone(),
            runs: vec![ImageRange {
                start: 0,
                size: file_len(&files[0]),
                file_offset: 0,
            }],
            cr3: None,
        },
        ImageKind::Vmware => {
            assert_eq!(files[0].extension().unwrap(), "vmem");
            assert_eq!(files[1].extension().unwrap(), "vmss");
            parse_vmware(&files[1], Some(&files[0]), x64)
        }
        ImageKind::VmwareEmbedded => parse_vmware(&files[0], None, x64),
        ImageKind::Elf => parse_elf(&files[0], f),
    }
}

/// File offset of physical page `pfn` in the image, if it holds the page.
fn image_offset(runs: &[ImageRange], pfn: u64) -> Option<u64> {
    let pa = pfn * PAGE;
    runs.iter()
        .find(|r| pa >= r.start && pa < r.start + r.size)
        .map(|r| r.file_offset + pa - r.start)
}

/// The crash dump as the tests' reader sees it: its file, the page map of its headers
/// (`Walk` over the bytes before the first page) and its stored pages as runs.
struct Dump<'a> {
    path: &'a Path,
    walk: Walk<'a>,
    runs: Vec<ImageRange>,
}

/// Pages to compare: all stored pages (`all`) or those the forge wrote plus each run's ends.
fn pfns_to_check(f: &Forged, dump: &Dump, all: bool) -> Vec<u64> {
    if all {
        let mut v: Vec<u64> = dump.walk.pages.keys().copied().collect();
        v.sort_unstable();
        return v;
    }
    let mut v: BTreeSet<u64> = f.pm.pages().keys().copied().collect();
    for r in &dump.runs {
        v.insert(r.start / PAGE);
        v.insert((r.start + r.size) / PAGE - 1);
    }
    v.into_iter().collect()
}

/// One image kind of `f` against its dump (`all`: compare every page; `tag`: names the
/// temporary files, unique per test since tests run in parallel).
fn check_image(f: &Forged, dump: &Dump, kind: ImageKind, all: bool, tag: &str) {
    let walk = &dump.walk;
    let stem = temp_path(&format!("img-{tag}-{}", kind.name()));
    let path = stem.with_extension(kind.memory_extension());
    let files = f.write_image(&path, kind).expect("write image");
    let p = parse(f, kind, &files);
    let want_runs = &dump.runs;
    let what = format!("{:?} {:?} {}", f.config.arch, f.config.layout, kind.name());
    let top = want_runs.last().map(|r| r.start + r.size).unwrap();
    if kind == ImageKind::Raw {
        assert_eq!(
            p.runs[0].size, top,
            "{what}: raw ends at the last stored page"
        );
    } else {
        let starts: Vec<(u64, u64)> = p.runs.iter().map(|r| (r.start, r.size)).collect();
        let want: Vec<(u64, u64)> = want_runs.iter().map(|r| (r.start, r.size)).collect();
        assert_eq!(starts, want, "{what}: runs = the dump's stored pages");
        assert_eq!(p.runs, f.image_ranges(kind), "{what}: image_ranges");
        assert_eq!(p.cr3, Some(f.dtb), "{what}: CR3 = the header's DTB");
    }
    for pfn in pfns_to_check(f, dump, all) {
        let off = image_offset(&p.runs, pfn).unwrap_or_else(|| panic!("{what}: {pfn:#x}"));
        let dump_page = read_at(dump.path, walk.pages[&pfn] as u64, PAGE as usize);
        let got = read_at(&p.memory, off, PAGE as usize);
        assert!(
            got == dump_page,
            "{what}: page {pfn:#x} differs from the dump"
        );
    }
    if all {
        check_probes_through(f, &p, kind, walk, &what);
    }
    for file in files {
        let _ = std::fs::remove_file(file);
    }
}

/// Every probe through the image: VMware and ELF exactly as through the dump; raw (no holes)
/// every readable probe, the raw image's pages not in the dump being zero.
fn check_probes_through(f: &Forged, p: &Parsed, kind: ImageKind, walk: &Walk, what: &str) {
    let mem = std::fs::read(&p.memory).expect("read image");
    let mut pages = HashMap::new();
    for r in &p.runs {
        for k in 0..r.size / PAGE {
            pages.insert(r.start / PAGE + k, (r.file_offset + k * PAGE) as usize);
        }
    }
    if kind == ImageKind::Raw {
        for (&pfn, &off) in &pages {
            if !walk.pages.contains_key(&pfn) {
                let page = &mem[off..off + PAGE as usize];
                assert!(page.iter().all(|&b| b == 0), "{what}: hole {pfn:#x} zero");
            }
        }
    }
    let img = Walk {
        file: &mem,
        x64: f.config.arch.is_x64(),
        pae: f.config.arch == Arch::X86Pae,
        dtb: f.dtb,
        pages,
    };
    for probe in &f.probes {
        let got = match img.read(probe.va, probe.len) {
            Ok(b) => Expect::Bytes(b),
            Err(first) => Expect::Unreadable {
                first_unreadable_va: first,
            },
        };
        if kind != ImageKind::Raw || matches!(probe.expect, Expect::Bytes(_)) {
            assert_eq!(got, probe.expect, "{what}: probe {}", probe.name);
        }
    }
}

fn check_all_kinds(f: &Forged, all: bool, tag: &str) {
    let path = temp_path(&format!("img-{tag}.dmp"));
    f.write_to(&path).expect("write dump");
    let prefix = read_at(&path, 0, f.first_page_offset as usize);
    let walk = Walk::new(&prefix);
    let runs = dump_runs(&walk);
    let dump = Dump {
        path: &path,
        walk,
        runs,
    };
    for kind in ImageKind::ALL {
        check_image(f, &dump, kind, all, tag);
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn images_of_small_configs_hold_the_dump_pages() {
    for cfg in all_small_configs() {
        check_all_kinds(&forge(&cfg), true, "small");
    }
}

#[test]
fn images_of_a_fixture_with_etw_and_a_random_self_map() {
    let d = fixture_dir("x64-19041");
    let spec = crate::EtwSpec::standard(19041).with_buffers(19041);
    let cfg = Config::from_fixture(&d)
        .with_etw(spec)
        .with_variation(5)
        .with_random_self_map();
    assert_ne!(cfg.self_map_index, crate::X64_DEFAULT_SELF_MAP_INDEX);
    check_all_kinds(&forge(&cfg), true, "fixture");
}

/// Memory above 4 GiB: a 16 GiB x64 machine (full: the machine's runs, the last one above
/// 12 GiB; bitmap: scattered stored pages) and a 6 GiB PAE machine (ELF64 with EM_386, as QEMU
/// does when a RAM block ends above 4 GiB). Only the written pages and each run's ends are
/// compared (the files are sparse).
#[test]
fn images_above_4g() {
    let big = |cfg: Config, bytes: u64| Config {
        physical_memory_bytes: bytes,
        ..cfg
    };
    let sdmp = Layout::Bitmap {
        sig: BitmapSig::Sdmp,
        dump_type: 5,
    };
    for cfg in [
        big(Config::x64(), 16 << 30),
        Config {
            layout: sdmp,
            ..big(Config::x64(), 16 << 30)
        },
        Config {
            layout: sdmp,
            ..big(Config::x86_pae(), 6 << 30)
        },
    ] {
        let f = forge(&cfg);
        if cfg.layout == Layout::Full {
            let runs = f.image_ranges(ImageKind::Vmware);
            assert_eq!(runs.len(), 4);
            assert!(runs[3].start > 4 << 30);
        }
        check_all_kinds(&f, false, "big");
    }
}
