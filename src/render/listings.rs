//! How the per-record rows of `cswitch` and `events` look in a table and in Timesketch's
//! JSON Lines fields (their JSON and CSV forms are their serde fields).

use super::json::field::{int, key, opt_addr, opt_int, opt_str, str, value};

/// Write a JSON object's fields in order, each key a literal (`"{\"first\":"`,
/// `",\"next\":"`), each value by the expression given; the closing brace is the caller's.
macro_rules! object {
    ($out:ident; $k0:literal => $v0:expr $(, $k:literal => $v:expr)* $(,)?) => {{
        key($out, concat!("{\"", $k0, "\":").as_bytes());
        $v0;
        $(
            key($out, concat!(",\"", $k, "\":").as_bytes());
            $v;
        )*
    }};
}
use super::rows::{Row, Timesketch};
use crate::report::cswitch::SwitchRow;
use crate::report::events::EventRow;
use std::io;

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
            crate::text::shown_or(r.old_state.as_ref(), "-"),
            crate::text::shown_or(r.old_wait_reason.as_ref(), "-"),
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

    /// The serde form of the row, field by field (millions of rows).
    fn write_json(&self, out: &mut Vec<u8>) -> io::Result<()> {
        let r = self;
        object!(out;
            "cpu" => opt_int(out, r.cpu),
            "raw_timestamp" => int(out, r.timestamp),
            "time" => opt_str(out, r.time.as_deref()),
            "time_flag" => opt_str(out, r.time_flag),
            "old_tid" => int(out, r.old_tid),
            "old_process" => value(out, &r.old_process)?,
            "old_pid" => opt_int(out, r.old_pid),
            "new_tid" => opt_int(out, r.new_tid),
            "new_process" => value(out, &r.new_process)?,
            "new_pid" => opt_int(out, r.new_pid),
            "old_priority" => opt_int(out, r.old_priority),
            "new_priority" => opt_int(out, r.new_priority),
            "old_state" => value(out, &r.old_state)?,
            "old_wait_reason" => value(out, &r.old_wait_reason)?,
            "old_wait_mode" => value(out, &r.old_wait_mode)?,
            "old_state_wr" => opt_int(out, r.old_state_wr),
            "new_thread_wait_time" => opt_int(out, r.new_thread_wait_time),
            "source" => str(out, r.source),
            "logger_id" => opt_int(out, r.logger_id),
            "clock" => opt_int(out, r.clock),
            "found_by" => value(out, &r.found_by)?,
            "sources" => write_sources(out, &r.sources)?,
        );
        out.push(b'}');
        Ok(())
    }

    fn timesketch(&self, message: &mut String) -> Timesketch<'_> {
        // `CPU 1: a.exe tid 4 -> b.exe tid 8; old thread Waiting (Executive) [event logger 0]`,
        // written piece by piece (millions of rows).
        let r = self;
        let mut int = itoa::Buffer::new();
        let mut who =
            |m: &mut String, tid: Option<u32>, p: &Option<crate::text::Untrusted>| match (tid, p) {
                (Some(t), p) => {
                    if let Some(p) = p {
                        p.push_shown(m);
                        m.push(' ');
                    }
                    m.push_str("tid ");
                    m.push_str(int.format(t));
                }
                (None, _) => m.push_str("unknown thread"),
            };
        message.push_str("CPU ");
        match r.cpu {
            Some(c) => message.push_str(itoa::Buffer::new().format(c)),
            None => message.push('?'),
        }
        message.push_str(": ");
        who(message, Some(r.old_tid), &r.old_process);
        message.push_str(" -> ");
        who(message, r.new_tid, &r.new_process);
        if let Some(st) = &r.old_state {
            message.push_str("; old thread ");
            st.push_shown(message);
            if let Some(w) = &r.old_wait_reason {
                message.push_str(" (");
                w.push_shown(message);
                message.push(')');
            }
        }
        message.push_str(" [");
        r.push_source_label(message);
        message.push(']');
        Timesketch {
            datetime: r.time.as_deref(),
            timestamp_desc: "Context switch",
        }
    }
}

