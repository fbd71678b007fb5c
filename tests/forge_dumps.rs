//! The reader against forge dumps. The forge (tests/forge) was written from the reference
//! independently of the reader; each probe carries the bytes the forge put behind a virtual
//! address (or says the address must be unreadable, and where the first unreadable byte is).

mod common;
use common::{etwdump, info_json, Rng};
use etwdump::addr::VirtAddr;
use etwdump::dump::{Arch, DumpFile, OpenOptions};
use etwdump::mem::AddressSpace;
use etwdump_forge::{forge, BitmapSig, Config, Expect, Forged, Layout};

fn configs() -> Vec<(&'static str, Config)> {
    let bitmap = |sig, dump_type| {
        let mut c = Config::x64();
        c.layout = Layout::Bitmap { sig, dump_type };
        c
    };
    let mut pcid = Config::x64();
    pcid.dtb_low_bits = 0x2;
    vec![
        ("x64 full", Config::x64()),
        ("x64 bitmap SDMP 5", bitmap(BitmapSig::Sdmp, 5)),
        ("x64 bitmap FDMP 6", bitmap(BitmapSig::Fdmp, 6)),
        ("x64 full, DTB with PCID bits", pcid),
        ("x86 PAE full", Config::x86_pae()),
        ("x86 non-PAE full", Config::x86_nonpae()),
    ]
}

fn open(f: &Forged) -> DumpFile {
    DumpFile::from_bytes(f.to_bytes(), OpenOptions::default()).expect("forge dump opens")
}

/// Expected GUID text, formatted here from the raw bytes independently of the reader.
fn guid_text(g: &[u8; 16]) -> String {
    format!(
        "{:08X}-{:04X}-{:04X}-{:02X}{:02X}-{}",
        u32::from_le_bytes([g[0], g[1], g[2], g[3]]),
        u16::from_le_bytes([g[4], g[5]]),
        u16::from_le_bytes([g[6], g[7]]),
        g[8],
        g[9],
        g[10..]
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<String>()
    )
}

#[test]
fn every_probe_reads_as_forged() {
    for (name, c) in configs() {
        let f = forge(&c);
        let d = open(&f);
        assert!(d.warnings().is_empty(), "{name}: {:?}", d.warnings());
        let space = AddressSpace::kernel(&d);
        assert!(f.probes.len() >= 8, "{name}: too few probes");
        for p in &f.probes {
            let mut buf = vec![0u8; p.len];
            let r = space.read(VirtAddr::new(p.va), &mut buf);
            match (&p.expect, r) {
                (Expect::Bytes(e), Ok(())) => {
                    assert_eq!(&buf, e, "{name}: probe {} at {:#x}", p.name, p.va)
                }
                (Expect::Bytes(_), Err(e)) => {
                    panic!(
                        "{name}: probe {} at {:#x} must be readable: {e}",
                        p.name, p.va
                    )
                }
                (
                    Expect::Unreadable {
                        first_unreadable_va,
                    },
                    Err(e),
                ) => {
                    assert!(e.is_missing(), "{name}: probe {}: {e}", p.name);
                    assert_eq!(
                        e.va().map(|v| v.get()),
                        Some(*first_unreadable_va),
                        "{name}: probe {}: {e}",
                        p.name
                    );
                    // try_read turns a missing page into None.
                    assert_eq!(space.try_read(VirtAddr::new(p.va), &mut buf), Ok(None));
                }
                (Expect::Unreadable { .. }, Ok(())) => {
                    panic!("{name}: probe {} at {:#x} must be unreadable", p.name, p.va)
                }
            }
        }
    }
}

