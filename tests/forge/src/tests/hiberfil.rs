//! Tests of the hibernation files ([`Forged::write_hiberfil`]). The files are read back here by
//! a reader written from the public descriptions (header fields at the PDB types' offsets,
//! compression sets as volatility3 PR 1036 / LeechCore read them) with Xpress decoders written
//! here from the decompression pseudo-code of [MS-XCA] §2.2.4 (LZ77+Huffman) and §2.4.4 (Plain
//! LZ77): the forge has only encoders, and etwdump's decoders are not used. Checked: the header
//! offsets against the PO_MEMORY_IMAGE / _PO_HIBER_PERF types of the real ISFs in
//! `shared/isf/` (when present), every set of every file decodes to the pages of the raw image,
//! every stored PFN is in exactly one set, the truth matches the file, and the crash dump of
//! the same pages ([`Forged::write_dump_of_pages`]) stores exactly them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{fixture_dir, temp_path, Walk};
use crate::util::{get_u32, get_u64};
use crate::{
    forge, providers_config, Config, Forged, HiberCodec, HiberSignature, HiberSpec, HiberTruth,
    HiberVariant, HiberVersion, ImageKind, RestoreSet,
};

const PAGE: usize = 0x1000;

// ---- [MS-XCA] decoders ------------------------------------------------------------------

/// Plain LZ77 decompression ([MS-XCA] §2.4.4), stopping at `out_len` bytes or the input's end.
fn lz77_decode(input: &[u8], out_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(out_len);
    let (mut ip, mut flags, mut flag_count) = (0usize, 0u32, 0u32);
    let mut last_half: Option<usize> = None;
    while out.len() < out_len {
        if flag_count == 0 {
            flags = get_u32(input, ip);
            ip += 4;
            flag_count = 32;
        }
        flag_count -= 1;
        if flags & (1 << flag_count) == 0 {
            out.push(input[ip]);
            ip += 1;
            continue;
        }
        if ip == input.len() {
            break;
        }
        let m = u16::from_le_bytes([input[ip], input[ip + 1]]) as usize;
        ip += 2;
        let mut len = m % 8;
        let dist = m / 8 + 1;
        if len == 7 {
            len = match last_half.take() {
                None => {
                    last_half = Some(ip);
                    ip += 1;
                    (input[ip - 1] % 16) as usize
                }
                Some(at) => (input[at] / 16) as usize,
            };
            if len == 15 {
                len = input[ip] as usize;
                ip += 1;
                if len == 255 {
                    len = u16::from_le_bytes([input[ip], input[ip + 1]]) as usize;
                    ip += 2;
                    if len == 0 {
                        len = get_u32(input, ip) as usize;
                        ip += 4;
                    }
                    assert!(len >= 15 + 7, "bad long match length");
                    len -= 15 + 7;
                }
                len += 15;
            }
            len += 7;
        }
        len += 3;
        assert!(dist <= out.len(), "match before the start");
        for _ in 0..len {
            out.push(out[out.len() - dist]);
        }
    }
    out
}

