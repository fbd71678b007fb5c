//! TraceLogging events of the real AMSITrace.etl (../shared/data/etl; skipped when absent),
//! decoded from their own metadata (`decode::tracelogging`).

use etwdump::decode::dispatch;
use etwdump::decode::payload::{Payload, Value};
use etwdump::text::Untrusted;
use std::path::PathBuf;

/// The real AMSITrace.etl, or None (said so) when ../shared is absent.
fn amsi_trace() -> Option<Vec<u8>> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/etl/AMSITrace.etl");
    let b = std::fs::read(&p).ok();
    if b.is_none() {
        eprintln!("SKIPPED: {} is not present", p.display());
    }
    b
}

/// Every EVENT_HEADER record of the file, decoded: (file offset, pid, payload).
fn decoded(b: &[u8]) -> Vec<(usize, Option<Payload>)> {
    let f = etwdump::etl::reader::read(b);
    let mut out = Vec::new();
    for buf in &f.buffers {
        let data = &b[buf.offset as usize..(buf.offset + u64::from(buf.buffer_size)) as usize];
        let valid = (buf.saved_offset as usize).min(data.len());
        etwdump::etl::records::walk_each(data, valid, |r| {
            if matches!(
                r.kind,
                etwdump::etl::records::RecordKind::EventHeader32
                    | etwdump::etl::records::RecordKind::EventHeader64
            ) {
                out.push((buf.offset as usize + r.offset, dispatch::decode(data, r)));
            }
        });
    }
    out
}

/// Issue 29 item 1: the 19 EVENT_HEADER records of the real AMSITrace.etl (Windows 10,
/// provider traits "AmsiTrace", Flags 0x0001, a PROV_TRAITS and an EVENT_SCHEMA_TL item each)
/// all decode from their own metadata with no problem: event `AmsiScript`, fields `Engine`
/// (UNICODESTRING), `Script` (UNICODESTRING) and `Raw Script` (UINT16 variable-count array,
/// OutType String: text), the last field ending exactly at the end of the record.
///
/// Compared with the independent decoders of tests/interop/.venv: etl-parser 1.0.1
/// (`etl.event.Event(...).parse_tracelogging()`, chunk by chunk) decodes the same 19 records
/// in the same order to the same event name and the same three values, field for field (its
/// `Raw Script` is a list of UINT16 code units; joined as characters it equals ours; 19 of 19
/// equal); dissect.etl 3.14 does not decode TraceLogging payloads but shows the same provider
/// traits name (`AmsiTrace`) and the same raw EVENT_SCHEMA_TL bytes (`+\x00\x00AmsiScript\x00
/// Engine\x00\x01Script\x00\x01Raw Script\x00\xc6\x02`) on all 19.
#[test]
fn amsi_trace_events_decode_from_their_metadata() {
    let Some(b) = amsi_trace() else {
        return;
    };
    let all = decoded(&b);
    assert_eq!(all.len(), 19);
    let mut engines = std::collections::BTreeMap::<String, u32>::new();
    let mut lengths = std::collections::BTreeSet::new();
    for (off, p) in &all {
        let p = p
            .as_ref()
            .unwrap_or_else(|| panic!("{off:#x}: not decoded"));
        assert_eq!(p.problem, None, "{off:#x}");
        assert_eq!(p.class, "TraceLogging");
        assert_eq!(p.event, Some(Untrusted::from("AmsiScript")));
        assert_eq!(p.provider, Some(Untrusted::from("AmsiTrace")));
        let names: Vec<&str> = p.fields.iter().map(|(n, _)| n.raw()).collect();
        assert_eq!(names, ["Engine", "Script", "Raw Script"], "{off:#x}");
        // The UINT16 array spells the same text as the string before it.
        assert_eq!(p.text("Script"), p.text("Raw Script"), "{off:#x}");
        lengths.insert(p.text("Script").unwrap().raw().chars().count());
        *engines
            .entry(p.text("Engine").unwrap().raw().to_string())
            .or_default() += 1;
    }
    assert_eq!(
        engines.into_iter().collect::<Vec<_>>(),
        [
            (
                "PowerShell_C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe_10.0.18362.1"
                    .to_string(),
                15
            ),
            ("VBScript".to_string(), 4)
        ]
    );
    assert_eq!(
        lengths.into_iter().collect::<Vec<_>>(),
        [9, 28, 88, 350, 368, 2473]
    );
    // The record at file offset 0x52f40 (etl-parser's 18th).
    let p = all
        .iter()
        .find(|(o, _)| *o == 0x52f40)
        .unwrap()
        .1
        .as_ref()
        .unwrap();
    assert_eq!(
        p.get("Script"),
        Some(&Value::Text("msgbox \"Is VBScript Dead?\"\r\n".into()))
    );
    assert_eq!(p.text("Engine"), Some(&Untrusted::from("VBScript")));
    let json = serde_json::to_value(p).unwrap();
    assert_eq!(
        json["fields"]["Raw Script"],
        "msgbox \"Is VBScript Dead?\"\r\n"
    );
    assert_eq!(json["provider"], "AmsiTrace");
}

/// The `events` row of a TraceLogging record: the payload in JSON as for MOF events, the
/// table's details column and the Timesketch message summarise it (provider/event and the
/// first fields, escaped, long values cut).
#[test]
fn amsi_trace_events_row_summary() {
    use etwdump::render::rows::Row;
    let Some(b) = amsi_trace() else {
        return;
    };
    let all = decoded(&b);
    let p = all.iter().find(|(o, _)| *o == 0x52f40).unwrap().1.clone();
    let row = etwdump::report::events::EventRow {
        header_type: "event_header64",
        pid: Some(13532),
        tid: Some(37384),
        payload: p,
        ..Default::default()
    };
    let want = "AmsiTrace/AmsiScript Engine=VBScript, \
                Script=msgbox \"Is VBScript Dead?\"\\u{d}\\u{a}, \
                Raw Script=msgbox \"Is VBScript Dead?\"\\u{d}\\u{a}";
    let line = row.table_line();
    assert!(line.ends_with(want), "{line}");
    let message = row.message();
    // The event's own provider and event names lead the message; where it was recorded ends it.
    assert_eq!(message, format!("{want} [logger ? , pid 13532 tid 37384]"));
    assert!(message.starts_with(want), "{message}");
    // A long script is cut in the summary, whole in JSON.
    let p = all.iter().find(|(o, _)| *o == 0x109e8).unwrap().1.clone();
    let row = etwdump::report::events::EventRow {
        payload: p,
        ..Default::default()
    };
    let line = row.table_line();
    assert!(
        line.contains("Script=@{\\u{d}\\u{a}GUID=\"1DA87E53"),
        "{line}"
    );
    assert!(line.contains("…, Raw Script="), "{line}");
    let json = serde_json::to_value(&row).unwrap();
    assert_eq!(
        json["payload"]["fields"]["Script"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        2473
    );
}
