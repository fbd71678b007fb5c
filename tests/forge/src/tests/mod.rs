//! Unit tests of the forge. `walk` below is a small reader written from the reference (§1.1,
//! §1.2, §1.2a, §1.5) that checks every probe against the file bytes; the independent Python
//! reader and kdmp-parser live in tests/interop/.

mod cpu_clock;
mod etw;
mod etw_buffers;
mod etw_pending;
mod hiberfil;
mod images;
mod message;
mod processes;
mod providers;
mod realtime;
mod scan;
mod self_map;
mod triage;
mod triage_arm64;
mod user_images;
mod variation;

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
pub(super) struct Walk<'a> {
    file: &'a [u8],
    x64: bool,
    pae: bool,
    dtb: u64,
    /// pfn -> file offset
    pages: HashMap<u64, usize>,
}

impl<'a> Walk<'a> {
    pub(super) fn new(file: &'a [u8]) -> Self {
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

    pub(super) fn read(&self, va: u64, len: usize) -> Result<Vec<u8>, u64> {
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

pub(super) fn check_probes(f: &Forged, file: &[u8]) {
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

// ------------------------------------------------------------------------------------------
// Fixture kernels (tests/fixtures/<name>/): the expectations below come from symbols.json and
// ntoskrnl.exe read here with serde_json and by hand, and the dump is read back with `Walk`.

pub(super) fn fixture_dirs() -> Vec<PathBuf> {
    let dirs = crate::fixture_dirs(&crate::default_fixtures_root());
    assert!(
        dirs.len() >= 7,
        "fixtures missing in {}",
        crate::default_fixtures_root().display()
    );
    dirs
}

/// The fixture directory `tests/fixtures/<name>`.
pub(super) fn fixture_dir(name: &str) -> PathBuf {
    fixture_dirs()
        .into_iter()
        .find(|d| d.ends_with(name))
        .unwrap_or_else(|| panic!("{name} fixture"))
}

fn symbols_json(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("symbols.json")).unwrap()).unwrap()
}

fn hexv(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::String(s) => {
            u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
        }
        other => other.as_u64().unwrap(),
    }
}

fn json_symbols(j: &serde_json::Value) -> Vec<(String, u64)> {
    j["symbols"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), hexv(v)))
        .collect()
}

/// A pointer-sized value: 8 bytes on x64, 4 on x86.
fn ptr_at(w: &Walk, x64: bool, va: u64) -> u64 {
    let b = w.read(va, if x64 { 8 } else { 4 }).unwrap();
    if x64 {
        get_u64(&b, 0)
    } else {
        get_u32(&b, 0) as u64
    }
}

/// KDBG / KdVersionBlock pointers: x86 addresses sign-extended.
fn kd_ptr(x64: bool, va: u64) -> u64 {
    if x64 {
        va
    } else {
        crate::util::sign_extend32(va)
    }
}

#[test]
fn fixture_config_takes_build_pdb_and_arch_from_symbols_json() {
    for dir in fixture_dirs() {
        let j = symbols_json(&dir);
        let cfg = Config::from_fixture(&dir);
        let x64 = j["arch"] == "x64";
        assert_eq!(cfg.arch, if x64 { Arch::X64 } else { Arch::X86Pae });
        assert_eq!(cfg.layout, Layout::Full);
        assert_eq!(u64::from(cfg.build), hexv(&j["build"]));
        assert_eq!(cfg.pdb_name, j["pdb"]["name"].as_str().unwrap());
        assert_eq!(
            crate::guid_to_string(&cfg.pdb_guid),
            j["pdb"]["guid"].as_str().unwrap()
        );
        assert_eq!(u64::from(cfg.pdb_age), hexv(&j["pdb"]["age"]));
        let base = if x64 {
            0xFFFF_F804_7BA0_0000
        } else {
            0x82A0_0000
        };
        assert_eq!(cfg.kernel_base, base);
    }
}