/// LZ77+Huffman decompression ([MS-XCA] §2.2.4) of exactly `out_len` bytes: per 64 KiB block a
/// 256-byte table of 4-bit code lengths for 512 symbols, canonical codes, bits read as
/// little-endian u16 words most significant bit first.
fn huffman_decode(input: &[u8], out_len: usize) -> Vec<u8> {
    let word = |at: usize| -> u32 {
        if at + 1 < input.len() {
            u32::from(u16::from_le_bytes([input[at], input[at + 1]]))
        } else {
            0
        }
    };
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut ip = 0usize;
    while out.len() < out_len {
        let lens: Vec<u8> = (0..512)
            .map(|s| (input[ip + s / 2] >> (4 * (s % 2))) & 0xF)
            .collect();
        ip += 256;
        // Canonical decoding table indexed by the next 15 bits.
        let mut table = vec![0u16; 1 << 15];
        let mut code = 0usize;
        for bits in 1..=15u8 {
            for (sym, &len) in lens.iter().enumerate() {
                if len == bits {
                    let span = 1 << (15 - bits);
                    table[code..code + span].fill(sym as u16);
                    code += span;
                }
            }
        }
        let mut cur = (word(ip) << 16) | word(ip + 2);
        ip += 4;
        let mut extra: i32 = 16;
        let block_end = (out.len() + 65536).min(out_len);
        let consume = |cur: &mut u32, extra: &mut i32, ip: &mut usize, n: u32| {
            if n == 0 {
                return;
            }
            *cur <<= n;
            *extra -= n as i32;
            if *extra < 0 {
                *cur |= word(*ip) << (-*extra);
                *extra += 16;
                *ip += 2;
            }
        };
        while out.len() < block_end {
            let sym = table[(cur >> 17) as usize] as usize;
            consume(&mut cur, &mut extra, &mut ip, u32::from(lens[sym]));
            if sym < 256 {
                out.push(sym as u8);
                continue;
            }
            let sym = sym - 256;
            let mut len = sym % 16;
            let dist_bits = (sym / 16) as u32;
            if len == 15 {
                len = input[ip] as usize;
                ip += 1;
                if len == 255 {
                    len = u16::from_le_bytes([input[ip], input[ip + 1]]) as usize;
                    ip += 2;
                    assert!(len >= 15, "bad long match length");
                    len -= 15;
                }
                len += 15;
            }
            len += 3;
            let mut dist = 1usize << dist_bits;
            if dist_bits > 0 {
                dist += (cur >> (32 - dist_bits)) as usize;
            }
            consume(&mut cur, &mut extra, &mut ip, dist_bits);
            assert!(dist <= out.len(), "match before the start");
            for _ in 0..len {
                out.push(out[out.len() - dist]);
            }
        }
    }
    out.truncate(out_len);
    out
}

// ---- a reader of the files -----------------------------------------------------------------

/// What the reader finds: pfn -> page bytes, and per set (offset, method, count, size, pages).
struct Read {
    pages: BTreeMap<u64, Vec<u8>>,
    sets: Vec<(u64, u8, usize, u32, u32)>,
    boot_pages: u64,
    kernel_pages: u64,
}

/// Read `file` as a hibernation file of `version`: both restore sets, every compression set,
/// every page decoded.
fn read_hiberfil(file: &[u8], version: HiberVersion) -> Read {
    let l = version.layout();
    assert!(&file[0..4] == b"HIBR" || &file[0..4] == b"WAKE");
    assert_eq!(get_u32(file, 0xC), l.length_self);
    assert_eq!(get_u32(file, 0x18), 0x1000);
    let boot_pages = get_u64(file, 0x58);
    let kernel_pages = get_u64(file, l.kernel_pages_processed);
    let mut r = Read {
        pages: BTreeMap::new(),
        sets: Vec::new(),
        boot_pages,
        kernel_pages,
    };
    for (first, count) in [
        (get_u64(file, l.first_boot_restore_page), boot_pages),
        (get_u64(file, l.first_kernel_restore_page), kernel_pages),
    ] {
        let mut off = first as usize * PAGE;
        let mut done = 0u64;
        while done < count {
            let h = get_u32(file, off);
            let (n, size, method) = ((h & 0xFF) as usize, (h >> 8) & 0x3F_FFFF, (h >> 30) as u8);
            assert!((1..=16).contains(&n), "descriptor count {n} at {off:#x}");
            let mut pfns = Vec::new();
            for i in 0..n {
                let d = get_u64(file, off + 4 + 8 * i);
                pfns.extend((d >> 4)..(d >> 4) + (d & 0xF) + 1);
            }
            let data = &file[off + 4 + 8 * n..off + 4 + 8 * n + size as usize];
            let want = pfns.len() * PAGE;
            let plain = if size as usize == want {
                data.to_vec()
            } else if method < 2 {
                lz77_decode(data, want)
            } else {
                huffman_decode(data, want)
            };
            assert_eq!(plain.len(), want, "set at {off:#x} decodes short");
            for (i, &pfn) in pfns.iter().enumerate() {
                let page = plain[i * PAGE..(i + 1) * PAGE].to_vec();
                assert!(r.pages.insert(pfn, page).is_none(), "PFN {pfn:#x} twice");
            }
            r.sets
                .push((off as u64, method, n, size, pfns.len() as u32));
            done += pfns.len() as u64;
            off += 4 + 8 * n + size as usize;
        }
        assert_eq!(done, count, "restore set at page {first} overshoots");
    }
    r
}

