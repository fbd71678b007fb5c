//! Manifest-based events of the real triage dumps in ../shared/data/dumps (never committed;
//! skipped when absent), decoded from the schema table generated from etl-parser 1.0.1
//! (`decode::manifest`, issue 29 item 1).
//!
//! Every value below was read independently: etl-parser 1.0.1 (tests/interop/.venv) on the
//! .etl files `etwdump extract` writes from the same dumps, its factory
//! `build_etw(guid, id, version, user_data)` on each record (tests/interop/manifest_check.py
//! compares every field the same way). Where etl-parser's `Int8ul` or `Bytes(this.F)` is read
//! the other way (a 4-byte win:Boolean, UTF-16 characters: the one reading of the payload's
//! size, `decode::manifest`), etl-parser misreads by construction; those fields' types are
//! dissect.etl 3.14's manifests' (tools/manifest_schemas/audit.py --events: all 227 ambiguous
//! fields of these dumps' payloads decoded so are read as the manifests say).

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

/// Per provider: (manifest payloads, of them decoded by the one reading of their ambiguous
/// types that fits, EVENT_HEADER rows, payloads given raw because their schema does not fit
/// them in any reading, in several, or with values not of its types).
type Counts = (u32, u32, u32, u32);

fn per_provider(rows: &[Value]) -> BTreeMap<String, Counts> {
    let mut m: BTreeMap<String, Counts> = BTreeMap::new();
    for r in rows {
        let Some(name) = r["provider_name"].as_str() else {
            continue;
        };
        let e = m
            .entry(name.trim_start_matches("Microsoft-Windows-").to_string())
            .or_default();
        e.2 += 1;
        if r["payload"]["class"] == "manifest" {
            e.0 += 1;
            assert!(r["payload"]["problem"].is_null(), "{r}");
            if !r["payload"]["how"].is_null() {
                e.1 += 1;
            }
        }
        if r["payload"]["class"] == "raw"
            && r["payload"]["problem"]
                .as_str()
                .unwrap()
                .starts_with("not decoded: the provider's schema (etl-parser's)")
        {
            e.3 += 1;
        }
    }
    m.retain(|_, v| v.0 + v.3 > 0);
    m
}

/// A table of expected [`per_provider`] counts.
fn counts(rows: &[(&str, Counts)]) -> BTreeMap<String, Counts> {
    rows.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// The payload of the row of `provider` (name without `Microsoft-Windows-`), event `id`, at
/// raw timestamp `ts`.
fn payload<'a>(rows: &'a [Value], provider: &str, id: u64, ts: u64) -> &'a Value {
    let p = any_payload(rows, provider, id, ts);
    assert_eq!(p["class"], "manifest", "{p}");
    p
}

