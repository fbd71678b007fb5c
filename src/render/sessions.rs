//! `sessions` as a table and as CSV.

use super::text::printable;
use crate::etw::loggers::{RejectedSlot, Session, SessionList};
use crate::report::sessions::{SavedSession, Sessions};
use crate::report::RowFormat;
use crate::text::Untrusted;
use std::fmt::Write as _;

/// CSV columns: the JSON keys, in order (session keys, then those of a rejected slot).
pub(crate) const CSV_COLUMNS: &[&str] = &[
    "kind",
    "logger_id",
    "name",
    "log_file",
    "instance_guid",
    "address",
    "logger_mode",
    "logger_mode_flags",
    "clock_type",
    "clock_type_name",
    "buffer_size",
    "minimum_buffers",
    "maximum_buffers",
    "number_of_buffers",
    "buffers_written",
    "events_lost",
    "log_buffers_lost",
    "real_time_buffers_lost",
    "start_time",
    "pool_type",
    "layout_source",
    "maximum_event_size",
    "identity",
    "anomalies",
    "warnings",
    "consumers",
    "slot",
    "value",
    "field",
    "reason",
    "source",
    "buffers",
];

fn num(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn row(s: &Session) -> Vec<String> {
    vec![
        "session".into(),
        s.logger_id.to_string(),
        s.name.as_ref().map(Untrusted::csv_cell).unwrap_or_default(),
        s.log_file
            .as_ref()
            .map(Untrusted::csv_cell)
            .unwrap_or_default(),
        s.instance_guid.clone().unwrap_or_default(),
        s.address.to_string(),
        num(s.logger_mode),
        s.logger_mode_flags.join("|"),
        num(s.clock_type),
        s.clock_type_name.unwrap_or_default().to_string(),
        num(s.buffer_size),
        num(s.minimum_buffers),
        num(s.maximum_buffers),
        num(s.number_of_buffers),
        num(s.buffers_written),
        num(s.events_lost),
        num(s.log_buffers_lost),
        num(s.real_time_buffers_lost),
        s.start_time.clone().unwrap_or_default(),
        num(s.pool_type),
        s.layout_source.to_string(),
        num(s.maximum_event_size),
        s.identity.join("|"),
        s.anomalies
            .iter()
            .map(|a| format!("{}: {}", a.field, a.why))
            .collect::<Vec<_>>()
            .join("; "),
        s.warnings
            .iter()
            .map(|w| w.message.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        s.consumers
            .iter()
            .map(consumer_text)
            .collect::<Vec<_>>()
            .join("; "),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        "logger_context".into(),
        String::new(),
    ]
}

/// One consumer as text: "PID 1100 svchost.exe (consumer 0x..., EPROCESS 0x...)".
fn consumer_text(c: &crate::etw::consumers::Consumer) -> String {
    format!(
        "PID {} {} (consumer {}, EPROCESS {})",
        c.pid.map_or_else(|| "?".into(), |p| p.to_string()),
        crate::text::shown_or(c.process.as_ref(), "(unreadable)"),
        c.address,
        c.eprocess.map_or_else(|| "?".into(), |e| e.to_string())
    )
}

fn saved_row(s: &SavedSession) -> Vec<String> {
    let mut v = vec![String::new(); CSV_COLUMNS.len()];
    let n = CSV_COLUMNS.len();
    let set = |v: &mut Vec<String>, col: &str, x: String| {
        if let Some(i) = CSV_COLUMNS.iter().position(|c| *c == col) {
            v[i] = x;
        }
    };
    set(&mut v, "kind", "saved_session".into());
    set(&mut v, "logger_id", num(s.logger_id));
    set(
        &mut v,
        "name",
        s.name.as_ref().map(Untrusted::csv_cell).unwrap_or_default(),
    );
    set(&mut v, "logger_mode", num(s.logger_mode));
    set(&mut v, "logger_mode_flags", s.logger_mode_flags.join("|"));
    set(&mut v, "clock_type", num(s.clock_type));
    set(
        &mut v,
        "clock_type_name",
        s.clock_type_name.clone().unwrap_or_default(),
    );
    set(&mut v, "buffer_size", num(s.buffer_size));
    set(
        &mut v,
        "start_time",
        s.start_time.clone().unwrap_or_default(),
    );
    v[n - 2] = s.source.to_string();
    v[n - 1] = s.buffers.to_string();
    v
}

fn rejected_row(r: &RejectedSlot) -> Vec<String> {
    let mut v = vec![String::new(); CSV_COLUMNS.len()];
    v[0] = "rejected_slot".into();
    let n = CSV_COLUMNS.len();
    v[n - 6] = r.slot.to_string();
    v[n - 5] = r.value.to_string();
    v[n - 4] = r.field.unwrap_or_default().to_string();
    v[n - 3] = r.reason.clone();
    v
}

/// `sessions --format csv`: one line per session (read from its logger context, or saved in a
/// triage dump), then one per rejected slot; the columns are the JSON keys of every kind.
pub fn to_csv(s: &Sessions<'_, '_>) -> String {
    let mut o = CSV_COLUMNS.join(",");
    o.push('\n');
    let rows: Vec<Vec<String>> = match s.list() {
        Some(list) => list
            .sessions
            .iter()
            .map(row)
            .chain(list.rejected.iter().map(rejected_row))
            .collect(),
        None => s.saved().iter().map(saved_row).collect(),
    };
    for r in rows {
        o.push_str(&crate::render::csv::csv_line(&r));
    }
    o
}

/// `sessions` as a table: the logger array and its sessions (memory dumps), or the sessions
/// a triage dump saved and what cannot be known from it.
pub fn to_table(s: &Sessions<'_, '_>) -> String {
    match s.list() {
        Some(list) => list_table(list),
        None => saved_table(&s.saved(), &s.warnings),
    }
}

fn saved_table(sessions: &[SavedSession], warnings: &[crate::warning::Warning]) -> String {
    let mut o = String::from("Triage dump: ETW sessions saved at bug check\n\n");
    let _ = writeln!(
        o,
        "{:>3}  {:<44} {:<15} {:<11} {:<10} {:>8} {:>7}  Start (UTC)",
        "ID", "Name", "source", "Mode", "Clock", "BufSize", "buffers"
    );
    let n = |v: Option<String>| v.unwrap_or_else(|| "?".into());
    for s in sessions {
        let _ = writeln!(
            o,
            "{:>3}  {:<44} {:<15} {:<11} {:<10} {:>8} {:>7}  {}",
            s.logger_id.map_or_else(|| "?".into(), |x| x.to_string()),
            crate::text::shown_or(s.name.as_ref(), "?"),
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
    for w in warnings.iter().filter(|w| super::output::shown(w)) {
        let _ = writeln!(o, "{}", super::output::text_line(w));
    }
    if let Some(line) = super::output::hidden_notes_line(warnings) {
        let _ = writeln!(o, "{line}");
    }
    o
}

fn list_table(list: &SessionList) -> String {
    let mut o = String::new();
    match &list.array {
        Some(a) => {
            let _ = writeln!(
                o,
                "Logger array: {} ({} slots) via {}; {} sessions, {} free slots, {} rejected slots",
                a.address,
                a.capacity,
                a.route.describe(),
                list.sessions.len(),
                list.free_slots,
                list.rejected.len()
            );
            for r in list.routes.iter().skip(1) {
                let _ = writeln!(
                    o,
                    "  cross-check: {} gives {}{}",
                    r.route.describe(),
                    r.address,
                    if r.address == a.address {
                        " (agrees)"
                    } else {
                        " (DISAGREES)"
                    }
                );
            }
        }
        None => {
            let _ = writeln!(o, "Logger array: not found");
        }
    }
    let _ = writeln!(
        o,
        "\n{:>3}  {:<34} {:<10} {:<10} {:>8} {:>13} {:>9} {:>8}  {:<28} Log file",
        "ID", "Name", "Mode", "Clock", "BufSize", "Buf n/min/max", "Written", "Lost", "Start (UTC)",
    );
    for s in &list.sessions {
        let _ = writeln!(
            o,
            "{:>3}  {:<34} {:<10} {:<10} {:>8} {:>13} {:>9} {:>8}  {:<28} {}",
            s.logger_id,
            crate::text::shown_or(s.name.as_ref(), "(unreadable)"),
            s.logger_mode
                .map(|m| format!("{m:#x}"))
                .unwrap_or_else(|| "?".into()),
            s.clock_type_name.unwrap_or("?"),
            s.buffer_size
                .map(|b| format!("{b:#x}"))
                .unwrap_or_else(|| "?".into()),
            format!(
                "{}/{}/{}",
                num(s.number_of_buffers),
                num(s.minimum_buffers),
                num(s.maximum_buffers)
            ),
            num(s.buffers_written),
            num(s.events_lost),
            s.start_time.as_deref().unwrap_or("-"),
            crate::text::shown_or(s.log_file.as_ref(), "-"),
        );
    }
    for s in &list.sessions {
        for c in &s.consumers {
            let _ = writeln!(
                o,
                "consumer: logger {}: {}",
                s.logger_id,
                printable(&consumer_text(c))
            );
        }
    }
    for s in &list.sessions {
        for a in &s.anomalies {
            let _ = writeln!(
                o,
                "anomaly: logger {}: {} = {:#x}: {}",
                s.logger_id,
                a.field,
                a.value,
                printable(&a.why)
            );
        }
        for w in s.warnings.iter().filter(|w| super::output::shown(w)) {
            let _ = writeln!(
                o,
                "{}: logger {}: {}",
                if w.is_note() { "note" } else { "warning" },
                s.logger_id,
                printable(&w.message)
            );
        }
    }
    for w in list.warnings.iter().filter(|w| super::output::shown(w)) {
        let _ = writeln!(o, "{}", super::output::text_line(w));
    }
    let all: Vec<crate::warning::Warning> = list
        .sessions
        .iter()
        .flat_map(|s| s.warnings.iter().cloned())
        .chain(list.warnings.iter().cloned())
        .collect();
    if let Some(line) = super::output::hidden_notes_line(&all) {
        let _ = writeln!(o, "{line}");
    }
    o
}

impl super::output::Render for Sessions<'_, '_> {
    fn render(&self, out: &mut dyn std::io::Write, format: RowFormat) -> std::io::Result<()> {
        match format {
            RowFormat::Json => {
                super::output::envelope(out, "sessions", &self.records(), &self.warnings)
            }
            RowFormat::Csv => out.write_all(to_csv(self).as_bytes()),
            _ => super::output::table(out, &to_table(self)),
        }
    }

    /// CSV keeps stdout machine-readable: the warnings go to stderr (the table and the JSON
    /// carry them).
    fn stderr_warnings(&self, format: RowFormat) -> &[crate::warning::Warning] {
        match format {
            RowFormat::Csv => &self.warnings,
            _ => &[],
        }
    }
}