fn raw_image(f: &Forged, name: &str) -> Vec<u8> {
    let p = temp_path(&format!("{name}.raw"));
    f.write_image(&p, ImageKind::Raw).unwrap();
    let raw = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    raw
}

fn write(f: &Forged, spec: &HiberSpec, name: &str) -> (Vec<u8>, HiberTruth) {
    let p = temp_path(&format!("{name}.sys"));
    let truth = f.write_hiberfil(&p, spec).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    (bytes, truth)
}

/// Check one file against its truth and the raw image.
fn check(file: &[u8], truth: &HiberTruth, raw: &[u8]) {
    let l = truth.version.layout();
    assert_eq!(file.len() as u64, truth.file_len);
    assert!(truth.file_len >= 16 << 20);
    assert_eq!(get_u64(file, 0x20), truth.system_time);
    assert_eq!(
        get_u64(file, l.highest_physical_page),
        truth.highest_physical_page
    );
    if let Some(hb) = l.hiberboot {
        assert_eq!(file[hb] == 1, truth.hiberboot);
    }
    let r = read_hiberfil(file, truth.version);
    assert_eq!(r.boot_pages, truth.boot_pages);
    assert_eq!(r.kernel_pages, truth.kernel_pages);
    // Coverage: every stored PFN exactly once (read_hiberfil refuses duplicates).
    let read: Vec<u64> = r.pages.keys().copied().collect();
    assert_eq!(read, truth.pfns);
    assert_eq!(
        truth.sets.iter().map(|s| s.pages as u64).sum::<u64>(),
        truth.pfns.len() as u64
    );
    for (pfn, page) in &r.pages {
        let at = *pfn as usize * PAGE;
        assert_eq!(&page[..], &raw[at..at + PAGE], "PFN {pfn:#x}");
    }
    // The sets as the truth lists them (file order).
    let mut got = r.sets.clone();
    got.sort();
    let want: Vec<_> = truth
        .sets
        .iter()
        .map(|s| {
            assert!((1..=16).contains(&s.pages));
            assert_eq!(s.uncompressed, s.compressed_size == s.pages * 0x1000);
            assert!(s.compressed_size <= s.pages * 0x1000);
            (
                s.offset,
                s.method,
                s.descriptors.len(),
                s.compressed_size,
                s.pages,
            )
        })
        .collect();
    assert_eq!(got, want);
    for s in &truth.sets {
        assert!(truth.codec.methods().contains(&s.method));
        let base = match s.restore_set {
            RestoreSet::Boot => truth.boot_set_offset,
            RestoreSet::Kernel => truth.kernel_set_offset,
        };
        assert!(s.offset >= base && base % 0x1000 == 0);
    }
    // Junk after the last set starts with a zero u32.
    if truth.data_end + 4 <= truth.file_len {
        assert_eq!(get_u32(file, truth.data_end as usize), 0);
    }
}

fn machine(name: &str) -> Forged {
    forge(&providers_config(&fixture_dir(name)))
}

#[test]
fn every_version_and_codec_round_trips_through_the_xca_decoders() {
    let f = machine("x64-19041");
    let raw = raw_image(&f, "rt");
    let mut uncompressed = 0;
    let mut methods = BTreeSet::new();
    let mut seed = 100;
    for version in HiberVersion::ALL {
        for codec in HiberCodec::ALL {
            let spec = HiberSpec::new(version, codec, seed);
            seed += 1;
            let (file, truth) = write(&f, &spec, &format!("rt-{seed}"));
            assert_eq!(&file[0..4], b"HIBR");
            assert_eq!(truth.length_self, version.layout().length_self);
            check(&file, &truth, &raw);
            uncompressed += truth.sets.iter().filter(|s| s.uncompressed).count();
            methods.extend(truth.sets.iter().map(|s| s.method));
            assert!(truth.sets.iter().any(|s| s.descriptors.len() > 1));
            assert!(truth.sets.iter().any(|s| !s.uncompressed));
        }
    }
    assert!(uncompressed > 0);
    assert_eq!(methods, BTreeSet::from([0, 1, 2, 3]));
}