#[test]
fn fixture_dumps_read_back_probe_by_probe() {
    for dir in fixture_dirs() {
        let cfg = Config::from_fixture(&dir);
        let mut variants = vec![cfg.clone(), bitmap(cfg.clone(), BitmapSig::Sdmp, 5)];
        if cfg.arch == Arch::X86Pae {
            variants.push(Config {
                arch: Arch::X86NonPae,
                ..cfg.clone()
            });
        }
        for c in variants {
            let f = forge(&c);
            check_probes(&f, &f.to_bytes());
            // Every image page is mapped; the page after SizeOfImage is not.
            let p = f.probe("kernel_image_unmapped_page").unwrap();
            assert!(matches!(p.expect, Expect::Unreadable { .. }), "{dir:?}");
            for name in [
                "kernel_pe_header_page",
                "kdbg_block",
                "rsds_record",
                "kd_version_block",
                "ke_number_processors",
                "ki_processor_block",
                "etwp_debugger_data",
                "mm_pfn_database_variable",
            ] {
                let p = f.probe(name).unwrap_or_else(|| panic!("{name}"));
                assert!(matches!(p.expect, Expect::Bytes(_)), "{name} {dir:?}");
            }
        }
    }
}

#[test]
fn fixture_rsds_in_the_mapped_image_is_the_fixtures() {
    for dir in fixture_dirs() {
        let j = symbols_json(&dir);
        let f = forge(&Config::from_fixture(&dir));
        let file = f.to_bytes();
        let w = Walk::new(&file);
        let base = f.config.kernel_base;
        let x64 = f.config.arch.is_x64();
        // PE header -> DataDirectory[DEBUG] -> CodeView entry -> RSDS by AddressOfRawData.
        let hdr = w.read(base, 0x1000).unwrap();
        assert_eq!(&hdr[..2], b"MZ");
        let pe = get_u32(&hdr, 0x3C) as usize;
        let opt = pe + 24;
        let dirs = opt + if x64 { 112 } else { 96 };
        let (dbg_rva, dbg_size) = (get_u32(&hdr, dirs + 48), get_u32(&hdr, dirs + 52));
        let dd = w.read(base + dbg_rva as u64, dbg_size as usize).unwrap();
        let cv = dd
            .chunks(28)
            .find(|e| get_u32(e, 12) == 2)
            .expect("CodeView entry");
        let (len, rva) = (get_u32(cv, 16), get_u32(cv, 20));
        assert_eq!(base + rva as u64, f.rsds_va);
        let rsds = w.read(base + rva as u64, len as usize).unwrap();
        assert_eq!(&rsds[..4], b"RSDS");
        let guid: [u8; 16] = rsds[4..20].try_into().unwrap();
        assert_eq!(
            crate::guid_to_string(&guid),
            j["pdb"]["guid"].as_str().unwrap(),
            "{dir:?}"
        );
        assert_eq!(u64::from(get_u32(&rsds, 20)), hexv(&j["pdb"]["age"]));
        let name: Vec<u8> = rsds[24..].iter().copied().take_while(|&c| c != 0).collect();
        assert_eq!(name, j["pdb"]["name"].as_str().unwrap().as_bytes());
        // The whole file copy of the headers is there (SizeOfHeaders bytes).
        let exe = std::fs::read(dir.join("ntoskrnl.exe")).unwrap();
        let soh = get_u32(&exe, opt + 60) as usize;
        let image_base_off = opt + if x64 { 24 } else { 28 };
        assert_eq!(hdr[..image_base_off], exe[..image_base_off]);
        assert_eq!(hdr[image_base_off + 8..soh], exe[image_base_off + 8..soh]);
        // ... except ImageBase, which is the load address.
        if x64 {
            assert_eq!(get_u64(&hdr, image_base_off), base);
        } else {
            assert_eq!(get_u32(&hdr, image_base_off) as u64, base);
        }
    }
}

