//! Unit tests of the forge. `walk` below is a small reader written from the reference (§1.1,
//! §1.2, §1.2a, §1.5) that checks every probe against the file bytes; the independent Python
//! reader and kdmp-parser live in tests/interop/.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::util::{get_u32, get_u64};
use crate::{forge, Arch, BitmapSig, Config, Expect, Forged, Layout};

fn bitmap(cfg: Config, sig: BitmapSig, dump_type: u32) -> Config {
    Config {
        layout: Layout::Bitmap { sig, dump_type },
        ..cfg
    }
}

fn all_small_configs() -> Vec<Config> {
    let mut v = Vec::new();
    for base in [Config::x64(), Config::x86_pae(), Config::x86_nonpae()] {
        v.push(base.clone());
        v.push(bitmap(base.clone(), BitmapSig::Sdmp, 5));
        v.push(bitmap(base, BitmapSig::Fdmp, 6));
    }
    v
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("etwdump-forge-{}-{name}", std::process::id()))
}

/// Minimal reader of a forged file (header + runs/bitmap + page walk).
struct Walk<'a> {
    file: &'a [u8],
    x64: bool,
    pae: bool,
    dtb: u64,
    /// pfn -> file offset
    pages: HashMap<u64, usize>,
}

impl<'a> Walk<'a> {
    fn new(file: &'a [u8]) -> Self {
        let x64 = &file[4..8] == b"DU64";
        let (hs, dtb, dump_type, pae) = if x64 {
            (
                0x2000usize,
                get_u64(file, 0x10),
                get_u32(file, 0xF98),
                false,
            )
        } else {
            assert_eq!(&file[4..8], b"DUMP");
            (
                0x1000,
                get_u32(file, 0x10) as u64,
                get_u32(file, 0xF88),
                file[0x5C] != 0,
            )
        };
        let mut pages = HashMap::new();
        if dump_type == 1 {
            let (n, runs_at, step) = if x64 {
                (get_u32(file, 0x88) as usize, 0x98, 16)
            } else {
                (get_u32(file, 0x64) as usize, 0x6C, 8)
            };
            let mut off = hs;
            for i in 0..n {
                let (base, count) = if x64 {
                    (
                        get_u64(file, runs_at + i * step),
                        get_u64(file, runs_at + i * step + 8),
                    )
                } else {
                    (
                        get_u32(file, runs_at + i * step) as u64,
                        get_u32(file, runs_at + i * step + 4) as u64,
                    )
                };
                for p in 0..count {
                    pages.insert(base + p, off);
                    off += 0x1000;
                }
            }
        } else {
            let first = get_u64(file, hs + 0x20) as usize;
            let bits = get_u64(file, hs + 0x30);
            let mut idx = 0;
            for pfn in 0..bits {
                if file[hs + 0x38 + (pfn / 8) as usize] >> (pfn % 8) & 1 == 1 {
                    pages.insert(pfn, first + idx * 0x1000);
                    idx += 1;
                }
            }
            assert_eq!(idx as u64, get_u64(file, hs + 0x28));
        }
        Walk {
            file,
            x64,
            pae,
            dtb,
            pages,
        }
    }

