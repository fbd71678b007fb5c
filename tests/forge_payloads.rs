//! Issue 29 item 5: etwdump decodes the forge's realistic kernel payloads with exactly the
//! forge's truth. The forge (tests/forge/src/etw/payloads.rs, written from Microsoft's
//! wmicore.mof and the Learn class pages, not from etwdump's decoder) writes records of every
//! decoded classic kernel class into the NT Kernel Logger's buffers of an x64 dump (64-bit
//! SYSTEM / PERFINFO headers and pointers) and into a session of an x86 dump (32-bit kinds);
//! `etwdump events --format json` must give, for every such record, the forge's class and
//! every field (names in wire order, values), and the SYSTEM header's ThreadId / ProcessId.
//!
//! Where etwdump and the forge's reading of the documentation differ, the difference is listed
//! in [`KNOWN`] (class, field, what differs) and reported (not fixed here: the decoder is not
//! the forge's to change); the test fails on any other difference, and on a listed one that no
//! longer occurs.

use etwdump_forge::payloads::{payload_records, payload_set, payload_slots, PayloadRec, Val};
use etwdump_forge::{forge, ExpectedSlot};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

mod common;
use common::etwdump;

/// Differences between etwdump's decoding and the forge's truth that are reported, not fixed
/// by this test: (class, field, kind).
///
/// * SampledProfile v2: wmicore.mof has `Count` uint16 then `Reserved` uint16 (the Learn page
///   one `Count` uint32); etwdump names the last two bytes `Flags` and `Rank` after ntwmi.h's
///   PERFINFO_SAMPLED_PROFILE_INFORMATION and TraceEvent's SampledProfileTraceData, which split
///   MOF's Reserved into a flags byte and the rank (src/decode/mof/perfinfo.rs): a documented
///   choice between sources, not a misreading. (Until this test, ExitStatus of the Process
///   classes was printed unsigned, against the MOF's sint32: fixed.)
const KNOWN: &[(&str, &str, &str)] = &[
    ("SampledProfile", "Flags", "extra field"),
    ("SampledProfile", "Rank", "extra field"),
    ("SampledProfile", "Reserved", "missing field"),
];

/// A truth value against a JSON value of etwdump's payload: integers as integers (pointers are
/// printed as "0x..." hex), strings as text.
fn same(t: &Val, j: &Value) -> bool {
    let int = |j: &Value| -> Option<i128> {
        match j {
            Value::Number(n) => n
                .as_u64()
                .map(i128::from)
                .or_else(|| n.as_i64().map(i128::from)),
            Value::String(s) => s
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .map(i128::from),
            _ => None,
        }
    };
    match t {
        Val::U(v) | Val::Ptr(v) => int(j) == Some(i128::from(*v)),
        Val::I(v) => int(j) == Some(i128::from(*v)),
        Val::Str(s) | Val::Sid(s) | Val::Ip(s) | Val::Guid(s) => j.as_str() == Some(s.as_str()),
    }
}

/// What a record's header kind is called in etwdump's rows.
fn header_type(r: &PayloadRec) -> &'static str {
    use etwdump_forge::payloads::PayloadHeader;
    match (r.header, r.x64) {
        (PayloadHeader::System, true) => "system64",
        (PayloadHeader::System, false) => "system32",
        (PayloadHeader::PerfInfo, true) => "perfinfo64",
        (PayloadHeader::PerfInfo, false) => "perfinfo32",
    }
}

/// Per dump: records and fields compared, by class.
#[derive(Default)]
struct Tally {
    records: BTreeMap<String, (usize, usize)>,
    diffs: BTreeMap<(String, String, String), Vec<String>>,
}

impl Tally {
    fn diff(&mut self, class: &str, field: &str, kind: &str, detail: String) {
        self.diffs
            .entry((class.to_string(), field.to_string(), kind.to_string()))
            .or_default()
            .push(detail);
    }
}