/// A payload's fields with its `how` (how the reading of ambiguous types was decided) under the
/// key `"@how"` after them: one value to compare.
fn with_how(p: &Value) -> Value {
    let mut f = p["fields"].clone();
    if let (Some(h), Some(m)) = (p["how"].as_str(), f.as_object_mut()) {
        m.insert("@how".into(), Value::String(h.to_string()));
    }
    f
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

/// x64 (19041): 59 of the 107 EVENT_HEADER rows decode from the table, all exactly: 45 with
/// unambiguous types, 14 by the one reading of their `Int8ul` / `Bytes(this.F)` fields that
/// fits (before those were kept out of the table: 45 of 107). VolumeSnapshot 106: its two
/// `Int8ul` are 4-byte win:Booleans (etl-parser's 1-byte reading misplaces CommitTime). Given
/// raw: FilterManager 6 (no reading fits: these version-0 records carry version 1's
/// ExtraInfoLength, ExtraInfoString and FilterID, which the schema lacks) and CodeIntegrity
/// 3099 (the one reading that fits reads PolicyHash as 32 UTF-16 characters with a NUL
/// inside: not text). The rest are events of providers etl-parser lacks (Kernel-General,
/// Partition, ...) or of ids it lacks (StorPort 523, 534, ...).
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
            ("CodeIntegrity", (1, 1, 2, 1)),
            ("FilterManager", (0, 0, 5, 5)),
            ("Hyper-V-Hypervisor", (2, 1, 4, 0)),
            ("IsolatedUserMode", (1, 0, 1, 0)),
            ("Kernel-Boot", (11, 1, 14, 0)),
            ("Kernel-Power", (1, 0, 1, 0)),
            ("Kernel-ShimEngine", (10, 0, 10, 0)),
            ("Kernel-WHEA", (4, 4, 4, 0)),
            ("StorPort", (1, 0, 21, 0)),
            ("VolumeSnapshot-Driver", (28, 7, 29, 0)),
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
    // VolumeSnapshot 106: Deleted and Visible 4-byte Booleans (the manifest's win:Boolean),
    // CommitTime a real time; etl-parser's 1-byte reading leaves 6 bytes and puts CommitTime
    // 6 bytes early (0000-00-2021T02:04:04.016).
    let p = payload(&rows, "VolumeSnapshot-Driver", 106, 132583451008670154);
    assert_eq!(
        with_how(p),
        json!({"TargetVolumeGuid": "0002f8bb-4480-a002-741a-d60176f10500",
               "SnapshotGuid": "b441e061-671a-11eb-8663-a85e451ea2a0", "Deleted": false,
               "Visible": false, "CommitTime": "2021-02-04T16:04:52.208", "SourceFile": 1,
               "SourceLine": 20464, "SourceTag": 92,
               "@how": "Int8ul read as win:Boolean (4 bytes): Deleted, Visible; the only one of \
                        the 4 readings of etl-parser's ambiguous types that consumes the \
                        payload's 66 bytes exactly"})
    );
    let n106 = rows
        .iter()
        .filter(|r| r["event_id"] == 106 && r["payload"]["class"] == "manifest")
        .count();
    assert_eq!(n106, 7);
    // Kernel-Boot 20: two Booleans (the manifest's too).
    let p = payload(&rows, "Kernel-Boot", 20, 132583450998618532);
    assert_eq!(
        (
            &p["fields"]["LastShutdownGood"],
            &p["fields"]["LastBootGood"]
        ),
        (&json!(true), &json!(true))
    );
    assert_eq!(p["fields"]["LastBootId"], 493);
    // FilterManager 6: DeviceNameLength 8 is 8 UTF-16 characters ("FileInfo", 16 bytes), but the
    // payload goes on after DeviceTime (version 1's ExtraInfo fields in a version-0 record):
    // no reading fits, given raw.
    let p = raw_payload(&rows, "FilterManager", 6, 132583451007109154);
    assert_eq!(
        p["problem"],
        "not decoded: the provider's schema (etl-parser's) does not fit the payload in any of \
         the 2 readings of its ambiguous fields (DeviceName (Bytes(this.DeviceNameLength))); \
         etl-parser's own reading (1-byte Int8ul, byte counts): 482 bytes after the last field \
         (DeviceTime); the schema does not cover them: a field it lacks shifts the fields after \
         it"
    );
    assert!(p["fields"]["hex"]
        .as_str()
        .unwrap()
        .starts_with("000000000a000000000000000800460069006c00650049006e0066006f00"));
    // CodeIntegrity 3099: PolicyNameBuffer and PolicyIdBuffer are text, but the only reading
    // of the size would make PolicyHash (PolicyHashSize 32) 64 bytes of "characters" with a
    // NUL inside: not text, so given raw.
    let r = rows
        .iter()
        .find(|r| r["event_id"] == 3099)
        .expect("CodeIntegrity 3099");
    assert!(r["payload"]["problem"].as_str().unwrap().ends_with(
        "PolicyHash at payload +0x76: as UTF-16 text its character 16 of 32 is NUL (a counted \
         string may end with one NUL, not hold one)"
    ));
}

