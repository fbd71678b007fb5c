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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Format {
    Table,
    Json,
}

/// Output format of a listing command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ListFormat {
    Table,
    Json,
    Csv,
}

/// Output format of a per-record listing (`cswitch`, `events`): JSON Lines adds the
/// Timesketch fields `datetime`, `timestamp_desc` and `message` to every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
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

/// One CSV field, safe for a terminal and a spreadsheet whatever memory put in it: control
/// characters are escaped as `\u{..}` (as in the table); a text that a spreadsheet would take
/// for a formula (first character `=`, `+`, `-` or `@`, or a leading tab or CR), unless it is a
/// plain number, gets a `'` in front (the OWASP "CSV injection" advice); then RFC 4180 quoting
/// (fields with `,`, `"` or line breaks in double quotes, `"` doubled).
pub fn csv_field(s: &str) -> String {
    let mut t: String = s
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    let formula = matches!(s.chars().next(), Some('=' | '+' | '-' | '@' | '\t' | '\r'));
    if formula && s.parse::<f64>().is_err() {
        t.insert(0, '\'');
    }
    if t.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", t.replace('"', "\"\""))
    } else {
        t
    }
}

/// One CSV line: every field through [`csv_field`], comma separated, newline terminated.
pub fn csv_line<S: AsRef<str>>(fields: &[S]) -> String {
    let mut o = fields
        .iter()
        .map(|f| csv_field(f.as_ref()))
        .collect::<Vec<_>>()
        .join(",");
    o.push('\n');
    o
}

/// `0x…` text for a value.
pub fn hex(v: u64) -> String {
    format!("{v:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_inert() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a\x1b[31mb"), "a\\u{1b}[31mb");
        assert_eq!(
            csv_field("line\nbreak\r\x07"),
            "line\\u{a}break\\u{d}\\u{7}"
        );
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("+cmd"), "'+cmd");
        assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_field("-2+3"), "'-2+3");
        assert_eq!(csv_field("\tx"), "'\\u{9}x");
        assert_eq!(csv_field("-12"), "-12");
        assert_eq!(csv_field("-1.5e3"), "-1.5e3");
        assert_eq!(csv_line(&["1", "a,b", "=x"]), "1,\"a,b\",'=x\n");
    }
}