#[test]
fn fixture_relocations_are_applied_for_the_new_base() {
    for dir in fixture_dirs() {
        let j = symbols_json(&dir);
        let exe = std::fs::read(dir.join("ntoskrnl.exe")).unwrap();
        let f = forge(&Config::from_fixture(&dir));
        let file = f.to_bytes();
        let w = Walk::new(&file);
        let base = f.config.kernel_base;
        let x64 = f.config.arch.is_x64();
        let pe = get_u32(&exe, 0x3C) as usize;
        let opt = pe + 24;
        let file_base = if x64 {
            get_u64(&exe, opt + 24)
        } else {
            get_u32(&exe, opt + 28) as u64
        };
        let delta = base.wrapping_sub(file_base);
        // RVA -> file offset from symbols.json's section table.
        let sections = j["sections"].as_array().unwrap();
        let file_off = |rva: u64| -> usize {
            let s = sections
                .iter()
                .find(|s| {
                    let r = hexv(&s["rva"]);
                    rva >= r && rva < r + hexv(&s["raw_size"])
                })
                .expect("file-backed rva");
            (hexv(&s["raw_offset"]) + rva - hexv(&s["rva"])) as usize
        };
        // Base relocation blocks from the MAPPED image's DataDirectory[BASERELOC].
        let hdr = w.read(base, 0x1000).unwrap();
        let dirs = opt + if x64 { 112 } else { 96 };
        let (rel_rva, rel_size) = (get_u32(&hdr, dirs + 40), get_u32(&hdr, dirs + 44));
        let rel = w.read(base + rel_rva as u64, rel_size as usize).unwrap();
        let list_head = hexv(&j["symbols"]["PsLoadedModuleList"]);
        let mut n = 0;
        let mut off = 0;
        while off + 8 <= rel.len() {
            let page = get_u32(&rel, off) as u64;
            let size = get_u32(&rel, off + 4) as usize;
            for i in 0..(size - 8) / 2 {
                let e = u16::from_le_bytes([rel[off + 8 + 2 * i], rel[off + 9 + 2 * i]]);
                let rva = page + (e & 0xFFF) as u64;
                match e >> 12 {
                    0 => continue,
                    10 => assert!(x64, "DIR64 in an x86 image"),
                    3 => assert!(!x64, "HIGHLOW in the x64 fixtures"),
                    t => panic!("relocation type {t}"),
                }
                // PsLoadedModuleList is overwritten with the module list; everything else
                // relocated holds its file value + delta.
                if (list_head..list_head + 2 * if x64 { 8 } else { 4 }).contains(&rva) {
                    continue;
                }
                let orig = if x64 {
                    get_u64(&exe, file_off(rva))
                } else {
                    get_u32(&exe, file_off(rva)) as u64
                };
                let want = if x64 {
                    orig.wrapping_add(delta)
                } else {
                    (orig as u32).wrapping_add(delta as u32) as u64
                };
                assert_eq!(
                    ptr_at(&w, x64, base + rva),
                    want,
                    "{dir:?} reloc at {rva:#x}"
                );
                assert_ne!(orig, want);
                n += 1;
            }
            off += size;
        }
        assert!(n >= 2, "{dir:?}: only {n} relocations checked");
        // The self-pointing PsActiveProcessHead is a relocated pointer to itself.
        let pah = base + hexv(&j["symbols"]["PsActiveProcessHead"]);
        assert_eq!(ptr_at(&w, x64, pah), pah);
    }
}