/// ARM64 (22000): 489 of the 907 EVENT_HEADER rows (374 are TraceLogging): 313 with
/// unambiguous types (all there were before), 176 by the one reading of their `Int8ul` /
/// `Bytes(this.F)` fields that fits. 20 more would carry bytes after their last field:
/// etl-parser's schemas of NWiFi 10017/10018/10021/10025/10040/10041 and WLAN-AutoConfig
/// 21010/21015/21020/21025/21030/21057 leave out 6-byte win:Binary MAC addresses (dissect.etl's
/// manifests of the same events have them), which shifts every field after them: those
/// payloads are given raw, with why; and 11 with ambiguous types fit no reading or several.
/// (WLAN-AutoConfig 21001's three payloads decode by their reading, three win:Booleans as the
/// manifest says, but its schema lacks the 6-byte LocalAddr before FriendlyName, which the
/// string takes in: a limit of etl-parser's schemas, as for 21028's SSID, not of the reading.)
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
            ("EapHost", (8, 0, 8, 0)),
            ("NCSI", (45, 29, 49, 3)),
            ("NWiFi", (41, 5, 49, 8)),
            ("OneX", (5, 0, 5, 0)),
            ("Security-LessPrivilegedAppContainer", (21, 0, 21, 0)),
            ("WLAN-AutoConfig", (328, 142, 351, 20)),
            ("WiFiNetworkManager", (41, 0, 48, 0)),
        ])
    );
    // The payloads decoded by a reading whose last field is an `Int8ul`: 140 win:Booleans
    // (etl-parser's 1-byte reading leaves 3 bytes) and 15 win:UInt8.
    let (mut booleans, mut uint8) = (0, 0);
    for r in &rows {
        let f = &r["payload"]["fields"];
        let Some(how) = r["payload"]["how"].as_str() else {
            continue;
        };
        let (last, v) = f.as_object().unwrap().iter().next_back().unwrap();
        let u8s = how
            .split("; ")
            .find_map(|g| g.strip_prefix("Int8ul read as win:UInt8 (1 byte): "))
            .unwrap_or("");
        if v.is_boolean() {
            booleans += 1;
        } else if u8s.split(", ").any(|n| n == last) {
            uint8 += 1;
        }
    }
    assert_eq!((booleans, uint8), (140, 15));
    let p = payload(&rows, "NCSI", 4014, 499163643);
    assert_eq!(
        with_how(p),
        json!({"InterfaceGuid": "de3a098d-fea9-49a7-a477-1014fa33978a", "Succeeded": true,
               "UsedDnsProbe": false, "UsedProxy": false, "ContentComparison": true,
               "WebCompleted": true, "WebRedirected": false, "LocalErrorOccured": false,
               "@how": "Int8ul read as win:Boolean (4 bytes): Succeeded, UsedDnsProbe, UsedProxy, \
                        ContentComparison, WebCompleted, WebRedirected, LocalErrorOccured; the \
                        only one of the 128 readings of etl-parser's ambiguous types that \
                        consumes the payload's 44 bytes exactly"})
    );
    let p = payload(&rows, "NWiFi", 10061, 464104857);
    assert_eq!(
        with_how(p),
        json!({"Index": 2, "CipherAlgoId": 4, "Direction": 1, "Len": 16,
               "@how": "Int8ul read as win:UInt8 (1 byte): Direction; the only one of the 2 \
                        readings of etl-parser's ambiguous types that consumes the payload's 13 \
                        bytes exactly"})
    );
    let p = payload(&rows, "WLAN-AutoConfig", 14045, 461088763);
    assert_eq!(p["fields"]["Auto"], true);
    assert_eq!(p["fields"]["Multiple"], false);
    assert_eq!(p["fields"]["SSIDListSize"], 36);
    assert_eq!(
        p["fields"]["SSIDList"],
        "09000000524f53454e20352e300000000000000000000000000000000000000000000000"
    );
    // Two readings fit WLAN-AutoConfig 14061 (`Update`, `SingleSSID` after the profile name:
    // 5 bytes, a Boolean and a UInt8 either way round): given raw, saying so.
    let p = raw_payload(&rows, "WLAN-AutoConfig", 14061, 364645047);
    assert_eq!(
        p["problem"],
        "not decoded: the provider's schema (etl-parser's) fits the payload's 25 bytes in 2 of \
         the 4 readings of its ambiguous fields (Update (Int8ul), SingleSSID (Int8ul)): which \
         one is right is not known"
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