/// A switch row's `sources` as their serde form, field by field (one or a few per row of
/// millions).
fn write_sources(
    out: &mut Vec<u8>,
    sources: &[crate::report::cswitch::SwitchSource],
) -> io::Result<()> {
    out.push(b'[');
    for (i, s) in sources.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        object!(out;
            "source" => str(out, s.source),
            "logger_id" => opt_int(out, s.logger_id),
            "raw_timestamp" => int(out, s.raw_timestamp),
            "clock" => opt_int(out, s.clock),
            "buffer" => opt_addr(out, s.buffer),
            "offset" => opt_int(out, s.offset),
            "block" => opt_addr(out, s.block),
            "index" => opt_int(out, s.index),
        );
        // Only an .etl file's record names its file (skipped when absent, as serde does).
        if let Some(f) = &s.file {
            key(out, b",\"file\":");
            value(out, f)?;
        }
        out.push(b'}');
    }
    out.push(b']');
    Ok(())
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

    fn timesketch(&self, message: &mut String) -> Timesketch<'_> {
        let r = self;
        // What happened first, then its details, then where it was recorded:
        // `Process start: powershell.exe (pid 4312, parent 4100, session 1) "…" [logger 0
        // current_buffer, CPU 1, pid 4100 tid 5012]`.
        let tracelogging = r
            .payload
            .as_ref()
            .filter(|p| p.class == crate::decode::tracelogging::CLASS);
        // A TraceLogging event names its provider and event itself: that is the headline.
        match tracelogging {
            Some(p) => message.push_str(&tracelogging_summary(p)),
            None => push_headline(r, message),
        }
        let raw = r
            .payload
            .as_ref()
            .is_some_and(|p| p.class == crate::decode::raw::CLASS);
        // `: detail`, written in place and taken back when there is none or it is empty.
        let before = message.len();
        message.push_str(": ");
        let detail = message.len();
        match (&r.routine_symbol, &r.routine) {
            (Some(s), _) | (None, Some(s)) => message.push_str(s),
            // A raw payload's hex stays out of the message (the row's `payload` has it).
            _ if raw => {
                if let Some(p) = &r.payload {
                    message.push_str(&raw_words(p));
                }
            }
            _ if tracelogging.is_some() => {}
            _ => {
                push_payload_summary(r, message);
            }
        }
        if message.len() == detail {
            message.truncate(before);
        }
        let mut int = itoa::Buffer::new();
        message.push_str(" [logger ");
        match r.logger_id {
            Some(l) => message.push_str(int.format(l)),
            None => message.push('?'),
        }
        message.push(' ');
        message.push_str(r.source);
        if let Some(c) = r.cpu {
            message.push_str(", CPU ");
            message.push_str(int.format(c));
        }
        if let (Some(p), Some(t)) = (r.pid, r.tid) {
            message.push_str(", pid ");
            message.push_str(int.format(p));
            message.push_str(" tid ");
            message.push_str(int.format(t));
        }
        message.push(']');
        Timesketch {
            datetime: r.time.as_deref(),
            timestamp_desc: "ETW event",
        }
    }

    fn timeline() -> bool {
        true
    }

    fn filetime(&self) -> Option<u64> {
        self.filetime
    }

    /// The serde form of the row, field by field (millions of rows).
    fn write_json(&self, out: &mut Vec<u8>) -> io::Result<()> {
        let r = self;
        object!(out;
            "logger_id" => opt_int(out, r.logger_id),
            "source" => str(out, r.source),
            "buffer" => opt_str(out, r.buffer.as_deref()),
            "offset" => int(out, r.offset),
            "file_offset" => opt_int(out, r.file_offset),
            "header_type" => str(out, r.header_type),
            "hook" => opt_str(out, r.hook.as_deref()),
            "hook_name" => opt_str(out, r.hook_name),
            "provider" => opt_str(out, r.provider.as_deref()),
            "provider_name" => opt_str(out, r.provider_name),
            "event_id" => opt_int(out, r.event_id),
            "version" => opt_int(out, r.version),
            "raw_timestamp" => opt_int(out, r.timestamp),
            "time" => opt_str(out, r.time.as_deref()),
            "time_flag" => opt_str(out, r.time_flag),
            "cpu" => opt_int(out, r.cpu),
            "pid" => opt_int(out, r.pid),
            "tid" => opt_int(out, r.tid),
            "size" => int(out, r.size),
            "routine" => opt_str(out, r.routine.as_deref()),
            "routine_symbol" => opt_str(out, r.routine_symbol.as_deref()),
            "message_flags" => opt_str(out, r.message_flags.as_deref()),
            "sequence" => opt_int(out, r.sequence),
            "component_id" => opt_int(out, r.component_id),
            "payload" => match &r.payload {
                Some(p) => write_payload(out, p)?,
                None => out.extend_from_slice(b"null"),
            },
        );
        out.push(b'}');
        Ok(())
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

    fn timesketch(&self, message: &mut String) -> Timesketch<'_> {
        message.push_str(&format!(
            "{} {} at physical {}",
            self.class.map_or("", |c| match c {
                crate::etw::carve::Class::Live => "live",
                crate::etw::carve::Class::Orphaned => "orphaned",
                crate::etw::carve::Class::StaleCopy => "stale copy of a",
                crate::etw::carve::Class::Unknown => "unclassified",
            }),
            self.kind,
            self.physical_address.as_deref().unwrap_or("-")
        ));
        Timesketch {
            datetime: None,
            timestamp_desc: "ETW object found by scan (no time)",
        }
    }
}

