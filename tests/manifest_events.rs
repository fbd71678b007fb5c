//! Manifest-based events of the real triage dumps in ../shared/data/dumps (never committed;
//! skipped when absent), decoded from the schema table generated from etl-parser 1.0.1
//! (`decode::manifest`, issue 29 item 1).
//!
//! Every value below was read independently: etl-parser 1.0.1 (tests/interop/.venv) on the
//! .etl files `etwdump extract` writes from the same dumps, its factory
//! `build_etw(guid, id, version, user_data)` on each record (tests/interop/manifest_check.py
//! compares all 1,140 fields of the 378 events the same way).

mod common;
use common::{etwdump, shared_dump};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn p_str(p: &std::path::Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The EVENT_HEADER rows of `events DUMP --format json`.
fn event_rows(dump: &std::path::Path) -> Vec<Value> {
    let r = etwdump(&["events", dump.to_str().unwrap(), "--format", "json"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let j: Value = serde_json::from_slice(&r.stdout).unwrap();
    j["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["header_type"]
                .as_str()
                .unwrap()
                .starts_with("event_header")
        })
        .cloned()
        .collect()
}

/// Per provider: (manifest payloads, EVENT_HEADER rows, payloads given raw because their
/// schema does not fit them).
fn per_provider(rows: &[Value]) -> BTreeMap<String, (u32, u32, u32)> {
    let mut m: BTreeMap<String, (u32, u32, u32)> = BTreeMap::new();
    for r in rows {
        let Some(name) = r["provider_name"].as_str() else {
            continue;
        };
        let e = m
            .entry(name.trim_start_matches("Microsoft-Windows-").to_string())
            .or_default();
        e.1 += 1;
        if r["payload"]["class"] == "manifest" {
            e.0 += 1;
            assert!(r["payload"]["problem"].is_null(), "{r}");
        }
        if r["payload"]["class"] == "raw"
            && r["payload"]["problem"]
                .as_str()
                .unwrap()
                .contains("schema (etl-parser's) does not fit")
        {
            e.2 += 1;
        }
    }
    m.retain(|_, v| v.0 + v.2 > 0);
    m
}

/// A table of expected [`per_provider`] counts.
fn counts(rows: &[(&str, (u32, u32, u32))]) -> BTreeMap<String, (u32, u32, u32)> {
    rows.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The payload of the row of `provider` (name without `Microsoft-Windows-`), event `id`, at
/// raw timestamp `ts`.
fn payload<'a>(rows: &'a [Value], provider: &str, id: u64, ts: u64) -> &'a Value {
    let p = any_payload(rows, provider, id, ts);
    assert_eq!(p["class"], "manifest", "{p}");
    p
}

/// The payload of that record, given raw.
fn raw_payload<'a>(rows: &'a [Value], provider: &str, id: u64, ts: u64) -> &'a Value {
    let p = any_payload(rows, provider, id, ts);
    assert_eq!(p["class"], "raw", "{p}");
    p
}

fn any_payload<'a>(rows: &'a [Value], provider: &str, id: u64, ts: u64) -> &'a Value {
    let r = rows
        .iter()
        .find(|r| {
            r["provider_name"] == format!("Microsoft-Windows-{provider}")
                && r["event_id"] == id
                && r["raw_timestamp"] == ts
        })
        .unwrap_or_else(|| panic!("no {provider} {id} at {ts}"));
    &r["payload"]
}

