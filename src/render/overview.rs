//! `overview` as text (one screen) and JSON.

use super::text::json_terminal_safe;
use crate::report::overview::Overview;
use crate::report::RowFormat;
use std::fmt::Write;

/// The overview as a terminal page; text from memory made printable.
pub fn to_table(o: &Overview) -> String {
    let mut s = String::new();
    let d = &o.dump;
    let _ = writeln!(
        s,
        "Dump: {} ({}), build {}, {} CPUs, taken {}; symbols: {}",
        d.kind, d.arch, d.build, d.processors, d.system_time, d.symbols
    );
    let _ = writeln!(s, "\nETW sessions ({}):", o.sessions.len());
    let _ = writeln!(
        s,
        " {:>3}  {:<34} {:<10} {:>8} {:>7} {:>6}  {:<28} log file",
        "ID", "name", "clock", "BufSize", "buffers", "lost", "started (UTC)"
    );
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for x in &o.sessions {
        let _ = writeln!(
            s,
            " {:>3}  {:<34} {:<10} {:>8} {:>7} {:>6}  {:<28} {}",
            opt(x.logger_id),
            crate::text::shown_or(x.name.as_ref(), "(unknown)"),
            x.clock.as_deref().unwrap_or("-"),
            x.buffer_size
                .map_or_else(|| "-".to_string(), |b| format!("{b:#x}")),
            x.buffers_found,
            opt(x.events_lost),
            x.start_time.as_deref().unwrap_or("-"),
            crate::text::shown_or(x.log_file.as_ref(), "-")
        );
    }
    let sources: Vec<String> = o
        .switches_by_source
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    if sources.is_empty() {
        let _ = writeln!(s, "\nContext switches: none found");
    } else {
        let _ = writeln!(
            s,
            "\nContext switches: {} (records: {}); the last before the dump, per CPU:",
            o.switches,
            sources.join(", ")
        );
    }
    for (cpu, rows) in &o.last_switches {
        let _ = writeln!(s, " CPU {cpu}:");
        for r in rows {
            let _ = writeln!(
                s,
                "   {:<30} {} -> {}{} [{}]",
                switch_time(r),
                thread(Some(r.old_tid), &r.old_process),
                thread(r.new_tid, &r.new_process),
                r.old_wait_reason
                    .as_ref()
                    .map_or_else(String::new, |w| format!(" ({w})")),
                r.source_label()
            );
        }
    }
    if o.warnings_by_kind.is_empty() {
        let _ = writeln!(s, "\nNo warnings.");
    } else {
        let kinds: Vec<String> = o
            .warnings_by_kind
            .iter()
            .map(|(k, n)| {
                let name = serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                format!("{n} {name}")
            })
            .collect();
        let _ = writeln!(
            s,
            "\nWarnings: {} (`etwdump sessions` and `etwdump cswitch` give each in full)",
            kinds.join(", ")
        );
    }
    s
}

/// A thread of a switch as the overview shows it: `process tid N`, `tid N` or `?` (the
/// process name escaped).
pub(crate) fn thread(tid: Option<u32>, p: &Option<crate::text::Untrusted>) -> String {
    match (tid, p) {
        (Some(t), Some(p)) => format!("{p} tid {t}"),
        (Some(t), None) => format!("tid {t}"),
        (None, _) => "?".to_string(),
    }
}

/// A switch's time as the overview shows it: UTC (with its flag), else the raw clock value.
pub(crate) fn switch_time(r: &crate::report::cswitch::SwitchRow) -> String {
    match (&r.time, r.time_flag) {
        (Some(t), Some(f)) => format!("{t} ({f})"),
        (Some(t), None) => t.clone(),
        (None, _) => format!("raw {}", r.timestamp),
    }
}

/// The overview as pretty JSON (terminal-safe).
pub(crate) fn to_json(o: &Overview) -> serde_json::Result<String> {
    let mut v = serde_json::to_vec_pretty(&crate::report::Document::new("overview", o))?;
    json_terminal_safe(&mut v);
    Ok(String::from_utf8_lossy(&v).into_owned())
}

impl super::output::Render for Overview {
    fn render(&self, out: &mut dyn std::io::Write, format: RowFormat) -> std::io::Result<()> {
        match format {
            RowFormat::Json => writeln!(out, "{}", to_json(self)?),
            _ => super::output::table(out, &to_table(self)),
        }
    }
}