    fn phys(&self, pa: u64, n: usize) -> Option<&'a [u8]> {
        let off = *self.pages.get(&(pa >> 12))? + (pa & 0xFFF) as usize;
        Some(&self.file[off..off + n])
    }

    fn translate(&self, va: u64) -> Option<u64> {
        let (mut table, levels, esz, mask): (u64, &[(u32, u32)], usize, u64) = if self.x64 {
            (
                self.dtb & !0xFFF,
                &[(39, 9), (30, 9), (21, 9), (12, 9)],
                8,
                0x000F_FFFF_FFFF_F000,
            )
        } else if self.pae {
            (
                self.dtb,
                &[(30, 2), (21, 9), (12, 9)],
                8,
                0x000F_FFFF_FFFF_F000,
            )
        } else {
            (self.dtb & !0xFFF, &[(22, 10), (12, 10)], 4, 0xFFFF_F000)
        };
        for (depth, &(shift, bits)) in levels.iter().enumerate() {
            let idx = (va >> shift) & ((1 << bits) - 1);
            let raw = self.phys(table + idx * esz as u64, esz)?;
            let e = if esz == 8 {
                get_u64(raw, 0)
            } else {
                get_u32(raw, 0) as u64
            };
            let last = depth + 1 == levels.len();
            if e & 1 == 0 {
                return (last && e & (1 << 11) != 0 && e & (1 << 10) == 0)
                    .then_some((e & mask) | (va & 0xFFF));
            }
            let ps_allowed = !(last || self.pae && depth == 0);
            if ps_allowed && e & 0x80 != 0 {
                let size = 1u64 << shift;
                let base_mask = if esz == 4 {
                    0xFFC0_0000
                } else {
                    mask & !(size - 1)
                };
                return Some((e & base_mask) | (va & (size - 1)));
            }
            if last {
                return Some((e & mask) | (va & 0xFFF));
            }
            table = e & mask;
        }
        None
    }

    fn read(&self, va: u64, len: usize) -> Result<Vec<u8>, u64> {
        let mut out = Vec::new();
        let mut cur = va;
        while cur < va + len as u64 {
            let n = (0x1000 - (cur & 0xFFF)).min(va + len as u64 - cur) as usize;
            let bytes = self
                .translate(cur)
                .and_then(|pa| self.phys(pa, n))
                .ok_or(cur)?;
            out.extend_from_slice(bytes);
            cur += n as u64;
        }
        Ok(out)
    }
}

fn check_probes(f: &Forged, file: &[u8]) {
    let w = Walk::new(file);
    for p in &f.probes {
        let got = match w.read(p.va, p.len) {
            Ok(b) => Expect::Bytes(b),
            Err(first) => Expect::Unreadable {
                first_unreadable_va: first,
            },
        };
        assert_eq!(
            got, p.expect,
            "{:?} {:?}: probe {}",
            f.config.arch, f.config.layout, p.name
        );
    }
}

#[test]
fn every_probe_reads_as_expected_in_every_small_config() {
    for cfg in all_small_configs() {
        let f = forge(&cfg);
        check_probes(&f, &f.to_bytes());
    }
}

#[test]
fn probe_outcomes_are_the_intended_ones() {
    for cfg in all_small_configs() {
        let f = forge(&cfg);
        let readable = |name: &str| -> bool {
            matches!(
                f.probe(name)
                    .unwrap_or_else(|| panic!("probe {name}"))
                    .expect,
                Expect::Bytes(_)
            )
        };
        for name in [
            "plain_page",
            "cross_page_noncontiguous",
            "transition_pte",
            "pte_flag_bits",
            "cross_into_large_page",
            "kernel_mz_header",
            "kernel_pe_header_page",
            "kdbg",
            "kdbg_block",
            "debug_directory",
            "rsds_record",
            "nt_build_lab",
            "ps_loaded_module_list_head",
            "ps_active_process_head",
            "ldr_entry_ntoskrnl",
            "kuser_shared_data",
            "kuser_nt_version",
            "kuser_user_alias",
            "page_table_via_self_map",
        ] {
            assert!(readable(name), "{name} readable in {cfg:?}");
        }
        for name in [
            "prototype_pte",
            "prototype_pte_with_bit11",
            "zero_pte",
            "valid_pte_page_not_in_dump",
            "valid_pte_memory_hole",
            "read_into_zero_pte",
            "read_into_page_not_in_dump",
            "transition_pde_not_last_level",
            "pde_zero",
            "pde_not_present",
            "kernel_image_unmapped_page",
        ] {
            assert!(!readable(name), "{name} unreadable in {cfg:?}");
        }
        let large = if cfg.arch == Arch::X86NonPae {
            "large_page_4m"
        } else {
            "large_page_2m"
        };
        assert!(readable(large));
        assert_eq!(f.probe("huge_page_1g").is_some(), cfg.arch == Arch::X64);
        if cfg.arch == Arch::X64 {
            assert!(readable("huge_page_1g"));
        }
        // Never written: zeros in a full dump, absent from a bitmap dump.
        assert_eq!(
            readable("large_page_untouched_part"),
            !cfg.layout.is_bitmap()
        );
        // Reads that run into an unreadable page stop at that page.
        for name in ["read_into_zero_pte", "read_into_page_not_in_dump"] {
            let p = f.probe(name).unwrap();
            let Expect::Unreadable {
                first_unreadable_va,
            } = p.expect
            else {
                unreachable!()
            };
            assert!(first_unreadable_va > p.va && first_unreadable_va % 0x1000 == 0);
        }
        // The MZ and KDBG probes carry their magic.
        let Expect::Bytes(mz) = &f.probe("kernel_mz_header").unwrap().expect else {
            unreachable!()
        };
        assert_eq!(&mz[..2], b"MZ");
        let Expect::Bytes(k) = &f.probe("kdbg").unwrap().expect else {
            unreachable!()
        };
        assert_eq!(&k[0x10..0x14], b"KDBG");
    }
}