#[test]
fn seeds_vary_the_layout_and_the_same_seed_gives_the_same_bytes() {
    let f = machine("x64-14393");
    let spec = HiberSpec::new(HiberVersion::Win10_1607, HiberCodec::Lz77, 7);
    let (a, ta) = write(&f, &spec, "same-a");
    let (b, tb) = write(&f, &spec, "same-b");
    assert_eq!(a, b);
    assert_eq!(ta, tb);
    let (c, tc) = write(&f, &HiberSpec { seed: 8, ..spec }, "same-c");
    assert_ne!(a, c);
    assert_ne!(ta.system_time, tc.system_time);
    assert_ne!(
        (ta.boot_pages, ta.sets.len()),
        (tc.boot_pages, tc.sets.len())
    );
    check(&c, &tc, &raw_image(&f, "same"));
}

#[test]
fn fast_startup_leaves_out_user_only_frames_and_matches_its_crash_dump() {
    let f = machine("x64-19041");
    assert!(!f.user_address_spaces().is_empty());
    let full = f.hiberfil_pfns(HiberVariant::Full);
    let spec = HiberSpec {
        variant: HiberVariant::FastStartup,
        ..HiberSpec::new(HiberVersion::Win10_1809, HiberCodec::Huffman, 3)
    };
    let (file, truth) = write(&f, &spec, "fs");
    assert!(truth.hiberboot);
    assert_eq!(file[0x364], 1);
    check(&file, &truth, &raw_image(&f, "fs"));
    let left_out: BTreeSet<u64> = full
        .iter()
        .copied()
        .filter(|p| truth.pfns.binary_search(p).is_err())
        .collect();
    assert!(!left_out.is_empty() && left_out.len() < 64, "{left_out:?}");
    // Each left-out frame backs a user page of some process (ntdll's pages, PEBs, ...).
    for (pid, dtb) in f.user_address_spaces() {
        let ntdll = f
            .user_physical_address(dtb, crate::NTDLL_BASE)
            .expect("ntdll mapped");
        assert!(left_out.contains(&(ntdll >> 12)), "pid {pid}");
        // KUSER_SHARED_DATA's user alias is the kernel's page: kept.
        let kuser = f.user_physical_address(dtb, 0x7FFE_0000).unwrap();
        assert!(truth.pfns.binary_search(&(kuser >> 12)).is_ok());
        // The process's PML4 (a page table) is kept.
        assert!(truth.pfns.binary_search(&(dtb >> 12)).is_ok());
    }
    // The crash dump of exactly those pages.
    let p = temp_path("fs.dmp");
    let len = f.write_dump_of_pages(&p, &truth.pfns).unwrap();
    let dump = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    assert_eq!(dump.len() as u64, len);
    assert_eq!(get_u32(&dump, 0xF98), 5);
    assert_eq!(get_u64(&dump, 0xFA0), len);
    let w = Walk::new(&dump);
    let stored: BTreeSet<u64> = w.pages.keys().copied().collect();
    assert_eq!(stored, truth.pfns.iter().copied().collect());
    let r = read_hiberfil(&file, truth.version);
    for (pfn, page) in &r.pages {
        assert_eq!(w.phys(pfn << 12, PAGE).unwrap(), &page[..], "PFN {pfn:#x}");
    }
    // The dump's header is the machine's: same DTB and KDBG.
    assert_eq!(get_u64(&dump, 0x10), f.dtb);
    assert_eq!(get_u64(&dump, 0x80), f.kdbg_va);
}

#[test]
fn signatures_and_x86() {
    let f = machine("x64-22000");
    let base = HiberSpec::new(HiberVersion::Win11_22000, HiberCodec::Lz77, 5);
    let (wake, t) = write(
        &f,
        &HiberSpec {
            signature: HiberSignature::Wake,
            ..base
        },
        "wake",
    );
    assert_eq!(&wake[0..4], b"WAKE");
    check(&wake, &t, &raw_image(&f, "wake"));
    let (hibr, _) = write(&f, &base, "hibr");
    let (wiped, tw) = write(
        &f,
        &HiberSpec {
            signature: HiberSignature::Wiped,
            ..base
        },
        "wiped",
    );
    assert!(wiped[..PAGE].iter().all(|&b| b == 0));
    assert_eq!(wiped[PAGE..], hibr[PAGE..]);
    assert_eq!(tw.signature, HiberSignature::Wiped);
    let x86 = forge(&Config::x86_pae());
    let err = x86
        .write_hiberfil(&temp_path("x86.sys"), &base)
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
}