#[test]
fn info_matches_the_forge() {
    for (name, c) in configs() {
        let f = forge(&c);
        let d = open(&f);
        let r = etwdump::report::info::info(&d);
        let j = serde_json::to_value(&r).unwrap();
        let want_arch = match c.arch {
            etwdump_forge::Arch::X64 => "x64",
            etwdump_forge::Arch::X86Pae => "x86 (PAE)",
            etwdump_forge::Arch::X86NonPae => "x86 (non-PAE)",
        };
        assert_eq!(j["arch"], want_arch, "{name}");
        let dt = match c.layout {
            Layout::Full => 1,
            Layout::Bitmap { dump_type, .. } => dump_type,
        };
        assert_eq!(j["dump_type"]["value"], dt, "{name}");
        assert_eq!(j["header_minor_version"], c.build, "{name}");
        assert_eq!(j["windows"]["nt_major_version"], 10, "{name}");
        assert_eq!(j["windows"]["nt_minor_version"], 0, "{name}");
        assert_eq!(j["windows"]["nt_build_number"], c.build, "{name}");
        assert_eq!(j["windows"]["build_lab"], f.nt_build_lab.as_str(), "{name}");
        assert_eq!(j["processors"], c.cpus, "{name}");
        assert_eq!(
            j["bugcheck"]["code"],
            format!("{:#x}", c.bugcheck_code),
            "{name}"
        );
        for i in 0..4 {
            assert_eq!(
                j["bugcheck"]["parameters"][i],
                format!("{:#x}", c.bugcheck_params[i]),
                "{name}"
            );
        }
        assert_eq!(j["system_time_raw"], c.system_time, "{name}");
        assert_eq!(j["dtb"], format!("{:#x}", f.dtb), "{name}");
        assert_eq!(
            j["ps_loaded_module_list"],
            format!("{:#x}", f.ps_loaded_module_list),
            "{name}"
        );
        assert_eq!(
            j["ps_active_process_head"],
            format!("{:#x}", f.ps_active_process_head),
            "{name}"
        );
        assert_eq!(
            j["pfn_database"],
            format!("{:#x}", f.pfn_database),
            "{name}"
        );
        let k = &j["kd_debugger_data_block"];
        assert_eq!(k["address"], format!("{:#x}", f.kdbg_va), "{name}");
        assert_eq!(k["decoded"], true, "{name}");
        assert_eq!(k["kern_base"], format!("{:#x}", c.kernel_base), "{name}");
        let b = &j["kernel_base"];
        assert_eq!(b["address"], format!("{:#x}", c.kernel_base), "{name}");
        assert_eq!(b["source"], "PsLoadedModuleList", "{name}");
        assert_eq!(b["kdbg_agrees"], true, "{name}");
        let pdb = &j["kernel_pdb"];
        assert_eq!(pdb["name"], c.pdb_name.as_str(), "{name}");
        assert_eq!(pdb["guid"], guid_text(&c.pdb_guid), "{name}");
        assert_eq!(pdb["age"], c.pdb_age, "{name}");
        let m = &j["loaded_modules"];
        assert_eq!(m["count"], f.modules.len(), "{name}");
        assert_eq!(m["first"], f.modules[0].full_name.as_str(), "{name}");
        assert!(m["problem"].is_null(), "{name}: {}", m["problem"]);
        assert_eq!(
            j["memory"]["physical_pages_stored"], f.stored_pages,
            "{name}"
        );
        assert_eq!(j["warnings"], serde_json::json!([]), "{name}");
    }
}

#[test]
fn module_list_matches_the_forge() {
    for (name, c) in configs() {
        let f = forge(&c);
        let d = open(&f);
        let space = AddressSpace::kernel(&d);
        let head = d.header().ps_loaded_module_list;
        let l = etwdump::kernel::modules::walk(&space, head).unwrap();
        assert!(l.incomplete.is_none(), "{name}");
        assert_eq!(l.modules.len(), f.modules.len(), "{name}");
        for (got, want) in l.modules.iter().zip(&f.modules) {
            assert_eq!(got.base.get(), want.base, "{name}");
            assert_eq!(got.size, want.size, "{name}");
            assert_eq!(
                got.base_name.as_ref().map(|n| n.raw()),
                Some(want.base_name.as_str()),
                "{name}"
            );
            assert_eq!(
                got.full_name.as_ref().map(|n| n.raw()),
                Some(want.full_name.as_str()),
                "{name}"
            );
        }
        assert_eq!(
            d.header().arch == Arch::X64,
            matches!(c.arch, etwdump_forge::Arch::X64)
        );
    }
}

#[test]
fn encoded_kdbg_is_reported_not_trusted() {
    let mut c = Config::x64();
    c.kdbg_decoded = false;
    let f = forge(&c);
    let r = etwdump::report::info::info(&open(&f));
    assert!(!r.kd_debugger_data_block.decoded);
    assert!(r
        .kd_debugger_data_block
        .note
        .as_deref()
        .unwrap()
        .contains("no \"KDBG\" tag"));
    // The kernel base still comes from the module list; nothing to cross-check it with.
    assert_eq!(r.kernel_base.address, Some(format!("{:#x}", c.kernel_base)));
    assert_eq!(r.kernel_base.kdbg_agrees, None);
    assert!(r.kernel_pdb.is_some());
}