#[test]
fn cross_page_probe_uses_non_adjacent_physical_pages() {
    for cfg in [Config::x64(), Config::x86_pae(), Config::x86_nonpae()] {
        let f = forge(&cfg);
        let p = f.probe("cross_page_noncontiguous").unwrap();
        let a = f.physical_address(p.va).unwrap() >> 12;
        let b = f.physical_address(p.va + p.len as u64 - 1).unwrap() >> 12;
        assert!(a.abs_diff(b) > 1, "{a:#x} {b:#x}");
    }
}

#[test]
fn x64_header_fields() {
    let cfg = Config::x64();
    let f = forge(&cfg);
    let b = f.to_bytes();
    assert_eq!(&b[0..8], b"PAGEDU64");
    assert_eq!(get_u32(&b, 0x8), 0xF);
    assert_eq!(get_u32(&b, 0xC), 19041);
    assert_eq!(get_u64(&b, 0x10), 0x1AD000);
    assert_eq!(get_u64(&b, 0x18), f.pfn_database);
    assert_eq!(get_u64(&b, 0x20), f.ps_loaded_module_list);
    assert_eq!(get_u64(&b, 0x28), f.ps_active_process_head);
    assert_eq!(get_u32(&b, 0x30), 0x8664);
    assert_eq!(get_u32(&b, 0x34), 4);
    assert_eq!(get_u32(&b, 0x38), 0x1000_007E);
    assert_eq!(&b[0x3C..0x40], b"PAGE");
    assert_eq!(get_u64(&b, 0x40), 0xFFFF_FFFF_C000_0005);
    assert_eq!(get_u64(&b, 0x80), f.kdbg_va);
    assert_eq!(get_u32(&b, 0x88) as usize, f.runs.len());
    assert_eq!(get_u64(&b, 0x90), f.runs.iter().map(|r| r.1).sum::<u64>());
    assert_eq!(get_u64(&b, 0x98), 1);
    assert_eq!(get_u32(&b, 0x348 + 0x34), 0x1F80);
    assert_eq!(get_u32(&b, 0x348 + 0x118), 0x1F80);
    assert_eq!(get_u32(&b, 0xF98), 1);
    assert_eq!(get_u64(&b, 0xFA0), f.file_len());
    assert_eq!(get_u64(&b, 0xFA8), 132_583_451_029_877_657);
    assert_eq!(get_u64(&b, 0x1030), 37_470_697);
    assert_eq!(get_u32(&b, 0x1040), 1);
    assert_eq!(get_u32(&b, 0x1044), 0x110);
    assert_eq!(&b[0x1050..0x1054], b"PAGE");
    assert_eq!(&b[0x1FFC..0x2000], b"PAGE");
    assert_eq!(f.file_len(), 0x2000 + f.stored_pages * 0x1000);
    assert_eq!(f.kuser_va, 0xFFFF_F780_0000_0000);
    assert_eq!(f.modules[0].base_name, "ntoskrnl.exe");
    assert_eq!(
        f.modules[0].full_name,
        "\\SystemRoot\\system32\\ntoskrnl.exe"
    );
    assert_eq!(f.modules[0].base, cfg.kernel_base);
    assert_eq!(f.nt_build_lab, "19041.1.amd64fre.vb_release.191206-1406");
    // RVAs of the real 19041 kernel (§2.2).
    assert_eq!(f.kdbg_va - cfg.kernel_base, 0xC0_0B20);
    assert_eq!(f.ps_loaded_module_list - cfg.kernel_base, 0xC2_A390);
    assert_eq!(f.pfn_database - cfg.kernel_base, 0xCF_C500);
}

