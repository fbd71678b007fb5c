//! `info` on the real triage dumps in ../shared/data/dumps (never committed; skipped when
//! absent). Expected values: reference crash-dump-format.md §2.1, measured independently.

mod common;
use common::{etwdump, info_json, shared_dump};
use etwdump::addr::VirtAddr;
use etwdump::dump::{Arch, DumpFile, DumpType, OpenOptions};
use etwdump::mem::AddressSpace;

#[test]
fn triage_x64_info() {
    let Some(p) = shared_dump("triage_x64.dmp") else {
        return;
    };
    let j = info_json(&p);
    assert_eq!(j["arch"], "x64");
    assert_eq!(j["dump_type"]["value"], 4);
    assert_eq!(j["dump_type"]["name"], "triage");
    assert_eq!(j["processors"], 16);
    assert_eq!(j["header_major_version"], 0xF);
    assert_eq!(j["header_minor_version"], 19041);
    assert_eq!(j["windows"]["build"], 19041);
    assert_eq!(
        j["windows"]["build_lab"],
        "19041.1.amd64fre.vb_release.191206-1406"
    );
    // KUSER_SHARED_DATA is not among the triage blocks: the tool must say so, not guess.
    assert!(j["windows"]["nt_build_number"].is_null());
    assert!(j["windows"]["kuser_shared_data_unavailable"]
        .as_str()
        .unwrap()
        .contains("0xfffff78000000000"));
    assert_eq!(j["bugcheck"]["code"], "0x1000007e");
    assert_eq!(
        j["bugcheck"]["parameters"],
        serde_json::json!([
            "0xffffffffc0000005",
            "0xfffff8048b58334c",
            "0xffff850429891ee8",
            "0xffff850429891720"
        ])
    );
    assert_eq!(j["system_time_raw"], 132583451029877657u64);
    assert_eq!(j["system_time"], "2021-02-21T01:38:22.9877657Z");
    assert_eq!(j["dtb"], "0x1ad000");
    assert_eq!(j["pfn_database"], "0xfffff8047c6fc500");
    assert_eq!(j["ps_loaded_module_list"], "0xfffff8047c62a390");
    assert_eq!(j["ps_active_process_head"], "0xfffff8047c61e200");
    let k = &j["kd_debugger_data_block"];
    assert_eq!(k["address"], "0xfffff8047c600b20");
    assert_eq!(k["decoded"], true);
    assert_eq!(k["tag"], "KDBG");
    assert_eq!(k["size"], "0x380");
    assert_eq!(k["kern_base"], "0xfffff8047ba00000");
    assert_eq!(k["ps_loaded_module_list"], "0xfffff8047c62a390");
    // EtwpDebuggerData = KernBase + 0xC10D58 (§2.2).
    assert_eq!(k["etwp_debugger_data"], "0xfffff8047c610d58");
    let b = &j["kernel_base"];
    assert_eq!(b["address"], "0xfffff8047ba00000");
    assert_eq!(b["source"], "triage driver list");
    assert_eq!(b["kdbg_agrees"], true);
    let img = &j["kernel_image"];
    assert_eq!(img["time_date_stamp"], "0xd8333e6");
    assert_eq!(img["size_of_image"], "0x1046000");
    assert_eq!(img["number_of_sections"], 33);
    assert_eq!(img["machine"], "0x8664");
    // The debug directory (RVA 0x107A0) is not in the dump.
    assert!(j["kernel_pdb"].is_null());
    assert!(j["kernel_pdb_unavailable"]
        .as_str()
        .unwrap()
        .contains("0xfffff8047ba107a0"));
    let t = &j["triage"];
    assert_eq!(t["data_blocks"], 1831);
    assert_eq!(t["data_block_bytes"], 0x119B52);
    assert_eq!(t["drivers"], 151);
    assert_eq!(t["kdbg_copy_bytes"], 0x380);
    assert_eq!(t["call_stack_bytes"], 0x2118);
    assert_eq!(t["secondary_data_bytes"], 157_736);
    assert_eq!(t["kernel_header_bytes"], 4096);
    assert_eq!(t["kuser_shared_data"], false);
    assert_eq!(j["warnings"], serde_json::json!([]));
}

