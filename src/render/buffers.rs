//! How `buffers` rows look in a table and in Timesketch's JSON Lines fields (their JSON and
//! CSV forms are their serde fields).

use super::rows::{Row, Timesketch};
use super::text::printable;
use crate::report::buffers::BufferRow;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

impl Row for BufferRow {
    fn table_header() -> String {
        format!(
            "{:>3}  {:<14} {:<18} {:<18} {:>4} {:>8} {:>9} {:>8} {:>7}  Lists / notes",
            "ID", "Source", "Address", "State", "CPU", "Seq", "Valid", "Trimmed", "Records"
        )
    }

    fn table_line(&self) -> String {
        let r = self;
        let mut notes: Vec<String> = r.lists.iter().map(|l| l.name().to_string()).collect();
        if let Some(o) = r.file_offset {
            notes.push(format!("file offset {o:#x}"));
        }
        if r.window_offset > 0 {
            notes.push(format!("window at +{:#x}", r.window_offset));
        }
        if r.partial_bytes > 0 {
            notes.push(format!("{:#x} partial bytes", r.partial_bytes));
        }
        if let Some(d) = &r.duplicate_of {
            notes.push(format!("repeats {d}"));
        }
        if r.consumer_pid.is_some() || r.consumer_process.is_some() {
            notes.push(format!(
                "in consumer PID {} {}",
                opt(r.consumer_pid),
                crate::text::shown_or(r.consumer_process.as_ref(), "?")
            ));
        }
        if let Some(v) = &r.found_via {
            notes.push(format!("via {v}"));
        }
        if let Some(w) = &r.window {
            notes.push(w.to_string());
        }
        notes.extend(
            r.warnings
                .iter()
                .map(|w| format!("warning: {}", printable(w))),
        );
        format!(
            "{:>3}  {:<14} {:<18} {:<18} {:>4} {:>8} {:>9} {:>8} {:>7}  {}",
            opt(r.session_id),
            r.source,
            r.address.as_deref().unwrap_or("-"),
            match (r.state_name, r.state) {
                (Some(n), Some(s)) => format!("{n} ({s})"),
                _ => "-".into(),
            },
            opt(r.processor),
            opt(r.sequence_number),
            format!("{:#x}", r.valid_bytes),
            r.trimmed_bytes,
            if r.compressed {
                "compr.".to_string()
            } else {
                r.record_count.to_string()
            },
            notes.join(", ")
        )
    }

    fn timesketch(&self, message: &mut String) -> Timesketch<'_> {
        let r = self;
        message.push_str(&format!(
            "logger {} {} buffer {}: {} records",
            opt(r.session_id),
            r.source,
            r.address.as_deref().unwrap_or("-"),
            r.record_count
        ));
        Timesketch {
            datetime: None,
            timestamp_desc: "ETW buffer (no time)",
        }
    }
}
