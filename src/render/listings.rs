//! How the per-record rows of `cswitch` and `events` look in a table and in Timesketch's
//! JSON Lines fields (their JSON and CSV forms are their serde fields).

use super::rows::{Row, Timesketch};
use crate::report::cswitch::SwitchRow;
use crate::report::events::EventRow;

impl Row for SwitchRow {
    fn table_header() -> String {
        format!(
            "{:>4} {:<30} {:>20} {:<30} {:<30} {:>5} {:<16} {:<18} {:>8}  source",
            "CPU",
            "time (UTC)",
            "timestamp (raw)",
            "old thread (process)",
            "new thread (process)",
            "prio",
            "old state",
            "wait reason",
            "wait"
        )
    }

    fn table_line(&self) -> String {
        let r = self;
        // A time that cannot be right is marked (time_flag: after the dump, before boot).
        let time = match (&r.time, r.time_flag) {
            (Some(t), Some(f)) => format!("{t} ({f})"),
            (Some(t), None) => t.clone(),
            (None, _) => "-".into(),
        };
        let who = |tid: Option<u32>, p: &Option<crate::text::Untrusted>| match (tid, p) {
            (Some(t), Some(p)) => format!("{t} {p}"),
            (Some(t), None) => t.to_string(),
            (None, _) => "?".into(),
        };
        format!(
            "{:>4} {:<30} {:>20} {:<30} {:<30} {:>5} {:<16} {:<18} {:>8}  {}",
            r.cpu.map(|c| c.to_string()).unwrap_or_default(),
            time,
            r.timestamp,
            who(Some(r.old_tid), &r.old_process),
            who(r.new_tid, &r.new_process),
            r.old_priority.map(|p| p.to_string()).unwrap_or_default(),
            r.old_state.as_deref().unwrap_or("-"),
            r.old_wait_reason.as_deref().unwrap_or("-"),
            r.new_thread_wait_time
                .map(|w| w.to_string())
                .unwrap_or_default(),
            r.source_label()
        )
    }

    fn timeline() -> bool {
        true
    }

    fn filetime(&self) -> Option<u64> {
        self.filetime
    }

    fn timesketch(&self) -> Timesketch {
        let r = self;
        let who = |tid: Option<u32>, p: &Option<crate::text::Untrusted>| match (tid, p) {
            (Some(t), Some(p)) => format!("{p} tid {t}"),
            (Some(t), None) => format!("tid {t}"),
            (None, _) => "unknown thread".into(),
        };
        let mut message = format!(
            "CPU {}: {} -> {}",
            r.cpu.map_or_else(|| "?".into(), |c| c.to_string()),
            who(Some(r.old_tid), &r.old_process),
            who(r.new_tid, &r.new_process)
        );
        if let Some(st) = &r.old_state {
            message.push_str(&format!("; old thread {st}"));
            if let Some(w) = &r.old_wait_reason {
                message.push_str(&format!(" ({w})"));
            }
        }
        message.push_str(&format!(" [{}]", r.source_label()));
        Timesketch {
            datetime: r.time.clone(),
            timestamp_desc: "Context switch",
            message,
        }
    }
}

impl Row for EventRow {
    fn table_header() -> String {
        format!(
            "{:>3} {:<14} {:>7} {:<14} {:<7} {:<22} {:<36} {:>5} {:>4} {:<30} {:>6} {:>6}  details",
            "ID",
            "source",
            "offset",
            "header",
            "hook",
            "hook name",
            "provider",
            "event",
            "cpu",
            "time (UTC)",
            "pid",
            "tid"
        )
    }

    fn table_line(&self) -> String {
        let r = self;
        let n = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        format!(
            "{:>3} {:<14} {:>7} {:<14} {:<7} {:<22} {:<36} {:>5} {:>4} {:<30} {:>6} {:>6}  {}",
            n(r.logger_id.map(|x| x.to_string())),
            r.source,
            format!("{:#x}", r.offset),
            r.header_type,
            n(r.hook.clone()),
            r.hook_name.unwrap_or("-"),
            n(r.provider.clone()),
            n(r.event_id.map(|x| x.to_string())),
            n(r.cpu.map(|x| x.to_string())),
            n(r.time.clone()),
            n(r.pid.map(|x| x.to_string())),
            n(r.tid.map(|x| x.to_string())),
            r.routine_symbol
                .clone()
                .or(r.routine.clone())
                .or_else(|| payload_summary(r))
                .unwrap_or_default()
        )
    }