#[test]
fn triage_x64_library_view() {
    let Some(p) = shared_dump("triage_x64.dmp") else {
        return;
    };
    let d = DumpFile::open(&p, OpenOptions::default()).unwrap();
    assert_eq!(d.header().arch, Arch::X64);
    assert_eq!(d.header().dump_type, DumpType::TRIAGE);
    let t = d.triage().unwrap();
    assert!(t.valid_tag_ok);
    assert_eq!(t.size_of_dump, 0x13A28C);
    assert_eq!(t.drivers[0].name, "\\SystemRoot\\system32\\ntoskrnl.exe");
    assert_eq!(t.drivers[0].base, 0xFFFFF8047BA00000);
    assert_eq!(t.drivers[0].size, 0x1046000);
    assert_eq!(t.drivers[1].name, "\\SystemRoot\\system32\\hal.dll");
    assert_eq!(
        t.drivers[150].name,
        "\\SystemRoot\\System32\\drivers\\rdpbus.sys"
    );
    let space = AddressSpace::kernel(&d);
    // The kernel's MZ header and e_lfanew (0x110) through the triage blocks.
    let mz = space
        .read_vec(VirtAddr::new(0xFFFFF8047BA00000), 0x40)
        .unwrap();
    assert_eq!(&mz[..2], b"MZ");
    assert_eq!(
        u32::from_le_bytes(mz[0x3C..0x40].try_into().unwrap()),
        0x110
    );
    // A read that runs off the end of the 4 KiB header block names the first missing byte.
    let e = space
        .read_vec(VirtAddr::new(0xFFFFF8047BA00FF0), 0x20)
        .unwrap_err();
    assert_eq!(e.va(), Some(VirtAddr::new(0xFFFFF8047BA01000)));
    assert!(e.is_missing());
    // KPRCB.EtwSupport of CPU0 (KPRCB + 0x8328) is present (§2.1): KiProcessorBlock[0]
    // (KiProcessorBlock = KernBase + 0xCFDC80, §2.2) → KPRCB → EtwSupport.
    let prcb0 = space
        .read_ptr(VirtAddr::new(0xFFFFF8047BA00000 + 0xCFDC80))
        .unwrap();
    let etw_support = space.read_u64(prcb0.offset(0x8328)).unwrap();
    assert_eq!(etw_support, 0xFFFFC08BDCF57730);
    // KUSER_SHARED_DATA is not in the blocks: a try_ read says "missing", not an error.
    let mut b = [0u8; 8];
    assert!(space
        .try_read(VirtAddr::new(0xFFFFF78000000000), &mut b)
        .unwrap()
        .is_none());
}

