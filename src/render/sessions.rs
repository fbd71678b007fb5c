//! `sessions` as a table and as CSV.

use super::text::printable;
use crate::etw::loggers::{RejectedSlot, Session, SessionList};
use std::fmt::Write as _;

/// CSV columns: the JSON keys, in order (session keys, then those of a rejected slot).
pub const CSV_COLUMNS: &[&str] = &[
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
    "slot",
    "value",
    "field",
    "reason",
];

fn num(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn row(s: &Session) -> Vec<String> {
    vec![
        "session".into(),
        s.logger_id.to_string(),
        s.name.clone().unwrap_or_default(),
        s.log_file.clone().unwrap_or_default(),
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
        s.warnings.join("; "),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ]
}

fn rejected_row(r: &RejectedSlot) -> Vec<String> {
    let mut v = vec![String::new(); CSV_COLUMNS.len()];
    v[0] = "rejected_slot".into();
    let n = CSV_COLUMNS.len();
    v[n - 4] = r.slot.to_string();
    v[n - 3] = r.value.to_string();
    v[n - 2] = r.field.unwrap_or_default().to_string();
    v[n - 1] = r.reason.clone();
    v
}

pub fn to_csv(list: &SessionList) -> String {
    let mut o = CSV_COLUMNS.join(",");
    o.push('\n');
    let rows = list
        .sessions
        .iter()
        .map(row)
        .chain(list.rejected.iter().map(rejected_row));
    for r in rows {
        o.push_str(&crate::render::csv::csv_line(&r));
    }
    o
}

pub fn to_table(list: &SessionList) -> String {
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
            printable(s.name.as_deref().unwrap_or("(unreadable)")),
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
            printable(s.log_file.as_deref().unwrap_or("-")),
        );
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
        for w in &s.warnings {
            let _ = writeln!(o, "warning: logger {}: {}", s.logger_id, printable(w));
        }
    }
    for w in &list.warnings {
        let _ = writeln!(o, "warning: {}", printable(&w.message));
    }
    o
}