    fn timesketch(&self) -> Timesketch {
        let r = self;
        let what = match (&r.hook_name, &r.hook, &r.provider) {
            (Some(n), _, _) => n.to_string(),
            (None, Some(h), _) => format!("hook {h}"),
            (None, None, Some(p)) => format!(
                "provider {}{p} event {}",
                r.provider_name
                    .map_or_else(String::new, |n| format!("{n} ")),
                r.event_id.map_or_else(|| "?".into(), |e| e.to_string())
            ),
            _ => r.header_type.to_string(),
        };
        let mut message = format!(
            "logger {} ({}): {what}",
            r.logger_id.map_or_else(|| "?".into(), |l| l.to_string()),
            r.source
        );
        if let Some(s) = r.routine_symbol.as_ref().or(r.routine.as_ref()) {
            message.push_str(&format!(" routine {s}"));
        }
        if let (Some(p), Some(t)) = (r.pid, r.tid) {
            message.push_str(&format!(" pid {p} tid {t}"));
        }
        // A raw payload's hex stays out of the message (the row's `payload` has it).
        let raw = r
            .payload
            .as_ref()
            .is_some_and(|p| p.class == crate::decode::raw::CLASS);
        if let Some(s) = payload_summary(r).filter(|_| !raw) {
            message.push_str(&format!(": {s}"));
        }
        Timesketch {
            datetime: r.time.clone(),
            timestamp_desc: "ETW event",
            message,
        }
    }

    fn timeline() -> bool {
        true
    }

    fn filetime(&self) -> Option<u64> {
        self.filetime
    }
}

impl Row for crate::report::scan::ScanRow {
    fn table_header() -> String {
        format!(
            "{:<15} {:<10} {:<18} {:<20} {:>4} {:>9} {:>8} {:>9} {:>7} {:>5}  notes",
            "kind",
            "class",
            "physical",
            "virtual",
            "ID",
            "BufSize",
            "Seq",
            "Valid",
            "Records",
            "Group"
        )
    }

    fn table_line(&self) -> String {
        let r = self;
        let n = |v: Option<u64>| v.map_or_else(|| "-".into(), |x| x.to_string());
        let class = r.class.map_or("-".to_string(), |c| {
            serde_json::to_value(c)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        });
        let mut notes = Vec::new();
        if r.complete == Some(false) && r.recovered_bytes != r.valid_bytes {
            notes.push(format!(
                "partial: {} of {} bytes",
                n(r.recovered_bytes),
                n(r.valid_bytes)
            ));
        }
        if let Some(b) = &r.chain_break {
            notes.push(b.to_string());
        }
        if let Some(s) = r.switches {
            notes.push(format!("{s} switches"));
        }
        if let Some(name) = &r.name {
            notes.push(name.to_string());
        }
        if let Some(e) = &r.evidence {
            notes.push(super::text::printable(e));
        }
        format!(
            "{:<15} {:<10} {:<18} {:<20} {:>4} {:>9} {:>8} {:>9} {:>7} {:>5}  {}",
            r.kind,
            class,
            r.physical_address.as_deref().unwrap_or("-"),
            r.virtual_address.as_deref().unwrap_or("-"),
            n(r.logger_id),
            r.buffer_size.map_or("-".into(), |b| format!("{b:#x}")),
            n(r.sequence_number),
            r.valid_bytes.map_or("-".into(), |b| format!("{b:#x}")),
            r.records.map_or("-".into(), |x| x.to_string()),
            r.group.map_or("-".into(), |x| x.to_string()),
            notes.join("; ")
        )
    }

    fn timesketch(&self) -> Timesketch {
        Timesketch {
            datetime: None,
            timestamp_desc: "ETW object found by scan (no time)",
            message: format!(
                "{} {} at physical {}",
                self.class.map_or("", |c| match c {
                    crate::etw::carve::Class::Live => "live",
                    crate::etw::carve::Class::Orphaned => "orphaned",
                    crate::etw::carve::Class::StaleCopy => "stale copy of a",
                    crate::etw::carve::Class::Unknown => "unclassified",
                }),
                self.kind,
                self.physical_address.as_deref().unwrap_or("-")
            ),
        }
    }
}

