//! What the commands print: reports assembled from the lower layers, rendered as a table or
//! JSON. Nothing here parses dump bytes itself.

pub mod buffers;
pub mod cswitch;
pub mod events;
pub mod extract;
pub mod info;
pub mod read;
pub mod sessions;
pub mod svg;
pub mod symbols;
pub mod triage;

/// Output format of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// Output format of a listing command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
    Csv,
}

/// Output format of a per-record listing (`cswitch`, `events`): JSON Lines adds the
/// Timesketch fields `datetime`, `timestamp_desc` and `message` to every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RowFormat {
    Table,
    Json,
    Jsonl,
    Csv,
}

/// The Timesketch fields of one row.
pub struct Timesketch {
    /// ISO-8601 UTC, or None when the time is unknown.
    pub datetime: Option<String>,
    pub timestamp_desc: &'static str,
    pub message: String,
}

/// JSON Lines: each row serialised as an object, plus its Timesketch fields.
pub fn to_jsonl<T: serde::Serialize>(rows: &[T], ts: impl Fn(&T) -> Timesketch) -> String {
    let mut out = String::new();
    for r in rows {
        let mut v = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
        if let serde_json::Value::Object(m) = &mut v {
            let t = ts(r);
            m.insert("datetime".into(), t.datetime.into());
            m.insert("timestamp_desc".into(), t.timestamp_desc.into());
            m.insert("message".into(), t.message.into());
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

/// Does a session with this id and name match a `--session` selector (an id, else a name)?
pub fn selects(id: Option<u64>, name: Option<&str>, sel: Option<&str>) -> bool {
    match sel {
        None => true,
        Some(x) => match x.parse::<u64>() {
            Ok(n) => id == Some(n),
            Err(_) => name == Some(x),
        },
    }
}

/// `0x…` text for a value.
pub fn hex(v: u64) -> String {
    format!("{v:#x}")
}