/// A payload's serde form (`decode::payload::Payload`'s `Serialize`), its common values
/// written directly.
fn write_payload(out: &mut Vec<u8>, p: &crate::decode::payload::Payload) -> io::Result<()> {
    use crate::decode::payload::Value;
    key(out, b"{\"class\":");
    str(out, p.class);
    if let Some(e) = &p.event {
        key(out, b",\"event\":");
        value(out, e)?;
    }
    if let Some(pr) = &p.provider {
        key(out, b",\"provider\":");
        value(out, pr)?;
    }
    key(out, b",\"fields\":{");
    for (i, (k, v)) in p.fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        value(out, k)?;
        out.push(b':');
        match v {
            Value::Number(n) => int(out, *n),
            Value::Signed(n) => int(out, *n),
            Value::Address(v) => str(out, crate::addr::hex_str(*v, &mut [0; 18])),
            Value::Formatted(t) => str(out, t),
            Value::Text(t) => value(out, t)?,
            other => value(out, other)?,
        }
    }
    key(out, b"},\"problem\":");
    opt_str(out, p.problem.as_deref());
    if let Some(h) = &p.how {
        key(out, b",\"how\":");
        str(out, h);
    }
    out.push(b'}');
    Ok(())
}

/// One line for a decoded payload (`decode::payload`): what happened to which process, thread
/// or image; a TraceLogging event's provider, name and first fields; any other kernel event's
/// hook name (or class) and first fields; text from the record escaped; `(decoding stopped:
/// …)` when the payload did not fit.
fn payload_summary(r: &EventRow) -> Option<String> {
    let mut s = String::new();
    push_payload_summary(r, &mut s).then_some(s)
}