/// Compare one record's row with its truth.
fn check_record(t: &mut Tally, r: &PayloadRec, row: &Value, at: &str) {
    let hook = format!("0x{:04x}", r.hook);
    assert_eq!(row["hook"], hook.as_str(), "{at}: hook");
    assert_eq!(row["version"], u64::from(r.version), "{at}: version");
    assert_eq!(row["header_type"], header_type(r), "{at}: header type");
    if r.header == etwdump_forge::payloads::PayloadHeader::System {
        assert_eq!(row["tid"], u64::from(r.tid), "{at}: ThreadId");
        assert_eq!(row["pid"], u64::from(r.pid), "{at}: ProcessId");
    }
    let p = &row["payload"];
    assert!(p.is_object(), "{at}: no payload: {row}");
    let class = p["class"].as_str().unwrap_or("");
    if class != r.class {
        t.diff(&r.class, "", "class", format!("{at}: etwdump {class}"));
        return;
    }
    if !p["problem"].is_null() {
        t.diff(&r.class, "", "problem", format!("{at}: {}", p["problem"]));
    }
    let fields = p["fields"].as_object().expect("fields");
    let ours: Vec<&str> = fields.keys().map(String::as_str).collect();
    let truth: Vec<&str> = r.fields.iter().map(|(k, _)| k.as_str()).collect();
    for name in ours.iter().filter(|n| !truth.contains(n)) {
        t.diff(
            &r.class,
            name,
            "extra field",
            format!("{at}: {}", fields[*name]),
        );
    }
    let mut equal = 0;
    for (name, v) in &r.fields {
        match fields.get(name) {
            None => t.diff(
                &r.class,
                name,
                "missing field",
                format!("{at}: forge {v:?}"),
            ),
            Some(j) if same(v, j) => equal += 1,
            Some(j) => t.diff(
                &r.class,
                name,
                "value",
                format!("{at}: forge {v:?}, etwdump {j}"),
            ),
        }
    }
    let entry = t.records.entry(r.class.clone()).or_default();
    entry.0 += 1;
    entry.1 += equal;
    // Wire order: the shared names in the same order.
    let common: Vec<&str> = truth.iter().copied().filter(|n| ours.contains(n)).collect();
    let ours_common: Vec<&str> = ours.iter().copied().filter(|n| truth.contains(n)).collect();
    if common != ours_common {
        t.diff(&r.class, "", "field order", format!("{at}: {ours:?}"));
    }
}

#[test]
fn every_forged_payload_decodes_to_the_forge_truth() {
    let dir = tempfile::tempdir().unwrap();
    let mut all = Tally::default();
    let mut widths = BTreeSet::new();
    for (stem, cfg) in payload_set() {
        let f = forge(&cfg);
        let path = dir.path().join(format!("{stem}.dmp"));
        f.write_to(&path).unwrap();
        let fx = cfg.fixture.as_ref().unwrap();
        let pdb = fx.dir.join(&cfg.pdb_name);
        let spec = cfg.etw.as_ref().unwrap();
        let etw = f.etw.as_ref().unwrap();
        let slots = payload_slots(spec);
        assert!(!slots.is_empty(), "{stem}: no payload session");
        for slot in slots {
            let out = etwdump(&[
                "events",
                path.to_str().unwrap(),
                "--pdb",
                pdb.to_str().unwrap(),
                "--format",
                "json",
                "--keep-untimed",
                "--session",
                &slot.to_string(),
            ]);
            assert!(
                out.status.success(),
                "{stem}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let j: Value = serde_json::from_slice(&out.stdout).unwrap();
            // Rows by buffer, in record order.
            let mut by_buffer: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
            for row in j["records"].as_array().unwrap() {
                let b = u64::from_str_radix(
                    row["buffer"].as_str().unwrap().trim_start_matches("0x"),
                    16,
                )
                .unwrap();
                by_buffer.entry(b).or_default().push(row);
            }
            for rows in by_buffer.values_mut() {
                rows.sort_by_key(|r| r["offset"].as_u64().unwrap());
            }
            let ExpectedSlot::Session(s) = &etw.slots[slot as usize] else {
                panic!("{stem}: slot {slot} is not a session");
            };
            let recs = payload_records(spec, slot);
            assert!(recs.len() > 300, "{stem}: {} records", recs.len());
            for (bi, ri, r) in recs {
                let addr = s.buffer_details[bi].address;
                let rows = by_buffer
                    .get(&addr)
                    .unwrap_or_else(|| panic!("{stem}: buffer {addr:#x} not listed"));
                assert_eq!(
                    rows.len() as u32,
                    s.buffer_details[bi].record_count,
                    "{stem}: buffer {addr:#x}: rows"
                );
                let at = format!("{stem} {addr:#x}[{ri}] {}", r.class);
                check_record(&mut all, r, rows[ri], &at);
                widths.insert(r.x64);
            }
        }
    }
    assert_eq!(widths.len(), 2, "both pointer widths");
    let mut report = String::new();
    let (mut nr, mut nf) = (0, 0);
    for (class, (r, f)) in &all.records {
        report += &format!("  {class}: {r} records, {f} fields equal\n");
        nr += r;
        nf += f;
    }
    eprintln!("payloads compared with the forge's truth ({nr} records, {nf} fields):\n{report}");
    let found: BTreeSet<(String, String, String)> = all.diffs.keys().cloned().collect();
    for ((class, field, kind), v) in &all.diffs {
        eprintln!(
            "DIFFERENCE {class}.{field} ({kind}): {} records, e.g. {}",
            v.len(),
            v[0]
        );
    }
    let known: BTreeSet<(String, String, String)> = KNOWN
        .iter()
        .map(|(c, f, k)| (c.to_string(), f.to_string(), k.to_string()))
        .collect();
    assert_eq!(
        found, known,
        "differences between etwdump and the forge's truth (left: found, right: KNOWN)"
    );
}