/// x64 (19041): 45 of the 107 EVENT_HEADER rows decode from the table, all exactly; the others
/// are TraceLogging-free events the table does not hold (Int8ul or Bytes(this.F) fields in
/// etl-parser's schema: StorPort 523, 534, ...; FilterManager 6; VolumeSnapshot 106, whose
/// etl-parser reading of its two win:Boolean fields as one byte each misplaces CommitTime) or
/// providers etl-parser lacks (Kernel-General, Partition, ...).
#[test]
fn triage_x64_manifest_events() {
    let Some(p_dump) = shared_dump("triage_x64.dmp") else {
        return;
    };
    let rows = event_rows(&p_dump);
    assert_eq!(rows.len(), 107);
    assert_eq!(
        per_provider(&rows),
        counts(&[
            ("Hyper-V-Hypervisor", (1, 4, 0)),
            ("IsolatedUserMode", (1, 1, 0)),
            ("Kernel-Boot", (10, 14, 0)),
            ("Kernel-Power", (1, 1, 0)),
            ("Kernel-ShimEngine", (10, 10, 0)),
            ("StorPort", (1, 21, 0)),
            ("VolumeSnapshot-Driver", (21, 29, 0)),
        ])
    );

    let p = payload(&rows, "Kernel-Boot", 153, 132583450998617805);
    assert_eq!(
        p["fields"],
        json!({"Status": 0, "EnableDisableReason": 100, "VsmPolicy": 643})
    );
    assert!(p["problem"].is_null());
    let p = payload(&rows, "Kernel-Boot", 27, 132583450998619463);
    assert_eq!(
        p["fields"],
        json!({"BootType": 0, "LoadOptions": " NOEXECUTE=OPTIN  HYPERVISORLAUNCHTYPE=AUTO  NOVGA"})
    );
    let p = payload(&rows, "Kernel-Boot", 30, 132583450998621077);
    assert_eq!(
        p["fields"],
        json!({"ResetEndStart": 0, "LoadOSImageStart": 0, "StartOSImageStart": 11463,
               "ExitBootServicesEntry": 12174, "ExitBootServicesExit": 12179})
    );
    let p = payload(&rows, "Kernel-ShimEngine", 3, 132583451002920248);
    assert_eq!(
        p["fields"],
        json!({"DriverName": "storahci.sys", "ShimSource": 0, "ShimCount": 1,
               "AppliedGuids": "{434abafd-08fa-4c3d-a88d-d09a88e2ab17}"})
    );
    // Int32sl: PortNumber -1.
    let p = payload(&rows, "StorPort", 513, 132583451006959981);
    assert_eq!(p["fields"]["AdapterName"], "\\Device\\RaidPort1");
    assert_eq!(p["fields"]["PortNumber"], -1);
    assert_eq!(p["fields"]["ActualAllocationSizeInBytes"], 67108864);
    assert_eq!(p["fields"].as_object().unwrap().len(), 11);
    let p = payload(&rows, "VolumeSnapshot-Driver", 104, 132583451009852930);
    assert_eq!(
        p["fields"],
        json!({"TargetVolumeGuid": "0002f8bb-4480-a002-741a-d60176f10500", "SnapshotCount": 7,
               "CountDeleted": 0, "CountVisible": 0, "SourceFile": 1, "SourceLine": 22703,
               "SourceTag": 107})
    );
    let p = payload(&rows, "Kernel-Power", 172, 132583451020679292);
    assert_eq!(p["fields"], json!({"State": 2, "Reason": 6}));
    // The table's details column and the Timesketch message show the first fields.
    let dump = p_str(&p_dump);
    let r = etwdump(&[
        "events",
        &dump,
        "--event-id",
        "153",
        "--provider",
        "Microsoft-Windows-Kernel-Boot",
        "--format",
        "jsonl",
    ]);
    let line = String::from_utf8_lossy(&r.stdout);
    assert!(
        line.contains(
            "\"message\":\"Microsoft-Windows-Kernel-Boot event 153: Status=0, \
             EnableDisableReason=100, VsmPolicy=643 [logger 10 secondary_data, pid 4 tid 8]\""
        ),
        "{line}"
    );
    let r = etwdump(&[
        "events",
        &dump,
        "--provider",
        "Microsoft-Windows-Kernel-ShimEngine",
        "--event-id",
        "3",
    ]);
    let table = String::from_utf8_lossy(&r.stdout);
    assert!(
        table.contains("DriverName=storahci.sys, ShimSource=0, ShimCount=1, … 4 fields"),
        "{table}"
    );
    // Not decoded: VolumeSnapshot 106 (Int8ul in etl-parser's schema): given raw.
    assert!(rows.iter().filter(|r| r["event_id"] == 106).all(|r| {
        r["payload"]["class"] == "raw"
            && r["payload"]["problem"]
                .as_str()
                .unwrap()
                .starts_with("not decoded: no schema")
    }));
}