#[test]
fn triage_arm64_info() {
    let Some(p) = shared_dump("triage_arm64.dmp") else {
        return;
    };
    let j = info_json(&p);
    assert_eq!(j["arch"], "ARM64");
    assert_eq!(j["machine_image_type"], "0xaa64");
    assert_eq!(j["dump_type"]["value"], 4);
    assert_eq!(j["processors"], 8);
    assert_eq!(j["header_minor_version"], 22000);
    assert_eq!(j["bugcheck"]["code"], "0x1c8");
    assert_eq!(j["bugcheck"]["parameters"][0], "0x1b58");
    assert_eq!(j["kd_debugger_data_block"]["decoded"], true);
    assert_eq!(j["kernel_base"]["address"], "0xfffff803f2e00000");
    assert_eq!(j["kernel_base"]["kdbg_agrees"], true);
    assert_eq!(
        j["windows"]["build_lab"],
        "22000.1.arm64fre.co_release.210604-1628"
    );
    assert_eq!(j["triage"]["drivers"], 245);
    assert_eq!(j["triage"]["data_blocks"], 679);
    assert_eq!(j["triage"]["kernel_header_bytes"], 256);
    let why = j["memory"]["translation_unsupported"].as_str().unwrap();
    assert!(
        why.contains("ARM64 address translation is not supported yet"),
        "{why}"
    );
    // The table says it plainly too.
    let out = etwdump(&["info", p.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ARM64 address translation is not supported yet"));
    assert!(text.contains("Architecture              ARM64"));
}

/// The built-in KDDEBUGGER_DATA64 layout (public WDBGEXTS.H) read over the real dump's decoded
/// KDBG gives the RVAs crash-dump-format.md §2.2 lists.
#[test]
fn builtin_kdbg_layout_on_the_real_dump() {
    let Some(p) = shared_dump("triage_x64.dmp") else {
        return;
    };
    let d = DumpFile::open(&p, OpenOptions::default()).unwrap();
    let space = AddressSpace::kernel(&d);
    let b = etwdump::symbols::builtin::layouts(19041, etwdump::symbols::TableFamily::X64).unwrap();
    let k = b
        .types
        .iter()
        .find(|t| t.name == "_KDDEBUGGER_DATA64")
        .unwrap();
    assert_eq!(k.size, 0x380);
    let v = etwdump::kernel::view::View::new(&space, k, VirtAddr::new(0xFFFFF8047C600B20));
    let base = 0xFFFFF8047BA00000u64;
    assert_eq!(
        v.uint("OwnerTag").unwrap(),
        u64::from(u32::from_le_bytes(*b"KDBG"))
    );
    assert_eq!(v.uint("Size").unwrap(), 0x380);
    assert_eq!(v.uint("KernBase").unwrap(), base);
    for (field, rva) in [
        ("PsLoadedModuleList", 0xC2A390),
        ("PsActiveProcessHead", 0xC1E200),
        ("KiProcessorBlock", 0xCFDC80),
        ("EtwpDebuggerData", 0xC10D58),
        ("MmPfnDatabase", 0xCFC500),
        ("NtBuildLab", 0xC4C0A0),
    ] {
        assert_eq!(v.uint(field).unwrap(), base + rva, "KDBG.{field}");
    }
}

/// Issue 29 item 2: EVENT_HEADER records name their provider from the table `providers`
/// uses; a TRACE_MESSAGE's GUID (a message GUID, not a provider) never gets a name, nor does
/// an EVENT_HEADER provider the table does not know.
#[test]
fn real_event_providers_are_named() {
    use std::collections::BTreeMap;
    for (dump, want) in [
        (
            "triage_x64.dmp",
            &[
                ("Microsoft-Windows-VolumeSnapshot-Driver", 29),
                ("Microsoft-Windows-StorPort", 21),
                ("Microsoft-Windows-Kernel-Boot", 14),
                ("Microsoft-Windows-Kernel-ShimEngine", 10),
            ][..],
        ),
        (
            "triage_arm64.dmp",
            &[("Microsoft-Windows-WLAN-AutoConfig", 351)][..],
        ),
    ] {
        let Some(p) = shared_dump(dump) else {
            return;
        };
        let r = etwdump(&["events", p.to_str().unwrap(), "--format", "json"]);
        assert!(r.status.success());
        let j: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
        let mut names: BTreeMap<String, u64> = BTreeMap::new();
        for row in j["records"].as_array().unwrap() {
            let name = row["provider_name"].as_str();
            if row["header_type"] == "message"
                || !row["header_type"]
                    .as_str()
                    .unwrap()
                    .starts_with("event_header")
            {
                assert!(name.is_none(), "{dump}: {row}");
            }
            if let Some(n) = name {
                *names.entry(n.to_string()).or_default() += 1;
            }
        }
        for (n, count) in want {
            assert_eq!(names.get(*n), Some(count), "{dump}: {n} in {names:?}");
        }
        // The Timesketch message starts with the provider's name and the event id.
        let r = etwdump(&["events", p.to_str().unwrap(), "--format", "jsonl"]);
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(
            text.contains(&format!("\"message\":\"{} event ", want[0].0)),
            "{dump}"
        );
    }
}