#[test]
fn x86_header_fields() {
    for (cfg, pae) in [(Config::x86_pae(), 1u8), (Config::x86_nonpae(), 0)] {
        let f = forge(&cfg);
        let b = f.to_bytes();
        assert_eq!(&b[0..8], b"PAGEDUMP");
        assert_eq!(b[0x5C], pae);
        assert_eq!(get_u32(&b, 0x10) as u64, f.dtb);
        if pae == 1 {
            assert_eq!(f.dtb & 0xFFF, 0x1A0, "PAE PDPT not page aligned");
        } else {
            assert_eq!(f.dtb & 0xFFF, 0);
        }
        assert_eq!(get_u32(&b, 0x20), 0x14C);
        assert_eq!(get_u32(&b, 0x2C), 0xC000_0005);
        assert_eq!(get_u32(&b, 0x60) as u64, f.kdbg_va);
        assert_eq!(get_u32(&b, 0x64) as usize, f.runs.len());
        assert_eq!(get_u32(&b, 0x6C), 1);
        assert_eq!(get_u32(&b, 0xF88), 1);
        assert_eq!(get_u64(&b, 0xFA0), f.file_len());
        assert_eq!(get_u64(&b, 0xFC0), cfg.system_time);
        assert_eq!(f.file_len(), 0x1000 + f.stored_pages * 0x1000);
        assert_eq!(f.kuser_va, 0xFFDF_0000);
        // KDBG pointers are sign-extended.
        let Expect::Bytes(k) = &f.probe("kdbg").unwrap().expect else {
            unreachable!()
        };
        assert_eq!(get_u64(k, 0x18), 0xFFFF_FFFF_82A0_0000);
    }
}

#[test]
fn bitmap_summary_header() {
    for (arch_cfg, hs) in [(Config::x64(), 0x2000usize), (Config::x86_pae(), 0x1000)] {
        for (sig, ty) in [(BitmapSig::Sdmp, 5), (BitmapSig::Fdmp, 6)] {
            let f = forge(&bitmap(arch_cfg.clone(), sig, ty));
            let b = f.to_bytes();
            let dt_off = if hs == 0x2000 { 0xF98 } else { 0xF88 };
            assert_eq!(get_u32(&b, dt_off), ty);
            assert_eq!(&b[hs..hs + 4], sig.magic());
            assert_eq!(&b[hs + 4..hs + 8], b"DUMP");
            let first = get_u64(&b, hs + 0x20);
            let present = get_u64(&b, hs + 0x28);
            let bits = get_u64(&b, hs + 0x30);
            assert_eq!(first % 0x1000, 0);
            assert_eq!(bits, arch_cfg.physical_memory_bytes / 0x1000);
            let set: u32 = b[hs + 0x38..hs + 0x38 + (bits / 8) as usize]
                .iter()
                .map(|x| x.count_ones())
                .sum();
            assert_eq!(set as u64, present);
            assert_eq!(present, f.stored_pages);
            assert_eq!(f.file_len(), first + present * 0x1000);
            // Run list kept in the header as a real bitmap dump does.
            let runs_at = if hs == 0x2000 { 0x88 } else { 0x64 };
            assert_eq!(get_u32(&b, runs_at) as usize, f.runs.len());
        }
    }
}

#[test]
fn write_to_equals_to_bytes() {
    for cfg in [
        Config::x64(),
        bitmap(Config::x64(), BitmapSig::Sdmp, 5),
        Config::x86_nonpae(),
    ] {
        let f = forge(&cfg);
        let path = temp_path("eq.dmp");
        f.write_to(&path).unwrap();
        let written = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(written, f.to_bytes());
    }
}

#[test]
fn forging_is_deterministic() {
    let cfg = bitmap(Config::x64(), BitmapSig::Sdmp, 5);
    assert_eq!(forge(&cfg).to_bytes(), forge(&cfg).to_bytes());
}

#[test]
fn sample_is_small() {
    let f = forge(&bitmap(Config::x64(), BitmapSig::Sdmp, 5));
    assert!(f.file_len() <= 200 * 1024, "{}", f.file_len());
}