/// ARM64 (22000): 313 of the 907 EVENT_HEADER rows (374 are TraceLogging). 20 more would
/// carry bytes after their last field: etl-parser's schemas of NWiFi
/// 10017/10018/10021/10025/10040/10041 and WLAN-AutoConfig 21010/21015/21020/21025/21030/21057
/// leave out 6-byte win:Binary MAC addresses (dissect.etl's manifests of the same events have
/// them), which shifts every field after them: those payloads are given raw, with why.
#[test]
fn triage_arm64_manifest_events() {
    let Some(p) = shared_dump("triage_arm64.dmp") else {
        return;
    };
    let rows = event_rows(&p);
    assert_eq!(rows.len(), 907);
    assert_eq!(
        per_provider(&rows),
        counts(&[
            ("EapHost", (8, 8, 0)),
            ("NCSI", (16, 49, 0)),
            ("NWiFi", (36, 49, 6)),
            ("OneX", (5, 5, 0)),
            ("Security-LessPrivilegedAppContainer", (21, 21, 0)),
            ("WLAN-AutoConfig", (186, 351, 14)),
            ("WiFiNetworkManager", (41, 48, 0)),
        ])
    );
    let tl = rows
        .iter()
        .filter(|r| r["payload"]["class"] == "TraceLogging")
        .count();
    assert_eq!(tl, 374);

    let p = payload(
        &rows,
        "Security-LessPrivilegedAppContainer",
        1,
        132760615122441836,
    );
    assert_eq!(
        p["fields"],
        json!({"FailureTime": 132760615122441792u64, "StackHash": 2784850764u32})
    );
    let p = payload(&rows, "WLAN-AutoConfig", 8000, 462573094);
    assert_eq!(
        p["fields"],
        json!({"InterfaceGuid": "de3a098d-fea9-49a7-a477-1014fa33978a",
               "InterfaceDescription": "Qualcomm(R) Wi-Fi B/G/N/AC (2x2) Svc",
               "ConnectionMode": "Automatic connection with a profile",
               "ProfileName": "ROSEN 5.0", "SSID": "ROSEN 5.0", "BSSType": "Infrastructure",
               "ConnectionId": 1})
    );
    let p = payload(&rows, "WLAN-AutoConfig", 11005, 464125432);
    assert_eq!(p["fields"]["LocalMac"], "8C:B0:E9:38:5D:05");
    assert_eq!(p["fields"]["SSID"], "ROSEN 5.0");
    let p = payload(&rows, "WLAN-AutoConfig", 20024, 1061136656);
    assert_eq!(
        p["fields"],
        json!({"InterfaceGuid": "de3a098d-fea9-49a7-a477-1014fa33978a", "Count": 33})
    );
    let p = payload(&rows, "EapHost", 4001, 349135163);
    assert_eq!(
        p["fields"],
        json!({"debugString": "EapHostPeerInitialize Exit:\n returning(0)"})
    );
    // A pointer (etl-parser's Int64ul) is a number.
    let p = payload(&rows, "NWiFi", 10053, 462641380);
    assert_eq!(p["fields"]["ContextHandle"], 18446668820512600080u64);
    assert_eq!(p["fields"]["Irp"], 18446668820419412208u64);
    // The MAC addresses etl-parser's schema lacks: the payload does not fit the schema (12
    // bytes after FrameSequence), so it is given raw with why, not as fields that may be
    // shifted (WLAN-AutoConfig 21057's OldState and NewState come after two of them).
    let p = raw_payload(&rows, "NWiFi", 10017, 463754692);
    assert_eq!(
        p["problem"],
        "not decoded: the provider's schema (etl-parser's) does not fit the payload: 12 bytes \
         after the last field (FrameSequence); the schema does not cover them: a field it lacks \
         shifts the fields after it"
    );
    assert_eq!(p["fields"]["size"], 40);
    for r in rows.iter().filter(|r| r["event_id"] == 21057) {
        assert_eq!(r["payload"]["class"], "raw", "{r}");
    }
}