/// [`payload_summary`] appended to `out`; false when the row has no payload (nothing written).
fn push_payload_summary(r: &EventRow, out: &mut String) -> bool {
    let Some(p) = r.payload.as_ref() else {
        return false;
    };
    // The classes most rows have, written in place (millions of rows): a kernel class's
    // first fields, the hook name leading the message.
    if r.hook_name.is_some()
        && !matches!(
            p.class,
            "Process_V2_TypeGroup1"
                | "Process_V3_TypeGroup1"
                | "Process_V4_TypeGroup1"
                | "Process_Defunct_TypeGroup1"
                | "Thread_V2_TypeGroup1"
                | "Thread_V3_TypeGroup1"
                | "Image_Load"
                | "Image_Load_V2"
                | crate::decode::tracelogging::CLASS
                | crate::decode::raw::CLASS
                | crate::decode::manifest::CLASS
        )
        && p.problem.is_none()
    {
        // `trim_start` of what `first_fields` gives: without its leading blank (a kernel
        // class's field names are etwdump's own, none starting with a blank).
        push_first_fields(p, out, "");
        return true;
    }
    let v = |name: &str| p.get(name).map_or_else(|| "?".into(), |v| v.to_string());
    let s = match p.class {
        "Process_V2_TypeGroup1"
        | "Process_V3_TypeGroup1"
        | "Process_V4_TypeGroup1"
        | "Process_Defunct_TypeGroup1" => {
            let mut s = format!(
                "{} (pid {}, parent {}, session {})",
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
            "tid {} in pid {}, start {}",
            v("TThreadId"),
            v("ProcessId"),
            v("Win32StartAddr")
        ),
        "Image_Load" | "Image_Load_V2" => format!(
            "{} at {} size {} (pid {})",
            v("FileName"),
            v("ImageBase"),
            v("ImageSize"),
            v("ProcessId")
        ),
        crate::decode::tracelogging::CLASS => tracelogging_summary(p),
        crate::decode::raw::CLASS => {
            out.push_str(&raw_summary(p));
            return true;
        }
        // The row names the provider and event id: the fields say the rest.
        crate::decode::manifest::CLASS if p.fields.is_empty() => "no fields".into(),
        crate::decode::manifest::CLASS => first_fields(p).trim_start().to_string(),
        // A kernel class: the hook name has its own column and leads the message.
        _ if r.hook_name.is_some() && p.fields.is_empty() => String::new(),
        _ if r.hook_name.is_some() => {
            let start = out.len();
            push_first_fields(p, out, "");
            push_problem(p, out, start);
            return true;
        }
        _ => p.class.to_string() + &first_fields(p),
    };
    let start = out.len();
    out.push_str(&s);
    push_problem(p, out, start);
    true
}

/// ` (decoding stopped: why)` after the message begun at `start` of `out` (without the blank
/// when it is empty), when decoding stopped.
fn push_problem(p: &crate::decode::payload::Payload, out: &mut String, start: usize) {
    if let Some(why) = &p.problem {
        if out.len() > start {
            out.push(' ');
        }
        out.push_str("(decoding stopped: ");
        out.push_str(why);
        out.push(')');
    }
}

/// What a record is, in words, for the Timesketch message: a kernel hook's name as a phrase
/// (`PROCESS_START` is "Process start", `MSI_INTERRUPT` "MSI interrupt"), else the hook id, a
/// provider's event (`Microsoft-Windows-Kernel-Boot event 153`, the GUID when the provider has
/// no known name; a TRACE_MESSAGE's message number), else the header type.
fn push_headline(r: &EventRow, out: &mut String) {
    match (&r.hook_name, &r.hook, &r.provider) {
        (Some(n), _, _) => push_phrase_cached(n, out),
        (None, Some(h), _) => {
            out.push_str("Kernel event ");
            out.push_str(h);
        }
        (None, None, Some(p)) => {
            out.push_str(r.provider_name.unwrap_or(p));
            out.push_str(" event ");
            match r.event_id {
                Some(e) => out.push_str(itoa::Buffer::new().format(e)),
                None => out.push('?'),
            }
        }
        _ => out.push_str(r.header_type),
    }
}

/// `PROCESS_DC_START` as "Process DC start": the words of a hook name in lower case, the first
/// capitalised, abbreviations kept.
#[cfg(test)]
fn phrase(hook_name: &str) -> String {
    let mut out = String::new();
    push_phrase(hook_name, &mut out);
    out
}

/// [`push_phrase`] of one of etwdump's own hook names, from a small per-thread table of the
/// phrases made so far (a listing has a few dozen hooks and millions of rows).
fn push_phrase_cached(hook_name: &'static str, out: &mut String) {
    /// Hooks remembered per thread; past this, phrases are made each time.
    const KEPT: usize = 256;
    thread_local! {
        static PHRASES: std::cell::RefCell<Vec<(&'static str, String)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    PHRASES.with(|t| {
        let Ok(mut t) = t.try_borrow_mut() else {
            return push_phrase(hook_name, out);
        };
        // The same name is the same static text: compared by address first.
        if let Some((_, p)) = t
            .iter()
            .find(|(n, _)| std::ptr::eq(*n, hook_name) || *n == hook_name)
        {
            out.push_str(p);
            return;
        }
        let mut p = String::new();
        push_phrase(hook_name, &mut p);
        out.push_str(&p);
        if t.len() < KEPT {
            t.push((hook_name, p));
        }
    })
}

/// [`phrase`] appended to `out`.
fn push_phrase(hook_name: &str, out: &mut String) {
    const KEEP: &[&str] = &[
        "DC", "DPC", "ISR", "MSI", "IO", "TCP", "UDP", "IP", "IPV4", "IPV6", "CPU", "PNP", "NIC",
        "IRQ", "DPI", "WMI", "ETW", "PMC", "APC", "ALPC", "LPC", "CCSWAP", "WDF", "SMB", "TLB",
        "PFN", "VM", "KE", "MM",
    ];
    for (i, w) in hook_name.split('_').filter(|w| !w.is_empty()).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if KEEP.contains(&w) {
            out.push_str(w);
            continue;
        }
        for (j, c) in w.chars().enumerate() {
            out.push(if i == 0 && j == 0 {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            });
        }
    }
}