#[test]
fn missing_debug_directory_is_explained() {
    for mut c in [Config::x64(), Config::x86_pae()] {
        c.omit_debug_directory_page = true;
        let f = forge(&c);
        let r = etwdump::report::info::info(&open(&f));
        assert!(r.kernel_pdb.is_none());
        let why = r.kernel_pdb_unavailable.unwrap();
        assert!(why.starts_with("debug directory not in the dump"), "{why}");
        // The image headers are still read.
        assert!(r.kernel_image.is_some());
    }
}

#[test]
fn cli_info_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let c = Config::x86_pae();
    let f = forge(&c);
    let p = dir.path().join("x86.dmp");
    f.write_to(&p).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().len(), f.file_len());
    let j = info_json(&p);
    assert_eq!(j["arch"], "x86 (PAE)");
    assert_eq!(j["kernel_pdb"]["name"], c.pdb_name.as_str());
    let out = etwdump(&["info", p.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Paging                    x86 PAE"), "{text}");
    assert!(
        text.contains(&format!("Kernel PDB                {}", c.pdb_name)),
        "{text}"
    );
}

#[test]
fn committed_sample_is_the_forge_sample() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sample-x64.dmp");
    let committed = std::fs::read(&path).unwrap();
    let f = forge(&Config::sample());
    assert!(
        committed == f.to_bytes(),
        "tests/data/sample-x64.dmp differs from `forge --sample`: regenerate it"
    );
    let j = info_json(&path);
    assert_eq!(j["arch"], "x64");
    assert_eq!(j["dump_type"]["value"], 5);
    assert_eq!(j["memory"]["bitmap_signature"], "SDMP");
    assert_eq!(j["windows"]["nt_build_number"], 19041);
    assert_eq!(j["kernel_base"]["address"], "0xfffff8047ba00000");
    assert_eq!(
        j["kernel_pdb"]["guid"],
        "5278AFF8-6C34-1677-D7D7-835C85B7B844"
    );
    assert_eq!(j["kernel_pdb"]["age"], 1);
    assert_eq!(
        j["kernel_pdb"]["store_key"],
        "5278AFF86C341677D7D7835C85B7B8441"
    );
}

/// Differential test: random reads around every probe and forged object, of random lengths
/// crossing pages, compared with what the forge says a correct reader returns.
#[test]
fn random_reads_agree_with_the_forge() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for (name, c) in configs() {
        let f = forge(&c);
        let d = open(&f);
        let space = AddressSpace::kernel(&d);
        // The forge models the page-table self-map only for its one probe page, while a
        // correct walk reads every table through it: keep random reads away from it.
        let mut anchors: Vec<u64> = f
            .probes
            .iter()
            .filter(|p| !p.name.contains("self_map"))
            .map(|p| p.va)
            .collect();
        anchors.extend(f.ldr_entries.iter().copied());
        anchors.extend([
            f.kdbg_va,
            f.kuser_va,
            f.kuser_user_va,
            c.kernel_base,
            f.rsds_va,
        ]);
        let (mut ok, mut missing) = (0, 0);
        for _ in 0..3000 {
            let a = anchors[(rng.next() % anchors.len() as u64) as usize];
            let va = a.wrapping_add(rng.next() % 0x3000).wrapping_sub(0x1000);
            let len = 1 + (rng.next() % 0x2400) as usize;
            let mut buf = vec![0u8; len];
            match (
                f.expected_read(va, len),
                space.read(VirtAddr::new(va), &mut buf),
            ) {
                (Expect::Bytes(e), Ok(())) => {
                    assert!(e == buf, "{name}: {len:#x} bytes at {va:#x} differ");
                    ok += 1;
                }
                (
                    Expect::Unreadable {
                        first_unreadable_va,
                    },
                    Err(e),
                ) => {
                    assert!(e.is_missing(), "{name}: {va:#x}: {e}");
                    assert_eq!(
                        e.va().map(|v| v.get()),
                        Some(first_unreadable_va),
                        "{name}: {va:#x}+{len:#x}: {e}"
                    );
                    missing += 1;
                }
                (want, got) => {
                    panic!("{name}: {len:#x} bytes at {va:#x}: forge {want:?}, reader {got:?}")
                }
            }
        }
        assert!(
            ok > 150 && missing > 150,
            "{name}: {ok} readable, {missing} unreadable"
        );
    }
}
