//! `sessions` and `buffers` of triage dumps as tables and CSV.

use crate::report::triage::{TriageBuffer, TriageSessions};

impl TriageSessions {
    pub fn to_table(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::from("Triage dump: ETW sessions saved at bug check\n\n");
        let _ = writeln!(
            o,
            "{:>3}  {:<44} {:<15} {:<11} {:<10} {:>8} {:>7}  Start (UTC)",
            "ID", "Name", "source", "Mode", "Clock", "BufSize", "buffers"
        );
        let n = |v: Option<String>| v.unwrap_or_else(|| "?".into());
        for s in &self.sessions {
            let _ = writeln!(
                o,
                "{:>3}  {:<44} {:<15} {:<11} {:<10} {:>8} {:>7}  {}",
                s.logger_id.map_or_else(|| "?".into(), |x| x.to_string()),
                super::text::printable(s.name.as_deref().unwrap_or("?")),
                s.source,
                n(s.logger_mode.map(|m| format!("{m:#x}"))),
                n(s.clock_type_name
                    .clone()
                    .map(|c| c.chars().take(10).collect())),
                n(s.buffer_size.map(|b| format!("{b:#x}"))),
                s.buffers,
                n(s.start_time.clone())
            );
        }
        let _ = writeln!(o, "\nNot known: {}.", self.not_known);
        for w in &self.warnings {
            let _ = writeln!(o, "warning: {}", super::text::printable(&w.message));
        }
        o
    }

    pub fn to_csv(&self) -> String {
        let mut o = String::from(
            "logger_id,name,source,logger_mode,clock_type,buffer_size,start_time,buffers\n",
        );
        let n = |v: Option<String>| v.unwrap_or_default();
        for s in &self.sessions {
            let f = [
                n(s.logger_id.map(|x| x.to_string())),
                s.name.clone().unwrap_or_default(),
                s.source.to_string(),
                n(s.logger_mode.map(|m| format!("{m:#x}"))),
                n(s.clock_type.map(|c| c.to_string())),
                n(s.buffer_size.map(|b| format!("{b:#x}"))),
                n(s.start_time.clone()),
                s.buffers.to_string(),
            ];
            o.push_str(&crate::render::csv::csv_line(&f));
        }
        o
    }
}

/// Table of [`buffers`].
pub fn buffers_table(rows: &[TriageBuffer]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>3} {:<15} {:<20} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7}  duplicate of",
        "ID", "source", "address", "file off", "window@", "valid", "saved", "partial", "records"
    );
    let n = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for r in rows {
        let _ = writeln!(
            o,
            "{:>3} {:<15} {:<20} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7}  {}",
            n(r.session_id.map(|x| x.to_string())),
            r.source,
            n(r.address.clone()),
            n(r.file_offset.map(|x| format!("{x:#x}"))),
            format!("{:#x}", r.window_offset),
            format!("{:#x}", r.valid_bytes),
            format!("{:#x}", r.saved_bytes),
            format!("{:#x}", r.partial_bytes),
            r.record_count,
            r.duplicate_of.as_deref().unwrap_or("-")
        );
    }
    o
}

/// CSV of [`buffers`].
pub fn buffers_csv(rows: &[TriageBuffer]) -> String {
    let mut o = String::from("session_id,source,address,file_offset,window_offset,state,buffer_type,buffer_flag,processor,sequence_number,buffer_size,valid_bytes,saved_bytes,partial_bytes,trimmed_bytes,record_count,duplicate_of\n");
    let n = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in rows {
        let f = [
            n(r.session_id),
            r.source.to_string(),
            r.address.clone().unwrap_or_default(),
            n(r.file_offset),
            r.window_offset.to_string(),
            n(r.state),
            n(r.buffer_type),
            n(r.buffer_flag),
            n(r.processor),
            n(r.sequence_number),
            n(r.buffer_size),
            r.valid_bytes.to_string(),
            r.saved_bytes.to_string(),
            r.partial_bytes.to_string(),
            r.trimmed_bytes.to_string(),
            r.record_count.to_string(),
            r.duplicate_of.clone().unwrap_or_default(),
        ];
        o.push_str(&crate::render::csv::csv_line(&f));
    }
    o
}