#[test]
fn fixture_symbols_land_inside_sections_and_are_mapped() {
    for dir in fixture_dirs() {
        let j = symbols_json(&dir);
        let f = forge(&Config::from_fixture(&dir));
        let file = f.to_bytes();
        let w = Walk::new(&file);
        let base = f.config.kernel_base;
        let sections = j["sections"].as_array().unwrap();
        for (name, rva) in json_symbols(&j) {
            let s = sections
                .iter()
                .find(|s| {
                    let r = hexv(&s["rva"]);
                    rva >= r && rva < r + hexv(&s["virtual_size"])
                })
                .unwrap_or_else(|| panic!("{dir:?}: {name} at {rva:#x} in no section"));
            assert_eq!(f.symbols[&name], base + rva, "{dir:?} {name}");
            // Code: the entry point, the types anchor and the ETW clock routines of
            // extra_globals.py; everything else (handles, EtwpGuidHashTable too) is data.
            let routines = &j["extra_globals"]["clock_routines"];
            let routine = routines
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == name.as_str());
            let expected_section = match name.as_str() {
                "KiSystemStartup" | "EtwdumpFixtureTypeAnchor" => ".text",
                _ if routine => ".text",
                _ => ".data",
            };
            assert_eq!(s["name"], expected_section, "{name}");
            assert!(w.read(base + rva, 1).is_ok(), "{dir:?} {name} mapped");
        }
        // x86 publics carry the leading underscore and agree with the undecorated names.
        if j["arch"] == "x86" {
            for (name, rva) in json_symbols(&j) {
                assert_eq!(hexv(&j["publics"][format!("_{name}")]), rva);
            }
        }
        // The forge's own variables sit in .data's last page, after its VirtualSize.
        let data = sections.iter().find(|s| s["name"] == ".data").unwrap();
        let data_end = hexv(&data["rva"]) + hexv(&data["virtual_size"]);
        for name in ["MmPfnDatabase", "KdpDebuggerDataListHead", "CmNtCSDVersion"] {
            let rva = f.symbols[name] - base;
            assert!(
                rva >= data_end && rva < (data_end + 0xFFF) & !0xFFF,
                "{name}"
            );
        }
        // The storage of the silo / logger globals is mapped and left zero.
        for (name, len) in [
            ("EtwpHostSiloState", 8),
            ("PspHostSiloGlobals", 0x40),
            ("WmipLoggerContext", 0x100),
        ] {
            if let Some(&va) = f.symbols.get(name) {
                assert!(w.read(va, len).unwrap().iter().all(|&b| b == 0), "{name}");
            }
        }
    }
}

#[test]
fn fixture_kernel_objects_point_where_the_header_says() {
    for dir in fixture_dirs() {
        let j = symbols_json(&dir);
        let cfg = Config::from_fixture(&dir);
        let f = forge(&cfg);
        let file = f.to_bytes();
        let w = Walk::new(&file);
        let x64 = cfg.arch.is_x64();
        let base = cfg.kernel_base;
        let sym = |n: &str| base + hexv(&j["symbols"][n]);
        // Header.
        let (kdbg_off, list_off, pah_off, pfn_off) = if x64 {
            (0x80, 0x20, 0x28, 0x18)
        } else {
            (0x60, 0x18, 0x1C, 0x14)
        };
        let hdr = |off: usize| {
            if x64 {
                get_u64(&file, off)
            } else {
                get_u32(&file, off) as u64
            }
        };
        assert_eq!(hdr(kdbg_off), sym("KdDebuggerDataBlock"));
        assert_eq!(hdr(list_off), sym("PsLoadedModuleList"));
        assert_eq!(hdr(pah_off), sym("PsActiveProcessHead"));
        assert_eq!(hdr(pfn_off), f.symbols["MmPfnDatabase"]);
        assert_eq!(f.kdbg_va, sym("KdDebuggerDataBlock"));
        // KDBG.
        let k = w.read(sym("KdDebuggerDataBlock"), 0x340).unwrap();
        assert_eq!(&k[0x10..0x14], b"KDBG");
        let size = get_u32(&k, 0x14);
        assert_eq!(size, if cfg.build >= 19041 { 0x380 } else { 0x340 });
        let list_head = f.symbols["KdpDebuggerDataListHead"];
        for (off, want) in [
            (0x00, list_head),
            (0x18, base),
            (0x48, sym("PsLoadedModuleList")),
            (0x50, sym("PsActiveProcessHead")),
            (0xC0, f.symbols["MmPfnDatabase"]),
            (0x208, sym("NtBuildLabEx")),
            (0x218, sym("KiProcessorBlock")),
            (0x268, f.symbols["CmNtCSDVersion"]),
            (0x330, sym("EtwpDebuggerData")),
        ] {
            assert_eq!(get_u64(&k, off), kd_ptr(x64, want), "{dir:?} KDBG+{off:#x}");
        }
        assert_eq!(ptr_at(&w, x64, list_head), sym("KdDebuggerDataBlock"));
        assert_eq!(
            ptr_at(&w, x64, f.symbols["MmPfnDatabase"]),
            f.mm_pfn_database_value
        );
        // NtBuildLab -> the fixture's own NtBuildLabEx string.
        let exe_lab = {
            let s = w.read(sym("NtBuildLabEx"), 0x80).unwrap();
            String::from_utf8(s.into_iter().take_while(|&c| c != 0).collect()).unwrap()
        };
        assert_eq!(exe_lab, f.nt_build_lab);
        assert!(exe_lab.starts_with(&format!("{}.", cfg.build)), "{exe_lab}");
        // KdVersionBlock (_DBGKD_GET_VERSION64).
        let v = w.read(sym("KdVersionBlock"), 0x28).unwrap();
        assert_eq!(u16::from_le_bytes([v[0], v[1]]), 0xF);
        assert_eq!(u16::from_le_bytes([v[2], v[3]]) as u32, cfg.build);
        let machine = u16::from_le_bytes([v[8], v[9]]);
        assert_eq!(machine, if x64 { 0x8664 } else { 0x14C });
        assert_eq!(get_u64(&v, 0x10), kd_ptr(x64, base));
        assert_eq!(get_u64(&v, 0x18), kd_ptr(x64, sym("PsLoadedModuleList")));
        assert_eq!(get_u64(&v, 0x20), kd_ptr(x64, list_head));
        // KeNumberProcessors, KiProcessorBlock and the KPRCBs.
        let n = w.read(sym("KeNumberProcessors"), 4).unwrap();
        assert_eq!(get_u32(&n, 0), cfg.cpus);
        assert_eq!(f.kprcbs.len(), cfg.cpus as usize);
        for (i, &prcb) in f.kprcbs.iter().enumerate() {
            let p = if x64 { 8 } else { 4 };
            assert_eq!(
                ptr_at(&w, x64, sym("KiProcessorBlock") + (i * p) as u64),
                prcb
            );
        }
        let kprcb_size = f.kprcb_size.expect("types.h gives sizeof(_KPRCB)");
        let types_h = std::fs::read_to_string(dir.join("types.h")).unwrap();
        assert!(types_h.contains(&format!("sizeof(struct _KPRCB) == {kprcb_size:#x}")));
        for &prcb in &f.kprcbs {
            let b = w.read(prcb, kprcb_size as usize).unwrap();
            assert!(b.iter().all(|&x| x == 0));
        }
        for pair in f.kprcbs.windows(2) {
            assert!(pair[0] + u64::from(kprcb_size) <= pair[1], "KPRCBs overlap");
        }
        // Module list: ntoskrnl.exe is the fixture image.
        assert_eq!(f.modules[0].base, base);
        assert_eq!(u64::from(f.modules[0].size), hexv(&j["image_size"]));
    }
}