/// One line for a decoded payload (`decode::payload`): what happened to which process, thread
/// or image; a TraceLogging event's provider, name and first fields; any other kernel event's
/// hook name (or class) and first fields; text from the record escaped; `(decoding stopped:
/// …)` when the payload did not fit.
fn payload_summary(r: &EventRow) -> Option<String> {
    let p = r.payload.as_ref()?;
    let v = |name: &str| p.get(name).map_or_else(|| "?".into(), |v| v.to_string());
    let what = r.hook_name.unwrap_or(p.class);
    let mut s = match p.class {
        "Process_V2_TypeGroup1"
        | "Process_V3_TypeGroup1"
        | "Process_V4_TypeGroup1"
        | "Process_Defunct_TypeGroup1" => {
            let mut s = format!(
                "{what} {} (pid {}, parent {}, session {})",
                v("ImageFileName"),
                v("ProcessId"),
                v("ParentId"),
                v("SessionId")
            );
            if p.text("CommandLine").is_some_and(|c| !c.is_empty()) {
                s.push_str(&format!(" \"{}\"", v("CommandLine")));
            }
            if r.hook.as_deref() == Some("0x0302") {
                // An NTSTATUS (MOF sint32): shown as Windows shows status codes.
                let status = match p.get("ExitStatus") {
                    Some(crate::decode::payload::Value::Signed(x)) => {
                        format!("{:#010x}", *x as i32 as u32)
                    }
                    _ => v("ExitStatus"),
                };
                s.push_str(&format!(" exit status {status}"));
            }
            s
        }
        "Thread_V2_TypeGroup1" | "Thread_V3_TypeGroup1" => format!(
            "{what} tid {} in pid {}, start {}",
            v("TThreadId"),
            v("ProcessId"),
            v("Win32StartAddr")
        ),
        "Image_Load" | "Image_Load_V2" => format!(
            "{what} {} at {} size {} (pid {})",
            v("FileName"),
            v("ImageBase"),
            v("ImageSize"),
            v("ProcessId")
        ),
        crate::decode::tracelogging::CLASS => tracelogging_summary(p),
        crate::decode::raw::CLASS => return Some(raw_summary(p)),
        // The row names the provider and event id: the fields say the rest.
        crate::decode::manifest::CLASS if p.fields.is_empty() => "no fields".into(),
        crate::decode::manifest::CLASS => first_fields(p).trim_start().to_string(),
        _ => what.to_string() + &first_fields(p),
    };
    if let Some(why) = &p.problem {
        s.push_str(&format!(" (decoding stopped: {why})"));
    }
    Some(s)
}

/// `N bytes not decoded (why): 0011…`: a raw payload's size, the reason and its first bytes.
fn raw_summary(p: &crate::decode::payload::Payload) -> String {
    /// Hex digits shown (16 bytes).
    const SHOWN: usize = 32;
    let size = p.number("size").unwrap_or(0);
    let hex = match p.get("hex") {
        Some(crate::decode::payload::Value::Formatted(h)) => h.as_str(),
        _ => "",
    };
    let why = p
        .problem
        .as_deref()
        .and_then(|w| w.strip_prefix("not decoded: "))
        .unwrap_or("?");
    if size == 0 && p.fields.len() == 2 {
        return "no event data".into();
    }
    let more = if hex.len() > SHOWN { "…" } else { "" };
    format!(
        "{size} bytes not decoded ({why}): {}{more}",
        &hex[..hex.len().min(SHOWN)]
    )
}

/// `provider/event Field=value, …`: a TraceLogging event's names and first fields.
fn tracelogging_summary(p: &crate::decode::payload::Payload) -> String {
    let name = |t: Option<&crate::text::Untrusted>| crate::text::shown_or(t, "?");
    let s = match &p.provider {
        Some(_) => format!("{}/{}", name(p.provider.as_ref()), name(p.event.as_ref())),
        None => name(p.event.as_ref()),
    };
    s + &first_fields(p)
}

/// ` Field=value, …`: the first fields of a payload, each value cut to a few dozen characters
/// (already escaped by its Display); empty for a payload without fields.
fn first_fields(p: &crate::decode::payload::Payload) -> String {
    const FIELDS: usize = 3;
    const CHARS: usize = 60;
    let mut s = String::new();
    for (i, (k, v)) in p.fields.iter().take(FIELDS).enumerate() {
        let mut shown: String = v.to_string();
        if shown.chars().count() > CHARS {
            shown = shown.chars().take(CHARS).collect::<String>() + "…";
        }
        s.push_str(&format!("{}{k}={shown}", if i == 0 { " " } else { ", " }));
    }
    if p.fields.len() > FIELDS {
        s.push_str(&format!(", … {} fields", p.fields.len()));
    }
    s
}