/// `N bytes not decoded (why)`: a raw payload in words, without its hex.
fn raw_words(p: &crate::decode::payload::Payload) -> String {
    let size = p.number("size").unwrap_or(0);
    let why = p
        .problem
        .as_deref()
        .and_then(|w| w.strip_prefix("not decoded: "))
        .unwrap_or("?");
    if size == 0 && p.fields.len() == 2 {
        return "no event data".into();
    }
    format!("{size} bytes not decoded ({why})")
}

/// `N bytes not decoded (why): 0011…`: a raw payload's size, the reason and its first bytes.
fn raw_summary(p: &crate::decode::payload::Payload) -> String {
    /// Hex digits shown (16 bytes).
    const SHOWN: usize = 32;
    let words = raw_words(p);
    let hex = match p.get("hex") {
        Some(crate::decode::payload::Value::Formatted(h)) => h.as_str(),
        _ => "",
    };
    if hex.is_empty() {
        return words;
    }
    let more = if hex.len() > SHOWN { "…" } else { "" };
    format!("{words}: {}{more}", &hex[..hex.len().min(SHOWN)])
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
    let mut s = String::new();
    push_first_fields(p, &mut s, " ");
    s
}

/// [`first_fields`] appended to `s`, without `fmt` for the common values.
/// `lead` is written before the first field (`first_fields` gives " ").
fn push_first_fields(p: &crate::decode::payload::Payload, s: &mut String, lead: &str) {
    use crate::decode::payload::Value;
    use std::fmt::Write as _;
    const FIELDS: usize = 3;
    const CHARS: usize = 60;
    for (i, (k, v)) in p.fields.iter().take(FIELDS).enumerate() {
        s.push_str(if i == 0 { lead } else { ", " });
        k.push_shown(s);
        s.push('=');
        let start = s.len();
        match v {
            Value::Number(n) => s.push_str(itoa::Buffer::new().format(*n)),
            Value::Signed(n) => s.push_str(itoa::Buffer::new().format(*n)),
            Value::Address(v) => s.push_str(crate::addr::hex_str(*v, &mut [0; 18])),
            Value::Formatted(x) => s.push_str(x),
            _ => {
                let _ = write!(s, "{v}");
            }
        }
        // Cut to CHARS characters (a character is at least one byte).
        if s.len() - start > CHARS {
            if let Some((cut, _)) = s[start..].char_indices().nth(CHARS) {
                s.truncate(start + cut);
                s.push('…');
            }
        }
    }
    if p.fields.len() > FIELDS {
        s.push_str(", … ");
        s.push_str(itoa::Buffer::new().format(p.fields.len()));
        s.push_str(" fields");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::payload::{Fields, Payload, Value};

    #[test]
    fn hook_names_read_as_phrases() {
        for (name, want) in [
            ("PROCESS_START", "Process start"),
            ("PROCESS_DC_START", "Process DC start"),
            ("MSI_INTERRUPT", "MSI interrupt"),
            ("TIMERDPC", "Timerdpc"),
            ("DPC", "DPC"),
            ("SEND_IPV4", "Send IPV4"),
            ("_ODD__NAME_", "Odd name"),
            ("", ""),
        ] {
            assert_eq!(phrase(name), want, "{name}");
        }
    }

    fn process_end() -> EventRow {
        let fields = [
            ("ImageFileName", Value::Text("powershell.exe".into())),
            ("ProcessId", Value::Number(4312)),
            ("ParentId", Value::Number(4100)),
            ("SessionId", Value::Number(1)),
            ("ExitStatus", Value::Signed(-1073741510)),
            (
                "CommandLine",
                Value::Text("powershell -enc \u{1b}[2J".into()),
            ),
        ];
        EventRow {
            logger_id: Some(0),
            source: "current_buffer",
            header_type: "system64",
            hook: Some("0x0302".into()),
            hook_name: Some("PROCESS_END"),
            cpu: Some(1),
            pid: Some(4100),
            tid: Some(5012),
            payload: Some(Payload {
                class: "Process_V4_TypeGroup1",
                fields: Fields(fields.into_iter().map(|(k, v)| (k.into(), v)).collect()).0,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn messages_say_what_happened_then_where() {
        let r = process_end();
        // Text from the record stays escaped (ESC as \u{1b}); the status as a status code.
        assert_eq!(
            r.message(),
            "Process end: powershell.exe (pid 4312, parent 4100, session 1) \
             \"powershell -enc \\u{1b}[2J\" exit status 0xc000013a \
             [logger 0 current_buffer, CPU 1, pid 4100 tid 5012]"
        );
        // The table's details column: the same summary, the hook name in its own column.
        assert!(r.table_line().ends_with(
            "  powershell.exe (pid 4312, parent 4100, session 1) \"powershell -enc \\u{1b}[2J\" exit status 0xc000013a"
        ));
        // A provider's event without a decoded payload: its name and id, nothing invented.
        let e = EventRow {
            logger_id: Some(10),
            source: "secondary_data",
            header_type: "event_header64",
            provider: Some("15ca44ff-4d7a-4baa-bba5-0998955e531e".into()),
            provider_name: Some("Microsoft-Windows-Kernel-Boot"),
            event_id: Some(153),
            ..Default::default()
        };
        assert_eq!(
            e.message(),
            "Microsoft-Windows-Kernel-Boot event 153 [logger 10 secondary_data]"
        );
        let e = EventRow {
            provider_name: None,
            ..e
        };
        assert_eq!(
            e.message(),
            "15ca44ff-4d7a-4baa-bba5-0998955e531e event 153 [logger 10 secondary_data]"
        );
    }
}
