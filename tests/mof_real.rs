//! Issue 29 item 1: the classic kernel payloads of the real files of ../shared/data (not in
//! the repository; each test says SKIPPED when its file is absent), decoded by
//! `decode::mof` and checked against what the records themselves say: a DPC's or ISR's
//! routine is the `routine` column etwdump reads at the same offset and resolves into a
//! loaded module, its entry time precedes the record's timestamp; a process termination
//! names a process whose end the file records; the kernel base is ntoskrnl's image base.

mod common;

use common::{etwdump, shared_dump};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// `etwdump ARGS --format json`: the records.
fn rows(args: &[&str]) -> Vec<Value> {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    let r = etwdump(&a);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let j: Value = serde_json::from_slice(&r.stdout).unwrap();
    j["records"].as_array().unwrap().clone()
}

/// A field of a row's payload.
fn field<'a>(row: &'a Value, name: &str) -> &'a Value {
    &row["payload"]["fields"][name]
}

/// An address field as a number.
fn address(v: &Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not an address: {v}"));
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

/// The rows of `dump`'s events with a kernel hook, by (hook, class).
fn counts(rows: &[Value]) -> BTreeMap<(String, String), u64> {
    let mut m = BTreeMap::new();
    for r in rows.iter().filter(|r| r["hook"].is_string()) {
        let class = r["payload"]["class"].as_str().unwrap_or("-").to_string();
        *m.entry((r["hook"].as_str().unwrap().to_string(), class))
            .or_default() += 1;
    }
    m
}

/// The real triage dumps' DPC, TIMERDPC, INTERRUPT and MSI_INTERRUPT records (x64: 10, 8, 1,
/// 73; arm64: 38, 2, 22) all decode exactly; each Routine is the `routine` column (read by
/// report::events at the same offset), in kernel space and in a loaded module; each entry time
/// precedes its record by less than 10^7 clock ticks; the vectors are those of the devices.
#[test]
fn real_dpc_and_isr_payloads() {
    for (dump, want, vectors) in [
        (
            "triage_x64.dmp",
            &[
                ("0x0f32", "ISR_MSI", 73),
                ("0x0f43", "ISR", 1),
                ("0x0f44", "DPC", 10),
                ("0x0f45", "DPC", 8),
            ][..],
            &[
                (0x60, "storport.sys+0xdf70", 73),
                (0x52, "Wdf01000.sys+0x3c30", 1),
            ][..],
        ),
        (
            "triage_arm64.dmp",
            &[
                ("0x0f43", "ISR", 22),
                ("0x0f44", "DPC", 38),
                ("0x0f45", "DPC", 2),
            ][..],
            &[
                (0x0b0b, "storport.sys+0x12650", 10),
                (0x0a07, "Wdf01000.sys+0x82e60", 6),
                (0x0b05, "Wdf01000.sys+0x82e60", 6),
            ][..],
        ),
    ] {
        let Some(p) = shared_dump(dump) else {
            continue;
        };
        let rows = rows(&["events", p.to_str().unwrap()]);
        let got = counts(&rows);
        let want: BTreeMap<(String, String), u64> = want
            .iter()
            .map(|&(h, c, n)| ((h.to_string(), c.to_string()), n))
            .collect();
        assert_eq!(got, want, "{dump}: every kernel record decodes");
        let mut seen_vectors: BTreeMap<(u64, String), u64> = BTreeMap::new();
        for r in rows.iter().filter(|r| r["hook"].is_string()) {
            let at = format!("{dump} {} +{}", r["buffer"], r["offset"]);
            assert_eq!(r["payload"]["problem"], Value::Null, "{at}");
            let routine = field(r, "Routine");
            assert_eq!(routine, &r["routine"], "{at}");
            assert!(address(routine) >= 0xFFFF_8000_0000_0000, "{at}");
            let module = r["routine_symbol"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}"));
            let lower = module.to_ascii_lowercase();
            assert!(
                lower.contains(".sys+") || lower.contains(".exe+"),
                "{at}: {module}"
            );
            let initial = field(r, "InitialTime").as_u64().unwrap();
            let ts = r["raw_timestamp"].as_u64().unwrap();
            assert!(
                initial < ts && ts - initial < 10_000_000,
                "{at}: {initial} {ts}"
            );
            if r["payload"]["class"] != "DPC" {
                assert_eq!(field(r, "ReturnValue"), 1, "{at}: claimed");
                assert_eq!(field(r, "Reserved"), 0, "{at}");
                let v = field(r, "Vector").as_u64().unwrap();
                *seen_vectors.entry((v, module.to_string())).or_default() += 1;
            }
            if r["payload"]["class"] == "ISR_MSI" {
                assert_eq!(field(r, "MessageNumber"), 0, "{at}");
            }
        }
        let vectors: BTreeMap<(u64, String), u64> = vectors
            .iter()
            .map(|&(v, m, n)| ((v, m.to_string()), n))
            .collect();
        assert_eq!(seen_vectors, vectors, "{dump}");
    }
}

/// The real ShutdownPerfDiagLogger.etl (Windows 10): every kernel record but the log file
/// header (0x0000) and the partition record (0x0050, whose layout only the MOF describes)
/// decodes exactly (those two are given raw), and the new classes say what the rest of the file says.
#[test]
fn real_etl_kernel_records() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/etl/ShutdownPerfDiagLogger.etl");
    if !p.is_file() {
        eprintln!("SKIPPED: {} is not present", p.display());
        return;
    }
    let rows = rows(&["etl", p.to_str().unwrap(), "--events"]);
    let got = counts(&rows);
    let new: BTreeMap<(String, String), u64> = [
        ("0x0000", "raw", 1),
        ("0x0005", "Header_Extension_TypeGroup", 3),
        ("0x0008", "RDComplete", 2),
        ("0x0020", "Header_Extension_TypeGroup", 2),
        ("0x0050", "raw", 1),
        ("0x030a", "Image_Load", 72),
        ("0x030b", "Process_Terminate_TypeGroup1", 60),
        ("0x0327", "Process_Defunct_TypeGroup1", 5),
        ("0x1421", "KernelImageBase", 1),
        ("0x1422", "HypercallPage", 1),
    ]
    .iter()
    .map(|&(h, c, n)| ((h.to_string(), c.to_string()), n))
    .collect();
    for (k, n) in &new {
        assert_eq!(got.get(k), Some(n), "{k:?} in {got:?}");
    }
    for r in rows
        .iter()
        .filter(|r| r["payload"].is_object() && r["payload"]["class"] != "raw")
    {
        assert_eq!(r["payload"]["problem"], Value::Null, "{r}");
    }
    let by = |hook: &str| -> Vec<&Value> { rows.iter().filter(|r| r["hook"] == hook).collect() };
    // Every terminated process is one whose PROCESS_END the file has, each once.
    let ended: BTreeSet<u64> = by("0x0302")
        .iter()
        .map(|r| field(r, "ProcessId").as_u64().unwrap())
        .collect();
    let terminated: Vec<u64> = by("0x030b")
        .iter()
        .map(|r| field(r, "ProcessId").as_u64().unwrap())
        .collect();
    assert_eq!(terminated.iter().copied().collect::<BTreeSet<_>>(), ended);
    assert_eq!(terminated.len(), ended.len());
    // LOAD_IMAGE: the loading process is the record's own; the images are DLLs on the disk.
    for r in by("0x030a") {
        assert_eq!(field(r, "ProcessId"), &r["pid"], "{r}");
        let name = field(r, "FileName").as_str().unwrap().to_ascii_lowercase();
        assert!(name.starts_with("\\device\\harddiskvolume3\\"), "{r}");
        assert!(name.ends_with(".dll"), "{r}");
    }
    // The defunct processes: names, pids, an exit time of the record's minute.
    let defunct: Vec<(String, u64)> = by("0x0327")
        .iter()
        .map(|r| {
            let exit = field(r, "ExitTime").as_u64().unwrap();
            let iso = etwdump::time::filetime_to_iso8601(exit);
            let time = r["time"].as_str().unwrap();
            // A FILETIME (MOF: uint64) of the record's minute: four of the five exits precede
            // their record by 0.03 to 2.1 s, MsMpEng's follows it by 0.48 s (the record's time is
            // the session clock's, the exit time the system time's).
            assert_eq!(iso[..16], time[..16], "{iso} {time}");
            (
                field(r, "ImageFileName").as_str().unwrap().to_string(),
                field(r, "ProcessId").as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        defunct,
        [
            ("svchost.exe".to_string(), 496),
            ("svchost.exe".to_string(), 1348),
            ("explorer.exe".to_string(), 3856),
            ("MicrosoftEdge.exe".to_string(), 4992),
            ("MsMpEng.exe".to_string(), 5648),
        ]
    );
    // The kernel base is ntoskrnl's image base in the rundown; the hypercall page is kernel
    // space.
    let base = field(by("0x1421")[0], "ImageBase");
    let nt = rows
        .iter()
        .find(|r| {
            r["hook"] == "0x1403"
                && field(r, "FileName")
                    .as_str()
                    .is_some_and(|n| n.ends_with("\\ntoskrnl.exe"))
        })
        .expect("ntoskrnl's DCStart");
    assert_eq!(base, field(nt, "ImageBase"));
    assert_eq!(base, "0xfffff802424ab000");
    assert!(address(field(by("0x1422")[0], "HypercallPageVa")) >= 0xFFFF_8000_0000_0000);
    // The header extensions: kernel event version 0x46, group masks as the sessions set them.
    for r in by("0x0005").into_iter().chain(by("0x0020")) {
        assert_eq!(field(r, "KernelEventVersion"), 0x46, "{r}");
        let mask1 = field(r, "GroupMask1").as_u64().unwrap();
        assert!(mask1 == 0 || mask1 == 7, "{r}");
    }
    // RDComplete carries nothing.
    for r in by("0x0008") {
        assert_eq!(r["payload"]["fields"], serde_json::json!({}));
    }
    // The table names the hook in its column and shows the first fields; the Timesketch
    // message names the event in words, then the fields, then where it was recorded.
    let f = p.to_str().unwrap();
    for (format, want) in [
        ("table", " 0x1421  IMAGE_KERNEL_BASE "),
        ("table", "  ImageBase=0xfffff802424ab000\n"),
        (
            "jsonl",
            "\"message\":\"Image kernel base: ImageBase=0xfffff802424ab000 [logger 28 etl_file, CPU 0]\"",
        ),
    ] {
        let r = etwdump(&["etl", f, "--events", "--hook", "0x1421", "--format", format]);
        let out = String::from_utf8_lossy(&r.stdout);
        assert!(out.contains(want), "{format}: {out}");
    }
}