#[test]
fn sparse_16_gib_dumps() {
    use std::os::unix::fs::MetadataExt;
    for cfg in [
        Config::x64(),
        bitmap(Config::x64(), BitmapSig::Fdmp, 6),
        Config::x86_pae(),
    ] {
        let cfg = Config {
            physical_memory_bytes: 16 << 30,
            ..cfg
        };
        let f = forge(&cfg);
        let path = temp_path("16g.dmp");
        let t = Instant::now();
        f.write_to(&path).unwrap();
        let elapsed = t.elapsed();
        let meta = std::fs::metadata(&path).unwrap();
        let disk = meta.blocks() * 512;
        std::fs::remove_file(&path).unwrap();
        assert_eq!(meta.len(), f.file_len());
        assert!(elapsed.as_millis() < 500, "write took {elapsed:?}");
        assert!(disk < 8 << 20, "{disk} bytes on disk");
        if cfg.layout.is_bitmap() {
            // Header 0x2000 + summary 0x38 + bitmap of 4 Mi bits (0x80000 bytes), page aligned.
            assert_eq!(f.first_page_offset, 0x8_3000);
            assert_eq!(f.file_len(), 0x8_3000 + 0x1000 * f.stored_pages);
        } else {
            assert!(f.file_len() > 15 << 30);
            assert_eq!(f.stored_pages, f.runs.iter().map(|r| r.1).sum::<u64>());
        }
        // Every PFN the forge uses lies below the memory size; the 1 GiB page sits at 8 GiB.
        if let Some(p) = f.probe("huge_page_1g") {
            let pa = f.physical_address(p.va).unwrap();
            assert!((8u64 << 30..9u64 << 30).contains(&pa));
        }
        for p in &f.probes {
            if let Some(pa) = f.physical_address(p.va) {
                assert!(pa < 16 << 30);
            }
        }
    }
}

#[test]
fn x86_nonpae_large_memory_stays_below_4_gib() {
    let f = forge(&Config {
        physical_memory_bytes: 8 << 30,
        ..Config::x86_nonpae()
    });
    for p in &f.probes {
        if let Some(pa) = f.physical_address(p.va) {
            assert!(pa < 1 << 32, "{} at {pa:#x}", p.name);
        }
    }
}

#[test]
fn large_memory_probes_read_correctly_through_the_file() {
    // 2 GiB bitmap dump: small file, whole probe set checked against the bytes.
    for base in [Config::x64(), Config::x86_pae()] {
        let f = forge(&bitmap(
            Config {
                physical_memory_bytes: 2 << 30,
                ..base
            },
            BitmapSig::Sdmp,
            5,
        ));
        check_probes(&f, &f.to_bytes());
    }
}

#[test]
fn encoded_kdbg_has_no_tag() {
    for base in [Config::x64(), Config::x86_pae()] {
        let f = forge(&Config {
            kdbg_decoded: false,
            ..base
        });
        let Expect::Bytes(k) = &f.probe("kdbg").unwrap().expect else {
            unreachable!()
        };
        assert_ne!(&k[0x10..0x14], b"KDBG");
        assert!(!f.to_bytes().windows(4).any(|w| w == b"KDBG"));
        check_probes(&f, &f.to_bytes());
    }
}

#[test]
fn omitted_debug_directory_page_is_unreadable() {
    for cfg in [
        Config::x64(),
        bitmap(Config::x64(), BitmapSig::Sdmp, 5),
        Config::x86_pae(),
    ] {
        let f = forge(&Config {
            omit_debug_directory_page: true,
            ..cfg
        });
        for name in ["debug_directory", "rsds_record"] {
            assert!(matches!(
                f.probe(name).unwrap().expect,
                Expect::Unreadable { .. }
            ));
        }
        // ... but the header page (with DataDirectory[6]) is there.
        assert!(matches!(
            f.probe("kernel_pe_header_page").unwrap().expect,
            Expect::Bytes(_)
        ));
        check_probes(&f, &f.to_bytes());
    }
}

#[test]
fn dtb_low_bits_are_in_the_header_only() {
    let f = forge(&Config {
        dtb_low_bits: 0x2,
        ..Config::x64()
    });
    assert_eq!(f.dtb, 0x1AD002);
    assert_eq!(get_u64(&f.to_bytes(), 0x10), 0x1AD002);
    check_probes(&f, &f.to_bytes());
}

#[test]
fn expected_read_matches_probes() {
    let f = forge(&Config::x86_pae());
    for p in &f.probes {
        assert_eq!(f.expected_read(p.va, p.len), p.expect);
    }
}