#[test]
fn fixture_forging_is_deterministic() {
    let dir = &fixture_dirs()[0];
    let cfg = bitmap(Config::from_fixture(dir), BitmapSig::Sdmp, 5);
    assert_eq!(forge(&cfg).to_bytes(), forge(&cfg).to_bytes());
}

#[test]
fn fixture_load_rejects_an_inconsistent_fixture() {
    let src = fixture_dir("x64-19041");
    let tmp = temp_path("fixture-x64-19041");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::copy(src.join("ntoskrnl.exe"), tmp.join("ntoskrnl.exe")).unwrap();
    let text = std::fs::read_to_string(src.join("symbols.json")).unwrap();
    // Another GUID than the RSDS record's.
    let bad = text.replace(
        "E7D0F1C7-0064-0001-0000-000000019041",
        "E7D0F1C7-0064-0001-0000-000000019042",
    );
    std::fs::write(tmp.join("symbols.json"), bad).unwrap();
    let e = Config::try_from_fixture(&tmp).unwrap_err();
    assert!(e.to_string().contains("RSDS"), "{e}");
    // A symbol outside every section.
    let bad = text.replace(
        "\"KiProcessorBlock\": \"0x34a0\"",
        "\"KiProcessorBlock\": \"0x9000\"",
    );
    assert_ne!(bad, text);
    std::fs::write(tmp.join("symbols.json"), bad).unwrap();
    let e = Config::try_from_fixture(&tmp).unwrap_err();
    assert!(e.to_string().contains("KiProcessorBlock"), "{e}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
#[should_panic(expected = "PDB name/GUID/age are the fixture's")]
fn fixture_config_with_another_pdb_is_refused() {
    let dir = &fixture_dirs()[0];
    forge(&Config {
        pdb_age: 7,
        ..Config::from_fixture(dir)
    });
}