#[test]
fn for_build_picks_the_layout_of_the_build() {
    let cases = [
        (7601, None),
        (9200, Some(0x360)),
        (9600, Some(0x360)),
        (10240, Some(0x3B0)),
        (10586, Some(0x3B0)),
        (14393, Some(0x3C8)),
        (17763, Some(0x3E0)),
        (19041, Some(0x3E0)),
        (20348, Some(0x448)),
        (22000, Some(0x448)),
        (22621, Some(0x448)),
        (26100, Some(0x4D8)),
    ];
    for (build, len) in cases {
        assert_eq!(
            HiberVersion::for_build(build).map(|v| v.layout().length_self),
            len,
            "build {build}"
        );
    }
}

/// The ISF's PO_MEMORY_IMAGE (size, field offsets) and _PO_HIBER_PERF.KernelPagesProcessed.
fn isf_po_memory_image(path: &Path) -> Option<(u64, BTreeMap<String, u64>, u64)> {
    let out = std::process::Command::new("xz")
        .args(["-dc"])
        .arg(path)
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let ut = &v["user_types"];
    let pmi = &ut["PO_MEMORY_IMAGE"];
    let size = pmi["size"].as_u64()?;
    let fields = pmi["fields"]
        .as_object()?
        .iter()
        .map(|(k, f)| (k.clone(), f["offset"].as_u64().unwrap()))
        .collect();
    let kpp = ut["_PO_HIBER_PERF"]["fields"]["KernelPagesProcessed"]["offset"].as_u64()?;
    Some((size, fields, kpp))
}

#[test]
fn header_offsets_match_the_isf_types() {
    // shared/ beside the checkout, as tests/symbols.rs finds it.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/isf");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("SKIPPED: no ISF directory at {}", dir.display());
        return;
    };
    if std::process::Command::new("xz")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("SKIPPED: xz is not installed (the ISFs are .json.xz)");
        return;
    }
    let mut checked = BTreeSet::new();
    for e in entries.flatten() {
        let path = e.path();
        if !path.to_string_lossy().ends_with(".json.xz") {
            continue;
        }
        let Some((size, f, kpp)) = isf_po_memory_image(&path) else {
            continue;
        };
        let Some(v) = HiberVersion::ALL
            .into_iter()
            .find(|v| u64::from(v.layout().length_self) == size)
        else {
            // Windows 7's PO_MEMORY_IMAGE (0x128) belongs to the older format.
            assert!(!f.contains_key("FirstKernelRestorePage"), "{path:?}");
            continue;
        };
        let l = v.layout();
        let at = |name: &str| f[name] as usize;
        assert_eq!(at("Signature"), crate::HIBER_SIGNATURE_OFFSET);
        assert_eq!(at("ImageType"), crate::HIBER_IMAGE_TYPE_OFFSET);
        assert_eq!(at("CheckSum"), crate::HIBER_CHECKSUM_OFFSET);
        assert_eq!(at("LengthSelf"), crate::HIBER_LENGTH_SELF_OFFSET);
        assert_eq!(at("PageSize"), crate::HIBER_PAGE_SIZE_OFFSET);
        assert_eq!(at("SystemTime"), crate::HIBER_SYSTEM_TIME_OFFSET);
        assert_eq!(at("InterruptTime"), crate::HIBER_INTERRUPT_TIME_OFFSET);
        assert_eq!(at("FeatureFlags"), crate::HIBER_FEATURE_FLAGS_OFFSET);
        assert_eq!(
            at("NumPagesForLoader"),
            crate::HIBER_NUM_PAGES_FOR_LOADER_OFFSET
        );
        assert_eq!(at("FirstBootRestorePage"), l.first_boot_restore_page);
        assert_eq!(at("FirstKernelRestorePage"), l.first_kernel_restore_page);
        assert_eq!(at("PerfInfo") + kpp as usize, l.kernel_pages_processed);
        assert_eq!(at("HighestPhysicalPage"), l.highest_physical_page);
        assert_eq!(Some(at("Hiberboot")), l.hiberboot);
        checked.insert(v);
    }
    println!("ISF-checked versions: {checked:?}");
    assert_eq!(
        checked,
        BTreeSet::from([
            HiberVersion::Win8,
            HiberVersion::Win10_1607,
            HiberVersion::Win10_1809
        ]),
        "the ISFs of 9600, 14393 and 17763/19041 are in {}",
        dir.display()
    );
}
